"""Appendix: the paper's Table 1 measured on real layers instead of quoted.

Two of its three columns are about *dependencies*, and both can be measured:

* ``sequential_depth`` -- **sequential operations**: run a layer under a
  ``TorchDispatchMode`` and compute the longest chain of ATen operators in which each one
  needs the result of the one before (views and reshapes, which move no data, are free;
  one operator counts as one step, as in the paper, even when it reduces over n inside). However many
  processors there are, that many operators must run one after another.
* ``min_layers_to_connect`` -- **maximum path length**: the fewest stacked layers after which
  output position ``n - 1`` depends on input position ``0``, found by gradient reachability:
  ``d y[n-1] / d x[0]`` is exactly zero while no path exists and non-zero once one does. For
  the RNN the question is how many recurrent steps back-propagation must go through
  (truncated back-propagation through time with a window of ``T`` steps).

Everything runs in float64 on tiny widths; the whole appendix table takes about a second.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from lecturekit._common import check_choice, check_int

__all__ = ["LAYER_KINDS", "min_layers_to_connect", "sequential_depth"]

LAYER_KINDS = ("rnn", "conv", "dilated", "attention")


def _moves_no_data(func: Any) -> bool:  # noqa: ANN401
    """Views (transpose, slice, view) and ``aten._unsafe_view``, the reshape that ``reshape``
    and ``matmul`` emit on a fresh result: it moves no data, but ATen does not tag it a view."""
    return bool(func.is_view) or func.overloadpacket is torch.ops.aten._unsafe_view


class _DepthRecorder(TorchDispatchMode):
    """Depth of every tensor produced: 1 + the deepest input (views and reshapes that move
    no data add nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth: dict[int, int] = {}
        self.keep: list[torch.Tensor] = []  # ids stay unique while we hold the tensors
        self.max_depth = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        inputs = [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)]
        deepest = max((self.depth.get(id(t), 0) for t in inputs), default=0)
        depth = deepest + (0 if _moves_no_data(func) else 1)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.depth[id(t)] = depth
                self.keep.append(t)
        self.max_depth = max(self.max_depth, depth)
        return out


def sequential_depth(fn: Callable[[], Any]) -> int:
    """Longest chain of dependent ATen operators in ``fn()``; views and reshapes that move
    no data (``aten._unsafe_view`` included) are not steps.

    Tensors created before ``fn`` runs have depth 0; an operator's results have depth one
    more than its deepest input. A loop over ``n`` positions whose step ``t`` needs step
    ``t - 1`` (an RNN) has depth growing with ``n``; a layer that treats all positions at
    once (attention, convolution) has the same depth for every ``n``.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function of no arguments, got {type(fn).__name__}")
    recorder = _DepthRecorder()
    with recorder, torch.no_grad():
        fn()
    return recorder.max_depth


def _layer(kind: str, index: int, n: int, d: int, k: int) -> nn.Module:
    """Layer ``index`` (from 0) of a stack over ``n`` positions: causal convolutions keep
    position t from seeing t + 1 and beyond; the dilated stack's layer L has dilation k**L
    (capped at ``n``: a larger gap reaches no other position either)."""
    if kind == "attention":
        return _SelfAttention(d)
    dilation = min(k**index, n) if kind == "dilated" else 1
    return _CausalConv(d, k, dilation)


class _CausalConv(nn.Module):
    def __init__(self, d: int, k: int, dilation: int) -> None:
        super().__init__()
        self.pad = (k - 1) * dilation  # on the left only: no position sees the future
        self.conv = nn.Conv1d(d, d, k, dilation=dilation, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (n, d) -> (n, d)
        z = nn.functional.pad(x.T.unsqueeze(0), (self.pad, 0))  # (1, d, pad + n)
        return torch.tanh(self.conv(z)[0].T)


class _SelfAttention(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 1, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (n, d) -> (n, d)
        return self.attn(x, x, x, need_weights=False)[0]


def _rnn_reaches(n: int, window: int, d: int, generator: torch.Generator) -> bool:
    """Does ``h[n-1]`` get a gradient from ``x[0]`` when back-propagation goes through only
    the last ``window`` recurrent steps (the hidden state before them is detached)?"""
    w_x = torch.randn(d, d, generator=generator, dtype=torch.float64)
    w_h = torch.randn(d, d, generator=generator, dtype=torch.float64) / d**0.5
    x = torch.randn(n, d, generator=generator, dtype=torch.float64, requires_grad=True)
    h = torch.zeros(d, dtype=torch.float64)
    for t in range(n):
        if t == n - 1 - window:
            h = h.detach()  # truncated: no gradient flows into steps before this one
        h = torch.tanh(w_x @ x[t] + w_h @ h)  # h_t needs h_{t-1}: one recurrent step
    (grad,) = torch.autograd.grad(h.sum(), x)
    return bool(grad[0].abs().max() > 0)


def _stack_reaches(kind: str, n: int, depth: int, d: int, k: int, seed: int) -> bool:
    torch.manual_seed(seed)
    layers = [_layer(kind, i, n, d, k) for i in range(depth)]
    x = torch.randn(n, d, dtype=torch.float64, requires_grad=True)
    y = x
    for layer in layers:
        y = layer(y)  # (n, d)
    (grad,) = torch.autograd.grad(y[n - 1].sum(), x)
    return bool(grad[0].abs().max() > 0)


def min_layers_to_connect(kind: str, n: int, *, k: int = 3, d: int = 4, seed: int = 0) -> int:
    """Fewest layers (RNN: recurrent steps) through which input position 0 reaches output
    position ``n - 1``, measured by gradient reachability on real layers.

    ``kind``: ``"rnn"`` (a tanh recurrence, truncated back-propagation through time),
    ``"conv"`` (causal convolutions of width ``k``), ``"dilated"`` (causal, layer L dilated
    by ``k**L``) or ``"attention"`` (``nn.MultiheadAttention``). ``d`` is the width of the
    tiny layers. Doubles the depth until it suffices, then bisects (reachability only grows
    with depth).
    """
    check_choice("kind", kind, LAYER_KINDS)
    check_int("n", n, minimum=2)
    check_int("k", k, minimum=2)
    check_int("d", d, minimum=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add synchronisation
    try:
        return _min_depth(kind, n, k, d, seed)
    finally:
        torch.set_num_threads(threads)


def _min_depth(kind: str, n: int, k: int, d: int, seed: int) -> int:
    generator = torch.Generator().manual_seed(seed)

    def reaches(depth: int) -> bool:
        if kind == "rnn":
            return _rnn_reaches(n, depth, d, generator)
        return _stack_reaches(kind, n, depth, d, k, seed)

    too_shallow, hi = 0, 1  # gallop: 1, 2, 4, ... until the depth suffices
    while not reaches(hi):
        if hi >= n - 1:  # n - 1 layers or steps always suffice for these kinds
            raise RuntimeError(f"{kind}: position 0 does not reach position {n - 1}")
        too_shallow, hi = hi, min(2 * hi, n - 1)
    lo = too_shallow + 1
    while lo < hi:  # then bisect between the last depth too shallow and the first enough
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
