"""Checked once, at the door: the public entry points check their input, the package's own
calls inside a forward pass or a decoding loop do not check it again.

Check functions are every function of ``lecturekit/_common.py`` and every function of
lecturekit named ``check*`` / ``_check*``; ``cProfile`` counts their calls.
"""

from __future__ import annotations

import cProfile
import inspect
import pstats
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode

import lecturekit
from lecturekit import Transformer, TransformerConfig
from lecturekit.decoding import beam_search, greedy
from lecturekit.model.layers import Decoder, DecoderLayer

PACKAGE = str(Path(lecturekit.__file__).parent)
MAX_CHECK_CALLS = 20  # per forward pass of a 6+6 model (176 before checks moved to the door)


def _is_check(path: str, name: str) -> bool:
    """A check function of lecturekit (comprehensions inside one are not calls of their own)."""
    if not path.startswith(PACKAGE) or name.startswith("<"):
        return False
    return path.endswith("_common.py") or name.startswith(("check", "_check"))


def check_calls(run: Callable[[], Any]) -> int:
    """Calls of lecturekit's check functions while ``run()`` runs."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        run()
    finally:
        profile.disable()
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    return sum(calls for (path, _, name), (_, calls, *_) in stats.items() if _is_check(path, name))


class ValidationSyncs(TorchFunctionMode):
    """Records the tensor reads that copy a value to the host (``bool(t)``, ``float(t)``,
    ``t.item()``, ...) and the value scans (``amax``) made from inside a check function."""

    READS = {"__bool__", "__float__", "__int__", "item", "tolist"}

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.scans = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = getattr(func, "__name__", "")
        if (name in self.READS or name == "amax") and self._in_check():
            if name == "amax":
                self.scans += 1
            else:
                self.reads.append(name)
        return func(*args, **(kwargs or {}))

    @staticmethod
    def _in_check() -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            if _is_check(frame.f_code.co_filename, frame.f_code.co_name):
                return True
            frame = frame.f_back
        return False


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(
        src_vocab_size=23, tgt_vocab_size=29, d_model=16, n_heads=2, d_ff=32, dropout=0.0
    )
    assert (config.n_encoder_layers, config.n_decoder_layers) == (6, 6)
    return Transformer(config).eval()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(3, 23, (2, 7), generator=generator)
    src[0, 5:] = 0  # padding
    return src, torch.randint(3, 29, (2, 6), generator=generator)


FLOAT_CAUSAL = torch.zeros(6, 6).masked_fill(torch.ones(6, 6).triu(1).bool(), float("-inf"))


@pytest.mark.parametrize(
    "masks",
    [
        dict(),
        dict(src_key_padding_mask=batch()[0] == 0),
        dict(tgt_mask=FLOAT_CAUSAL),
        dict(tgt_mask=FLOAT_CAUSAL, src_key_padding_mask=batch()[0] == 0),
    ],
    ids=["derived-padding", "bool-padding", "float-tgt-mask", "both"],
)
def test_a_forward_pass_makes_at_most_20_check_calls(model, masks):
    src, tgt = batch()
    with torch.no_grad():
        assert check_calls(lambda: model(src, tgt, **masks)) <= MAX_CHECK_CALLS


def test_a_float_mask_is_scanned_once_per_forward_pass(model):
    """The value scan of a float mask (a device-to-host copy on a GPU) runs once, at the door:
    19 times before. The other reads from checks are the token-id range checks of src and tgt
    (an id outside the vocabulary would fail on a GPU with a device-side assert)."""
    src, tgt = batch()
    with torch.no_grad(), ValidationSyncs() as syncs:
        model(src, tgt, tgt_mask=FLOAT_CAUSAL)
    assert syncs.scans == 1
    assert sorted(syncs.reads) == ["__bool__", "__bool__", "__float__"]


def test_the_model_still_refuses_a_bad_float_mask_at_the_door(model):
    src, tgt = batch()
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="tgt_mask holds"):
            model(src, tgt, tgt_mask=torch.full((6, 6), bad))


def test_decode_step_checks_once_and_nothing_inside(model):
    src, tgt = batch()
    with torch.no_grad():
        cache = model.init_cache(model.encode(src))
        checked = check_calls(lambda: model.decode_step(tgt[:, 0], cache))
        unchecked = check_calls(lambda: model.decode_step(tgt[:, 1], cache, validate=False))
    assert checked <= 8 and unchecked == 0


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("strategy", ["greedy", "beam_search"])
def test_decoding_checks_once_per_call_not_per_token(model, strategy, use_cache):
    """A decode of 12 tokens makes as many check calls as one of 3 tokens."""
    src, _ = batch()

    def decode(steps: int) -> None:
        if strategy == "greedy":
            greedy(model, src, steps, min_len=steps, use_cache=use_cache)
        else:
            beam_search(model, src, beam_size=2, max_len=steps, min_len=steps, use_cache=use_cache)

    assert check_calls(lambda: decode(3)) == check_calls(lambda: decode(12))


def test_layers_called_directly_still_check_their_input():
    """The door of a layer or stack used alone: its first layer checks (through its attention)."""
    from lecturekit import LayerConfig

    decoder = Decoder(LayerConfig(d_model=8, n_heads=2, d_ff=16, dropout=0.0), 3)
    x, memory = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(B, Tk\)=\(2, 5\)"):
        decoder(x, memory, memory_key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="memory_is_causal must be False"):
        decoder.layers[1](x, memory, memory_mask=torch.zeros(4, 5), memory_is_causal=True)
    assert check_calls(lambda: decoder(x, memory, validate=False)) == 0
    assert 0 < check_calls(lambda: decoder(x, memory)) <= 10  # its first layer's checks


def test_the_layer_chapter_4_prints_has_no_cache():
    """Chapter 4 prints DecoderLayer's source: the decoder of p22-p43, no KV cache in it."""
    assert "cache" not in inspect.getsource(DecoderLayer)
    for forward in (DecoderLayer.forward, Decoder.forward):
        assert "cache" not in inspect.signature(forward).parameters


def test_submodules_built_from_a_config_do_not_check_it_again(model):
    """Building a model checks its TransformerConfig (and the LayerConfig it derives) once;
    the attention, feed-forward and norm modules built from it do not check the values again."""
    config = model.config
    assert check_calls(lambda: Transformer(config)) <= 40  # 216 before
