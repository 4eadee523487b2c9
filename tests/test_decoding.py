"""Decoding strategies against brute force, on table decoders and on a small Transformer."""

from __future__ import annotations

import itertools
import math
import time

import pytest
import torch

from lecturekit.decoding import (
    Decoded,
    Hypothesis,
    TableDecoder,
    TransformerDecoder,
    beam_search,
    exhaustive_search,
    filter_logits,
    greedy,
    length_penalty,
    sample,
    search,
    sequence_log_prob,
)
from lecturekit.decoding.search import MAX_DECODE_LEN, check_max_len

pytestmark = pytest.mark.usefixtures("one_torch_thread")


SYMBOLS = ["A", "B", "C"]


def random_table(seed: int, max_len: int, with_eos: bool = True) -> dict[str, dict[str, float]]:
    """Random conditional distributions for every prefix shorter than max_len."""
    gen = torch.Generator().manual_seed(seed)
    outs = SYMBOLS + (["<eos>"] if with_eos else [])
    table = {}
    for t in range(max_len):
        for prefix in itertools.product(SYMBOLS, repeat=t):
            probs = torch.rand(len(outs), generator=gen, dtype=torch.float64) ** 3
            probs /= probs.sum()
            table["".join(prefix)] = dict(zip(outs, probs.tolist(), strict=True))
    return table


def brute_force(table: dict, max_len: int, alpha: float = 0.0) -> list[tuple[float, str]]:
    """Every complete output with its score, by direct multiplication of table entries.

    Outputs: any prefix of length < max_len followed by EOS (written "$"), or any sequence of
    max_len symbols (unfinished)."""

    def log_p(seq: tuple[str, ...]) -> float:
        return sum(math.log(table["".join(seq[:i])][s]) for i, s in enumerate(seq))

    results = []
    for t in range(max_len):
        for seq in itertools.product(SYMBOLS, repeat=t):
            eos_p = table["".join(seq)].get("<eos>", 0.0)
            if eos_p > 0:
                lp = log_p(seq) + math.log(eos_p)
                results.append((lp / length_penalty(t + 1, alpha), "".join(seq) + "$"))
    for seq in itertools.product(SYMBOLS, repeat=max_len):
        results.append((log_p(seq) / length_penalty(max_len, alpha), "".join(seq)))
    return sorted(results, reverse=True)


def as_text(dec: TableDecoder, hyp: Hypothesis) -> str:
    return dec.decode(hyp.tokens) + ("$" if hyp.finished else "")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_wide_beam_and_exhaustive_equal_brute_force(seed: int, alpha: float) -> None:
    max_len = 3
    table = random_table(seed, max_len)
    dec = TableDecoder(table)
    expected = brute_force(table, max_len, alpha)[:3]
    for result in (
        exhaustive_search(dec, None, max_len, length_penalty=alpha, n_best=3).hypotheses[0],
        beam_search(
            dec, None, beam_size=64, max_len=max_len, length_penalty=alpha, n_best=3
        ).hypotheses[0],
    ):
        assert [as_text(dec, h) for h in result] == [text for _, text in expected]
        for hyp, (score, _) in zip(result, expected, strict=True):
            assert hyp.score == pytest.approx(score, abs=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_beam_size_one_equals_greedy(seed: int) -> None:
    dec = TableDecoder(random_table(seed, 4))
    tokens, scores = greedy(dec, None, 4).tokens, greedy(dec, None, 4).scores
    hyp = beam_search(dec, None, beam_size=1, max_len=4).hypotheses[0][0]
    produced = [t for t in tokens[0].tolist() if t != dec.pad_id]
    assert hyp.tokens == produced
    assert hyp.log_prob == pytest.approx(float(scores[0]), abs=1e-9)


def test_scores_are_sums_of_token_log_probs() -> None:
    table = random_table(11, 4)
    dec = TableDecoder(table)
    for hyp in beam_search(dec, None, beam_size=3, max_len=4, n_best=3).hypotheses[0]:
        text = dec.decode(hyp.tokens)
        expected = sum(math.log(table[text[:i]][s]) for i, s in enumerate(text))
        if hyp.finished:
            expected += math.log(table[text]["<eos>"])
        assert hyp.log_prob == pytest.approx(expected, abs=1e-9)
        assert sequence_log_prob(dec, None, hyp.tokens) == pytest.approx(expected, abs=1e-9)


def test_greedy_loses_to_beam_two_on_a_trap_table() -> None:
    table = {
        "": {"A": 0.6, "B": 0.4},
        "A": {"A": 0.55, "B": 0.45},
        "B": {"A": 0.9, "B": 0.1},
        "AA": {"A": 0.6, "B": 0.4},
        "AB": {"A": 0.9, "B": 0.1},
        "BA": {"A": 0.95, "B": 0.05},
        "BB": {"A": 0.5, "B": 0.5},
    }
    dec = TableDecoder(table)
    decoded = greedy(dec, None, 3)
    tokens, greedy_lp = decoded.tokens, decoded.scores
    assert dec.decode(tokens[0]) == "AAA"
    assert math.exp(float(greedy_lp[0])) == pytest.approx(0.6 * 0.55 * 0.6)
    beam = beam_search(dec, None, beam_size=2, max_len=3)
    best = beam.hypotheses[0][0]
    assert dec.decode(best.tokens) == "BAA"
    assert dec.decode(beam.tokens[0]) == "BAA" and float(beam.scores[0]) == best.score
    assert math.exp(best.log_prob) == pytest.approx(0.4 * 0.9 * 0.95)


def test_beam_trace_lists_kept_prefixes() -> None:
    dec = TableDecoder(random_table(3, 3, with_eos=False))
    assert beam_search(dec, None, beam_size=2, max_len=3).trace is None
    trace = beam_search(dec, None, beam_size=2, max_len=3, trace=True).trace
    assert [len(step) for step in trace[0]] == [2, 2, 2]
    assert all(len(h.tokens) == t + 1 for t, step in enumerate(trace[0]) for h in step)


def test_batched_sources_decode_independently() -> None:
    dec = TableDecoder(random_table(5, 3))
    alone = beam_search(dec, None, beam_size=2, max_len=3, n_best=2).hypotheses[0]
    batched = beam_search(dec, 3, beam_size=2, max_len=3, n_best=2).hypotheses
    for row in batched:
        assert [(h.tokens, h.score) for h in row] == [(h.tokens, h.score) for h in alone]


def test_filter_logits_top_p_keeps_smallest_set_reaching_p() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(50, 12, generator=gen, dtype=torch.float64)
    for p in (0.1, 0.5, 0.9, 0.999):
        kept = filter_logits(logits, top_p=p) > -math.inf
        probs = torch.softmax(logits, -1)
        for row in range(logits.shape[0]):
            order = torch.argsort(probs[row], descending=True)
            mass = probs[row][order].cumsum(0)
            n = int((mass < p).sum()) + 1  # smallest prefix of the sorted list reaching p
            assert set(torch.nonzero(kept[row]).flatten().tolist()) == set(order[:n].tolist())


def test_filter_logits_top_k() -> None:
    logits = torch.tensor([[0.1, 3.0, -1.0, 2.0, 0.5]])
    kept = filter_logits(logits, top_k=2) > -math.inf
    assert kept.tolist() == [[False, True, False, True, False]]
    # ties at the k-th value: exactly k survive, the lower indices first
    tied = torch.tensor([[1.0, 2.0, 1.0, 1.0, 0.0], [5.0, 5.0, 5.0, 5.0, 5.0]])
    kept = filter_logits(tied, top_k=3) > -math.inf
    assert kept.tolist() == [[True, True, True, False, False], [True, True, True, False, False]]
    gen = torch.Generator().manual_seed(1)
    logits = torch.randint(0, 4, (40, 9), generator=gen).double()  # many ties
    for k in range(1, 10):
        kept = filter_logits(logits, top_k=k) > -math.inf
        assert (kept.sum(-1) == k).all()
        for row in range(logits.shape[0]):  # brute force: sort by (-value, index), take k
            ranked = sorted(range(9), key=lambda i, r=row: (-logits[r, i].item(), i))
            assert set(torch.nonzero(kept[row]).flatten().tolist()) == set(ranked[:k])
    with pytest.raises(ValueError, match="top_k"):
        filter_logits(logits, top_k=0)
    with pytest.raises(ValueError, match="top_p"):
        filter_logits(logits, top_p=1.5)


def test_sample_is_seeded_and_follows_the_table() -> None:
    table = {"": {"A": 0.7, "B": 0.3}, "A": {"<eos>": 1.0}, "B": {"<eos>": 1.0}}
    dec = TableDecoder(table)
    a = sample(dec, 4000, 2, seed=123).tokens
    b = sample(dec, 4000, 2, seed=123).tokens
    assert torch.equal(a, b)
    frac_a = (a[:, 0] == dec.stoi["A"]).double().mean().item()
    assert frac_a == pytest.approx(0.7, abs=0.03)  # 4000 draws: std 0.007
    greedy_like = sample(dec, 100, 2, seed=1, top_k=1).tokens
    assert (greedy_like[:, 0] == dec.stoi["A"]).all()
    assert (a[:, 1] == dec.eos_id).all()


def test_low_temperature_approaches_greedy() -> None:
    dec = TableDecoder(random_table(7, 3))
    cold = sample(dec, 50, 3, temperature=1e-3, seed=0).tokens
    assert (cold == greedy(dec, None, 3).tokens[0, : cold.shape[1]]).all()
    with pytest.raises(ValueError, match="temperature"):
        sample(dec, 1, 3, temperature=0.0)


def test_table_decoder_validates_the_table() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        TableDecoder({"": {"A": 0.5, "B": 0.4}})
    with pytest.raises(ValueError, match="no distribution for prefix 'A'"):
        greedy(TableDecoder({"": {"A": 1.0}}), None, 2)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(TableDecoder({"": {"A": 1.0}}), None, beam_size=0, max_len=2)
    with pytest.raises(ValueError, match="max_len"):
        greedy(TableDecoder({"": {"A": 1.0}}), None, 0)


ONE = {"": {"A": 0.6, "B": 0.4}, "A": {"<eos>": 1.0}, "B": {"<eos>": 1.0}}
NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda d: beam_search(d, None, 2, 3, length_penalty=NAN), ValueError, "length_penalty"),
        (lambda d: beam_search(d, None, 2, 3, length_penalty=INF), ValueError, "length_penalty"),
        (lambda d: beam_search(d, None, 2, 3, length_penalty=-0.5), ValueError, "length_penalty"),
        (lambda d: beam_search(d, None, 2, 3, length_penalty=1e300), ValueError, r"\[0.0, 10.0\]"),
        (lambda d: beam_search(d, None, 2, 3, length_penalty="0.6"), TypeError, "length_penalty"),
        (lambda d: beam_search(d, None, True, 3), TypeError, "beam_size must be an int, got bool"),
        (lambda d: beam_search(d, None, 2, 3, n_best=3), ValueError, r"n_best must be in \[1, 2\]"),
        (lambda d: beam_search(d, None, 2, 3, n_best=False), TypeError, "n_best"),
        (lambda d: exhaustive_search(d, None, 3, length_penalty=NAN), ValueError, "length_pen"),
        (lambda d: greedy(d, None, True), TypeError, "max_len must be an int, got bool"),
        (lambda d: greedy(d, None, 2.0), TypeError, "max_len"),
        (lambda d: greedy(d, None, 2, use_cache="no"), TypeError, "use_cache"),
        (
            lambda d: sample(d, 1, 3, temperature=NAN),
            ValueError,
            "temperature must be a finite number",
        ),
        (lambda d: sample(d, 1, 3, temperature=INF), ValueError, "temperature"),
        (
            lambda d: sample(d, 1, 3, temperature=1e-9),
            ValueError,
            r"temperature must be in \[1e-06, ",
        ),
        (lambda d: sample(d, 1, 3, temperature="1"), TypeError, "temperature"),
        (lambda d: sample(d, 1, 3, top_k=True), TypeError, "top_k"),
        (lambda d: sample(d, 1, 3, top_p=NAN), ValueError, "top_p"),
        (lambda d: sample(d, 1, 3, top_p=0.0), ValueError, "top_p"),
        (lambda d: sample(d, 1, 3, seed=1.5), TypeError, "seed"),
        (lambda d: sample(d, 1, 3, generator=0), TypeError, "generator"),
    ],
)
def test_decoding_arguments_are_checked_before_decoding(call, error, pattern) -> None:
    with pytest.raises(error, match=pattern):
        call(TableDecoder(ONE))


def test_largest_length_penalty_still_ranks() -> None:
    best = beam_search(TableDecoder(ONE), None, 2, 3, length_penalty=10.0).hypotheses[0][0]
    assert best.score == pytest.approx(math.log(0.6) / length_penalty(2, 10.0))
    assert best.score < 0 and best.tokens == [TableDecoder(ONE).stoi["A"], 2]
    with pytest.raises(ValueError, match="length_penalty"):
        length_penalty(3, float("nan"))


# ----------------------------------------------------------------------------------------
# On a real (untrained, seeded) Transformer through its KV cache
# ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sharp_model(make_tiny_model):
    model = make_tiny_model(src_vocab_size=9, tgt_vocab_size=6, n_decoder_layers=2, max_len=512)
    # sharpen the output layer so the distributions are far from uniform
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    src = torch.tensor([[4, 5, 6, 7, 8], [3, 4, 5, 0, 0]])
    return model, src


def test_transformer_cached_equals_uncached(sharp_model) -> None:
    model, src = sharp_model
    cached = greedy(model, src, 6)
    uncached = greedy(model, src, 6, use_cache=False)
    assert torch.equal(cached.tokens, uncached.tokens)
    assert torch.allclose(cached.scores, uncached.scores, atol=1e-5)
    b1 = beam_search(model, src, 3, 5, n_best=3).hypotheses
    b2 = beam_search(model, src, 3, 5, n_best=3, use_cache=False).hypotheses
    for r1, r2 in zip(b1, b2, strict=True):
        assert [h.tokens for h in r1] == [h.tokens for h in r2]
        assert [h.score for h in r1] == pytest.approx([h.score for h in r2], rel=1e-5, abs=1e-4)


def test_transformer_beam_scores_match_teacher_forced_log_probs(sharp_model) -> None:
    model, src = sharp_model
    for b, hyps in enumerate(beam_search(model, src, 3, 5, n_best=3).hypotheses):
        for hyp in hyps:
            tgt_in = torch.tensor([[model.config.bos_id, *hyp.tokens[:-1]]])
            log_probs = torch.log_softmax(model(src[b : b + 1], tgt_in).double(), -1)[0]
            expected = log_probs[torch.arange(len(hyp.tokens)), hyp.tokens].sum().item()
            assert hyp.log_prob == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_transformer_wide_beam_equals_exhaustive(sharp_model, alpha: float) -> None:
    model, src = sharp_model
    exact = exhaustive_search(model, src, 3, n_best=2, length_penalty=alpha).hypotheses
    wide = beam_search(model, src, 27, 3, n_best=2, length_penalty=alpha).hypotheses
    for e, w in zip(exact, wide, strict=True):
        assert [h.tokens for h in e] == [h.tokens for h in w]
        assert [h.score for h in e] == pytest.approx([h.score for h in w], rel=1e-5, abs=1e-4)


def test_transformer_greedy_equals_beam_one_and_sample_is_seeded(sharp_model) -> None:
    model, src = sharp_model
    tokens = greedy(model, src, 6).tokens
    for b, hyps in enumerate(beam_search(model, src, 1, 6).hypotheses):
        assert hyps[0].tokens == [t for t in tokens[b].tolist() if t != model.config.pad_id]
    s1 = sample(model, src, 6, temperature=1.3, top_p=0.9, seed=5)
    s2 = sample(model, src, 6, temperature=1.3, top_p=0.9, seed=5)
    assert torch.equal(s1.tokens, s2.tokens) and torch.equal(s1.scores, s2.scores)
    assert TransformerDecoder(model).vocab_size == 6


def test_every_strategy_returns_one_result_type(sharp_model) -> None:
    model, src = sharp_model
    results = [
        greedy(model, src, 4),
        sample(model, src, 4, seed=0),
        beam_search(model, src, 2, 4),
        exhaustive_search(model, src, 2),
    ]
    for result in results:
        assert isinstance(result, Decoded)
        assert result.tokens.dtype == torch.long and result.tokens.shape[0] == 2
        assert result.scores.shape == (2,) and result.scores.dtype == torch.float64


def test_sequence_log_prob_scores_without_dropout(make_tiny_model) -> None:
    model = make_tiny_model(dropout=0.5)
    src, tokens = torch.tensor([[4, 5, 6]]), [3, 4, 2]
    expected = sequence_log_prob(model.eval(), src, tokens)
    model.train()
    torch.manual_seed(1)
    assert sequence_log_prob(model, src, tokens) == expected  # dropout off while scoring
    assert model.training  # and the mode is restored


def test_decoding_runs_in_inference_mode_but_returns_ordinary_tensors(sharp_model) -> None:
    model, src = sharp_model
    seen = []
    original = model.decode_step

    def spy(tokens, cache, **kwargs):
        seen.append(torch.is_inference_mode_enabled())
        return original(tokens, cache, **kwargs)

    model.decode_step = spy
    try:
        out = greedy(model, src, 3)
    finally:
        del model.decode_step
    assert seen and all(seen)
    assert not out.tokens.is_inference() and not out.scores.is_inference()
    out.tokens[0, 0] = model.config.pad_id  # callers may edit the result in place


def test_sequence_log_prob_rejects_ids_outside_the_vocabulary(sharp_model) -> None:
    model, src = sharp_model
    with pytest.raises(ValueError, match=r"tokens must be ids in \[0, 6\), got 6"):
        sequence_log_prob(model, src[:1], [3, 6])


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("min_len", [1, 2, 3])
def test_min_len_forbids_an_early_eos_as_brute_force_does(seed: int, min_len: int) -> None:
    # brute force over every output, minus those whose EOS is one of the first min_len tokens
    max_len = 3
    table = random_table(seed, max_len)
    dec = TableDecoder(table)
    allowed = [
        (score, text)
        for score, text in brute_force(table, max_len)
        if not text.endswith("$") or len(text) > min_len
    ]
    wide = beam_search(dec, None, 64, max_len, min_len=min_len, n_best=3).hypotheses[0]
    assert [as_text(dec, h) for h in wide] == [text for _, text in allowed[:3]]
    for hyp, (score, _) in zip(wide, allowed, strict=False):
        assert hyp.score == pytest.approx(score, abs=1e-9)
    one = beam_search(dec, None, 1, max_len, min_len=min_len).hypotheses[0][0]
    greedy_out = greedy(dec, None, max_len, min_len=min_len)
    assert one.tokens == [t for t in greedy_out.tokens[0].tolist() if t != dec.pad_id]
    assert greedy_out.scores[0].item() == pytest.approx(one.log_prob, abs=1e-9)
    assert dec.eos_id not in greedy_out.tokens[0, :min_len].tolist()


def test_min_len_equal_to_max_len_gives_exactly_that_many_tokens(tiny_model) -> None:
    src = torch.randint(4, tiny_model.config.src_vocab_size, (3, 5))
    eos = tiny_model.config.eos_id
    out = greedy(tiny_model, src, 4, min_len=4)
    assert out.tokens.shape == (3, 4) and not bool((out.tokens == eos).any())
    beams = beam_search(tiny_model, src, 3, 4, min_len=4, n_best=3)
    for hyps in beams.hypotheses:
        assert all(len(h.tokens) == 4 and not h.finished for h in hyps)
        assert all(eos not in h.tokens for h in hyps)
    with pytest.raises(ValueError, match=r"min_len must be in \[0, 4\]"):
        greedy(tiny_model, src, 4, min_len=5)
    with pytest.raises(ValueError, match=r"min_len must be in \[0, 4\]"):
        beam_search(tiny_model, src, 2, 4, min_len=5)


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
