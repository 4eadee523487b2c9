"""The Transformer a student reads next to the slides, one module per idea, in chapter order.

``config`` (sizes and switches) -> ``masks`` (what a query may not see) -> ``attention``
(scaled dot-product and multi-head attention, chapter 2) -> ``layers`` (positional
encodings, feed-forward, encoder and decoder layers and stacks, chapters 3-4) -> ``cache``
(keys/values kept while decoding) -> ``transformer`` (the ``Transformer``) -> ``params``
(parameter tables) -> ``interop`` (weights to and from ``torch.nn.Transformer``).
Names resolve lazily; every module's ``__all__`` is available here.
"""

from lecturekit._lazy import attach

__getattr__, __dir__ = attach(__name__)
