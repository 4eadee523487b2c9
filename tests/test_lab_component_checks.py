"""The debugging lab's component checks (each attention module against torch's, cached
against uncached decoding, the encoder under extra padding, the loss against
``F.cross_entropy``, the weight tie), the residual probe's two halves, the padding-counting
loss inside ``fit``, and the shipped symptom gallery."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lecturekit.data import batching
from lecturekit.lab import bugs, gallery
from lecturekit.lab import diagnostics as D
from lecturekit.model import layers
from lecturekit.training import fit, loop, small_train_config
from lecturekit.training.losses import label_smoothed_nll

pytestmark = pytest.mark.usefixtures("one_torch_thread")

V = 11  # the tiny model's target vocabulary (tests/_tiny_model.py)


def _src() -> torch.Tensor:
    return torch.randint(3, V, (3, 6), generator=torch.Generator().manual_seed(1))


def _training_loss(logits, target):  # what fit calls, read at call time
    return loop.label_smoothed_nll(logits, target, 0.1, 0)


def test_loss_reference_check_flags_probabilities_padding_and_wrong_smoothing():
    assert not D.loss_reference_check(_training_loss, V).flagged
    assert not D.loss_reference_check(
        lambda lg, t: F.cross_entropy(lg.transpose(1, 2), t, ignore_index=0, label_smoothing=0.1),
        V,
    ).flagged
    for name in ("loss_on_probabilities", "loss_counts_padding"):
        with bugs.plant(name):
            assert D.loss_reference_check(_training_loss, V).flagged, name
    unsmoothed = D.loss_reference_check(lambda lg, t: loop.label_smoothed_nll(lg, t, 0.0, 0), V)
    assert unsmoothed.flagged and "F.cross_entropy" in unsmoothed.message
    nan = D.loss_reference_check(lambda lg, t: lg.sum() * math.nan, V)
    assert nan.flagged and "NaN" in nan.message
    per_token = D.loss_reference_check(lambda lg, t: lg.mean(dim=-1), V)
    assert per_token.flagged and "标量" in per_token.message
    raises = D.loss_reference_check(lambda lg, t: t.foo, V)
    assert raises.flagged and "AttributeError" in raises.message


def test_weight_tie_check_passes_an_untied_model_and_flags_a_copied_tie(make_tiny_model):
    assert not D.weight_tie_check(make_tiny_model()).flagged  # no tie asked for
    tied = make_tiny_model(tie_embeddings=True)
    assert not D.weight_tie_check(tied).flagged
    with bugs.plant("tie_broken"):
        broken = make_tiny_model(tie_embeddings=True)
    assert D.weight_tie_check(broken).flagged
    assert sum(p.numel() for p in broken.parameters()) > sum(p.numel() for p in tied.parameters())


def test_cache_consistency_probe_flags_the_forgotten_offset_and_nan(make_tiny_model):
    model = make_tiny_model()
    assert not D.cache_consistency_probe(model, _src()).flagged
    with bugs.plant("kv_cache_no_offset"):
        verdict = D.cache_consistency_probe(model, _src())
        assert verdict.flagged and "KV 缓存" in verdict.message
        # teacher forcing (training, evaluation) does not see it
        assert not D.causality_probe(model, _src(), torch.ones(3, 4, dtype=torch.long)).flagged
    with pytest.raises(ValueError, match="steps"):
        D.cache_consistency_probe(model, _src(), 0)


def test_encoder_padding_probe_tells_the_encoder_mask_from_the_cross_attention_mask(
    make_tiny_model,
):
    batch = batching.collate([([3, 4, 5], [3, 4]), ([5, 6, 7, 8, 9], [6])])
    for name, encoder_flagged in (
        ("source_padding_missing", True),
        ("cross_padding_missing", False),
    ):
        with bugs.plant(name):
            model = make_tiny_model()
            assert D.padding_probe(model, batch.src, batch.tgt_in).flagged
            assert D.encoder_padding_probe(model, batch.src).flagged is encoder_flagged


def test_attention_module_check_flags_a_reshape_head_split_and_needs_attention(make_tiny_model):
    model = make_tiny_model()
    assert not D.attention_module_check(model).flagged
    with bugs.plant("heads_split_reshape"):
        assert D.attention_module_check(model).flagged
    with pytest.raises(ValueError, match="MultiHeadAttention"):
        D.attention_module_check(torch.nn.Linear(4, 4))


@pytest.mark.parametrize(
    "probe",
    [
        lambda m: D.encoder_padding_probe(m, _src()),
        D.attention_module_check,
        lambda m: D.cache_consistency_probe(m, _src()),
    ],
)
def test_component_checks_never_pass_on_nan(make_tiny_model, probe):
    model = make_tiny_model()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(math.nan)
    verdict = probe(model)
    assert verdict.flagged and "NaN" in verdict.message


def test_residual_probe_sees_an_encoder_residual_too(make_tiny_model, monkeypatch):
    src = _src()
    tgt = torch.cat([torch.ones(3, 1, dtype=torch.long), src[:, :4]], 1)

    def no_residual(self, x, src_mask=None, src_key_padding_mask=None, **kwargs):
        x = self.norm1(self.self_attn(x, x, x)[0])  # x = norm1(attn(x)): no x +
        return self.norm2(x + self.ffn(x))

    model = make_tiny_model()
    assert not D.residual_probe(model, src, tgt).flagged
    monkeypatch.setattr(layers.EncoderLayer, "forward", no_residual)
    verdict = D.residual_probe(model, src, tgt)
    assert verdict.flagged and "编码器" in verdict.message and "解码器" not in verdict.message
    monkeypatch.undo()
    with bugs.plant("residual_missing"):
        verdict = D.residual_probe(model, src, tgt)
    assert verdict.flagged and "解码器" in verdict.message and "编码器" not in verdict.message


def test_loss_counts_padding_makes_fit_average_over_every_position(make_tiny_model):
    """Planted, fit divides by every position (F.cross_entropy without ignore_index), so
    the logged first-step loss is the mean over all positions, pads included."""
    pairs = [([3, 4, 5, 6, 7, 8], [3, 4, 5, 6, 7, 8]), ([5, 6], [5])]
    batch = batching.collate(pairs)
    config = small_train_config(max_steps=1, batch_size=2, schedule="constant", lr=1e-4)

    def first_loss() -> tuple[float, float, float]:
        model = make_tiny_model()
        logits = model(batch.src, batch.tgt_in).detach()
        every = label_smoothed_nll(logits, batch.tgt_out, 0.1, None)  # never planted
        real = label_smoothed_nll(logits, batch.tgt_out, 0.1, 0)
        return fit(model, pairs, None, config).loss[0], float(every), float(real)

    logged, _, real = first_loss()
    assert logged == pytest.approx(real, rel=1e-5)
    with bugs.plant("loss_counts_padding"):
        logged, every, real = first_loss()
    assert logged == pytest.approx(every, rel=1e-5) and abs(every - real) > 1e-3


def test_the_shipped_gallery_holds_every_gallery_bug_with_its_recipe():
    shipped = gallery.load_gallery()
    assert list(shipped) == ["healthy", *gallery.GALLERY_BUGS]
    for symptom in shipped.values():
        assert symptom.steps == 300 and len(symptom.losses) == 300 // gallery.RECORD_EVERY
        assert len(symptom.outputs) == len(symptom.references) == 2
    assert set(gallery.GALLERY_BUGS) <= set(bugs.BUGS)


def test_train_with_bug_trains_decodes_and_refuses_an_unknown_bug():
    symptom = gallery.train_with_bug("positions_missing", steps=20)
    assert symptom.bug == "positions_missing" and len(symptom.losses) == 2
    assert all(math.isfinite(x) for x in symptom.losses) and len(symptom.outputs) == 2
    with pytest.raises(ValueError, match="bug must be one of"):
        gallery.train_with_bug("typo")


def _unpadded_pair() -> tuple[torch.Tensor, torch.Tensor]:
    tgt = torch.cat([torch.ones(3, 1, dtype=torch.long), _src()[:, :5]], dim=1)
    return _src(), tgt


def test_a_mystery_refusal_names_the_setting_not_the_hidden_bug(make_tiny_model):
    src, tgt = _unpadded_pair()
    with bugs.mystery(1), pytest.raises(ValueError) as hidden:
        make_tiny_model(attention_backend="sdpa")(src, tgt)
    message = str(hidden.value)
    assert "attention_backend='math'" in message and "'sdpa'" in message
    assert not any(name in message for name in bugs.BUGS), message
    with bugs.plant("causal_mask_off_by_one"), pytest.raises(ValueError, match="off_by_one"):
        make_tiny_model(attention_backend="sdpa")(src, tgt)  # planted openly: named again


def test_layernorm_axis_check_refuses_a_model_without_nn_layernorm():
    class SequenceNorm(torch.nn.Module):  # hand-written, over the sequence: the check is blind
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True)

    with pytest.raises(ValueError, match="nn.LayerNorm"):
        D.layernorm_axis_check(SequenceNorm(), torch.randn(2, 5, 4))


@pytest.mark.parametrize("name", ["no_scaling", "softmax_query_axis", "heads_split_reshape"])
def test_attention_module_check_names_scaling_softmax_axis_and_heads(make_tiny_model, name):
    with bugs.plant(name):
        verdict = D.attention_module_check(make_tiny_model())
    assert verdict.flagged
    assert all(step in verdict.message for step in ("缩放", "softmax 的轴", "多头")), verdict


def test_layernorm_wrong_axis_mixes_positions_of_a_sentence_not_sentences(make_tiny_model):
    src, tgt = _unpadded_pair()
    other = tgt.clone()
    other[1:, 1:] = (other[1:, 1:] + 1) % V  # the other sentences change
    later = tgt.clone()
    later[0, -1] = (later[0, -1] + 1) % V  # a later token of sentence 0 changes
    with bugs.plant("layernorm_wrong_axis") as bug, torch.no_grad():
        model = make_tiny_model()
        first = model(src, tgt)[0]
        torch.testing.assert_close(model(src, other)[0], first)
        assert not torch.allclose(model(src, later)[0, :-1], first[:-1])
    assert "别的句子" not in bug.symptom


@pytest.mark.parametrize("schedule", ["noam", "cosine"])
def test_post_ln_no_warmup_uses_the_peak_rate_through_the_warmup(schedule):
    config = small_train_config(schedule=schedule, warmup_steps=20, decay_steps=100)
    peak = loop.learning_rate(20, config, 32)
    with bugs.plant("post_ln_no_warmup"):
        early = [loop.learning_rate(s, config, 32) for s in (1, 10, 20)]
        later = loop.learning_rate(50, config, 32)
    assert early == [peak] * 3 and later == loop.learning_rate(50, config, 32)
