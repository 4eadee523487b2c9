import pytest
import torch

from lecturekit.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    CharVocab,
    Vocab,
    WordVocab,
)


def test_special_ids_match_transformer_config_defaults():
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    vocab = CharVocab("abc")
    assert [vocab.id_to_token(i) for i in range(4)] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2, 3)


def test_char_round_trip_and_special_tokens():
    vocab = CharVocab.from_texts(["两万零四百八十一", "十万"])
    assert len(vocab) == 4 + len(set("两万零四百八十一十万"))
    ids = vocab.encode("两万零四百八十一", add_bos=True, add_eos=True)
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID and len(ids) == 10
    assert vocab.decode(ids) == "两万零四百八十一"
    # decoding stops at the first <eos> and drops padding, as for a model's output
    assert vocab.decode([*vocab.encode("十万"), EOS_ID, *vocab.encode("万"), PAD_ID]) == "十万"
    assert vocab.decode(torch.tensor(vocab.encode("万十"))) == "万十"
    kept = vocab.decode([BOS_ID, *vocab.encode("万"), EOS_ID], keep_special=True, stop_at_eos=False)
    assert kept == "<bos>万<eos>"


def test_unknown_tokens():
    vocab = CharVocab("ab")
    assert vocab.encode("abz") == [4, 5, UNK_ID]
    assert vocab.decode(vocab.encode("abz")) == "ab<unk>"
    with pytest.raises(ValueError, match="'z'"):
        vocab.encode("abz", strict=True)


def test_word_vocab():
    vocab = WordVocab(["the", "dog", "狗"])
    assert vocab.encode("the  dog") == [4, 5]
    assert vocab.decode([4, 5, 6]) == "the dog 狗"
    assert WordVocab.from_texts(["b a", "a c"]).itos[4:] == ["a", "b", "c"]


def test_bad_input_is_rejected():
    vocab = CharVocab("ab")
    with pytest.raises(TypeError, match="text must be a str"):
        vocab.encode(["a"])
    with pytest.raises(ValueError, match=r"outside the vocabulary range \[0, 6\)"):
        vocab.decode([4, 6])
    with pytest.raises(ValueError, match="outside"):
        vocab.decode([-1])
    with pytest.raises(TypeError, match="ids must hold integers"):
        vocab.decode(torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="1-D"):
        vocab.decode(torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="token ids must be int"):
        vocab.decode(["a"])
    with pytest.raises(TypeError, match="single str"):
        WordVocab("the dog")
    with pytest.raises(TypeError, match="non-empty str"):
        CharVocab(["a", ""])


def test_dict_round_trip_and_equality():
    for vocab in (CharVocab("xyz"), WordVocab(["hello", "world"])):
        state = vocab.to_dict()
        assert all(isinstance(t, str) for t in state["tokens"])
        restored = Vocab.from_dict(state)
        assert restored == vocab and type(restored) is type(vocab)
    assert CharVocab("ab") != CharVocab("ba")
    with pytest.raises(ValueError, match="kind"):
        Vocab.from_dict({"kind": "bytes", "tokens": []})


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
