"""The idea-gating recipe: a baseline and idea-gated LMs at equal size, on a drift
corpus whose truth a grammar knows, and on WikiText-2.

**Models** (:data:`VARIANTS`): ``baseline`` (a causal LM whose ``d_ff`` is widened so it
has the idea model's parameter count, :func:`~neurosym.lm.idea.matched_d_ff`), ``idea``
(the idea head tied to the token embeddings, the published gate, alpha ramped 0 -> 0.5
over the first half of training) and ``idea-untied`` (the published untied head, its
larger parameter count reported). Loss: CE of the (gated) next-token distribution plus
``idea_weight`` x the masked idea BCE.

**Drift corpus** (``dataset = "drift"``): documents sampled from ``grammars/drift.fsg``,
two topics (zoology, comics) sharing the bridge words of ``lexicons/topics.lex``
(``bat``, ``robin``, ``spider``); a document never changes topic. The exact PPL floor is
the grammar's (``<eos>`` counted). A drift prompt is ``<bos>``, a first sentence that
only its topic T accepts, then ``the`` and a bridge word; the model continues it. The
continuation's sentences (the one the bridge word starts, then the later ones) are
judged by the topic grammars (drift.fsg started at its second-sentence state of each
topic, so that they accept one or more sentences of that topic): a continuation
*drifts* when one of its complete sentences is accepted by the other topic's grammar
and not by T's. :func:`judge_continuation` is that rule; rates carry Wilson 95%
intervals. Stickiness: T's topic-only words (``ZOO_TERMS`` / ``COMIC_TERMS``) per 100
generated words.

**WikiText-2** (``dataset = "wikitext-2"``, issue 17's :mod:`neurosym.data.text`): train
on ``valid.txt`` (the train split is not shipped), evaluate on ``test.txt``; word
vocabulary of the training text with ``min_freq``; windows of ``seq_len``. Stickiness:
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F

from neurosym.compile.fsg import compile_fsg, load_fsg
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.data import resolve_data_path
from neurosym.data.text import WordVocab, corpus_path, lm_windows, read_lines
from neurosym.decode.generate import generate
from neurosym.decode.idea import IdeaGate, ungated
from neurosym.decode.sampling import RepetitionPenalty
from neurosym.dsl.fsg import read_fsg
from neurosym.dsl.lexicon import read_lexicon
from neurosym.errors import ConfigError, NeurosymError
from neurosym.experiments import harness
from neurosym.experiments.harness import diff_ci, mean_ci, wilson
from neurosym.lm.config import Config
from neurosym.lm.idea import (
    IdeaConfig, IdeaOutput, idea_parameters, idea_perplexities, idea_training_loss, matched_d_ff, stop_word_ids, xray,
)
from neurosym.lm.metrics import evaluate, floor_ppl
from neurosym.lm.model import CausalLM, LMConfig, LMSection

DATASETS = ("drift", "wikitext-2")
TOPICS = {"zoology": ("Z1", "ZOO_TERMS"), "comics": ("K1", "COMIC_TERMS")}  # topic -> (sentence-grammar start, terms class)
DOMAINS = ("MUSIC", "MILITARY", "SPORT")


@dataclass
class ModelSection(LMSection):
    """``[model]``: the architecture (:class:`~neurosym.lm.model.LMSection`), the idea head
    and the gate (``idea_*``)."""

    kind: Literal["baseline", "idea"] = "idea"
    match_params: bool = True  # baseline: widen d_ff to the tied idea model's parameter count
    idea_window: int = 20
    idea_hidden: int = 128
    idea_tied: bool = True
    idea_alpha: float = 0.5
    idea_beta: float = -2.0
    idea_eps: float = 1e-6
    idea_variant: Literal["published", "outside"] = "published"
    idea_ramp: float = 0.5  # share of the training steps over which alpha ramps 0 -> idea_alpha
    idea_weight: float = 1.0
    idea_stop_words: int = 50
    idea_pos_weight: float | None = None

    def __post_init__(self):
        super().__post_init__()
        _require(0 <= self.idea_ramp <= 1, "model.idea_ramp", "expected a share of the training steps in [0, 1]", self.idea_ramp)
        self.idea(0)  # checks the idea_* keys (ConfigError "model.idea_<key>: ...")

    def idea(self, ramp_steps: int) -> IdeaConfig:
        """The :class:`IdeaConfig` of the ``idea_*`` keys."""
        return IdeaConfig(
            window=self.idea_window, hidden=self.idea_hidden, tied=self.idea_tied, alpha=self.idea_alpha, beta=self.idea_beta,
            eps=self.idea_eps, variant=self.idea_variant, ramp_steps=ramp_steps, weight=self.idea_weight,
            stop_words=self.idea_stop_words, pos_weight=self.idea_pos_weight,
        )


@dataclass
class DataSection:
    """``[data]``: which corpus and how much of it."""

    dataset: Literal["drift", "wikitext-2"] = "drift"
    grammar: str = "grammars/drift.fsg"  # drift
    topics: str = "lexicons/topics.lex"  # drift: the topic-only word classes
    domains: str = "lexicons/domains.lex"  # wikitext-2: the domain word classes
    data_dir: str | None = None  # wikitext-2: a folder with valid.txt / test.txt (default: the shipped copy)
    train: int = 6000  # drift: training documents
    valid: int = 1000  # drift: evaluation documents
    max_words: int = 60  # drift: longest document
    min_freq: int = 3  # wikitext-2: vocabulary cut-off (rarer words -> <unk>)
    seq_len: int = 64  # wikitext-2: window length
    seed: int = 0  # corpus seed (the same corpus for every model seed)

    def __post_init__(self):
        _require(self.train >= 0, "data.train", "expected a number of documents >= 0", self.train)
        _require(self.valid >= 1, "data.valid", "expected a number of documents >= 1", self.valid)
        _require(3 <= self.max_words, "data.max_words", "expected at least 3 words", self.max_words)
        _require(self.min_freq >= 1, "data.min_freq", "expected an integer >= 1", self.min_freq)
        _require(self.seq_len >= 2, "data.seq_len", "expected an integer >= 2", self.seq_len)
        _require(0 <= self.seed < 2**32, "data.seed", "expected an integer in [0, 2**32)", self.seed)


def _require(ok: bool, key: str, expected: str, value) -> None:
    if not ok:
        shown = f'"{value}"' if isinstance(value, str) else str(value).replace("True", "true").replace("False", "false")
        raise ConfigError(f"{key}: {expected}, got {shown}")


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


# ---------------------------------------------------------------------- the task
def doc_batch(docs: Sequence[Sequence[int]], pad: int, bos: int, eos: int) -> dict[str, torch.Tensor]:
    """``ids = <bos> w1..wn``, ``targets = w1..wn <eos>``, right-padded: (N, max n + 1) each."""
    width = max((len(d) for d in docs), default=0) + 1
    ids = torch.full((len(docs), width), pad, dtype=torch.long)
    targets = torch.full((len(docs), width), pad, dtype=torch.long)
    for i, d in enumerate(docs):
        ids[i, : len(d) + 1] = torch.tensor([bos, *d], dtype=torch.long)
        targets[i, : len(d) + 1] = torch.tensor([*d, eos], dtype=torch.long)
    return {"ids": ids, "targets": targets}


class IdeaGatingTask:
    """Corpus, model and loss of the recipe (the trainer's task protocol)."""

    def __init__(self, config: Config):
        self.model_cfg = m = config.section("model", ModelSection)
        self.data_cfg = d = config.section("data", DataSection)
        self.batch_size = config.optim.batch_size
        self.epochs = config.optim.epochs
        if d.dataset == "drift":
            self.corpus = DriftCorpus(_data_file(config, "data.grammar", d.grammar), _data_file(config, "data.topics", d.topics))
            if m.max_len < d.max_words + 1:
                raise config.error("model.max_len", f"expected at least data.max_words + 1 = {d.max_words + 1} (the longest input), got {m.max_len}")
            c = self.corpus
            self.tokens = list(c.vocab.tokens)
            self.pad_id = c.pad
            train_docs = c.documents(d.train, d.seed, d.max_words)
            valid_docs = c.documents(d.valid, d.seed + 10_007, d.max_words)
            self.train_data = doc_batch(train_docs, c.pad, c.bos, c.eos)
            self.valid_batches = [doc_batch(valid_docs[i : i + 256], c.pad, c.bos, c.eos) for i in range(0, len(valid_docs), 256)]
            specials = [c.pad, c.bos, c.eos, self.tokens.index("<unk>")]
        else:
            if m.max_len < d.seq_len:
                raise config.error("model.max_len", f"expected at least data.seq_len = {d.seq_len}, got {m.max_len}")
            try:
                train_lines = read_lines(corpus_path("wikitext-2", "valid", d.data_dir))
                test_lines = read_lines(corpus_path("wikitext-2", "test", d.data_dir))
            except NeurosymError as err:
                raise config.error("data.data_dir", str(err)) from None
            self.vocab = WordVocab.build(train_lines, min_freq=d.min_freq)
            self.tokens = list(self.vocab.tokens)
            self.pad_id = self.vocab.pad_id
            ids, targets = lm_windows(self.vocab.encode_lines(train_lines), d.seq_len)
            self.train_data = {"ids": ids, "targets": targets}
            self.test_stream = self.vocab.encode_lines(test_lines)
            tids, ttargets = lm_windows(self.test_stream, d.seq_len)
            self.valid_batches = [{"ids": tids[i : i + 128], "targets": ttargets[i : i + 128]} for i in range(0, len(tids), 128)]
            self.domains_path = _data_file(config, "data.domains", d.domains)
            specials = [self.vocab.pad_id, self.vocab.eos_id]
        self.stop_ids = stop_word_ids(self.train_data["targets"], m.idea_stop_words, len(self.tokens), exclude=specials)
        self.ramp_steps = round(m.idea_ramp * self.steps_per_epoch() * self.epochs)

    # ------------------------------------------------------------------ the task protocol
    def lm_config(self, d_ff: int | None = None) -> LMConfig:
        m = self.model_cfg
        return m.lm_config(len(self.tokens), self.pad_id, d_ff=d_ff or m.d_ff)

    def build_model(self, config: Config | None = None) -> CausalLM:
        m = self.model_cfg
        if m.kind == "baseline":
            extra = idea_parameters(m.d_model, len(self.tokens), m.idea_hidden, True) if m.match_params else 0
            return CausalLM(self.lm_config(matched_d_ff(m.d_model, m.n_layers, m.d_ff, extra)))
        return CausalLM(self.lm_config(), output=IdeaOutput(m.d_model, len(self.tokens), m.idea(self.ramp_steps)))

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.train_data["ids"]) / self.batch_size)

    def train_batches(self, epoch: int, generator: torch.Generator) -> list[dict[str, torch.Tensor]]:
        order = torch.randperm(len(self.train_data["ids"]), generator=generator)
        out = []
        for i in range(0, len(order), self.batch_size):
            rows = order[i : i + self.batch_size]
            batch = {k: v[rows] for k, v in self.train_data.items()}
            width = int((batch["targets"] != self.pad_id).sum(1).max())  # trim the padding every row has
            out.append({k: v[:, :width] for k, v in batch.items()})
        return out

    def loss(self, model, batch) -> tuple[torch.Tensor, dict[str, float]]:
        targets = batch["targets"]
        if isinstance(getattr(model, "output", None), IdeaOutput):
            # CE of the gated logits + idea_weight * idea BCE, fused (lm.idea.idea_objective: the same value and
            # gradient as F.cross_entropy(gated) + weight * idea_loss(...), in a fraction of the passes over (B, L, V))
            total, ce, bce = idea_training_loss(model, batch["ids"], targets, self.stop_ids.to(targets.device), self.pad_id)
            return total, {"ce": float(ce), "idea_bce": float(bce)}
        out = model(batch["ids"])
        ce = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]).float(), targets.reshape(-1), ignore_index=self.pad_id)
        return ce, {"ce": float(ce.detach())}

    def evaluate(self, model) -> dict[str, float]:
        if isinstance(getattr(model, "output", None), IdeaOutput):
            r = idea_perplexities(model, self.valid_batches, self.pad_id)
            return {"ppl": r["ppl"], "ppl_ungated": r["ppl_ungated"], "tokens": r["tokens"]}
        r = evaluate(model, self.valid_batches, input_keys=(), pad_id=self.pad_id)
        return {"ppl": r["ppl"], "ppl_ungated": r["ppl"], "tokens": r["tokens"]}

    # ------------------------------------------------------------------ generation measures
    def floor(self) -> float | None:
        return self.corpus.floor() if self.data_cfg.dataset == "drift" else None

    def drift(self, model: CausalLM, n: int = 400, seed: int = 0, max_len: int = 40) -> dict:
        """Drift and stickiness of ``n`` continuations of bridge-word prompts (see the
        module docstring): rates with Wilson intervals and per-sample stickiness."""
        c = self.corpus
        prompts = c.prompts(n, seed)
        gen = generate(model, prompts=[p[1:] for _, p in prompts], max_len=max_len, eos_id=c.eos, bos_id=c.bos, seed=seed)
        judged = [judge_continuation(c, t, p, cont) for (t, p), cont in zip(prompts, gen.tokens)]
        ignore = {c.pad, c.bos, c.eos, c.stop, c.the}
        sticky = [h for (t, _), cont in zip(prompts, gen.tokens) if (h := hits_per_100(cont, c.terms[t], ignore)) is not None]
        k = sum(j["drift"] for j in judged)
        bad = sum(j["invalid"] for j in judged)
        return {"n": n, "drift": k, "drift_rate": k / n, "drift_ci": wilson(k, n), "invalid_rate": bad / n,
                "invalid_ci": wilson(bad, n), "stickiness": statistics.fmean(sticky) if sticky else math.nan, "stickiness_samples": sticky}

    def domain_prompts(self, n: int, prompt_len: int = 32, seed: int | None = None) -> list[tuple[str, list[int]]]:
        """Up to ``n`` (domain, prompt) pairs from the test stream: windows whose prompt
        holds >= 3 terms of one domain and more of it than of any other. ``seed=None``
        cuts the stream at multiples of ``prompt_len`` and takes every k-th such window
        (the same for every call: the x-ray's prompt). A seed cuts it at an offset drawn
        from the seed and draws ``n`` of those windows at random (all of them when there
        are no more), in stream order: each seed of the recipe is measured on its own
        prompts, and the two models of one seed on the same ones."""
        terms = self.domain_terms()
        stream = self.test_stream.tolist()
        out = []
        offset = 0 if seed is None else random.Random(seed).randrange(prompt_len)
        for start in range(offset, len(stream) - prompt_len, prompt_len):
            window = stream[start : start + prompt_len]
            counts = {d: sum(w in ids for w in window) for d, ids in terms.items()}
            best = max(counts, key=counts.get)
            if counts[best] >= 3 and all(v < counts[best] for d, v in counts.items() if d != best):
                out.append((best, window))
        if seed is not None:
            return [out[i] for i in sorted(random.Random(seed).sample(range(len(out)), min(n, len(out))))]
        step = max(1, len(out) // n) if out else 1
        return out[::step][:n]

    def domain_terms(self) -> dict[str, set[int]]:
        lex = read_lexicon(self.domains_path)
        missing = [d for d in DOMAINS if d not in lex.classes]
        if missing:
            raise NeurosymError(f"{self.domains_path}: no class {', '.join(missing)}")
        return {d: {self.vocab.index[w] for w in lex.class_words(d) if w in self.vocab.index} for d in DOMAINS}

    def stickiness(self, model: CausalLM, n: int = 300, seed: int = 0, max_len: int = 32, penalty: float = 1.2) -> dict:
        """Domain-term hits per 100 generated words after domain prompts of the test text
        (repetition penalty ``penalty`` over the last 20 tokens; the idea model's gate
        through :class:`IdeaGate`)."""
        prompts = self.domain_prompts(n, seed=seed)
        terms = self.domain_terms()
        rows = [p for _, p in prompts]
        rep = RepetitionPenalty(20, penalty)
        if isinstance(getattr(model, "output", None), IdeaOutput):
            with ungated(model):
                gen = _generate_text(model, rows, max_len, [IdeaGate(model, None), rep], seed)
        else:
            gen = _generate_text(model, rows, max_len, [rep], seed)
        ignore = {self.vocab.pad_id, self.vocab.eos_id, self.vocab.unk_id}
        sticky = [h for (d, _), cont in zip(prompts, gen.tokens) if (h := hits_per_100(cont, terms[d], ignore)) is not None]
        return {"n": len(prompts), "stickiness": statistics.fmean(sticky) if sticky else math.nan, "stickiness_samples": sticky}


def _generate_text(model: CausalLM, prompts: list[list[int]], max_len: int, processors, seed: int):
    """Continuations of text windows (no <bos>: the windows start mid-text, as in training)."""
    room = model.config.max_len - max(len(p) for p in prompts)
    return generate(model, prompts=prompts, max_len=min(max_len, room), processors=processors, seed=seed)


def _data_file(config: Config, key: str, name: str) -> Path:
    try:
        path = resolve_data_path(name)
    except NeurosymError as err:
        raise config.error(key, str(err)) from None
    if not path.is_file():
        raise config.error(key, f"no such file {name} (relative paths are read from the working folder, or are shipped grammars/... and lexicons/... files)")
    return path


def task(config: Config) -> IdeaGatingTask:
    """``run.task = "neurosym.experiments.idea_gating:task"``."""
    return IdeaGatingTask(config)


# ---------------------------------------------------------------------- reproduce
RECIPE_THREADS = 2
# per dataset: the [model], [data] and [optim] tables of the CPU recipe
RECIPE: dict[str, dict[str, dict]] = {
    "drift": {
        "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 128, "dropout": 0.0, "max_len": 64, "idea_hidden": 64, "idea_stop_words": 3},
        "data": {"dataset": "drift", "train": 4000, "valid": 1000},
        "optim": {"lr": 3e-3, "weight_decay": 0.01, "warmup": 0.05, "clip": 1.0, "batch_size": 32, "epochs": 6},
    },
    "wikitext-2": {
        "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 128, "max_len": 64, "idea_hidden": 64, "idea_stop_words": 50},
        "data": {"dataset": "wikitext-2", "min_freq": 5, "seq_len": 64},
        "optim": {"lr": 2e-3, "weight_decay": 0.01, "warmup": 0.05, "clip": 1.0, "batch_size": 32, "epochs": 2},
    },
}
# The larger configuration for a GPU (docs/idea_gating.md): --gpu in the CLI.
GPU_RECIPE: dict[str, dict[str, dict]] = {
    "drift": {"model": {"d_model": 256, "n_layers": 4, "d_ff": 1024, "idea_hidden": 256}, "data": {"train": 40000}, "optim": {"epochs": 10}},
    "wikitext-2": {"model": {"d_model": 512, "n_layers": 8, "n_heads": 8, "d_ff": 2048, "max_len": 256, "idea_hidden": 512},
                   "data": {"seq_len": 256, "min_freq": 1}, "optim": {"epochs": 20, "lr": 5e-4}},
}
VARIANTS: dict[str, dict] = {
    "baseline": {"kind": "baseline", "match_params": True},
    "idea": {"kind": "idea", "idea_tied": True},
    "idea-untied": {"kind": "idea", "idea_tied": False},
}


def recipe_config(
    dataset: str, variant: str, seed: int, out_dir: str | Path = "runs/idea-gating", threads: int | None = RECIPE_THREADS,
    gpu: bool = False, progress_bar: bool = False, overrides: dict | None = None,
) -> Config:
    """The recipe's config for one dataset, variant and seed (``overrides``: {table: {key: value}})."""
    if dataset not in RECIPE:
        raise NeurosymError(f"unknown idea-gating dataset {dataset!r}; expected one of {', '.join(RECIPE)}")
    if variant not in VARIANTS:
        raise NeurosymError(f"unknown idea-gating variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    tables = {k: dict(v) for k, v in RECIPE[dataset].items()}
    for extra in ([GPU_RECIPE[dataset]] if gpu else []) + [overrides or {}]:
        for k, v in extra.items():
            tables.setdefault(k, {}).update(v)
    tables["model"].update(VARIANTS[variant])
    return Config.from_dict({
        "run": {"name": f"idea-gating-{dataset}-{variant}-seed{seed}", "out_dir": str(out_dir), "seed": seed, "threads": threads,
                "device": "cuda" if gpu else "cpu", "task": "neurosym.experiments.idea_gating:task"},
        **tables,
        "log": {"every": 50, "checkpoint_every": 500, "progress": progress_bar},
    })


def reproduce(
    seeds: int = 3, out_dir: str | Path = "runs/idea-gating", datasets: Sequence[str] = DATASETS,
    variants: Sequence[str] = tuple(VARIANTS), progress: Callable[[str], None] | None = print, resume: bool = False,
    threads: int | None = RECIPE_THREADS, gpu: bool = False, samples: int = 400, overrides: dict | None = None,
    plots: bool = True,
) -> dict:
    """Train every variant on every dataset for ``seeds`` seeds and measure them; the
    report dict (see :func:`format_report`, :func:`json_report`)."""
    if seeds < 1:
        raise NeurosymError(f"--seeds: expected at least 1, got {seeds}")
    bad = [d for d in datasets if d not in RECIPE] + [v for v in variants if v not in VARIANTS]
    if bad or not variants or not datasets:
        raise NeurosymError(f"expected datasets among {', '.join(RECIPE)} and variants among {', '.join(VARIANTS)}, got {', '.join(bad) or 'none'}")
    out_dir = Path(out_dir)
    report: dict = {"seeds": seeds, "threads": threads, "datasets": {}, "samples": samples}
    counter = harness.Progress(seeds * len(variants) * len(datasets), progress)
    for dataset in datasets:
        xrays: list[dict] = []

        def measure(run: harness.Run) -> dict:
            """Drift (drift corpus) or stickiness (WikiText-2) of the run's model, on this
            seed's own prompts; the x-ray of the idea model at seed 0."""
            t, model, v = run.task, run.model.cpu().eval(), run.variant
            if dataset == "drift":  # noqa: B023
                d = t.drift(model, n=samples, seed=run.seed)
                row = {"drift_rate": d["drift_rate"], "drift_ci": d["drift_ci"], "invalid_rate": d["invalid_rate"],
                       "invalid_ci": d["invalid_ci"], "stickiness": d["stickiness"], "prompts": d["n"]}
            else:
                d = t.stickiness(model, n=samples, seed=run.seed)
                row = {"stickiness": d["stickiness"], "prompts": d["n"]}
            row["stickiness_ci"] = mean_ci(d["stickiness_samples"])[1:]
            if v == "idea" and run.seed == 0:
                xrays.append(_xray_for(t, model, dataset))  # noqa: B023
            return row

        def describe(row: dict) -> str:
            extra = f", drift {row['drift_rate']:.3f}" if "drift_rate" in row else ""
            return (f"ppl {row['ppl']:.4f} (ungated {row['ppl_ungated']:.4f}){extra}, stickiness {row['stickiness']:.2f}, "
                    f"{row['seconds']:.0f} s training")

        grid = harness.train_grid(
            variants, seeds, lambda v, seed: recipe_config(dataset, v, seed, out_dir, threads, gpu, progress_bar=False, overrides=overrides),  # noqa: B023
            task, resume=resume, progress=counter, label=lambda v, seed: f"{dataset}: {v}, seed {seed}", measure=measure, describe=describe,  # noqa: B023
        )
        t = grid[variants[-1]][-1].task
        runs = {v: [r.figures for r in rs] for v, rs in grid.items()}
        params = {v: rs[-1].params for v, rs in grid.items()}
        xr = xrays[0] if xrays else None
        rep: dict = {"floor_ppl": t.floor(), "config": {k: v for k, v in recipe_config(dataset, "idea", 0, out_dir, threads, gpu, overrides=overrides).to_dict().items() if k in ("model", "data", "optim")}}
        for v in variants:
            s = harness.summarise(runs[v], ("ppl", "ppl_ungated", "drift_rate", "invalid_rate", "stickiness", "seconds"), finite_only=True)
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


def _xray_for(t: IdeaGatingTask, model: CausalLM, dataset: str, k: int = 10) -> dict:
    """The x-ray of one prompt: the drift corpus's first zoology prompt, or WikiText-2's
    first domain prompt."""
    if dataset == "drift":
        topic, prompt = t.corpus.prompts(1, 0)[0]
    else:
        topic, prompt = t.domain_prompts(1)[0]
    x = xray(model, prompt, k + 8)
    special = {i for i, w in enumerate(t.tokens) if w.startswith("<") and w.endswith(">")}  # <pad>, <bos>, <unk>, ...
    name = lambda pairs: [(t.tokens[i], round(v, 4)) for i, v in pairs if i not in special][:k]  # noqa: E731
    return {"topic": topic, "prompt": " ".join(t.tokens[i] for i in prompt if t.tokens[i] not in ("<bos>",)),
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
        out[dataset] = entry
    return {"seeds": r["seeds"], "datasets": out}


def format_report(r: dict) -> str:
    """Markdown tables per dataset and a verdict per comparison."""
    def pm(m: dict, k: str, fmt: str = ".3f") -> str:
        return harness.mean_std(m, k, fmt)

    def ci(pair) -> str:
        return f"[{pair[0]:.3f}, {pair[1]:.3f}]" if pair and not math.isnan(pair[0]) else "—"

    lines = []
    for dataset, rep in r["datasets"].items():
        variants = [v for v in VARIANTS if v in rep]
        where = "drift.fsg documents" if dataset == "drift" else "WikiText-2: trained on valid.txt (the train split is not shipped), evaluated on test.txt"
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
