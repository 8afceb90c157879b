"""The structured-LM evaluation suite: which built-in prior helps on which task.

Every task of :mod:`neurosym.tasks` is learned by every encoder of
:mod:`neurosym.layers.encoders` under one head per task family (a linear layer on the
pooled vector for classification, on each token's state for tagging), with identical
hyper-parameters, budget (optimizer steps) and seeds. The symbolic priors come in the
design's three settings:

* ``regex-hard``: the compiled automata frozen (only the readout trains);
* ``regex-soft``: initialised from the automata, every weight trains;
* ``regex-removed``: the same layer with random weights (no prior);
* ``regex-others``: hard, but the bank holds only the *other* six Tomita automata and
  the readout starts untrained (a related but wrong prior: does it still help?);
* ``pcfg-hard``: the compiled rule tensors, fixed (the PCFG encoder as built);
* ``pcfg-soft`` (:class:`SoftPCFGEncoder`): the rule and emission log-probabilities
  become parameters on the grammar's support, initialised from the compiled ones and
  trained through ``log P(sentence)`` (the posterior features stay detached);
* ``pcfg-removed``: random rule tensors over every (A, B, C) and token (no prior);
* ``pcfg-prefix-hard`` / ``pcfg-prefix-removed`` (:class:`PCFGPrefixEncoder`): the
  grammar's exact next-token distribution after the sequence (prefix probabilities,
  :mod:`neurosym.layers.prefix`), for the compiled or a random grammar. Inputs that
  are prefixes rather than sentences (agreement) have no inside features but do have
  these.

Regex priors exist for the Tomita tasks (the seven compiled Tomita automata, one
bank); PCFG priors for the tasks sampled from a grammar (arithmetic, agreement). With a
prior, the readout starts *reading* the task's own automaton (:func:`read_automaton`):
the **cold start**, whose test accuracy before any training is reported per Tomita task.

Analyses: test accuracy (mean ± std over seeds); accuracy by test length for the tasks
whose test strings are longer than the training ones; sample efficiency (the same budget
on 1%, 10%, 100% of the training split); compute per encoder (parameters, forward FLOPs
per token by ``torch.utils.flop_counter``, milliseconds per training step).

Each (task, encoder, share, seed) result is one JSON file written atomically under
``out_dir/results/``; ``resume=True`` reuses the finished ones.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from neurosym.compile.pcfg import RuleTensors, load_pcfg
from neurosym.data import shipped_file
from neurosym.errors import NeurosymError
from neurosym.files import atomic_write_bytes
from neurosym.layers.encoders import Encoder, PCFGEncoder, build_encoder
from neurosym.layers.inside import sentence_log_prob
from neurosym.layers.prefix import PrefixGrammar, prefix_state
from neurosym.layers.wfsa import RegexLayer
from neurosym.tasks import NOT_BUILT, Split, Task, TaskData, accuracy, all_tasks, tomita_bank
from neurosym.tasks.generated import AGREEMENT_FILE, ARITH_FILE

PLAIN = ("mean", "conv", "rnn", "lstm", "attention", "stack")
REGEX = ("regex-hard", "regex-soft", "regex-removed", "regex-others")
PCFG = ("pcfg-hard", "pcfg-soft", "pcfg-removed", "pcfg-prefix-hard", "pcfg-prefix-removed")
ENCODERS = PLAIN + REGEX + PCFG
SHARES = (0.01, 0.1, 1.0)
GRAMMAR_OF = {"arithmetic": ARITH_FILE, "agreement": AGREEMENT_FILE}


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
class SuiteModel(nn.Module):
    """An encoder and its family's head: (B, L) ids -> (B, C) logits (classification) or
    (B, L, C) (tagging)."""

    def __init__(self, encoder: Encoder, family: str, num_classes: int):
        super().__init__()
        self.encoder, self.family = encoder, family
        self.head = nn.Linear(encoder.dim, num_classes)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if self.family == "tagging":
            states, _ = self.encoder.tokens(ids, lengths)
            return self.head(states)
        return self.head(self.encoder(ids, lengths))


def prior_of(task: Task, encoder: str) -> str | None:
    """Why ``encoder`` does not apply to ``task`` (None when it does)."""
    if encoder in REGEX and not task.name.startswith("tomita"):
        return "no regex prior for this task (banks synthesised from training data are not built yet)"
    if encoder in PCFG:
        if task.name not in GRAMMAR_OF:
            return "no grammar for this task"
    if encoder in ("regex-hard", "regex-soft", "regex-removed", *PCFG) and task.family == "tagging":
        return "symbolic encoders are sequence-level here"
    return None


def random_rules(rules: RuleTensors, gen: torch.Generator) -> RuleTensors:
    """Rule tensors of the same shape and vocabulary with random (normalised) weights:
    the PCFG encoder with its prior removed."""
    N, T = rules.N, rules.T
    binary = torch.randn(N, N + T, N + T, generator=gen).flatten(1).log_softmax(-1).view(N, N + T, N + T)
    emit = torch.randn(T, len(rules.vocab), generator=gen).log_softmax(-1)
    start = torch.randn(N + T + 1, generator=gen).log_softmax(-1)
    return RuleTensors(start[:N], binary + math.log(0.999), emit, start[N : N + T], start[-1], rules.nonterminals, rules.preterminals, rules.vocab, rules.start, None)


class SoftPCFGEncoder(PCFGEncoder):
    """The PCFG encoder with trainable rule and emission weights (the *soft* prior).

    Parameters ``binary_logits`` (N, N+T, N+T) and ``emit_logits`` (T, V) start at the
    compiled log-probabilities; outside the grammar's support they stay -inf, so the
    relaxation re-weights the grammar's rules and words but adds none. Each forward pass
    renormalises them (per left-hand side, per preterminal) into the rule tensors; the
    per-token ``log P(sentence)`` feature is differentiable, the posterior features
    (roots, rule counts) are computed on detached weights as in :class:`PCFGEncoder`.
    """

    def __init__(self, vocab_size: int, dim: int, rules: RuleTensors | None = None, **kwargs):
        super().__init__(vocab_size, dim, rules=rules, **kwargs)
        self.binary_logits = nn.Parameter(rules.binary.detach().clone())
        self.emit_logits = nn.Parameter(rules.emit.detach().clone())
        self.register_buffer("binary_support", rules.binary > float("-inf"), persistent=False)
        self.register_buffer("emit_support", rules.emit > float("-inf"), persistent=False)

    def current_rules(self) -> RuleTensors:
        """The rule tensors of the current weights (renormalised, -inf off the support)."""
        b = self.binary_logits.masked_fill(~self.binary_support, float("-inf")).flatten(1)
        has = self.binary_support.flatten(1).any(1, keepdim=True)
        binary = torch.where(has, b.log_softmax(-1), b).view_as(self.binary_logits)
        e = self.emit_logits.masked_fill(~self.emit_support, float("-inf"))
        emit = torch.where(self.emit_support.any(1, keepdim=True), e.log_softmax(-1), e)
        r = self.rules
        return RuleTensors(r.root, binary, emit, r.root_term, r.empty, r.nonterminals, r.preterminals, r.vocab, r.start, r.path)

    def sentence_features(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        mask = self.mask(ids, lengths)
        n = mask.sum(1).to(self.binary_logits.device)
        rules = self.current_rules()
        self.rules = RuleTensors(*(x.detach() for x in (rules.root, rules.binary, rules.emit, rules.root_term, rules.empty)),
                                 rules.nonterminals, rules.preterminals, rules.vocab, rules.start, rules.path)
        longest = int(mask.sum(1).max()) if mask.numel() else 0
        trimmed = ids[:, :longest].masked_fill(~mask[:, :longest], 0)
        lp = sentence_log_prob(rules, trimmed, n)
        ok = torch.isfinite(lp)
        safe = torch.where(ok, lp, torch.zeros_like(lp))  # no -inf in the graph: finite gradients
        per_token = torch.where(ok, safe / n.clamp_min(1), torch.full_like(lp, self.floor)).clamp_min(self.floor)
        parts = [torch.stack([per_token, ok.to(lp.dtype)], -1)]
        rest = tuple(f for f in self.features if f != "logz")
        if rest:
            self.features, kept = rest, self.features
            try:
                parts.append(super().sentence_features(ids, lengths))
            finally:
                self.features = kept
        return torch.cat(parts, -1).to(self.proj.weight.dtype)


class PCFGPrefixEncoder(Encoder):
    """The grammar's view of what comes next: ``log P(v | sequence ...)`` for every token
    v (V), ``log P(end | sequence)`` and a 0/1 "the sequence is a possible prefix" flag,
    floored at ``floor`` and mapped to D by a linear layer. The prefix chart is exact and
    fixed (not differentiable): only the linear layer trains. Pooled output only."""

    def __init__(self, vocab_size: int, dim: int, rules: RuleTensors | None = None, floor: float = -30.0, padding_idx: int | None = 0):
        super().__init__(dim, padding_idx, True, "mean")
        if rules is None or len(rules.vocab) != vocab_size:
            raise NeurosymError("the pcfg-prefix encoder needs RuleTensors over the task's vocabulary")
        self.grammar = PrefixGrammar.from_rules(rules)
        self.floor = float(floor)
        self.proj = nn.Linear(vocab_size + 2, dim)

    def pooled_output(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        mask = self.mask(ids, lengths)
        with torch.no_grad():
            state = prefix_state(self.grammar, self.clean(ids, mask).to(self.grammar.device), mask.sum(1).to(self.grammar.device))
            nxt, end = state.next_token_log_probs()
            ok = torch.isfinite(state.prefix_log_prob)
            feats = torch.cat([nxt.clamp_min(self.floor), end.clamp_min(self.floor)[:, None], ok[:, None].to(nxt.dtype)], -1)
        return self.proj(feats.to(self.proj.weight.device, self.proj.weight.dtype))

    def tokens(self, ids, lengths=None):
        raise NeurosymError("the pcfg-prefix encoder gives one vector per sequence; call it with pooled=True")


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


def build_model(task: Task, data: TaskData, encoder: str, dim: int, seed: int) -> SuiteModel:
    """The model of one run (seeded); priors set up as the module docstring says."""
    torch.manual_seed(seed)
    V = len(data.vocab)
    if encoder in PLAIN:
        kwargs = {"heads": 4} if encoder == "attention" else {}
        if task.family == "tagging" and encoder in ("rnn", "lstm"):
            kwargs["bidirectional"] = True
        enc = build_encoder(encoder, V, dim, **kwargs)
        return SuiteModel(enc, task.family, data.num_classes)
    if encoder in REGEX:
        bank = tomita_bank(data.vocab)
        own = f"T{task.name.removeprefix('tomita')}"
        layer = RegexLayer([a for name, a in bank.patterns.items() if name != own] if encoder == "regex-others" else bank)
        if encoder == "regex-removed":
            gen = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                for p in (layer.log_weights, layer.start_weights, layer.final_weights):
                    p.copy_(torch.randn(p.shape, generator=gen))
                layer.bias.zero_()
        model = SuiteModel(build_encoder("regex", V, dim, automata=layer), task.family, data.num_classes)
        if encoder in ("regex-hard", "regex-soft"):
            read_automaton(model, int(task.name.removeprefix("tomita")) - 1)
        if encoder in ("regex-hard", "regex-others"):
            for p in model.encoder.layer.parameters():
                p.requires_grad_(False)
        return model
    if encoder in PCFG:
        rules = load_pcfg(shipped_file(GRAMMAR_OF[task.name]), vocab=data.vocab)
        if encoder in ("pcfg-removed", "pcfg-prefix-removed"):
            rules = random_rules(rules, torch.Generator().manual_seed(seed))
        if encoder.startswith("pcfg-prefix"):
            enc = PCFGPrefixEncoder(V, dim, rules=rules)
        elif encoder == "pcfg-soft":
            enc = SoftPCFGEncoder(V, dim, rules=rules)
        else:
            enc = build_encoder("pcfg", V, dim, rules=rules)
        return SuiteModel(enc, task.family, data.num_classes)
    raise NeurosymError(f"unknown encoder setting {encoder!r}; known: {', '.join(ENCODERS)}")


# ---------------------------------------------------------------------- one run
def device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def predict(model: SuiteModel, split: Split, batch_size: int = 256) -> torch.Tensor:
    """Argmax predictions (on the CPU), (N,) or (N, L) like the split's labels."""
    model.eval()
    out = []
    dev = device_of(model)
    with torch.no_grad():
        for s in range(0, len(split), batch_size):
            part = split.subset(range(s, min(s + batch_size, len(split))))
            pred = model(part.ids.to(dev), part.lengths.to(dev)).argmax(-1).cpu()
            if pred.dim() == 2:
                pred = F.pad(pred, (0, split.ids.shape[1] - pred.shape[1]))
            out.append(pred)
    return torch.cat(out)


def train(model: SuiteModel, split: Split, budget: Budget, seed: int) -> float:
    """``budget.steps`` Adam steps on seeded minibatches; returns seconds per step."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=budget.lr)
    gen = torch.Generator().manual_seed(seed)
    dev = device_of(model)
    model.train()
    start = time.perf_counter()
    for _ in range(budget.steps):
        idx = torch.randint(len(split), (min(budget.batch_size, len(split)),), generator=gen)
        batch = split.subset(idx)
        logits = model(batch.ids.to(dev), batch.lengths.to(dev))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.labels.to(dev).reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, budget.clip)
        opt.step()
    return (time.perf_counter() - start) / max(1, budget.steps)


def length_buckets(split: Split, pred: torch.Tensor, edges: int = 4) -> dict[str, float]:
    """Accuracy by test length, ``edges`` equal-width buckets: ``{"11-15": acc, ...}``."""
    lo, hi = int(split.lengths.min()), int(split.lengths.max())
    bounds = np.linspace(lo, hi + 1, edges + 1).round().astype(int)
    out = {}
    for a, b in zip(bounds[:-1], bounds[1:]):
        keep = (split.lengths >= a) & (split.lengths < b)
        if bool(keep.any()):
            out[f"{a}-{b - 1}"] = accuracy(pred[keep], split.labels[keep])
    return out


def flops_per_token(model: SuiteModel, split: Split, n: int = 32) -> float:
    """Forward FLOPs per real token on the first ``n`` test rows (``torch.utils.flop_counter``)."""
    from torch.utils.flop_counter import FlopCounterMode  # lazy: only the compute table needs it

    part = split.subset(range(min(n, len(split))))
    counter = FlopCounterMode(display=False)
    dev = device_of(model)
    with counter:  # not under no_grad: the module tracker needs autograd nodes (attention's expanded query)
        model(part.ids.to(dev), part.lengths.to(dev))
    return counter.get_total_flops() / max(1, int(part.lengths.sum()))


def run_one(task: Task, data: TaskData, encoder: str, seed: int, budget: Budget, share: float = 1.0, device: str = "cpu") -> dict:
    """Train and evaluate one (task, encoder, share, seed): the result record."""
    model = build_model(task, data, encoder, budget.dim, seed).to(device)
    if hasattr(model.encoder, "rules"):  # the PCFG encoder's grammar is a plain attribute, not a buffer
        model.encoder.rules = model.encoder.rules.to(device)
    if hasattr(model.encoder, "grammar"):  # as is the prefix encoder's
        model.encoder.grammar = model.encoder.grammar.to(device)
    train_split = data.train if share >= 1.0 else data.train.fraction(share, seed)
    record: dict = {"task": task.name, "encoder": encoder, "seed": seed, "share": share, "n_train": len(train_split)}
    if encoder in ("regex-hard", "regex-soft") and share == 1.0:
        record["cold_start"] = accuracy(predict(model, data.test), data.test.labels)
    record["seconds_per_step"] = train(model, train_split, budget, seed)
    pred = predict(model, data.test)
    record["metric"] = task.metric
    record["scores"] = task.evaluate(pred, data.test.labels, data.label_names)
    record["accuracy"] = accuracy(pred, data.test.labels)
    if task.length_axis:
        record["by_length"] = length_buckets(data.test, pred)
    record["params"] = sum(p.numel() for p in model.parameters())
    record["trainable"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    record["flops_per_token"] = flops_per_token(model, data.test)
    return record


# ---------------------------------------------------------------------- the suite
def result_path(out_dir: Path, task: str, encoder: str, share: float, seed: int) -> Path:
    return Path(out_dir) / "results" / task / f"{encoder}-share{share:g}-seed{seed}.json"


def reproduce(
    out_dir: str | Path,
    tasks: Sequence[str] | None = None,
    encoders: Sequence[str] = ENCODERS,
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
        if e not in ENCODERS:
            raise NeurosymError(f"unknown encoder setting {e!r}; known: {', '.join(ENCODERS)}")
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
        args = [(t.name, data_dir, e, seed, budget, share, device) for t, e, share, seed in todo]
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            for fut in as_completed([pool.submit(_worker, *a) for a in args]):
                finish(fut.result())
    else:
        for task, e, share, seed in todo:
            if task.name not in datasets:
                datasets[task.name] = task.load(budget.n_train, budget.n_test, seed=0)  # the data are fixed; seeds vary the models
            finish(run_one(task, datasets[task.name], e, seed, budget, share, device))
    bar.close()
    records.sort(key=lambda r: (chosen.index(r["task"]), ENCODERS.index(r["encoder"]), r["share"], r["seed"]))
    sources = {name: known[name].source for name in chosen if name not in skipped}
    report = summarise(records, skipped, not_applicable, sources, budget, seeds)
    atomic_write_bytes(out_dir / "results.json", json.dumps(report, indent=1).encode())
    return report


_WORKER_DATA: dict[str, TaskData] = {}


def _worker(task_name: str, data_dir, encoder: str, seed: int, budget: Budget, share: float, device: str) -> dict:
    """One run in a worker process (one torch thread; its data built once per process)."""
    torch.set_num_threads(1)
    task = {t.name: t for t in all_tasks(data_dir)}[task_name]
    if task_name not in _WORKER_DATA:
        _WORKER_DATA[task_name] = task.load(budget.n_train, budget.n_test, seed=0)
    return run_one(task, _WORKER_DATA[task_name], encoder, seed, budget, share, device)


def _progress(total: int, enabled: bool):
    from tqdm import tqdm  # lazy: only an interactive run shows a bar

    return tqdm(total=total, disable=not enabled, desc="structured suite", unit="run", dynamic_ncols=True)


def _mean_std(xs: list[float]) -> tuple[float, float]:
    a = np.asarray(xs, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def summarise(records: list[dict], skipped: dict, not_applicable: dict, sources: dict, budget: Budget, seeds: int) -> dict:
    """The report: ``tasks`` {task: {encoder: {accuracy, accuracy_std}}}, ``cold_start``
    {tomitaN: accuracy}, ``cold_start_soft`` (after training), ``by_length``,
    ``sample_efficiency`` {task: {encoder: {share: accuracy}}}, ``compute`` {encoder:
    {params, flops_per_token, ms_per_step}} (medians over tasks), ``skipped``,
    ``not_applicable``, ``sources``, ``budget``."""
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
    soft = {t: float(np.mean([r["accuracy"] for r in rs])) for (t, e), rs in group.items() if e == "regex-soft"}
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
                      "ms_per_step": 1000 * float(np.median([r["seconds_per_step"] for r in rs])), "tasks": len({r["task"] for r in rs})}
    return {
        "tasks": tasks, "cold_start": dict(sorted(cold.items())), "cold_start_soft": dict(sorted(soft.items())),
        "by_length": by_length, "sample_efficiency": efficiency, "compute": compute, "skipped": skipped,
        "not_applicable": not_applicable, "sources": sources, "budget": asdict(budget), "seeds": seeds,
    }


# ---------------------------------------------------------------------- report
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
    encoders = list(dict.fromkeys(e for t in report["tasks"].values() for e in t))
    encoders = [e for e in ENCODERS if e in encoders]
    lines = ["# Structured-LM suite", "", f"Budget: {report['budget']}; seeds: {report['seeds']}. Test score (%): accuracy, or the "
             "metric named beside the task; mean ± std over seeds; – = encoder not applicable (see below).", ""]
    lines += ["| task | " + " | ".join(encoders) + " |", "| --- |" + " ---: |" * len(encoders)]
    for t, row in report["tasks"].items():
        best = max(_headline(v) for v in row.values())
        metric = next(iter(row.values())).get("metric", "accuracy")
        cells = [(f"**{_fmt(row.get(e))}**" if e in row and _headline(row[e]) == best else _fmt(row.get(e))) for e in encoders]
        lines.append(f"| {t}{'' if metric == 'accuracy' else f' ({metric})'} | " + " | ".join(cells) + " |")
    if report["cold_start"]:
        lines += ["", "## Cold start (regex bank of the seven compiled Tomita automata)", "",
                  "| task | before training | regex-soft after training |", "| --- | ---: | ---: |"]
        for t, a in report["cold_start"].items():
            s = report["cold_start_soft"].get(t)
            lines.append(f"| {t} | {100 * a:.1f} | {'–' if s is None else f'{100 * s:.1f}'} |")
    if report["by_length"]:
        lines += ["", "## Length generalisation (test accuracy % by test length; training lengths are shorter)", ""]
        for t, es in report["by_length"].items():
            keys = list(next(iter(es.values())))
            lines += [f"**{t}**", "", "| encoder | " + " | ".join(keys) + " |", "| --- |" + " ---: |" * len(keys)]
            for e in [e for e in ENCODERS if e in es]:
                lines.append(f"| {e} | " + " | ".join(f"{100 * es[e].get(k, float('nan')):.1f}" for k in keys) + " |")
            lines.append("")
    if report["sample_efficiency"]:
        lines += ["## Sample efficiency (test accuracy % with a share of the training split, same budget)", ""]
        for t, es in report["sample_efficiency"].items():
            keys = list(next(iter(es.values())))
            lines += [f"**{t}**", "", "| encoder | " + " | ".join(f"{float(k):.0%}" for k in keys) + " |", "| --- |" + " ---: |" * len(keys)]
            for e in [e for e in ENCODERS if e in es]:
                lines.append(f"| {e} | " + " | ".join(f"{100 * es[e][k]:.1f}" if k in es[e] else "–" for k in keys) + " |")
            lines.append("")
    lines += ["## Compute per encoder (medians over the tasks it ran)", "",
              "| encoder | parameters | trainable | forward FLOPs / token | ms / training step |", "| --- | ---: | ---: | ---: | ---: |"]
    for e, c in report["compute"].items():
        lines.append(f"| {e} | {c['params']:,} | {c['trainable']:,} | {c['flops_per_token']:,.0f} | {c['ms_per_step']:.1f} |")
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
    """heatmap.png (task x encoder accuracy), length.png and efficiency.png curves."""
    import matplotlib  # lazy: only the plots need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: as above

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    tasks = list(report["tasks"])
    encoders = [e for e in ENCODERS if any(e in report["tasks"][t] for t in tasks)]
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
        fig.colorbar(im, ax=ax, label="test accuracy % (NER: entity F1)")
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
            for e in [e for e in ENCODERS if e in es]:
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


def budget_for(quick: bool, **overrides) -> Budget:
    """The quick or full budget with overrides (``None`` values ignored)."""
    return replace(QUICK if quick else FULL, **{k: v for k, v in overrides.items() if v is not None})
