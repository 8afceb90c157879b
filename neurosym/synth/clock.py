"""The clock that synthesis time budgets are measured on.

Wall-clock time (``time.monotonic``) by default. On a shared machine a wall-clock budget
buys less search the busier the machine is, so benchmarks can measure budgets and
reported seconds in this process's CPU time instead (``time.process_time``)::

    with cpu_clock():
        synthesize(pos, neg, time_budget=60)   # 60 CPU seconds; res.seconds in CPU seconds
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_clock: Callable[[], float] = time.monotonic


def now() -> float:
    """The current reading of the synthesis clock, in seconds."""
    return _clock()


def clock_name() -> str:
    """``"cpu"`` inside :func:`cpu_clock`, else ``"wall"``."""
    return "cpu" if _clock is time.process_time else "wall"


@contextmanager
def cpu_clock() -> Iterator[None]:
    """Measure synthesis budgets and times in process CPU seconds inside the block."""
    global _clock
    before = _clock
    _clock = time.process_time
    try:
        yield
    finally:
        _clock = before


__all__ = ["clock_name", "cpu_clock", "now"]
