"""Small, seeded experiments behind the attention and encoder chapters.

* :func:`softmax_saturation`: what the ``1/sqrt(d_k)`` scale of scaled dot-product attention
  does to the softmax (peakedness and gradient) as ``d_k`` grows.
* :func:`deep_mlp_stack`, :func:`train_regression`: a deep stack of tanh blocks trained with
  and without residual connections (slide p19).
* :func:`per_layer_grad_norms`, :func:`train_sequence_stack`: Post-LN vs Pre-LN stacks of
  encoder layers (slide p21 reading list: Xiong et al., 2020), compared by the gradient each
  layer receives at initialisation and by a short training run.

Everything runs in a few seconds on a CPU so that notebooks can call it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")


def softmax_saturation(
    d_k: int, *, n_keys: int = 16, n_queries: int = 1000, scaled: bool = True, seed: int = 0
) -> dict[str, float]:
    """Statistics of ``softmax(q . k / s)`` for random unit-variance ``q, k`` in ``d_k`` dims.

    ``s = sqrt(d_k)`` when ``scaled`` else 1. Each of ``n_queries`` queries scores ``n_keys``
    keys; entries of ``q`` and ``k`` are i.i.d. ``N(0, 1)``, so ``Var(q . k) = d_k``.

    Returns a dict of means over queries:
        ``score_std``: standard deviation of the logits fed to the softmax;
        ``max_weight``: the largest attention weight of a row (1 = one-hot, saturated);
        ``entropy``: entropy of a row in nats (``ln(n_keys)`` = uniform);
        ``jacobian_norm``: Frobenius norm of the softmax Jacobian ``diag(p) - p p^T``, the
        factor every gradient reaching the scores is multiplied by (0 = no gradient).
    """
    _check_positive("d_k", d_k)
    _check_positive("n_keys", n_keys)
    _check_positive("n_queries", n_queries)
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(n_queries, 1, d_k, generator=generator, dtype=torch.float64)
    k = torch.randn(n_queries, n_keys, d_k, generator=generator, dtype=torch.float64)
    scores = (q * k).sum(-1)  # (N, n_keys)
    if scaled:
        scores = scores / math.sqrt(d_k)
    p = scores.softmax(dim=-1)
    jacobian = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (N, n_keys, n_keys)
    entropy = -(p * p.clamp_min(1e-300).log()).sum(-1)
    return {
        "score_std": scores.std().item(),
        "max_weight": p.max(dim=-1).values.mean().item(),
        "entropy": entropy.mean().item(),
        "jacobian_norm": jacobian.flatten(1).norm(dim=-1).mean().item(),
    }


class _TanhBlock(nn.Module):
    """``x -> tanh(W x + b)``, optionally as a residual branch ``x + tanh(W x + b)``."""

    def __init__(self, width: int, residual: bool) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.tanh(self.linear(x))
        return x + out if self.residual else out


class DeepStack(nn.Module):
    """``readout(block_L(... block_1(x)))``; ``blocks`` is an ``nn.ModuleList``."""

    def __init__(
        self, blocks: Sequence[nn.Module], readout: nn.Module, final_norm: nn.Module | None = None
    ):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = final_norm if final_norm is not None else nn.Identity()
        self.readout = readout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.readout(self.final_norm(x))


def deep_mlp_stack(
    depth: int, width: int, *, residual: bool, out_features: int = 1, seed: int = 0
) -> DeepStack:
    """A stack of ``depth`` tanh blocks of size ``width`` with a linear readout.

    With ``residual=True`` each block computes ``x + tanh(W x + b)`` (slide p19: output =
    sub-layer output + sub-layer input); otherwise ``tanh(W x + b)``. PyTorch's default
    ``nn.Linear`` initialisation is used for both, so the only difference is the skip path.
    """
    _check_positive("depth", depth)
    _check_positive("width", width)
    torch.manual_seed(seed)
    blocks = [_TanhBlock(width, residual) for _ in range(depth)]
    return DeepStack(blocks, nn.Linear(width, out_features))


def make_regression_data(
    n_samples: int, in_features: int, *, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``(N, in_features)`` and targets ``(N, 1)`` of a fixed smooth random function.

    The target is ``sin`` of a random projection plus a product of two coordinates, scaled to
    unit variance: non-linear, so a model must use its depth.
    """
    _check_positive("n_samples", n_samples)
    _check_positive("in_features", in_features)
    if in_features < 2:
        raise ValueError(f"in_features must be >= 2, got {in_features}")
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n_samples, in_features, generator=generator)
    w = torch.randn(in_features, generator=generator) / math.sqrt(in_features)
    y = torch.sin(2.0 * x @ w) + x[:, 0] * x[:, 1]
    y = (y - y.mean()) / y.std()
    return x, y.unsqueeze(-1)


def train_regression(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int = 200,
    lr: float = 0.05,
    batch_size: int = 64,
    optimizer: str = "sgd",
    seed: int = 0,
) -> list[float]:
    """Train ``model`` on ``(x, y)`` with mean squared error; return the loss at every step.

    Mini-batches are drawn with a seeded generator; ``optimizer`` is ``"sgd"`` or ``"adam"``.
    """
    _check_positive("steps", steps)
    _check_positive("batch_size", batch_size)
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"x and y must have the same number of rows, got {x.shape[0]} and {y.shape[0]}"
        )
    if optimizer == "sgd":
        opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    elif optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    else:
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, x.shape[0], (batch_size,), generator=generator)
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def per_layer_grad_norms(
    layers: Sequence[nn.Module], loss_fn: Callable[[], torch.Tensor]
) -> list[float]:
    """Gradient norm of each layer's parameters after one backward pass of ``loss_fn()``.

    ``layers`` are the modules to measure (e.g. the blocks of a stack, in order);
    ``loss_fn`` runs the forward pass and returns a scalar loss. Gradients are cleared first.
    Returns one float per layer: the L2 norm over all its parameters' gradients.
    """
    if len(layers) == 0:
        raise ValueError("layers must not be empty")
    for layer in layers:
        layer.zero_grad(set_to_none=True)
    loss = loss_fn()
    if loss.dim() != 0:
        raise ValueError(f"loss_fn must return a scalar, got shape {tuple(loss.shape)}")
    loss.backward()
    norms = []
    for layer in layers:
        squares = [p.grad.pow(2).sum() for p in layer.parameters() if p.grad is not None]
        norms.append(torch.stack(squares).sum().sqrt().item() if squares else 0.0)
    return norms


def make_reversal_batch(
    batch_size: int, seq_len: int, vocab_size: int, *, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids ``(B, T)`` and their reversal along ``T`` as per-position labels.

    Solving it needs attention across positions (the label of position ``t`` is the token at
    ``T - 1 - t``) and positional information, so it exercises every part of an encoder.
    """
    _check_positive("batch_size", batch_size)
    _check_positive("seq_len", seq_len)
    _check_positive("vocab_size", vocab_size)
    tokens = torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator)
    return tokens, tokens.flip(1)


def train_sequence_stack(
    model: nn.Module,
    *,
    vocab_size: int,
    seq_len: int = 10,
    steps: int = 150,
    lr: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
) -> list[float]:
    """Train an encoder-only ``model`` (token ids ``(B, T)`` -> logits ``(B, T, V)``) with Adam
    on the reversal task of :func:`make_reversal_batch`, constant learning rate, no warm-up.

    Returns the cross-entropy loss at every step.
    """
    _check_positive("steps", steps)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        tokens, labels = make_reversal_batch(batch_size, seq_len, vocab_size, generator=generator)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab_size), labels.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


class SequenceTagger(nn.Module):
    """Token ids ``(B, T)`` -> logits ``(B, T, V)`` through a stack of encoder layers.

    Token embedding plus a learned position embedding, then ``layers`` in order (each maps
    ``(B, T, D) -> (B, T, D)``), then ``final_norm`` (a Pre-LN stack needs one, a Post-LN stack
    does not) and a linear read-out. The same wrapper holds Post-LN and Pre-LN stacks, so
    they differ only in the layers.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        layers: Sequence[nn.Module],
        *,
        max_len: int = 64,
        final_norm: nn.Module | None = None,
    ) -> None:
        super().__init__()
        _check_positive("vocab_size", vocab_size)
        _check_positive("d_model", d_model)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm if final_norm is not None else nn.Identity()
        self.readout = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        if tokens.shape[1] > self.pos.num_embeddings:
            raise ValueError(
                f"sequence length {tokens.shape[1]} exceeds max_len {self.pos.num_embeddings}"
            )
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.pos(positions)  # (B, T, D)
        for layer in self.layers:
            x = layer(x)
        return self.readout(self.final_norm(x))  # (B, T, V)
