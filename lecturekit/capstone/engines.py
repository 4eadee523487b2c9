"""The capstone chapter's input methods over whole inputs: the HMM baseline and the Transformer.

Both answer the same question, ``candidates(pinyins, k)``: for each toneless pinyin string
(``"shi shi"``) its ``k`` best answers, best first, like an input method's candidate bar.

- :class:`HmmBaseline`: the HMM of the ``Pinyin2Hanzi`` package (character bigrams with its
  own statistics from its own corpus, Viterbi decoding; :func:`hmm_k_best` decodes it);
- :class:`TransformerIME`: a trained :class:`lecturekit.Transformer` with the book's greedy
  and beam search; :func:`next_char_steps`, :func:`next_char_probs` and
  :func:`cross_attention` look inside it, :func:`teacher_forced_texts` measures its exposure
  bias (the reference prefix fed at every step).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lecturekit._common import check_bool, check_type
from lecturekit.capstone.pinyin_input import MAX_BEAM, check_k, length_batches, read_pinyins
from lecturekit.data.vocab import CharVocab, WordVocab
from lecturekit.decoding import beam_search, greedy
from lecturekit.decoding.protocol import as_decoder
from lecturekit.decoding.search import forbid_specials
from lecturekit.model.transformer import Transformer

__all__ = [
    "HmmBaseline",
    "hmm_k_best",
    "TransformerIME",
    "next_char_steps",
    "next_char_probs",
    "teacher_forced_texts",
    "cross_attention",
    "cross_attention_batch",
]


# ---------------------------------------------------------------------------------------------
# The HMM baseline
# ---------------------------------------------------------------------------------------------


class HmmBaseline:
    """The HMM input method of the ``Pinyin2Hanzi`` package (PyPI ``pinyin2hanzi``, MIT).

    Hidden states are characters, observations syllables; start, transition (character
    bigram) and emission probabilities come with the package, estimated by its author from
    his own corpus. Decoding is Viterbi keeping ``k`` paths. Its spelling of ü differs from
    pypinyin's after j/q/x/y (``xve`` for 学, not ``xue``): syllables are converted with the
    package's own ``simplify_pinyin``.

    The package's own ``viterbi`` loops over every pair of characters and every kept path in
    pure Python (seconds for a four-syllable word); :func:`hmm_k_best` runs the same
    recursion on the same parameters with numpy, giving the same scores.
    """

    name = "HMM (Pinyin2Hanzi)"
    max_candidates = 100  # hmm_k_best copies k paths per state and step (k = 100: 5 s for 8 shi)

    def __init__(self) -> None:
        try:
            import Pinyin2Hanzi
        except ImportError as err:
            raise ImportError(
                "HmmBaseline needs the package 'pinyin2hanzi': `pip install pinyin2hanzi`"
            ) from err
        self._p2h = Pinyin2Hanzi
        self.params = Pinyin2Hanzi.DefaultHmmParams()

    def spell(self, pinyin: str) -> list[str]:
        """pypinyin's syllables in Pinyin2Hanzi's spelling: ``"xue xi"`` -> ``["xve", "xi"]``."""
        return [self._p2h.simplify_pinyin(s) for s in pinyin.split()]

    def candidates(self, pinyins: Sequence[str], k: int) -> list[list[str]]:
        """For each input the HMM's ``k`` best paths (``[]`` for a syllable it does not know)."""
        check_k(k, self.max_candidates)
        out = []
        for syllables in read_pinyins(pinyins):
            observations = self.spell(" ".join(syllables))
            if not all(o in self.params.py2hz_dict for o in observations):
                out.append([])  # a syllable the package does not know
                continue
            out.append([text for _, text in hmm_k_best(self.params, observations, k)])
        return out


def _log(p: float) -> float:
    return math.log(max(p, 3.14e-200))  # the package's min_prob


class _HmmTables:
    """A ``Pinyin2Hanzi.DefaultHmmParams``'s dictionaries as arrays, read the way its
    ``start``, ``emission`` and ``transition`` methods read them (with their fallbacks):
    every character gets an id, the transitions are sorted ``from * n + to`` keys."""

    def __init__(self, params: Any) -> None:
        self.params = params
        data = params.transition_dict["data"]
        self.default = float(params.transition_dict["default"])
        chars = {c for states in params.py2hz_dict.values() for c in states}
        chars |= set(data) | {b for row in data.values() for b in row}
        self.index = {c: i for i, c in enumerate(sorted(chars))}
        n = len(self.index)
        self.row_default = np.full(n, self.default)  # (n,) the fallback of each row
        keys, values = [], []
        for a, row in data.items():
            self.row_default[self.index[a]] = float(row.get("default", self.default))
            for b, prob in row.items():
                if b != "default":
                    keys.append(self.index[a] * n + self.index[b])
                    values.append(float(prob))
        order = np.argsort(keys)
        self.keys, self.values = np.array(keys)[order], np.array(values)[order]
        self._syllables: dict[str, tuple[list[str], np.ndarray, np.ndarray, np.ndarray]] = {}

    def syllable(self, obs: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """``obs``'s states (characters), their ids ``(C,)``, log emissions ``(C,)`` and log
        start probabilities ``(C,)``, each floored at the package's ``min_prob``."""
        if obs not in self._syllables:
            p = self.params
            states = p.get_states(obs)
            self._syllables[obs] = (
                states,
                np.array([self.index[s] for s in states], dtype=np.int64),
                np.array([_log(p.emission(s, obs)) for s in states]),
                np.array([_log(p.start(s)) for s in states]),
            )
        return self._syllables[obs]

    def log_transitions(self, states: np.ndarray, new: np.ndarray) -> np.ndarray:
        """``(P, C)`` log transition probabilities from the ids ``states (P,)`` to ``new (C,)``,
        floored as the package floors them."""
        query = states[:, None] * len(self.index) + new[None, :]  # (P, C)
        at = np.minimum(np.searchsorted(self.keys, query), len(self.keys) - 1)
        probs = np.where(self.keys[at] == query, self.values[at], self.row_default[states, None])
        return np.log(np.maximum(probs, 3.14e-200))


@functools.lru_cache(maxsize=4)
def _hmm_tables(params: Any) -> _HmmTables:
    return _HmmTables(params)


def _top_rows(cand: np.ndarray, k: int) -> np.ndarray:
    """``np.argsort(-cand, axis=0, kind="stable")[:k]`` ``(k, C)``: the ``k`` best rows of
    every column of ``cand (M, C)``, ties to the lower row, without sorting whole columns."""
    columns = np.ascontiguousarray(cand.T)  # (C, M)
    if columns.shape[1] <= k:
        return np.argsort(-columns, axis=1, kind="stable").T
    kth = -np.partition(-columns, k - 1, axis=1)[:, k - 1 : k]  # (C, 1) the k-th best value
    above = columns > kth
    tied = columns == kth  # of these, the lowest rows fill the k places that are left
    need = k - above.sum(axis=1, keepdims=True)
    chosen = above | (tied & (np.cumsum(tied, axis=1) <= need))  # exactly k per column
    rows = np.nonzero(chosen)[1].reshape(len(columns), k)  # (C, k), ascending
    values = np.take_along_axis(columns, rows, axis=1)
    order = np.argsort(-values, axis=1, kind="stable")  # ties keep the lower row first
    return np.take_along_axis(rows, order, axis=1).T


def hmm_k_best(params: Any, observations: Sequence[str], k: int) -> list[tuple[float, str]]:
    """The ``k`` best (log score, characters) paths of an HMM, best first.

    ``params``: a ``Pinyin2Hanzi.DefaultHmmParams`` (read as arrays once per object);
    ``observations``: syllables in its spelling. The recursion of the package's
    ``viterbi(..., path_num=k, log=True)``: for every state the ``k`` best paths ending in
    it are kept; a path's score is ``log start + sum log emission + sum log transition``,
    each probability floored at the package's ``min_prob``. Per step the candidate scores
    form an ``(M, C)`` array: ``M`` kept paths times ``C`` new states. ``k`` is at most
    ``HmmBaseline.max_candidates``.
    """
    check_k(k, HmmBaseline.max_candidates)
    tables = _hmm_tables(params)
    states, ids, emit, start = tables.syllable(observations[0])
    scores = start + emit  # (M,)
    ends = np.arange(len(states))  # each kept path's last state, an index into states
    steps = []  # per later syllable: (its states, each kept path's parent (M,), end (M,))
    for obs in observations[1:]:
        new, new_ids, emit, _ = tables.syllable(obs)
        trans = tables.log_transitions(ids, new_ids)  # (P, C)
        cand = scores[:, None] + trans[ends] + emit[None, :]  # (M, C)
        best = _top_rows(cand, min(k, len(scores)))  # (k, C)
        parent = best.T.ravel()  # new state by new state, its best paths first
        ends = np.repeat(np.arange(len(new)), len(best))
        scores = cand[parent, ends]
        steps.append((new, parent, ends))
        states, ids = new, new_ids
    out = []
    for m in np.argsort(-scores, kind="stable")[:k].tolist():
        score, chars = float(scores[m]), []
        for new, parent, end in reversed(steps):
            chars.append(new[end[m]])
            m = int(parent[m])
        chars.append(tables.syllable(observations[0])[0][m])
        out.append((score, "".join(reversed(chars))))
    return out


# ---------------------------------------------------------------------------------------------
# The Transformer as an input method
# ---------------------------------------------------------------------------------------------


class TransformerIME:
    """A trained :class:`lecturekit.Transformer` (syllables in, characters out) as an IME.

    ``beam_size = 1`` decodes greedily (one candidate); otherwise beam search returns up to
    ``beam_size`` candidates (its n-best list); ``beam_size`` is at most
    :data:`~lecturekit.capstone.pinyin_input.MAX_BEAM`. Inputs are decoded in batches of at most
    ``batch_size``. ``exact_length`` writes exactly one character per syllable (EOS is not
    allowed earlier, and nothing follows the last syllable's character): an input method knows
    the length of its answer; by default the model decides it (up to one per syllable: EOS may
    come earlier, and nothing follows the last syllable's character). Inputs are read by
    :func:`~lecturekit.capstone.pinyin_input.read_pinyins` (case, tone marks and numbers,
    ü are normalised; what is not a syllable the model knows is refused).
    """

    def __init__(
        self,
        model: Transformer,
        src_vocab: WordVocab,
        tgt_vocab: CharVocab,
        beam_size: int = 5,
        *,
        exact_length: bool = False,
    ) -> None:
        check_type("model", model, Transformer, "the encoder-decoder Transformer (the AT model)")
        check_type("src_vocab", src_vocab, WordVocab, "the model's syllable vocabulary (WordVocab)")
        check_type(
            "tgt_vocab", tgt_vocab, CharVocab, "the model's character vocabulary (CharVocab)"
        )
        check_k(beam_size, MAX_BEAM, name="beam_size")
        check_bool("exact_length", exact_length)
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.exact_length = exact_length
        self.beam_size = beam_size
        self.max_candidates = beam_size
        self.name = "Transformer 贪心" if beam_size == 1 else f"Transformer 束宽 {beam_size}"
        self.batch_size = 256
        # decoding steps allowed past one per syllable: 0 (an answer is never longer than its
        # input); the sentence models' recorded training history was measured with 1
        self._extra_steps = 0

    def encode(self, pinyins: Sequence[str]) -> torch.Tensor:
        """Pinyin strings -> padded source ids ``(B, S)``.

        Raises ``ValueError`` for an empty input or a syllable outside the model's input
        vocabulary (toneless, lower case, ü written ``v``: ``"lv"``, ``"nve"``).
        """
        rows = []
        for pinyin, syllables in zip(
            pinyins, read_pinyins(pinyins, self.src_vocab.stoi), strict=True
        ):
            unknown = [s for s in syllables if s not in self.src_vocab.stoi]
            if unknown:
                raise ValueError(
                    f"pinyins: {pinyin!r} has syllables the model does not know: {unknown}; "
                    "write toneless lower-case pinyin separated by spaces, ü as v ('lv')"
                )
            rows.append(self.src_vocab.encode(" ".join(syllables)))
        return torch.nn.utils.rnn.pad_sequence(
            [torch.tensor(r) for r in rows], batch_first=True, padding_value=self.src_vocab.pad_id
        )

    def scored_candidates(self, pinyins: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """For each input, up to ``k`` (word, probability) pairs, most probable first.

        Inputs are decoded in batches of equal length (no padding), each for at most one
        character per syllable (exactly one with ``exact_length``), so the others in a batch
        change an input's scores by float rounding only.
        """
        check_k(k, self.max_candidates)
        pinyins = [" ".join(s) for s in read_pinyins(pinyins, self.src_vocab.stoi)]
        out: list[list[tuple[str, float]]] = [[] for _ in pinyins]
        lengths = [len(pinyin.split()) for pinyin in pinyins]
        for chunk in length_batches(lengths, self.batch_size):
            length = lengths[chunk[0]]
            src = self.encode([pinyins[i] for i in chunk])  # (B, length)
            min_len = length if self.exact_length else 0
            decoded = self._decode(src, length + self._extra_steps, k, min_len)
            for i, row in zip(chunk, decoded, strict=True):
                out[i] = row
        return out

    def _decode(
        self, src: torch.Tensor, max_len: int, k: int, min_len: int = 0
    ) -> list[list[tuple[str, float]]]:
        """Decode ``src (B, S)``: per row up to ``k`` (word, probability) pairs."""
        if self.beam_size == 1:
            out = greedy(self.model, src, max_len, min_len=min_len)  # (B, T), (B,) log P
            return [
                [(self.tgt_vocab.decode(row), math.exp(lp))]
                for row, lp in zip(out.tokens.tolist(), out.scores.tolist(), strict=True)
            ]
        out = beam_search(self.model, src, self.beam_size, max_len, min_len=min_len, n_best=k)
        return [
            [(self.tgt_vocab.decode(h.tokens), math.exp(h.log_prob)) for h in hyps]
            for hyps in out.hypotheses
        ]

    def candidates(self, pinyins: Sequence[str], k: int) -> list[list[str]]:
        """For each input up to ``k`` words, most probable first (the n-best list)."""
        return [[w for w, _ in row] for row in self.scored_candidates(pinyins, k)]


@torch.no_grad()
def next_char_steps(
    ime: TransformerIME, pinyin: str, top: int = 3, text: str | None = None
) -> list[tuple[str, list[tuple[str, float]]]]:
    """Decode one input step by step: for each step the characters fed to the decoder so far
    (after BOS) and its ``top`` most probable next tokens with probabilities (``"<eos>"``
    ends the word).

    Without ``text`` the decoder is fed its own most probable character (greedy decoding);
    with ``text`` it is fed ``text``'s characters (teacher forcing), so the steps show how
    probable each correct character was, ``len(text) + 1`` steps in all.
    """
    model, tgt = ime.model, ime.tgt_vocab
    check_k(top, len(tgt), name="top")  # at most every output token
    src = ime.encode([pinyin])  # (1, S)
    memory = model.encode(src)  # (1, S, D)
    forced = None if text is None else tgt.encode(text, strict=True)
    prefix = [tgt.bos_id]
    steps = []
    n_steps = src.size(1) + 1 if forced is None else len(forced) + 1
    for t in range(n_steps):
        logits = model.decode(torch.tensor([prefix]), memory)[0, -1]  # (V,)
        best = torch.topk(torch.softmax(logits.double(), dim=-1), top)
        ids, probs = best.indices.tolist(), best.values.tolist()
        ranked = [(tgt.itos[i], p) for i, p in zip(ids, probs, strict=True)]
        steps.append(("".join(tgt.itos[i] for i in prefix[1:]), ranked))
        chosen = int(best.indices[0]) if forced is None else (forced + [tgt.eos_id])[t]
        if chosen == tgt.eos_id:
            break
        prefix.append(chosen)
    return steps


@torch.no_grad()
def next_char_probs(
    ime: TransformerIME, pinyin: str, chars: Sequence[str], prefix: str = ""
) -> dict[str, float]:
    """The decoder's probability of each character of ``chars`` as the next one, after BOS and
    ``prefix``, for the input ``pinyin``: ``{"机": 0.12, "及": 0.18}``. The whole input is
    read by the encoder, so a change of its later syllables can change even the first step.
    A character outside the output vocabulary raises ``ValueError``."""
    tgt = ime.tgt_vocab
    ids = tgt.encode("".join(chars), strict=True)
    src = ime.encode([pinyin])  # (1, S)
    tgt_in = torch.tensor([[tgt.bos_id, *tgt.encode(prefix, strict=True)]])  # (1, P + 1)
    probs = torch.softmax(ime.model(src, tgt_in)[0, -1].double(), dim=-1)  # (V,)
    return {c: float(probs[i]) for c, i in zip(chars, ids, strict=True)}


@torch.no_grad()
def teacher_forced_texts(ime: TransformerIME, pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Each clause's characters as the decoder writes them when every step reads the
    reference prefix (teacher forcing, chapter 6), ``(N,)`` strings: at step ``t`` the most
    probable character after BOS and the reference's first ``t`` characters, one per
    syllable (PAD, BOS and EOS never written, as in decoding with ``exact_length``). Rare
    reference characters are fed as ``<unk>``, as in training. Compared with the free-running
    answers, the difference is what the decoder's own earlier mistakes cost it. Clauses run
    in batches of equal length (no padding), at most ``ime.batch_size`` at a time."""
    model, tgt = ime.model, ime.tgt_vocab
    out = [""] * len(pairs)
    for chunk_ids in length_batches([len(text) for _, text in pairs], ime.batch_size):
        chunk = [pairs[i] for i in chunk_ids]
        length = len(chunk[0][1])
        src = ime.encode([pinyin for pinyin, _ in chunk])  # (B, S)
        syllables = (src != ime.src_vocab.pad_id).sum(dim=1)  # (B,)
        if src.size(1) != length or (syllables != length).any():
            wrong = chunk[int((syllables != length).int().argmax())][0]
            raise ValueError(f"pairs must have one syllable per character, got {wrong!r}")
        tgt_in = torch.tensor([[tgt.bos_id, *tgt.encode(text[:-1])] for _, text in chunk])
        logits = model(src, tgt_in)  # (B, T, V)
        flat = forbid_specials(logits.flatten(0, 1), as_decoder(model), forbid_eos=True)
        for i, row in zip(chunk_ids, flat.argmax(-1).view(len(chunk), -1), strict=True):
            out[i] = tgt.decode(row.tolist())
    return out


@torch.no_grad()
def cross_attention(
    ime: TransformerIME, pinyin: str, text: str, strict: bool = True
) -> torch.Tensor:
    """Cross-attention weights ``(L, H, len(text) + 1, n_syllables)`` of every decoder layer
    and head while the decoder writes ``text`` then EOS (teacher-forced on ``text``).

    A character outside the model's output vocabulary raises ``ValueError``; with
    ``strict=False`` it is fed as ``<unk>``, as the training batches fed it (the sentence
    models leave their rarest characters out of the vocabulary)."""
    return cross_attention_batch(ime, [(pinyin, text)], strict)[:, 0]


@torch.no_grad()
def cross_attention_batch(
    ime: TransformerIME, pairs: Sequence[tuple[str, str]], strict: bool = True
) -> torch.Tensor:
    """:func:`cross_attention` of ``B`` clauses in one forward pass, ``(L, B, H, T + 1, S)``:
    every pinyin has the same number of syllables ``S`` and every text the same length ``T``
    (nothing is padded, so each clause's weights are those it gets alone)."""
    if not pairs:
        raise ValueError("pairs must hold at least one (pinyin, text) clause")
    texts = [text for _, text in pairs]
    src = ime.encode([pinyin for pinyin, _ in pairs])  # (B, S)
    if len({len(text) for text in texts}) > 1 or (src == ime.src_vocab.pad_id).any():
        raise ValueError(
            f"pairs must share one number of syllables and one text length, got {pairs!r:.80}"
        )
    bos = ime.tgt_vocab.bos_id
    tgt_in = torch.tensor([[bos, *ime.tgt_vocab.encode(text, strict=strict)] for text in texts])
    ime.model(src, tgt_in, need_weights=True)
    return torch.stack(ime.model.attention_weights["decoder_cross"])
