"""Number the self-test questions per chapter ("自测 6.1", "自测 6.2", ...).

sphinx-exercise numbers its ``exercise`` directives the way Sphinx numbers figures. In a book
whose table of contents is not numbered, Sphinx keeps one counter for the whole book, so the
first question of chapter 6 would read "练习 31". After Sphinx has assigned those numbers
(``TocTreeCollector`` on ``env-get-updated``), this extension renumbers each chapter's
exercises ``(chapter, 1), (chapter, 2), ...`` in their order on the page. Titles,
``{numref}`` references and the solutions' "解答" titles all read the same table
(``env.toc_fignumbers``), so they agree.

The chapter label comes from the page's file name (``notebooks/06_exposure_bias`` -> ``6``);
``exercise_chapter_labels`` in the Sphinx configuration overrides it per page (the appendix is
"A"). A page with exercises but no label is an error, so a new chapter cannot silently fall
back to the book-wide count.

The word before the number is ``numfig_format["exercise"]`` ("自测 %s": the chapters' checked
coding exercises are called "练习"). sphinx-exercise uses it for the questions' titles but
builds each solution's title ("解答 练习 6.1") from the word its directive stored at read
time; ``solution_titles_use_numfig_word`` replaces that stored word so both say "自测".
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError
from sphinx_exercise.nodes import exercise_title

FIGTYPE = "exercise"
CHAPTER_FILE = re.compile(r"(?:^|/)(\d+)_[^/]*$")


def chapter_label(docname: str, overrides: dict[str, str]) -> str:
    """The chapter part of an exercise number for page ``docname`` ("6" or "A")."""
    if docname in overrides:
        return str(overrides[docname])
    match = CHAPTER_FILE.search(docname)
    if match is None:
        raise ExtensionError(
            f"{docname}: has exercises but no chapter number; name the file NN_title or add "
            f"it to exercise_chapter_labels in _config.yml"
        )
    return str(int(match.group(1)))


def renumber_per_chapter(app: Sphinx, env: BuildEnvironment) -> list[str]:
    overrides = app.config.exercise_chapter_labels
    for docname, numbers in env.toc_fignumbers.items():
        exercises = numbers.get(FIGTYPE)
        if not exercises:
            continue
        label = chapter_label(docname, overrides)
        in_page_order = sorted(exercises, key=exercises.__getitem__)
        numbers[FIGTYPE] = {
            node_id: (label, index) for index, node_id in enumerate(in_page_order, start=1)
        }
    return []  # the numbers only depend on pages Sphinx already marked as changed


def solution_titles_use_numfig_word(app: Sphinx, env: BuildEnvironment) -> None:
    word = app.config.numfig_format[FIGTYPE].replace("%s", "").strip()
    for entry in getattr(env, "sphinx_exercise_registry", {}).values():
        title = entry["node"].children[0] if entry["node"].children else None
        if isinstance(title, exercise_title) and isinstance(title.children[0], nodes.Text):
            title.replace(title.children[0], nodes.Text(word))


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("exercise_chapter_labels", {}, "env", [dict])
    # after Sphinx's own figure numbering (TocTreeCollector, default priority 500)
    app.connect("env-get-updated", renumber_per_chapter, priority=900)
    app.connect("env-updated", solution_titles_use_numfig_word)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
