import dataclasses
import warnings

import matplotlib
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from lecturekit.book import decoding_plots as D
from lecturekit.book import figure_setup as FS
from lecturekit.book import plotting as P


@pytest.fixture
def no_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "Glyph" in m or "missing" in m], messages


def _draw(fig):
    fig.canvas.draw()
    return fig


def test_cjk_font_registered_and_renders_without_missing_glyphs(no_warnings):
    assert FS.CJK_FONT_NAME == "Noto Sans CJK SC"
    assert FS.cjk_font_path().is_file()
    assert FS.CJK_FONT_NAME in matplotlib.rcParams["font.family"]
    assert FS.setup_fonts() == FS.CJK_FONT_NAME  # idempotent
    fig, ax = matplotlib.pyplot.subplots()
    ax.set_title("自注意力 (self-attention)：两万零四百八十一，二〇二一年")
    ax.set_xlabel("位置 −1 → 2")
    ax.plot([-1, 1])
    _draw(fig)
    matplotlib.pyplot.close(fig)


def test_missing_glyph_warning_is_detected_without_the_fallback():
    """The check above can fail: with DejaVu Sans alone, Chinese glyphs are missing."""
    with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):
        fig, ax = matplotlib.pyplot.subplots()
        ax.set_title("注意力")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig.canvas.draw()
        matplotlib.pyplot.close(fig)
    assert any("Glyph" in str(w.message) for w in caught)


def test_plot_attention_shows_weights_and_tokens(no_warnings):
    weights = torch.softmax(torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), -1)
    fig = P.plot_attention(
        weights, list("abcd"), ["<bos>", "两", "万"], title="注意力", annotate=True
    )
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), weights.double().numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["<bos>", "两", "万"]
    assert sum(t.get_text() == f"{weights[0, 0]:.2f}" for t in ax.texts) >= 1
    _draw(fig)
    with pytest.raises(ValueError, match="src_tokens has 3 tokens"):
        P.plot_attention(weights, list("abc"))
    with pytest.raises(ValueError, match="2-D"):
        P.plot_attention(torch.ones(2, 3, 4))


def test_plot_attention_heads_grid(no_warnings):
    layers = [torch.rand(2, 4, 5, 6) for _ in range(3)]  # 3 layers of (B, H, T, S)
    fig = P.plot_attention_heads(layers, list("abcdef"), list("vwxyz"), example=1)
    assert len(fig.axes) == 3 * 4
    np.testing.assert_allclose(fig.axes[4 + 2].images[0].get_array(), layers[1][1, 2].numpy())
    assert "第 2 层 · 头 3" in fig.axes[6].get_title()
    sub = P.plot_attention_heads(layers[0][0], heads=[1, 3])
    assert len(sub.axes) == 2
    np.testing.assert_allclose(sub.axes[1].images[0].get_array(), layers[0][0, 3].numpy())
    _draw(fig)
    with pytest.raises(ValueError, match="heads contains 4"):
        P.plot_attention_heads(layers, heads=[4])
    with pytest.raises(ValueError, match="example=5"):
        P.plot_attention_heads(layers, example=5)
    with pytest.raises(ValueError, match=r"\(H, T, S\)"):
        P.plot_attention_heads(torch.ones(4, 5))


def test_plot_training_draws_what_fit_recorded(no_warnings):
    from lecturekit.training import History

    steps = list(range(1, 81))
    history = History(step=steps, loss=[1.0 / s for s in steps], lr=[1e-3] * 80)
    history.token_accuracy = [s / 80 for s in steps]
    history.teacher_prob = [1.0] * 80  # no scheduled sampling: not drawn
    fig = P.plot_training(history)
    labels = [[line.get_label() for line in ax.get_lines()] for ax in fig.axes]
    assert labels == [["训练损失"], ["逐符号准确率（教师强制）"], ["学习率"]]
    # smoothed with the default window of 20: the last point is the mean of the last 20
    last = fig.axes[0].get_lines()[0].get_ydata()[-1]
    assert last == pytest.approx(np.mean([1.0 / s for s in range(61, 81)]))
    history.teacher_prob = [1.0 - s / 100 for s in steps]
    history.eval_step, history.valid_exact_match = [40, 80], [0.5, 0.75]
    fig = P.plot_training(history, smooth=1)
    labels = [line.get_label() for ax in fig.axes for line in ax.get_lines()]
    assert "喂正确答案的概率" in labels and "验证集完全匹配率" in labels
    assert P.plot_training(history.to_dict(), smooth=1).axes[0].get_title() == "损失 (loss)"
    _draw(fig)


def test_plot_history_from_mapping_and_dataclass(no_warnings):
    history = {
        "step": [1, 2, 3, 4],
        "loss": [3.0, 2.0, 1.5, 1.0],
        "token_accuracy": [0.1, 0.4, 0.6, 0.8],
        "lr": [1e-4, 2e-4, 3e-4, 4e-4],
        "eval_step": [2, 4],
        "valid_exact_match": [0.2, 0.9],
    }
    fig = P.plot_history(history)
    assert len(fig.axes) == 3  # loss, accuracy (2 lines), learning rate
    lines = {line.get_label(): line for ax in fig.axes for line in ax.get_lines()}
    # labelled with the book's terms
    assert list(lines["训练损失"].get_ydata()) == history["loss"]
    assert list(lines["验证集完全匹配率"].get_xdata()) == [2, 4]
    assert list(lines["逐符号准确率（教师强制）"].get_xdata()) == [1, 2, 3, 4]
    _draw(fig)
    # smoothing averages the noisy losses, never the learning-rate schedule
    long = {"step": list(range(1, 41)), "loss": [float(i % 2) for i in range(40)]}
    long["lr"] = [min(s, 20) / 20 for s in long["step"]]
    fig = P.plot_history(long, smooth=4)
    lines = {line.get_label(): line for ax in fig.axes for line in ax.get_lines()}
    assert list(lines["学习率"].get_ydata()) == long["lr"]
    assert lines["训练损失"].get_ydata()[-1] == pytest.approx(0.5)

    @dataclasses.dataclass
    class History:
        loss: list = dataclasses.field(default_factory=lambda: [float(10 - i) for i in range(100)])
        seconds: float = 1.0

    fig = P.plot_history(History(), smooth=10)
    y = fig.axes[0].get_lines()[0].get_ydata()
    assert y[0] == 10.0 and y[-1] == pytest.approx(np.mean([10 - i for i in range(90, 100)]))
    with pytest.raises(ValueError, match="not in history"):
        P.plot_history(history, keys=["bleu"])
    with pytest.raises(TypeError, match="mapping"):
        P.plot_history([1, 2, 3])


def test_positional_encoding_mask_distribution_error_curves(no_warnings):
    pe = torch.sin(torch.arange(20.0)[:, None] / (10.0 ** torch.arange(8.0)))
    fig = P.plot_positional_encoding(pe[None])
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), pe.double().numpy())
    _draw(fig)
    mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    fig = P.plot_mask(mask, list("我爱你们"), list("我爱你们"), title="因果掩码 (causal mask)")
    assert sum(t.get_text() == "×" for t in fig.axes[0].texts) == 6
    # the glossary's terms on the axes, as plot_attention
    assert fig.axes[0].get_xlabel().startswith("键") and fig.axes[0].get_ylabel().startswith("查询")
    _draw(fig)
    probs = torch.tensor([0.5, 0.3, 0.2])
    fig = P.plot_token_distribution(probs, ["猫", "狗", "鱼"], compare=torch.tensor([1.0, 0, 0]))
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights == pytest.approx([0.5, 0.3, 0.2, 1.0, 0.0, 0.0])
    _draw(fig)
    fig = D.plot_error_by_position({"teacher forcing": [0.0, 0.1, 0.3]})
    assert list(fig.axes[0].get_lines()[0].get_ydata()) == [0.0, 0.1, 0.3]
    _draw(fig)
    with pytest.raises(ValueError, match=r"\(L, D\)"):
        P.plot_positional_encoding(torch.ones(5))
    with pytest.raises(ValueError, match="compare"):
        P.plot_token_distribution(probs, compare=torch.ones(4))


def test_plot_beam_tree(no_warnings):
    steps = [
        [((5,), -0.4), ((6,), -0.9)],
        [((5, 6), -0.9), ((5, 5), -1.5), ((6, 6), -1.0)],
        [((6, 6, 2), -1.1), ((5, 6, 2), -1.6)],
    ]
    fig = D.plot_beam_tree(steps, token_labels={5: "A", 6: "B", 2: "<eos>"})
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(texts) == 1 + 7 and "A\n-0.40" in texts and "<eos>\n-1.10" in texts
    red = [line for line in fig.axes[0].get_lines() if line.get_color() == "#d62728"]
    assert len(red) == 3  # the path <bos> -> B -> B -> <eos> of the best hypothesis
    grey = [line for line in fig.axes[0].get_lines() if line.get_color() == "#aaaaaa"]
    assert len(grey) == 2  # (5, 5) has no child; (5, 6, 2) is not the final output
    _draw(fig)
    final = [(6, 6, 2), (5, 6, 2)]  # both stay in the final beam
    fig = D.plot_beam_tree(steps, final=final)
    grey = [line for line in fig.axes[0].get_lines() if line.get_color() == "#aaaaaa"]
    assert len(grey) == 1  # only (5, 5), dropped at step 3
    steps[2].append(((5, 6, 6), -2.0))  # expanded at the last step but pruned
    fig = D.plot_beam_tree(steps, final=final)
    grey = [line for line in fig.axes[0].get_lines() if line.get_color() == "#aaaaaa"]
    assert len(grey) == 2  # a pruned last-step node is not drawn as kept

    @dataclasses.dataclass
    class Hyp:
        tokens: list
        score: float

    fig = D.plot_beam_tree([[Hyp([1], -0.1)], [Hyp([1, 2], -0.3)]], best=[1, 2])
    assert len(fig.axes[0].texts) == 3
    with pytest.raises(ValueError, match="length 2"):
        D.plot_beam_tree([[((1,), 0.0)], [((1,), 0.0)]])


def test_sharp_figures_only_in_a_kernel() -> None:
    assert FS.setup_sharp_figures() is False  # pytest is no IPython kernel


@pytest.mark.slow
def test_figures_in_a_notebook_are_drawn_at_twice_their_size() -> None:
    import base64
    import struct

    import nbformat
    from nbclient import NotebookClient

    cell = (
        "import matplotlib.pyplot as plt\nimport lecturekit.book.plotting\n"
        "fig, ax = plt.subplots(figsize=(3, 2))\nax.plot([0, 1])\nplt.show()"
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell)])
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    [output] = [o for o in notebook.cells[0].outputs if "image/png" in o.get("data", {})]
    png = base64.b64decode(output["data"]["image/png"])
    pixels_wide = struct.unpack(">I", png[16:20])[0]  # the IHDR chunk's width
    shown_wide = output["metadata"]["image/png"]["width"]
    assert pixels_wide // 2 == shown_wide, (
        pixels_wide,
        shown_wide,
    )  # IPython halves, rounding down
