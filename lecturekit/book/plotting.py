"""Figures for the book: attention maps, training curves, positional encodings, masks.

The decoding chapter's beam trees and error-by-position curves are in
:mod:`lecturekit.book.decoding_plots`.

Importing this module sets figures up for the book (:mod:`lecturekit.book.figure_setup`: a
CJK font for Chinese labels, 2x pixels in a notebook).

Every helper returns the matplotlib ``Figure``. Figures made here are closed in pyplot right
away, so a notebook shows each exactly once: when it is the cell's value or passed to
``display``. Pass ``ax=`` to draw into your own axes instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lecturekit.book import figure_setup  # noqa: F401  (the CJK font; 2x pixels in a notebook)

__all__ = [
    "plot_attention",
    "plot_attention_heads",
    "plot_history",
    "plot_training",
    "plot_positional_encoding",
    "plot_mask",
    "plot_token_distribution",
]


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _to_numpy(x: Any, name: str) -> np.ndarray:
    """Tensor / array / nested list -> float64 numpy array."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    try:
        array = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be a tensor or array of numbers: {error}") from None
    return array


def _new_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize)
    plt.close(fig)
    return fig, ax


def _labels(tokens: Sequence[Any] | None, n: int, name: str) -> list[str] | None:
    if tokens is None:
        return None
    tokens = [str(t) for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"{name} has {len(tokens)} tokens but the matrix has {n} along that axis")
    return tokens


# ---------------------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------------------


def plot_attention(
    weights: Any,
    src_tokens: Sequence[Any] | None = None,
    tgt_tokens: Sequence[Any] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    cmap: str = "Blues",
    annotate: bool = False,
    colorbar: bool = True,
) -> Figure:
    """One attention map as a heatmap (lecture p11-p12, p28).

    Args:
        weights: ``(T, S)`` attention weights: row ``t`` is how query ``t`` spreads its
            attention over the ``S`` keys (each row sums to 1).
        src_tokens: ``S`` labels for the keys (x axis), e.g. source characters.
        tgt_tokens: ``T`` labels for the queries (y axis), e.g. decoder inputs.
        annotate: write each weight in its cell (readable up to about 12 x 12).
    """
    w = _to_numpy(weights, "weights")
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (T, S), got shape {w.shape}")
    fig, ax = _new_axes(ax, (0.45 * w.shape[1] + 2.0, 0.45 * w.shape[0] + 1.2))
    image = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=max(1e-9, float(w.max())), aspect="auto")
    xs, ys = (
        _labels(src_tokens, w.shape[1], "src_tokens"),
        _labels(tgt_tokens, w.shape[0], "tgt_tokens"),
    )
    if xs is not None:
        ax.set_xticks(range(len(xs)), xs, rotation=90 if max(map(len, xs), default=0) > 2 else 0)
    if ys is not None:
        ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel("键（被关注的位置）")
    ax.set_ylabel("查询（发出关注的位置）")
    if annotate:
        for (i, j), value in np.ndenumerate(w):
            color = "white" if value > 0.6 * w.max() else "black"
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color=color)
    if title:
        ax.set_title(title)
    if colorbar:
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return fig


def plot_attention_heads(
    attentions: Any,
    src_tokens: Sequence[Any] | None = None,
    tgt_tokens: Sequence[Any] | None = None,
    *,
    example: int = 0,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    title: str | None = None,
    cell_size: float = 2.4,
) -> Figure:
    """A grid of attention maps: one row per layer, one column per head (lecture p24-p26).

    Args:
        attentions: one layer as ``(H, T, S)`` or ``(B, H, T, S)``, or a sequence of layers
            (e.g. the per-layer weights a model keeps after ``need_weights=True``).
        example: which batch row to draw when the weights have a batch dimension.
        layers, heads: subsets to draw (default: all).
    """
    per_layer = _attention_layers(attentions, example)
    layer_ids = list(range(len(per_layer))) if layers is None else list(layers)
    n_heads = per_layer[0].shape[0]
    head_ids = list(range(n_heads)) if heads is None else list(heads)
    for i in layer_ids:
        if not 0 <= i < len(per_layer):
            raise ValueError(f"layers contains {i}, but there are {len(per_layer)} layers")
    for h in head_ids:
        if not 0 <= h < n_heads:
            raise ValueError(f"heads contains {h}, but there are {n_heads} heads")
    T, S = per_layer[0].shape[1:]
    aspect = max(0.4, min(2.5, T / S))
    fig, axes = plt.subplots(
        len(layer_ids),
        len(head_ids),
        figsize=(cell_size * len(head_ids) + 0.6, cell_size * aspect * len(layer_ids) + 0.6),
        squeeze=False,
    )
    plt.close(fig)
    for r, layer in enumerate(layer_ids):
        for c, head in enumerate(head_ids):
            ax = axes[r][c]
            plot_attention(per_layer[layer][head], src_tokens, tgt_tokens, ax=ax, colorbar=False)
            ax.set_title(f"第 {layer + 1} 层 · 头 {head + 1}", fontsize=9)
            ax.tick_params(labelsize=7)
            if r != len(layer_ids) - 1:
                ax.set_xlabel("")
            if c != 0:
                ax.set_ylabel("")
                ax.set_yticklabels([])
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def _attention_layers(attentions: Any, example: int) -> list[np.ndarray]:
    """Normalise the accepted inputs to a list of ``(H, T, S)`` arrays, one per layer."""
    if isinstance(attentions, (list, tuple)):
        layers = [_to_numpy(a, f"attentions[{i}]") for i, a in enumerate(attentions)]
    else:
        layers = [_to_numpy(attentions, "attentions")]
    if not layers:
        raise ValueError("attentions must not be empty")
    out = []
    for i, a in enumerate(layers):
        if a.ndim == 4:
            if not -a.shape[0] <= example < a.shape[0]:
                raise ValueError(f"example={example} but the batch has {a.shape[0]} rows")
            a = a[example]
        if a.ndim != 3:
            raise ValueError(
                f"attention layer {i} must be (H, T, S) or (B, H, T, S), got shape {a.shape}"
            )
        out.append(a)
    if len({a.shape for a in out}) != 1:
        raise ValueError(f"all layers must have the same shape, got {[a.shape for a in out]}")
    return out


# ---------------------------------------------------------------------------------------------
# training curves
# ---------------------------------------------------------------------------------------------

_X_KEYS = ("step", "eval_step", "epoch")


def plot_history(
    history: Mapping[str, Sequence[float]] | Any,
    keys: Sequence[str] | None = None,
    *,
    smooth: int = 1,
    title: str | None = None,
) -> Figure:
    """Training curves: one panel each for losses, accuracies, learning rate, and the rest.

    Args:
        history: a mapping name -> list of numbers (e.g. ``{"loss": [...], "lr": [...]}``),
            or an object with ``to_dict()`` / a dataclass (``lecturekit.training.History``).
            The lists ``step``, ``eval_step`` and ``epoch``, when present, are used as the x
            axis of the series with the same length; otherwise the x axis is the index.
        keys: which series to draw (default: every non-empty list of numbers).
        smooth: moving-average window for noisy per-step series (1 = raw); series drawn
            against ``eval_step`` or ``epoch``, and the learning rate, are never smoothed.

    Lines are labelled with the book's terms (``"valid_exact_match"`` -> 验证集完全匹配率).
    """
    series = _history_dict(history)
    if keys is None:
        keys = [k for k, v in series.items() if k not in _X_KEYS and _is_series(v) and len(v)]
    missing = [k for k in keys if k not in series]
    if missing:
        raise ValueError(f"keys {missing} are not in history (it has {sorted(series)})")
    if not keys:
        raise ValueError("history has no non-empty series to plot")
    if isinstance(smooth, bool) or not isinstance(smooth, int) or smooth < 1:
        raise ValueError(f"smooth must be a positive int, got {smooth!r}")
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(_panel_of(key), []).append(key)
    fig, axes = plt.subplots(1, len(groups), figsize=(4.3 * len(groups), 3.3), squeeze=False)
    plt.close(fig)
    for ax, (panel, panel_keys) in zip(axes[0], groups.items(), strict=True):
        for key in panel_keys:
            y = [float(v) for v in series[key]]
            x = next(
                (
                    series[k]
                    for k in _X_KEYS
                    if _is_series(series.get(k)) and len(series[k]) == len(y)
                ),
                range(len(y)),
            )
            x_name = next((k for k in _X_KEYS if series.get(k) is x), "index")
            style = "o-" if len(y) <= 30 else "-"
            # only dense per-step curves are smoothed; sparse evaluation points stay exact,
            # and so does the learning rate (a schedule, not a noisy measurement)
            if x_name in ("step", "index") and len(y) > 3 * smooth and panel != _PANELS["lr"]:
                y = _moving_average(y, smooth)
            ax.plot(list(x), y, style, markersize=3, label=_LABELS.get(key, key))
            ax.set_xlabel("step" if x_name == "eval_step" else x_name)
        ax.set_title(panel)
        if panel == _PANELS["lr"]:
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
        if len(panel_keys) > 1:
            ax.legend(fontsize=8)
        else:
            ax.set_ylabel(_LABELS.get(panel_keys[0], panel_keys[0]))
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_training(history: Any, smooth: int = 20) -> Figure:
    """The curves :func:`lecturekit.training.fit` records, in one figure: losses, accuracy
    and exact match, the learning rate, and the teacher-forcing probability when scheduled
    sampling lowered it (series that are empty, such as validation without ``valid``, are
    left out).

    Args:
        history: a ``lecturekit.training.History`` (or a mapping with its field names).
        smooth: moving-average window for the per-step training curves.

    Same as :func:`plot_history` with those keys.
    """
    series = _history_dict(history)
    keys = ["loss", "valid_loss", "token_accuracy", "valid_token_accuracy"]
    keys += ["valid_exact_match", "lr"]
    if any(p < 1.0 for p in series.get("teacher_prob", ())):
        keys.append("teacher_prob")
    return plot_history(series, keys=[k for k in keys if series.get(k)], smooth=smooth)


_PANELS = {"loss": "损失 (loss)", "accuracy": "准确率 (accuracy)", "lr": "学习率 (learning rate)"}
# the book's terms for the series a ``History`` records (other keys are drawn as named)
_LABELS = {
    "loss": "训练损失",
    "valid_loss": "验证损失",
    "token_accuracy": "逐符号准确率（教师强制）",
    "valid_token_accuracy": "验证集逐符号准确率（教师强制）",
    "valid_exact_match": "验证集完全匹配率",
    "lr": "学习率",
    "teacher_prob": "喂正确答案的概率",
}


def _panel_of(key: str) -> str:
    if "loss" in key:
        return _PANELS["loss"]
    if "accuracy" in key or "exact_match" in key or "bleu" in key:
        return _PANELS["accuracy"]
    if key == "lr" or key.endswith("_lr"):
        return _PANELS["lr"]
    return key


def _history_dict(history: Any) -> dict[str, Any]:
    if isinstance(history, Mapping):
        return dict(history)
    if hasattr(history, "to_dict"):
        return dict(history.to_dict())
    if hasattr(history, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(history)
    raise TypeError(
        f"history must be a mapping name -> list or a dataclass, got {type(history).__name__}"
    )


def _is_series(value: Any) -> bool:
    return isinstance(value, (list, tuple, np.ndarray)) and all(
        isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in value
    )


def _moving_average(values: Sequence[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


# ---------------------------------------------------------------------------------------------
# positional encoding, masks, distributions
# ---------------------------------------------------------------------------------------------


def plot_positional_encoding(
    encoding: Any, *, ax: Axes | None = None, title: str | None = "位置编码 (positional encoding)"
) -> Figure:
    """Heatmap of a positional-encoding matrix ``(L, D)``: position down, dimension across.

    With sinusoidal encodings (lecture p19 of the self-attention lecture) the left columns
    oscillate fast and the right ones slowly, so each row is a distinct pattern.
    """
    pe = _to_numpy(encoding, "encoding")
    if pe.ndim == 3 and pe.shape[0] == 1:
        pe = pe[0]
    if pe.ndim != 2:
        raise ValueError(f"encoding must be (L, D) (or (1, L, D)), got shape {pe.shape}")
    fig, ax = _new_axes(ax, (7.0, 3.6))
    limit = max(1e-9, float(np.abs(pe).max()))
    image = ax.imshow(pe, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xlabel("维度 (dimension)")
    ax.set_ylabel("位置 (position)")
    if title:
        ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return fig


def plot_mask(
    mask: Any,
    row_tokens: Sequence[Any] | None = None,
    col_tokens: Sequence[Any] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """A boolean attention mask ``(T, S)``: True (= not allowed, masked out) is drawn dark.

    Uses the ``torch.nn.Transformer`` convention of ``lecturekit.model.masks``.
    """
    m = _to_numpy(mask, "mask")
    if m.ndim != 2:
        raise ValueError(f"mask must be 2-D (T, S), got shape {m.shape}")
    fig, ax = _new_axes(ax, (0.4 * m.shape[1] + 1.6, 0.4 * m.shape[0] + 1.2))
    ax.imshow(m, cmap="Greys", vmin=0, vmax=1.5, aspect="auto")
    for (i, j), value in np.ndenumerate(m):
        ax.text(j, i, "×" if value else "✓", ha="center", va="center", fontsize=8,
                color="white" if value else "green")  # fmt: skip
    xs, ys = (
        _labels(col_tokens, m.shape[1], "col_tokens"),
        _labels(row_tokens, m.shape[0], "row_tokens"),
    )
    if xs is not None:  # upright labels such as <pad> would overlap their neighbours
        ax.set_xticks(range(len(xs)), xs, rotation=90 if max(map(len, xs), default=0) > 2 else 0)
    if ys is not None:
        ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel("键（被关注的位置）")
    ax.set_ylabel("查询（发出关注的位置）")
    if title:
        ax.set_title(title)
    return fig


def plot_token_distribution(
    probs: Any,
    tokens: Sequence[Any] | None = None,
    *,
    compare: Any = None,
    labels: tuple[str, str] = ("原始分布", "调整后"),
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Bar chart of a next-token distribution ``(V,)``, optionally next to a second one.

    Used for sampling: ``probs`` the model's softmax, ``compare`` the distribution after
    temperature / top-k / top-p (lecture p54).
    """
    p = _to_numpy(probs, "probs")
    if p.ndim != 1:
        raise ValueError(f"probs must be 1-D (V,), got shape {p.shape}")
    q = None if compare is None else _to_numpy(compare, "compare")
    if q is not None and q.shape != p.shape:
        raise ValueError(f"compare must have the shape of probs {p.shape}, got {q.shape}")
    names = _labels(tokens, len(p), "tokens") or [str(i) for i in range(len(p))]
    fig, ax = _new_axes(ax, (max(4.0, 0.45 * len(p) + 1.5), 3.0))
    x = np.arange(len(p))
    width = 0.4 if q is not None else 0.8
    ax.bar(x - (width / 2 if q is not None else 0), p, width, label=labels[0], color="#9db4d8")
    if q is not None:
        ax.bar(x + width / 2, q, width, label=labels[1], color="#d9534f")
        ax.legend(fontsize=8)
    ax.set_xticks(x, names, rotation=90 if max(map(len, names)) > 2 else 0)
    ax.set_ylabel("概率 (probability)")
    ax.set_ylim(0, 1.05 * max(float(p.max()), float(q.max()) if q is not None else 0.0, 1e-9))
    if title:
        ax.set_title(title)
    return fig


# ---------------------------------------------------------------------------------------------
# beam search tree
# ---------------------------------------------------------------------------------------------
