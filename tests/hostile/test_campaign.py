"""Keep benchmarks/hostile_inputs.py (the issue #28 campaign) from rotting: a handful of its
cases, one per area, run in process and get the outcome the campaign expects of them."""

from __future__ import annotations

import pytest

from benchmarks.hostile_inputs import classify
from hostile.cases import AREAS, CASES, Case

SAMPLE = {
    "model_d_model_1048576": "clear_error",
    "config_set_after_dropout": "clear_error",
    "train_adam_eps_0.0": "clear_error",
    "nll_target_50": "clear_error",
    "greedy_max_len_1e9": "clear_error",
    "greedy_batch_equals_item": "sensible_result",
    "map_location_mps": "clear_error",
    "char_vocab_multichar": "clear_error",
    "bpe_from_dict_empty": "clear_error",
    "check_time_limit_inf": "clear_error",
    "softmax_mask_plus_inf": "clear_error",
    "softmax_fully_masked_zero": "sensible_result",
    "tagger_unspaced_nihao": "clear_error",
    "ngram_k_10000_eight_syllables": "clear_error",
    "plant_twice_causal_mask_inverted": "sensible_result",
    "attention_check_attend_ignores_k": "sensible_result",
}


def test_every_area_has_cases_and_the_sample_exists() -> None:
    assert {case.area for case in CASES.values()} == set(AREAS)
    assert len(CASES) >= 200
    assert set(SAMPLE) <= set(CASES)


@pytest.mark.parametrize(("name", "expected"), SAMPLE.items())
def test_a_sample_case_gets_its_expected_outcome(
    name: str, expected: str, one_torch_thread
) -> None:
    kind, detail = classify(CASES[name])
    assert kind == expected, detail


def test_the_classifier_tells_an_obscure_error_and_a_silent_wrong_result() -> None:
    def obscure() -> None:
        raise IndexError("index 50 is out of bounds for dimension 0 with size 11")

    assert classify(Case("x", "data", obscure, ("target",)))[0] == "obscure_error"
    assert classify(Case("x", "data", lambda: float("nan"), (), lambda r: r == r))[0] == (
        "silent_wrong"
    )
    assert classify(Case("x", "data", lambda: 1, ("n",)))[0] == "silent_wrong"
