"""Issue #28 for ``lecturekit.decoding``: an unreasonable ``max_len`` is refused before the
first step, ``sequence_log_prob`` scores every source of a batch, and a huge temperature is
refused instead of sampling from NaN."""

from __future__ import annotations

import time

import pytest
import torch

from lecturekit.decoding import search
from lecturekit.decoding.beam import beam_search
from lecturekit.decoding.search import (
    MAX_DECODE_LEN,
    check_max_len,
    greedy,
    sample,
    sequence_log_prob,
)


@pytest.fixture
def never_stops(make_tiny_model):
    """A tiny model (sinusoidal positions) that never emits EOS: its EOS bias is -1e4."""
    model = make_tiny_model()
    with torch.no_grad():
        model.output_proj.bias[model.config.eos_id] = -1e4
    return model


SRC = torch.tensor([[4, 5, 6], [7, 8, 0]])


@pytest.mark.parametrize(
    "decode",
    [
        lambda model, n: greedy(model, SRC, n),
        lambda model, n: sample(model, SRC, n, seed=0),
        lambda model, n: beam_search(model, SRC, beam_size=2, max_len=n),
    ],
    ids=["greedy", "sample", "beam"],
)
def test_an_unreasonable_max_len_is_refused_up_front(decode, never_stops) -> None:
    start = time.monotonic()
    with pytest.raises(ValueError, match=rf"max_len must be in \[1, {MAX_DECODE_LEN}\]"):
        decode(never_stops, 10**9)
    assert time.monotonic() - start < 1.0
    assert decode(never_stops, 30).tokens.shape == (2, 30)  # it really never stops


def test_the_length_bound_is_the_sinusoids_longest_wavelength() -> None:
    import math

    assert MAX_DECODE_LEN == math.ceil(2 * math.pi * 10_000) == 62_832


def test_the_kv_cache_must_fit_in_the_device_memory(never_stops, monkeypatch) -> None:
    from lecturekit import _common
    from lecturekit.decoding.protocol import as_decoder

    monkeypatch.setattr(_common, "device_memory", lambda device: 2**20)  # a 1 MiB device
    dec = as_decoder(never_stops)
    # 1 layer x keys and values x d_model 16 x float32 = 128 bytes per row and step
    check_max_len(dec, 2**20 // 128 // 2, rows=2)
    with pytest.raises(ValueError, match="KV cache to fit in memory"):
        check_max_len(dec, 2**20 // 128 // 2 + 1, rows=2)
    with pytest.raises(ValueError, match="KV cache to fit in memory"):
        beam_search(never_stops, SRC, beam_size=4, max_len=2**20 // 128 // 8 + 1)


def test_sequence_log_prob_scores_every_source_of_a_batch(make_tiny_model) -> None:
    model = make_tiny_model()
    src = torch.tensor([[4, 5, 6], [7, 8, 9]])
    decoded = greedy(model, src, 6)
    batched = sequence_log_prob(model, src, decoded.tokens)
    rows = [sequence_log_prob(model, src[b : b + 1], decoded.tokens[b]) for b in range(2)]
    assert batched.shape == (2,) and batched.dtype == torch.float64
    assert batched[0].item() != batched[1].item()
    # each row as its own call, up to its first EOS (padding after it is not scored)
    eos = model.config.eos_id
    for b in range(2):
        tokens = decoded.tokens[b].tolist()
        tokens = tokens[: tokens.index(eos) + 1] if eos in tokens else tokens
        assert batched[b].item() == pytest.approx(
            sequence_log_prob(model, src[b : b + 1], tokens), abs=1e-9
        )
    assert batched.tolist() == pytest.approx(decoded.scores.tolist(), abs=1e-4)
    assert isinstance(rows[0], float)


def test_sequence_log_prob_refuses_one_sequence_for_several_sources(make_tiny_model) -> None:
    model = make_tiny_model()
    src = torch.tensor([[4, 5, 6], [7, 8, 9]])
    with pytest.raises(ValueError, match="tokens must be one sequence per source"):
        sequence_log_prob(model, src, [4, 5])
    with pytest.raises(ValueError, match=r"tokens must hold one sequence per source \(2\), got 3"):
        sequence_log_prob(model, src, [[4], [5], [6]])


@pytest.mark.parametrize("temperature", [1e300, 1e7, float("inf")])
def test_a_huge_temperature_is_refused(temperature, make_tiny_model) -> None:
    with pytest.raises(ValueError, match="temperature must be"):
        sample(make_tiny_model(), SRC, 3, temperature=temperature, seed=0)


def test_the_largest_temperature_samples_almost_uniformly(make_tiny_model) -> None:
    model = make_tiny_model()
    src = torch.tensor([[4, 5, 6]]).repeat(400, 1)
    out = sample(model, src, 1, temperature=search.MAX_TEMPERATURE, seed=0).tokens[:, 0]
    allowed = model.config.tgt_vocab_size - 2  # PAD and BOS are never generated
    counts = torch.bincount(out, minlength=model.config.tgt_vocab_size)
    assert counts[model.config.pad_id] == counts[model.config.bos_id] == 0
    assert int((counts > 0).sum()) == allowed
    assert counts.max().item() < 3 * 400 / allowed


def test_a_sampling_seed_beyond_64_bits_names_seed(make_tiny_model) -> None:
    from lecturekit.decoding import sample

    with pytest.raises(ValueError, match="seed"):
        sample(make_tiny_model(), torch.tensor([[4, 5]]), 3, seed=2**64)


def test_filter_logits_refuses_nan_logits() -> None:
    from lecturekit.decoding import filter_logits

    with pytest.raises(ValueError, match="logits"):
        filter_logits(torch.tensor([[0.0, float("nan"), 1.0]]), top_k=2)


def test_a_beam_wider_than_the_search_space_is_exhaustive_and_fast(tiny_model):
    """``beam_size=10**6`` over 3 steps gives exhaustive search's result without carrying a
    million decoder rows (it used to run past any time limit)."""
    from lecturekit.decoding.beam import exhaustive_search

    start = time.perf_counter()
    wide = beam_search(tiny_model, SRC[:1], beam_size=10**6, max_len=3, n_best=2)
    assert time.perf_counter() - start < 30
    full = exhaustive_search(tiny_model, SRC[:1], max_len=3, n_best=2)
    assert [h.tokens for h in wide.hypotheses[0]] == [h.tokens for h in full.hypotheses[0]]
    assert [h.score for h in wide.hypotheses[0]] == pytest.approx(
        [h.score for h in full.hypotheses[0]]
    )
