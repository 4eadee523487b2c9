"""The book's own Sphinx extensions (book/_ext), tested without building the book."""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))

import figures  # noqa: E402
import search_terms  # noqa: E402
import static_widgets  # noqa: E402
import term_ranks  # noqa: E402
import theme_zh  # noqa: E402
from sphinx.errors import ExtensionError  # noqa: E402


def _notebook(tmp_path: Path, *markdown: str) -> Path:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": text} for text in markdown]
    path = tmp_path / "appendix.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    return path


def test_glossary_rows_split_terms_and_qualifiers(tmp_path: Path) -> None:
    path = _notebook(
        tmp_path,
        "## 其他\n\n| 中文 | x | y |\n|---|---|---|\n| 不是术语 | no | 第 9 章 |",
        "## 术语表 (glossary)\n\n| 中文 | English | 首次出现 |\n|---|---|---|\n"
        "| 束搜索 / 束宽 | beam search / beam size | 第 6 章 |\n"
        "| 预热 (学习率) | warmup | 第 5 章 |\n"
        "| 在线 softmax | online softmax | 第 7 章 |\n\n后面的段落 | 不是表格",
    )
    rows = search_terms.glossary_rows(path)
    assert [(r.terms, r.qualifiers, r.chapter) for r in rows] == [
        (("束搜索", "束宽"), (), "第 6 章"),
        (("预热",), ("学习率",), "第 5 章"),
        (("在线 softmax",), (), "第 7 章"),
    ]
    assert rows[0].english == "beam search / beam size"
    terms = search_terms.book_terms(rows, ["第6章 推理与曝光偏差 (decoding)"])
    assert terms == ["束搜索", "束宽", "预热", "学习率", "在线", "推理", "曝光偏差"]


def test_glossary_rows_name_the_fix_when_the_glossary_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ExtensionError, match="search_glossary"):
        search_terms.glossary_rows(_notebook(tmp_path, "## 附录\n\n没有术语表的表格"))
    with pytest.raises(ExtensionError, match="no table"):
        search_terms.glossary_rows(_notebook(tmp_path, "## 术语表\n\n只有文字"))


def test_title_words_drop_chapter_numbers_and_joiners() -> None:
    assert search_terms.title_words(
        "第7章 GPU 内核：融合 softmax、LayerNorm 与 FlashAttention"
    ) == [
        "内核",
        "融合",
    ]
    assert search_terms.title_words("第1章 序列到序列（seq2seq）") == ["序列到序列"]


def test_index_keeps_book_terms_whole_and_stems_like_the_browser(tmp_path: Path) -> None:
    dictionary = tmp_path / "terms.txt"
    dictionary.write_text("束搜索\n曝光偏差\n键\n", encoding="utf-8")
    language = search_terms.BookChinese({"dict": str(dictionary)})
    words = language.split("束搜索缓解不了曝光偏差，键 (key) 也一样")
    assert {"束搜索", "曝光偏差", "键"} <= set(words)
    assert language.word_filter("键") and not language.word_filter("也")
    # the JavaScript side stems with Porter: "key" -> "kei", "bias" -> "bia"
    assert language.stem("key") == "kei" and language.stem("bias") == "bia"
    assert '"束搜索"' in language.js_splitter_code


def test_teaching_chapters_prefer_title_then_heading_then_first_use() -> None:
    rows = [
        search_terms.GlossaryRow(("注意力",), (), "attention", "第 1 章"),
        search_terms.GlossaryRow(("束搜索", "束宽"), (), "beam search / beam size", "第 5 章"),
        search_terms.GlossaryRow(("层归一化",), (), "layer normalization (LayerNorm)", "第 3 章"),
        search_terms.GlossaryRow(("基线",), (), "baseline", "第 6 章"),
        search_terms.GlossaryRow(("显存",), (), "GPU memory (HBM on A100/H100)", "第 2 章"),
    ]
    order = [
        "book/intro",
        "notebooks/01_seq2seq",
        "notebooks/02_attention",
        "notebooks/03_encoder",
        "notebooks/05_training",
        "notebooks/06_exposure_bias",
        "notebooks/capstone_pinyin",
    ]
    titles = {"notebooks/02_attention": "第 2 章 注意力(attention)"}
    headings = {
        "notebooks/01_seq2seq": ["给 RNN 加上注意力", "自测 1.6 束搜索"],
        "notebooks/06_exposure_bias": ["贪心解码与束搜索"],
        "notebooks/capstone_pinyin": ["基线：逐字查表"],
    }
    ranks = term_ranks.teaching_chapters(rows, order, titles, headings)
    assert ranks["注意力"] == ranks["attention"] == "notebooks/02_attention"  # the title
    assert ranks["beam search"] == ranks["束宽"] == "notebooks/06_exposure_bias"  # a heading
    assert ranks["layernorm"] == ranks["layer normalization"] == "notebooks/03_encoder"
    assert ranks["baseline"] == "notebooks/06_exposure_bias"  # not the capstone's heading
    assert ranks["gpu memory (hbm on a100/h100)"] == "notebooks/02_attention"
    split = ["book/chapter_06", "notebooks/06_1_decoding", "notebooks/06_2_exposure_bias"]
    assert term_ranks.chapter_docname("第 6 章", ["notebooks/05_training", *split]) == split[0]
    row = search_terms.GlossaryRow(("基线",), (), "baseline", "第 6 章")
    ranks = term_ranks.teaching_chapters([row], split, {split[0]: "第 6 章 基线"}, {})
    assert ranks["baseline"] == split[1]  # not the landing page, though its title names it
    texts = {split[1]: "基线", split[2]: "减去基线 (baseline)"}  # defined in the second
    ranks = term_ranks.teaching_chapters([row], split, {}, {split[1]: ["比较基线"]}, texts)
    assert ranks["baseline"] == split[2]  # the definition, not the heading, in one chapter
    # a chapter's title outranks an earlier section's title: 注意力 is named by section 1.2's
    # title and defined on 1.1, but taught by chapter 2, whose landing title names it
    split = [
        "book/chapter_01", "notebooks/01_1_seq2seq", "notebooks/01_2_attention",
        "book/chapter_02", "notebooks/02_1_dot_product", "notebooks/02_2_multihead",
    ]  # fmt: skip
    titles = {split[2]: "1.2 玩具任务与注意力", split[3]: "第 2 章 注意力 (attention)"}
    titles |= {split[4]: "2.1 缩放点积注意力", split[5]: "2.2 多头注意力"}
    texts = {split[1]: "注意力 (attention)", split[2]: "注意力", split[4]: "注意力是查字典"}
    ranks = term_ranks.teaching_chapters(rows[:1], split, titles, {}, texts)
    assert ranks["注意力"] == ranks["attention"] == split[4]  # not 1.1 (glossed), not 2.2
    del titles[split[3]]  # no chapter title names it: the first-use chapter's definition
    ranks = term_ranks.teaching_chapters(rows[:1], split, titles, {}, texts)
    assert ranks["注意力"] == split[1]
    # a heading may name the term by its short English name; of two sections that define
    # it, the one the heading picks stays (3.1 previews LayerNorm, 3.2 teaches it)
    row = search_terms.GlossaryRow(("层归一化",), (), "layer normalization (LayerNorm)", "第 3 章")
    split = ["book/chapter_03", "notebooks/03_1_encoder", "notebooks/03_2_norm"]
    texts = {split[1]: "层归一化 (layer normalization)", split[2]: "层归一化 (LayerNorm)"}
    headings = {split[1]: ["Norm 的位置"], split[2]: ["LayerNorm 与 BatchNorm"]}
    ranks = term_ranks.teaching_chapters([row], split, {}, headings, texts)
    assert ranks["layernorm"] == ranks["层归一化"] == split[2]
    headings = {split[1]: ["SuperLayerNorm"], split[2]: []}  # not a whole word: first use
    ranks = term_ranks.teaching_chapters([row], split, {}, headings, texts)
    assert ranks["layernorm"] == split[1]
    # a gloss names the term's own English name: "多头自注意力 (multi-head …)" on 2.2 does not
    # define 自注意力, so 2.2's heading yields to 2.1, which does
    row = search_terms.GlossaryRow(("自注意力",), (), "self-attention", "第 2 章")
    split = ["book/chapter_02", "notebooks/02_1_dot_product", "notebooks/02_2_multihead"]
    texts = {split[1]: "子层自注意力 (self-attention)", split[2]: "多头自注意力 (multi-head)"}
    headings = {split[2]: ["自注意力不知道顺序"]}
    ranks = term_ranks.teaching_chapters([row], split, {}, headings, texts)
    assert ranks["self-attention"] == split[1]
    with pytest.raises(ExtensionError, match="第 6 章"):  # two pages, neither a section
        term_ranks.chapter_docname("第 6 章", ["notebooks/06_a", "notebooks/06_b"])
    with pytest.raises(ExtensionError, match="第 9 章"):
        term_ranks.teaching_chapters(
            [search_terms.GlossaryRow(("x",), (), "x", "第 9 章")], order, {}, {}
        )


def test_the_appendix_links_its_landing_page_or_nothing() -> None:
    appendix = [
        "book/appendix",
        "notebooks/08_1_appendix_subwords",
        "notebooks/08_2_appendix_architectures",
        "notebooks/08_3_appendix_reference",
    ]
    docnames = ["notebooks/07_kernels", *appendix, "notebooks/lab_debugging"]
    assert term_ranks.chapter_pages("附录", docnames) == appendix
    glossary = appendix[-1]
    assert term_ranks.first_use_link("附录", docnames, glossary) == "book/appendix"
    assert term_ranks.first_use_link("调试实验", docnames, glossary) == "notebooks/lab_debugging"
    one_page = ["notebooks/07_kernels", "notebooks/08_appendix"]  # the glossary's own page
    assert term_ranks.first_use_link("附录", one_page, "notebooks/08_appendix") is None
    with pytest.raises(ExtensionError, match="附录"):  # two appendix pages, neither a section
        term_ranks.chapter_pages("附录", ["notebooks/08_appendix", "notebooks/09_appendix"])


def test_a_section_label_names_its_section_page() -> None:
    appendix = [
        "book/appendix",
        "notebooks/08_1_appendix_subwords",
        "notebooks/08_2_appendix_architectures",
        "notebooks/08_3_appendix_reference",
    ]
    chapter_6 = ["book/chapter_06", "notebooks/06_1_decoding", "notebooks/06_2_exposure_bias"]
    docnames = [*chapter_6, "notebooks/07_kernels", *appendix]
    assert term_ranks.chapter_pages("A.1", docnames) == [appendix[1]]
    assert term_ranks.chapter_pages(" A.2 ", docnames) == [appendix[2]]
    assert term_ranks.chapter_pages("6.2", docnames) == [chapter_6[2]]
    assert term_ranks.first_use_link("A.2", docnames, appendix[-1]) == appendix[2]
    assert term_ranks.first_use_link("A.3", docnames, appendix[-1]) is None  # the glossary
    assert term_ranks.chapter_pages("第 6 章", docnames) == chapter_6  # chapter labels stay
    for missing in ("A.4", "6.3", "7.1"):  # no such section; chapter 7 is one page
        with pytest.raises(ExtensionError, match=re.escape(missing)):
            term_ranks.chapter_pages(missing, docnames)


def test_figure_titles_are_read_from_string_literals() -> None:
    source = (
        "%matplotlib inline\n"
        "fig, (a, b) = plt.subplots(1, 2)\n"
        "a.set_title('损失  曲线')\n"
        "b.set_title(f'第 {n} 层')  # computed: unknown until the cell runs\n"
        "plot_attention(w, title='注意力权重')\n"
        "fig.suptitle('两个' '面板')\n"
        "a.set_title('损失 曲线')\n"
    )
    assert figures.figure_titles(source) == (["两个面板"], ["损失 曲线", "注意力权重"])
    assert figures.figure_titles("x = (") == ([], [])


def test_captions_prefer_metadata_then_titles_then_the_heading() -> None:
    one_title = "ax.set_title('A')"
    assert figures.captions(one_title, {"caption": "给定"}, 1, "标题") == ["给定"]
    assert figures.captions(one_title, {"caption": ["一", "二"]}, 2, "标题") == ["一", "二"]
    assert figures.captions(one_title, {}, 1, "标题") == ["A"]
    # two panels of one figure: both titles; one title per figure: one each
    assert figures.captions("a.set_title('A')\nb.set_title('B')", {}, 1, "H") == ["A；B"]
    assert figures.captions("plt.title('A')\nplt.title('B')", {}, 2, "H") == ["A", "B"]
    # a grid of many panels, or no literal title: the section's heading
    many = "\n".join(f"ax[{i}].set_title('头 {i}')" for i in range(4))
    assert figures.captions(many, {}, 1, "多头") == ["多头"]
    assert figures.captions("plot(x)", {}, 2, "H") == ["H", "H"]


def test_figure_numbers_follow_the_chapter() -> None:
    assert figures.figure_prefix("第 4 章 解码器 (decoder)") == "4."
    assert figures.figure_prefix("6.2 曝光偏差与定时采样 (exposure bias)") == "6.2."
    assert figures.figure_prefix("附录 (appendix)") == "A."
    assert figures.figure_prefix("A.1 子词与架构 (subwords)") == "A.1."
    assert figures.figure_prefix("综合项目：拼音到汉字 (from pinyin to characters)") == "C."
    assert figures.figure_prefix("调试实验：Transformer 里最常见的 bug (debugging lab)") == "L."
    assert figures.figure_prefix("欢迎") == ""
    assert figures.plain("生成门 $p_{\\rm gen}$ (小 = 复制)") == "生成门 p_gen (小 = 复制)"


def test_theme_words_are_simplified_chinese() -> None:
    buttons = [
        {"tooltip": "Launch on Colab", "text": "Colab"},
        {"tooltip": "Source repositories", "buttons": [{"text": "Repository"}]},
        {"tooltip": "列印成 PDF"},
    ]
    theme_zh.translate_buttons(buttons)
    assert buttons[0] == {"tooltip": "在 Colab 中打开", "text": "Colab"}
    assert buttons[1]["tooltip"] == "源代码仓库"
    assert buttons[1]["buttons"][0]["text"] == "源代码仓库"
    assert buttons[2]["tooltip"] == "打印成 PDF"
    html = '<details><summary aria-label="Toggle hidden content">显示代码</summary></details>'
    assert "Toggle" not in theme_zh.translate_labels(html)


def test_the_pdf_link_is_hidden_without_the_pdf_and_a_link_with_it(tmp_path: Path) -> None:
    import downloads

    page = tmp_path / "book" / "intro.html"
    page.parent.mkdir()
    paper = '<a href="https://arxiv.org/pdf/1706.03762.pdf">论文</a>'
    link = '<a href="../course.pdf">整本书的 PDF</a>'
    page.write_text(f"<p>{link} · {paper}</p>", encoding="utf-8")
    assert downloads.link_pdf(tmp_path, "course.pdf") == [page]
    html = page.read_text(encoding="utf-8")
    assert link not in html and paper in html and "hidden>整本书的 PDF</span>" in html
    assert downloads.link_pdf(tmp_path, "course.pdf") == []  # nothing left to unlink
    (tmp_path / "course.pdf").write_bytes(b"%PDF-1.7")
    assert downloads.link_pdf(tmp_path, "course.pdf") == [page]
    assert page.read_text(encoding="utf-8") == f"<p>{link} · {paper}</p>"


def _painter(models: dict[str, tuple[str, dict]]) -> tuple[static_widgets.WidgetPainter, list]:
    written: list[bytes] = []

    def write_image(data: bytes, suffix: str) -> str:
        written.append(data)
        return f"../_images/w{len(written)}{suffix}"

    state = {key: {"model_name": kind, "state": model} for key, (kind, model) in models.items()}
    return static_widgets.WidgetPainter(state, write_image), written


def _view(model_id: str) -> str:
    body = json.dumps({"model_id": model_id, "version_major": 2, "version_minor": 0})
    return f'<p>before</p><script type="application/vnd.jupyter.widget-view+json">{body}</script>'


PNG = base64.b64encode(b"\x89PNG fake bytes").decode()
INTERACT = {
    "box": ("VBoxModel", {"children": ["IPY_MODEL_size", "IPY_MODEL_temp", "IPY_MODEL_pick",
                                        "IPY_MODEL_out"]}),
    "size": ("IntSliderModel", {"description": "d_model", "min": 64, "max": 1024, "step": 64,
                                "value": 512, "readout_format": "d"}),
    "temp": ("FloatLogSliderModel", {"description": "温度 τ", "min": -1.0, "max": 0.7,
                                     "base": 10.0, "step": 0.05, "value": 1.0,
                                     "readout_format": ".2f"}),
    "pick": ("DropdownModel", {"description": "头", "_options_labels": ["全部头", "头 1"],
                               "index": 1}),
    "out": ("OutputModel", {"outputs": [{"output_type": "display_data", "metadata": {
        "image/png": {"width": 300}}, "data": {"image/png": PNG, "text/plain": "<Figure>"}}]}),
}  # fmt: skip


def test_static_widget_draws_controls_disabled_with_their_values() -> None:
    painter, written = _painter(INTERACT)
    page = painter.page(_view("box"))
    assert page.startswith("<p>before</p>") and "widget-view" not in page
    assert page.count("disabled") == 3  # two sliders and the dropdown
    assert 'value="512"' in page and ">512</output>" in page
    assert 'value="0"' in page and ">1.00</output>" in page  # the log slider's track: 10 ** 0
    assert "<option selected>头 1</option>" in page
    label = "在 Jupyter / Colab 中可以拖动滑块、选择：网页版没有 Python，图停在初始值"
    assert label in page
    caption = "控件取初始值时的图：d_model = 512，温度 τ = 1.00，头 = 头 1"
    assert f'alt="{caption}"' in page and f"<figcaption>{caption}</figcaption>" in page
    assert written == [base64.b64decode(PNG)] and 'src="../_images/w1.png" width="300"' in page


def test_static_widget_without_controls_has_no_label() -> None:
    painter, _ = _painter({
        "bar": ("HBoxModel", {"children": ["IPY_MODEL_text", "IPY_MODEL_progress"]}),
        "text": ("HTMLModel", {"value": "training: 100%", "description": ""}),
        "progress": ("FloatProgressModel", {"min": 0.0, "max": 400.0, "value": 400.0}),
    })  # fmt: skip
    page = painter.page(_view("bar"))
    assert "lk-widget-label" not in page and "training: 100%" in page
    assert '<progress max="400.0" value="400.0"></progress>' in page


def test_static_widget_text_box_says_type_and_escapes() -> None:
    painter, _ = _painter({
        "box": ("VBoxModel", {"children": ["IPY_MODEL_text"]}),
        "text": ("TextModel", {"description": "拼音", "value": '"><script>', "placeholder": "wo"}),
    })  # fmt: skip
    page = painter.page(_view("box"))
    assert "可以输入：网页版没有 Python，这里显示的是初始状态" in page
    assert "<script>" not in page and "&quot;&gt;&lt;script&gt;" in page


def test_static_widget_refuses_what_it_cannot_draw() -> None:
    painter, _ = _painter({"x": ("ColorPickerModel", {"value": "#fff"})})
    with pytest.raises(ExtensionError, match="ColorPickerModel"):
        painter.page(_view("x"))
    with pytest.raises(ExtensionError, match="no notebook saved its state"):
        painter.page(_view("missing"))


def test_theme_macros_copy_only_drops_fontawesome() -> None:
    import pydata_sphinx_theme

    theme = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme"
    original = (theme / "static" / "webpack-macros.html").read_text(encoding="utf-8")
    ours = (Path(__file__).resolve().parents[1] / "book" / "_templates" / "static"
            / "webpack-macros.html").read_text(encoding="utf-8")  # fmt: skip
    body = ours.split("-#}\n", 1)[1]
    dropped = [line for line in original.splitlines() if line not in body.splitlines()]
    assert len(dropped) == 2 and "fontawesome.js" in dropped[1], dropped


def test_glossary_avoided_names_are_searched_as_the_term(tmp_path: Path) -> None:
    path = _notebook(
        tmp_path,
        "## 术语表\n\n| 中文 | English | 首次出现 | 不用 |\n|---|---|---|---|\n"
        "| 定时采样 | scheduled sampling | 第 6 章 | 计划采样、调度采样 |\n"
        "| 30 秒速记 | 30-second summary | 第 0 章 | 30 秒小结 / 30 秒总结 |\n"
        "| 键 | key | 第 2 章 | |\n"
        "| 教师强制 | teacher forcing | 第 1 章 | teacher forcing、键 |\n"
        "| 层归一化 / 批归一化 | layer normalization / batch normalization | 第 3 章 "
        "| 层标准化、批标准化 |",
    )
    rows = search_terms.glossary_rows(path)
    assert rows[0].avoided == ("计划采样", "调度采样") and rows[2].avoided == ()
    assert search_terms.synonyms(rows) == {
        "计划采样": "定时采样",
        "调度采样": "定时采样",
        "30 秒小结": "30 秒速记",
        "30 秒总结": "30 秒速记",
        "层标准化": "层归一化",
        "批标准化": "批归一化",
    }
    twice = rows + [search_terms.GlossaryRow(("计划",), (), "plan", "第 1 章", ("计划采样",))]
    with pytest.raises(ExtensionError, match="计划采样"):
        search_terms.synonyms(twice)


def test_plain_math_reads_as_text() -> None:
    assert search_terms.plain_math(r"\(\sqrt{d_k}\)") == "√d_k"
    assert search_terms.plain_math(r"\(Q K^\top\)") == "Q K^ᵀ"
    assert search_terms.plain_math(
        r"\[\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right)V\]"
    ) == ("softmax(QK^ᵀ√d_k)V")


def test_page_texts_mark_where_each_section_starts(tmp_path: Path) -> None:
    page = tmp_path / "notebooks" / "02_x.html"
    page.parent.mkdir()
    page.write_text(
        '<article class="bd-article"><section id="top"><h1>标题</h1><p>开头 <span class="math">\\(d_k\\)</span>。</p>'
        '<section id="sub"><h2>小节</h2><p>这里是小节。</p></section></section></article>',
        encoding="utf-8",
    )
    texts, anchors = search_terms.page_texts(tmp_path)
    text = texts["notebooks/02_x.html"]
    assert "\\(" not in text and "d_k" in text
    starts = anchors["notebooks/02_x.html"]
    assert text[starts["top"] :].startswith("标题") and text[starts["sub"] :].startswith("小节")
