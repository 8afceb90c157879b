"""The structured-LM evaluation suite: which built-in prior helps on which task.

Every task of :mod:`neurosym.tasks` is learned by every encoder of
:mod:`neurosym.layers.encoders` under one head per task family (:mod:`neurosym.experiments.suite_heads`:
a linear layer on the pooled vector for classification and next-token prediction, on
each token's state for tagging, a GRU decoder with attention for seq2seq), with
identical hyper-parameters, budget (optimizer steps) and seeds. Each task is scored by
its own metric (accuracy, entity/chunk/bracket F1, UAS, exact match); next-token tasks
add the perplexity. The symbolic priors come in the
design's three settings:

* ``regex-hard``: the compiled automata frozen (only the readout trains);
* ``regex-soft``: initialised from the automata, every weight trains;
* ``regex-removed``: the same layer with random weights (no prior);
* ``regex-others``: hard, but the bank holds only the *other* six Tomita automata and
  the readout starts untrained (a related but wrong prior: does it still help?);
* ``pcfg-hard``: the compiled rule tensors, fixed (features memoised per sentence);
* ``pcfg-soft`` (:class:`SoftPCFGEncoder`): the rule and emission log-probabilities
  become parameters on the grammar's support, initialised from the compiled ones and
  trained through ``log P(sentence)`` (the posterior features stay detached);
* ``pcfg-removed``: random rule tensors over every (A, B, C) and token (no prior);
* ``pcfg-prefix-hard`` / ``pcfg-prefix-removed`` (:class:`PCFGPrefixEncoder`): the
  grammar's exact next-token distribution after the sequence (prefix probabilities,
  :mod:`neurosym.layers.prefix`), for the compiled or a random grammar. Inputs that
  are prefixes rather than sentences (agreement) have no inside features but do have
  these.

Each task declares its priors (:class:`~neurosym.tasks.base.Task`: ``regex_prior``,
``regex_target``, ``grammar``; a task joins the suite through
:func:`neurosym.tasks.register_task`). Regex priors exist for the Tomita tasks (a
``"bank"``: the seven compiled Tomita automata, the task's own read first) and for the
tagging tasks whose prior is ``"synthesised"`` (POS, NER, chunking): a bank synthesised
from the training split (``neurosym synth --corpus``'s :func:`synthesize_corpus`,
cached in ``out_dir/banks/``) and read per token (:class:`TokenRegexEncoder`: each
word's spelling through a character-level WFSA, hard / soft / removed); PCFG priors for the tasks that name the grammar
they are sampled from (arithmetic, agreement). With a
prior, the readout starts *reading* the task's own automaton (:func:`read_automaton`):
the **cold start**, whose test accuracy before any training is reported per Tomita task.

Analyses: test score (mean ± std over seeds); the score by test length for the tasks
whose test strings are longer than the training ones; sample efficiency (the same budget
on 1%, 10%, 100% of the training split); compute per encoder (parameters, forward FLOPs
per token by ``torch.utils.flop_counter``, milliseconds per training step, CPU seconds
per run).

Each (task, encoder, share, seed) result is one JSON file written atomically under
``out_dir/results/``; ``resume=True`` reuses the finished ones. The report (tables,
plots, JSON) is :mod:`neurosym.experiments.suite_report`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from neurosym.compile.pcfg import load_pcfg
from neurosym.compile.regex import compile_bank
from neurosym.data import resolve_data_path
from neurosym.dsl.regex import parse_regex_bank
from neurosym.errors import NeurosymError
from neurosym.experiments.suite_heads import (
    DECODE_MARGIN,
    FeatureMemo,
    MemoPCFGEncoder,
    PCFGPrefixEncoder,
    Seq2SeqModel,
    SoftPCFGEncoder,
    SuiteModel,
    TokenRegexEncoder,
    pad_to,
    random_rules,
    randomise,
    target_width,
)
from neurosym.experiments.suite_report import summarise
from neurosym.files import atomic_write_bytes
from neurosym.layers.encoders import build_encoder
from neurosym.layers.wfsa import RegexLayer
from neurosym.synth.clock import cpu_clock
from neurosym.synth.corpus import Table, bank_text, synthesize_corpus
from neurosym.tasks import IGNORE, NOT_BUILT, Split, Task, TaskData, accuracy, all_tasks, train_test_duplicates

PLAIN = ("mean", "conv", "rnn", "lstm", "attention", "stack")
REGEX = ("regex-hard", "regex-soft", "regex-removed", "regex-others")
PCFG = ("pcfg-hard", "pcfg-soft", "pcfg-removed", "pcfg-prefix-hard", "pcfg-prefix-removed")
SETTINGS = PLAIN + REGEX + PCFG
"""The suite's encoder settings (names, in report order); :data:`neurosym.layers.encoders.ENCODERS` holds the classes."""
SHARES = (0.01, 0.1, 1.0)


@dataclass(frozen=True)
class Budget:
    """The identical budget and hyper-parameters of every (task, encoder) run."""

    n_train: int = 1000
    n_test: int = 500
    steps: int = 200
    batch_size: int = 32
    dim: int = 32
    lr: float = 3e-3
    clip: float = 1.0
    shares: tuple[float, ...] = (1.0,)
    share_tasks: tuple[str, ...] = ()  # tasks of the sample-efficiency analysis (empty: all)


QUICK = Budget(shares=SHARES, share_tasks=("tomita5", "dyck1"))
FULL = Budget(n_train=10_000, n_test=2000, steps=3000, batch_size=64, dim=128, lr=1e-3, shares=SHARES)


# ---------------------------------------------------------------------- models
BANK_SECONDS_PER_CLASS = 1.0
MAX_BANK_STATES = 40
"""Synthesised patterns whose DFA has more states are listed but left out of the layer
(at this data size they are memorised word lists, which the embedding already holds)."""


def prior_of(task: Task, encoder: str) -> str | None:
    """Why ``encoder`` does not apply to ``task`` (None when it does), from the priors the
    task declares (``regex_prior``, ``regex_target``, ``grammar``: :class:`~neurosym.tasks.base.Task`)."""
    if encoder in REGEX:
        if task.regex_prior == "bank":
            return "regex-others needs the task's own automaton (regex_target) to leave out" if encoder == "regex-others" and task.regex_target is None else None
        if task.regex_prior == "synthesised":
            return "regex-others is the leave-one-out Tomita bank" if encoder == "regex-others" else None
        return "no regex prior for this task"
    if encoder in PCFG and task.grammar is None:
        return "no grammar for this task"
    return None


def target_index(task: Task, bank) -> int | None:
    """The position of the task's own automaton (``regex_target``) in its bank, or None."""
    if task.regex_target is None:
        return None
    names = list(bank.patterns)
    if task.regex_target not in names:
        raise NeurosymError(f"task {task.name}: regex_target {task.regex_target!r} is not in its bank ({', '.join(names)})")
    return names.index(task.regex_target)


def read_automaton(model: SuiteModel, k: int, gain: float = 10.0) -> None:
    """Point a regex model's readout at automaton ``k``: logit(1) - logit(0) =
    ``2 * gain * (accept_prob_k - 1/2)`` (the cold start)."""
    proj = model.encoder.proj
    with torch.no_grad():
        proj.weight.zero_()
        proj.bias.zero_()
        proj.weight[0, k] = 1.0
        model.head.weight.zero_()
        model.head.bias.zero_()
        model.head.weight[1, 0], model.head.weight[0, 0] = gain, -gain
        model.head.bias[1], model.head.bias[0] = -gain / 2, gain / 2


def tagging_bank_layer(bank: str) -> RegexLayer:
    """The character-level layer of a synthesised bank's usable patterns (see :func:`bank_listing`)."""
    compiled = compile_bank(parse_regex_bank(bank))
    used = [e["class"] for e in bank_listing(bank) if e["used"]]
    if not used:
        raise NeurosymError("the synthesised bank has no usable pattern (all empty or larger than "
                            f"{MAX_BANK_STATES} states)")
    return RegexLayer([compiled.patterns[name] for name in used])


def build_model(task: Task, data: TaskData, encoder: str, dim: int, seed: int, bank: str | None = None) -> SuiteModel | Seq2SeqModel:
    """The model of one run (seeded); priors set up as the module docstring says. ``bank``
    is the ``.regex`` text of a tagging task's synthesised bank (regex settings only)."""
    torch.manual_seed(seed)
    V = len(data.vocab)
    family = task.family
    num = len(data.target_vocab) if family == "seq2seq" else data.num_classes
    if encoder in PLAIN:
        kwargs = {"heads": 4} if encoder == "attention" else {}
        if family in ("tagging", "seq2seq") and encoder in ("rnn", "lstm"):
            kwargs["bidirectional"] = True
        enc = build_encoder(encoder, V, dim, **kwargs)
        return Seq2SeqModel(enc, num) if family == "seq2seq" else SuiteModel(enc, family, num)
    if encoder in REGEX and family == "tagging":
        if bank is None:
            raise NeurosymError(f"task {task.name}: the regex settings need the bank synthesised from its training split")
        layer = tagging_bank_layer(bank)
        if encoder == "regex-removed":
            randomise(layer, seed)
        if encoder == "regex-hard":
            layer.requires_grad_(False)
        return SuiteModel(TokenRegexEncoder(data.vocab, dim, layer, forms=data.forms), family, num)
    if encoder in REGEX:
        bank_ = task.regex_bank(data.vocab)
        own = target_index(task, bank_)
        layer = RegexLayer([a for name, a in bank_.patterns.items() if name != task.regex_target] if encoder == "regex-others" else bank_)
        if encoder == "regex-removed":
            randomise(layer, seed)
        model = SuiteModel(build_encoder("regex", V, dim, automata=layer), family, num)
        if encoder in ("regex-hard", "regex-soft") and own is not None:
            read_automaton(model, own)
        if encoder in ("regex-hard", "regex-others"):
            model.encoder.layer.requires_grad_(False)
        return model
    if encoder in PCFG:
        rules = load_pcfg(resolve_data_path(task.grammar), vocab=data.vocab, dtype=torch.float32)  # the encoders train in float32
        if encoder in ("pcfg-removed", "pcfg-prefix-removed"):
            rules = random_rules(rules, torch.Generator().manual_seed(seed))
        if encoder.startswith("pcfg-prefix"):
            enc = PCFGPrefixEncoder(V, dim, rules=rules)
        elif encoder == "pcfg-soft":
            enc = SoftPCFGEncoder(V, dim, rules=rules)
        else:
            enc = MemoPCFGEncoder(V, dim, rules=rules)  # the grammar is fixed: features once per sentence
        return Seq2SeqModel(enc, num, pooled_only=True) if family == "seq2seq" else SuiteModel(enc, family, num)
    raise NeurosymError(f"unknown encoder setting {encoder!r}; known: {', '.join(SETTINGS)}")


# ---------------------------------------------------------------------- one run
def device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def decode_length(split: Split) -> int:
    """How many tokens seq2seq decoding may emit on ``split``: its longest target + a margin."""
    return target_width(split.labels) + DECODE_MARGIN


def evaluate(model: SuiteModel | Seq2SeqModel, split: Split, batch_size: int = 256) -> tuple[torch.Tensor, float]:
    """Predictions (on the CPU) in the labels' layout — (N,), (N, L), or (N, T') for
    seq2seq with T' = :func:`decode_length` — and the mean cross-entropy (nats) per
    labelled position (teacher-forced for seq2seq). Rows run shortest first (little padding)."""
    model.eval()
    dev = device_of(model)
    order = torch.argsort(split.lengths, stable=True)
    seq2seq = isinstance(model, Seq2SeqModel)
    width = decode_length(split) if seq2seq else split.ids.shape[1]
    parts, total, count = [], 0.0, 0
    with torch.no_grad():
        for s in range(0, len(split), batch_size):
            part = split.subset(order[s : s + batch_size])
            ids, lengths, labels = part.ids.to(dev), part.lengths.to(dev), part.labels.to(dev)
            loss, n = model.loss(ids, lengths, labels)
            total, count = total + float(loss), count + n
            pred = model.predict(ids, lengths, width).cpu()
            if pred.dim() == 2:
                pred = pad_to(pred, width) if seq2seq else F.pad(pred, (0, width - pred.shape[1]))
            parts.append(pred)
    out = torch.empty_like(torch.cat(parts))
    out[order] = torch.cat(parts)
    return out, total / max(1, count)


def predict(model: SuiteModel | Seq2SeqModel, split: Split, batch_size: int = 256) -> torch.Tensor:
    """Argmax (greedy for seq2seq) predictions on the CPU, in the labels' layout."""
    return evaluate(model, split, batch_size)[0]


def train(model: SuiteModel | Seq2SeqModel, split: Split, budget: Budget, seed: int) -> float:
    """``budget.steps`` Adam steps on seeded minibatches (mean cross-entropy per labelled
    position); returns seconds per step."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=budget.lr)
    gen = torch.Generator().manual_seed(seed)
    dev = device_of(model)
    model.train()
    start = time.perf_counter()
    for _ in range(budget.steps):
        idx = torch.randint(len(split), (min(budget.batch_size, len(split)),), generator=gen)
        batch = split.subset(idx)
        total, n = model.loss(batch.ids.to(dev), batch.lengths.to(dev), batch.labels.to(dev))
        loss = total / max(1, n)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, budget.clip)
        opt.step()
    return (time.perf_counter() - start) / max(1, budget.steps)


def length_buckets(split: Split, pred: torch.Tensor, edges: int = 4, task: Task | None = None,
                   labels: torch.Tensor | None = None, names: Sequence[str] = ()) -> dict[str, float]:
    """The task's headline metric (accuracy without a task) by test length, ``edges``
    equal-width buckets of ``task.row_lengths`` (input lengths; seq2seq: target lengths):
    ``{"11-15": score, ...}``. ``labels`` default to the split's (pass them padded like
    ``pred`` for seq2seq)."""
    lengths = task.row_lengths(split) if task is not None else split.lengths
    labels = split.labels if labels is None else labels
    lo, hi = int(lengths.min()), int(lengths.max())
    bounds = np.linspace(lo, hi + 1, edges + 1).round().astype(int)
    out = {}
    for a, b in zip(bounds[:-1], bounds[1:]):
        keep = (lengths >= a) & (lengths < b)
        if bool(keep.any()):
            score = accuracy(pred[keep], labels[keep]) if task is None else task.evaluate(pred[keep], labels[keep], names)[task.metric]
            out[f"{a}-{b - 1}"] = score
    return out


def memos(model: nn.Module) -> list[FeatureMemo]:
    """The feature memos of a model's fixed encoders."""
    return [m.memo for m in model.modules() if isinstance(getattr(m, "memo", None), FeatureMemo)]


def flops_per_token(model: SuiteModel | Seq2SeqModel, split: Split, n: int = 32) -> float:
    """Forward FLOPs per real input token on the first ``n`` test rows
    (``torch.utils.flop_counter``; memoised features are recomputed for the count)."""
    from torch.utils.flop_counter import FlopCounterMode  # lazy: only the compute table needs it

    part = split.subset(range(min(n, len(split))))
    counter = FlopCounterMode(display=False)
    dev = device_of(model)
    args = (part.ids.to(dev), part.lengths.to(dev)) + ((part.labels.to(dev),) if isinstance(model, Seq2SeqModel) else ())
    kept = memos(model)
    for m in kept:
        m.enabled = False
    try:
        with counter:  # not under no_grad: the module tracker needs autograd nodes (attention's expanded query)
            model(*args)
    finally:
        for m in kept:
            m.enabled = True
    return counter.get_total_flops() / max(1, int(part.lengths.sum()))


def run_one(task: Task, data: TaskData, encoder: str, seed: int, budget: Budget, share: float = 1.0, device: str = "cpu",
            bank: str | None = None) -> dict:
    """Train and evaluate one (task, encoder, share, seed): the result record
    (``cpu_seconds``: this process's CPU time for the whole run)."""
    cpu0 = time.process_time()
    model = build_model(task, data, encoder, budget.dim, seed, bank).to(device)
    if hasattr(model.encoder, "rules"):  # the PCFG encoder's grammar is a plain attribute, not a buffer
        model.encoder.rules = model.encoder.rules.to(device)
    if hasattr(model.encoder, "grammar"):  # as is the prefix encoder's
        model.encoder.grammar = model.encoder.grammar.to(device)
    train_split = data.train if share >= 1.0 else data.train.fraction(share, seed)
    test_split = data.test
    if isinstance(model.encoder, TokenRegexEncoder) and data.forms is not None:  # it reads form ids (spellings of unseen words too)
        train_split, test_split = as_forms(train_split), as_forms(test_split)
    record: dict = {"task": task.name, "family": task.family, "encoder": encoder, "seed": seed, "share": share, "n_train": len(train_split)}
    t0 = time.perf_counter()
    for memo in memos(model):  # fixed features: every distinct sentence once, shortest first
        for split in (train_split, test_split):
            memo.warm(split.ids.to(device), split.lengths.to(device))
    record["setup_seconds"] = time.perf_counter() - t0
    if encoder in ("regex-hard", "regex-soft") and share == 1.0 and task.regex_prior == "bank" and task.regex_target is not None:
        record["cold_start"] = accuracy(predict(model, test_split), test_split.labels)
    record["seconds_per_step"] = train(model, train_split, budget, seed)
    pred, nll = evaluate(model, test_split)
    labels = pad_to(test_split.labels, pred.shape[1]) if task.family == "seq2seq" else test_split.labels
    record["metric"] = task.metric
    record["scores"] = task.evaluate(pred, labels, data.label_names)
    if task.family == "next-token":
        record["scores"]["ppl"] = math.exp(nll)
    record["test_nll"] = nll
    record["accuracy"] = accuracy(pred, labels)
    if task.length_axis:
        record["by_length"] = length_buckets(test_split, pred, task=task, labels=labels, names=data.label_names)
    record["params"] = sum(p.numel() for p in model.parameters())
    record["trainable"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    record["flops_per_token"] = flops_per_token(model, test_split)
    record["cpu_seconds"] = time.process_time() - cpu0
    return record


def as_forms(split: Split) -> Split:
    """The split with its form ids in place of its word ids (see :class:`TokenRegexEncoder`)."""
    return Split(split.forms, split.lengths, split.labels, split.forms)


# ---------------------------------------------------------------------- regex banks from the data
def training_pairs(data: TaskData) -> list[tuple[str, str]]:
    """(word, tag) of every training token: its surface form when the task keeps forms,
    else the word the vocabulary spells (``<unk>`` left out)."""
    keep = data.train.labels != IGNORE
    labels = data.train.labels
    if data.forms is not None:
        return [(data.forms[i], data.label_names[t]) for i, t in zip(data.train.forms[keep].tolist(), labels[keep].tolist())]
    ids = data.train.ids
    surfaces = data.vocab.surfaces
    return [(surfaces[i], data.label_names[t]) for i, t in zip(ids[keep].tolist(), labels[keep].tolist()) if isinstance(surfaces[i], str)]


def synthesise_bank(data: TaskData, seconds_per_class: float = BANK_SECONDS_PER_CLASS) -> str:
    """The ``.regex`` bank ``neurosym synth --corpus`` writes from a tagging task's
    training split (one pattern per tag that labels some word most often), with a budget
    of ``seconds_per_class`` CPU seconds per tag."""
    pairs = training_pairs(data)
    table = Table(pairs)
    classes = [label for label, _ in table.label_tokens.most_common() if table.weights(label)[0]]
    with cpu_clock():  # a CPU-second budget: the same search on a busy machine as on an idle one
        return bank_text(synthesize_corpus(pairs, classes=classes, time_budget=seconds_per_class * len(classes)))


def bank_listing(bank: str) -> list[dict]:
    """Each pattern of a bank: ``{"class", "regex", "states", "used"}``; used when its
    DFA has 2 .. :data:`MAX_BANK_STATES` states (1 state: the empty language)."""
    compiled = compile_bank(parse_regex_bank(bank))
    out = []
    for line in bank.splitlines():
        if not line.strip():
            continue
        name, pattern = line.split(":", 1)
        q = compiled.patterns[name.strip()].num_states
        out.append({"class": name.strip(), "regex": pattern.strip(), "states": q, "used": 1 < q <= MAX_BANK_STATES})
    return out


def task_bank(task: Task, data: TaskData, out_dir: Path, reuse: bool) -> str:
    """The task's synthesised bank, cached as ``out_dir/banks/TASK.regex`` (reused when
    ``reuse``; synthesis is time-budgeted, so a rerun may find other patterns)."""
    path = Path(out_dir) / "banks" / f"{task.name}.regex"
    if reuse and path.is_file():
        return path.read_text(encoding="utf-8")
    text = synthesise_bank(data)
    atomic_write_bytes(path, text.encode("utf-8"))
    return text


# ---------------------------------------------------------------------- the suite
def result_path(out_dir: Path, task: str, encoder: str, share: float, seed: int) -> Path:
    return Path(out_dir) / "results" / task / f"{encoder}-share{share:g}-seed{seed}.json"


def reproduce(
    out_dir: str | Path,
    tasks: Sequence[str] | None = None,
    encoders: Sequence[str] = SETTINGS,
    seeds: int = 1,
    budget: Budget = QUICK,
    resume: bool = False,
    data_dir: str | Path | None = None,
    threads: int = 1,
    progress: bool = True,
    say: Callable[[str], None] | None = None,
    device: str = "cpu",
    workers: int = 1,
) -> dict:
    """Run the suite (resumably; ``workers`` processes of one thread each when > 1) and
    return the report (see :func:`summarise`)."""
    out_dir = Path(out_dir)
    torch.set_num_threads(threads)
    known = {t.name: t for t in all_tasks(data_dir)}
    chosen = list(known) if tasks is None else list(tasks)
    for name in chosen:
        if name not in known:
            hint = f" ({NOT_BUILT[name]})" if name in NOT_BUILT else ""
            raise NeurosymError(f"unknown task {name!r}{hint}; known: {', '.join(known)}")
    for e in encoders:
        if e not in SETTINGS:
            raise NeurosymError(f"unknown encoder setting {e!r}; known: {', '.join(SETTINGS)}")
    if seeds < 1:
        raise NeurosymError(f"--seeds must be at least 1, got {seeds}")
    skipped = {name: NOT_BUILT[name] for name in NOT_BUILT}
    jobs, not_applicable, datasets = [], {}, {}
    for name in chosen:
        task = known[name]
        reason = task.skip_reason()
        if reason is not None:
            skipped[name] = reason
            continue
        for e in encoders:
            why = prior_of(task, e)
            if why is not None:
                not_applicable.setdefault(name, {})[e] = why
                continue
            shares = budget.shares if (not budget.share_tasks or name in budget.share_tasks) else (1.0,)
            for share in shares:
                for seed in range(seeds):
                    jobs.append((task, e, share, seed))
    banks: dict[str, str] = {}
    for name in dict.fromkeys(task.name for task, e, _, _ in jobs if e in REGEX and task.family == "tagging"):
        datasets[name] = known[name].load(budget.n_train, budget.n_test, seed=0)
        banks[name] = task_bank(known[name], datasets[name], out_dir, reuse=resume)
    records: list[dict] = []
    todo = []
    for task, e, share, seed in jobs:
        path = result_path(out_dir, task.name, e, share, seed)
        if resume and path.is_file():
            records.append(json.loads(path.read_text()))
        else:
            todo.append((task, e, share, seed))
    bar = _progress(len(jobs), progress)
    bar.update(len(records))

    def finish(rec: dict) -> None:
        atomic_write_bytes(result_path(out_dir, rec["task"], rec["encoder"], rec["share"], rec["seed"]), json.dumps(rec, indent=1).encode())
        records.append(rec)
        if say is not None:
            say(f"{rec['task']} {rec['encoder']} share={rec['share']:g} seed={rec['seed']}: accuracy {rec['accuracy']:.3f}")
        bar.set_postfix_str(f"{rec['task']} {rec['encoder']}")
        bar.update(1)

    if workers > 1 and len(todo) > 1:
        import multiprocessing  # lazy: only parallel runs need it
        from concurrent.futures import ProcessPoolExecutor, as_completed  # lazy: as above

        ctx = multiprocessing.get_context("spawn")  # no forked torch thread pools
        args = [(t, e, seed, budget, share, device, banks.get(t.name) if e in REGEX else None) for t, e, share, seed in todo]
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            for fut in as_completed([pool.submit(_worker, *a) for a in args]):
                finish(fut.result())
    else:
        for task, e, share, seed in todo:
            if task.name not in datasets:
                datasets[task.name] = task.load(budget.n_train, budget.n_test, seed=0)  # the data are fixed; seeds vary the models
            finish(run_one(task, datasets[task.name], e, seed, budget, share, device, banks.get(task.name) if e in REGEX else None))
    bar.close()
    records.sort(key=lambda r: (chosen.index(r["task"]), SETTINGS.index(r["encoder"]), r["share"], r["seed"]))
    ran = [name for name in chosen if name not in skipped]
    sources = {name: known[name].source for name in ran}
    for name in ran:
        if name not in datasets:
            datasets[name] = known[name].load(budget.n_train, budget.n_test, seed=0)
    report = summarise(records, skipped, not_applicable, sources, budget, seeds, {t: bank_listing(b) for t, b in banks.items()},
                       settings=[e for e in SETTINGS if e in encoders], max_bank_states=MAX_BANK_STATES,
                       by_construction={name: dict(known[name].by_construction) for name in ran if known[name].by_construction},
                       duplicates={name: train_test_duplicates(datasets[name]) for name in ran})
    atomic_write_bytes(out_dir / "results.json", json.dumps(report, indent=1).encode())
    return report


def duplicates(tasks: Sequence[str] | None = None, budget: Budget = QUICK, data_dir: str | Path | None = None) -> dict:
    """Test inputs also in training for each task that can run here, at the budget's split
    sizes (the suite's data are fixed: seed 0): ``{"budget": {n_train, n_test}, "tasks":
    {task: train_test_duplicates(...)}}``. No training; ``docs/structured_suite_duplicates.json``
    is this at the quick budget."""
    known = {t.name: t for t in all_tasks(data_dir)}
    names = list(known) if tasks is None else list(tasks)
    out = {name: train_test_duplicates(known[name].load(budget.n_train, budget.n_test, seed=0))
           for name in names if known[name].skip_reason() is None}
    return {"budget": {"n_train": budget.n_train, "n_test": budget.n_test}, "tasks": out}


_WORKER_DATA: dict[str, TaskData] = {}


def _worker(task: Task, encoder: str, seed: int, budget: Budget, share: float, device: str, bank: str | None) -> dict:
    """One run in a worker process (one torch thread; its data built once per process). The
    task comes pickled, so a task registered outside the package runs here too."""
    torch.set_num_threads(1)
    if task.name not in _WORKER_DATA:
        _WORKER_DATA[task.name] = task.load(budget.n_train, budget.n_test, seed=0)
    return run_one(task, _WORKER_DATA[task.name], encoder, seed, budget, share, device, bank)


def _progress(total: int, enabled: bool):
    from tqdm import tqdm  # lazy: only an interactive run shows a bar

    return tqdm(total=total, disable=not enabled, desc="structured suite", unit="run", dynamic_ncols=True)


def budget_for(quick: bool, **overrides) -> Budget:
    """The quick or full budget with overrides (``None`` values ignored)."""
    return replace(QUICK if quick else FULL, **{k: v for k, v in overrides.items() if v is not None})
