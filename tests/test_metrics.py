import math

import pytest
import sacrebleu
import torch

from lecturekit.training.metrics import (
    char_error_rate,
    corpus_bleu,
    edit_distance,
    error_rate_by_position,
    exact_match,
    token_accuracy,
)


def test_exact_match():
    assert exact_match(["十万", "一千"], ["十万", "一千零一"]) == 0.5
    assert exact_match([[1, 2], (3,)], [(1, 2), [3]]) == 1.0
    with pytest.raises(ValueError, match="same length"):
        exact_match(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="empty"):
        exact_match([], [])


def test_token_accuracy_sequences():
    # reference tokens: 4 + 3 = 7; correct: 'a','b' (2) + 'x','y','z' (3)
    assert token_accuracy(["abcc", "xyzw"], ["abde", "xyz"]) == pytest.approx(5 / 7)
    # a short prediction misses the rest of the reference
    assert token_accuracy(["a"], ["abc"]) == pytest.approx(1 / 3)


def test_token_accuracy_tensors_ignore_padding():
    target = torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0]])
    predicted = torch.tensor([[5, 9, 2, 4], [7, 2, 3, 3]])
    assert token_accuracy(predicted, target) == pytest.approx(4 / 5)
    logits = torch.nn.functional.one_hot(predicted, 10).float()
    assert token_accuracy(logits, target) == pytest.approx(4 / 5)
    with pytest.raises(ValueError, match="only padding"):
        token_accuracy(torch.zeros(1, 2, dtype=torch.long), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        token_accuracy(predicted[:, :2], target)
    with pytest.raises(TypeError, match="both"):
        token_accuracy(predicted, target.tolist())


def test_error_rate_by_position_matches_brute_force():
    gen = torch.Generator().manual_seed(0)
    refs, preds = [], []
    for _ in range(200):
        n = int(torch.randint(1, 8, (1,), generator=gen))
        ref = torch.randint(0, 3, (n,), generator=gen).tolist()
        pred = [t if torch.rand(1, generator=gen) > 0.2 else -1 for t in ref]
        pred = pred[: int(torch.randint(0, n + 2, (1,), generator=gen))]
        refs.append(ref)
        preds.append(pred)
    rates = error_rate_by_position(preds, refs)
    assert len(rates) == max(len(r) for r in refs)
    for t, rate in enumerate(rates):
        rows = [(p, r) for p, r in zip(preds, refs, strict=True) if len(r) > t]
        wrong = sum(len(p) <= t or p[t] != r[t] for p, r in rows)
        assert math.isclose(rate, wrong / len(rows))
    assert len(error_rate_by_position(preds, refs, min_count=150)) < len(rates)


def test_error_rate_by_position_tensors():
    target = torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0]])
    predicted = torch.tensor([[5, 9, 2, 4], [8, 2, 3, 3]])
    assert error_rate_by_position(predicted, target) == [0.5, 0.5, 0.0]
    with pytest.raises(ValueError, match="min_count"):
        error_rate_by_position(predicted, target, min_count=0)


def test_corpus_bleu_uses_sacrebleu():
    hyps = ["两万零四百八十一", "十万零一", "一千零一十"]
    refs = ["两万零四百八十一", "十万零一", "一千一百"]
    expected = sacrebleu.corpus_bleu(hyps, [refs], tokenize="char").score
    assert corpus_bleu(hyps, refs) == pytest.approx(expected)
    assert 0 < corpus_bleu(hyps, refs) < 100
    assert corpus_bleu(refs, refs) == pytest.approx(100.0)
    words = ["今天 狗 大 追", "猫 鱼 喜欢"]
    assert corpus_bleu(words, words, tokenize="none") == pytest.approx(100.0)
    multi = corpus_bleu(["a b c d"], [["a b c d", "x y z w"]], tokenize="none")
    assert multi == pytest.approx(100.0)
    with pytest.raises(ValueError, match="one entry per hypothesis"):
        corpus_bleu(["a"], ["a", "b"])
    with pytest.raises(TypeError, match="str"):
        corpus_bleu(["a"], [3])


def _edit_distance_by_recursion(a: str, b: str) -> int:
    """The definition, written as plain recursion (exponential: tiny strings only)."""
    if not a or not b:
        return len(a) + len(b)
    return min(
        _edit_distance_by_recursion(a[1:], b) + 1,
        _edit_distance_by_recursion(a, b[1:]) + 1,
        _edit_distance_by_recursion(a[1:], b[1:]) + (a[0] != b[0]),
    )


def test_edit_distance_matches_the_recursive_definition():
    import itertools

    for a, b in itertools.product(["", "a", "ab", "ba", "abc", "acb", "机器", "器机学"], repeat=2):
        assert edit_distance(a, b) == _edit_distance_by_recursion(a, b), (a, b)
    assert edit_distance([1, 2, 3], (1, 3)) == 1


def test_char_error_rate():
    # 器学习 vs 机器学习: one deletion, not four position-wise mismatches
    assert char_error_rate(["器学习"], ["机器学习"]) == pytest.approx(1 / 4)
    # corpus level: total edits over total reference characters
    assert char_error_rate(["实施", ""], ["事实", "学习"]) == pytest.approx((2 + 2) / 4)
    assert char_error_rate(["是是实施"], ["实施"]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="empty"):
        char_error_rate([""], [""])
