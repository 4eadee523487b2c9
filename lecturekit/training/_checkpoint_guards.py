"""The checkpoint loader's and saver's guards: the path, the device, the file's structure
and the memory a file may make the loader allocate (used by :mod:`.checkpoint`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from lecturekit._common import check_type

FORMAT = "lecturekit-checkpoint"
FORMAT_VERSION = 1
# memory a file may make the loader allocate beyond the bytes stored in it: the sinusoidal
# position table (not stored), and expanded (stride-0) tensors, which the checksum and the
# copy into the model materialise at their full size
BUFFER_ALLOWANCE = 64 * 2**20
# nesting the checksum walks recursively; far beyond any real metadata (a training history
# is three levels deep), far below Python's recursion limit
MAX_DEPTH = 100
# values the structure walk visits: a DAG of shared lists in a crafted file would otherwise
# make the checksum walk 2**depth values
MAX_VALUES = 2_000_000
_DEVICE_NAMES = {"cuda": "CUDA", "mps": "MPS (Apple GPU)"}


def check_save_path(path: Any) -> Path:
    """``path`` as a ``Path`` naming a file that can be created: not empty, not a folder, no
    file where a folder of it should be; else ``ValueError`` naming it."""
    check_type("path", path, (str, os.PathLike), "a file path such as 'model.pt'")
    text = os.fspath(path)
    if not isinstance(text, str) or text.strip() == "" or text.endswith(("/", os.sep)):
        raise ValueError(f"path must name a file such as 'model.pt', got {text!r}")
    path = Path(text)
    if path.is_dir():
        raise ValueError(
            f"path must name a file, got {text!r}, which is a folder; "
            f"add a file name: {str(path / 'model.pt')!r}"
        )
    for folder in path.parents:
        if folder.exists():
            if not folder.is_dir():
                raise ValueError(
                    f"path: {str(folder)!r} is a file, not a folder, so {text!r} cannot be "
                    "created; choose a path inside a folder"
                )
            break
    return path


def device(map_location: Any) -> torch.device:
    """``map_location`` as a device this machine has, else a ValueError naming it."""
    if not isinstance(map_location, (str, torch.device)):
        raise TypeError(
            f"map_location must be a device name such as 'cpu' or 'cuda', got "
            f"{type(map_location).__name__}"
        )
    try:
        chosen = torch.device(map_location)
    except RuntimeError as err:
        raise ValueError(
            f"map_location: {map_location!r} is not a device name ('cpu', 'cuda', 'cuda:1')"
        ) from err
    if chosen.type == "meta":
        raise ValueError("map_location: 'meta' holds no data; load to 'cpu' or 'cuda'")
    if chosen.type == "cpu":
        return chosen
    # checked here, not when the weights finally move: before anything is read or built
    backend = torch.backends.mps if chosen.type == "mps" else getattr(torch, chosen.type, None)
    available = getattr(backend, "is_available", None)
    if available is None or not available():
        raise ValueError(
            f"map_location: {str(map_location)!r} requested but "
            f"{_DEVICE_NAMES.get(chosen.type, repr(chosen.type))} is not available on this "
            "machine; use map_location='cpu'"
        )
    count = getattr(backend, "device_count", None)
    if chosen.index is not None and count is not None and chosen.index >= count():
        raise ValueError(
            f"map_location: {str(map_location)!r} requested but this machine has "
            f"{count()} {chosen.type} device(s) (0 to {count() - 1})"
        )
    return chosen


def read_payload(path: Path) -> dict[str, Any]:
    """The checked top-level dict of a checkpoint file (tensors on the CPU)."""
    where = f"path: {str(path)!r}"
    if not path.is_file():
        raise FileNotFoundError(f"path: no checkpoint file at {str(path)!r}")
    if path.stat().st_size == 0:
        raise ValueError(f"{where} is empty (0 bytes): an interrupted copy or save?")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle.UnpicklingError and friends
        reason = (str(err).strip().splitlines() or [""])[0]
        raise ValueError(
            f"{where} is not a lecturekit checkpoint that loads safely with "
            f"weights_only=True ({type(err).__name__}: {reason})"
        ) from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{where} is not a lecturekit checkpoint")
    if payload.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{where}: checkpoint format version {payload.get('format_version')!r} is not "
            f"supported (expected {FORMAT_VERSION})"
        )
    for key, kind in (("model_config", dict), ("state_dict", dict)):
        if not isinstance(payload.get(key), kind):
            raise ValueError(
                f"{where}: the checkpoint has no {key!r} {kind.__name__}; it is damaged or "
                "was not written by save_checkpoint"
            )
    for name, tensor in payload["state_dict"].items():
        if not isinstance(tensor, torch.Tensor) or tensor.is_meta:
            raise ValueError(f"{where}: weight {name!r} is not a tensor with data; it is damaged")
    if "checksum" in payload and not isinstance(payload["checksum"], str):
        raise ValueError(f"{where}: the checkpoint's 'checksum' is not a string; it is damaged")
    check_structure(payload, where)
    return payload


def check_structure(payload: Any, where: str) -> None:
    """Refuse, before the checksum walks it, a payload nested deeper than ``MAX_DEPTH`` (or
    cyclic), with more than ``MAX_VALUES`` values, or whose tensors show more bytes than their
    storages hold by over ``BUFFER_ALLOWANCE`` (expanded, stride-0 views). Iterative, so the
    check itself cannot hit the recursion limit."""
    stack, visited, shown = [(payload, 0)], 0, 0
    while stack:
        value, depth = stack.pop()
        visited += 1
        if depth > MAX_DEPTH or visited > MAX_VALUES:
            what = (
                f"nests deeper than {MAX_DEPTH} levels"
                if depth > MAX_DEPTH
                else (f"holds more than {MAX_VALUES:,} values")
            )
            raise ValueError(f"{where}: the checkpoint {what}; it is damaged or crafted")
        if isinstance(value, torch.Tensor):
            shown += max(0, value.numel() * value.element_size() - storage_bytes(value))
        elif isinstance(value, dict):
            stack.extend((item, depth + 1) for pair in value.items() for item in pair)
        elif isinstance(value, (list, tuple)):
            stack.extend((item, depth + 1) for item in value)
    if shown > BUFFER_ALLOWANCE:
        raise ValueError(
            f"{where}: the checkpoint's tensors show {shown / 2**20:,.0f} MiB more than their "
            "storages hold (expanded, stride-0 views); refusing to materialise them (the file "
            "is damaged or crafted)"
        )


def storage_bytes(tensor: torch.Tensor) -> int:
    """Bytes of memory ``tensor``'s storage really holds (an expanded view: a few)."""
    return tensor.untyped_storage().nbytes()


def check_size(config: Any, weights: dict[str, torch.Tensor], where: str) -> None:
    """Refuse a config whose model would need far more memory than the file's weights.

    A lower bound on the values a Transformer of ``config`` allocates (attention 4 D^2 and
    feed-forward 2 D d_ff per layer, the larger embedding, the position table) may exceed the
    bytes the file's weight storages really hold (each storage counted once, so a stride-0
    view counts for what it stores, not for what it shows) only by the sinusoidal table, which
    is not stored: at most ``BUFFER_ALLOWANCE`` bytes or the size of the weights.
    """
    values = config.min_values
    storages = {t.untyped_storage().data_ptr(): storage_bytes(t) for t in weights.values()}
    stored = sum(storages.values())
    if 4 * values > 2 * stored + BUFFER_ALLOWANCE:  # float32; stored may be float16
        raise ValueError(
            f"{where}: the model_config describes a model of at least {4 * values / 2**20:,.0f} "
            f"MiB but the file holds {stored / 2**20:.1f} MiB of weights; refusing to allocate "
            "it (the file is damaged or crafted)"
        )


def check_weights(expected: dict[str, torch.Tensor], weights: dict[str, Any], where: str) -> None:
    """Stored ``weights`` must have exactly the names and shapes of the ``expected`` state dict."""
    missing, unexpected = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"{where}: the weights do not match the model_config (missing {missing[:3]}, "
            f"unexpected {unexpected[:3]}); the file is damaged or was edited"
        )
    for name, tensor in expected.items():
        if tuple(weights[name].shape) != tuple(tensor.shape):
            raise ValueError(
                f"{where}: weight {name!r} has shape {tuple(weights[name].shape)} but the "
                f"model_config needs {tuple(tensor.shape)}; the file is damaged or was edited"
            )
