"""Serve the ipywidgets JavaScript from the built book instead of a CDN.

myst-nb adds RequireJS and ``@jupyter-widgets/html-manager``'s ``embed-amd.js`` to every page
whose notebook saved widget state, by default from a CDN that offline readers (and our CI)
cannot reach. ``make`` installs both from the npm registry into ``node_modules/`` (see
``package.json``); this extension points myst-nb at local copies and, when the build finishes,
copies them into ``_build/html/_static/vendor/`` together with a small configuration script it
writes itself. Nothing goes into the source ``_static/``: Jupyter Book 1 injects every
``_static/*.js`` into every page.

The configuration script does two things the CDN set-up leaves broken:

- it maps the RequireJS names of the widget manager's modules to the local copy, so every
  module finds its icon fonts next to ``embed-amd.js`` (by default they are looked for in an
  ``@jupyter-widgets/`` folder beside each page, which does not exist);
- the manager typesets widget labels with the MathJax 2 API (``MathJax.Hub.Queue``) while the
  book loads MathJax 3, which throws; the script forwards that call to MathJax 3.

When ``node_modules/`` is missing (no npm registry on a reader's machine) the CDN defaults stay;
``make`` has already printed one warning about it. Under CI (``CI`` set) a missing install is
an error instead, so the offline guarantee is always tested.
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
MANAGER_DIR = "html-manager"  # under VENDOR_DIR: embed-amd.js and its fonts (CONFIG_JS names it)
REQUIRE_JS = Path("requirejs") / "require.js"
HTML_MANAGER_DIST = Path("@jupyter-widgets") / "html-manager" / "dist"
FONT_SUFFIXES = (".woff2", ".woff", ".ttf", ".eot", ".svg")
CONFIG_JS = "widgets-config.js"
CONFIG_JS_SOURCE = """\
// Written by book/_ext/offline_assets.py. Loaded after require.js, before embed-amd.js.
(function () {
  var here = document.currentScript.src;
  var vendor = here.slice(0, here.lastIndexOf("/") + 1);
  // embed-amd.js defines its modules by name ("@jupyter-widgets/html-manager", ".../base",
  // ".../controls", ".../html-manager/dist/libembed-amd"); each asks for its icon fonts
  // beside the URL RequireJS gives its name, by default relative to the page. Map every name
  // to the folder that holds embed-amd.js and the fonts (the longest matching prefix wins).
  require.config({
    paths: {
      "@jupyter-widgets": vendor + "html-manager",
      "@jupyter-widgets/html-manager/dist": vendor + "html-manager",
    },
  });
  // The manager calls the MathJax 2 API; the book runs MathJax 3 (loaded with defer, so it
  // exists at DOMContentLoaded, before the manager renders on window load).
  document.addEventListener("DOMContentLoaded", function () {
    var mathjax = window.MathJax;
    if (mathjax && !mathjax.Hub && mathjax.startup) {
      mathjax.Hub = {
        Queue: function (job) {
          var element = Array.isArray(job) ? job[2] : undefined;
          mathjax.startup.promise.then(function () {
            return mathjax.typesetPromise(element ? [element] : undefined);
          });
        },
      };
    }
  });
})();
"""


def _node_modules(app: Sphinx) -> Path:
    return Path(app.confdir) / "node_modules"


def _installed(node_modules: Path) -> bool:
    return (node_modules / REQUIRE_JS).is_file() and (
        node_modules / HTML_MANAGER_DIST / "embed-amd.js"
    ).is_file()


def _configure(app: Sphinx, config: Config) -> None:
    node_modules = _node_modules(app)
    if not _installed(node_modules):
        if os.environ.get("CI"):
            raise ExtensionError(
                f"offline_assets: {node_modules} lacks RequireJS or the widget manager; "
                "run `npm ci` (make does it): CI must build the offline book"
            )
        logger.info("offline_assets: widget JavaScript not installed, pages load it from a CDN")
        return
    # Order matters: RequireJS, then its configuration, then the manager.
    config.nb_ipywidgets_js = {
        f"{VENDOR_DIR}/require.js": {},
        f"{VENDOR_DIR}/{CONFIG_JS}": {},
        f"{VENDOR_DIR}/{MANAGER_DIR}/embed-amd.js": {},
    }


def _copy(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    node_modules = _node_modules(app)
    if not _installed(node_modules):
        return
    vendor = Path(app.outdir) / "_static" / VENDOR_DIR
    manager = vendor / MANAGER_DIR
    manager.mkdir(parents=True, exist_ok=True)
    shutil.copy2(node_modules / REQUIRE_JS, vendor / "require.js")
    (vendor / CONFIG_JS).write_text(CONFIG_JS_SOURCE, encoding="utf-8")
    dist = node_modules / HTML_MANAGER_DIST
    for source in [dist / "embed-amd.js", *sorted(dist.iterdir())]:
        if source.name == "embed-amd.js" or source.suffix in FONT_SUFFIXES:
            shutil.copy2(source, manager / source.name)


def setup(app: Sphinx) -> dict[str, object]:
    # priority > 500: runs after myst-nb registered nb_ipywidgets_js's default
    app.connect("config-inited", _configure, priority=900)
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
