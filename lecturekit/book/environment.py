"""Environment report for ``notebooks/00_setup.ipynb``: versions, CPU/GPU and Triton kernels.

Everything is read without side effects: package versions come from installed metadata, so a
missing optional package (triton, or ``lecturekit.kernels`` before it exists) is reported as
missing rather than raising.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
from dataclasses import dataclass, field
from typing import Any, TextIO

from lecturekit.book.tables import Table

__all__ = ["PACKAGES", "EnvironmentReport", "package_version", "collect", "report"]

# Packages whose versions the report lists, in this order.
PACKAGES: tuple[str, ...] = (
    "lecturekit",
    "torch",
    "numpy",
    "matplotlib",
    "ipywidgets",
    "tqdm",
    "triton",
)


@dataclass(frozen=True)
class EnvironmentReport:
    """What a chapter notebook can use on this machine.

    ``packages`` maps each name of :data:`PACKAGES` to its installed version (``None`` when it
    is not installed). ``kernels_available`` says whether ``lecturekit``'s Triton kernels run
    here (they need a CUDA GPU); when not, ``kernels_reason`` says why and the model falls back
    to PyTorch. ``omp_num_threads`` is the environment variable ``OMP_NUM_THREADS`` (``None``
    when unset), which sets PyTorch's thread count ``torch_threads`` when the process starts.
    """

    python: str
    platform: str
    packages: dict[str, str | None] = field(default_factory=dict)
    cpu_count: int = 1
    torch_threads: int = 1
    omp_num_threads: str | None = None
    cuda_available: bool = False
    gpu_name: str | None = None
    kernels_available: bool = False
    kernels_reason: str = ""

    def rows(self) -> list[tuple[str, str]]:
        """The report as (label, value) pairs, labels in Chinese, in the order shown."""
        rows = [("Python", self.python), ("平台", self.platform)]
        rows += [(name, v if v is not None else "未安装") for name, v in self.packages.items()]
        rows.append(("CPU 核数（逻辑核）", f"{self.cpu_count}"))
        rows.append(("PyTorch 线程数", f"{self.torch_threads}（{self.threads_source()}）"))
        rows.append(("GPU", self.gpu_name if self.cuda_available else "无（使用 CPU）"))
        kernels = "可以运行" if self.kernels_available else f"不可用：{self.kernels_reason}"
        rows.append(("Triton 内核", kernels))
        return rows

    def threads_source(self) -> str:
        """Where :attr:`torch_threads` comes from, in Chinese: the variable, or not set."""
        variable = self.omp_num_threads
        if variable is None:
            return "没有设置环境变量 OMP_NUM_THREADS"
        if variable.strip() == str(self.torch_threads):
            return f"由环境变量 OMP_NUM_THREADS={variable.strip()} 设定"
        return f"环境变量 OMP_NUM_THREADS={variable}，但程序里用 torch.set_num_threads 改过"

    def format(self) -> str:
        """The report as lines of text for a terminal: label, a space, value."""
        return "\n".join(f"{label} {value}" for label, value in self.rows())

    def __str__(self) -> str:
        return self.format()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's plain-text form (``text/plain``): :meth:`format`."""
        printer.text(self.format())

    def _repr_html_(self) -> str:
        """The report as a two-column HTML table (what Jupyter, Colab and the book show)."""
        return Table(["项目", "这台机器"], self.rows(), align="ll")._repr_html_()


def package_version(name: str) -> str | None:
    """Installed version of distribution ``name``, or ``None`` if it is not installed."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _kernels_status(cuda_available: bool) -> tuple[bool, str]:
    try:
        kernels = importlib.import_module("lecturekit.kernels")
    except ModuleNotFoundError as error:
        if error.name not in {"lecturekit.kernels", "triton"}:
            raise
        return False, f"缺少模块 {error.name}，模型将使用 PyTorch 实现"
    if kernels.available():
        return True, ""
    if not cuda_available:
        return False, "没有 CUDA GPU，模型将使用 PyTorch 实现"
    return False, "Triton 无法在这块 GPU 上编译内核，模型将使用 PyTorch 实现"


def collect() -> EnvironmentReport:
    """Gather the :class:`EnvironmentReport` of the running interpreter (imports torch)."""
    import torch

    cuda_available = torch.cuda.is_available()
    kernels_available, kernels_reason = _kernels_status(cuda_available)
    return EnvironmentReport(
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.machine()}",
        packages={name: package_version(name) for name in PACKAGES},
        cpu_count=os.cpu_count() or 1,
        torch_threads=torch.get_num_threads(),
        omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
        cuda_available=cuda_available,
        gpu_name=torch.cuda.get_device_name(0) if cuda_available else None,
        kernels_available=kernels_available,
        kernels_reason=kernels_reason,
    )


def report(file: TextIO | None = None) -> EnvironmentReport:
    """Show the :class:`EnvironmentReport` of :func:`collect` and return it.

    In a notebook it is displayed as a table; elsewhere, or when ``file`` is given, its
    :meth:`~EnvironmentReport.format` is printed to ``file`` (stdout by default).
    """
    result = collect()
    if file is None:
        from IPython.display import display

        display(result)  # outside IPython this prints str(result), the formatted text
    else:
        print(result.format(), file=file)
    return result
