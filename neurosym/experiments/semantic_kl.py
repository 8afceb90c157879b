"""The semantic-KL recipe: a CE baseline against semantic-KL LMs on real text.

Two datasets, both shipped in ``corpora/`` (``data_dir`` points at other copies):

* ``wikitext-2``: train on WikiText-2 **valid.txt** and evaluate on **test.txt** (the
  train split is not available here; every report says so). Word vocabulary from the
  training text (WikiText's ``<unk>`` kept, words under ``min_freq`` -> ``<unk>``).
* ``ud-english-ewt``: train on the UD English-EWT train sentences, evaluate on test
  (one sentence per line, ``<eos>`` after each).

Both are cut into contiguous windows of ``window`` tokens (stride = window). PPL counts
every target of the evaluation windows (``<unk>`` and ``<eos>`` included); the CPU recipe
evaluates the first ``max_eval_windows`` = 1000 windows (WikiText-2: the first 64,000 of
the test split's 244,102 tokens with one <eos> per line; UD test has 424 windows, all used), the GPU
configuration the whole split. Besides PPL the
evaluation reports what the design claims and what it warns about
(:mod:`neurosym.lm.metrics`): the **same-POS miss rate** on UD English-EWT test (for the
WikiText model too: its vocabulary reads the UD test text), each word's majority UPOS
from UD train; top-1 accuracy and the **ECE** of the top-1 probability on the evaluation
split; **embedding health** of the tied W (word rows: the three specials left out).

The models differ only in the objective (``[model] objective``): ``ce``, or
``semantic_kl`` = ``lam * KL(softmax(sim(W[y], W) / T) || p) + (1 - lam) * CE``
(:func:`~neurosym.lm.semantic_kl.semantic_kl`, fast path through the hidden states) with
T constant or on a schedule (:class:`~neurosym.lm.semantic_kl.TemperatureSchedule`).
Same architecture, data, optimizer and number of steps. :data:`VARIANTS` names them;
:func:`reproduce` runs them over seeds with Welch's t-test against the baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F

from neurosym.data.text import (
    EOS_ID,
    PAD_ID,
    BpeVocab,
    WordVocab,
    corpus_path,
    lm_windows,
    majority_upos,
    read_lines,
    read_tagged,
)
from neurosym.errors import ConfigError, NeurosymError
from neurosym.experiments import harness
from neurosym.lm.config import Config
from neurosym.lm.metrics import embedding_health, expected_calibration_error, same_pos_miss_rate
from neurosym.lm.model import CausalLM, LMSection
from neurosym.lm.semantic_kl import TemperatureSchedule, semantic_kl_terms

DATASETS = ("wikitext-2", "ud-english-ewt")
SPLITS = {"wikitext-2": ("valid", "test"), "ud-english-ewt": ("train", "test")}  # (train on, evaluate on)
DATA_NOTE = {
    "wikitext-2": "trained on WikiText-2 valid.txt, evaluated on test.txt (the train split is not available here)",
    "ud-english-ewt": "trained on UD English-EWT train, evaluated on test",
}
MAX_WINDOW = 4096


def _require(ok: bool, key: str, expected: str, value) -> None:
    """A ConfigError ``key: expected ..., got value`` unless ``ok`` (positioned by Config.section)."""
    if not ok:
        shown = f'"{value}"' if isinstance(value, str) else str(value).replace("True", "true").replace("False", "false")
        raise ConfigError(f"{key}: {expected}, got {shown}")


@dataclass
class ModelSection(LMSection):
    """``[model]``: the architecture (:class:`~neurosym.lm.model.LMSection`: 2 layers here,
    and a context of ``data.window`` tokens unless ``max_len`` is set) and the objective."""

    n_layers: int = 2
    max_len: int | None = None  # None: data.window
    objective: Literal["ce", "semantic_kl"] = "ce"
    kl_lambda: float = 0.5  # semantic_kl: lam * KL + (1 - lam) * CE
    similarity: Literal["dot", "cosine"] = "cosine"
    temperature: float = 0.1  # T, or T at the first step with a schedule
    temperature_end: float | None = None  # T at the last step (linear / cosine schedules)
    temperature_schedule: Literal["constant", "linear", "cosine"] = "constant"

    def __post_init__(self):
        super().__post_init__()
        _require(0 <= self.kl_lambda <= 1, "model.kl_lambda", "expected a number in [0, 1] (the weight of the KL term)", self.kl_lambda)
        _require(math.isfinite(self.temperature) and self.temperature > 0, "model.temperature", "expected a finite number > 0", self.temperature)
        if self.temperature_schedule != "constant":
            _require(self.temperature_end is not None, "model.temperature_end",
                     f"expected a final temperature for the {self.temperature_schedule} schedule", self.temperature_end)
        if self.temperature_end is not None:
            _require(math.isfinite(self.temperature_end) and self.temperature_end > 0, "model.temperature_end", "expected a finite number > 0", self.temperature_end)

    def schedule(self) -> TemperatureSchedule:
        return TemperatureSchedule(self.temperature, self.temperature_end, self.temperature_schedule)


@dataclass
class DataSection:
    """``[data]``: the corpus and its vocabulary."""

    dataset: Literal["wikitext-2", "ud-english-ewt"] = "wikitext-2"
    data_dir: str | None = None  # a folder with the corpus files (default: the shipped corpora/)
    window: int = 64  # tokens per training window (stride = window)
    tokenizer: Literal["word", "bpe"] = "word"
    min_freq: int = 3  # word vocabularies: rarer training words become <unk>
    bpe_size: int = 8000  # bpe: the vocabulary size
    max_train_windows: int | None = None  # the first N training windows only (None: all)
    max_eval_windows: int | None = None  # the first N evaluation windows only (None: all)

    def __post_init__(self):
        _require(1 <= self.window <= MAX_WINDOW, "data.window", f"expected an integer in [1, {MAX_WINDOW}]", self.window)
        _require(self.min_freq >= 1, "data.min_freq", "expected an integer >= 1", self.min_freq)
        _require(self.bpe_size > 3, "data.bpe_size", "expected an integer > 3 (the special tokens)", self.bpe_size)
        for key in ("max_train_windows", "max_eval_windows"):
            value = getattr(self, key)
            if value is not None:
                _require(value >= 1, f"data.{key}", "expected an integer >= 1", value)
        if self.data_dir is not None:
            _require(Path(self.data_dir).is_dir(), "data.data_dir", "expected a folder holding the corpus files", self.data_dir)


class SemanticKLTask:
    """Corpus, model and objective of the recipe (the trainer's task protocol)."""

    def __init__(self, config: Config):
        self.model_cfg = m = config.section("model", ModelSection)
        self.data_cfg = d = config.section("data", DataSection)
        self.batch_size = config.optim.batch_size
        if m.max_len is not None and m.max_len < d.window:
            raise config.error("model.max_len", f"expected at least data.window = {d.window} (the longest input), got {m.max_len}")
        self.temperatures = m.schedule()
        self.temperature = self.temperatures.start
        try:
            self._load(d)
        except NeurosymError as err:
            if isinstance(err, ConfigError):
                raise
            raise config.error("data.data_dir" if d.data_dir else "data.dataset", str(err)) from None

    def _load(self, d: DataSection) -> None:
        train_split, eval_split = SPLITS[d.dataset]
        ud_train = read_tagged(corpus_path("ud-english-ewt", "train", d.data_dir if d.dataset == "ud-english-ewt" else None))
        ud_test = read_tagged(corpus_path("ud-english-ewt", "test", d.data_dir if d.dataset == "ud-english-ewt" else None))
        if d.dataset == "wikitext-2":
            train_lines = read_lines(corpus_path(d.dataset, train_split, d.data_dir))
            eval_lines = read_lines(corpus_path(d.dataset, eval_split, d.data_dir))
        else:
            train_lines = [list(s.forms) for s in ud_train]
            eval_lines = [list(s.forms) for s in ud_test]
        if d.tokenizer == "word":
            self.vocab: WordVocab | BpeVocab = WordVocab.build(train_lines, min_freq=d.min_freq)
            tag_of = majority_upos(ud_train)
            self.tags: list[str | None] = [None] * 3 + [tag_of.get(w) for w in self.vocab.tokens[3:]]
        else:
            self.vocab = BpeVocab.train(train_lines, vocab_size=d.bpe_size)
            self.tags = [None] * len(self.vocab)  # sub-words have no part of speech: same_pos_miss is NaN
        self.train_ids, self.train_targets = self._windows(train_lines, d.max_train_windows)
        self.eval_ids, self.eval_targets = self._windows(eval_lines, d.max_eval_windows)
        if d.dataset == "ud-english-ewt":
            self.pos_ids, self.pos_targets = self.eval_ids, self.eval_targets
        else:
            self.pos_ids, self.pos_targets = self._windows([list(s.forms) for s in ud_test], None)
        if len(self.eval_ids) == 0:
            raise NeurosymError(f"{d.dataset} {eval_split}: no evaluation window of {d.window} tokens")

    def _windows(self, lines: list[list[str]], limit: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        ids, targets = lm_windows(self.vocab.encode_lines(lines), self.data_cfg.window)
        return (ids[:limit], targets[:limit]) if limit is not None else (ids, targets)

    # ------------------------------------------------------------------ the task protocol
    def build_model(self, config: Config) -> CausalLM:
        m = self.model_cfg
        return CausalLM(m.lm_config(len(self.vocab), PAD_ID, max_len=m.max_len or self.data_cfg.window))

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.train_ids) / self.batch_size)

    def train_batches(self, epoch: int, generator: torch.Generator) -> list[dict[str, torch.Tensor]]:
        order = torch.randperm(len(self.train_ids), generator=generator)
        return [{"ids": self.train_ids[rows], "targets": self.train_targets[rows]}
                for rows in (order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size))]

    def at_step(self, step: int, total_steps: int) -> None:
        self.temperature = self.temperatures.at(step, total_steps)

    def loss(self, model, batch) -> tuple[torch.Tensor, dict[str, float]]:
        m = self.model_cfg
        out = model(batch["ids"])
        V = out.logits.shape[-1]
        if m.objective == "ce":
            ce = F.cross_entropy(out.logits.reshape(-1, V).float(), batch["targets"].reshape(-1))
            return ce, {"ce": float(ce.detach())}
        W = (model.module if hasattr(model, "module") else model).lm_head.weight
        kl, ce = semantic_kl_terms(out.logits, batch["targets"], W, self.temperature, m.similarity, hidden=out.hidden)
        total = m.kl_lambda * kl + (1.0 - m.kl_lambda) * ce
        return total, {"ce": float(ce.detach()), "kl": float(kl.detach()), "temperature": self.temperature}

    def evaluate(self, model) -> dict[str, float]:
        return evaluate_text(model, self.eval_ids, self.eval_targets, self.pos_ids, self.pos_targets, self.tags)


@torch.no_grad()
def evaluate_text(
    model: CausalLM, ids: torch.Tensor, targets: torch.Tensor, pos_ids: torch.Tensor, pos_targets: torch.Tensor,
    tags: Sequence[str | None], batch_size: int = 64,
) -> dict[str, float]:
    """PPL, top-1 accuracy and ECE over windows ids/targets (W, L); the same-POS miss rate
    over pos_ids/pos_targets (the same windows for UD, UD test for WikiText) of the model's
    top tagged word (the argmax over the tokens with a UD tag, so a top-1 ``<unk>`` or
    ``<eos>`` does not hide the word it would pick), at positions whose gold token has a
    tag; embedding health of the tied W's word rows."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    nll, n, conf, hit = 0.0, 0, [], []
    try:
        for i in range(0, len(ids), batch_size):
            logits = model(ids[i : i + batch_size].to(device)).logits.float()
            y = targets[i : i + batch_size].to(device)
            V = logits.shape[-1]
            nll += float(F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), reduction="none").double().sum())
            n += y.numel()
            top, arg = logits.max(-1)  # top-1 probability = exp(max logit - logsumexp)
            conf.append((top - torch.logsumexp(logits, -1)).exp().reshape(-1).cpu())
            hit.append((arg == y).reshape(-1).cpu())
        same = {"same_pos_miss": float("nan"), "misses": 0, "misses_untagged": 0}
        if any(t is not None for t in tags):
            # the model's top *word*: the argmax over tagged tokens (<unk>, <eos> and words
            # UD train never tags are not words with a part of speech)
            untagged = torch.tensor([t is None for t in tags], device=device)
            preds = []
            for i in range(0, len(pos_ids), batch_size):
                logits = model(pos_ids[i : i + batch_size].to(device)).logits
                preds.append(logits.masked_fill(untagged, -math.inf).argmax(-1).cpu())
            same = same_pos_miss_rate(torch.cat(preds), pos_targets, tags) if preds else same
    finally:
        model.train(was_training)
    conf_t, hit_t = torch.cat(conf), torch.cat(hit)
    health = embedding_health(model.lm_head.weight[3:])
    return {
        "ppl": math.exp(nll / n), "nll": nll / n, "tokens": n, "top1": float(hit_t.double().mean()),
        "ece": expected_calibration_error(conf_t, hit_t), "same_pos_miss": same["same_pos_miss"],
        "pos_misses": same["misses"], **health,
    }


def task(config: Config) -> SemanticKLTask:
    """``run.task = "neurosym.experiments.semantic_kl:task"``."""
    return SemanticKLTask(config)


# ---------------------------------------------------------------------- reproduce
RECIPE_OPTIM = {"lr": 1e-3, "weight_decay": 0.01, "warmup": 0.05, "clip": 1.0, "batch_size": 32, "epochs": 1}
RECIPE_THREADS = 1  # one seed of one model in about a minute of one quiet core; results depend on the thread count
RECIPE_DATA = {"window": 64, "min_freq": 5, "max_eval_windows": 1000}  # WikiText-2: the first 64,000 test tokens (UD test: all 424 windows)
# name -> [model] overrides; every semantic-KL variant mixes lam = 0.5 with CE, cosine similarity
VARIANTS: dict[str, dict] = {
    "baseline": {"objective": "ce"},
    "kl-T0.05": {"objective": "semantic_kl", "temperature": 0.05},
    "kl-T0.1": {"objective": "semantic_kl", "temperature": 0.1},
    "kl-T0.2": {"objective": "semantic_kl", "temperature": 0.2},
    "kl-cos-0.3-to-0.05": {"objective": "semantic_kl", "temperature": 0.3, "temperature_end": 0.05, "temperature_schedule": "cosine"},
    "kl-dot-T1": {"objective": "semantic_kl", "similarity": "dot", "temperature": 1.0},
}
MAIN = ("baseline", "kl-T0.1", "kl-T0.2", "kl-cos-0.3-to-0.05")
METRICS = ("ppl", "same_pos_miss", "top1", "ece", "mean_cosine", "effective_rank")
# The larger configuration for a GPU (docs/semantic_kl.md): reproduce(..., model=GPU_MODEL, data=GPU_DATA, optim=GPU_OPTIM, device="cuda")
GPU_MODEL = {"d_model": 512, "n_layers": 6, "n_heads": 8, "d_ff": 2048, "dropout": 0.2}
GPU_DATA = {"window": 256, "min_freq": 1, "max_eval_windows": None}  # the whole test split
GPU_OPTIM = {"lr": 5e-4, "batch_size": 32, "epochs": 20}


def recipe_config(
    variant: str, dataset: str, seed: int, out_dir: str | Path = "runs/semantic-kl", model: dict | None = None,
    data: dict | None = None, optim: dict | None = None, threads: int | None = RECIPE_THREADS, device: str = "cpu",
    progress_bar: bool = False,
) -> Config:
    """The recipe's config for one variant (a key of :data:`VARIANTS`), dataset and seed;
    ``model``, ``data`` and ``optim`` entries override the recipe's."""
    if variant not in VARIANTS:
        raise NeurosymError(f"unknown semantic-KL variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    if dataset not in DATASETS:
        raise NeurosymError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")
    return Config.from_dict({
        "run": {"name": f"{dataset}-{variant}-seed{seed}", "out_dir": str(out_dir), "seed": seed, "threads": threads,
                "device": device, "task": "neurosym.experiments.semantic_kl:task"},
        "model": {**(model or {}), **VARIANTS[variant]},
        "data": {**RECIPE_DATA, **(data or {}), "dataset": dataset},
        "optim": {**RECIPE_OPTIM, **(optim or {})},
        "log": {"every": 10, "checkpoint_every": 100, "progress": progress_bar},
    })


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
) -> dict:
    """Train every variant on every dataset for ``seeds`` seeds; the report: per dataset
    ``data`` (what was trained and evaluated on, vocabulary, windows), then per variant the
    mean and ``_std`` of :data:`METRICS`, ``params`` and the per-seed runs, and Welch's
    test of each variant against the baseline (``welch``)."""
    bad = [v for v in variants if v not in VARIANTS] + [d for d in datasets if d not in DATASETS]
    if bad or len(set(variants)) != len(variants) or "baseline" not in variants:
        raise NeurosymError(f"variants: expected distinct names among {', '.join(VARIANTS)} including baseline, and datasets among "
                            f"{', '.join(DATASETS)}; got {', '.join(variants)} / {', '.join(datasets)}")
    report: dict = {"seeds": seeds, "threads": threads, "variants": list(variants), "datasets": list(datasets)}
    counter = harness.Progress(seeds * len(variants) * len(datasets), progress)
    for dataset in datasets:
        grid = harness.train_grid(
            variants, seeds,
            lambda v, seed: recipe_config(v, dataset, seed, out_dir, model, data, optim, threads, device, progress_bar=progress is not None),  # noqa: B023
            task, resume=resume, progress=counter, label=lambda v, seed: f"{dataset}, {v}, seed {seed}",  # noqa: B023
            describe=lambda f: f"ppl {f['ppl']:.2f}, same-POS miss {f['same_pos_miss']:.4f}, {f['seconds']:.0f} s of training",
        )
        t = grid[variants[-1]][-1].task
        runs = {v: [r.figures for r in rs] for v, rs in grid.items()}
        section: dict = {"data": {
            "dataset": dataset, "note": DATA_NOTE[dataset], "train_split": SPLITS[dataset][0], "eval_split": SPLITS[dataset][1],
            "vocab_size": len(t.vocab), "train_windows": len(t.train_ids), "eval_windows": len(t.eval_ids),
            "window": t.data_cfg.window, "same_pos_on": "UD English-EWT test (majority UPOS from UD train)",
            "config": {"model": asdict(t.model_cfg) | {"objective": "per variant"}, "data": asdict(t.data_cfg),
                       "optim": {**RECIPE_OPTIM, **(optim or {})}},
        }}
        for v, rows in runs.items():
            section[v] = harness.summarise(rows, METRICS)
            section[v].update(params=grid[v][-1].params, overrides=VARIANTS[v], runs=rows)
        base = runs["baseline"]
        section["welch"] = {
            v: {k: harness.welch([r[k] for r in runs[v]], [r[k] for r in base]) for k in ("ppl", "same_pos_miss")}
            for v in variants if v != "baseline"
        }
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
    lines = [f"semantic KL against a CE baseline ({r['seeds']} seed(s), {r['threads']} thread(s); mean ± std over seeds; "
             f"verdicts: \"better\"/\"worse\" only when Welch's p < {harness.ALPHA:g} over the seeds, else \"{harness.NO_DIFFERENCE}\")"]
    for dataset in r["datasets"]:
        s = r[dataset]
        d = s["data"]
        lines += ["", f"**{dataset}**: {d['note']}; vocabulary {d['vocab_size']:,}, {d['train_windows']:,} training windows of "
                  f"{d['window']} tokens, PPL over {d['eval_windows']:,} evaluation windows ({d['eval_windows'] * d['window']:,} tokens); "
                  f"same-POS miss rate on {d['same_pos_on']}", ""]
        formats = {"ppl": ".2f", "same_pos_miss": ".4f", "top1": ".4f", "ece": ".4f", "mean_cosine": ".4f", "effective_rank": ".1f"}
        lines += harness.markdown_table(
            ["model", "PPL", "same-POS miss", "top-1", "ECE", "mean cos(W)", "eff. rank(W)", "parameters"],
            ([v, *(harness.mean_std(s[v], k, f) for k, f in formats.items()), f"{s[v]['params']:,}"] for v in r["variants"]))
        lines.append("")
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
    return harness.plot_curves(panels, out, title="semantic KL vs CE (WikiText-2: trained on valid.txt; its train split is not available here)",
                               eval_titles={d: f"{d}: evaluation PPL ({SPLITS[d][1]})" for d in report["datasets"]})


def json_report(report: dict) -> dict:
    """The ``--json`` shape: per dataset ``{"data": .., "baseline": {"ppl", "ppl_std", "params",
    "same_pos_miss", ...}, "<variant>": {...}, "welch": {...}}`` (per-seed runs included)."""
    return {dataset: report[dataset] for dataset in report["datasets"]} | {
        "seeds": report["seeds"], "threads": report["threads"], "variants": report["variants"]}
