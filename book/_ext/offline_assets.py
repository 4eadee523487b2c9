"""Serve the ipywidgets JavaScript from the built book instead of a CDN.

myst-nb adds RequireJS and ``@jupyter-widgets/html-manager``'s ``embed-amd.js`` to every page
whose notebook saved widget state, by default from a CDN that offline readers (and our CI)
cannot reach. ``make`` installs both from the npm registry into ``node_modules/`` (see
``package.json``); this extension points myst-nb at local copies and copies the files into
``_build/html/_static/vendor/`` when the build finishes. They are deliberately not placed in
the source ``_static/``: Jupyter Book 1 injects every ``_static/*.js`` into every page.

When ``node_modules/`` is missing (no npm registry on a reader's machine) the CDN defaults
stay; ``make`` has already printed one warning about it. Under CI (``CI`` set) a missing
install is an error instead, so the offline guarantee is always tested.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

VENDOR_DIR = "vendor"  # under _static/ of the built site
REQUIRE_JS = Path("requirejs") / "require.js"
HTML_MANAGER_DIST = Path("@jupyter-widgets") / "html-manager" / "dist"
# embed-amd.js loads its fonts relative to its own URL, so they travel with it.
FONT_SUFFIXES = (".woff2", ".woff", ".ttf", ".eot", ".svg")


def _node_modules(app: Sphinx) -> Path:
    return Path(app.confdir) / "node_modules"


def _assets(node_modules: Path) -> list[Path]:
    dist = node_modules / HTML_MANAGER_DIST
    fonts = sorted(p for p in dist.glob("*") if p.suffix in FONT_SUFFIXES) if dist.is_dir() else []
    return [node_modules / REQUIRE_JS, dist / "embed-amd.js", *fonts]


def _installed(node_modules: Path) -> bool:
    return all(p.is_file() for p in _assets(node_modules)[:2])


def _configure(app: Sphinx, config: Config) -> None:
    node_modules = _node_modules(app)
    if not _installed(node_modules):
        if os.environ.get("CI"):
            raise ExtensionError(
                f"offline_assets: {node_modules} lacks RequireJS or the widget manager; "
                "run `npm ci` (make does it) - CI must build an offline book"
            )
        logger.info("offline_assets: widget JavaScript not installed, pages load it from a CDN")
        return
    config.nb_ipywidgets_js = {
        f"{VENDOR_DIR}/require.js": {},
        f"{VENDOR_DIR}/embed-amd.js": {},
    }


def _copy(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    node_modules = _node_modules(app)
    if not _installed(node_modules):
        return
    target = Path(app.outdir) / "_static" / VENDOR_DIR
    target.mkdir(parents=True, exist_ok=True)
    for source in _assets(node_modules):
        shutil.copy2(source, target / source.name)


def setup(app: Sphinx) -> dict[str, object]:
    # priority > 500 so this runs after myst-nb registered nb_ipywidgets_js's default
    app.connect("config-inited", _configure, priority=900)
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
