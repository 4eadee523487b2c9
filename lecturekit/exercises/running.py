"""Run a student's answer safely: a time limit, no exit, no forbidden calls, inputs untouched.

Two layers. ``isolated(work, step_limit=...)`` runs a whole check (calling the answer,
comparing and formatting its result) in a forked worker process where the platform has
``fork`` (Linux, Colab) and CUDA is not initialised in this process (a forked child cannot use
it). The worker sends back only plain strings (what it printed, at most ``OUTPUT_LIMIT``
characters of the answer's own output, none of what it writes past ``sys.stdout``) and
booleans; it is killed when a step (one hidden case) runs past ``step_limit`` seconds, and
whatever the answer does to its process
(``os._exit``, an endless loop in a ``__repr__``, a crash of C code, a signal) ends or
interrupts the worker, never the reader's kernel. The checker names the phase of the step
(``phase``) so that a time-out says what did not finish. Elsewhere the check runs in this
process, with the guarantees of the second layer only.

``call(answer, args, kwargs, time_limit=..., forbidden=...)`` runs the answer in a worker
thread and waits at most ``time_limit`` seconds. Why a thread: a signal-based alarm
(``signal.alarm``) only works in the main thread of the main interpreter, which is not where
every Jupyter front end or test runner calls us. When the time is up, the worker is stopped
by raising an exception inside it (``PyThreadState_SetAsyncExc``), which interrupts any
Python loop at its next bytecode; code stuck inside one long C call (a huge matrix product, a
``time.sleep``) cannot be interrupted, so the checker stops waiting for it, reports the time
limit and leaves the thread to finish in the background as a daemon.

Whatever the answer raises, ``SystemExit`` (``sys.exit()``, ``exit()``) included, is caught in
the worker and returned. Forbidden functions are detected by the profile hook of ``watch`` on
the worker thread and on every thread the answer starts through ``threading``; the hook also
reports what would switch it off or escape it (``sys.setprofile``, a raw ``_thread``, a child
process, a signal), and ``call`` notes when the hook is gone after the call. This is a
learning aid, not a security boundary: C code (``ctypes``) can still do anything.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import importlib.util
import multiprocessing
import os
import signal
import sys
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lecturekit.exercises.guard import plain_tensor
from lecturekit.exercises.watch import Seen, forbidden_watch, resolve

__all__ = [
    "Outcome",
    "Isolated",
    "Verdict",
    "call",
    "can_fork",
    "feedback",
    "isolated",
    "phase",
    "resolve",
    "unchanged",
    "verdict",
]

# characters of the answer's own output (print) a check forwards from its worker process
OUTPUT_LIMIT = 20_000


class TimeLimitExceeded(BaseException):
    """Raised inside a worker thread whose time is up (BaseException: ``except Exception``
    in the student's code does not swallow it)."""


@dataclass
class Outcome:
    """What happened when the answer was called.

    ``status``: "returned" (``value`` holds the result), "raised" (``error``) or "timeout".
    ``forbidden``: the display name of the first forbidden function it called, if any;
    ``escape``: (dotted name, why) of the first call that switches the watch off or escapes
    it; ``unwatched``: the profile hook was gone when the answer returned, or its state had
    been edited (switched off, its tables of forbidden functions changed); ``settings``: the
    global settings (``SETTINGS``) it changed and did not put back (``call`` put them back).
    """

    status: str
    value: Any = None
    error: BaseException | None = None
    forbidden: str | None = None
    escape: tuple[str, str] | None = None
    unwatched: bool = False
    settings: list[str] = field(default_factory=list)
    seen: Seen = field(default_factory=Seen, repr=False)


# global settings an answer may change inside its computation but must put back: the name of
# the setter -> the getter; ``call`` puts a changed one back and names it in ``Outcome.settings``
SETTINGS: dict[str, str] = {
    "torch.set_default_dtype": "torch.get_default_dtype",
    "sys.setrecursionlimit": "sys.getrecursionlimit",
}


def _settings() -> dict[str, Any]:
    return {setter: resolve(getter)() for setter, getter in SETTINGS.items()}


@contextlib.contextmanager
def _recursion_floor() -> Any:
    """While the answer runs, ``sys.setrecursionlimit`` sets no limit below what the waiting
    thread needs: that thread's stack is deep (a test runner's, a notebook's), and an answer
    that lowers the limit to 60 would otherwise make the checker itself raise RecursionError
    the next time it calls a function. The lowered limit still differs from the one before,
    so ``Outcome.settings`` names the change all the same."""
    real = sys.setrecursionlimit
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    floor = depth + 100  # the checker's own calls below this frame, with room to spare

    def setrecursionlimit(limit: int, /) -> None:
        real(max(limit, floor))

    sys.setrecursionlimit = setrecursionlimit
    try:
        yield
    finally:
        sys.setrecursionlimit = real


def _restore_settings(before: dict[str, Any]) -> list[str]:
    """Put back the settings that differ from ``before``; their setters' names."""
    changed = [setter for setter, value in _settings().items() if value != before[setter]]
    for setter in changed:
        resolve(setter)(before[setter])
    return changed


def call(
    answer: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    time_limit: float,
    forbidden: Sequence[str] = (),
    own: Sequence[Any] = (),
) -> Outcome:
    """Call ``answer(*args, **kwargs)`` in a worker thread, waiting at most ``time_limit`` s;
    calls of ``forbidden`` (dotted names) and ``own`` (functions) are reported."""
    watch = forbidden_watch(forbidden, own)
    mode = watch.torch_mode(seen := Seen())
    hook, tables, settings = watch.hook(seen, mode), watch.fingerprint(), _settings()
    box = Outcome(status="timeout", seen=seen)
    finished = threading.Event()

    def work() -> None:
        try:
            try:
                seen.thread = threading.get_ident()
                threading.setprofile(hook)  # the threads the answer starts
                sys.setprofile(hook)
                with mode or contextlib.nullcontext():
                    value = answer(*args, **kwargs)
            except BaseException as error:  # SystemExit and the time limit included
                box.status, box.error = "raised", error
            else:
                box.status, box.value = "returned", value
            finally:
                # switched off early, its tables edited, or the hook gone: not watched
                tampered, seen.done = seen.done, True
                box.unwatched = (
                    tampered or sys.getprofile() is not hook or watch.fingerprint() != tables
                )
                threading.setprofile(None)
                sys.setprofile(None)
                box.settings = _restore_settings(settings)  # here: this thread's stack is short
                finished.set()
        except BaseException:  # a late TimeLimitExceeded landing in the bookkeeping above
            finished.set()

    worker = threading.Thread(target=work, name="lecturekit-exercise-check", daemon=True)
    with _recursion_floor():
        worker.start()
        try:
            finished.wait(time_limit)
        except BaseException:  # KeyboardInterrupt: stop the worker too, then let it propagate
            _stop(worker, finished)
            raise
        stopped = not finished.is_set()
        if stopped:
            _stop(worker, finished)
    if finished.is_set():
        worker.join(1.0)  # gone from sys._current_frames before the checker counts threads
    box.forbidden, box.escape = seen.forbidden, seen.escape
    if stopped and (not finished.is_set() or isinstance(box.error, TimeLimitExceeded)):
        return Outcome(status="timeout", forbidden=box.forbidden, escape=box.escape, seen=seen)
    return box


@dataclass
class Isolated:
    """What happened to a check run by :func:`isolated`.

    ``status``: "returned" (``passed`` holds its verdict), "timeout" (``step`` named the step
    that ran past the limit, ``phase`` what it was doing, ``seconds`` the step's limit) or
    "died" (the worker process ended without a verdict, with ``exitcode``: negative for the
    number of the signal that ended it).
    """

    status: str
    passed: bool = False
    step: str = ""
    exitcode: int | None = None
    phase: str = ""
    seconds: float = 0.0


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


def isolated(work: Callable[[Callable[..., None]], bool], *, step_limit: float) -> Isolated:
    """Run ``work(step)`` (a whole check; it calls ``step(label, factor=1.0)`` as each hidden
    case starts, and may call :func:`phase` within a step) in a forked worker process where
    :func:`can_fork`, else in this process.

    In the worker, what ``work`` prints is sent back and printed here as it comes (what the
    answer prints up to ``OUTPUT_LIMIT`` characters; the checker's own :func:`feedback` in
    full); each step may run ``factor * step_limit`` seconds, after which the worker is killed. Only
    strings and a bool cross back, so nothing the answer returns is formatted or compared here.
    """
    if not can_fork():
        return Isolated("returned", passed=bool(work(lambda label, factor=1.0: None)))
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
    seconds, step, doing = step_limit, "", ""
    deadline = time.monotonic() + seconds
    while True:
        if not receive.poll(max(0.0, deadline - time.monotonic())):
            return Isolated("timeout", step=step, phase=doing, seconds=seconds)
        try:
            kind, content = receive.recv()
        except (EOFError, OSError):  # the worker ended without a verdict
            worker.join()
            return Isolated("died", step=step, exitcode=worker.exitcode, phase=doing)
        if kind == "step":
            (step, factor), doing = content, ""
            seconds = step_limit * factor
            deadline = time.monotonic() + seconds
        elif kind == "phase":
            doing = content
        elif kind in ("stdout", "stderr"):
            stream = getattr(sys, kind)
            stream.write(content)
            stream.flush()
        else:
            return Isolated("returned", passed=content)


# the pipe to the parent and the checker's own output, in a worker process only
_PIPE: list[Any] = []
_FEEDBACK: list[Any] = []


def phase(text: str) -> None:
    """Tell the parent what the current step is doing now (e.g. "调用你的函数"), so that a
    time-out names it; nothing outside a worker process."""
    if _PIPE:
        _PIPE[0].send(("phase", str.__str__(text)))


def feedback() -> Any:
    """The stream for the checker's own messages: never cut by ``OUTPUT_LIMIT``."""
    return _FEEDBACK[0] if _FEEDBACK else sys.stdout


def _worker(work: Callable[[Callable[..., None]], bool], send: Any) -> None:
    """The forked process: one torch thread (OpenMP's pool does not survive a fork: a child
    entering a parallel region after the parent used one waits forever), output to the pipe,
    SIGINT ignored (the parent stops the worker when the reader interrupts). The file
    descriptors 1 and 2 point to /dev/null: what is written to them past ``sys.stdout``
    (``os.write(1, ...)``, C code) would reach the notebook uncut (Jupyter forwards them)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_WRONLY)
    for descriptor in (1, 2):
        os.dup2(devnull, descriptor)
    budget = [OUTPUT_LIMIT]  # shared by stdout and stderr
    sys.stdout, sys.stderr = (
        _PipeWriter(send, "stdout", budget),
        _PipeWriter(send, "stderr", budget),
    )
    _PIPE[:], _FEEDBACK[:] = [send], [_PipeWriter(send, "stdout", None)]
    try:
        passed = work(
            lambda label, factor=1.0: send.send(("step", (str.__str__(label), float(factor))))
        )
    except BaseException:  # a checker bug: show it (a looping __str__ meets the step limit)
        traceback.print_exc(file=_FEEDBACK[0])
        passed = False
    try:
        send.send(("verdict", passed is True))
    finally:
        # no atexit handlers, no flushing of buffers inherited from the parent
        os._exit(0)


class _PipeWriter:
    """A text stream that sends every write to the parent as a plain ``str``; with a
    ``budget`` (a one-item list shared by streams) it stops after that many characters and
    says once that the rest was cut."""

    def __init__(self, send: Any, kind: str, budget: list[int] | None) -> None:
        self.send, self.kind, self.budget = send, kind, budget

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        plain = str.__str__(text)  # a plain copy of a str subclass
        if self.budget is not None:
            left = self.budget[0]
            if left <= 0:
                return len(plain)
            self.budget[0] = left - len(plain)
            if len(plain) > left:
                plain = (
                    plain[:left] + f"\n……（输出太长：你的代码打印的内容只显示前 {OUTPUT_LIMIT} "
                    "个字符，其余的没有显示）\n"
                )
        if plain:
            self.send.send((self.kind, plain))
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


def unchanged(before: Any, after: Any) -> bool:
    """True if ``after`` still equals its snapshot ``before`` (tensors and arrays exactly,
    dtype, shape and NaN positions included)."""
    try:
        if _is_tensor(before):
            if not _is_tensor(after):
                return False
            after = plain_tensor(after)  # a subclass's __eq__ may lie
            return (
                before.dtype == after.dtype
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
    return torch is not None and issubclass(type(x), torch.Tensor)


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
