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
from lecturekit.exercises.triton_answers import row_sum_kernel
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
    assert "尚未完成：核函数没有往 OUT 里写任何结果" in out and "💡" not in out, out


def row_sum_in_python(X, OUT, n_cols, stride_row, BLOCK):  # no @triton.jit
    return None


SOLUTIONS = {"kernels.row_sum_kernel": [row_sum_kernel, row_sum_scalar_total]}

MISTAKES = {
    "kernels.row_sum_kernel": [
        (row_sum_without_mask, "得到 nan"),
        (row_sum_mask_off_by_one, "得到 nan"),
        (row_sum_mask_without_other, "得到 nan"),
        (row_sum_rows_n_cols_apart, "数值不对"),
        (row_sum_one_block_only, "C = 32 是 4 块"),
        (row_sum_in_python, "@triton.jit"),
    ]
}


def test_every_kernel_exercise_has_solutions_and_mistakes():
    ids = [i for i in list_exercises(chapter=7) if get_exercise(i).launch is not None]
    assert sorted(SOLUTIONS) == sorted(MISTAKES) == sorted(ids) == ["kernels.row_sum_kernel"]


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
