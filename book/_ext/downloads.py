"""The whole book to take away: a zip of every notebook and the PDF, linked from the intro.

When the HTML build finishes, this writes ``notebooks.zip`` (every ``notebooks/*.ipynb``, with
their outputs) at the root of the built site and copies the PDF there if ``make pdf`` has
printed it (``_build/pdf/<repository>.pdf``; ``make pdf`` also copies it after printing).
The intro links both with plain HTML, so that a PDF not printed yet is no build warning; in a
book built without the PDF its link is turned into a hidden span (``link_pdf``), so that
nothing dangles and a reader is not told about a PDF that is not there (book.css hides the
"·" before it too), and ``make pdf`` turns it back into a link when it copies the PDF
(``python book/_ext/downloads.py _build/html``).
"""

from __future__ import annotations

import re
import shutil
import sys
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
    link_pdf(outdir, pdf_name(srcdir))
    return written


def link_pdf(outdir: Path, name: str) -> list[Path]:
    """Make the pages of ``outdir`` link the book's PDF ``name`` (a relative link, as the
    intro writes it) exactly when ``outdir/name`` is there: without it the link becomes a
    hidden ``span.lk-no-pdf`` keeping the address, and such a span becomes a link again once
    the PDF is copied. Other links, to the slides' or the paper's PDFs, are left alone.
    Returns the pages rewritten."""
    present = (outdir / name).is_file()
    href = rf"(?P<href>(?:\.\./)*{re.escape(name)})"
    linked = re.compile(rf'<a href="{href}">(?P<text>[^<]*)</a>')
    unlinked = re.compile(
        rf'<span class="lk-no-pdf" data-href="{href}" hidden>(?P<text>[^<]*)</span>'
    )

    def unlink(match: re.Match[str]) -> str:
        return f'<span class="lk-no-pdf" data-href="{match["href"]}" hidden>{match["text"]}</span>'

    def relink(match: re.Match[str]) -> str:
        return f'<a href="{match["href"]}">{match["text"]}</a>'

    rewritten = []
    for page in outdir.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        if name not in html:
            continue
        changed = unlinked.sub(relink, html) if present else linked.sub(unlink, html)
        if changed != html:
            page.write_text(changed, encoding="utf-8")
            rewritten.append(page)
    return rewritten


def _finished(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.name == "html":
        write_downloads(Path(app.srcdir), Path(app.outdir))


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("build-finished", _finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    # make pdf, after copying the PDF into the built book: link it from the intro again
    link_pdf(Path(sys.argv[1]), pdf_name(Path.cwd()))
