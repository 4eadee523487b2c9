"""A reader's local path: JupyterLab runs a chapter notebook and its widget responds.

Run by ``make test`` in the browser step (``pytest tests/test_lab.py --run-lab``); skipped
otherwise. It does what ``make lab`` lets a reader do, headless: starts the Jupyter server of
the project's environment on 127.0.0.1 (a free port, a random token, settings and workspaces
in a temporary folder), opens a copy of ``notebooks/00_setup.ipynb`` in Debian's Chromium
through Playwright, runs all cells from the Run menu, drags the temperature slider of the
sampling explorer and asserts that the figure and the readout below it change, then opens
the first self-test's folded answer with a click. No request may leave 127.0.0.1, no console
or page error may appear, no cell may fail. Screenshots before and after the drag, and of the
self-test closed and opened, go to ``_build/screenshots/lab_*.png``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "00_setup.ipynb"
SCREENSHOTS = ROOT / "_build" / "screenshots"
START_TIMEOUT_S = 60
TIMEOUT_MS = 40_000
# Console errors known to be harmless, each with the reason it is allowed.
HARMLESS_CONSOLE_ERRORS: dict[str, str] = {}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A Jupyter server of this environment on 127.0.0.1; yields (base URL with token, root)."""
    home = tmp_path_factory.mktemp("lab")
    root = home / "notebooks"
    root.mkdir()
    shutil.copy2(NOTEBOOK, root / NOTEBOOK.name)  # the reader's run never touches the repo
    # The reader's defaults but two: every cell stays in the page (JupyterLab otherwise
    # renders only the cells near the viewport), and no prompt about fetching Jupyter news.
    settings = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
    }
    for name, values in settings.items():
        path = home / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        # nothing fetched from the internet, nothing written back into the copy
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--FileContentsManager.delete_to_trash=False",
        "--LabApp.extension_manager=readonly",
    ]
    if os.geteuid() == 0:  # CI runs as root
        command.append("--allow-root")
    log = (home / "server.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert server.poll() is None, (
                f"jupyter lab exited:\n{(home / 'server.log').read_text()}"
            )
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "jupyter lab did not answer in time"
                time.sleep(0.5)
        yield f"{base}/lab/tree/{NOTEBOOK.name}?token={token}", home
    finally:
        server.terminate()  # SIGTERM: the server shuts its kernels down and exits
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


# Every code cell has run: a number in its prompt, none waiting ("[*]") or never run ("[ ]").
ALL_CELLS_RAN = """() => {
  const prompts = Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'));
  return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
}"""
# The sampling explorer's figure (an image in the widget's output area) and its readouts.
EXPLORER_STATE = """() => {
  const box = document.querySelector('.widget-vbox');
  const image = box && box.querySelector('.widget-output img');
  return {
    image: image ? image.getAttribute('src') : null,
    readouts: Array.from(box ? box.querySelectorAll('.widget-readout') : [])
      .map(r => r.textContent.trim()),
  };
}"""


def _menu(page, menu: str, item: str) -> None:  # type: ignore[no-untyped-def]
    page.get_by_role("menuitem", name=menu, exact=True).click()
    page.get_by_role("menuitem", name=item, exact=True).click()


SELF_TEST = """() => {
  const d = document.querySelector('.jp-RenderedMarkdown details');
  const body = Array.from(d.children).filter(e => e.tagName !== 'SUMMARY');
  return {open: d.open, visible: body.some(e => e.checkVisibility()),
          summary: d.querySelector('summary').textContent};
}"""


def _open_first_self_test(page) -> None:  # type: ignore[no-untyped-def]
    """The reader's view of a self-test in JupyterLab: answer folded, then opened by a click."""
    summary = page.locator(".jp-RenderedMarkdown details > summary").first
    summary.scroll_into_view_if_needed()
    closed = page.evaluate(SELF_TEST)
    page.screenshot(path=str(SCREENSHOTS / "lab_selftest_closed.png"))
    assert not closed["open"] and not closed["visible"], f"answer shown before a click: {closed}"
    summary.click()
    page.wait_for_function(f"() => ({SELF_TEST})().visible", timeout=TIMEOUT_MS)
    page.screenshot(path=str(SCREENSHOTS / "lab_selftest_open.png"))


def test_lab_runs_a_chapter_and_its_slider_redraws_the_figure(lab_server, browser) -> None:  # type: ignore[no-untyped-def]
    # The session's one Chromium (tests/conftest.py): Playwright's sync API refuses a second
    # driver while the book tests' browser is still open in the same pytest run.
    url, home = lab_server
    blocked: list[str] = []
    errors: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})

    def route(route) -> None:  # type: ignore[no-untyped-def]
        if route.request.url.startswith(("http://127.0.0.1:", "ws://127.0.0.1:", "data:")):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: (
            errors.append(f"console: {message.text}")
            if message.type == "error"
            and not any(known in message.text for known in HARMLESS_CONSOLE_ERRORS)
            else None
        ),
    )
    try:
        page.goto(url, timeout=TIMEOUT_MS)
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=TIMEOUT_MS)
        # the kernel has started and the widget manager is connected to it
        page.locator(".jp-StatusBar-Widget", has_text="| Idle").wait_for(timeout=TIMEOUT_MS)
        # the committed outputs carry execution counts: clear them, so a count means a run
        _menu(page, "Edit", "Clear Outputs of All Cells")
        page.wait_for_function(f"() => !({ALL_CELLS_RAN})()", timeout=TIMEOUT_MS)
        _menu(page, "Run", "Run All Cells")
        page.wait_for_function(ALL_CELLS_RAN, timeout=TIMEOUT_MS)
        slider = page.locator(".widget-vbox .widget-slider").first
        slider.wait_for(timeout=TIMEOUT_MS)
        page.wait_for_function(f"() => ({EXPLORER_STATE})().image !== null")
        tracebacks = page.locator(".jp-OutputArea-output[data-mime-type*='error']")
        assert tracebacks.count() == 0, tracebacks.all_inner_texts()
        before = page.evaluate(EXPLORER_STATE)
        slider.scroll_into_view_if_needed()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "lab_before.png"))

        # drag the handle of the first slider (temperature) most of the way to the right
        handle = slider.locator(".noUi-handle, .ui-slider-handle").first
        track = slider.locator(".noUi-target, .ui-slider").first
        start, end = handle.bounding_box(), track.bounding_box()
        assert start and end, "the slider has no box on screen"
        y = start["y"] + start["height"] / 2
        page.mouse.move(start["x"] + start["width"] / 2, y)
        page.mouse.down()
        page.mouse.move(end["x"] + 0.9 * end["width"], y)  # one move: one redraw
        page.mouse.up()
        page.wait_for_function(
            f"(before) => {{ const now = ({EXPLORER_STATE})();"
            " return now.image !== null && now.image !== before.image; }",
            arg=before,
            timeout=TIMEOUT_MS,
        )
        # every redraw the drag asked for is done
        page.locator(".jp-StatusBar-Widget", has_text="| Idle").wait_for(timeout=TIMEOUT_MS)
        after = page.evaluate(EXPLORER_STATE)
        page.screenshot(path=str(SCREENSHOTS / "lab_after.png"))
        assert after["readouts"][0] != before["readouts"][0], (before, after)
        assert after["image"] != before["image"]
        assert tracebacks.count() == 0, tracebacks.all_inner_texts()
        _open_first_self_test(page)
    except Exception:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "lab_failure.png"), full_page=True)
        raise
    finally:
        context.close()
    assert not blocked, f"requests that left 127.0.0.1: {blocked}"
    assert not errors, "\n".join(errors)
