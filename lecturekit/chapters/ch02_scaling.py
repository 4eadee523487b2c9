"""Chapter 2: what the ``1/sqrt(d_k)`` scale of scaled dot-product attention does to the
softmax (how peaked it gets, how much gradient passes) as ``d_k`` grows, and how large the
gradients that reach the query and the keys are, the scale's own factor included.

Runs in well under a second on a CPU so that the notebook can call it.
"""

from __future__ import annotations

import math

import torch

from lecturekit._common import check_int, check_number

__all__ = ["softmax_saturation", "attention_gradient_norms"]


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
    check_int("d_k", d_k, minimum=1)
    check_int("n_keys", n_keys, minimum=1)
    check_int("n_queries", n_queries, minimum=1)
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


def attention_gradient_norms(
    d_k: int,
    *,
    n_keys: int = 16,
    n_queries: int = 1000,
    scaled: bool = True,
    qk_std: float = 1.0,
    seed: int = 0,
) -> dict[str, float]:
    """Size of the gradients that flow back through one attention row, end to end.

    Each of ``n_queries`` independent draws has a query ``q (d_k,)``, keys ``K (n_keys, d_k)``,
    values ``V (n_keys, d_k)`` and an upstream gradient ``g (d_k,)``, all entries independent
    and normal with mean 0: standard deviation ``qk_std`` for ``q`` and ``K``, 1 for ``V`` and
    ``g`` (the same seed draws the same numbers, only ``q`` and ``K`` multiplied by
    ``qk_std``). The output is ``o = softmax(q K^T / s) V`` with ``s = sqrt(d_k)`` when
    ``scaled`` else 1, and the loss is ``L = g . o`` (so ``dL/do = g``). Unlike the softmax's
    own Jacobian (:func:`softmax_saturation`), these gradients include the factor ``1/s``
    that the scale itself puts on every path back to ``q`` and ``K``.

    Returns a dict of means over draws:
        ``dot_grad``: ``||dL/de||`` for the raw dot products ``e = q K^T`` (before the scale);
        ``query_grad``: ``||dL/dq||``, what reaches ``W_Q``;
        ``key_grad``: ``||dL/dK||`` (Frobenius norm over all keys), what reaches ``W_K``.
    """
    check_int("d_k", d_k, minimum=1)
    check_int("n_keys", n_keys, minimum=1)
    check_int("n_queries", n_queries, minimum=1)
    check_number("qk_std", qk_std, minimum=0, exclusive=("minimum",))
    generator = torch.Generator().manual_seed(seed)
    shape = (n_queries, n_keys, d_k)
    q = torch.randn(n_queries, 1, d_k, generator=generator, dtype=torch.float64) * qk_std
    k = torch.randn(shape, generator=generator, dtype=torch.float64) * qk_std
    v = torch.randn(shape, generator=generator, dtype=torch.float64)
    g = torch.randn(n_queries, 1, d_k, generator=generator, dtype=torch.float64)
    q.requires_grad_(True)
    k.requires_grad_(True)
    dots = (q * k).sum(-1)  # (N, n_keys): raw dot products
    dots.retain_grad()
    scale = 1.0 / math.sqrt(d_k) if scaled else 1.0
    output = (dots * scale).softmax(dim=-1).unsqueeze(1) @ v  # (N, 1, d_k)
    (output * g).sum().backward()
    return {
        "dot_grad": dots.grad.norm(dim=-1).mean().item(),
        "query_grad": q.grad.flatten(1).norm(dim=-1).mean().item(),
        "key_grad": k.grad.flatten(1).norm(dim=-1).mean().item(),
    }
