"""What every capstone input method reads: typed pinyin, normalised one way for all engines.

A user types ``"Nǐ hǎo"``, ``"ni3 hao3"``, ``"NI  HAO"`` or ``"nü"``; the engines were trained
on toneless lower-case syllables separated by single spaces, ü written ``v`` (``"ni hao"``,
``"nv"``). What is unambiguous is normalised (:func:`plain_letters`): case, full-width
letters, tone marks, tone numbers (which also end a syllable: ``"ni3hao3"`` -> ``"ni hao"``),
ü / ``u:`` / ``v``, ``u`` after j/q/x/y, apostrophes and runs of spaces. What is not a
syllable (``"nihao"`` typed without a space, ``"hoa"``, ``"ni!"``) is refused with a
``ValueError`` that names it and, when it is unspaced pinyin, the split to type instead; no
engine writes characters for it (nor for a vocabulary's special tokens: ``"<unk>"`` is no
syllable).

Every engine asks for ``k`` candidates through :func:`check_k`: one bound for all,
:data:`MAX_CANDIDATES` (lower where an engine's memory grows faster with ``k``), one message.

- :func:`pinyin_syllables`: the 410 toneless syllables;
- :func:`normalize_pinyin` (one input) and :func:`read_pinyins` (a list of inputs, the door of
  every engine's ``candidates``);
- :func:`split_syllables`: unspaced pinyin -> syllables (the candidate bar's typing).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import defaultdict
from collections.abc import Container, Sequence

from lecturekit._common import check_int, check_type

__all__ = [
    "pinyin_syllables",
    "plain_letters",
    "normalize_pinyin",
    "read_pinyins",
    "split_syllables",
    "check_k",
    "check_pairs",
    "length_batches",
    "MAX_CANDIDATES",
    "MAX_BEAM",
]

MAX_CANDIDATES = 1_000  # the most candidates any engine gives for one input
MAX_BEAM = 100  # the widest beam of the Transformer engines (k candidates = a beam of width k)

_TONE_MARKS = re.compile("[\u0300-\u036f]")  # combining accents left by NFD (ü's ¨ taken first)
_TONE_DIGIT = re.compile(r"(?<=[a-z])[0-5]")  # a tone number ends its syllable
_U_AFTER_JQXY = re.compile(r"(?<=[jqxy])v")  # no syllable ends in j, q, x or y: always ü = u
_LETTERS = re.compile("[a-z]+")  # what an engine's own syllables may be made of


@functools.cache
def pinyin_syllables() -> frozenset[str]:
    """Every toneless pinyin syllable (410), ü written ``v`` (``lv``, ``nve``) as pypinyin does.

    From Pinyin2Hanzi's list, with its placeholder ``null`` dropped and ``jue que xue yue``
    written as pypinyin writes them (Pinyin2Hanzi also lists ``jve qve xve yve``).
    """
    from Pinyin2Hanzi import all_pinyin

    odd = {"null", "jve", "qve", "xve", "yve"}
    return frozenset(set(all_pinyin()) - odd | {"jue", "que", "xue", "yue"})


def plain_letters(text: str) -> str:
    """``text`` with what is unambiguous normalised: full-width letters and digits as ASCII
    (``"ｎｉ"`` -> ``"ni"``), lower case, tone marks dropped, ü (also ``u:``) written ``v`` but
    ``u`` after j/q/x/y (``"Lǚ xüé"`` -> ``"lv xue"``), tone numbers and apostrophes turned into
    spaces, runs of white space into one space. Nothing is checked."""
    text = (
        unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text).lower())
        .replace("u\u0308", "v")
        .replace("u:", "v")
    )
    text = _TONE_MARKS.sub("", text).replace("'", " ").replace("\u2019", " ")
    text = _U_AFTER_JQXY.sub("u", _TONE_DIGIT.sub(" ", text))
    return " ".join(text.split())


def normalize_pinyin(pinyin: str, known: Container[str] = frozenset()) -> list[str]:
    """The syllables of one typed input, normalised by :func:`plain_letters`.

    Every piece must be a pinyin syllable (:func:`pinyin_syllables`) or a run of letters in
    ``known`` (an engine's own syllables; its special tokens such as ``"<unk>"`` are never
    syllables, so no engine writes characters for them). Raises ``TypeError`` for a
    non-``str`` and ``ValueError`` for an input without syllables or with a piece that is not
    one (naming the piece, and the split to type when it is unspaced pinyin: ``"nihao"`` ->
    ``"ni hao"``).
    """
    if not isinstance(pinyin, str):
        raise TypeError(
            f"pinyins: every input must be a str of pinyin such as 'ni hao', got "
            f"{type(pinyin).__name__} ({pinyin!r})"
        )
    syllables = plain_letters(pinyin).split()
    if not syllables:
        raise ValueError(f"pinyins: every input needs at least one syllable, got {pinyin!r}")
    vocab = pinyin_syllables()
    for piece in syllables:
        if piece not in vocab and not (piece in known and _LETTERS.fullmatch(piece)):
            raise ValueError(f"pinyins: {pinyin!r} holds {piece!r}, {_not_a_syllable(piece)}")
    return syllables


def _not_a_syllable(piece: str) -> str:
    """Why ``piece`` is refused and what to type instead."""
    split = _split_piece(piece, pinyin_syllables())
    if split is not None and len(split) > 1:
        return f"which is not one syllable: separate syllables with spaces ({' '.join(split)!r})"
    return (
        "which is not a pinyin syllable: write toneless pinyin syllables separated by spaces "
        "(tone marks and numbers are dropped, ü may be written v: 'nv hai')"
    )


def read_pinyins(pinyins: Sequence[str], known: Container[str] = frozenset()) -> list[list[str]]:
    """The door of every engine's ``candidates``: a list of typed inputs -> their syllables
    (:func:`normalize_pinyin` each). A single string is refused (a common slip:
    ``candidates("shi shi", 5)`` would decode each letter), as is anything but a list or
    tuple of strings."""
    if isinstance(pinyins, (str, bytes)) or not isinstance(pinyins, Sequence):
        raise TypeError(
            f"pinyins: expected a list of pinyin strings such as ['ni hao'], got "
            f"{type(pinyins).__name__} ({pinyins!r:.80})"
        )
    return [normalize_pinyin(p, known) for p in pinyins]


def split_syllables(text: str, syllables: frozenset[str] | None = None) -> list[str]:
    """Split unspaced pinyin into syllables by maximum matching with backtracking.

    At each position the longest syllable that leaves a splittable rest wins, so
    ``"woaibeijing"`` -> ``["wo", "ai", "bei", "jing"]``, ``"xian"`` -> ``["xian"]`` (one
    syllable, 先/现, not 西安), ``"fanguo"`` -> ``["fan", "guo"]`` (``fang`` would leave ``uo``).
    An apostrophe, a space or a tone number forces a boundary: ``"xi'an"`` -> ``["xi", "an"]``;
    the text is first normalised by :func:`plain_letters` (case, tone marks, ü). ``syllables``
    defaults to :func:`pinyin_syllables`. Raises ``ValueError`` when no split exists.
    """
    check_type("text", text, str, "a str of pinyin letters")
    vocab = pinyin_syllables() if syllables is None else syllables
    if not vocab or not all(isinstance(s, str) and s for s in vocab):
        raise ValueError("syllables must be a non-empty set of non-empty strings")
    out: list[str] = []
    for piece in plain_letters(text).split():
        found = _split_piece(piece, vocab)
        if found is None:
            raise ValueError(
                f"text must be toneless pinyin syllables (ü as v, apostrophes between "
                f"syllables allowed), got {text!r}: {piece!r} cannot be split"
            )
        out.extend(found)
    return out


def _split_piece(piece: str, vocab: frozenset[str]) -> list[str] | None:
    """The split of ``piece`` whose every syllable is the longest that leaves a splittable
    rest, or None. Filled from the end (no recursion, so any length works)."""
    longest = max(map(len, vocab))
    n = len(piece)
    step: list[int | None] = [None] * n + [n]  # step[i]: end of the first syllable of piece[i:]
    for i in range(n - 1, -1, -1):
        for j in range(min(n, i + longest), i, -1):
            if step[j] is not None and piece[i:j] in vocab:
                step[i] = j
                break
    if step[0] is None:
        return None
    out, i = [], 0
    while i < n:
        j = step[i]
        assert j is not None  # every position on the path has a split
        out.append(piece[i:j])
        i = j
    return out


def length_batches(lengths: Sequence[int], size: int) -> list[list[int]]:
    """Indices ``0 .. len(lengths) - 1`` grouped by equal length (shortest first), each group
    cut into batches of at most ``size`` in input order: how the engines run their inputs
    without padding. ``length_batches([2, 3, 2, 2], 2)`` -> ``[[0, 2], [3], [1]]``."""
    check_int("size", size, 1)
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, n in enumerate(lengths):
        by_length[n].append(i)
    return [
        indices[start : start + size]
        for _, indices in sorted(by_length.items())
        for start in range(0, len(indices), size)
    ]


def check_k(k: int, limit: int = MAX_CANDIDATES, name: str = "k") -> None:
    """``k`` (candidates asked of an engine) is a positive int, at most ``limit`` (the engine's
    ``max_candidates``, never above :data:`MAX_CANDIDATES`): an unbounded ``k`` would exhaust
    memory rather than fail. Every engine refuses with this one message."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{name}: expected a positive int, got {k!r}")
    limit = min(limit, MAX_CANDIDATES)
    if k > limit:
        raise ValueError(f"{name}: this system gives at most {limit} candidates, got {name}={k}")


def check_pairs(pairs: Sequence[tuple[str, str]]) -> None:
    """``pairs`` are clauses: a non-empty list of ``(pinyin, text)`` string pairs with one
    syllable per character (``TypeError`` / ``ValueError`` naming the first that is not)."""
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence) or not pairs:
        raise ValueError(
            f"pairs must be a non-empty list of (pinyin, text) clauses, got {pairs!r:.80}"
        )
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise TypeError(f"pairs[{i}] must be a (pinyin, text) pair, got {pair!r:.80}")
        if not all(isinstance(x, str) for x in pair):
            raise TypeError(f"pairs[{i}] must hold two str, got {pair!r:.80}")
        if not 1 <= len(pair[1]) == len(pair[0].split()):
            raise ValueError(
                f"pairs[{i}] must have one syllable per character (at least one), got {pair!r:.80}"
            )
