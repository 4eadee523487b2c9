"""Training (chapter 5, slides p44-p46): the loop ``fit`` and its pieces.

``loop`` (``fit`` and its steps: one update, evaluation, stopping), ``losses``,
``schedules`` (learning rates), ``scheduled_sampling`` (chapter 6, p57), ``checkpoint``,
``distributed`` (DistributedDataParallel under torchrun), ``metrics``, ``averaging``
(checkpoint averaging, paper section 6.1).
Names resolve lazily; every module's ``__all__`` is available here.
"""

from lecturekit._lazy import attach

__getattr__, __dir__ = attach(__name__)
