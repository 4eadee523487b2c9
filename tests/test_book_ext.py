"""The book's own Sphinx extensions (book/_ext), tested without building the book."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))

import exercise_numbers  # noqa: E402
from sphinx.errors import ExtensionError  # noqa: E402


def test_chapter_label_from_file_name_or_override() -> None:
    assert exercise_numbers.chapter_label("notebooks/06_exposure_bias", {}) == "6"
    assert exercise_numbers.chapter_label("notebooks/00_setup", {}) == "0"
    assert exercise_numbers.chapter_label("notebooks/12_more", {}) == "12"
    overrides = {"notebooks/08_appendix": "A"}
    assert exercise_numbers.chapter_label("notebooks/08_appendix", overrides) == "A"
    with pytest.raises(ExtensionError, match="exercise_chapter_labels"):
        exercise_numbers.chapter_label("book/intro", {})


def test_renumber_per_chapter_keeps_page_order_and_other_figtypes() -> None:
    # Sphinx's book-wide numbering: chapter 2 continues where chapter 1 stopped
    toc_fignumbers = {
        "notebooks/01_seq2seq": {"exercise": {"q-b": (2,), "q-a": (1,)}, "figure": {"f": (1,)}},
        "notebooks/02_attention": {"exercise": {"z": (3,), "y": (5,), "x": (4,)}},
        "notebooks/08_appendix": {"exercise": {"last": (6,)}},
        "book/intro": {"figure": {"g": (2,)}},
    }
    env = SimpleNamespace(toc_fignumbers=toc_fignumbers)
    app = SimpleNamespace(
        config=SimpleNamespace(exercise_chapter_labels={"notebooks/08_appendix": "A"})
    )
    assert exercise_numbers.renumber_per_chapter(app, env) == []
    assert toc_fignumbers["notebooks/01_seq2seq"] == {
        "exercise": {"q-a": ("1", 1), "q-b": ("1", 2)},
        "figure": {"f": (1,)},
    }
    assert toc_fignumbers["notebooks/02_attention"]["exercise"] == {
        "z": ("2", 1),
        "x": ("2", 2),
        "y": ("2", 3),
    }
    assert toc_fignumbers["notebooks/08_appendix"]["exercise"] == {"last": ("A", 1)}
    assert toc_fignumbers["book/intro"] == {"figure": {"g": (2,)}}
