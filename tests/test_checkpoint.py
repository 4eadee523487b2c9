"""Checkpoints: round trip, atomic writes, safe loading, config mismatch."""

from __future__ import annotations

import os
import resource

import pytest
import torch

from lecturekit.training.checkpoint import _checksum, load_checkpoint, save_checkpoint


def test_round_trip_restores_outputs_vocab_and_metadata(tmp_path, make_tiny_model) -> None:
    from lecturekit.data import CharVocab
    from lecturekit.training import TrainConfig

    model = make_tiny_model(tie_embeddings=True, share_vocab=False, tgt_vocab_size=11)
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


def test_load_into_existing_model_and_runtime_overrides(tmp_path, make_tiny_model) -> None:
    model = make_tiny_model(seed=1)
    save_checkpoint(tmp_path / "m.pt", model)
    target = make_tiny_model(seed=2, dropout=0.3)  # dropout is a runtime field
    load_checkpoint(tmp_path / "m.pt", target)
    for a, b in zip(model.parameters(), target.parameters(), strict=True):
        assert torch.equal(a, b)
    other = load_checkpoint(tmp_path / "m.pt", attention_backend="sdpa")
    assert other.config.attention_backend == "sdpa"


def test_mismatched_config_is_refused(tmp_path, make_tiny_model) -> None:
    save_checkpoint(tmp_path / "m.pt", make_tiny_model())
    with pytest.raises(ValueError, match=r"d_ff: checkpoint 32 vs model 64"):
        load_checkpoint(tmp_path / "m.pt", make_tiny_model(d_ff=64))
    with pytest.raises(TypeError, match="runtime_overrides"):
        load_checkpoint(tmp_path / "m.pt", d_model=32)


def test_interrupted_save_keeps_previous_checkpoint(tmp_path, monkeypatch, make_tiny_model) -> None:
    path = tmp_path / "m.pt"
    first = make_tiny_model(seed=1)
    save_checkpoint(path, first, metadata={"version": 1})
    before = path.read_bytes()

    def crash(obj, f, *args, **kwargs):
        f.write(b"partial garbage")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, make_tiny_model(seed=2), metadata={"version": 2})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["m.pt"]  # no temporary file left behind
    assert load_checkpoint(path).metadata == {"version": 1}


class NotPlainData:
    pass


def test_unsafe_or_foreign_files_are_rejected(tmp_path, make_tiny_model) -> None:
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
        save_checkpoint(tmp_path / "m.pt", make_tiny_model(), metadata={"bad": NotPlainData()})


# -- careless and hostile input (issue #20) ------------------------------------------------


def test_metadata_that_would_not_load_is_refused_before_writing(tmp_path, make_tiny_model) -> None:
    np = pytest.importorskip("numpy")
    path = tmp_path / "m.pt"
    save_checkpoint(path, make_tiny_model(), metadata={"em": 0.5})
    before = path.read_bytes()
    for bad, where in [
        ({"em": np.float64(1.0)}, r"metadata\['em'\].*numpy.float64.*float\(x\)"),
        ({"runs": [1, np.int64(2)]}, r"metadata\['runs'\]\[1\].*numpy.int64"),
        ({("a", "b"): 1}, r"metadata: dict keys must be str or int, got tuple"),
        ({"t": torch.zeros(2, device="meta")}, r"metadata\['t'\]: a meta tensor"),
    ]:
        with pytest.raises(TypeError, match=where):
            save_checkpoint(path, make_tiny_model(seed=2), metadata=bad)
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="contains itself"):
        save_checkpoint(path, make_tiny_model(seed=2), metadata={"c": cycle})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.pt"]
    assert load_checkpoint(path).metadata == {"em": 0.5}


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_file_mode_follows_the_umask(tmp_path, umask, make_tiny_model) -> None:
    old = os.umask(umask)
    try:
        path = save_checkpoint(tmp_path / "m.pt", make_tiny_model())
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_next_save_removes_temporary_files_of_killed_saves(tmp_path, make_tiny_model) -> None:
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead_pid = int(dead.stdout)
    left = tmp_path / f".m.pt.{dead_pid}.k7_x2abc.tmp"  # as a save killed by SIGKILL leaves it
    left.write_bytes(b"partial")
    alive = tmp_path / f".m.pt.{os.getppid()}.q1w2e3r4.tmp"  # another process still writing
    alive.write_bytes(b"in progress")
    other = tmp_path / f".other.pt.{dead_pid}.abcdefgh.tmp"  # belongs to another checkpoint
    other.write_bytes(b"x")
    save_checkpoint(tmp_path / "m.pt", make_tiny_model())
    assert sorted(os.listdir(tmp_path)) == sorted([alive.name, other.name, "m.pt"])


def _flip_one_weight_byte(path, tensor) -> None:
    data = bytearray(path.read_bytes())
    offset = data.find(tensor.detach().numpy().tobytes())
    assert offset > 0
    data[offset + 5] ^= 0x10
    path.write_bytes(bytes(data))


def test_checksum_catches_flipped_bytes(tmp_path, make_tiny_model) -> None:
    model = make_tiny_model()
    path = save_checkpoint(tmp_path / "m.pt", model)
    _flip_one_weight_byte(path, model.output_proj.weight)
    with pytest.raises(ValueError, match="fails its checksum.*verify=False"):
        load_checkpoint(path)
    damaged = load_checkpoint(path, verify=False).model.output_proj.weight
    assert not torch.equal(damaged, model.output_proj.weight)


def test_files_without_a_checksum_still_load(tmp_path, make_tiny_model) -> None:
    model = make_tiny_model()
    path = save_checkpoint(tmp_path / "m.pt", model)
    payload = torch.load(path, weights_only=True)
    del payload["checksum"]  # as written by lecturekit before checksums (the shipped files)
    torch.save(payload, path)
    loaded = load_checkpoint(path).model
    assert torch.equal(loaded.output_proj.weight, model.output_proj.weight)


def _edited(tmp_path, model, edit) -> str:
    payload = torch.load(save_checkpoint(tmp_path / "m.pt", model), weights_only=True)
    del payload["checksum"]
    edit(payload)
    torch.save(payload, tmp_path / "edited.pt")
    return tmp_path / "edited.pt"


def _set(key: str, value):
    return lambda payload: payload["model_config"].__setitem__(key, value)


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        (lambda p: p.pop("state_dict"), r"has no 'state_dict' dict"),
        (lambda p: p.pop("model_config"), r"has no 'model_config' dict"),
        (
            _set("extra_field", 1),
            r"fields this lecturekit version does not know: \['extra_field'\]",
        ),
        (_set("pad_id", 2), r"model_config is invalid: pad_id and eos_id"),
        # a 2 KB file claiming a billion-token vocabulary: refused before any allocation
        (
            _set("src_vocab_size", 10**9),
            r"describes a model of at least 61,035 MiB but the file holds 0.0 MiB",
        ),
        (_set("max_len", 10**9), r"at least 61,035 MiB.*refusing to allocate"),
        (_set("d_ff", 48), r"has shape \((32, 16|16, 32)\) but the model_config needs"),
        (lambda p: p["state_dict"].pop("output_proj.bias"), r"missing \['output_proj.bias'\]"),
        (lambda p: p["state_dict"].__setitem__("x", [1]), r"weight 'x' is not a tensor"),
        (lambda p: p.__setitem__("format_version", 9), r"format version 9 is not supported"),
        (lambda p: p.__setitem__("tgt_vocab", {"kind": "?"}), r"tgt_vocab is invalid"),
    ],
)
def test_damaged_or_crafted_checkpoints_give_a_clear_error(
    tmp_path, tiny_model, edit, pattern
) -> None:
    with pytest.raises(ValueError, match=pattern):
        load_checkpoint(_edited(tmp_path, tiny_model, edit))


def test_empty_file_and_impossible_map_location(tmp_path, monkeypatch, make_tiny_model) -> None:
    empty = tmp_path / "empty.pt"
    empty.touch()
    with pytest.raises(ValueError, match=r"is empty \(0 bytes\)"):
        load_checkpoint(empty)
    path = save_checkpoint(tmp_path / "m.pt", make_tiny_model())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"map_location: 'cuda' requested but CUDA is not"):
        load_checkpoint(path, map_location="cuda")
    with pytest.raises(ValueError, match=r"map_location: 'gpu0' is not a device name"):
        load_checkpoint(path, map_location="gpu0")
    with pytest.raises(TypeError, match="map_location"):
        load_checkpoint(path, map_location=0.5)


def test_a_vocabulary_of_the_wrong_type_is_refused_before_writing(tmp_path, make_tiny_model):
    with pytest.raises(TypeError, match="src_vocab must be a lecturekit vocabulary"):
        save_checkpoint(tmp_path / "a.pt", make_tiny_model(), src_vocab=["a", "b"])
    with pytest.raises(TypeError, match="metadata"):
        save_checkpoint(tmp_path / "a.pt", make_tiny_model(), metadata={"f": open})
    assert not (tmp_path / "a.pt").exists()


def _crafted(path, payload_edit, make_tiny_model, checksum: bool) -> None:
    """Save a tiny model, edit its payload, write it back (with a fresh checksum or none)."""
    save_checkpoint(path, make_tiny_model())
    payload = torch.load(path, weights_only=True)
    payload_edit(payload)
    payload.pop("checksum")
    if checksum:
        payload["checksum"] = _checksum(payload)
    torch.save(payload, path)


def _max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("checksum", [False, True], ids=["unchecked", "checksummed"])
def test_a_stride_zero_tensor_cannot_inflate_the_size_guard(
    checksum, tmp_path, make_tiny_model
) -> None:
    """A 1-element storage shown as 10^8 values: the guard once counted 400 MB of weights and
    let the config ask for 356 MiB; the checksum then materialised the view."""

    def edit(payload):
        payload["state_dict"]["extra"] = torch.zeros(1).expand(10**8)
        payload["model_config"]["d_ff"] = 2_000_000  # a model of about 356 MiB

    path = tmp_path / "crafted.pt"
    _crafted(path, edit, make_tiny_model, checksum)
    assert path.stat().st_size < 64 * 1024
    before = _max_rss_mib()
    with pytest.raises(ValueError, match="stride-0 views|describes a model of at least"):
        load_checkpoint(path)
    assert _max_rss_mib() - before < 200  # nothing near the 356 MiB was allocated


def test_the_size_guard_counts_what_storages_hold() -> None:
    """Each storage once, at its real size: a stride-0 view of 10^8 values holds 4 bytes,
    and two views of one storage count once."""
    from lecturekit.model.config import TransformerConfig
    from lecturekit.training._checkpoint_guards import check_size

    config = TransformerConfig(
        d_model=64, d_ff=2**17, n_encoder_layers=1, n_decoder_layers=1,
        src_vocab_size=10, tgt_vocab_size=10, max_len=10,
    )  # fmt: skip
    needed = 4 * 3 * 2 * 64 * 2**17  # bytes of the two feed-forward layers alone: 201 MB
    shared = torch.zeros(needed // 32)  # 25 MB, shown five times
    with pytest.raises(ValueError, match="describes a model of at least"):
        check_size(config, {"a": torch.zeros(1).expand(10**8)}, "path")
    with pytest.raises(ValueError, match="describes a model of at least"):
        check_size(config, {str(i): shared.view(2, -1) for i in range(5)}, "path")
    check_size(config, {"a": torch.zeros(needed // 8)}, "path")  # real weights of that size


def test_expanded_metadata_tensors_are_saved_compactly(tmp_path, make_tiny_model) -> None:
    view = torch.arange(3.0).expand(1000, 3)
    path = save_checkpoint(tmp_path / "m.pt", make_tiny_model(), metadata={"v": view})
    loaded = load_checkpoint(path).metadata["v"]
    assert torch.equal(loaded, view)
    assert loaded.untyped_storage().nbytes() == loaded.numel() * loaded.element_size()


def test_deep_metadata_is_refused_clearly_on_save_and_load(tmp_path, make_tiny_model) -> None:
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(ValueError, match="metadata must nest at most 100 levels deep"):
        save_checkpoint(tmp_path / "m.pt", make_tiny_model(), metadata={"deep": deep})
    assert not (tmp_path / "m.pt").exists()

    shallow: list = []
    for _ in range(150):  # deeper than the loader accepts, shallow enough for torch.save
        shallow = [shallow]

    def edit(payload):
        payload["metadata"]["deep"] = shallow

    path = tmp_path / "crafted.pt"
    _crafted(path, edit, make_tiny_model, checksum=False)
    with pytest.raises(ValueError, match="nests deeper than 100 levels"):
        load_checkpoint(path)


def test_save_to_an_impossible_path_is_refused_clearly(tmp_path, make_tiny_model) -> None:
    model = make_tiny_model()
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    with pytest.raises(ValueError, match="'.*afile' is a file, not a folder"):
        save_checkpoint(afile / "x.pt", model)
    with pytest.raises(ValueError, match="path must name a file such as 'model.pt', got ''"):
        save_checkpoint("", model)
    with pytest.raises(ValueError, match="which is a folder"):
        save_checkpoint(tmp_path, model)
    with pytest.raises(TypeError, match="path must be a file path"):
        save_checkpoint(None, model)
    assert afile.read_text() == "not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


@pytest.mark.parametrize("location", ["mps", "cuda:99", "xla"])
def test_an_unavailable_device_is_refused_before_loading(location, tmp_path, make_tiny_model):
    if location == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    path = save_checkpoint(tmp_path / "m.pt", make_tiny_model())
    with pytest.raises(ValueError, match=rf"map_location: '{location}'"):
        load_checkpoint(path, map_location=location)


def test_a_file_name_of_the_wrong_type_is_named(make_tiny_model) -> None:
    with pytest.raises(TypeError, match="path must be a checkpoint file path"):
        load_checkpoint(["m.pt"])
