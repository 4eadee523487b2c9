"""Issue #28 for ``lecturekit.data``: vocabularies whose every token is reachable, integer ids
only, a pinyin task bounded like the toy tasks, a verified lexicon cache, clear errors."""

from __future__ import annotations

import time

import pytest

from lecturekit.data import BPE, CharVocab, Vocab, WordVocab, make_loader, make_task
from lecturekit.data import pinyin as pinyin_data


@pytest.mark.parametrize(
    ("vocab_class", "token"), [(CharVocab, "ab"), (WordVocab, "big dog"), (WordVocab, "dog\n")]
)
def test_a_token_no_text_encodes_to_is_refused(vocab_class, token) -> None:
    with pytest.raises(ValueError, match=r"every token must be a single") as raised:
        vocab_class(["x", token])
    assert f"got {token!r}" in str(raised.value)


def test_every_token_of_a_vocabulary_round_trips() -> None:
    """The property the refusal protects: encoding a token's own text gives its id."""
    for vocab in (CharVocab(["a", "两"]), WordVocab(["big", "dog", "今天"])):
        for index, token in enumerate(vocab.itos[4:], start=4):
            assert vocab.encode(token) == [index]


def test_vocab_from_dict_names_bad_tokens() -> None:
    with pytest.raises(TypeError, match=r"state\['tokens'\] must be a list of token strings"):
        Vocab.from_dict({"kind": "char", "tokens": None})


@pytest.mark.parametrize("bad", [4.9, 4.0, "4", None])
def test_bpe_decode_ids_refuses_non_integers(bad) -> None:
    bpe = BPE.train(["low lower lowest"], num_merges=3)
    with pytest.raises(TypeError, match="each id must be an int"):
        bpe.decode_ids([bad])
    assert bpe.decode_ids([4]) == bpe.decode([bpe.tokens[4]])  # ints still decode


def test_bpe_decode_ids_accepts_integer_tensors() -> None:
    import torch

    bpe = BPE.train(["low lower lowest"], num_merges=3)
    ids = bpe.encode_ids("low lower")
    assert bpe.decode_ids(torch.tensor(ids)) == bpe.decode_ids(ids) == "low lower"
    with pytest.raises(TypeError, match="each id must be an int"):
        bpe.decode_ids(torch.tensor([4.9]))


@pytest.mark.parametrize("min_count", [float("nan"), 2.5, 0, None])
def test_bpe_min_count_must_be_a_positive_int(min_count) -> None:
    with pytest.raises((TypeError, ValueError), match="min_count must be"):
        BPE.train(["low lower"], num_merges=2, min_count=min_count)


def test_bpe_train_and_from_dict_name_their_argument() -> None:
    with pytest.raises(TypeError, match="corpus must be an iterable of texts"):
        BPE.train(None, num_merges=2)
    with pytest.raises(ValueError, match="state must have the keys 'alphabet' and 'merges'"):
        BPE.from_dict({})
    with pytest.raises(TypeError, match="state must be a dict"):
        BPE.from_dict(None)
    bpe = BPE.train(["low lower lowest"], num_merges=3)
    assert BPE.from_dict(bpe.to_dict()) == bpe


@pytest.mark.parametrize("name", [["copy"], None, 3])
def test_make_task_name_must_be_a_str(name) -> None:
    with pytest.raises(TypeError, match="name must be a task name"):
        make_task(name)


def test_an_empty_task_says_why_it_has_no_max_len() -> None:
    empty = make_task("copy", n_train=0, n_valid=0, n_test=0)
    for side in ("src", "tgt"):
        with pytest.raises(ValueError, match=rf"max_{side}_len of task 'copy' is undefined"):
            getattr(empty, f"max_{side}_len")
    assert make_task("copy", n_train=3, n_valid=0, n_test=0).max_src_len >= 1


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


def test_make_loader_refuses_batch_size_zero_on_both_paths() -> None:
    pairs = [([4, 5], [6]), ([5], [6, 7])]
    for bucket in (True, False):
        with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
            make_loader(pairs, batch_size=0, bucket=bucket)
    with pytest.raises(TypeError, match="bucket must be True or False"):
        make_loader(pairs, batch_size=2, bucket="no")


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


def test_bpe_from_dict_names_a_merge_that_is_not_a_pair() -> None:
    from lecturekit.data import BPE

    with pytest.raises(ValueError, match=r"merges'\]\[0\]"):
        BPE.from_dict({"alphabet": ["a"], "merges": [["a"]]})


def test_collate_refuses_pad_id_equal_to_eos_id() -> None:
    from lecturekit.data import collate

    with pytest.raises(ValueError, match="pad_id"):
        collate([([4], [5])], pad_id=2, eos_id=2)


@pytest.mark.parametrize(("seqs", "pad_id"), [([[[1]], [2]], 0), ([[1], [2, 3]], 0.5)])
def test_pad_sequences_refuses_non_int_ids_and_pad_id(seqs, pad_id) -> None:
    from lecturekit.data import pad_sequences

    with pytest.raises(TypeError, match="seqs|pad_id"):
        pad_sequences(seqs, pad_id)
