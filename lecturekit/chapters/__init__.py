"""Each chapter's experiments, one module per chapter (per idea when a chapter has two).

Named like ``lecturekit.exercises``: ``chNN_<idea>``. A chapter's notebook imports its module,
e.g. ``from lecturekit.chapters.ch03_stacks import train_regression``. The experiments use the
package's model, attention and training pieces, not their own copies.
"""

from lecturekit._lazy import attach

__getattr__, __dir__ = attach(__name__)
