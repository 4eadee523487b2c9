"""``TrainConfig``: everything ``fit`` needs besides the model and the data, and the small
default model and training settings of the toy tasks."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from lecturekit.model.config import TransformerConfig
from lecturekit.training.checks import check_train_config
from lecturekit.training.scheduled_sampling import ScheduledSampling

__all__ = ["TrainConfig", "small_config", "small_train_config"]


@dataclass(frozen=True)
class TrainConfig:
    """Everything :func:`fit` needs besides the model and the data.

    Frozen and validated once, when created (:func:`check_train_config`): change a field
    with ``dataclasses.replace(config, lr=...)``, which validates the new config again.

    Attributes:
        epochs: passes over the training data (ignored when ``max_steps`` is set; training
            stops earlier at ``max_seconds`` or ``target_exact_match``).
        batch_size: sentences per optimiser step (the *global* batch under torchrun);
            used when ``train`` is a list of pairs or a ``TaskData``.
        schedule: ``"noam"`` (warmup then inverse square root, :func:`noam_lr`),
            ``"cosine"`` (warmup then cosine decay to 0 at ``decay_steps``, :func:`cosine_lr`)
            or ``"constant"``.
        lr: the constant learning rate (``"constant"``), the peak rate (``"cosine"``).
        lr_factor: the ``"noam"`` schedule's ``factor``.
        warmup_steps: the warmup of ``"noam"`` and ``"cosine"``.
        decay_steps: the step at which ``"cosine"`` reaches 0 (required for it).
        betas, adam_eps, weight_decay: Adam settings (the paper's 0.9, 0.98, 1e-9).
        label_smoothing: the paper's 0.1.
        clip_grad_norm: max gradient norm (None = no clipping).
        seed: seeds data order and dropout; same seed, same machine: same losses.
        max_steps: train for exactly this many optimiser steps, as many epochs as needed
            (None = ``epochs`` epochs).
        max_seconds: stop after this many seconds of training (None or ``inf`` = no limit).
        target_exact_match: stop once validation exact match reaches it (None = never).
        eval_every: evaluate on ``valid`` every this many steps (None = once per epoch);
            training always ends with an evaluation.
        valid_decode_max_len: greedy-decoding length for exact match (None = longest
            validation target + 2).
        scheduled_sampling: a :class:`ScheduledSampling` to train with scheduled sampling.
        progress: show a tqdm progress bar (``tqdm.auto``: a widget in notebooks);
            False = quiet.
        device: ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda"``.
    """

    epochs: int = 10
    batch_size: int = 64
    schedule: str = "noam"
    lr: float = 1e-3
    lr_factor: float = 1.0
    warmup_steps: int = 400
    decay_steps: int | None = None
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_grad_norm: float | None = 1.0
    seed: int = 0
    max_steps: int | None = None
    max_seconds: float | None = None
    target_exact_match: float | None = None
    eval_every: int | None = None
    valid_decode_max_len: int | None = None
    scheduled_sampling: ScheduledSampling | None = None
    progress: bool = True
    device: str = "auto"

    def __post_init__(self) -> None:
        # the two conversions a frozen dataclass must do through object.__setattr__: a dict
        # from a checkpoint becomes its ScheduledSampling, a list of betas a tuple
        # (values the annotations do not admit, hence typed as plain objects here)
        sampling: object = self.scheduled_sampling
        if isinstance(sampling, dict):
            object.__setattr__(self, "scheduled_sampling", ScheduledSampling(**sampling))
        betas: object = self.betas
        if isinstance(betas, list):
            object.__setattr__(self, "betas", tuple(betas))
        check_train_config(self)  # every field's type and range, with the fix in the message

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (for checkpoints)."""
        return asdict(self)


def small_config(src_vocab_size: int, tgt_vocab_size: int, **overrides: Any) -> TransformerConfig:
    """The default small Transformer for the toy tasks (trains in about a minute on 2 CPU
    cores; tuned with ``benchmarks/toy_task.py``): d_model 64, 4 heads, d_ff 128, 2 encoder
    and 2 decoder layers, no dropout, Post-LN as in the paper. ``overrides`` replace fields.
    """
    fields_: dict[str, Any] = dict(
        d_model=64,
        n_heads=4,
        d_ff=128,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
        max_len=64,
    )
    fields_.update(overrides)
    return TransformerConfig(src_vocab_size, tgt_vocab_size, **fields_)


def small_train_config(**overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` that goes with :func:`small_config` (``overrides`` replace
    fields): batch 128, a budget of 500 steps, warmup 100 steps to a peak learning rate of
    0.006, then cosine decay to 0 at step 500 (the decay lets the weights settle instead of
    jittering around the optimum), the paper's label smoothing 0.1."""
    fields_: dict[str, Any] = dict(
        epochs=30,
        max_steps=500,
        batch_size=128,
        schedule="cosine",
        lr=6e-3,
        warmup_steps=100,
        decay_steps=500,
    )
    fields_.update(overrides)
    return TrainConfig(**fields_)
