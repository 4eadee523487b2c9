"""The chapter 7 exercise whose answer is a Triton kernel: the reference kernel and other
correct kernels pass the checker, typical mistakes fail it (under the interpreter here, or on
a GPU), for the reason the feedback names."""

import pytest
import torch
import triton
import triton.language as tl
from _answer_tests import test_correct_solution_passes, test_mistake_fails_for_its_reason  # noqa: F401

from lecturekit.exercises import get_exercise, list_exercises
from lecturekit.exercises.ch07_kernels import _masked_lanes_poisoned
from lecturekit.exercises.triton_answers import attention_kernel, row_sum_kernel
from lecturekit.kernels._utils import interpreter_enabled


@triton.jit
def row_sum_scalar_total(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    total = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(X + row * stride_row + cols, mask=cols < n_cols, other=0.0)
        total += tl.sum(x, axis=0)
    tl.store(OUT + row, total)


@triton.jit
def row_sum_without_mask(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        acc += tl.load(X + row * stride_row + start + tl.arange(0, BLOCK))  # reads past the row
    tl.store(OUT + row, tl.sum(acc, axis=0))


@triton.jit
def row_sum_mask_off_by_one(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(X + row * stride_row + cols, mask=cols <= n_cols, other=0.0)
    tl.store(OUT + row, tl.sum(acc, axis=0))


@triton.jit
def row_sum_mask_without_other(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)  # masked lanes are undefined on a GPU: 0 only in the interpreter
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(X + row * stride_row + cols, mask=cols < n_cols)
    tl.store(OUT + row, tl.sum(acc, axis=0))


@triton.jit
def row_sum_rows_n_cols_apart(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)  # assumes the rows are packed: ignores stride_row
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(X + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(OUT + row, tl.sum(acc, axis=0))


@triton.jit
def row_sum_one_block_only(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)  # no loop: columns past the first block are never read
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride_row + cols, mask=cols < n_cols, other=0.0)
    tl.store(OUT + row, tl.sum(x, axis=0))


@triton.jit
def row_sum_skeleton(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):
    pass  # what a notebook commits before the reader's attempt


def test_an_empty_kernel_is_not_yet_done_and_gets_no_hint(capsys):
    from lecturekit.exercises import check

    assert check("kernels.row_sum_kernel", row_sum_skeleton) is False
    out = capsys.readouterr().out
    assert "尚未完成：内核没有往 OUT 里写任何结果" in out and "💡" not in out, out


def row_sum_in_python(X, OUT, n_cols, stride_row, BLOCK):  # no @triton.jit
    return None


@triton.jit
def attention_exp2_broadcast(
    Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr
):
    # exp2 with log2(e) folded in, scores by broadcasting instead of tl.dot
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ok = offs_m[:, None] < n_q
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in range(0, n_k, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        in_range = offs_n < n_k
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=in_range[:, None], other=0.0)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=in_range[:, None], other=0.0)
        s = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * 1.4426950408889634  # base 2
        s += tl.where(in_range, 0.0, float("-inf"))[None, :]
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = alpha * l_i + tl.sum(p, axis=1)
        acc = alpha[:, None] * acc + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m_i = m_new
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + offs_m[:, None] * D + offs_d[None, :], out, mask=q_ok)


@triton.jit
def attention_keys_unmasked(
    Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr
):
    # reads K and V past the last key
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ok = offs_m[:, None] < n_q
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in range(0, n_k, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :])
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :])
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + offs_m[:, None] * D + offs_d[None, :], out, mask=q_ok)


@triton.jit
def attention_load_without_other(
    Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr
):
    # masked loads without other=: undefined lanes on a GPU
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ok = offs_m[:, None] < n_q
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in range(0, n_k, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ok = offs_n[:, None] < n_k
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=k_ok)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=k_ok)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        s = tl.where(offs_n[None, :] < n_k, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + offs_m[:, None] * D + offs_d[None, :], out, mask=q_ok)


@triton.jit
def attention_padding_scores_kept(
    Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr
):
    # loads masked, but keys past n_k keep the score 0
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ok = offs_m[:, None] < n_q
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in range(0, n_k, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ok = offs_n[:, None] < n_k
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + offs_m[:, None] * D + offs_d[None, :], out, mask=q_ok)


@triton.jit
def attention_acc_not_rescaled(
    Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr
):
    # acc never multiplied by alpha
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ok = offs_m[:, None] < n_q
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in range(0, n_k, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ok = offs_n[:, None] < n_k
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        s = tl.where(offs_n[None, :] < n_k, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + offs_m[:, None] * D + offs_d[None, :], out, mask=q_ok)


@triton.jit
def attention_l_not_rescaled(
    Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr
):
    # l never multiplied by alpha
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ok = offs_m[:, None] < n_q
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in range(0, n_k, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ok = offs_n[:, None] < n_k
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        s = tl.where(offs_n[None, :] < n_k, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + offs_m[:, None] * D + offs_d[None, :], out, mask=q_ok)


@triton.jit
def attention_alpha_inverted(
    Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr
):
    # exp(m_new - m_i): the factor of the wrong direction
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ok = offs_m[:, None] < n_q
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in range(0, n_k, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ok = offs_n[:, None] < n_k
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        s = tl.where(offs_n[None, :] < n_k, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_new - m_i)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + offs_m[:, None] * D + offs_d[None, :], out, mask=q_ok)


@triton.jit
def attention_max_never_updated(
    Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr
):
    # m_i stays -inf: every block is taken relative to its own max
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ok = offs_m[:, None] < n_q
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in range(0, n_k, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ok = offs_n[:, None] < n_k
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        s = tl.where(offs_n[None, :] < n_k, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + offs_m[:, None] * D + offs_d[None, :], out, mask=q_ok)


@triton.jit
def attention_skeleton(
    Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr
):
    # what the notebook commits before the reader's attempt
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_ok = offs_m[:, None] < n_q
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)  # noqa: F841
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # noqa: F841
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start_n in range(0, n_k, BLOCK_N):  # noqa: B007
        pass
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + offs_m[:, None] * D + offs_d[None, :], out, mask=q_ok)


SOLUTIONS = {
    "kernels.row_sum_kernel": [row_sum_kernel, row_sum_scalar_total],
    "kernels.attention_kernel": [attention_kernel, attention_exp2_broadcast],
}

MISTAKES = {
    "kernels.row_sum_kernel": [
        (row_sum_without_mask, "得到 nan"),
        (row_sum_mask_off_by_one, "得到 nan"),
        (row_sum_mask_without_other, "得到 nan"),
        (row_sum_rows_n_cols_apart, "数值不对"),
        (row_sum_one_block_only, "C = 32 是 4 块"),
        (row_sum_in_python, "@triton.jit"),
    ],
    "kernels.attention_kernel": [
        (attention_keys_unmasked, "得到 nan"),
        (attention_load_without_other, "得到 nan"),
        (attention_padding_scores_kept, "数值不对"),
        (attention_acc_not_rescaled, "数值不对"),
        (attention_l_not_rescaled, "数值不对"),
        (attention_alpha_inverted, "数值不对"),
        (attention_max_never_updated, "数值不对"),
        (attention_skeleton, "尚未完成"),
    ],
}


def test_every_kernel_exercise_has_solutions_and_mistakes():
    ids = [i for i in list_exercises(chapter=7) if get_exercise(i).launch is not None]
    assert sorted(SOLUTIONS) == sorted(MISTAKES) == sorted(ids)
    assert ids and sorted(ids) == ["kernels.attention_kernel", "kernels.row_sum_kernel"]


@pytest.mark.skipif(not interpreter_enabled(), reason="the interpreter fills masked lanes")
def test_masked_lanes_read_nan_only_while_poisoned():
    """The interpreter reads 0 in masked lanes without ``other``; the checker makes them NaN
    while a student's kernel runs, then puts the interpreter back as it was."""
    x = torch.ones(2, 3)

    def run() -> torch.Tensor:
        out = torch.empty(2)
        row_sum_mask_without_other[(2,)](x, out, 3, 3, BLOCK=4)
        return out

    assert torch.equal(run(), torch.full((2,), 3.0))
    with _masked_lanes_poisoned():
        assert run().isnan().all()
        out = torch.empty(2)
        row_sum_kernel[(2,)](x, out, 3, 3, BLOCK=4)  # other=0.0: unaffected
        assert torch.equal(out, torch.full((2,), 3.0))
    assert torch.equal(run(), torch.full((2,), 3.0))
