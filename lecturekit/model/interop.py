"""Move weights between ``torch.nn`` Transformer modules and lecturekit's.

``from_torch(module)`` accepts ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``,
``nn.TransformerDecoderLayer``, ``nn.TransformerEncoder``, ``nn.TransformerDecoder`` and
``nn.Transformer`` (all ``batch_first=True``) and returns the lecturekit module holding the
same weights; its forward takes the same arguments under the same names and returns the same
output. ``to_torch(module)`` goes the other way. The parameter layouts are the same up to
names (``in_proj_weight`` is our ``qkv_proj.weight``, ``linear1`` is our ``ffn.linear1``,
``multihead_attn`` is our ``cross_attn``), so the conversion is a renaming of the state dict.

Not supported (a ``ValueError`` says which): ``batch_first=False``, ``bias=False``, separate
key/value widths (``kdim``/``vdim``), ``add_bias_kv``, ``add_zero_attn``, activations other
than relu and gelu.
"""

from __future__ import annotations

from typing import Any, overload

import torch.nn.functional as F
from torch import Tensor, nn

from lecturekit.model.attention import MultiHeadAttention
from lecturekit.model.config import LayerConfig
from lecturekit.model.layers import Decoder, DecoderLayer, Encoder, EncoderLayer

__all__ = ["EncoderDecoder", "from_torch", "to_torch"]

# (torch name, lecturekit name) of state-dict key parts that differ; every other part is equal
_NAME_PAIRS = [
    ("in_proj_weight", "qkv_proj.weight"),
    ("in_proj_bias", "qkv_proj.bias"),
    ("linear1", "ffn.linear1"),
    ("linear2", "ffn.linear2"),
    ("multihead_attn", "cross_attn"),
]


def _rename(state: dict[str, Tensor], to_torch: bool) -> dict[str, Tensor]:
    """State-dict keys from torch's names to lecturekit's, or back with ``to_torch``."""
    pairs = [(ours, theirs) for theirs, ours in _NAME_PAIRS] if to_torch else _NAME_PAIRS
    renamed = {}
    for key, value in state.items():
        dotted = f".{key}."  # match whole dot-separated parts only
        for old, new in pairs:
            dotted = dotted.replace(f".{old}.", f".{new}.")
        renamed[dotted[1:-1]] = value
    return renamed


class EncoderDecoder(nn.Module):
    """Encoder and decoder stacks without embeddings: the counterpart of ``nn.Transformer``.

    ``forward(src (B, S, D), tgt (B, T, D), ...) -> (B, T, D)`` with the keyword arguments of
    ``nn.Transformer.forward`` (masks keyword-only). One difference: torch reads
    ``*_is_causal=True`` next to a mask as a hint that the mask is causal; here, as in
    ``torch.nn.functional.scaled_dot_product_attention`` and everywhere in lecturekit, it
    applies the causal mask itself and may not come with a mask (pass one of them).
    """

    def __init__(self, encoder: Encoder, decoder: Decoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        *,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool = False,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        if src.dim() != 3 or tgt.dim() != 3 or src.size(0) != tgt.size(0):
            raise ValueError(
                "src and tgt must be (B, S, D) and (B, T, D) with the same batch size, got "
                f"{tuple(src.shape)} and {tuple(tgt.shape)}"
            )
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )


def _activation_name(layer: nn.Module) -> str:
    activation = layer.activation
    if activation is F.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (
        isinstance(activation, nn.GELU) and activation.approximate == "none"
    ):
        return "gelu"
    raise ValueError(f"activation must be relu or gelu, got {activation!r}")


def _check_attention(attention: nn.MultiheadAttention) -> None:
    if not attention.batch_first:
        raise ValueError("batch_first must be True (lecturekit is batch first), got False")
    if not attention._qkv_same_embed_dim:
        raise ValueError(
            f"kdim and vdim must equal embed_dim={attention.embed_dim}, "
            f"got kdim={attention.kdim}, vdim={attention.vdim}"
        )
    if attention.bias_k is not None or attention.add_zero_attn:
        raise ValueError("add_bias_kv and add_zero_attn are not supported")
    if attention.in_proj_bias is None:
        raise ValueError("bias must be True, got bias=False")


def _layer_config(layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer) -> LayerConfig:
    """The ``LayerConfig`` of a torch layer (the backends stay at their defaults)."""
    _check_attention(layer.self_attn)
    if layer.linear1.bias is None or layer.norm1.bias is None:
        raise ValueError("bias must be True, got bias=False")
    return LayerConfig(
        d_model=layer.self_attn.embed_dim,
        n_heads=layer.self_attn.num_heads,
        d_ff=layer.linear1.out_features,
        dropout=layer.dropout.p,
        activation=_activation_name(layer),
        norm_first=layer.norm_first,
        layer_norm_eps=layer.norm1.eps,
    )


def from_torch(module: nn.Module) -> nn.Module:
    """The lecturekit module with ``module``'s weights (see the module docstring)."""
    if isinstance(module, nn.MultiheadAttention):
        _check_attention(module)
        ours: nn.Module = MultiHeadAttention(
            module.embed_dim, module.num_heads, dropout=module.dropout
        )
    elif isinstance(module, nn.TransformerEncoderLayer):
        ours = EncoderLayer(_layer_config(module))
    elif isinstance(module, nn.TransformerDecoderLayer):
        ours = DecoderLayer(_layer_config(module))
    elif isinstance(module, (nn.TransformerEncoder, nn.TransformerDecoder)):
        ours = _stack_from_torch(module)
    elif isinstance(module, nn.Transformer):
        ours = EncoderDecoder(_stack_from_torch(module.encoder), _stack_from_torch(module.decoder))
    else:
        raise TypeError(
            "module must be nn.MultiheadAttention, nn.TransformerEncoderLayer, "
            "nn.TransformerDecoderLayer, nn.TransformerEncoder, nn.TransformerDecoder or "
            f"nn.Transformer, got {type(module).__name__}"
        )
    ours.load_state_dict(_rename(module.state_dict(), to_torch=False))
    reference = next(module.parameters())
    return ours.to(reference.device, reference.dtype).train(module.training)


@overload
def _stack_from_torch(stack: nn.TransformerEncoder) -> Encoder: ...
@overload
def _stack_from_torch(stack: nn.TransformerDecoder) -> Decoder: ...
def _stack_from_torch(stack: nn.TransformerEncoder | nn.TransformerDecoder) -> Encoder | Decoder:
    config = _layer_config(stack.layers[0])
    kind = Encoder if isinstance(stack, nn.TransformerEncoder) else Decoder
    if stack.norm is not None and stack.norm.eps != config.layer_norm_eps:
        raise ValueError(
            f"the final norm's eps must equal the layers' eps={config.layer_norm_eps}, "
            f"got {stack.norm.eps}"
        )
    return kind(config, len(stack.layers), final_norm=stack.norm is not None)


def to_torch(module: nn.Module) -> nn.Module:
    """The ``torch.nn`` module (``batch_first=True``) with the weights of a lecturekit module.

    Accepts ``MultiHeadAttention``, ``EncoderLayer``, ``DecoderLayer``, ``Encoder``,
    ``Decoder`` and ``EncoderDecoder``.
    """
    if isinstance(module, MultiHeadAttention):
        theirs: nn.Module = nn.MultiheadAttention(
            module.d_model, module.n_heads, module.dropout, batch_first=True
        )
    elif isinstance(module, EncoderLayer):
        theirs = nn.TransformerEncoderLayer(**_torch_layer_args(module.config))
    elif isinstance(module, DecoderLayer):
        theirs = nn.TransformerDecoderLayer(**_torch_layer_args(module.config))
    elif isinstance(module, (Encoder, Decoder)):
        theirs = _torch_stack(module)
    elif isinstance(module, EncoderDecoder):
        config = module.encoder.config
        theirs = nn.Transformer(
            d_model=config.d_model,
            nhead=config.n_heads,
            custom_encoder=_torch_stack(module.encoder),
            custom_decoder=_torch_stack(module.decoder),
            batch_first=True,
        )
    else:
        raise TypeError(
            "module must be MultiHeadAttention, EncoderLayer, DecoderLayer, Encoder, Decoder "
            f"or EncoderDecoder, got {type(module).__name__}"
        )
    theirs.load_state_dict(_rename(module.state_dict(), to_torch=True))
    reference = next(module.parameters())
    return theirs.to(reference.device, reference.dtype).train(module.training)


def _torch_layer_args(c: LayerConfig) -> dict[str, Any]:
    """The arguments of the torch layer (encoder or decoder) with the settings of ``c``."""
    return dict(
        d_model=c.d_model,
        nhead=c.n_heads,
        dim_feedforward=c.d_ff,
        dropout=c.dropout,
        activation=c.activation,
        layer_norm_eps=c.layer_norm_eps,
        batch_first=True,
        norm_first=c.norm_first,
    )


def _torch_stack(stack: Encoder | Decoder) -> nn.Module:
    if len(stack.layers) == 0:
        raise ValueError("the stack must have at least one layer, got 0")
    args = _torch_layer_args(stack.config)  # every layer of a stack has the stack's config
    norm = None if stack.norm is None else nn.LayerNorm(stack.norm.normalized_shape, stack.norm.eps)
    if isinstance(stack, Encoder):
        layer = nn.TransformerEncoderLayer(**args)
        return nn.TransformerEncoder(layer, len(stack.layers), norm, enable_nested_tensor=False)
    return nn.TransformerDecoder(nn.TransformerDecoderLayer(**args), len(stack.layers), norm)
