"""The training state of ``fit(..., state_path=...)``: what it writes, and how a run continues
from it exactly where it stopped.

A state file is a lecturekit checkpoint (:func:`load_checkpoint` reads its model) with one
more entry, ``"fit_state"``: the position (step, epoch, batches of that epoch already trained
on), Adam's moments, the random number generators (torch's CPU generator, the CUDA one when
training on a GPU, scheduled sampling's, the data loader's) as they were at the start of the
epoch and after the last step, the history and the seconds trained. (Python's ``random`` is
not among them: ``fit`` does not use it, and the bucketing sampler draws from a
``random.Random`` of its own, seeded by the seed and the epoch.) About 3 times the float32
weights: 57 MB for the capstone's sentence model (4.8 M parameters), plus about 60 bytes of
history per step. It is written by the
checkpoint writer (atomically, read back, with a SHA-256 checksum) and refused, with what is
wrong and what to do, when it is damaged or belongs to another model, other settings, other
data or another optimiser; a refused file is never overwritten.

Continuing: the model, Adam and the history are restored; the epoch's data order is rebuilt
by restoring the generators of the epoch's start and reading past the batches already
trained on; then the generators of the last step are restored. The next step is then the one
an uninterrupted run would take, bit for bit on the same machine and thread count.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import torch

from lecturekit.training import _checkpoint_guards as guards
from lecturekit.training import checkpoint
from lecturekit.training.checks import check_weights
from lecturekit.training.history import History

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from lecturekit.training.loop import _Run

FIX = "delete the file to train from scratch, or pass another state_path"
# TrainConfig fields that do not change the steps: a run may continue with other values
# (a larger budget, another evaluation interval, another device)
FREE_SETTINGS = (
    "epochs",
    "max_steps",
    "max_seconds",
    "target_exact_match",
    "eval_every",
    "valid_decode_max_len",
    "progress",
    "device",
)
# model configuration fields that change how the model computes, not what
FREE_MODEL_FIELDS = ("attention_backend", "layernorm_backend")
_ADAM_STATE = {"step", "exp_avg", "exp_avg_sq"}
_STATE_ENTRIES = {
    "step",
    "epoch",
    "batch",
    "optimizer",
    "epoch_rng",
    "rng",
    "steps_per_epoch",
    "history",
    "seconds",
}


@dataclass
class Position:
    """Where training is: ``step`` updates done, in epoch ``epoch`` (from 0), of whose
    batches ``batch`` were trained on."""

    step: int = 0
    epoch: int = 0
    batch: int = 0


class StateFile:
    """``fit``'s state at ``path`` (None: no state): :meth:`begin` restores a saved one,
    :meth:`enter_epoch` gives each epoch's batches, :meth:`save` writes every ``save_every``
    steps (None: only at the end) and at the end."""

    def __init__(
        self,
        path: str | os.PathLike | None,
        save_every: int | None,
        run: _Run,
        train_batches: Iterable[Any],
        steps_per_epoch: int | None,
    ) -> None:
        self.path = None if path is None else guards.check_save_path(path)
        self.where = f"state_path: {str(self.path)!r}"
        if self.path is not None and run.dist.enabled:
            raise ValueError(
                "state_path is not supported under torchrun (each process has its own random "
                "generators); train in one process, or leave state_path=None"
            )
        self.save_every = save_every
        self.run = run
        self.generators = _generators(train_batches)
        self.steps_per_epoch = steps_per_epoch
        self.epoch_rng: dict[str, Any] = {}
        self.resume: dict[str, Any] | None = None
        self.saved_step = 0

    def begin(self) -> Position:
        """The position to start from: the saved one (model, Adam, history and run restored)
        or step 0 when there is no state file yet."""
        if self.path is None or not self.path.exists():
            return Position()
        payload = self._read()
        state = payload["fit_state"]
        run = self.run
        run.model.load_state_dict(payload["state_dict"])
        adam = run.optimizer.state_dict()
        run.optimizer.load_state_dict(
            {"state": state["optimizer"], "param_groups": adam["param_groups"]}
        )
        run.history = History(**state["history"])
        run.seconds_before = state["seconds"]
        self.resume = state
        self.saved_step = state["step"]
        return Position(state["step"], state["epoch"], state["batch"])

    def enter_epoch(self, epoch: int, train_batches: Iterable[Any]) -> tuple[Iterator[Any], int]:
        """The batches of ``epoch`` still to train on, and how many were trained on before."""
        state, self.resume = self.resume, None
        if state is None:
            if self.path is not None:
                self.epoch_rng = self._rng()
            return iter(train_batches), 0
        self.epoch_rng = state["epoch_rng"]
        self._set_rng(self.epoch_rng)
        batches = iter(train_batches)
        for done in range(state["batch"]):
            if next(batches, None) is None:
                raise ValueError(
                    f"{self.where}: the state trained on {state['batch']} batches of epoch "
                    f"{epoch + 1}, but train yields {done}: it is not the data the state was "
                    f"trained on; pass that data, or {FIX}"
                )
        self._set_rng(state["rng"])
        return batches, state["batch"]

    def save(self, at: Position, *, final: bool = False) -> None:
        """Write the state after step ``at.step``: every ``save_every`` steps, and at the end
        (``final``) unless nothing was trained since the last write. Non-finite weights are
        refused before anything is written (the previous state stays)."""
        due = final or (self.save_every is not None and at.step % self.save_every == 0)
        if self.path is None or not due or at.step == self.saved_step:
            return
        run = self.run
        check_weights(run.model.parameters(), at.step, run.history.lr[-1])
        payload = checkpoint._payload(run.model, train_config=run.config)
        payload["fit_state"] = {
            "step": at.step,
            "epoch": at.epoch,
            "batch": at.batch,
            "optimizer": run.optimizer.state_dict()["state"],
            # at an epoch's end, the next epoch starts from the generators as they are now
            "epoch_rng": self.epoch_rng if at.batch else self._rng(),
            "rng": self._rng(),
            "steps_per_epoch": self.steps_per_epoch,
            "history": run.history.to_dict(),
            "seconds": run.seconds_before + run.stopping.elapsed(),
        }
        checkpoint._write_payload(payload, self.path)
        self.saved_step = at.step

    # ----------------------------------------------------------------------------------

    def _rng(self) -> dict[str, Any]:
        device = self.run.device
        return {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
            "scheduled_sampling": self.run.ss_generator.get_state(),
            "data": [g.get_state() for g in self.generators],
        }

    def _set_rng(self, saved: dict[str, Any]) -> None:
        device = self.run.device
        torch.set_rng_state(saved["torch"])
        if saved["cuda"] is not None and device.type == "cuda":
            torch.cuda.set_rng_state(saved["cuda"], device)
        generator = self.run.ss_generator
        if saved["scheduled_sampling"].shape == generator.get_state().shape:  # same device
            generator.set_state(saved["scheduled_sampling"])
        for g, state in zip(self.generators, saved["data"], strict=True):
            g.set_state(state)

    def _read(self) -> dict[str, Any]:
        """The checked payload of the state file, or a ValueError saying what is wrong."""
        assert self.path is not None
        try:
            payload = checkpoint._read_payload(self.path, verify=False)
        except ValueError as err:
            reason = str(err).removeprefix(f"path: {str(self.path)!r}").lstrip(" :")
            raise ValueError(
                f"{self.where} is damaged or is not a training state ({reason}); {FIX}"
            ) from err
        if "checksum" not in payload or payload["checksum"] != checkpoint._checksum(payload):
            raise ValueError(
                f"{self.where} fails its checksum (or has none): the file was damaged after "
                f"it was written (a partial copy, flipped bytes); copy it again, or {FIX}"
            )
        state = payload.get("fit_state")
        if not isinstance(state, dict):
            raise ValueError(
                f"{self.where} is a model checkpoint without a training state (written by "
                f"save_checkpoint?); it is left as it is: {FIX}"
            )
        self._check_same_run(payload)
        self._check_state(state)
        guards.check_weights(self.run.model.state_dict(), payload["state_dict"], self.where)
        return payload

    def _check_same_run(self, payload: dict[str, Any]) -> None:
        run = self.run
        for what, saved, current, free in (
            ("model", payload["model_config"], run.model.config.to_dict(), FREE_MODEL_FIELDS),
            (
                "training settings",
                payload["train_config"] or {},
                run.config.to_dict(),
                FREE_SETTINGS,
            ),
        ):
            differ = [
                f"{k}: {saved.get(k)!r} in the state, {current.get(k)!r} here"
                for k in sorted(set(saved) | set(current))
                if k not in free and saved.get(k) != checkpoint._plain(current.get(k), k)
            ]
            if differ:
                raise ValueError(
                    f"{self.where} was written for another {what} ({'; '.join(differ[:3])}); "
                    f"continue with the same {what}, or {FIX}"
                )
        state = payload.get("fit_state") or {}
        if state.get("steps_per_epoch") != self.steps_per_epoch:
            raise ValueError(
                f"{self.where} was trained on data of {state.get('steps_per_epoch')} batches "
                f"per epoch, but train has {self.steps_per_epoch}; pass the same data, or {FIX}"
            )

    def _check_state(self, state: dict[str, Any]) -> None:
        """Every entry of the state has the type and shape this run needs."""
        damaged = f"{self.where}: the training state is damaged ({{}}); {FIX}"
        if missing := sorted(_STATE_ENTRIES - set(state)):
            raise ValueError(damaged.format(f"it has no {', '.join(map(repr, missing))}"))
        for key, kind in (("step", int), ("epoch", int), ("batch", int), ("seconds", float)):
            if type(state.get(key)) is not kind or state[key] < 0:
                raise ValueError(damaged.format(f"its {key!r} is {state.get(key)!r}"))
        history = state.get("history")
        names = {f.name for f in fields(History)}
        if not isinstance(history, dict) or set(history) != names:
            raise ValueError(damaged.format("its history is not a History"))
        if len(history["step"]) != state["step"]:
            raise ValueError(damaged.format(f"{len(history['step'])} steps of history"))
        for key in ("rng", "epoch_rng"):
            self._check_rng(state.get(key), damaged.format(f"its {key!r} is not this run's"))
        self._check_adam(state.get("optimizer"))

    def _check_rng(self, saved: Any, message: str) -> None:
        current = self._rng()
        if not isinstance(saved, dict) or set(saved) != set(current):
            raise ValueError(message)
        if not isinstance(saved["data"], list) or len(saved["data"]) != len(current["data"]):
            raise ValueError(message)
        pairs = [("torch", saved["torch"], current["torch"])]
        pairs += [("data", s, c) for s, c in zip(saved["data"], current["data"], strict=True)]
        pairs += [("scheduled_sampling", saved["scheduled_sampling"], None)]
        if saved["cuda"] is not None:
            pairs.append(("cuda", saved["cuda"], None))
        for _, value, like in pairs:
            if not isinstance(value, torch.Tensor) or value.dtype != torch.uint8:
                raise ValueError(message)
            if like is not None and value.shape != like.shape:
                raise ValueError(message)

    def _check_adam(self, saved: Any) -> None:
        """Adam's moments, one entry per parameter, each of that parameter's shape."""
        parameters = list(self.run.model.parameters())
        another = (
            f"{self.where} holds the state of another optimiser or model ({{}}); fit trains "
            f"with Adam: {FIX}"
        )
        if not isinstance(saved, dict) or not set(saved) <= set(range(len(parameters))):
            raise ValueError(another.format("its parameters do not match"))
        for index, entry in saved.items():
            if not isinstance(entry, dict) or set(entry) != _ADAM_STATE:
                keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
                raise ValueError(another.format(f"parameter {index} has state {keys}"))
            shape = parameters[index].shape
            for key in ("exp_avg", "exp_avg_sq"):
                value = entry[key]
                if not isinstance(value, torch.Tensor) or value.shape != shape:
                    raise ValueError(
                        another.format(f"parameter {index}'s {key} is not {tuple(shape)}")
                    )
            if not isinstance(entry["step"], torch.Tensor) or entry["step"].numel() != 1:
                raise ValueError(another.format(f"parameter {index}'s step is not a number"))


def _generators(train_batches: Iterable[Any]) -> list[torch.Generator]:
    """The generators that decide a data loader's order (its own, its sampler's)."""
    found: dict[int, torch.Generator] = {}
    for owner in (train_batches, getattr(train_batches, "sampler", None)):
        generator = getattr(owner, "generator", None)
        if isinstance(generator, torch.Generator):
            found.setdefault(id(generator), generator)
    return list(found.values())
