"""Search that finds the book's own terms.

Sphinx indexes Chinese text with jieba, whose general dictionary splits the book's terms:
``束搜索`` becomes ``束`` + ``搜索`` and ``曝光偏差`` becomes ``曝光`` + ``偏差``, so the term a
reader types is in no index entry. This extension

- collects the book's terms: every Chinese term of the glossary table (the ``术语表`` section
  of the notebook named by ``search_glossary``) and the words of every chapter title;
- writes them to a jieba user dictionary and passes it to Sphinx's Chinese search language
  (``html_search_options["dict"]``), so the index keeps each term whole (and, as jieba's
  search mode does, also its shorter dictionary words);
- replaces the Chinese search language with one that stems Latin words with the Porter
  stemmer the browser uses (Sphinx's Chinese index uses Snowball's English, so ``key`` was
  indexed as ``key`` and searched as ``kei``), keeps one-character terms of the
  glossary (``键``, ``值``; Sphinx drops every one-character word) and whose query splitter
  segments what the reader types the same way: a run of Chinese characters is kept whole
  when it is a term of the index or of the dictionary, otherwise cut into the longest such
  terms from the left (a character that starts none is dropped, as the index holds none).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import snowballstemmer
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError
from sphinx.search.zh import SearchChinese

DICT_NAME = "search_terms.txt"  # under the doctree folder
GLOSSARY_HEADING = "术语表"
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
# words that join the parts of a chapter title ("推理与曝光偏差")
TITLE_JOINERS = re.compile(r"[与和及]")


@dataclass(frozen=True)
class GlossaryRow:
    """One row of the glossary table."""

    terms: tuple[str, ...]  # the Chinese terms: "束搜索 / 束宽" -> ("束搜索", "束宽")
    qualifiers: tuple[str, ...]  # parenthesised: "预热 (学习率)" -> ("学习率",)
    english: str
    chapter: str  # as written in the table: "第 6 章" or "附录"


PARENTHESISED = re.compile(r"[(（]([^)）]*)[)）]")


def split_cell(cell: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The terms and the parenthesised qualifiers of one Chinese glossary cell."""
    qualifiers = tuple(q.strip() for q in PARENTHESISED.findall(cell) if q.strip())
    terms = tuple(t.strip() for t in PARENTHESISED.sub("", cell).split("/") if t.strip())
    return terms, qualifiers


def glossary_rows(notebook: Path) -> list[GlossaryRow]:
    """The rows of the first table after a ``术语表`` heading in ``notebook``'s markdown."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    lines: list[str] = []
    for cell in cells:
        if cell["cell_type"] == "markdown":
            source = cell["source"]
            lines.extend(("".join(source) if isinstance(source, list) else source).splitlines())
    start = next(
        (i for i, line in enumerate(lines) if line.startswith("#") and GLOSSARY_HEADING in line),
        None,
    )
    if start is None:
        raise ExtensionError(
            f"search_terms: {notebook} has no heading naming {GLOSSARY_HEADING!r}; "
            "set search_glossary to the notebook that holds the glossary table"
        )
    rows: list[GlossaryRow] = []
    for line in lines[start + 1 :]:
        if not line.strip():
            if rows:
                break
            continue
        if not line.lstrip().startswith("|"):
            if rows:
                break
            continue
        cells_ = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells_) < 3 or set(cells_[0]) <= set("-: ") or not HAN.search(cells_[0]):
            continue  # the separator line, or the header (no Chinese in its first cell)
        if cells_[0] == "中文":
            continue
        rows.append(GlossaryRow(*split_cell(cells_[0]), cells_[1], cells_[2]))
    if not rows:
        raise ExtensionError(f"search_terms: the {GLOSSARY_HEADING} of {notebook} has no table")
    return rows


def title_words(title: str) -> list[str]:
    """The Chinese words of a chapter title: ``"第6章 推理与曝光偏差 (decoding ...)"`` ->
    ``["推理", "曝光偏差"]`` (one-character runs such as 第 and 章 are left out)."""
    words = []
    for run in HAN.findall(title):
        words.extend(part for part in TITLE_JOINERS.split(run) if len(part) > 1)
    return words


def book_terms(glossary: list[GlossaryRow], titles: list[str]) -> list[str]:
    """The user dictionary: Chinese glossary terms and title words, each once, in order."""
    # a mixed term ("在线 softmax") gives its Chinese words; the rest is indexed as Latin
    terms = [w for row in glossary for t in row.terms + row.qualifiers for w in HAN.findall(t)]
    terms += [w for title in titles for w in title_words(title)]
    return list(dict.fromkeys(terms))


SPLITTER_JS = """\
/* Written by book/_ext/search_terms.py: segment the query as the index was segmented. */
const BOOK_TERMS = new Set(%(terms)s);
var splitQuery = (query) => {
  const index = typeof Search !== "undefined" ? Search._index : null;
  const known = (word) => BOOK_TERMS.has(word) ||
    (index !== null && (word in index.terms || word in index.titleterms));
  const words = [];
  for (const token of query.split(/[^\\p{Letter}\\p{Number}_\\p{Emoji_Presentation}]+/gu)) {
    for (const run of token.match(/\\p{Script=Han}+|[^\\p{Script=Han}]+/gu) || []) {
      if (!/\\p{Script=Han}/u.test(run) || known(run)) {
        words.push(run);
        continue;
      }
      let start = 0;  // longest known words from the left, as jieba keeps a word whole
      while (start < run.length) {
        let end = run.length;
        while (end > start + 1 && !known(run.slice(start, end))) end -= 1;
        if (end > start + 1 || known(run[start])) words.push(run.slice(start, end));
        start = end;
      }
    }
  }
  return words;
};
"""


class BookChinese(SearchChinese):
    """Sphinx's Chinese search with the book's terms (see the module docstring)."""

    def init(self, options: dict[str, str]) -> None:
        super().init(options)  # loads options["dict"] into jieba
        # Latin words: the browser stems queries with the Porter stemmer (js_porter_stemmer),
        # so the index must use Porter too, not Snowball's English ("key": "kei" vs "key").
        self.stemmer = snowballstemmer.stemmer("porter")
        path = options.get("dict")
        terms = Path(path).read_text(encoding="utf-8").split() if path else []
        self.book_terms = frozenset(terms)
        self.js_splitter_code = SPLITTER_JS % {"terms": json.dumps(terms, ensure_ascii=False)}

    def word_filter(self, stemmed_word: str) -> bool:
        return super().word_filter(stemmed_word) or stemmed_word in self.book_terms


def _configure(app: Sphinx, config: Config) -> None:
    options = dict(config.html_search_options or {})
    options["dict"] = str(Path(app.doctreedir) / DICT_NAME)
    config.html_search_options = options


def _write_dictionary(app: Sphinx, env: BuildEnvironment) -> None:
    """After reading (titles known), before writing (the index reads the dictionary)."""
    glossary = glossary_rows(Path(app.srcdir) / app.config.search_glossary)
    titles = [
        env.titles[docname].astext()
        for docname in env.found_docs
        if docname in env.titles and docname.startswith(app.config.search_title_prefix)
    ]
    path = Path(app.config.html_search_options["dict"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(book_terms(glossary, sorted(titles))) + "\n", encoding="utf-8")


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("search_glossary", "notebooks/08_appendix.ipynb", "env", [str])
    app.add_config_value("search_title_prefix", "notebooks/", "env", [str])
    app.add_search_language(BookChinese)
    app.connect("config-inited", _configure)
    app.connect("env-updated", _write_dictionary)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
