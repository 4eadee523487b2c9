"""The debugging lab: every planted bug is undone on exit, every diagnostic flags its bug and
passes the healthy model, and the find-the-bug checker accepts only the hidden bug's name."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import math
import sys

import pytest
import torch

from lecturekit import pretrained
from lecturekit.data import batching
from lecturekit.decoding import beam, beam_search, greedy
from lecturekit.exercises import LAB, check, get_exercise, list_exercises, show
from lecturekit.lab import bugs
from lecturekit.lab import diagnostics as D
from lecturekit.model import attention, layers, masks
from lecturekit.training import loop, small_train_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

V = 11  # the tiny model's target vocabulary (tests/_tiny_model.py)


def _batch() -> batching.Batch:
    """Four sentences of different lengths, padded (right) by the pipeline's collate."""
    gen = torch.Generator().manual_seed(0)
    lengths = (5, 7, 4, 6)
    pairs = [([int(t) for t in torch.randint(3, V, (n,), generator=gen)],) * 2 for n in lengths]
    return batching.collate(pairs)  # read at call time: a planted collate is used


def _unpadded() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(3, V, (3, 6), generator=gen)
    tgt = torch.cat(
        [torch.ones(3, 1, dtype=torch.long), torch.randint(3, V, (3, 5), generator=gen)], 1
    )
    return src, tgt


def _model_probes() -> dict[str, object]:
    src, tgt = _unpadded()
    batch = _batch()
    return {
        "causality_probe": lambda m: D.causality_probe(m, src, tgt),
        "mask_sanity": lambda m: D.mask_sanity(m, src, tgt),
        "attention_reference_check": lambda m: D.attention_reference_check(),
        "attention_module_check": D.attention_module_check,
        "permutation_probe": lambda m: D.permutation_probe(m, src),
        "padding_probe": lambda m: D.padding_probe(m, batch.src, batch.tgt_in),
        "encoder_padding_probe": lambda m: D.encoder_padding_probe(m, batch.src),
        "layernorm_axis_check": lambda m: D.layernorm_axis_check(m, src, tgt),
        "residual_probe": lambda m: D.residual_probe(m, src, tgt),
        "embedding_scale_check": lambda m: D.embedding_scale_check(m, src),
        "initial_loss_check": lambda m: D.initial_loss_check(m, batch),
        "cache_consistency_probe": lambda m: D.cache_consistency_probe(m, src),
        "weight_tie_check": D.weight_tie_check,
    }


# the probes of a model alone, and which of them each forward-pass bug trips (any future
# leak also makes cached decoding differ from recomputing the prefix)
_LEAK = {"causality_probe", "cache_consistency_probe"}
EXPECTED = {
    "causal_mask_missing": {"causality_probe", "mask_sanity"},  # the cached path masks
    "causal_mask_inverted": _LEAK | {"mask_sanity", "attention_reference_check"},
    "causal_mask_off_by_one": {"causality_probe", "mask_sanity", "attention_reference_check"},
    "no_scaling": {"attention_reference_check", "attention_module_check"},
    "softmax_query_axis": _LEAK
    | {
        "mask_sanity",
        "attention_reference_check",
        "attention_module_check",
        "padding_probe",  # NaN on a padded batch: a fully masked key column
        "encoder_padding_probe",
        "initial_loss_check",
    },
    "heads_split_reshape": _LEAK
    | {"attention_module_check", "padding_probe", "encoder_padding_probe"},
    "source_padding_missing": {"padding_probe", "encoder_padding_probe"},
    "cross_padding_missing": {"padding_probe"},
    "positions_missing": {"permutation_probe"},
    "kv_cache_no_offset": {"cache_consistency_probe"},
    "layernorm_wrong_axis": _LEAK
    | {"padding_probe", "encoder_padding_probe", "layernorm_axis_check"},
    "residual_missing": {"residual_probe"},
    "embedding_not_scaled": {"embedding_scale_check"},
    "tied_embedding_std1": {"initial_loss_check"},
    "tie_broken": {"weight_tie_check"},
}
# the bugs outside the model's forward pass: no probe of a fresh model sees them
TRAINING_BUGS = {
    "loss_counts_padding",
    "loss_on_probabilities",
    "labels_not_shifted",
    "dropout_at_decoding",
    "post_ln_no_warmup",
    "beam_summed_log_prob",
}


def test_every_bug_names_an_existing_diagnostic_and_its_own_switch():
    assert len(bugs.BUGS) >= 12
    for name, bug in bugs.BUGS.items():
        assert bug.name == name and bug.line and bug.where.startswith("lecturekit.")
        assert bug.diagnostic in D.__all__, bug.diagnostic
    assert set(bugs.MODEL_BUGS) <= set(EXPECTED)
    assert set(EXPECTED) | TRAINING_BUGS == set(bugs.BUGS)


@pytest.mark.parametrize("name", sorted(bugs.BUGS))
def test_every_bug_quotes_the_healthy_line_of_the_code_it_changes(name):
    """The healthy line a bug's entry prints is in the source of the object it names."""
    bug = bugs.BUGS[name]
    parts = bug.where.split(".")
    module_name = next(
        ".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in sys.modules
    )
    target: object = importlib.import_module(module_name)
    for attribute in parts[len(module_name.split(".")) :]:
        target = getattr(target, attribute)
    holder = target if inspect.isfunction(target) else importlib.import_module(module_name)
    assert bug.healthy in inspect.getsource(holder), (name, bug.healthy)
    assert bug.line != bug.healthy


@pytest.mark.parametrize("name", sorted(TRAINING_BUGS))
def test_the_training_bugs_leave_a_fresh_model_passing_every_model_probe(make_tiny_model, name):
    with bugs.plant(name):
        model = make_tiny_model(tie_embeddings=True)
        assert not [p for p, run in _model_probes().items() if run(model).flagged]


def test_the_healthy_model_passes_every_model_probe(make_tiny_model):
    model = make_tiny_model(tie_embeddings=True)
    for probe, run in _model_probes().items():
        assert not run(model).flagged, probe


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_forward_pass_bug_trips_exactly_its_probes(make_tiny_model, name):
    with bugs.plant(name):  # built inside: the initialisation bug acts at construction
        model = make_tiny_model(tie_embeddings=True)
        flagged = {probe for probe, run in _model_probes().items() if run(model).flagged}
    assert flagged == EXPECTED[name]
    assert BUG_DIAGNOSTIC_IN(name, flagged)


def BUG_DIAGNOSTIC_IN(name: str, flagged: set[str]) -> bool:  # noqa: N802
    """The diagnostic the table names first is among the probes that fire."""
    return bugs.BUGS[name].diagnostic in flagged | {"mask_picture"}


def test_mask_picture_shows_the_three_masks(make_tiny_model):
    src, tgt = _unpadded()
    model = make_tiny_model()
    assert D.mask_picture(model, src, tgt[:, :3]).splitlines() == [
        "查询  0 ■··",
        "查询  1 ■■·",
        "查询  2 ■■■",
    ]
    with bugs.plant("causal_mask_inverted"):
        assert D.mask_picture(model, src, tgt[:, :3]).splitlines()[0] == "查询  0 ·■■"
    with bugs.plant("causal_mask_missing"):
        assert D.mask_picture(model, src, tgt[:, :3]).splitlines()[0] == "查询  0 ■■■"


@pytest.mark.parametrize("name", sorted(bugs.BUGS))
def test_plant_restores_every_attribute_even_after_an_exception(name):
    watched = [
        (attention, "ATTENTION_FUNCTIONS"), (attention, "_attention_steps"),
        (attention, "torch"), (attention, "_causal_mask"), (masks, "_causal_mask"),
        (layers, "LAYER_NORM_FUNCTIONS"), (layers.Decoder, "forward"),
        (layers.DecoderLayer, "_add_and_norm"), (layers.SinusoidalPositionalEncoding, "forward"),
        (batching, "collate"), (loop, "label_smoothed_nll"), (loop, "learning_rate"),
        (beam, "_penalty"), (beam, "eval_mode"),
    ]  # fmt: skip
    before = [getattr(obj, attr) for obj, attr in watched]
    with pytest.raises(RuntimeError, match="boom"), bugs.plant(name):
        raise RuntimeError("boom")
    assert [getattr(obj, attr) for obj, attr in watched] == before
    with bugs.plant(name):
        pass
    assert [getattr(obj, attr) for obj, attr in watched] == before


def test_the_healthy_behaviour_is_back_after_a_planted_block(make_tiny_model):
    model = make_tiny_model()
    src, tgt = _unpadded()
    with contextlib.suppress(RuntimeError), bugs.plant("causal_mask_missing"):
        assert D.causality_probe(model, src, tgt).flagged
        raise RuntimeError("boom")
    assert not D.causality_probe(model, src, tgt).flagged


def test_plant_refuses_an_unknown_name():
    with pytest.raises(ValueError, match="name must be one of"), bugs.plant("typo"):
        pass


def test_loss_padding_probe_flags_a_loss_that_counts_padding():
    batch = _batch()
    logits = torch.randn(*batch.tgt_out.shape, V, generator=torch.Generator().manual_seed(0))

    def loss(lg, target):  # the loss fit uses, read at call time
        return loop.label_smoothed_nll(lg, target, 0.1, 0)

    assert not D.loss_padding_probe(loss, logits, batch.tgt_out).flagged
    with bugs.plant("loss_counts_padding"):
        assert D.loss_padding_probe(loss, logits, batch.tgt_out).flagged


def test_label_shift_check_flags_unshifted_labels():
    assert not D.label_shift_check(_batch()).flagged
    with bugs.plant("labels_not_shifted"):
        assert D.label_shift_check(_batch()).flagged


def test_determinism_probe_flags_dropout_left_on(make_tiny_model):
    model = make_tiny_model(dropout=0.5).train()  # as after a training loop
    src, _ = _unpadded()
    assert not D.determinism_probe(lambda: greedy(model, src, 8).tokens).flagged
    with bugs.plant("dropout_at_decoding"):
        assert D.determinism_probe(lambda: greedy(model, src, 8).tokens).flagged


def test_warmup_check_flags_a_schedule_without_warmup():
    config = small_train_config()
    assert not D.warmup_check(lambda step: loop.learning_rate(step, config, 64)).flagged
    with bugs.plant("post_ln_no_warmup"):
        assert D.warmup_check(lambda step: loop.learning_rate(step, config, 64)).flagged
        after = [loop.learning_rate(s, config, 64) for s in (200, 400)]
    assert after == [loop.learning_rate(s, config, 64) for s in (200, 400)]  # decay unchanged


def test_beam_ranking_check_flags_ranking_by_summed_log_prob():
    ckpt = pretrained.load("reverse-tiny")
    src = batching.collate(pretrained.recipe_task("reverse-tiny").encoded("test")[:8]).src

    def ranked() -> list[list[tuple[int, float]]]:
        out = beam_search(ckpt.model, src, 5, 14, length_penalty=1.0, n_best=5)
        return [[(len(h.tokens), h.log_prob) for h in hyps] for hyps in out.hypotheses]

    assert not any(D.beam_ranking_check(r, 1.0).flagged for r in ranked())
    with bugs.plant("beam_summed_log_prob"):
        assert any(D.beam_ranking_check(r, 1.0).flagged for r in ranked())
    # by hand: alpha = 2 divides log P by (8/6)^2 and (14/6)^2, the longer one ranks first
    assert D.beam_ranking_check([(3, -1.0), (9, -1.2)], 2.0).flagged
    assert not D.beam_ranking_check([(9, -1.2), (3, -1.0)], 2.0).flagged
    assert not D.beam_ranking_check([(3, -1.0), (9, -1.2)], 0.0).flagged


def test_free_running_check_flags_an_undertrained_model_and_passes_a_trained_one():
    def run(name: str) -> D.Diagnosis:
        ckpt = pretrained.load(name)
        pairs = pretrained.recipe_task(name).encoded("test")[:100]
        return D.free_running_check(ckpt.model, [batching.collate(pairs)])

    assert run("reverse-tiny").flagged  # 128 steps: right with the gold prefix only
    assert not run("reverse-small").flagged


def test_overfit_one_batch_flags_unshifted_labels(make_tiny_model):
    model = make_tiny_model(d_model=32, n_heads=4, d_ff=64)
    assert not D.overfit_one_batch(model, _batch(), steps=60, lr=1e-2).flagged
    with bugs.plant("labels_not_shifted"):
        assert D.overfit_one_batch(model, _batch(), steps=60, lr=1e-2).flagged


def test_gradient_norms_by_layer_names_every_layer(make_tiny_model):
    model = make_tiny_model(n_encoder_layers=2, n_decoder_layers=3)
    norms = D.gradient_norms_by_layer(model, _batch())
    assert list(norms) == ["encoder.0", "encoder.1", "decoder.0", "decoder.1", "decoder.2"]
    assert all(math.isfinite(v) and v > 0 for v in norms.values())
    assert all(p.grad is None for p in model.parameters())


def test_diagnosis_prints_a_verdict_without_numbers(make_tiny_model):
    src, tgt = _unpadded()
    text = str(D.causality_probe(make_tiny_model(), src, tgt))
    assert text.startswith("causality_probe：放行（") and not any(c.isdigit() for c in text)


def test_mystery_flag_patterns_need_reasoning(make_tiny_model):
    """No mystery's flag pattern is a row of the lab's table: case 1 hides a bug left out of
    it (mask_sanity's message and the mask picture name it), case 2's two bugs flag their
    union, case 3 passes every probe of a model."""
    patterns, message = {}, ""
    for case in (1, 2, 3):
        with bugs.mystery(case):
            model = make_tiny_model(tie_embeddings=True)
            patterns[case] = {p for p, run in _model_probes().items() if run(model).flagged}
            if case == 1:
                message = D.mask_sanity(model, *_unpadded()).message
    table = [EXPECTED[name] for name in bugs.MODEL_BUGS]
    assert "causal_mask_off_by_one" not in bugs.MODEL_BUGS
    assert patterns[1] == EXPECTED["causal_mask_off_by_one"] and patterns[1] not in table
    assert message == "未来的位置有权重"  # the inverted mask reports three problems
    assert patterns[2] == EXPECTED["causal_mask_missing"] | EXPECTED["source_padding_missing"]
    assert patterns[2] not in list(EXPECTED.values())
    assert patterns[3] == set()


def test_mystery_refuses_an_unknown_case():
    with pytest.raises(ValueError, match="case"), bugs.mystery(4):
        pass


def test_the_checkers_accept_only_the_hidden_bugs(capsys):
    ids = list_exercises(chapter=LAB)
    assert ids == ["lab.find_bug_1", "lab.find_bug_2", "lab.find_bug_3"]
    one, pair, three = (get_exercise(i).reference for i in ids)
    for exercise_id, right in (("lab.find_bug_1", one), ("lab.find_bug_3", three)):
        assert check(exercise_id, right)
        assert check(exercise_id, _AlwaysEqual(right))  # a str subclass: its plain value counts
        assert check(exercise_id, f" {right}\n")  # copied with a stray space
        for wrong in (None, [right], right.upper(), f"bugs.{right}", "no_such_bug"):
            assert not check(exercise_id, wrong), wrong
        capsys.readouterr()
        for other in sorted(set(bugs.BUGS) - {right}):
            assert not check(exercise_id, other)
        assert right not in capsys.readouterr().out  # a wrong guess does not reveal the answer
    assert check("lab.find_bug_2", list(pair))
    assert check("lab.find_bug_2", tuple(reversed(pair)))
    assert check("lab.find_bug_2", [f"{pair[1]} ", pair[0]])
    capsys.readouterr()
    wrong = [
        pair[0],  # one name as a str
        [pair[0]],  # one of the two
        [pair[0], pair[0]],  # the same name twice
        [pair[0], "softmax_query_axis"],  # one right, one wrong
        [*pair, "no_scaling"],  # a third name
        ["causal_mask_inverted", "cross_padding_missing"],  # both wrong
        [pair[0], "typo"],
        {"a": pair[0], "b": pair[1]},  # a dict
        [pair[0], 3],  # a name and a number
        None,
    ]
    for answer in wrong:
        assert not check("lab.find_bug_2", answer), answer
    output = capsys.readouterr().out
    assert "请给出正好两个不同的名字" in output and "不都对" in output
    assert "不是已知的 bug 名字" in output and "两个名字组成的列表" in output
    show(ids[0])
    assert "（调试实验）" in capsys.readouterr().out


def _nan_probes() -> dict[str, object]:
    """Every model probe that compares a number with a limit (NaN compares False)."""
    src, tgt = _unpadded()
    batch = _batch()
    return {
        "causality_probe": lambda m: D.causality_probe(m, src, tgt),
        "padding_probe": lambda m: D.padding_probe(m, batch.src, batch.tgt_in),
        "permutation_probe": lambda m: D.permutation_probe(m, src),
        "layernorm_axis_check": lambda m: D.layernorm_axis_check(m, src, tgt),
        "residual_probe": lambda m: D.residual_probe(m, src, tgt),
        "mask_sanity": lambda m: D.mask_sanity(m, src, tgt),
        "initial_loss_check": lambda m: D.initial_loss_check(m, batch),
    }


@pytest.mark.parametrize("probe", sorted(_nan_probes()))
def test_gap_probes_flag_a_model_whose_output_is_nan(make_tiny_model, probe):
    model = make_tiny_model()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(math.nan)  # nan > tolerance is False: a plain comparison would pass
    verdict = _nan_probes()[probe](model)
    assert verdict.flagged and "NaN" in verdict.message


def test_loss_padding_probe_flags_a_nan_loss():
    batch = _batch()
    logits = torch.full((*batch.tgt_out.shape, V), math.nan)
    verdict = D.loss_padding_probe(lambda lg, t: lg.mean(), logits, batch.tgt_out)
    assert verdict.flagged and "NaN" in verdict.message


def test_softmax_over_queries_turns_a_padded_batch_into_nan(make_tiny_model):
    batch = _batch()
    with bugs.plant("softmax_query_axis"):
        model = make_tiny_model()
        assert not torch.isfinite(model(batch.src, batch.tgt_in)).all()
        assert D.padding_probe(model, batch.src, batch.tgt_in).flagged


def test_no_scaling_keeps_is_causal_and_drops_only_the_scale():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=gen) for _ in range(3))
    with bugs.plant("no_scaling"):
        _, weights = attention._attention_steps(q, k, v, None, 0.0, True)
    future = torch.ones(4, 4, dtype=torch.bool).triu(1)
    expected = torch.softmax((q @ k.transpose(-2, -1)).masked_fill(future, -math.inf), -1)
    torch.testing.assert_close(weights, expected)


@pytest.mark.parametrize("name", ["no_scaling", "softmax_query_axis", "causal_mask_inverted"])
def test_attention_bugs_refuse_a_backend_they_do_not_change(make_tiny_model, name):
    src, tgt = _unpadded()
    with bugs.plant(name):
        model = make_tiny_model(attention_backend="sdpa")
        with pytest.raises(ValueError, match="attention_backend must be 'math'.*got 'sdpa'"):
            model(src, tgt)
        make_tiny_model()(src, tgt)  # the math backend runs, with the bug


def test_residual_missing_refuses_a_pre_ln_model(make_tiny_model):
    src, tgt = _unpadded()
    with bugs.plant("residual_missing"):
        with pytest.raises(ValueError, match="norm_first must be False"):
            make_tiny_model(norm_first=True)(src, tgt)
        make_tiny_model()(src, tgt)


def test_free_running_check_counts_eos_in_both_accuracies(monkeypatch):
    """A model right on every token but <eos>, with and without the gold prefix: the two
    accuracies must agree (counting <eos> in one only would make a gap out of nothing)."""
    from types import SimpleNamespace

    batch = _batch()
    never_eos = batch.tgt_out.masked_fill(batch.tgt_out == 2, 3)  # <eos> (id 2) -> a word

    class NoEos(torch.nn.Module):
        config = SimpleNamespace(eos_id=2, pad_id=0)

        def forward(self, src, tgt_in):
            return torch.nn.functional.one_hot(never_eos, V).float()

    monkeypatch.setattr(D, "greedy", lambda m, s, n: SimpleNamespace(tokens=never_eos))
    verdict = D.free_running_check(NoEos(), [batch])
    assert abs(verdict.value) < 1e-12 and not verdict.flagged


class _AlwaysEqual(str):
    """A str whose comparisons always say "equal" (issue 45.3)."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


def test_a_str_subclass_that_claims_equality_is_read_as_its_plain_value(capsys):
    for exercise_id in ("lab.find_bug_1", "lab.find_bug_3"):
        hidden = get_exercise(exercise_id).reference
        wrong = next(name for name in sorted(bugs.BUGS) if name != hidden)
        assert check(exercise_id, _AlwaysEqual(wrong)) is False
        assert "藏着的不是" in capsys.readouterr().out
        assert check(exercise_id, _AlwaysEqual("no_such_bug")) is False
        assert "不是已知的 bug 名字" in capsys.readouterr().out
    pair = get_exercise("lab.find_bug_2").reference
    assert check("lab.find_bug_2", [_AlwaysEqual(pair[0]), _AlwaysEqual("no_scaling")]) is False


@pytest.mark.parametrize("name", ["causal_mask_inverted", "residual_missing", "no_scaling"])
def test_planting_a_bug_twice_keeps_it_planted_once(make_tiny_model, name):
    model = make_tiny_model()
    probes = _model_probes()
    with bugs.plant(name):
        once = {p for p, run in probes.items() if run(model).flagged}
        with bugs.plant(name):  # a learner's guess inside mystery: the same bug again
            twice = {p for p, run in probes.items() if run(model).flagged}
        after_inner = {p for p, run in probes.items() if run(model).flagged}
    assert once == twice == after_inner == EXPECTED[name]  # no alarm vanishes
    assert not any(run(model).flagged for run in probes.values())  # all restored at the end


def test_diagnostics_never_pass_on_nan(make_tiny_model):
    src, tgt = _unpadded()
    model = make_tiny_model()
    with torch.no_grad():
        model.src_embedding.weight.fill_(math.nan)
    verdict = D.embedding_scale_check(model, src)
    assert verdict.flagged and "NaN" in verdict.message
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(math.nan)
    picture = D.mask_picture(model, src, tgt)
    assert "·" not in picture and "?" in picture and "NaN" in picture  # no NaN drawn as zero
    verdict = D.warmup_check(lambda step: math.nan if step > 10 else step * 1e-4)
    assert verdict.flagged and "NaN" in verdict.message
    verdict = D.beam_ranking_check([(3, -1.0), (5, math.nan)], 1.0)
    assert verdict.flagged and "NaN" in verdict.message
    with pytest.raises(ValueError, match="batches must hold at least one"):
        D.free_running_check(model, [])


def test_attention_reference_check_reports_a_broken_attend_as_its_finding():
    import torch.nn.functional as F

    def ignores_k(q, k, v):  # a plausible student bug: scores from q against itself
        return F.scaled_dot_product_attention(q, q, v, is_causal=True)

    def with_weights(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True), None

    def detached(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).detach()

    def nan(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) * math.nan

    def raises(q, k, v):
        raise IndexError("dimension out of range")

    assert not D.attention_reference_check(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ).flagged
    for attend, words in [
        (ignores_k, "不一致"),
        (with_weights, "不要返回 (输出, 权重)"),
        (detached, "断开了计算图"),
        (nan, "NaN"),
        (raises, "IndexError"),
    ]:
        verdict = D.attention_reference_check(attend)
        assert verdict.flagged and words in verdict.message, (attend.__name__, verdict)
