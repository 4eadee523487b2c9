"""lecturekit.book.tables: a result table reaches every reader as a real table.

Jupyter and Colab show what IPython's display formatter makes of an object; the HTML book
keeps a notebook's ``text/html`` output, and the PDF is printed from that HTML. So the
checks read the formatter's ``text/html`` back with an HTML parser and find the cells there,
unpadded and in order, and check the ``text/plain`` fallback.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from IPython.core.formatters import DisplayFormatter

from lecturekit.book.tables import Table


class _Cells(HTMLParser):
    """Rows of (tag, text, style) of every th/td, and the caption's text."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[tuple[str, str, str]]] = []
        self.caption = ""
        self.tables = 0
        self._cell: tuple[str, str] | None = None
        self._text = ""
        self._in_caption = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tables += tag == "table"
        if tag == "tr":
            self.rows.append([])
        elif tag in {"th", "td"}:
            self._cell, self._text = (tag, dict(attrs).get("style") or ""), ""
        self._in_caption = self._in_caption or tag == "caption"

    def handle_endtag(self, tag: str) -> None:
        if tag in {"th", "td"} and self._cell is not None:
            self.rows[-1].append((self._cell[0], self._text, self._cell[1]))
            self._cell = None
        self._in_caption = self._in_caption and tag != "caption"

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._text += data
        elif self._in_caption:
            self.caption += data


RESULTS = Table(
    ["系统", "CER", "top-5"],
    [["三元 HMM", "0.100 [0.091, 0.109]", "0.689"], ["Transformer 贪心", "0.184", "-"]],
    caption="测试集 <1000 个分句> & 区间",
)


def _bundle(table: Table) -> dict[str, str]:
    data, _ = DisplayFormatter().format(table)
    return data


def test_jupyter_gets_one_html_table_with_the_cells_unpadded_and_in_order() -> None:
    parsed = _Cells()
    parsed.feed(_bundle(RESULTS)["text/html"])
    assert parsed.tables == 1
    assert parsed.caption == "测试集 <1000 个分句> & 区间"  # escaped, then read back whole
    assert [[(tag, text) for tag, text, _ in row] for row in parsed.rows] == [
        [("th", "系统"), ("th", "CER"), ("th", "top-5")],
        [("td", "三元 HMM"), ("td", "0.100 [0.091, 0.109]"), ("td", "0.689")],
        [("td", "Transformer 贪心"), ("td", "0.184"), ("td", "-")],
    ]
    styles = [style for _, _, style in parsed.rows[1]]
    assert styles == ["text-align: left", "text-align: right", "text-align: right"]


def test_book_theme_styles_it_as_a_dataframe() -> None:
    # pydata-sphinx-theme colours `table.dataframe` in a cell's output, in dark mode too
    assert _bundle(RESULTS)["text/html"].startswith('<table class="dataframe">')


def test_align_sets_each_column() -> None:
    parsed = _Cells()
    parsed.feed(Table(["a", "b"], [["1", "2"]], align="cl")._repr_html_())
    assert [style for _, _, style in parsed.rows[1]] == ["text-align: center", "text-align: left"]


def test_plain_text_is_a_markdown_pipe_table() -> None:
    table = Table(["名字", "值"], [["a|b", "1.50"]], caption="标题")
    assert _bundle(table)["text/plain"] == "标题\n| 名字 | 值 |\n| :-- | --: |\n| a\\|b | 1.50 |"
    assert str(table) == table.to_markdown()


@pytest.mark.parametrize(
    ("rows", "align", "message"),
    [
        ([["1", "2", "3"]], "", "row 0 has 3 cells"),
        ([["1", "2"]], "lrr", "align must be 2 letters"),
        ([["1", "2"]], "lx", "align must be 2 letters"),
    ],
)
def test_a_misshapen_table_is_refused(rows: list[list[str]], align: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Table(["a", "b"], rows, align=align)


def test_backticks_show_code_and_everything_else_is_escaped() -> None:
    table = Table(["开关", "输出"], [["`causal_mask_missing`", "`<bos> a` / `b` & <pad>"]])
    html_text = table._repr_html_()
    assert '<td style="text-align: left"><code>causal_mask_missing</code></td>' in html_text
    assert "<code>&lt;bos&gt; a</code> / <code>b</code> &amp; &lt;pad&gt;" in html_text
    assert "| `causal_mask_missing` |" in table.to_markdown()  # Markdown keeps the backticks
