"""The theme's words in Simplified Chinese.

sphinx-book-theme's zh_CN catalog leaves some strings in English ("Launch on Colab", the
search box's "Search this book...", the sidebar buttons' "Toggle primary sidebar") and
gives others in Traditional wording ("列印成 PDF"). This extension replaces them where they
are made: the search box's text is a theme option, the header buttons are a list in each
page's template context (rewritten after the theme filled it in, with the ``translate``
function their macros call), the two sidebar buttons, the colour-mode switch and the
footer's author, copyright and date lines (Chinese, no English full stop) are templates,
overridden in ``book/_templates/``, and the ARIA label of a folded cell is rewritten in the
page's body. tests/test_book_ext.py checks the mapping, tests/test_book_html.py the built
pages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config

SEARCH_BAR_TEXT = "搜索本书……"
# theme string (English or Traditional) -> Simplified Chinese
WORDS = {
    "Launch on Colab": "在 Colab 中打开",
    "Launch on Binder": "在 Binder 中打开",
    "列印成 PDF": "打印成 PDF",
    "Print to PDF": "打印成 PDF",
    "Download notebook file": "下载 .ipynb 笔记本",
    "Download source file": "下载源文件",
    "Download this page": "下载此页面",
    "Source repository": "源代码仓库",
    "Open an issue": "提交问题 (issue)",
    "Fullscreen mode": "全屏模式",
    "repository": "仓库",
    "open issue": "提交问题",
    "Repository": "源代码仓库",
    "Open issue": "提交问题 (issue)",
    "Source repositories": "源代码仓库",
    "Launch interactive content": "在线运行",
    # the alt text of a button's logo: "Colab logo"
    "logo": "图标",
}
# ARIA labels that myst-nb writes into a page's body in English
LABELS = {
    '<summary aria-label="Toggle hidden content">': '<summary aria-label="显示或隐藏内容">',
}
TEMPLATES = Path(__file__).resolve().parents[1] / "_templates"


def translate_buttons(buttons: list[dict[str, Any]]) -> None:
    """Rewrite, in place, the tooltips and labels of sphinx-book-theme's header buttons (a
    list of dicts; a dropdown holds its own list under ``"buttons"``) with ``WORDS``."""
    for button in buttons:
        for key in ("tooltip", "text", "label"):
            value = button.get(key)
            if isinstance(value, str):
                button[key] = WORDS.get(value.strip(), value)
        if isinstance(button.get("buttons"), list):
            translate_buttons(button["buttons"])


def _configure(app: Sphinx, config: Config) -> None:
    config.html_theme_options = {**config.html_theme_options, "search_bar_text": SEARCH_BAR_TEXT}
    # ours first, so that they override the theme's components of the same name
    config.templates_path = [str(TEMPLATES), *config.templates_path]


def _page_context(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: object
) -> None:
    translate_buttons(context.get("header_buttons") or [])
    # the buttons' macros translate their texts with this function (the logo's alt text too)
    theme_translate = context.get("translate")
    if callable(theme_translate):
        context["translate"] = lambda text: WORDS.get(text, theme_translate(text))
    if isinstance(context.get("body"), str):
        context["body"] = translate_labels(context["body"])


def translate_labels(html: str) -> str:
    """``html`` with the English ARIA labels of ``LABELS`` in Chinese."""
    for english, chinese in LABELS.items():
        html = html.replace(english, chinese)
    return html


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("config-inited", _configure)
    # after sphinx-book-theme (priority 501) has made the buttons
    app.connect("html-page-context", _page_context, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
