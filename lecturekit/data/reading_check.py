"""A checked sample of pypinyin's readings: how noisy the input of the input method is.

The sentence-level input method reads pypinyin's reading of a clause
(:mod:`lecturekit.data.sentences`). Where pypinyin picks the wrong reading of a polyphone
(长 ``zhang`` where the clause means ``chang``, the adverbial particle 地 read ``di``
instead of ``de``), the input is noise. ``pinyin_reading_check.tsv``, shipped next to this
module, measures how much: 300 clauses drawn from the People's Daily test clauses
(``random.Random(0).sample(split.test, 300)``) and 100 from the review clauses
(``random.Random(1).sample(split.ood, 100)``), ``split = split_sentences()``, each judged by
reading it syllable by syllable, with the corrected reading beside pypinyin's.

:func:`checked_readings` reads and verifies the file; :func:`reading_noise` counts the wrong
clauses and syllables per domain; :func:`stale_readings` tells whether the installed pypinyin
still gives the readings that were checked (another version may read some clauses
differently, and then the counts describe the old readings, not the data).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import NamedTuple

from lecturekit.data.pinyin import word_pinyin
from lecturekit.data.sentences import SOURCES

__all__ = [
    "READING_CHECK_FILE",
    "CheckedReading",
    "ReadingNoise",
    "checked_readings",
    "reading_noise",
    "stale_readings",
]

READING_CHECK_FILE = "pinyin_reading_check.tsv"
_COLUMNS = ("source", "line", "text", "pypinyin", "checked")
_SYLLABLE = re.compile(r"[a-z]+")  # toneless, ü written v: lower-case letters only


class CheckedReading(NamedTuple):
    """One checked clause: ``text``, ``pypinyin`` (the reading the data use), ``checked``
    (the correct reading, equal to ``pypinyin`` where every syllable is right), and where it
    comes from: ``source`` (one of ``SOURCES``) and ``line`` (0-based line of its file)."""

    text: str
    pypinyin: str
    checked: str
    source: str
    line: int

    @property
    def domain(self) -> str:
        """``"test"`` for a People's Daily clause, ``"ood"`` for a review clause (the names
        of the :class:`~lecturekit.data.sentences.SentenceSplit` fields it was drawn from)."""
        return "test" if self.source == "rmrb" else "ood"

    @property
    def wrong_syllables(self) -> list[tuple[int, str, str, str]]:
        """Every syllable pypinyin got wrong: ``(position, character, pypinyin's, correct)``."""
        pairs = zip(self.pypinyin.split(), self.checked.split(), strict=True)
        return [
            (i, self.text[i], read, right) for i, (read, right) in enumerate(pairs) if read != right
        ]


class ReadingNoise(NamedTuple):
    """Counts over one domain: ``clauses`` and ``wrong_clauses`` (with at least one wrong
    syllable), ``syllables`` and ``wrong_syllables``."""

    clauses: int
    wrong_clauses: int
    syllables: int
    wrong_syllables: int


def _check_row(where: str, fields: list[str]) -> CheckedReading:
    """The row as a :class:`CheckedReading`, or ``ValueError`` naming ``where`` and the fault."""
    if len(fields) != len(_COLUMNS):
        raise ValueError(f"{where} must have {len(_COLUMNS)} tab-separated fields, got {fields!r}")
    source, line, text, read, checked = fields
    if source not in SOURCES:
        raise ValueError(f"{where}: source must be one of {SOURCES}, got {source!r}")
    if not re.fullmatch(r"[0-9]+", line):
        raise ValueError(f"{where}: line must be a 0-based line number, got {line!r}")
    for name, reading in (("pypinyin", read), ("checked", checked)):
        syllables = reading.split(" ")
        if len(syllables) != len(text):
            raise ValueError(
                f"{where}: {name} must have one syllable per character of {text!r} "
                f"({len(text)}), got {len(syllables)}: {reading!r}"
            )
        bad = [s for s in syllables if not _SYLLABLE.fullmatch(s)]
        if bad:
            raise ValueError(
                f"{where}: {name} must be toneless pinyin (letters a-z, ü written v), "
                f"got {bad[0]!r} in {reading!r}"
            )
    return CheckedReading(text, read, checked, source, int(line))


def checked_readings(path: str | os.PathLike | None = None) -> list[CheckedReading]:
    """The 400 checked clauses of ``pinyin_reading_check.tsv``, in the order drawn (300
    People's Daily test clauses, then 100 review clauses).

    ``path`` defaults to the file shipped with lecturekit. Lines starting with ``#`` are
    comments; the first other line must be the column header. Every row is verified (five
    fields, a known source, one pinyin syllable of letters per character in both readings):
    a faulty row raises ``ValueError`` naming its line of the file and the fix.
    """
    if path is None:
        text = resources.files("lecturekit.data").joinpath(READING_CHECK_FILE).read_text("utf-8")
        name = READING_CHECK_FILE
    else:
        text, name = Path(path).read_text(encoding="utf-8"), Path(path).name
    rows: list[CheckedReading] = []
    header_seen = False
    for number, raw in enumerate(text.splitlines(), 1):
        if raw.startswith("#") or not raw.strip():
            continue
        fields = raw.split("\t")
        if not header_seen:
            if tuple(fields) != _COLUMNS:
                raise ValueError(
                    f"{name} line {number} must be the header {_COLUMNS}, got {fields}"
                )
            header_seen = True
            continue
        rows.append(_check_row(f"{name} line {number}", fields))
    if not rows:
        raise ValueError(f"{name} must hold at least one checked row, got none")
    return rows


def reading_noise(readings: Sequence[CheckedReading] | None = None) -> dict[str, ReadingNoise]:
    """How often pypinyin's reading is wrong, per domain: ``{"test": ..., "ood": ...}``
    (People's Daily and reviews; a domain with no row is left out).

    ``readings`` defaults to :func:`checked_readings`. A syllable is wrong where ``pypinyin``
    and ``checked`` differ; a clause is wrong where at least one syllable is.
    """
    readings = checked_readings() if readings is None else readings
    counts: dict[str, list[int]] = {}
    for r in readings:
        wrong = len(r.wrong_syllables)
        c = counts.setdefault(r.domain, [0, 0, 0, 0])
        c[0] += 1
        c[1] += wrong > 0
        c[2] += len(r.text)
        c[3] += wrong
    return {domain: ReadingNoise(*c) for domain, c in counts.items()}


def stale_readings(
    readings: Sequence[CheckedReading] | None = None,
) -> list[tuple[CheckedReading, str]]:
    """Rows whose recorded ``pypinyin`` is no longer what the installed pypinyin reads:
    ``(row, current reading)`` pairs; empty when the readings that were checked are still the
    data's readings.

    ``readings`` defaults to :func:`checked_readings`. The reading is computed as the data do
    (:func:`lecturekit.data.pinyin.word_pinyin` on the whole clause).
    """
    readings = checked_readings() if readings is None else readings
    out = []
    for r in readings:
        now = word_pinyin(r.text)
        if now != r.pypinyin:
            out.append((r, now))
    return out
