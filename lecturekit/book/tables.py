"""Result tables for the notebooks: a real HTML table instead of text padded with spaces.

Text padded with spaces lines up only where every character is as wide as the padding
assumes; in the browser's monospace font a Chinese character is neither one nor exactly two
columns wide, so a padded table with Chinese labels is jagged. A :class:`Table` shown in a
notebook (``display(table)``, or as the cell's last value) is a ``<table>`` element:
Jupyter and Colab draw it, the HTML book keeps it (its scroll box and theme colours apply,
as for a pandas DataFrame), and the PDF, printed from the HTML book, shows the same table.
Its plain-text form, for a terminal and ``print``, is a Markdown pipe table.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Table"]

_ALIGN = {"l": "left", "r": "right", "c": "center"}
_CODE = re.compile(r"`([^`]+)`")


def _cell_html(cell: object) -> str:
    """A cell's text, HTML-escaped, with each span in backticks shown as code."""
    parts = _CODE.split(str(cell))  # text, code, text, code, ..., text
    return "".join(
        f"<code>{html.escape(part)}</code>" if i % 2 else html.escape(part)
        for i, part in enumerate(parts)
    )


@dataclass(frozen=True)
class Table:
    """A table of already formatted cells: ``header`` names ``n`` columns, each row has ``n``.

    Cells are strings shown as given, so a number keeps the rounding its caller chose; a span
    in backticks (`` `name` ``) is shown as code, as in Markdown.
    ``align`` gives one letter per column (``l`` left, ``r`` right, ``c`` centre); by default
    the first column (the row labels) is left-aligned and the others (numbers) right-aligned.
    ``caption``, when given, is shown above the table.

    Raises ``ValueError`` if a row or ``align`` does not have one entry per column, or
    ``align`` uses a letter other than ``l``, ``r``, ``c``.
    """

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    caption: str = ""
    align: str = ""

    def __post_init__(self) -> None:
        n = len(self.header)
        for i, row in enumerate(self.rows):
            if len(row) != n:
                raise ValueError(f"row {i} has {len(row)} cells, the header {n} columns")
        if self.align and (len(self.align) != n or set(self.align) - set(_ALIGN)):
            raise ValueError(f"align must be {n} letters from 'l', 'r', 'c', got {self.align!r}")

    def alignments(self) -> list[str]:
        """The CSS ``text-align`` of each column: ``left``, ``right`` or ``center``."""
        letters = self.align or "l" + "r" * (len(self.header) - 1)
        return [_ALIGN[letter] for letter in letters]

    def _repr_html_(self) -> str:
        """The table as one HTML ``<table>`` (what Jupyter, Colab and the book show)."""
        styles = [f' style="text-align: {a}"' for a in self.alignments()]

        def row(cells: Sequence[str], tag: str) -> str:
            inner = "".join(
                f"<{tag}{s}>{_cell_html(c)}</{tag}>" for c, s in zip(cells, styles, strict=True)
            )
            return f"<tr>{inner}</tr>"

        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        body = "".join(row(r, "td") for r in self.rows)
        return (
            f'<table class="dataframe">{caption}<thead>{row(self.header, "th")}</thead>'
            f"<tbody>{body}</tbody></table>"
        )

    def to_markdown(self) -> str:
        """The table as a Markdown pipe table (its plain-text form), caption on the line above."""
        marks = {"left": ":--", "right": "--:", "center": ":-:"}

        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(str(c).replace("|", r"\|") for c in cells) + " |"

        lines = [self.caption] if self.caption else []
        lines += [line(self.header), line([marks[a] for a in self.alignments()])]
        lines += [line(r) for r in self.rows]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_markdown()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's plain-text form (``text/plain``): the Markdown pipe table."""
        printer.text(self.to_markdown())
