"""Issue 45, round 3: the hostile and careless answers of ``tests/hostile/answers.py`` are each
refused with a clear message in Simplified Chinese, in bounded time, without output past the
cap, and leave this process alive, its modules as they were, and able to check a right answer.
"""

from __future__ import annotations

import time

import pytest
import torch
from hostile.answers import ANSWERS, SOFTMAX, patch_snapshot_class

from lecturekit.exercises import check, guard, running, specs

LIMIT = 2.0  # seconds per case in these checks (a loaded machine starts workers slowly)
SECONDS: dict[str, float] = {}  # how long each check took, for the slowest's bound below

needs_fork = pytest.mark.skipif(not running.can_fork(), reason="needs a forked worker (Linux)")


def _name(answer) -> str:
    return getattr(answer, "__name__", type(answer).__name__)


def _right(scores, temperature):
    return torch.softmax(scores / temperature, dim=-1)


@needs_fork
@pytest.mark.parametrize(
    ("exercise_id", "answer", "fragment"),
    [pytest.param(*entry, id=f"{i:02d}-{_name(entry[1])}") for i, entry in enumerate(ANSWERS)],
)
def test_a_hostile_answer_is_refused_clearly(exercise_id, answer, fragment, capfd) -> None:
    before = {name: vars(m).copy() for name, m in [("torch", torch), ("specs", specs)]}
    start = time.monotonic()
    result = check(exercise_id, answer, time_limit=LIMIT)
    seconds = SECONDS[f"{exercise_id} {_name(answer)}"] = time.monotonic() - start
    captured = capfd.readouterr()
    out = captured.out + captured.err  # what the answer printed to stderr comes back there
    assert result is False, out[:2000]
    assert seconds < 2 * LIMIT + 2 + 10, seconds  # the step limit, plus the worker's start
    assert "❌" in captured.out and fragment in out, out[:3000]
    assert "Traceback" not in out, out[:3000]
    # nothing past the cap, not even what was written to the file descriptors themselves
    assert len(out) < running.OUTPUT_LIMIT + 10_000, len(out)
    assert {name: vars(m) for name, m in [("torch", torch), ("specs", specs)]} == before


def test_there_are_at_least_40_new_hostile_answers() -> None:
    assert len(ANSWERS) >= 40


def test_this_process_still_checks_a_right_answer_after_them(capsys) -> None:
    assert check(SOFTMAX, _right) is True
    assert "✅" in capsys.readouterr().out


def test_a_patched_checker_class_is_refused_and_put_back_in_process(monkeypatch, capsys) -> None:
    """In this process (no fork) the patch of a checker class lands here: it is undone."""
    monkeypatch.setattr(running, "can_fork", lambda: False)
    compare = specs.Array._compare
    monkeypatch.setattr(specs.Array, "_compare", compare)  # undone after the test, whatever
    assert check(SOFTMAX, patch_snapshot_class) is False
    out = capsys.readouterr().out
    assert "Snapshot.changed" in out and "已恢复原样" in out, out
    assert "changed" not in vars(guard.Snapshot) and specs.Array._compare is compare
    assert check(SOFTMAX, _right) is True
