"""Self-test exercises with automatic checking and feedback in Chinese.

A chapter registers its exercises in ``lecturekit/exercises/chNN_<topic>.py`` (the unnumbered
capstone in ``capstone_<topic>.py`` with ``chapter=CAPSTONE``, the lab in ``lab_<topic>.py``)::

    from lecturekit.exercises import Case, Exercise, register
    from lecturekit.exercises.specs import Array

    register(Exercise(
        id="encoder.layernorm", chapter=3, title="...", prompt="...",
        hint="...",                                        # the idea, shown after a failure
        explanation="...",                                 # the formula, shown by solution()
        kind="function",                                   # or "value"
        returns=Array("float32", "(..., D)"),              # what the answer must be
        cases=lambda: [Case(args=(x,), label="...")],      # hidden test inputs
        reference=reference_layernorm,                     # the solution
        forbidden=("torch.nn.functional.layer_norm",),     # functions the task rules out
    ))

Those modules are found with ``pkgutil`` on first use, so adding a file needs no other edit.
In a notebook the student calls ``show(id)`` to read the task, ``check(id, answer)`` to check
an answer, ``hint(id)`` to ask for the idea and, when stuck, ``solution(id)`` to read the
reference solution. ``show`` prints neither the hint nor the explanation. ``answer`` is a
function (``kind="function"``: it is called on every hidden case and its result compared with
the reference's, see ``specs``) or a value (``kind="value"``).

``check`` prints what happened and returns True/False (in IPython the same verdict as a
``Verdict``, which a notebook cell does not echo). Whatever the student's code does is
reported, never raised: an exception (even one whose message cannot be shown), ``sys.exit()``,
``os._exit()``, an endless loop (a time limit per case, see ``running``), a result of the
wrong type, shape or dtype, an edit of its own inputs, or a call of a function the task
forbids. The hint (the idea, never the formula) is printed after a wrong result, or by
``hint(id)`` on request; a type problem gets the required return type instead, since the
formula may be right.

An answer that is not a plain function, such as a Triton kernel, is turned into one by the
exercise's ``launch`` (which raises ``CannotRun`` with a Chinese message when it cannot run
here, e.g. without triton); the solution ``solution`` prints is then ``model_answer``, a dotted
name read from its source file without importing it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lecturekit._common import check_number, check_type
from lecturekit._lazy import attach
from lecturekit.exercises import checking, running
from lecturekit.exercises.running import Verdict
from lecturekit.exercises.specs import Spec, wrap_display

__all__ = [
    "Case",
    "CannotRun",
    "Exercise",
    "register",
    "check",
    "hint",
    "show",
    "solution",
    "list_exercises",
    "get_exercise",
    "CAPSTONE",
    "LAB",
    "Verdict",
]

# submodules (e.g. ``exercises.<module>``) resolve on first attribute access
__getattr__, __dir__ = attach(__name__, names=False)

# seconds one hidden case may run; the reference solutions need milliseconds
TIME_LIMIT_S = 10.0
# the longest time_limit check accepts (a day): threading's waits overflow on larger ones
MAX_TIME_LIMIT_S = 24 * 3600.0

# The capstone ("自测 C.1", ...) and the debugging lab ("自测 L.1", ...) have no number; they sit
# between chapter 6 and chapter 7 in the book, which is where their exercises are listed.
CAPSTONE, LAB = "C", "L"
_UNNUMBERED = {CAPSTONE: (6.5, "综合项目"), LAB: (6.75, "调试实验")}


def _chapter_position(chapter: int | str) -> float:
    """Where ``chapter`` (a number, ``CAPSTONE`` or ``LAB``) sits in the book, for ordering."""
    return _UNNUMBERED[chapter][0] if isinstance(chapter, str) else float(chapter)


def _chapter_name(chapter: int | str) -> str:
    """How ``show`` names a chapter: "第 3 章"; "附录" for the appendix (notebook 08);
    "综合项目" for the capstone; "调试实验" for the debugging lab."""
    if isinstance(chapter, str):
        return _UNNUMBERED[chapter][1]
    return "附录" if chapter == 8 else f"第 {chapter} 章"


class CannotRun(Exception):
    """Raised by an exercise's ``launch`` when the answer cannot run here; the message (Chinese)
    says why and what to do, and ``check`` prints it instead of a traceback."""


@dataclass
class Case:
    """One hidden test input: ``answer(*args, **kwargs)`` is compared with the reference's.

    ``harness``, for a case that uses the answer as a part (a layer trained inside a small
    model): called with the answer, it returns the function the case calls with ``args``
    instead; the expected result is that of ``harness(reference)``. The whole harness runs
    under the answer's time limit and forbidden-call watch. ``time_factor``: the case may take
    this many times the time limit (a harness that trains a small model runs hundreds of
    steps, and a reader's laptop may be slow or busy).
    """

    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    harness: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None
    time_factor: float = 1.0


@dataclass
class Exercise:
    """A self-test exercise.

    - ``id``: unique, ``"<topic>.<name>"``, e.g. ``"encoder.layernorm"``.
    - ``chapter``: chapter number (0-8), or ``CAPSTONE`` ("C") / ``LAB`` ("L"), unnumbered. ``title``, ``prompt``: Chinese text; the prompt
      states every edge case the cases test. ``hint``: the idea, not the formula, printed
      after a failed attempt. ``explanation``: the formula and why, printed by ``solution``.
    - ``kind``: ``"function"`` (the answer is a function, run on ``cases()``) or ``"value"``
      (the answer is a value compared with ``reference``).
    - ``returns``: a ``specs.Spec``: what the answer (or the function's result) must be;
      ``show`` prints its description, ``check`` compares with it.
    - ``cases``: zero-argument callable returning the hidden ``Case`` list (a callable, so
      tensors are built only when checked); required for ``"function"``.
    - ``reference``: the solution, a function or a value.
    - ``forbidden``: dotted names of functions the answer must not call, e.g.
      ``"torch.nn.functional.scaled_dot_product_attention"``.
    - ``launch``: for an answer that is not called directly (a Triton kernel): takes the
      answer and returns the function run on each case, or raises ``CannotRun``.
    - ``model_answer``: dotted name of the solution ``solution`` prints when it is not
      ``reference`` (a Triton kernel, whose module imports triton; a layer whose expected
      results come from the package's own module, which the task forbids).
    """

    id: str
    chapter: int | str
    title: str
    prompt: str
    hint: str
    explanation: str
    kind: str
    reference: Any
    returns: Spec
    cases: Callable[[], Sequence[Case]] | None = None
    forbidden: tuple[str, ...] = ()
    launch: Callable[[Any], Callable[..., Any]] | None = None
    model_answer: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", self.id):
            raise ValueError(
                f"id must look like 'topic.name' (lowercase, digits, _), got {self.id!r}"
            )
        if isinstance(self.chapter, str):
            if self.chapter not in _UNNUMBERED:
                raise ValueError(
                    f"chapter must be a chapter number or {CAPSTONE!r} (the capstone) or "
                    f"{LAB!r} (the debugging lab), got {self.chapter!r}"
                )
        elif isinstance(self.chapter, bool) or not isinstance(self.chapter, int):
            raise TypeError(
                f"chapter must be an int or {CAPSTONE!r} or {LAB!r}, got {type(self.chapter).__name__}"
            )
        if self.kind not in ("function", "value"):
            raise ValueError(f"kind must be 'function' or 'value', got {self.kind!r}")
        for name in ("title", "prompt", "hint", "explanation"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty str (exercise {self.id!r})")
        if not isinstance(self.returns, Spec):
            raise TypeError(
                f"returns of {self.id!r} must be a lecturekit.exercises.specs.Spec, "
                f"got {type(self.returns).__name__}"
            )
        if not isinstance(self.forbidden, tuple) or not all(
            isinstance(name, str) for name in self.forbidden
        ):
            raise TypeError(f"forbidden of {self.id!r} must be a tuple of dotted names")
        if self.kind == "function":
            if not callable(self.reference):
                raise TypeError(f"reference of function exercise {self.id!r} must be callable")
            if not callable(self.cases):
                raise TypeError(f"cases of function exercise {self.id!r} must be a callable")
        if self.launch is not None and not callable(self.launch):
            raise TypeError(f"launch of {self.id!r} must be callable or None")
        if not isinstance(self.model_answer, str):
            raise TypeError(f"model_answer of {self.id!r} must be a dotted name (str)")


_REGISTRY: dict[str, Exercise] = {}
_discovered = False


def register(exercise: Exercise) -> Exercise:
    """Add ``exercise`` to the registry (ids must be unique); returns it."""
    if not isinstance(exercise, Exercise):
        raise TypeError(f"exercise must be an Exercise, got {type(exercise).__name__}")
    if exercise.id in _REGISTRY:
        raise ValueError(f"an exercise with id {exercise.id!r} is already registered")
    _REGISTRY[exercise.id] = exercise
    return exercise


def unregister(exercise_id: str) -> None:
    """Remove an exercise (used by tests that register throwaway exercises)."""
    _REGISTRY.pop(exercise_id, None)


def _discover() -> None:
    """Import every ``chNN_*``, ``capstone_*`` and ``lab_*`` module once; they call ``register``."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for module in pkgutil.iter_modules(__path__):
        if re.fullmatch(r"(ch\d\d|capstone|lab)_\w+", module.name):
            importlib.import_module(f"{__name__}.{module.name}")


def get_exercise(exercise_id: str) -> Exercise:
    """The registered exercise ``exercise_id``; ``KeyError`` naming close ids if unknown."""
    _discover()
    check_type("exercise_id", exercise_id, str, "a str such as 'encoder.layernorm'")
    if exercise_id not in _REGISTRY:
        topic = str(exercise_id).split(".")[0]
        similar = [i for i in sorted(_REGISTRY) if i.split(".")[0] == topic]
        raise KeyError(
            f"no exercise with id {exercise_id!r}"
            + (f"; exercises of topic {topic!r}: {similar}" if similar else "")
        )
    return _REGISTRY[exercise_id]


def list_exercises(chapter: int | str | None = None) -> list[str]:
    """Ids of the registered exercises (of ``chapter`` if given: a number, ``CAPSTONE``, ``LAB``),
    ordered as the chapters are in the book, then by id."""
    _discover()
    chosen = [e for e in _REGISTRY.values() if chapter is None or e.chapter == chapter]
    return [e.id for e in sorted(chosen, key=lambda e: (_chapter_position(e.chapter), e.id))]


def show(exercise_id: str) -> None:
    """Print the task of exercise ``exercise_id``: what to compute, what to return, edge cases,
    wrapped to 80 display columns (JupyterLab and Colab print it in a block that never wraps)."""
    ex = get_exercise(exercise_id)
    what = "写一个函数" if ex.kind == "function" else "给出一个值"
    result = "返回" if ex.kind == "function" else "答案的形式"
    if ex.launch is not None:  # a kernel writes its result; the checker reads it back
        what, result = "写一个内核", "检查器读回的结果"
    lines = [
        f"练习 {ex.id}（{_chapter_name(ex.chapter)}）：{ex.title}",
        f"要求：{what}。",
        ex.prompt,
    ]
    lines.append(f"{result}：{ex.returns.describe()}。")
    if ex.forbidden:
        lines.append(f"不能调用：{'、'.join(ex.forbidden)}。")
    if ex.kind == "function":
        lines.append(f"函数不能修改传入的参数；每个测试最多运行 {TIME_LIMIT_S:g} 秒。")
    lines.append(f'完成后运行 check("{ex.id}", 你的答案) 检查。')
    print(wrap_display("\n".join(lines)))


def hint(exercise_id: str) -> None:
    """Print the hint of exercise ``exercise_id``: the idea, never the formula (on request;
    ``check`` prints it after a wrong answer)."""
    ex = get_exercise(exercise_id)
    print(wrap_display(f"💡 练习 {ex.id} 的提示：{ex.hint}"))
    print(f'   仍然卡住？运行 solution("{ex.id}") 看参考解答。')


def solution(exercise_id: str) -> None:
    """Print the reference solution of exercise ``exercise_id``: the formula and the code."""
    ex = get_exercise(exercise_id)
    print(f"练习 {ex.id} 的参考解答：")
    print(ex.explanation)
    if ex.kind == "value":
        print(f"答案：{ex.reference!r}")
        return
    if ex.model_answer:
        print(running.source_of(ex.model_answer))
        return
    try:
        print(inspect.getsource(ex.reference).rstrip())
    except (OSError, TypeError):  # source not available (e.g. a frozen install)
        print(f"（参考函数 {ex.reference.__qualname__} 的源代码不可用）")


def check(exercise_id: str, answer: Any, *, time_limit: float = TIME_LIMIT_S) -> bool:
    """Check ``answer`` against exercise ``exercise_id``, print feedback in Chinese.

    Returns True if every hidden case passes: a ``bool``, or in IPython a ``Verdict`` (true
    or false in the same way, but a cell ending in ``check(...)`` does not echo it).

    What it guarantees, on Linux (Colab included) without CUDA initialised in this process:
    the whole check of each hidden case (running the reference and the answer, comparing and
    formatting the result) runs in a forked worker process and may take at most about
    ``2 * time_limit + 2`` seconds, so no answer can hang ``check`` (a looping ``__repr__``,
    ``__float__`` or exception message included) or end the notebook's kernel
    (``os._exit``, a crash, a signal); at most ``running.OUTPUT_LIMIT`` characters of what
    the answer prints are shown. Elsewhere it runs in this process: the answer's own call
    still has ``time_limit`` seconds and ``sys.exit()`` is caught, but a result that loops
    when read can hang it. Either way the expected result is computed only after the answer
    returned, and an answer is refused that calls a forbidden function (in any thread it
    starts), switches the watch off (``sys.setprofile``), leaves a thread running, replaces
    a function of the checker, torch or numpy or changes a global setting such as torch's
    default dtype (see ``checking``). A learning aid, not a security boundary: C code, or code
    that digs the checker's own objects out of its call stack, can still cheat. ``time_limit``: seconds per case, finite, in
    ``(0, 86400]``.
    """
    ex = get_exercise(exercise_id)
    check_number("time_limit", time_limit, 0.0, MAX_TIME_LIMIT_S, exclusive=("minimum",))
    if answer is None or answer is Ellipsis:
        return running.verdict(
            checking.fail(ex, "尚未完成：还没有答案（得到 None）。完成练习后再运行 check。")
        )

    def work(step: Callable[..., None]) -> bool:
        if ex.kind == "value":
            step("比较你的答案")
            return checking.check_value(ex, answer)
        step("准备测试")
        function = answer
        if ex.launch is not None:
            try:
                function = ex.launch(answer)
            except CannotRun as reason:
                return checking.fail(ex, str(reason))
        return checking.check_function(ex, function, time_limit, step)

    limit = 2 * time_limit + 2
    outcome = running.isolated(work, step_limit=limit)
    if outcome.status == "timeout":
        message = checking.timeout_message(outcome.step, outcome.phase, outcome.seconds)
        return running.verdict(checking.fail(ex, message))
    if outcome.status == "died":
        message = checking.died_message(outcome.step, outcome.phase, outcome.exitcode)
        return running.verdict(checking.fail(ex, message))
    return running.verdict(outcome.passed)
