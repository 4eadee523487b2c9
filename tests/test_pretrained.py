"""Pretrained models: shipped files load, recipes rebuild to the shipped weights."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lecturekit import pretrained
from lecturekit.decoding import greedy

MAX_TOTAL_BYTES = 8 * 1024 * 1024


def test_every_recipe_is_shipped_small_and_loads() -> None:
    total = 0
    for name, recipe in pretrained.RECIPES.items():
        path = pretrained.checkpoint_path(name)
        assert path.is_file(), f"{name}: run `python -m lecturekit.pretrained build {name}`"
        total += path.stat().st_size
        ckpt = pretrained.load(name)
        assert ckpt.metadata["recipe"] == name and ckpt.metadata["task"] == recipe.task
        assert len(ckpt.src_vocab) == ckpt.config.src_vocab_size
        assert len(ckpt.tgt_vocab) == ckpt.config.tgt_vocab_size
        for key, value in recipe.model.items():
            assert getattr(ckpt.config, key) == value
    assert total < MAX_TOTAL_BYTES
    shipped = sum(p.stat().st_size for p in pretrained.DATA_DIR.glob("*.pt"))
    assert shipped < MAX_TOTAL_BYTES  # every file in the package, registered or not


def test_translation_model_translates_held_out_sentences() -> None:
    from lecturekit.data import make_task

    ckpt = pretrained.load("translation-small")
    recipe = pretrained.RECIPES["translation-small"]
    task = make_task(recipe.task, **recipe.task_kwargs)
    pairs = task.test[:64]
    src = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(ckpt.src_vocab.encode(s)) for s, _ in pairs], batch_first=True
    )
    out = greedy(ckpt.model, src, task.max_tgt_len + 1).tokens
    correct = sum(
        ckpt.tgt_vocab.decode(row) == tgt for row, (_, tgt) in zip(out, pairs, strict=True)
    )
    assert correct / len(pairs) >= 0.9
    # cross-attention is not diagonal: the task reorders words
    ckpt.model(src[:1], torch.tensor([[1, *ckpt.tgt_vocab.encode(pairs[0][1])]]), need_weights=True)
    cross = ckpt.model.attention_weights["decoder_cross"][-1]
    assert cross.shape[-1] == src.shape[1]


# What a rebuild must reproduce on any machine. Training amplifies last-bit differences
# (CPU instruction set, threads, torch version) into different weights, so a rebuild is
# compared with the shipped model in what the book states about it, its evaluation
# figures, within these tolerances; bit-for-bit equality holds only on the machine that
# built the file. Measured: rebuilding chapter 6's number-ss-s4 on the AVX2 one-thread path
# (the Makefile's FORCED_PATH_ENV) moved its test exact match from 0.9625 to 0.9885, and
# number-ss-s0 from 0.9905 to 0.992.
EXACT_MATCH_TOLERANCE = 0.06  # test-split exact match, absolute
TOKEN_ACCURACY_TOLERANCE = 0.02  # test-split token accuracy, absolute
LOSS_TOLERANCE = 0.2  # mean training loss over the last 10% of the steps, relative


def _final_loss(history: dict) -> float:
    tail = history["loss"][-max(1, len(history["loss"]) // 10) :]
    return sum(tail) / len(tail)


# reverse-tiny: the smallest recipe; number-ss-s0: chapter 6's scheduled-sampling run;
# reverse-small: chapter 5's model, whose figures the chapter prints
@pytest.mark.parametrize("name", ["reverse-tiny", "number-ss-s0", "reverse-small"])
def test_rebuilding_a_recipe_reproduces_the_shipped_figures(tmp_path, name) -> None:
    rebuilt = pretrained.build(name, path=tmp_path / f"{name}.pt")
    shipped = pretrained.load(name)
    assert rebuilt.config == shipped.config
    assert rebuilt.metadata["steps"] == shipped.metadata["steps"]
    for key, tolerance in [
        ("test_exact_match", EXACT_MATCH_TOLERANCE),
        ("test_token_accuracy", TOKEN_ACCURACY_TOLERANCE),
    ]:
        assert rebuilt.metadata[key] == pytest.approx(shipped.metadata[key], abs=tolerance), key
    if "history" in shipped.metadata:  # checkpoints built before histories were recorded
        assert _final_loss(rebuilt.metadata["history"]) == pytest.approx(
            _final_loss(shipped.metadata["history"]), rel=LOSS_TOLERANCE
        )


def test_the_rebuild_tolerance_is_tighter_than_a_change_of_seed(tmp_path, monkeypatch) -> None:
    # the tolerances above accept machine noise, not a different recipe: the smallest recipe
    # trained from another seed fails them. (Chapter 6's 1000-step models cannot show this:
    # their seeds all reach an exact match near 0.99 and overlap within the tolerance.)
    recipe = pretrained.RECIPES["reverse-tiny"]
    other = dataclasses.replace(
        recipe, name="reverse-tiny-seed1", seed=1, train={**recipe.train, "seed": 1}
    )
    monkeypatch.setitem(pretrained.RECIPES, other.name, other)
    rebuilt = pretrained.build(other.name, path=tmp_path / f"{other.name}.pt")
    shipped = pretrained.load(recipe.name)
    gaps = {
        key: abs(rebuilt.metadata[key] - shipped.metadata[key])
        for key in ("test_exact_match", "test_token_accuracy")
    }
    assert (
        gaps["test_exact_match"] > EXACT_MATCH_TOLERANCE
        or gaps["test_token_accuracy"] > TOKEN_ACCURACY_TOLERANCE
    ), gaps


def test_shipped_history_matches_the_shipped_model() -> None:
    name = "reverse-small"
    recipe = pretrained.RECIPES[name]
    ckpt = pretrained.load(name)
    hist = pretrained.history(name)
    assert hist.step == list(range(1, recipe.train["max_steps"] + 1))
    assert len(hist.loss) == len(hist.lr) == len(hist.step)
    assert hist.eval_step == list(range(200, 1001, 200))
    assert ckpt.metadata["max_src_len"] == recipe.max_src_len == 8
    task = pretrained.recipe_task(name)
    assert task.test and all(
        len(src) <= 8 for split in ("train", "valid", "test") for src, _ in task.split(split)
    )
    with pytest.raises(ValueError, match="history"):
        pretrained.history("reverse-tiny")  # built before histories were recorded
    with pytest.raises(ValueError, match="max_src_len"):
        pretrained.Recipe(**{**recipe.__dict__, "max_src_len": 0})


def test_unknown_recipe_and_duplicate_registration() -> None:
    with pytest.raises(ValueError, match="name"):
        pretrained.load("no-such-model")
    recipe = pretrained.RECIPES["reverse-tiny"]
    assert pretrained.register(recipe) is recipe  # re-registering the same recipe is fine
    with pytest.raises(ValueError, match="already registered"):
        pretrained.register(pretrained.Recipe(**{**recipe.__dict__, "seed": 99}))


def test_list_and_cli(capsys) -> None:
    from lecturekit.pretrained.__main__ import main

    listing = pretrained.list_recipes()
    assert set(listing) == set(pretrained.RECIPES)
    assert not any(text.endswith("[not built]") for text in listing.values())
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in pretrained.RECIPES)
    with pytest.raises(SystemExit):
        main(["build", "no-such-model"])


def test_chapter6_pairs_differ_only_in_scheduled_sampling() -> None:
    # chapter 6 compares teacher forcing and scheduled sampling at the same budget, per seed,
    # with models trained well enough that their own predictions are worth feeding back
    for seed in pretrained.EXPOSURE_BIAS_SEEDS:
        tf, ss = (pretrained.RECIPES[f"number-{m}-s{seed}"] for m in ("tf", "ss"))
        assert tf.train["scheduled_sampling"] is None and ss.train["scheduled_sampling"]
        assert {k: v for k, v in ss.train.items() if tf.train[k] != v} == {
            "scheduled_sampling": pretrained.EXPOSURE_BIAS_SCHEDULE
        }
        assert (tf.task, tf.task_kwargs, tf.model, tf.seed) == (
            ss.task,
            ss.task_kwargs,
            ss.model,
            ss.seed,
        )
        assert pretrained.load(tf.name).metadata["test_exact_match"] > 0.95
