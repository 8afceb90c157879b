"""A run's folder: ``config.json``, ``metrics.jsonl`` (one JSON line per logged step or
evaluation) and its checkpoints. What may change when a run is resumed, how the metrics
file is cut back to a checkpoint's step, and which files of the folder are the run's own
(:class:`RunFiles`, recorded in ``.neurosym-run.json``)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from neurosym.errors import NeurosymError
from neurosym.files import LOCK_FILE, atomic_write, atomic_write_bytes

METRICS = "metrics.jsonl"
CONFIG_FILE = "config.json"
TEMP_FILE = re.compile(r"\.?.*\.neurosym-\d+-[A-Za-z0-9_]+\.tmp")  # an atomic writer's temporary file (neurosym.files)
MANIFEST = ".neurosym-run.json"  # the names of the files the run wrote into its folder
TRAINER_FILES = (CONFIG_FILE, METRICS, "last.pt", "curves.png")  # and step-N.pt: what the trainer (and neurosym plot) writes
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


def writes(name: str, task: Any) -> bool:
    """Whether the run writes a file called ``name`` into its folder (the trainer's files,
    ``step-N.pt`` and the task's declared ``outputs``)."""
    if name in TRAINER_FILES or name in (getattr(task, "outputs", ()) or ()):
        return True
    return name.startswith("step-") and name.endswith(".pt") and name[5:-3].isdigit()


class RunFiles:
    """The files of a run folder that are the run's own, kept in :data:`MANIFEST`: those it
    wrote. :meth:`record` adds every file that appeared since the run took the folder, so
    what the task writes counts as the trainer's does; a file that was there before and
    is not the run's is never recorded."""

    def __init__(self, folder: Path, foreign: set[str]):
        self.folder, self.foreign = folder, foreign

    @staticmethod
    def read(folder: Path) -> set[str] | None:
        """The recorded names, or None without a manifest."""
        try:
            names = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return {n for n in names if isinstance(n, str)} if isinstance(names, list) else None

    def record(self) -> None:
        present = {p.name for p in self.folder.iterdir() if p.is_file()} - {LOCK_FILE, MANIFEST}
        names = sorted(present - self.foreign)
        atomic_write_bytes(self.folder / MANIFEST, (json.dumps(names, indent=0) + "\n").encode("utf-8"))


def own_run_folder(folder: Path, task: Any, config: Any, resume: bool, force: bool) -> RunFiles:
    """Check, before anything is written, that training may write into ``folder``; the
    run's :class:`RunFiles`. Refused (a NeurosymError naming the files):

    * always: the config file, or an input of the task (its ``input_paths()``: text files,
      lexicon, tokenizer, base model), lying in the folder under a name the run writes and
      not written by the run; an input folder that is the run folder or inside it;
    * unless ``force``: a new run in a folder holding files the run did not write (a run
      folder made before manifests existed counts its own files by their names).
    """
    folder = Path(folder)
    recorded = RunFiles.read(folder)
    present = {p.name for p in folder.iterdir() if not TEMP_FILE.fullmatch(p.name)} - {LOCK_FILE, MANIFEST}  # a writer's temp files are neurosym's
    if recorded is None:  # no manifest: a fresh folder, or a run written before manifests (its files by their names, if it has a checkpoint)
        recorded = {n for n in present if writes(n, task)} if (folder / "last.pt").is_file() else set()
    here = folder.resolve()
    sources = [Path(config.source)] if getattr(config, "source", None) else []
    inputs_of = getattr(task, "input_paths", None)
    for path in sources + (list(inputs_of()) if callable(inputs_of) else []):
        try:
            resolved = Path(path).resolve()
        except OSError:
            continue
        if resolved.is_dir() and (resolved == here or here in resolved.parents):
            raise NeurosymError(f"{folder}: the run folder is (or lies inside) {path}, an input of this run; choose another run.name or out_dir")
        if resolved.parent == here and writes(resolved.name, task) and resolved.name not in recorded:
            raise NeurosymError(f"{path}: an input of this run lies in its run folder under {resolved.name!r}, a name the run writes; "
                                "move it, or choose another run.name or out_dir")
    foreign = present - recorded
    if foreign and not resume and not force:
        shown = ", ".join(sorted(foreign)[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise NeurosymError(f"{folder}: holds files this run did not write ({shown}); choose another run.name or out_dir, "
                            "or add --force to write the run's files beside them (inputs are never replaced)")
    return RunFiles(folder, foreign - {n for n in foreign if writes(n, task)} if force else foreign)


__all__ = ["CONFIG_FILE", "MANIFEST", "METRICS", "Means", "RunFiles", "TRAINER_FILES", "own_run_folder", "writes", "RESUME_MAY_CHANGE", "config_differences", "jsonable", "truncate_metrics"]
