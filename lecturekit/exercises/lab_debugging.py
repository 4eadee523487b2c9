"""Debugging-lab exercises: find the bug hidden in a model. ``bugs.mystery(seed)`` plants
one bug of ``bugs.MYSTERY_POOL`` without naming it; the reader runs the diagnostics and
answers with the bug's name. Registered with ``chapter=LAB`` ("L")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lecturekit.exercises import LAB, Exercise, register
from lecturekit.exercises.specs import Problem, Spec, short
from lecturekit.lab.bugs import BUGS, MYSTERY_POOL, mystery_bug

# the seeds of the two find-the-bug exercises (two different hidden bugs, neither of them
# planted by a cell of the chapter)
SEEDS = (2, 3)


@dataclass(frozen=True)
class BugName(Spec):
    """The name of one planted bug; a wrong name is refused without revealing the right one."""

    def describe(self) -> str:
        return f"一个字符串 (str)：bugs.MYSTERY_POOL 里的一个名字，例如 {MYSTERY_POOL[0]!r}"

    def _compare(self, expected: Any, got: Any, where: str) -> Problem | None:
        if not isinstance(got, str):
            return Problem("type", f"类型不对：题目要求 str，你的结果是 {short(got)}")
        name = str.__str__(got)  # the plain value: a subclass's __eq__ and __hash__ may lie
        if name not in BUGS:
            return Problem(
                "type", f"{short(name)} 不是已知的 bug 名字；可选的名字见 bugs.MYSTERY_POOL"
            )
        if name != expected:
            return Problem("value", f"藏着的不是 {short(name)}，再对照一下哪些诊断报警")
        return None


def _register(number: int, seed: int) -> None:
    register(
        Exercise(
            id=f"lab.find_bug_{number}",
            chapter=LAB,
            title=f"找出藏起来的 bug（种子 {seed}）",
            prompt=(
                f"在 `with bugs.mystery({seed}):` 里面，课程的模型被种下了 "
                "bugs.MYSTERY_POOL 中的一个 bug。在这个代码块里对一个新建的小模型运行"
                "本章的诊断，根据哪些诊断报警、哪些放行，说出是哪个 bug。"
            ),
            hint=(
                "先跑不需要训练的探针（因果性、掩码图、参考实现、置换、填充、层归一化、"
                "残差、嵌入尺度），把报警的组合与本章“每个 bug 让哪些诊断报警”的表对照；"
                "组合相近时，再看 mask_sanity 报告的是哪几个问题，以及掩码图本身。"
            ),
            explanation=(
                "本章开头的表从症状出发，不列诊断的组合；“每个 bug 让哪些诊断报警”的那张表"
                "由代码在种下的每个 bug 上算出，其中每个 bug 的组合都不同，把你看到的组合"
                "与它对照即可确定。"
            ),
            kind="value",
            returns=BugName(),
            reference=mystery_bug(seed),
        )
    )


for _number, _seed in enumerate(SEEDS, start=1):
    _register(_number, _seed)
