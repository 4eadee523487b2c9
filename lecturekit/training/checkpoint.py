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

from lecturekit._common import check_type
from lecturekit.training import _checkpoint_guards as guards
from lecturekit.training._checkpoint_guards import FORMAT, FORMAT_VERSION, MAX_DEPTH

__all__ = ["Checkpoint", "save_checkpoint", "load_checkpoint", "RUNTIME_FIELDS"]

# configuration fields that change how the model computes, not its weights: a checkpoint
# loads into a model that differs only in these
RUNTIME_FIELDS = ("dropout", "attention_backend", "layernorm_backend")
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
    path = guards.check_save_path(path)
    payload = _payload(
        model,
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
        train_config=train_config,
        metadata=metadata,
    )
    _write_payload(payload, path)
    return path


def _payload(
    model: nn.Module,
    *,
    src_vocab: Any = None,
    tgt_vocab: Any = None,
    train_config: Any = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The plain-data dict :func:`save_checkpoint` writes (without its checksum); the
    arguments as there. A caller may add entries of its own (plain data, checked by
    :func:`_write_payload`) before writing it, as ``fit``'s state file does."""
    from lecturekit import __version__

    model = getattr(model, "module", model)  # unwrap DistributedDataParallel
    config: Any = getattr(model, "config", None)  # any model whose config has to_dict
    if not hasattr(config, "to_dict"):
        raise TypeError(f"model must be a lecturekit.Transformer, got {type(model).__name__}")
    if metadata is not None and not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict or None, got {type(metadata).__name__}")
    for name, vocab in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab)):
        if vocab is not None and not callable(getattr(vocab, "to_dict", None)):
            raise TypeError(
                f"{name} must be a lecturekit vocabulary (a WordVocab or CharVocab: it "
                f"is stored with to_dict) or None, got {type(vocab).__name__}"
            )
    if train_config is not None and hasattr(train_config, "to_dict"):
        train_config = train_config.to_dict()
    state_dict = model.state_dict()
    if meta := [k for k, v in state_dict.items() if v.is_meta]:
        raise ValueError(
            f"model: {meta[0]} is on the meta device (no data); materialise the model "
            "(model.to_empty(device=...) and load weights) before saving it"
        )
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "lecturekit_version": __version__,
        "model_config": _plain(config.to_dict(), "model.config"),
        "state_dict": {k: v.detach().cpu() for k, v in state_dict.items()},
        "src_vocab": None if src_vocab is None else src_vocab.to_dict(),
        "tgt_vocab": None if tgt_vocab is None else tgt_vocab.to_dict(),
        "train_config": _plain(train_config, "train_config"),
        "metadata": _plain(metadata or {}, "metadata"),
    }


def _write_payload(payload: dict[str, Any], path: Path) -> None:
    """Write ``payload`` (a :func:`_payload`, maybe with entries of its own) to
    ``path`` with its SHA-256 checksum: atomically, read back before the rename, temporary
    files of killed earlier saves removed. Entries that are not plain data are refused
    before anything is written."""
    payload = {k: _plain(v, k) for k, v in payload.items() if k != "checksum"}
    payload["checksum"] = _checksum(payload)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporary_files(path)
    _write_atomically(payload, path)


def _read_payload(path: Path, *, verify: bool = True) -> dict[str, Any]:
    """The checked payload of the checkpoint at ``path`` (format, structure, entries and,
    with ``verify``, the checksum: ``ValueError`` naming the file otherwise)."""
    payload = guards.read_payload(path)
    if verify and "checksum" in payload and payload["checksum"] != _checksum(payload):
        raise ValueError(
            f"path: {str(path)!r} fails its checksum: the file was damaged after it was "
            "written (a partial copy, flipped bytes); copy it again, or pass verify=False to "
            "load it anyway"
        )
    return payload


def _plain(value: Any, name: str, _seen: tuple[int, ...] = ()) -> Any:
    """``value`` as plain Python data that ``weights_only`` loading accepts, else TypeError.

    Exact types only: a subclass of ``float`` such as ``np.float64`` would be pickled as a
    NumPy object, which the loader then refuses. At most ``MAX_DEPTH`` levels of nesting
    (the loader refuses deeper files). A tensor is stored with a storage of its own size (an
    expanded view, or a slice of a larger tensor, is copied), which the loader's memory bound
    relies on.
    """
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, torch.Tensor) and type(value) in (torch.Tensor, nn.Parameter):
        if value.is_meta:
            raise TypeError(f"{name}: a meta tensor holds no data; store a real tensor")
        if guards.storage_bytes(value) != value.numel() * value.element_size():
            return value.detach().clone(memory_format=torch.contiguous_format)
        return value.detach()
    if type(value) in (list, tuple, dict):
        if id(value) in _seen:
            raise ValueError(f"{name}: contains itself (a cycle); store plain, finite data")
        if len(_seen) >= MAX_DEPTH:
            raise ValueError(
                f"{name.split('[')[0]} must nest at most {MAX_DEPTH} levels deep, got deeper "
                f"data at {name[:120]}...; store flatter data (e.g. a list of records)"
            )
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
    device = guards.device(map_location)
    check_type("path", path, (str, os.PathLike), "a checkpoint file path")
    path = Path(path)
    payload = _read_payload(path, verify=verify)
    where = f"path: {str(path)!r}"
    saved = dict(payload["model_config"])
    if model is None:
        config: Any = _config(TransformerConfig, {**saved, **runtime_overrides}, where)
        guards.check_size(config, payload["state_dict"], where)  # before allocating anything
        model = Transformer(config)
        guards.check_weights(model.state_dict(), payload["state_dict"], where)
    else:
        model = getattr(model, "module", model)
        config = getattr(model, "config", None)
        if not hasattr(config, "to_dict"):
            raise TypeError(f"model must be a lecturekit.Transformer, got {type(model).__name__}")
        _check_same_config(saved, config.to_dict())
        guards.check_weights(model.state_dict(), payload["state_dict"], where)
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


def _vocab(state: dict[str, Any] | None, where: str) -> Any:
    if state is None:
        return None
    from lecturekit.data.vocab import Vocab

    try:
        return Vocab.from_dict(state)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where} is invalid: {err}") from err
