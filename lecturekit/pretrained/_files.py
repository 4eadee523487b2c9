"""Reading the files the pretrained recipes write (shipped models, training states) safely.

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
from lecturekit.training.checkpoint import _checksum

__all__ = ["read_payload", "check_entries", "load_state", "save_state", "ship", "STATE_FIX"]


def read_payload(path: Path, where: str, fix: str, *, checksum: str = "required") -> dict[str, Any]:
    """The dict that ``_save_payload`` wrote to ``path``, read with ``weights_only``.

    ``where``: the argument that named the file (starts the message); ``fix``: what to do about
    a damaged file (ends it). ``checksum``: ``"required"``
    (a shipped file), ``"optional"`` (a training state from before checksums continues) -- a
    checksum that is present must match. The ``"checksum"`` entry is removed from the result.
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
    if stored is None and checksum == "required":
        raise ValueError(damaged.format("it has no checksum"))
    if stored is not None and stored != _checksum(saved):
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


STATE_FIX = "delete it to train from scratch (the shipped model is not affected)"
STATE_ENTRIES = {
    "recipe": dict,
    "step": int,
    "seconds": float,
    "history": dict,
    "rng": torch.Tensor,
    "optimizer": (dict, type(None)),
    "loss_sum": float,
    "model": dict,
    "src_vocab": dict,
    "tgt_vocab": dict,
}


def load_state(path: Path) -> dict[str, Any]:
    """The training state :func:`save_state` wrote to ``path``, read safely
    (``weights_only``); a damaged file (unreadable, an entry missing, its checksum does not
    match) is refused, never continued from. States saved before the checksum was added have
    none: they are continued, not refused."""
    state = read_payload(path, "state_path", STATE_FIX, checksum="optional")
    if "recipe" not in state:
        raise ValueError(f"state_path: {path} is not a saved training state; delete or move it")
    check_entries(state, STATE_ENTRIES, path, "state_path", STATE_FIX)
    return state


def save_state(state: dict[str, Any], path: Path) -> None:
    from lecturekit.pretrained.rnn import _save_payload

    model, optimizer = state["model_obj"], state["optimizer_obj"]
    src_vocab, tgt_vocab = state["vocabs"]
    kept = {k: v for k, v in state.items() if not k.endswith("_obj") and k != "vocabs"}
    kept.update(
        model=model.state_dict(),
        optimizer=optimizer.state_dict(),
        rng=torch.get_rng_state(),
        src_vocab=src_vocab.to_dict(),
        tgt_vocab=tgt_vocab.to_dict(),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    _save_payload(kept, path)  # atomic, read back, with a checksum: see load_state


def ship(recipe: Any, state: dict[str, Any], path: Path, threads: int) -> None:
    from lecturekit.pretrained.rnn import _save_payload

    model = state["model_obj"]
    src_vocab, tgt_vocab = state["vocabs"]
    weights = _half_state(model)
    too_large = [k for k, v in weights.items() if v.is_floating_point() and not v.isfinite().all()]
    if too_large:  # a float32 weight beyond float16's 65504 would ship as inf
        raise FloatingPointError(
            f"out: the weights {too_large[:3]} do not fit float16 (beyond 65504 or not "
            f"finite); {path} was not written (a file already there is unchanged)"
        )
    _save_payload(  # atomic, with the SHA-256 checksum every shipped file carries
        {
            "recipe": dataclasses.asdict(recipe),
            "config": model.config.to_dict(),
            "state": weights,
            "src_vocab": src_vocab.to_dict(),
            "tgt_vocab": tgt_vocab.to_dict(),
            "history": state["history"],
            "metadata": {
                "steps": state["step"],
                "finished": state["step"] >= recipe.total_steps,
                "train_seconds": round(state["seconds"], 1),
                "threads": threads,
                "torch": str(torch.__version__),  # a plain str: loadable with weights_only
            },
        },
        path,
    )
