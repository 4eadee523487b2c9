"""Byte-pair encoding (BPE) from scratch, for reading rather than speed (Sennrich et al., 2016).

Idea: start from single characters and repeatedly merge the most frequent adjacent pair into
a new symbol. Frequent words end up as one token, rare words as a few pieces, and a word made
of characters seen in training is never out of vocabulary (it can fall back to characters);
a character never seen in training becomes ``<unk>`` in ``encode_ids``. Starting from UTF-8
bytes instead (byte-level BPE: ``learn_merges`` on words written one character per byte)
leaves nothing unknown.

Text is first cut into "words" that merges never cross. As in SentencePiece, a space is
kept as the visible marker ``▁`` at the start of the word that follows it, so that decoding
is just concatenation and any text (several spaces, newlines, Chinese without spaces)
round-trips exactly::

    "low lower"  ->  words "▁low", "▁lower"  ->  tokens e.g. ["▁low", "▁low", "er"]
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lecturekit._common import check_int, check_type
from lecturekit.data.vocab import SPECIAL_TOKENS, UNK_ID

__all__ = ["BPE", "learn_merges", "pretokenize"]

SPACE = "▁"  # U+2581, SentencePiece's marker for "a space came before this"


def pretokenize(text: str) -> list[str]:
    """Cut text into the words that merges stay inside: ``"a  b"`` -> ``["▁a", "▁", "▁b"]``.

    A ``▁`` is put in front of the text and replaces every space; each word starts at a ``▁``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if SPACE in text:
        raise ValueError(f"text must not contain the space marker {SPACE!r} (U+2581)")
    marked = SPACE + text.replace(" ", SPACE)
    return re.findall(f"{SPACE}[^{SPACE}]*", marked)


def _merge_pair(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    """Replace every adjacent occurrence of ``pair`` in ``symbols`` by the merged symbol."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def learn_merges(
    word_counts: Mapping[str, int], num_merges: int, min_count: int = 2
) -> tuple[list[tuple[str, str]], list[int]]:
    """The merges learned from words already cut and counted, and each one's count.

    ``word_counts`` maps a word to how often it occurs; merges never cross two words. This is
    the loop of ``BPE.train`` (which cuts text at spaces with ``pretokenize``); call it
    directly to cut text another way, e.g. into UTF-8 bytes shown as one character each.
    The result is the same as recounting every pair of every word before each merge; only
    the words that hold the merged pair are recounted, and a heap finds the most frequent
    pair (ties: the pair that sorts first). A pair is pushed when its count grows; an entry
    whose count has fallen since is pushed again with its new count when it reaches the top.
    A merge costs time in proportion to the words it touches, not to the corpus.
    Stops early when the best pair occurs fewer than ``min_count`` times.
    """
    if isinstance(num_merges, bool) or not isinstance(num_merges, int) or num_merges < 0:
        raise ValueError(f"num_merges must be a non-negative int, got {num_merges!r}")
    check_int("min_count", min_count, 1)
    check_type("word_counts", word_counts, Mapping, "a dict {word: count}")
    splits = [list(word) for word in word_counts]
    weights = list(word_counts.values())
    pair_counts: Counter[tuple[str, str]] = Counter()
    holders: defaultdict[tuple[str, str], set[int]] = defaultdict(set)
    for index, symbols in enumerate(splits):
        for pair in zip(symbols, symbols[1:], strict=False):
            pair_counts[pair] += weights[index]
            holders[pair].add(index)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    counts: list[int] = []
    while len(merges) < num_merges:
        while heap and pair_counts[heap[0][1]] != -heap[0][0]:
            pair = heapq.heappop(heap)[1]  # stale: the pair's count has fallen since
            if pair_counts[pair] > 0:
                heapq.heappush(heap, (-pair_counts[pair], pair))
        if not heap or -heap[0][0] < min_count:
            break  # no pair left (every word is one symbol), or too rare a pair
        best = heap[0][1]
        merges.append(best)
        counts.append(pair_counts[best])
        merged = best[0] + best[1]
        grown = set()
        for index in holders.pop(best):
            old, new = splits[index], _merge_pair(splits[index], best)
            if len(new) == len(old):
                continue  # the word lost this pair to an earlier merge
            for pair in zip(old, old[1:], strict=False):
                pair_counts[pair] -= weights[index]
            for pair in zip(new, new[1:], strict=False):
                pair_counts[pair] += weights[index]
                if merged in pair:  # only pairs with the new symbol are new to the word
                    holders[pair].add(index)
                    grown.add(pair)
            splits[index] = new
        for pair in grown:
            heapq.heappush(heap, (-pair_counts[pair], pair))
    return merges, counts


@dataclass
class BPE:
    """A learned BPE model: the base alphabet and the merges in the order they were learned.

    ``merge_counts[i]`` is how often ``merges[i]`` occurred when it was chosen (for tables in
    the book). Build one with ``BPE.train(corpus, num_merges)``.
    """

    alphabet: list[str]
    merges: list[tuple[str, str]]
    merge_counts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self.tokens = [*SPECIAL_TOKENS, *self.alphabet, *(a + b for a, b in self.merges)]
        self.token_to_id: dict[str, int] = {}
        for index, token in enumerate(self.tokens):
            self.token_to_id.setdefault(token, index)

    @classmethod
    def train(cls, corpus: Iterable[str], num_merges: int, min_count: int = 2) -> BPE:
        """Learn up to ``num_merges`` merges from ``corpus`` (an iterable of texts).

        Each round counts every adjacent symbol pair over all words (weighted by how often the
        word occurs), merges the most frequent pair everywhere, and records it. Ties go to
        the pair that sorts first, so training is deterministic. Stops early when the best
        pair occurs fewer than ``min_count`` times.
        """
        if isinstance(corpus, str):
            raise TypeError("corpus must be an iterable of texts, got a single str")
        check_type("corpus", corpus, Iterable, "an iterable of texts (e.g. a list of str)")
        word_counts = Counter(word for text in corpus for word in pretokenize(text))
        if not word_counts:
            raise ValueError("corpus is empty")
        alphabet = sorted({ch for word in word_counts for ch in word})
        merges, counts = learn_merges(word_counts, num_merges, min_count)
        return cls(alphabet=alphabet, merges=merges, merge_counts=counts)

    def encode_word(self, word: str) -> list[str]:
        """Split one pre-tokenized word: apply learned merges, earliest learned first."""
        symbols = list(word)
        while len(symbols) > 1:
            pairs = zip(symbols, symbols[1:], strict=False)
            best = min(pairs, key=lambda p: self.ranks.get(p, len(self.ranks)))
            if best not in self.ranks:
                break  # no learned merge applies any more
            symbols = _merge_pair(symbols, best)
        return symbols

    def encode(self, text: str) -> list[str]:
        """Text -> subword tokens (strings)."""
        return [token for word in pretokenize(text) for token in self.encode_word(word)]

    def decode(self, tokens: Sequence[str]) -> str:
        """Subword tokens -> text; exact inverse of ``encode``."""
        if isinstance(tokens, str):
            raise TypeError("tokens must be a sequence of str tokens, got a single str")
        for token in tokens:
            if not isinstance(token, str):
                raise TypeError(f"tokens must be str, got {type(token).__name__} {token!r}")
        text = "".join(tokens).replace(SPACE, " ")
        # encode put one marker in front of the text; a model's output may lack it
        return text[1:] if text.startswith(" ") else text

    def encode_ids(self, text: str) -> list[int]:
        """Text -> token ids (special tokens first, then alphabet, then merges in order).

        Characters never seen in training become ``<unk>`` (id 3).
        """
        return [self.token_to_id.get(token, UNK_ID) for token in self.encode(text)]

    def decode_ids(self, ids: Iterable[int]) -> str:
        """Ids -> text; special tokens are skipped."""
        tokens = []
        if isinstance(ids, str):
            raise TypeError(f"ids must be a sequence of int token ids, got a str {ids!r}")
        for index in ids:
            # an int, or a 0-d integer tensor/array: 4.9 must not silently become id 4
            if hasattr(index, "dtype") and str(index.dtype).split(".")[-1].startswith(
                ("int", "uint")
            ):
                index = int(index)
            check_int("each id", index)
            if not 0 <= index < len(self.tokens):
                raise ValueError(
                    f"id {index} is outside the BPE vocabulary [0, {len(self.tokens)})"
                )
            if index >= len(SPECIAL_TOKENS):
                tokens.append(self.tokens[index])
        return self.decode(tokens) if tokens else ""

    def __len__(self) -> int:
        return len(self.tokens)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form, e.g. for JSON or checkpoints."""
        return {
            "alphabet": list(self.alphabet),
            "merges": [list(p) for p in self.merges],
            "merge_counts": list(self.merge_counts),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> BPE:
        """Inverse of ``to_dict``."""
        check_type("state", state, dict, "a dict made by BPE.to_dict()")
        missing = [key for key in ("alphabet", "merges") if key not in state]
        if missing:
            raise ValueError(
                f"state must have the keys 'alphabet' and 'merges' (as BPE.to_dict() writes), "
                f"got a dict missing {missing}"
            )
        check_type("state['alphabet']", state["alphabet"], (list, tuple), "a list of symbols")
        check_type("state['merges']", state["merges"], (list, tuple), "a list of symbol pairs")
        for i, pair in enumerate(state["merges"]):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ValueError(
                    f"state['merges'][{i}] must be a pair of symbols (as BPE.to_dict() writes), "
                    f"got {pair!r:.60}"
                )
        return cls(
            alphabet=list(state["alphabet"]),
            merges=[tuple(p) for p in state["merges"]],
            merge_counts=list(state.get("merge_counts", [])),
        )
