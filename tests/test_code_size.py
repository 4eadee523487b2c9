"""The size limits of the code style: modules under ~500 lines and functions under ~60 lines
of code, so that each reads in one sitting. The Triton kernels are exempt (a kernel is one
long function by nature)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lecturekit"
MAX_MODULE_LINES = 500
MAX_FUNCTION_CODE_LINES = 60
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "kernels" not in p.relative_to(PACKAGE).parts)


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def function_code_lines(source: str) -> dict[str, int]:
    """``{qualified name: lines of code}`` of every function in ``source`` (blank lines,
    comment lines and docstrings not counted)."""
    tree = ast.parse(source)
    text, docstrings = source.splitlines(), _docstring_lines(tree)
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    sizes[name] = sum(
                        1
                        for i in range(child.lineno, child.end_lineno + 1)
                        if text[i - 1].strip()
                        and not text[i - 1].strip().startswith("#")
                        and i not in docstrings
                    )
                visit(child, f"{name}.")

    visit(tree, "")
    return sizes


def test_function_code_lines_counts_code_only() -> None:
    source = 'def f():\n    """Doc\n    string."""\n\n    # comment\n    x = 1\n    return x\n'
    assert function_code_lines(source) == {"f": 3}
    nested = "class A:\n    def g(self):\n        def h():\n            pass\n        return h\n"
    assert function_code_lines(nested) == {"A.g": 4, "A.g.h": 2}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_and_function_sizes(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    lines = len(source.splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.name} has {lines} lines: split it by idea"
    long = {
        name: size
        for name, size in function_code_lines(source).items()
        if size > MAX_FUNCTION_CODE_LINES
    }
    assert not long, f"{path.name}: functions over {MAX_FUNCTION_CODE_LINES} lines of code: {long}"
