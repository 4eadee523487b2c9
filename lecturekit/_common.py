"""Helpers every part of lecturekit shares: the special token ids, the eval-mode context,
one-time warnings and argument checks.

One style for bad input everywhere: ``TypeError`` for a value of the wrong type,
``ValueError`` for a value of the right type but out of range, and the message
``"<name> must be <what>, got <value>"`` naming the argument.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = [
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
