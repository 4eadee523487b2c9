"""lecturekit: the Transformer of Hung-yi Lee's ML 2021 lecture, as an importable package.

Every chapter notebook of the course imports from here. The folders are the parts of the
course (the README's "package map" lists them with their chapters and slide pages):

* ``lecturekit.model``: the model, read top to bottom in chapter order (config, masks,
  attention, layers, cache, transformer, params, interop);
* ``lecturekit.kernels``: the Triton GPU kernels and the backend dispatch (kernels chapter);
* ``lecturekit.training``: the training loop and its pieces (losses, schedules, scheduled
  sampling, checkpoints, distributed, metrics);
* ``lecturekit.decoding``: greedy search, sampling, beam search, the step protocol;
* ``lecturekit.chapters``: each chapter's experiments, one module per chapter (``ch03_stacks``);
* ``lecturekit.book``: plotting, widgets and the environment report of the book;
* ``lecturekit.data``, ``lecturekit.exercises``, ``lecturekit.pretrained``.

Importing the package is cheap: submodules and names are resolved lazily (PEP 562), so
``import lecturekit`` loads neither torch nor triton until a name that needs them is used.
The public names of ``model``, ``training``, ``decoding`` and ``data`` are also available
here (``lecturekit.Transformer``, ``lecturekit.fit``, ``lecturekit.greedy``, ...).
"""

from __future__ import annotations

from lecturekit._lazy import attach

__version__ = "0.1.0"

# the subpackages whose public names are lifted to ``lecturekit.<name>``
_LIFT = ("model", "training", "decoding", "data")

__getattr__, __dir__ = attach(__name__, _LIFT)
