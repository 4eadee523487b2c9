"""The whole book to take away: a zip of every notebook and the PDF, linked from the intro.

When the HTML build finishes, this writes ``notebooks.zip`` (every ``notebooks/*.ipynb``, with
their outputs) at the root of the built site and copies the PDF there if ``make pdf`` has
printed it (``_build/pdf/<repository>.pdf``; ``make pdf`` also copies it after printing).
The intro links both with plain HTML, so that a PDF not printed yet is no build warning.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import yaml
from sphinx.application import Sphinx

ZIP_NAME = "notebooks.zip"


def pdf_name(srcdir: Path) -> str:
    """``transformer-course.pdf`` for the repository URL of ``_config.yml``."""
    config = yaml.safe_load((srcdir / "_config.yml").read_text(encoding="utf-8"))
    return config["repository"]["url"].rstrip("/").rsplit("/", 1)[-1] + ".pdf"


def write_downloads(srcdir: Path, outdir: Path) -> list[Path]:
    """Write the zip of ``srcdir/notebooks/*.ipynb`` into ``outdir`` and copy the printed PDF
    there if there is one; return the files written."""
    written = [outdir / ZIP_NAME]
    with zipfile.ZipFile(written[0], "w", zipfile.ZIP_DEFLATED) as archive:
        for notebook in sorted((srcdir / "notebooks").glob("*.ipynb")):
            archive.write(notebook, f"notebooks/{notebook.name}")
    printed = srcdir / "_build" / "pdf" / pdf_name(srcdir)
    if printed.is_file():
        written.append(Path(shutil.copy2(printed, outdir / printed.name)))
    return written


def _finished(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.name == "html":
        write_downloads(Path(app.srcdir), Path(app.outdir))


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("build-finished", _finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
