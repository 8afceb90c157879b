"""The semantic-KL recipe: a CE baseline against semantic-KL LMs on real text, as configs
of the built-in language-model task (``[run] task = "lm"``, :mod:`neurosym.lm.task`).

Every variant of every dataset and seed is one ``lm``-task config (:func:`recipe_config`),
saved in its run folder, so ``neurosym eval RUN --split test`` works on a recipe run; the
seeds x variants grid is :func:`neurosym.experiments.harness.train_grid`. The models
differ only in ``[objective]``: none (cross-entropy), or ``semantic_kl = { lambda,
temperature, schedule, temperature_end, similarity }`` (``lambda * KL(softmax(sim(W[y],
W) / T) || p) + (1 - lambda) * CE``, :func:`~neurosym.lm.semantic_kl.semantic_kl_terms`).
Same architecture, data, optimizer and number of steps.

Two datasets (:func:`dataset_files` says which files; ``data_dir`` points at other copies):

* ``wikitext-2``, **the standard protocol** when the folder (``--data``, else the shared
  data folder ``../shared/data``) has ``train.txt``: train on train.txt, evaluate every
  epoch on valid.txt (where settings are chosen), report on the whole of test.txt, with the
  vocabulary of the standard files (every word type of train.txt, ``min_freq = 1``:
  33,278 types with ``<unk>`` and ``<eos>``, plus ``<pad>``). Without train.txt, **the
  fallback**: train on valid.txt (the shipped copy), report on the first 1,000 windows of
  test.txt (64,000 tokens), ``min_freq = 5``; every table and JSON labels it
  (``"train_split": "valid (fallback)"``).
* ``ud-english-ewt``: train on the UD English-EWT train sentences, report on test (all 424
  windows); valid = dev when the folder has it. One sentence per line, ``<eos>`` after each.

Text streams are ``doc <eos> doc <eos> ...`` (``[data] bos = false``) cut into windows of
``window`` tokens (stride = window). PPL counts every target of the reported windows
(``<unk>`` and ``<eos>`` included). Besides PPL the task reports (:meth:`LMTask.figures
<neurosym.lm.task.LMTask.figures>`) top-1 and the **ECE** of the top-1 probability,
**embedding health** of the tied W's word rows, and the **same-POS miss rate** on UD
English-EWT test (``[data] pos``; for the WikiText model too: its vocabulary reads the UD
test text), each word's majority UPOS from UD train (``[data] pos_tags``).

Budgets (:data:`BUDGETS`): ``quick`` (the published 1-epoch CPU model), ``cpu`` (a model
that trains one full epoch of WikiText-2's 2,088,628-token train split in at most 10
minutes on one core, docs/semantic_kl.md), and the ``--gpu`` configuration.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from neurosym.data import shared_data_dir
from neurosym.data.text import corpus_path
from neurosym.errors import NeurosymError
from neurosym.experiments import harness
from neurosym.lm.config import Config
from neurosym.lm.task import LMTask
from neurosym.lm.metrics import pool_reliability

DATASETS = ("wikitext-2", "ud-english-ewt")
STANDARD, FALLBACK = "train", "valid (fallback)"  # the "train_split" of WikiText-2's two modes
DATA_NOTE = {
    ("wikitext-2", STANDARD): "the standard protocol: trained on WikiText-2 train.txt, settings chosen on valid.txt, reported on test.txt",
    ("wikitext-2", FALLBACK): "the fallback (no train.txt): trained on WikiText-2 valid.txt, reported on test.txt",
    ("ud-english-ewt", "train"): "trained on UD English-EWT train, reported on test",
}

RECIPE_OPTIM = {"lr": 1e-3, "weight_decay": 0.01, "warmup": 0.05, "clip": 1.0, "batch_size": 32, "epochs": 1}
RECIPE_THREADS = 1  # one seed of one model in about a minute of one quiet core; results depend on the thread count
# the architecture of the published CPU recipe (LMConfig's defaults but 2 layers)
RECIPE_MODEL = {"d_model": 128, "n_layers": 2, "n_heads": 4, "d_ff": 256, "dropout": 0.1, "positions": "sinusoidal"}
RECIPE_DATA = {"window": 64, "min_freq": 5, "max_eval_windows": 1000}  # fallback WikiText-2: the first 64,000 test tokens; UD test: all 424 windows
STANDARD_DATA = {"min_freq": 1, "max_eval_windows": None}  # WikiText-2 by the standard protocol: its whole vocabulary, the whole test split
# name -> [objective] table; every semantic-KL variant mixes lambda = 0.5 with CE, cosine similarity
VARIANTS: dict[str, dict] = {
    "baseline": {},
    "kl-T0.05": {"semantic_kl": {"lambda": 0.5, "temperature": 0.05}},
    "kl-T0.1": {"semantic_kl": {"lambda": 0.5, "temperature": 0.1}},
    "kl-T0.2": {"semantic_kl": {"lambda": 0.5, "temperature": 0.2}},
    "kl-cos-0.3-to-0.05": {"semantic_kl": {"lambda": 0.5, "temperature": 0.3, "temperature_end": 0.05, "schedule": "cosine"}},
    "kl-dot-T1": {"semantic_kl": {"lambda": 0.5, "similarity": "dot", "temperature": 1.0}},
}
MAIN = ("baseline", "kl-T0.1", "kl-T0.2", "kl-cos-0.3-to-0.05")
METRICS = ("ppl", "same_pos_miss", "top1", "ece", "mean_cosine", "effective_rank", "valid_ppl")
# The larger configuration for a GPU (docs/semantic_kl.md): reproduce(..., model=GPU_MODEL, data=GPU_DATA, optim=GPU_OPTIM, device="cuda")
GPU_MODEL = {"d_model": 512, "n_layers": 6, "n_heads": 8, "d_ff": 2048, "dropout": 0.2}
GPU_DATA = {"window": 256, "min_freq": 1, "max_eval_windows": None}  # the whole test split
GPU_OPTIM = {"lr": 5e-4, "batch_size": 32, "epochs": 20}
# Named budgets: {model, optim} over the recipe's (docs/semantic_kl.md has the timings behind "cpu")
BUDGETS: dict[str, dict[str, dict]] = {
    "quick": {"model": {}, "optim": {}},
    "cpu": {"model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 256, "dropout": 0.1}, "optim": {"epochs": 1}},
}


def _found(dataset: str, split: str, root: str | Path | None) -> Path | None:
    """``corpus_path`` of a split, or None where ``root`` lacks it (or, shipped, it is not shipped)."""
    try:
        return corpus_path(dataset, split, root)
    except NeurosymError:
        return None


def dataset_files(dataset: str, data_dir: str | Path | None = None) -> dict:
    """The files one dataset's runs read, and the protocol: ``{train, valid (or None), test,
    pos, pos_tags, train_split, eval_split, note}`` (absolute paths). WikiText-2 follows the
    standard protocol when ``data_dir`` (else the shared data folder) has train.txt, else
    the fallback on the shipped valid.txt (see the module doc)."""
    if dataset not in DATASETS:
        raise NeurosymError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")
    if data_dir is not None and not Path(data_dir).is_dir():
        raise NeurosymError(f"--data {data_dir}: no such folder")
    ud_root = data_dir if dataset == "ud-english-ewt" else None
    out: dict = {"pos": corpus_path("ud-english-ewt", "test", ud_root), "pos_tags": corpus_path("ud-english-ewt", "train", ud_root)}
    if dataset == "wikitext-2":
        root = data_dir if data_dir is not None else shared_data_dir()
        train = _found(dataset, "train", root) if root is not None else None
        if train is not None:
            out.update(train=train, valid=corpus_path(dataset, "valid", root), test=corpus_path(dataset, "test", root), train_split=STANDARD)
        else:
            out.update(train=corpus_path(dataset, "valid", data_dir), valid=None, test=corpus_path(dataset, "test", data_dir),
                       train_split=FALLBACK)
    else:
        out.update(train=corpus_path(dataset, "train", data_dir), valid=_found(dataset, "dev", data_dir) if data_dir else None,
                   test=corpus_path(dataset, "test", data_dir), train_split="train")
    out["eval_split"] = "test"
    out["note"] = DATA_NOTE[(dataset, out["train_split"])]
    return {k: str(Path(v).resolve()) if isinstance(v, Path) else v for k, v in out.items()}


def recipe_config(
    variant: str, dataset: str, seed: int, out_dir: str | Path = "runs/semantic-kl", model: dict | None = None,
    data: dict | None = None, optim: dict | None = None, threads: int | None = RECIPE_THREADS, device: str = "cpu",
    progress_bar: bool = False, data_dir: str | Path | None = None,
) -> Config:
    """The ``lm``-task config of one variant (a key of :data:`VARIANTS`), dataset and seed;
    ``model``, ``data`` and ``optim`` entries override the recipe's; ``data_dir`` as in
    :func:`dataset_files`."""
    if variant not in VARIANTS:
        raise NeurosymError(f"unknown semantic-KL variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    files = dataset_files(dataset, data_dir)
    text = {"train": files["train"], "test": files["test"], "pos": files["pos"], "pos_tags": files["pos_tags"], "bos": False,
            "tokenizer": "word", **({"valid": files["valid"]} if files["valid"] else {}),
            **({"format": "tagged"} if dataset == "ud-english-ewt" else {})}
    standard = STANDARD_DATA if (dataset, files["train_split"]) == ("wikitext-2", STANDARD) else {}
    return Config.from_dict({
        "run": {"name": f"{dataset}-{variant}-seed{seed}", "out_dir": str(out_dir), "seed": seed, "threads": threads,
                "device": device, "task": "lm"},
        "model": {**RECIPE_MODEL, **(model or {})},
        "data": {**RECIPE_DATA, **standard, **(data or {}), **text},
        "objective": VARIANTS[variant],
        "optim": {**RECIPE_OPTIM, **(optim or {})},
        "log": {"every": 10, "checkpoint_every": 100, "progress": progress_bar},
    })


def task(config: Config) -> LMTask:
    """The run's task: the built-in ``lm`` task."""
    return LMTask(config)


def measure(run: harness.Run) -> dict:
    """The reported figures of a trained run: its test split (:meth:`LMTask.figures`), with
    the last validation figures kept as ``valid_*``."""
    valid = {f"valid_{k}": v for k, v in run.figures.items() if k in ("ppl", "nll", "top1", "ece", "same_pos_miss")}
    return {**run.task.figures(run.model, "test", reliability=True), **valid}


def reproduce(
    seeds: int = 3,
    out_dir: str | Path = "runs/semantic-kl",
    datasets: Sequence[str] = DATASETS,
    variants: Sequence[str] = MAIN,
    progress: Callable[[str], None] | None = print,
    resume: bool = False,
    model: dict | None = None,
    data: dict | None = None,
    optim: dict | None = None,
    threads: int | None = RECIPE_THREADS,
    device: str = "cpu",
    data_dir: str | Path | None = None,
    budget: str = "quick",
    jobs: int = 1,
) -> dict:
    """Train every variant on every dataset for ``seeds`` seeds (``jobs`` at a time in worker
    processes, see :func:`~neurosym.experiments.harness.train_grid`); the report: per dataset
    ``data`` (what was trained, chosen on and reported on, vocabulary, windows), then per
    variant the mean and ``_std`` of :data:`METRICS`, ``params`` and the per-seed runs,
    Welch's test of each variant against the baseline (``welch``), and the semantic-KL
    variant with the lowest validation PPL (``chosen_on_valid``, when there is a valid split)."""
    bad = [v for v in variants if v not in VARIANTS] + [d for d in datasets if d not in DATASETS]
    if bad or len(set(variants)) != len(variants) or "baseline" not in variants:
        raise NeurosymError(f"variants: expected distinct names among {', '.join(VARIANTS)} including baseline, and datasets among "
                            f"{', '.join(DATASETS)}; got {', '.join(variants)} / {', '.join(datasets)}")
    if budget not in BUDGETS:
        raise NeurosymError(f"--budget: expected one of {', '.join(BUDGETS)}, got {budget!r}")
    model = {**BUDGETS[budget]["model"], **(model or {})}
    optim = {**BUDGETS[budget]["optim"], **(optim or {})}
    report: dict = {"seeds": seeds, "threads": threads, "variants": list(variants), "datasets": list(datasets), "budget": budget}
    counter = harness.Progress(seeds * len(variants) * len(datasets), progress)
    for dataset in datasets:
        grid = harness.train_grid(
            variants, seeds,
            lambda v, seed: recipe_config(v, dataset, seed, out_dir, model, data, optim, threads, device,  # noqa: B023
                                          progress_bar=progress is not None, data_dir=data_dir),
            task, resume=resume, progress=counter, label=lambda v, seed: f"{dataset}, {v}, seed {seed}",  # noqa: B023
            measure=measure, jobs=jobs,
            describe=lambda f: f"ppl {f['ppl']:.2f}, same-POS miss {f['same_pos_miss']:.4f}, {f['seconds']:.0f} s of training",
        )
        run = grid[variants[-1]][-1]
        t = run.task
        files = dataset_files(dataset, data_dir)
        runs = {v: [r.figures for r in rs] for v, rs in grid.items()}
        saved = run.config.to_dict()
        section: dict = {"data": {
            "dataset": dataset, "note": files["note"], "train_split": files["train_split"], "eval_split": files["eval_split"],
            "valid_split": "valid" if files["valid"] else None, "files": {k: files[k] for k in ("train", "valid", "test")},
            "vocab_size": len(t.vocab), "train_windows": len(t.train_windows()[0]), "eval_windows": len(t.eval_windows("test")[0]),
            "window": t.data_cfg.window, "same_pos_on": "UD English-EWT test (majority UPOS from UD train)",
            "config": {"model": saved["model"], "data": {k: v for k, v in saved["data"].items() if k not in files},
                       "objective": "per variant", "optim": saved["optim"]},
        }}
        for v, rows in runs.items():
            section[v] = harness.summarise(rows, METRICS)
            section[v].update(params=grid[v][-1].params, overrides=VARIANTS[v], runs=rows)
            if all("reliability" in r for r in rows):  # the test tokens of every seed in one diagram
                section[v]["reliability"] = pool_reliability([r["reliability"] for r in rows])
        base = runs["baseline"]
        section["welch"] = {
            v: {k: harness.welch([r[k] for r in runs[v]], [r[k] for r in base]) for k in ("ppl", "same_pos_miss")}
            for v in variants if v != "baseline"
        }
        kl = [v for v in variants if v != "baseline" and "valid_ppl" in section[v]]
        if kl:
            section["chosen_on_valid"] = min(kl, key=lambda v: section[v]["valid_ppl"])
        report[dataset] = section
    harness.save_json(json_report(report), out_dir)
    return report


def verdict(section: dict, variant: str, metric: str, higher_is_better: bool) -> str:
    """better / worse / "no difference detected" of ``variant`` against the baseline on
    ``metric``: Welch's test over the per-seed runs, "better" or "worse" only when p <
    :data:`~neurosym.experiments.harness.ALPHA` (:func:`~neurosym.experiments.harness.verdict`)."""
    b, v = section["baseline"], section[variant]
    w = harness.welch([r[metric] for r in v["runs"]], [r[metric] for r in b["runs"]])
    return harness.verdict(v[metric] - b[metric], w["p"], lower_is_better=not higher_is_better)


def format_report(r: dict) -> str:
    """The report as one Markdown table per dataset and a verdict line per variant."""
    budget = f"budget {r['budget']}, " if "budget" in r else ""
    lines = [f"semantic KL against a CE baseline ({r['seeds']} seed(s), {budget}{r['threads']} thread(s); mean ± std over seeds; "
             f"verdicts: \"better\"/\"worse\" only when Welch's p < {harness.ALPHA:g} over the seeds, else \"{harness.NO_DIFFERENCE}\")"]
    for dataset in r["datasets"]:
        s = r[dataset]
        d = s["data"]
        lines += ["", f"**{dataset}** (train split: {d['train_split']}): {d['note']}; vocabulary {d['vocab_size']:,}, {d['train_windows']:,} training windows of "
                  f"{d['window']} tokens, PPL over {d['eval_windows']:,} evaluation windows ({d['eval_windows'] * d['window']:,} tokens); "
                  f"same-POS miss rate on {d['same_pos_on']}", ""]
        formats = {"ppl": ".2f", "same_pos_miss": ".4f", "top1": ".4f", "ece": ".4f", "mean_cosine": ".4f", "effective_rank": ".1f"}
        lines += harness.markdown_table(
            ["model", "PPL", "same-POS miss", "top-1", "ECE", "mean cos(W)", "eff. rank(W)", "parameters"],
            ([v, *(harness.mean_std(s[v], k, f) for k, f in formats.items()), f"{s[v]['params']:,}"] for v in r["variants"]))
        lines.append("")
        if "chosen_on_valid" in s:
            c = s["chosen_on_valid"]
            lines += [f"- chosen on valid: {c} (validation PPL {s[c]['valid_ppl']:.2f}, baseline {s['baseline'].get('valid_ppl', math.nan):.2f})"]
        for v in r["variants"]:
            if v == "baseline":
                continue
            b, m, w = s["baseline"], s[v], s["welch"][v]
            ppl_rel = (m["ppl"] / b["ppl"] - 1) * 100
            p = lambda k: f"p = {w[k]['p']:.2g}" if math.isfinite(w[k]["p"]) else "no t-test"  # noqa: E731
            lines.append(
                f"- {v}: PPL {verdict(s, v, 'ppl', False)} ({ppl_rel:+.1f}% vs baseline, {p('ppl')}; target: within 2%: "
                f"{'met' if abs(ppl_rel) <= 2 else 'NOT met'}); same-POS miss {verdict(s, v, 'same_pos_miss', True)} "
                f"({m['same_pos_miss'] - b['same_pos_miss']:+.4f}, spread {math.hypot(b['same_pos_miss_std'], m['same_pos_miss_std']):.4f}, "
                f"{p('same_pos_miss')}); ECE {verdict(s, v, 'ece', False)}; mean cosine {m['mean_cosine'] - b['mean_cosine']:+.4f}"
            )
    return "\n".join(lines)


def plot_curves(report: dict, out: str | Path) -> Path:
    """Training curves of the report's runs: per dataset, the training CE (mean over seeds)
    against the step for every variant, and the evaluation PPL at each epoch end."""
    panels = {dataset: {v: [run["run_dir"] for run in report[dataset][v]["runs"]] for v in report["variants"]} for dataset in report["datasets"]}
    splits = {d: report[d]["data"]["train_split"] for d in report["datasets"]}
    return harness.plot_curves(panels, out, title="semantic KL vs CE (" + "; ".join(f"{d}: trained on {s}" for d, s in splits.items()) + ")",
                               eval_titles={d: f"{d}: validation PPL at each epoch end" for d in report["datasets"]})


def plot_reliability(report: dict, out: str | Path) -> Path:
    """Reliability diagrams of the report's variants: per dataset, the test tokens' top-1
    accuracy against their mean top-1 probability in each confidence bin (every seed's
    tokens pooled; :func:`~neurosym.lm.metrics.reliability_bins`), the diagonal being perfect
    calibration, and the share of tokens per bin; written to ``out`` as a PNG."""
    from matplotlib.figure import Figure  # lazy: matplotlib is slow to import and only plots need it

    sets = [d for d in report["datasets"] if any("reliability" in report[d][v] for v in report["variants"])]
    if not sets:
        raise NeurosymError("plot_reliability: the report has no reliability bins (runs measured before they were recorded)")
    fig = Figure(figsize=(9.0, 3.4 * len(sets)), layout="constrained")
    for row, d in enumerate(sets):
        ax, ax_n = fig.add_subplot(len(sets), 2, 2 * row + 1), fig.add_subplot(len(sets), 2, 2 * row + 2)
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="calibrated")
        for v in report["variants"]:
            r = report[d][v].get("reliability")
            if r is None:
                continue
            kept = [b for b, k in enumerate(r["count"]) if k > 0]
            ece = harness.mean_std(report[d][v], "ece", ".4f")
            ax.plot([r["confidence"][b] for b in kept], [r["accuracy"][b] for b in kept], marker="o", label=f"{v} (ECE {ece})")
            total = sum(r["count"])
            ax_n.plot([(r["edges"][b] + r["edges"][b + 1]) / 2 for b in kept], [r["count"][b] / total for b in kept], marker=".", label=v)
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="mean top-1 probability in the bin", ylabel="top-1 accuracy",
               title=f"{d}: reliability ({report[d]['data']['eval_split']} split, {report['seeds']} seed(s) pooled)")
        ax_n.set(xlim=(0, 1), yscale="log", xlabel="top-1 probability (bin centre)", ylabel="share of tokens", title=f"{d}: tokens per bin")
        for a in (ax, ax_n):
            a.grid(alpha=0.3)
            a.legend(fontsize="x-small")
    return harness.save_png(fig, out)


def json_report(report: dict) -> dict:
    """The ``--json`` shape: per dataset ``{"data": .., "baseline": {"ppl", "ppl_std", "params",
    "same_pos_miss", ...}, "<variant>": {...}, "welch": {...}}`` (per-seed runs included)."""
    return {dataset: report[dataset] for dataset in report["datasets"]} | {
        "seeds": report["seeds"], "threads": report["threads"], "variants": report["variants"], "budget": report.get("budget", "quick")}
