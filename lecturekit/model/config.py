"""Model configuration: one dataclass holds every size and switch of the Transformer.

The defaults are the base model of "Attention Is All You Need" (Vaswani et al., 2017), the
model Hung-yi Lee's lecture draws on its slides (encoder p18-p21, decoder p22-p43).
``TransformerConfig`` describes the whole model; ``LayerConfig`` is the part one encoder or
decoder layer needs (``TransformerConfig.layer``), passed down as one object, as nanoGPT's
``Block(config)``.

Both are frozen and validated when they are created, so a wrong size fails here with a
clear message, not deep inside a matrix multiplication, and no field can be set to a bad
value later: change one with ``dataclasses.replace(config, dropout=0.0)``, which validates
the new config again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from lecturekit._common import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    check_bool,
    check_choice,
    check_int,
    check_number,
)

__all__ = [
    "ATTENTION_BACKENDS",
    "LAYERNORM_BACKENDS",
    "ACTIVATIONS",
    "POSITIONAL_ENCODINGS",
    "LayerConfig",
    "TransformerConfig",
]

ATTENTION_BACKENDS = ("math", "sdpa", "triton")
LAYERNORM_BACKENDS = ("torch", "triton")
ACTIVATIONS = ("relu", "gelu")
POSITIONAL_ENCODINGS = ("sinusoidal", "learned")


def check_heads(d_model: int, n_heads: int) -> None:
    """``d_model`` and ``n_heads`` positive ints, ``d_model`` divisible by ``n_heads``."""
    check_int("d_model", d_model, minimum=1)
    check_int("n_heads", n_heads, minimum=1)
    if d_model % n_heads != 0:
        raise ValueError(
            f"d_model must be divisible by n_heads, got d_model={d_model} and "
            f"n_heads={n_heads} (remainder {d_model % n_heads})"
        )


@dataclass(frozen=True)
class LayerConfig:
    """Sizes and switches of one encoder or decoder layer (and of a stack of them).

    ``TransformerConfig.layer`` derives it from a model's config; ``LayerConfig(d_model=32,
    n_heads=4, d_ff=64)`` builds one for a layer alone. The fields mean what they mean in
    :class:`TransformerConfig`; the defaults are the paper's base model.
    """

    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    activation: str = "relu"
    norm_first: bool = False
    layer_norm_eps: float = 1e-5
    attention_backend: str = "math"
    layernorm_backend: str = "torch"

    def __post_init__(self) -> None:
        check_heads(self.d_model, self.n_heads)
        check_int("d_ff", self.d_ff, minimum=1)
        check_number("dropout", self.dropout, 0.0, 1.0, exclusive=("maximum",))
        check_choice("activation", self.activation, ACTIVATIONS)
        check_bool("norm_first", self.norm_first)
        check_number("layer_norm_eps", self.layer_norm_eps, minimum=0.0, exclusive=("minimum",))
        check_choice("attention_backend", self.attention_backend, ATTENTION_BACKENDS)
        check_choice("layernorm_backend", self.layernorm_backend, LAYERNORM_BACKENDS)

    @property
    def head_dim(self) -> int:
        """Width of one attention head, d_model / n_heads."""
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes and switches of an encoder-decoder Transformer.

    ``norm_first=False`` is Post-LN (the paper and the lecture, p19-p21: add, then LayerNorm);
    ``True`` is Pre-LN (LayerNorm inside the residual branch, p21's reading list).
    ``attention_backend`` selects how attention is computed: ``"math"`` is the step-by-step
    reference (scores, mask, softmax, weighted sum), ``"sdpa"`` calls
    ``torch.nn.functional.scaled_dot_product_attention`` (fast), ``"triton"`` calls the
    course's Triton kernel on a GPU. All three give the same numbers up to float rounding.
    The fields of one layer are validated by :class:`LayerConfig` (see :attr:`layer`).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1
    activation: str = "relu"
    norm_first: bool = False
    max_len: int = 512
    positional: str = "sinusoidal"
    tie_embeddings: bool = False
    share_vocab: bool = False
    pad_id: int = PAD_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    attention_backend: str = "math"
    layernorm_backend: str = "torch"
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "max_len"):
            check_int(name, getattr(self, name), minimum=1)
        _ = self.layer  # building the LayerConfig validates the fields of a layer
        # zero encoder layers is a model without an encoder (memory = the embeddings); zero
        # decoder layers would make the output ignore the source entirely
        check_int("n_encoder_layers", self.n_encoder_layers, minimum=0)
        check_int("n_decoder_layers", self.n_decoder_layers, minimum=1)
        for name in ("tie_embeddings", "share_vocab"):
            check_bool(name, getattr(self, name))
        check_choice("positional", self.positional, POSITIONAL_ENCODINGS)
        if self.positional == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError(
                f"sinusoidal positions pair a sine and a cosine, so d_model must be even, "
                f"got d_model={self.d_model}"
            )
        if self.share_vocab and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "share_vocab=True needs src_vocab_size == tgt_vocab_size, got "
                f"src_vocab_size={self.src_vocab_size} and tgt_vocab_size={self.tgt_vocab_size}"
            )
        self._check_vocabulary_ids()

    def _check_vocabulary_ids(self) -> None:
        """pad_id, bos_id and eos_id: ints inside their vocabularies, all different."""
        check_int("pad_id", self.pad_id, minimum=0)
        check_int("bos_id", self.bos_id, minimum=0)
        check_int("eos_id", self.eos_id, minimum=0)
        smaller = "src" if self.src_vocab_size < self.tgt_vocab_size else "tgt"
        vocab_limits = {
            "pad_id": (f"{smaller}_vocab_size", getattr(self, f"{smaller}_vocab_size")),
            "bos_id": ("tgt_vocab_size", self.tgt_vocab_size),
            "eos_id": ("tgt_vocab_size", self.tgt_vocab_size),
        }
        for name, (size_name, limit) in vocab_limits.items():
            if getattr(self, name) >= limit:
                raise ValueError(
                    f"{name} must be inside the vocabulary [0, {size_name}={limit}), got "
                    f"{getattr(self, name)}: raise {size_name} or lower {name}"
                )
        _check_special_ids(self.pad_id, self.bos_id, self.eos_id)

    @property
    def layer(self) -> LayerConfig:
        """The configuration of each encoder and decoder layer (same fields, same values)."""
        return LayerConfig(**{f.name: getattr(self, f.name) for f in fields(LayerConfig)})

    @property
    def head_dim(self) -> int:
        """Width of one attention head, d_model / n_heads."""
        return self.d_model // self.n_heads

    @property
    def min_values(self) -> int:
        """A lower bound on the float values a ``Transformer`` of this config allocates:
        attention 4 D^2 and feed-forward 2 D d_ff per layer (a decoder layer has two
        attentions), the larger embedding and the position table (max_len x D)."""
        d = self.d_model
        attention, feed_forward = 4 * d * d, 2 * d * self.d_ff
        return (
            self.n_encoder_layers * (attention + feed_forward)
            + self.n_decoder_layers * (2 * attention + feed_forward)
            + d * max(self.src_vocab_size, self.tgt_vocab_size)
            + d * self.max_len
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of all fields (for checkpoints and printing)."""
        return asdict(self)

    @classmethod
    def paper_base(cls, vocab_size: int, **overrides: Any) -> TransformerConfig:
        """The paper's base model (Table 3): d_model 512, 8 heads, d_ff 2048, 6+6 layers.

        Source and target share one vocabulary and one embedding matrix, which is also the
        output projection (tied embeddings), as in the paper.
        """
        fields: dict[str, Any] = dict(
            src_vocab_size=vocab_size,
            tgt_vocab_size=vocab_size,
            d_model=512,
            n_heads=8,
            d_ff=2048,
            n_encoder_layers=6,
            n_decoder_layers=6,
            dropout=0.1,
            share_vocab=True,
            tie_embeddings=True,
        )
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def paper_big(cls, vocab_size: int, **overrides: Any) -> TransformerConfig:
        """The paper's big model (Table 3): d_model 1024, 16 heads, d_ff 4096, dropout 0.3."""
        fields: dict[str, Any] = dict(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3)
        fields.update(overrides)
        return cls.paper_base(vocab_size, **fields)


def _check_special_ids(pad_id: int, bos_id: int, eos_id: int) -> None:
    """PAD must differ from BOS and EOS (BOS == EOS is allowed: one separator token)."""
    if pad_id == eos_id:
        raise ValueError(
            f"pad_id and eos_id must differ, got both {pad_id}: decoding never outputs PAD, so "
            "it could never output EOS and stop; use e.g. pad_id=0, bos_id=1, eos_id=2"
        )
    if pad_id == bos_id:
        raise ValueError(
            f"pad_id and bos_id must differ, got both {pad_id}: the padding mask would hide "
            "the BOS token that starts every target; use e.g. pad_id=0, bos_id=1, eos_id=2"
        )
