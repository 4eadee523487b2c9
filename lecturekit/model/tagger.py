"""The encoder-only model: the Transformer's encoder and one output layer, a token out for
every token in (chapter 4's non-autoregressive model, when the output length is known).

    src (B, S) -> embedding * sqrt(D) + positions -> Encoder -> Linear -> logits (B, S, V)

It is built from a :class:`TransformerConfig` (the decoder fields are unused) and shares the
:class:`~lecturekit.model.transformer.Transformer`'s embedding, padding and initialisation
code; ``fit`` trains it with a loss at every position (the capstone's NAT tagger).
"""

from __future__ import annotations

from torch import Tensor, nn

from lecturekit._common import check_token_ids, check_type
from lecturekit.model.config import TransformerConfig
from lecturekit.model.layers import Encoder
from lecturekit.model.transformer import (
    Transformer,
    _check_fits_in_memory,
    init_weights,
    positional_encoding,
)

__all__ = ["EncoderTagger"]


class EncoderTagger(nn.Module):
    """The Transformer's encoder stack (``config.n_encoder_layers`` layers) and one linear
    layer that writes an output token for every input token: ``src (B, S)`` -> logits
    ``(B, S, V)`` (``V = config.tgt_vocab_size``), all positions at once. Padding
    (``config.pad_id``) is masked out of attention; its logits mean nothing."""

    _embed = Transformer._embed
    _derived_padding = Transformer._derived_padding

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        check_type("config", config, TransformerConfig, "a TransformerConfig")
        _check_fits_in_memory(config)
        self.config = config
        c = config
        self.src_embedding = nn.Embedding(c.src_vocab_size, c.d_model)
        self.src_positions = positional_encoding(c)
        self.dropout = nn.Dropout(c.dropout)
        self.encoder = Encoder(c.layer, c.n_encoder_layers)
        self.output_proj = nn.Linear(c.d_model, c.tgt_vocab_size)
        init_weights([self.encoder], [self.src_embedding], c.d_model)

    def forward(self, src: Tensor) -> Tensor:
        """``src (B, S)`` token ids (``pad_id`` = padding) -> logits ``(B, S, V)``."""
        c = self.config
        check_token_ids("src", src, c.src_vocab_size, shape="(B, S)")
        if c.positional == "learned" and src.size(1) > c.max_len:
            raise ValueError(
                f"src length must be <= max_len={c.max_len} with learned positions, "
                f"got {src.size(1)}"
            )
        padding = self._derived_padding(src, None)  # (B, S), True = masked out
        x = self._embed(src, self.src_embedding, self.src_positions)  # (B, S, D)
        x = self.encoder(x, src_key_padding_mask=padding, validate=False)
        return self.output_proj(x)  # (B, S, V)
