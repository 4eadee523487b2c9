"""Figure numbers, captions and alt text for the notebooks' plots.

A plot in the book is the PNG output of a code cell; myst-nb gives it its hashed file name as
alt text and no caption. When a page is read, this extension wraps each such image in a
figure numbered per chapter in document order ("图 4.2": chapter 4, second figure; on a
section page per section, "图 6.2.1", "图 A.1.2"; the capstone "图 C.2", the debugging lab
"图 L.2"; another page without a chapter number counts "图 2"), with a caption that is also the image's alt text. The caption
is taken, without running anything, from the cell: its metadata field ``caption`` (a string, or a list with one per image) when
present, else the string literals of the figure's titles in its source (``suptitle(...)``,
then ``set_title(...)``, ``title(...)`` or a ``title=...`` argument), else the heading of
the section the cell stands in. tests/test_book_ext.py checks the extraction,
tests/test_book_html.py the built pages.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform

# A caption joins at most this many titles of one figure's panels; a grid with more panels
# is named by its section's heading instead (a list of a dozen panel titles is not a caption).
MAX_PANEL_TITLES = 3
CHAPTER = re.compile(r"第\s*(\d+)\s*章")
SECTION = re.compile(r"(\d+|A)\.(\d+)\s")  # a section page's title: "6.2 曝光偏差…", "A.1 子词…"
HASHED = re.compile(r"[0-9a-f]{32,}")
# Pages without a chapter number, by the start of their title, and their figures' letter.
LETTERED = (("附录", "A"), ("综合项目", "C"), ("调试实验", "L"))


def _literal(node: ast.AST | None) -> str | None:
    """The text of a string literal (implicit concatenation included); None for anything
    computed, an f-string too: its text is only known when the cell runs."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = " ".join(node.value.split())
        return text or None
    return None


def figure_titles(source: str) -> tuple[list[str], list[str]]:
    """The figure titles written as string literals in a code cell's ``source``: the
    figure-wide titles (``suptitle``) and the panel titles (``set_title``, ``title``, a
    ``title=`` keyword), each list in source order without repeats. Lines of IPython magics
    (``%``, ``!``) are skipped; a cell that is not Python gives two empty lists."""
    code = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return [], []
    whole: list[str] = []
    panels: list[str] = []
    calls = sorted(
        (node for node in ast.walk(tree) if isinstance(node, ast.Call)),
        key=lambda call: (call.lineno, call.col_offset),
    )
    for call in calls:
        name = (
            call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        )
        found = whole if name == "suptitle" else panels
        if name in ("suptitle", "set_title", "title") and call.args:
            text = _literal(call.args[0])
            if text and text not in found:
                found.append(text)
        for keyword in call.keywords:
            text = _literal(keyword.value) if keyword.arg in ("title", "suptitle") else None
            target = whole if keyword.arg == "suptitle" else panels
            if text and text not in target:
                target.append(text)
    return whole, panels


def captions(source: str, metadata: dict[str, Any], images: int, heading: str) -> list[str]:
    """One caption per image of a cell (``images`` of them), from its ``metadata`` field
    ``caption``, else its titles (``figure_titles``), else the section ``heading``."""
    given = metadata.get("caption")
    if isinstance(given, str) and given.strip():
        return [given.strip()] * images
    if isinstance(given, list) and len(given) == images and all(isinstance(c, str) for c in given):
        return [c.strip() for c in given]
    whole, panels = figure_titles(source)
    for titles in (whole, panels):
        if len(titles) == images:
            return titles
        if titles and images == 1 and len(titles) <= MAX_PANEL_TITLES:
            return ["；".join(titles)]
    return [heading] * images


def figure_prefix(title: str) -> str:
    """What comes between "图 " and a figure's number in a page titled ``title``: the
    chapter's number and a dot ("4."), the section's on a section page ("6.2.", or "A.1." on
    the appendix's), "A." in an appendix on one page, "C." in the capstone and "L." in the
    debugging lab (the letters of their self-tests), nothing elsewhere."""
    section = SECTION.match(title)
    if section:
        chapter = section.group(1)
        return f"{int(chapter) if chapter.isdigit() else chapter}.{int(section.group(2))}."
    chapter = CHAPTER.search(title)
    if chapter:
        return f"{int(chapter.group(1))}."
    for start, letter in LETTERED:
        if title.startswith(start):
            return f"{letter}."
    return ""


MATH = re.compile(r"\$([^$]+)\$")


def plain(text: str) -> str:
    """A caption as plain text (alt text): matplotlib's ``$...$`` math without its TeX
    commands and braces, ``$p_{\\rm gen}$`` -> ``p_gen``."""
    return MATH.sub(lambda m: re.sub(r"\\[a-zA-Z]+\s*|[{}]", "", m.group(1)), text)


def _caption_nodes(text: str) -> list[nodes.Node]:
    """A caption's text, its ``$...$`` parts as math for MathJax."""
    found: list[nodes.Node] = []
    for index, part in enumerate(MATH.split(text)):
        if part:
            found.append(nodes.math(part, part) if index % 2 else nodes.Text(part))
    return found


def _heading(node: nodes.Node) -> str:
    section = node.parent
    while section is not None and not isinstance(section, nodes.section):
        section = section.parent
    if section is None or not isinstance(section[0], nodes.title):
        return ""
    return " ".join(section[0].astext().split())


def _is(node: nodes.Node, element: str) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == element


def _docname(node: nodes.Node, default: str) -> str:
    """The page a node comes from: in the one-page build (singlehtml) each page of the book
    sits in a ``start_of_file`` node that names it."""
    while node is not None:
        if isinstance(node, addnodes.start_of_file):
            return node["docname"]
        node = node.parent
    return default


class NumberFigures(SphinxPostTransform):
    """Wrap each image of a code cell's output in a numbered, captioned figure. Runs after
    myst-nb has picked one output per mime bundle (its post-transform, priority 4)."""

    default_priority = 50

    def run(self, **kwargs: Any) -> None:
        counts: dict[str, int] = {}
        for cell in list(self.document.findall(lambda n: _is(n, "cell_code"))):
            images = [
                image
                for output in cell.findall(lambda n: _is(n, "cell_code_output"))
                for image in output.findall(nodes.image)
                if not isinstance(image.parent, nodes.figure)
            ]
            if not images:
                continue
            source = "".join(
                block.astext()
                for part in cell.findall(lambda n: _is(n, "cell_code_source"))
                for block in part.findall(nodes.literal_block)
            )
            texts = captions(source, cell.get("cell_metadata") or {}, len(images), _heading(cell))
            docname = _docname(cell, self.env.docname)
            title = self.env.titles[docname].astext() if docname in self.env.titles else ""
            for image, text in zip(images, texts, strict=True):
                counts[docname] = counts.get(docname, 0) + 1
                number = f"图 {figure_prefix(title)}{counts[docname]}"
                image["alt"] = f"{number}：{plain(text)}" if text else number
                # an id, as Sphinx's HTML writer expects of a figure with a caption
                slug = re.sub(r"[^0-9A-Za-z_-]+", "-", docname)
                figure = nodes.figure("", ids=[f"figure-{slug}-{counts[docname]}"])
                figure["classes"].append("lk-figure")
                caption = nodes.caption("", "")
                caption += nodes.inline("", number, classes=["caption-number"])
                caption += nodes.Text(" ")
                caption += _caption_nodes(text)
                image.replace_self(figure)
                figure += image
                figure += caption


def setup(app: Sphinx) -> dict[str, object]:
    app.add_post_transform(NumberFigures)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
