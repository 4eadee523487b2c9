import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from lecturekit.book import widgets as W
from lecturekit.decoding import filter_logits


@pytest.fixture
def layers():
    gen = torch.Generator().manual_seed(0)
    return [torch.softmax(torch.randn(3, 2, 4, 5, generator=gen), -1) for _ in range(2)]


def test_explore_attention_widget_follows_controls(layers, capsys):
    src = [list("abcde"), list("fghij"), list("klmno")]
    box = W.explore_attention(layers, src, ["<bos>", "x", "y", "z"])
    assert set(box.controls) == {"example", "layer", "head"}
    assert len(box.figure.axes) == 2  # all heads of layer 1
    box.controls["example"].value = 2
    box.controls["layer"].value = 1
    box.controls["head"].value = 1
    ax = box.figure.axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), layers[1][2, 1].double().numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == list("klmno")
    static = W.explore_attention(layers, src, ["<bos>", "x", "y", "z"], static=True)
    assert isinstance(static, Figure) and len(static.axes) == 2 * 2
    with pytest.raises(ValueError, match=r"\(B, H, T, S\)"):
        W.explore_attention([torch.ones(2, 3, 4)])


def test_sampling_distribution_matches_decoding_filter():
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0, 0.0])
    for setting in ({}, {"temperature": 0.5}, {"top_k": 2}, {"top_p": 0.7}):
        probs = W.sampling_distribution(logits, **setting)
        t = setting.get("temperature", 1.0)
        ref = torch.softmax(
            filter_logits(logits.double()[None] / t, setting.get("top_k"), setting.get("top_p"))[0],
            -1,
        )
        torch.testing.assert_close(probs, ref)
        assert float(probs.sum()) == pytest.approx(1.0)
    assert int((W.sampling_distribution(logits, top_k=2) > 0).sum()) == 2
    # lower temperature sharpens: the most likely token gains probability
    assert W.sampling_distribution(logits, 0.5)[0] > W.sampling_distribution(logits)[0]
    with pytest.raises(ValueError, match="temperature"):
        W.sampling_distribution(logits, temperature=0)


def test_explore_sampling(capsys):
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0])
    box = W.explore_sampling(logits, ["猫", "狗", "鱼", "鸟"])
    assert getattr(box.controls["top_k"], W._TOOLTIP) == "0 = 不限制"
    box.controls["top_k"].value = 1
    heights = [p.get_height() for p in box.figure.axes[0].patches]
    assert heights[4:] == pytest.approx([1.0, 0.0, 0.0, 0.0])
    fig = W.explore_sampling(logits, ["猫", "狗", "鱼", "鸟"], static=True)
    assert len(fig.axes) == len(W.DEFAULT_SAMPLING_SETTINGS)
    assert fig.axes[2].get_title() == "τ=1.00, top-k=3"
    assert "0 = 不限" in box.controls["top_k"].description  # not only in a tooltip
    # the book writes the temperature τ (T is the target length)
    assert box.controls["temperature"].description == "温度 τ"


def test_explore_sampling_title_shows_what_the_sliders_show(capsys):
    box = W.explore_sampling(torch.tensor([2.0, 1.0, 0.5, -1.0]))
    temperature, top_p = box.controls["temperature"], box.controls["top_p"]
    # the readouts format with d3-format, which reads fixed-point formats as Python does
    assert temperature.readout_format == W.TEMPERATURE_FORMAT == ".2f"
    assert top_p.readout_format == W.TOP_P_FORMAT == ".2f"
    temperature.value = 10**0.25  # what the slider holds at this step: 1.7782794...
    top_p.value = 0.1 + 0.05 * 15  # 0.8500000000000001, as float steps land
    assert box.figure.axes[0].get_title() == "τ=1.78, top-p=0.85"
    temperature.value = 1.0
    assert box.figure.axes[0].get_title() == "τ=1.00, top-p=0.85"


def test_masks(capsys):
    masks = W.attention_masks(4, 1)
    assert masks["causal"].tolist()[0] == [False, True, True, True]
    assert masks["padding"].tolist()[0] == [False, False, False, True]
    assert torch.equal(masks["combined"], masks["causal"] | masks["padding"])
    box = W.explore_masks(["<bos>", "我", "爱", "你"])
    box.controls["n_padding"].value = 2
    box.controls["kind"].value = "padding"
    texts = [t.get_text() for t in box.figure.axes[0].texts]
    assert texts.count("×") == 6 * 2  # six positions: the four tokens and two pads after them
    ticks = box.figure.axes[0].get_xticklabels()
    assert [t.get_text() for t in ticks] == ["<bos>", "我", "爱", "你", "<pad>", "<pad>"]
    box.controls["n_padding"].value = 0  # no padding: the tokens as given, nothing overwritten
    assert [t.get_text() for t in box.figure.axes[0].get_xticklabels()] == [
        "<bos>",
        "我",
        "爱",
        "你",
    ]
    assert box.controls["n_padding"].max == 4
    # side by side, upright "<pad>" labels overlap: they are turned
    assert {t.get_rotation() for t in ticks} == {90.0}
    assert box.controls["kind"].style.button_width == "auto"  # full labels, not "因果掩码 (…"
    fig = W.explore_masks(static=True)
    assert len(fig.axes) == 3
    assert len(W.explore_masks(["<bos>"], static=True, n_padding=3).axes[0].get_xticklabels()) == 4
    with pytest.raises(ValueError, match="n_padding"):
        W.attention_masks(3, 3)
    with pytest.raises(ValueError, match="n_padding"):
        W.explore_masks(n_padding=-1)
