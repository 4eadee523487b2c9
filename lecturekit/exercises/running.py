"""Run a student's function safely: a time limit, no exit, no forbidden calls, inputs untouched.

``call(answer, args, kwargs, time_limit=..., forbidden=...)`` runs the answer in a worker
thread and waits at most ``time_limit`` seconds. Why a thread: a signal-based alarm
(``signal.alarm``) only works in the main thread of the main interpreter, which is not where
every Jupyter front end or test runner calls us; a subprocess would need the answer to be
picklable (a function defined in a notebook is not) or a ``fork`` of a process that holds
torch's thread pools. A thread needs neither. When the time is up, the worker is stopped by
raising an exception inside it (``PyThreadState_SetAsyncExc``), which interrupts any Python
loop at its next bytecode; code stuck inside one long C call (a huge matrix product, a
``time.sleep``) cannot be interrupted, so the checker stops waiting for it, reports the time
limit and leaves the thread to finish in the background as a daemon.

Whatever the answer raises, ``SystemExit`` (``sys.exit()``, ``exit()``) included, is caught in
the worker and returned. Forbidden functions are detected with a profile hook on the worker
thread (``sys.setprofile`` is per thread), which sees Python and C function calls alike, however
the student imported or renamed the function.
"""

from __future__ import annotations

import copy
import ctypes
import importlib
import inspect
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Outcome", "call", "resolve", "unchanged"]


class TimeLimitExceeded(BaseException):
    """Raised inside a worker thread whose time is up (BaseException: ``except Exception``
    in the student's code does not swallow it)."""


@dataclass
class Outcome:
    """What happened when the answer was called.

    ``status``: "returned" (``value`` holds the result), "raised" (``error``) or "timeout".
    ``forbidden``: the display name of the first forbidden function it called, if any.
    """

    status: str
    value: Any = None
    error: BaseException | None = None
    forbidden: str | None = None


def resolve(dotted: str) -> Any:
    """The object a dotted name such as ``"torch.nn.functional.layer_norm"`` refers to."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(f"cannot resolve {dotted!r}")


def call(
    answer: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    time_limit: float,
    forbidden: Sequence[str] = (),
) -> Outcome:
    """Call ``answer(*args, **kwargs)`` in a worker thread, waiting at most ``time_limit`` s."""
    watch = _forbidden_watch(forbidden)
    box = Outcome(status="timeout")
    finished = threading.Event()

    def work() -> None:
        try:
            try:
                if watch is not None:
                    sys.setprofile(watch.hook(box))
                value = answer(*args, **kwargs)
            except BaseException as error:  # SystemExit and the time limit included
                box.status, box.error = "raised", error
            else:
                box.status, box.value = "returned", value
            finally:
                sys.setprofile(None)
                finished.set()
        except BaseException:  # a late TimeLimitExceeded landing in the bookkeeping above
            finished.set()

    worker = threading.Thread(target=work, name="lecturekit-exercise-check", daemon=True)
    worker.start()
    try:
        finished.wait(time_limit)
    except BaseException:  # KeyboardInterrupt: stop the worker too, then let it propagate
        _stop(worker, finished)
        raise
    if not finished.is_set():
        _stop(worker, finished)
        if not finished.is_set() or isinstance(box.error, TimeLimitExceeded):
            return Outcome(status="timeout", forbidden=box.forbidden)
    return box


def _stop(worker: threading.Thread, finished: threading.Event) -> None:
    """Raise TimeLimitExceeded in ``worker`` until it ends (at most ~1 s: it may catch it)."""
    set_async_exc = getattr(ctypes.pythonapi, "PyThreadState_SetAsyncExc", None)
    if set_async_exc is None or worker.ident is None:  # not CPython: leave the daemon be
        return
    for _ in range(20):
        if finished.is_set():
            return
        set_async_exc(ctypes.c_ulong(worker.ident), ctypes.py_object(TimeLimitExceeded))
        if finished.wait(0.05):
            return


@dataclass
class _Watch:
    codes: dict[Any, str]  # code object of a forbidden Python function -> display name
    builtins: dict[int, tuple[Any, str]]  # id of a forbidden C function -> (it, display name)
    methods: dict[str, tuple[type, str]]  # C method name -> (its class, display name)

    def hook(self, box: Outcome) -> Callable[[Any, str, Any], None]:
        def profile(frame: Any, event: str, arg: Any) -> None:
            if box.forbidden is not None or event not in ("call", "c_call"):
                return
            if event == "call":
                box.forbidden = self.codes.get(frame.f_code)
            elif id(arg) in self.builtins:
                box.forbidden = self.builtins[id(arg)][1]
            elif getattr(arg, "__name__", None) in self.methods:  # a bound C method: x.softmax
                owner, name = self.methods[arg.__name__]
                if isinstance(getattr(arg, "__self__", None), owner):
                    box.forbidden = name

        return profile


def _forbidden_watch(names: Sequence[str]) -> _Watch | None:
    if not names:
        return None
    watch = _Watch(codes={}, builtins={}, methods={})
    for name in names:
        function = resolve(name)
        code = getattr(function, "__code__", None)
        if code is not None:
            watch.codes[code] = name
        elif inspect.ismethoddescriptor(function) and hasattr(function, "__objclass__"):
            watch.methods[function.__name__] = (function.__objclass__, name)
        else:
            watch.builtins[id(function)] = (function, name)
    return watch


def snapshot(value: Any) -> Any:
    """A deep copy to compare the inputs with after the call (the original if it cannot be
    copied)."""
    try:
        return copy.deepcopy(value)
    except Exception:
        return value


def unchanged(before: Any, after: Any) -> bool:
    """True if ``after`` still equals its snapshot ``before`` (tensors and arrays exactly,
    dtype, shape and NaN positions included)."""
    try:
        if _is_tensor(before):
            return (
                _is_tensor(after)
                and before.dtype == after.dtype
                and before.shape == after.shape
                and bool(((before == after) | (before != before) & (after != after)).all())
            )
        if type(before).__module__ == "numpy" and hasattr(before, "shape"):
            import numpy

            return (
                type(after) is type(before)
                and before.dtype == after.dtype
                and numpy.array_equal(before, after, equal_nan=before.dtype.kind in "fc")
            )
        if isinstance(before, (list, tuple)):
            return (
                type(after) is type(before)
                and len(after) == len(before)
                and all(unchanged(b, a) for b, a in zip(before, after, strict=True))
            )
        if isinstance(before, dict):
            return (
                isinstance(after, dict)
                and after.keys() == before.keys()
                and all(unchanged(before[key], after[key]) for key in before)
            )
        return bool(before == after)
    except Exception:
        return False


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)
