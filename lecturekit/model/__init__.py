"""The Transformer a student reads next to the slides, one module per idea, in chapter order.

``config`` (sizes and switches) -> ``masks`` (what a query may not see) -> ``attention``
(scaled dot-product and multi-head attention, chapter 2) -> ``layers`` (positional
encodings, feed-forward, encoder and decoder layers and stacks, chapters 3-4) -> ``cache``
(keys/values kept while decoding) -> ``transformer`` (the ``Transformer``) -> ``tagger`` (its
encoder and an output layer: the encoder-only ``EncoderTagger``) -> ``params``
(parameter tables) -> ``interop`` (weights to and from ``torch.nn.Transformer``); beside them,
``rnn``: chapter 1's RNN encoder-decoder with additive attention, the model before the
Transformer.
Names resolve lazily; every module's ``__all__`` is available here.
"""

from typing import TYPE_CHECKING

from lecturekit._lazy import attach

# Editors and type checkers read these imports; at run time each name is imported on first
# use (PEP 562). tests/test_package.py keeps this list equal to what attach() serves.
if TYPE_CHECKING:
    from lecturekit.model import attention as attention
    from lecturekit.model import cache as cache
    from lecturekit.model import config as config
    from lecturekit.model import interop as interop
    from lecturekit.model import layers as layers
    from lecturekit.model import masks as masks
    from lecturekit.model import params as params
    from lecturekit.model import rnn as rnn
    from lecturekit.model import tagger as tagger
    from lecturekit.model import transformer as transformer
    from lecturekit.model.attention import ATTENTION_FUNCTIONS as ATTENTION_FUNCTIONS
    from lecturekit.model.attention import MultiHeadAttention as MultiHeadAttention
    from lecturekit.model.attention import (
        scaled_dot_product_attention as scaled_dot_product_attention,
    )
    from lecturekit.model.cache import KVCache as KVCache
    from lecturekit.model.cache import LayerKVCache as LayerKVCache
    from lecturekit.model.cache import decode_cached as decode_cached
    from lecturekit.model.config import ACTIVATIONS as ACTIVATIONS
    from lecturekit.model.config import ATTENTION_BACKENDS as ATTENTION_BACKENDS
    from lecturekit.model.config import LAYERNORM_BACKENDS as LAYERNORM_BACKENDS
    from lecturekit.model.config import POSITIONAL_ENCODINGS as POSITIONAL_ENCODINGS
    from lecturekit.model.config import LayerConfig as LayerConfig
    from lecturekit.model.config import TransformerConfig as TransformerConfig
    from lecturekit.model.interop import EncoderDecoder as EncoderDecoder
    from lecturekit.model.interop import from_torch as from_torch
    from lecturekit.model.interop import to_torch as to_torch
    from lecturekit.model.layers import LAYER_NORM_FUNCTIONS as LAYER_NORM_FUNCTIONS
    from lecturekit.model.layers import Decoder as Decoder
    from lecturekit.model.layers import DecoderLayer as DecoderLayer
    from lecturekit.model.layers import Encoder as Encoder
    from lecturekit.model.layers import EncoderLayer as EncoderLayer
    from lecturekit.model.layers import LayerNorm as LayerNorm
    from lecturekit.model.layers import LearnedPositionalEncoding as LearnedPositionalEncoding
    from lecturekit.model.layers import PositionwiseFeedForward as PositionwiseFeedForward
    from lecturekit.model.layers import SinusoidalPositionalEncoding as SinusoidalPositionalEncoding
    from lecturekit.model.masks import causal_mask as causal_mask
    from lecturekit.model.masks import fully_masked_rows as fully_masked_rows
    from lecturekit.model.masks import merge_masks as merge_masks
    from lecturekit.model.masks import padding_mask as padding_mask
    from lecturekit.model.masks import prepare_mask as prepare_mask
    from lecturekit.model.masks import to_additive as to_additive
    from lecturekit.model.params import ComponentCount as ComponentCount
    from lecturekit.model.params import ParameterTable as ParameterTable
    from lecturekit.model.params import count_parameters as count_parameters
    from lecturekit.model.rnn import AdditiveAttention as AdditiveAttention
    from lecturekit.model.rnn import RNNSeq2Seq as RNNSeq2Seq
    from lecturekit.model.rnn import RNNSeq2SeqConfig as RNNSeq2SeqConfig
    from lecturekit.model.tagger import EncoderTagger as EncoderTagger
    from lecturekit.model.transformer import Transformer as Transformer
    from lecturekit.model.transformer import init_weights as init_weights
else:
    __getattr__, __dir__ = attach(__name__)
