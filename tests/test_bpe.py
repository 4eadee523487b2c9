import random
from collections import Counter

import pytest

from lecturekit.data import BPE, UNK_ID
from lecturekit.data.bpe import SPACE, learn_merges, pretokenize

CORPUS = ["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3


def test_first_merges_by_hand():
    # pair counts of the classic example (Sennrich et al.): e-s and s-t occur 6+3 = 9 times,
    # the tie goes to ("e", "s"); then "es"-"t" (9); then l-o, o-w and ▁-l tie at 7 and
    # ("l", "o") sorts first (▁ is U+2581, after the Latin letters)
    bpe = BPE.train(CORPUS, num_merges=3)
    assert bpe.merges == [("e", "s"), ("es", "t"), ("l", "o")]
    assert bpe.merge_counts == [9, 9, 7]
    assert bpe.encode("lowest") == [SPACE, "lo", "w", "est"]


def test_training_segmentation_equals_encoding():
    rng = random.Random(0)
    words = ["".join(rng.choice("abcab ") for _ in range(rng.randint(1, 9))) for _ in range(300)]
    bpe = BPE.train(words, num_merges=40)
    assert len(bpe.merges) > 10
    # replay training: apply every merge, in order, to every word
    for word in {w for text in words for w in pretokenize(text)}:
        symbols = list(word)
        for a, b in bpe.merges:
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            symbols = out
        assert bpe.encode_word(word) == symbols


def recounting_merges(corpus: list[str], num_merges: int, min_count: int = 2) -> tuple:
    """The textbook loop: recount every pair of every word before each merge."""
    counts = Counter(word for text in corpus for word in pretokenize(text))
    splits = {word: list(word) for word in counts}
    merges, merge_counts = [], []
    for _ in range(num_merges):
        pairs: Counter = Counter()
        for word, symbols in splits.items():
            for pair in zip(symbols, symbols[1:], strict=False):
                pairs[pair] += counts[word]
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < min_count:
            break
        merges.append(best)
        merge_counts.append(pairs[best])
        for word, symbols in splits.items():
            out, i = [], 0
            while i < len(symbols):
                if symbols[i : i + 2] == list(best):
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            splits[word] = out
    return merges, merge_counts


@pytest.mark.parametrize("seed", range(6))
def test_training_equals_recounting_every_pair(seed: int) -> None:
    # runs of one letter ("aaaa") make overlapping pairs; "ab ab" repeats across words
    rng = random.Random(seed)
    letters = rng.choice(["ab ", "aab c", "abcde ", "aaaa b", "两万零一 a"])
    corpus = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 12))) for _ in range(80)]
    for num_merges, min_count in [(60, 2), (200, 1), (5, 3)]:
        bpe = BPE.train(corpus, num_merges, min_count=min_count)
        assert (bpe.merges, bpe.merge_counts) == recounting_merges(corpus, num_merges, min_count)


def test_learn_merges_on_utf8_bytes_rebuilds_a_chinese_character():
    # each byte shown as one character (U+0100 + byte): 的 is 3 bytes, two merges rebuild it
    def as_bytes(text: str) -> str:
        return "".join(chr(0x100 + b) for b in text.encode("utf-8"))

    counts = Counter({as_bytes("的"): 5, as_bytes("目的"): 2, as_bytes("a"): 9})
    merges, merge_counts = learn_merges(counts, num_merges=10)
    assert "".join(merges[1]) == as_bytes("的") and merge_counts[:2] == [7, 7]
    # then 目的 (3 more merges, each pair twice); after that every word is one symbol
    assert "".join(merges[-1]) == as_bytes("目的") and merge_counts[2:] == [2, 2, 2]
    assert learn_merges(counts, num_merges=10, min_count=3)[1] == [7, 7]
    with pytest.raises(ValueError, match="num_merges"):
        learn_merges(counts, num_merges=1.5)
    with pytest.raises(TypeError, match="word_counts"):
        learn_merges(["ab"], num_merges=1)


def test_round_trip_on_arbitrary_text():
    bpe = BPE.train(["the cat sat on the mat", "两万零四百八十一", "the the the"], 30)
    rng = random.Random(1)
    alphabet = "the casmo两万零一 \n\tXYZ"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        tokens = bpe.encode(text)
        assert bpe.decode(tokens) == text
        assert "".join(tokens).replace(SPACE, " ")[1:] == text
    assert bpe.encode("the") == [f"{SPACE}the"]  # a frequent word becomes one token
    assert pretokenize("a  b") == [f"{SPACE}a", SPACE, f"{SPACE}b"]


def test_ids_round_trip_and_unknown_characters():
    bpe = BPE.train(["abab abab", "abc"], 5)
    ids = bpe.encode_ids("abab c")
    assert bpe.decode_ids(ids) == "abab c"
    assert all(4 <= i < len(bpe) for i in ids)
    assert bpe.encode_ids("z") == [bpe.token_to_id[SPACE], UNK_ID]
    with pytest.raises(ValueError, match="outside"):
        bpe.decode_ids([len(bpe)])


def test_more_merges_give_fewer_tokens_and_serialise():
    texts = ["low lower lowest newer newest wider widest"] * 3
    lengths = [len(BPE.train(texts, n).encode(texts[0])) for n in (0, 5, 10, 20)]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] > lengths[-1]
    bpe = BPE.train(texts, 10)
    again = BPE.from_dict(bpe.to_dict())
    assert again.encode(texts[0]) == bpe.encode(texts[0]) and again.tokens == bpe.tokens


def test_bad_input():
    with pytest.raises(TypeError, match="single str"):
        BPE.train("abc", 3)
    with pytest.raises(ValueError, match="num_merges"):
        BPE.train(["abc"], -1)
    with pytest.raises(ValueError, match="empty"):
        BPE.train([], 3)
    with pytest.raises(ValueError, match="U\\+2581"):
        pretokenize(f"a{SPACE}b")
    with pytest.raises(TypeError, match="text must be a str"):
        BPE.train(["ab"], 1).encode(3)


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


def test_bpe_from_dict_names_a_merge_that_is_not_a_pair() -> None:
    from lecturekit.data import BPE

    with pytest.raises(ValueError, match=r"merges'\]\[0\]"):
        BPE.from_dict({"alphabet": ["a"], "merges": [["a"]]})
