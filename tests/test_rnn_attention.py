"""Chapter 1's RNN encoder-decoder with and without additive (Bahdanau) attention."""

from __future__ import annotations

import pytest
import torch

from lecturekit.decoding import greedy
from lecturekit.model.rnn import AdditiveAttention, RNNSeq2Seq, RNNSeq2SeqConfig
from lecturekit.pretrained.rnn import (
    RNN_RECIPES,
    RNN_SEEDS,
    exact_match_by_length,
    load_rnn,
    rnn_checkpoint_path,
    train_rnn_seq2seq,
)


def _padded_keys() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(3, 5, generator=generator, dtype=torch.float64)
    keys = torch.randn(3, 4, 6, generator=generator, dtype=torch.float64)
    padding = torch.tensor(
        [[False, False, False, False], [False, False, True, True], [False, True, True, True]]
    )
    return query, keys, padding


def test_additive_weights_sum_to_one_over_real_positions_and_padding_gets_zero() -> None:
    torch.manual_seed(0)
    attention = AdditiveAttention(5, 6, 7).double()
    query, keys, padding = _padded_keys()
    context, weights = attention(query, keys, key_padding_mask=padding)
    assert context.shape == (3, 6) and weights.shape == (3, 4)
    assert torch.all(weights[padding] == 0)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(3, dtype=torch.float64))
    assert torch.all(weights[~padding] > 0)
    # padded keys do not change anything: replace them by garbage
    garbage = keys.masked_fill(padding[:, :, None], 1e3)
    context2, weights2 = attention(query, garbage, key_padding_mask=padding)
    torch.testing.assert_close(weights2, weights)
    torch.testing.assert_close(context2, context)


def test_additive_score_matches_a_float64_hand_computation() -> None:
    torch.manual_seed(1)
    attention = AdditiveAttention(5, 6, 7).double()
    query, keys, padding = _padded_keys()
    w_q, w_k = attention.w_q.weight, attention.w_k.weight  # (A, Dq), (A, Dk)
    w = attention.w.weight[0]  # (A,)
    by_hand = torch.empty(3, 4, dtype=torch.float64)
    for b in range(3):
        for i in range(4):
            by_hand[b, i] = w @ torch.tanh(w_q @ query[b] + w_k @ keys[b, i])
    torch.testing.assert_close(attention.scores(query, keys), by_hand)
    expected = torch.softmax(by_hand.masked_fill(padding, float("-inf")), dim=-1)
    context, weights = attention(query, keys, key_padding_mask=padding)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(context, torch.einsum("bs,bsd->bd", expected, keys))


def test_additive_attention_rejects_bad_masks_and_shapes() -> None:
    attention = AdditiveAttention(5, 6, 7).double()
    query, keys, padding = _padded_keys()
    with pytest.raises(ValueError, match="every key"):
        attention(query, keys, key_padding_mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="key_padding_mask must be bool"):
        attention(query, keys, key_padding_mask=padding.long())
    with pytest.raises(ValueError, match="query must be"):
        attention(query[0], keys)


def _tiny(attention: bool, seed: int = 0) -> RNNSeq2Seq:
    torch.manual_seed(seed)
    config = RNNSeq2SeqConfig(8, 9, d_embed=4, d_hidden=6, attention=attention)
    return RNNSeq2Seq(config).double().eval()


@pytest.mark.parametrize("attention", [False, True])
def test_forward_shapes_and_padding_does_not_leak(attention: bool) -> None:
    model = _tiny(attention)
    src = torch.tensor([[4, 5, 6], [7, 4, 0]])  # second row padded
    tgt_in = torch.tensor([[1, 4, 5, 6], [1, 7, 4, 0]])
    logits, weights = model(src, tgt_in, need_weights=True)
    assert logits.shape == (2, 4, 9)
    if attention:
        assert weights.shape == (2, 4, 3)
        assert torch.all(weights[1, :, 2] == 0)
    else:
        assert weights is None
    # more padding on the right changes nothing for the real positions
    logits_more, _ = model(torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], 1), tgt_in)
    torch.testing.assert_close(logits_more, logits)


def test_only_the_attention_layer_differs_between_the_two_models() -> None:
    plain, attn = _tiny(False), _tiny(True)
    shared = {k: v for k, v in attn.state_dict().items() if not k.startswith("attention.")}
    assert shared.keys() == plain.state_dict().keys()
    for key, value in plain.state_dict().items():
        torch.testing.assert_close(shared[key], value)  # same seed: same initial weights


def test_without_attention_the_context_is_the_last_real_encoder_state() -> None:
    model = _tiny(False)
    src = torch.tensor([[4, 5, 6], [7, 4, 0]])
    state = model.encode(src)
    memory, _ = model.encoder(model.src_embed(src))
    torch.testing.assert_close(state.last, torch.stack([memory[0, 2], memory[1, 1]]))


@pytest.mark.parametrize("attention", [False, True])
def test_step_protocol_agrees_with_the_teacher_forced_pass(attention: bool) -> None:
    model = _tiny(attention, seed=3)
    src = torch.tensor([[4, 5, 6, 7], [7, 4, 0, 0]])
    decoded = greedy(model, src, 5).tokens  # (B, T)
    tgt_in = torch.cat([torch.ones(2, 1, dtype=torch.long), decoded[:, :-1]], dim=1)
    logits, _ = model(src, tgt_in)
    # greedy's choice at each step is the argmax of the teacher-forced logits on its own prefix
    for b in range(2):
        for t in range(decoded.shape[1]):
            if t and decoded[b, t - 1] in (model.eos_id, model.pad_id):
                break
            assert decoded[b, t] == logits[b, t].argmax()


def test_model_rejects_bad_input() -> None:
    model = _tiny(True)
    with pytest.raises(ValueError, match=r"src ids must be in \[0, "):
        model(torch.tensor([[4, 99]]), torch.tensor([[1]]))
    with pytest.raises(ValueError, match="no real token"):
        model(torch.tensor([[0, 0]]), torch.tensor([[1]]))
    with pytest.raises(ValueError, match="batch sizes differ"):
        model(torch.tensor([[4, 5]]), torch.tensor([[1], [1]]))
    with pytest.raises(TypeError, match="attention must be a bool"):
        RNNSeq2SeqConfig(8, 9, attention=1)


@pytest.mark.parametrize("attention", [False, True])
def test_left_padded_src_is_rejected_not_misread(attention: bool) -> None:
    model = _tiny(attention)
    right = torch.tensor([[4, 5, 6, 0, 0]])
    left = torch.tensor([[0, 0, 4, 5, 6]])  # the encoder would read two <pad> first
    hole = torch.tensor([[4, 0, 5, 6, 0]])  # a <pad> between real tokens
    model.encode(right)  # fine
    for src in (left, hole):
        with pytest.raises(ValueError, match="src must be right-padded.*pad_id = 0"):
            model.encode(src)
        with pytest.raises(ValueError, match="src must be right-padded"):
            greedy(model, src, 4)
        with pytest.raises(ValueError, match="src must be right-padded"):
            model(src, torch.tensor([[1, 4]]))


@pytest.mark.parametrize("attention", [False, True])
def test_src_key_padding_mask_must_be_bool_right_padded_and_of_src_shape(attention: bool) -> None:
    model = _tiny(attention)
    src = torch.tensor([[4, 5, 6, 7], [7, 4, 0, 0]])
    good = src == 0
    state = model.encode(src, src_key_padding_mask=good)
    torch.testing.assert_close(state.last, model.encode(src).last)
    hole = torch.tensor([[False, False, True, False], [False, False, True, True]])
    with pytest.raises(
        ValueError, match=r"src_key_padding_mask must be right-padded.*row\(s\) \[0\]"
    ):
        model.encode(src, src_key_padding_mask=hole)
    left = torch.tensor([[False, False, False, False], [True, True, False, False]])
    with pytest.raises(ValueError, match="src_key_padding_mask must be right-padded"):
        greedy(model, src, 4, src_key_padding_mask=left)
    with pytest.raises(ValueError, match=r"src_key_padding_mask must have the shape of src"):
        model.encode(src, src_key_padding_mask=good[:, :3])
    with pytest.raises(TypeError, match="src_key_padding_mask must be a bool tensor"):
        model.encode(src, src_key_padding_mask=good.float())
    with pytest.raises(ValueError, match="src_key_padding_mask has a row with no real token"):
        model.encode(src, src_key_padding_mask=torch.ones(2, 4, dtype=torch.bool))


def test_training_learns_a_tiny_copy_task_and_exact_match_counts_by_length() -> None:
    torch.manual_seed(0)
    pairs = [([4 + a, 4 + b], [4 + a, 4 + b]) for a in range(3) for b in range(3)]
    model = RNNSeq2Seq(RNNSeq2SeqConfig(8, 8, d_embed=8, d_hidden=16, attention=True))
    before = exact_match_by_length(model, pairs)
    losses = train_rnn_seq2seq(model, pairs, steps=150, batch_size=9, lr=1e-2)
    # last / first measured: 0.00079 on every CPU code path and 1 or 2 threads (machine spread
    # 2e-12), 0.00079-0.0011 across seeds 0-3
    assert losses[-1] < 0.1 * losses[0]
    after = exact_match_by_length(model, pairs + [([4], [4])])
    # measured: after[2] 1.0 and before[2] 0.0 on every code path and 1 or 2 threads and
    # across seeds 0-3
    assert set(after) == {1, 2} and after[2] == 1.0 and before[2] < 1.0
    with pytest.raises(ValueError, match="pairs must not be empty"):
        exact_match_by_length(model, [])


def test_shipped_pairs_differ_only_in_attention_and_attention_wins_on_long_inputs() -> None:
    for seed in RNN_SEEDS:
        plain, attn = RNN_RECIPES[f"rnn-copy-plain-s{seed}"], RNN_RECIPES[f"rnn-copy-attn-s{seed}"]
        assert (plain.attention, attn.attention) == (False, True)
        assert {**plain.__dict__, "name": "", "description": "", "attention": True} == {
            **attn.__dict__,
            "name": "",
            "description": "",
        }
        assert rnn_checkpoint_path(plain.name).stat().st_size < 300_000
    _, plain_meta = load_rnn("rnn-copy-plain-s0")
    model, attn_meta = load_rnn("rnn-copy-attn-s0")
    assert attn_meta["test_exact_match_by_length"]["12"] > 0.8
    assert plain_meta["test_exact_match_by_length"]["12"] < 0.05
    assert not model.training
    with pytest.raises(ValueError, match="name must be one of"):
        load_rnn("no-such-model")


def test_build_is_deterministic_and_load_checks_the_recipe(tmp_path, monkeypatch) -> None:
    import dataclasses

    from lecturekit.pretrained import rnn

    short = dataclasses.replace(RNN_RECIPES["rnn-copy-attn-s1"], name="rnn-short", steps=20)
    monkeypatch.setitem(rnn.RNN_RECIPES, short.name, short)
    first, meta = rnn.build_rnn(short.name, path=tmp_path / "a.pt")
    second, _ = rnn.build_rnn(short.name, path=tmp_path / "b.pt")
    assert len(meta["losses"]) == 20
    assert set(meta["test_exact_match_by_length"]) == {str(n) for n in range(1, 13)}
    for (key, a), b in zip(first.state_dict().items(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b), key
    # a shipped file built from another recipe is refused, not silently loaded
    monkeypatch.setattr(rnn, "rnn_checkpoint_path", lambda name: tmp_path / "a.pt")
    monkeypatch.setitem(rnn.RNN_RECIPES, short.name, dataclasses.replace(short, steps=21))
    with pytest.raises(ValueError, match="another recipe"):
        rnn.load_rnn(short.name)
