"""Scale-out: the same ``fit`` call trains on several processes with DistributedDataParallel.

Launch any script that calls :func:`lecturekit.training.fit` with::

    torchrun --nproc_per_node=2 train.py

``torchrun`` sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT``; ``fit`` sees them (:func:`setup`), joins the process group (gloo on CPU, nccl
on GPUs, one GPU per process), wraps the model in ``DistributedDataParallel`` and lets each
process train on its share of every global batch (:func:`shard`). The loss is normalised by
the *global* number of label tokens, so one distributed step makes the same update as one
process training on the whole batch. Without those variables everything is a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import torch
import torch.distributed as torch_dist
from torch import Tensor, nn

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from lecturekit.data.batching import Batch

__all__ = ["DistContext", "setup", "wrap", "shard", "all_reduce_sum", "any_true", "cleanup"]


@dataclass(frozen=True)
class DistContext:
    """Where this process stands: ``enabled`` is False for an ordinary single process."""

    enabled: bool
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that shows progress bars and writes files."""
        return self.rank == 0


def setup(device: str = "auto") -> DistContext:
    """Join the process group when launched by ``torchrun`` with ``WORLD_SIZE > 1``.

    ``device``: ``"auto"`` uses CUDA (GPU ``LOCAL_RANK``, backend nccl) when available,
    otherwise the CPU (backend gloo); ``"cpu"`` forces gloo on the CPU.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistContext(enabled=False)
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    use_cuda = device != "cpu" and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
    else:
        dev = torch.device("cpu")
    if not torch_dist.is_initialized():
        torch_dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return DistContext(True, rank, world_size, local_rank, dev)


def wrap(model: nn.Module, ctx: DistContext) -> nn.Module:
    """``DistributedDataParallel(model)`` when distributed, else ``model`` itself."""
    if not ctx.enabled:
        return model
    device_ids = [ctx.local_rank] if ctx.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def shard(batch: Batch, ctx: DistContext) -> Batch:
    """This process' rows of a global ``Batch``: rows ``rank, rank + world_size, ...``.

    Every process draws the same global batch (same seed), so the shards partition it. A
    process whose share is empty (last, small batch) gets one row with all labels masked: it
    joins the gradient all-reduce but contributes nothing.
    """
    if not ctx.enabled:
        return batch
    rows = torch.arange(ctx.rank, len(batch), ctx.world_size)
    values = {f.name: getattr(batch, f.name) for f in fields(batch)}
    if len(rows) == 0:
        values = {name: t[:1] for name, t in values.items()}
        values["tgt_out"] = torch.full_like(values["tgt_out"], _pad_of(batch))
        values["tgt_padding_mask"] = torch.ones_like(values["tgt_padding_mask"])
        return type(batch)(**values)
    return type(batch)(**{name: t[rows] for name, t in values.items()})


def _pad_of(batch: Batch) -> int:
    # the padding id is what tgt_out holds under its padding mask (0 when nothing is padded)
    padded = batch.tgt_out[batch.tgt_padding_mask]
    return int(padded[0]) if len(padded) else 0


def all_reduce_sum(tensor: Tensor, ctx: DistContext) -> Tensor:
    """Sum ``tensor`` over processes (identity when not distributed)."""
    if ctx.enabled:
        tensor = tensor.clone()
        torch_dist.all_reduce(tensor, op=torch_dist.ReduceOp.SUM)
    return tensor


def any_true(flag: bool, ctx: DistContext, device: torch.device) -> bool:
    """True on every process if ``flag`` is True on any of them."""
    if not ctx.enabled:
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    return bool(all_reduce_sum(value, ctx).item() > 0)


def cleanup() -> None:
    """Leave the process group (call at the end of a torchrun script)."""
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.destroy_process_group()
