"""Issue #28 for ``training.checkpoint`` and ``training.losses``: the loader's memory bound counts
what storages really hold, deep or crafted structures and impossible paths and devices give
clear errors, and every bad label in any batch is named."""

from __future__ import annotations

import resource

import pytest
import torch

from lecturekit.training.checkpoint import _checksum, load_checkpoint, save_checkpoint
from lecturekit.training.losses import label_smoothed_nll


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


@pytest.mark.parametrize("bad", [50, 11, -100, -1])
def test_label_smoothed_nll_names_a_label_outside_the_vocabulary(bad) -> None:
    logits = torch.randn(2, 3, 11)
    target = torch.tensor([[4, 5, 0], [6, bad, 7]])
    with pytest.raises(ValueError, match=rf"target must hold ids in \[0, 11\).*got {bad} at"):
        label_smoothed_nll(logits, target)
    if bad < 0:  # the fix the message suggests works
        ok = label_smoothed_nll(logits, target, ignore_index=bad)
        assert torch.isfinite(ok)


def test_label_smoothed_nll_refuses_float_targets() -> None:
    with pytest.raises(TypeError, match="target must hold integer token ids"):
        label_smoothed_nll(torch.randn(2, 5), torch.tensor([1.0, 2.0]))


def test_a_bad_label_in_a_later_batch_is_named_by_fit(make_tiny_model) -> None:
    """The first batches are fine; batch 3 has a label outside the output vocabulary."""
    from lecturekit.data import collate
    from lecturekit.training import TrainConfig, fit

    model = make_tiny_model()
    good = [([4, 5, 6], [4, 5, 6])] * 4
    bad = [([4, 5, 6], [4, 50, 6])] * 4
    batches = [collate(good), collate(good), collate(bad)]
    with pytest.raises(ValueError, match=r"must be in \[0, 11\).*got 50") as raised:
        fit(model, batches, valid=None, config=TrainConfig(epochs=1, lr=1e-3, warmup_steps=1))
    assert "IndexError" not in repr(raised.value)
