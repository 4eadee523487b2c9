"""Which strings are (the start of) a Chinese number reading: the yardstick for "plausible".

Chapter 6 puts one wrong token into a gold prefix and asks whether the result still *could* be
the start of some number's reading. :func:`is_reading_prefix` and :func:`is_reading` answer
that for the readings of ``0 .. 10**max_digits - 1`` (:func:`lecturekit.data.tasks.number_to_chinese`)
without listing them all: a reading is either the reading of a number below 10 000, or a
"head" (the reading of the ten-thousands) + 万 + a "tail" (the rest, with its 零).
"""

from __future__ import annotations

import functools

from lecturekit._common import check_int
from lecturekit.data.tasks import _read_below_10000, _reading

__all__ = ["is_reading_prefix", "is_reading"]


def _prefixes(words: list[str]) -> frozenset[str]:
    """Every prefix, the empty one included, of every string in ``words``."""
    return frozenset(w[:i] for w in words for i in range(len(w) + 1))


@functools.cache
def _parts(max_digits: int) -> tuple[list[str], list[str], list[str]]:
    """``(small, heads, tails)``: readings below ``min(10**4, 10**max_digits)``, the heads
    before 万 and the tails after it, for numbers below ``10**max_digits``."""
    small = [_reading(n) for n in range(10 ** min(max_digits, 4))]
    top = 10 ** max(max_digits - 4, 0)
    # the head reads like a number of its own, except that 2 reads 两 (两万, not 二万)
    heads = ["两" if h == 2 else _reading(h) for h in range(1, top)]
    tails = [""] + [("零" if n < 1000 else "") + _read_below_10000(n) for n in range(1, 10_000)]
    return small, heads, tails


@functools.cache
def _prefix_sets(max_digits: int) -> tuple[frozenset[str], ...]:
    small, heads, tails = _parts(max_digits)
    return (
        frozenset(small),
        frozenset(heads),
        frozenset(tails),
        _prefixes(small),
        _prefixes(heads),
        _prefixes(tails),
    )


def _check_digits(max_digits: int) -> None:
    check_int("max_digits", max_digits, minimum=1, maximum=8)


def is_reading_prefix(text: str, max_digits: int = 6) -> bool:
    """Whether some reading of a number in ``[0, 10**max_digits)`` starts with ``text``.

    The empty string is a prefix of every reading. ``max_digits``: 1 to 8.
    """
    _check_digits(max_digits)
    _, heads, _, small_p, head_p, tail_p = _prefix_sets(max_digits)
    if text in small_p:
        return True
    if not heads:
        return False
    head, wan, tail = text.partition("万")
    if not wan:
        return text in head_p
    return head in heads and tail in tail_p


def is_reading(text: str, max_digits: int = 6) -> bool:
    """Whether ``text`` is the whole reading of a number in ``[0, 10**max_digits)``."""
    _check_digits(max_digits)
    small, heads, tails, *_ = _prefix_sets(max_digits)
    if text in small:
        return True
    head, wan, tail = text.partition("万")
    return bool(wan) and head in heads and tail in tails
