"""How ``check`` runs an exercise's hidden cases and what it says (in Chinese).

Each case runs in an order that leaves the answer nothing to read and nothing to break: the
inputs are kept as bytes (``guard.Frozen``) and the answer gets its own copy; the answer is
called under the forbidden-call watch (``running.call``); its result is read once into plain
objects (``guard.plain``); then the checker verifies that the answer left no thread running,
did not switch the watch off and replaced none of the checker's, torch's or numpy's functions
(``guard.Snapshot``); only then is the expected result computed, from a fresh copy of the
inputs, and compared. Each phase is announced (``running.phase``), so that a time-out says
what did not finish. A case with a ``harness`` (``Case.harness``) runs the same way, with the
function the harness builds from the answer in place of the answer, and from the reference in
place of the reference.
"""

from __future__ import annotations

import builtins
import copy
import math
import pickle
import signal
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lecturekit.exercises import guard, running
from lecturekit.exercises.specs import Items, Spec, clip, short

if TYPE_CHECKING:
    from lecturekit.exercises import Case, Exercise

__all__ = ["check_function", "check_value", "died_message", "fail", "timeout_message"]

Failure = tuple[str, "str | None"]

CALLING = "调用你的函数"
READING = "读取你返回的结果（它的 __repr__、__float__ 等方法）"
SHOWING_ERROR = "显示你的函数抛出的异常（它的消息）"


def fail(ex: Exercise, message: str, kind: str | None = None) -> bool:
    """Print the failure; ``kind`` "value", "shape" or "error" adds the hint, "type" the
    required return type; None (unfinished, forbidden, time limit) adds nothing."""
    out = running.feedback()
    print(f"❌ 练习 {ex.id}：{message}", file=out)
    if kind in ("value", "shape", "error"):
        print(f"💡 提示：{ex.hint}", file=out)
        print(f'   仍然卡住？运行 solution("{ex.id}") 看参考解答。', file=out)
    elif kind == "type":
        needed = "返回" if ex.kind == "function" else "的答案是"
        print(f"   题目要求{needed}：{ex.returns.describe()}。", file=out)
    return False


def check_value(ex: Exercise, answer: Any) -> bool:
    running.phase("读取你的答案（它的 __repr__、__float__ 等方法）")
    value = guard.plain(answer)
    running.phase("比较你的答案")
    problem = ex.returns.compare(ex.reference, value)
    if problem is not None:
        return fail(ex, f"答案不对：{problem.message}", problem.kind)
    print(f"✅ 通过！练习 {ex.id} 的答案正确。", file=running.feedback())
    return True


def check_function(ex: Exercise, answer: Any, time_limit: float, step: Callable[..., None]) -> bool:
    if not callable(answer):
        return fail(
            ex,
            f"类型不对：这道题要一个函数，你传入的是 {type(answer).__name__}。"
            "请传函数本身（不要加括号调用它）。",
        )
    cases = list(ex.cases())
    frozen = [guard.Frozen(case.args, dict(case.kwargs)) for case in cases]
    for number, (case, inputs) in enumerate(zip(cases, frozen, strict=True), start=1):
        label = f"第 {number}/{len(cases)} 个测试" + (f"（{case.label}）" if case.label else "")
        step(label, case.time_factor)
        seconds = time_limit * case.time_factor
        failure = _check_case(ex, answer, case, inputs, label, seconds, first=number == 1)
        if failure is not None:
            return fail(ex, *failure)
    print(f"✅ 通过！练习 {ex.id} 的 {len(cases)} 个测试全部正确。", file=running.feedback())
    return True


def _check_case(
    ex: Exercise,
    answer: Any,
    case: Case,
    inputs: guard.Frozen,
    label: str,
    time_limit: float,
    *,
    first: bool,
) -> Failure | None:
    """None if ``answer`` passes the case, else (message, kind) for ``fail``."""
    args, kwargs = inputs.thaw()  # the answer's own copies
    # a case with a harness calls what the harness builds from the answer (and the reference)
    called = answer if case.harness is None else case.harness(answer)
    expecting = ex.reference if case.harness is None else case.harness(ex.reference)
    shown = f"\n  输入：{_describe_args(expecting, *inputs.thaw())}"
    snapshot, threads = guard.Snapshot([*_guarded(ex), inputs]), guard.thread_ids()
    running.phase(CALLING)
    # the reference solution itself may call what the task forbids (and the tests pass it to
    # show that each exercise is solvable); any other answer may call neither
    itself = answer is ex.reference
    outcome = running.call(
        called,
        args,
        kwargs,
        time_limit=time_limit,
        forbidden=() if itself else ex.forbidden,
        own=() if itself else (ex.reference,),
    )
    failure = _interference(label, outcome, snapshot) or _call_failure(
        label, outcome, time_limit, shown, first
    )
    if failure is not None:
        return failure
    running.phase(READING)
    value = guard.plain(outcome.value)
    failure = _left_behind(label, threads, snapshot)
    if failure is not None:
        return failure
    running.phase("检查你的函数有没有修改输入")
    edited = _edited_arguments(expecting, *inputs.thaw(), args, kwargs)
    if edited:
        return (
            f"{label}时你的函数修改了输入参数 {'、'.join(edited)}。题目要求不改动输入："
            "先复制（.clone()）再修改，或者用返回新张量的运算"
            f"（例如 masked_fill 而不是 masked_fill_）。{shown}",
            None,
        )
    running.phase("计算参考答案")
    reference_args, reference_kwargs = inputs.thaw()
    expected = expecting(*reference_args, **reference_kwargs)
    running.phase("比较你的结果")
    problem = ex.returns.compare(expected, value)
    if problem is not None:
        return f"{label}没有通过：{problem.message}{shown}", problem.kind
    return None


def _interference(label: str, outcome: running.Outcome, snapshot: guard.Snapshot) -> Failure | None:
    """An escape from the watch (named first: it may hide what came after), a forbidden call,
    a watch switched off, a global setting of torch or Python changed, a replaced function."""
    if outcome.escape is not None:
        name, why = outcome.escape
        return (
            f"{label}时你的函数调用了 {name}：{why}。检查器不接受这样的答案，"
            "请只在函数里计算并返回结果。",
            None,
        )
    if outcome.forbidden is not None:
        return (
            f"{label}时你的函数调用了 {outcome.forbidden}。这道题不允许用它，"
            "请用基本运算自己写出计算过程。",
            None,
        )
    if outcome.unwatched and outcome.status == "returned":
        return (
            f"{label}时，你的函数返回后，检查器监视函数调用的 profile 钩子已经不在了或被改动了"
            "（被关掉、换掉或改了它的记录；递归太深时 Python 也会关掉它）。检查器不接受这样的答案。",
            None,
        )
    return _settings_changed(label, outcome.settings) or _replaced(label, snapshot)


def _settings_changed(label: str, changed: list[str]) -> Failure | None:
    if not changed:
        return None
    return (
        f"{label}时你的函数改了全局设置（{'、'.join(changed)}）而没有改回去（检查器已恢复原样）。"
        "这会影响之后运行的所有代码：只在函数内部需要时，在返回前改回原值。",
        None,
    )


def _replaced(label: str, snapshot: guard.Snapshot) -> Failure | None:
    changed = snapshot.changed()
    if not changed:
        return None
    snapshot.restore()
    names = "、".join(changed[:3]) + (f" 等 {len(changed)} 处" if len(changed) > 3 else "")
    return (
        f"{label}时你的函数替换了检查器或库里的函数：{clip(names, 300)}（检查器已恢复原样）。"
        "检查器不接受这样的答案：请不要改动库和检查器。",
        None,
    )


def _left_behind(label: str, threads: set[int], snapshot: guard.Snapshot) -> Failure | None:
    """Threads the answer left running; functions its result's methods replaced."""
    running_threads = guard.threads_since(threads)
    if running_threads:
        return (
            f"{label}时，你的函数返回后它启动的 {running_threads} 个线程还在运行。检查器只接受"
            "在函数返回之前完成的计算：请在返回前等线程结束（join），或者不用线程。",
            None,
        )
    return _replaced(label, snapshot)


def _call_failure(
    label: str, outcome: running.Outcome, time_limit: float, shown: str, first: bool
) -> Failure | None:
    if outcome.status == "timeout":
        return (
            f"{label}时调用你的函数运行超过 {time_limit:g} 秒还没有返回，已停止等待。"
            "如果函数里有循环，检查它能不能结束；如果只是算得慢，用张量运算代替 Python 循环。"
            f"{shown}",
            None,
        )
    if outcome.status == "raised":
        running.phase(SHOWING_ERROR)
        return _describe_error(label, outcome.error, shown)
    if outcome.value is None:
        if first:
            return (
                f"尚未完成：{label}时函数返回了 None。补完函数体（记得 return）后再运行 check。",
                None,
            )
        return f"{label}时函数返回了 None（是不是某个分支忘了 return？）{shown}", "type"
    return None


def _describe_error(label: str, error: BaseException | None, shown: str) -> Failure:
    if isinstance(error, NotImplementedError):
        message = _message(error) or f"{label}时函数抛出了 NotImplementedError。"
        return f"尚未完成：{message}", None
    if isinstance(error, SystemExit):
        return (
            f"{label}时你的函数调用了 sys.exit()（或 exit()、quit()），这会结束整个程序，"
            "检查器拦下了它。函数应当用 return 返回结果。",
            None,
        )
    name = clip(str.__str__(type(error).__name__), 100)
    return f"{label}时你的函数出错：{name}: {_message(error)}{shown}", "error"


def _message(error: BaseException | None) -> str:
    """``str(error)`` (cut to 2000 characters), or a note when its ``__str__`` fails."""
    try:
        return clip(str.__str__(str(error)))
    except Exception as failure:
        return f"（无法显示这个异常的消息：它的 __str__ 出错，{type(failure).__name__}）"


def timeout_message(step: str, phase: str, limit: float) -> str:
    """What ``check`` says when a step of the worker process ran past ``limit`` seconds."""
    doing = phase or "检查"
    return (
        f"{step}时{doing}超过 {limit:g} 秒还没有结束，检查已停止"
        "（每个测试的调用、读取、比较和显示一共最多这么久）。"
    )


def died_message(step: str, phase: str, exitcode: int | None) -> str:
    """What ``check`` says when the worker process ended without a verdict."""
    if exitcode is not None and exitcode < 0:
        try:
            how = f"被信号 {signal.Signals(-exitcode).name} 终止了"
        except ValueError:
            how = f"被信号 {-exitcode} 终止了"
    else:
        how = f"以退出码 {exitcode} 退出了"
    doing = f"（{phase}时）" if phase else ""
    return (
        f"{step}{doing}，运行检查的进程{how}，没有给出结果。函数应当用 return 返回结果；"
        "你的笔记本没有受影响。"
    )


def _guarded(ex: Exercise) -> list[Any]:
    """What the answer must leave as it found it: the checker's and lecturekit's model's
    modules and the classes they define (``guard.Snapshot``, ``guard.Frozen``, ``watch.Watch``,
    ``EncoderLayer``, ...), this exercise and its specs, torch's and numpy's functions, the
    builtins, and the modules the checker reads its inputs with (pickle, copy)."""
    import numpy
    import torch
    import torch.nn.functional

    ours = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith(("lecturekit.exercises", "lecturekit.model")) and module is not None
    ]
    defined = {
        id(value): value
        for module in ours
        for value in list(vars(module).values())
        if isinstance(value, type) and value.__module__ == module.__name__
    }
    specs, todo = [], [ex.returns]
    while todo and len(specs) < 64:  # the spec and the items of a tuple spec
        specs.append(todo.pop())
        todo += list(specs[-1].items) if isinstance(specs[-1], Items) else []
    classes = {id(cls): cls for cls in _subclasses(Spec)} | defined
    library = [builtins, sys, math, copy, pickle, types, numpy, torch, torch.nn.functional]
    library += [torch.linalg, torch.Tensor]
    return [*library, *ours, *classes.values(), ex, *specs]


def _subclasses(cls: type) -> list[type]:
    found = [cls]
    for sub in type.__subclasses__(cls):
        found += _subclasses(sub)
    return found


def _parameter_names(function: Callable[..., Any]) -> list[str]:
    import inspect

    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


def _edited_arguments(
    reference: Callable[..., Any], original: tuple, original_kwargs: dict, args: tuple, kwargs: dict
) -> list[str]:
    """Names of the arguments the answer modified (compared with a fresh copy of the case);
    ``reference`` is the function whose parameters name them."""
    names = _parameter_names(reference)
    edited = [
        names[i] if i < len(names) else f"第 {i + 1} 个参数"
        for i, (before, after) in enumerate(zip(original, args, strict=True))
        if not running.unchanged(before, after)
    ]
    edited += [k for k in original_kwargs if not running.unchanged(original_kwargs[k], kwargs[k])]
    return edited


def _describe_args(reference: Callable[..., Any], args: tuple, kwargs: dict) -> str:
    names = _parameter_names(reference)
    parts = [f"{names[i]}={short(a)}" if i < len(names) else short(a) for i, a in enumerate(args)]
    parts += [f"{k}={short(v)}" for k, v in kwargs.items()]
    return ", ".join(parts) if parts else "（无参数）"
