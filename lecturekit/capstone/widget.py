"""The capstone's input method to type into (ipywidgets): a pinyin box and its candidate bar.

The box shows when it is the value of a notebook cell; the HTML book is static, so the
chapter also prints the same bar for a few typed inputs
(:func:`lecturekit.capstone.analysis.candidate_bar_text`).
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from lecturekit._common import check_int
from lecturekit.capstone.analysis import candidate_bar_text

__all__ = ["pinyin_input_box"]


def pinyin_input_box(model: Any, src_vocab: Any, tgt_vocab: Any, k: int = 5) -> widgets.VBox:
    """An input method to type into: a text box for toneless pinyin (spaced or not, ü as
    ``v``) and a candidate bar (``1. 我爱北京  2. ...``) that follows every keystroke.

    ``model``: the encoder-decoder sentence model with its vocabularies (beam search of width
    ``k``, :func:`lecturekit.capstone.analysis.candidate_bar_text`). Input that
    cannot be read (no split into syllables, an unknown syllable, too long) shows its error
    message in the bar. ``box.controls["pinyin"]`` is the text box, ``box.output`` the bar.
    """
    check_int("k", k, 1)
    text = widgets.Text(
        value="", placeholder="woaibeijing", description="拼音", continuous_update=True
    )
    bar = widgets.HTML(value="")
    box = widgets.VBox([text, bar])
    box.controls, box.output = {"pinyin": text}, bar

    def update(_change: Any = None) -> None:
        typed = text.value
        if not typed.strip():
            bar.value = "<span style='color:gray'>输入拼音，例如 woaibeijing</span>"
            return
        try:
            line = candidate_bar_text(model, src_vocab, tgt_vocab, typed, k=k)
        except ValueError as err:
            bar.value = f"<span style='color:#b00020'>{html.escape(str(err))}</span>"
            return
        bar.value = f"<span style='font-size:1.2em'>{html.escape(line)}</span>"

    text.observe(update, names="value")
    update()
    return box
