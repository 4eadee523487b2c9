"""Packaging of lecturekit: cheap silent import, lazy exports, a buildable wheel, and
lecturekit.book.environment's report checked against independent sources."""

from __future__ import annotations

import ast
import html
import importlib
import importlib.metadata
import importlib.util
import io
import json
import os
import pkgutil
import platform
import re
import subprocess
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

import pytest

import lecturekit
from lecturekit import _lazy
from lecturekit.book import environment

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


def test_listing_names_and_torch_free_names_do_not_import_torch() -> None:
    probe = (
        "import sys, lecturekit\n"
        "names = lecturekit.__all__, dir(lecturekit), dir(lecturekit.model)\n"
        "lecturekit.make_task, lecturekit.data.make_task, lecturekit.chapters.ch04_nat\n"
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_version_matches_metadata_and_pyproject() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^version = "([^"]+)"$', pyproject, flags=re.MULTILINE)
    assert declared is not None, "pyproject.toml declares no version"
    assert lecturekit.__version__ == declared.group(1)
    assert importlib.metadata.version("lecturekit") == lecturekit.__version__


def _packages() -> list[str]:
    """Every package of lecturekit, found on disk (not from a list)."""
    found = pkgutil.walk_packages(lecturekit.__path__, prefix="lecturekit.")
    return ["lecturekit"] + sorted(m.name for m in found if m.ispkg)


def _modules(package: str) -> list[str]:
    module = importlib.import_module(package)
    return sorted(
        m.name
        for m in pkgutil.iter_modules(module.__path__)
        if not m.name.startswith("_") and m.name != "__main__"
    )


@pytest.mark.parametrize("package", _packages())
def test_every_submodule_is_reachable_by_attribute(package: str) -> None:
    module = importlib.import_module(package)
    lazy = vars(module).get("__getattr__")
    assert lazy is not None, f"{package} resolves no submodule by attribute access"
    for name in _modules(package):
        # call the package's own resolver: an attribute set by an earlier import cannot hide
        # a submodule it does not know
        assert lazy(name) is importlib.import_module(f"{package}.{name}"), f"{package}.{name}"
        assert name in dir(module)


@pytest.mark.parametrize("package", _packages())
def test_every_public_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = module.__all__
    assert names, f"{package} exports nothing"
    for name in names:
        value = getattr(module, name)
        origin = getattr(value, "__module__", None) or "lecturekit"
        assert origin.startswith(("lecturekit", "typing")), f"{package}.{name} from {origin}"
        assert name in dir(module)
    clash = set(names) & set(_modules(package))
    assert not clash, f"{package}: names that are also submodules: {sorted(clash)}"


@pytest.mark.parametrize(
    "package",
    [p for p in _packages() if p not in ("lecturekit.exercises", "lecturekit.kernels")],
)
def test_module_all_lists_what_the_module_defines(package: str) -> None:
    """The static __all__ the lazy loader reads is the module's real __all__, and complete."""
    for name in _modules(package):
        path = Path(importlib.import_module(package).__path__[0]) / f"{name}.py"
        if not path.is_file():
            continue  # a subpackage: checked on its own
        module = importlib.import_module(f"{package}.{name}")
        assert _lazy.static_all(path) == list(module.__all__), f"{package}.{name}"
        for public in module.__all__:
            assert hasattr(module, public), f"{package}.{name}.{public}"


def _init_file(package: str) -> Path:
    return Path(importlib.util.find_spec(package).origin)


def _serves_names(package: str) -> bool:
    """Whether ``package``'s ``__getattr__`` serves public names (``attach`` with names); a
    package that writes its own ``__all__`` defines its names itself."""
    return not _lazy.static_all(_init_file(package))


def _lazy_names(package: str) -> dict[str, str]:
    """``{name: module that defines it}`` for every submodule and name ``package`` serves
    lazily (a lifted name is followed to its module, not its subpackage)."""
    lift = getattr(importlib.import_module(package), "_LIFT", ())
    names = dict.fromkeys(_lazy.submodules(package), package)
    for name, owner in _lazy.exports(package, lift).items():
        while importlib.util.find_spec(owner).submodule_search_locations is not None:
            owner = _lazy.exports(owner)[name]  # a lifted subpackage: its defining module
        names[name] = owner
    return names


def _static_names(package: str) -> dict[str, str]:
    """``{name: module}`` imported by the ``if TYPE_CHECKING:`` block of ``package``'s
    ``__init__`` (what editors and mypy see instead of the lazy ``__getattr__``)."""
    tree = ast.parse(_init_file(package).read_text(encoding="utf-8"))
    names: dict[str, str] = {}
    for block in tree.body:
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING":
            for node in block.body:
                assert isinstance(node, ast.ImportFrom) and node.module, ast.unparse(node)
                for alias in node.names:
                    # "name as name": an explicit re-export, also under mypy --strict
                    assert alias.asname == alias.name, f"{package}: write {alias.name} as itself"
                    names[alias.name] = node.module
    return names


def _type_checking_block(names: dict[str, str]) -> str:
    by_module: dict[str, list[str]] = defaultdict(list)
    for name, module in names.items():
        by_module[module].append(name)
    lines = ["if TYPE_CHECKING:"]
    for module, found in sorted(by_module.items()):
        lines += [f"    from {module} import {name} as {name}" for name in sorted(found)]
    return "\n".join(lines)


@pytest.mark.parametrize("package", [p for p in _packages() if _serves_names(p)])
def test_static_imports_list_every_lazy_name(package: str) -> None:
    """``from lecturekit import Transformer`` goes through ``__getattr__``, which editors and
    type checkers cannot follow; each such package's ``if TYPE_CHECKING:`` block imports the
    same names from their modules, and this test keeps the two lists equal."""
    expected = _lazy_names(package)
    assert _static_names(package) == expected, (
        f"the TYPE_CHECKING block of {_init_file(package)} is stale; replace it with this "
        f"block (ruff check --fix sorts it):\n{_type_checking_block(expected)}"
    )


def test_top_level_convenience_names() -> None:
    from lecturekit.decoding.search import greedy
    from lecturekit.model.transformer import Transformer
    from lecturekit.training.loop import fit

    assert lecturekit.Transformer is Transformer
    assert lecturekit.fit is fit and lecturekit.greedy is greedy
    assert {"Transformer", "TransformerConfig", "fit", "greedy", "make_task"} <= set(
        lecturekit.__all__
    )


def test_a_name_exported_twice_is_an_error(tmp_path: Path, monkeypatch) -> None:
    package = tmp_path / "twice"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text('__all__ = ["f"]\ndef f(): pass\n')
    (package / "b.py").write_text('__all__ = ["f"]\ndef f(): pass\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="exported by both"):
        _lazy.exports("twice")


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
    on_disk = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "lecturekit").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert on_disk <= names, sorted(on_disk - names)  # every module of every subpackage
    data_files = {  # what the modules read at run time (package-data in pyproject.toml)
        str(path.relative_to(ROOT))
        for path in (ROOT / "lecturekit").rglob("*")
        if path.is_file() and path.suffix != ".py" and "__pycache__" not in path.parts
    }
    assert "lecturekit/data/pinyin_reading_check.tsv" in data_files
    assert data_files <= names, sorted(data_files - names)
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


def test_report_without_a_file_prints_the_text_outside_a_notebook(capsys) -> None:
    result = environment.report()
    assert result.format() in capsys.readouterr().out


def test_a_notebook_shows_the_report_as_a_table_of_its_rows() -> None:
    from IPython.core.formatters import DisplayFormatter

    report = environment.collect()
    bundle, _ = DisplayFormatter().format(report)
    assert bundle["text/plain"] == report.format()
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", bundle["text/html"])
    assert cells == [html.escape(text) for row in report.rows() for text in row]
    assert ("平台", report.platform) in report.rows()
    assert ("CPU 核数（逻辑核）", str(report.cpu_count)) in report.rows()
    threads = f"{report.torch_threads}（{report.threads_source()}）"
    assert ("PyTorch 线程数", threads) in report.rows()


@pytest.mark.parametrize(
    ("variable", "threads", "expected"),
    [
        (None, 4, "没有设置环境变量 OMP_NUM_THREADS"),
        ("1", 1, "由环境变量 OMP_NUM_THREADS=1 设定"),
        ("1", 3, "环境变量 OMP_NUM_THREADS=1，但程序里用 torch.set_num_threads 改过"),
    ],
)
def test_threads_source_says_where_the_thread_count_comes_from(
    variable: str | None, threads: int, expected: str
) -> None:
    report = environment.EnvironmentReport(
        python="3.11", platform="Linux", torch_threads=threads, omp_num_threads=variable
    )
    assert report.threads_source() == expected
    assert ("PyTorch 线程数", f"{threads}（{expected}）") in report.rows()


def test_collect_reads_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert environment.collect().omp_num_threads == "7"
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert environment.collect().omp_num_threads is None


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


def test_readme_package_map_matches_the_tree() -> None:
    """Every folder of lecturekit has a row in the README's package map; every module of a
    folder is named in its row; every name a row quotes is a module or a public name of that
    folder (no row names a module that has moved or gone)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Package map", 1)[1].split("\n## ", 1)[0]
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(\w+)/` \| (.*?) \|", section, flags=re.MULTILINE)
    }
    folders = {m.name for m in pkgutil.iter_modules(lecturekit.__path__) if m.ispkg}
    assert set(rows) == folders
    for folder, row in rows.items():
        package = f"lecturekit.{folder}"
        named = set(re.findall(r"`(\w+)`", row))
        modules = set(_modules(package))
        assert modules <= named, f"{folder}/ modules missing from its row: {modules - named}"
        public = set(importlib.import_module(package).__all__)
        assert named <= modules | public, f"{folder}/ row names {named - modules - public}"


BOOK_EXTRA_BLOCKED = """
import sys
for name in ("sphinx", "playwright", "bs4"):
    sys.modules[name] = None  # any import of the book extra now fails
import pytest
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:xdist", {path!r}]))
"""


def test_mask_tests_run_without_the_book_extra() -> None:
    """tests/conftest.py and tests/_tiny_model.py import nothing from the ``book`` extra, so
    ``pytest tests/test_masks.py`` runs (and reports) where sphinx, playwright, bs4 are absent."""
    code = BOOK_EXTRA_BLOCKED.format(path=str(ROOT / "tests" / "test_masks.py"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout), done.stdout[-2000:]
