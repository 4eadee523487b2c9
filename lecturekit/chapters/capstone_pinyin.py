"""Chapter 7 (capstone): a pinyin input method made of the book's Transformer, and baselines.

Every system answers the same question, ``candidates(pinyins, k)``: for each toneless pinyin
string (``"shi shi"``) its ``k`` best words, best first, like an input method's candidate bar.

- :class:`UnigramBaseline`: the most frequent character for each syllable, independently
  (no context at all);
- :class:`LookupBaseline`: the most frequent training words with exactly this pinyin (knows
  every word it has seen, nothing else);
- :class:`HmmBaseline`: the HMM of the ``Pinyin2Hanzi`` package (character bigrams with its
  own statistics from its own corpus, Viterbi decoding);
- :class:`TransformerIME`: a trained :class:`lecturekit.Transformer` with the book's greedy
  and beam search.

:func:`evaluate` scores a system on a list of words (top-1 and top-k exact match, character
error rate); :func:`compare` runs several systems on several views and :func:`format_table`
prints the result.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from lecturekit.data.pinyin import Word
from lecturekit.decoding import beam_search, greedy
from lecturekit.metrics import edit_distance

__all__ = [
    "IME",
    "UnigramBaseline",
    "LookupBaseline",
    "HmmBaseline",
    "TransformerIME",
    "Scores",
    "evaluate",
    "compare",
    "format_table",
    "candidate_bar",
    "next_char_steps",
    "cross_attention",
]


class IME(Protocol):
    """An input method: ``candidates(pinyins, k)`` -> for each input, up to ``k`` words."""

    name: str
    max_candidates: int

    def candidates(self, pinyins: Sequence[str], k: int) -> list[list[str]]: ...


def _check_k(k: int, limit: int | None = None) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k: expected a positive int, got {k!r}")
    if limit is not None and k > limit:
        raise ValueError(f"k: this system gives at most {limit} candidates, got k={k}")


# ---------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------


class UnigramBaseline:
    """Each syllable on its own: its characters ranked by total frequency in ``words``.

    A word's score is the product of its characters' relative frequencies given their
    syllables; candidates are the ``k`` best products (exact: a small beam over syllables
    keeps the ``k`` best prefixes, which suffices because the scores are independent).
    """

    name = "unigram"
    max_candidates = 1_000

    def __init__(self, words: Sequence[Word]) -> None:
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        for w in words:
            for syllable, char in zip(w.syllables, w.text, strict=True):
                counts[syllable][char] += w.freq
        self.ranked: dict[str, list[tuple[str, float]]] = {}
        for syllable, counter in counts.items():
            total = sum(counter.values())
            ranked = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
            self.ranked[syllable] = [(c, math.log(n / total)) for c, n in ranked]

    def candidates(self, pinyins: Sequence[str], k: int) -> list[list[str]]:
        _check_k(k)
        return [self._one(pinyin, k) for pinyin in pinyins]

    def _one(self, pinyin: str, k: int) -> list[str]:
        beams = [("", 0.0)]
        for syllable in pinyin.split():
            options = self.ranked.get(syllable)
            if not options:
                return []  # a syllable never seen in training
            extended = [(t + c, s + lp) for t, s in beams for c, lp in options[:k]]
            beams = sorted(extended, key=lambda b: (-b[1], b[0]))[:k]
        return [text for text, _ in beams]


class LookupBaseline:
    """A table from pinyin to the training words with that pinyin, most frequent first."""

    name = "lookup table"
    max_candidates = 1_000

    def __init__(self, words: Sequence[Word]) -> None:
        table: dict[str, list[Word]] = defaultdict(list)
        for w in words:
            table[w.pinyin].append(w)
        self.table = {
            p: [w.text for w in sorted(ws, key=lambda w: (-w.freq, w.text))]
            for p, ws in table.items()
        }

    def candidates(self, pinyins: Sequence[str], k: int) -> list[list[str]]:
        _check_k(k)
        return [self.table.get(pinyin, [])[:k] for pinyin in pinyins]


class HmmBaseline:
    """The HMM input method of the ``Pinyin2Hanzi`` package (PyPI ``pinyin2hanzi``, MIT).

    Hidden states are characters, observations syllables; start, transition (character
    bigram) and emission probabilities come with the package, estimated by its author from
    his own corpus. Decoding is Viterbi keeping ``k`` paths. Its spelling of ü differs from
    pypinyin's after j/q/x/y (``xve`` for 学, not ``xue``): syllables are converted with the
    package's own ``simplify_pinyin``.
    """

    name = "HMM (Pinyin2Hanzi)"
    max_candidates = 1_000

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
        _check_k(k)
        out = []
        for pinyin in pinyins:
            observations = self.spell(pinyin)
            if not all(o in self.params.py2hz_dict for o in observations):
                out.append([])  # a syllable the package does not know
                continue
            paths = self._p2h.viterbi(self.params, observations, path_num=k, log=True)
            out.append(["".join(item.path) for item in paths][:k])
        return out


# ---------------------------------------------------------------------------------------------
# The Transformer as an input method
# ---------------------------------------------------------------------------------------------


class TransformerIME:
    """A trained :class:`lecturekit.Transformer` (syllables in, characters out) as an IME.

    ``beam_size = 1`` decodes greedily (one candidate); otherwise beam search returns up to
    ``beam_size`` candidates (its n-best list). Inputs are decoded in batches of at most
    ``batch_size``.
    """

    def __init__(
        self, model: torch.nn.Module, src_vocab: Any, tgt_vocab: Any, beam_size: int = 5
    ) -> None:
        _check_k(beam_size)
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.beam_size = beam_size
        self.max_candidates = beam_size
        self.name = "Transformer, greedy" if beam_size == 1 else f"Transformer, beam {beam_size}"
        self.batch_size = 256

    def encode(self, pinyins: Sequence[str]) -> torch.Tensor:
        """Pinyin strings -> padded source ids ``(B, S)`` (unknown syllables -> ``<unk>``)."""
        rows = [self.src_vocab.encode(p) for p in pinyins]
        if any(not row for row in rows):
            raise ValueError("pinyins: every input needs at least one syllable")
        return torch.nn.utils.rnn.pad_sequence(
            [torch.tensor(r) for r in rows], batch_first=True, padding_value=self.src_vocab.pad_id
        )

    def scored_candidates(self, pinyins: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """For each input, up to ``k`` (word, probability) pairs, most probable first.

        Inputs are decoded in batches of equal length (no padding), each for at most one
        character per syllable plus EOS, so an input's answer does not depend on the others.
        """
        _check_k(k, self.max_candidates)
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, pinyin in enumerate(pinyins):
            by_length[len(pinyin.split())].append(i)
        out: list[list[tuple[str, float]]] = [[] for _ in pinyins]
        for length, indices in sorted(by_length.items()):
            for start in range(0, len(indices), self.batch_size):
                chunk = indices[start : start + self.batch_size]
                src = self.encode([pinyins[i] for i in chunk])  # (B, length)
                for i, row in zip(chunk, self._decode(src, length + 1, k), strict=True):
                    out[i] = row
        return out

    def _decode(self, src: torch.Tensor, max_len: int, k: int) -> list[list[tuple[str, float]]]:
        if self.beam_size == 1:
            tokens, log_probs = greedy(self.model, src, max_len, return_scores=True)
            return [
                [(self.tgt_vocab.decode(row), math.exp(lp))]
                for row, lp in zip(tokens, log_probs.tolist(), strict=True)
            ]
        results = beam_search(self.model, src, self.beam_size, max_len, n_best=k)
        return [
            [(self.tgt_vocab.decode(h.tokens), math.exp(h.log_prob)) for h in hyps]
            for hyps in results
        ]

    def candidates(self, pinyins: Sequence[str], k: int) -> list[list[str]]:
        return [[w for w, _ in row] for row in self.scored_candidates(pinyins, k)]


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scores:
    """``top1``, ``topk`` (gold word among the first ``k`` candidates), ``cer`` (character
    error rate of the first candidate; no candidate counts as deleting every character), over
    ``n`` words (``distinct`` of them different)."""

    top1: float
    topk: float | None
    cer: float
    k: int
    n: int
    distinct: int


def evaluate(system: IME, words: Sequence[Word], k: int = 5) -> Scores:
    """Score ``system`` on ``words`` (repeats count as often as they occur; each distinct
    word is decoded once). ``topk`` is None when the system gives fewer than ``k``
    candidates (greedy decoding)."""
    if not words:
        raise ValueError("words: expected at least one word")
    counts = Counter(words)
    distinct = sorted(counts, key=lambda w: (w.pinyin, w.text))
    kk = min(k, system.max_candidates)
    answers = system.candidates([w.pinyin for w in distinct], kk)
    n = sum(counts.values())
    top1 = topk = edits = chars = 0
    for w, cands in zip(distinct, answers, strict=True):
        c = counts[w]
        first = cands[0] if cands else ""
        top1 += c * (first == w.text)
        topk += c * (w.text in cands[:k])
        edits += c * edit_distance(first, w.text)
        chars += c * len(w.text)
    return Scores(
        top1=top1 / n,
        topk=topk / n if system.max_candidates >= k else None,
        cer=edits / chars,
        k=k,
        n=n,
        distinct=len(distinct),
    )


def compare(
    systems: Sequence[IME], views: dict[str, Sequence[Word]], k: int = 5
) -> dict[tuple[str, str], Scores]:
    """``(system name, view name) -> Scores`` for every system on every view."""
    return {(s.name, v): evaluate(s, words, k) for s in systems for v, words in views.items()}


def format_table(results: dict[tuple[str, str], Scores]) -> str:
    """A plain-text table: one row per system, top-1 / top-k / CER for each view."""
    systems = list(dict.fromkeys(s for s, _ in results))
    views = list(dict.fromkeys(v for _, v in results))
    k = next(iter(results.values())).k
    width = max(len(s) for s in systems)
    lines = [
        (" " * width + "".join(f" | {v:^22s}" for v in views)).rstrip(),
        f"{'system':{width}s}" + f" | {'top-1':>6s} {f'top-{k}':>6s} {'CER':>6s}  " * len(views),
    ]
    lines.append("-" * len(lines[1]))
    for s in systems:
        row = f"{s:{width}s}"
        for v in views:
            r = results[s, v]
            topk = "-" if r.topk is None else f"{r.topk:.3f}"
            row += f" | {r.top1:6.3f} {topk:>6s} {r.cer:6.3f}  "
        lines.append(row.rstrip())
    return "\n".join(lines)


def candidate_bar(ime: TransformerIME, pinyin: str, k: int = 5) -> str:
    """One input's n-best list as an input method's candidate bar with probabilities:
    ``"shi shi  1.实施 0.41  2.事实 0.25 ..."``."""
    row = ime.scored_candidates([pinyin], k)[0]
    return f"{pinyin:14s}" + "  ".join(f"{i}.{w} {p:.2f}" for i, (w, p) in enumerate(row, 1))


@torch.no_grad()
def next_char_steps(
    ime: TransformerIME, pinyin: str, top: int = 3
) -> list[tuple[str, list[tuple[str, float]]]]:
    """Greedy decoding of one input, step by step: for each step the prefix fed to the
    decoder and its ``top`` most probable next tokens with probabilities (``"<eos>"`` ends)."""
    model, tgt = ime.model, ime.tgt_vocab
    src = ime.encode([pinyin])
    memory = model.encode(src)
    prefix = [tgt.bos_id]
    steps = []
    for _ in range(len(pinyin.split()) + 1):
        logits = model.decode(torch.tensor([prefix]), memory)[0, -1]  # (V,)
        probs = torch.softmax(logits.double(), dim=-1)
        best = torch.topk(probs, top)
        shown = "".join(tgt.itos[i] for i in prefix[1:])
        steps.append(
            (
                shown,
                [
                    (tgt.itos[i], p)
                    for i, p in zip(best.indices.tolist(), best.values.tolist(), strict=True)
                ],
            )
        )
        chosen = int(best.indices[0])
        if chosen == tgt.eos_id:
            break
        prefix.append(chosen)
    return steps


@torch.no_grad()
def cross_attention(ime: TransformerIME, pinyin: str, text: str) -> torch.Tensor:
    """Cross-attention weights ``(L, H, len(text) + 1, n_syllables)`` of every decoder layer
    and head while the decoder writes ``text`` then EOS (teacher-forced on ``text``)."""
    src = ime.encode([pinyin])
    tgt_in = torch.tensor([[ime.tgt_vocab.bos_id, *ime.tgt_vocab.encode(text, strict=True)]])
    ime.model(src, tgt_in, need_weights=True)
    layers = ime.model.attention_weights["decoder_cross"]
    return torch.stack([w[0] for w in layers])
