"""Small, seeded experiments behind the encoder chapter (chapter 3).

* :func:`deep_mlp_stack`, :func:`train_regression`: a deep stack of tanh blocks trained with
  and without residual connections (slide p19).
* :func:`per_layer_grad_norms`, :func:`adam_first_step_norms`, :func:`train_sequence_stack`:
  Post-LN vs Pre-LN stacks of encoder layers (slide p21 reading list: Xiong et al., 2020),
  compared by the gradient each layer receives at initialisation, by the size of Adam's first
  update, and by short training runs with and without a learning-rate warmup.

Everything runs in a few seconds on a CPU so that notebooks can call it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from copy import deepcopy as copy_module

import torch
from torch import nn

from lecturekit._common import check_int
from lecturekit.training.loop import Stopping, train_steps
from lecturekit.training.schedules import linear_warmup_lr, set_lr

__all__ = [
    "DeepStack",
    "deep_mlp_stack",
    "make_regression_data",
    "train_regression",
    "per_layer_grad_norms",
    "adam_first_step_norms",
    "make_reversal_batch",
    "train_sequence_stack",
    "SequenceTagger",
]


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
    check_int("depth", depth, minimum=1)
    check_int("width", width, minimum=1)
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
    check_int("n_samples", n_samples, minimum=1)
    check_int("in_features", in_features, minimum=1)
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
    Trains with the training loop's pieces (:func:`lecturekit.training.loop.train_steps`).
    """
    check_int("steps", steps, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
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

    def step_loss(step: int) -> torch.Tensor:
        idx = torch.randint(0, x.shape[0], (batch_size,), generator=generator)
        return nn.functional.mse_loss(model(x[idx]), y[idx])

    return train_steps(step_loss, opt, Stopping(max_steps=steps))


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


def adam_first_step_norms(
    model: nn.Module,
    layers: Sequence[nn.Module],
    loss_fn: Callable[[nn.Module], torch.Tensor],
    *,
    lr: float,
) -> list[float]:
    """Norm of the change of each layer's parameters after one Adam step on ``loss_fn()``.

    ``model`` is copied first (the caller's weights stay as they are); ``layers`` are modules
    of ``model``, in order, and ``loss_fn(m)`` runs the forward pass of the copy ``m`` and
    returns a scalar loss. Adam's first update is ``lr * g / (|g| + eps)`` per parameter, close
    to ``lr * sign(g)``: its size does not depend on how large the gradient is.
    """
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    index = {id(m): i for i, m in enumerate(model.modules())}
    missing = [i for i, layer in enumerate(layers) if id(layer) not in index]
    if missing:
        raise ValueError(f"layers must be modules of model; layer {missing[0]} is not")
    copy = copy_module(model)
    copied = list(copy.modules())
    copy_layers = [copied[index[id(layer)]] for layer in layers]
    before = [[p.detach().clone() for p in layer.parameters()] for layer in copy_layers]
    optimizer = torch.optim.Adam(copy.parameters(), lr=lr)
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(copy)
    if loss.dim() != 0:
        raise ValueError(f"loss_fn must return a scalar, got shape {tuple(loss.shape)}")
    loss.backward()
    optimizer.step()
    norms = []
    for layer, old in zip(copy_layers, before, strict=True):
        changes = [
            (p.detach() - q).pow(2).sum() for p, q in zip(layer.parameters(), old, strict=True)
        ]
        norms.append(torch.stack(changes).sum().sqrt().item() if changes else 0.0)
    return norms


def make_reversal_batch(
    batch_size: int, seq_len: int, vocab_size: int, *, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids ``(B, T)`` and their reversal along ``T`` as per-position labels.

    Solving it needs attention across positions (the label of position ``t`` is the token at
    ``T - 1 - t``) and positional information, so it exercises every part of an encoder.
    """
    check_int("batch_size", batch_size, minimum=1)
    check_int("seq_len", seq_len, minimum=1)
    check_int("vocab_size", vocab_size, minimum=1)
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
    warmup_steps: int = 0,
) -> list[float]:
    """Train an encoder-only ``model`` (token ids ``(B, T)`` -> logits ``(B, T, V)``) with Adam
    on the reversal task of :func:`make_reversal_batch`.

    The learning rate is ``lr`` throughout (``warmup_steps=0``), or rises linearly over the
    first ``warmup_steps`` updates, ``lr * min(1, step / warmup_steps)`` (step from 1), and
    stays at ``lr`` afterwards (:func:`lecturekit.training.schedules.linear_warmup_lr`).
    Returns the cross-entropy loss at every step (trained with
    :func:`lecturekit.training.loop.train_steps`, like :func:`train_regression`).
    """
    check_int("steps", steps, minimum=1)
    check_int("warmup_steps", warmup_steps, minimum=0)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)

    def step_loss(step: int) -> torch.Tensor:
        set_lr(opt, linear_warmup_lr(step, lr, warmup_steps))
        tokens, labels = make_reversal_batch(batch_size, seq_len, vocab_size, generator=generator)
        logits = model(tokens)
        return nn.functional.cross_entropy(logits.reshape(-1, vocab_size), labels.reshape(-1))

    return train_steps(step_loss, opt, Stopping(max_steps=steps))


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
        check_int("vocab_size", vocab_size, minimum=1)
        check_int("d_model", d_model, minimum=1)
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
