"""Pretrained models: shipped files load, recipes rebuild to the shipped weights."""

from __future__ import annotations

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
    out = greedy(ckpt.model, src, task.max_tgt_len + 1)
    correct = sum(
        ckpt.tgt_vocab.decode(row) == tgt for row, (_, tgt) in zip(out, pairs, strict=True)
    )
    assert correct / len(pairs) >= 0.9
    # cross-attention is not diagonal: the task reorders words
    ckpt.model(src[:1], torch.tensor([[1, *ckpt.tgt_vocab.encode(pairs[0][1])]]), need_weights=True)
    cross = ckpt.model.attention_weights["decoder_cross"][-1]
    assert cross.shape[-1] == src.shape[1]


# reverse-tiny: the smallest recipe; number-ss-s0: chapter 6's scheduled-sampling run
@pytest.mark.parametrize("name", ["reverse-tiny", "number-ss-s0"])
def test_rebuilding_a_recipe_reproduces_the_shipped_weights(tmp_path, name) -> None:
    rebuilt = pretrained.build(name, path=tmp_path / f"{name}.pt")
    shipped = pretrained.load(name)
    for (key, a), b in zip(
        rebuilt.model.state_dict().items(), shipped.model.state_dict().values(), strict=True
    ):
        # bitwise on the machine that built it; float reduction order may differ elsewhere
        assert torch.allclose(a, b, atol=1e-3, rtol=1e-3), key
    assert rebuilt.metadata["test_exact_match"] == pytest.approx(
        shipped.metadata["test_exact_match"], abs=0.02
    )


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
