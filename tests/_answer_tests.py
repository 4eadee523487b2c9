"""The tests every exercise answer file runs over its tables ``SOLUTIONS`` and ``MISTAKES``.

Each tests/test_exercises_chNN*.py imports them and sets ``CHAPTERS``, the chapters its tables
cover; ``pytest_generate_tests`` in conftest.py parametrizes the first two from the tables.
"""

from __future__ import annotations

import pytest

from lecturekit.exercises import check, get_exercise, list_exercises


def test_correct_solution_passes(exercise_id, solution, capsys):
    assert check(exercise_id, solution) is True, capsys.readouterr().out


def test_mistake_fails_for_its_reason(exercise_id, mistake, reason, capsys):
    """``reason``: a fragment of the feedback that names what is wrong."""
    assert check(exercise_id, mistake) is False, f"{mistake!r} passed"
    out = capsys.readouterr().out
    assert reason in out and "Traceback" not in out, out


def test_every_exercise_has_solutions_and_mistakes(request: pytest.FixtureRequest) -> None:
    """Every exercise of the module's ``CHAPTERS`` has at least two correct answers and three
    mistakes (kernel answers, with a ``launch``, are tested in tests/kernels)."""
    module = request.module
    ids = [
        i
        for chapter in module.CHAPTERS
        for i in list_exercises(chapter=chapter)
        if get_exercise(i).launch is None
    ]
    assert sorted(module.SOLUTIONS) == sorted(module.MISTAKES) == sorted(ids)
    assert all(len(module.SOLUTIONS[i]) >= 2 and len(module.MISTAKES[i]) >= 3 for i in ids)
