"""The recipe harness: a recipe's variants trained over seeds, resumably, and reported.

Every recipe of ``neurosym reproduce`` (semantic-fusion, semantic-KL, idea gating) is
the same loop: for each seed and variant, build the run's config, refuse or reuse an
earlier run folder (:func:`~neurosym.lm.train.earlier_run`), train it with
:class:`~neurosym.lm.train.Trainer` (a finished run is reused, an unfinished one
resumed), record its figures and say how long the rest will take. That loop is
:func:`train_grid`; a recipe keeps only what is its own: its data, its variants (how
each builds its config) and its report. The harness also gives the pieces the reports
share: the mean and spread of each figure over seeds (:func:`summarise`), Welch's
t-test (:func:`welch`) and the verdict words it allows (:func:`verdict`, at
:data:`ALPHA`), 95% intervals (:func:`wilson`, :func:`mean_ci`,
:func:`diff_ci`), Markdown tables (:func:`markdown_table`, :func:`mean_std`),
interleaved step times (:func:`step_times`), training curves (:func:`plot_curves`),
PNG and JSON files written atomically (:func:`save_png`, :func:`save_json`). The
structured suite does not train through :class:`~neurosym.lm.train.Trainer` (its runs
are small, parallel and stored one JSON file each), so it keeps its own loop and report
(:mod:`neurosym.experiments.suite_report`).

A recipe hands :func:`train_grid`::

    config(variant, seed) -> Config          # the run folder must differ per variant and seed
    task(config) -> TrainingTask             # the trainer's task
    measure(run) -> dict (optional)          # figures read off the trained model (generation...)
    describe(figures) -> str (optional)      # the progress line after a run

and gets back ``{variant: [Run, ...]}`` in seed order. :class:`Progress` counts runs
over a whole recipe (several datasets = several grids) for the ``[k/n]`` lines and the
time left, and with ``bar=True`` draws one progress bar over every run's training steps
(the whole grid's time left, from the steps timed so far).
"""

from __future__ import annotations

import io
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from neurosym.errors import NeurosymError
from neurosym.files import atomic_write
from neurosym.lm.config import Config
from neurosym.lm.train import FitResult, Trainer, TrainingTask, earlier_run, interleaved_step_seconds, param_groups, seed_all

REPORT_FILE = "report.json"
ALPHA = 0.05  # the significance threshold of every recipe's verdict words (:func:`verdict`)
NO_DIFFERENCE = "no difference detected"


@dataclass
class Run:
    """One trained (or reused) run of a grid."""

    variant: str
    seed: int
    config: Config
    task: TrainingTask
    model: nn.Module
    result: FitResult
    figures: dict[str, Any]  # the last evaluation's figures, seed, seconds, run_dir, train_loss (+ measure's)

    @property
    def params(self) -> int:
        """Parameters of the model, each tied Parameter counted once."""
        return sum(p.numel() for p in self.model.parameters())

    @property
    def how(self) -> str:
        """How the run came to be: trained, resumed from step N, or finished earlier and reused."""
        r = self.result
        if r.resumed_from is None:
            return "trained"
        return "finished earlier, reused" if r.resumed_from == r.steps else f"resumed from step {r.resumed_from}"


class Progress:
    """``[k/n] label`` before each run and ``how: line; about M min left`` after it, over
    ``total`` runs (the mean time per run so far times the runs left). ``say=None`` is
    silent.

    With ``bar=True`` it also draws one tqdm bar over the training steps of every run of
    the grid (:func:`train_grid` hands :meth:`step` to each trainer as a callback), in
    place of each run's own bar: its time estimate is the whole grid's, counted from the
    steps timed so far. The steps of a run are known once its trainer has taken its first
    step; runs not started yet are assumed to have as many as the first run had (true
    when every run trains on the same data), and corrected when they start; a run
    finished earlier (reused) counts for none."""

    def __init__(self, total: int, say: Callable[[str], None] | None, bar: bool = False):
        self.total, self.say = total, say
        self.done = 0
        self.spent: list[float] = []
        self.with_bar = bar
        self.bar: tqdm | None = None  # made at the grid's first training step
        self.per_run = 0  # steps assumed for each run not started yet (the first run's)
        self.counted = False  # whether the current run's steps are in the bar's total yet
        self.label = ""  # the current run's, beside the bar

    def start(self, label: str, resuming: bool) -> None:
        self.counted = False
        self.label = label
        self.tell(f"[{self.done + 1}/{self.total}] {label}" + (" (resuming)" if resuming else ""))

    def step(self, trainer: Trainer, step: int) -> None:
        """A :class:`~neurosym.lm.train.Trainer` callback: one more step on the bar."""
        if not self.with_bar:
            return
        if not self.counted:  # this run's first step here: its steps are known now
            todo = trainer.total_steps - step + 1  # this step and those after it
            if self.bar is None:
                self.per_run = trainer.total_steps
                later = self.total - self.done - 1
                # the first step is counted as done at once: the bar times the steps after it
                self.bar = tqdm(total=todo + later * self.per_run, initial=1, desc="training", unit="step", dynamic_ncols=True,
                                smoothing=0.05, file=sys.stderr, postfix=self.label)
                self.counted = True
                return
            self.bar.total += todo - self.per_run
            self.bar.set_postfix_str(self.label, refresh=False)
            self.counted = True
        self.bar.update(1)

    def finish(self, seconds: float, line: str) -> None:
        self.done += 1
        self.spent.append(seconds)
        if self.bar is not None and not self.counted:  # reused: none of the steps assumed for it
            self.bar.total -= self.per_run
            self.bar.refresh()
        left = statistics.fmean(self.spent) * (self.total - self.done)
        self.tell(f"      {line}" + (f"; about {left / 60:.1f} min left" if self.done < self.total else ""))
        if self.done == self.total:
            self.close()

    def close(self) -> None:
        """Close the bar (after the last run, or when the grid stops early)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def tell(self, line: str) -> None:
        """``say(line)``, above the bar when there is one."""
        if not self.say:
            return
        if self.bar is None:
            self.say(line)
            return
        with self.bar.external_write_mode(file=sys.stderr):
            self.say(line)

    @property
    def minutes_left(self) -> float:
        """The estimate of the last line (0 before any run)."""
        return statistics.fmean(self.spent) * (self.total - self.done) / 60 if self.spent else 0.0


def train_grid(
    variants: Sequence[str],
    seeds: int,
    config: Callable[[str, int], Config],
    task: Callable[[Config], TrainingTask],
    *,
    resume: bool = False,
    progress: Progress | None = None,
    label: Callable[[str, int], str] = lambda v, seed: f"{v}, seed {seed}",
    measure: Callable[[Run], Mapping[str, Any]] | None = None,
    describe: Callable[[dict], str] | None = None,
    jobs: int = 1,
) -> dict[str, list[Run]]:
    """Train every variant for seeds ``0 .. seeds - 1`` (seed-major: all variants of seed 0
    first); ``{variant: [Run per seed]}``. An existing run folder is an error unless
    ``resume`` (then a finished run is reused and an unfinished one resumed).

    With ``jobs`` > 1 the runs are first trained ``jobs`` at a time in worker processes
    (:func:`train_in_parallel`; ``task`` must then be picklable: a module-level function
    or class), then reused here in order and measured; the figures are the same as one
    at a time (each run is seeded by its config and trained with its own thread count)."""
    if jobs > 1:
        train_in_parallel([config(v, seed) for seed in range(seeds) for v in variants], task, jobs, resume=resume,
                          say=progress.tell if progress else None)
        resume = True  # every run is finished now: the loop below reuses and measures them
    runs: dict[str, list[Run]] = {v: [] for v in variants}
    for seed in range(seeds):
        for v in variants:
            cfg = config(v, seed)
            exists = earlier_run(cfg, resume)
            if progress:
                progress.start(label(v, seed), exists)
            started = time.monotonic()
            try:
                t = task(cfg)
                trainer = Trainer(cfg, t, callbacks=[progress.step] if progress and progress.with_bar else ())
                result = trainer.fit(resume=exists)
            except BaseException:  # an error or Ctrl-C: its message goes below the bar, not into it
                if progress:
                    progress.close()
                raise
            figures: dict[str, Any] = {k: float(val) for k, val in result.eval.items()}
            figures.update(seed=seed, seconds=result.seconds, run_dir=str(result.run_dir), train_loss=result.loss)
            run = Run(v, seed, cfg, t, trainer.model, result, figures)
            if measure is not None:
                figures.update(measure(run))
            runs[v].append(run)
            if progress:
                text = describe(figures) if describe else f"{figures['seconds']:.0f} s of training"
                progress.finish(time.monotonic() - started, f"{run.how}: {text}")
    return runs


def _fit_one(config: dict[str, Any], task: Callable[[Config], TrainingTask]) -> tuple[float, int | None, int]:
    """A worker of :func:`train_in_parallel`: train (or resume, or reuse) one run; its
    seconds, the step it resumed from and its steps."""
    cfg = Config.from_dict(config)
    result = Trainer(cfg, task(cfg)).fit(resume=(cfg.run_dir / "last.pt").exists())
    return result.seconds, result.resumed_from, result.steps


def train_in_parallel(configs: Sequence[Config], task: Callable[[Config], TrainingTask], jobs: int, *, resume: bool = False,
                      say: Callable[[str], None] | None = None) -> None:
    """Train every config's run, ``jobs`` at a time, each in its own (spawned) process with
    the config's thread count; an unfinished run is resumed and a finished one left as it
    is. An existing run folder is an error unless ``resume`` (checked for all before any
    starts); a worker's error is raised here once the runs under way have stopped."""
    import multiprocessing  # lazy: only parallel grids need it
    import pickle  # lazy: as above
    from concurrent.futures import ProcessPoolExecutor, as_completed  # lazy: as above

    if jobs < 1:
        raise NeurosymError(f"--jobs: expected at least 1, got {jobs}")
    for cfg in configs:
        earlier_run(cfg, resume)
    try:
        pickle.dumps(task)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise NeurosymError(f"--jobs {jobs}: the recipe's task {task!r} cannot be sent to a worker process ({e}); use --jobs 1") from None
    todo = [c.to_dict() for c in configs]
    for c in todo:
        c["log"] = {**c["log"], "progress": False}  # no per-run bars from the workers
    if say:
        say(f"training {len(todo)} runs, {min(jobs, len(todo))} at a time in worker processes")
    ctx = multiprocessing.get_context("spawn")  # no forked torch thread pools
    with ProcessPoolExecutor(min(jobs, len(todo)), mp_context=ctx) as pool:
        futures = {pool.submit(_fit_one, c, task): c["run"]["name"] for c in todo}
        for k, fut in enumerate(as_completed(futures), 1):
            if fut.exception() is not None:  # the runs not started yet are dropped; those under way finish
                pool.shutdown(cancel_futures=True)
                raise fut.exception()
            seconds, resumed_from, steps = fut.result()
            how = "trained" if resumed_from is None else "finished earlier" if resumed_from == steps else f"resumed from step {resumed_from}"
            if say:
                say(f"  [{k}/{len(todo)}] {futures[fut]}: {how}, {seconds:.0f} s of training")


# ---------------------------------------------------------------------- statistics
def summarise(rows: Sequence[Mapping[str, Any]], keys: Iterable[str], finite_only: bool = False) -> dict[str, float]:
    """Mean and sample standard deviation (``KEY_std``, 0 with one value) of each key over
    the rows (one per seed). Keys the first row lacks are left out; with ``finite_only``,
    None and NaN values are dropped (a key with none left is left out), else a NaN makes
    both NaN."""
    out: dict[str, float] = {}
    for k in keys:
        if finite_only:
            vals = [r[k] for r in rows if r.get(k) is not None and not math.isnan(r[k])]
        elif rows and k in rows[0]:
            vals = [r[k] for r in rows]
        else:
            vals = []
        if vals:
            out[k] = statistics.fmean(vals)
            spread = math.nan if any(math.isnan(x) for x in vals) else statistics.stdev(vals) if len(vals) > 1 else 0.0
            out[f"{k}_std"] = spread  # (statistics.stdev fails on NaN rather than giving it)
    return out


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Welch's t-test of mean(a) != mean(b) (scipy.stats.ttest_ind, equal_var=False):
    ``{t, p}``; NaN with fewer than two values on a side."""
    if len(a) < 2 or len(b) < 2:
        return {"t": math.nan, "p": math.nan}
    from scipy import stats  # lazy: scipy.stats takes ~0.5 s to import and only the report needs it

    res = stats.ttest_ind(list(a), list(b), equal_var=False)
    return {"t": float(res.statistic), "p": float(res.pvalue)}


def verdict(diff: float, p: float, lower_is_better: bool = True, alpha: float = ALPHA) -> str:
    """The verdict word of a comparison, from its test: "better" or "worse" (the sign of
    ``diff`` = variant - reference, read with ``lower_is_better``) only when ``p < alpha``;
    otherwise, and whenever p is NaN (one seed), :data:`NO_DIFFERENCE`. A mean difference
    alone never makes a verdict."""
    if not (math.isfinite(p) and math.isfinite(diff)) or p >= alpha or diff == 0:
        return NO_DIFFERENCE
    return "better" if (diff < 0) == lower_is_better else "worse"


def verdict_sentence(diff: float, p: float, lower_is_better: bool = True, alpha: float = ALPHA) -> str:
    """:func:`verdict` with its test beside it: ``better (p = 0.007 < 0.05)``,
    ``no difference detected (p = 0.082, not below 0.05)``, ``no difference detected (no
    t-test with one seed)``."""
    word = verdict(diff, p, lower_is_better, alpha)
    if not math.isfinite(p):
        return f"{word} (no t-test with one seed)"
    return f"{word} (p = {p:.2g} < {alpha:g})" if p < alpha and word != NO_DIFFERENCE else f"{word} (p = {p:.2g}, not below {alpha:g})"


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson 95% interval of a proportion k / n ((nan, nan) for n = 0)."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def mean_ci(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and Student-t 95% interval: (mean, lo, hi)."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    m = statistics.fmean(values)
    if n == 1:
        return m, math.nan, math.nan
    from scipy import stats  # lazy: only the report needs it

    half = stats.t.ppf(0.975, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return m, m - half, m + half


def diff_ci(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """mean(a) - mean(b) with a Welch 95% interval: (difference, lo, hi)."""
    if len(a) < 2 or len(b) < 2:
        return statistics.fmean(a) - statistics.fmean(b) if a and b else math.nan, math.nan, math.nan
    from scipy import stats  # lazy

    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    d = statistics.fmean(a) - statistics.fmean(b)
    if se == 0:
        return d, d, d
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = stats.t.ppf(0.975, dof) * se
    return d, d - half, d + half


def step_times(
    variants: Sequence[str], config: Callable[[str], Config], task: Callable[[Config], TrainingTask], lr: float, weight_decay: float,
    repeats: int = 30, warmup: int = 3, threads: int | None = None,
) -> dict[str, dict[str, float]]:
    """Milliseconds per training step (forward, losses, backward, AdamW step) of each
    variant, measured in this process under the same conditions: each model (seed 0) on
    its task's first batch, the same thread count, steps interleaved across variants (so
    load changes hit all alike). ``{variant: {median_ms, min_ms, params}}``."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        setups = []
        for v in variants:
            cfg = config(v)
            t = task(cfg)
            seed_all(0)
            net = t.build_model(cfg)
            opt = torch.optim.AdamW(param_groups(net, weight_decay), lr=lr)
            setups.append((v, t, net, opt, next(iter(t.train_batches(0, torch.Generator().manual_seed(0))))))
        times = interleaved_step_seconds(setups, repeats=repeats, warmup=warmup)
        return {v: {"median_ms": 1000 * statistics.median(times[v]), "min_ms": 1000 * min(times[v]),
                    "params": sum(p.numel() for p in net.parameters())}
                for v, _, net, _, _ in setups}
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------- tables, plots, files
def mean_std(m: Mapping[str, float], key: str, fmt: str = ".4f") -> str:
    """``mean ± std`` of ``key`` (its ``KEY_std`` beside it) in ``fmt``; "—" when absent."""
    return f"{m[key]:{fmt}} ± {m[key + '_std']:{fmt}}" if key in m else "—"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The lines of a Markdown table (left-aligned columns)."""
    return ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |",
            *("| " + " | ".join(row) + " |" for row in rows)]


def save_png(fig, path: str | Path, dpi: int = 100) -> Path:
    """A matplotlib figure written atomically as a PNG (folders made as needed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return atomic_write(path, lambda f: f.write(buf.getvalue()))


def save_json(report: Mapping[str, Any], out_dir: str | Path, name: str = REPORT_FILE) -> Path:
    """The report as ``out_dir/report.json`` (non-JSON values as their ``str``), atomically."""
    text = json.dumps(report, indent=2, ensure_ascii=False, default=str)
    return atomic_write(Path(out_dir) / name, lambda f: f.write(text.encode("utf-8")))


def mean_curve(run_dirs: Iterable[str | Path], kind: str, key: str) -> tuple[list[int], list[float]]:
    """The mean over runs of ``key`` on the ``kind`` lines (``train``/``eval``) of their
    metrics.jsonl, per step: (steps, means)."""
    from neurosym.lm.plot import read_metrics  # lazy: with the plots (it imports matplotlib's helpers)

    by_step: dict[int, list[float]] = {}
    for run_dir in run_dirs:
        for line in read_metrics(run_dir):
            if line.get("kind") == kind and key in line:
                by_step.setdefault(line["step"], []).append(line[key])
    steps = sorted(by_step)
    return steps, [statistics.fmean(by_step[s]) for s in steps]


def plot_curves(panels: Mapping[str, Mapping[str, Sequence[str | Path]]], out: str | Path, title: str = "",
                train_key: str = "ce", eval_key: str = "ppl", eval_titles: Mapping[str, str] | None = None) -> Path:
    """Training curves, one row per panel (``{panel: {variant: [run_dir per seed]}}``): the
    training ``train_key`` (mean over seeds) against the step, and the evaluation
    ``eval_key`` at each epoch end, every variant a line; written to ``out`` as a PNG."""
    from matplotlib.figure import Figure  # lazy: matplotlib is slow to import and only plots need it

    fig = Figure(figsize=(9.0, 3.2 * len(panels)), layout="constrained")
    for row, (panel, variants) in enumerate(panels.items()):
        ax_train, ax_eval = fig.add_subplot(len(panels), 2, 2 * row + 1), fig.add_subplot(len(panels), 2, 2 * row + 2)
        for v, dirs in variants.items():
            ax_train.plot(*mean_curve(dirs, "train", train_key), label=v)
            ax_eval.plot(*mean_curve(dirs, "eval", eval_key), marker="o", label=v)
        ax_train.set_title(f"{panel}: training {train_key.upper()} (true next token)")
        ax_eval.set_title((eval_titles or {}).get(panel, f"{panel}: evaluation {eval_key.upper()}"))
        for ax in (ax_train, ax_eval):
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small")
    if title:
        fig.suptitle(title, fontsize="medium")
    return save_png(fig, out)
