"""The word-level pinyin task's data: readings, the cached lexicon, the split, the task."""

from __future__ import annotations

import sys
import time
from collections import Counter

import pytest

from lecturekit.data import make_task
from lecturekit.data import pinyin as pinyin_data
from lecturekit.data.pinyin import (
    Word,
    char_vocab,
    load_lexicon,
    split_lexicon,
    syllable_vocab,
    training_pairs,
    word_pinyin,
)


def test_readings_are_phrase_aware_toneless_and_spell_u_umlaut_as_v() -> None:
    assert word_pinyin("银行") == "yin hang"
    assert word_pinyin("行走") == "xing zou"
    assert word_pinyin("机器学习") == "ji qi xue xi"
    assert word_pinyin("绿色") == "lv se"
    assert word_pinyin("略微") == "lve wei"
    for bad in ("", "abc", "机器 学习", 3):
        with pytest.raises(ValueError, match="text"):
            word_pinyin(bad)


def test_missing_package_is_named(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pypinyin", None)  # what an uninstalled package looks like
    with pytest.raises(ImportError, match="pip install pypinyin"):
        word_pinyin("银行")
    monkeypatch.setitem(sys.modules, "jieba", None)
    with pytest.raises(ImportError, match="pip install jieba"):
        pinyin_data._jieba_entries()


def test_lexicon_is_built_once_then_read_from_the_cache(tmp_path, monkeypatch) -> None:
    entries = [("银行", 30), ("行走", 5), ("AT&T", 3), ("機器", 9), ("学", 80), ("一二三四五", 2)]
    monkeypatch.setattr(pinyin_data, "_jieba_entries", lambda: entries)
    built = load_lexicon(tmp_path)
    # sorted by text; Latin letters, traditional characters and 5-character words are dropped
    assert built == [
        Word("学", "xue", 80),
        Word("行走", "xing zou", 5),
        Word("银行", "yin hang", 30),
    ]
    (cached,) = tmp_path.glob("pinyin-lexicon-*.tsv")

    def must_not_rebuild():
        raise AssertionError("the cache was not used")

    monkeypatch.setattr(pinyin_data, "_build_lexicon", must_not_rebuild)
    assert load_lexicon(tmp_path) == built
    # a damaged cache (here: an edited line) is rebuilt, never read as a different lexicon
    cached.write_text("broken line\n", encoding="utf-8")
    monkeypatch.setattr(pinyin_data, "_build_lexicon", lambda: list(built))
    with pytest.warns(RuntimeWarning, match="damaged"):
        assert load_lexicon(tmp_path) == built
    assert load_lexicon(tmp_path) == built


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LECTUREKIT_CACHE", str(tmp_path / "a"))
    assert pinyin_data.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("LECTUREKIT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    assert pinyin_data.cache_dir() == tmp_path / "b" / "lecturekit"


def test_the_real_lexicon(pinyin_split) -> None:
    words = pinyin_split.train + pinyin_split.valid + pinyin_split.test
    assert len(words) > 300_000
    assert all(1 <= len(w.text) <= 4 and len(w.syllables) == len(w.text) for w in words)
    by_text = {w.text: w for w in words}
    assert by_text["银行"].pinyin == "yin hang" and by_text["实施"].freq > by_text["事实"].freq
    assert "机器学习" not in by_text  # the lecture's word is not in jieba's dictionary


def test_split_holds_out_multi_character_words_only(pinyin_split) -> None:
    train = {w.text for w in pinyin_split.train}
    valid = {w.text for w in pinyin_split.valid}
    test = {w.text for w in pinyin_split.test}
    assert not (train & valid or train & test or valid & test)
    assert all(len(t) > 1 for t in valid | test)
    n_multi = len(valid) + len(test) + sum(len(t) > 1 for t in train)
    assert len(test) == round(0.05 * n_multi) and len(valid) == round(0.01 * n_multi)
    again = split_lexicon(pinyin_split.train + pinyin_split.valid + pinyin_split.test, seed=0)
    assert again.test == pinyin_split.test
    other = split_lexicon(pinyin_split.train + pinyin_split.valid + pinyin_split.test, seed=1)
    assert other.test != pinyin_split.test
    with pytest.raises(ValueError, match="test_fraction"):
        split_lexicon([], test_fraction=0.0)


def test_test_words_by_frequency(pinyin_split) -> None:
    test_words = set(pinyin_split.test)
    freq = pinyin_split.test_by_frequency(3000)
    assert set(freq) <= test_words and freq == pinyin_split.test_by_frequency(3000)
    assert freq != pinyin_split.test_by_frequency(3000, seed=1)
    # frequency weighting: the frequent words repeat, and are far more frequent than the
    # average held-out word
    assert len(set(freq)) < len(freq)
    mean = lambda ws: sum(w.freq for w in ws) / len(ws)  # noqa: E731
    assert mean(freq) > 10 * mean(pinyin_split.test)
    with pytest.raises(ValueError, match="n"):
        pinyin_split.test_by_frequency(0)


def test_vocabularies_and_training_pairs() -> None:
    words = [Word("是", "shi", 90), Word("事实", "shi shi", 10), Word("实施", "shi shi", 40)]
    vocab = char_vocab(words, 2)
    assert vocab.itos[4:] == ["是", "实"]  # 是 90, 实 50, 事 10, 施 40 -> the two largest
    assert syllable_vocab(words).itos[4:] == ["shi"]
    pairs = training_pairs(words, 4000, alpha=1.0, seed=3)
    counts = Counter(t for _, t in pairs)
    assert counts["是"] > counts["实施"] > counts["事实"] > 0
    flat = Counter(t for _, t in training_pairs(words, 4000, alpha=0.0, seed=3))
    assert max(flat.values()) < 1.2 * min(flat.values())
    only = training_pairs(words, 50, vocab=char_vocab(words, 3))  # 事 (10) is left out
    assert {t for _, t in only} == {"是", "实施"}
    assert pairs == training_pairs(words, 4000, alpha=1.0, seed=3)
    with pytest.raises(ValueError, match="alpha"):
        training_pairs(words, 10, alpha=2.0)
    with pytest.raises(ValueError, match="n"):
        training_pairs(words, 0)
    with pytest.raises(ValueError, match="size"):
        char_vocab(words, 0)


def test_make_task_pinyin(pinyin_split) -> None:
    task = make_task("pinyin", n_train=2000, n_valid=50, n_test=80)
    assert task.name == "pinyin" and len(task.train) == 2000
    assert len(task.src_vocab) > 400 and len(task.tgt_vocab) == 4004
    held_out = {w.text for w in pinyin_split.test + pinyin_split.valid}
    assert not {t for _, t in task.train} & held_out
    assert {t for _, t in task.test} <= {w.text for w in pinyin_split.test}
    # every pair is writable with the vocabularies
    for split in ("train", "valid", "test"):
        assert len(task.encoded(split)) == len(task.split(split))
    assert 0 < len(task.test) <= 80 and 0 < len(task.valid) <= 50


def test_a_cache_folder_that_is_a_file_is_refused_before_the_build(monkeypatch, tmp_path) -> None:
    def must_not_build():
        raise AssertionError("built although the cache cannot be written")

    monkeypatch.setattr(pinyin_data, "_build_lexicon", must_not_build)
    a_file = tmp_path / "cache.txt"
    a_file.write_text("not a folder")
    monkeypatch.setenv("LECTUREKIT_CACHE", str(a_file))
    with pytest.raises(ValueError, match="LECTUREKIT_CACHE: .* is a file, not a folder"):
        load_lexicon()
    with pytest.raises(ValueError, match="directory: .* is a file, not a folder"):
        load_lexicon(a_file / "below")  # a file above the folder
    monkeypatch.delenv("LECTUREKIT_CACHE")
    pinyin_data._cache_path(tmp_path).mkdir()  # a folder where the cache file goes
    with pytest.raises(ValueError, match="the cache file .* is not a file"):
        load_lexicon(tmp_path)
    with pytest.raises(TypeError, match="directory must be a str or pathlib.Path"):
        load_lexicon(3.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_train": 10**10}, r"n_train must be in \[1, 1000000\], got 10000000000"),
        ({"n_train": 0}, r"n_train must be in \[1, 1000000\], got 0"),
        ({"n_valid": -1}, r"n_valid must be in"),
        ({"n_train": 999_999, "n_test": 10}, r"n_train \+ n_valid \+ n_test must be at most"),
        ({"n_train": "5"}, r"n_train must be an int"),
    ],
)
def test_the_pinyin_task_refuses_sizes_before_loading_anything(
    kwargs, message, monkeypatch
) -> None:
    def must_not_load(*args, **kwargs):
        raise AssertionError("the lexicon was loaded before the sizes were checked")

    monkeypatch.setattr(pinyin_data, "split_lexicon", must_not_load)
    start = time.monotonic()
    with pytest.raises((TypeError, ValueError), match=message):
        make_task("pinyin", **kwargs)
    assert time.monotonic() - start < 1.0


ENTRIES = [("银行", 30), ("行走", 5), ("学", 80)]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",  # 0 bytes: read as an empty lexicon before
        lambda data: data[: len(data) // 2],  # cut short
        lambda data: data.replace(b"30", b"31"),  # an edited frequency
        lambda data: data.split(b"\n", 1)[1],  # no header (a file of the old layout)
    ],
    ids=["empty", "truncated", "edited", "headerless"],
)
def test_a_damaged_lexicon_cache_is_rebuilt(damage, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(pinyin_data, "_jieba_entries", lambda: ENTRIES)
    built = pinyin_data.load_lexicon(tmp_path)
    assert len(built) == 3
    (cached,) = tmp_path.glob("pinyin-lexicon-*.tsv")
    cached.write_bytes(damage(cached.read_bytes()))
    with pytest.warns(RuntimeWarning, match="damaged; rebuilding"):
        assert pinyin_data.load_lexicon(tmp_path) == built
    monkeypatch.setattr(pinyin_data, "_build_lexicon", lambda: pytest.fail("rebuilt twice"))
    assert pinyin_data.load_lexicon(tmp_path) == built  # the rewritten cache verifies
