"""lecturekit.chapters.ch08_paths: the paper's Table 1 measured (sequential operations by the
depth of the operator graph, path lengths by gradient reachability), against closed forms."""

from __future__ import annotations

import math

import pytest
import torch

from lecturekit.chapters.ch08_paths import LAYER_KINDS, min_layers_to_connect, sequential_depth


def closed_form(kind: str, n: int, k: int) -> int:
    if kind == "rnn":
        return n - 1
    if kind == "conv":
        return math.ceil((n - 1) / (k - 1))
    if kind == "dilated":
        return next(layers for layers in range(1, n) if k**layers - 1 >= n - 1)
    return 1


CASES = [(n, k) for n in (2, 3, 9, 10) for k in (2, 3)] + [(27, 3), (28, 3)]


@pytest.mark.parametrize(("n", "k"), CASES)
@pytest.mark.parametrize("kind", LAYER_KINDS)
def test_measured_path_lengths_match_the_closed_forms(kind: str, n: int, k: int) -> None:
    # 27 = 3**3 and 28 = 3**3 + 1: the dilated stack needs one more layer exactly at 28
    assert min_layers_to_connect(kind, n, k=k) == closed_form(kind, n, k)


def test_path_lengths_reject_bad_arguments() -> None:
    with pytest.raises(ValueError, match="kind"):
        min_layers_to_connect("lstm", 8)
    with pytest.raises(ValueError, match="n"):
        min_layers_to_connect("rnn", 1)
    with pytest.raises(ValueError, match="k"):
        min_layers_to_connect("conv", 8, k=1)


def test_sequential_depth_grows_with_a_recurrence_and_not_with_a_parallel_layer() -> None:
    w = torch.randn(4, 4)

    h0 = torch.zeros(4)  # made before fn runs: depth 0

    def recurrence(n: int) -> None:
        h = h0
        for _ in range(n):
            h = torch.tanh(w @ h)  # two dependent operators per step

    assert [sequential_depth(lambda n=n: recurrence(n)) for n in (1, 5, 20)] == [2, 10, 40]
    for n in (4, 64):
        x = torch.randn(n, 4)
        assert sequential_depth(lambda x=x: torch.softmax(x @ x.T, -1) @ x) == 3


def test_views_are_free_and_bad_arguments_are_rejected() -> None:
    x = torch.randn(2, 3)
    assert sequential_depth(lambda: x.view(3, 2).t().unsqueeze(0)) == 0
    assert sequential_depth(lambda: x.t().exp()) == 1
    with pytest.raises(TypeError, match="fn"):
        sequential_depth(x)  # type: ignore[arg-type]


def test_reshapes_that_move_no_data_are_free_but_copies_count() -> None:
    x, w = torch.randn(2, 3, 4), torch.randn(4, 5)
    # (2, 3, 4) @ (4, 5) runs as mm on (6, 4), then aten._unsafe_view back to (2, 3, 5)
    assert sequential_depth(lambda: x @ w) == 1
    assert sequential_depth(lambda: (x @ w).exp()) == 2
    # reshaping a transposed (non-contiguous) tensor copies it: that is a step
    assert sequential_depth(lambda: x.transpose(1, 2).reshape(2, 12)) == 1
