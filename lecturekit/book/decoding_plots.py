"""Figures of the decoding chapter (chapter 6): beam-search trees (p53) and error rates by
output position (exposure bias, p56-p57).

Built on :mod:`lecturekit.book.plotting` (importing this module registers the CJK font too);
every helper returns the matplotlib ``Figure``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lecturekit.book.plotting import _new_axes

__all__ = ["plot_beam_tree", "plot_error_by_position"]


def plot_beam_tree(
    steps: Sequence[Sequence[Any]],
    *,
    token_labels: Sequence[str] | Mapping[int, str] | Callable[[Any], str] | None = None,
    best: Sequence[Any] | None = None,
    final: Sequence[Sequence[Any]] | None = None,
    root_label: str = "<bos>",
    title: str | None = None,
) -> Figure:
    """Draw the hypotheses a beam search expanded, as a tree (lecture p53).

    Args:
        steps: ``steps[t]`` lists the hypotheses alive after step ``t + 1``; each is a
            ``(prefix, score)`` pair (``prefix``: the ``t + 1`` tokens generated so far,
            ``score``: its cumulative log-probability), or any object with ``.tokens`` and
            ``.score`` (e.g. ``lecturekit.decoding.Hypothesis`` from
            ``beam_search(..., trace=True).trace``, whose ``trace[b]`` fits directly).
            Prefixes may also be listed when pruned: a node with no child in the next step
            is drawn grey (dropped from the beam).
        token_labels: how to print a token: a list/dict id -> text or a function.
        best: the final output's tokens; its path is drawn in red (default: the highest
            scoring prefix of the last step).
        final: the prefixes of the last step that stay in the final beam (e.g.
            ``[h.tokens for h in trace[b][-1]]``); the other last-step nodes are drawn grey.
            Default: only ``best`` (a last-step node has no child that could show it kept).
    """
    nodes = _beam_nodes(steps)
    if best is None:
        best = max(nodes[-1], key=lambda n: n[1])[0] if nodes[-1] else ()
    best = tuple(best)
    final_set = {tuple(f) for f in final} if final is not None else {best}
    label = _token_formatter(token_labels)

    # y position: order nodes of each depth by their parent's y, then by score (best on top)
    position: dict[tuple[Any, ...], tuple[float, float]] = {(): (0.0, 0.0)}
    for t, layer in enumerate(nodes):
        layer.sort(key=lambda n: (-position.get(n[0][:-1], (0, 0))[1], -n[1]))
        count = len(layer)
        for i, (prefix, _score) in enumerate(layer):
            position[prefix] = (float(t + 1), (count - 1) / 2 - i)
    width = max(len(layer) for layer in nodes)
    fig, ax = plt.subplots(figsize=(1.9 * (len(nodes) + 1) + 0.5, 0.75 * width + 1.2))
    plt.close(fig)
    alive = {prefix[:-1] for layer in nodes[1:] for prefix, _ in layer}
    ax.text(0, 0, root_label, ha="center", va="center", fontsize=9,
            zorder=3, bbox={"boxstyle": "round", "fc": "#eeeeee", "ec": "#555555"})  # fmt: skip
    for t, layer in enumerate(nodes):
        for prefix, score in layer:
            x, y = position[prefix]
            px, py = position.get(prefix[:-1], (x - 1, 0.0))
            on_best = best[: len(prefix)] == prefix
            kept = prefix in (final_set if t == len(nodes) - 1 else alive)
            color = "#d62728" if on_best else ("#1f77b4" if kept else "#aaaaaa")
            ax.plot([px, x], [py, y], color=color, lw=2.2 if on_best else 1.0, zorder=1)
            ax.text(x, y, f"{label(prefix[-1])}\n{score:.2f}", ha="center", va="center",
                    fontsize=8, color="black" if kept else "#888888",
                    zorder=3, bbox={"boxstyle": "round", "fc": "white", "ec": color})  # fmt: skip
    ax.set_xlim(-0.5, len(nodes) + 0.5)
    ax.set_ylim(-width / 2 - 0.2, width / 2 + 0.2)
    ax.set_xticks(
        range(len(nodes) + 1), ["开始"] + [f"第 {t} 步" for t in range(1, len(nodes) + 1)]
    )
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(title or "束搜索 (beam search)：红色为最终输出，灰色为被剪掉的候选")
    fig.tight_layout()
    return fig


def _beam_nodes(steps: Sequence[Sequence[Any]]) -> list[list[tuple[tuple[Any, ...], float]]]:
    """:func:`plot_beam_tree`'s ``steps`` as ``(prefix tuple, score)`` pairs, checked."""
    if not isinstance(steps, Sequence) or len(steps) == 0:
        raise ValueError("steps must be a non-empty sequence of per-step hypothesis lists")
    nodes: list[list[tuple[tuple[Any, ...], float]]] = []
    for t, hyps in enumerate(steps):
        layer = []
        for hyp in hyps:
            prefix, score = (hyp.tokens, hyp.score) if hasattr(hyp, "tokens") else hyp
            prefix = tuple(prefix)
            if len(prefix) != t + 1:
                raise ValueError(
                    f"steps[{t}] must hold prefixes of length {t + 1}, got {list(prefix)}"
                )
            layer.append((prefix, float(score)))
        nodes.append(layer)
    return nodes


def _token_formatter(
    token_labels: Sequence[str] | Mapping[int, str] | Callable[[Any], str] | None,
) -> Callable[[Any], str]:
    if token_labels is None:
        return str
    if callable(token_labels):
        return lambda token: str(token_labels(token))
    if isinstance(token_labels, Mapping):
        return lambda token: str(token_labels.get(token, token))
    table = list(token_labels)
    return lambda token: (
        table[token] if isinstance(token, int) and 0 <= token < len(table) else str(token)
    )


def plot_error_by_position(
    curves: Mapping[str, Sequence[float]],
    *,
    ax: Axes | None = None,
    title: str | None = "各输出位置的错误率",
) -> Figure:
    """Error rate per output position, one line per setting (exposure bias, lecture p56-p57).

    ``curves``: label -> rates from ``lecturekit.training.metrics.error_rate_by_position``.
    """
    if not isinstance(curves, Mapping) or not curves:
        raise TypeError("curves must be a non-empty mapping label -> list of rates")
    fig, ax = _new_axes(ax, (5.5, 3.4))
    for label, rates in curves.items():
        ax.plot(range(1, len(rates) + 1), list(rates), "o-", markersize=3, label=str(label))
    ax.set_xlabel("输出位置 (position)")
    ax.set_ylabel("错误率 (error rate)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return fig
