"""The idea-gating recipe: a baseline and idea-gated LMs at equal size, on a drift
corpus whose truth a grammar knows, and on WikiText-2, as configs of the built-in
language-model task (``[run] task = "lm"``, :mod:`neurosym.lm.task`).

Every variant of every dataset and seed is one ``lm``-task config (:func:`recipe_config`)
saved in its run folder (``neurosym eval RUN`` works on a recipe run); the seeds x
variants grid is :func:`neurosym.experiments.harness.train_grid`. What is the recipe's
own is what it measures on the trained models: drift, stickiness and the x-ray.

**Models** (:data:`VARIANTS`): ``baseline`` (a causal LM whose ``d_ff`` is widened so it
has the idea model's parameter count: ``[model] match_idea = H``), ``idea`` (``[model]
idea = { hidden = H, tied = true, ramp = 0.5, ... }``: the idea head tied to the token
embeddings, the published gate, alpha ramped 0 -> 0.5 over the first half of training)
and ``idea-untied`` (the published untied head, its larger parameter count reported).
Loss: CE of the (gated) next-token distribution plus ``idea.weight`` x the masked idea BCE.

**Drift corpus** (``drift``): documents sampled from ``grammars/drift.fsg`` (``[data]
grammar``, one document per row: ``layout = "documents"``; 4,000 training documents with
seed 0 and 1,000 evaluation documents with seed 10,007, at most 60 words each), two topics
(zoology, comics) sharing the bridge words of ``lexicons/topics.lex`` (``bat``, ``robin``,
``spider``); a document never changes topic. The exact PPL floor is the grammar's
(``<eos>`` counted). A drift prompt is ``<bos>``, a first sentence that only its topic T
accepts, then ``the`` and a bridge word; the model continues it. The continuation's
sentences (the one the bridge word starts, then the later ones) are judged by the topic
grammars (drift.fsg started at its second-sentence state of each topic, so that they
accept one or more sentences of that topic): a continuation *drifts* when one of its
complete sentences is accepted by the other topic's grammar and not by T's.
:func:`judge_continuation` is that rule; rates carry Wilson 95% intervals. Stickiness:
T's topic-only words (``ZOO_TERMS`` / ``COMIC_TERMS``) per 100 generated words.

**WikiText-2** (the files of :func:`neurosym.experiments.semantic_kl.dataset_files`): the
standard protocol when train.txt is there (train on train.txt, validation PPL on valid.txt
at each epoch end, figures on test.txt, the standard vocabulary), else the labelled
fallback (train on valid.txt, ``min_freq = 5``); windows of 64 tokens. Stickiness:
prompts are test windows whose first ``prompt_len`` words hold at least 3 terms of one
domain of ``lexicons/domains.lex`` and more of it than of any other; the continuation's
hits of that domain's terms per 100 words, with the design's repetition penalty 1.2 (for
the idea model through :class:`~neurosym.decode.idea.IdeaGate`).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from neurosym.compile.fsg import compile_fsg, load_fsg
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.data import resolve_data_path
from neurosym.decode.generate import generate
from neurosym.decode.idea import IdeaGate, ungated
from neurosym.decode.sampling import RepetitionPenalty
from neurosym.dsl.fsg import read_fsg
from neurosym.dsl.lexicon import read_lexicon
from neurosym.errors import NeurosymError
from neurosym.experiments import harness
from neurosym.experiments.harness import diff_ci, mean_ci, wilson
from neurosym.experiments.semantic_kl import FALLBACK, dataset_files
from neurosym.lm.config import Config
from neurosym.lm.idea import IdeaOutput, xray
from neurosym.lm.metrics import floor_ppl
from neurosym.lm.model import CausalLM
from neurosym.lm.task import LMTask, encode_stream, read_documents

DATASETS = ("drift", "wikitext-2")
TOPICS = {"zoology": ("Z1", "ZOO_TERMS"), "comics": ("K1", "COMIC_TERMS")}  # topic -> (sentence-grammar start, terms class)
DOMAINS = ("MUSIC", "MILITARY", "SPORT")
DRIFT_GRAMMAR, TOPICS_LEXICON, DOMAINS_LEXICON = "grammars/drift.fsg", "lexicons/topics.lex", "lexicons/domains.lex"


# ---------------------------------------------------------------------- the drift corpus
def topic_grammar(path: str | Path, start: str, vocab) -> WeightedAutomaton:
    """The grammar of ``path`` started at ``start``, keeping what is reachable from there
    (e.g. drift.fsg at ``Z1``: one or more zoology sentences), compiled over ``vocab``."""
    g = read_fsg(path)
    states = {a.src for a in g.arcs} | {a.dst for a in g.arcs} | {f.state for f in g.finals}
    if start not in states:
        raise NeurosymError(f"{path}: no state {start!r}")
    reach, todo = {start}, [start]
    while todo:
        s = todo.pop()
        for a in g.arcs:
            if a.src == s and a.dst not in reach:
                reach.add(a.dst)
                todo.append(a.dst)
    span = next((a.span for a in g.arcs if a.src == start), g.arcs[0].span)
    sub = replace(g, arcs=[a for a in g.arcs if a.src in reach], finals=[f for f in g.finals if f.state in reach], start=(start, span))
    return compile_fsg(sub, vocab)


class DriftCorpus:
    """drift.fsg, its topic grammars and topic terms, over one vocabulary."""

    def __init__(self, grammar: str | Path = "grammars/drift.fsg", topics: str | Path = "lexicons/topics.lex"):
        self.grammar = resolve_data_path(grammar)
        self.auto = load_fsg(self.grammar)
        self.vocab = self.auto.vocab
        lex = read_lexicon(resolve_data_path(topics))
        missing = [c for _, c in TOPICS.values() if c not in lex.classes] + [c for c in ("BRIDGE",) if c not in lex.classes]
        if missing:
            raise NeurosymError(f"{topics}: no class {', '.join(missing)} (the drift corpus needs BRIDGE, ZOO_TERMS and COMIC_TERMS)")
        self.topics = {t: topic_grammar(self.grammar, start, self.vocab) for t, (start, _) in TOPICS.items()}
        self.terms = {t: {self.vocab.id(w) for w in lex.class_words(c) if w in self.vocab.tokens} for t, (_, c) in TOPICS.items()}
        self.bridges = [self.vocab.id(w) for w in lex.class_words("BRIDGE")]
        self.pad, self.bos, self.eos = (self.vocab.tokens.index(t) for t in ("<pad>", "<bos>", "<eos>"))
        self.the, self.stop = self.vocab.id("the"), self.vocab.id(".")

    def floor(self) -> float:
        return floor_ppl(self.auto, with_eos=True)

    def documents(self, n: int, seed: int, max_words: int) -> list[list[int]]:
        return self.auto.sample(n, max_len=max_words, seed=seed) if n else []

    def accepts(self, topic: str, sentence: Sequence[int]) -> bool:
        return bool(torch.isfinite(self.topics[topic].log_prob(torch.tensor([list(sentence)], dtype=torch.long)))[0])

    def sentences(self, words: Sequence[int]) -> tuple[list[list[int]], list[int]]:
        """Complete sentences (each ending in '.') and the unfinished rest."""
        out, cur = [], []
        for w in words:
            cur.append(int(w))
            if w == self.stop:
                out.append(cur)
                cur = []
        return out, cur

    def prompts(self, n: int, seed: int) -> list[tuple[str, list[int]]]:
        """``n`` drift prompts, alternating topics: (topic, [<bos>, first sentence of the
        topic that the other topic rejects, 'the', bridge word])."""
        gen = torch.Generator().manual_seed(seed)
        out: list[tuple[str, list[int]]] = []
        names = list(TOPICS)
        pool = {t: [] for t in names}
        round_ = 0
        while len(out) < n:
            t = names[len(out) % len(names)]
            if not pool[t]:
                docs = self.topics[t].sample(64, max_len=12, seed=seed * 7919 + round_)
                round_ += 1
                other = names[1 - names.index(t)]
                pool[t] = [d for d in docs if not self.accepts(other, d)]
                continue
            first = pool[t].pop()
            bridge = self.bridges[int(torch.randint(len(self.bridges), (1,), generator=gen))]
            out.append((t, [self.bos, *first, self.the, bridge]))
        return out


def judge_continuation(corpus: DriftCorpus, topic: str, prompt: Sequence[int], continuation: Sequence[int]) -> dict[str, bool]:
    """How a continuation of a drift prompt (``[<bos>, first sentence, 'the', bridge]``)
    relates to its topic: ``drift`` (a complete sentence — the bridge sentence completed,
    or a later one — is accepted by the other topic's grammar and not by ``topic``'s),
    ``invalid`` (a complete sentence neither accepts), ``complete`` (at least one complete
    sentence)."""
    other = [t for t in corpus.topics if t != topic]
    tail = list(prompt[-2:]) + [int(w) for w in continuation if w != corpus.eos]
    sentences, _ = corpus.sentences(tail)
    drift = invalid = False
    for s in sentences:
        own = corpus.accepts(topic, s)
        foreign = any(corpus.accepts(o, s) for o in other)
        drift |= foreign and not own
        invalid |= not own and not foreign
    return {"drift": drift, "invalid": invalid, "complete": bool(sentences)}


def hits_per_100(words: Sequence[int], terms: set[int], ignore: set[int] = frozenset()) -> float | None:
    """Domain-term hits per 100 words of a continuation (tokens in ``ignore`` — specials,
    punctuation — are not words); None for an empty continuation."""
    counted = [w for w in words if w not in ignore]
    return 100.0 * sum(w in terms for w in counted) / len(counted) if counted else None


# ---------------------------------------------------------------------- measures of a trained model
def drift(corpus: DriftCorpus, model: CausalLM, n: int = 400, seed: int = 0, max_len: int = 40) -> dict:
    """Drift and stickiness of ``n`` continuations of bridge-word prompts (see the module
    docstring): rates with Wilson intervals and per-sample stickiness."""
    c = corpus
    prompts = c.prompts(n, seed)
    gen = generate(model, prompts=[p[1:] for _, p in prompts], max_len=max_len, eos_id=c.eos, bos_id=c.bos, seed=seed)
    judged = [judge_continuation(c, t, p, cont) for (t, p), cont in zip(prompts, gen.tokens)]
    ignore = {c.pad, c.bos, c.eos, c.stop, c.the}
    sticky = [h for (t, _), cont in zip(prompts, gen.tokens) if (h := hits_per_100(cont, c.terms[t], ignore)) is not None]
    k = sum(j["drift"] for j in judged)
    bad = sum(j["invalid"] for j in judged)
    return {"n": n, "drift": k, "drift_rate": k / n, "drift_ci": wilson(k, n), "invalid_rate": bad / n,
            "invalid_ci": wilson(bad, n), "stickiness": statistics.fmean(sticky) if sticky else math.nan, "stickiness_samples": sticky}


class DomainText:
    """The test text of a WikiText-2 run and the domain terms of ``lexicons/domains.lex`` over its vocabulary."""

    def __init__(self, t: LMTask, domains: str | Path = DOMAINS_LEXICON):
        self.vocab = t.vocab
        docs = [doc for f in t.files["test"] for doc in read_documents(f, t.data_cfg.text_field, t.data_cfg.format)]
        self.stream: list[int] = encode_stream(t.vocab, docs)[0].tolist()
        path = resolve_data_path(domains)
        lex = read_lexicon(path)
        missing = [d for d in DOMAINS if d not in lex.classes]
        if missing:
            raise NeurosymError(f"{path}: no class {', '.join(missing)}")
        self.terms = {d: {t.vocab.id(w) for w in lex.class_words(d) if w in t.vocab} for d in DOMAINS}
        self.ignore = {i for i in (t.pad_id, t.eos_id, t.vocab.unk) if i is not None}

    def prompts(self, n: int, prompt_len: int = 32, seed: int | None = None) -> list[tuple[str, list[int]]]:
        """Up to ``n`` (domain, prompt) pairs from the test stream: windows whose prompt
        holds >= 3 terms of one domain and more of it than of any other. ``seed=None``
        cuts the stream at multiples of ``prompt_len`` and takes every k-th such window
        (the same for every call: the x-ray's prompt). A seed cuts it at an offset drawn
        from the seed and draws ``n`` of those windows at random (all of them when there
        are no more), in stream order: each seed of the recipe is measured on its own
        prompts, and the two models of one seed on the same ones."""
        stream, out = self.stream, []
        offset = 0 if seed is None else random.Random(seed).randrange(prompt_len)
        for start in range(offset, len(stream) - prompt_len, prompt_len):
            window = stream[start : start + prompt_len]
            counts = {d: sum(w in ids for w in window) for d, ids in self.terms.items()}
            best = max(counts, key=counts.get)
            if counts[best] >= 3 and all(v < counts[best] for d, v in counts.items() if d != best):
                out.append((best, window))
        if seed is not None:
            return [out[i] for i in sorted(random.Random(seed).sample(range(len(out)), min(n, len(out))))]
        step = max(1, len(out) // n) if out else 1
        return out[::step][:n]

    def stickiness(self, model: CausalLM, n: int = 300, seed: int = 0, max_len: int = 32, penalty: float = 1.2) -> dict:
        """Domain-term hits per 100 generated words after domain prompts of the test text
        (repetition penalty ``penalty`` over the last 20 tokens; the idea model's gate
        through :class:`IdeaGate`)."""
        prompts = self.prompts(n, seed=seed)
        rows = [p for _, p in prompts]
        rep = RepetitionPenalty(20, penalty)
        if isinstance(getattr(model, "output", None), IdeaOutput):
            with ungated(model):
                gen = _generate_text(model, rows, max_len, [IdeaGate(model, None), rep], seed)
        else:
            gen = _generate_text(model, rows, max_len, [rep], seed)
        sticky = [h for (d, _), cont in zip(prompts, gen.tokens) if (h := hits_per_100(cont, self.terms[d], self.ignore)) is not None]
        return {"n": len(prompts), "stickiness": statistics.fmean(sticky) if sticky else math.nan, "stickiness_samples": sticky}


def _generate_text(model: CausalLM, prompts: list[list[int]], max_len: int, processors, seed: int):
    """Continuations of text windows (no <bos>: the windows start mid-text, as in training)."""
    room = model.config.max_len - max(len(p) for p in prompts)
    return generate(model, prompts=prompts, max_len=min(max_len, room), processors=processors, seed=seed)


# ---------------------------------------------------------------------- the configs
RECIPE_THREADS = 2
# per dataset: the lm task's [model] (architecture), [model] idea, [data] and [optim] tables of the CPU recipe
RECIPE: dict[str, dict[str, dict]] = {
    "drift": {
        "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 128, "dropout": 0.0, "max_len": 64},
        "idea": {"hidden": 64, "stop_words": 3, "ramp": 0.5},
        "data": {"train_sentences": 4000, "valid_sentences": 1000, "max_words": 60, "train_seed": 0, "valid_seed": 10_007,
                 "layout": "documents"},
        "optim": {"lr": 3e-3, "weight_decay": 0.01, "warmup": 0.05, "clip": 1.0, "batch_size": 32, "epochs": 6},
    },
    "wikitext-2": {
        "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 128, "dropout": 0.1, "max_len": 64},
        "idea": {"hidden": 64, "stop_words": 50, "ramp": 0.5},
        "data": {"window": 64, "tokenizer": "word", "bos": False},
        "optim": {"lr": 2e-3, "weight_decay": 0.01, "warmup": 0.05, "clip": 1.0, "batch_size": 32, "epochs": 2},
    },
}
# WikiText-2's vocabulary: the standard one (every train.txt word) or, in the fallback on valid.txt, min_freq 5
WIKITEXT_MIN_FREQ = {"train": 1, FALLBACK: 5}
# The larger configuration for a GPU (docs/idea_gating.md): --gpu in the CLI.
GPU_RECIPE: dict[str, dict[str, dict]] = {
    "drift": {"model": {"d_model": 256, "n_layers": 4, "d_ff": 1024}, "idea": {"hidden": 256}, "data": {"train_sentences": 40000},
              "optim": {"epochs": 10}},
    "wikitext-2": {"model": {"d_model": 512, "n_layers": 8, "n_heads": 8, "d_ff": 2048, "max_len": 256}, "idea": {"hidden": 512},
                   "data": {"window": 256, "min_freq": 1}, "optim": {"epochs": 20, "lr": 5e-4}},
}
# Named budgets of the CPU recipe (tables over RECIPE's; docs/semantic_kl.md, "CPU budget", has the timings behind "cpu")
BUDGETS: dict[str, dict[str, dict[str, dict]]] = {
    "quick": {},
    "cpu": {"wikitext-2": {"optim": {"epochs": 1}}},
}
VARIANTS = ("baseline", "idea", "idea-untied")


def recipe_config(
    dataset: str, variant: str, seed: int, out_dir: str | Path = "runs/idea-gating", threads: int | None = RECIPE_THREADS,
    gpu: bool = False, progress_bar: bool = False, overrides: dict | None = None, data_dir: str | Path | None = None,
    budget: str = "quick", device: str | None = None,
) -> Config:
    """The ``lm``-task config of one dataset, variant and seed (``overrides``: {table: {key:
    value}} over the recipe's ``model``, ``idea``, ``data`` and ``optim`` tables; ``device``:
    where it trains, by default CUDA with ``gpu`` and the CPU without)."""
    if dataset not in RECIPE:
        raise NeurosymError(f"unknown idea-gating dataset {dataset!r}; expected one of {', '.join(RECIPE)}")
    if variant not in VARIANTS:
        raise NeurosymError(f"unknown idea-gating variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    if budget not in BUDGETS:
        raise NeurosymError(f"--budget: expected one of {', '.join(BUDGETS)}, got {budget!r}")
    tables = {k: dict(v) for k, v in RECIPE[dataset].items()}
    if dataset == "drift":
        tables["data"]["grammar"] = str(resolve_data_path(DRIFT_GRAMMAR).resolve())
    else:
        files = dataset_files(dataset, data_dir)
        tables["data"].update(train=files["train"], test=files["test"], min_freq=WIKITEXT_MIN_FREQ[files["train_split"]],
                              **({"valid": files["valid"]} if files["valid"] else {}))
    for extra in [BUDGETS[budget].get(dataset, {})] + ([GPU_RECIPE[dataset]] if gpu else []) + [overrides or {}]:
        for k, v in extra.items():
            tables.setdefault(k, {}).update(v)
    idea = tables.pop("idea")
    if variant == "baseline":
        tables["model"]["match_idea"] = idea["hidden"]
    else:
        tables["model"]["idea"] = {**idea, "tied": variant == "idea"}
    return Config.from_dict({
        "run": {"name": f"idea-gating-{dataset}-{variant}-seed{seed}", "out_dir": str(out_dir), "seed": seed, "threads": threads,
                "device": device or ("cuda" if gpu else "cpu"), "task": "lm"},
        **tables,
        "log": {"every": 50, "checkpoint_every": 500, "progress": progress_bar},
    })


def task(config: Config) -> LMTask:
    """The run's task: the built-in ``lm`` task."""
    return LMTask(config)


# ---------------------------------------------------------------------- reproduce
def reproduce(
    seeds: int = 3, out_dir: str | Path = "runs/idea-gating", datasets: Sequence[str] = DATASETS,
    variants: Sequence[str] = VARIANTS, progress: Callable[[str], None] | None = print, resume: bool = False,
    threads: int | None = RECIPE_THREADS, gpu: bool = False, samples: int = 400, overrides: dict | None = None,
    plots: bool = True, data_dir: str | Path | None = None, budget: str = "quick", device: str | None = None, jobs: int = 1,
) -> dict:
    """Train every variant on every dataset for ``seeds`` seeds (``jobs`` at a time in worker
    processes, see :func:`~neurosym.experiments.harness.train_grid`) and measure them; the
    report dict (see :func:`format_report`, :func:`json_report`)."""
    if seeds < 1:
        raise NeurosymError(f"--seeds: expected at least 1, got {seeds}")
    bad = [d for d in datasets if d not in RECIPE] + [v for v in variants if v not in VARIANTS]
    if bad or not variants or not datasets:
        raise NeurosymError(f"expected datasets among {', '.join(RECIPE)} and variants among {', '.join(VARIANTS)}, got {', '.join(bad) or 'none'}")
    out_dir = Path(out_dir)
    report: dict = {"seeds": seeds, "threads": threads, "datasets": {}, "samples": samples, "budget": budget}
    counter = harness.Progress(seeds * len(variants) * len(datasets), progress)
    for dataset in datasets:
        xrays: list[dict] = []
        measured: dict = {}  # the drift corpus or the domain text, built once

        def config(v: str, seed: int) -> Config:
            return recipe_config(dataset, v, seed, out_dir, threads, gpu, overrides=overrides, data_dir=data_dir, budget=budget,  # noqa: B023
                                 device=device)

        def measure(run: harness.Run) -> dict:
            """Drift (drift corpus) or stickiness (WikiText-2) of the run's model, on this
            seed's own prompts; the x-ray of the idea model at seed 0."""
            t, model, v = run.task, run.model.cpu().eval(), run.variant
            row: dict = {}
            if dataset == "drift":  # noqa: B023
                if "corpus" not in measured:  # noqa: B023
                    measured["corpus"] = DriftCorpus(t.grammar_path, resolve_data_path(TOPICS_LEXICON))  # noqa: B023
                d = drift(measured["corpus"], model, n=samples, seed=run.seed)  # noqa: B023
                row.update(drift_rate=d["drift_rate"], drift_ci=d["drift_ci"], invalid_rate=d["invalid_rate"],
                           invalid_ci=d["invalid_ci"], stickiness=d["stickiness"], prompts=d["n"])
                if "ppl_ungated" not in run.figures:  # the baseline has no gate
                    row["ppl_ungated"] = run.figures["ppl"]
            else:  # the test split's figures; the last validation PPL kept
                if "valid" in t.files:
                    row.update({f"valid_{k}": run.figures[k] for k in ("ppl", "ppl_ungated") if k in run.figures})
                row.update(t.figures(model, "test"))
                if "text" not in measured:  # noqa: B023
                    measured["text"] = DomainText(t)  # noqa: B023
                d = measured["text"].stickiness(model, n=samples, seed=run.seed)  # noqa: B023
                row.update(stickiness=d["stickiness"], prompts=d["n"])
                row.setdefault("ppl_ungated", row["ppl"])  # the baseline has no gate
            row["stickiness_ci"] = mean_ci(d["stickiness_samples"])[1:]
            if v == "idea" and run.seed == 0:
                source = measured.get("corpus") or measured.get("text")  # noqa: B023
                xrays.append(_xray_for(source, t, model, dataset))  # noqa: B023
            return row

        def describe(row: dict) -> str:
            extra = f", drift {row['drift_rate']:.3f}" if "drift_rate" in row else ""
            return (f"ppl {row['ppl']:.4f} (ungated {row['ppl_ungated']:.4f}){extra}, stickiness {row['stickiness']:.2f}, "
                    f"{row['seconds']:.0f} s training")

        grid = harness.train_grid(
            variants, seeds, config, task, resume=resume, progress=counter, label=lambda v, seed: f"{dataset}: {v}, seed {seed}",  # noqa: B023
            measure=measure, describe=describe, jobs=jobs,
        )
        t = grid[variants[-1]][-1].task
        runs = {v: [r.figures for r in rs] for v, rs in grid.items()}
        params = {v: rs[-1].params for v, rs in grid.items()}
        xr = xrays[0] if xrays else None
        rep: dict = {"floor_ppl": t.floor(), "config": {k: v for k, v in config("idea", 0).to_dict().items() if k in ("model", "data", "optim")}}
        if dataset == "wikitext-2":
            files = dataset_files(dataset, data_dir)
            rep["data"] = {"train_split": files["train_split"], "note": files["note"], "vocab_size": len(t.vocab)}
        for v in variants:
            s = harness.summarise(runs[v], ("ppl", "ppl_ungated", "valid_ppl", "drift_rate", "invalid_rate", "stickiness", "seconds"),
                                  finite_only=True)
            s.update(seed_intervals(runs[v]), params=params[v], runs=runs[v])
            rep[v] = s
        for v in variants:
            if v != "baseline" and "baseline" in variants:
                rep[v]["stickiness_gain"] = diff_ci(*(finite(runs[x], "stickiness") for x in (v, "baseline")))
                rep[v]["welch"] = {k: harness.welch(finite(runs[v], k), finite(runs["baseline"], k))
                                   for k in ("ppl", "drift_rate", "stickiness") if k in rep[v]}
        if xr is not None:
            rep["xray"] = xr
            if plots:
                rep["xray"]["plot"] = str(plot_xray(xr, out_dir / f"xray-{dataset}.png"))
        report["datasets"][dataset] = rep
    harness.save_json(json_report(report), out_dir)
    return report


def finite(rows: Sequence[dict], key: str) -> list[float]:
    """The finite values of ``key`` over the per-seed rows."""
    return [r[key] for r in rows if r.get(key) is not None and math.isfinite(r[key])]


def seed_intervals(rows: Sequence[dict]) -> dict[str, tuple[float, float]]:
    """95% intervals of the drift, invalid and stickiness rates with the **seed** as the
    unit (Student t over the per-seed values; nothing is pooled across seeds, whose
    continuations share a model). With one seed, that seed's own interval (Wilson for
    rates, t over its continuations for stickiness). ``{drift_ci, invalid_ci, stickiness_ci}``
    for the keys the rows have."""
    out = {}
    for key in ("drift_rate", "invalid_rate", "stickiness"):
        vals = finite(rows, key)
        name = key.replace("_rate", "") + "_ci"
        if len(vals) > 1:
            out[name] = mean_ci(vals)[1:]
        elif len(vals) == 1 and name in rows[0]:
            out[name] = tuple(rows[0][name])
    return out


def _xray_for(source: DriftCorpus | DomainText, t: LMTask, model: nn.Module, dataset: str, k: int = 10) -> dict:
    """The x-ray of one prompt: the drift corpus's first zoology prompt, or WikiText-2's
    first domain prompt."""
    topic, prompt = source.prompts(1, 0)[0] if dataset == "drift" else source.prompts(1)[0]
    x = xray(model, prompt, k + 8)
    tokens = list(t.vocab.tokens)
    special = {i for i, w in enumerate(tokens) if w.startswith("<") and w.endswith(">")}  # <pad>, <bos>, <unk>, ...
    name = lambda pairs: [(tokens[i], round(v, 4)) for i, v in pairs if i not in special][:k]  # noqa: E731
    return {"topic": topic, "prompt": " ".join(tokens[i] for i in prompt if tokens[i] not in ("<bos>",)),
            "boost": name(x["delta_boost"]), "suppress": name(x["delta_suppress"]), "gate_top": name(x["boost"]), "gate_bottom": name(x["suppress"])}


def plot_xray(xr: dict, path: str | Path) -> Path:
    """A bar plot of the x-ray's log-probability changes (boosted up, suppressed down)."""
    from matplotlib.figure import Figure  # lazy: plotting only

    words = [w for w, _ in xr["boost"]] + [w for w, _ in reversed(xr["suppress"])]
    values = [v for _, v in xr["boost"]] + [v for _, v in reversed(xr["suppress"])]
    fig = Figure(figsize=(max(6, 0.45 * len(words)), 3.6))
    ax = fig.add_subplot()
    ax.bar(range(len(words)), values, color=["tab:green" if v >= 0 else "tab:red" for v in values])
    ax.set_xticks(range(len(words)), words, rotation=60, ha="right", fontsize=8)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_ylabel("gated - ungated log p")
    prompt = xr["prompt"] if len(xr["prompt"]) < 70 else "..." + xr["prompt"][-67:]
    ax.set_title(f"idea gate x-ray ({xr['topic']}): {prompt}", fontsize=8)
    fig.tight_layout()
    return harness.save_png(fig, path, dpi=110)


def json_report(r: dict) -> dict:
    """``{dataset: {"baseline": {ppl, params, ...}, "variant": {ppl, ppl_ungated, params,
    drift_rate, stickiness, ...}, "untied": {...}, "floor_ppl"}}`` with ``_std`` keys."""
    out = {}
    for dataset, rep in r["datasets"].items():
        strip = lambda m: {k: v for k, v in m.items() if k != "runs"}  # noqa: E731
        entry = {"baseline": strip(rep["baseline"])}
        if "idea" in rep:
            entry["variant"] = strip(rep["idea"])
        if "idea-untied" in rep:
            entry["untied"] = strip(rep["idea-untied"])
        entry["floor_ppl"] = rep["floor_ppl"]
        entry["runs"] = {v: rep[v]["runs"] for v in rep if isinstance(rep[v], dict) and "runs" in rep[v]}
        if "xray" in rep:
            entry["xray"] = rep["xray"]
        if "data" in rep:
            entry["data"] = rep["data"]
        out[dataset] = entry
    return {"seeds": r["seeds"], "budget": r.get("budget", "quick"), "datasets": out}


def from_json(j: dict) -> dict:
    """The report :func:`json_report` was made from, as far as :func:`format_report` reads
    it (so the tables of a doc can be printed from the committed JSON)."""
    names = {"baseline": "baseline", "variant": "idea", "untied": "idea-untied"}
    datasets = {}
    for dataset, entry in j["datasets"].items():
        rep = {names[k]: {**entry[k], "runs": entry.get("runs", {}).get(names[k], [])} for k in names if k in entry}
        rep.update({k: entry[k] for k in ("floor_ppl", "xray", "data") if k in entry})
        datasets[dataset] = rep
    return {"seeds": j["seeds"], "budget": j.get("budget", "quick"), "datasets": datasets}


def format_report(r: dict) -> str:
    """Markdown tables per dataset and a verdict per comparison."""
    def pm(m: dict, k: str, fmt: str = ".3f") -> str:
        return harness.mean_std(m, k, fmt)

    def ci(pair) -> str:
        return f"[{pair[0]:.3f}, {pair[1]:.3f}]" if pair and not math.isnan(pair[0]) else "—"

    lines = []
    for dataset, rep in r["datasets"].items():
        variants = [v for v in VARIANTS if v in rep]
        where = "drift.fsg documents" if dataset == "drift" else f"WikiText-2, train split: {rep['data']['train_split']}: {rep['data']['note']}"
        lines += [f"### {dataset} ({r['seeds']} seed(s); {where})", ""]
        rows = []
        for v in variants:
            m = rep[v]
            drift = f"{pm(m, 'drift_rate')} {ci(m.get('drift_ci'))}" if "drift_rate" in m else "—"
            sticky = f"{pm(m, 'stickiness', '.2f')} {ci(m.get('stickiness_ci'))}"
            rows.append([v, f"{m['params']:,}", pm(m, "ppl", ".4f"), pm(m, "ppl_ungated", ".4f"), drift, pm(m, "invalid_rate"), sticky,
                         f"{m.get('seconds', math.nan):.0f}"])
        lines += harness.markdown_table(["model", "params", "PPL", "ungated PPL", "drift rate (95% CI over seeds)", "invalid rate",
                                         "stickiness /100 words (95% CI over seeds)", "s/run"], rows)
        if rep.get("floor_ppl"):
            lines.append(f"| exact floor | | {rep['floor_ppl']:.4f} | | | | | |")
        lines.append("")
        b = rep.get("baseline")
        for v in variants[1:] if b else ():
            m = rep[v]
            d = m["ppl"] - b["ppl"]
            spread = math.hypot(m["ppl_std"], b["ppl_std"])
            w = m.get("welch", {})
            size = "equal size" if abs(m["params"] - b["params"]) <= 0.005 * b["params"] else f"{m['params'] - b['params']:+,} parameters"
            text = (f"- {v} ({size}): PPL {d:+.4f} vs baseline (combined seed spread {spread:.4f}): "
                    f"{harness.verdict_sentence(d, w.get('ppl', {}).get('p', math.nan))}")
            if "drift_rate" in m and "drift_rate" in b:
                dd = m["drift_rate"] - b["drift_rate"]
                text += (f"; drift {m['drift_rate']:.3f} vs {b['drift_rate']:.3f}: "
                         f"{harness.verdict_sentence(dd, w.get('drift_rate', {}).get('p', math.nan))}")
            g = m.get("stickiness_gain")
            if g:
                if math.isnan(g[1]):
                    text += f"; stickiness gain {g[0]:+.2f} (one seed: no interval)"
                else:
                    text += (f"; stickiness gain {g[0]:+.2f} [{g[1]:.2f}, {g[2]:.2f}] (seeds as the unit): "
                             f"{'excludes zero' if (g[1] > 0 or g[2] < 0) else 'includes zero'}")
            lines.append(text + ".")
        if "xray" in rep:
            x = rep["xray"]
            lines += ["", f"x-ray (idea, seed 0; {x['topic']}): prompt \"{x['prompt']}\"", "",
                      "| boosted | Δ log p | suppressed | Δ log p |", "| --- | --- | --- | --- |"]
            for (bw, bv), (sw, sv) in zip(x["boost"], x["suppress"]):
                lines.append(f"| {bw} | {bv:+.3f} | {sw} | {sv:+.3f} |")
        lines.append("")
    return "\n".join(lines)


def step_times(dataset: str = "wikitext-2", repeats: int = 20, warmup: int = 3, threads: int | None = RECIPE_THREADS,
               variants: Sequence[str] = tuple(VARIANTS)) -> dict[str, dict[str, float]]:
    """Milliseconds per training step (forward, losses, backward, AdamW) of each variant on
    the same first batch, interleaved (:func:`~neurosym.experiments.harness.step_times`):
    ``{variant: {median_ms, min_ms, params, ratio}}`` (ratio: to the first variant)."""
    times = harness.step_times(variants, lambda v: recipe_config(dataset, v, 0, threads=threads), task, lr=1e-3, weight_decay=0.01,
                               repeats=repeats, warmup=warmup, threads=threads)
    base = times[variants[0]]["median_ms"]
    return {v: t | {"ratio": t["median_ms"] / base} for v, t in times.items()}
