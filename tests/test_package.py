"""Packaging of lecturekit: cheap silent import, lazy exports, a buildable wheel, and
lecturekit.environment's report checked against independent sources."""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import platform
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import lecturekit
from lecturekit import environment

ROOT = Path(__file__).resolve().parents[1]

IMPORT_PROBE = """
import json, sys, time
start = time.perf_counter()
import lecturekit
elapsed = time.perf_counter() - start
print(json.dumps({"elapsed": elapsed, "torch": "torch" in sys.modules,
                  "triton": "triton" in sys.modules}))
"""


def test_import_is_silent_fast_and_lazy() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.stdout = open('/dev/null', 'w')\n{IMPORT_PROBE}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout == "" and probe.stderr == "", "importing lecturekit printed something"
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, check=True
    )
    measured = json.loads(result.stdout)
    assert not measured["torch"], "import lecturekit imported torch eagerly"
    assert not measured["triton"], "import lecturekit imported triton eagerly"
    assert measured["elapsed"] < 1.0, f"import lecturekit took {measured['elapsed']:.2f} s"


def test_version_matches_metadata_and_pyproject() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^version = "([^"]+)"$', pyproject, flags=re.MULTILINE)
    assert declared is not None, "pyproject.toml declares no version"
    assert lecturekit.__version__ == declared.group(1)
    assert importlib.metadata.version("lecturekit") == lecturekit.__version__


def test_every_export_resolves() -> None:
    for name, module in lecturekit._EXPORTS.items():
        value = getattr(lecturekit, name)
        assert value.__module__.startswith("lecturekit"), (
            f"lecturekit.{name} should come from {module}, got {value.__module__}"
        )
    assert set(lecturekit._EXPORTS) <= set(dir(lecturekit))


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = lecturekit.no_such_name


@pytest.mark.slow
def test_wheel_builds_and_holds_the_package(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("lecturekit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "lecturekit/__init__.py" in names
    assert "lecturekit/environment.py" in names
    assert not any(n.startswith(("tests/", "notebooks/", "book/")) for n in names), sorted(names)
    metadata = (
        zipfile.ZipFile(wheel)
        .read(next(n for n in names if n.endswith(".dist-info/METADATA")))
        .decode()
    )
    assert "Requires-Python: >=3.10" in metadata
    assert "Provides-Extra: gpu" in metadata and "Provides-Extra: book" in metadata


def test_environment_report_matches_independent_sources() -> None:
    import torch

    report = environment.collect()
    assert report.python == platform.python_version()
    assert report.packages["torch"] == importlib.metadata.version("torch")
    assert report.packages["lecturekit"] == lecturekit.__version__
    assert list(report.packages) == list(environment.PACKAGES)
    assert report.cpu_count == os.cpu_count()
    assert report.torch_threads == torch.get_num_threads()
    assert report.cuda_available == torch.cuda.is_available()
    assert (report.gpu_name is not None) == report.cuda_available
    if not report.cuda_available:
        assert not report.kernels_available, "Triton kernels cannot run without a CUDA GPU"
    if not report.kernels_available:
        assert report.kernels_reason


def test_environment_format_lists_every_package() -> None:
    report = environment.collect()
    text = report.format()
    for name, version in report.packages.items():
        assert name in text
        assert (version if version is not None else "未安装") in text
    assert ("可以运行" in text) == report.kernels_available


def test_report_prints_the_formatted_report() -> None:
    buffer = io.StringIO()
    result = environment.report(file=buffer)
    assert buffer.getvalue() == result.format() + "\n"


def test_package_version() -> None:
    assert environment.package_version("pytest") == importlib.metadata.version("pytest")
    assert environment.package_version("no-such-distribution-lecturekit") is None
    with pytest.raises(TypeError, match="name"):
        environment.package_version(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name"):
        environment.package_version("")


def test_kernels_status_when_the_kernels_module_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(environment.importlib, "import_module", missing)
    available, reason = environment._kernels_status(cuda_available=False)
    assert not available
    assert "lecturekit.kernels" in reason


def test_kernels_status_does_not_hide_unrelated_import_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(name: str) -> None:
        raise ModuleNotFoundError("No module named 'numpy_typo'", name="numpy_typo")

    monkeypatch.setattr(environment.importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError, match="numpy_typo"):
        environment._kernels_status(cuda_available=False)
