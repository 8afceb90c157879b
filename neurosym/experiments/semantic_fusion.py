"""The semantic-fusion recipe: a baseline and a fusion LM on the `clause.fsg` corpus.

The corpus is sampled from ``grammars/clause.fsg``; ``holdout`` of the five adjectives
of each polarity never occur in training. Training sentences come from the same grammar
compiled without the held-out words (each arc's probability shared among its remaining
words), so only those words differ between the splits; validation follows the full
grammar. Features come from ``lexicons/sentiment.lex`` with roles from the grammar.

Both models get the same language-model losses: label-smoothed CE plus the
adjective-class uniformizer (which reads the held-out words' class, so neither model
is favoured by it). The fusion model adds the gated feature adapter and the auxiliary
BCE head (its own loss, on its own head). With ``[model] control = true`` the fusion
model is trained with the gold sentence-level control :func:`control_from_features`
reads off each sentence, each row's control zeroed with probability
``control_dropout``; ``lexical_output = true`` gives it the :class:`~neurosym.lm.fusion.LexicalOutput`
layer over the lexicon's context-free columns. :data:`VARIANTS` names the ablations.
Everything is evaluated without any control input (a model with a control channel gets
``control = 0``), so perplexities are comparable with each other and with the exact
floor of the validation generator (``exp(H / (E|X| + 1))``: every word and ``<eos>``
predicted).

``task(config)`` is the :class:`~neurosym.lm.train.TrainingTask` behind ``neurosym train``;
:func:`reproduce` runs the variants over several seeds and reports a table with
Welch's t-test, and :func:`step_times` times their training steps side by side;
:func:`grammar_samples` samples each variant's first run under the corpus grammar.
:data:`QUICK` (the README's first run: baseline and fusion, one seed, one thread) and
:data:`FULL` (the published grid) are what ``neurosym reproduce semantic-fusion
[--quick | --full]`` runs where its options are left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import torch

from neurosym.compile.fsg import load_fsg
from neurosym.compile.lexicon import load_lexicon
from neurosym.data import resolve_data_path
from neurosym.data.corpora import choose_holdout, sample_sentences
from neurosym.decode.run import format_samples as format_generated, generate_from_run
from neurosym.errors import ConfigError, NeurosymError
from neurosym.experiments import harness
from neurosym.lm.config import Config
from neurosym.lm.fusion import ControlColumns, build_fusion_lm, control_names, lexical_descriptions, make_batch
from neurosym.lm.losses import aux_bce, class_uniformizer, label_smoothed_ce
from neurosym.lm.metrics import evaluate, floor_ppl
from neurosym.lm.model import CausalLM, LMSection

# The published figures (their encoder had no causal mask; see DESIGN "Findings").
# The sentence-level control of sentiment.lex: how positive, negative and intense the
# strongest adjective is, and how the sentence ends.
CONTROL = ControlColumns(max_prefixes=("pos_", "neg_", "str_"), final=("is_eos", "is_question", "is_exclaim"))


MAX_SENTENCES = 1_000_000  # per split: the corpus and its features are held in memory
MAX_MODEL_NUMBERS = 1e9  # weights and position tables of the recipe's model (about 4 GB in float32)

PAPER = {"baseline": {"ppl": 2.249}, "fusion": {"ppl": 2.152}, "floor_ppl": 2.67, "causal": False}


@dataclass
class ModelSection(LMSection):
    """``[model]``: the architecture (:class:`~neurosym.lm.model.LMSection`, its context
    ``max_len`` 32 here) and the losses."""

    max_len: int = 32
    kind: Literal["baseline", "fusion"] = "fusion"
    label_smoothing: float = 0.02
    aux_weight: float = 0.5  # fusion only; 0 builds no auxiliary head
    aux_hidden: int = 128  # fusion only
    uniformizer_weight: float = 0.01  # both models (0 turns it off)
    uniformizer_classes: Literal["joint", "per_class"] = "joint"  # one class of all held-out classes' words, or each class alone
    control: bool = False  # fusion only: train with the gold sentence-level control (zeroed at evaluation)
    control_dropout: float = 0.1  # fusion with control: the share of rows whose control is zeroed in training
    lexical_output: bool = False  # fusion only: logit(v) = h . (E[v] + W_o f(v)), f the context-free lexicon columns

    def __post_init__(self):
        super().__post_init__()
        _require(self.aux_hidden >= 1, "model.aux_hidden", "expected an integer >= 1", self.aux_hidden)
        _require(0 <= self.label_smoothing < 1, "model.label_smoothing", "expected a number in [0, 1)", self.label_smoothing)
        _require(0 <= self.control_dropout < 1, "model.control_dropout", "expected a number in [0, 1) (the share of rows trained without control)", self.control_dropout)
        _require(self.uniformizer_classes in ("joint", "per_class"), "model.uniformizer_classes", 'expected "joint" or "per_class"', self.uniformizer_classes)
        for key in ("aux_weight", "uniformizer_weight"):
            value = getattr(self, key)
            _require(math.isfinite(value) and value >= 0, f"model.{key}", "expected a finite number >= 0 (0 turns it off)", value)
        d = self.d_model  # weights and position tables, roughly: refuse what cannot fit rather than crash allocating it
        sizes = {"n_layers": self.n_layers * (4 * d * d + 2 * d * self.d_ff), "max_len": self.max_len * d, "aux_hidden": self.aux_hidden * 2 * d}
        if sum(sizes.values()) > MAX_MODEL_NUMBERS:
            key = max(("d_model", "n_layers", "d_ff", "max_len", "aux_hidden"), key=lambda k: getattr(self, k) / getattr(ModelSection, k))
            _require(False, f"model.{key}", f"expected a model of at most {MAX_MODEL_NUMBERS:.0e} weights, but d_model {d}, n_layers {self.n_layers}, "
                     f"d_ff {self.d_ff}, max_len {self.max_len} and aux_hidden {self.aux_hidden} give about {sum(sizes.values()):.2g}", getattr(self, key))


@dataclass
class DataSection:
    """``[data]``: the corpus. Paths are absolute, relative to the working folder, or
    shipped files (``grammars/...``, ``lexicons/...``)."""

    grammar: str = "grammars/clause.fsg"
    lexicon: str = "lexicons/sentiment.lex"
    train: int = 8000
    valid: int = 1200
    max_len: int = 28  # tokens per sentence, <bos> and <eos> included
    holdout: int = 3  # adjectives of each class never seen in training
    holdout_classes: list[str] = field(default_factory=lambda: ["ADJ_POS", "ADJ_NEG"])
    seed: int = 0  # corpus seed (the same corpus for every model seed)

    def __post_init__(self):
        _require(Path(self.grammar).suffix == ".fsg", "data.grammar", "expected an .fsg grammar (the corpus is sampled from it)", self.grammar)
        _require(Path(self.lexicon).suffix == ".lex", "data.lexicon", "expected a .lex lexicon (the features come from it)", self.lexicon)
        # 0 training sentences: the trainer's "no training batches" error
        _require(0 <= self.train <= MAX_SENTENCES, "data.train", f"expected 0 to {MAX_SENTENCES:,} sentences (held in memory)", self.train)
        _require(1 <= self.valid <= MAX_SENTENCES, "data.valid", f"expected 1 to {MAX_SENTENCES:,} sentences (held in memory)", self.valid)
        _require(self.max_len >= 3, "data.max_len", "expected at least 3 (<bos>, a word, <eos>)", self.max_len)
        _require(self.holdout >= 0, "data.holdout", "expected a number of words >= 0", self.holdout)
        classes = self.holdout_classes
        _require(len(classes) >= 1 and len(set(classes)) == len(classes), "data.holdout_classes",
                 "expected distinct word classes of the lexicon, at least one (the focus words)", classes)
        _require(0 <= self.seed < 2**32, "data.seed", "expected an integer in [0, 2**32)", self.seed)


def _require(ok: bool, key: str, expected: str, value) -> None:
    """A ConfigError ``key: expected ..., got value`` unless ``ok`` (positioned by Config.section)."""
    if not ok:
        shown = f'"{value}"' if isinstance(value, str) else str(value).replace("True", "true").replace("False", "false")
        raise ConfigError(f"{key}: {expected}, got {shown}")


class SemanticFusionTask:
    """Corpus, model and loss of the recipe (the trainer's task protocol)."""

    def __init__(self, config: Config):
        self.model_cfg = config.section("model", ModelSection)
        self.data_cfg = d = config.section("data", DataSection)
        self.batch_size = config.optim.batch_size
        if self.model_cfg.max_len < d.max_len - 1:  # blame the key the file sets
            if "max_len" in config.model:
                raise config.error("model.max_len", f"expected at least data.max_len - 1 = {d.max_len - 1} (the longest input), got {self.model_cfg.max_len}")
            raise config.error("data.max_len", f"expected at most model.max_len + 1 = {self.model_cfg.max_len + 1} (the model's context), got {d.max_len}")
        grammar = _data_file(config, "data.grammar", d.grammar)
        self.auto = load_fsg(grammar)
        self.bank = load_lexicon(_data_file(config, "data.lexicon", d.lexicon), self.auto.vocab)
        vocab = self.auto.vocab
        lex = self.bank.lexicon
        unknown = [c for c in d.holdout_classes if c not in lex.classes]
        if unknown:
            raise config.error("data.holdout_classes", f"{d.lexicon} has no class {', '.join(map(repr, unknown))}; its classes are {', '.join(lex.classes)}")
        too_small = {c: len(lex.class_words(c)) for c in d.holdout_classes if len(lex.class_words(c)) < d.holdout}
        if too_small:
            sizes = ", ".join(f"{c} has {n}" for c, n in too_small.items())
            raise config.error("data.holdout", f"cannot hold out {d.holdout} words of each class: {sizes}")
        self.holdout = choose_holdout({c: lex.class_words(c) for c in d.holdout_classes}, d.holdout, d.seed)
        held_words = [w for ws in self.holdout.values() for w in ws]
        held = {vocab.id(w) for w in held_words}
        self.adjective_ids = torch.tensor(sorted({vocab.id(w) for c in d.holdout_classes for w in lex.class_words(c)}))
        self.class_ids = [torch.tensor(sorted({vocab.id(w) for w in lex.class_words(c)})) for c in d.holdout_classes]
        self.seen_ids = torch.tensor([i for i in range(len(vocab)) if i not in held])
        # the same grammar without the held-out words, renormalised within their arcs
        self.train_auto = load_fsg(grammar, vocab, exclude=held_words)
        words = d.max_len - 2
        self.train_sentences = sample_sentences(self.train_auto, d.train, seed=d.seed, max_words=words)
        self.valid_sentences = sample_sentences(self.auto, d.valid, seed=d.seed + 10_007, max_words=words)
        fusion = self.model_cfg.kind == "fusion"
        self.n_control = len(control_names(self.bank.names, CONTROL)) if fusion and self.model_cfg.control else 0
        self.train_data = make_batch(self.train_sentences, self.auto, self.bank, control=CONTROL if self.n_control else None)
        self.valid_batches = []
        for i in range(0, len(self.valid_sentences), 256):
            batch = make_batch(self.valid_sentences[i : i + 256], self.auto, self.bank)
            if self.n_control:  # evaluated unconditioned: the control is absent (zero)
                batch["control"] = torch.zeros(len(batch["ids"]), self.n_control)
            self.valid_batches.append(batch)
        self.pad_id = vocab.tokens.index("<pad>")

    # ------------------------------------------------------------------ the task protocol
    def build_model(self, config: Config) -> CausalLM:
        m = self.model_cfg
        lm = m.lm_config(len(self.auto.vocab), self.pad_id)
        if m.kind == "baseline":
            return CausalLM(lm)
        return build_fusion_lm(
            lm, len(self.bank.names), self.n_control, aux_hidden=m.aux_hidden if m.aux_weight > 0 else None,
            control_dropout=m.control_dropout, descriptions=lexical_descriptions(self.bank) if m.lexical_output else None,
        )

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.train_sentences) / self.batch_size)

    def train_batches(self, epoch: int, generator: torch.Generator) -> list[dict[str, torch.Tensor]]:
        order = torch.randperm(len(self.train_sentences), generator=generator)
        out = []
        for i in range(0, len(order), self.batch_size):
            rows = order[i : i + self.batch_size]
            batch = {k: v[rows] for k, v in self.train_data.items()}
            width = int(batch["lengths"].max())  # trim the padding every row has
            out.append({k: (v[:, :width] if v.dim() >= 2 and k != "control" else v) for k, v in batch.items()})
        return out

    def loss(self, model, batch) -> tuple[torch.Tensor, dict[str, float]]:
        m = self.model_cfg
        fusion = m.kind == "fusion"
        inputs = {k: batch[k] for k in ("features", "control") if fusion and k in batch}
        out = model(batch["ids"], **inputs)
        ce = label_smoothed_ce(out.logits, batch["targets"], m.label_smoothing, self.pad_id)
        logs = {"ce": float(ce.detach())}
        total = ce
        if m.uniformizer_weight > 0:  # the same for both models
            groups = [self.adjective_ids] if m.uniformizer_classes == "joint" else self.class_ids
            uni = sum(class_uniformizer(out.logits, batch["targets"], ids.to(out.logits.device), m.uniformizer_weight) for ids in groups)
            total = total + uni
            logs["uniformizer"] = float(uni.detach())
        if fusion and m.aux_weight > 0:
            mask = batch["targets"] != self.pad_id
            aux = aux_bce(out.extras["aux"], batch["aux_targets"], mask, m.aux_weight)
            total = total + aux
            logs["aux"] = float(aux.detach())
        return total, logs

    def evaluate(self, model) -> dict[str, float]:
        keys = ("features", "control") if self.model_cfg.kind == "fusion" else ()  # control: zero (see __init__)
        return evaluate(model, self.valid_batches, seen_ids=self.seen_ids, focus_ids=self.adjective_ids, input_keys=keys)

    # ------------------------------------------------------------------ facts about the corpus
    def floor(self) -> float:
        """The exact PPL floor of the validation generator (words and <eos> predicted)."""
        return floor_ppl(self.auto, with_eos=True)


def _data_file(config: Config, key: str, name: str) -> Path:
    """The file a ``[data]`` key names (see :func:`~neurosym.data.resolve_data_path`); a
    ConfigError at the key when it is missing or a folder."""
    try:
        path = resolve_data_path(name)
    except NeurosymError as err:
        raise config.error(key, str(err)) from None
    if path.is_dir():
        raise config.error(key, f"{name} is a folder, not a file")
    if not path.is_file():
        raise config.error(key, f"no such file {name} (relative paths are read from the working folder, or are shipped grammars/... and lexicons/... files)")
    return path


def task(config: Config) -> SemanticFusionTask:
    """``run.task = "neurosym.experiments.semantic_fusion:task"``."""
    return SemanticFusionTask(config)


# ---------------------------------------------------------------------- reproduce
RECIPE_OPTIM = {"lr": 3e-4, "weight_decay": 0.01, "warmup": 0.1, "clip": 1.0, "batch_size": 64, "epochs": 6}
RECIPE_THREADS = 2  # results are bit-identical for a given machine, torch version and thread count

# name -> [model] overrides. MAIN is the recipe's comparison; ABLATION its ablations.
VARIANTS: dict[str, dict] = {
    "baseline": {"kind": "baseline"},
    "fusion": {"kind": "fusion"},
    "baseline-no-uniformizer": {"kind": "baseline", "uniformizer_weight": 0.0},
    "fusion-no-uniformizer": {"kind": "fusion", "uniformizer_weight": 0.0},
    "fusion-no-aux": {"kind": "fusion", "aux_weight": 0.0},
    # issue 16: the control channel in training, then with the lexical output layer (= configs/semantic_fusion.toml)
    "fusion-control": {"kind": "fusion", "control": True},
    "fusion-lexical": {"kind": "fusion", "control": True, "lexical_output": True},
    # the uniformizer per polarity class (not across both) and stronger, for both models alike
    "baseline-uniform": {"kind": "baseline", "uniformizer_classes": "per_class", "uniformizer_weight": 0.1},
    "fusion-lexical-uniform": {"kind": "fusion", "control": True, "lexical_output": True, "uniformizer_classes": "per_class",
                               "uniformizer_weight": 0.1},
}
MAIN = ("baseline", "fusion", "fusion-control", "fusion-lexical")
ABLATION = ("baseline-no-uniformizer", "baseline", "fusion", "fusion-no-uniformizer", "fusion-no-aux")
METRICS = ("ppl", "seen_ppl", "focus_ce", "sem_mse")


@dataclass(frozen=True)
class Budget:
    """What ``neurosym reproduce semantic-fusion`` runs where its options are left out."""

    seeds: int
    variants: tuple[str, ...]
    control_samples: int  # per decoding setting and seed (0: no controllable decoding)
    threads: int  # torch threads: the figures are bit-identical for a given machine, torch version and thread count


# --quick, the default: a first run, two models and one seed in minutes on 2 cores, on one thread (two threads are
# faster on idle cores but many times slower on busy ones, where their OpenMP threads wait for each other); it gives
# seed 0 of the published 3-seed run (docs/semantic_fusion.md, --threads 1). --full: the recipe's grid.
QUICK = Budget(seeds=1, variants=("baseline", "fusion"), control_samples=0, threads=1)
FULL = Budget(seeds=5, variants=MAIN, control_samples=200, threads=RECIPE_THREADS)


def recipe_config(
    variant: str, seed: int, out_dir: str | Path = "runs", epochs: int | None = None, model: dict | None = None,
    threads: int | None = RECIPE_THREADS, progress_bar: bool = False, **data,
) -> Config:
    """The shipped recipe (configs/semantic_fusion.toml) for one variant (a key of
    :data:`VARIANTS`, or a bare model kind) and seed; ``model`` and ``data`` entries
    override the recipe's."""
    if variant not in VARIANTS:
        raise NeurosymError(f"unknown semantic-fusion variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    optim = dict(RECIPE_OPTIM)
    if epochs is not None:
        optim["epochs"] = epochs
    return Config.from_dict(
        {
            "run": {"name": f"semantic-fusion-{variant}-seed{seed}", "out_dir": str(out_dir), "seed": seed, "threads": threads,
                    "task": "neurosym.experiments.semantic_fusion:task"},
            "model": {**(model or {}), **VARIANTS[variant]},
            "data": data,
            "optim": optim,
            "log": {"every": 50, "checkpoint_every": 200, "progress": progress_bar},
        }
    )


def step_times(
    variants: Sequence[str] = MAIN, repeats: int = 30, warmup: int = 3, threads: int | None = RECIPE_THREADS,
    model: dict | None = None, **data,
) -> dict[str, dict[str, float]]:
    """Milliseconds per training step of each variant, interleaved in this process
    (:func:`~neurosym.experiments.harness.step_times`): ``{variant: {median_ms, min_ms, params}}``."""
    return harness.step_times(variants, lambda v: recipe_config(v, 0, model=model, threads=threads, **data), task,
                              lr=RECIPE_OPTIM["lr"], weight_decay=RECIPE_OPTIM["weight_decay"], repeats=repeats, warmup=warmup, threads=threads)


def reproduce(
    seeds: int = 5,
    out_dir: str | Path = "runs/semantic-fusion",
    epochs: int | None = None,
    progress: Callable[[str], None] | None = print,
    resume: bool = False,
    model: dict | None = None,
    variants: Sequence[str] = MAIN,
    threads: int | None = RECIPE_THREADS,
    timing: bool = True,
    **data,
) -> dict:
    """Train each variant for ``seeds`` seeds (:func:`~neurosym.experiments.harness.train_grid`);
    return the report dict, also written to ``out_dir/report.json``: ``floor_ppl``, per
    variant the mean, spread and per-seed figures and ``params``, Welch's test of fusion
    against baseline, step times (``timing``) and the paper's figures."""
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or len(set(variants)) != len(variants):
        raise NeurosymError(f"variants: expected distinct names among {', '.join(VARIANTS)}, got {', '.join(variants)}")
    grid = harness.train_grid(  # one progress bar over every run's steps (not one per run)
        variants, seeds, lambda v, seed: recipe_config(v, seed, out_dir, epochs, model, threads, **data),
        task, resume=resume, progress=harness.Progress(seeds * len(variants), progress, bar=progress is not None),
        describe=lambda f: f"ppl {f['ppl']:.4f}, seen-only ppl {f.get('seen_ppl', math.nan):.4f}, {f['seconds']:.0f} s of training",
    )
    t = grid[variants[-1]][-1].task
    runs = {v: [r.figures for r in rs] for v, rs in grid.items()}
    floor = t.floor()
    report = {
        "floor_ppl": floor, "seeds": seeds, "variants": list(variants), "paper": PAPER, "holdout": t.holdout, "threads": threads,
        "config": {"model": asdict(t.model_cfg), "data": asdict(t.data_cfg), "optim": RECIPE_OPTIM | ({"epochs": epochs} if epochs else {})},
    }
    for v, rows in runs.items():
        report[v] = harness.summarise(rows, METRICS)
        report[v].update(params=grid[v][-1].params, runs=rows)
    if "baseline" in runs and "fusion" in runs:
        b, f = report["baseline"], report["fusion"]
        report["fusion_minus_baseline"] = {k: f[k] - b[k] for k in ("ppl", "seen_ppl") if k in f and k in b}
        report["welch_ppl"] = harness.welch([r["ppl"] for r in runs["fusion"]], [r["ppl"] for r in runs["baseline"]])
    report["all_at_or_above_floor"] = all(r["ppl"] >= floor for rows in runs.values() for r in rows)
    if timing:
        report["step_times"] = step_times(variants, threads=threads, model=model, **data)
    harness.save_json(report, out_dir)
    return report


def grammar_samples(report: dict, n: int = 3, seed: int = 0) -> dict:
    """``n`` samples of each variant's first run constrained to the corpus grammar
    (:func:`~neurosym.decode.run.generate_from_run`: what ``neurosym generate RUN --grammar
    GRAMMAR -n n --seed seed`` prints), added to the report as ``report["samples"]`` =
    ``{"grammar", "seed", "runs": {variant: {"run_dir", "seed", "ppl", "rows"}}}``; each row
    is ``generate_from_run``'s (``text``, ``tokens``, ``status``, the exact
    ``grammar_log_prob`` of a finished sentence, ``model_log_prob``)."""
    grammar = report["config"]["data"]["grammar"]
    runs = {}
    for v in report["variants"]:
        first = report[v]["runs"][0]
        rows = generate_from_run(first["run_dir"], grammar, n=n, seed=seed)
        runs[v] = {"run_dir": first["run_dir"], "seed": first["seed"], "ppl": first["ppl"], "rows": rows}
    report["samples"] = {"grammar": grammar, "seed": seed, "runs": runs}
    return report


def format_samples(r: dict) -> str:
    """The samples of :func:`grammar_samples`, under each run's perplexity and the floor."""
    s = r["samples"]
    n = max((len(x["rows"]) for x in s["runs"].values()), default=0)
    lines = [f"grammar-constrained samples (neurosym generate RUN --grammar {s['grammar']} -n {n} --seed {s['seed']}: "
             "each sentence, its exact log-probability under the grammar and the model's; every model draws with the same "
             "random numbers, so where two models agree they pick the same words)"]
    for v, x in s["runs"].items():
        lines += ["", f"{v}, seed {x['seed']}: PPL {x['ppl']:.4f} (exact floor {r['floor_ppl']:.4f}), {x['run_dir']}"]
        lines += [f"  {line}" for line in format_generated(x["rows"]).split("\n") if line]
    return "\n".join(lines)


def format_report(r: dict) -> str:
    """The report as a Markdown table plus a sentence on the comparison."""
    timing = r.get("step_times", {})
    lines = [
        f"semantic fusion on clause.fsg ({r['seeds']} seed(s), {r['threads']} thread(s); held out of training: "
        + "; ".join(f"{c}: {', '.join(ws)}" for c, ws in r["holdout"].items()) + ")",
        "",
    ]
    rows = []
    for v in r["variants"]:
        m = r[v]
        ms = f"{timing[v]['median_ms']:.1f}" if v in timing else "—"
        paper = r["paper"].get(v, {}).get("ppl", "—")
        rows.append([v, *(harness.mean_std(m, k) for k in METRICS), f"{m['params']:,}", ms, str(paper)])
    lines += harness.markdown_table(
        ["model", "PPL", "seen-only PPL", "focus CE (nats)", "semantic MSE", "parameters", "ms/step", "paper PPL (non-causal)"], rows)
    lines.append(f"| exact floor | {r['floor_ppl']:.4f} | | | | | | {r['paper']['floor_ppl']} (their corpus) |")
    lines.append("")
    if "fusion_minus_baseline" in r:
        d, w = r["fusion_minus_baseline"], r["welch_ppl"]
        spread = math.hypot(r["baseline"]["ppl_std"], r["fusion"]["ppl_std"])
        test = f"Welch's t = {w['t']:.2f}" if math.isfinite(w["p"]) else "one seed"
        lines.append(
            f"fusion against the baseline: {harness.verdict_sentence(d['ppl'], w['p'])}; PPL {d['ppl']:+.4f} "
            f"(combined spread {spread:.4f}; {test}), seen-only PPL {d.get('seen_ppl', math.nan):+.4f}. "
            f"\"better\" only when Welch's p < {harness.ALPHA:g}, else \"{harness.NO_DIFFERENCE}\"."
        )
    lines.append(f"every PPL at or above the floor: {'yes' if r['all_at_or_above_floor'] else 'NO'}.")
    return "\n".join(lines)
