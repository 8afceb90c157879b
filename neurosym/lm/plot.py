"""Curves of a training run: ``plot_run(run_dir)`` draws metrics.jsonl into curves.png.

One panel per metric against the optimizer step: the training loss first (with any eval
metric called ``loss`` or ``*loss*`` drawn on the same axes), the learning rate, the
gradient norm, the task's own training metrics, then each eval metric. Uses matplotlib's
Agg renderer through ``matplotlib.figure.Figure`` (no pyplot, no display needed).
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

from neurosym.errors import NeurosymError, SourceError
from neurosym.files import IMAGE_SUFFIXES, atomic_write, image_metadata

METRICS = "metrics.jsonl"
NOT_PLOTTED = {"kind", "step", "epoch", "seconds"}


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The lines of ``run_dir/metrics.jsonl`` (a last line torn by a kill, without its
    newline, is skipped; bytes that are not UTF-8 in a whole line are an error at their
    line and column)."""
    run_dir = Path(run_dir)
    path = run_dir / METRICS
    if not run_dir.is_dir():
        raise NeurosymError(f"{run_dir}: no such run folder")
    if not path.is_file():
        raise NeurosymError(f"{run_dir}: no {METRICS} here (not a training run, or it has not logged yet)")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise NeurosymError(f"{path}: cannot read ({err.strerror or err})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        if b"\n" in raw[err.start :]:  # a whole line (ended by a newline) is not torn
            raise SourceError.not_utf8(err, path) from None
        text = raw[: raw.rfind(b"\n", 0, err.start) + 1].decode("utf-8")  # the last line, torn by a kill
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            rows.append(row)
    if not rows:
        raise NeurosymError(f"{path}: no metrics yet")
    return rows


def _series(rows: list[dict[str, Any]], kind: str) -> dict[str, tuple[list[int], list[float]]]:
    out: dict[str, tuple[list[int], list[float]]] = {}
    for row in rows:
        if row.get("kind", "train") != kind:
            continue
        for key, value in row.items():
            if key in NOT_PLOTTED or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not math.isfinite(value):
                continue
            xs, ys = out.setdefault(key, ([], []))
            xs.append(row["step"])
            ys.append(value)
    return out


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw the run's curves into ``out`` (default ``run_dir/curves.png``); returns the path."""
    from matplotlib.figure import Figure  # lazy: matplotlib is slow to import and only plotting needs it

    run_dir = Path(run_dir)
    rows = read_metrics(run_dir)
    train, evals = _series(rows, "train"), _series(rows, "eval")
    order = ["loss", "lr", "grad_norm"]
    train_keys = [k for k in order if k in train] + sorted(k for k in train if k not in order)
    on_loss = [k for k in sorted(evals) if "loss" in k and "loss" in train]
    panels: list[tuple[str, list[tuple[str, str]]]] = []  # title, [(kind, key)]
    for key in train_keys:
        lines = [("train", key)] + ([("eval", k) for k in on_loss] if key == "loss" else [])
        panels.append((key, lines))
    panels += [(f"eval: {k}", [("eval", k)]) for k in sorted(evals) if k not in on_loss]
    if not panels:
        raise NeurosymError(f"{run_dir / METRICS}: no numeric metrics to plot")

    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(4.2 * ncols, 3.0 * nrows), layout="constrained")
    for i, (title, lines) in enumerate(panels):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        for kind, key in lines:
            xs, ys = (train if kind == "train" else evals)[key]
            label = key if kind == "train" else f"eval {key}"
            style = {"marker": "o", "markersize": 3} if kind == "eval" or len(xs) < 3 else {}
            ax.plot(xs, ys, label=label, **style)
        ax.set_title(title)
        ax.set_xlabel("step")
        if title == "lr":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        if len(lines) > 1:
            ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
    fig.suptitle(run_dir.name)

    target = Path(out) if out is not None else run_dir / "curves.png"
    if target.suffix.lower() not in IMAGE_SUFFIXES:
        raise NeurosymError(f"{target}: a plot is a {' or '.join(IMAGE_SUFFIXES)} file")
    buf = io.BytesIO()
    fig.savefig(buf, format=target.suffix.lower()[1:], dpi=100, metadata=image_metadata())
    return atomic_write(target, lambda f: f.write(buf.getvalue()))
