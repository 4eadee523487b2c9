"""Checkpoints: round trip, atomic writes, safe loading, config mismatch."""

from __future__ import annotations

import os

import pytest
import torch

from lecturekit.checkpoint import load_checkpoint, save_checkpoint


def make_model(seed: int = 0, **overrides):
    from lecturekit import Transformer, TransformerConfig

    torch.manual_seed(seed)
    cfg = dict(
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
    cfg.update(overrides)
    return Transformer(TransformerConfig(**cfg)).eval()


def test_round_trip_restores_outputs_vocab_and_metadata(tmp_path) -> None:
    from lecturekit.data import CharVocab
    from lecturekit.training import TrainConfig

    model = make_model(tie_embeddings=True, share_vocab=False, tgt_vocab_size=11)
    src_vocab, tgt_vocab = CharVocab("abcdefghi"), CharVocab("0123456")
    path = save_checkpoint(
        tmp_path / "m.pt",
        model,
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
        train_config=TrainConfig(epochs=3),
        metadata={"task": "copy", "valid_em": 0.5, "steps": [1, 2]},
    )
    ckpt = load_checkpoint(path)
    src = torch.tensor([[3, 4, 5, 0]])
    tgt = torch.tensor([[1, 4, 5]])
    assert torch.equal(ckpt.model(src, tgt), model(src, tgt))
    assert ckpt.config == model.config
    assert ckpt.src_vocab == src_vocab and ckpt.tgt_vocab == tgt_vocab
    assert ckpt.train_config["epochs"] == 3
    assert ckpt.metadata == {"task": "copy", "valid_em": 0.5, "steps": [1, 2]}
    import lecturekit

    assert ckpt.lecturekit_version == lecturekit.__version__
    assert not ckpt.model.training
    # tied weights stay tied after loading
    assert ckpt.model.output_proj.weight is ckpt.model.tgt_embedding.weight


def test_load_into_existing_model_and_runtime_overrides(tmp_path) -> None:
    model = make_model(seed=1)
    save_checkpoint(tmp_path / "m.pt", model)
    target = make_model(seed=2, dropout=0.3)  # dropout is a runtime field
    load_checkpoint(tmp_path / "m.pt", target)
    for a, b in zip(model.parameters(), target.parameters(), strict=True):
        assert torch.equal(a, b)
    other = load_checkpoint(tmp_path / "m.pt", attention_backend="sdpa")
    assert other.config.attention_backend == "sdpa"


def test_mismatched_config_is_refused(tmp_path) -> None:
    save_checkpoint(tmp_path / "m.pt", make_model())
    with pytest.raises(ValueError, match=r"d_ff: checkpoint 32 vs model 64"):
        load_checkpoint(tmp_path / "m.pt", make_model(d_ff=64))
    with pytest.raises(TypeError, match="runtime_overrides"):
        load_checkpoint(tmp_path / "m.pt", d_model=32)


def test_interrupted_save_keeps_previous_checkpoint(tmp_path, monkeypatch) -> None:
    path = tmp_path / "m.pt"
    first = make_model(seed=1)
    save_checkpoint(path, first, metadata={"version": 1})
    before = path.read_bytes()

    def crash(obj, f, *args, **kwargs):
        f.write(b"partial garbage")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, make_model(seed=2), metadata={"version": 2})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["m.pt"]  # no temporary file left behind
    assert load_checkpoint(path).metadata == {"version": 1}


class NotPlainData:
    pass


def test_unsafe_or_foreign_files_are_rejected(tmp_path) -> None:
    evil = tmp_path / "evil.pt"
    torch.save({"format": "lecturekit-checkpoint", "x": NotPlainData()}, evil)
    with pytest.raises(ValueError, match="weights_only"):
        load_checkpoint(evil)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(ValueError, match="not a lecturekit checkpoint"):
        load_checkpoint(foreign)
    with pytest.raises(FileNotFoundError, match="path"):
        load_checkpoint(tmp_path / "missing.pt")
    with pytest.raises(TypeError, match="metadata"):
        save_checkpoint(tmp_path / "m.pt", make_model(), metadata={"bad": NotPlainData()})
