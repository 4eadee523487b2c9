"""Small vanilla-RNN experiments that measure the limits of recurrence (slides p15, chapter 1).

A vanilla RNN computes ``h_t = f(W_h h_{t-1} + W_x x_t)``. Two properties follow from the
recurrence and are measured here rather than asserted:

* the gradient of the last state with respect to an input ``k`` steps back passes through a
  product of ``k`` Jacobians ``diag(f'(.)) W_h``, so its norm shrinks or grows geometrically
  with ``k`` (:func:`rnn_gradient_norms`);
* everything the decoder of a classic seq2seq model sees is the fixed-size last state
  ``h_T``, so how much of the input can be read back from it is bounded by the hidden size,
  whatever the length (:func:`context_recoverability`).
"""

from __future__ import annotations

import torch

from lecturekit._common import check_int, check_number

__all__ = [
    "make_rnn_weights",
    "run_rnn",
    "rnn_gradient_norms",
    "context_recoverability",
    "module_gradient_norms",
]

_NONLINEARITIES = ("tanh", "linear")


def make_rnn_weights(
    hidden_size: int, input_size: int, gain: float, *, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random weights of a vanilla RNN in float64.

    ``W_h`` is ``gain`` times a random orthogonal matrix, so every singular value of ``W_h``
    equals ``gain``: for a linear RNN the gradient then scales exactly like ``gain**k``.
    ``W_x`` has i.i.d. ``N(0, 1/input_size)`` entries.

    Returns ``(w_h, w_x)`` of shapes ``(H, H)`` and ``(H, I)``.
    """
    check_int("hidden_size", hidden_size, minimum=1)
    check_int("input_size", input_size, minimum=1)
    check_number("gain", gain, minimum=0, exclusive=("minimum",))
    generator = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(
        torch.randn(hidden_size, hidden_size, generator=generator, dtype=torch.float64)
    )
    q = q * torch.sign(torch.diagonal(r))  # makes the orthogonal matrix uniformly distributed
    w_x = torch.randn(hidden_size, input_size, generator=generator, dtype=torch.float64)
    return gain * q, w_x / input_size**0.5


def run_rnn(
    x: torch.Tensor, w_h: torch.Tensor, w_x: torch.Tensor, nonlinearity: str = "tanh"
) -> torch.Tensor:
    """Run a vanilla RNN from ``h_0 = 0`` and return every state.

    Args:
        x: inputs ``(B, T, I)``.
        w_h: recurrent weight ``(H, H)``.
        w_x: input weight ``(H, I)``.
        nonlinearity: ``"tanh"`` or ``"linear"``.

    Returns:
        states ``(B, T, H)``; ``states[:, t]`` is ``h_{t+1}``. The loop is sequential by
        construction: step ``t`` needs step ``t - 1``.
    """
    if nonlinearity not in _NONLINEARITIES:
        raise ValueError(f"nonlinearity must be one of {_NONLINEARITIES}, got {nonlinearity!r}")
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, I), got {tuple(x.shape)}")
    if w_x.shape[1] != x.shape[-1] or w_h.shape[0] != w_x.shape[0]:
        raise ValueError(
            f"weights do not fit: x has I={x.shape[-1]}, w_x is {tuple(w_x.shape)}, "
            f"w_h is {tuple(w_h.shape)}"
        )
    h = x.new_zeros(x.shape[0], w_h.shape[0])
    states = []
    for t in range(x.shape[1]):
        pre = h @ w_h.T + x[:, t] @ w_x.T
        h = torch.tanh(pre) if nonlinearity == "tanh" else pre
        states.append(h)
    return torch.stack(states, dim=1)


def rnn_gradient_norms(
    seq_len: int,
    *,
    hidden_size: int = 32,
    input_size: int = 8,
    gain: float = 1.0,
    nonlinearity: str = "tanh",
    batch_size: int = 16,
    seed: int = 0,
    input_scale: float = 1.0,
) -> torch.Tensor:
    """Gradient norm of the last state with respect to each input, by distance.

    A random unit vector ``u`` reads out the scalar ``u . h_T``; backpropagation gives
    ``d(u . h_T) / d x_t`` for every ``t``. The returned entry ``k`` is the norm of that
    gradient for the input ``k`` steps before the end (``t = T - k``), averaged over a batch
    of random input sequences. For a linear RNN it equals ``gain**k`` times a constant; a tanh
    RNN multiplies by ``tanh' <= 1`` at every step on top.

    The inputs are standard normal times ``input_scale``: larger inputs drive a tanh RNN
    further into saturation (smaller ``tanh'``); a linear RNN does not depend on it.

    Returns:
        float64 tensor ``(seq_len,)`` indexed by distance ``k = 0 .. seq_len - 1``.
    """
    check_int("seq_len", seq_len, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    check_number("input_scale", input_scale, minimum=0, exclusive=("minimum",))
    w_h, w_x = make_rnn_weights(hidden_size, input_size, gain, seed=seed)
    generator = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch_size, seq_len, input_size, generator=generator, dtype=torch.float64)
    x = (x * input_scale).requires_grad_(True)  # (B, T, I)
    u = torch.randn(batch_size, hidden_size, generator=generator, dtype=torch.float64)
    u = u / u.norm(dim=-1, keepdim=True)
    h_last = run_rnn(x, w_h, w_x, nonlinearity)[:, -1]
    (grad,) = torch.autograd.grad((u * h_last).sum(), x)
    norms = grad.norm(dim=-1).mean(dim=0)  # (T,) indexed by position t
    return norms.flip(0).detach()  # indexed by distance k = T - 1 - t


def context_recoverability(
    seq_len: int,
    *,
    hidden_size: int = 16,
    input_size: int = 2,
    gain: float = 0.95,
    nonlinearity: str = "tanh",
    n_samples: int = 4000,
    seed: int = 0,
) -> torch.Tensor:
    """How well each input can be read back linearly from the final state ``h_T``.

    Random sequences go through a random RNN; for every position ``t`` a least-squares
    decoder (with bias) is fitted from ``h_T`` to ``x_t`` on one half of the samples and scored
    on the other half. A fixed-size context vector of ``hidden_size`` numbers cannot hold
    ``seq_len * input_size`` independent numbers, so the total recoverable variance is bounded
    by ``hidden_size / input_size`` positions.

    Returns:
        float64 tensor ``(seq_len,)``: held-out R^2 (fraction of variance explained, clipped
        at 0) for each position ``t = 1 .. seq_len``.
    """
    check_int("seq_len", seq_len, minimum=1)
    check_int("n_samples", n_samples, minimum=1)
    if n_samples < 4 * (hidden_size + 1):
        raise ValueError(f"n_samples must be >= 4 * (hidden_size + 1), got {n_samples}")
    w_h, w_x = make_rnn_weights(hidden_size, input_size, gain, seed=seed)
    generator = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n_samples, seq_len, input_size, generator=generator, dtype=torch.float64)
    h_last = run_rnn(x, w_h, w_x, nonlinearity)[:, -1]  # (N, H)
    features = torch.cat([h_last, torch.ones(n_samples, 1, dtype=torch.float64)], dim=1)
    half = n_samples // 2
    targets = x.reshape(n_samples, seq_len * input_size)  # (N, T*I)
    coef = torch.linalg.lstsq(features[:half], targets[:half]).solution  # (H+1, T*I)
    residual = targets[half:] - features[half:] @ coef
    sse = (residual**2).sum(dim=0)
    sst = ((targets[half:] - targets[half:].mean(dim=0)) ** 2).sum(dim=0)
    r2 = (1 - sse / sst).reshape(seq_len, input_size).mean(dim=1)
    return r2.clamp(min=0.0)


def module_gradient_norms(
    module: torch.nn.Module,
    seq_len: int,
    *,
    input_size: int,
    batch_size: int = 16,
    seed: int = 0,
) -> torch.Tensor:
    """:func:`rnn_gradient_norms` for any batch-first recurrent module (``nn.RNN``,
    ``nn.LSTM``, ``nn.GRU``) whose forward returns ``(outputs (B, T, H), state)``.

    The inputs, the read-out vector ``u`` and the averaging are those of
    :func:`rnn_gradient_norms`, in the module's dtype. Returns ``(seq_len,)`` indexed by the
    distance ``k`` from the last step.
    """
    check_int("seq_len", seq_len, minimum=1)
    check_int("input_size", input_size, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    if not getattr(module, "batch_first", False):
        raise ValueError("module must be batch first (construct it with batch_first=True)")
    dtype = next(module.parameters()).dtype
    generator = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch_size, seq_len, input_size, generator=generator, dtype=torch.float64)
    x = x.to(dtype).requires_grad_(True)
    outputs, _ = module(x)
    if outputs.dim() != 3 or outputs.shape[:2] != (batch_size, seq_len):
        raise ValueError(f"module must return outputs (B, T, H), got {tuple(outputs.shape)}")
    u = torch.randn(batch_size, outputs.shape[-1], generator=generator, dtype=torch.float64)
    u = (u / u.norm(dim=-1, keepdim=True)).to(dtype)
    (grad,) = torch.autograd.grad((u * outputs[:, -1]).sum(), x)
    return grad.norm(dim=-1).mean(dim=0).flip(0).detach()
