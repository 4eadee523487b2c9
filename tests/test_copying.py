"""Tests for lecturekit.chapters.ch06_copy: pointer-generator mixture, guided attention, toy model."""

import math

import pytest
import torch

from lecturekit.chapters.ch06_copy import (
    GREETING_VOCAB,
    AttentionToySeq2Seq,
    copy_distribution,
    greeting_batch,
    guided_attention_loss,
    guided_attention_penalty,
    mix_copy_generate,
    stretch_batch,
    train_toy,
)
from lecturekit.chapters.ch06_exposure import free_running_predictions


def test_copy_distribution_matches_loop():
    g = torch.Generator().manual_seed(0)
    attn = torch.rand(2, 3, 5, generator=g).softmax(-1)
    src = torch.tensor([[4, 7, 4, 1, 0], [2, 2, 2, 3, 9]])
    out = copy_distribution(attn, src, vocab_size=10)
    expected = torch.zeros(2, 3, 10)
    for b in range(2):
        for t in range(3):
            for s in range(5):
                expected[b, t, src[b, s]] += attn[b, t, s]
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out.sum(-1), torch.ones(2, 3))


def test_copy_distribution_rejects_bad_input():
    attn = torch.full((1, 1, 2), 0.5)
    with pytest.raises(ValueError, match="src ids"):
        copy_distribution(attn, torch.tensor([[0, 10]]), vocab_size=10)
    with pytest.raises(TypeError, match="dtype"):
        copy_distribution(attn, torch.tensor([[0.0, 1.0]]), vocab_size=10)
    with pytest.raises(ValueError, match="shape"):
        copy_distribution(attn, torch.tensor([[0, 1, 2]]), vocab_size=10)


def test_mix_is_convex_combination():
    p_vocab = torch.tensor([[[0.5, 0.5, 0.0]]])
    p_copy = torch.tensor([[[0.0, 0.0, 1.0]]])
    mixed = mix_copy_generate(p_vocab, p_copy, torch.tensor([[0.25]]))
    torch.testing.assert_close(mixed, torch.tensor([[[0.125, 0.125, 0.75]]]))
    with pytest.raises(ValueError, match="p_gen"):
        mix_copy_generate(p_vocab, p_copy, torch.tensor([[[1.5]]]))


def test_guided_penalty_formula_and_diagonal():
    w = guided_attention_penalty(4, 8, g=0.2)
    assert w.shape == (4, 8)
    t, s = 1, 5
    expected = 1 - math.exp(-((s / 8 - t / 4) ** 2) / (2 * 0.2**2))
    assert w[t, s].item() == pytest.approx(expected, rel=1e-6)
    assert w[2, 4].item() == pytest.approx(0.0, abs=1e-7)  # on the diagonal
    with pytest.raises(ValueError, match="tgt_len"):
        guided_attention_penalty(0, 3)


def test_guided_loss_ignores_padding_and_ranks_alignments():
    diagonal = torch.eye(4).unsqueeze(0)
    backwards = torch.eye(4).flip(-1).unsqueeze(0)
    lengths = torch.tensor([4])
    assert guided_attention_loss(diagonal, lengths, lengths).item() == pytest.approx(0.0, abs=1e-7)
    assert guided_attention_loss(backwards, lengths, lengths).item() > 0.15
    # padding cells (beyond the lengths) must not count, whatever they hold
    padded = torch.zeros(1, 6, 6)
    padded[0, :4, :4] = torch.eye(4)
    padded[0, 4:, :] = 1.0
    loss = guided_attention_loss(padded, lengths, lengths)
    assert loss.item() == pytest.approx(0.0, abs=1e-7)


def test_toy_model_shapes_and_copy_rows_sum_to_one():
    torch.manual_seed(0)
    model = AttentionToySeq2Seq(len(GREETING_VOCAB), d_model=8, max_len=8, copy=True)
    src, tgt_in, tgt_out, _ = greeting_batch(
        torch.Generator().manual_seed(0), torch.arange(8, 20), 5
    )
    log_probs, attn, p_gen = model.parts(src, tgt_in)
    assert log_probs.shape == (5, 6, len(GREETING_VOCAB))
    assert attn.shape == (5, 6, 6) and p_gen.shape == (5, 6)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(5, 6), atol=1e-5, rtol=0)
    assert (attn.masked_select((src == 0).unsqueeze(1).expand_as(attn)) == 0).all()
    with pytest.raises(ValueError, match="ids"):
        model(src + 100, tgt_in)


def test_greeting_batch_layout():
    src, tgt_in, tgt_out, lengths = greeting_batch(
        torch.Generator().manual_seed(1), torch.arange(8, 12), 20
    )
    for b in range(20):
        n = int(lengths[b]) - 3  # 我 是 ... 。
        assert src[b, :2].tolist() == [3, 4] and src[b, 2 + n].item() == 5
        assert tgt_out[b, :n].tolist() == src[b, 2 : 2 + n].tolist()
        assert tgt_out[b, n : n + 3].tolist() == [6, 7, 2]
        assert (
            tgt_in[b, 0].item() == 1
            and tgt_in[b, 1 : n + 3].tolist() == tgt_out[b, : n + 2].tolist()
        )


def test_stretch_batch_repeats_each_token():
    src, tgt_in, tgt_out, lengths = stretch_batch(torch.Generator().manual_seed(2), 10, repeat=3)
    for b in range(10):
        n = int(lengths[b])
        assert tgt_out[b, : 3 * n].tolist() == src[b, :n].repeat_interleave(3).tolist()
        assert tgt_out[b, 3 * n].item() == 2


def test_copy_model_learns_unseen_names_and_generator_cannot():
    results = {}
    seen, unseen = torch.arange(8, 40), torch.arange(40, len(GREETING_VOCAB))
    for copy in (False, True):
        torch.manual_seed(0)
        model = AttentionToySeq2Seq(len(GREETING_VOCAB), d_model=16, max_len=8, copy=copy)
        history = train_toy(model, lambda g: greeting_batch(g, seen, 32), steps=150, lr=1e-2)
        # measured: 3.9-4.4 -> 0.0004 (copy) / 0.0051-0.0052 (no copy) across CPU code paths
        # and 1 or 2 threads, at most 0.0083 across seeds 0-3
        assert history[-1] < history[0]
        src, _, tgt_out, _ = greeting_batch(torch.Generator().manual_seed(5), unseen, 100)
        pred = free_running_predictions(model, src, tgt_out.shape[1])  # lecturekit's greedy
        results[copy] = ((pred == tgt_out) | (tgt_out == 0)).all(1).float().mean().item()
    # measured: 0.00 on every CPU code path and 1 or 2 threads and across seeds 0-6 (the
    # generator never saw the names and does not output them)
    assert results[False] < 0.05
    # measured: 0.88 on every CPU code path and 1 or 2 threads (machine spread 0 on this CPU),
    # 0.74-0.91 across seeds 0-6 (seed 3 failed the former bound 0.8); without copying: 0.00
    assert results[True] > 0.5


def test_toy_attention_is_the_package_attention(monkeypatch):
    from lecturekit.chapters import ch06_copy
    from lecturekit.model.attention import scaled_dot_product_attention

    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return scaled_dot_product_attention(*args, **kwargs)

    monkeypatch.setattr(ch06_copy, "scaled_dot_product_attention", spy)
    torch.manual_seed(0)
    model = AttentionToySeq2Seq(12, d_model=8, max_len=6).eval()
    src, tgt_in = torch.tensor([[3, 4, 5, 0]]), torch.tensor([[1, 6, 7]])
    _, attention = model(src, tgt_in)
    mem = model.embed(src) + model.src_pos.weight[:4]
    h = model.state(model.embed(tgt_in) + model.tgt_pos.weight[:3])
    q, k = model.query(h), model.key(mem)
    scores = (q @ k.transpose(1, 2) / 8**0.5).masked_fill(src[:, None] == 0, float("-inf"))
    torch.testing.assert_close(attention, scores.softmax(-1))
    assert (attention[..., 3] == 0).all()  # the padding position gets no weight
    assert len(calls) == 1


def test_toy_model_decodes_with_the_package_greedy():
    from lecturekit.decoding import greedy

    torch.manual_seed(0)
    model = AttentionToySeq2Seq(12, d_model=8, max_len=6)
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    tokens = greedy(model, src, 5).tokens
    assert model.training  # decoded in eval mode, mode restored
    fed = torch.cat([torch.ones(2, 1, dtype=torch.long), tokens[:, :-1]], dim=1)  # BOS + own
    with torch.no_grad():
        log_probs, _ = model.eval()(src, fed)  # (B, T, V), one teacher-forced pass
    log_probs[..., :2] = float("-inf")  # greedy never emits PAD or BOS
    for b in range(2):
        n = int((tokens[b] != 0).sum())  # up to and including EOS, PAD after it
        assert tokens[b, :n].tolist() == log_probs[b, :n].argmax(-1).tolist()


def test_train_toy_trains_through_the_loop_pieces(monkeypatch):
    """The toy model has no loop of its own: each step is one lecturekit.training update."""
    from lecturekit.training import loop

    updates, real_update = [], loop.update

    def spy(optimizer, loss, **kwargs):
        updates.append(loss.item())
        return real_update(optimizer, loss, **kwargs)

    monkeypatch.setattr(loop, "update", spy)  # what train_steps calls
    torch.manual_seed(0)
    model = AttentionToySeq2Seq(len(GREETING_VOCAB), d_model=8, max_len=8)
    names = torch.arange(8, 12)
    history = train_toy(model, lambda g: greeting_batch(g, names, 4), steps=3, guided_weight=1.0)
    assert len(updates) == 3 and len(history) == 3
    # the update minimises cross-entropy + guided loss; the history reports the cross-entropy
    assert all(u > h for u, h in zip(updates, history, strict=True))
