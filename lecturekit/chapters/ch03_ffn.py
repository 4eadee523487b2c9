"""Why an encoder layer needs its FFN (chapter 3): attention mixes positions, the FFN
transforms each position on its own.

* :func:`position_influence`: which output positions move when one input position changes;
  for a self-attention sub-layer all of them, for the FFN only the same position.
* :class:`PairTagger`, :func:`without_ffn`, :func:`train_pair_lookup`,
  :func:`pair_lookup_accuracy`: a per-position rule (a fixed random lookup table of a pair of
  symbols held at the same position) learnt by encoder stacks with and without FFN.
* :func:`parameters_with_gradient`: how many parameters can learn that task at all (with one
  position the query and key projections get no gradient).

Everything runs in seconds on a CPU so that the chapter can call it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from lecturekit._common import check_int
from lecturekit.training.loop import Stopping, train_steps

__all__ = [
    "position_influence",
    "ZeroFFN",
    "without_ffn",
    "PairTagger",
    "make_pair_table",
    "train_pair_lookup",
    "pair_lookup_accuracy",
    "parameters_with_gradient",
]


def position_influence(
    function: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, position: int
) -> torch.Tensor:
    """How much each output position of ``function`` moves when input ``position`` changes.

    ``x`` is ``(1, T, D)``; ``function`` maps ``(1, T, D) -> (1, T, D)``. The input vector at
    ``position`` is replaced by a fixed other vector (``x`` at that position, negated and
    shifted by 1). Returns ``(T,)``: the largest absolute change of each output position.
    """
    if x.dim() != 3 or x.size(0) != 1:
        raise ValueError(f"x must have shape (1, T, D), got {tuple(x.shape)}")
    check_int("position", position, minimum=0)
    if position >= x.size(1):
        raise ValueError(f"position must be < T = {x.size(1)}, got {position}")
    changed = x.clone()
    changed[0, position] = -x[0, position] + 1.0
    with torch.no_grad():
        return (function(changed) - function(x)).abs().amax(dim=-1)[0]  # (T,)


class ZeroFFN(nn.Module):
    """A feed-forward sub-layer that is not there: ``(B, T, D) -> zeros (B, T, D)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


def without_ffn(layer: nn.Module) -> nn.Module:
    """``layer`` (an ``EncoderLayer``) with its FFN replaced by :class:`ZeroFFN`, in place.

    The residual connection and LayerNorm around the FFN stay, so the layer computes
    ``norm2(norm1(x + attention(x)))`` (Post-LN): attention, residuals and LayerNorm only.
    """
    if not isinstance(getattr(layer, "ffn", None), nn.Module):
        raise TypeError(f"layer must have an `ffn` sub-module, got {type(layer).__name__}")
    layer.ffn = ZeroFFN()
    return layer


class PairTagger(nn.Module):
    """Two symbols per position ``a, b (B, T)`` -> logits ``(B, T, V)``.

    The input vector of a position is ``E_a[a] + E_b[b] + P[t]`` (embeddings added, as a
    word embedding and a positional encoding are), then ``layers`` in order, then a linear
    read-out to ``n_values`` classes.
    """

    def __init__(
        self, n_values: int, d_model: int, layers: Sequence[nn.Module], *, max_len: int = 16
    ) -> None:
        super().__init__()
        check_int("n_values", n_values, minimum=2)
        check_int("d_model", d_model, minimum=1)
        self.embed_a = nn.Embedding(n_values, d_model)
        self.embed_b = nn.Embedding(n_values, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(layers)
        self.readout = nn.Linear(d_model, n_values)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if a.dim() != 2 or a.shape != b.shape:
            raise ValueError(
                f"a and b must have the same shape (B, T), got {tuple(a.shape)} and "
                f"{tuple(b.shape)}"
            )
        if a.size(1) > self.pos.num_embeddings:
            raise ValueError(f"T = {a.size(1)} exceeds max_len {self.pos.num_embeddings}")
        positions = torch.arange(a.size(1), device=a.device)
        x = self.embed_a(a) + self.embed_b(b) + self.pos(positions)  # (B, T, D)
        for layer in self.layers:
            x = layer(x)
        return self.readout(x)  # (B, T, V)


def make_pair_table(n_values: int, *, seed: int = 0) -> torch.Tensor:
    """A fixed random rule ``(V, V)`` of ints in ``[0, V)``: the label of the pair ``(a, b)``."""
    check_int("n_values", n_values, minimum=2)
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, n_values, (n_values, n_values), generator=generator)


def train_pair_lookup(
    model: PairTagger,
    table: torch.Tensor,
    *,
    seq_len: int = 1,
    steps: int = 300,
    lr: float = 3e-3,
    batch_size: int = 64,
    seed: int = 0,
) -> list[float]:
    """Train ``model`` with Adam to output ``table[a_t, b_t]`` at every position ``t``.

    Batches of ``batch_size`` sequences of ``seq_len`` random pairs (seeded). Returns the
    cross-entropy loss at every step (through :func:`lecturekit.training.loop.train_steps`).
    """
    check_int("steps", steps, minimum=1)
    check_int("seq_len", seq_len, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    n_values = table.size(0)
    if table.shape != (n_values, n_values):
        raise ValueError(f"table must be square (V, V), got {tuple(table.shape)}")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)

    def step_loss(step: int) -> torch.Tensor:
        a = torch.randint(0, n_values, (batch_size, seq_len), generator=generator)
        b = torch.randint(0, n_values, (batch_size, seq_len), generator=generator)
        logits = model(a, b)  # (B, T, V)
        return nn.functional.cross_entropy(logits.reshape(-1, n_values), table[a, b].reshape(-1))

    return train_steps(step_loss, optimizer, Stopping(max_steps=steps))


def pair_lookup_accuracy(model: PairTagger, table: torch.Tensor) -> float:
    """Share of all ``V * V`` pairs, each shown alone (``T = 1``), whose label is predicted."""
    n_values = table.size(0)
    a = torch.arange(n_values).repeat_interleave(n_values)[:, None]  # (V*V, 1)
    b = torch.arange(n_values).repeat(n_values)[:, None]
    with torch.no_grad():
        predicted = model(a, b).argmax(-1)  # (V*V, 1)
    return (predicted == table[a, b]).float().mean().item()


def parameters_with_gradient(model: PairTagger, table: torch.Tensor) -> int:
    """Number of parameter entries whose gradient is not exactly 0 on the lookup task.

    One backward pass of the cross-entropy over all ``V * V`` pairs, each alone (``T = 1``),
    as :func:`pair_lookup_accuracy` shows them. With a single position the softmax of every
    attention head is 1 whatever the scores, so the query and key projections (weights and
    biases) get an exact 0, and so do the positional rows other than position 0. The model's
    gradients are cleared again afterwards.
    """
    n_values = table.size(0)
    if table.shape != (n_values, n_values):
        raise ValueError(f"table must be square (V, V), got {tuple(table.shape)}")
    a = torch.arange(n_values).repeat_interleave(n_values)[:, None]  # (V*V, 1)
    b = torch.arange(n_values).repeat(n_values)[:, None]
    model.zero_grad(set_to_none=True)
    logits = model(a, b)  # (V*V, 1, V)
    nn.functional.cross_entropy(logits.reshape(-1, n_values), table[a, b].reshape(-1)).backward()
    count = sum(int((p.grad != 0).sum()) for p in model.parameters() if p.grad is not None)
    model.zero_grad(set_to_none=True)
    return count
