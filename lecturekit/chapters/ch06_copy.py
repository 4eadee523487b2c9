"""Copy mechanism and guided attention: two task priors for attention decoders (p48-p52).

The lecture closes its "tips" with two ideas that are not part of the Transformer itself but
inject knowledge about the task:

* **Copy mechanism** (pointer-generator, See et al. 2017; p48-p50): the output distribution
  is a mixture ``p_gen * p_vocab + (1 - p_gen) * p_copy`` where ``p_copy`` puts the
  cross-attention weight of each source position on that position's token id. A decoder
  can then emit a token it never learned to generate, e.g. a name it reads in the input.
* **Guided attention** (Tachibana et al. 2018; p51-p52): for monotonic tasks (speech
  recognition, TTS) a penalty ``W[t, s] = 1 - exp(-(s/S - t/T)^2 / (2 g^2))`` added to the
  loss pulls the cross-attention towards the diagonal, so the model learns the alignment
  faster and is discouraged from skipping or repeating input.

``AttentionToySeq2Seq`` is a deliberately tiny one-layer attention seq2seq model (no
recurrence, no self-attention) that the exposure-bias chapter trains in a few seconds to show
what each prior adds. It is built from the package's pieces: its attention is
:func:`lecturekit.model.attention.scaled_dot_product_attention`, it trains with
:func:`lecturekit.training.loop.train_steps` and it follows the decoding step protocol, so
:func:`lecturekit.decoding.greedy` decodes it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lecturekit._common import check_bool, check_int, check_number, check_token_ids
from lecturekit.data.vocab import BOS_ID, EOS_ID
from lecturekit.model.attention import scaled_dot_product_attention
from lecturekit.training.loop import Stopping, train_steps

__all__ = [
    "copy_distribution",
    "mix_copy_generate",
    "guided_attention_penalty",
    "guided_attention_loss",
    "AttentionToySeq2Seq",
    "train_toy",
    "GREETING_VOCAB",
    "greeting_batch",
    "stretch_batch",
]


def _check_long(name: str, x: Tensor, ndim: int) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != torch.long:
        raise TypeError(f"{name} must have dtype torch.long, got {x.dtype}")
    if x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")


def copy_distribution(attention: Tensor, src: Tensor, vocab_size: int) -> Tensor:
    """Scatter cross-attention weights onto the source token ids (the pointer of p49).

    Args:
        attention: ``(B, T, S)`` attention of each output step over the source positions;
            each row sums to 1.
        src: ``(B, S)`` source token ids in ``[0, vocab_size)``.
        vocab_size: size ``V`` of the (shared) vocabulary.

    Returns:
        ``(B, T, V)``: ``p_copy[b, t, v] = sum_{s: src[b, s] = v} attention[b, t, s]``. A token
        that occurs twice in the source collects the weight of both positions.
    """
    check_token_ids("src", src, vocab_size, shape="(B, S)")
    if attention.dim() != 3:
        raise ValueError(f"attention must be (B, T, S), got shape {tuple(attention.shape)}")
    B, T, S = attention.shape
    if src.shape != (B, S):
        raise ValueError(f"src must have shape {(B, S)} to match attention, got {tuple(src.shape)}")
    index = src.long().unsqueeze(1).expand(B, T, S)  # (B, T, S): where each weight goes
    out = attention.new_zeros(B, T, vocab_size)
    return out.scatter_add(2, index, attention)


def mix_copy_generate(p_vocab: Tensor, p_copy: Tensor, p_gen: Tensor) -> Tensor:
    """Pointer-generator mixture ``p_gen * p_vocab + (1 - p_gen) * p_copy`` (p49-p50).

    Args:
        p_vocab: ``(B, T, V)`` generation distribution (softmax over the vocabulary).
        p_copy: ``(B, T, V)`` copy distribution from :func:`copy_distribution`.
        p_gen: ``(B, T, 1)`` or ``(B, T)`` probability of generating, in ``[0, 1]``.

    Returns:
        ``(B, T, V)`` final distribution; rows sum to 1 when both inputs do.
    """
    if p_vocab.shape != p_copy.shape:
        raise ValueError(
            f"p_vocab and p_copy must have the same shape, got {tuple(p_vocab.shape)} "
            f"and {tuple(p_copy.shape)}"
        )
    if p_gen.dim() == p_vocab.dim() - 1:
        p_gen = p_gen.unsqueeze(-1)
    if p_gen.shape != (*p_vocab.shape[:-1], 1):
        raise ValueError(
            f"p_gen must have shape {(*p_vocab.shape[:-1], 1)}, got {tuple(p_gen.shape)}"
        )
    if p_gen.numel() and (p_gen.min() < 0 or p_gen.max() > 1):
        raise ValueError("p_gen must lie in [0, 1]")
    return p_gen * p_vocab + (1 - p_gen) * p_copy


def guided_attention_penalty(tgt_len: int, src_len: int, g: float = 0.2) -> Tensor:
    """Penalty matrix of guided attention, ``W[t, s] = 1 - exp(-(s/S - t/T)^2 / (2 g^2))``.

    Zero on the diagonal (monotonic alignment), close to 1 far from it (p51-p52).

    Returns:
        ``(T, S)`` float tensor.
    """
    check_int("tgt_len", tgt_len, minimum=1)
    check_int("src_len", src_len, minimum=1)
    check_number("g", g, minimum=0, exclusive=("minimum",))
    t = torch.arange(tgt_len, dtype=torch.float32).unsqueeze(1) / tgt_len  # (T, 1)
    s = torch.arange(src_len, dtype=torch.float32).unsqueeze(0) / src_len  # (1, S)
    return 1.0 - torch.exp(-((s - t) ** 2) / (2 * g * g))


def guided_attention_loss(
    attention: Tensor, tgt_lengths: Tensor, src_lengths: Tensor, g: float = 0.2
) -> Tensor:
    """Mean of ``attention * W`` over the real (unpadded) cells of each example.

    Args:
        attention: ``(B, T, S)`` cross-attention weights.
        tgt_lengths: ``(B,)`` number of real output steps per example.
        src_lengths: ``(B,)`` number of real source positions per example.
        g: width of the allowed band around the diagonal.

    Returns:
        Scalar tensor, differentiable with respect to ``attention``.
    """
    check_number("g", g, minimum=0, exclusive=("minimum",))
    _check_long("tgt_lengths", tgt_lengths, 1)
    _check_long("src_lengths", src_lengths, 1)
    if attention.dim() != 3:
        raise ValueError(f"attention must be (B, T, S), got shape {tuple(attention.shape)}")
    B, T, S = attention.shape
    if tgt_lengths.shape != (B,) or src_lengths.shape != (B,):
        raise ValueError(f"tgt_lengths and src_lengths must have shape ({B},)")
    if (tgt_lengths < 1).any() or (tgt_lengths > T).any():
        raise ValueError(f"tgt_lengths must lie in [1, {T}]")
    if (src_lengths < 1).any() or (src_lengths > S).any():
        raise ValueError(f"src_lengths must lie in [1, {S}]")
    t = torch.arange(T, device=attention.device).view(1, T, 1)
    s = torch.arange(S, device=attention.device).view(1, 1, S)
    tl = tgt_lengths.view(B, 1, 1).to(attention.dtype)
    sl = src_lengths.view(B, 1, 1).to(attention.dtype)
    penalty = 1.0 - torch.exp(-((s / sl - t / tl) ** 2) / (2 * g * g))  # (B, T, S)
    valid = (t < tgt_lengths.view(B, 1, 1)) & (s < src_lengths.view(B, 1, 1))
    return (attention * penalty * valid).sum() / valid.sum()


class AttentionToySeq2Seq(nn.Module):
    """A one-layer attention seq2seq model, optionally with a pointer-generator head.

    The decoder state at step ``t`` sees only the previous token and the position,
    ``h_t = MLP(E[y_{t-1}] + P[t])``; it queries the source (keys and values from token plus
    position embeddings) with one attention head, giving weights ``a_t`` ``(S,)`` and a
    context ``c_t``. Generation: ``p_vocab = softmax(W [h_t; c_t])``. With ``copy=True`` a gate
    ``p_gen = sigmoid(w . [h_t; c_t])`` mixes in ``p_copy`` (the attention scattered onto the
    source ids).

    Args:
        vocab_size: shared source/target vocabulary size ``V``.
        d_model: width ``D`` of every vector.
        max_len: longest source or target sequence.
        copy: add the pointer-generator head.
        pad_id: padding id (masked in attention).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 32,
        max_len: int = 32,
        copy: bool = False,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        check_int("vocab_size", vocab_size, minimum=1)
        check_int("d_model", d_model, minimum=1)
        check_int("max_len", max_len, minimum=1)
        check_bool("copy", copy)
        check_int("pad_id", pad_id, 0, vocab_size - 1)
        self.vocab_size, self.d_model, self.max_len = vocab_size, d_model, max_len
        self.copy, self.pad_id = copy, pad_id
        self.embed = nn.Embedding(vocab_size, d_model)
        self.src_pos = nn.Embedding(max_len, d_model)
        self.tgt_pos = nn.Embedding(max_len, d_model)
        self.state = nn.Sequential(
            nn.Linear(d_model, d_model), nn.ReLU(), nn.Linear(d_model, d_model)
        )
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(2 * d_model, vocab_size)
        self.gate = nn.Linear(2 * d_model, 1) if copy else None

    def forward(
        self, src: Tensor, tgt_in: Tensor, *, attn_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Teacher-forced pass.

        Args:
            src: ``(B, S)`` source ids.
            tgt_in: ``(B, T)`` decoder inputs (BOS + gold prefix).
            attn_mask: optional ``(B, T, S)`` bool, True = output step ``t`` may not look at
                source position ``s`` (on top of the padding mask); used to constrain the
                alignment (:mod:`lecturekit.chapters.ch06_monotonic`).

        Returns:
            ``log_probs`` ``(B, T, V)`` and cross-attention ``(B, T, S)``.
        """
        log_probs, attention, _ = self.parts(src, tgt_in, attn_mask=attn_mask)
        return log_probs, attention

    def parts(
        self, src: Tensor, tgt_in: Tensor, *, attn_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Like :meth:`forward`, plus the generation gate ``p_gen`` ``(B, T)`` (None without copy)."""
        check_token_ids("src", src, self.vocab_size, shape="(B, S)")
        check_token_ids("tgt_in", tgt_in, self.vocab_size)
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(
                f"src and tgt_in batch sizes differ: {src.shape[0]} vs {tgt_in.shape[0]}"
            )
        src_len, tgt_len = src.shape[1], tgt_in.shape[1]
        if max(src_len, tgt_len) > self.max_len:
            raise ValueError(
                f"sequences longer than max_len={self.max_len}: S={src_len}, T={tgt_len}"
            )
        mem = self.embed(src) + self.src_pos.weight[:src_len]  # (B, S, D)
        h = self.state(self.embed(tgt_in) + self.tgt_pos.weight[:tgt_len])  # (B, T, D)
        padding = (src == self.pad_id).unsqueeze(1)  # (B, 1, S), True = padding
        if attn_mask is not None:
            if attn_mask.dtype != torch.bool or attn_mask.shape != (*tgt_in.shape, src_len):
                raise ValueError(
                    f"attn_mask must be a bool tensor of shape {(*tgt_in.shape, src_len)} "
                    f"(B, T, S), got {attn_mask.dtype} {tuple(attn_mask.shape)}"
                )
            padding = padding | attn_mask  # (B, T, S)
        # one head of the package's scaled dot-product attention (chapter 2)
        context, attention = scaled_dot_product_attention(
            self.query(h), self.key(mem), self.value(mem), attn_mask=padding
        )  # (B, T, D), (B, T, S)
        features = torch.cat([h, context], dim=-1)  # (B, T, 2D)
        p_vocab = self.out(features).softmax(-1)
        if self.gate is None:
            return p_vocab.clamp_min(1e-12).log(), attention, None
        p_gen = torch.sigmoid(self.gate(features))  # (B, T, 1)
        p = mix_copy_generate(p_vocab, copy_distribution(attention, src, self.vocab_size), p_gen)
        return p.clamp_min(1e-12).log(), attention, p_gen.squeeze(-1)

    # -- the step protocol of lecturekit.decoding, so lecturekit.decoding.greedy decodes it --
    bos_id, eos_id = BOS_ID, EOS_ID

    def start(self, src: Tensor, *, src_key_padding_mask: Tensor | None = None) -> tuple:
        """Decoding state: the sources ``(B, S)`` and the tokens fed so far ``(B, 0)``."""
        return src, src.new_empty(src.shape[0], 0)

    def step(self, tokens: Tensor, state: tuple) -> tuple[Tensor, tuple]:
        """Feed ``tokens (B,)``; next-token log-probs ``(B, V)``. Recomputes the prefix (tiny)."""
        src, fed = state
        fed = torch.cat([fed, tokens[:, None]], dim=1)  # (B, t + 1)
        log_probs, _ = self(src, fed)
        return log_probs[:, -1], (src, fed)

    def select(self, state: tuple, index: Tensor) -> tuple:
        return state[0].index_select(0, index), state[1].index_select(0, index)


def train_toy(
    model: AttentionToySeq2Seq,
    make_batch: Callable[[torch.Generator], tuple[Tensor, Tensor, Tensor, Tensor]],
    steps: int,
    lr: float = 3e-3,
    guided_weight: float = 0.0,
    g: float = 0.2,
    seed: int = 0,
) -> list[float]:
    """Train ``model`` with Adam and teacher forcing; optionally add the guided-attention loss.

    Args:
        model: the toy model.
        make_batch: called with a seeded ``torch.Generator``; returns ``src (B, S)``,
            ``tgt_in (B, T)``, ``tgt_out (B, T)`` (padding = ``model.pad_id``, ignored) and
            ``src_lengths (B,)``.
        steps: number of updates.
        lr: Adam learning rate.
        guided_weight: weight of :func:`guided_attention_loss` (0 = plain cross-entropy).
        g: band width of the guided-attention penalty.
        seed: seeds the batch generator (and nothing else: seed the model before creating it).

    Returns:
        The cross-entropy of every step.
    """
    check_int("steps", steps, minimum=1)
    check_number("lr", lr, minimum=0, exclusive=("minimum",))
    check_number("guided_weight", guided_weight, minimum=0)
    check_number("g", g, minimum=0, exclusive=("minimum",))
    check_int("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def step_loss(step: int) -> Tensor | tuple[Tensor, Tensor]:
        src, tgt_in, tgt_out, src_lengths = make_batch(gen)
        log_probs, attention = model(src, tgt_in)
        loss = F.nll_loss(log_probs.transpose(1, 2), tgt_out, ignore_index=model.pad_id)
        if guided_weight == 0:
            return loss
        tgt_lengths = (tgt_out != model.pad_id).sum(1)
        guided = guided_attention_loss(attention, tgt_lengths, src_lengths, g)
        return loss + guided_weight * guided, loss  # minimise both, report the cross-entropy

    model.train()
    history = train_steps(step_loss, opt, Stopping(max_steps=steps))
    model.eval()
    return history


# A tiny "greeting" task for the copy demo (p48: "我是库洛洛" -> "库洛洛你好"): the source is
# 我 是 <name> 。 and the target <name> 你 好 <eos>, where a name is 1-3 name characters.
NAME_CHARS = "库洛李华王芳张伟刘洋陈静杨军赵敏黄磊周婷吴强徐丽孙杰马超朱琳胡斌郭燕何勇高雪林峰罗慧郑浩梁晨谢颖宋凯唐莉许亮韩梅冯涛邓娟曹鹏彭霞曾刚萧蓉田"
GREETING_VOCAB: list[str] = ["<pad>", "<bos>", "<eos>", "我", "是", "。", "你", "好", *NAME_CHARS]
_NAME_OFFSET = 8


def greeting_batch(
    generator: torch.Generator, names: Tensor, batch_size: int = 64
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """A batch of the greeting task: ``我 是 n1..nk 。`` -> ``n1..nk 你 好 <eos>`` (k in 1..3).

    Args:
        generator: seeded random source.
        names: ``(N,)`` ids (into :data:`GREETING_VOCAB`) of the name characters to draw from;
            the book trains on one half of the characters and tests on the other.
        batch_size: number of examples ``B``.

    Returns:
        ``src (B, 6)``, ``tgt_in (B, 6)``, ``tgt_out (B, 6)`` (padded with 0) and
        ``src_lengths (B,)``.
    """
    _check_long("names", names, 1)
    if names.numel() == 0 or names.min() < _NAME_OFFSET or names.max() >= len(GREETING_VOCAB):
        raise ValueError(
            f"names must be name-character ids in [{_NAME_OFFSET}, {len(GREETING_VOCAB)})"
        )
    check_int("batch_size", batch_size, minimum=1)
    lengths = torch.randint(1, 4, (batch_size,), generator=generator)
    picks = names[torch.randint(len(names), (batch_size, 3), generator=generator)]
    src = torch.zeros(batch_size, 6, dtype=torch.long)
    tgt_in = torch.zeros(batch_size, 6, dtype=torch.long)
    tgt_out = torch.zeros(batch_size, 6, dtype=torch.long)
    for b in range(batch_size):
        name = picks[b, : int(lengths[b])].tolist()
        source = [3, 4, *name, 5]  # 我 是 name 。
        target = [*name, 6, 7, 2]  # name 你 好 <eos>
        src[b, : len(source)] = torch.tensor(source)
        tgt_out[b, : len(target)] = torch.tensor(target)
        tgt_in[b, : len(target)] = torch.tensor([1, *target[:-1]])
    return src, tgt_in, tgt_out, (src != 0).sum(1)


def stretch_batch(
    generator: torch.Generator,
    batch_size: int = 64,
    vocab_size: int = 30,
    min_len: int = 3,
    max_len: int = 8,
    repeat: int = 2,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """A monotonic "TTS-like" task: every source token is emitted ``repeat`` times, then EOS.

    Source tokens are drawn from ``[3, vocab_size)``; ``0, 1, 2`` are PAD, BOS, EOS.

    Returns:
        ``src (B, max_len)``, ``tgt_in (B, repeat*max_len+1)``, ``tgt_out`` (same) and
        ``src_lengths (B,)``.
    """
    check_int("batch_size", batch_size, minimum=1)
    check_int("vocab_size", vocab_size, minimum=4)  # ids 0-2 are PAD, BOS, EOS
    check_int("min_len", min_len, minimum=1)
    check_int("max_len", max_len, minimum=min_len)
    check_int("repeat", repeat, minimum=1)
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    tokens = torch.randint(3, vocab_size, (batch_size, max_len), generator=generator)
    T = repeat * max_len + 1
    src = torch.zeros(batch_size, max_len, dtype=torch.long)
    tgt_in = torch.zeros(batch_size, T, dtype=torch.long)
    tgt_out = torch.zeros(batch_size, T, dtype=torch.long)
    for b in range(batch_size):
        n = int(lengths[b])
        source = tokens[b, :n]
        target = [*source.repeat_interleave(repeat).tolist(), 2]
        src[b, :n] = source
        tgt_out[b, : len(target)] = torch.tensor(target)
        tgt_in[b, : len(target)] = torch.tensor([1, *target[:-1]])
    return src, tgt_in, tgt_out, lengths
