"""Draw the notebooks' widgets into the built pages as plain HTML, without their JavaScript.

A notebook saves each widget's first state (its models, the figure its output area showed).
myst-nb leaves a placeholder per widget and a JSON copy of that state in the page for
``@jupyter-widgets/html-manager`` to draw in the browser: 3.5 MB of JavaScript (plus
RequireJS and icon fonts) on every page with a widget, only to draw controls that cannot
move, since the static book has no Python behind them. This extension draws the same state
at build time instead:

- boxes lay out their children; a slider is a disabled range input with its readout, a
  dropdown a disabled select, toggle buttons disabled buttons (the chosen one pressed), a text
  box a disabled input, a progress bar a ``<progress>``; HTML and labels are shown as they are;
- an output area shows its saved outputs: a figure becomes a file in ``_images/`` shown in a
  ``<figure>`` whose caption and alt text name the controls' values it was drawn at;
- a widget with controls carries a label saying what a reader can do with it in Jupyter or
  Colab (drag, choose, type...) and that the page shows its first state.

The placeholders and the JSON state leave the page, and no widget JavaScript is loaded. A model
this module cannot draw stops the build with its name (the strict build fails), so a new kind
of widget gets a drawing before it reaches a reader. tests/test_book_ext.py checks the drawing,
tests/test_book_reading.py and tests/test_book_phone.py the built pages.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError

STATE_TYPE = "application/vnd.jupyter.widget-state+json"
VIEW = re.compile(
    r'<script type="application/vnd\.jupyter\.widget-view\+json">(.*?)</script>', re.DOTALL
)
MODEL_REF = "IPY_MODEL_"
IMAGE_DIR = "_images"
BOXES = {"VBoxModel": "lk-w-vbox", "HBoxModel": "lk-w-hbox", "BoxModel": "lk-w-vbox"}
SLIDERS = {"IntSliderModel", "FloatSliderModel", "FloatLogSliderModel"}
CHOICES = {"DropdownModel", "SelectModel", "RadioButtonsModel"}
DEFAULT_READOUT = {"IntSliderModel": "d", "FloatSliderModel": ".2f", "FloatLogSliderModel": ".3g"}
# what a reader does with each kind of control in Jupyter or Colab
ACTIONS = {
    **dict.fromkeys(SLIDERS, "拖动滑块"),
    **dict.fromkeys(CHOICES, "选择"),
    "ToggleButtonsModel": "切换按钮",
    "CheckboxModel": "勾选",
    "TextModel": "输入",
    "TextareaModel": "输入",
    "ButtonModel": "点击按钮",
}
LABEL = "在 Jupyter / Colab 中可以{actions}：网页版没有 Python，{shown}"
SHOWN_FIGURE = "图停在初始值"
SHOWN_STATE = "这里显示的是初始状态"
# where a figure's caption goes once every control of its widget has been drawn (no text has it)
CAPTION_SLOT = "\x00caption\x00"


@dataclass
class Drawing:
    """What drawing one widget produced: its HTML, and what its label and captions need."""

    html: str = ""
    actions: list[str] = field(default_factory=list)
    settings: list[str] = field(default_factory=list)  # "d_model = 512", in document order
    figures: int = 0


def _escape(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _readout(model: dict[str, Any], kind: str) -> str:
    """The slider's value as its readout shows it (ipywidgets' formats are Python's here)."""
    spec = model.get("readout_format") or DEFAULT_READOUT[kind]
    value = model["value"]
    try:
        return format(int(value) if spec.endswith("d") else float(value), spec)
    except (TypeError, ValueError):
        return str(value)


def _position(model: dict[str, Any], kind: str) -> float:
    """Where the slider's handle sits on its track: a log slider's track holds exponents."""
    if kind == "FloatLogSliderModel":
        return math.log(model["value"], model.get("base", 10.0))
    return float(model["value"])


class WidgetPainter:
    """Draws the widget views of one page from the saved state of every notebook's widgets.

    ``write_image(data, suffix)`` stores an image's bytes and returns the URL the page uses.
    """

    def __init__(self, models: dict[str, dict[str, Any]], write_image: Any) -> None:
        self.models = models
        self.write_image = write_image

    def model(self, model_id: str) -> tuple[str, dict[str, Any]]:
        model_id = model_id.removeprefix(MODEL_REF)
        if model_id not in self.models:
            raise ExtensionError(f"static_widgets: the page names widget {model_id!r} but no "
                                 "notebook saved its state; re-execute the notebook and save "
                                 "it with its widget state")  # fmt: skip
        entry = self.models[model_id]
        return entry["model_name"], entry["state"]

    def view(self, model_id: str) -> str:
        """The HTML of one widget view, label included when it has controls."""
        drawing = Drawing()
        self._draw(model_id, drawing)
        label = ""
        if drawing.actions:
            actions = "、".join(dict.fromkeys(drawing.actions))
            shown = SHOWN_FIGURE if drawing.figures else SHOWN_STATE
            label = f'<p class="lk-widget-label">{LABEL.format(actions=actions, shown=shown)}</p>'
        html_body = drawing.html
        if drawing.figures:
            caption = "控件取初始值时的图"
            if drawing.settings:
                caption += "：" + "，".join(drawing.settings)
            html_body = html_body.replace(CAPTION_SLOT, _escape(caption))
        return f'<div class="lk-static-widget">{label}{html_body}</div>'

    def _draw(self, model_id: str, drawing: Drawing) -> None:
        kind, model = self.model(model_id)
        if kind in BOXES:
            drawing.html += f'<div class="{BOXES[kind]}">'
            for child in model.get("children", []):
                self._draw(child, drawing)
            drawing.html += "</div>"
        elif kind == "OutputModel":
            self._output(model, drawing)
        elif kind in {"HTMLModel", "HTMLMathModel"}:
            drawing.html += self._described(
                model, f'<span class="lk-w-html">{model["value"]}</span>'
            )
        elif kind == "LabelModel":
            drawing.html += f'<span class="lk-w-html">{_escape(model["value"])}</span>'
        else:
            drawing.html += self._control(kind, model, drawing)

    def _described(self, model: dict[str, Any], inner: str, cls: str = "lk-w-item") -> str:
        description = model.get("description") or ""
        name = (
            f'<span class="lk-w-description">{_escape(description)}</span>' if description else ""
        )
        return f'<label class="{cls}">{name}{inner}</label>'

    def _control(self, kind: str, model: dict[str, Any], drawing: Drawing) -> str:
        description = model.get("description") or ""
        if kind in SLIDERS:
            shown = _readout(model, kind)
            drawing.actions.append(ACTIONS[kind])
            if description:
                drawing.settings.append(f"{description} = {shown}")
            inner = (
                f'<input type="range" disabled min="{_escape(model["min"])}" '
                f'max="{_escape(model["max"])}" step="{_escape(model.get("step", 1))}" '
                f'value="{_position(model, kind):g}" aria-label="{_escape(description)}">'
                f'<output class="lk-w-readout">{_escape(shown)}</output>'
            )
            return self._described(model, inner, "lk-w-item lk-w-slider")
        if kind in CHOICES or kind == "ToggleButtonsModel":
            labels = model.get("_options_labels", [])
            index = model.get("index")
            chosen = labels[index] if index is not None and 0 <= index < len(labels) else ""
            drawing.actions.append(ACTIONS[kind])
            if description or chosen:
                drawing.settings.append(f"{description} = {chosen}" if description else chosen)
            if kind == "ToggleButtonsModel":
                buttons = "".join(
                    f'<button type="button" disabled aria-pressed="{str(i == index).lower()}">'
                    f"{_escape(label)}</button>"
                    for i, label in enumerate(labels)
                )
                return self._described(model, f'<span class="lk-w-toggles">{buttons}</span>')
            options = "".join(
                f"<option{' selected' if i == index else ''}>{_escape(label)}</option>"
                for i, label in enumerate(labels)
            )
            return self._described(model, f"<select disabled>{options}</select>")
        if kind in {"TextModel", "TextareaModel"}:
            drawing.actions.append(ACTIONS[kind])
            inner = (
                f'<input type="text" disabled value="{_escape(model.get("value", ""))}" '
                f'placeholder="{_escape(model.get("placeholder", ""))}" '
                f'aria-label="{_escape(description)}">'
            )
            return self._described(model, inner)
        if kind == "CheckboxModel":
            drawing.actions.append(ACTIONS[kind])
            checked = " checked" if model.get("value") else ""
            return self._described(model, f'<input type="checkbox" disabled{checked}>')
        if kind == "ButtonModel":
            drawing.actions.append(ACTIONS[kind])
            return f'<button type="button" disabled>{_escape(description)}</button>'
        if kind in {"IntProgressModel", "FloatProgressModel"}:
            inner = (
                f'<progress max="{_escape(model["max"] - model["min"])}" '
                f'value="{_escape(model["value"] - model["min"])}"></progress>'
            )
            return self._described(model, inner)
        raise ExtensionError(
            f"static_widgets: no static drawing for a {kind}; add one to "
            "book/_ext/static_widgets.py (WidgetPainter._control)"
        )

    def _output(self, model: dict[str, Any], drawing: Drawing) -> None:
        drawing.html += '<div class="lk-w-output">'
        for output in model.get("outputs", []):
            if output.get("output_type") == "stream":
                drawing.html += f'<pre class="lk-w-stream">{_escape(output.get("text", ""))}</pre>'
                continue
            data = output.get("data", {})
            metadata = output.get("metadata", {})
            image = next((m for m in ("image/png", "image/jpeg") if m in data), None)
            if image:
                url = self.write_image(base64.b64decode(data[image]), "." + image.split("/")[1])
                width = metadata.get(image, {}).get("width")
                size = f' width="{_escape(width)}"' if width else ""
                drawing.figures += 1
                drawing.html += (
                    f'<figure class="lk-w-figure"><img src="{_escape(url)}"{size} '
                    f'alt="{CAPTION_SLOT}"><figcaption>{CAPTION_SLOT}</figcaption></figure>'
                )
            elif "text/html" in data:
                drawing.html += "".join(data["text/html"])
            elif "text/plain" in data:
                drawing.html += (
                    f'<pre class="lk-w-stream">{_escape("".join(data["text/plain"]))}</pre>'
                )
        drawing.html += "</div>"

    def page(self, body: str) -> str:
        """The page's body with every widget placeholder replaced by its drawing."""
        return VIEW.sub(lambda match: self.view(json.loads(match.group(1))["model_id"]), body)


def _states(app: Sphinx) -> dict[str, dict[str, Any]]:
    """Every notebook's saved widget models by id (ids are random and unique across notebooks)."""
    from myst_nb.sphinx_ext import NbMetadataCollector

    models: dict[str, dict[str, Any]] = {}
    for docname in sorted(app.env.all_docs):
        for _path, options in NbMetadataCollector.get_js_files(app.env, docname).values():
            if options.get("type") == STATE_TYPE:
                models.update(json.loads(options["body"])["state"])
    return models


def _configure(app: Sphinx, config: Config) -> None:
    config.nb_ipywidgets_js = {}  # no widget JavaScript: the pages draw their widgets in HTML


def _draw_page(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    body = context.get("body", "")
    scripts = context.get("script_files")
    if scripts is not None:
        # the saved state stays out of the page: the figures it holds are files now
        scripts[:] = [s for s in scripts if getattr(s, "attributes", {}).get("type") != STATE_TYPE]
    if "widget-view+json" not in body:
        return
    images = Path(app.outdir) / IMAGE_DIR
    images.mkdir(parents=True, exist_ok=True)

    def write_image(data: bytes, suffix: str) -> str:
        name = f"widget-{hashlib.sha256(data).hexdigest()[:16]}{suffix}"
        path = images / name
        if not path.exists():
            path.write_bytes(data)
        return context["pathto"](f"{IMAGE_DIR}/{name}", 1)

    context["body"] = WidgetPainter(_states(app), write_image).page(body)


def setup(app: Sphinx) -> dict[str, object]:
    # priority > 500: after myst-nb registered nb_ipywidgets_js's default and added the page's
    # state script
    app.connect("config-inited", _configure, priority=900)
    app.connect("html-page-context", _draw_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
