"""Pretrained models: shipped files load, recipes rebuild to the shipped weights."""

from __future__ import annotations

import dataclasses
import shutil
import zipfile
from pathlib import Path

import pytest
import torch

from lecturekit import pretrained
from lecturekit.capstone import models as sentence_models
from lecturekit.decoding import greedy
from lecturekit.pretrained import rnn
from lecturekit.training.checkpoint import _checksum
from lecturekit.training.evaluation import evaluate

MAX_TOTAL_BYTES = 40 * 1024 * 1024


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


# Rebuilding a recipe on another machine. Training amplifies last-bit differences (CPU
# vendor and instruction set, thread count, torch version) until a rebuild is, in its final
# figures, just another draw of the recipe: on the 5 CPU code paths of one machine the final
# test exact match moved as far as a change of seed does (benchmarks/rebuild_spread.py; the
# figures below are from an Intel Xeon (Sapphire Rapids, AVX-512), torch 2.13.0, paths: best
# ISA on 1 and 2 threads, AVX2 on 1 and 2 threads, no SIMD on 1 thread; seeds 1-4 beside the
# registered seed 0, and for number-ss the shipped seeds 1-4). So a rebuild is checked twice:
#
# 1. The first PREFIX_STEPS updates must follow the shipped training curve: there the noise
#    is still at the last bit, while another seed (or any change of data, initialisation,
#    optimiser or schedule) differs from step 1. This is the check that tells a changed
#    recipe from another machine.
# 2. The finished rebuild's evaluation figures on the test split must lie in the band the
#    recipe's seeds span: that catches a recipe that no longer trains to the model the book
#    describes, but cannot tell a seed from a machine (the two spreads overlap), so it is
#    not used for that.
PREFIX_STEPS = 50
# Largest relative difference of the per-step training loss over the first 50 steps.
# Machine spread: 1.9e-07 (number-ss-s0), 1.9e-07 (reverse-small); seed spread (smallest
# over seeds 1-4): 0.13 (number-ss-s0), 0.17 (reverse-small). 1e-3 sits 5000x above the
# first and over 100x below the second. (By step 200 the machine spread is 0.04-0.5 and
# overlaps the seeds: the curves decorrelate.)
PREFIX_TOLERANCE = 1e-3

# Absolute bands of the finished rebuild's test figures around the shipped ones: 1.5x the
# largest distance from the shipped figure seen over the 5 code paths and the seeds. As
# "largest machine distance / largest seed distance" (seed distances from the seed-0 build
# on the best path, and for number-ss also between the shipped seeds):
FINAL_FIGURE_BANDS = {
    "number-ss-s0": {
        "exact_match": 0.04,  # machine 0.008 / seed 0.028 (shipped s4: 0.9625 vs 0.9905)
        "token_accuracy": 0.005,  # machine 0.0009 / seed 0.0031
        "loss": 0.02,  # machine 0.0063 / seed 0.012 (shipped s4: 0.0194 vs 0.0074)
    },
    "reverse-small": {
        "exact_match": 0.06,  # machine 0.027 / seed 0.038 (seed 1: 0.929 vs 0.967)
        "token_accuracy": 0.012,  # machine 0.0043 / seed 0.0077
        "loss": 0.05,  # machine 0.0090 / seed 0.034
    },
}
# reverse-tiny is not rebuild-tested: after 128 steps it is so under-trained that the code
# path alone moved its test token accuracy by 0.049, three times the smallest seed distance
# (0.016), and it records no training curve to compare a prefix with.


def _prefix_gap(losses: list[float], reference: list[float]) -> float:
    pairs = list(zip(losses[:PREFIX_STEPS], reference[:PREFIX_STEPS], strict=True))
    return max(abs(a - b) / abs(b) for a, b in pairs)


def _other_seed(monkeypatch, name: str, seed: int) -> str:
    recipe = pretrained.RECIPES[name]
    other = dataclasses.replace(
        recipe, name=f"{name}-seed{seed}", seed=seed, train={**recipe.train, "seed": seed}
    )
    monkeypatch.setitem(pretrained.RECIPES, other.name, other)
    return other.name


@pytest.mark.parametrize("name", list(FINAL_FIGURE_BANDS))
def test_a_rebuild_follows_the_shipped_training_curve(name) -> None:
    shipped = pretrained.load(name).metadata["history"]["loss"]
    rebuilt = pretrained.train_recipe(name, max_steps=PREFIX_STEPS).history.loss
    assert len(rebuilt) == PREFIX_STEPS
    assert _prefix_gap(rebuilt, shipped) < PREFIX_TOLERANCE


def test_another_seed_leaves_the_shipped_training_curve(monkeypatch) -> None:
    # the prefix check tells a changed recipe from another machine: seed 1 fails it
    name = "reverse-small"
    shipped = pretrained.load(name).metadata["history"]["loss"]
    other = _other_seed(monkeypatch, name, seed=1)
    rebuilt = pretrained.train_recipe(other, max_steps=PREFIX_STEPS).history.loss
    assert _prefix_gap(rebuilt, shipped) > 10 * PREFIX_TOLERANCE


@pytest.mark.parametrize("name", list(FINAL_FIGURE_BANDS))
def test_a_finished_rebuild_lands_in_the_recipes_band(tmp_path, name) -> None:
    rebuilt = pretrained.build(name, path=tmp_path / f"{name}.pt")
    shipped = pretrained.load(name)
    assert rebuilt.config == shipped.config
    assert rebuilt.metadata["steps"] == shipped.metadata["steps"]
    test = pretrained.recipe_task(name).loader("test", batch_size=256)
    shipped_loss = evaluate(shipped.model, test)["loss"]  # older files do not record it
    for figure, band in FINAL_FIGURE_BANDS[name].items():
        ours = rebuilt.metadata[f"test_{figure}"]
        theirs = shipped_loss if figure == "loss" else shipped.metadata[f"test_{figure}"]
        assert ours == pytest.approx(theirs, abs=band), figure


def test_train_recipe_stops_early_and_refuses_bad_arguments() -> None:
    trained = pretrained.train_recipe("reverse-tiny", max_steps=3)
    assert trained.history.step == [1, 2, 3] and trained.checkpoints == {}
    with pytest.raises(ValueError, match="max_steps"):
        pretrained.train_recipe("reverse-tiny", max_steps=0)
    with pytest.raises(TypeError, match="threads"):
        pretrained.train_recipe("reverse-tiny", threads=1.5)


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


SHIPPED = sorted(Path(pretrained.__file__).parent.glob("*.pt"))


def _flip_a_weight_byte(path: Path) -> None:
    """Flip one byte in the middle of the largest tensor record of the torch zip file (the
    zip's own CRCs are not checked by torch.load, so only the checksum can notice)."""
    with zipfile.ZipFile(path) as archive:
        record = max(
            (i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size
        )
        with open(path, "rb") as f:
            f.seek(record.header_offset + 26)
            name_len, extra_len = (
                int.from_bytes(f.read(2), "little"),
                int.from_bytes(f.read(2), "little"),
            )
    offset = record.header_offset + 30 + name_len + extra_len + record.file_size // 2
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def test_every_transformer_and_rnn_file_is_shipped() -> None:
    names = {p.stem for p in SHIPPED}
    assert names >= {"reverse-tiny", "translation-small"} | set(rnn.RNN_RECIPES)
    assert names >= {
        name for name in pretrained.RECIPES if pretrained.checkpoint_path(name).is_file()
    }


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_file_has_a_valid_checksum(path) -> None:
    payload = torch.load(path, weights_only=True, map_location="cpu")
    assert isinstance(payload.get("checksum"), str)
    assert payload["checksum"] == _checksum(payload)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_flipped_byte_in_a_shipped_file_is_refused(path, tmp_path, monkeypatch) -> None:
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    _flip_a_weight_byte(copy)
    assert copy.read_bytes() != path.read_bytes()
    if path.stem in rnn.RNN_RECIPES:
        monkeypatch.setattr(rnn, "DATA_DIR", tmp_path)
        with pytest.raises(ValueError, match="fails its checksum"):
            rnn.load_rnn(path.stem)
    elif path.stem in sentence_models.SENTENCE_RECIPES:
        monkeypatch.setattr(sentence_models, "DATA_DIR", tmp_path)
        with pytest.raises(ValueError, match="fails its checksum"):
            sentence_models.load_sentence_model(path.stem)
    else:
        monkeypatch.setattr(pretrained, "DATA_DIR", tmp_path)
        with pytest.raises(ValueError, match="fails its checksum"):
            pretrained.load(path.stem)


@pytest.mark.parametrize("name", [["reverse-tiny"], None, 3])
def test_a_recipe_name_of_the_wrong_type_is_named(name) -> None:
    with pytest.raises(TypeError, match="name must be a recipe name"):
        pretrained.load(name)
    with pytest.raises(ValueError, match="name must be one of"):
        rnn.load_rnn(name)
