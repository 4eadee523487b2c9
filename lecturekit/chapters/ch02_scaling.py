"""Chapter 2: what the ``1/sqrt(d_k)`` scale of scaled dot-product attention does to the
softmax (how peaked it gets, how much gradient passes) as ``d_k`` grows.

Runs in well under a second on a CPU so that the notebook can call it.
"""

from __future__ import annotations

import math

import torch

from lecturekit._common import check_int

__all__ = ["softmax_saturation"]


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
