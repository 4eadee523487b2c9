"""The two tests every exercise answer file runs over its ``SOLUTIONS`` and ``MISTAKES``.

Each tests/test_exercises_chNN*.py imports them; ``pytest_generate_tests`` in conftest.py
parametrizes them from that module's tables.
"""

from __future__ import annotations

from lecturekit.exercises import check


def test_correct_solution_passes(exercise_id, solution, capsys):
    assert check(exercise_id, solution) is True, capsys.readouterr().out


def test_mistake_fails_for_its_reason(exercise_id, mistake, reason, capsys):
    """``reason``: a fragment of the feedback that names what is wrong."""
    assert check(exercise_id, mistake) is False, f"{mistake!r} passed"
    out = capsys.readouterr().out
    assert reason in out and "Traceback" not in out, out
