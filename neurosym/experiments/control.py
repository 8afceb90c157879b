"""Controllable generation in the semantic-fusion recipe: decoding settings and
metrics (issue 16, points 3 and 4; docs/control.md).

A **request** is a polarity (``"pos"`` or ``"neg"``) and a punctuation token (one of
the grammar's sentence ends, ``. ! ?`` for ``clause.fsg``). The same request is decoded
under four **settings**, each a list of logits processors for
:func:`neurosym.decode.generate`; the request also enters the model as its control
vector (``control=`` (B, C)) whenever the model has a control channel, in every setting:

* ``soft``: no processor at all: whatever control the model learned;
* ``soft-mask``: the grammar's :class:`~neurosym.decode.GrammarMask`;
* ``hard``: the grammar mask plus :class:`~neurosym.decode.TokenBan` of the other
  polarity's words and of every other punctuation token;
* ``paper``: ``hard`` plus the semantic-fusion design's sampler,
  :class:`~neurosym.decode.ClassMixture` over the requested polarity's words (``alpha``,
  temperature, then nucleus: mix, then truncate), by default inside the class's own
  mass (:class:`~neurosym.decode.WithinClassMixture`).

A request's control vector is the mean gold control (``control_from_features`` with
the recipe's columns) of grammar sentences that satisfy the request
(:func:`request_controls`).

**Metrics** are pure functions of token-id lists and a :class:`ControlSpec` (the
grammar, the lexicon's polarity words, the punctuation tokens, the held-out words).
A sample's realised polarity is read from its polarity words (tokens whose lexicon
``polarity`` value is non-zero): ``pos`` when all are positive, ``neg`` when all are
negative, ``other`` when it has none or both signs. Its realised punctuation is its
last token when that is a punctuation token, else none.
"""

from __future__ import annotations

import argparse
import json
import sys
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from neurosym.compile.automaton import Automaton
from neurosym.compile.lexicon import FeatureBank
from neurosym.data.corpora import sample_sentences
from neurosym.decode.generate import Generation, feature_inputs, generate
from neurosym.decode.mask import GrammarMask, TokenBan, check_no_dead_end
from neurosym.decode.processor import LogitsProcessor
from neurosym.decode.run import load_run
from neurosym.decode.sampling import ClassMixture, WithinClassMixture
from neurosym.errors import NeurosymError
from neurosym.files import atomic_write_bytes, emit_report
from neurosym.experiments import harness
from neurosym.experiments.semantic_fusion import CONTROL
from neurosym.lm.fusion import ControlColumns, control_names, make_batch
from neurosym.lm.model import CausalLM
from neurosym.vocab import Vocab

POLARITIES = ("pos", "neg")
REALISED = ("pos", "neg", "other")
SETTINGS = ("soft", "soft-mask", "hard", "paper")
PUNCTUATION = (".", "!", "?")
POLARITY_FEATURE = "polarity"


@dataclass(frozen=True)
class Request:
    """What a sample is asked to be: ``polarity`` ``"pos"``/``"neg"`` and its final
    punctuation token ``punct``."""

    polarity: str
    punct: str

    def __str__(self) -> str:
        return f"{self.polarity} {self.punct}"


@dataclass(frozen=True)
class PaperSampler:
    """The semantic-fusion design's sampler: ``(1 - alpha) softmax(scores / temperature)
    + alpha * uniform(requested class ∩ allowed)``, then nucleus ``top_p`` of the mixture.
    The defaults are neurosym's choice, not the paper's (whose values are not recorded
    here); ``neurosym eval --alpha`` changes alpha."""

    alpha: float = 0.3
    temperature: float = 1.0
    top_p: float = 0.95
    within_class: bool = True  # mix inside the class's own mass (WithinClassMixture); False: plain ClassMixture

    def __post_init__(self):
        if not (isinstance(self.alpha, (int, float)) and 0 <= self.alpha <= 1):
            raise NeurosymError(f"alpha: expected a number in [0, 1], got {self.alpha!r}")
        if not (isinstance(self.temperature, (int, float)) and math.isfinite(self.temperature) and self.temperature > 0):
            raise NeurosymError(f"temperature: expected a finite number > 0, got {self.temperature!r}")
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise NeurosymError(f"top_p: expected a number in (0, 1], got {self.top_p!r}")


@dataclass(frozen=True)
class ControlSpec:
    """What the settings and metrics read off the grammar and the lexicon.

    automaton: the grammar (its vocabulary is the models'). words: polarity -> token ids
    of the vocabulary whose lexicon polarity has that sign. punctuation: token ids of the
    punctuation tokens, in order. held_out: polarity -> the held-out token ids of that
    polarity (never seen in training)."""

    automaton: Automaton
    words: Mapping[str, tuple[int, ...]]
    punctuation: tuple[int, ...]
    held_out: Mapping[str, tuple[int, ...]]

    @property
    def vocab(self) -> Vocab:
        return self.automaton.vocab

    def requests(self) -> list[Request]:
        """Every request: each polarity with each punctuation token."""
        return [Request(p, self.vocab.tokens[t]) for p in POLARITIES for t in self.punctuation]

    def check(self, request: Request) -> None:
        """A NeurosymError unless ``request`` is one this spec can ask for."""
        if request.polarity not in POLARITIES:
            raise NeurosymError(f"request {request}: polarity must be one of {', '.join(POLARITIES)}, got {request.polarity!r}")
        names = [self.vocab.tokens[t] for t in self.punctuation]
        if request.punct not in names:
            raise NeurosymError(f"request {request}: punctuation must be one of {' '.join(names)}, got {request.punct!r}")


def control_spec(
    automaton: Automaton, lexicon: Any, held_out: Sequence[str] = (), punctuation: Sequence[str] = PUNCTUATION,
    feature: str = POLARITY_FEATURE,
) -> ControlSpec:
    """A :class:`ControlSpec` from a grammar and a lexicon (``lexicon.value(word,
    feature)``): the polarity words are the vocabulary's tokens whose ``feature`` value
    is positive / negative; ``held_out`` words are split by the same sign."""
    vocab = automaton.vocab
    value = {t: lexicon.value(w, feature) for t, w in enumerate(vocab.tokens)}
    words = {"pos": tuple(t for t, v in value.items() if v is not None and v > 0),
             "neg": tuple(t for t, v in value.items() if v is not None and v < 0)}
    for p, ids in words.items():
        if not ids:
            raise NeurosymError(f"the lexicon gives no word of the grammar's vocabulary a {'positive' if p == 'pos' else 'negative'} {feature!r} value")
    if not punctuation or len(set(punctuation)) != len(punctuation):
        raise NeurosymError(f"punctuation: expected distinct tokens, got {list(punctuation)}")
    missing = [p for p in [*punctuation, *held_out] if p not in vocab]
    if missing:
        raise NeurosymError(f"{', '.join(map(repr, missing))}: not in the grammar's vocabulary")
    held = {vocab.id(w) for w in held_out}
    stray = [vocab.tokens[t] for t in held if t not in words["pos"] and t not in words["neg"]]
    if stray:
        raise NeurosymError(f"held-out word(s) {', '.join(map(repr, sorted(stray)))} have no {feature!r} value in the lexicon")
    return ControlSpec(
        automaton, words, tuple(vocab.id(p) for p in punctuation),
        {p: tuple(t for t in ids if t in held) for p, ids in words.items()},
    )


# ---------------------------------------------------------------------- reading a sample
def realised_polarity(tokens: Sequence[int], spec: ControlSpec) -> str:
    """``"pos"`` if every polarity word of the sample is positive (at least one),
    ``"neg"`` if every one is negative, else ``"other"`` (none, or both signs)."""
    pos = any(t in spec.words["pos"] for t in tokens)
    neg = any(t in spec.words["neg"] for t in tokens)
    return "pos" if pos and not neg else "neg" if neg and not pos else "other"


def realised_punct(tokens: Sequence[int], spec: ControlSpec) -> str | None:
    """The sample's last token if it is a punctuation token, else None."""
    return spec.vocab.tokens[tokens[-1]] if tokens and tokens[-1] in spec.punctuation else None


def _pairs(samples: Sequence[Sequence[int]], requests: Sequence[Request]) -> None:
    if len(samples) != len(requests):
        raise NeurosymError(f"{len(samples)} samples but {len(requests)} requests: expected one request per sample")
    if not samples:
        raise NeurosymError("no samples to measure")


# ---------------------------------------------------------------------- metrics
def polarity_accuracy(samples: Sequence[Sequence[int]], requests: Sequence[Request], spec: ControlSpec) -> float:
    """The fraction of samples whose realised polarity is the requested one."""
    _pairs(samples, requests)
    return sum(realised_polarity(s, spec) == r.polarity for s, r in zip(samples, requests)) / len(samples)


def punct_accuracy(samples: Sequence[Sequence[int]], requests: Sequence[Request], spec: ControlSpec) -> float:
    """The fraction of samples that end in the requested punctuation token."""
    _pairs(samples, requests)
    return sum(realised_punct(s, spec) == r.punct for s, r in zip(samples, requests)) / len(samples)


def confusion(samples: Sequence[Sequence[int]], requests: Sequence[Request], spec: ControlSpec) -> dict[str, dict[str, int]]:
    """Counts ``{intended: {realised: n}}``, intended in ``pos neg``, realised in ``pos neg other``."""
    _pairs(samples, requests)
    table = {p: {q: 0 for q in REALISED} for p in POLARITIES}
    for s, r in zip(samples, requests):
        table[r.polarity][realised_polarity(s, spec)] += 1
    return table


def ood_hits(samples: Sequence[Sequence[int]], requests: Sequence[Request], spec: ControlSpec) -> dict[str, dict[str, Any]]:
    """Per requested polarity: ``{"hits", "words", "rate"}``: of the polarity words in
    the samples that request it (each occurrence counted), how many are held-out words
    of the requested polarity; ``rate = hits / words`` (None without any word). With one
    polarity word per sample this is the fraction of samples whose adjective is a
    held-out word of the requested class."""
    _pairs(samples, requests)
    out = {}
    for p in POLARITIES:
        polar = set(spec.words["pos"]) | set(spec.words["neg"])
        held = set(spec.held_out[p])
        words = hits = 0
        for s, r in zip(samples, requests):
            if r.polarity == p:
                words += sum(t in polar for t in s)
                hits += sum(t in held for t in s)
        out[p] = {"hits": hits, "words": words, "rate": hits / words if words else None}
    return out


def sampler_share(alpha: float, spec: ControlSpec) -> dict[str, float]:
    """The held-out share the class mixture gives on its own at an adjective position:
    ``alpha * |held-out of the class| / |class|``, per polarity."""
    return {p: alpha * len(spec.held_out[p]) / len(spec.words[p]) for p in POLARITIES}


def grammaticality(samples: Sequence[Sequence[int]], automaton: Automaton) -> float:
    """The fraction of samples the grammar accepts (whole token sequences)."""
    if not samples:
        raise NeurosymError("no samples to measure")
    return sum(automaton.accepts(list(s)) for s in samples) / len(samples)


def distinct_2(samples: Sequence[Sequence[int]]) -> float:
    """Distinct bigrams over all bigrams of all samples (Li et al. 2016; bigrams inside
    a sample, never across two). 0.0 when there is no bigram at all."""
    grams = [(a, b) for s in samples for a, b in zip(s, s[1:])]
    return len(set(grams)) / len(grams) if grams else 0.0


def measure(samples: Sequence[Sequence[int]], requests: Sequence[Request], spec: ControlSpec, alpha: float = 0.0) -> dict[str, Any]:
    """Every metric of samples and their requests, as one dict (``alpha``: the class
    mixture's weight, 0 without one, for ``sampler_share``)."""
    return {
        "samples": len(samples),
        "polarity_acc": polarity_accuracy(samples, requests, spec),
        "punct_acc": punct_accuracy(samples, requests, spec),
        "confusion": confusion(samples, requests, spec),
        "ood_hit": ood_hits(samples, requests, spec),
        "sampler_share": sampler_share(alpha, spec),
        "grammatical": grammaticality(samples, spec.automaton),
        "distinct_2": distinct_2(samples),
    }


# ---------------------------------------------------------------------- settings
def banned_tokens(request: Request, spec: ControlSpec) -> list[int]:
    """What ``hard`` forbids for ``request``: the other polarity's words and every other
    punctuation token."""
    spec.check(request)
    other = "neg" if request.polarity == "pos" else "pos"
    keep = spec.vocab.id(request.punct)
    return sorted(set(spec.words[other]) | {t for t in spec.punctuation if t != keep})


def processors(setting: str, request: Request, spec: ControlSpec, eos_id: int, max_len: int | None = None,
               paper: PaperSampler = PaperSampler()) -> list[LogitsProcessor]:
    """The processors of ``setting`` (one of :data:`SETTINGS`) for ``request``;
    ``max_len``: the grammar mask's budget (tokens, end included)."""
    spec.check(request)
    if setting == "soft":
        return []
    mask = GrammarMask(spec.automaton, eos_id, max_len=max_len)
    if setting == "soft-mask":
        return [mask]
    if setting not in ("hard", "paper"):
        raise NeurosymError(f"unknown setting {setting!r}; expected one of {', '.join(SETTINGS)}")
    banned = banned_tokens(request, spec)
    check_no_dead_end(spec.automaton, banned)
    chain: list[LogitsProcessor] = [mask, TokenBan(banned, len(spec.vocab))]
    if setting == "paper":
        kind = WithinClassMixture if paper.within_class else ClassMixture
        chain.append(kind(spec.words[request.polarity], paper.alpha, paper.temperature, paper.top_p))
    return chain


# ---------------------------------------------------------------------- control vectors
def request_controls(
    sentences: Sequence[Sequence[int]], automaton: Automaton, bank: FeatureBank, columns: ControlColumns, spec: ControlSpec,
) -> dict[Request, torch.Tensor]:
    """Each request's control vector (C,): the mean gold control
    (:func:`~neurosym.lm.fusion.control_from_features` through
    :func:`~neurosym.lm.fusion.make_batch`) of the ``sentences`` of the requested
    polarity that end in punctuation, each with its last token replaced by the requested
    punctuation. Every punctuation of a polarity averages over the same sentences, so
    two requests get different vectors only where the control columns tell their
    punctuation apart (:func:`same_controls`). A polarity no sentence has is an error."""
    if not sentences:
        raise NeurosymError("request_controls: no sentences to average")
    out: dict[Request, torch.Tensor] = {}
    for p in POLARITIES:
        base = [list(s) for s in sentences if realised_polarity(s, spec) == p and realised_punct(s, spec) is not None]
        if not base:
            raise NeurosymError(f"request_controls: none of the {len(sentences)} sentences has polarity {p} and ends in punctuation")
        rewritten = [s[:-1] + [t] for t in spec.punctuation for s in base]
        gold = make_batch(rewritten, automaton, bank, control=columns)["control"].double()
        for i, t in enumerate(spec.punctuation):
            out[Request(p, spec.vocab.tokens[t])] = gold[i * len(base) : (i + 1) * len(base)].mean(dim=0).float()
    return {r: out[r] for r in spec.requests()}


def same_controls(controls: Mapping[Request, torch.Tensor]) -> list[list[Request]]:
    """Groups (of two or more) of requests whose control vectors are equal: the model
    cannot tell them apart through its control input."""
    groups: list[list[Request]] = []
    for r, c in controls.items():
        for g in groups:
            if torch.allclose(controls[g[0]], c, atol=1e-6):
                g.append(r)
                break
        else:
            groups.append([r])
    return [g for g in groups if len(g) > 1]


# ---------------------------------------------------------------------- decoding
def decode(
    model: CausalLM, setting: str, spec: ControlSpec, n: int, seed: int, controls: Mapping[Request, torch.Tensor] | None = None,
    bank: FeatureBank | None = None, max_len: int = 40, paper: PaperSampler = PaperSampler(),
    requests: Sequence[Request] | None = None,
) -> dict[Request, Generation]:
    """``n`` samples per request (default every request of the spec) under ``setting``.
    Request i of the R requests uses seed ``seed * R + i``, so a baseline and a fusion model decoded with
    the same arguments draw with the same seeds. A fusion model reads ``bank``'s causal
    features (with the grammar's roles) and, if it has a control channel, the request's
    control vector from ``controls``."""
    vocab = spec.vocab
    if model.config.vocab_size != len(vocab):
        raise NeurosymError(f"the model has {model.config.vocab_size} tokens, the grammar's vocabulary {len(vocab)}")
    eos, bos = vocab.id("<eos>"), vocab.id("<bos>")
    budget = min(max_len, model.config.max_len)  # <bos> plus budget - 1 tokens read at most
    adapter = model.adapter
    kwargs: dict[str, Any] = {}
    if adapter is not None:
        if bank is None:
            raise NeurosymError("a fusion model needs the feature bank its features come from (bank=)")
        kwargs["position_inputs"] = feature_inputs(bank, spec.automaton)
    n_control = getattr(adapter, "n_control", 0) if adapter is not None else 0
    requests = spec.requests() if requests is None else list(requests)
    out = {}
    for i, r in enumerate(requests):
        if n_control:
            if controls is None or r not in controls:
                raise NeurosymError(f"the model has a control channel: give a control vector for request {r}")
            c = controls[r]
            if c.shape != (n_control,):
                raise NeurosymError(f"request {r}: the control vector has shape {tuple(c.shape)}, the model's control channel {n_control} columns")
            kwargs["inputs"] = {"control": c[None, :].expand(n, n_control).clone()}
        chain = processors(setting, r, spec, eos, max_len=budget, paper=paper)
        out[r] = generate(model, n=n, max_len=budget, processors=chain, seed=seed * len(requests) + i, eos_id=eos, bos_id=bos,
                          vocab=vocab, **kwargs)
    return out


def measure_generations(gens: Mapping[Request, Generation], spec: ControlSpec, alpha: float = 0.0) -> dict[str, Any]:
    """:func:`measure` over every request's samples, with the rows' end statuses."""
    samples = [t for g in gens.values() for t in g.tokens]
    requests = [r for r, g in gens.items() for _ in g.tokens]
    report = measure(samples, requests, spec, alpha)
    status = [s for g in gens.values() for s in g.status]
    report["status"] = {s: status.count(s) for s in sorted(set(status))}
    return report


def evaluate_run(
    run: str | Path, settings: Sequence[str] = SETTINGS, n: int = 200, seed: int = 0, paper: PaperSampler = PaperSampler(),
    control_sentences: int = 1000, max_len: int = 40,
) -> dict[str, Any]:
    """``neurosym eval``: decode a trained semantic-fusion run under each setting and
    measure it. Control vectors come from ``control_sentences`` sentences of the run's
    full grammar (held-out words included), sampled with seed 0."""
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown or not settings or len(set(settings)) != len(settings):
        raise NeurosymError(f"--settings: expected distinct names among {', '.join(SETTINGS)}, got {','.join(settings)}")
    if n < 1:
        raise NeurosymError(f"-n/--samples: expected at least 1 sample per request, got {n}")
    loaded = load_run(run)
    task = loaded.task
    auto, bank, holdout = (getattr(task, k, None) for k in ("auto", "bank", "holdout"))
    if auto is None or bank is None or holdout is None:
        raise NeurosymError(f"{run}: eval needs a semantic-fusion run (its task has no grammar, feature bank or held-out words)")
    held = [w for ws in holdout.values() for w in ws]
    spec = control_spec(auto, bank.lexicon, held)
    words = task.data_cfg.window - 1  # the sentences layout's longest sentence
    controls = request_controls(sample_sentences(auto, control_sentences, seed=0, max_words=words), auto, bank, CONTROL, spec)
    report: dict[str, Any] = {
        "run": str(run), "kind": "fusion" if loaded.model.adapter is not None else "baseline",
        "control_input": bool(getattr(loaded.model.adapter, "n_control", 0)),
        "seed": seed, "samples_per_request": n, "requests": [str(r) for r in spec.requests()],
        "held_out": {p: [spec.vocab.tokens[t] for t in spec.held_out[p]] for p in POLARITIES},
        "class_size": {p: len(spec.words[p]) for p in POLARITIES},
        "paper": {"alpha": paper.alpha, "temperature": paper.temperature, "top_p": paper.top_p,
                  "within_class": paper.within_class},
        "control_columns": control_names(bank.names, CONTROL),
        "same_control": [[str(r) for r in g] for g in same_controls(controls)],
        "settings": {},
    }
    before = torch.get_num_threads()
    threads = loaded.config.run.threads  # the run's own thread count, as in training (None: torch's)
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        for s in settings:
            gens = decode(loaded.model, s, spec, n, seed, controls, bank, max_len=max_len, paper=paper)
            report["settings"][s] = measure_generations(gens, spec, paper.alpha if s == "paper" else 0.0)
    finally:
        torch.set_num_threads(before)
    return report


def control_block(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The recipe's ``"control"`` summary of one model over seeds, from the
    :func:`evaluate_run` report of each seed's run (every setting evaluated):
    ``{"soft": {"polarity_acc", "punct_acc"}, "soft_mask": {...}, "hard": {...},
    "paper": {...}, "ood_hit": {"pos", "neg", "sampler_baseline"}, "ood_hit_model":
    {"pos", "neg"}, "grammatical": .., "grammatical_masked": .., "distinct_2": ..}``,
    each figure the mean over seeds with a ``<name>_std`` beside it (sample standard
    deviation; 0.0 with one seed). ``ood_hit`` is the paper setting's hit rate (class
    mixture with alpha; ``sampler_baseline`` its ``alpha * |held-out| / |class|``,
    the mean of both classes), ``ood_hit_model`` the soft setting's (alpha = 0, no
    masks: the model's own rate). A rate without any polarity word is skipped; a seed
    without any word at all leaves it None."""
    if not reports:
        raise NeurosymError("control_block: no evaluation reports")
    missing = [s for s in SETTINGS for r in reports if s not in r["settings"]]
    if missing:
        raise NeurosymError(f"control_block: every setting must be evaluated; missing {', '.join(sorted(set(missing)))}")

    def stat(values: Sequence[float | None]) -> tuple[float | None, float | None]:
        xs = [float(v) for v in values if v is not None]
        if not xs:
            return None, None
        return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)

    def put(out: dict[str, Any], name: str, values: Sequence[float | None]) -> None:
        out[name], out[f"{name}_std"] = stat(values)

    block: dict[str, Any] = {"seeds": len(reports)}
    for setting in SETTINGS:
        entry: dict[str, Any] = {}
        for k in ("polarity_acc", "punct_acc", "grammatical", "distinct_2"):
            put(entry, k, [r["settings"][setting][k] for r in reports])
        block[setting.replace("-", "_")] = entry
    ood: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for p in POLARITIES:
        put(ood, p, [r["settings"]["paper"]["ood_hit"][p]["rate"] for r in reports])
        put(own, p, [r["settings"]["soft"]["ood_hit"][p]["rate"] for r in reports])
    shares = reports[0]["settings"]["paper"]["sampler_share"]
    ood["sampler_baseline"] = statistics.fmean(shares[p] for p in POLARITIES)
    ood["sampler_share"] = dict(shares)
    block["ood_hit"], block["ood_hit_model"] = ood, own
    put(block, "grammatical", [r["settings"]["soft"]["grammatical"] for r in reports])
    put(block, "grammatical_masked", [r["settings"]["soft-mask"]["grammatical"] for r in reports])
    put(block, "distinct_2", [r["settings"]["soft"]["distinct_2"] for r in reports])
    return block


def evaluate_recipe(
    report: dict[str, Any], samples: int = 200, seed: int = 0, paper: PaperSampler = PaperSampler(),
    progress: Callable[[str], None] | None = None, resume: bool = True,
) -> dict[str, Any]:
    """Decode every run of a ``reproduce semantic-fusion`` report under every setting
    (:func:`evaluate_run`; about ``samples`` samples per setting, the same number for
    every request, rounded up; the same seeds for every model) and add each model's
    :func:`control_block` as ``report[variant]["control"]`` (each run's full evaluation
    as ``runs[i]["control"]``). Each run's evaluation is written atomically to
    ``control.json`` in its folder and reused (``resume``) when its settings match."""
    if samples < 1:
        raise NeurosymError(f"control samples: expected at least 1, got {samples}")
    n_requests = 0  # requests per run: read from the first run decoded
    total = sum(len(report[v]["runs"]) for v in report["variants"])
    done = 0
    for v in report["variants"]:
        evaluations = []
        for run in report[v]["runs"]:
            done += 1
            folder = Path(run["run_dir"])
            cache = folder / "control.json"
            wanted = {"samples": samples, "seed": seed, "paper": asdict(paper), "ppl": run["ppl"], "train_loss": run["train_loss"]}  # the run as trained
            ev = None
            if resume and cache.exists():
                try:
                    stored = json.loads(cache.read_text())
                except (OSError, ValueError):
                    stored = None
                if isinstance(stored, dict) and stored.get("wanted") == wanted:
                    ev = stored["report"]
            if ev is None:
                if progress:
                    progress(f"[{done}/{total}] decoding {v}, seed {run['seed']} under {', '.join(SETTINGS)}")
                started = time.monotonic()
                n_requests = n_requests or len(load_requests(folder))
                ev = evaluate_run(folder, n=math.ceil(samples / n_requests), seed=seed, paper=paper)
                ev["seconds"] = time.monotonic() - started
                atomic_write_bytes(cache, json.dumps({"wanted": wanted, "report": ev}, ensure_ascii=False).encode())
            run["control"] = ev
            evaluations.append(ev)
        report[v]["control"] = control_block(evaluations)
    report["control_settings"] = {"samples_per_setting": samples, "seed": seed, "paper": asdict(paper)}
    return report


def load_requests(run: str | Path) -> list[Request]:
    """The requests :func:`evaluate_run` decodes for a semantic-fusion run."""
    task = load_run(run).task
    auto, bank, holdout = (getattr(task, k, None) for k in ("auto", "bank", "holdout"))
    if auto is None or bank is None or holdout is None:
        raise NeurosymError(f"{run}: not a semantic-fusion run (its task has no grammar, feature bank or held-out words)")
    return control_spec(auto, bank.lexicon, [w for ws in holdout.values() for w in ws]).requests()


def format_control(report: Mapping[str, Any]) -> str:
    """The control tables of a reproduce report (after :func:`evaluate_recipe`): per
    model, mean ± std over seeds."""
    def cell(d: Mapping[str, Any], k: str) -> str:
        x, sd = d.get(k), d.get(f"{k}_std")
        return "—" if x is None else f"{x:.3f} ± {sd:.3f}"

    cs = report["control_settings"]
    lines = [
        f"controllable decoding ({cs['samples_per_setting']} samples per setting and seed, decoding seed {cs['seed']}; "
        f"paper sampler alpha {cs['paper']['alpha']}, temperature {cs['paper']['temperature']}, top-p {cs['paper']['top_p']})",
        "",
        "| model | soft polarity | soft punct | soft grammatical | soft+mask polarity | soft+mask punct | soft+mask grammatical | hard polarity | hard punct | distinct-2 (soft) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for v in report["variants"]:
        c = report[v]["control"]
        lines.append(
            f"| {v} | {cell(c['soft'], 'polarity_acc')} | {cell(c['soft'], 'punct_acc')} | {cell(c, 'grammatical')} | "
            f"{cell(c['soft_mask'], 'polarity_acc')} | {cell(c['soft_mask'], 'punct_acc')} | {cell(c, 'grammatical_masked')} | "
            f"{cell(c['hard'], 'polarity_acc')} | {cell(c['hard'], 'punct_acc')} | {cell(c, 'distinct_2')} |"
        )
    lines += [
        "",
        "held-out adjectives: hit rate per requested class (the model's own: soft, alpha = 0, no masks; "
        "the paper's sampler: hard masks + class mixture, next to the share the mixture gives on its own)",
        "",
        "| model | model-only pos | model-only neg | paper sampler pos | paper sampler neg | sampler alone pos / neg |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for v in report["variants"]:
        c = report[v]["control"]
        share = c["ood_hit"]["sampler_share"]
        lines.append(
            f"| {v} | {cell(c['ood_hit_model'], 'pos')} | {cell(c['ood_hit_model'], 'neg')} | {cell(c['ood_hit'], 'pos')} | "
            f"{cell(c['ood_hit'], 'neg')} | {share['pos']:.3f} / {share['neg']:.3f} |"
        )
    return "\n".join(lines)


# issue 30 point 5: what the control models must reach (soft = no masks; the model's own held-out rate per class)
TARGETS = {"ppl_over_floor": 0.05, "soft_polarity": 0.95, "soft_punct": 0.95, "soft_grammatical": 0.99,
           "held_out_pos": 0.5, "held_out_neg": 0.5}


def target_figures(run: Mapping[str, Any], floor: float) -> dict[str, float | None]:
    """One finished, decoded run's figures behind :data:`TARGETS`: validation PPL over the
    floor minus 1, the soft setting's polarity, punctuation and grammaticality, and its
    held-out hit rate per class (the model's own; None without any polarity word)."""
    soft = run["control"]["settings"]["soft"]
    return {"ppl_over_floor": run["ppl"] / floor - 1, "soft_polarity": soft["polarity_acc"], "soft_punct": soft["punct_acc"],
            "soft_grammatical": soft["grammatical"], "held_out_pos": soft["ood_hit"]["pos"]["rate"],
            "held_out_neg": soft["ood_hit"]["neg"]["rate"]}


def control_targets(report: dict[str, Any], reference: str | None = None) -> dict[str, Any]:
    """:data:`TARGETS` against every variant of a decoded reproduce report (after
    :func:`evaluate_recipe`): per variant and figure the per-seed values, mean, sample
    std and ``met`` (every seed on the right side of the target: PPL at most 5% over the
    floor, the rest at least the target); with ``reference`` (a variant), Welch's test of
    each other variant against it per figure. Added as ``report["targets"]``."""
    floor = report["floor_ppl"]
    out: dict[str, Any] = {"targets": dict(TARGETS), "reference": reference, "variants": {}}
    for v in report["variants"]:
        rows = [target_figures(r, floor) for r in report[v]["runs"]]
        entry = {}
        for k, goal in TARGETS.items():
            xs = [r[k] for r in rows]
            have = [x for x in xs if x is not None]
            mean = statistics.fmean(have) if have else None
            std = statistics.stdev(have) if len(have) > 1 else 0.0 if have else None
            ok = len(have) == len(xs) and all((x <= goal) if k == "ppl_over_floor" else (x >= goal) for x in have)
            entry[k] = {"runs": xs, "mean": mean, "std": std, "met": ok}
        out["variants"][v] = entry
    if reference is not None and reference in out["variants"]:
        ref = out["variants"][reference]
        for v, entry in out["variants"].items():
            if v == reference:
                continue
            for k, fig in entry.items():
                a, b = [x for x in fig["runs"] if x is not None], [x for x in ref[k]["runs"] if x is not None]
                fig["welch"] = harness.welch(a, b) if len(a) > 1 and len(b) > 1 else None
    report["targets"] = out
    return out


def format_targets(report: Mapping[str, Any]) -> str:
    """The table of :func:`control_targets`: per variant and figure the per-seed values,
    mean ± std, the target and whether every seed met it (and Welch's p against the reference)."""
    t = report["targets"]
    names = {"ppl_over_floor": "validation PPL over the floor", "soft_polarity": "soft polarity", "soft_punct": "soft punctuation",
             "soft_grammatical": "soft grammaticality", "held_out_pos": "held-out adjectives, model alone, pos",
             "held_out_neg": "held-out adjectives, model alone, neg"}
    def num(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"
    lines = ["control targets (issue 30 point 5; every seed must meet a target; no masks; PPL on the validation split)", "",
             "| model | figure | per seed | mean ± std | target | met | Welch's p against " + (t["reference"] or "—") + " |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for v, entry in t["variants"].items():
        for k, fig in entry.items():
            goal = t["targets"][k]
            aim = f"≤ {goal:.2f}" if k == "ppl_over_floor" else f"≥ {goal:.2f}"
            w = fig.get("welch")
            p = "—" if not w or not math.isfinite(w["p"]) else f"{w['p']:.2g}"
            lines.append(f"| {v} | {names[k]} | {' / '.join(num(x) for x in fig['runs'])} | {num(fig['mean'])} ± {num(fig['std'])} | "
                         f"{aim} | {'yes' if fig['met'] else 'no'} | {p} |")
    return "\n".join(lines)


@torch.no_grad()
def off_grammar_mass(model: CausalLM, task: Any, split: str = "valid") -> dict[str, Any]:
    """Where a model's next-token distribution leaves the grammar, read along ``split``'s
    sentences (a sentences-layout task with a grammar and held-out words): at every
    position of every sentence, the probability the model gives to tokens the grammar
    forbids after that prefix (``<eos>`` outside final states included). Returned as the
    mean over positions that follow a held-out word (``after_held_out``) and over all
    others (``elsewhere``), each with its count, and ``clean_path``: the mean over
    sentences of the product of (1 - mass) along the sentence, the chance that a
    temperature-1 sampler following that sentence never leaves the grammar."""
    auto, vocab = task.auto, task.auto.vocab
    eos = vocab.id("<eos>")
    held = torch.zeros(len(vocab), dtype=torch.bool)
    held[[vocab.id(w) for ws in task.holdout.values() for w in ws]] = True
    table = GrammarMask(auto, eos).table  # (Q + 1, V): row Q is the rejected state
    Q = auto.num_states
    was = model.training
    model.eval()
    sums = {"after_held_out": [0.0, 0], "elsewhere": [0.0, 0]}
    clean: list[Tensor] = []
    try:
        for batch in task.sentence_batches(split):
            ids, targets = batch["ids"], batch["targets"]  # (B, L)
            inputs = {k: batch[k] for k in ("features", "control") if k in batch and model.adapter is not None}
            p = model(ids, **inputs).logits.float().softmax(-1)  # (B, L, V)
            words = torch.where(targets == task.pad_id, eos, targets)[:, :-1]  # the words read after <bos>
            states = torch.cat([torch.full((len(ids), 1), auto.start), auto.run(words)], dim=1)  # (B, L): state before each target
            states = torch.where(states < 0, Q, states)
            allowed = table[states]  # (B, L, V)
            off = (p * ~allowed).sum(-1)  # (B, L)
            keep = targets != task.pad_id
            after = held[ids] & keep
            for name, where in (("after_held_out", after), ("elsewhere", keep & ~after)):
                sums[name][0] += float(off[where].double().sum())
                sums[name][1] += int(where.sum())
            clean.append(torch.where(keep, 1 - off, torch.ones_like(off)).double().prod(-1))
    finally:
        model.train(was)
    out: dict[str, Any] = {k: {"mass": total / n if n else None, "positions": n} for k, (total, n) in sums.items()}
    out["clean_path"] = float(torch.cat(clean).mean())
    out["split"] = split
    return out


def diagnose_run(run: str | Path, split: str = "valid") -> dict[str, Any]:
    """:func:`off_grammar_mass` of a semantic-fusion run as trained, then with its held-out
    words read as blank inputs (:meth:`~neurosym.lm.model.CausalLM.blank_inputs`), to tell
    what the grammar leak owes to the untrained input embeddings of the held-out words."""
    loaded = load_run(run)
    task, model = loaded.task, loaded.model
    vocab = task.auto.vocab
    held = [vocab.id(w) for ws in task.holdout.values() for w in ws]
    before = torch.get_num_threads()
    if loaded.config.run.threads is not None:
        torch.set_num_threads(loaded.config.run.threads)
    try:
        out = {"run": str(run), "label_smoothing": task.objective.label_smoothing, "as_trained": off_grammar_mass(model, task, split)}
        model.blank_inputs(held, model.blank_drop.nonzero().flatten().tolist() if model.blank_drop is not None else [], model.blank_dropout)
        out["held_out_blank"] = off_grammar_mass(model, task, split)
    finally:
        torch.set_num_threads(before)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m neurosym.experiments.control RUN... [--json FILE]``: :func:`diagnose_run` of each run."""
    ap = argparse.ArgumentParser(description="Where semantic-fusion runs leave the grammar (off-grammar probability mass).")
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--split", default="valid", choices=("valid", "test"))
    ap.add_argument("--json", type=Path, default=None, help="write the report here")
    args = ap.parse_args(argv)
    try:
        report = {"runs": [diagnose_run(r, args.split) for r in args.runs]}
    except NeurosymError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    emit_report(report, args.json)


def format_eval(report: dict[str, Any]) -> str:
    """The eval report as Markdown tables: the metrics per setting, then each setting's
    intended-vs-realised confusion matrix."""
    def rate(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"

    held = "; ".join(f"{p}: {', '.join(ws) or 'none'} of {report['class_size'][p]}" for p, ws in report["held_out"].items())
    lines = [
        f"{report['run']} ({report['kind']}, control input {'yes' if report['control_input'] else 'no'}): "
        f"{report['samples_per_request']} samples per request x {len(report['requests'])} requests, seed {report['seed']}; held out: {held}",
        "",
        "| setting | polarity acc | punct acc | grammatical | distinct-2 | OOD hit pos | OOD hit neg | sampler share pos / neg |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s, m in report["settings"].items():
        share = m["sampler_share"]
        lines.append(
            f"| {s} | {m['polarity_acc']:.3f} | {m['punct_acc']:.3f} | {m['grammatical']:.3f} | {m['distinct_2']:.3f} | "
            f"{rate(m['ood_hit']['pos']['rate'])} | {rate(m['ood_hit']['neg']['rate'])} | {share['pos']:.3f} / {share['neg']:.3f} |"
        )
    lines += ["", "intended -> realised (POS / NEG / OTHER):"]
    for s, m in report["settings"].items():
        cells = "; ".join(f"{p.upper()} -> {' / '.join(str(m['confusion'][p][q]) for q in REALISED)}" for p in POLARITIES)
        lines.append(f"  {s}: {cells}")
    if report["same_control"]:
        groups = "; ".join(" = ".join(g) for g in report["same_control"])
        lines += ["", f"requests with the same control vector (the model cannot tell them apart): {groups}"]
    return "\n".join(lines)


__all__ = [
    "POLARITIES", "PUNCTUATION", "PaperSampler", "REALISED", "Request", "SETTINGS", "ControlSpec",
    "TARGETS", "banned_tokens", "confusion", "control_block", "control_targets", "diagnose_run", "format_targets",
    "off_grammar_mass", "target_figures", "control_spec", "decode", "distinct_2", "evaluate_recipe",
    "evaluate_run", "format_control", "format_eval", "load_requests", "grammaticality", "measure", "measure_generations", "ood_hits", "polarity_accuracy", "processors",
    "punct_accuracy", "realised_polarity", "realised_punct", "request_controls", "same_controls", "sampler_share",
]


if __name__ == "__main__":
    main()
