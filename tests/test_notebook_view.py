"""The notebooks as JupyterLab and Colab show them, not as the book does.

JupyterLab renders a Markdown cell with a CommonMark parser (marked) after taking the ``$…$``
and ``$$…$$`` math out for MathJax, and shows raw HTML such as ``<details>`` as HTML; Colab
does the same or less. Neither knows MyST: a ``{exercise}`` directive shows as a code block
with its answer right below. So every Markdown cell is rendered here the same way, with
markdown-it-py (CommonMark, tables, dollar math, raw HTML on), and the HTML is read as a reader
sees it:

- no MyST-only syntax is visible (directives, roles, targets, comments, substitutions);
- every self-test is a heading "自测 N.M　…" (N = the chapter, M counting from 1), followed in
  the same cell by its answer folded in a closed ``<details>`` whose summary is "解答 N.M"; the
  answer is parsed as Markdown (no raw ``$``, ``**`` or backticks), and no answer text stands
  outside a ``<details>``;
- no math is left as raw ``$`` text anywhere;
- a cell that shows ipywidgets controls has the "运行下面的单元格" hint just above it, because
  before it runs Jupyter shows only a line of text such as ``VBox(children=…)``.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

QUESTION = re.compile(r"^自测 (?P<number>\S+)(\u3000\S.*)?$")
ANSWER_SUMMARY = "解答 {number}"
HEADINGS = ["h1", "h2", "h3", "h4", "h5", "h6"]
WIDGET_HINT = "运行下面的单元格才会出现控件"
# Jupyter and Colab show these MyST constructs as their source text.
MYST_TEXT = {
    "colon-fence directive": re.compile(r"^:{3,}"),
    "directive option": re.compile(r"^:[\w-]+:( |$)"),
    "target": re.compile(r"^\([\w.:-]+\)=\s*$"),
    "comment": re.compile(r"^% "),
    "substitution": re.compile(r"\{\{.*\}\}"),
}
ROLE_BEFORE_CODE = re.compile(r"\{[a-z][\w:-]*\}$")
UNPARSED_MARKDOWN = re.compile(r"\$|\*\*|`")
NOT_PROSE = ("code", "pre", "script", "style")
CONTROL_MODEL = re.compile(r"(Slider|Dropdown|ToggleButtons|RadioButtons|Checkbox|Text)Model$")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


@cache
def _markdown():  # type: ignore[no-untyped-def]
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    # double_inline: JupyterLab also typesets $$…$$ inside a paragraph
    return (
        MarkdownIt("commonmark", {"html": True})
        .enable(["table", "strikethrough"])
        .use(dollarmath_plugin, double_inline=True)
    )


def render(markdown: str):  # type: ignore[no-untyped-def]
    """A Markdown cell's HTML as JupyterLab shows it, as a BeautifulSoup tree."""
    from bs4 import BeautifulSoup

    return BeautifulSoup(_markdown().render(markdown), "html.parser")


def _prose_lines(element) -> list[str]:  # type: ignore[no-untyped-def]
    """The visible text of ``element`` outside code and math, line by line."""
    texts = []
    for text in element.find_all(string=True):
        if any(parent.name in NOT_PROSE for parent in text.parents):
            continue
        if any("math" in (parent.get("class") or []) for parent in text.parents):
            continue
        texts.append(str(text))
    return [line.strip() for line in "".join(texts).splitlines() if line.strip()]


def myst_problems(soup) -> list[str]:  # type: ignore[no-untyped-def]
    """MyST syntax that a Jupyter reader would see as source text."""
    problems = []
    for code in soup.select("pre > code"):
        language = next((c for c in code.get("class") or [] if c.startswith("language-")), "")
        if language.startswith("language-{"):
            problems.append(
                f"directive shown as a code block: {language.removeprefix('language-')}"
            )
    for code in soup.find_all("code"):
        before = code.previous_sibling
        if isinstance(before, str) and (role := ROLE_BEFORE_CODE.search(before)):
            problems.append(f"role shown as text: {role.group(0)}`{code.get_text()}`")
    for block in soup.find_all(["p", "li", "td", "th", "summary", *HEADINGS]):
        for line in _prose_lines(block):
            problems += [f"{name} shown as text: {line[:60]}" for name, pattern in MYST_TEXT.items()
                         if pattern.search(line)]  # fmt: skip
            if "$" in line:
                problems.append(f"math left as raw text: {line[:60]}")
    return problems


def _answer_problems(number: str, answer) -> list[str]:  # type: ignore[no-untyped-def]
    """What is wrong with the folded answer ``answer`` (a ``<details>``) of 自测 ``number``."""
    summary = answer.find(True)
    if summary is None or summary.name != "summary":
        return [f"自测 {number}: its <details> does not start with a <summary>"]
    problems = []
    if summary.get_text(strip=True) != ANSWER_SUMMARY.format(number=number):
        problems.append(f"自测 {number}: summary {summary.get_text(strip=True)!r}")
    if answer.has_attr("open"):
        problems.append(f"自测 {number}: the answer is open before the reader opens it")
    body = [e for e in answer.find_all(True, recursive=False) if e is not summary]
    if not body or not any(e.get_text(strip=True) for e in body):
        problems.append(
            f"自测 {number}: the answer is not parsed as Markdown (a blank line must "
            "follow </summary> and precede </details>)"
        )
    raw = [line for e in body for line in _prose_lines(e) if UNPARSED_MARKDOWN.search(line)]
    if raw:
        problems.append(f"自测 {number}: raw Markdown in the answer: {raw[0][:60]}")
    return problems


def self_tests(soup) -> tuple[list[str], list[str]]:  # type: ignore[no-untyped-def]
    """The numbers of the self-tests in a rendered cell (or a book page's article), in order,
    and what is wrong with them."""
    numbers, problems = [], []
    headings = soup.find_all(HEADINGS)
    titles = []
    for heading in headings:
        text = "".join(
            t for t in heading.find_all(string=True)
            if not any("headerlink" in (p.get("class") or []) for p in t.parents)
        )  # fmt: skip
        if match := QUESTION.match(text.strip()):
            titles.append((heading, match["number"]))
    for heading, number in titles:
        numbers.append(number)
        answer = None
        for sibling in heading.find_next_siblings():
            if sibling.name == "details":
                answer = sibling
                break
            if sibling.name in HEADINGS:
                break
        if answer is None:
            problems.append(f"自测 {number}: no <details> answer after it in the same cell")
        else:
            problems += _answer_problems(number, answer)
    for text in soup.find_all(string=re.compile("解答")):
        if not any(parent.name == "details" for parent in text.parents):
            problems.append(f"answer visible outside a <details>: {text.strip()[:60]}")
    return numbers, problems


def problems_in_cell(markdown: str) -> list[str]:
    soup = render(markdown)
    return myst_problems(soup) + self_tests(soup)[1]


def chapter_label(notebook: Path) -> str:
    """The chapter part of a self-test number: 3 for 03_encoder; 6.2 for the second section page
    of chapter 6 (06_2_exposure_bias); A (A.2) for the appendix (its section pages); C for the
    unnumbered capstone (capstone_pinyin); L for the debugging lab (lab_debugging)."""
    if notebook.stem.startswith("capstone_"):
        return "C"
    if notebook.stem.startswith("lab_"):
        return "L"
    chapter, section, *_ = notebook.stem.split("_") + [""]
    assert chapter.isdigit(), (
        f"{notebook.name}: a chapter notebook is NN_topic (a section page NN_K_topic), "
        "capstone_topic or lab_topic"
    )
    label = "A" if "appendix" in notebook.stem else str(int(chapter))
    return f"{label}.{int(section)}" if section.isdigit() else label


def _cells(notebook: Path) -> list[dict]:
    return json.loads(notebook.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_markdown_reads_well_in_jupyter(notebook: Path) -> None:
    problems = [
        f"cell {index}: {problem}"
        for index, cell in enumerate(_cells(notebook))
        if cell["cell_type"] == "markdown"
        for problem in problems_in_cell(_source(cell))
    ]
    assert not problems, f"{notebook.name} in JupyterLab:\n" + "\n".join(problems)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_self_tests_are_numbered_per_chapter(notebook: Path) -> None:
    numbers = [
        number
        for cell in _cells(notebook)
        if cell["cell_type"] == "markdown"
        for number in self_tests(render(_source(cell)))[0]
    ]
    chapter = chapter_label(notebook)
    expected = [f"{chapter}.{i}" for i in range(1, len(numbers) + 1)]
    assert numbers, f"{notebook.name}: no self-test (a heading '### 自测 {chapter}.1　…')"
    assert numbers == expected, (
        f"{notebook.name}: self-tests numbered {numbers}, expected {expected}; renumber the "
        "'**自测 N.M　…**' titles and their '<summary>解答 N.M</summary>' lines"
    )


def _shows_controls(cell: dict, models: dict[str, dict]) -> bool:
    def has_controls(model_id: str) -> bool:
        model = models.get(model_id, {})
        children = model.get("state", {}).get("children", [])
        return bool(CONTROL_MODEL.search(model.get("model_name", ""))) or any(
            has_controls(child.removeprefix("IPY_MODEL_")) for child in children
        )

    return any(
        has_controls(output["data"][WIDGET_VIEW]["model_id"])
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_widget_cells_say_to_run_them(notebook: Path) -> None:
    content = json.loads(notebook.read_text(encoding="utf-8"))
    models = content["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    cells = content["cells"]
    missing = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code" or not _shows_controls(cell, models):
            continue
        above = cells[index - 1]
        paragraphs = (
            render(_source(above)).find_all("p") if above["cell_type"] == "markdown" else []
        )
        if not paragraphs or not paragraphs[-1].get_text().startswith(WIDGET_HINT):
            missing.append(index)
    assert not missing, (
        f"{notebook.name}: widget cells {missing} need the hint '{WIDGET_HINT}…' as the last "
        "paragraph of the Markdown cell above them"
    )


# The checks above must be able to fail: each construct below is what a reader used to see.

GOOD = """### 自测 6.1\u3000标题

当 $T \\to 0^+$ 时？

<details>
<summary>解答 6.1</summary>

答案 $x^2$，**粗体**，`code`。

</details>"""


@pytest.mark.parametrize(
    ("markdown", "problem"),
    [
        ("```{exercise} 标题\n:label: q1\n问题\n```", "directive shown as a code block"),
        (":::{note}\n备注\n:::", "colon-fence directive shown as text"),
        ("见 {doc}`../book/intro`。", "role shown as text"),
        ("(my-label)=\n\n正文", "target shown as text"),
        ("% a comment\n\n正文", "comment shown as text"),
        ("价格 {{ price }} 元", "substitution shown as text"),
        ("公式 $x", "math left as raw text"),
        (GOOD.replace("<details>", "<details open>"), "open before the reader opens it"),
        (GOOD.replace("</summary>\n\n", "</summary>\n"), "not parsed as Markdown"),
        (GOOD.replace("解答 6.1", "解答 6.2"), "summary '解答 6.2'"),
        (GOOD.split("<details>")[0] + "**解答**：答案", "answer visible outside a <details>"),
        (GOOD.split("<details>")[0], "no <details> answer after it"),
    ],
)
def test_problems_a_reader_would_see_are_found(markdown: str, problem: str) -> None:
    assert problems_in_cell(GOOD) == []
    found = problems_in_cell(markdown)
    assert any(problem in p for p in found), found


def test_numbers_are_read_in_order() -> None:
    second = GOOD.replace("6.1", "6.2")
    assert self_tests(render(GOOD + "\n\n" + second))[0] == ["6.1", "6.2"]
    assert chapter_label(Path("notebooks/06_exposure_bias.ipynb")) == "6"
    assert chapter_label(Path("notebooks/06_2_exposure_bias.ipynb")) == "6.2"
    assert chapter_label(Path("notebooks/08_2_appendix_reference.ipynb")) == "A.2"
    assert chapter_label(Path("notebooks/09_appendix.ipynb")) == "A"
    assert chapter_label(Path("notebooks/capstone_pinyin.ipynb")) == "C"
    assert chapter_label(Path("notebooks/lab_debugging.ipynb")) == "L"
    with pytest.raises(AssertionError, match="capstone_topic or lab_topic"):
        chapter_label(Path("notebooks/pinyin.ipynb"))
