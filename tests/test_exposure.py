"""Tests for lecturekit.chapters.ch06_exposure: teacher-forced vs free-running errors."""

import math

import pytest
import torch

from lecturekit.chapters.ch06_exposure import (
    SUBSTITUTION_KINDS,
    error_after_mistake,
    exposure_report,
    free_running_predictions,
    inject_error,
    recovery_after_error,
    recovery_by_substitution,
    substitution_kind,
    teacher_forced_predictions,
)
from lecturekit.chapters.ch06_readings import is_reading, is_reading_prefix
from lecturekit.data.tasks import number_to_chinese
from lecturekit.decoding import greedy

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _brute_force_split(pred, gold, pad):
    B, T = gold.shape
    stats = {"clean": [[0, 0] for _ in range(T)], "after": [[0, 0] for _ in range(T)]}
    for b in range(B):
        for t in range(T):
            if gold[b, t] == pad:
                continue
            bad_prefix = any(pred[b, u] != gold[b, u] for u in range(t) if gold[b, u] != pad)
            group = stats["after" if bad_prefix else "clean"][t]
            group[0] += int(pred[b, t] != gold[b, t])
            group[1] += 1
    return [[e / n if n else math.nan for e, n in stats[key]] for key in ("clean", "after")], [
        [n for _, n in stats[key]] for key in ("clean", "after")
    ]


def test_error_after_mistake_matches_brute_force():
    g = torch.Generator().manual_seed(0)
    gold = torch.randint(3, 6, (40, 7), generator=g)
    gold[torch.rand(40, 7, generator=g) < 0.2] = 0
    gold = torch.where(torch.cumsum((gold == 0).long(), 1) > 0, torch.zeros_like(gold), gold)
    pred = torch.where(
        torch.rand(40, 7, generator=g) < 0.3, torch.randint(3, 6, (40, 7), generator=g), gold
    )
    clean, after, n_clean, n_after = error_after_mistake(pred, gold, pad_id=0)
    (exp_clean, exp_after), (exp_nc, exp_na) = _brute_force_split(pred, gold, 0)
    assert n_clean == exp_nc and n_after == exp_na
    for got, exp in ((clean, exp_clean), (after, exp_after)):
        for a, b in zip(got, exp, strict=True):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


def test_error_after_mistake_rejects_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        error_after_mistake(
            torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long)
        )
    with pytest.raises(TypeError, match="dtype"):
        error_after_mistake(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long))


def test_predictions_agree_with_model_and_greedy(tiny_model):
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, 9, (4, 5), generator=g)
    tgt_in = torch.cat(
        [torch.ones(4, 1, dtype=torch.long), torch.randint(3, 9, (4, 5), generator=g)], 1
    )
    tf = teacher_forced_predictions(tiny_model, src, tgt_in)
    logits = tiny_model(src, tgt_in)
    logits[..., :2] = -math.inf  # padding and BOS are never predicted, as in greedy
    assert torch.equal(tf, logits.argmax(-1))
    fr = free_running_predictions(tiny_model, src, 6)
    ref = greedy(tiny_model, src, 6).tokens
    assert fr.shape == (4, 6)
    assert torch.equal(fr[:, : ref.shape[1]], ref)
    assert (fr[:, ref.shape[1] :] == tiny_model.config.pad_id).all()
    with pytest.raises(ValueError, match="length"):
        free_running_predictions(tiny_model, src, 0)


def test_exposure_report_is_consistent(tiny_model):
    g = torch.Generator().manual_seed(2)
    src = torch.randint(3, 9, (30, 4), generator=g)
    gold = torch.randint(3, 9, (30, 5), generator=g)
    tgt_in = torch.cat([torch.ones(30, 1, dtype=torch.long), gold], 1)
    tgt_out = torch.cat([gold, torch.full((30, 1), 2)], 1)
    r = exposure_report(tiny_model, src, tgt_in, tgt_out, min_count=1)
    fr = free_running_predictions(tiny_model, src, 6)
    assert r.free_running == pytest.approx((fr != tgt_out).float().mean(0).tolist())
    assert r.token_error_free_running == pytest.approx((fr != tgt_out).float().mean().item())
    assert r.exact_match == pytest.approx((fr == tgt_out).all(1).float().mean().item())
    # position 0 has an empty prefix: every row is "clean" there and errors match
    assert r.clean_count[0] == 30 and r.after_count[0] == 0
    assert r.clean[0] == pytest.approx(r.free_running[0])
    with pytest.raises(ValueError, match="same shape"):
        exposure_report(tiny_model, src, tgt_in[:, :-1], tgt_out)


@pytest.fixture(scope="module")
def number_model_and_batch():
    """A trained model that makes some mistakes (chapter 6's teacher-forcing checkpoint) in
    float64, so that the cached and the parallel decoder passes cannot disagree on a near-tie,
    and 120 test sentences of its task."""
    from lecturekit import pretrained
    from lecturekit.data import collate, make_task

    recipe = pretrained.RECIPES["number-tf-s0"]
    task = make_task(recipe.task, **recipe.task_kwargs)
    model = pretrained.load("number-tf-s0").model.double()
    return model, collate(task.encoded("test")[:120])


def test_exact_match_equals_all_teacher_forced_predictions_right(number_model_and_batch):
    model, b = number_model_and_batch
    r = exposure_report(model, b.src, b.tgt_in, b.tgt_out, min_count=1)
    assert 0.0 < r.exact_match < 1.0  # a batch where the identity is not trivially 0 or 1
    assert r.teacher_forced_sentences == r.exact_match
    valid = b.tgt_out != 0
    expected = sum((1 - r.token_error_teacher_forced) ** int(n) for n in valid.sum(1)) / 120
    assert r.independent_exact_match == pytest.approx(expected)
    # the pooled split agrees with the per-position one and with the overall error counts
    assert r.clean_group.positions == sum(r.clean_count)  # min_count=1 keeps every position
    assert r.clean_group.positions + r.after_group.positions == int(valid.sum())
    own_errors = r.clean_group.own_prefix_errors + r.after_group.own_prefix_errors
    gold_errors = r.clean_group.gold_prefix_errors + r.after_group.gold_prefix_errors
    assert own_errors == round(r.token_error_free_running * int(valid.sum()))
    assert gold_errors == round(r.token_error_teacher_forced * int(valid.sum()))
    # on a clean prefix the model sees the gold prefix: both kinds of error coincide there
    assert r.clean_group.own_prefix_errors == r.clean_group.gold_prefix_errors
    assert r.after_group.positions > 0


def test_inject_error_changes_one_column_to_a_wrong_candidate():
    g = torch.Generator().manual_seed(4)
    tgt_in = torch.randint(3, 9, (50, 6), generator=g)
    tgt_in[:, 0] = 1
    tgt_in[:10, 3:] = 0  # ten rows end before column 3
    corrupted, rows = inject_error(
        tgt_in, 3, range(3, 9), pad_id=0, generator=torch.Generator().manual_seed(0)
    )
    assert rows.tolist() == [False] * 10 + [True] * 40
    changed = corrupted != tgt_in
    assert torch.equal(changed[:, 3], rows) and not changed[:, [0, 1, 2, 4, 5]].any()
    assert ((corrupted[:, 3] >= 3) & (corrupted[:, 3] < 9))[rows].all()
    again, _ = inject_error(
        tgt_in, 3, range(3, 9), pad_id=0, generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(again, corrupted)
    # every wrong candidate gets drawn: the draw is uniform over the others, not fixed
    draws = torch.stack(
        [
            inject_error(tgt_in[10:11], 3, range(3, 9), generator=torch.Generator().manual_seed(s))[
                0
            ][0, 3]
            for s in range(60)
        ]
    )
    assert set(draws.tolist()) == set(range(3, 9)) - {int(tgt_in[10, 3])}


def test_inject_error_rejects_bad_input():
    tgt_in = torch.ones(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="position"):
        inject_error(tgt_in, 0, [3, 4])
    with pytest.raises(ValueError, match="position"):
        inject_error(tgt_in, 4, [3, 4])
    with pytest.raises(ValueError, match="candidates"):
        inject_error(tgt_in, 1, [3])
    with pytest.raises(ValueError, match="padding"):
        inject_error(tgt_in, 1, [0, 3])
    with pytest.raises(TypeError, match="tgt_in must hold integer token ids"):
        inject_error(tgt_in.float(), 1, [3, 4])
    with pytest.raises(TypeError, match="tgt_in"):
        inject_error(tgt_in.tolist(), 1, [3, 4])
    with pytest.raises(TypeError, match="position"):
        inject_error(tgt_in, True, [3, 4])
    with pytest.raises(ValueError, match="candidates"):
        inject_error(tgt_in, 1, [3, 3])
    with pytest.raises(TypeError, match="candidates"):
        inject_error(tgt_in, 1, torch.tensor([3, 3]))  # a tensor, not ints: not two distinct ids


def _greedy_from_prefix(model, src, prefix, steps):
    """Reference: grow the prefix one argmax at a time with full forward passes."""
    out = prefix
    for _ in range(steps):
        logits = model(src, out)[:, -1]
        logits[:, :2] = -math.inf
        out = torch.cat([out, logits.argmax(-1, keepdim=True)], 1)
    return out[:, prefix.shape[1] :]


@pytest.mark.parametrize("position", [1, 2, 5])
def test_recovery_matches_greedy_continuation_of_the_corrupted_prefix(
    number_model_and_batch, position
):
    model, b = number_model_and_batch
    candidates = range(4, model.config.tgt_vocab_size)
    g = torch.Generator().manual_seed(1)
    first, r = recovery_after_error(
        model, b.src, b.tgt_in, b.tgt_out, [3, position], candidates, generator=g
    )
    assert first.position == 3 and r.position == position
    g = torch.Generator().manual_seed(1)
    inject_error(b.tgt_in, 3, candidates, generator=g)  # the draws come in the order given
    corrupted, rows = inject_error(b.tgt_in, position, candidates, generator=g)
    width = b.tgt_out.shape[1]
    gold = b.tgt_out[:, position:]
    expected = {}
    for name, inputs in (("clean", b.tgt_in), ("corrupted", corrupted)):
        cont = _greedy_from_prefix(model, b.src, inputs[:, : position + 1], width - position)
        ok = (cont == gold) | (gold == 0)  # up to the gold EOS; what follows it is ignored
        expected[name] = (ok[:, 0][rows].double().mean(), ok.all(1)[rows].double().mean())
    assert r.rows == int(rows.sum()) > 0
    assert r.next_clean == pytest.approx(float(expected["clean"][0]))
    assert r.rest_clean == pytest.approx(float(expected["clean"][1]))
    assert r.next_corrupted == pytest.approx(float(expected["corrupted"][0]))
    assert r.rest_corrupted == pytest.approx(float(expected["corrupted"][1]))
    assert r.rest_clean > r.rest_corrupted > 0.0  # neither side trivially 0 or equal


def test_recovery_rejects_bad_input(tiny_model):
    src = torch.randint(3, 9, (2, 3))
    tgt_in = torch.tensor([[1, 4, 0], [1, 5, 0]])
    tgt_out = torch.tensor([[4, 2, 0], [5, 2, 0]])
    with pytest.raises(ValueError, match="no sentence"):
        recovery_after_error(tiny_model, src, tgt_in, tgt_out, [1, 2], [3, 4])
    with pytest.raises(ValueError, match="at least one"):
        recovery_after_error(tiny_model, src, tgt_in, tgt_out, [], [3, 4])
    with pytest.raises(ValueError, match="same shape"):
        recovery_after_error(tiny_model, src, tgt_in, tgt_out[:, :2], [1], [3, 4])


def test_recovery_by_substitution_splits_recovery_after_error(number_model_and_batch):
    model, b = number_model_and_batch
    candidates = range(4, model.config.tgt_vocab_size)
    units = [5, 6]
    positions = [1, 2, 3]
    whole = recovery_after_error(
        model, b.src, b.tgt_in, b.tgt_out, positions, candidates,
        generator=torch.Generator().manual_seed(2),
    )  # fmt: skip
    split = recovery_by_substitution(
        model, b.src, b.tgt_in, b.tgt_out, positions, candidates, units,
        generator=torch.Generator().manual_seed(2),
    )  # fmt: skip
    assert {s.kind for s in split} <= set(SUBSTITUTION_KINDS)
    assert "digit->digit" in {s.kind for s in split}
    for r in whole:  # the kinds partition the rows; their weighted mean is the whole rate
        parts = [s for s in split if s.position == r.position]
        assert sum(s.rows for s in parts) == r.rows
        mean = sum(s.rows * s.rest_corrupted for s in parts) / r.rows
        assert mean == pytest.approx(r.rest_corrupted)
    # the kind is decided by the gold and the wrong token: recount it independently
    g = torch.Generator().manual_seed(2)
    for k in positions:
        corrupted, rows = inject_error(b.tgt_in, k, candidates, generator=g)
        counts = dict.fromkeys(SUBSTITUTION_KINDS, 0)
        for i in range(b.tgt_in.shape[0]):
            if bool(rows[i]):
                n_units = (int(b.tgt_in[i, k]) in units) + (int(corrupted[i, k]) in units)
                counts[SUBSTITUTION_KINDS[[0, 2, 1][n_units]]] += 1
        got = {s.kind: s.rows for s in split if s.position == k}
        assert got == {kind: n for kind, n in counts.items() if n}
        # per sentence: recovered = every label after k right on the corrupted input
        right = teacher_forced_predictions(model, b.src, corrupted) == b.tgt_out
        expected = [
            bool(rows[i]) and all(bool(right[i, t]) for t in range(k, b.tgt_out.shape[1]) if b.tgt_out[i, t] != 0)
            for i in range(b.tgt_in.shape[0])
        ]  # fmt: skip
        parts = [s for s in split if s.position == k]
        assert sum(s.recovered.long() for s in parts).tolist() == [int(e) for e in expected]
        for s in parts:
            assert int(s.recovered.sum()) == round(s.rows * s.rest_corrupted)
    every = recovery_by_substitution(
        model, b.src, b.tgt_in, b.tgt_out, [1], candidates, list(candidates)
    )
    assert [s.kind for s in every] == ["unit->unit"]


def test_substitution_kind_sorts_by_units() -> None:
    units = torch.tensor([7, 8])
    gold = torch.tensor([4, 7, 4, 8, 5])
    wrong = torch.tensor([5, 8, 7, 4, 5])
    kinds = [SUBSTITUTION_KINDS[i] for i in substitution_kind(gold, wrong, units).tolist()]
    assert kinds == ["digit->digit", "unit->unit", "digit<->unit", "digit<->unit", "digit->digit"]


def test_recovery_by_substitution_rejects_bad_input(tiny_model):
    src = torch.randint(3, 9, (2, 3))
    tgt_in = torch.tensor([[1, 4, 0], [1, 5, 0]])
    tgt_out = torch.tensor([[4, 2, 0], [5, 2, 0]])
    with pytest.raises(ValueError, match="units"):
        recovery_by_substitution(tiny_model, src, tgt_in, tgt_out, [1], [3, 4], [])
    with pytest.raises(ValueError, match="at least one output"):
        recovery_by_substitution(tiny_model, src, tgt_in, tgt_out, [], [3, 4], [3])
    with pytest.raises(ValueError, match="no sentence"):
        recovery_by_substitution(tiny_model, src, tgt_in, tgt_out, [2], [3, 4], [3])


# ---------------------------------------------------------------------------------------------
# is_reading_prefix / is_reading: against brute force over every reading
# ---------------------------------------------------------------------------------------------

READING_CHARS = "零一二三四五六七八九两十百千万"


@pytest.mark.parametrize("max_digits", [1, 2, 3, 4, 5])
def test_reading_checks_agree_with_every_reading(max_digits):
    readings = {number_to_chinese(n) for n in range(10**max_digits)}
    prefixes = {r[:i] for r in readings for i in range(len(r) + 1)}
    for p in prefixes:
        assert is_reading_prefix(p, max_digits)
        assert is_reading(p, max_digits) == (p in readings)
        # one more character: valid exactly when brute force says so
        for c in READING_CHARS if max_digits < 5 else "二两十万零":
            q = p + c
            assert is_reading_prefix(q, max_digits) == (q in prefixes), q
            assert is_reading(q, max_digits) == (q in readings), q


def test_reading_prefix_examples_of_the_chapter():
    assert is_reading_prefix("四万三千") and not is_reading_prefix("四万三百")
    assert is_reading_prefix("四十") and not is_reading("四十三千二百九十二")
    assert is_reading("十万零一") and is_reading("两万") and not is_reading("二万")
    assert not is_reading_prefix("十万", max_digits=5) and is_reading_prefix("十万")
    with pytest.raises(ValueError):
        is_reading_prefix("一", max_digits=9)
