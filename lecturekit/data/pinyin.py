"""Real data for the word-level task ``make_task("pinyin")``: toneless pinyin -> Chinese words.

(The capstone chapter types whole sentences, :mod:`lecturekit.data.sentences`, which reads
them with :func:`word_pinyin` and caches under :func:`cache_dir`.)

The lecture's decoder example is a speech recogniser writing 机 器 学 习 one character at a
time (slides p22-p26). Here the "sound" is toneless pinyin, ``"ji qi xue xi"``, and the model
writes the characters. Nothing is downloaded; the data come from two installed packages:

- **Words and frequencies**: the dictionary that ships with ``jieba`` (``jieba/dict.txt``,
  MIT licence; about 349k entries ``word frequency part-of-speech``). We keep the words of 1 to
  4 characters that are all simplified Chinese characters (CJK ideographs encodable in GB2312).
- **Pinyin**: ``pypinyin`` (MIT licence; its data come from the pinyin-data and
  phrase-pinyin-data projects, also MIT). It reads whole phrases, so heteronyms get the
  reading of their word: 银行 -> ``yin hang``, 行走 -> ``xing zou``. Tones are dropped; ü is
  written ``v`` as pypinyin does (绿 -> ``lv``, 略 -> ``lve``, but 学 -> ``xue``).

``load_lexicon()`` builds the list of :class:`Word` once (about half a minute) and caches it
as a tab-separated file (``$LECTUREKIT_CACHE``, else ``$XDG_CACHE_HOME/lecturekit``, else
``~/.cache/lecturekit``), keyed by the package versions; the same versions always give the same
file. ``split_lexicon()`` holds out words (never seen in training) with a fixed seed;
``make_task()`` turns the split into a :class:`lecturekit.data.TaskData` for ``fit``.

Single characters are never held out: a character's own reading is what every input method
knows, and holding out 是 would only test whether the model can guess an unseen *label*.
Held-out words have 2 to 4 characters, so the test asks the model to compose.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import random
import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from lecturekit._common import check_int, warn_once
from lecturekit.data.vocab import CharVocab, WordVocab

__all__ = [
    "Word",
    "PinyinSplit",
    "word_pinyin",
    "load_lexicon",
    "split_lexicon",
    "char_vocab",
    "syllable_vocab",
    "training_pairs",
    "cache_dir",
]

LEXICON_FORMAT = 2  # bump when the filtering or the file layout changes
MAX_WORD_LEN = 4
_HANZI = re.compile(r"[\u4e00-\u9fff]+")
_SYLLABLE = re.compile(r"[a-z]+")


class Word(NamedTuple):
    """One dictionary word: ``text`` (机器), toneless ``pinyin`` (``"ji qi"``), ``freq``
    (jieba's count)."""

    text: str
    pinyin: str
    freq: int

    @property
    def syllables(self) -> list[str]:
        return self.pinyin.split()


def _require(module: str, pip_name: str):
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"the pinyin data need the package {pip_name!r}, which is not installed: "
            f"`pip install {pip_name}` (it is a dependency of lecturekit, so "
            f"`pip install lecturekit` also brings it)"
        ) from err


def word_pinyin(text: str) -> str:
    """Toneless pinyin of ``text``, one syllable per character, separated by spaces.

    Phrase-aware (pypinyin): ``word_pinyin("银行") == "yin hang"``, ``word_pinyin("行走") ==
    "xing zou"``. ü is written ``v`` (``"lv"``, ``"nve"``), as pypinyin's NORMAL style does.
    """
    if not isinstance(text, str) or not _HANZI.fullmatch(text):
        raise ValueError(f"text: expected a non-empty string of Chinese characters, got {text!r}")
    pypinyin = _require("pypinyin", "pypinyin")
    syllables = pypinyin.lazy_pinyin(text, style=pypinyin.Style.NORMAL)
    return " ".join(syllables)


def cache_dir() -> Path:
    """Where derived data are cached: ``$LECTUREKIT_CACHE``, else ``$XDG_CACHE_HOME/lecturekit``,
    else ``~/.cache/lecturekit``."""
    if os.environ.get("LECTUREKIT_CACHE"):
        return Path(os.environ["LECTUREKIT_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "lecturekit"


def _cache_folder(directory: str | os.PathLike | None) -> Path:
    """``directory`` (default :func:`cache_dir`) as a folder that can hold the cache, checked
    before a long build: a file where the folder (or one above it) should be is refused with a
    ``ValueError`` naming the setting that chose it, so no build is lost to it; so are a
    ``directory`` that is not a path (``TypeError``), an empty one and one with a NUL byte."""
    if directory is not None:
        if isinstance(directory, bytes) or not isinstance(directory, (str, os.PathLike)):
            raise TypeError(
                f"directory must be a str or pathlib.Path naming a folder, got "
                f"{type(directory).__name__} ({directory!r:.80})"
            )
        if not str(directory) or "\0" in str(directory):
            raise ValueError(f"directory must name a folder, got {str(directory)!r:.80}")
        folder, setting = Path(directory), "directory"
    else:
        folder = cache_dir()
        setting = "LECTUREKIT_CACHE" if os.environ.get("LECTUREKIT_CACHE") else "the cache folder"
    for parent in (folder, *folder.parents):
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(
                    f"{setting}: the cache folder {str(folder)!r} cannot be used: "
                    f"{str(parent)!r} is a file, not a folder; name a folder (or move the file)"
                )
            break
    return folder


def _cached(path: Path) -> bool:
    """Whether the cache file ``path`` exists (False: build it). Something else at its place
    (a folder, a device) is refused with a ``ValueError`` before the build, which could not
    replace it."""
    if path.exists() and not path.is_file():
        raise ValueError(
            f"the cache file {str(path)!r} is not a file (a folder?): remove it, or set "
            f"LECTUREKIT_CACHE (or pass directory=) to another folder"
        )
    return path.exists()


def _is_simplified(text: str) -> bool:
    try:
        text.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return True


def _jieba_entries() -> list[tuple[str, int]]:
    jieba = _require("jieba", "jieba")
    entries = []
    with jieba.get_dict_file() as f:
        for raw in f:
            fields = raw.decode("utf-8").split()
            if len(fields) >= 2 and fields[1].isdigit():
                entries.append((fields[0], int(fields[1])))
    return entries


def _build_lexicon() -> list[Word]:
    words = []
    for text, freq in _jieba_entries():
        if len(text) > MAX_WORD_LEN or not _HANZI.fullmatch(text) or not _is_simplified(text):
            continue
        pinyin = word_pinyin(text)
        syllables = pinyin.split()
        # one syllable per character, each plain a-z (drops the odd reading pypinyin cannot give)
        if len(syllables) == len(text) and all(_SYLLABLE.fullmatch(s) for s in syllables):
            words.append(Word(text, pinyin, freq))
    return sorted(words, key=lambda w: w.text)


def _cache_path(directory: Path) -> Path:
    versions = []
    for module in ("jieba", "pypinyin"):
        versions.append(f"{module}{getattr(_require(module, module), '__version__', 'unknown')}")
    return directory / f"pinyin-lexicon-v{LEXICON_FORMAT}-{'-'.join(versions)}.tsv"


def load_lexicon(directory: str | os.PathLike | None = None) -> list[Word]:
    """jieba's words of 1-4 simplified characters with frequency and pinyin, sorted by text.

    Built from the installed jieba and pypinyin on first use (about 30 s) and cached in
    ``directory`` (default :func:`cache_dir`); later calls read the cache (under a second).
    The cache file's first line holds the number of words and the SHA-256 of the rest, so a
    damaged cache (empty, cut short, edited) is noticed, rebuilt and rewritten, never read as
    a smaller lexicon. Raises ``ImportError`` naming the package when jieba or pypinyin is
    missing.
    """
    path = _cache_path(_cache_folder(directory))
    if _cached(path):
        words = _read_cache(path)
        if words is not None:
            return words
        warn_once(f"the cached lexicon {str(path)!r} is damaged; rebuilding it (about 30 s)")
    words = _build_lexicon()
    _write_cache(path, words)
    return words


def _header(body: bytes, count: int) -> bytes:
    digest = hashlib.sha256(body).hexdigest()
    return f"# lecturekit pinyin lexicon: {count} words, sha256 {digest}\n".encode()


def _read_cache(path: Path) -> list[Word] | None:
    """The words in the cache file, or None when it is damaged (its header does not match)."""
    data = path.read_bytes()
    header, _, body = data.partition(b"\n")
    lines = body.decode("utf-8", errors="replace").splitlines()
    if not lines or header + b"\n" != _header(body, len(lines)):
        return None
    words = []
    for line in lines:
        fields = line.split("\t")
        if len(fields) != 3 or not fields[2].isdigit():
            return None
        words.append(Word(fields[0], fields[1], int(fields[2])))
    return words


def _write_cache(path: Path, words: Sequence[Word]) -> None:
    # atomic: two processes building the cache at once both end with a complete file
    body = "".join(f"{w.text}\t{w.pinyin}\t{w.freq}\n" for w in words).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_header(body, len(words)) + body)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is plain public data
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# ---------------------------------------------------------------------------------------------
# Split
# ---------------------------------------------------------------------------------------------


@dataclass
class PinyinSplit:
    """Words for training, validation and test; every test and valid word has 2-4 characters
    and is absent from ``train`` (all single characters are in ``train``)."""

    train: list[Word]
    valid: list[Word]
    test: list[Word]
    seed: int

    def test_by_frequency(self, n: int, seed: int = 0) -> list[Word]:
        """``n`` held-out (test) words drawn with replacement in proportion to their
        frequency: the words a person typing meets (a frequent word can come several times)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n: expected a positive int, got {n!r}")
        # this seed string is the one the task's test pairs have always been drawn with
        rng = random.Random(f"pinyin-view:freq:{seed}")
        return rng.choices(self.test, weights=[w.freq for w in self.test], k=n)


def split_lexicon(
    words: Sequence[Word] | None = None,
    seed: int = 0,
    test_fraction: float = 0.05,
    valid_fraction: float = 0.01,
) -> PinyinSplit:
    """Hold out ``test_fraction`` and ``valid_fraction`` of the multi-character words.

    Deterministic: the words are sorted by text and shuffled by ``random.Random`` seeded with
    ``seed``. ``words`` defaults to :func:`load_lexicon()`.
    """
    if not (0 < test_fraction < 1 and 0 <= valid_fraction < 1 - test_fraction):
        raise ValueError(
            f"test_fraction, valid_fraction: expected 0 < test < 1 and 0 <= valid < 1 - test, "
            f"got {test_fraction}, {valid_fraction}"
        )
    words = load_lexicon() if words is None else list(words)
    singles = [w for w in words if len(w.text) == 1]
    multi = sorted((w for w in words if len(w.text) > 1), key=lambda w: w.text)
    random.Random(f"pinyin-split:{seed}").shuffle(multi)
    n_test, n_valid = round(len(multi) * test_fraction), round(len(multi) * valid_fraction)
    test, valid = multi[:n_test], multi[n_test : n_test + n_valid]
    train = sorted(singles + multi[n_test + n_valid :], key=lambda w: w.text)
    return PinyinSplit(train=train, valid=valid, test=test, seed=seed)


def char_vocab(words: Sequence[Word], size: int) -> CharVocab:
    """The ``size`` characters with the largest total frequency in ``words`` (ties: by
    character), in that order: the output vocabulary of the model."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size: expected a positive int, got {size!r}")
    mass: Counter[str] = Counter()
    for w in words:
        for c in w.text:
            mass[c] += w.freq
    ranked = sorted(mass, key=lambda c: (-mass[c], c))
    return CharVocab(ranked[:size])


def syllable_vocab(words: Sequence[Word]) -> WordVocab:
    """Every syllable of ``words``, sorted: the input vocabulary (one token per syllable)."""
    return WordVocab(sorted({s for w in words for s in w.syllables}))


def training_pairs(
    words: Sequence[Word],
    n: int,
    alpha: float = 0.5,
    seed: int = 0,
    vocab: CharVocab | None = None,
) -> list[tuple[str, str]]:
    """``n`` (pinyin, word) pairs drawn with replacement, word ``w`` with probability
    proportional to ``w.freq ** alpha``.

    ``alpha = 1`` follows the frequencies (the head dominates: 了 alone is 1.5% of all text),
    ``alpha = 0`` ignores them; anything in between keeps the order of homophones (a more
    frequent word is still drawn more often) while the long tail gets a larger share than in
    text. Words with a character outside ``vocab`` are skipped.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a positive int, got {n!r}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha: expected a value in [0, 1], got {alpha!r}")
    pool = [w for w in words if vocab is None or all(c in vocab for c in w.text)]
    if not pool:
        raise ValueError("words: no word can be written with the vocabulary")
    rng = random.Random(f"pinyin-train:{seed}")
    drawn = rng.choices(pool, weights=[w.freq**alpha for w in pool], k=n)
    return [(w.pinyin, w.text) for w in drawn]


def make_task(
    n_train: int | None = None,
    n_valid: int | None = None,
    n_test: int | None = None,
    seed: int = 0,
    vocab_size: int = 4000,
    alpha: float = 0.5,
):
    """The pinyin task as a :class:`lecturekit.data.TaskData` (``make_task("pinyin", ...)``).

    ``train``: ``n_train`` pairs from :func:`training_pairs` with ``alpha`` (default 600 000
    pairs, ``alpha`` 0.5: by the square root of the frequency); ``valid``:
    ``n_valid`` held-out valid words drawn by frequency (default 500); ``test``: the first
    ``n_test`` words of :meth:`PinyinSplit.test_by_frequency` (default 1000). Pairs whose word has a character
    outside the output vocabulary (the ``vocab_size`` most frequent training characters) are
    left out of ``valid`` and ``test``.
    """
    from lecturekit.data.tasks import MAX_EXAMPLES, TaskData

    n_train = 600_000 if n_train is None else n_train
    n_valid = 500 if n_valid is None else n_valid
    n_test = 1000 if n_test is None else n_test
    # checked before anything is loaded or drawn, with the toy tasks' bound on the total
    for name, value in (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test)):
        check_int(name, value, 1, MAX_EXAMPLES)
    if n_train + n_valid + n_test > MAX_EXAMPLES:
        raise ValueError(
            f"n_train + n_valid + n_test must be at most {MAX_EXAMPLES:,} (what make_task "
            f"generates in one call), got {n_train + n_valid + n_test:,}; ask for fewer examples"
        )
    split = split_lexicon(seed=seed)
    src_vocab = syllable_vocab(split.train + split.valid + split.test)
    tgt_vocab = char_vocab(split.train, vocab_size)

    def writable(words: Sequence[Word]) -> list[tuple[str, str]]:
        return [(w.pinyin, w.text) for w in words if all(c in tgt_vocab for c in w.text)]

    valid_words = random.Random(f"pinyin-valid:{seed}").choices(
        split.valid, weights=[w.freq for w in split.valid], k=n_valid
    )
    return TaskData(
        name="pinyin",
        train=training_pairs(split.train, n_train, alpha, seed, tgt_vocab),
        valid=writable(valid_words),
        test=writable(split.test_by_frequency(n_test, seed)),
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
        seed=seed,
    )
