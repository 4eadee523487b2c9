"""Support for the book itself: ``plotting`` (figures, CJK font), ``widgets`` (interactive
explorers) and ``environment`` (the set-up chapter's version and hardware report)."""

from lecturekit._lazy import attach

__getattr__, __dir__ = attach(__name__)
