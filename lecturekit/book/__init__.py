"""Support for the book itself: ``plotting`` (figures), ``figure_setup`` (CJK font, 2x pixels),
``widgets`` (interactive explorers), ``tables`` (result tables shown as HTML tables) and
``environment`` (the set-up chapter's version and hardware report)."""

from typing import TYPE_CHECKING

from lecturekit._lazy import attach

# Editors and type checkers read these imports; at run time each name is imported on first
# use (PEP 562). tests/test_package.py keeps this list equal to what attach() serves.
if TYPE_CHECKING:
    from lecturekit.book import decoding_plots as decoding_plots
    from lecturekit.book import environment as environment
    from lecturekit.book import figure_setup as figure_setup
    from lecturekit.book import plotting as plotting
    from lecturekit.book import tables as tables
    from lecturekit.book import widgets as widgets
    from lecturekit.book.decoding_plots import plot_beam_tree as plot_beam_tree
    from lecturekit.book.decoding_plots import plot_error_by_position as plot_error_by_position
    from lecturekit.book.environment import PACKAGES as PACKAGES
    from lecturekit.book.environment import EnvironmentReport as EnvironmentReport
    from lecturekit.book.environment import collect as collect
    from lecturekit.book.environment import package_version as package_version
    from lecturekit.book.environment import report as report
    from lecturekit.book.figure_setup import CJK_FONT_FILE as CJK_FONT_FILE
    from lecturekit.book.figure_setup import CJK_FONT_NAME as CJK_FONT_NAME
    from lecturekit.book.figure_setup import cjk_font_path as cjk_font_path
    from lecturekit.book.figure_setup import setup_fonts as setup_fonts
    from lecturekit.book.figure_setup import setup_sharp_figures as setup_sharp_figures
    from lecturekit.book.plotting import plot_attention as plot_attention
    from lecturekit.book.plotting import plot_attention_heads as plot_attention_heads
    from lecturekit.book.plotting import plot_history as plot_history
    from lecturekit.book.plotting import plot_mask as plot_mask
    from lecturekit.book.plotting import plot_positional_encoding as plot_positional_encoding
    from lecturekit.book.plotting import plot_token_distribution as plot_token_distribution
    from lecturekit.book.plotting import plot_training as plot_training
    from lecturekit.book.tables import Table as Table
    from lecturekit.book.widgets import DEFAULT_SAMPLING_SETTINGS as DEFAULT_SAMPLING_SETTINGS
    from lecturekit.book.widgets import attention_masks as attention_masks
    from lecturekit.book.widgets import explore_attention as explore_attention
    from lecturekit.book.widgets import explore_masks as explore_masks
    from lecturekit.book.widgets import explore_sampling as explore_sampling
    from lecturekit.book.widgets import sampling_distribution as sampling_distribution
else:
    __getattr__, __dir__ = attach(__name__)
