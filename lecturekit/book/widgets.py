"""Interactive explorers (ipywidgets) built on ``lecturekit.book.plotting``.

Each ``explore_*`` function returns an ipywidgets box: it shows when it is the value of a
notebook cell (or when passed to ``display``). The HTML book is static, so every explorer
also has a static form: ``static=True`` returns a matplotlib ``Figure`` with a few
representative settings side by side, which the book shows next to the widget.

The returned box has two extra attributes, handy in tests and for curious students:
``box.controls`` (name -> control widget) and ``box.figure`` (the figure drawn last).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import display
from matplotlib.figure import Figure

from lecturekit.book import plotting
from lecturekit.decoding.search import filter_logits
from lecturekit.model.masks import causal_mask, padding_mask

__all__ = [
    "explore_attention",
    "DEFAULT_SAMPLING_SETTINGS",
    "sampling_distribution",
    "explore_sampling",
    "attention_masks",
    "explore_masks",
]

# ipywidgets 8 calls a control's hover text `tooltip`; 7.x (still Colab's) `description_tooltip`
_TOOLTIP = "tooltip" if int(widgets.__version__.split(".")[0]) >= 8 else "description_tooltip"


def _explorer(controls: dict[str, widgets.Widget], draw: Callable[[], Figure]) -> widgets.VBox:
    """Wire ``controls`` to redraw with ``draw()`` into an output area; return the box."""
    output = widgets.Output()
    # wrap the controls onto a second row in a narrow notebook instead of cutting them off
    row = widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
    box = widgets.VBox([row, output])
    box.controls = controls

    def redraw(_change: Any = None) -> None:
        fig = draw()
        box.figure = fig
        with output:
            output.clear_output(wait=True)
            display(fig)

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    return box


# ---------------------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------------------


def explore_attention(
    attentions: Any,
    src_tokens: Sequence[Any] | Sequence[Sequence[Any]] | None = None,
    tgt_tokens: Sequence[Any] | Sequence[Sequence[Any]] | None = None,
    *,
    static: bool = False,
    title: str | None = None,
) -> widgets.VBox | Figure:
    """Browse attention maps by example, layer and head.

    Args:
        attentions: a sequence over layers of ``(B, H, T, S)`` weights (or one such tensor
            for a single layer), e.g. the cross-attention of every decoder layer.
        src_tokens, tgt_tokens: labels of the keys / queries: one list (shared by all
            examples) or one list per example.
        static: return the figure of example 0: every layer and head in a grid.
    """
    layers = list(attentions) if isinstance(attentions, (list, tuple)) else [attentions]
    layers = [torch.as_tensor(a).detach().cpu() for a in layers]
    for i, a in enumerate(layers):
        if a.dim() != 4:
            raise ValueError(f"attentions[{i}] must be (B, H, T, S), got shape {tuple(a.shape)}")
    batch, n_heads = layers[0].shape[:2]

    def tokens_of(tokens: Any, example: int) -> Sequence[Any] | None:
        if tokens is None or len(tokens) == 0 or isinstance(tokens[0], str):
            return tokens
        return tokens[example]

    if static:
        return plotting.plot_attention_heads(
            layers, tokens_of(src_tokens, 0), tokens_of(tgt_tokens, 0), example=0, title=title
        )
    controls = {
        "example": widgets.IntSlider(value=0, min=0, max=batch - 1, description="例子"),
        "layer": widgets.Dropdown(
            options=[(f"第 {i + 1} 层", i) for i in range(len(layers))], value=0, description="层"
        ),
        "head": widgets.Dropdown(
            options=[("全部头", -1)] + [(f"头 {h + 1}", h) for h in range(n_heads)],
            value=-1,
            description="头",
        ),
    }

    def draw() -> Figure:
        example = controls["example"].value
        layer = controls["layer"].value
        head = controls["head"].value
        src = tokens_of(src_tokens, example)
        tgt = tokens_of(tgt_tokens, example)
        if head == -1:
            return plotting.plot_attention_heads(
                [layers[layer]], src, tgt, example=example, title=title
            )
        fig = plotting.plot_attention(layers[layer][example, head], src, tgt, title=title)
        fig.axes[0].set_title(f"第 {layer + 1} 层 · 头 {head + 1} · 例子 {example}")
        return fig

    return _explorer(controls, draw)


# ---------------------------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------------------------

# The figure titles print the values in the format the sliders' readouts use (fixed-point
# formats read the same in Python and in the widgets' d3-format), so a title says τ=1.78 when
# the slider shows 1.78.
TEMPERATURE_FORMAT = ".2f"
TOP_P_FORMAT = ".2f"

DEFAULT_SAMPLING_SETTINGS: tuple[dict[str, Any], ...] = (
    {"temperature": 0.5},
    {"temperature": 2.0},
    {"top_k": 3},
    {"top_p": 0.8},
)


def sampling_distribution(
    logits: Any, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """The distribution sampling draws from: ``softmax(filter(logits / temperature))``.

    Uses ``lecturekit.decoding.filter_logits`` (the code ``sample`` runs) for top-k / top-p.
    ``logits``: ``(V,)``; returns ``(V,)`` probabilities.
    """
    logits = torch.as_tensor(logits, dtype=torch.float64)
    if logits.dim() != 1:
        raise ValueError(f"logits must be 1-D (V,), got shape {tuple(logits.shape)}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    filtered = filter_logits((logits / temperature)[None], top_k=top_k, top_p=top_p)[0]
    return torch.softmax(filtered, dim=-1)


def _setting_label(
    temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> str:
    parts = [f"τ={temperature:{TEMPERATURE_FORMAT}}"]  # τ: the book's temperature, T is a length
    if top_k:
        parts.append(f"top-k={top_k}")
    if top_p is not None and top_p < 1.0:
        parts.append(f"top-p={top_p:{TOP_P_FORMAT}}")
    return ", ".join(parts)


def explore_sampling(
    logits: Any,
    tokens: Sequence[Any] | None = None,
    *,
    static: bool = False,
    settings: Sequence[dict[str, Any]] = DEFAULT_SAMPLING_SETTINGS,
) -> widgets.VBox | Figure:
    """How temperature, top-k and top-p reshape a next-token distribution (lecture p54).

    Args:
        logits: ``(V,)`` next-token logits.
        tokens: ``V`` token labels for the x axis.
        static: return a figure with one panel per entry of ``settings`` (each a dict of
            ``temperature`` / ``top_k`` / ``top_p``), the original distribution in every panel.
    """
    logits = torch.as_tensor(logits, dtype=torch.float64).detach().cpu()
    original = sampling_distribution(logits)
    vocab_size = logits.shape[0]
    if static:
        fig, axes = plt.subplots(
            1, len(settings), figsize=(3.6 * len(settings), 3.0), squeeze=False
        )
        plt.close(fig)
        for ax, setting in zip(axes[0], settings, strict=True):
            adjusted = sampling_distribution(logits, **setting)
            plotting.plot_token_distribution(
                original, tokens, compare=adjusted, ax=ax, title=_setting_label(**setting)
            )
        fig.tight_layout()
        return fig
    controls = {
        "temperature": widgets.FloatLogSlider(
            value=1.0,
            base=10,
            min=-1,
            max=0.7,
            step=0.05,
            description="温度 τ",
            readout_format=TEMPERATURE_FORMAT,
        ),
        "top_k": widgets.IntSlider(
            value=0,
            min=0,
            max=vocab_size,
            description="top-k（0 = 不限）",
            style={"description_width": "initial"},
            **{_TOOLTIP: "0 = 不限制"},
        ),
        "top_p": widgets.FloatSlider(
            value=1.0,
            min=0.05,
            max=1.0,
            step=0.05,
            description="top-p",
            readout_format=TOP_P_FORMAT,
        ),
    }

    def draw() -> Figure:
        setting = {
            "temperature": float(controls["temperature"].value),
            "top_k": controls["top_k"].value or None,
            "top_p": float(controls["top_p"].value),
        }
        adjusted = sampling_distribution(logits, **setting)
        return plotting.plot_token_distribution(
            original, tokens, compare=adjusted, title=_setting_label(**setting)
        )

    return _explorer(controls, draw)


# ---------------------------------------------------------------------------------------------
# masks
# ---------------------------------------------------------------------------------------------


def attention_masks(length: int, n_padding: int) -> dict[str, torch.Tensor]:
    """The masks of a decoder self-attention over ``length`` positions, the last
    ``n_padding`` of which are padding; each ``(T, T)`` bool, True = not allowed:
    ``"causal"``, ``"padding"`` (padding keys, broadcast over queries) and ``"combined"``.
    """
    if not 0 <= n_padding < length:
        raise ValueError(f"n_padding must be in [0, length), got {n_padding} with length {length}")
    tokens = torch.ones(1, length, dtype=torch.long)
    tokens[0, length - n_padding :] = 0
    causal = causal_mask(length)
    padding = padding_mask(tokens, pad_id=0)[0].expand(length, length)
    return {"causal": causal, "padding": padding, "combined": causal | padding}


_MASK_TITLES = {
    "causal": "因果掩码 (causal mask)",
    "padding": "填充掩码 (padding mask)",
    "combined": "两者合并",
}


def explore_masks(
    tokens: Sequence[str] | None = None, *, static: bool = False, n_padding: int = 2
) -> widgets.VBox | Figure:
    """Causal and padding masks of the decoder's self-attention (lecture p28-p30).

    Args:
        tokens: the labels of the real positions, the decoder's input (default
            ``<bos> y1 y2 y3``); the padding, ``n_padding`` ``<pad>`` positions, is appended
            after them (the slider goes from none to as many as there are tokens).
        static: return the three masks side by side for the given ``n_padding``.
    """
    base = list(tokens) if tokens is not None else ["<bos>", "y1", "y2", "y3"]
    if not base:
        raise ValueError("tokens must hold at least 1 position")
    if n_padding < 0:
        raise ValueError(f"n_padding must be >= 0, got {n_padding}")

    def draw_all(n_pad: int, kind: str | None) -> Figure:
        labels = base + ["<pad>"] * n_pad
        masks = attention_masks(len(labels), n_pad)
        kinds = list(masks) if kind is None else [kind]
        fig, axes = plt.subplots(1, len(kinds), figsize=(3.3 * len(kinds), 3.2), squeeze=False)
        plt.close(fig)
        for ax, name in zip(axes[0], kinds, strict=True):
            plotting.plot_mask(masks[name], labels, labels, ax=ax, title=_MASK_TITLES[name])
        fig.tight_layout()
        return fig

    if static:
        return draw_all(n_padding, None)
    controls = {
        "kind": widgets.ToggleButtons(
            options=[(title, name) for name, title in _MASK_TITLES.items()],
            value="combined",
            style={"button_width": "auto"},  # the default width cuts "因果掩码 (causal mask)"
        ),
        "n_padding": widgets.IntSlider(
            value=n_padding, min=0, max=max(n_padding, len(base)), description="填充个数"
        ),
    }
    return _explorer(
        controls, lambda: draw_all(controls["n_padding"].value, controls["kind"].value)
    )
