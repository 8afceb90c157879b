"""Atomic checkpoints and the random-number state they carry.

A checkpoint is one ``torch.save`` file (a dict of tensors and plain Python values, so it
loads with ``weights_only=True``). It is written to a temporary file in the same folder,
flushed, fsync'ed and moved over the old one with ``os.replace``: a reader (or a run
resumed after a crash, a SIGKILL or a full disk) sees the previous checkpoint or the new
one, never part of one. A temporary file left by a killed process is named
``.NAME.*.tmp`` and is removed by :func:`remove_stale_temps` when the run starts again.
"""

from __future__ import annotations

import os
import random
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neurosym.errors import NeurosymError
from neurosym.files import atomic_write, digest, fsync_dir

FORMAT = 1
LAST = "last.pt"
# what every checkpoint the trainer writes holds (load_checkpoint checks them)
REQUIRED = ("config", "model", "optimizer", "scheduler", "step", "epoch", "position", "total_steps", "rng")


class CheckpointError(NeurosymError):
    """A checkpoint that is missing, unreadable or not a neurosym training checkpoint."""


def remove_stale_temps(folder: str | Path) -> list[Path]:
    """Delete temporary files a killed writer left in ``folder``; returns what was removed."""
    removed = []
    for p in Path(folder).glob(".*.tmp"):
        with suppress(FileNotFoundError):
            p.unlink()
            removed.append(p)
    return removed


def save_checkpoint(folder: str | Path, state: dict[str, Any], keep_step: bool = False) -> Path:
    """Write ``state`` to ``folder/last.pt`` atomically (and ``step-N.pt`` too if ``keep_step``)."""
    folder = Path(folder)
    state = {"format": FORMAT, **state}
    state["checksum"] = digest(state)  # of every tensor and value: a flipped byte is caught on load
    last = folder / LAST
    if not keep_step:
        return atomic_write(last, lambda f: torch.save(state, f))
    step_file = atomic_write(folder / f"step-{state['step']}.pt", lambda f: torch.save(state, f))
    # last.pt becomes a second name of the same (complete) file: link, then atomic rename.
    fd, tmp = tempfile.mkstemp(prefix=f".{LAST}.", suffix=".tmp", dir=folder)
    os.close(fd)
    os.unlink(tmp)
    try:
        os.link(step_file, tmp)
        os.replace(tmp, last)
        fsync_dir(folder)
    except OSError:  # no hard links here: write it again
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        atomic_write(last, lambda f: torch.save(state, f))
    return last


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (onto the CPU)."""
    path = Path(path)
    if path.is_dir():
        path = path / LAST
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # zip reader, unpickler, EOF: all mean "not a whole checkpoint"
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{path}: corrupt or truncated checkpoint ({first})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a neurosym training checkpoint (format {FORMAT})")
    missing = [k for k in REQUIRED if k not in state]
    if missing:
        raise CheckpointError(f"{path}: not a whole training checkpoint: no {', '.join(missing)}")
    stored = state.pop("checksum", None)
    if stored is not None and stored != digest(state):
        raise CheckpointError(f"{path}: corrupt checkpoint: its contents do not match the checksum written with it")
    return state


# ---------------------------------------------------------------- random-number state


def rng_state() -> dict[str, Any]:
    """The state of every global generator a training step may draw from."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "gauss": float(gauss)},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` captured."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
