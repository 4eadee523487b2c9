"""The tiny Transformer the tests build, and the one-thread context they run it in.

conftest.py serves both as fixtures (``make_tiny_model``, ``tiny_model``, ``one_torch_thread``);
code that runs outside pytest's fixtures, such as the worker processes that
tests/test_distributed.py spawns, imports them from here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lecturekit import Transformer

# small enough for any test; every size can be overridden
TINY_MODEL: dict[str, Any] = dict(
    src_vocab_size=13,
    tgt_vocab_size=11,
    d_model=16,
    n_heads=2,
    d_ff=32,
    n_encoder_layers=1,
    n_decoder_layers=1,
    dropout=0.0,
    max_len=20,
)


def build_tiny_model(seed: int = 0, **overrides: Any) -> Transformer:
    """A tiny ``lecturekit.Transformer`` seeded with ``seed``, in eval mode; ``overrides``
    replace fields of its ``TransformerConfig``."""
    import torch

    from lecturekit import Transformer, TransformerConfig

    torch.manual_seed(seed)
    return Transformer(TransformerConfig(**{**TINY_MODEL, **overrides})).eval()


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Compute on one torch thread inside the block: tiny models are faster so, and parallel
    test processes do not oversubscribe the cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
