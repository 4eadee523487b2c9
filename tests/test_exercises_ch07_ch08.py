"""The chapter 7 and appendix exercises: the reference solutions against independent
references, then students' answers: correct solutions written in different styles must pass
the checker and typical mistakes must fail it, for the reason the feedback names."""

import importlib.util
import math
from collections import Counter

import numpy as np
import pytest
import torch
from _answer_tests import (  # noqa: F401
    test_correct_solution_passes,
    test_every_exercise_has_solutions_and_mistakes,
    test_mistake_fails_for_its_reason,
)

from lecturekit.exercises import check, show, solution
from lecturekit.exercises.ch07_kernels import reference_merge_softmax_state
from lecturekit.exercises.ch08_appendix import reference_max_path_length

INF = float("inf")


def test_merged_state_is_the_state_of_the_whole_row():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 9, generator=g, dtype=torch.float64) * 4
    x[1, :4] = -INF  # an empty first part
    x[2] = -INF  # an empty row

    def state(part):
        m = part.max(-1).values
        return m, torch.exp(part - m.nan_to_num(neginf=0.0)[:, None]).sum(-1)

    m, total = reference_merge_softmax_state(*state(x[:, :4]), *state(x[:, 4:]))
    expected_m, expected_total = state(x)
    assert torch.equal(m, expected_m)
    torch.testing.assert_close(total, expected_total)


def test_max_path_length_by_simulating_the_receptive_field():
    """Grow the set of positions that position 0 reaches, one layer at a time."""
    for n in range(2, 40):
        for k in (2, 3, 5):
            for layer in ("conv", "dilated"):
                reached, layers = 1, 0  # positions 0 .. reached - 1 are influenced
                while reached < n:
                    step = (k - 1) if layer == "conv" else (k - 1) * k**layers
                    reached, layers = reached + step, layers + 1
                assert reference_max_path_length(layer, n, k) == layers, (layer, n, k)


# --------------------------------------------------------------------------------------
# Students' answers: correct solutions in different styles must pass, typical mistakes fail
# --------------------------------------------------------------------------------------


def merge_where(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def merge_log_space(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    log_total = torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2))  # log of sum exp(x)
    return m, torch.exp(log_total - m.nan_to_num(neginf=0.0))


def merge_sum_without_rescaling(m1, l1, m2, l2):
    return torch.maximum(m1, m2), l1 + l2


def merge_rescale_wrong_direction(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m - m1) + l2 * torch.exp(m - m2)


def merge_nan_for_empty_parts(m1, l1, m2, l2):  # -inf - (-inf) = NaN when both are empty
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m)


def merge_float32(m1, l1, m2, l2):
    m, total = merge_where(m1, l1, m2, l2)
    return m.float(), total.float()


def merge_keeps_first_maximum(m1, l1, m2, l2):
    safe = torch.where(torch.isinf(m1), torch.zeros_like(m1), m1)
    return m1, l1 + l2 * torch.exp(m2 - safe)


def bytes_formula(n, d, bytes_per_element):
    return (4 * n * n + 4 * n * d) * bytes_per_element


def bytes_step_by_step(n, d, bytes_per_element):
    read_q_k, write_s, read_s, write_p = 2 * n * d, n * n, n * n, n * n
    read_p_v, write_o = n * n + n * d, n * d
    return bytes_per_element * (read_q_k + write_s + read_s + write_p + read_p_v + write_o)


def bytes_numpy_int64(n, d, bytes_per_element):
    return np.int64(4 * n * n + 4 * n * d) * bytes_per_element


def bytes_forgets_element_size(n, d, bytes_per_element):
    return 4 * n * n + 4 * n * d


def bytes_counts_scores_once(n, d, bytes_per_element):
    return (n * n + 4 * n * d) * bytes_per_element


def bytes_only_inputs_and_output(n, d, bytes_per_element):  # the fused kernel's ideal
    return 4 * n * d * bytes_per_element


def bytes_as_float(n, d, bytes_per_element):  # the right value, but a float
    return float((4 * n * n + 4 * n * d) * bytes_per_element)


def pair_counter(word_counts):
    pairs = Counter()
    for word, count in word_counts.items():
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] += count
    return min(pairs, key=lambda pair: (-pairs[pair], pair))


def pair_sorted_dict(word_counts):
    counts = {}
    for word, count in word_counts.items():
        for i in range(len(word) - 1):
            counts[word[i], word[i + 1]] = counts.get((word[i], word[i + 1]), 0) + count
    best = max(counts.values())
    return list(sorted(pair for pair, c in counts.items() if c == best)[0])


def pair_unweighted(word_counts):
    return pair_counter(dict.fromkeys(word_counts, 1))


def pair_tie_last(word_counts):
    pairs = Counter()
    for word, count in word_counts.items():
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] += count
    return max(pairs, key=lambda pair: (pairs[pair], pair))


def pair_most_common(word_counts):  # ties go to the pair counted first, not the smallest
    pairs = Counter()
    for word, count in word_counts.items():
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] += count
    return pairs.most_common(1)[0][0]


def pair_str_count(word_counts):  # str.count does not count overlapping pairs
    candidates = {a + b for word in word_counts for a, b in zip(word, word[1:], strict=False)}
    scores = {p: sum(w.count(p) * c for w, c in word_counts.items()) for p in candidates}
    best = min(scores, key=lambda p: (-scores[p], p))
    return (best[0], best[1])


def pair_most_frequent_characters(word_counts):
    chars = Counter()
    for word, count in word_counts.items():
        for ch in word:
            chars[ch] += count
    (a, _), (b, _) = sorted(chars.items(), key=lambda item: (-item[1], item[0]))[:2]
    return (a, b)


def path_loops(layer, n, k):
    if layer == "attention":
        return 1
    if layer == "rnn":
        return n - 1
    reached, layers = 1, 0
    while reached < n:
        reached = reached + k - 1 if layer == "conv" else reached * k
        layers += 1
    return layers


def path_numpy_integers(layer, n, k):
    table = {"rnn": n - 1, "attention": 1, "conv": -(-(n - 1) // (k - 1))}
    if layer == "dilated":
        return np.int64(next(L for L in range(n) if k**L >= n))
    return np.int64(table[layer])


def path_conv_n_over_k(layer, n, k):
    return n // k if layer == "conv" else path_loops(layer, n, k)


def path_rnn_n(layer, n, k):
    return n if layer == "rnn" else path_loops(layer, n, k)


def path_dilated_floor(layer, n, k):
    if layer == "dilated":
        return int(math.log(n, k))
    return path_loops(layer, n, k)


def path_dilated_ceil_log(layer, n, k):  # log(125, 5) = 3.0000000000000004
    if layer == "dilated":
        return math.ceil(math.log(n, k))
    return path_loops(layer, n, k)


def path_dilated_round_log(layer, n, k):
    if layer == "dilated":
        return round(math.log(n, k))
    return path_loops(layer, n, k)


def path_dilated_floor_log_plus_one(layer, n, k):  # log(243, 3) = 4.999999999999999
    if layer == "dilated":
        return int(math.log(n - 1, k)) + 1
    return path_loops(layer, n, k)


def path_conv_numpy_ceil(layer, n, k):  # np.ceil returns a float
    if layer == "conv":
        return np.ceil((n - 1) / (k - 1))
    return path_loops(layer, n, k)


SOLUTIONS = {
    "kernels.merge_softmax_state": [merge_where, merge_log_space],
    "kernels.naive_attention_bytes": [bytes_formula, bytes_step_by_step, bytes_numpy_int64],
    "appendix.most_frequent_pair": [pair_counter, pair_sorted_dict],
    "appendix.max_path_length": [path_loops, path_numpy_integers],
}

MISTAKES = {
    "kernels.merge_softmax_state": [
        (merge_sum_without_rescaling, "数值不对"),
        (merge_rescale_wrong_direction, "数值不对"),
        (merge_nan_for_empty_parts, "得到 nan"),
        (merge_float32, "dtype 不对"),
        (merge_keeps_first_maximum, "数值不对"),
    ],
    "kernels.naive_attention_bytes": [
        (bytes_forgets_element_size, "期望 8912896"),
        (bytes_counts_scores_once, "期望 8912896"),
        (bytes_only_inputs_and_output, "期望 8912896"),
        (bytes_as_float, "题目要求一个整数，你的结果是 float 8912896.0"),
    ],
    "appendix.most_frequent_pair": [
        (pair_unweighted, "期望"),
        (pair_tie_last, "期望"),
        (pair_most_common, "并列时取排序最小的对"),
        (pair_str_count, "重叠的 aa 数两次"),
        (pair_most_frequent_characters, "期望"),
    ],
    "appendix.max_path_length": [
        (path_conv_n_over_k, "期望"),
        (path_rnn_n, "期望"),
        (path_dilated_floor, "期望"),
        (path_dilated_ceil_log, "n = 125"),
        (path_dilated_round_log, "期望"),
        (path_dilated_floor_log_plus_one, "n = 244"),
        (path_conv_numpy_ceil, "题目要求一个整数"),
    ],
}


# SOLUTIONS and MISTAKES cover every exercise of these chapters (tests/_answer_tests.py)
CHAPTERS = (7, 8)


# --------------------------------------------------------------------------------------
# kernels.row_sum_kernel where the kernel cannot run: a clear message, never a traceback
# (the kernels themselves are checked under the interpreter in tests/kernels)
# --------------------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without a GPU")
def test_a_kernel_compiled_for_the_gpu_on_a_cpu_says_how_to_enable_the_interpreter(
    monkeypatch, capsys
):
    import triton
    import triton.language as tl

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # Triton reads it at @triton.jit

    @triton.jit
    def compiled(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):
        tl.store(OUT + tl.program_id(0), 0.0)

    assert type(compiled).__name__ == "JITFunction"
    assert check("kernels.row_sum_kernel", compiled) is False
    out = capsys.readouterr().out
    assert (
        "没有 CUDA GPU" in out and "TRITON_INTERPRET" in out and "重新运行定义内核的单元格" in out
    )
    assert "Traceback" not in out and "💡" not in out
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # set too late: the kernel is compiled already
    assert check("kernels.row_sum_kernel", compiled) is False
    assert "在设置它之前定义的" in capsys.readouterr().out


def test_a_kernel_check_without_triton_or_without_a_kernel_says_why(monkeypatch, capsys):
    def not_a_kernel(X, OUT, n_cols, stride_row, BLOCK):
        return None

    assert check("kernels.row_sum_kernel", not_a_kernel) is False
    assert "@triton.jit" in capsys.readouterr().out
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "triton" else find_spec(name, *a),
    )
    assert check("kernels.row_sum_kernel", not_a_kernel) is False
    out = capsys.readouterr().out
    assert "没有安装 triton" in out and "lecturekit[gpu]" in out and "Traceback" not in out


def test_the_kernel_task_asks_for_a_kernel(capsys):
    show("kernels.row_sum_kernel")
    out = capsys.readouterr().out
    assert "要求：写一个内核。" in out and "检查器读回的结果：形状 (行数,)" in out
    assert "row_sum_kernel(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr)" in out


def test_the_kernel_solution_is_printed_from_its_source_file(capsys):
    solution("kernels.row_sum_kernel")
    out = capsys.readouterr().out
    assert (
        "@triton.jit\ndef row_sum_kernel(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):" in out
    )
    assert "mask=cols < n_cols" in out and "tl.sum(acc, axis=0)" in out
