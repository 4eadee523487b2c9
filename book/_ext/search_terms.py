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
  terms from the left (a character that starts none is dropped, as the index holds none);
  a one-letter Latin word is dropped too (never indexed: "p 值" is looked up as ``值``);
- searches a name the book avoids (the glossary's 不用 column: 计划采样) as the book's term
  (定时采样);
- ranks the chapter that teaches a glossary term first when the query is that term or its
  English name (the glossary's 首次出现 column names the chapter): Sphinx's own scores put
  the intro or the lecture map, which only name the term, above it;
- shows under each result the first sentence of its page that holds the query (the pages'
  text is written to ``_static/search_text.js``, loaded by the search page alone: Sphinx's
  own summaries fetch the pages, which browsers refuse under ``file://``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import snowballstemmer
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError
from sphinx.search.zh import SearchChinese
from term_ranks import LANDING, PARENTHESISED, first_use_link, teaching_chapters

DICT_NAME = "search_terms.txt"  # under the doctree folder
RANKS_NAME = "search_ranks.json"  # under the doctree folder: query -> the teaching chapter
SYNONYMS_NAME = "search_synonyms.json"  # under the doctree folder: avoided word -> the term
TEXT_JS = "search_text.js"  # under _static/ of the built site
NOT_PAGES = ("_static", "_sources", "_images", "_sphinx_design_static", "genindex", "search")
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
    chapter: str  # as written in the table: "第 6 章", "附录" or a section, "A.1"
    avoided: tuple[str, ...] = ()  # the 不用 column: other names the book does not use


AVOIDED_SEPARATORS = re.compile(r"[、，,/]")


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
        avoided = (
            tuple(a.strip() for a in AVOIDED_SEPARATORS.split(cells_[3]) if a.strip())
            if len(cells_) > 3
            else ()
        )
        rows.append(GlossaryRow(*split_cell(cells_[0]), cells_[1], cells_[2], avoided))
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
      if (!/\\p{Script=Han}/u.test(run)) {
        // one letter is never indexed; as a query term it would make searchtools.js, which
        // waives only terms shorter than 3 when a longer one is present, find nothing for
        // "p 值" (every term short, so all are required)
        if (run.length > 1) words.push(run);
        continue;
      }
      if (known(run)) {
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

/* The chapter that teaches a glossary term ranks first for the term and its English name. */
const BOOK_RANKS = %(ranks)s;
const normaliseQuery = (query) => query.trim().toLowerCase().replace(/\\s+/g, " ");
/* A Chinese name the book avoids (the glossary's 不用 column) is searched as the book's term. */
const BOOK_SYNONYMS = %(synonyms)s;
const bookQuery = (query) => BOOK_SYNONYMS[normaliseQuery(query)] || query;
if (typeof Search !== "undefined" && typeof Scorer !== "undefined") {
  const parseQuery = Search._parseQuery;
  Search._parseQuery = (query) => parseQuery(bookQuery(query));
  const performSearch = Search._performSearch;
  Search._performSearch = (query, ...rest) => {
    Scorer.bookChapter = BOOK_RANKS[normaliseQuery(query)] || null;
    return performSearch(query, ...rest);
  };
  Scorer.score = (result) => result[4] + (result[0] === Scorer.bookChapter ? 1000 : 0);
}

/* Under each result, the first sentence of its page (of its section, for a result that links
   one) that holds the query (search_text.js). */
const bookSnippet = (text, query, from) => {
  const lower = text.toLowerCase();
  const wanted = [normaliseQuery(query), ...splitQuery(query).map((w) => w.toLowerCase())];
  const word = wanted.find((w) => w && lower.includes(w, from)) ||
    wanted.find((w) => w && lower.includes(w));
  if (!word) return null;
  const at = lower.includes(word, from) ? lower.indexOf(word, from) : lower.indexOf(word);
  const stops = /[。！？；\\n]/;
  let start = at;
  while (start > 0 && at - start < 60 && !stops.test(text[start - 1])) start -= 1;
  let end = at + word.length;
  while (end < text.length && end - at < 90 && !stops.test(text[end])) end += 1;
  const shown = (start > 0 && !stops.test(text[start - 1]) ? "…" : "") +
    text.slice(start, end + 1) + (end < text.length - 1 && !stops.test(text[end]) ? "…" : "");
  const p = document.createElement("p");
  p.className = "context";
  const mark = shown.toLowerCase().indexOf(word);
  p.append(shown.slice(0, mark));
  p.appendChild(document.createElement("mark")).textContent = shown.slice(mark, mark + word.length);
  p.append(shown.slice(mark + word.length));
  return p;
};
document.addEventListener("DOMContentLoaded", () => {
  const results = document.getElementById("search-results");
  const query = bookQuery(new URLSearchParams(window.location.search).get("q") || "");
  if (!results || !query || typeof BOOK_TEXT === "undefined") return;
  new MutationObserver(() => {
    results.querySelectorAll("ul.search > li:not([data-snippet])").forEach((item) => {
      item.dataset.snippet = "";
      const href = (item.querySelector("a") || {}).getAttribute?.("href") || "";
      const [page, anchor] = href.split("#");
      const text = BOOK_TEXT[page];
      const from = (anchor && (BOOK_ANCHORS[page] || {})[anchor]) || 0;
      const snippet = text && bookSnippet(text, query, from);
      if (snippet) item.appendChild(snippet);
    });
  }).observe(results, {childList: true, subtree: true});
});
"""


def _written(dictionary: str | None, name: str) -> str:
    """The JSON that _write_dictionary left beside the dictionary ("{}" before it has)."""
    path = Path(dictionary).with_name(name) if dictionary else None
    return path.read_text(encoding="utf-8") if path and path.is_file() else "{}"


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
        self.js_splitter_code = SPLITTER_JS % {
            "terms": json.dumps(terms, ensure_ascii=False),
            "ranks": _written(path, RANKS_NAME),
            "synonyms": _written(path, SYNONYMS_NAME),
        }

    def word_filter(self, stemmed_word: str) -> bool:
        return super().word_filter(stemmed_word) or stemmed_word in self.book_terms


def synonyms(glossary: list[GlossaryRow]) -> dict[str, str]:
    """Avoided Chinese name -> the book's term, from the glossary's 不用 column: a reader who
    searches 计划采样 is searching for 定时采样. English names stay as typed (they are in the
    index: the book writes them after the Chinese term), and so does a name that is also a
    term of another row. Of a row with several terms (层归一化 / 批归一化), a name goes to the
    term it shares the longest start with (批标准化 -> 批归一化; the first term on a tie). A
    name avoided for two terms is refused."""
    terms = {t for row in glossary for t in row.terms}
    found: dict[str, str] = {}
    for row in glossary:
        for name in row.avoided:
            key = re.sub(r"\s+", " ", name.lower())
            if not HAN.search(key) or key in terms:
                continue
            term = max(row.terms, key=lambda t: len(os.path.commonprefix([t, key])))
            if found.get(key, term) != term:
                raise ExtensionError(
                    f"search_terms: the glossary avoids {name!r} for both {found[key]!r} and "
                    f"{term!r}; keep it in one row's 不用 column"
                )
            found[key] = term
    return found


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
    order = [
        d
        for d in _reading_order(app, env)
        if d.startswith(app.config.search_title_prefix) or LANDING.fullmatch(d)
    ]  # the chapters' pages and the landing pages of chapters split into sections
    headings = {
        d: [ref.astext() for ref in env.tocs[d].findall(nodes.reference)]
        for d in order if d in env.tocs
    }  # fmt: skip
    titles_by_doc = {d: env.titles[d].astext() for d in order if d in env.titles}
    # the glossary's page names every term and teaches none of them
    own = Path(app.config.search_glossary).with_suffix("").as_posix()
    texts = {d: env.get_doctree(d).astext() for d in order if d != own}
    ranks = teaching_chapters(glossary, order, titles_by_doc, headings, texts)
    path.with_name(RANKS_NAME).write_text(json.dumps(ranks, ensure_ascii=False), encoding="utf-8")
    path.with_name(SYNONYMS_NAME).write_text(
        json.dumps(synonyms(glossary), ensure_ascii=False), encoding="utf-8"
    )


def _reading_order(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """The documents in the order of the table of contents (the root's toctree, each landing
    page followed by its sections)."""
    order: list[str] = []

    def visit(docname: str) -> None:
        for child in env.toctree_includes.get(docname, []):
            if child not in order:
                order.append(child)
                visit(child)

    visit(app.config.root_doc)
    return order + sorted(set(env.found_docs) - set(order))


# TeX a snippet shows as text: commands as the symbols they draw, groups and spacing dropped
TEX_SYMBOLS = {
    r"\sqrt": "√", r"\times": "×", r"\cdot": "·", r"\top": "ᵀ", r"\le": "≤", r"\leq": "≤",
    r"\ge": "≥", r"\geq": "≥", r"\infty": "∞", r"\to": "→", r"\approx": "≈", r"\ne": "≠",
    r"\sum": "Σ", r"\in": "∈", r"\alpha": "α", r"\beta": "β", r"\gamma": "γ", r"\tau": "τ",
    r"\epsilon": "ε", r"\varepsilon": "ε", r"\theta": "θ", r"\lambda": "λ", r"\mu": "μ",
    r"\sigma": "σ", r"\pi": "π", r"\ell": "ℓ", r"\log": "log", r"\exp": "exp", r"\max": "max",
    r"\min": "min", r"\ldots": "…", r"\dots": "…", r"\cdots": "⋯",
}  # fmt: skip
TEX_COMMAND = re.compile(r"\\[A-Za-z]+")


def plain_math(tex: str) -> str:
    """A formula as a search snippet shows it: ``\\(\\sqrt{d_k}\\)`` -> ``√d_k``."""
    tex = re.sub(r"^\s*\\[(\[]|\\[)\]]\s*$", "", tex.strip())
    tex = re.sub(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)\b", "", tex)
    tex = re.sub(r"\\(?:,|;|!|quad\b|qquad\b)", " ", tex)
    tex = TEX_COMMAND.sub(lambda m: TEX_SYMBOLS.get(m.group(0), ""), tex)
    return re.sub(r"\s+", " ", tex.replace("{", "").replace("}", "")).strip()


ANCHOR_MARK = "\x00"


def page_texts(outdir: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Each built page's article as plain text (whitespace squeezed, formulas as text),
    keyed by its link as the search page writes it (``notebooks/02_1_scaled_dot_product.html``), and
    where in that text each section starts, by its anchor (a result that links a section
    shows a sentence of that section)."""
    from bs4 import BeautifulSoup

    texts: dict[str, str] = {}
    anchors: dict[str, dict[str, int]] = {}
    for page in sorted(outdir.rglob("*.html")):
        name = page.relative_to(outdir).as_posix()
        if name.startswith(NOT_PAGES):
            continue
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        article = soup.select_one("article.bd-article")
        if article is None:
            continue
        for hidden in article.select("script, style, .cell_input, .headerlink, mjx-assistive-mml"):
            hidden.decompose()
        for math in article.select(".math"):
            math.string = plain_math(math.get_text())
        for section in article.select("section[id]"):
            section.insert(0, f" {ANCHOR_MARK}{section['id']}{ANCHOR_MARK} ")
        marked = re.sub(r"\s+", " ", article.get_text(" ")).strip()
        parts = marked.split(ANCHOR_MARK)
        text, starts = parts[0].strip(), {}
        for anchor, after in zip(parts[1::2], parts[2::2], strict=True):
            starts[anchor] = len(text) + 1 if text else 0
            text = f"{text} {after.strip()}".strip()
        texts[name] = text
        anchors[name] = starts
    return texts, anchors


def _search_page(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:  # type: ignore[no-untyped-def]
    if pagename == "search":
        app.add_js_file(TEXT_JS)


def _write_texts(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html" or app.builder.name != "html":
        return
    outdir = Path(app.outdir)
    texts, anchors = page_texts(outdir)
    (outdir / "_static" / TEXT_JS).write_text(
        f"var BOOK_TEXT = {json.dumps(texts, ensure_ascii=False)};\n"
        f"var BOOK_ANCHORS = {json.dumps(anchors, ensure_ascii=False)};\n",
        encoding="utf-8",
    )


def link_first_uses(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """In the glossary table, each 首次出现 cell ("第 6 章", "A.1") links to that page, or to
    its landing page where the chapter is split (see ``first_use_link``)."""
    if (
        app.builder.format != "html"
        or docname != Path(app.config.search_glossary).with_suffix("").as_posix()
    ):
        return
    docnames = sorted(app.env.found_docs)
    for section in doctree.findall(nodes.section):
        title = section.next_node(nodes.title)
        if title is None or GLOSSARY_HEADING not in title.astext():
            continue
        table = section.next_node(nodes.table)
        for row in table.findall(nodes.row) if table is not None else []:
            cells = list(row.findall(nodes.entry))
            if len(cells) < 3 or isinstance(row.parent, nodes.thead):
                continue
            paragraph = cells[2].next_node(nodes.paragraph)
            label = paragraph.astext() if paragraph is not None else ""
            if not label:
                continue
            target = first_use_link(label, docnames, docname)
            if target is None:
                continue
            uri = app.builder.get_relative_uri(docname, target)
            paragraph.clear()
            paragraph += nodes.reference("", label, internal=True, refuri=uri)
        return


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("search_glossary", "notebooks/08_3_appendix_reference.ipynb", "env", [str])
    app.add_config_value("search_title_prefix", "notebooks/", "env", [str])
    app.add_search_language(BookChinese)
    app.connect("config-inited", _configure)
    app.connect("env-updated", _write_dictionary)
    app.connect("html-page-context", _search_page)
    app.connect("doctree-resolved", link_first_uses)
    app.connect("build-finished", _write_texts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
