"""The hand-checked sample of pypinyin's readings: the shipped file parses and is what its
header says (the seeded draw from the sentence split), the counts agree with a brute-force
count over the raw file, a faulty row is refused with its line named, and a change of
pypinyin's readings is detected."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lecturekit.data.reading_check import (
    READING_CHECK_FILE,
    CheckedReading,
    ReadingNoise,
    checked_readings,
    reading_noise,
    stale_readings,
)
from lecturekit.data.sentences import split_sentences

SHIPPED = Path(__file__).resolve().parents[1] / "lecturekit" / "data" / READING_CHECK_FILE
HEADER = "# a comment\nsource\tline\ttext\tpypinyin\tchecked\n"


def _raw_rows() -> list[list[str]]:
    """The shipped file's data rows, split by hand (no lecturekit code involved)."""
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()
    body = [line for line in lines if line and not line.startswith("#")]
    assert body[0].split("\t") == ["source", "line", "text", "pypinyin", "checked"]
    return [line.split("\t") for line in body[1:]]


def test_the_shipped_file_parses_in_the_order_drawn() -> None:
    rows = checked_readings()
    assert len(rows) == 400
    assert [r.source for r in rows[:300]] == ["rmrb"] * 300
    assert {r.source for r in rows[300:]} <= {"pos", "neg"}
    assert [r.domain for r in rows] == ["test"] * 300 + ["ood"] * 100
    assert rows == checked_readings(SHIPPED)  # the packaged copy is the file in the tree
    raw = _raw_rows()
    assert [(r.source, str(r.line), r.text, r.pypinyin, r.checked) for r in rows] == [
        tuple(fields) for fields in raw
    ]


def test_wrong_syllables_and_noise_match_a_brute_force_count() -> None:
    rows = checked_readings()
    by_domain: dict[str, list[int]] = {}
    for r, (source, _, text, read, right) in zip(rows, _raw_rows(), strict=True):
        brute = [
            (i, text[i], a, b)
            for i, (a, b) in enumerate(zip(read.split(), right.split(), strict=True))
            if a != b
        ]
        assert r.wrong_syllables == brute
        counts = by_domain.setdefault("test" if source == "rmrb" else "ood", [0, 0, 0, 0])
        counts[0] += 1
        counts[1] += read != right
        counts[2] += len(read.split())
        counts[3] += len(brute)
    assert reading_noise() == {d: ReadingNoise(*c) for d, c in by_domain.items()}
    # the sample does hold errors in both domains (a file of copies would count none)
    assert all(noise.wrong_syllables > 0 for noise in reading_noise().values())


def test_wrong_syllables_and_noise_on_hand_written_rows() -> None:
    bank = CheckedReading("银行行长", "yin xing xing zhang", "yin hang hang zhang", "rmrb", 3)
    fine = CheckedReading("很好", "hen hao", "hen hao", "pos", 0)
    assert bank.wrong_syllables == [(1, "行", "xing", "hang"), (2, "行", "xing", "hang")]
    assert fine.wrong_syllables == []
    assert reading_noise([bank, fine, fine]) == {
        "test": ReadingNoise(clauses=1, wrong_clauses=1, syllables=4, wrong_syllables=2),
        "ood": ReadingNoise(clauses=2, wrong_clauses=0, syllables=4, wrong_syllables=0),
    }


@pytest.mark.slow
def test_every_row_is_the_seeded_draw_from_its_split() -> None:
    """The header's recipe reproduces the rows: same clauses, same order, same readings."""
    split = split_sentences()
    drawn = random.Random(0).sample(split.test, 300) + random.Random(1).sample(split.ood, 100)
    rows = checked_readings()
    assert [(r.text, r.pypinyin, r.source, r.line) for r in rows] == [tuple(c) for c in drawn]
    test_clauses = {(c.text, c.source, c.line) for c in split.test}
    assert all((r.text, r.source, r.line) in test_clauses for r in rows[:300])


def test_the_installed_pypinyin_still_gives_the_checked_readings() -> None:
    """Fails when a pypinyin release reads a sampled clause differently: the counts would
    then describe readings the data no longer have (recheck the changed rows)."""
    assert stale_readings() == []


def test_stale_readings_reports_a_changed_reading() -> None:
    rows = checked_readings()
    changed = rows[0]._replace(pypinyin=" ".join(["a"] * len(rows[0].text)))
    assert stale_readings([changed, rows[1]]) == [(changed, rows[0].pypinyin)]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("rmrb\t5\t银行\tyin hang hang\tyin hang", r"line 3: pypinyin must have one syllable"),
        ("rmrb\t5\t银行\tyin hang\tyin", r"line 3: checked must have one syllable"),
        ("rmrb\t5\t银行\tyin2 hang2\tyin hang", r"line 3: pypinyin must be toneless .* 'yin2'"),
        ("rmrb\t5\t银行\tyin hang\tyín hang", r"line 3: checked must be toneless .* 'yín'"),
        ("rmrb\t5\t银行\tyin  hang\tyin hang", r"line 3: pypinyin must have one syllable"),
        ("web\t5\t银行\tyin hang\tyin hang", r"line 3: source must be one of"),
        ("rmrb\tfive\t银行\tyin hang\tyin hang", r"line 3: line must be a 0-based"),
        ("rmrb\t5\t银行\tyin hang", r"line 3 must have 5 tab-separated fields"),
    ],
)
def test_a_faulty_row_is_refused_with_its_line_named(
    tmp_path: Path, row: str, message: str
) -> None:
    path = tmp_path / "check.tsv"
    path.write_text(HEADER + row + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        checked_readings(path)


def test_a_corrupted_row_of_the_shipped_file_is_refused(tmp_path: Path) -> None:
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()
    number = next(i for i, line in enumerate(lines) if line.startswith("rmrb")) + 10
    fields = lines[number].split("\t")
    fields[4] += " de"  # one syllable too many
    lines[number] = "\t".join(fields)
    path = tmp_path / READING_CHECK_FILE
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"line {number + 1}: checked must have one syllable"):
        checked_readings(path)


def test_a_missing_header_or_an_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "check.tsv"
    path.write_text("rmrb\t5\t银行\tyin hang\tyin hang\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1 must be the header"):
        checked_readings(path)
    path.write_text(HEADER, encoding="utf-8")
    with pytest.raises(ValueError, match="at least one checked row"):
        checked_readings(path)
