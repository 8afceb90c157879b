"""A run's folder: ``config.json``, ``metrics.jsonl`` (one JSON line per logged step or
evaluation) and its checkpoints. What may change when a run is resumed, and how the
metrics file is cut back to a checkpoint's step."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from neurosym.files import atomic_write

METRICS = "metrics.jsonl"
CONFIG_FILE = "config.json"
# settings that may change between a run and its resumption without changing the result
RESUME_MAY_CHANGE = {"log", "run.name", "run.out_dir", "run.device"}
# keys added after runs were already written, with the value an older checkpoint means by leaving them out
ADDED_KEYS = {"objective": {}, "run.precision": "fp32"}


class Means:
    """Running sums of the logged values since the last metrics line (saved in checkpoints)."""

    def __init__(self, state: dict[str, Any] | None = None):
        self.sums: dict[str, float] = dict(state["sums"]) if state else {}
        self.count: int = state["count"] if state else 0

    def add(self, values: dict[str, float]) -> None:
        for k, v in values.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
        self.count += 1

    def pop(self) -> dict[str, float]:
        out = {k: v / self.count for k, v in self.sums.items()} if self.count else {}
        self.sums, self.count = {}, 0
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"sums": dict(self.sums), "count": self.count}


def jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # strict JSON has no NaN/inf
    return value


def truncate_metrics(path: Path, step: int) -> None:
    """Keep the metrics lines up to ``step`` (a resumed run rewrites what came after)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line)["step"] <= step:
                kept.append(line + "\n")
        except (ValueError, KeyError, TypeError):
            continue  # a line torn by a kill
    atomic_write(path, lambda f: f.write("".join(kept).encode("utf-8")))


def config_differences(saved: dict[str, Any], current: dict[str, Any], prefix: str = "") -> list[str]:
    diffs = []
    for key in sorted(set(saved) | set(current)):
        name = f"{prefix}{key}"
        if name in RESUME_MAY_CHANGE:
            continue
        a, b = saved.get(key, ADDED_KEYS.get(name)), current.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            diffs += config_differences(a, b, name + ".")
        elif a != b:
            diffs.append(f"{name} (checkpoint {json.dumps(a)}, config {json.dumps(b)})")
    return diffs


__all__ = ["CONFIG_FILE", "METRICS", "Means", "RESUME_MAY_CHANGE", "config_differences", "jsonable", "truncate_metrics"]
