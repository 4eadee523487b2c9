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
import sys
from dataclasses import dataclass, field

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
    to PyTorch.
    """

    python: str
    platform: str
    packages: dict[str, str | None] = field(default_factory=dict)
    cpu_count: int = 1
    torch_threads: int = 1
    cuda_available: bool = False
    gpu_name: str | None = None
    kernels_available: bool = False
    kernels_reason: str = ""

    def format(self) -> str:
        """The report as aligned lines of text (labels in Chinese, for the book)."""
        lines = [
            f"Python      {self.python}",
            f"平台        {self.platform}",
        ]
        for name, version in self.packages.items():
            lines.append(f"{name:<12}{version if version is not None else '未安装'}")
        lines.append(f"CPU 核数    {self.cpu_count}（PyTorch 使用 {self.torch_threads} 个线程）")
        gpu = self.gpu_name if self.cuda_available else "无（使用 CPU）"
        lines.append(f"GPU         {gpu}")
        kernels = "可以运行" if self.kernels_available else f"不可用：{self.kernels_reason}"
        lines.append(f"Triton 内核 {kernels}")
        return "\n".join(lines)


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
        cuda_available=cuda_available,
        gpu_name=torch.cuda.get_device_name(0) if cuda_available else None,
        kernels_available=kernels_available,
        kernels_reason=kernels_reason,
    )


def report(file=None) -> EnvironmentReport:
    """Print :meth:`EnvironmentReport.format` of :func:`collect` to ``file`` (stdout) and return it."""
    result = collect()
    print(result.format(), file=file if file is not None else sys.stdout)
    return result
