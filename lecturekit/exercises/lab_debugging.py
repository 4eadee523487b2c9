"""Debugging-lab exercises: find the bug hidden in a model. ``bugs.mystery(case)`` plants the
bug (or bugs) of exercise ``lab.find_bug_<case>`` without naming it: case 1 a bug that the
lab's flag-pattern table leaves out, case 2 two bugs at once, case 3 a bug that shows only in
training. The reader runs the diagnostics, reasons from what they flag and what they pass,
and answers with the bug's name (case 2: both names). Registered with ``chapter=LAB`` ("L")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lecturekit.exercises import LAB, Exercise, register
from lecturekit.exercises.specs import Problem, Spec, short
from lecturekit.lab.bugs import _MYSTERIES, BUGS

_UNKNOWN = "不是已知的 bug 名字；可选的名字见 bugs.BUGS（本章开头打印的开关清单）"


def _plain_name(got: Any) -> str | Problem:
    """``got`` as a plain ``str`` that names a bug (a subclass's ``__eq__`` and ``__hash__``
    may lie, so its plain value is read), or the problem with it."""
    if not isinstance(got, str):
        return Problem("type", f"类型不对：每个名字应是 str，你给的是 {short(got)}")
    name = str.__str__(got).strip()  # a stray space or newline is not the mistake asked about
    return name if name in BUGS else Problem("type", f"{short(name)} {_UNKNOWN}")


@dataclass(frozen=True)
class BugName(Spec):
    """The name of one planted bug; a wrong name is refused without revealing the right one."""

    def describe(self) -> str:
        return "一个字符串 (str)：bugs.BUGS 里的一个名字，例如 'causal_mask_missing'"

    def _compare(self, expected: Any, got: Any, where: str) -> Problem | None:
        name = _plain_name(got)
        if isinstance(name, Problem):
            return name
        if name != expected:
            return Problem("value", f"藏着的不是 {short(name)}，再对照一下哪些诊断报警、哪些放行")
        return None


@dataclass(frozen=True)
class BugPair(Spec):
    """The names of two planted bugs, in any order (a list or tuple of two str)."""

    def describe(self) -> str:
        return "两个字符串组成的列表或元组：bugs.BUGS 里的两个名字，顺序不限"

    def _compare(self, expected: Any, got: Any, where: str) -> Problem | None:
        if isinstance(got, str) or not isinstance(got, list | tuple):
            return Problem(
                "type", f"这里藏着两个 bug：请给出两个名字组成的列表，而不是 {short(got)}"
            )
        names = [_plain_name(x) for x in _bounded(got)]
        problem = next((n for n in names if isinstance(n, Problem)), None)
        if problem is not None:
            return problem
        if len(names) != 2 or len(set(names)) != 2:
            return Problem("value", f"请给出正好两个不同的名字，你给了 {short(names)}")
        if set(names) != set(expected):
            return Problem("value", "这两个名字不都对：哪些诊断报警，能不能由两个 bug 各自解释？")
        return None


def _bounded(items: Iterable[Any]) -> list[Any]:
    """The first few items of ``items`` (enough to see that there are more than two)."""
    out: list[Any] = []
    for item in items:
        out.append(item)
        if len(out) > 3:
            break
    return out


_PROMPTS = {
    1: (
        "在 `with bugs.mystery(1):` 里面，模型被种下了一个 bug，它不在本章“每个 bug 让哪些"
        "诊断报警”的表里，但在开头打印的开关清单 bugs.BUGS 里。在这个代码块里对一个新建的"
        "小模型运行诊断，根据报警的组合和诊断的原话（以及掩码图）说出是哪个 bug。"
    ),
    2: (
        "在 `with bugs.mystery(2):` 里面，模型被同时种下了两个 bug。对一个新建的小模型运行"
        "诊断，找出哪两个 bug 合起来正好解释报警的组合，给出它们的名字（顺序不限）。"
    ),
    3: (
        "在 `with bugs.mystery(3):` 里面藏着一个 bug，新建模型的那些探针全都放行。"
        "在代码块里训练一个小模型，看损失曲线和贪心输出，再用合适的诊断确认，说出是哪个 bug。"
    ),
}
_HINTS = {
    1: "报警的组合和表里的某一行一样时，看 mask_sanity 报告的是哪几个问题，再打印掩码图。",
    2: "先找一个能解释一部分报警的 bug，再看剩下的报警由哪个 bug 解释；两个都要说得通。",
    3: "模型本身的探针都放行时，检查训练用到的其余部分：数据、损失、学习率，各有各的诊断。",
}
_EXPLANATIONS = {
    1: "因果掩码差一位时，每个位置多看见下一个位置：未来泄漏，参考实现不一致，但每个位置"
    "仍看得到自己、每行的和仍为 1，所以 mask_sanity 只报“未来的位置有权重”，掩码图多出"
    "一条斜带。掩码反了时它还会报“看不到自己”和“行和不是 1”。",
    2: "因果性、mask_sanity 报警而参考实现放行，是因果掩码缺失；padding_probe 和"
    "encoder_padding_probe 一起报警，是源句的填充掩码缺失（只有交叉注意力缺掩码时，"
    "编码器的输出不变）。",
    3: "损失几乎停在 ln V 附近，降得极慢；loss_reference_check 报警而 loss_padding_probe 放行："
    "损失函数收到的是概率而不是 logits，softmax 做了两次，梯度被压得很小。",
}


def _register(case: int) -> None:
    hidden = _MYSTERIES[case]
    register(
        Exercise(
            id=f"lab.find_bug_{case}",
            chapter=LAB,
            title=("找出不在表里的 bug", "同时藏着的两个 bug", "只在训练时露面的 bug")[case - 1],
            prompt=_PROMPTS[case],
            hint=_HINTS[case],
            explanation=_EXPLANATIONS[case],
            kind="value",
            returns=BugPair() if len(hidden) == 2 else BugName(),
            reference=tuple(hidden) if len(hidden) == 2 else hidden[0],
        )
    )


for _case in sorted(_MYSTERIES):
    _register(_case)
