"""Lazy attribute access for lecturekit's packages, derived from the source tree.

Every package of lecturekit exposes its submodules and the public names of its modules as
attributes, resolved on first use (PEP 562), so ``import lecturekit`` stays cheap (no torch).
Nothing here keeps a list of names by hand:

* a package's **submodules** are what ``pkgutil.iter_modules`` finds in its folder (names
  starting with ``_`` are private and left out);
* a package's **exports** are the union of its modules' ``__all__`` (read from the source
  with ``ast``, without importing the module), plus the exports of the subpackages it lifts.

A name exported by two modules of one package is an error (it would be ambiguous); the
package tests check every package this way.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["attach", "static_all", "submodules", "exports"]


def static_all(path: Path) -> list[str]:
    """The literal ``__all__`` list of the module at ``path`` (``[]`` if it has none)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return [str(name) for name in ast.literal_eval(node.value)]
    return []


@cache
def submodules(package: str) -> tuple[str, ...]:
    """Public submodule names of ``package`` (imports ``package`` itself, nothing below it)."""
    module = importlib.import_module(package)
    found = pkgutil.iter_modules(module.__path__)
    return tuple(sorted(m.name for m in found if not m.name.startswith("_")))


@cache
def exports(package: str, lift: tuple[str, ...] = ()) -> dict[str, str]:
    """``{public name: module or subpackage defining it}`` for ``package``.

    Modules contribute their ``__all__``; the subpackages named in ``lift`` contribute their
    own exports (resolved through the subpackage, so it stays lazy too).
    """
    module = importlib.import_module(package)
    folder = Path(module.__path__[0])
    owner: dict[str, str] = {}

    def add(names: Iterable[str], where: str) -> None:
        for name in names:
            if name in owner and owner[name] != where:
                raise ImportError(
                    f"{package}: {name!r} is exported by both {owner[name]} and {where}; "
                    "rename one of them"
                )
            owner[name] = where

    for name in submodules(package):
        if (folder / f"{name}.py").is_file():
            add(static_all(folder / f"{name}.py"), f"{package}.{name}")
    for name in lift:
        add(exports(f"{package}.{name}"), f"{package}.{name}")
    return owner


def attach(
    package: str, lift: tuple[str, ...] = (), *, names: bool = True
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: submodules and exports on first access.

    Use in a package's ``__init__``::

        __getattr__, __dir__ = attach(__name__)

    ``__all__`` is served by ``__getattr__`` too (the sorted exports). With
    ``names=False`` only the submodules are attached (for a package whose ``__init__``
    defines its public names itself and keeps its own ``__all__``).
    """
    if not names:
        return _submodule_access(package)

    def __getattr__(name: str) -> Any:
        module: ModuleType = importlib.import_module(package)
        if name == "__all__":
            value: Any = sorted(exports(package, lift))
        elif name in submodules(package):
            return importlib.import_module(f"{package}.{name}")
        elif name in exports(package, lift):
            value = getattr(importlib.import_module(exports(package, lift)[name]), name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        module = importlib.import_module(package)
        own = {n for n in vars(module) if not n.startswith("_")}
        return sorted(own | set(submodules(package)) | set(exports(package, lift)))

    return __getattr__, __dir__


def _submodule_access(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    def __getattr__(name: str) -> Any:
        if name in submodules(package):
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        module = importlib.import_module(package)
        own = {n for n in vars(module) if not n.startswith("_")}
        return sorted(own | set(submodules(package)))

    return __getattr__, __dir__
