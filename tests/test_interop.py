"""from_torch / to_torch: same weights, same arguments, same outputs as torch.nn (<= 1e-5)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from lecturekit import causal_mask
from lecturekit.model.interop import EncoderDecoder, from_torch, to_torch

pytestmark = [
    pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask"),
    pytest.mark.filterwarnings("ignore:enable_nested_tensor is True"),
]
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True)


@st.composite
def layer_configs(draw):
    heads = draw(st.integers(1, 3))
    return dict(
        d_model=heads * draw(st.sampled_from([2, 4])),
        nhead=heads,
        dim_feedforward=draw(st.integers(3, 12)),
        dropout=0.1,
        activation=draw(st.sampled_from(["relu", "gelu"])),
        norm_first=draw(st.booleans()),
        batch_first=True,
    )


def masks(draw, batch, tq, tk, square):
    """Draw attn_mask (None/bool/float, causal when square) and a key padding mask."""
    kind = draw(st.sampled_from(["none", "bool", "float"]))
    attn = None
    if kind == "bool":
        attn = causal_mask(tq) if square else torch.rand(tq, tk) < 0.3
    elif kind == "float":
        attn = torch.randn(tq, tk)
        if square:
            attn = attn + nn.Transformer.generate_square_subsequent_mask(tq)
    if attn is not None and attn.dtype == torch.bool:
        attn[:, 0] = False  # no fully masked rows: torch gives NaN there, we give zeros
    padding = None
    if draw(st.booleans()):
        padding = torch.rand(batch, tk) < 0.3
        padding[:, 0] = False
    return attn, padding


def assert_same(ours, theirs):
    torch.testing.assert_close(ours.detach(), theirs.detach(), atol=1e-5, rtol=0)


@SETTINGS
@given(config=layer_configs(), data=st.data(), seed=st.integers(0, 100))
def test_multihead_attention(config, data, seed):
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(config["d_model"], config["nhead"], batch_first=True).eval()
    ours = from_torch(theirs)
    x, memory = torch.randn(2, 4, config["d_model"]), torch.randn(2, 5, config["d_model"])
    attn, padding = masks(data.draw, 2, 4, 5, square=False)
    kwargs = dict(
        key_padding_mask=padding, attn_mask=attn, need_weights=True, average_attn_weights=True
    )
    (out, weights), (expected, expected_weights) = (
        ours(x, memory, memory, **kwargs),
        theirs(x, memory, memory, **kwargs),
    )
    assert_same(out, expected)
    assert_same(weights, expected_weights)


# mixed bool/float masks are drawn on purpose (lecturekit accepts them as torch does);
# torch's encoder warns that it will stop accepting them
@pytest.mark.filterwarnings("ignore:Support for mismatched:UserWarning")
@SETTINGS
@given(config=layer_configs(), data=st.data(), seed=st.integers(0, 100))
def test_encoder_layer_and_stack(config, data, seed):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(**config).eval()
    stack = nn.TransformerEncoder(
        layer, 2, nn.LayerNorm(config["d_model"]), enable_nested_tensor=False
    ).eval()
    src = torch.randn(3, 5, config["d_model"])
    attn, padding = masks(data.draw, 3, 5, 5, square=True)
    # with gradients on: torch's fused inference path (no_grad + eval) returns NaN for float
    # masks holding -inf (torch 2.13), its standard path is the reference
    kwargs = dict(src_mask=attn, src_key_padding_mask=padding)
    assert_same(from_torch(layer)(src, **kwargs), layer(src, **kwargs))
    assert_same(
        from_torch(stack)(src, mask=attn, src_key_padding_mask=padding),
        stack(src, mask=attn, src_key_padding_mask=padding),
    )


@SETTINGS
@given(config=layer_configs(), data=st.data(), seed=st.integers(0, 100))
def test_decoder_layer_and_stack(config, data, seed):
    torch.manual_seed(seed)
    layer = nn.TransformerDecoderLayer(**config).eval()
    stack = nn.TransformerDecoder(layer, 2).eval()
    tgt, memory = torch.randn(2, 4, config["d_model"]), torch.randn(2, 6, config["d_model"])
    tgt_mask, tgt_padding = masks(data.draw, 2, 4, 4, square=True)
    memory_mask, memory_padding = masks(data.draw, 2, 4, 6, square=False)
    kwargs = dict(
        tgt_mask=tgt_mask,
        memory_mask=memory_mask,
        tgt_key_padding_mask=tgt_padding,
        memory_key_padding_mask=memory_padding,
    )
    assert_same(from_torch(layer)(tgt, memory, **kwargs), layer(tgt, memory, **kwargs))
    assert_same(from_torch(stack)(tgt, memory, **kwargs), stack(tgt, memory, **kwargs))


@SETTINGS
@given(config=layer_configs(), seed=st.integers(0, 100))
def test_transformer_with_causal_target(config, seed):
    torch.manual_seed(seed)
    config = {**config, "dim_feedforward": config["dim_feedforward"]}
    theirs = nn.Transformer(num_encoder_layers=2, num_decoder_layers=1, **config).eval()
    ours = from_torch(theirs)
    assert isinstance(ours, EncoderDecoder)
    src, tgt = torch.randn(2, 5, config["d_model"]), torch.randn(2, 4, config["d_model"])
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    kwargs = dict(src_key_padding_mask=padding, memory_key_padding_mask=padding)
    causal = nn.Transformer.generate_square_subsequent_mask(4)
    expected = theirs(src, tgt, tgt_mask=causal, tgt_is_causal=True, **kwargs)  # torch: a hint
    assert_same(ours(src, tgt, tgt_mask=causal, **kwargs), expected)
    assert_same(ours(src, tgt, tgt_is_causal=True, **kwargs), expected)  # ours: the mask itself
    with pytest.raises(ValueError, match="tgt_is_causal must be False when tgt_mask is given"):
        ours(src, tgt, tgt_mask=causal, tgt_is_causal=True, **kwargs)


@pytest.mark.parametrize("kind", ["attention", "encoder_layer", "decoder", "transformer"])
def test_round_trip(kind):
    torch.manual_seed(0)
    config = dict(
        d_model=8, nhead=2, dim_feedforward=6, batch_first=True, norm_first=True, activation="gelu"
    )
    module = {
        "attention": lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        "encoder_layer": lambda: nn.TransformerEncoderLayer(**config),
        "decoder": lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(**config), 2),
        "transformer": lambda: nn.Transformer(num_encoder_layers=1, num_decoder_layers=1, **config),
    }[kind]()
    back = to_torch(from_torch(module))
    assert type(back) is type(module)
    if kind == "transformer":  # usable: nn.Transformer checks d_model in forward
        back.eval()(torch.randn(1, 3, 8), torch.randn(1, 2, 8))
    before, after = module.state_dict(), back.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_training_mode_and_dtype_are_kept():
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).double()
    ours = from_torch(layer)
    assert ours.training and next(ours.parameters()).dtype == torch.float64


@pytest.mark.parametrize(
    ("module", "words"),
    [
        (nn.MultiheadAttention(8, 2), "batch_first"),
        (nn.MultiheadAttention(8, 2, batch_first=True, kdim=4, vdim=4), "kdim"),
        (nn.MultiheadAttention(8, 2, batch_first=True, add_bias_kv=True), "add_bias_kv"),
        (nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, bias=False), "bias"),
        (
            nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, activation=torch.tanh),
            "activation",
        ),
    ],
)
def test_unsupported_modules_are_rejected(module, words):
    with pytest.raises(ValueError, match=words):
        from_torch(module)


def test_wrong_type_is_rejected():
    with pytest.raises(TypeError, match="nn.MultiheadAttention"):
        from_torch(nn.Linear(2, 2))
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        to_torch(nn.Linear(2, 2))
