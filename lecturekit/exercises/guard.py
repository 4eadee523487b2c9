"""What a student's answer may not do beyond its own computation, and how the checker keeps
what it needs out of the answer's reach.

- :func:`plain`: the answer's result as plain objects, read once, before the checker computes
  the expected result: a tensor subclass becomes a ``torch.Tensor`` (read with torch's own
  methods, ``__torch_function__`` switched off), a ``str``/``int``/``float`` subclass its plain
  value, a list or tuple subclass a list or tuple, and any other object a :class:`Foreign`
  (its type name, its description and its number, each read once). After it, no code of the
  answer runs while the checker compares or formats.
- :class:`Frozen`: a case's inputs as pickled bytes, which the answer cannot edit; the
  expected result is computed from a fresh copy after the answer returns, so there is nothing
  to read in this process while the answer runs.
- :class:`Snapshot`: the checker's own modules and classes (and torch's, numpy's, the
  builtins), to tell whether the answer replaced a function (``specs.Array._compare = ...``,
  ``torch.softmax = ...``) and to put it back.
- :func:`threads_since`: the threads an answer left running.
"""

from __future__ import annotations

import builtins
import copy
import pickle
import sys
import time
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Foreign", "Frozen", "Snapshot", "plain", "plain_tensor", "thread_ids", "threads_since"]

# how deep plain() follows nested lists and tuples (a list that holds itself stops here)
MAX_DEPTH = 32


@dataclass(frozen=True)
class Foreign:
    """An object of the answer's own type, as read once: ``type_name``, ``text`` (a short
    description), ``number`` (``float(x)`` where its type has ``__float__``) or ``error`` (why
    that failed)."""

    type_name: str
    text: str
    number: float | None = None
    error: str = ""


def plain_tensor(x: Any) -> Any:
    """``x`` (a tensor, maybe of a subclass) as a plain ``torch.Tensor`` sharing its data,
    read without running a subclass's ``__torch_function__`` or overridden methods."""
    import torch

    with torch._C.DisableTorchFunction():
        base = x if type(x) is torch.Tensor else torch.Tensor.as_subclass(x, torch.Tensor)
        return torch.Tensor.detach(base)


def plain(x: Any, depth: int = 0) -> Any:
    """The answer's result ``x`` as plain objects (see the module's docstring); may run the
    answer's ``__repr__``, ``__float__`` and the like, once."""
    kind = type(x)
    if kind in (bool, int, float, complex, str, type(None)):
        return x
    torch, numpy = sys.modules.get("torch"), sys.modules.get("numpy")
    if torch is not None and issubclass(kind, torch.Tensor):
        return plain_tensor(x)
    if numpy is not None and issubclass(kind, (numpy.ndarray, numpy.generic)):
        if kind.__module__ == "numpy":
            return x.copy() if issubclass(kind, numpy.ndarray) else x
        if issubclass(kind, numpy.ndarray):
            return numpy.ndarray.copy(numpy.ndarray.view(x, numpy.ndarray))
    for base in (str, int, float, complex):
        if issubclass(kind, base):
            return getattr(base, f"__{base.__name__}__")(x)
    if issubclass(kind, (list, tuple)) and depth < MAX_DEPTH:
        container = list if issubclass(kind, list) else tuple
        n = container.__len__(x)
        items = [plain(container.__getitem__(x, i), depth + 1) for i in range(n)]
        return items if container is list else tuple(items)
    return _foreign(x)


def _foreign(x: Any) -> Foreign:
    from lecturekit.exercises.specs import clip, short

    name = str.__str__(type(x).__name__)
    number, error = None, ""
    if hasattr(type(x), "__float__"):
        try:
            number = float.__float__(float(x))
        except (Exception, SystemExit) as failure:
            error = f"{str.__str__(type(failure).__name__)}: {clip(_message(failure), 200)}"
    return Foreign(name, short(x), number, error)


def _message(error: BaseException) -> str:
    try:
        return str.__str__(str(error))
    except Exception:
        return "（无法显示消息）"


class Frozen:
    """A case's ``(args, kwargs)`` kept as pickled bytes (immutable), so that nothing the
    answer does changes the inputs the expected result is computed from; ``thaw()`` returns a
    fresh copy. Inputs that cannot be pickled are deep-copied instead."""

    def __init__(self, args: tuple, kwargs: dict[str, Any]) -> None:
        try:
            self._blob: bytes | None = pickle.dumps((args, kwargs))
            self._copy: Any = None
        except Exception:
            self._blob, self._copy = None, (args, kwargs)

    def thaw(self) -> tuple[tuple, dict[str, Any]]:
        if self._blob is not None:
            return pickle.loads(self._blob)
        return copy.deepcopy(self._copy)


class Snapshot:
    """The attributes of ``targets`` (modules, classes, instances) and the code of their
    functions, to compare after the answer ran. A module may gain attributes (lazy imports);
    a class or an instance may not (a new method would override an inherited one).

    ``changed`` and ``restore`` are this snapshot's own copies of the comparison, made from
    its code and with the builtins as they were when the snapshot was taken: an answer that
    replaces ``Snapshot.changed`` (or its ``__code__``, or ``builtins.vars``) afterwards
    cannot change how this snapshot is checked, and the replacement is itself reported.
    """

    def __init__(self, targets: Iterable[Any]) -> None:
        entries = [(target, dict(target.__dict__)) for target in targets]
        code = {
            id(value): (value, _code_of(value))
            for _, attributes in entries
            for value in attributes.values()
            if isinstance(value, types.FunctionType)
        }
        changed, restore = _frozen(_changed), _frozen(_restore)
        self.changed: Callable[[], list[str]] = lambda: changed(entries, code)
        self.restore: Callable[[], None] = lambda: restore(entries, code)


def _frozen(function: Any) -> types.FunctionType:
    """A new function object with ``function``'s code, this module's globals and the builtins
    copied as they are now (a later patch of either does not reach it)."""
    names = dict(globals())
    names["__builtins__"] = dict(builtins.__dict__)
    return types.FunctionType(function.__code__, names, function.__name__)


def _changed(entries: list[tuple[Any, dict[str, Any]]], code: dict[int, Any]) -> list[str]:
    """Names (``module.attribute``) that were replaced, removed or added."""
    found = []
    for target, before in entries:
        now, name = target.__dict__, getattr(target, "__name__", type(target).__name__)
        keys = set(before) | (set() if isinstance(target, types.ModuleType) else set(now))
        found += [
            f"{name}.{key}" for key in sorted(keys, key=str) if now.get(key) is not before.get(key)
        ]
    found += [
        f"{value.__module__}.{value.__qualname__}.__code__"
        for value, (was, defaults, kwdefaults) in code.values()
        if value.__code__ is not was
        or value.__defaults__ is not defaults
        or value.__kwdefaults__ is not kwdefaults
    ]
    return found


def _restore(entries: list[tuple[Any, dict[str, Any]]], code: dict[int, Any]) -> None:
    """Put back what ``_changed`` reports (the in-process check shares the reader's modules)."""
    for target, before in entries:
        now = target.__dict__
        plain_object = not isinstance(target, (type, types.ModuleType))
        for key in set(now) - set(before):
            if not isinstance(target, types.ModuleType):
                (object.__delattr__ if plain_object else delattr)(target, key)
        for key, value in before.items():
            if now.get(key) is not value:
                (object.__setattr__ if plain_object else setattr)(target, key, value)
    for value, (was, defaults, kwdefaults) in code.values():
        value.__code__, value.__defaults__, value.__kwdefaults__ = was, defaults, kwdefaults


def _code_of(function: types.FunctionType) -> tuple[Any, Any, Any]:
    return function.__code__, function.__defaults__, function.__kwdefaults__


def thread_ids() -> set[int]:
    """Identifiers of every thread of this process that runs Python code (``_thread`` ones
    included)."""
    return set(sys._current_frames())


def threads_since(before: set[int], wait: float = 0.5) -> int:
    """How many threads started after ``thread_ids()`` returned ``before`` still run, after
    waiting up to ``wait`` seconds for them to end."""
    deadline = time.monotonic() + wait
    while True:
        left = thread_ids() - before
        if not left or time.monotonic() >= deadline:
            return len(left)
        time.sleep(0.01)
