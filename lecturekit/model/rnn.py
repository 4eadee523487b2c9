"""An RNN encoder-decoder with and without additive (Bahdanau) attention (chapter 1).

Chapter 1 measures the fixed-context bottleneck of the classic RNN encoder-decoder: the
decoder sees the input only through the encoder's last state. Bahdanau, Cho and Bengio
(2015) removed it while keeping the RNNs: at every output step the decoder scores *every*
encoder state against its own previous state with a small feed-forward network (additive
attention, chapter 2's :math:`e_i = w^\\top \\tanh(W_q q + W_k k_i)`), takes the softmax over
the non-padded source positions and feeds the weighted sum of the encoder states (the
context ``c_t``) to its GRU cell.

:class:`RNNSeq2Seq` is both models in one class, so they differ in nothing but that:

* ``attention=False`` (Cho et al. 2014): ``c_t = h_S``, the encoder's last state, at every
  step;
* ``attention=True`` (Bahdanau et al. 2015): ``c_t = sum_i a_{t,i} h_i`` with
  ``a_t = softmax_i(w . tanh(W_q s_{t-1} + W_k h_i))`` over the non-padded positions.

Decoder step (both): ``s_t = GRUCell([E y_{t-1}; c_t], s_{t-1})``, ``s_0 = h_S``,
logits ``W_o [s_t; c_t]``. The model follows the decoding step protocol, so
:func:`lecturekit.decoding.greedy` decodes it; chapter 1's shipped models are trained and
scored by :mod:`lecturekit.pretrained.rnn`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lecturekit._common import BOS_ID, EOS_ID, PAD_ID, check_int, check_token_ids

__all__ = ["AdditiveAttention", "RNNSeq2SeqConfig", "RNNSeq2Seq"]


class AdditiveAttention(nn.Module):
    """Additive attention (Bahdanau et al. 2015): ``e_i = w . tanh(W_q q + W_k k_i)``.

    Args:
        d_query: size of the query (the decoder state).
        d_key: size of each key (an encoder state); the keys are also the values.
        d_attn: width of the hidden layer of the scoring network.
    """

    def __init__(self, d_query: int, d_key: int, d_attn: int) -> None:
        super().__init__()
        for name, value in (("d_query", d_query), ("d_key", d_key), ("d_attn", d_attn)):
            check_int(name, value, minimum=1)
        self.w_q = nn.Linear(d_query, d_attn, bias=False)
        self.w_k = nn.Linear(d_key, d_attn, bias=False)
        self.w = nn.Linear(d_attn, 1, bias=False)

    def scores(self, query: Tensor, keys: Tensor) -> Tensor:
        """Unnormalised scores ``(B, S)`` of ``query (B, Dq)`` against ``keys (B, S, Dk)``."""
        if query.dim() != 2 or keys.dim() != 3 or query.shape[0] != keys.shape[0]:
            raise ValueError(
                f"query must be (B, Dq) and keys (B, S, Dk) with the same B, got "
                f"{tuple(query.shape)} and {tuple(keys.shape)}"
            )
        hidden = torch.tanh(self.w_q(query)[:, None, :] + self.w_k(keys))  # (B, S, A)
        return self.w(hidden).squeeze(-1)  # (B, S)

    def forward(
        self, query: Tensor, keys: Tensor, *, key_padding_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query (B, Dq)`` over ``keys (B, S, Dk)``.

        ``key_padding_mask`` ``(B, S)`` bool, True = padding: those positions get weight
        exactly 0. Every row needs at least one real key.

        Returns:
            ``(context (B, Dk), weights (B, S))``; each row of ``weights`` sums to 1.
        """
        scores = self.scores(query, keys)
        if key_padding_mask is not None:
            if key_padding_mask.dtype != torch.bool or key_padding_mask.shape != scores.shape:
                raise ValueError(
                    f"key_padding_mask must be bool of shape {tuple(scores.shape)} (True = "
                    f"padding), got {key_padding_mask.dtype} {tuple(key_padding_mask.shape)}"
                )
            if bool(key_padding_mask.all(dim=-1).any()):
                raise ValueError("key_padding_mask masks every key of some row; keep one real key")
            scores = scores.masked_fill(key_padding_mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, S)
        context = (weights[:, :, None] * keys).sum(dim=1)  # (B, Dk)
        return context, weights


@dataclass(frozen=True)
class RNNSeq2SeqConfig:
    """Sizes of :class:`RNNSeq2Seq`; ``attention`` switches the Bahdanau context on."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_embed: int = 16
    d_hidden: int = 32
    attention: bool = True
    pad_id: int = PAD_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_embed", "d_hidden"):
            check_int(name, getattr(self, name), minimum=1)
        if not isinstance(self.attention, bool):
            raise TypeError(f"attention must be a bool, got {type(self.attention).__name__}")


@dataclass
class _State:
    """Decoding state: decoder state ``s (N, H)``, encoder states ``(N, S, H)``, their
    padding mask ``(N, S)`` and the encoder's last state ``(N, H)``."""

    s: Tensor
    memory: Tensor
    padding: Tensor
    last: Tensor

    def select(self, index: Tensor) -> _State:
        return _State(
            *(t.index_select(0, index) for t in (self.s, self.memory, self.padding, self.last))
        )


class RNNSeq2Seq(nn.Module):
    """GRU encoder-decoder, with (``config.attention``) or without additive attention.

    ``forward(src, tgt_in)`` is the teacher-forced pass; ``start`` / ``step`` / ``select``
    are the decoding protocol of :mod:`lecturekit.decoding`. After a forward pass with
    ``need_weights=True``, the attention weights are returned ``(B, T, S)``.
    """

    def __init__(self, config: RNNSeq2SeqConfig) -> None:
        super().__init__()
        if not isinstance(config, RNNSeq2SeqConfig):
            raise TypeError(f"config must be an RNNSeq2SeqConfig, got {type(config).__name__}")
        c = self.config = config
        self.bos_id, self.eos_id, self.pad_id = c.bos_id, c.eos_id, c.pad_id
        self.vocab_size = c.tgt_vocab_size
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_embed, padding_idx=c.pad_id)
        self.encoder = nn.GRU(c.d_embed, c.d_hidden, batch_first=True)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_embed, padding_idx=c.pad_id)
        self.decoder = nn.GRUCell(c.d_embed + c.d_hidden, c.d_hidden)
        self.out = nn.Linear(2 * c.d_hidden, c.tgt_vocab_size)
        # created last, so that with the same seed every other layer starts from the same
        # weights with and without attention
        self.attention = (
            AdditiveAttention(c.d_hidden, c.d_hidden, c.d_hidden) if c.attention else None
        )

    def _padding(self, src: Tensor, src_key_padding_mask: Tensor | None) -> Tensor:
        """The ``(B, S)`` bool padding mask of right-padded ``src``, checked.

        The encoder reads left to right and the last state is taken at ``length - 1``,
        so only right padding gives the right answer: a real token after padding (left
        padding, or a hole in the mask) is rejected rather than silently misread.
        """
        if src_key_padding_mask is None:
            padding, name = src == self.pad_id, "src"
            fix = f"put pad_id = {self.pad_id} only after the last real token of each row"
        else:
            padding, name = src_key_padding_mask, "src_key_padding_mask"
            if not isinstance(padding, Tensor) or padding.dtype != torch.bool:
                got = padding.dtype if isinstance(padding, Tensor) else type(padding).__name__
                raise TypeError(
                    f"src_key_padding_mask must be a bool tensor (True = padding), got {got}; "
                    "pass e.g. src == pad_id"
                )
            if padding.shape != src.shape:
                raise ValueError(
                    f"src_key_padding_mask must have the shape of src (B, S)="
                    f"{tuple(src.shape)}, got {tuple(padding.shape)}"
                )
            fix = "True may only follow the last real token of each row"
        holes = (padding[:, :-1] & ~padding[:, 1:]).any(dim=1)  # (B,) real token after padding
        if bool(holes.any()):
            raise ValueError(
                f"{name} must be right-padded (the GRU encoder reads left to right), but a "
                f"real token follows padding in row(s) {holes.nonzero().flatten().tolist()}; "
                f"{fix}"
            )
        if bool(padding.all(dim=1).any()):
            raise ValueError(f"{name} has a row with no real token; every source needs one")
        return padding

    def encode(self, src: Tensor, *, src_key_padding_mask: Tensor | None = None) -> _State:
        """Run the encoder over ``src (B, S)``, right-padded; the state of step 0.

        ``src_key_padding_mask`` ``(B, S)`` bool, True = padding (default ``src == pad_id``)
        must be True only after each row's last real token. The encoder's last state is
        taken at that token, so padding never enters the context of the model without
        attention. Left padding or a hole in the mask raises ``ValueError``.
        """
        check_token_ids("src", src, self.config.src_vocab_size, shape="(B, S)")
        padding = self._padding(src, src_key_padding_mask)  # (B, S)
        lengths = (~padding).sum(dim=1)  # (B,)
        memory, _ = self.encoder(self.src_embed(src))  # (B, S, H)
        last = memory[torch.arange(src.shape[0]), lengths - 1]  # (B, H)
        return _State(s=last, memory=memory, padding=padding, last=last)

    def _step(self, tokens: Tensor, state: _State) -> tuple[Tensor, _State, Tensor | None]:
        """One decoder step: ``tokens (N,)`` -> logits ``(N, V)``, next state, weights ``(N, S)``."""
        weights = None
        if self.attention is None:
            context = state.last  # (N, H): the same fixed vector at every step
        else:
            context, weights = self.attention(
                state.s, state.memory, key_padding_mask=state.padding
            )  # (N, H), (N, S)
        s = self.decoder(torch.cat([self.tgt_embed(tokens), context], dim=-1), state.s)
        logits = self.out(torch.cat([s, context], dim=-1))  # (N, V)
        return logits, _State(s, state.memory, state.padding, state.last), weights

    def forward(
        self, src: Tensor, tgt_in: Tensor, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher-forced pass.

        Args:
            src: ``(B, S)`` source ids, right-padded with ``pad_id``.
            tgt_in: ``(B, T)`` decoder inputs ``<bos> y_1 ... y_{T-1}``.
            need_weights: also return the attention weights.

        Returns:
            ``(logits (B, T, V), weights (B, T, S) or None)``; weights are None without
            attention or when not asked for.
        """
        check_token_ids("tgt_in", tgt_in, self.config.tgt_vocab_size)
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(
                f"src and tgt_in batch sizes differ: {src.shape[0]} vs {tgt_in.shape[0]}"
            )
        state = self.encode(src)
        logits: list[Tensor] = []
        weights: list[Tensor] = []  # stays empty without attention
        for t in range(tgt_in.shape[1]):  # sequential: step t needs the state of step t - 1
            step_logits, state, step_weights = self._step(tgt_in[:, t], state)
            logits.append(step_logits)
            if step_weights is not None:
                weights.append(step_weights)
        attention = torch.stack(weights, dim=1) if need_weights and self.attention else None
        return torch.stack(logits, dim=1), attention

    # -- the step protocol of lecturekit.decoding, so lecturekit.decoding.greedy decodes it --
    def start(self, src: Tensor, *, src_key_padding_mask: Tensor | None = None) -> _State:
        return self.encode(src, src_key_padding_mask=src_key_padding_mask)

    def step(self, tokens: Tensor, state: _State) -> tuple[Tensor, _State]:
        logits, state, _ = self._step(tokens, state)
        return F.log_softmax(logits, dim=-1), state

    def select(self, state: _State, index: Tensor) -> _State:
        return state.select(index)
