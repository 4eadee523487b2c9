"""Tests for lecturekit.chapters.ch04_nat: AT vs NAT tables fitted by counting (p35-p36)."""

import itertools
from collections import Counter

import pytest

from lecturekit.chapters.ch04_nat import (
    EOS,
    AutoregressiveTable,
    NonAutoregressiveTable,
    valid_fraction,
)

THANKS = (
    [("thank", "you")] * 4 + [("many", "thanks")] * 3 + [("big", "thanks")] * 3 + [("thanks",)] * 2
)


def test_at_distribution_equals_empirical_frequencies():
    dist = AutoregressiveTable.fit(THANKS).distribution()
    counts = Counter(THANKS)
    assert set(dist) == set(counts)
    for out, c in counts.items():
        assert dist[out] == pytest.approx(c / len(THANKS))


def test_at_next_token_distributions_sum_to_one_and_end_with_eos():
    at = AutoregressiveTable.fit(THANKS)
    for dist in at.next_token.values():
        assert sum(dist.values()) == pytest.approx(1.0)
    assert at.next_token[("thank", "you")] == {EOS: 1.0}


def test_nat_distribution_is_product_of_marginals_brute_force():
    nat = NonAutoregressiveTable.fit(THANKS)
    dist = nat.distribution()
    assert sum(dist.values()) == pytest.approx(1.0)
    # independent reference: recount marginals from the raw data for length 2
    two = [t for t in THANKS if len(t) == 2]
    p_len = len(two) / len(THANKS)
    first = Counter(t[0] for t in two)
    second = Counter(t[1] for t in two)
    for a, b in itertools.product(first, second):
        expected = p_len * first[a] / len(two) * second[b] / len(two)
        assert dist[(a, b)] == pytest.approx(expected)


def test_nat_mixes_modes_and_at_does_not():
    at = AutoregressiveTable.fit(THANKS)
    nat = NonAutoregressiveTable.fit(THANKS)
    assert valid_fraction(at.distribution(), THANKS) == pytest.approx(1.0)
    # 2/12 + 10/12 * (0.4*0.4 + 0.3*0.6 + 0.3*0.6)
    assert valid_fraction(nat.distribution(), THANKS) == pytest.approx(0.6)
    assert at.greedy() == ("thank", "you")
    assert nat.greedy() == ("thank", "thanks")
    assert nat.greedy() not in set(THANKS)


def test_unimodal_data_makes_nat_exact():
    data = [("a", "b", "c")] * 3
    nat = NonAutoregressiveTable.fit(data)
    assert nat.distribution() == {("a", "b", "c"): 1.0}
    assert nat.greedy() == ("a", "b", "c")


def test_samples_follow_the_distribution_and_are_reproducible():
    for model in (AutoregressiveTable.fit(THANKS), NonAutoregressiveTable.fit(THANKS)):
        samples = model.sample(20000, seed=1)
        assert samples == model.sample(20000, seed=1)
        freq = Counter(samples)
        dist = model.distribution()
        assert set(freq) <= set(dist)
        for out, p in dist.items():
            assert freq[out] / len(samples) == pytest.approx(p, abs=0.015)


@pytest.mark.parametrize(
    ("targets", "error"),
    [
        ([], ValueError),
        ("thank you", TypeError),
        ([()], ValueError),
        ([("a", 3)], TypeError),
        ([("a", EOS)], ValueError),
        (["ab"], TypeError),
    ],
)
def test_bad_targets_raise(targets, error):
    with pytest.raises(error):
        AutoregressiveTable.fit(targets)
    with pytest.raises(error):
        NonAutoregressiveTable.fit(targets)


def test_bad_sample_arguments_raise():
    at = AutoregressiveTable.fit(THANKS)
    with pytest.raises(ValueError, match="n must be"):
        at.sample(-1)
    with pytest.raises(TypeError, match="seed"):
        at.sample(3, seed="0")


def test_at_decodes_with_the_package_table_decoder():
    import math

    from lecturekit.decoding import TableDecoder, sequence_log_prob

    at = AutoregressiveTable.fit(THANKS)
    decoder = at.decoder()
    assert isinstance(decoder, TableDecoder)
    # the decoder scores every output as the prefix-tree walk does (independent of sampling)
    for out, p in at.distribution().items():
        ids = [*decoder.encode(out), decoder.eos_id]
        assert math.exp(sequence_log_prob(decoder, None, ids)) == pytest.approx(p)
    assert at.sample(0) == []


def test_at_greedy_ties_go_to_eos_then_to_the_token_seen_first():
    assert AutoregressiveTable.fit([("b",), ("a",)]).greedy() == ("b",)
    assert AutoregressiveTable.fit([("a", "x"), ("a",)]).greedy() == ("a",)
