"""Distributed data parallel plumbing for the trainer: joining the process group
torchrun describes, and cutting a global batch into this rank's rows."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from neurosym.errors import NeurosymError


@dataclass
class Dist:
    """This process's place in the process group (one process: rank 0 of 1)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    owns_group: bool = False  # we initialised the process group, so we destroy it


def setup_distributed(device: str) -> tuple[Dist, torch.device]:
    """Join the process group torchrun describes (RANK/WORLD_SIZE/LOCAL_RANK), if any."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    initialized = dist.is_available() and dist.is_initialized()
    if world <= 1 and not initialized:
        return Dist(), torch.device(device)
    cuda = device.startswith("cuda")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    owns = False
    if not initialized:
        dist.init_process_group(backend="nccl" if cuda else "gloo")
        owns = True
    if cuda:
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
    else:
        dev = torch.device(device)
    return Dist(dist.get_rank(), dist.get_world_size(), local_rank, owns), dev


def first_tensor(batch: Any) -> torch.Tensor | None:
    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        for x in batch:
            t = first_tensor(x)
            if t is not None:
                return t
    return None


def map_tensors(batch: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, dict):
        return type(batch)((k, map_tensors(v, fn)) for k, v in batch.items())
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(map_tensors(v, fn) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(map_tensors(v, fn) for v in batch)
    return batch


def shard_batch(batch: Any, rank: int, world: int) -> tuple[Any, float]:
    """This rank's rows of a global batch, and its share ``rows / global rows``.

    Every tensor whose first dimension is the batch size is cut with ``tensor_split``
    (near-equal contiguous slices); other values are passed whole.
    """
    if world == 1:
        return batch, 1.0
    first = first_tensor(batch)
    if first is None or first.ndim == 0:
        raise NeurosymError("under DDP every batch needs a tensor whose first dimension is the batch")
    rows = first.shape[0]
    if rows < world:
        raise NeurosymError(f"a batch of {rows} rows cannot be split across {world} processes")
    part = map_tensors(batch, lambda t: t.tensor_split(world)[rank] if t.ndim and t.shape[0] == rows else t)
    return part, first_tensor(part).shape[0] / rows


__all__ = ["Dist", "first_tensor", "map_tensors", "setup_distributed", "shard_batch"]
