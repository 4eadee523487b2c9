"""The chapter 4 and 5 exercises: the reference solutions against independent references,
then students' answers: correct solutions written in different styles must pass the checker
and typical mistakes must fail it, for the reason the feedback names."""

import numpy as np
import torch
import torch.nn.functional as F
from _answer_tests import (  # noqa: F401
    test_correct_solution_passes,
    test_every_exercise_has_solutions_and_mistakes,
    test_mistake_fails_for_its_reason,
)

import lecturekit
from lecturekit.exercises import check
from lecturekit.exercises.ch04_decoder import reference_causal_mask, reference_self_attention_mask
from lecturekit.exercises.ch05_training import reference_masked_cross_entropy


def test_causal_mask_matches_lecturekit_and_torch():
    for size in (1, 2, 5):
        mask = reference_causal_mask(T=size)  # the task's parameter name, shown in feedback
        assert torch.equal(mask, lecturekit.causal_mask(size))
        additive = torch.nn.Transformer.generate_square_subsequent_mask(size)
        assert torch.equal(mask, torch.isneginf(additive))


def test_attention_shapes_feedback_keeps_the_answer_hidden(capsys):
    # the chapter asks the reader to think before reading on: a wrong answer learns which
    # shape is wrong, and the answer itself only from solution(...)
    assert check("decoder.attention_shapes", ((8, 50), (8, 8))) is False
    out = capsys.readouterr().out
    assert "自注意力、交叉注意力 不对" in out and "期望" not in out
    assert "(8, 50), (8, 8)" in out and "(8, 8), (8, 50)" not in out
    assert 'solution("decoder.attention_shapes")' in out


def test_self_attention_mask_row_by_row():
    tgt = torch.tensor([[4, 0, 5, 0], [0, 0, 0, 0]])
    mask = reference_self_attention_mask(tgt, 0)
    for b in range(2):
        for i in range(4):
            for j in range(4):
                assert bool(mask[b, i, j]) == (j > i or int(tgt[b, j]) == 0)


def test_masked_cross_entropy_matches_torch_ignore_index():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    labels = torch.tensor([[1, 4, -100], [2, -100, -100]])
    expected = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100)
    torch.testing.assert_close(reference_masked_cross_entropy(logits, labels, -100), expected)
    assert float(reference_masked_cross_entropy(logits, torch.full((2, 3), 7), 7)) == 0.0


# --------------------------------------------------------------------------------------
# Students' answers: correct solutions in different styles must pass, typical mistakes fail
# --------------------------------------------------------------------------------------


def causal_triu(T):
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)


def causal_compare_positions(T):
    position = torch.arange(T)
    return position[None, :] > position[:, None]


def causal_nested_lists(T):
    return torch.tensor([[j > i for j in range(T)] for i in range(T)])


def causal_allowed_convention(T):  # True = allowed: scaled_dot_product_attention's convention
    return torch.ones(T, T, dtype=torch.bool).tril()


def causal_hides_diagonal(T):
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=0)


def causal_float(T):  # an additive float mask is a valid mask, but not the bool one asked for
    return torch.full((T, T), float("-inf")).triu(diagonal=1)


def causal_from_lecturekit(T):
    return lecturekit.causal_mask(T)


def self_mask_broadcast(tgt, pad_id):
    T = tgt.shape[1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return future | (tgt == pad_id).unsqueeze(1)


def self_mask_loops(tgt, pad_id):
    B, T = tgt.shape
    mask = torch.zeros(B, T, T, dtype=torch.bool)
    for b in range(B):
        for i in range(T):
            for j in range(T):
                mask[b, i, j] = j > i or tgt[b, j].item() == pad_id
    return mask


def self_mask_padding_queries(tgt, pad_id):  # hides padding rows instead of padding columns
    T = tgt.shape[1]
    return torch.ones(T, T, dtype=torch.bool).triu(1) | (tgt == pad_id)[:, :, None]


def self_mask_causal_only(tgt, pad_id):
    T = tgt.shape[1]
    return torch.ones(T, T, dtype=torch.bool).triu(1).expand(tgt.shape[0], T, T).clone()


def self_mask_and_instead_of_or(tgt, pad_id):
    T = tgt.shape[1]
    return torch.ones(T, T, dtype=torch.bool).triu(1) & (tgt == pad_id)[:, None, :]


def self_mask_padding_as_zero(tgt, pad_id):  # assumes the padding id is always 0
    T = tgt.shape[1]
    return torch.ones(T, T, dtype=torch.bool).triu(1) | (tgt == 0)[:, None, :]


def self_mask_from_lecturekit(tgt, pad_id):  # the chapter's own cell, wrapped in a function
    causal = lecturekit.causal_mask(tgt.shape[1])
    return causal[None, :, :] | lecturekit.padding_mask(tgt, pad_id)[:, None, :]


def self_mask_from_masks_module(tgt, pad_id):  # its own causal mask, the library's padding
    T = tgt.shape[1]
    padding = lecturekit.model.masks.padding_mask(tgt, pad_id)
    return torch.ones(T, T, dtype=torch.bool).triu(1) | padding[:, None, :]


def shapes_as_lists():
    return [[8, 8], [8, 50]]


SHAPES_FROM_TENSORS = (torch.zeros(8, 8).shape, (np.int64(8), torch.tensor(50)))


def tf_vectorised(gold, bos_id, eos_id, pad_id):
    B = gold.shape[0]
    decoder_input = torch.cat([torch.full((B, 1), bos_id), gold], dim=1)
    labels = torch.cat([gold, torch.full((B, 1), pad_id)], dim=1)
    labels[torch.arange(B), (gold != pad_id).sum(1)] = eos_id
    return decoder_input, labels


def tf_lists(gold, bos_id, eos_id, pad_id):
    inputs, labels = [], []
    for row in gold.tolist():
        words = [t for t in row if t != pad_id]
        padding = [pad_id] * (len(row) - len(words))
        inputs.append([bos_id] + words + padding)
        labels.append(words + [eos_id] + padding)
    return torch.tensor(inputs), torch.tensor(labels)


def tf_labels_without_eos(gold, bos_id, eos_id, pad_id):  # the model never learns to stop
    B = gold.shape[0]
    return (
        torch.cat([torch.full((B, 1), bos_id), gold], 1),
        torch.cat([gold, torch.full((B, 1), pad_id)], 1),
    )


def tf_not_shifted(gold, bos_id, eos_id, pad_id):  # the input already shows the answer
    _, labels = tf_vectorised(gold, bos_id, eos_id, pad_id)
    return labels.clone(), labels


def tf_eos_in_last_column(gold, bos_id, eos_id, pad_id):
    B = gold.shape[0]
    return (
        torch.cat([torch.full((B, 1), bos_id), gold], 1),
        torch.cat([gold, torch.full((B, 1), eos_id)], 1),
    )


def tf_float_tensors(gold, bos_id, eos_id, pad_id):
    decoder_input, labels = tf_vectorised(gold, bos_id, eos_id, pad_id)
    return decoder_input.float(), labels.float()


def tf_empty_sentence_gets_no_eos(gold, bos_id, eos_id, pad_id):  # skips rows without words
    decoder_input, labels = tf_vectorised(gold, bos_id, eos_id, pad_id)
    labels[(gold != pad_id).sum(1) == 0, 0] = pad_id
    return decoder_input, labels


def ce_gather(logits, labels, pad_id):
    keep = labels != pad_id
    log_probs = torch.log_softmax(logits, dim=-1)
    picked = log_probs.gather(-1, torch.where(keep, labels, 0).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum() / max(int(keep.sum()), 1)


def ce_boolean_indexing(logits, labels, pad_id):
    keep = labels != pad_id
    log_probs = torch.log_softmax(logits, dim=-1)[keep]  # (N, V), real tokens only
    picked = log_probs[torch.arange(len(log_probs)), labels[keep]]
    return -picked.mean().item() if len(picked) else 0.0


def _token_nll(logits, labels, pad_id):  # (B, T), 0 at the padding positions
    keep = labels != pad_id
    log_probs = torch.log_softmax(logits, dim=-1)
    return -log_probs.gather(-1, labels.where(keep, 0).unsqueeze(-1)).squeeze(-1) * keep


def ce_counts_padding(logits, labels, pad_id):
    safe = labels.clamp(min=0)  # -100 becomes class 0: the padding is a label like any other
    return -torch.log_softmax(logits, -1).gather(-1, safe.unsqueeze(-1)).mean()


def ce_mean_of_sentence_means(logits, labels, pad_id):
    keep = (labels != pad_id).float()
    nll = _token_nll(logits, labels, pad_id)
    return ((nll * keep).sum(1) / keep.sum(1).clamp(min=1)).mean()


def ce_divides_by_all_positions(logits, labels, pad_id):
    return _token_nll(logits, labels, pad_id).sum() / labels.numel()


def ce_nan_without_tokens(logits, labels, pad_id):  # 0/0 when the batch is all padding
    return _token_nll(logits, labels, pad_id).sum() / (labels != pad_id).sum()


def ce_torch_ignore_index(logits, labels, pad_id):  # right, but the task forbids the library
    total = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=pad_id, reduction="sum")
    return total / (labels != pad_id).sum().clamp(min=1)


def ce_nll_loss(logits, labels, pad_id):  # cross_entropy in two steps: also forbidden
    log_probs = torch.log_softmax(logits, dim=-1).transpose(1, 2)
    total = F.nll_loss(log_probs, labels, ignore_index=pad_id, reduction="sum")
    return total / (labels != pad_id).sum().clamp(min=1)


def ce_from_lecturekit(logits, labels, pad_id):  # the chapter's own loss: forbidden
    from lecturekit.training import label_smoothed_nll

    per_token = label_smoothed_nll(
        logits, labels, smoothing=0.0, ignore_index=pad_id, reduction="none"
    )
    return per_token.sum() / (labels != pad_id).sum().clamp(min=1)


def ce_edits_labels_in_place(logits, labels, pad_id):
    keep = labels != pad_id
    labels[~keep] = 0  # makes gather work, but changes the caller's tensor
    nll = -torch.log_softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    return (nll * keep).sum() / keep.sum().clamp(min=1)


def ce_pad_label_as_index(logits, labels, pad_id):  # -100 is no valid index
    keep = labels != pad_id
    nll = -torch.log_softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    return (nll * keep).sum() / keep.sum().clamp(min=1)


def noam_formula(step, d_model, warmup_steps):
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def noam_float32_tensor(step, d_model, warmup_steps):
    step = torch.tensor(float(step))
    return torch.rsqrt(torch.tensor(float(d_model))) * torch.minimum(
        torch.rsqrt(step), step / warmup_steps**1.5
    )


def noam_max(step, d_model, warmup_steps):
    return d_model**-0.5 * max(step**-0.5, step * warmup_steps**-1.5)


def noam_without_d_model(step, d_model, warmup_steps):
    return min(step**-0.5, step * warmup_steps**-1.5)


def noam_wrong_warmup_power(step, d_model, warmup_steps):
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-0.5)


def noam_steps_from_zero(step, d_model, warmup_steps):
    return noam_formula(step + 1, d_model, warmup_steps)


def noam_from_lecturekit(step, d_model, warmup_steps):  # the chapter imports it: forbidden
    from lecturekit.training import noam_lr

    return noam_lr(step, d_model, warmup_steps)


SOLUTIONS = {
    "decoder.causal_mask": [causal_triu, causal_compare_positions, causal_nested_lists],
    "decoder.self_attention_mask": [self_mask_broadcast, self_mask_loops],
    "decoder.attention_shapes": [((8, 8), (8, 50)), shapes_as_lists(), SHAPES_FROM_TENSORS],
    "training.teacher_forcing": [tf_vectorised, tf_lists],
    "training.masked_cross_entropy": [ce_gather, ce_boolean_indexing],
    "training.noam_lr": [noam_formula, noam_float32_tensor],
}

MISTAKES = {
    "decoder.causal_mask": [
        (causal_allowed_convention, "数值不对"),
        (causal_hides_diagonal, "数值不对"),
        (causal_float, "dtype 不对"),
        (causal_from_lecturekit, "不允许用它"),
    ],
    "decoder.self_attention_mask": [
        (self_mask_padding_queries, "数值不对"),
        (self_mask_causal_only, "数值不对"),
        (self_mask_and_instead_of_or, "数值不对"),
        (self_mask_padding_as_zero, "pad_id=3"),
        (self_mask_from_lecturekit, "不允许用它"),
        (self_mask_from_masks_module, "不允许用它"),
    ],
    "decoder.attention_shapes": [
        (((8, 8), (50, 8)), "得到 ((8, 8), (50, 8))：交叉注意力 不对，自注意力 对了"),
        (((8, 8), (8, 8)), "交叉注意力 不对"),
        (((8, 64), (8, 50)), "自注意力 不对，交叉注意力 对了"),
        (((50, 50), (8, 50)), "自注意力 不对"),
        (((8.0, 8.0), (8.0, 50.0)), "类型不对"),
        ((8, 8, 8, 50), "长度不对"),
    ],
    "training.teacher_forcing": [
        (tf_labels_without_eos, "数值不对"),
        (tf_not_shifted, "数值不对"),
        (tf_eos_in_last_column, "数值不对"),
        (tf_float_tensors, "dtype 不对"),
        (tf_empty_sentence_gets_no_eos, "空句子"),
    ],
    "training.masked_cross_entropy": [
        (ce_counts_padding, "期望"),
        (ce_mean_of_sentence_means, "期望"),
        (ce_divides_by_all_positions, "期望"),
        (ce_nan_without_tokens, "得到 nan"),
        (ce_edits_labels_in_place, "修改了输入参数 labels"),
        (ce_pad_label_as_index, "出错"),
        (ce_torch_ignore_index, "不允许用它"),
        (ce_nll_loss, "不允许用它"),
        (ce_from_lecturekit, "不允许用它"),
    ],
    "training.noam_lr": [
        (noam_max, "期望"),
        (noam_without_d_model, "期望"),
        (noam_wrong_warmup_power, "期望"),
        (noam_steps_from_zero, "期望"),
        (noam_from_lecturekit, "不允许用它"),
    ],
}


# SOLUTIONS and MISTAKES cover every exercise of these chapters (tests/_answer_tests.py)
CHAPTERS = (4, 5)
