"""From lists of token ids to padded batches for teacher forcing.

For a pair (source ids ``x``, target ids ``y``) the decoder is trained with teacher forcing
(lecture p46): its input is ``<bos> y_1 ... y_n`` and the label at each position is
the next gold token, ``y_1 ... y_n <eos>``. ``collate`` builds exactly that, pads every row
to the longest one in the batch and returns the padding masks (True = padding, the
``torch.nn.Transformer`` convention).

``BucketBatchSampler`` puts sequences of similar length in the same batch, so little compute
is spent on padding; it is seeded, so an epoch's batches are reproducible.
"""

from __future__ import annotations

import numbers
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from lecturekit._common import check_bool, check_int
from lecturekit.data.vocab import BOS_ID, EOS_ID, PAD_ID

__all__ = ["Batch", "pad_sequences", "collate", "BucketBatchSampler", "make_loader"]

IdPair = tuple[Sequence[int], Sequence[int]]


@dataclass
class Batch:
    """A padded batch. ``B`` = batch size, ``S`` = longest source, ``T`` = longest target + 1.

    - ``src``: ``(B, S)`` long, source ids, right-padded with ``pad_id``.
    - ``tgt_in``: ``(B, T)`` long, decoder input ``<bos> y_1 ... y_n`` (+ padding).
    - ``tgt_out``: ``(B, T)`` long, labels ``y_1 ... y_n <eos>`` (+ padding).
    - ``src_padding_mask``: ``(B, S)`` bool, True at padding (``src_key_padding_mask``).
    - ``tgt_padding_mask``: ``(B, T)`` bool, True at padding of ``tgt_in`` and ``tgt_out``
      (both have the same length per row).
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    src_padding_mask: torch.Tensor
    tgt_padding_mask: torch.Tensor

    def __len__(self) -> int:
        return self.src.shape[0]

    @property
    def tags(self) -> torch.Tensor:
        """``(B, T - 1)`` long: the targets ``y_1 ... y_n`` without ``<bos>``/``<eos>`` (+
        padding); when every target is as long as its source, one label per source position
        (what an encoder-only tagger is trained on)."""
        return self.tgt_in[:, 1:]

    @property
    def n_target_tokens(self) -> int:
        """Number of label tokens that are not padding (the loss is averaged over these)."""
        return int((~self.tgt_padding_mask).sum())

    def to(self, device: torch.device | str) -> Batch:
        """Copy of the batch with every tensor moved to ``device``."""
        return Batch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def pin_memory(self) -> Batch:
        """Pinned-memory copy (``DataLoader(pin_memory=True)`` calls this)."""
        return Batch(**{f.name: getattr(self, f.name).pin_memory() for f in fields(self)})


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Right-pad lists of ids to one ``(N, L)`` long tensor, ``L`` = longest sequence."""
    if len(seqs) == 0:
        raise ValueError("seqs must contain at least one sequence")
    check_int("pad_id", pad_id, minimum=0)
    rows = [seq.tolist() if isinstance(seq, torch.Tensor) else list(seq) for seq in seqs]
    for i, row in enumerate(rows):
        if bad := [t for t in row if isinstance(t, bool) or not isinstance(t, int)]:
            raise TypeError(f"seqs[{i}] must hold int token ids, got {bad[0]!r:.40}")
    length = max(len(row) for row in rows)
    # one tensor from padded Python lists: a tensor copy per row costs more than the
    # small model's whole forward pass
    return torch.tensor([row + [pad_id] * (length - len(row)) for row in rows], dtype=torch.long)


def _ids(seq: Any, where: str) -> list[int]:
    """``seq`` (a list of ints, a 1-d integer tensor or array) as a list of non-negative int
    ids; anything else is refused naming ``where`` and the type expected."""
    if isinstance(seq, (torch.Tensor, np.ndarray)):
        if isinstance(seq, torch.Tensor):
            integer = not (seq.is_floating_point() or seq.is_complex() or seq.dtype == torch.bool)
        else:
            integer = bool(np.issubdtype(seq.dtype, np.integer))
        if seq.ndim != 1 or not integer:
            raise TypeError(
                f"{where} must be a list of int ids or a 1-d integer tensor, got a "
                f"{seq.ndim}-d {type(seq).__name__} of {seq.dtype}"
            )
        seq = seq.tolist()
    if isinstance(seq, (str, bytes)):
        raise TypeError(f"{where} must be a list of int ids (encode text with a vocabulary first)")
    ids = list(seq)
    for token in ids:
        if isinstance(token, bool) or not isinstance(token, numbers.Integral) or token < 0:
            raise ValueError(f"{where} must hold non-negative int ids, got {token!r}")
    return [int(t) for t in ids]


def collate(
    pairs: Sequence[IdPair], pad_id: int = PAD_ID, bos_id: int = BOS_ID, eos_id: int = EOS_ID
) -> Batch:
    """Pad (source ids, target ids) pairs into a ``Batch`` for teacher forcing.

    Targets must not already contain ``<bos>``/``<eos>``; they are added here. Empty sources
    are rejected (an all-padding source row would give the encoder nothing to attend to).
    """
    if len(pairs) == 0:
        raise ValueError("pairs must contain at least one (source, target) pair")
    if pad_id in (bos_id, eos_id):  # the loss ignores pad_id: that token would never be learned
        raise ValueError(
            f"pad_id must differ from bos_id and eos_id, got pad_id={pad_id}, bos_id={bos_id}, "
            f"eos_id={eos_id}; use e.g. pad_id=0, bos_id=1, eos_id=2"
        )
    sources, targets = [], []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"pairs[{i}] must be a (source ids, target ids) pair, got {pair!r:.60}")
        src = _ids(pair[0], f"pairs[{i}] source")
        tgt = _ids(pair[1], f"pairs[{i}] target")
        if len(src) == 0:
            raise ValueError(f"pairs[{i}] has an empty source")
        if pad_id in src or pad_id in tgt:
            raise ValueError(f"pairs[{i}] contains pad_id={pad_id}; pass unpadded id lists")
        if bos_id in tgt or eos_id in tgt:
            raise ValueError(
                f"pairs[{i}] target contains bos_id/eos_id ({bos_id}/{eos_id}); "
                "collate adds them, pass the bare target ids"
            )
        sources.append(src)
        targets.append(tgt)
    src = pad_sequences(sources, pad_id)
    tgt_in = pad_sequences([[bos_id, *t] for t in targets], pad_id)
    tgt_out = pad_sequences([[*t, eos_id] for t in targets], pad_id)
    return Batch(
        src=src,
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        src_padding_mask=src == pad_id,
        tgt_padding_mask=tgt_out == pad_id,
    )


class BucketBatchSampler(Sampler[list[int]]):
    """Yield lists of indices whose sequences have similar lengths.

    Each epoch: shuffle all indices (seeded by ``seed`` and the epoch), cut them into pools of
    ``batch_size * pool_batches`` indices, sort each pool by length, cut pools into batches
    and shuffle the order of the batches. Without ``shuffle`` the indices are simply sorted by
    length (deterministic evaluation batches). Call ``set_epoch(e)`` for a new order each epoch
    (the ``DataLoader`` iterates the sampler once per epoch; without ``set_epoch`` the epoch
    counter advances by one each time a shuffled iteration starts).
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        pool_batches: int = 50,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if not isinstance(pool_batches, int) or pool_batches < 1:
            raise ValueError(f"pool_batches must be a positive int, got {pool_batches!r}")
        if isinstance(lengths, (str, bytes)) or len(lengths) == 0:
            raise ValueError(f"lengths must be a non-empty list of ints, got {lengths!r:.60}")
        self.lengths = _ids(lengths, "lengths")
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.pool_batches = pool_batches
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Use the batch order of epoch ``epoch`` for the next iteration."""
        self.epoch = epoch

    def __len__(self) -> int:
        n = len(self.lengths)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        indices = list(range(len(self.lengths)))
        if not self.shuffle:
            indices.sort(key=lambda i: self.lengths[i])
            batches = self._cut(indices)
        else:
            rng = random.Random(self.seed * 1_000_003 + self.epoch)
            rng.shuffle(indices)
            pool = self.batch_size * self.pool_batches
            batches = []
            for start in range(0, len(indices), pool):
                chunk = sorted(indices[start : start + pool], key=lambda i: self.lengths[i])
                batches.extend(self._cut(chunk))
            rng.shuffle(batches)
            self.epoch += 1
        yield from batches

    def _cut(self, indices: list[int]) -> list[list[int]]:
        batches = [
            indices[i : i + self.batch_size] for i in range(0, len(indices), self.batch_size)
        ]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return batches


def make_loader(
    pairs: Sequence[IdPair],
    batch_size: int = 64,
    shuffle: bool = True,
    seed: int = 0,
    bucket: bool = True,
    drop_last: bool = False,
    pad_id: int = PAD_ID,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> DataLoader:
    """A ``DataLoader`` yielding ``Batch`` es over (source ids, target ids) pairs.

    With ``bucket=True`` batches group similar lengths (``BucketBatchSampler``); otherwise
    batches are consecutive runs of a seeded random permutation (or of the given order when
    ``shuffle=False``). Runs in the main process (``num_workers=0``): the toy data is tiny.
    """
    if len(pairs) == 0:
        raise ValueError("pairs must not be empty")
    check_int("batch_size", batch_size, 1)  # both paths; DataLoader's own message is obscure
    check_bool("shuffle", shuffle)
    check_bool("bucket", bucket)
    check_bool("drop_last", drop_last)

    def collate_fn(items: Sequence[IdPair]) -> Batch:
        return collate(items, pad_id=pad_id, bos_id=bos_id, eos_id=eos_id)

    data = list(pairs)
    if bucket:
        lengths = [max(len(s), len(t) + 1) for s, t in data]
        sampler = BucketBatchSampler(lengths, batch_size, shuffle, seed, drop_last)
        return DataLoader(data, batch_sampler=sampler, collate_fn=collate_fn)
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        data,
        batch_size=batch_size,
        shuffle=shuffle,
        generator=generator,
        drop_last=drop_last,
        collate_fn=collate_fn,
    )
