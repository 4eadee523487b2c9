"""Toy sequence-to-sequence tasks, generated offline from a seed.

Every task maps a source string to a target string by a fixed rule, so a small Transformer can
learn it to (nearly) 100% held-out exact match in under a minute on a laptop CPU:

- ``copy``: ``"cabd"`` -> ``"cabd"``; ``reverse``: ``"cabd"`` -> ``"dbac"`` (for tests and demos).
- ``number``: an Arabic number below one million -> its Chinese reading,
  ``"20481"`` -> ``"两万零四百八十一"`` (output length varies with the zeros).
- ``date``: a date written in one of several English or Chinese forms -> ISO ``YYYY-MM-DD``,
  ``"5 Mar 2021"`` -> ``"2021-03-05"`` (the day, month and year move around).
- ``translation``: an English-like toy language (SVO, adjective before noun) -> a Chinese-like
  one (time word first, SOV, adjective after noun), word level, so cross-attention is not
  diagonal: ``"this big dog chases the cat today"`` -> ``"今天 这 狗 大 猫 追"``.

``make_task(name, n_train, n_valid, n_test, seed)`` returns a ``TaskData`` with the three
splits, the vocabularies and encode/decode helpers. Sources are unique across all splits, so
no test example is ever seen during training.
"""

from __future__ import annotations

import datetime
import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lecturekit.data.vocab import CharVocab, Vocab, WordVocab

__all__ = ["TASKS", "TaskSpec", "TaskData", "list_tasks", "make_task", "number_to_chinese"]

if TYPE_CHECKING:  # pragma: no cover
    from torch.utils.data import DataLoader

Pair = tuple[str, str]

# ---------------------------------------------------------------------------------------------
# Number reading: Arabic numerals -> Chinese
# ---------------------------------------------------------------------------------------------

CHINESE_DIGITS = "零一二三四五六七八九"


def _read_below_10000(n: int) -> str:
    """Read ``0 < n < 10000``: digits with 千/百/十, one 零 for each run of inner zeros."""
    out = []
    started = False
    pending_zero = False
    for place, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        digit = n // place % 10
        if digit == 0:
            # a zero only counts if a non-zero digit comes later: 1010 -> 一千零一十
            pending_zero = started
            continue
        if pending_zero:
            out.append("零")
            pending_zero = False
        # colloquial 两 before 千 (两千), the formal 二 elsewhere (二百, 二十, 二)
        out.append(("两" if digit == 2 and unit == "千" else CHINESE_DIGITS[digit]) + unit)
        started = True
    return "".join(out)


def number_to_chinese(n: int) -> str:
    """Chinese reading of a non-negative integer below 10^8.

    Rules (standard Mandarin, as a native speaker reads a number aloud):

    - groups of four digits: ``万`` separates the ten-thousands, ``20481`` -> 两万零四百八十一;
    - inner runs of zeros are read as one ``零``, trailing zeros are silent:
      ``1010`` -> 一千零一十, ``1100`` -> 一千一百; a 零 also appears when the part after 万
      is below 1000: ``100001`` -> 十万零一;
    - a number that starts with 1x reads 十x, not 一十x: ``10`` -> 十, ``100000`` -> 十万,
      but ``110`` -> 一百一十 inside a number;
    - 2 reads 两 before 千 and as a lone 两万: ``2000`` -> 两千, ``20000`` -> 两万,
      otherwise 二: ``200`` -> 二百, ``22`` -> 二十二, ``220000`` -> 二十二万.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if not 0 <= n < 10**8:
        raise ValueError(f"n must be in [0, 10^8), got {n}")
    return _reading(n)


@functools.cache
def _reading(n: int) -> str:
    # cached: drawing distinct examples re-draws the same small numbers many times
    if n == 0:
        return "零"
    high, low = divmod(n, 10_000)
    parts = []
    if high:
        parts.append("两" if high == 2 else _read_below_10000(high))
        parts.append("万")
        if 0 < low < 1000:
            parts.append("零")
    if low:
        parts.append(_read_below_10000(low))
    text = "".join(parts)
    return text[1:] if text.startswith("一十") else text


def _sample_number(rng: random.Random, max_digits: int) -> Pair:
    # Uniform over the number of digits (so short numbers are not drowned out), and in 30% of
    # cases zero out digits at random: inner zeros are where the reading rules get interesting.
    n_digits = rng.randint(1, max_digits)
    digits = [rng.randint(1, 9) if n_digits > 1 else rng.randint(0, 9)]
    sparse = rng.random() < 0.3
    for _ in range(n_digits - 1):
        digits.append(0 if sparse and rng.random() < 0.5 else rng.randint(0, 9))
    n = int("".join(map(str, digits)))
    return str(n), _reading(n)


# ---------------------------------------------------------------------------------------------
# Date normalisation
# ---------------------------------------------------------------------------------------------

MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip

DATE_FORMATS: dict[str, Callable[[datetime.date], str]] = {
    "long_us": lambda d: f"{MONTH_NAMES[d.month - 1]} {d.day}, {d.year}",  # March 5, 2021
    "short_us": lambda d: f"{MONTH_NAMES[d.month - 1][:3]} {d.day}, {d.year}",  # Mar 5, 2021
    "long_uk": lambda d: f"{d.day} {MONTH_NAMES[d.month - 1]} {d.year}",  # 5 March 2021
    "short_uk": lambda d: f"{d.day} {MONTH_NAMES[d.month - 1][:3]} {d.year}",  # 5 Mar 2021
    "chinese": lambda d: f"{d.year}年{d.month}月{d.day}日",  # 2021年3月5日
    "us_numeric": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",  # 03/05/2021 (month first)
    "eu_numeric": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",  # 05.03.2021 (day first)
}
"""Surface forms of a date. ``us_numeric`` and ``eu_numeric`` differ only in the separator and
the order of day and month, so the model has to use the separator to decide the order."""

_DATE_FORMAT_NAMES = sorted(DATE_FORMATS)
DATE_RANGE = (datetime.date(1970, 1, 1), datetime.date(2039, 12, 31))


def _sample_date(rng: random.Random) -> Pair:
    first, last = DATE_RANGE
    day = first + datetime.timedelta(days=rng.randint(0, (last - first).days))
    form = rng.choice(_DATE_FORMAT_NAMES)
    return DATE_FORMATS[form](day), day.isoformat()


# ---------------------------------------------------------------------------------------------
# Toy translation: English-like -> Chinese-like
# ---------------------------------------------------------------------------------------------

NOUNS = {
    "dog": "狗", "cat": "猫", "bird": "鸟", "fish": "鱼", "horse": "马",
    "teacher": "老师", "student": "学生", "child": "孩子", "farmer": "农民", "doctor": "医生",
}  # fmt: skip
ADJECTIVES = {
    "big": "大", "small": "小", "red": "红", "black": "黑",
    "white": "白", "old": "老", "young": "年轻", "happy": "快乐",
}  # fmt: skip
# third-person singular form, base form (after "does not"), Chinese
VERBS = [
    ("sees", "see", "看见"), ("chases", "chase", "追"), ("likes", "like", "喜欢"),
    ("helps", "help", "帮助"), ("finds", "find", "找到"), ("follows", "follow", "跟着"),
    ("bites", "bite", "咬"), ("feeds", "feed", "喂"),
]  # fmt: skip
# "the" has no Chinese counterpart and is dropped; "this"/"that" stay before the noun
DETERMINERS = {"the": None, "this": "这", "that": "那"}
TIME_WORDS = {"today": "今天", "every day": "每天", "at night": "晚上"}


_SORTED_DETERMINERS = sorted(DETERMINERS)
_SORTED_ADJECTIVES = sorted(ADJECTIVES)
_SORTED_NOUNS = sorted(NOUNS)
_SORTED_TIME_WORDS = sorted(TIME_WORDS)


def _sample_noun_phrase(rng: random.Random) -> tuple[list[str], list[str]]:
    det = rng.choice(_SORTED_DETERMINERS)
    adjectives = rng.sample(_SORTED_ADJECTIVES, rng.choice((0, 0, 1, 1, 2)))
    noun = rng.choice(_SORTED_NOUNS)
    english = [det, *adjectives, noun]
    chinese = [DETERMINERS[det]] if DETERMINERS[det] else []
    chinese += [NOUNS[noun], *(ADJECTIVES[a] for a in adjectives)]  # adjectives after the noun
    return english, chinese


def _sample_sentence(rng: random.Random) -> Pair:
    subj_en, subj_zh = _sample_noun_phrase(rng)
    obj_en, obj_zh = _sample_noun_phrase(rng)
    third_person, base, verb_zh = rng.choice(VERBS)
    negated = rng.random() < 0.25
    time = rng.choice(_SORTED_TIME_WORDS) if rng.random() < 0.4 else None
    verb_en = ["does", "not", base] if negated else [third_person]
    verb_zh_words = ["不", verb_zh] if negated else [verb_zh]
    english = [*subj_en, *verb_en, *obj_en] + (time.split() if time else [])
    # Chinese-like order: time word first, then subject - object - verb (SOV)
    chinese = ([TIME_WORDS[time]] if time else []) + [*subj_zh, *obj_zh, *verb_zh_words]
    return " ".join(english), " ".join(chinese)


def _translation_vocabs() -> tuple[list[str], list[str]]:
    english = [*NOUNS, *ADJECTIVES, *(v[0] for v in VERBS), *(v[1] for v in VERBS)]
    english += [*DETERMINERS, "does", "not", *(w for t in TIME_WORDS for w in t.split())]
    chinese = [*NOUNS.values(), *ADJECTIVES.values(), *(v[2] for v in VERBS), "不"]
    chinese += [z for z in DETERMINERS.values() if z] + list(TIME_WORDS.values())
    return english, chinese


# ---------------------------------------------------------------------------------------------
# Task registry and TaskData
# ---------------------------------------------------------------------------------------------

COPY_ALPHABET = "abcdefghij"


def _sample_letters(rng: random.Random, max_len: int, reverse: bool) -> Pair:
    text = "".join(rng.choice(COPY_ALPHABET) for _ in range(rng.randint(1, max_len)))
    return text, text[::-1] if reverse else text


@dataclass(frozen=True)
class TaskSpec:
    """How to generate one task: a sampler of (source, target) pairs and the vocabularies."""

    name: str
    description: str
    sample: Callable[[random.Random], Pair]
    src_vocab: Callable[[], Vocab]
    tgt_vocab: Callable[[], Vocab]
    sizes: tuple[int, int, int]  # default (n_train, n_valid, n_test)
    example: Pair = field(default=("", ""))
    # number of distinct sources the sampler can produce; None: more than MAX_EXAMPLES
    capacity: int | None = None


# make_task draws at most this many examples (a million copy examples take about 7 s) ...
MAX_EXAMPLES = 1_000_000
# ... and at most this fraction of a task's distinct sources: drawing distinct sources at
# random slows down sharply as they run out (a coupon collector)
MAX_CAPACITY_FRACTION = 0.5


_date_chars = sorted(set("".join(MONTH_NAMES)) | set("0123456789 ,./年月日"))
_en_words, _zh_words = _translation_vocabs()

TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            "copy",
            "copy a string of letters a-j (length 1-12)",
            lambda rng: _sample_letters(rng, 12, reverse=False),
            lambda: CharVocab(COPY_ALPHABET),
            lambda: CharVocab(COPY_ALPHABET),
            (5000, 500, 500),
            ("cabd", "cabd"),
        ),
        TaskSpec(
            "reverse",
            "reverse a string of letters a-j (length 1-12)",
            lambda rng: _sample_letters(rng, 12, reverse=True),
            lambda: CharVocab(COPY_ALPHABET),
            lambda: CharVocab(COPY_ALPHABET),
            (5000, 500, 500),
            ("cabd", "dbac"),
        ),
        TaskSpec(
            "number",
            "Arabic number in [0, 10^6) -> Chinese reading",
            lambda rng: _sample_number(rng, max_digits=6),
            lambda: CharVocab("0123456789"),
            lambda: CharVocab(CHINESE_DIGITS + "两十百千万"),
            (10000, 500, 1000),
            ("20481", "两万零四百八十一"),
            10**6,  # every number in [0, 10^6)
        ),
        TaskSpec(
            "date",
            "date in one of 7 English/Chinese forms, years 1970-2039 -> YYYY-MM-DD",
            _sample_date,
            lambda: CharVocab(_date_chars),
            lambda: CharVocab("0123456789-"),
            (10000, 500, 1000),
            ("5 Mar 2021", "2021-03-05"),
            174_629,  # 25,567 days x 7 forms, less May's "May 5, 2021" written the same twice
        ),
        TaskSpec(
            "translation",
            "English-like (SVO, adjective before noun) -> Chinese-like (SOV, adjective after noun)",
            _sample_sentence,
            lambda: WordVocab(_en_words),
            lambda: WordVocab(_zh_words),
            (20000, 500, 1000),
            ("this big dog chases the cat today", "今天 这 狗 大 猫 追"),
        ),
    )
}


def list_tasks() -> dict[str, str]:
    """Task name -> one-line description."""
    return {name: spec.description for name, spec in TASKS.items()}


@dataclass
class TaskData:
    """The three splits of a task as (source, target) string pairs, plus vocabularies.

    Targets are stored without ``<bos>``/``<eos>``; ``lecturekit.data.collate`` adds them
    (decoder input = ``<bos>`` + target, labels = target + ``<eos>``: teacher forcing, lecture p46).
    """

    name: str
    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]
    src_vocab: Vocab
    tgt_vocab: Vocab
    seed: int

    def split(self, name: str) -> list[Pair]:
        """The pairs of split ``name`` ("train", "valid" or "test")."""
        if name not in ("train", "valid", "test"):
            raise ValueError(f"split must be 'train', 'valid' or 'test', got {name!r}")
        return getattr(self, name)

    def encode_src(self, text: str) -> list[int]:
        """Source string -> ids (no special tokens). Unknown characters raise ``ValueError``."""
        return self.src_vocab.encode(text, strict=True)

    def encode_tgt(self, text: str) -> list[int]:
        """Target string -> ids (no special tokens). Unknown characters raise ``ValueError``."""
        return self.tgt_vocab.encode(text, strict=True)

    def decode_src(self, ids: Sequence[int] | Any) -> str:
        """Source ids (list or 1-D tensor) -> string, dropping padding."""
        return self.src_vocab.decode(ids)

    def decode_tgt(self, ids: Sequence[int] | Any) -> str:
        """Target ids (list or 1-D tensor) -> string; stops at the first ``<eos>``."""
        return self.tgt_vocab.decode(ids)

    def encoded(self, split: str) -> list[tuple[list[int], list[int]]]:
        """Split ``split`` as (source ids, target ids) pairs, ready for ``collate``."""
        return [(self.encode_src(s), self.encode_tgt(t)) for s, t in self.split(split)]

    @property
    def max_src_len(self) -> int:
        """Longest source, in tokens, over all splits (no special tokens)."""
        return max(len(self.src_vocab.tokenize(s)) for s, _ in self._all_pairs())

    @property
    def max_tgt_len(self) -> int:
        """Longest target, in tokens, over all splits (add 1 for ``<eos>``)."""
        return max(len(self.tgt_vocab.tokenize(t)) for _, t in self._all_pairs())

    def loader(
        self, split: str, batch_size: int = 64, shuffle: bool | None = None, seed: int = 0
    ) -> DataLoader:
        """A ``DataLoader`` of ``Batch`` es over ``split`` with length bucketing.

        ``shuffle`` defaults to True for "train" and False otherwise.
        """
        from lecturekit.data.batching import make_loader

        if shuffle is None:
            shuffle = split == "train"
        return make_loader(self.encoded(split), batch_size=batch_size, shuffle=shuffle, seed=seed)

    def _all_pairs(self) -> list[Pair]:
        return self.train + self.valid + self.test

    def __repr__(self) -> str:
        src, tgt = self.train[0] if self.train else ("", "")
        return (
            f"TaskData({self.name!r}, train={len(self.train)}, valid={len(self.valid)}, "
            f"test={len(self.test)}, src_vocab={len(self.src_vocab)}, "
            f"tgt_vocab={len(self.tgt_vocab)}, example={src!r} -> {tgt!r})"
        )


def make_task(
    name: str,
    n_train: int | None = None,
    n_valid: int | None = None,
    n_test: int | None = None,
    seed: int = 0,
) -> TaskData:
    """Generate task ``name`` (see ``list_tasks()``) with the given split sizes.

    Sizes default to the task's ``TaskSpec.sizes``. The same arguments always give the same
    data (a private ``random.Random(seed)``; the global random state is untouched).
    ``n_train + n_valid + n_test`` distinct sources are drawn, shuffled and cut into the
    splits, so no source appears in two splits.
    """
    if name not in TASKS:
        raise ValueError(f"name must be one of {sorted(TASKS)}, got {name!r}")
    spec = TASKS[name]
    sizes = []
    for arg, value, default in zip(
        ("n_train", "n_valid", "n_test"), (n_train, n_valid, n_test), spec.sizes, strict=True
    ):
        value = default if value is None else value
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{arg} must be a non-negative int, got {value!r}")
        sizes.append(value)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    _check_total(spec, sum(sizes))

    rng = random.Random(f"{name}:{seed}")
    pairs = _draw_distinct(spec.sample, sum(sizes), rng, name)
    rng.shuffle(pairs)
    a, b = sizes[0], sizes[0] + sizes[1]
    return TaskData(
        name=name,
        train=pairs[:a],
        valid=pairs[a:b],
        test=pairs[b:],
        src_vocab=spec.src_vocab(),
        tgt_vocab=spec.tgt_vocab(),
        seed=seed,
    )


def _check_total(spec: TaskSpec, total: int) -> None:
    """Refuse, before drawing anything, more examples than the task can supply quickly."""
    asked = f"n_train + n_valid + n_test = {total:,}"
    if spec.capacity is not None and total > spec.capacity * MAX_CAPACITY_FRACTION:
        raise ValueError(
            f"{asked} is too many for task {spec.name!r}: it has {spec.capacity:,} distinct "
            f"sources and make_task draws at most {MAX_CAPACITY_FRACTION:.0%} of them "
            f"({int(spec.capacity * MAX_CAPACITY_FRACTION):,}), since drawing distinct "
            "sources at random slows down sharply as they run out; ask for fewer examples"
        )
    if total > MAX_EXAMPLES:
        raise ValueError(
            f"{asked} is more than make_task generates in one call ({MAX_EXAMPLES:,}, about "
            "7 seconds); ask for fewer examples"
        )


def _draw_distinct(
    sample: Callable[[random.Random], Pair], n: int, rng: random.Random, name: str
) -> list[Pair]:
    pairs: dict[str, str] = {}
    misses = 0
    # give up when new sources become too rare: the task cannot supply n distinct examples
    while len(pairs) < n:
        src, tgt = sample(rng)
        if src in pairs:
            misses += 1
            if misses > 20 * n + 1000:
                raise ValueError(
                    f"task {name!r} could only produce {len(pairs)} distinct sources, "
                    f"but {n} were requested (n_train + n_valid + n_test)"
                )
            continue
        pairs[src] = tgt
    return list(pairs.items())
