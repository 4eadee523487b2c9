"""Checkpoints: save a trained model with everything needed to use it again, safely.

A checkpoint is one ``torch.save`` file holding only plain data (dicts, lists, strings,
numbers, tensors): the model configuration, the weights, the vocabularies, the training
configuration, free-form metadata, the ``lecturekit`` version that wrote it and a SHA-256
checksum of all of it.

- **Atomic**: the file is written to a temporary file in the same directory, flushed to disk,
  read back and checked, then renamed over the destination (``os.replace``); an interrupted
  save leaves the previous checkpoint intact, and the next save removes the temporary file
  that a killed process left behind. The file gets the mode ``open()`` would give it (0666
  minus the umask).
- **Plain data only**: metadata that ``weights_only`` loading would refuse (a NumPy scalar, a
  custom object) is refused *before* anything is written, with the path of the bad value.
- **Safe to load**: ``torch.load(weights_only=True)`` never runs pickled code; the size of
  the model the configuration describes is compared with the weights in the file before the
  model is allocated, so a small crafted file cannot make the loader allocate gigabytes.
- **Checked**: the checksum is verified on load (files without one, written by older
  versions, still load); loading into an existing model whose configuration differs raises a
  ``ValueError`` naming the differing fields.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["Checkpoint", "save_checkpoint", "load_checkpoint", "RUNTIME_FIELDS"]

FORMAT = "lecturekit-checkpoint"
FORMAT_VERSION = 1
# configuration fields that change how the model computes, not its weights: a checkpoint
# loads into a model that differs only in these
RUNTIME_FIELDS = ("dropout", "attention_backend", "layernorm_backend")
# memory a configuration may ask for beyond the weights stored in the file (the sinusoidal
# position table is not stored): at most this many bytes more than the weights
_BUFFER_ALLOWANCE = 64 * 2**20
# a temporary file whose writer cannot be checked (not POSIX) is stale after this long
_STALE_SECONDS = 24 * 3600


@dataclass
class Checkpoint:
    """What :func:`load_checkpoint` returns.

    ``model`` (in eval mode), ``config`` (``TransformerConfig``), ``src_vocab`` /
    ``tgt_vocab`` (``lecturekit.data.Vocab`` or None), ``train_config`` (dict or None),
    ``metadata`` (dict) and ``lecturekit_version`` (of the writer).
    """

    model: nn.Module
    config: Any
    src_vocab: Any = None
    tgt_vocab: Any = None
    train_config: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    lecturekit_version: str = ""


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    *,
    src_vocab: Any = None,
    tgt_vocab: Any = None,
    train_config: Any = None,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` and its context to ``path`` atomically; return the path.

    Args:
        model: a :class:`lecturekit.Transformer` (a DDP-wrapped one is unwrapped).
        src_vocab, tgt_vocab: ``lecturekit.data.Vocab`` objects (stored with ``to_dict``).
        train_config: a ``TrainConfig`` (or a plain dict).
        metadata: plain Python data only: ``str``, ``int``, ``float``, ``bool``, ``None``,
            lists, tuples, dicts with str or int keys, CPU/GPU tensors. Anything else (a
            NumPy scalar such as ``np.float64``, a custom object) raises ``TypeError`` before
            the file is touched: convert it first (``float(x)``, ``x.item()``, ``x.tolist()``).
    """
    from lecturekit import __version__

    model = getattr(model, "module", model)  # unwrap DistributedDataParallel
    if not hasattr(model, "config") or not hasattr(model.config, "to_dict"):
        raise TypeError(f"model must be a lecturekit.Transformer, got {type(model).__name__}")
    if metadata is not None and not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict or None, got {type(metadata).__name__}")
    if train_config is not None and hasattr(train_config, "to_dict"):
        train_config = train_config.to_dict()
    state_dict = model.state_dict()
    if meta := [k for k, v in state_dict.items() if v.is_meta]:
        raise ValueError(
            f"model: {meta[0]} is on the meta device (no data); materialise the model "
            "(model.to_empty(device=...) and load weights) before saving it"
        )
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "lecturekit_version": __version__,
        "model_config": _plain(model.config.to_dict(), "model.config"),
        "state_dict": {k: v.detach().cpu() for k, v in state_dict.items()},
        "src_vocab": None if src_vocab is None else src_vocab.to_dict(),
        "tgt_vocab": None if tgt_vocab is None else tgt_vocab.to_dict(),
        "train_config": _plain(train_config, "train_config"),
        "metadata": _plain(metadata or {}, "metadata"),
    }
    payload["checksum"] = _checksum(payload)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporary_files(path)
    _write_atomically(payload, path)
    return path


def _plain(value: Any, name: str, _seen: tuple[int, ...] = ()) -> Any:
    """``value`` as plain Python data that ``weights_only`` loading accepts, else TypeError.

    Exact types only: a subclass of ``float`` such as ``np.float64`` would be pickled as a
    NumPy object, which the loader then refuses.
    """
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, torch.Tensor) and type(value) in (torch.Tensor, nn.Parameter):
        if value.is_meta:
            raise TypeError(f"{name}: a meta tensor holds no data; store a real tensor")
        return value.detach()
    if type(value) in (list, tuple, dict):
        if id(value) in _seen:
            raise ValueError(f"{name}: contains itself (a cycle); store plain, finite data")
        seen = (*_seen, id(value))
        if type(value) is dict:
            for key in value:
                if type(key) not in (str, int):
                    raise TypeError(
                        f"{name}: dict keys must be str or int, got {type(key).__name__} {key!r}"
                    )
            return {k: _plain(v, f"{name}[{k!r}]", seen) for k, v in value.items()}
        return [_plain(v, f"{name}[{i}]", seen) for i, v in enumerate(value)]
    hint = " (convert with float(x) or x.item())" if hasattr(value, "item") else ""
    raise TypeError(
        f"{name} must be plain Python data (str, int, float, bool, None, lists, dicts, "
        f"tensors), got {type(value).__module__}.{type(value).__qualname__}{hint}"
    )


def _checksum(payload: dict[str, Any]) -> str:
    """SHA-256 of every entry of ``payload`` except ``"checksum"`` (a stable encoding)."""
    digest = hashlib.sha256()
    _feed(digest, {k: v for k, v in payload.items() if k != "checksum"})
    return digest.hexdigest()


def _feed(digest: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous().reshape(-1)
        digest.update(f"T{tensor.dtype}{tuple(value.shape)};".encode())
        digest.update(tensor.view(torch.uint8).numpy())
    elif isinstance(value, dict):
        digest.update(f"D{len(value)};".encode())
        for key in sorted(value, key=repr):
            _feed(digest, key)
            _feed(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(f"L{len(value)};".encode())
        for item in value:
            _feed(digest, item)
    elif isinstance(value, float):
        digest.update(f"F{value.hex()};".encode())
    else:  # None, bool, int, str
        text = repr(value)
        digest.update(f"{type(value).__name__}{len(text)}:{text};".encode())


def _write_atomically(payload: dict[str, Any], path: Path) -> None:
    """Write to a temporary file, check that it loads, rename it over ``path``."""
    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_name, 0o666 & ~_umask())  # mkstemp makes 0600; follow the umask
        # read it back: never replace a good checkpoint with one that does not load
        written = torch.load(tmp_name, map_location="cpu", weights_only=True, mmap=True)
        same = written.get("checksum") == _checksum(written)
        del written  # release the memory map before renaming
        if not same:
            raise OSError(f"path: {tmp_name!r} read back differently than it was written")
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)  # the previous checkpoint at `path` is untouched
        raise
    if os.name == "posix":  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _umask() -> int:
    """The process umask (read without changing it where /proc tells it)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove_stale_temporary_files(path: Path) -> None:
    """Delete temporary files of earlier saves to ``path`` whose writer was killed.

    Temporary names carry the writer's process id: on POSIX a file is stale when that
    process no longer exists; elsewhere, when it is older than a day.
    """
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+)\.[A-Za-z0-9_]+\.tmp")
    for candidate in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        match = pattern.fullmatch(candidate.name)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        stale = False
        if os.name == "posix":
            stale = not _process_exists(int(match.group(1)))
        else:
            with contextlib.suppress(OSError):
                stale = time.time() - candidate.stat().st_mtime > _STALE_SECONDS
        if stale:
            with contextlib.suppress(OSError):
                candidate.unlink()


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only checks (POSIX)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: it exists, owned by someone else
        return True
    return True


def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module | None = None,
    *,
    map_location: str | torch.device = "cpu",
    verify: bool = True,
    **runtime_overrides: Any,
) -> Checkpoint:
    """Load a checkpoint written by :func:`save_checkpoint`.

    Args:
        path: the checkpoint file.
        model: load the weights into this model; its configuration must equal the
            checkpoint's except for ``RUNTIME_FIELDS`` (dropout, attention and LayerNorm
            backends), else ``ValueError``. None: build a new ``Transformer``.
        map_location: where the model goes (default CPU), e.g. ``"cuda"``.
        verify: check the file's SHA-256 checksum (files written before checksums existed
            have none and load unchecked); ``False`` loads a damaged file anyway.
        runtime_overrides: for a new model, values of ``RUNTIME_FIELDS`` to use instead of
            the saved ones (e.g. ``attention_backend="sdpa"``).

    Returns:
        A :class:`Checkpoint`; its model is in eval mode.
    """
    from lecturekit.model.config import TransformerConfig
    from lecturekit.model.transformer import Transformer

    if bad := set(runtime_overrides) - set(RUNTIME_FIELDS):
        raise TypeError(f"runtime_overrides: only {RUNTIME_FIELDS} may be overridden, got {bad}")
    device = _device(map_location)
    path = Path(path)
    payload = _read_payload(path)
    where = f"path: {str(path)!r}"
    if verify and "checksum" in payload and payload["checksum"] != _checksum(payload):
        raise ValueError(
            f"{where} fails its checksum: the file was damaged after it was written (a "
            "partial copy, flipped bytes); copy it again, or pass verify=False to load it "
            "anyway"
        )
    saved = dict(payload["model_config"])
    if model is None:
        config = _config(TransformerConfig, {**saved, **runtime_overrides}, where)
        _check_size(config, payload["state_dict"], where)  # before allocating anything
        model = Transformer(config)
        _check_weights(model.state_dict(), payload["state_dict"], where)
    else:
        model = getattr(model, "module", model)
        if not hasattr(model, "config") or not hasattr(model.config, "to_dict"):
            raise TypeError(f"model must be a lecturekit.Transformer, got {type(model).__name__}")
        _check_same_config(saved, model.config.to_dict())
        config = model.config
        _check_weights(model.state_dict(), payload["state_dict"], where)
    model.load_state_dict(payload["state_dict"])
    model.to(device)
    model.eval()
    return Checkpoint(
        model=model,
        config=config,
        src_vocab=_vocab(payload.get("src_vocab"), f"{where}: src_vocab"),
        tgt_vocab=_vocab(payload.get("tgt_vocab"), f"{where}: tgt_vocab"),
        train_config=payload.get("train_config"),
        metadata=payload.get("metadata") or {},
        lecturekit_version=payload.get("lecturekit_version", ""),
    )


def _device(map_location: Any) -> torch.device:
    """``map_location`` as a device this machine has, else a ValueError naming it."""
    if not isinstance(map_location, (str, torch.device)):
        raise TypeError(
            f"map_location must be a device name such as 'cpu' or 'cuda', got "
            f"{type(map_location).__name__}"
        )
    try:
        device = torch.device(map_location)
    except RuntimeError as err:
        raise ValueError(
            f"map_location: {map_location!r} is not a device name ('cpu', 'cuda', 'cuda:1')"
        ) from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"map_location: {str(map_location)!r} requested but CUDA is not available on "
            "this machine; use map_location='cpu'"
        )
    if device.type == "meta":
        raise ValueError("map_location: 'meta' holds no data; load to 'cpu' or 'cuda'")
    return device


def _read_payload(path: Path) -> dict[str, Any]:
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
    return payload


def _config(config_class: type, fields: dict[str, Any], where: str) -> Any:
    """``config_class(**fields)``, with errors that say the checkpoint is at fault."""
    from dataclasses import fields as dataclass_fields

    known = {f.name for f in dataclass_fields(config_class)}
    if unknown := sorted(set(fields) - known):
        raise ValueError(
            f"{where}: the checkpoint's model_config has fields this lecturekit version does "
            f"not know: {unknown} (written by a newer version, or damaged)"
        )
    try:
        return config_class(**fields)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: the checkpoint's model_config is invalid: {err}") from err


def _check_same_config(saved: dict[str, Any], current: dict[str, Any]) -> None:
    diff = {
        k: (saved.get(k), current.get(k))
        for k in sorted(set(saved) | set(current))
        if k not in RUNTIME_FIELDS and saved.get(k) != current.get(k)
    }
    if diff:
        details = ", ".join(f"{k}: checkpoint {a!r} vs model {b!r}" for k, (a, b) in diff.items())
        raise ValueError(f"model: configuration does not match the checkpoint ({details})")


def _check_weights(expected: dict[str, torch.Tensor], weights: dict[str, Any], where: str) -> None:
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


def _check_size(config: Any, weights: dict[str, torch.Tensor], where: str) -> None:
    """Refuse a config whose model would need far more memory than the file's weights.

    A lower bound on the values a Transformer of ``config`` allocates (attention 4 D^2 and
    feed-forward 2 D d_ff per layer, the larger embedding, the position table) may exceed the
    stored weights only by the sinusoidal table, which is not stored: at most
    ``_BUFFER_ALLOWANCE`` bytes or the size of the weights.
    """
    d = config.d_model
    attention, feed_forward = 4 * d * d, 2 * d * config.d_ff
    values = (
        config.n_encoder_layers * (attention + feed_forward)
        + config.n_decoder_layers * (2 * attention + feed_forward)
        + d * max(config.src_vocab_size, config.tgt_vocab_size)
        + d * config.max_len
    )
    stored = sum(t.numel() * t.element_size() for t in weights.values())
    if 4 * values > 2 * stored + _BUFFER_ALLOWANCE:  # float32; stored may be float16
        raise ValueError(
            f"{where}: the model_config describes a model of at least {4 * values / 2**20:,.0f} "
            f"MiB but the file holds {stored / 2**20:.1f} MiB of weights; refusing to allocate "
            "it (the file is damaged or crafted)"
        )


def _vocab(state: dict[str, Any] | None, where: str) -> Any:
    if state is None:
        return None
    from lecturekit.data.vocab import Vocab

    try:
        return Vocab.from_dict(state)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where} is invalid: {err}") from err
