"""Self-test exercises with automatic checking and feedback in Chinese.

A chapter registers its exercises in ``lecturekit/exercises/chNN_<topic>.py``::

    from lecturekit.exercises import Case, Exercise, register

    register(Exercise(
        id="encoder.layernorm", chapter=3, title="...", prompt="...", hint="...",
        kind="function",                                  # or "value"
        cases=lambda: [Case(args=(x,), label="...")],     # hidden test inputs
        reference=reference_layernorm,                    # the solution
        wrong_answers=[forgot_eps, normalises_wrong_axis],
    ))

Those modules are found with ``pkgutil`` on first use, so adding a file needs no other edit.
In a notebook the student calls ``show(id)`` to read the task and ``check(id, answer)`` to
check an answer: a function (``kind="function"``: it is called on every hidden case and its
result compared with the reference's) or a value (``kind="value"``). ``check`` prints what
happened and returns True/False; whatever the student's code does (raise, return None, return
the wrong type or shape) is reported, never raised.
"""

from __future__ import annotations

import copy
import importlib
import math
import pkgutil
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Case", "Exercise", "register", "check", "show", "list_exercises", "get_exercise"]

ATOL = 1e-5
RTOL = 1e-5


@dataclass
class Case:
    """One hidden test input: ``answer(*args, **kwargs)`` is compared with the reference's."""

    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    label: str = ""


@dataclass
class Exercise:
    """A self-test exercise.

    - ``id``: unique, ``"<topic>.<name>"``, e.g. ``"encoder.layernorm"``.
    - ``chapter``: chapter number (0-8). ``title``, ``prompt``, ``hint``: Chinese text.
    - ``kind``: ``"function"`` (the answer is a function, run on ``cases()``) or ``"value"``
      (the answer is a value compared with ``reference``).
    - ``cases``: zero-argument callable returning the hidden ``Case`` list (a callable, so
      tensors are built only when checked); required for ``"function"``.
    - ``reference``: the solution, a function or a value.
    - ``wrong_answers``: plausible mistakes; a test asserts each one fails the checker.
    - ``compare``: ``compare(expected, got) -> bool``; default: structural comparison,
      tensors/arrays/floats with ``allclose(atol=1e-5, rtol=1e-5)``, shapes and dtypes must match.
    """

    id: str
    chapter: int
    title: str
    prompt: str
    hint: str
    kind: str
    reference: Any
    cases: Callable[[], Sequence[Case]] | None = None
    wrong_answers: list[Any] = field(default_factory=list)
    compare: Callable[[Any, Any], bool] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", self.id):
            raise ValueError(
                f"id must look like 'topic.name' (lowercase, digits, _), got {self.id!r}"
            )
        if isinstance(self.chapter, bool) or not isinstance(self.chapter, int):
            raise TypeError(f"chapter must be an int, got {type(self.chapter).__name__}")
        if self.kind not in ("function", "value"):
            raise ValueError(f"kind must be 'function' or 'value', got {self.kind!r}")
        for name in ("title", "prompt", "hint"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty str (exercise {self.id!r})")
        if self.kind == "function":
            if not callable(self.reference):
                raise TypeError(f"reference of function exercise {self.id!r} must be callable")
            if not callable(self.cases):
                raise TypeError(f"cases of function exercise {self.id!r} must be a callable")
        if not isinstance(self.wrong_answers, list) or not self.wrong_answers:
            raise ValueError(f"wrong_answers of {self.id!r} must be a non-empty list")


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
    """Import every ``chNN_*`` module of this package once; they call ``register``."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for module in pkgutil.iter_modules(__path__):
        if re.fullmatch(r"ch\d\d_\w+", module.name):
            importlib.import_module(f"{__name__}.{module.name}")


def get_exercise(exercise_id: str) -> Exercise:
    """The registered exercise ``exercise_id``; ``KeyError`` naming close ids if unknown."""
    _discover()
    if exercise_id not in _REGISTRY:
        topic = str(exercise_id).split(".")[0]
        similar = [i for i in sorted(_REGISTRY) if i.split(".")[0] == topic]
        raise KeyError(
            f"no exercise with id {exercise_id!r}"
            + (f"; exercises of topic {topic!r}: {similar}" if similar else "")
        )
    return _REGISTRY[exercise_id]


def list_exercises(chapter: int | None = None) -> list[str]:
    """Ids of the registered exercises (of ``chapter`` if given), ordered by chapter and id."""
    _discover()
    chosen = [e for e in _REGISTRY.values() if chapter is None or e.chapter == chapter]
    return [e.id for e in sorted(chosen, key=lambda e: (e.chapter, e.id))]


def show(exercise_id: str) -> None:
    """Print the task of exercise ``exercise_id``."""
    ex = get_exercise(exercise_id)
    what = "写一个函数" if ex.kind == "function" else "给出一个值"
    print(f"练习 {ex.id}（第 {ex.chapter} 章）：{ex.title}")
    print(f"要求：{what}。")
    print(ex.prompt)
    print(f'完成后运行 check("{ex.id}", 你的答案) 检查。')


def check(exercise_id: str, answer: Any) -> bool:
    """Check ``answer`` against exercise ``exercise_id``, print feedback in Chinese.

    Returns True if every hidden case passes. Student errors are reported, never raised.
    """
    ex = get_exercise(exercise_id)
    if answer is None or answer is Ellipsis:
        return _fail(ex, "尚未完成：还没有答案（得到 None）。请先完成练习，再运行 check。")
    if ex.kind == "value":
        return _check_value(ex, answer)
    return _check_function(ex, answer)


def _check_value(ex: Exercise, answer: Any) -> bool:
    problem = _compare(ex, ex.reference, answer)
    if problem is not None:
        return _fail(ex, f"答案不对：{problem}")
    print(f"✅ 通过！练习 {ex.id} 的答案正确。")
    return True


def _check_function(ex: Exercise, answer: Any) -> bool:
    if not callable(answer):
        return _fail(
            ex,
            f"类型不对：这道题要一个函数，你传入的是 {type(answer).__name__}。"
            "请传函数本身（不要加括号调用它）。",
        )
    cases = list(ex.cases())
    for number, case in enumerate(cases, start=1):
        label = f"第 {number}/{len(cases)} 个测试" + (f"（{case.label}）" if case.label else "")
        expected = ex.reference(*_copied(case.args), **_copied(case.kwargs))
        try:
            got = answer(*_copied(case.args), **_copied(case.kwargs))
        except NotImplementedError:
            return _fail(ex, f"尚未完成：{label}时函数抛出了 NotImplementedError。")
        except Exception as error:  # the student's code may raise anything; report it
            return _fail(ex, f"{label}时你的函数出错：{type(error).__name__}: {error}")
        if got is None:
            return _fail(ex, f"尚未完成：{label}时函数返回了 None（是不是忘了 return？）。")
        problem = _compare(ex, expected, got)
        if problem is not None:
            return _fail(ex, f"{label}没有通过：{problem}\n  输入：{_describe_args(case)}")
    print(f"✅ 通过！练习 {ex.id} 的 {len(cases)} 个测试全部正确。")
    return True


def _fail(ex: Exercise, message: str) -> bool:
    print(f"❌ 练习 {ex.id}：{message}")
    print(f"💡 提示：{ex.hint}")
    return False


def _copied(value: Any) -> Any:
    """Deep copy so that an answer that modifies its inputs in place cannot fool the check."""
    try:
        return copy.deepcopy(value)
    except Exception:  # e.g. non-leaf tensors that require grad cannot be deep-copied
        return value


def _describe_args(case: Case) -> str:
    parts = [_short(a) for a in case.args] + [f"{k}={_short(v)}" for k, v in case.kwargs.items()]
    return ", ".join(parts) if parts else "（无参数）"


def _compare(ex: Exercise, expected: Any, got: Any) -> str | None:
    """None if ``got`` matches ``expected``, else a Chinese explanation of the difference."""
    if ex.compare is None:
        return _default_compare(expected, got)
    try:
        ok = ex.compare(expected, got)
    except Exception as error:
        return f"无法比较你的结果（{type(error).__name__}: {error}），得到 {_short(got)}"
    return None if ok else f"期望 {_short(expected)}，得到 {_short(got)}"


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _is_ndarray(x: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(x, numpy.ndarray)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _default_compare(expected: Any, got: Any, where: str = "") -> str | None:
    at = f"（位置 {where}）" if where else ""
    if _is_tensor(expected) or _is_ndarray(expected):
        return _compare_arrays(expected, got, at)
    if isinstance(expected, bool):
        if not isinstance(got, bool) and not (_is_tensor(got) or _is_ndarray(got)):
            return f"类型不对{at}：期望 bool，得到 {type(got).__name__}"
        if _is_tensor(got) or _is_ndarray(got):
            if _size(got) != 1 or _dtype_kind(got) != "bool":
                return f"类型不对{at}：期望一个 bool，得到 {_short(got)}"
            got = bool(got.item())
        return None if got == expected else f"期望 {expected}，得到 {got}{at}"
    if _is_number(expected):
        if _is_tensor(got) or _is_ndarray(got):
            if _size(got) != 1:
                return f"类型不对{at}：期望一个数，得到形状 {tuple(got.shape)} 的数组"
            got = got.item()
        if not _is_number(got) and not hasattr(got, "__float__"):
            return f"类型不对{at}：期望一个数，得到 {type(got).__name__}"
        value = float(got)
        if math.isnan(value) or not math.isclose(value, expected, rel_tol=RTOL, abs_tol=ATOL):
            return f"期望 {_short(expected)}，得到 {_short(got)}{at}"
        return None
    if isinstance(expected, str):
        if not isinstance(got, str):
            return f"类型不对{at}：期望 str，得到 {type(got).__name__}"
        return None if got == expected else f"期望 {expected!r}，得到 {got!r}{at}"
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return f"类型不对{at}：期望 {type(expected).__name__}，得到 {type(got).__name__}"
        if len(got) != len(expected):
            return f"长度不对{at}：期望 {len(expected)} 个元素，得到 {len(got)} 个"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            problem = _default_compare(e, g, f"{where}[{i}]")
            if problem is not None:
                return problem
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"类型不对{at}：期望 dict，得到 {type(got).__name__}"
        if set(got) != set(expected):
            return f"键不对{at}：期望 {sorted(map(str, expected))}，得到 {sorted(map(str, got))}"
        for key in expected:
            problem = _default_compare(expected[key], got[key], f"{where}[{key!r}]")
            if problem is not None:
                return problem
        return None
    try:
        equal = bool(got == expected)
    except Exception:
        equal = False
    return None if equal else f"期望 {_short(expected)}，得到 {_short(got)}{at}"


def _compare_arrays(expected: Any, got: Any, at: str) -> str | None:
    import numpy

    kind = "torch.Tensor" if _is_tensor(expected) else "numpy.ndarray"
    if not (_is_tensor(got) if _is_tensor(expected) else _is_ndarray(got)):
        return f"类型不对{at}：期望 {kind}，得到 {type(got).__name__}"
    if tuple(got.shape) != tuple(expected.shape):
        return f"形状不对{at}：期望 {tuple(expected.shape)}，得到 {tuple(got.shape)}"
    if _dtype_kind(expected) != _dtype_kind(got):
        return f"dtype 不对{at}：期望 {expected.dtype}，得到 {got.dtype}"
    e, g = _as_numpy(expected), _as_numpy(got)
    if _dtype_kind(expected) in ("float", "complex"):
        # Equal infinities match (inf - inf is NaN) and an infinite reference has no
        # tolerance (inf <= inf would accept anything); NaN never matches, even where the
        # reference is NaN: a student's NaN is a bug.
        with numpy.errstate(invalid="ignore"):  # inf - inf: decided by g == e, no warning
            bad = ~((g == e) | (numpy.isfinite(e) & (abs(g - e) <= ATOL + RTOL * abs(e))))
    else:
        bad = g != e
    n_bad = int(bad.sum())
    if n_bad == 0:
        return None
    # flat index -> multi-index also works for 0-d arrays, where nonzero() is an error
    first = tuple(
        int(i) for i in numpy.unravel_index(int(numpy.flatnonzero(bad)[0]), numpy.shape(bad))
    )
    return (
        f"数值不对{at}：{n_bad}/{bad.size} 个元素不同，"
        f"例如下标 {first}：期望 {_short(e[first].item())}，得到 {_short(g[first].item())}\n"
        f"  期望 {_short(expected)}\n  得到 {_short(got)}"
    )


def _as_numpy(x: Any) -> Any:
    """Tensor or array -> numpy array (float64 for floating point, so bf16/fp16 work too)."""
    import numpy

    if _is_tensor(x):
        x = x.detach().cpu()
        x = x.double() if x.is_floating_point() else x
        return x.resolve_conj().numpy() if x.is_complex() else x.numpy()
    return x.astype(numpy.float64) if _dtype_kind(x) == "float" else x


def _size(x: Any) -> int:
    return int(x.numel()) if _is_tensor(x) else int(x.size)


def _dtype_kind(array: Any) -> str:
    name = str(array.dtype).split(".")[-1]
    if name.startswith("bool"):
        return "bool"
    if name.startswith(("float", "bfloat", "half", "double")):
        return "float"
    if name.startswith("complex"):
        return "complex"
    return "int"


def _short(x: Any, limit: int = 300) -> str:
    """A compact, rounded description for feedback messages."""
    if isinstance(x, float):
        return f"{x:.6g}"
    if _is_tensor(x) or _is_ndarray(x):
        shape = tuple(x.shape)
        if _size(x) <= 64:
            values = x.detach().cpu().tolist() if _is_tensor(x) else x.tolist()
            text = repr(_round_nested(values))
        else:
            text = "…"
        result = f"{type(x).__name__}(shape={shape}, dtype={x.dtype}, {text})"
    else:
        result = repr(_round_nested(x)) if isinstance(x, (list, tuple)) else repr(x)
    return result if len(result) <= limit else result[: limit - 1] + "…"


def _round_nested(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, (list, tuple)):
        return type(x)(_round_nested(v) for v in x)
    return x
