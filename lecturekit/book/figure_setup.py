"""What every figure of the book needs in a notebook: Chinese labels and sharp pixels.

Importing this module (``lecturekit.book.plotting`` does) registers a CJK font so that Chinese
labels render: Noto Sans CJK SC, shipped by the ``mplfonts`` package (a normal dependency,
installed from PyPI; nothing is downloaded at run time). Latin text keeps matplotlib's default
DejaVu Sans; characters that DejaVu lacks fall back to Noto Sans CJK SC (matplotlib >= 3.6
falls back glyph by glyph along ``rcParams["font.family"]``). In a notebook it also draws
figures at twice their pixel size (:func:`setup_sharp_figures`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib import font_manager

__all__ = ["CJK_FONT_FILE", "CJK_FONT_NAME", "cjk_font_path", "setup_fonts", "setup_sharp_figures"]

CJK_FONT_FILE = "NotoSansCJKsc-Regular.otf"


def cjk_font_path() -> Path:
    """Path of the CJK font file shipped by ``mplfonts``."""
    import mplfonts

    path = Path(mplfonts.__file__).parent / "fonts" / CJK_FONT_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{CJK_FONT_FILE} not found in the mplfonts package at {path.parent}; "
            "reinstall it with `pip install --force-reinstall mplfonts`"
        )
    return path


def setup_fonts() -> str:
    """Register the CJK font with matplotlib and make it the fallback; returns its name.

    Idempotent; called when this module is imported.
    """
    path = cjk_font_path()
    if not any(Path(f.fname) == path for f in font_manager.fontManager.ttflist):
        font_manager.fontManager.addfont(str(path))
    name = font_manager.FontProperties(fname=str(path)).get_name()
    # glyph-by-glyph fallback happens along font.family, not inside a generic family list
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", name]
    sans = [f for f in matplotlib.rcParams["font.sans-serif"] if f != name]
    matplotlib.rcParams["font.sans-serif"] = [name, *sans]
    return name


CJK_FONT_NAME = setup_fonts()


def setup_sharp_figures() -> bool:
    """In a notebook, show figures as PNG drawn at twice their pixel size ("retina").

    The output records the figure's size on the page (half its pixels), so a figure keeps
    its size but stays sharp on screens with 2 or 3 device pixels per CSS pixel (phones,
    most laptops) and in the book's figure viewer. Returns whether it ran in an IPython
    kernel (elsewhere it does nothing). Idempotent; called when this module is imported.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # matplotlib without IPython: no notebook to set up
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return False
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("retina")
    return True


setup_sharp_figures()
