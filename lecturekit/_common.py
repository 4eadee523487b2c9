"""Helpers every part of lecturekit shares: the special token ids, the eval-mode context,
one-time warnings and argument checks.

One style for bad input everywhere: ``TypeError`` for a value of the wrong type,
``ValueError`` for a value of the right type but out of range, and the message
``"<name> must be <what>, got <value>"`` naming the argument.

The checks of scalars (``check_int``, ``check_number``, ...) and of tensors (token ids,
attention masks, the encoder memory) live here together, so every entry point of the
package validates its input with the same rules and words. This module imports torch only
inside the tensor checks: importing it stays torch-free.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: importing this module never imports torch
    from torch import Tensor

__all__ = [
    "check_has_data",
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "UNK_ID",
    "SPECIAL_TOKENS",
    "eval_mode",
    "warn_once",
    "check_int",
    "check_number",
    "check_choice",
    "check_type",
    "check_bool",
    "check_token_ids",
    "check_attn_mask",
    "check_key_padding_mask",
    "check_mask_values",
    "check_mask_or_causal",
    "check_memory",
    "device_memory",
    "check_allocation",
    "MAX_MASK_VALUE",
    "MAX_SEED",
]

# The special tokens, defined once for the whole package: every vocabulary puts them first,
# so their ids are the defaults of ``TransformerConfig`` and of every chapter's tables.
PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<unk>")

_warned: set[str] = set()


def warn_once(message: str) -> None:
    """Issue ``message`` as a RuntimeWarning the first time only (per process)."""
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def device_memory(device: Any = "cpu") -> int | None:
    """Total memory in bytes of ``device`` (a ``torch.device`` or its name; None where it
    cannot be read, e.g. off POSIX or on ``mps``)."""
    kind = getattr(device, "type", str(device).split(":")[0])
    if kind == "cuda":
        import torch

        return torch.cuda.get_device_properties(device).total_memory
    if kind == "cpu" and hasattr(os, "sysconf"):
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            return None
    return None


def check_allocation(what: str, need: int, fix: str, device: Any = "cpu") -> None:
    """Refuse, before torch tries, an allocation of ``need`` bytes larger than the memory of
    ``device`` (torch would fail with an allocator error that names no argument)."""
    have = device_memory(device)
    if have is not None and need > have:
        raise ValueError(
            f"{what} need {need / 2**30:,.1f} GiB, the {getattr(device, 'type', device)} device "
            f"has {have / 2**30:,.1f} GiB of memory; {fix}"
        )


@contextlib.contextmanager
def eval_mode(model: Any) -> Iterator[Any]:
    """Run the block with ``model`` in eval mode (no dropout), then restore its mode.

    ``model`` may be anything: objects without ``train``/``eval`` (a ``TableDecoder``) are
    left alone. Used by every place that predicts while a model may be training (decoding,
    evaluation, scheduled sampling, the exposure-bias measurements).
    """
    was_training = getattr(model, "training", None)
    if was_training is None or not hasattr(model, "train"):
        yield model
        return
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def check_type(name: str, value: Any, types: type | tuple[type, ...], what: str) -> None:
    """Raise ``TypeError("<name> must be <what>, got <type>")`` unless ``value`` is a ``types``."""
    if not isinstance(value, types):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__} ({value!r})")


def check_int(
    name: str,
    value: Any,
    minimum: int | None = None,
    maximum: int | None = None,
    *,
    optional: bool = False,
) -> None:
    """An ``int`` (not a bool) in ``[minimum, maximum]``; None passes when ``optional``."""
    if value is None and optional:
        return
    what = "an int" + (" or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, int):
        hint = f"; write {name}={value}" if isinstance(value, str) else ""
        raise TypeError(f"{name} must be {what}, got {type(value).__name__} ({value!r}){hint}")
    _check_range(name, value, minimum, maximum)


def check_number(
    name: str,
    value: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    exclusive: Iterable[str] = (),
    optional: bool = False,
    finite: bool = True,
) -> None:
    """A real number (int or float, not a bool, never NaN) in ``[minimum, maximum]``.

    ``exclusive`` names the open ends: ``("minimum",)`` for ``(minimum, maximum]``.
    ``finite=False`` lets ``inf`` pass (where the range allows it).
    """
    if value is None and optional:
        return
    what = "a number" + (" or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        hint = f"; write {name}={value}" if isinstance(value, str) else ""
        raise TypeError(f"{name} must be {what}, got {type(value).__name__} ({value!r}){hint}")
    # every comparison with NaN is False, so no range check below would catch it
    if finite and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if math.isnan(value):
        raise ValueError(f"{name} must be a number, not NaN, got {value!r}")
    _check_range(name, value, minimum, maximum, tuple(exclusive))


def _check_range(
    name: str,
    value: float,
    minimum: float | None,
    maximum: float | None,
    exclusive: tuple[str, ...] = (),
) -> None:
    low_open, high_open = "minimum" in exclusive, "maximum" in exclusive
    too_low = minimum is not None and (value <= minimum if low_open else value < minimum)
    too_high = maximum is not None and (value >= maximum if high_open else value > maximum)
    if not (too_low or too_high):
        return
    if minimum is not None and maximum is not None:
        span = f"{'(' if low_open else '['}{minimum}, {maximum}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be in {span}, got {value!r}")
    if minimum is not None:
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {minimum}, got {value!r}")
    raise ValueError(f"{name} must be {'<' if high_open else '<='} {maximum}, got {value!r}")


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> None:
    """``value`` is one of ``choices`` (``ValueError`` listing them otherwise)."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def check_bool(name: str, value: Any) -> None:
    """``value`` is True or False (not a truthy object)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} ({value!r})")


# torch.manual_seed takes seeds below 2**64, and fit adds the process rank to the seed
MAX_SEED = 2**63 - 1


# -- tensors -----------------------------------------------------------------------------------
# largest value a float attention mask may hold (see _check_mask_values)
MAX_MASK_VALUE = 1e4


def check_token_ids(
    name: str,
    tokens: Any,
    vocab_size: int | None = None,
    *,
    shape: str = "(B, T)",
    fix: str = "",
) -> None:
    """``tokens``: a non-empty integer tensor of the given ``shape`` (``"(B, T)"``, ``"(B,)"``)
    holding ids in ``[0, vocab_size)`` (any ids when ``vocab_size`` is None).

    ``torch.long`` and ``torch.int32`` are accepted (what ``nn.Embedding`` takes). An id
    outside the vocabulary is reported with its row and position; ``fix`` is appended to
    that message (how to repair the data).
    """
    import torch

    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(tokens).__name__}")
    dtype = tokens.dtype
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids (torch.long), got dtype {dtype}")
    if dtype not in (torch.long, torch.int32):
        raise TypeError(
            f"{name} must hold token ids as torch.long (or torch.int32), got {dtype}; "
            f"convert with {name}.long()"
        )
    if tokens.is_meta:
        raise ValueError(f"{name} is on the meta device (it holds no ids); pass real ids")
    dims = len([part for part in shape.strip("()").split(",") if part.strip()])
    if tokens.dim() != dims or tokens.numel() == 0:
        raise ValueError(
            f"{name} must have shape {shape} and not be empty, got {tuple(tokens.shape)}"
        )
    if vocab_size is None:
        return
    outside = (tokens < 0) | (tokens >= vocab_size)
    if bool(outside.any()):
        index = outside.nonzero()[0].tolist()
        labels = ("row", "position")[: len(index)]
        where = ", ".join(f"{label} {i}" for label, i in zip(labels, index, strict=True))
        raise ValueError(
            f"{name} ids must be in [0, {vocab_size}), got {int(tokens[tuple(index)])} "
            f"({where}){'; ' + fix if fix else ''}"
        )


def _check_mask_type(name: str, mask: Any) -> None:
    import torch

    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.dtype.is_floating_point:
        raise TypeError(f"{name} must be a bool or float tensor, got dtype {mask.dtype}")
    if mask.is_meta:
        raise ValueError(f"{name} is on the meta device (it holds no values); pass a real mask")


def _check_mask_values(name: str, mask: Tensor) -> None:
    """A float mask is added to the scores: NaN, +inf or a huge positive value there would
    make the output NaN (two masks of ``MAX_MASK_VALUE`` plus the scores stay finite even
    in float16). Bool masks need no check; a float mask costs one reduction."""
    import torch

    if mask.dtype == torch.bool or mask.numel() == 0:
        return
    largest = float(mask.amax())  # NaN if any value is NaN
    if not largest <= MAX_MASK_VALUE:
        bad = "NaN" if bool(torch.isnan(mask).any()) else f"{largest:g}"
        raise ValueError(
            f"{name} holds {bad}: a float mask is added to the attention scores, so it must be "
            f"0 where attending is allowed, -inf where it is not, and at most {MAX_MASK_VALUE:g} "
            "anywhere (or pass a bool mask, True = masked out)"
        )


def check_attn_mask(
    name: str, mask: Tensor | None, batch: int, n_heads: int, tq: int, tk: int
) -> None:
    """``mask``: None or a valid attention mask for ``(B, H, Tq, Tk)`` scores.

    Accepted shapes (as ``nn.MultiheadAttention``): ``(Tq, Tk)``, ``(B*H, Tq, Tk)``, and
    ``(B or 1, H or 1, Tq, Tk)``. Accepted dtypes: bool (True = masked out) or floating
    point; a float mask may hold -inf and finite values up to ``MAX_MASK_VALUE`` (1e4), not
    NaN or +inf.
    """
    if mask is None:
        return
    _check_mask_type(name, mask)
    shape = tuple(mask.shape)
    ok = (
        shape == (tq, tk)
        or shape == (batch * n_heads, tq, tk)
        or (
            len(shape) == 4
            and shape[0] in (1, batch)
            and shape[1] in (1, n_heads)
            and shape[2:] == (tq, tk)
        )
    )
    if not ok:
        raise ValueError(
            f"{name} must have shape (Tq, Tk)=({tq}, {tk}) or (B*H, Tq, Tk)="
            f"({batch * n_heads}, {tq}, {tk}) or (B, H, Tq, Tk), got {shape}"
        )
    _check_mask_values(name, mask)


def check_mask_values(name: str, mask: Any) -> None:
    """A bool or float mask of any shape; a float one without NaN or +inf (as above)."""
    _check_mask_type(name, mask)
    _check_mask_values(name, mask)


def check_key_padding_mask(name: str, mask: Tensor | None, batch: int, tk: int) -> None:
    """``mask``: None or a ``(B, Tk)`` bool (True = padding) or float key padding mask (a
    float mask may hold -inf and finite values up to ``MAX_MASK_VALUE``, not NaN or +inf)."""
    if mask is None:
        return
    _check_mask_type(name, mask)
    if tuple(mask.shape) != (batch, tk):
        dims = {"src": "(B, S)", "memory": "(B, S)", "tgt": "(B, T)"}.get(
            name.split("_")[0], "(B, Tk)"
        )
        raise ValueError(f"{name} must have shape {dims}=({batch}, {tk}), got {tuple(mask.shape)}")
    _check_mask_values(name, mask)


def check_mask_or_causal(
    mask_name: str, mask: Tensor | None, causal_name: str, is_causal: bool
) -> None:
    """An explicit mask and ``is_causal=True`` are refused together, as in
    ``torch.nn.functional.scaled_dot_product_attention``: one of them says what is masked."""
    if mask is not None and is_causal:
        raise ValueError(
            f"{causal_name} must be False when {mask_name} is given (pass one of them: "
            f"{causal_name}=True applies causal_mask(Tq, Tk); a {mask_name} says itself what "
            f"is masked), got {causal_name}=True and a {mask_name}"
        )


def check_memory(memory: Any, d_model: int, batch: int | None = None) -> None:
    """``memory``: the encoder output, a floating point ``(B, S, d_model)`` tensor whose batch
    size is ``batch`` (when given)."""
    import torch

    if not isinstance(memory, torch.Tensor) or not memory.dtype.is_floating_point:
        raise TypeError(
            "memory must be a floating point torch.Tensor (the encoder output), got "
            f"{memory.dtype if isinstance(memory, torch.Tensor) else type(memory).__name__}"
        )
    if memory.dim() != 3 or memory.size(-1) != d_model:
        raise ValueError(
            f"memory must have shape (B, S, d_model={d_model}), got {tuple(memory.shape)}"
        )
    if batch is not None and memory.size(0) != batch:
        raise ValueError(
            f"memory and tgt must have the same batch size, got memory batch "
            f"{memory.size(0)} and tgt batch {batch}"
        )


def check_has_data(name: str, model: Any) -> None:
    """``model``'s weights hold data: a model built on the ``meta`` device (shapes only) is
    refused with the fix, not with torch's "Cannot copy out of meta tensor" deep inside."""
    parameters = getattr(model, "parameters", None)
    if callable(parameters) and any(p.is_meta for p in parameters()):
        raise ValueError(
            f"{name} has its weights on the meta device (shapes, no data): materialise them "
            "with model.to_empty(device='cpu') and initialise them (or load a checkpoint)"
        )
