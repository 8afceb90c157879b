r"""A grammar engine of ``neurosym bench decode --cfg``, driven token by token: the
protocol every engine follows (:class:`Engine`), what one engine answered along a set of
token sequences (:class:`Trace`) and the loop that drives and times it
(:func:`run_engine`), the same in the bench's process and in a worker process
(:mod:`neurosym.bench.remote_engine`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np


class Engine:
    """One engine's matcher for the grammar, driven token by token."""

    name: str = "?"
    compile_seconds: float = math.nan
    memory_bytes: int | None = None
    version: str | None = None  # where the engine's package is not installed in this process

    def start(self) -> None: ...
    def write_mask(self, out: np.ndarray) -> None: ...
    def advance(self, token: int) -> None: ...

    def end_allowed(self, mask: np.ndarray, eos: int) -> bool:
        return bool((int(mask[eos // 32]) >> (eos % 32)) & 1)

    def run(self, sequences: list[list[int]], eos: int, time_limit: float = math.inf) -> Trace:
        """The engine driven along ``sequences`` (:func:`run_engine`, in this process)."""
        return run_engine(self, sequences, eos, time_limit)

    def close(self) -> None:
        """Free what the engine holds outside this process (nothing, here)."""


@dataclass
class Trace:
    """An engine's answers along the sequences: per step (sequence, k) the packed mask
    over the real tokens and the end decision; where it refused a sequence's token."""

    masks: dict[tuple[int, int], bytes] = field(default_factory=dict)
    ends: dict[tuple[int, int], bool] = field(default_factory=dict)
    refusals: list[tuple[int, int]] = field(default_factory=list)
    times: dict[str, list[float]] = field(default_factory=lambda: {"mask": [], "advance": [], "step": []})


def run_engine(engine: Engine, sequences: list[list[int]], eos: int, time_limit: float = math.inf) -> Trace:
    """Drive ``engine`` along every sequence (stopping early past ``time_limit`` seconds)."""
    words = (eos + 1 + 31) // 32
    buf = np.zeros(words, dtype=np.int32)
    full, rest = divmod(eos, 32)
    out = Trace()
    clock = time.perf_counter_ns
    deadline = time.perf_counter() + time_limit
    for i, tokens in enumerate(sequences):
        if time.perf_counter() > deadline:
            break
        engine.start()
        for k, tok in enumerate(tokens + [None]):
            buf[:] = 0
            t0 = clock()
            engine.write_mask(buf)
            mask_us = (clock() - t0) / 1000
            real = buf[: full + 1].copy()
            real[full] = int(real[full]) & ((1 << rest) - 1)
            out.masks[i, k] = real.tobytes()
            out.ends[i, k] = engine.end_allowed(buf, eos)
            out.times["mask"].append(mask_us)
            if tok is None:
                break
            try:
                t0 = clock()
                engine.advance(tok)
                adv_us = (clock() - t0) / 1000
            except Exception:  # noqa: BLE001 - the engine's refusal, counted
                out.refusals.append((i, k))
                break
            out.times["advance"].append(adv_us)
            out.times["step"].append(mask_us + adv_us)
    return out


__all__ = ["Engine", "Trace", "run_engine"]
