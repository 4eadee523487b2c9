"""What an exercise's answer must be, and how a student's answer is compared with it.

Every exercise names its return type with one of these specs; ``show`` prints the spec's
``describe()`` as part of the task, and ``check`` compares the student's result with the
reference's through ``compare``. A real number may be a Python float, a numpy scalar or a 0-d
tensor; an array must be a torch tensor, as every task says (a numpy array, a list or a tuple
is refused with a message that names it). What the task states is enforced: integers are
exact, a stated dtype must match, and floating-point tolerances follow that dtype. A tensor of
a subclass is read as the plain tensor it holds (its own methods never run), a ``str``
subclass as its plain value.

``compare`` returns None when the answer is right, else a ``Problem`` whose ``kind`` tells the
checker what feedback fits: ``"type"`` (the kind of object, its dtype: the formula may be
right), ``"shape"`` or ``"value"`` (the computation is wrong). It never raises, whatever the
answer is (objects whose ``__float__`` or ``__len__`` raise included). The checker hands it
``guard.plain`` copies of an answer's result; a ``guard.Foreign`` (an object of the answer's
own type, read once) is described by what was read.
"""

from __future__ import annotations

import math
import numbers
import sys
import unicodedata
from dataclasses import dataclass
from typing import Any

from lecturekit.exercises.guard import Foreign, plain_tensor

__all__ = ["Problem", "Spec", "Integer", "Real", "Array", "Items", "Text", "clip", "short"]

# (rtol, atol) per dtype the task asks for: a float32 answer computed another way differs from
# the reference by a few float32 ulps, a float64 answer by far less.
FLOAT_TOLERANCE = {
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
    "float32": (1e-5, 1e-5),
    "float64": (1e-7, 1e-7),
}


@dataclass(frozen=True)
class Problem:
    """Why an answer does not match: ``kind`` is "type", "shape" or "value"."""

    kind: str
    message: str


class Spec:
    """Base class: ``describe()`` (Chinese, for the task) and ``compare(expected, got)``."""

    def describe(self) -> str:
        raise NotImplementedError

    def compare(self, expected: Any, got: Any, where: str = "") -> Problem | None:
        """None if ``got`` matches the reference result ``expected``; never raises."""
        try:
            return self._compare(expected, got, where)
        except Exception as error:  # an answer object that breaks on inspection
            return Problem(
                "type",
                f"无法读取你的结果{_at(where)}（{type(error).__name__}: {clip(str(error), 200)}），"
                f"得到 {short(got)}",
            )

    def _compare(self, expected: Any, got: Any, where: str) -> Problem | None:
        raise NotImplementedError


@dataclass(frozen=True)
class Integer(Spec):
    """An exact integer: int, numpy integer, or a 0-d integer tensor/array (not bool)."""

    def describe(self) -> str:
        return "一个整数（int；numpy 整数或 0 维整数张量也可以），必须与答案完全相等"

    def _compare(self, expected: Any, got: Any, where: str) -> Problem | None:
        at = _at(where)
        value = _scalar(got)
        if isinstance(value, Problem):
            return Problem("type", f"类型不对{at}：题目要求一个整数，{value.message}")
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return Problem(
                "type",
                f"类型不对{at}：题目要求一个整数，你的结果是 {_kind_name(got)} {short(got)}。"
                "即使数值相同，也请用整数运算（例如 // 而不是 /）或 int(...) 得到整数",
            )
        if int(value) != int(expected):
            return Problem("value", f"期望 {int(expected)}，得到 {int(value)}{at}")
        return None


@dataclass(frozen=True)
class Real(Spec):
    """A real number: Python/numpy int or float, or a 0-d tensor/array, within a tolerance.

    The default tolerance is float32's, so a value computed in float32 is right too.
    """

    rtol: float = 1e-5
    atol: float = 1e-8

    def describe(self) -> str:
        return (
            "一个实数（Python float、numpy 标量或 0 维张量都可以），"
            f"与答案的相对误差不超过 {self.rtol:g}"
        )

    def _compare(self, expected: Any, got: Any, where: str) -> Problem | None:
        at = _at(where)
        value = _scalar(got)
        if isinstance(value, Problem):
            return Problem("type", f"类型不对{at}：题目要求一个实数，{value.message}")
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return Problem(
                "type", f"类型不对{at}：题目要求一个实数，你的结果是 {_kind_name(got)} {short(got)}"
            )
        number, target = float(value), float(expected)
        if math.isnan(number):
            return Problem("value", f"期望 {target:.10g}，得到 nan{at}")
        if not math.isclose(number, target, rel_tol=self.rtol, abs_tol=self.atol):
            return Problem("value", f"期望 {target:.10g}，得到 {number:.10g}{at}")
        return None


@dataclass(frozen=True)
class Array(Spec):
    """A torch tensor of the reference's shape and of ``dtype`` (not a numpy array or a list).

    ``dtype`` is a torch dtype name ("float32", "bool", "int64", ...); ``shape`` the shape as
    the task writes it, e.g. "(N, V)" or "与 m1 相同". Floating-point values are compared with
    the dtype's tolerance; equal infinities match; NaN never matches.
    """

    dtype: str
    shape: str

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, str) or self.dtype.startswith("torch."):
            raise ValueError(f"dtype must be a dtype name such as 'float32', got {self.dtype!r}")

    def describe(self) -> str:
        shape = f" {self.shape}" if self.shape.startswith("(") else self.shape
        return f"形状{shape}、dtype 为 torch.{self.dtype} 的张量"

    def _compare(self, expected: Any, got: Any, where: str) -> Problem | None:
        at = _at(where)
        import numpy

        if not is_tensor(got):
            return Problem("type", f"类型不对{at}：{_not_a_tensor(got)}")
        array = _as_array(got)
        if isinstance(array, Problem):
            return Problem("type", f"类型不对{at}：题目要求一个张量，{array.message}")
        values, dtype = array
        want = tuple(expected.shape)
        if tuple(values.shape) != want:
            return Problem("shape", f"形状不对{at}：期望 {want}，得到 {tuple(values.shape)}")
        if dtype != self.dtype:
            return Problem(
                "type",
                f"dtype 不对{at}：题目要求 torch.{self.dtype}，你的结果是 {dtype}"
                + ("（数值没有检查）" if values.size else ""),
            )
        reference = _as_array(expected)[0]
        if self.dtype in FLOAT_TOLERANCE:
            rtol, atol = FLOAT_TOLERANCE[self.dtype]
            g, e = values.astype(numpy.float64), reference.astype(numpy.float64)
            # Equal infinities match (inf - inf is NaN) and an infinite reference has no
            # tolerance; NaN never matches, even where the reference is NaN.
            with numpy.errstate(invalid="ignore"):
                bad = ~((g == e) | (numpy.isfinite(e) & (abs(g - e) <= atol + rtol * abs(e))))
        else:
            bad = values != reference
        n_bad = int(bad.sum())
        if n_bad == 0:
            return None
        flat = int(numpy.flatnonzero(bad)[0])
        first = tuple(int(i) for i in numpy.unravel_index(flat, bad.shape))
        return Problem(
            "value",
            f"数值不对{at}：{n_bad}/{bad.size} 个元素不同，"
            f"例如下标 {first}：期望 {short(reference[first].item())}，"
            f"得到 {short(values[first].item())}\n"
            f"  期望 {short(expected)}\n  得到 {short(got)}",
        )


@dataclass(frozen=True)
class Items(Spec):
    """A fixed-length tuple (a list is accepted too) whose items follow ``items``.

    ``names`` name the items in the description and in messages, e.g. ("decoder_input",
    "labels"); without names the items are called by their index. ``text`` replaces the
    generated description. ``reveal=False`` keeps the answer hidden: a wrong value names the
    wrong items ("交叉注意力 不对") instead of printing the expected tuple, for a value exercise
    whose expected value is the whole answer.
    """

    items: tuple[Spec, ...]
    names: tuple[str, ...] = ()
    text: str = ""  # a description to use instead of the generated one
    reveal: bool = True  # False: a wrong value names the wrong items, not the expected value

    def describe(self) -> str:
        if self.text:
            return self.text
        n = len(self.items)
        if self.names:
            parts = "；".join(
                f"{name} 是{spec.describe()}"
                for name, spec in zip(self.names, self.items, strict=True)
            )
            return f"一个{_tuple_name(n)} ({', '.join(self.names)})：{parts}"
        inner = self.items[0].describe() if len(set(self.items)) == 1 else "……"
        return f"一个{_tuple_name(n)}，每个元素是{inner}"

    def _compare(self, expected: Any, got: Any, where: str) -> Problem | None:
        at = _at(where)
        if not isinstance(got, (tuple, list)):
            return Problem(
                "type",
                f"类型不对{at}：题目要求一个{_tuple_name(len(self.items))}，你的结果是 {_kind_name(got)}",
            )
        if len(got) != len(self.items):
            return Problem(
                "type",
                f"长度不对{at}：题目要求 {len(self.items)} 个元素，你的结果有 {len(got)} 个",
            )
        wrong: list[str] = []  # names of the items whose value is wrong (reveal=False)
        right: list[str] = []
        for i, (spec, e, g) in enumerate(zip(self.items, expected, got, strict=True)):
            name = f" {self.names[i]}" if self.names else f"[{i}]"
            problem = spec.compare(e, g, f"{where}{name}".strip())
            if problem is not None and problem.kind == "value" and not self.reveal:
                wrong.append(name.strip())  # the expected value stays hidden: name the item
                continue
            right.append(name.strip())
            if problem is not None and problem.kind == "value" and _all_scalars(self):
                # a pair of words or of shapes reads better whole than item by item
                return Problem("value", f"期望 {short(expected)}，得到 {short(got)}{at}")
            if problem is not None:
                return problem
        if wrong:
            correct = f"，{'、'.join(right)} 对了" if right else ""
            return Problem("value", f"得到 {short(got)}{at}：{'、'.join(wrong)} 不对{correct}")
        return None


@dataclass(frozen=True)
class Text(Spec):
    """A str, equal to the reference."""

    def describe(self) -> str:
        return "一个字符串 (str)"

    def _compare(self, expected: Any, got: Any, where: str) -> Problem | None:
        at = _at(where)
        if not isinstance(got, str):
            return Problem(
                "type", f"类型不对{at}：题目要求 str，你的结果是 {_kind_name(got)} {short(got)}"
            )
        if str.__str__(got) == expected:  # the plain value: a subclass's __eq__ may lie
            return None
        return Problem("value", f"期望 {short(expected)}，得到 {short(got)}{at}")


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def _all_scalars(spec: Spec) -> bool:
    if isinstance(spec, Items):
        return all(_all_scalars(item) for item in spec.items)
    return isinstance(spec, (Integer, Real, Text))


def _tuple_name(n: int) -> str:
    return {2: "二元组", 3: "三元组", 4: "四元组"}.get(n, f" {n} 元组")


def _at(where: str) -> str:
    return f"（位置 {where}）" if where else ""


def is_tensor(x: Any) -> bool:
    """A tensor by its real type (an object may claim any ``__class__``)."""
    torch = sys.modules.get("torch")
    return torch is not None and issubclass(type(x), torch.Tensor)


def is_ndarray(x: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and issubclass(type(x), numpy.ndarray)


def _kind_name(x: Any) -> str:
    if isinstance(x, Foreign):
        return x.type_name
    if is_tensor(x):
        return f"{x.dtype} 张量"
    if is_ndarray(x):
        return f"{x.dtype} 数组"
    return type(x).__name__


def _scalar(x: Any) -> Any:
    """A Python/numpy number for a scalar answer, or a Problem (a wrong container)."""
    if is_tensor(x) or is_ndarray(x):
        if x.ndim != 0:
            size = x.numel() if is_tensor(x) else x.size
            advice = "；用 .item() 取出其中的数" if size == 1 else ""
            return Problem("type", f"你的结果是形状 {tuple(x.shape)} 的{_kind_name(x)}{advice}")
        return x.item()  # a Python bool, int, float or complex
    if isinstance(x, Foreign):
        if x.error:
            return Problem("type", f"无法读取你的结果的数值（{x.error}），得到 {x.text}")
        if x.number is None:
            return Problem("type", f"你的结果是 {x.type_name} {x.text}")
        return x.number
    if isinstance(x, numbers.Number):
        return x
    if hasattr(type(x), "__float__"):
        return float(x)  # may raise: Spec.compare reports it as a type problem
    return Problem("type", f"你的结果是 {type(x).__name__} {short(x)}")


def _not_a_tensor(x: Any) -> str:
    """What to say when an array answer is not a tensor."""
    if isinstance(x, tuple):
        return (
            f"你返回的是一个 tuple（{tuple.__len__(x)} 个元素），题目要的是一个 torch 张量："
            "是不是多返回了别的东西？"
        )
    if isinstance(x, list):
        return "你返回的是 list，题目要的是 torch 张量（可以用 torch.tensor 转换）"
    if is_ndarray(x):
        return (
            "你返回的是 numpy 数组 (ndarray)，题目要的是 torch 张量（可以用 torch.from_numpy 转换）"
        )
    return f"题目要求一个张量，你的结果是 {_kind_name(x)} {short(x)}"


def _as_array(x: Any) -> tuple[Any, str] | Problem:
    """(numpy values, torch dtype name) of a tensor (read as a plain tensor, whatever its
    subclass does), numpy array or nested list (the reference's result)."""
    import numpy

    if is_tensor(x):
        t = plain_tensor(x)
        if t.device.type != "cpu":
            if t.device.type == "meta":
                return Problem("type", "你的结果在 meta 设备上，没有数值")
            t = t.cpu()
        name = str(t.dtype).removeprefix("torch.")
        if t.is_complex() or name.startswith(("float8", "q")):
            kind = "复数" if t.is_complex() else ("量化" if t.is_quantized else "8 位浮点")
            return Problem(
                "type",
                f"你的结果是 {_kind_name(x)}（{kind}张量），题目要普通的整数、浮点或布尔张量",
            )
        if t.layout is not sys.modules["torch"].strided or t.is_nested:
            return Problem("type", f"你的结果是 {t.layout} 布局的张量，题目要普通（稠密）张量")
        if t.dtype.is_floating_point and name not in ("float32", "float64"):
            t = t.double()  # float16/bfloat16: numpy cannot hold bfloat16
        return t.numpy(), name
    if is_ndarray(x) or isinstance(x, (list, tuple)):
        values = numpy.asarray(x)
        if values.dtype.kind not in "biuf":
            return Problem(
                "type", f"你的结果是 {type(x).__name__}，转成数组后 dtype 为 {values.dtype}"
            )
        name = "bool" if values.dtype.kind == "b" else values.dtype.name
        return values, name
    return Problem("type", f"你的结果是 {type(x).__name__} {short(x)}")


def short(x: Any, limit: int = 300) -> str:
    """A compact, rounded description for feedback messages; never raises."""
    try:
        if isinstance(x, Foreign):
            text = x.text
        elif isinstance(x, str):
            x = str.__str__(x)
            if len(x) > limit:  # never the repr of a huge string
                return f"{x[:limit]!r}…（共 {len(x)} 个字符，只显示前 {limit} 个）"
            text = repr(x)
        elif isinstance(x, float):
            integral = x.is_integer() and abs(x) < 1e16
            # 4 significant digits: a float32 result differs between machines in its last
            # bits, and a 6th digit would then differ between readers' screens
            text = repr(x) if integral else f"{x:.4g}"
        elif is_tensor(x) or is_ndarray(x):
            name = type(x).__name__
            x = plain_tensor(x) if is_tensor(x) else x
            shape = tuple(x.shape)
            size = x.numel() if is_tensor(x) else x.size
            if size <= 64:
                values = x.cpu().tolist() if is_tensor(x) else x.tolist()
                inner = repr(_round_nested(values))
            else:
                inner = "…"
            text = f"{name}(shape={shape}, dtype={x.dtype}, {inner})"
        elif isinstance(x, (list, tuple)):
            text = repr(_round_nested(x[:64]))  # enough to fill ``limit``
            if len(x) > 64:
                text = f"{text[:-1]}, …{text[-1]}"
        else:
            text = repr(x)
    except Exception:
        text = f"<{type(x).__name__} 对象>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Shown:
    """Shows as the given text in a repr (a tensor inside a tuple, described by ``short``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def clip(text: str, limit: int = 2000) -> str:
    """``text``, cut to ``limit`` characters with a note saying so."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…（已截断：共 {len(text)} 个字符，只显示前 {limit} 个）"


def _round_nested(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 4)
    if is_tensor(x) or is_ndarray(x):
        return _Shown(short(x, 120))
    if isinstance(x, (list, tuple)):
        return type(x)(_round_nested(v) for v in x) if type(x) in (list, tuple) else x
    return x


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal or notebook: 2 for a wide (CJK) character."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def wrap_display(text: str, width: int = 80) -> str:
    """``text`` with every line broken to at most ``width`` display columns.

    A printed exercise task is a ``<pre>`` block in JupyterLab and Colab, which never wraps:
    one long line runs off the screen. Lines break between two CJK characters or at a space,
    never inside a Latin word or an identifier; continuation lines keep the line's indent.
    """
    out: list[str] = []
    for line in text.split("\n"):
        indent = line[: len(line) - len(line.lstrip(" "))]
        while display_width(line) > width:
            cut = _break_point(line, width)
            if cut <= len(indent):
                break  # one unbreakable token longer than the line: leave it whole
            out.append(line[:cut].rstrip(" "))
            line = indent + line[cut:].lstrip(" ")
        out.append(line)
    return "\n".join(out)


def _break_point(line: str, width: int) -> int:
    """Index of the last break allowed within ``width`` columns (0 if there is none)."""
    columns, best = 0, 0
    for i, ch in enumerate(line):
        columns += display_width(ch)
        if columns > width:
            break
        nxt = line[i + 1] if i + 1 < len(line) else ""
        wide = display_width(ch) == 2 or display_width(nxt) == 2
        if (
            ch == " "
            or nxt == " "
            or (wide and nxt not in "，。、；：）」』" and ch not in "（「『")
        ):
            best = i + 1
    return best
