"""Fit notebook code cells to 88 columns where ``ruff format`` cannot.

``notebooks/ruff.toml`` limits notebook code to 88 columns (E501), so that code cells fit the
book's text column and the PDF's page. ``ruff format`` breaks long calls and expressions but
leaves long comments and string literals alone; this script handles those, touching only the
``source`` of code cells (never outputs, so committed outputs stay valid):

- a comment wider than the limit is wrapped over several comment lines; a trailing comment
  on a wide line moves above the line first;
- a string literal on a wide line is cut into adjacent literals (implicit concatenation, the
  same value), parenthesised when it is not already inside brackets; an f-string is never
  cut inside a replacement field, nor any string inside an escape sequence;
- a one-line docstring is spread over several lines (the only change of a value: its
  line breaks).

Widths count East Asian wide characters as two columns, as ruff does. Cells that do not
tokenize (IPython magics) are left alone. Run ``ruff format`` afterwards; ``make`` does not
call this script, the command is::

    python .ci/wrap_notebook_code.py notebooks/*.ipynb && ruff format notebooks \
        && ruff check --fix notebooks
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
import unicodedata
from pathlib import Path

import nbformat

LIMIT = 88
STRING_PREFIX = re.compile(r"^([rRbBuUfF]*)('''|\"\"\"|'|\")")
ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|[0-7]{1,3}|.)")


def width(text: str) -> int:
    """Display columns: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _wrap_comment(indent: str, comment: str) -> list[str]:
    body = comment.lstrip("#").strip()
    return [f"{indent}# {line}" for line in _wrap_words(body, LIMIT - width(indent) - 2)]


def _wrap_docstring(indent: str, token: str) -> str | None:
    """A one-line docstring over several lines (its text keeps its words)."""
    match = STRING_PREFIX.match(token)
    if not match or len(match.group(2)) != 3 or match.group(1):
        return None
    quote = match.group(2)
    lines = _wrap_words(token[3:-3], LIMIT - width(indent) - 6)
    return f"{quote}" + f"\n{indent}".join(lines) + quote


def _wrap_words(body: str, room: int) -> list[str]:
    """``body`` in lines of at most ``room`` columns, cut at spaces where there are some."""
    lines, current = [], ""
    # CJK text has no spaces: cut by width, at spaces where there are some
    for word in re.findall(r"\S+\s*", body):
        if current and width(current + word.rstrip()) > room:
            lines.append(current.rstrip())
            current = ""
        while width(word.rstrip()) > room:  # one word wider than the line
            cut = _cut_at_width(word, room)
            lines.append(word[:cut])
            word = word[cut:]
        current += word
    if current.strip():
        lines.append(current.rstrip())
    return lines


def _cut_at_width(text: str, room: int) -> int:
    used = 0
    for i, c in enumerate(text):
        used += width(c)
        if used > room:
            return max(i, 1)
    return len(text)


def _string_pieces(token: str, room: int) -> list[str] | None:
    """Cut a one-line string literal into literals of at most ``room`` columns each."""
    match = STRING_PREFIX.match(token)
    if not match or len(match.group(2)) == 3:
        return None  # triple-quoted strings are left alone
    prefix, quote = match.groups()
    body = token[len(prefix) + 1 : -1]
    is_f = "f" in prefix.lower()
    room -= len(prefix) + 2
    if room < 10:
        return None
    pieces, start, used, depth, last_space, field_start, i = [], 0, 0, 0, -1, -1, 0
    while i < len(body):
        c = body[i]
        step = 1
        if c == "\\" and "r" not in prefix.lower():  # never cut inside an escape sequence
            step = len(ESCAPE.match(body, i).group(0))
        elif is_f and depth == 0 and body.startswith(("{{", "}}"), i):
            step = 2
        # a cut goes before body[i], so only where no replacement field is open; inside a
        # field that does not fit, before the field
        too_wide = used + width(body[i : i + step]) > room
        if too_wide and depth == 0 and i > start:
            cut = last_space + 1 if start < last_space and i - last_space < 20 else i
        elif too_wide and depth > 0 and field_start > start:
            cut = field_start
        else:
            cut = None
        if cut is not None:
            pieces.append(body[start:cut])
            start, used, last_space = cut, width(body[cut:i]), -1
        if is_f and step == 1 and c == "{":
            if depth == 0:
                field_start = i
            depth += 1
        elif is_f and step == 1 and c == "}":
            depth -= 1
        if c == " " and depth == 0:
            last_space = i
        used += width(body[i : i + step])
        i += step
    pieces.append(body[start:])
    if len(pieces) == 1:
        return None
    return [f"{prefix}{quote}{piece}{quote}" for piece in pieces]


def wrap_source(source: str) -> str:
    """The cell's source with over-wide comments and string literals wrapped."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, list[str]]] = []  # (row, col_start, col_end, new)
    depth = 0
    for token in tokens:
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        row, col = token.start
        if row > len(lines):
            continue
        line = lines[row - 1].rstrip("\n")
        if width(line) <= LIMIT or token.start[0] != token.end[0]:
            continue
        indent = line[: len(line) - len(line.lstrip())]
        if token.type == tokenize.COMMENT:
            if line[:col].strip():  # trailing: move above the line
                edits.append(
                    (row, col, len(line), ["<above>", *_wrap_comment(indent, token.string)])
                )
            elif width(line) > LIMIT:
                edits.append((row, 0, len(line), _wrap_comment(indent, token.string)))
        elif token.type == tokenize.STRING and depth == 0 and line.strip() == token.string:
            docstring = _wrap_docstring(indent, token.string)  # a string statement alone
            if docstring:
                edits.append((row, col, token.end[1], [docstring]))
        elif token.type == tokenize.STRING:
            pieces = _string_pieces(token.string, LIMIT - width(indent) - 8)
            if pieces:
                inner = "\n".join(f"{indent}    {p}" for p in pieces)
                text = inner.lstrip() if depth else f"(\n{inner}\n{indent})"
                edits.append((row, col, token.end[1], [text]))
    first_per_row = {edit[0]: edit for edit in reversed(edits)}  # one edit a line a pass
    for row, start, end, new in sorted(first_per_row.values(), reverse=True):
        line = lines[row - 1]
        newline = "\n" if line.endswith("\n") else ""
        body = line.rstrip("\n")
        if new and new[0] == "<above>":
            comment = "\n".join(new[1:])
            lines[row - 1] = f"{comment}\n{body[:start].rstrip()}{newline}"
        elif start == 0 and len(new) > 1 or start == 0 and body.lstrip().startswith("#"):
            lines[row - 1] = "\n".join(new) + newline
        else:
            lines[row - 1] = body[:start] + new[0] + body[end:] + newline
    return "".join(lines)


def main(paths: list[str]) -> int:
    changed = 0
    for name in paths:
        path = Path(name)
        notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
        touched = False
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            wrapped = wrap_source(cell.source)
            if wrapped != cell.source:
                cell.source, touched = wrapped, True
        if touched:
            nbformat.write(notebook, path)
            changed += 1
            print(f"wrapped {path}")
    print(f"{changed} notebooks changed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
