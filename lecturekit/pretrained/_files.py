"""Reading the files the pretrained recipes write (shipped models) safely; writing the capstone's.

Whatever is wrong with such a file (truncated, emptied, another format, flipped bytes, an entry
missing or of the wrong type) is refused with one ``ValueError`` that says the file is damaged
and how to remake it, never with the error torch's unpickler or zip reader happens to raise.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from lecturekit.training._checkpoint_guards import check_structure
from lecturekit.training.checkpoint import _checksum, _write_payload

__all__ = ["read_payload", "check_entries", "ship", "int8_state", "dequantized"]


def read_payload(path: Path, where: str, fix: str) -> dict[str, Any]:
    """The dict that the checkpoint writer (``training.checkpoint._write_payload``) wrote to
    ``path``, read with ``weights_only``.

    ``where``: the argument that named the file (starts the message); ``fix``: what to do about
    a damaged file (ends it). The file's checksum must be there and match; the ``"checksum"``
    entry is removed from the result.
    """
    damaged = f"{where}: {path} is damaged ({{}}); {fix}"
    if path.stat().st_size == 0:
        raise ValueError(damaged.format("it is empty: an interrupted copy or save?"))
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # zip, pickle, EOF and storage errors: all mean "damaged"
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:120]
        raise ValueError(damaged.format(f"torch cannot read it: {reason}")) from err
    if not isinstance(saved, dict):
        raise ValueError(damaged.format(f"it holds a {type(saved).__name__}, not a dict"))
    check_structure(saved, f"{where}: {path}")
    stored = saved.pop("checksum", None)
    if stored is None:
        raise ValueError(damaged.format("it has no checksum"))
    if stored != _checksum(saved):
        raise ValueError(
            f"{where}: {path} fails its checksum: the file was damaged after it was written; {fix}"
        )
    return saved


def check_entries(
    saved: dict[str, Any], kinds: dict[str, Any], path: Path, where: str, fix: str
) -> None:
    """Every entry of ``kinds`` (``{key: type or tuple of types}``) is in ``saved`` with that
    type; otherwise the file is damaged (or was not written by this recipe code)."""
    for key, kind in kinds.items():
        if key not in saved or not isinstance(saved[key], kind):
            got = type(saved[key]).__name__ if key in saved else "nothing"
            raise ValueError(f"{where}: {path} is damaged (its {key!r} entry is {got}); {fix}")


def _half_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    # float16 copies; tied weights (one tensor under two names) stay one tensor
    seen: dict[int, torch.Tensor] = {}
    return {
        k: seen.setdefault(id(v), v.detach().half())
        for k, v in model.state_dict(keep_vars=True).items()
    }


def int8_state(model: torch.nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``model``'s weights at half float16's size: every parameter matrix ``(R, C)`` as int8
    ``round(w / s)`` with one float32 scale per row, ``s = max |w_row| / 127`` (the largest
    entry keeps its value, the others are off by at most ``s / 2``); vectors and buffers in
    float16. Returns ``(state, scales)``; :func:`dequantized` inverts it."""
    matrices = {k for k, v in model.named_parameters() if v.dim() == 2}
    state, scales = {}, {}
    for k, v in model.state_dict().items():
        v = v.detach().float()
        if k in matrices:
            scale = v.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny) / 127  # (R,)
            state[k] = torch.round(v / scale[:, None]).to(torch.int8)
            scales[k] = scale
        else:
            state[k] = v.half()
    return state, scales


def dequantized(
    state: dict[str, torch.Tensor], scales: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """The float32 weights of a shipped ``state`` (and the ``scales`` of its int8 matrices,
    :func:`int8_state`; empty for a float16 file)."""
    return {
        k: v.float() * scales[k][:, None] if k in scales else v.float() for k, v in state.items()
    }


def ship(
    recipe: Any,
    model: torch.nn.Module,
    vocabs: tuple[Any, Any],
    history: dict[str, list],
    step: int,
    seconds: float,
    path: Path,
    threads: int,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Write a capstone sentence model's shipped file: ``recipe``, the model's config and
    weights (float16, or int8 with row scales when ``recipe.weights == "int8"``), the
    vocabularies, ``history`` and metadata (``step`` of the recipe's ``total_steps``,
    ``seconds`` trained on ``threads`` threads, and ``metadata``'s entries), atomically, with
    the SHA-256 checksum every shipped file carries. Weights that do not fit float16 raise
    before anything is written."""
    config: Any = model.config
    weights, scales = int8_state(model) if recipe.weights == "int8" else (_half_state(model), {})
    too_large = [k for k, v in weights.items() if v.is_floating_point() and not v.isfinite().all()]
    if too_large:  # a float32 weight beyond float16's 65504 would ship as inf
        raise FloatingPointError(
            f"out: the weights {too_large[:3]} do not fit float16 (beyond 65504 or not "
            f"finite); {path} was not written (a file already there is unchanged)"
        )
    _write_payload(
        {
            "recipe": dataclasses.asdict(recipe),
            "config": config.to_dict(),
            "state": weights,
            "scales": scales,
            "src_vocab": vocabs[0].to_dict(),
            "tgt_vocab": vocabs[1].to_dict(),
            "history": history,
            "metadata": {
                "steps": step,
                "finished": step >= recipe.total_steps,
                "train_seconds": round(seconds, 1),
                "threads": threads,
                "torch": str(torch.__version__),  # a plain str: loadable with weights_only
                **(metadata or {}),
            },
        },
        path,
    )
