"""The hostile-input cases (issues #28 and #45): a test asset, run by tests/hostile/test_campaign.py
and by benchmarks/hostile_inputs.py; and the hostile answers to the exercises (``answers.py``, run
by tests/test_exercises_hostile_answers.py)."""
