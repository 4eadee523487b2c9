"""The cases of the hostile-input campaigns (issues #28 and #45), run by ``benchmarks/hostile_inputs.py``.

Each case is one careless or hostile call of the public API on a tiny model. ``error(...)``
expects an exception whose message names one of the given words (the argument, or the fix);
``result(...)`` expects a return value for which the given property holds (a clear error
naming one of the words is accepted too). ``survive=True`` cases hand something that kills
or hangs a process to an API that promises to survive it (the exercise checker).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAN, INF = float("nan"), float("inf")
LN = "encoder.layernorm"


@dataclass(frozen=True)
class Case:
    """One call: ``run()`` is the call; ``words``: a clear error names one of them;
    ``prop``: None if an error is expected, else the property the result must have."""

    name: str
    area: str
    run: Callable[[], Any]
    words: tuple[str, ...]
    prop: Callable[[Any], bool] | None = None
    timeout: float | None = None


CASES: dict[str, Case] = {}
AREAS = (
    "model", "training", "decoding", "checkpoints", "data", "exercises", "kernels", "capstone",
    "lab",
)  # fmt: skip


def error(area: str, name: str, run: Callable[[], Any], *words: str, timeout: float | None = None):
    """Register a case that must raise an exception naming one of ``words``."""
    assert area in AREAS and name not in CASES, name
    CASES[name] = Case(name, area, run, words or (name,), None, timeout)


def result(
    area: str,
    name: str,
    run: Callable[[], Any],
    prop: Callable[[Any], bool],
    *words: str,
    timeout: float | None = None,
) -> None:
    """Register a case that must return a value with ``prop`` (or raise naming ``words``)."""
    assert area in AREAS and name not in CASES, name
    CASES[name] = Case(name, area, run, words, prop, timeout)


# ---------------------------------------------------------------------------- helpers
TINY = dict(
    src_vocab_size=13, tgt_vocab_size=11, d_model=16, n_heads=2, d_ff=32,
    n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=20,
)  # fmt: skip
PAIRS = [([4, 5, 6, 7][: 1 + i % 4], [4, 5, 6][: 1 + i % 3]) for i in range(8)]


def tiny(**overrides: Any):
    import torch

    from lecturekit import Transformer, TransformerConfig

    torch.manual_seed(0)
    return Transformer(TransformerConfig(**{**TINY, **overrides})).eval()


def cfg(**overrides: Any):
    from lecturekit import TransformerConfig

    return TransformerConfig(**{**TINY, **overrides})


def tcfg(**overrides: Any):
    from lecturekit.training import TrainConfig

    base = dict(epochs=1, batch_size=4, progress=False, device="cpu", warmup_steps=4)
    return TrainConfig(**{**base, **overrides})


def fit(train: Any = PAIRS, valid: Any = None, **overrides: Any):
    from lecturekit.training import fit as _fit

    return _fit(tiny(), train, valid, tcfg(**overrides))


def src(*rows: list[int]):
    import torch

    return torch.tensor(list(rows) or [[4, 5, 6]])


def finite(x: Any) -> bool:
    import torch

    if isinstance(x, torch.Tensor):
        return bool(torch.isfinite(x.float()).all()) if x.is_floating_point() else True
    return math.isfinite(float(x))


def frozen(run: Callable[[], Any]) -> Callable[[], Any]:
    """Set a field after creation: must raise dataclasses.FrozenInstanceError."""

    def call() -> Any:
        import dataclasses

        try:
            run()
        except dataclasses.FrozenInstanceError as exc:
            raise ValueError(f"frozen: {exc}") from None
        return "assigned"

    return call


def tmp(name: str = "x.pt") -> Path:
    return Path(tempfile.mkdtemp(prefix="hostile-")) / name


def saved_tiny() -> Path:
    from lecturekit.training import save_checkpoint

    return save_checkpoint(tmp(), tiny())


def rewrite(edit: Callable[[dict], None]) -> Path:
    """A tiny model's checkpoint whose payload ``edit`` changed (checksum kept, now wrong)."""
    import torch

    path = saved_tiny()
    payload = torch.load(path, weights_only=True)
    edit(payload)
    torch.save(payload, path)
    return path


def load(path: Path, **kwargs: Any):
    from lecturekit.training import load_checkpoint

    return load_checkpoint(path, **kwargs)


def flipped(name: str) -> Callable[[], Any]:
    """Load a shipped model whose copy has 8 bytes flipped near the middle."""

    def call() -> Any:
        from lecturekit import pretrained

        data = bytearray(pretrained.checkpoint_path(name).read_bytes())
        middle = len(data) * 2 // 3
        for i in range(middle, middle + 8):
            data[i] ^= 0xFF
        path = tmp(f"{name}.pt")
        path.write_bytes(bytes(data))
        return load(path)

    return call


def check(answer: Any, exercise: str = LN, **kwargs: Any) -> Any:
    from lecturekit.exercises import check as _check

    return _check(exercise, answer, **{"time_limit": 3.0, **kwargs})


def is_false(r: Any) -> bool:
    return r is False or (hasattr(r, "__bool__") and not bool(r))


def kx(*shape: int):
    import torch

    torch.manual_seed(0)
    return torch.randn(*shape)


def fresh_cache(run: Callable[[Path], Any]) -> Callable[[], Any]:
    def call() -> Any:
        directory = Path(tempfile.mkdtemp(prefix="hostile-cache-"))
        os.environ["LECTUREKIT_CACHE"] = str(directory)
        return run(directory)

    return call


# the case list itself lives in the per-area modules below so that each stays short
from hostile import cases_a, cases_b, cases_c, cases_d  # noqa: E402, F401, I001
from hostile import cases_e, cases_f  # noqa: E402, F401, I001
from hostile import cases_engines  # noqa: E402, F401, I001
