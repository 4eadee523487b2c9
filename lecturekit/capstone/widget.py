"""The capstone's input method to type into (ipywidgets): a pinyin box and its candidate bar.

The box shows when it is the value of a notebook cell; the HTML book is static, so the
chapter also prints the same bars for a few typed inputs
(:func:`lecturekit.capstone.analysis.candidate_bar_text`).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets

from lecturekit._common import check_int
from lecturekit.capstone.analysis import candidate_bar_text, check_engine
from lecturekit.capstone.models import at_engine, best_engine

__all__ = ["pinyin_input_box"]


def _name(engine: Any) -> str:
    return str(getattr(engine, "name", type(engine).__name__))


def pinyin_input_box(
    engine: Any = None, k: int = 5, *, beside: Sequence[Any] | None = None
) -> widgets.VBox:
    """An input method to type into: a text box for toneless pinyin (spaced or not, ü as
    ``v``) and a candidate bar (``1. 我爱北京  2. ...``) that follows every keystroke.

    ``engine``: any input method (``candidates(pinyins, k)``, :func:`~lecturekit.capstone
    .analysis.check_engine`); default the chapter's most accurate one
    (:func:`~lecturekit.capstone.models.best_engine`). ``beside``: engines whose bars are
    shown below it, smaller, for comparison; default the shipped AT Transformer with beam
    search (:func:`~lecturekit.capstone.models.at_engine`), ``()`` for none. Input that cannot
    be read (no split into syllables, an unknown syllable, too long) shows its error message
    in the bar. ``box.controls["pinyin"]`` is the text box, ``box.output`` the bars.
    """
    check_int("k", k, 1)
    engine = best_engine() if engine is None else engine
    beside = [at_engine()] if beside is None else beside
    check_engine("engine", engine)
    for other in beside:
        check_engine("every item of beside", other)
    text = widgets.Text(
        value="", placeholder="woaibeijing", description="拼音", continuous_update=True
    )
    bar = widgets.HTML(value="")
    box = widgets.VBox([text, bar])
    box.controls, box.output = {"pinyin": text}, bar
    rows = [(engine, "font-size:1.2em"), *((other, "color:#555") for other in beside)]

    def line(shown: Any, typed: str) -> str:
        try:
            return html.escape(candidate_bar_text(shown, typed, k=k))
        except ValueError as err:
            return f"<span style='color:#b00020'>{html.escape(str(err))}</span>"

    def update(_change: Any = None) -> None:
        typed = text.value
        if not typed.strip():
            bar.value = "<span style='color:gray'>输入拼音，例如 woaibeijing</span>"
            return
        bar.value = "<br>".join(
            f"<span style='{style}'>{html.escape(_name(shown))}：{line(shown, typed)}</span>"
            for shown, style in rows
        )

    text.observe(update, names="value")
    update()
    return box
