"""Autoregressive (AT) vs non-autoregressive (NAT) decoding on a multi-modal toy example (p35-p36).

One source sentence often has several correct translations ("thank you" / "many thanks").
The two decoders factorise the probability of an output ``y = (y_1, ..., y_L)`` differently:

- AT (autoregressive, p24-p34): ``P(y) = P(y_1) P(y_2 | y_1) ... P(EOS | y_1..y_L)``. Each
  token is chosen knowing the tokens before it, so the decoder commits to one translation.
- NAT (non-autoregressive, p35): ``P(y) = P(L) * prod_i P(y_i | L)``. A length predictor picks
  ``L``, then every position is filled at once, independently of the others. With several
  valid translations, each position's distribution mixes all of them and independent choices
  can produce an output that is none of them ("thank thanks"): the multi-modality problem.

Both models here are fitted by maximum likelihood with full probability tables, i.e. by
counting. That is the best each factorisation can possibly do on the data (a neural network
trained to convergence approaches these tables), so whatever NAT gets wrong here is caused by
the factorisation itself, not by a weak network. The AT table decodes like any model of the
book: as a :class:`lecturekit.decoding.TableDecoder`, with the package's
:func:`~lecturekit.decoding.greedy` and :func:`~lecturekit.decoding.sample`. The NAT table
has no prefix to condition on, so it draws its positions itself. Fitting and the exact
distributions are pure Python (importing this module does not import torch).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from lecturekit._common import EOS_ID, SPECIAL_TOKENS, check_int

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from lecturekit.decoding.table import TableDecoder

__all__ = ["EOS", "AutoregressiveTable", "NonAutoregressiveTable", "valid_fraction"]

EOS = SPECIAL_TOKENS[EOS_ID]  # "<eos>", the end token of every table

Output = tuple[str, ...]
K = TypeVar("K")


def _validate_targets(targets: Sequence[Sequence[str]]) -> list[Output]:
    if isinstance(targets, str) or not isinstance(targets, Sequence):
        raise TypeError(
            f"targets must be a sequence of token sequences, got {type(targets).__name__}"
        )
    if len(targets) == 0:
        raise ValueError("targets must contain at least one output sequence, got 0")
    clean: list[Output] = []
    for i, target in enumerate(targets):
        if isinstance(target, str) or not isinstance(target, Sequence):
            raise TypeError(
                f"targets[{i}] must be a sequence of str tokens, got {type(target).__name__}"
            )
        if len(target) == 0:
            raise ValueError(f"targets[{i}] must have at least one token, got an empty sequence")
        for token in target:
            if not isinstance(token, str):
                raise TypeError(f"targets[{i}] holds a {type(token).__name__}, expected str tokens")
            if token == EOS:
                raise ValueError(f"targets[{i}] contains the reserved token {EOS!r}")
        clean.append(tuple(target))
    return clean


def _check_sample_args(n: int, seed: int) -> None:
    check_int("n", n, minimum=0)
    check_int("seed", seed)


def _draw(dist: dict[K, float], rng: random.Random) -> K:
    keys = list(dist)
    return rng.choices(keys, weights=[dist[k] for k in keys])[0]


def _argmax(dist: dict[str, float]) -> str:
    # ties go to the token seen first in the data, so greedy output is reproducible
    return max(dist, key=lambda t: dist[t])


@dataclass(frozen=True)
class AutoregressiveTable:
    """AT model: next-token distributions conditioned on the whole prefix (p24-p34).

    ``next_token[prefix]`` maps each possible next token (including ``EOS``) to its probability.
    """

    next_token: dict[Output, dict[str, float]]

    @classmethod
    def fit(cls, targets: Sequence[Sequence[str]]) -> AutoregressiveTable:
        """Maximum-likelihood fit: count how often each token follows each prefix."""
        data = _validate_targets(targets)
        counts: dict[Output, Counter[str]] = defaultdict(Counter)
        for target in data:
            for t in range(len(target) + 1):
                counts[target[:t]][target[t] if t < len(target) else EOS] += 1
        table = {
            prefix: {tok: c / sum(ctr.values()) for tok, c in ctr.items()}
            for prefix, ctr in counts.items()
        }
        return cls(next_token=table)

    def distribution(self) -> dict[Output, float]:
        """Exact probability of every complete output, by walking the prefix tree."""
        result: dict[Output, float] = {}
        stack: list[tuple[Output, float]] = [((), 1.0)]
        while stack:
            prefix, p = stack.pop()
            for token, q in self.next_token[prefix].items():
                if token == EOS:
                    result[prefix] = result.get(prefix, 0.0) + p * q
                else:
                    stack.append((prefix + (token,), p * q))
        return result

    def decoder(self) -> TableDecoder:
        """The table as a :class:`lecturekit.decoding.TableDecoder`, which every decoding
        strategy of the book runs on. Symbol ids follow the order in which the fit first met
        each token, so argmax ties go to ``EOS``, then to the token seen first."""
        # here, not at the top: this module stays torch-free until a table is decoded
        from lecturekit.decoding.table import TableDecoder

        seen = {tok: None for dist in self.next_token.values() for tok in dist if tok != EOS}
        return TableDecoder(self.next_token, symbols=list(seen))

    def _max_len(self) -> int:
        """Tokens of the longest output, EOS included."""
        return 1 + max(len(prefix) for prefix in self.next_token)

    def sample(self, n: int, seed: int = 0) -> list[Output]:
        """Draw ``n`` outputs token by token, feeding each choice back in (ancestral sampling
        with :func:`lecturekit.decoding.sample`, seeded with ``seed``)."""
        # here, not at the top: this module stays torch-free until a table is decoded
        from lecturekit.decoding.search import sample

        _check_sample_args(n, seed)
        if n == 0:
            return []
        decoder = self.decoder()
        drawn = sample(decoder, n, self._max_len(), seed=seed).tokens
        return [_symbols(decoder, row) for row in drawn.tolist()]

    def greedy(self) -> Output:
        """Most probable next token at every step until EOS (:func:`lecturekit.decoding.greedy`)."""
        # here, not at the top: this module stays torch-free until a table is decoded
        from lecturekit.decoding.search import greedy

        decoder = self.decoder()
        return _symbols(decoder, greedy(decoder, None, self._max_len()).tokens[0].tolist())


def _symbols(decoder: TableDecoder, ids: list[int]) -> Output:
    """Decoded ids (EOS, then padding, at the end) -> the output's tokens."""
    return tuple(decoder.itos[i] for i in ids if i > decoder.eos_id)


@dataclass(frozen=True)
class NonAutoregressiveTable:
    """NAT model: a length distribution and, per length, independent per-position marginals (p35).

    ``length[L]`` is P(L); ``positions[L][i]`` maps each token to P(y_i = token | L).
    """

    length: dict[int, float]
    positions: dict[int, list[dict[str, float]]]

    @classmethod
    def fit(cls, targets: Sequence[Sequence[str]]) -> NonAutoregressiveTable:
        """Maximum-likelihood fit: count lengths, then count tokens per (length, position)."""
        data = _validate_targets(targets)
        length_counts = Counter(len(t) for t in data)
        positions: dict[int, list[dict[str, float]]] = {}
        for length, n_len in length_counts.items():
            same = [t for t in data if len(t) == length]
            positions[length] = [
                {tok: c / n_len for tok, c in Counter(t[i] for t in same).items()}
                for i in range(length)
            ]
        total = len(data)
        return cls(
            length={length: c / total for length, c in length_counts.items()},
            positions=positions,
        )

    def distribution(self) -> dict[Output, float]:
        """Exact probability of every output the model can emit: P(L) * prod_i P(y_i | L)."""
        result: dict[Output, float] = {}
        for length, p_len in self.length.items():
            columns = self.positions[length]
            for combo in itertools.product(*(list(col) for col in columns)):
                p = p_len
                for col, token in zip(columns, combo, strict=True):
                    p *= col[token]
                result[combo] = result.get(combo, 0.0) + p
        return result

    def sample(self, n: int, seed: int = 0) -> list[Output]:
        """Draw ``n`` outputs: pick a length, then every position independently."""
        _check_sample_args(n, seed)
        rng = random.Random(seed)
        outputs = []
        for _ in range(n):
            length = _draw(self.length, rng)
            outputs.append(tuple(_draw(col, rng) for col in self.positions[length]))
        return outputs

    def greedy(self) -> Output:
        """Most probable length, then the most probable token at each position, all at once."""
        length = max(self.length, key=lambda k: self.length[k])
        return tuple(_argmax(col) for col in self.positions[length])


def valid_fraction(distribution: dict[Output, float], valid: Sequence[Sequence[str]]) -> float:
    """Probability mass that ``distribution`` puts on outputs listed in ``valid``."""
    allowed = set(_validate_targets(valid))
    return sum(p for out, p in distribution.items() if out in allowed)
