"""The semantic-fusion recipe: a baseline and a fusion LM on the `clause.fsg` corpus.

The corpus is sampled from ``grammars/clause.fsg``; ``holdout`` of the five adjectives
of each polarity never occur in training (they do in validation, which follows the
full grammar). Features come from ``lexicons/sentiment.lex`` with roles from the
grammar. The baseline is a plain :class:`CausalLM` trained with label-smoothed CE;
the fusion model adds the gated feature adapter, the auxiliary BCE head and the
adjective-class uniformizer. Both are evaluated without any control input, so their
perplexities are comparable with each other and with the exact floor of the
validation generator (``exp(H / (E|X| + 1))``: every word and ``<eos>`` predicted).

``task(config)`` is the :class:`~neurosym.lm.train.Task` behind ``neurosym train``;
:func:`reproduce` runs both models over several seeds and reports a table.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import torch

import neurosym
from neurosym.data import _REPO_ROOT
from neurosym.data.corpora import choose_holdout, sample_sentences
from neurosym.errors import ConfigError
from neurosym.lm.config import Config
from neurosym.lm.fusion import build_fusion_lm, control_names, make_batch
from neurosym.lm.losses import adjective_uniformizer, aux_bce, label_smoothed_ce
from neurosym.lm.metrics import evaluate, floor_ppl
from neurosym.lm.model import CausalLM, LMConfig

# The published figures (their encoder had no causal mask; see DESIGN "Findings").
PAPER = {"baseline": {"ppl": 2.249}, "fusion": {"ppl": 2.152}, "floor_ppl": 2.67, "causal": False}


@dataclass
class ModelSection:
    """``[model]``: the architecture and the losses."""

    kind: Literal["baseline", "fusion"] = "fusion"
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 256
    dropout: float = 0.1
    max_len: int = 32
    positions: Literal["sinusoidal", "rotary"] = "sinusoidal"
    label_smoothing: float = 0.02
    aux_weight: float = 0.5  # fusion only
    aux_hidden: int = 128  # fusion only
    uniformizer_weight: float = 0.01  # fusion only
    control: bool = False  # fusion only: feed the gold sentence-level control


@dataclass
class DataSection:
    """``[data]``: the corpus. Paths are relative to the repository."""

    grammar: str = "grammars/clause.fsg"
    lexicon: str = "lexicons/sentiment.lex"
    train: int = 8000
    valid: int = 1200
    max_len: int = 28  # tokens per sentence, <bos> and <eos> included
    holdout: int = 3  # adjectives of each class never seen in training
    holdout_classes: list[str] = field(default_factory=lambda: ["ADJ_POS", "ADJ_NEG"])
    seed: int = 0  # corpus seed (the same corpus for every model seed)


def _path(p: str) -> Path:
    path = Path(p)
    return path if path.is_absolute() else _REPO_ROOT / path


class SemanticFusionTask:
    """Corpus, model and loss of the recipe (the trainer's task protocol)."""

    def __init__(self, config: Config):
        self.model_cfg = config.section("model", ModelSection)
        self.data_cfg = d = config.section("data", DataSection)
        self.batch_size = config.optim.batch_size
        if d.max_len < 3:
            raise ConfigError(f"data.max_len: expected at least 3 (<bos>, a word, <eos>), got {d.max_len}")
        self.auto = neurosym.load(_path(d.grammar))
        self.bank = neurosym.load(_path(d.lexicon), self.auto.vocab)
        vocab = self.auto.vocab
        lex = self.bank.lexicon
        self.holdout = choose_holdout({c: lex.class_words(c) for c in d.holdout_classes}, d.holdout, d.seed)
        held = [vocab.id(w) for ws in self.holdout.values() for w in ws]
        self.adjective_ids = torch.tensor(sorted({vocab.id(w) for c in d.holdout_classes for w in lex.class_words(c)}))
        self.seen_ids = torch.tensor([i for i in range(len(vocab)) if i not in set(held)])
        words = d.max_len - 2
        self.train_sentences = sample_sentences(self.auto, d.train, seed=d.seed, max_words=words, exclude=held)
        self.valid_sentences = sample_sentences(self.auto, d.valid, seed=d.seed + 10_007, max_words=words)
        control = self.model_cfg.kind == "fusion" and self.model_cfg.control
        self.train_data = make_batch(self.train_sentences, self.auto, self.bank, control=control)
        self.valid_batches = [
            make_batch(self.valid_sentences[i : i + 256], self.auto, self.bank) for i in range(0, len(self.valid_sentences), 256)
        ]
        self.pad_id = vocab.tokens.index("<pad>")

    # ------------------------------------------------------------------ the task protocol
    def build_model(self, config: Config) -> CausalLM:
        m = self.model_cfg
        lm = LMConfig(
            vocab_size=len(self.auto.vocab), d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads, d_ff=m.d_ff,
            dropout=m.dropout, max_len=m.max_len, positions=m.positions, pad_id=self.pad_id,
        )
        if m.kind == "baseline":
            return CausalLM(lm)
        n_control = len(control_names(self.bank.names)) if m.control else 0
        return build_fusion_lm(lm, len(self.bank.names), n_control, aux_hidden=m.aux_hidden)

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
        if fusion:
            mask = batch["targets"] != self.pad_id
            aux = aux_bce(out.extras["aux"], batch["aux_targets"], mask, m.aux_weight)
            uni = adjective_uniformizer(out.logits, batch["targets"], self.adjective_ids.to(out.logits.device), m.uniformizer_weight)
            total = total + aux + uni
            logs.update(aux=float(aux.detach()), uniformizer=float(uni.detach()))
        return total, logs

    def evaluate(self, model) -> dict[str, float]:
        keys = ("features",) if self.model_cfg.kind == "fusion" else ()
        return evaluate(model, self.valid_batches, seen_ids=self.seen_ids, focus_ids=self.adjective_ids, input_keys=keys)

    # ------------------------------------------------------------------ facts about the corpus
    def floor(self) -> float:
        """The exact PPL floor of the validation generator (words and <eos> predicted)."""
        return floor_ppl(self.auto, with_eos=True)


def task(config: Config) -> SemanticFusionTask:
    """``run.task = "neurosym.experiments.semantic_fusion:task"``."""
    return SemanticFusionTask(config)


# ---------------------------------------------------------------------- reproduce
RECIPE_OPTIM = {"lr": 3e-4, "weight_decay": 0.01, "warmup": 0.1, "clip": 1.0, "batch_size": 64, "epochs": 6}


def recipe_config(kind: str, seed: int, out_dir: str | Path = "runs", epochs: int | None = None, model: dict | None = None, **data) -> Config:
    """The shipped recipe (configs/semantic_fusion.toml) for one model kind and seed;
    ``model`` and ``data`` entries override the recipe's."""
    optim = dict(RECIPE_OPTIM)
    if epochs is not None:
        optim["epochs"] = epochs
    return Config.from_dict(
        {
            "run": {"name": f"semantic-fusion-{kind}-seed{seed}", "out_dir": str(out_dir), "seed": seed, "task": "neurosym.experiments.semantic_fusion:task"},
            "model": {**(model or {}), "kind": kind},
            "data": data,
            "optim": optim,
            "log": {"every": 50, "checkpoint_every": 200, "progress": False},
        }
    )


def reproduce(
    seeds: int = 3,
    out_dir: str | Path = "runs/semantic-fusion",
    epochs: int | None = None,
    progress=print,
    resume: bool = False,
    model: dict | None = None,
    **data,
) -> dict:
    """Train the baseline and the fusion model for ``seeds`` seeds; return the report dict
    (``floor_ppl``, per-model means, spreads and per-seed figures, the paper's figures)."""
    from neurosym.lm.train import Trainer

    runs: dict[str, list[dict]] = {"baseline": [], "fusion": []}
    floor = None
    for seed in range(seeds):
        for kind in ("baseline", "fusion"):
            config = recipe_config(kind, seed, out_dir, epochs, model, **data)
            t = task(config)
            floor = t.floor()
            started = time.monotonic()
            result = Trainer(config, t).fit(resume=resume and (config.run_dir / "last.pt").exists())
            figures = {k: float(v) for k, v in result.eval.items()}
            figures.update(seed=seed, seconds=time.monotonic() - started, run_dir=str(result.run_dir), train_loss=result.loss)
            runs[kind].append(figures)
            if progress:
                progress(f"{kind} seed {seed}: ppl {figures['ppl']:.4f} seen_ppl {figures.get('seen_ppl', float('nan')):.4f} ({figures['seconds']:.0f} s)")
    report = {"floor_ppl": floor, "seeds": seeds, "paper": PAPER, "holdout": t.holdout, "config": {"model": asdict(t.model_cfg), "data": asdict(t.data_cfg), "optim": RECIPE_OPTIM | ({"epochs": epochs} if epochs else {})}}
    for kind, rows in runs.items():
        metrics = [k for k in ("ppl", "seen_ppl", "focus_ce", "sem_mse") if k in rows[0]]
        report[kind] = {k: statistics.fmean(r[k] for r in rows) for k in metrics}
        report[kind].update({f"{k}_std": (statistics.stdev(r[k] for r in rows) if len(rows) > 1 else 0.0) for k in metrics})
        report[kind]["runs"] = rows
    b, f = report["baseline"], report["fusion"]
    report["fusion_minus_baseline"] = {k: f[k] - b[k] for k in ("ppl", "seen_ppl") if k in f and k in b}
    report["all_at_or_above_floor"] = all(r["ppl"] >= floor for rows in runs.values() for r in rows)
    return report


def format_report(r: dict) -> str:
    """The report as a Markdown table plus a sentence on the comparison."""
    def cell(m: dict, k: str) -> str:
        return f"{m[k]:.4f} ± {m[k + '_std']:.4f}" if k in m else "—"

    lines = [
        f"semantic fusion on clause.fsg ({r['seeds']} seed(s); held out of training: "
        + "; ".join(f"{c}: {', '.join(ws)}" for c, ws in r["holdout"].items()) + ")",
        "",
        "| model | PPL | seen-only PPL | focus CE (nats) | semantic MSE | paper PPL (non-causal) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for kind in ("baseline", "fusion"):
        m = r[kind]
        lines.append(f"| {kind} | {cell(m, 'ppl')} | {cell(m, 'seen_ppl')} | {cell(m, 'focus_ce')} | {cell(m, 'sem_mse')} | {r['paper'][kind]['ppl']} |")
    lines.append(f"| exact floor | {r['floor_ppl']:.4f} | | | | {r['paper']['floor_ppl']} (their corpus) |")
    d = r["fusion_minus_baseline"]
    spread = math.hypot(r["baseline"]["ppl_std"], r["fusion"]["ppl_std"])
    verdict = "beats" if d["ppl"] < 0 else "does not beat"
    lines += [
        "",
        f"fusion {verdict} the baseline: PPL {d['ppl']:+.4f} (combined spread {spread:.4f}), seen-only PPL {d.get('seen_ppl', float('nan')):+.4f}.",
        f"every PPL at or above the floor: {'yes' if r['all_at_or_above_floor'] else 'NO'}.",
    ]
    return "\n".join(lines)
