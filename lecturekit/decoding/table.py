"""``TableDecoder``: a "model" written down as a table of conditional probabilities.

With it the book reproduces the lecture's example where greedy search loses to beam search
(p53): every decoding strategy runs on it through the step protocol of
:mod:`lecturekit.decoding.protocol`, exactly as on a trained Transformer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from lecturekit._common import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS

__all__ = ["TableDecoder"]


class TableDecoder:
    """A "model" given by a table of conditional probabilities ``P(next | prefix)``.

    Args:
        table: maps a prefix to a distribution over the next symbol. A prefix is a tuple of
            symbols (``()`` for the first step) or, when all symbols are single characters, a
            string (``""``, ``"A"``, ``"AB"``). A distribution maps symbols to
            probabilities that sum to 1; missing symbols have probability 0. The end symbol
            is written ``"<eos>"``.
        symbols: the output symbols in id order; by default the sorted symbols of ``table``.
        default: distribution for prefixes the table does not list; ``None`` (default) makes
            an unlisted prefix an error.

    Ids: ``0`` = ``<pad>``, ``1`` = ``<bos>``, ``2`` = ``<eos>``, then ``symbols``. The
    source is ignored: ``start(src)`` only reads the batch size (``None`` means 1, an ``int``
    is a batch size, a tensor ``(B, ...)`` gives ``B``).

    Example (a two-symbol table in which greedy search loses to beam search, p53)::

        dec = TableDecoder({"": {"A": 0.6, "B": 0.4}, "A": {"A": 0.55, "B": 0.45}, ...})
        beam_search(dec, None, beam_size=2, max_len=3)
    """

    pad_id = PAD_ID
    bos_id = BOS_ID
    eos_id = EOS_ID
    EOS = SPECIAL_TOKENS[EOS_ID]

    def __init__(
        self,
        table: Mapping[Any, Mapping[str, float]],
        symbols: Sequence[str] | None = None,
        default: Mapping[str, float] | None = None,
    ) -> None:
        if not isinstance(table, Mapping) or not table:
            raise TypeError(f"table must be a non-empty mapping, got {table!r}")
        seen = {s for dist in table.values() for s in dist} - {self.EOS}
        if default is not None:
            seen |= set(default) - {self.EOS}
        if symbols is None:
            symbols = sorted(seen)
        symbols = list(symbols)
        if missing := seen - set(symbols):
            raise ValueError(f"symbols: missing {sorted(missing)} used in table")
        if len(set(symbols)) != len(symbols) or self.EOS in symbols:
            raise ValueError(f"symbols must be distinct and without '<eos>', got {symbols}")
        self.symbols = symbols
        # the package's special tokens (ids 0-2) without <unk>: a table knows all its symbols
        self.itos = [*SPECIAL_TOKENS[: EOS_ID + 1], *symbols]
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.vocab_size = len(self.itos)
        self._single_char = all(len(s) == 1 for s in symbols)
        self._table = {self._key(k): self._row(d, f"table[{k!r}]") for k, d in table.items()}
        self._default = None if default is None else self._row(default, "default")

    def _key(self, prefix: Any) -> tuple[int, ...]:
        if isinstance(prefix, str):
            if not self._single_char:
                raise TypeError("table: string prefixes need single-character symbols")
            prefix = tuple(prefix)
        try:
            return tuple(self.stoi[s] for s in prefix)
        except KeyError as err:
            raise ValueError(f"table: prefix {prefix!r} uses unknown symbol {err}") from None

    def _row(self, dist: Mapping[str, float], name: str) -> Tensor:
        probs = torch.zeros(self.vocab_size, dtype=torch.float64)
        for s, p in dist.items():
            if s not in self.stoi or self.stoi[s] < self.eos_id:
                raise ValueError(f"{name}: unknown symbol {s!r}")
            if not 0.0 <= float(p) <= 1.0:
                raise ValueError(f"{name}: probability of {s!r} must be in [0, 1], got {p}")
            probs[self.stoi[s]] = float(p)
        if abs(float(probs.sum()) - 1.0) > 1e-6:
            raise ValueError(f"{name}: probabilities must sum to 1, got {float(probs.sum())}")
        return probs.log()

    def encode(self, symbols: Sequence[str] | str) -> list[int]:
        """Symbols -> ids."""
        return [self.stoi[s] for s in symbols]

    def decode(self, ids: Sequence[int] | Tensor, sep: str = "") -> str:
        """Ids -> text, without PAD/BOS/EOS."""
        ids = ids.tolist() if isinstance(ids, Tensor) else ids
        return sep.join(self.itos[i] for i in ids if i > self.eos_id)

    def start(
        self, src: Any = None, *, src_key_padding_mask: Tensor | None = None
    ) -> list[tuple[int, ...] | None]:
        if src is None:
            batch = 1
        elif isinstance(src, int):
            batch = src
        elif isinstance(src, Tensor):
            batch = src.shape[0]
        else:
            raise TypeError(f"src must be None, an int or a tensor, got {type(src).__name__}")
        return [None] * batch  # None: BOS not fed yet

    def step(
        self, tokens: Tensor, state: Sequence[tuple[int, ...] | None]
    ) -> tuple[Tensor, list[tuple[int, ...]]]:
        new_state: list[tuple[int, ...]] = []
        rows: list[Tensor] = []
        for tok, prefix in zip(tokens.tolist(), state, strict=True):
            if prefix is None:
                prefix = ()  # this step fed BOS
            elif tok >= self.eos_id:
                prefix = (*prefix, tok)
            new_state.append(prefix)
            if prefix in self._table:
                rows.append(self._table[prefix])
            elif self._default is not None or (prefix and prefix[-1] == self.eos_id):
                # after EOS the row is finished; its distribution is never used
                rows.append(self._default if self._default is not None else self._table_eos())
            else:
                raise ValueError(
                    f"TableDecoder: no distribution for prefix {self.decode(prefix)!r}"
                )
        return torch.stack(rows), new_state

    def _table_eos(self) -> Tensor:
        row = torch.full((self.vocab_size,), -math.inf, dtype=torch.float64)
        row[self.eos_id] = 0.0
        return row

    def select(
        self, state: Sequence[tuple[int, ...] | None], index: Tensor
    ) -> list[tuple[int, ...] | None]:
        return [state[i] for i in index.tolist()]
