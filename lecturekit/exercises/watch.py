"""The forbidden-call watch: a profile hook that sees which functions a student's answer calls.

``sys.setprofile`` sees Python and C function calls alike, however the student imported or
renamed the function. :func:`forbidden_watch` turns the dotted names an exercise forbids into
a :class:`Watch`, which also knows the aliases a student meets by accident: the
``torch.<name>``, ``torch.native_<name>``, ``torch._C._nn.<name>`` and ``torch.ops.aten.<name>``
twins of a forbidden torch function, and the internal functions a public one reaches
(``ALIASES``: the fast path of ``nn.MultiheadAttention``, the backends of lecturekit's
attention). A call of a twin is reported under the public name the exercise forbids.

The hook also watches for what would switch the watch off or escape it (``ESCAPES``):
``sys.setprofile``, starting a thread past ``threading`` (whose threads get the hook through
``threading.setprofile``), starting a process, sending or handling signals, and what would
reach the checker's own objects (``sys.getprofile``, ``sys._current_frames``, ``gc``'s
object lists, a trace function). A learning aid, not a security boundary: C code
(``ctypes``), or code that finds the hook's records through its own call stack, can still
do anything.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ALIASES", "ESCAPES", "Refused", "Seen", "Watch", "forbidden_watch", "resolve"]

# internal functions a forbidden public function runs, forbidden with it
ALIASES: dict[str, tuple[str, ...]] = {
    # the chapter's own solution of the attention exercise (printed by solution())
    "torch.nn.functional.scaled_dot_product_attention": (
        "lecturekit.exercises.ch02_attention.reference_scaled_dot_product",
        # the backends it dispatches to, each public as torch._<name> and torch.ops.aten._<name>
        *(
            f"{module}._scaled_dot_product_{backend}"
            for module in ("torch", "torch.ops.aten")
            for backend in (
                "attention_math",
                "attention_math_for_mps",
                "flash_attention",
                "flash_attention_for_cpu",
                "efficient_attention",
                "cudnn_attention",
                "fused_attention_overrideable",
            )
        ),
        "torch._triton_scaled_dot_attention",
    ),
    # what nn.MultiheadAttention's fast path calls instead of multi_head_attention_forward
    "torch.nn.functional.multi_head_attention_forward": (
        "torch._native_multi_head_attention",
        "torch.ops.aten._native_multi_head_attention",
        "torch._triton_multi_head_attention",
    ),
    # lecturekit's attention by its backend table (ATTENTION_FUNCTIONS) and its steps
    "lecturekit.scaled_dot_product_attention": (
        "lecturekit.model.attention._attention_steps",
        "lecturekit.model.attention._attend_math",
        "lecturekit.model.attention._attend_sdpa",
        "lecturekit.model.attention._attend_triton",
        "lecturekit.kernels.attention",
        "lecturekit.kernels.reference.attention_reference",
    ),
}

_PROCESS = "它会启动检查器看不到的子进程"
_SIGNAL = "它会发送或改变信号，打断检查器"
_TRACE = "它会让你的代码在检查器自己的代码里运行"
_PEEK = "它会读取检查器自己的对象（别的线程的调用栈、监视钩子或全部对象），用来偷看或改动检查"
# calls that switch the watch off or run code it cannot see: dotted name -> why (Chinese)
ESCAPES: dict[str, str] = {
    "sys.setprofile": "它会关掉检查器对函数调用的监视",
    "threading.setprofile": "它会关掉检查器对新线程里函数调用的监视",
    "_thread.start_new_thread": "它绕过 threading 启动线程，检查器看不到线程里的调用",
    "_thread.start_joinable_thread": "它绕过 threading 启动线程，检查器看不到线程里的调用",
    "os.fork": _PROCESS,
    "os.forkpty": _PROCESS,
    "os.system": _PROCESS,
    "os.posix_spawn": _PROCESS,
    "os.posix_spawnp": _PROCESS,
    "_posixsubprocess.fork_exec": _PROCESS,
    "os.kill": _SIGNAL,
    "os.killpg": _SIGNAL,
    "signal.raise_signal": _SIGNAL,
    "signal.pthread_kill": _SIGNAL,
    "signal.signal": _SIGNAL,
    "signal.alarm": _SIGNAL,
    "signal.setitimer": _SIGNAL,
    "sys.settrace": _TRACE,
    "threading.settrace": _TRACE,
    "sys.getprofile": _PEEK,
    "threading.getprofile": _PEEK,
    "sys._current_frames": _PEEK,
    "gc.get_objects": _PEEK,
    "gc.get_referrers": _PEEK,
    "gc.get_referents": _PEEK,
}
# threading itself starts its threads with these (and installs the hook in them)
_THREAD_STARTERS = ("_thread.start_new_thread", "_thread.start_joinable_thread")


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


@dataclass
class Seen:
    """What the hook saw during one call: the first forbidden function (its public name) and
    the first escape (dotted name, why). ``done`` stops the hook (the checker's own calls);
    ``thread``: the thread the answer is called in, where a refused call is also blocked."""

    forbidden: str | None = None
    escape: tuple[str, str] | None = None
    done: bool = False
    thread: int | None = None


class Refused(BaseException):
    """Raised in place of a forbidden call or an escape in the thread the answer is called in,
    so the call never runs: the answer gets neither its result nor its effect (no signal
    sent, no process started, no watch switched off). A BaseException: ``except Exception``
    in the answer does not swallow it."""


@dataclass
class Watch:
    codes: dict[Any, str] = field(default_factory=dict)  # code object -> display name
    builtins: dict[int, tuple[Any, str]] = field(default_factory=dict)  # id -> (it, name)
    methods: dict[str, tuple[type, str]] = field(default_factory=dict)  # C method name
    escapes: dict[int, tuple[Any, str, str]] = field(default_factory=dict)  # id -> (it, ...)
    escape_codes: dict[Any, tuple[str, str]] = field(default_factory=dict)

    def hook(self, seen: Seen, mode: Any = None) -> Callable[[Any, str, Any], None]:
        """The profile function: records into ``seen``; in the answer's own thread it raises
        ``Refused`` instead of letting the first refused call run (CPython then also drops
        the hook from that thread, which ``running.call`` reports as well). ``mode``, the
        torch function mode of :meth:`torch_mode`, is entered in each thread the answer starts
        (torch's modes are per thread) at the hook's first event there."""
        threading_file = threading.__file__
        entered: set[int] = set()

        def profile(frame: Any, event: str, arg: Any) -> None:
            if seen.done or event not in ("call", "c_call"):
                return
            thread = threading.get_ident() if mode is not None else seen.thread
            if thread != seen.thread and thread not in entered:
                entered.add(thread)
                mode.__enter__()  # never left: it ends with the thread
            refused = None
            if seen.escape is None:
                escape = (
                    self.escape_codes.get(frame.f_code)
                    if event == "call"
                    else self.escapes.get(id(arg), (None, "", ""))[1:]
                )
                if escape and escape[0]:
                    started_by_threading = escape[0] in _THREAD_STARTERS and (
                        frame.f_code.co_filename == threading_file
                    )
                    if not started_by_threading:
                        seen.escape = escape
                        refused = escape[0]
            if seen.forbidden is None:
                seen.forbidden = refused_name = self._forbidden(frame, event, arg)
                refused = refused or refused_name
            if refused is not None and threading.get_ident() == seen.thread:
                raise Refused(refused)

        return profile

    def _forbidden(self, frame: Any, event: str, arg: Any) -> str | None:
        if event == "call":
            return self.codes.get(frame.f_code)
        if id(arg) in self.builtins:
            return self.builtins[id(arg)][1]
        if getattr(arg, "__name__", None) in self.methods:  # a bound C method: x.softmax
            owner, name = self.methods[arg.__name__]
            if isinstance(getattr(arg, "__self__", None), owner):
                return name
        return None

    def named(self, function: Any) -> str | None:
        """The name ``function`` is forbidden under, or None (for a torch function mode, which
        is handed the function itself)."""
        if id(function) in self.builtins:
            return self.builtins[id(function)][1]
        code = getattr(function, "__code__", None)
        if code is not None and code in self.codes:
            return self.codes[code]
        if getattr(function, "__name__", None) in self.methods:  # torch.Tensor.softmax
            owner, name = self.methods[function.__name__]
            objclass = getattr(function, "__objclass__", None)
            if isinstance(objclass, type) and issubclass(objclass, owner):
                return name
        return None

    def torch_mode(self, seen: Seen) -> Any:
        """A torch function mode that records a forbidden torch function into ``seen`` and
        raises ``Refused`` instead of running it, however it is called: the profile hook does
        not see a C function that C code calls (``functools.partial(F.scaled_dot_product_
        attention)``, ``map``); in the threads the answer starts it only records. None when
        no torch function is forbidden."""
        if not (self.builtins or self.methods):
            return None
        from torch.overrides import TorchFunctionMode

        watch = self

        class ForbiddenMode(TorchFunctionMode):
            def __torch_function__(
                self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
            ) -> Any:
                if not seen.done and seen.forbidden is None:
                    seen.forbidden = watch.named(func)
                    if seen.forbidden is not None and threading.get_ident() == seen.thread:
                        raise Refused(seen.forbidden)
                return func(*args, **(kwargs or {}))

        return ForbiddenMode()

    def fingerprint(self) -> tuple[tuple[int, int], ...]:
        """Identity and size of each table, to tell afterwards whether an answer edited them."""
        tables = (self.codes, self.builtins, self.methods, self.escapes, self.escape_codes)
        return tuple((id(table), len(table)) for table in tables)

    def add(self, function: Any, name: str) -> None:
        """Forbid ``function``, reported as ``name`` (the first name given to it wins)."""
        code = getattr(function, "__code__", None)
        if code is not None:
            self.codes.setdefault(code, name)
        elif inspect.ismethoddescriptor(function) and hasattr(function, "__objclass__"):
            self.methods.setdefault(function.__name__, (function.__objclass__, name))
        else:
            self.builtins.setdefault(id(function), (function, name))


def forbidden_watch(names: Sequence[str], own: Sequence[Any] = ()) -> Watch:
    """The watch for the dotted ``names`` an exercise forbids, their twins and aliases (each
    reported under its public name), the functions ``own`` (the exercise's reference
    solutions, reported by their dotted names) and the escapes."""
    watch = Watch()
    for name in names:
        watch.add(resolve(name), name)  # the public name first: twins may be the same object
        for alias, function in [*_torch_twins(name), *_aliases(name)]:
            watch.add(function, name if function is resolve(name) else f"{name}（{alias}）")
    for function in own:
        watch.add(function, f"{function.__module__}.{function.__qualname__}")
    for dotted, why in ESCAPES.items():
        with _suppress_missing():
            function = resolve(dotted)
            code = getattr(function, "__code__", None)
            if code is not None:
                watch.escape_codes[code] = (dotted, why)
            else:
                watch.escapes[id(function)] = (function, dotted, why)
    return watch


def _aliases(name: str) -> list[tuple[str, Any]]:
    found = []
    for alias in ALIASES.get(name, ()):
        with _suppress_missing():
            function = resolve(alias)
            found += _overloads(alias, function) if alias.startswith("torch.ops.") else []
            found.append((alias, function))
    return found


def _overloads(dotted: str, packet: Any) -> list[tuple[str, Any]]:
    """(dotted name, C function) of each overload of the ``torch.ops`` operator ``packet``:
    an OpOverloadPacket's ``__call__`` is shared Python code, each overload ends in its own C
    function ``_op``, which the profile hook sees."""
    return [
        (
            f"{dotted}.{overload}" if overload else dotted,
            (getattr(packet, overload) if overload else packet)._op,
        )
        for overload in ["", *packet.overloads()]
    ]


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
                dotted = f"torch.ops.aten.{prefix}{stem}"
                twins += _overloads(dotted, resolve(dotted))
    return twins


def _suppress_missing() -> contextlib.AbstractContextManager:
    """Skip a twin torch does not have (the names differ between versions)."""
    return contextlib.suppress(ImportError, AttributeError, RuntimeError)
