"""The chapter notebooks, the table of contents and the Colab set-up cell agree.

Every notebook in notebooks/ is listed in _toc.yml and every listed file exists; every
notebook starts with a title cell and then the exact Colab set-up cell, whose repository URL
is the one _config.yml names; every notebook is committed executed top to bottom.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

COLAB_CELL = """\
# Colab 设置：从课程仓库安装 lecturekit（在别处什么也不做）
import subprocess
import sys

if "google.colab" in sys.modules:
    source = "lecturekit @ git+{url}"
    pip = [sys.executable, "-m", "pip", "install", "-q", source]
    if subprocess.run(pip, capture_output=True, text=True).returncode != 0:
        print(
            f"安装 lecturekit 失败：pip 无法安装 {{source}}。\\n"
            "如果课程的仓库在别的地址，把上面 source 里的网址改成它，再运行本单元格；\\n"
            "也可以把仓库里的 lecturekit 文件夹和 pyproject.toml 上传到 Colab，"
            "运行 %pip install -e 上传的文件夹。"
        )"""


def toc_files(node: object) -> list[str]:
    """Every `file:` (and the root) named anywhere in a parsed _toc.yml, in order."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in {"file", "root"} and isinstance(value, str):
                found.append(value)
            else:
                found.extend(toc_files(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(toc_files(value))
    return found


def _strip_suffix(path: str) -> str:
    return path.removesuffix(".ipynb").removesuffix(".md")


@pytest.fixture(scope="module")
def toc_entries() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    assert toc.get("format") == "jb-book", "_toc.yml must use the jb-book format"
    return [_strip_suffix(entry) for entry in toc_files(toc)]


@pytest.fixture(scope="module")
def repository_url() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    url = config["repository"]["url"]
    assert url.startswith("https://github.com/"), f"repository.url must be on GitHub, got {url!r}"
    return url.rstrip("/")


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/ holds no notebook"
    assert (NOTEBOOK_DIR / "00_setup.ipynb") in NOTEBOOKS


def test_every_notebook_is_in_the_toc(toc_entries: list[str]) -> None:
    missing = [p.name for p in NOTEBOOKS if f"notebooks/{p.stem}" not in toc_entries]
    assert not missing, f"notebooks missing from _toc.yml: {missing}"


def test_every_toc_entry_exists(toc_entries: list[str]) -> None:
    absent = [
        entry
        for entry in toc_entries
        if not (ROOT / f"{entry}.ipynb").is_file() and not (ROOT / f"{entry}.md").is_file()
    ]
    assert not absent, f"_toc.yml lists files that do not exist: {absent}"


def test_toc_lists_each_file_once(toc_entries: list[str]) -> None:
    duplicates = sorted({entry for entry in toc_entries if toc_entries.count(entry) > 1})
    assert not duplicates, f"_toc.yml lists these more than once: {duplicates}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_starts_with_title_and_colab_cell(path: Path, repository_url: str) -> None:
    cells = _read(path).cells
    assert cells and cells[0].cell_type == "markdown", f"{path.name}: first cell must be markdown"
    title = cells[0].source.splitlines()[0] if cells[0].source else ""
    assert title.startswith("# "), f"{path.name}: first cell must start with a '# ' title"
    code_cells = [cell for cell in cells if cell.cell_type == "code"]
    assert code_cells, f"{path.name}: has no code cell"
    expected = COLAB_CELL.format(url=repository_url)
    assert code_cells[0].source == expected, (
        f"{path.name}: the first code cell must be exactly the Colab set-up cell (COLAB_CELL above):\n"
        f"{expected}\n--- got ---\n{code_cells[0].source}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_executed_in_order(path: Path) -> None:
    notebook = _read(path)
    assert notebook.metadata.get("kernelspec", {}).get("name") == "python3", (
        f"{path.name}: kernelspec must be python3"
    )
    counts = [cell.execution_count for cell in notebook.cells if cell.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name}: code cells must be executed once, top to bottom, in a fresh kernel "
        f"(make notebooks); execution counts are {counts}"
    )
    errors = [
        output.get("ename")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors, f"{path.name}: committed outputs contain errors {errors}"


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def missing_widget_models(notebook: nbformat.NotebookNode) -> list[str]:
    """Model ids of widget outputs that the notebook's saved widget state does not hold.

    The HTML book draws a widget from that state; an output kept from one run next to the
    state of another run (re-executing, then putting back a cell's old outputs) draws nothing.
    """
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return [
        output["data"][WIDGET_VIEW]["model_id"]
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if WIDGET_VIEW in output.get("data", {})
        and output["data"][WIDGET_VIEW]["model_id"] not in state
    ]


def test_missing_widget_models_are_found_in_a_planted_notebook() -> None:
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("slider")
    cell.outputs = [nbformat.v4.new_output("display_data", {WIDGET_VIEW: {"model_id": "a1"}})]
    notebook.cells = [cell]
    assert missing_widget_models(notebook) == ["a1"]
    notebook.metadata["widgets"] = {WIDGET_STATE: {"state": {"a1": {}}}}
    assert missing_widget_models(notebook) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_widget_outputs_have_their_saved_state(path: Path) -> None:
    missing = missing_widget_models(_read(path))
    assert not missing, (
        f"{path.name}: widget outputs {missing} have no saved widget state, so the HTML book "
        "shows nothing there; re-execute the whole notebook (make notebooks NOTEBOOKS=...) "
        "instead of restoring some outputs from an older run"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_markdown_has_no_tab_character(path: Path) -> None:
    """A tab in a markdown cell is almost always a lost backslash (``\\text`` saved as TAB + ext)."""
    bad = [
        i
        for i, cell in enumerate(_read(path).cells)
        if cell.cell_type == "markdown" and "\t" in cell.source
    ]
    assert not bad, (
        f"{path.name}: markdown cells {bad} contain a TAB character; in a formula write "
        "\\text (JSON '\\\\text'), elsewhere use spaces"
    )


# The book's text column is 757 px on a laptop: a figure drawn wider is shown shrunk, and
# below 60 % of its drawn width its tick labels become unreadable. 1000 px keeps every figure
# at three quarters of its size or more (the width it is shown at: a 2x figure has twice the
# pixels).
MAX_FIGURE_WIDTH_PX = 1000


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figures_are_drawn_for_the_text_column(path: Path) -> None:
    import base64
    import io

    from PIL import Image

    wide = []
    for index, cell in enumerate(_read(path).cells):
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                # a sharp (2x, "retina") figure states the width it is shown at
                shown = output.get("metadata", {}).get("image/png", {}).get("width")
                width = shown or Image.open(io.BytesIO(base64.b64decode(png))).size[0]
                if width > MAX_FIGURE_WIDTH_PX:
                    wide.append((index, width))
    assert not wide, (
        f"{path.name}: figures wider than {MAX_FIGURE_WIDTH_PX} px (cell, width): {wide}; "
        "lay them out in a grid or give them a smaller figsize"
    )


# Every chapter runs within 3 minutes on one thread (the recorded time of its cells, written by
# `make notebooks`). The capstone builds and reads a corpus and decodes 1,000 clauses with
# five systems: it has a budget of its own.
RUN_BUDGET_S = 180
RUN_BUDGET_EXCEPTIONS_S = {"capstone_pinyin": 300}
# A chapter that runs longer than this says so near its top: "全部运行约 N 分钟".
STATED_FROM_S = 60
STATED_MINUTES = re.compile(r"全部运行一遍约 (\d+) 分钟")


def recorded_seconds(notebook: nbformat.NotebookNode) -> float:
    """Sum over code cells of the recorded execution time (``metadata.execution``)."""
    total = 0.0
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        timing = cell.metadata.get("execution", {})
        start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        assert start and end, "a code cell has no recorded execution time: run make notebooks"
        total += (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    return total


def test_recorded_seconds_sums_the_cells() -> None:
    def cell(start: str, end: str) -> nbformat.NotebookNode:
        code = nbformat.v4.new_code_cell("pass")
        code.metadata["execution"] = {
            "iopub.execute_input": f"2026-01-01T00:{start}Z",
            "shell.execute_reply": f"2026-01-01T00:{end}Z",
        }
        return code

    notebook = nbformat.v4.new_notebook(
        cells=[
            cell("00:00.5", "00:02.0"),
            nbformat.v4.new_markdown_cell("x"),
            cell("01:00", "02:00"),
        ]
    )
    assert recorded_seconds(notebook) == pytest.approx(61.5)
    notebook.cells.append(nbformat.v4.new_code_cell("pass"))
    with pytest.raises(AssertionError, match="no recorded execution time"):
        recorded_seconds(notebook)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_within_its_budget(path: Path) -> None:
    budget = RUN_BUDGET_EXCEPTIONS_S.get(path.stem, RUN_BUDGET_S)
    seconds = recorded_seconds(_read(path))
    assert seconds <= budget, (
        f"{path.name}: its cells took {seconds:.0f} s when it was executed, over its budget of "
        f"{budget} s; make it faster (ship a checkpoint for slow training, shrink a grid)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_long_chapter_says_how_long_it_runs(path: Path) -> None:
    notebook = _read(path)
    seconds = recorded_seconds(notebook)
    opening = "\n".join(cell.source for cell in notebook.cells[:4] if cell.cell_type == "markdown")
    stated = STATED_MINUTES.search(opening)
    if seconds <= STATED_FROM_S:
        assert stated is None, f"{path.name} runs in {seconds:.0f} s: no need to say minutes"
        return
    assert stated, (
        f'{path.name} runs {seconds:.0f} s: say near its top how long ("全部运行一遍约 N 分钟")'
    )
    minutes = int(stated.group(1))
    assert seconds / 60 - 0.5 <= minutes <= seconds / 60 + 1.5, (
        f"{path.name} says about {minutes} minutes; its cells took {seconds:.0f} s"
    )


def _field_starts(line: str) -> dict[tuple[str, int], int]:
    """Where a field starts (after 2+ spaces, or at a "|" separator), keyed both by display
    column (a wide character counts 2: padding by display width) and by character index
    (padding by ``str.ljust``), mapped to the number of wide characters before it."""
    starts: dict[tuple[str, int], int] = {}
    column = wide_before = spaces = 0
    for index, ch in enumerate(line):
        if (ch != " " and spaces >= 2) or ch == "|":
            starts[("column", column)] = starts[("index", index)] = wide_before
        spaces = spaces + 1 if ch == " " else 0
        wide = unicodedata.east_asian_width(ch) in "WF"
        column += 2 if wide else 1
        wide_before += wide
    return starts


TABLE_LINE = re.compile(r"\S {2,}\S| \| ")


def jagged_text_tables(text: str) -> list[str]:
    """First lines of text tables padded with spaces that a browser shows jagged.

    Two or more consecutive lines (fields separated by 2+ spaces or " | ") whose fields line
    up at the same column, counting a Chinese character as two columns or as one, but with a
    different number of Chinese characters before that column: in the browser's monospace
    font a Chinese character is neither one nor two columns wide, so those fields do not line
    up. Such a table is shown as a real table instead.
    """
    found: list[str] = []
    run: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.strip() and TABLE_LINE.search(line):
            run.append(line)
            continue
        if len(run) >= 2:
            starts = [_field_starts(line) for line in run]
            shared = set(starts[0]).intersection(*starts[1:])
            if any(len({s[c] for s in starts}) > 1 for c in shared):
                found.append(run[0])
        run = []
    return found


def test_jagged_text_tables_are_found_in_planted_text() -> None:
    jagged = "模型      准确率\n正常模型  0.99\nabc       0.50\n"
    aligned = "第 1 步  0.99\n第 2 步  0.50\n"
    assert jagged_text_tables(jagged) == ["模型      准确率"]
    assert jagged_text_tables(aligned) == []
    assert jagged_text_tables("a   b\nc   d\n") == []
    piped = "        | 甲 | 乙\nSM 个数 | 108 | 132\n寄存器  | 256 | 256\n"  # str.ljust padding
    assert jagged_text_tables(piped) == ["        | 甲 | 乙"]
    numbers = "n | 时间\n1 | 2.0\n2 | 3.0\n"  # no Chinese before any separator
    assert jagged_text_tables(numbers) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_printed_table_is_jagged(path: Path) -> None:
    """Tables with Chinese labels are shown as tables (lecturekit.book.tables), not padded."""
    jagged = []
    for index, cell in enumerate(_read(path).cells):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = output.get("text") or ("" if "text/html" in data else data.get("text/plain"))
            jagged += [f"cell {index}: {line}" for line in jagged_text_tables(text or "")]
    assert not jagged, f"{path.name}: text tables padded with spaces: {jagged}"
