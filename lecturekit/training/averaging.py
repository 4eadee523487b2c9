"""Checkpoint averaging (Vaswani et al., 2017, section 6.1): keep the weights of the last few
checkpoints of one training run and use their parameter-wise mean as the final model.

``fit(model, train, valid, config, on_step=KeepLastCheckpoints(every=50, keep=5))`` copies
the weights every 50 steps and keeps the newest 5 copies; ``average_checkpoints`` averages
them. The paper's base models average the last 5 checkpoints (written every 10 minutes),
its big models the last 20.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from lecturekit._common import check_int

__all__ = ["KeepLastCheckpoints", "average_checkpoints"]


@dataclass(frozen=True)
class KeepLastCheckpoints:
    """A ``fit(..., on_step=...)`` callback: every ``every`` steps, copy the model's weights;
    keep the newest ``keep`` copies.

    Its settings are frozen and validated once, when created; ``states`` is the one dict it
    fills as training runs.

    Attributes:
        every: copy at steps ``every, 2 * every, ...`` (steps count from 1).
        keep: how many copies to keep (the oldest is dropped first).
        states: step -> state dict (detached CPU copies), oldest first.
    """

    every: int
    keep: int
    states: dict[int, dict[str, Tensor]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_int("every", self.every, minimum=1)
        check_int("keep", self.keep, minimum=1)

    def __call__(self, step: int, model: nn.Module) -> None:
        """Copy ``model``'s weights if ``step`` is a multiple of ``every``."""
        if step % self.every:
            return
        self.states[step] = {
            name: value.detach().to("cpu", copy=True) for name, value in model.state_dict().items()
        }
        while len(self.states) > self.keep:
            del self.states[min(self.states)]


def average_checkpoints(states: Sequence[Mapping[str, Tensor]]) -> dict[str, Tensor]:
    """The parameter-wise mean of ``states``, state dicts of one model.

    Args:
        states: at least one state dict; all with the same names and shapes.

    Returns:
        A state dict: each floating-point tensor is the mean of its copies (summed in
        float64, returned in its own dtype); any other tensor (an integer buffer) must be the
        same in every copy and is returned as is.
    """
    if isinstance(states, Mapping) or len(states) == 0:
        raise ValueError("states must be a non-empty list of state dicts, e.g. [sd1, sd2]")
    for i, state in enumerate(states):
        if not isinstance(state, Mapping):
            raise TypeError(
                f"states[{i}] must be a state dict (model.state_dict()), got {type(state).__name__}"
            )
    names = list(states[0])
    for i, state in enumerate(states[1:], start=1):
        if sorted(state) != sorted(names):
            differ = sorted(set(state) ^ set(names))
            raise ValueError(f"states[{i}] has other parameter names than states[0]: {differ}")
    averaged: dict[str, Tensor] = {}
    for name in names:
        copies = [state[name] for state in states]
        shapes = {tuple(c.shape) for c in copies}
        if len(shapes) != 1:
            raise ValueError(f"states: {name!r} has different shapes {sorted(shapes)}")
        first = copies[0]
        if first.is_floating_point():
            total = torch.stack([c.detach().to("cpu", torch.float64) for c in copies]).sum(0)
            averaged[name] = (total / len(copies)).to(first.dtype)
        elif all(torch.equal(c, first) for c in copies):
            averaged[name] = first.detach().clone()
        else:
            raise ValueError(f"states: the non-float tensor {name!r} differs between copies")
    return averaged
