"""The package's layout rules, read from the source with ``ast`` (nothing is imported).

* One direction: the course's library (``model``, ``decoding``, ``training``, ``data``,
  ``pretrained``, ``book``) never imports the code built on it (``chapters``, ``capstone``,
  ``lab``), neither at the top of a module nor inside a function.
* Imports are visible: an import between two top-level folders of lecturekit sits at the top of
  its module, except a few that must wait until a function runs (an import cycle, or a module
  that stays free of torch or triton until used); at most ``MAX_BODY_IMPORTS`` of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "lecturekit"

LIBRARY = ("model", "decoding", "training", "data", "pretrained", "book")
BUILT_ON_IT = ("chapters", "capstone", "lab")
MAX_BODY_IMPORTS = 15


def _module_name(path: Path) -> list[str]:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(tree: ast.AST, module: list[str], is_package: bool) -> list[tuple[ast.AST, str]]:
    """``(node, imported module)`` for every import in ``tree`` (the module named
    ``module``), relative ones resolved; ``from a import b`` yields ``a.b`` (b may be a
    submodule), and ``importlib.import_module("...")`` with a literal name counts too."""
    package = module if is_package else module[:-1]
    found: list[tuple[ast.AST, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                stem = package[: len(package) - node.level + 1]
                base = ".".join(stem + ([node.module] if node.module else []))
            found += [(node, f"{base}.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node, node.args[0].value))
    return found


def _folder(dotted: str) -> str | None:
    """The top-level folder of lecturekit that ``dotted`` names (``"(top)"`` for the package
    itself and its top-level modules), or None outside lecturekit."""
    parts = dotted.split(".")
    if parts[0] != "lecturekit":
        return None
    if len(parts) > 1 and (ROOT / parts[1]).is_dir():
        return parts[1]
    return "(top)"


def _sources() -> list[tuple[Path, list[str], str]]:
    return [
        (path, _module_name(path), path.read_text(encoding="utf-8"))
        for path in sorted(ROOT.rglob("*.py"))
        if "__pycache__" not in path.parts
    ]


def _forbidden(path: Path, module: list[str], source: str) -> list[str]:
    """The imports of ``module`` that break the one-direction rule."""
    if _folder(".".join(module)) not in LIBRARY:
        return []
    return [
        f"{path.relative_to(ROOT.parent)}:{node.lineno} imports {target}"
        for node, target in _imports(ast.parse(source), module, path.name == "__init__.py")
        if _folder(target) in BUILT_ON_IT
    ]


def _body_imports(path: Path, module: list[str], source: str) -> list[str]:
    """The import statements inside function bodies of ``module`` that cross from its
    top-level folder into another one (each statement counted once)."""
    own = _folder(".".join(module))
    tree = ast.parse(source)
    in_function = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for sub in ast.walk(node)
        if sub is not node
    }
    crossing = {
        node.lineno
        for node, target in _imports(tree, module, path.name == "__init__.py")
        if isinstance(node, ast.Import | ast.ImportFrom)
        and id(node) in in_function
        and _folder(target) not in (None, own)
    }
    return [f"{path.relative_to(ROOT.parent)}:{line}" for line in sorted(crossing)]


def test_the_library_never_imports_chapters_capstone_or_lab() -> None:
    broken = [line for source in _sources() for line in _forbidden(*source)]
    assert not broken, "\n".join(broken)


def test_few_imports_between_folders_hide_in_function_bodies() -> None:
    hidden = [line for source in _sources() for line in _body_imports(*source)]
    assert len(hidden) <= MAX_BODY_IMPORTS, "\n".join(hidden)


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        (["lecturekit", "model", "x"], "from lecturekit.chapters import ch04_nat", 1),
        (["lecturekit", "pretrained", "x"], "def f():\n    from ..capstone import models", 1),
        (["lecturekit", "book"], "from .. import lab", 1),
        (
            ["lecturekit", "data", "x"],
            "import importlib\nimportlib.import_module('lecturekit.lab')",
            1,
        ),
        (["lecturekit", "training", "x"], "from lecturekit.model import layers", 0),
        (["lecturekit", "capstone", "x"], "from lecturekit.chapters import ch04_nat", 0),
    ],
)
def test_the_rule_sees_every_form_of_import(where, source, expected) -> None:
    is_package = len(where) == 2
    path = ROOT.joinpath(*where[1:], "__init__.py") if is_package else ROOT.joinpath(*where[1:])
    assert len(_forbidden(path.with_suffix(".py"), where, source)) == expected


def test_body_imports_are_counted_per_statement_across_folders_only() -> None:
    source = (
        "from lecturekit.model import masks\n"  # top of the module: visible
        "def f():\n"
        "    from lecturekit.decoding import greedy, sample\n"  # one statement, counted once
        "    from lecturekit.model.layers import Encoder\n"  # its own folder: not counted
        "    import torch\n"  # outside lecturekit: not counted
    )
    path = ROOT / "model" / "x.py"
    assert _body_imports(path, ["lecturekit", "model", "x"], source) == ["lecturekit/model/x.py:3"]
