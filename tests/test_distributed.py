"""Scale-out: two gloo processes train like one process with the same global batch."""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp
from _tiny_model import build_tiny_model, one_torch_thread

from lecturekit.training.distributed import DistContext, setup, shard

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _problem():
    """The copy task and the tiny model; the spawned workers cannot use fixtures, so they
    and the test build it with conftest's builder imported from ``_tiny_model``."""
    from lecturekit.data import make_task

    task = make_task("copy", n_train=60, n_valid=8, n_test=4, seed=1)
    model = build_tiny_model(
        src_vocab_size=len(task.src_vocab), tgt_vocab_size=len(task.tgt_vocab), max_len=32
    )
    return task, model


def _config():
    from lecturekit.training import TrainConfig

    # 60 pairs / 16 = 4 batches, the last one of 12 rows: uneven shards are covered
    return TrainConfig(epochs=1, batch_size=16, warmup_steps=3, progress=False, device="cpu")


def _probe(task, model) -> torch.Tensor:
    """The trained model's logits on fixed inputs (key-projection biases, whose true gradient
    is zero, drift with float noise under Adam, so weights are compared through outputs)."""
    batch = next(iter(task.loader("valid", batch_size=8)))
    with torch.no_grad():
        return model.eval()(batch.src, batch.tgt_in)


def _worker(rank: int, world_size: int, port: int, out_dir: str) -> None:
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    from lecturekit.training import fit
    from lecturekit.training.distributed import cleanup

    with one_torch_thread():
        task, model = _problem()
        history = fit(model, task.encoded("train"), None, _config())  # unchanged user code
        logits = _probe(task, model)
    torch.save({"loss": history.loss, "logits": logits}, os.path.join(out_dir, f"{rank}.pt"))
    cleanup()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_match_one_process(tmp_path) -> None:
    from lecturekit.training import fit

    task, model = _problem()
    single = fit(model, task.encoded("train"), None, _config())
    mp.start_processes(
        _worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True, start_method="spawn"
    )
    results = [torch.load(tmp_path / f"{r}.pt", weights_only=True) for r in range(2)]
    assert len(results[0]["loss"]) == len(single.loss) == 4
    for result in results:
        assert result["loss"] == pytest.approx(single.loss, rel=1e-4, abs=1e-5)
        assert torch.allclose(result["logits"], _probe(task, model), atol=1e-4)


def test_setup_is_a_no_op_without_torchrun(monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    ctx = setup("cpu")
    assert not ctx.enabled and ctx.is_main and ctx.world_size == 1


def test_shard_partitions_the_global_batch() -> None:
    from lecturekit.data import collate

    batch = collate([([3, 4], [5]), ([6], [7, 8]), ([9, 3, 4], [5, 6, 7])])
    parts = [shard(batch, DistContext(True, r, 2)) for r in range(2)]
    assert parts[0].src.tolist() == batch.src[[0, 2]].tolist()
    assert parts[1].src.tolist() == batch.src[[1]].tolist()
    empty = shard(batch, DistContext(True, 3, 4))  # 3 rows, 4 processes: rank 3 gets none
    assert len(empty) == 1 and empty.tgt_padding_mask.all() and (empty.tgt_out == 0).all()
