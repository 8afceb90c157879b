"""The structured-LM suite's report: the records of its runs summarised (mean ± std over
seeds, the cold start, length generalisation, sample efficiency, compute), and that
summary as Markdown tables (``report.md``), plots (``heatmap.png``, ``length.png``,
``efficiency.png``) and JSON (``results.json``, ``--json``).

The report is self-describing: it names its encoder settings in table order
(``settings``) and the bank-size limit of its regex layers, so a ``results.json`` read
back formats as it did when written. :mod:`neurosym.experiments.structured_suite` runs
the suite and calls :func:`summarise`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from neurosym.files import atomic_write_bytes

FLOPS_CAPTION = (
    "FLOPs are counted by `torch.utils.flop_counter` on one forward pass of 32 test rows: matrix products, convolutions and "
    "attention only. Element-wise work is not counted: the RNN/LSTM/stack recurrences' gates, the WFSA forward algorithm "
    "(gathers and products) and the inside/prefix charts' logsumexp, so those encoders are under-counted. Setup is the "
    "once-per-sentence computation of fixed (hard/removed) PCFG features; milliseconds and seconds are wall time, CPU s "
    "the run's process CPU time."
)


def _mean_std(xs: list[float]) -> tuple[float, float]:
    a = np.asarray(xs, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def summarise(records: list[dict], skipped: dict, not_applicable: dict, sources: dict, budget, seeds: int,
              banks: dict | None = None, settings: Sequence[str] = (), max_bank_states: int | None = None,
              by_construction: dict | None = None, duplicates: dict | None = None) -> dict:
    """The report: ``tasks`` {task: {encoder: {metric: value, metric_std, ..., seeds}}}
    (next-token tasks add ``ppl``), ``families`` {task: family}, ``cold_start``
    {tomitaN: accuracy}, ``cold_start_soft`` (after training), ``by_length``,
    ``sample_efficiency`` {task: {encoder: {share: accuracy}}}, ``compute`` {encoder:
    {params, trainable, flops_per_token, ms_per_step, setup_seconds, cpu_seconds}}
    (medians over tasks), ``cpu_seconds_total`` (every run's CPU time, summed),
    ``banks`` {task: [{class, regex, states, used}]} (``max_bank_states``: the largest
    pattern the layer takes), ``skipped``, ``not_applicable``, ``sources``, ``budget``
    (a dataclass, as a dict), ``settings`` (the encoder settings in report order),
    ``by_construction`` {task: {encoder: why}} (the cells whose prior reads the labelling
    function, among those that ran), ``duplicates`` {task: {test, in_train, share,
    distinct_in_train}} (test inputs also in training)."""
    full = [r for r in records if r["share"] == 1.0]
    group: dict[tuple[str, str], list[dict]] = {}
    for r in full:
        group.setdefault((r["task"], r["encoder"]), []).append(r)
    tasks: dict = {}
    by_length: dict = {}
    for (t, e), rs in group.items():
        cell: dict = {"metric": rs[0].get("metric", "accuracy")}
        for key in rs[0].get("scores", {"accuracy": 0.0}):
            m, s = _mean_std([r.get("scores", {"accuracy": r["accuracy"]})[key] for r in rs])
            cell[key], cell[f"{key}_std"] = m, s
        cell["seeds"] = len(rs)
        tasks.setdefault(t, {})[e] = cell
        if "by_length" in rs[0]:
            by_length.setdefault(t, {})[e] = {k: float(np.mean([r["by_length"].get(k, float("nan")) for r in rs])) for k in rs[0]["by_length"]}
    cold = {t: float(np.mean([r["cold_start"] for r in rs])) for (t, e), rs in group.items() if e == "regex-hard" and "cold_start" in rs[0]}
    soft = {t: float(np.mean([r["accuracy"] for r in rs])) for (t, e), rs in group.items() if e == "regex-soft" and t in cold}
    shares: dict = {}
    for r in records:
        shares.setdefault(r["task"], {}).setdefault(r["encoder"], {}).setdefault(f"{r['share']:g}", []).append(r["accuracy"])
    efficiency = {t: {e: {k: float(np.mean(v)) for k, v in sorted(d.items(), key=lambda kv: float(kv[0]))} for e, d in es.items()}
                  for t, es in shares.items() if any(len(d) > 1 for d in es.values())}
    compute: dict = {}
    for e in dict.fromkeys(r["encoder"] for r in full):
        rs = [r for r in full if r["encoder"] == e]
        compute[e] = {"params": int(np.median([r["params"] for r in rs])), "trainable": int(np.median([r["trainable"] for r in rs])),
                      "flops_per_token": float(np.median([r["flops_per_token"] for r in rs])),
                      "ms_per_step": 1000 * float(np.median([r["seconds_per_step"] for r in rs])), "tasks": len({r["task"] for r in rs}),
                      "setup_seconds": float(np.median([r.get("setup_seconds", 0.0) for r in rs])),
                      "cpu_seconds": float(np.median([r.get("cpu_seconds", float("nan")) for r in rs]))}
    return {
        "tasks": tasks, "families": {r["task"]: r.get("family", "classification") for r in records},
        "cold_start": dict(sorted(cold.items())), "cold_start_soft": dict(sorted(soft.items())),
        "cpu_seconds_total": float(sum(r.get("cpu_seconds", 0.0) for r in records)), "banks": banks or {},
        "by_length": by_length, "sample_efficiency": efficiency, "compute": compute, "skipped": skipped,
        "not_applicable": not_applicable, "sources": sources, "budget": asdict(budget), "seeds": seeds,
        "settings": list(settings) or list(dict.fromkeys(r["encoder"] for r in records)), "max_bank_states": max_bank_states,
        "by_construction": {t: {e: why for e, why in es.items() if e in tasks.get(t, {})} for t, es in (by_construction or {}).items()
                            if any(e in tasks.get(t, {}) for e in es)},
        "duplicates": duplicates or {},
    }


# ---------------------------------------------------------------------- report
def settings_of(report: dict) -> list[str]:
    """The report's encoder settings in table order (a report without ``settings``: in the
    order they first appear)."""
    return report.get("settings") or list(dict.fromkeys(e for row in report["tasks"].values() for e in row))


def _headline(d: dict) -> float:
    return d[d.get("metric", "accuracy")]


def _fmt(d: dict | None, std: bool = True) -> str:
    if not d:
        return "–"
    key = d.get("metric", "accuracy")
    s = f"{100 * d[key]:.1f}"
    return s + (f" ± {100 * d[key + '_std']:.1f}" if std and d.get("seeds", 1) > 1 else "")


def format_report(report: dict) -> str:
    """report.md: the tables."""
    order = settings_of(report)
    encoders = [e for e in order if any(e in row for row in report["tasks"].values())]
    built = report.get("by_construction", {})
    lines = ["# Structured-LM suite", "", f"Budget: {report['budget']}; seeds: {report['seeds']}. Test score (%): accuracy, or the "
             "metric named beside the task; mean ± std over seeds; – = encoder not applicable (see below); "
             "(c) = by construction: the prior reads the function that labelled the data (see below).", ""]
    lines += ["| task | " + " | ".join(encoders) + " |", "| --- |" + " ---: |" * len(encoders)]
    for t, row in report["tasks"].items():
        best = max(_headline(v) for v in row.values())
        metric = next(iter(row.values())).get("metric", "accuracy")
        cells = [(f"**{_fmt(row.get(e))}**" if e in row and _headline(row[e]) == best > 0 else _fmt(row.get(e)))
                 + (" (c)" if e in built.get(t, {}) else "") for e in encoders]
        lines.append(f"| {t}{'' if metric == 'accuracy' else f' ({metric})'} | " + " | ".join(cells) + " |")
    if built:
        lines += ["", "## By construction (c)", "",
                  "These cells read the labelling function itself: they show the prior is exact, not that a prior helps.", ""]
        lines += [f"* {t}, {e}: {why}" for t, es in built.items() for e, why in es.items()]
    if report.get("duplicates"):
        lines += ["", "## Test inputs also in training", "",
                  "Train and test rows of a generated task are drawn independently from one sampler, so a test input may "
                  "also occur in training (inputs only; a repeat may carry another label).", "",
                  "| task | test rows | also in training | share | distinct |", "| --- | ---: | ---: | ---: | ---: |"]
        for t, d in report["duplicates"].items():
            lines.append(f"| {t} | {d['test']:,} | {d['in_train']:,} | {100 * d['share']:.1f}% | {d['distinct_in_train']:,} |")
    lm = {t: row for t, row in report["tasks"].items() if any("ppl" in c for c in row.values())}
    if lm:
        lines += ["", "## Next-token tasks: test accuracy % / perplexity (exp of the mean test cross-entropy)", "",
                  "| task | " + " | ".join(encoders) + " |", "| --- |" + " ---: |" * len(encoders)]
        for t, row in lm.items():
            lines.append(f"| {t} | " + " | ".join(f"{100 * row[e]['accuracy']:.1f} / {row[e]['ppl']:.1f}" if e in row else "–" for e in encoders) + " |")
    if report["cold_start"]:
        lines += ["", "## Cold start (regex bank of the seven compiled Tomita automata)", "",
                  "| task | before training | regex-soft after training |", "| --- | ---: | ---: |"]
        for t, a in report["cold_start"].items():
            s = report["cold_start_soft"].get(t)
            lines.append(f"| {t} | {100 * a:.1f} | {'–' if s is None else f'{100 * s:.1f}'} |")
    if report["by_length"]:
        lines += ["", "## Length generalisation (test score % by test length — seq2seq: by target length; training lengths are shorter)", ""]
        for t, es in report["by_length"].items():
            keys = list(next(iter(es.values())))
            lines += [f"**{t}**", "", "| encoder | " + " | ".join(keys) + " |", "| --- |" + " ---: |" * len(keys)]
            for e in [e for e in order if e in es]:
                lines.append(f"| {e} | " + " | ".join(f"{100 * es[e].get(k, float('nan')):.1f}" for k in keys) + " |")
            lines.append("")
    if report["sample_efficiency"]:
        lines += ["## Sample efficiency (test accuracy % with a share of the training split, same budget)", ""]
        for t, es in report["sample_efficiency"].items():
            keys = list(next(iter(es.values())))
            lines += [f"**{t}**", "", "| encoder | " + " | ".join(f"{float(k):.0%}" for k in keys) + " |", "| --- |" + " ---: |" * len(keys)]
            for e in [e for e in order if e in es]:
                lines.append(f"| {e} | " + " | ".join(f"{100 * es[e][k]:.1f}" if k in es[e] else "–" for k in keys) + " |")
            lines.append("")
    if report.get("banks"):
        lines += ["## Regex banks synthesised from the training splits (`neurosym synth --corpus`)", "",
                  f"Patterns of 2 to {report.get('max_bank_states')} DFA states feed the layer; larger ones (memorised word lists) and "
                  "empty ones (1 state) are listed but not used.", ""]
        for t, entries in report["banks"].items():
            lines += [f"**{t}**", "", "| class | regex | DFA states | used |", "| --- | --- | ---: | --- |"]
            for b in entries:
                shown = b["regex"] if len(b["regex"]) <= 120 else b["regex"][:117] + "..."
                lines.append(f"| {b['class']} | `{shown.replace('|', chr(92) + '|')}` | {b['states']} | {'yes' if b['used'] else 'no'} |")
            lines.append("")
    lines += ["## Compute per encoder (medians over the tasks it ran)", "",
              "| encoder | parameters | trainable | forward FLOPs / token | ms / training step | setup s | CPU s / run |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for e, c in report["compute"].items():
        lines.append(f"| {e} | {c['params']:,} | {c['trainable']:,} | {c['flops_per_token']:,.0f} | {c['ms_per_step']:.1f} | "
                     f"{c.get('setup_seconds', 0.0):.1f} | {c.get('cpu_seconds', float('nan')):.1f} |")
    lines += ["", FLOPS_CAPTION, "", f"CPU time of every run, summed: {report.get('cpu_seconds_total', 0.0) / 60:.1f} min."]
    lines += ["", "## Data", ""] + [f"* {t}: {s}" for t, s in report["sources"].items()]
    lines += ["", "## Skipped tasks", ""] + [f"* {t}: {r}" for t, r in report["skipped"].items()]
    if report["not_applicable"]:
        reasons: dict[str, set] = {}
        for t, es in report["not_applicable"].items():
            for e, r in es.items():
                reasons.setdefault(r, set()).add(e)
        lines += ["", "## Encoders not applicable", ""] + [f"* {', '.join(sorted(es))}: {r}" for r, es in reasons.items()]
    return "\n".join(lines) + "\n"


def plot_report(report: dict, out_dir: str | Path) -> list[Path]:
    """heatmap.png (task x encoder test score), length.png and efficiency.png curves."""
    import matplotlib  # lazy: only the plots need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: as above

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    tasks = list(report["tasks"])
    order = settings_of(report)
    encoders = [e for e in order if any(e in report["tasks"][t] for t in tasks)]
    if tasks and encoders:
        grid = np.full((len(tasks), len(encoders)), np.nan)
        for i, t in enumerate(tasks):
            for j, e in enumerate(encoders):
                if e in report["tasks"][t]:
                    grid[i, j] = 100 * _headline(report["tasks"][t][e])
        fig, ax = plt.subplots(figsize=(1.0 + 0.8 * len(encoders), 0.8 + 0.35 * len(tasks)))
        im = ax.imshow(grid, cmap="viridis", vmin=np.nanmin(grid), vmax=100, aspect="auto")
        ax.set_xticks(range(len(encoders)), encoders, rotation=45, ha="right")
        ax.set_yticks(range(len(tasks)), tasks)
        for i in range(len(tasks)):
            for j in range(len(encoders)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=7, color="w" if grid[i, j] < 75 else "k")
        fig.colorbar(im, ax=ax, label="test score % (the task's metric: accuracy, F1, UAS, exact match)")
        fig.tight_layout()
        paths.append(out_dir / "heatmap.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    for key, name, xlabel in (("by_length", "length.png", "test length"), ("sample_efficiency", "efficiency.png", "share of training data")):
        block = report[key]
        if not block:
            continue
        n = len(block)
        cols = min(4, n)
        rows = -(-n // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
        for ax, (t, es) in zip(axes.flat, block.items()):
            for e in [e for e in order if e in es]:
                xs = list(es[e])
                ax.plot(range(len(xs)), [100 * es[e][k] for k in xs], marker="o", label=e)
                ax.set_xticks(range(len(xs)), xs if key == "by_length" else [f"{float(k):.0%}" for k in xs], fontsize=7)
            ax.set_title(t, fontsize=9)
            ax.set_xlabel(xlabel, fontsize=8)
            ax.set_ylim(0, 101)
        for ax in list(axes.flat)[n:]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=6)
        fig.tight_layout()
        paths.append(out_dir / name)
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths


def write_report(report: dict, out_dir: str | Path) -> Path:
    """report.md beside results.json, with the plots linked."""
    out_dir = Path(out_dir)
    plots = plot_report(report, out_dir)
    text = format_report(report) + "\n## Plots\n\n" + "\n".join(f"![{p.stem}]({p.name})" for p in plots) + "\n"
    return atomic_write_bytes(out_dir / "report.md", text.encode())


def json_report(report: dict) -> dict:
    """The ``--json`` view: everything in the report (it is plain JSON already)."""
    return dict(report)
