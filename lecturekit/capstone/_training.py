"""Training the capstone's sentence models in pieces: the pieces of ``fit`` behind
:func:`lecturekit.capstone.models.train_sentences` (its configuration, the validation-CER
hook, the history that is shipped, and for ``keep_best`` recipes the best weights so far)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lecturekit.capstone.engines import TransformerIME
from lecturekit.capstone.ngram import sentence_scores
from lecturekit.capstone.tagger import TaggerIME
from lecturekit.data.vocab import Vocab
from lecturekit.pretrained._files import read_payload
from lecturekit.training.checkpoint import _write_payload
from lecturekit.training.config import TrainConfig
from lecturekit.training.history import History
from lecturekit.training.loop import fit

Metric = Callable[[torch.nn.Module], dict[str, float]]
_FIX = "delete it and the training state, and train again"


def encoded(pairs: list[tuple[str, str]], src_vocab: Vocab, tgt_vocab: Vocab) -> list:
    # (syllable ids, character ids) of each clause: one of each per syllable
    return [
        (
            [src_vocab.token_to_id(s) for s in pinyin.split()],
            [tgt_vocab.token_to_id(c) for c in text],
        )
        for pinyin, text in pairs
    ]


def train_config(recipe: Any, end: int, max_minutes: float | None) -> TrainConfig:
    # the recipe's schedule, peak_lr * min(step / warmup, sqrt(warmup / step)), is the noam
    # schedule with factor peak_lr * sqrt(d_model * warmup)
    d_model = recipe.model["d_model"]
    return TrainConfig(
        batch_size=recipe.batch_size,
        schedule="noam",
        lr_factor=recipe.peak_lr * math.sqrt(d_model * recipe.warmup_steps),
        warmup_steps=recipe.warmup_steps,
        label_smoothing=recipe.label_smoothing,
        clip_grad_norm=1.0,
        seed=recipe.seed,
        max_steps=end,
        max_seconds=None if max_minutes is None else 60 * max_minutes,
        eval_every=recipe.eval_every,
        progress=False,
        device="cpu",
    )


def cer_metric(recipe: Any, pairs: list[tuple[str, str]], vocabs: tuple) -> Metric:
    # fit's metrics hook: the validation CER, greedy with the model's own EOS / argmax
    def metrics(model: torch.nn.Module) -> dict[str, float]:
        ime: TransformerIME | TaggerIME
        if recipe.kind == "at":
            ime = TransformerIME(model, *vocabs, beam_size=1)
            ime._extra_steps = 1  # the shipped histories were measured so
        else:
            ime = TaggerIME(model, *vocabs)
        answers = ime.candidates([p for p, _ in pairs], 1)
        s = sentence_scores(answers, [t for _, t in pairs], k=1)
        return {"cer": float(s["edits"].sum() / s["chars"].sum())}

    return metrics


def shipped_history(history: History) -> dict[str, list]:
    # the shipped files' history: per evaluation, the mean training loss of the steps since
    # the last one and the validation CER
    loss, out = history.loss, {"step": [], "train_loss": [], "valid_cer": []}
    last = 0
    for step, cer in zip(history.eval_step, history.metrics.get("cer", []), strict=True):
        out["step"].append(step)
        out["train_loss"].append(round(sum(loss[last:step]) / (step - last), 5))
        out["valid_cer"].append(round(cer, 5))
        last = step
    return out


def fit_piece(
    recipe: Any,
    model: torch.nn.Module,
    train: list,
    path: Path,
    end: int,
    max_minutes: float | None,
    metric: Metric,
) -> History:
    # One piece of fit. A keep_best recipe's piece stops at a history point (fit's time limit
    # could stop between two, at a point the next piece drops), so that the best weights
    # always belong to a step of the history: it runs to the next point until time is up.
    def run(stop: int, minutes: float | None) -> History:
        config = train_config(recipe, stop, minutes)
        return fit(
            model,
            train,
            config=config,
            state_path=path,
            save_every=recipe.save_every,
            metrics=metric,
        )

    if not recipe.keep_best or max_minutes is None:
        return run(end, max_minutes)
    deadline, every = time.monotonic() + 60 * max_minutes, recipe.eval_every
    history = run(1, None) if path.is_file() else None  # where the saved state stands
    trained = False  # a piece trains to one history point at least
    while True:
        done = history.step[-1] if history and history.step else 0
        if history and (done >= end or (trained and time.monotonic() >= deadline)):
            return history
        history, trained = run(min((done // every + 1) * every, end), None), True


def keeping_best(metric: Metric, best_file: Path, resumed: bool) -> Metric:
    # fit's metrics hook that also writes the weights of each new lowest validation CER to
    # best_file (atomically, with a checksum), continuing a resumed run's best so far
    if not resumed:
        best_file.unlink(missing_ok=True)  # an earlier run's, not this one's
    best = [read_payload(best_file, "state_file", _FIX)["cer"] if best_file.is_file() else math.inf]

    def metrics(model: torch.nn.Module) -> dict[str, float]:
        out = metric(model)
        if out["cer"] < best[0]:
            best[0] = out["cer"]
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            _write_payload({"cer": out["cer"], "state": state}, best_file)
        return out

    return metrics


def best_weights(
    model: torch.nn.Module, best_file: Path, history: dict[str, list]
) -> dict[str, Any]:
    # load the best weights into model; their step is the history's first point of that CER
    saved = read_payload(best_file, "state_file", _FIX)
    model.load_state_dict(saved["state"])
    cers = [round(saved["cer"], 5) == c for c in history["valid_cer"]]
    if not any(cers):
        raise ValueError(
            f"state_file: {best_file} holds weights of no point of the history; {_FIX}"
        )
    return {
        "best_step": history["step"][cers.index(True)],
        "best_valid_cer": round(saved["cer"], 5),
    }
