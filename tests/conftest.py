"""Shared pytest set-up.

Tests marked ``book`` need the built HTML book and a browser; ``make test`` runs them in their
own step after the strict build, with ``--run-book``. Without that option they are skipped, so
``pytest tests`` never depends on a stale ``_build/html``. Tests marked ``lab`` start JupyterLab
and drive it with a browser (``--run-lab``, the same step).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from _tiny_model import build_tiny_model, one_torch_thread

if TYPE_CHECKING:
    from lecturekit import Transformer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-book",
        action="store_true",
        default=False,
        help="run the tests marked 'book' against _build/html (make test does)",
    )
    parser.addoption(
        "--run-lab",
        action="store_true",
        default=False,
        help="run the tests marked 'lab': a live JupyterLab driven by Chromium (make test does)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Under pytest-xdist each worker is one process on one core: torch's default of one
    # thread per core would run two threads per worker, and on 2 cores four threads that wait
    # on each other at every operation (several times slower than one thread each).
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


@pytest.fixture(name="one_torch_thread")
def one_torch_thread_fixture() -> Iterator[None]:
    """Run a test on one torch thread (``_tiny_model.one_torch_thread``); modules opt in with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    with one_torch_thread():
        yield


@pytest.fixture(scope="session")
def make_tiny_model() -> Callable[..., Transformer]:
    """The one way tests build a model: ``make_tiny_model(seed=0, **config_overrides)``
    (``_tiny_model.build_tiny_model``)."""
    return build_tiny_model


@pytest.fixture(scope="module")
def tiny_model() -> Transformer:
    """One tiny model with the default sizes, shared by the tests of a module."""
    return build_tiny_model()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Debian's headless Chromium driven by Playwright, one per session: the book and lab tests."""
    from playwright.sync_api import sync_playwright
    from test_book_html import CHROMIUM, CHROMIUM_FLAGS

    assert Path(CHROMIUM).is_file(), f"{CHROMIUM} is missing: make test installs Debian's chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def pinyin_split():
    """The capstone's word split (jieba's dictionary with pypinyin readings, seed 0). The
    first use in a fresh environment builds the cached lexicon (about half a minute)."""
    from lecturekit.data.pinyin import split_lexicon

    return split_lexicon(seed=0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gates = {
        "book": ("--run-book", "needs the built book: run with --run-book (make test)"),
        "lab": ("--run-lab", "starts JupyterLab and Chromium: run with --run-lab (make test)"),
    }
    for marker, (option, reason) in gates.items():
        if config.getoption(option):
            continue
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    # test_book_html needs the book extra (sphinx): look it up only if the run imported it
    book_html = sys.modules.get("test_book_html")
    opened = None if book_html is None else config.stash.get(book_html.OPENED, None)
    if opened is not None:
        terminalreporter.write_line(f"browser test opened {len(opened)} pages without error")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Students' answers to the exercises (tests/test_exercises_chNN*.py): a module's tables
    ``SOLUTIONS = {exercise_id: [answer, ...]}`` and ``MISTAKES = {exercise_id: [(answer,
    reason), ...]}`` parametrize its tests that take ``solution`` or ``mistake``."""
    if "solution" in metafunc.fixturenames:
        metafunc.parametrize(
            ("exercise_id", "solution"),
            [
                pytest.param(exercise_id, answer, id=f"{exercise_id}-{_answer_name(answer)}")
                for exercise_id, answers in metafunc.module.SOLUTIONS.items()
                for answer in answers
            ],
        )
    if "mistake" in metafunc.fixturenames:
        metafunc.parametrize(
            ("exercise_id", "mistake", "reason"),
            [
                pytest.param(
                    exercise_id, answer, reason, id=f"{exercise_id}-{_answer_name(answer)}"
                )
                for exercise_id, mistakes in metafunc.module.MISTAKES.items()
                for answer, reason in mistakes
            ],
        )


def _answer_name(answer: object) -> str:
    return getattr(answer, "__name__", None) or repr(answer).replace(" ", "")
