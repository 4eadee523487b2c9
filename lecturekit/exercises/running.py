"""Run a student's answer safely: a time limit, no exit, no forbidden calls, inputs untouched.

Two layers. ``isolated(work, step_limit=...)`` runs a whole check (calling the answer,
comparing and formatting its result) in a forked worker process where the platform has
``fork`` (Linux, Colab) and CUDA is not initialised in this process (a forked child cannot use
it). The worker sends back only plain strings (what it printed) and booleans; it is killed
when a step (one hidden case) runs past ``step_limit`` seconds, and whatever the answer does
to its process (``os._exit``, an endless loop in a ``__repr__``, a crash of C code) ends the
worker, never the reader's kernel. Elsewhere the check runs in this process, with the
guarantees of the second layer only.

``call(answer, args, kwargs, time_limit=..., forbidden=...)`` runs the answer in a worker
thread and waits at most ``time_limit`` seconds. Why a thread: a signal-based alarm
(``signal.alarm``) only works in the main thread of the main interpreter, which is not where
every Jupyter front end or test runner calls us. When the time is up, the worker is stopped
by raising an exception inside it (``PyThreadState_SetAsyncExc``), which interrupts any
Python loop at its next bytecode; code stuck inside one long C call (a huge matrix product, a
``time.sleep``) cannot be interrupted, so the checker stops waiting for it, reports the time
limit and leaves the thread to finish in the background as a daemon.

Whatever the answer raises, ``SystemExit`` (``sys.exit()``, ``exit()``) included, is caught in
the worker and returned. Forbidden functions are detected with a profile hook on the worker
thread (``sys.setprofile`` is per thread), which sees Python and C function calls alike, however
the student imported or renamed the function, and also sees the aliases a student meets by
accident: the ``torch.<name>``, ``torch.native_<name>``, ``torch._C._nn.<name>`` and
``torch.ops.aten.<name>`` twins of a forbidden torch function. This is a learning aid, not a
security boundary: deliberate cheating (``sys.setprofile(None)``, calling the function from a
helper thread) stays possible.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import ctypes
import importlib
import importlib.util
import inspect
import multiprocessing
import os
import sys
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Outcome",
    "Isolated",
    "Verdict",
    "call",
    "can_fork",
    "isolated",
    "resolve",
    "unchanged",
    "verdict",
]


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


@dataclass
class Isolated:
    """What happened to a check run by :func:`isolated`.

    ``status``: "returned" (``passed`` holds its verdict), "timeout" (``step`` named the step
    that ran past the limit) or "died" (the worker process ended without a verdict, with
    ``exitcode``).
    """

    status: str
    passed: bool = False
    step: str = ""
    exitcode: int | None = None


def can_fork() -> bool:
    """True where :func:`isolated` runs a check in a forked worker process."""
    if not sys.platform.startswith("linux"):
        return False  # macOS has fork, but forking a process that uses its frameworks is unsafe
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    if multiprocessing.current_process().daemon:  # a daemon process may not start children
        return False
    torch = sys.modules.get("torch")
    return not (torch is not None and torch.cuda.is_initialized())


def isolated(work: Callable[[Callable[[str], None]], bool], *, step_limit: float) -> Isolated:
    """Run ``work(step)`` (a whole check; it calls ``step(label)`` as each hidden case starts)
    in a forked worker process where :func:`can_fork`, else in this process.

    In the worker, what ``work`` prints is sent back and printed here as it comes; each step
    may run ``step_limit`` seconds, after which the worker is killed. Only strings and a bool
    cross back, so nothing the answer returns is formatted or compared here.
    """
    if not can_fork():
        return Isolated("returned", passed=bool(work(lambda label: None)))
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    worker = context.Process(target=_worker, args=(work, send), daemon=True)
    worker.start()
    send.close()
    try:
        return _follow(worker, receive, step_limit)
    finally:  # a KeyboardInterrupt here must not leave the worker running
        if worker.is_alive():
            worker.kill()
        worker.join()
        receive.close()


def _follow(worker: Any, receive: Any, step_limit: float) -> Isolated:
    """Print what the worker sends until its verdict, its death or a step's time limit."""
    deadline, step = time.monotonic() + step_limit, ""
    while True:
        if not receive.poll(max(0.0, deadline - time.monotonic())):
            return Isolated("timeout", step=step)
        try:
            kind, content = receive.recv()
        except (EOFError, OSError):  # the worker ended without a verdict
            worker.join()
            return Isolated("died", step=step, exitcode=worker.exitcode)
        if kind == "step":
            deadline, step = time.monotonic() + step_limit, content
        elif kind in ("stdout", "stderr"):
            stream = getattr(sys, kind)
            stream.write(content)
            stream.flush()
        else:
            return Isolated("returned", passed=content)


def _worker(work: Callable[[Callable[[str], None]], bool], send: Any) -> None:
    """The forked process: one torch thread (OpenMP's pool does not survive a fork: a child
    entering a parallel region after the parent used one waits forever), output to the pipe."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    sys.stdout, sys.stderr = _PipeWriter(send, "stdout"), _PipeWriter(send, "stderr")
    try:
        passed = work(lambda label: send.send(("step", str.__str__(label))))
    except BaseException:  # a checker bug: show it (a looping __str__ meets the step limit)
        traceback.print_exc()
        passed = False
    try:
        send.send(("verdict", passed is True))
    finally:
        sys.stdout.flush()
        # no atexit handlers, no flushing of buffers inherited from the parent
        os._exit(0)


class _PipeWriter:
    """A text stream that sends every write to the parent as a plain ``str``."""

    def __init__(self, send: Any, kind: str) -> None:
        self.send, self.kind = send, kind

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.send.send((self.kind, str.__str__(text)))  # a plain copy of a str subclass
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


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
        for alias, function in [(name, resolve(name)), *_torch_twins(name)]:
            code = getattr(function, "__code__", None)
            if code is not None:
                watch.codes[code] = alias
            elif inspect.ismethoddescriptor(function) and hasattr(function, "__objclass__"):
                watch.methods[function.__name__] = (function.__objclass__, alias)
            else:
                watch.builtins[id(function)] = (function, alias)
    return watch


def _torch_twins(name: str) -> list[tuple[str, Any]]:
    """The other names under which torch exposes the function ``name`` (``torch.nn.functional.
    layer_norm``: ``torch.layer_norm``, ``torch.native_layer_norm``, ``torch.ops.aten.
    native_layer_norm``, ...), as (dotted name, the C function a call of it reaches)."""
    if not name.startswith("torch."):
        return []
    leaf = name.rsplit(".", 1)[1]
    twins = []
    for stem in (leaf, f"{leaf}_loss"):
        for prefix in ("", "native_"):
            for module in ("torch", "torch._C._nn"):
                dotted = f"{module}.{prefix}{stem}"
                with _suppress_missing():
                    twins.append((dotted, resolve(dotted)))
            with _suppress_missing():
                packet = resolve(f"torch.ops.aten.{prefix}{stem}")
                # an OpOverloadPacket's __call__ is shared Python code; each overload ends in
                # its own C function ``_op``, which the profile hook sees
                for overload in ["", *packet.overloads()]:
                    op = getattr(packet, overload) if overload else packet
                    dotted = f"torch.ops.aten.{prefix}{stem}" + (f".{overload}" if overload else "")
                    twins.append((dotted, op._op))
    return twins


def _suppress_missing() -> contextlib.AbstractContextManager:
    """Skip a twin torch does not have (the names differ between versions)."""
    return contextlib.suppress(ImportError, AttributeError, RuntimeError)


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


class Verdict:
    """``check``'s result in IPython: ``bool(v)``, ``v == True`` and ``repr(v)`` as for the
    bool, but a cell that ends in ``check(...)`` displays nothing (no bare ``False`` under
    the feedback)."""

    def __init__(self, passed: bool) -> None:
        self.passed = passed

    def __bool__(self) -> bool:
        return self.passed

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (bool, Verdict)) and bool(other) == self.passed

    def __hash__(self) -> int:
        return hash(self.passed)

    def __repr__(self) -> str:
        return repr(self.passed)

    def _ipython_display_(self) -> None:
        """IPython calls this instead of showing the repr: show nothing."""


def verdict(passed: bool) -> bool | Verdict:
    """``passed``, wrapped in a ``Verdict`` when running under IPython."""
    ipython = sys.modules.get("IPython")
    if ipython is not None and ipython.get_ipython() is not None:
        return Verdict(passed)
    return passed


def source_of(dotted: str) -> str:
    """Source of the function ``dotted`` (decorators included), read from its module's file
    without importing the module (a Triton kernel's module imports triton)."""
    module, _, name = dotted.rpartition(".")
    spec = importlib.util.find_spec(module)
    path = spec.origin if spec is not None else None
    try:
        text = Path(path).read_text(encoding="utf-8") if path else ""
    except OSError:
        text = ""
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines = text.splitlines()[first - 1 : node.end_lineno]
            return textwrap.dedent("\n".join(lines)).rstrip()
    return f"（参考解答 {dotted} 的源代码不可用）"
