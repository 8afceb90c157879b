"""``neurosym bench synth``: regex synthesis on the AlphaRegex and Regel benchmarks and on
a corpus; this module runs them.

The problems are read by :mod:`neurosym.bench.synth_problems`, scored by
:mod:`neurosym.bench.synth_score`, the corpus suite is :mod:`neurosym.bench.synth_corpus`
and the tables are :mod:`neurosym.bench.synth_report`.

* **AlphaRegex**: a problem is *solved* when the regex accepts every positive and no
  negative. Reported per method: solved count, equivalence to the paper's regex, F1 on
  every short string, seconds per problem (median, max).
* **Everyday formats** (:data:`~neurosym.bench.synth_problems.EVERYDAY_FORMATS`): per
  format, the regex ``synthesize`` returns, its wall and CPU seconds, and how many fresh
  valid strings it accepts and near misses it rejects.
* **Regel**: consistent count (every example right), *equivalent* count (the
  synthesised DFA equals the ground truth's DFA exactly — Regel's notion of success),
  and the mean F1 on fresh strings labelled by the ground truth.

The methods are those of the registry :mod:`neurosym.synth.methods` and the variants
of ``beam`` in :data:`VARIANTS`.
"""

from __future__ import annotations

import contextlib
import re
import statistics
import time
from collections.abc import Sequence

from neurosym.bench.regel_split import split_of
from neurosym.bench.synth_corpus import run_corpus
from neurosym.bench.synth_problems import ALPHAREGEX_LEAVES, EVERYDAY_FORMATS, binary_strings, load_alpharegex, load_alpharegex_reference, load_regel
from neurosym.bench.synth_score import equivalent, f1_score, fresh_strings
from neurosym.compile.regex import pattern_dfa
from neurosym.data import shared_data, shared_data_dir
from neurosym.errors import NeurosymError
from neurosym.synth import clock, synthesize
from neurosym.synth import regex_ast as ra
from neurosym.synth.clock import cpu_clock
from neurosym.synth.methods import method_names
from neurosym.synth.synthesis import SynthResult

# Benchmark variants of a registered method: name -> (the method, its options).
# ``beam-alphaleaves`` also gets AlphaRegex's own leaves (see :func:`synthesize_problem`).
VARIANTS: dict[str, tuple[str, dict]] = {
    "beam-posterior": ("beam", {"select": "posterior"}),
    "beam-enum": ("beam", {"formats": False}),
    "beam-alphaleaves": ("beam", {}),
}


def bench_methods() -> tuple[str, ...]:
    """What ``--methods`` accepts: every registered method, then the variants."""
    return method_names() + tuple(VARIANTS)


def synthesize_problem(problem: dict, method: str, time_budget: float, seed: int, progress: bool) -> SynthResult:
    """``beam-posterior`` is ``beam`` with ``select="posterior"``; ``beam-enum`` is
    ``beam`` without format induction (the enumerator alone); ``beam-alphaleaves`` is
    ``beam`` with AlphaRegex's own leaves (``0``, ``1``, and ``0|1`` in problems whose
    examples use ``X``)."""
    base, options = VARIANTS.get(method, (method, {}))
    options = dict(options)
    if method == "beam-alphaleaves":
        options["leaves"] = list(ALPHAREGEX_LEAVES) + ([ra.Chars("01")] if problem.get("has_x") else [])
    return synthesize(problem["positives"], problem["negatives"], method=base, time_budget=time_budget, seed=seed, progress=progress, **options)


def run_alpharegex(methods=("beam", "evolve", "reinforce"), time_budget: float = 60.0, seed: int = 0, problems=None, progress: bool = False, log=None) -> dict:
    """Every AlphaRegex problem (or ``problems``) with each method: per method, solved
    count (consistent with the examples), equivalence to the paper's regex (exact DFA
    equivalence), ``heldout_equal`` (no disagreement with it on any string over {0, 1}
    of length at most 10 that is not an example) and F1 on those strings, seconds."""
    problems = problems if problems is not None else load_alpharegex()
    try:
        reference = load_alpharegex_reference()
    except NeurosymError:
        reference = {}
    universe = binary_strings(10)
    out = {}
    for method in methods:
        rows = []
        for p in problems:
            res = synthesize_problem(p, method, time_budget, seed, progress)
            row = {"name": p["name"], "pattern": res.pattern, "solved": res.solved, "seconds": res.seconds, "size": res.size}
            ref = reference.get(p["name"])
            if ref is not None:  # like for like with the paper: its regex as the reference language
                row["reference"] = ref
                row["equivalent"] = equivalent(pattern_dfa(res.pattern), pattern_dfa(ref))
                examples = set(p["positives"]) | set(p["negatives"])
                heldout = [x for x in universe if x not in examples]
                row["f1"] = f1_score(res.pattern, ref, heldout)
                rx, rr = re.compile(res.pattern), re.compile(ref)
                row["heldout_disagreements"] = sum(bool(rx.fullmatch(x)) != bool(rr.fullmatch(x)) for x in heldout)
            rows.append(row)
            if log:
                log(f"alpharegex {method} {p['name']}: {'ok ' if res.solved else 'no '} {res.seconds:6.2f}s /{res.pattern}/ eq={row.get('equivalent')}")
        secs = [r["seconds"] for r in rows]
        with_ref = [r for r in rows if "equivalent" in r]
        out[method] = {
            "problems": len(rows),
            "equivalent": sum(r["equivalent"] for r in with_ref),
            "heldout_equal": sum(r["heldout_disagreements"] == 0 for r in with_ref),
            "with_reference": len(with_ref),
            "mean_f1": sum(r["f1"] for r in with_ref) / len(with_ref) if with_ref else float("nan"),
            "solved": sum(r["solved"] for r in rows),
            "median_seconds": statistics.median(secs) if secs else 0.0,
            "max_seconds": max(secs) if secs else 0.0,
            "solved_median_seconds": statistics.median([r["seconds"] for r in rows if r["solved"]] or [0.0]),
            "rows": rows,
        }
    return out


def run_formats(time_budget: float = 60.0, seed: int = 0, formats: dict | None = None, log=None) -> dict:
    """The everyday formats (or ``formats``: name -> positives, negatives, fresh valid
    strings, near misses) through ``synthesize`` (method ``beam``, format induction on):
    per format the regex, the phase that found it, wall and process CPU seconds, and
    fresh strings accepted and near misses rejected by ``re.fullmatch``."""
    out = {}
    for name, (pos, neg, fresh, near) in (formats if formats is not None else EVERYDAY_FORMATS).items():
        w0, c0 = time.perf_counter(), time.process_time()
        res = synthesize(pos, neg, time_budget=time_budget, seed=seed)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        rx = re.compile(res.pattern) if res.pattern is not None else None
        out[name] = {
            "positives": len(pos), "negatives": len(neg), "pattern": res.pattern, "solved": res.solved, "phase": res.info.get("phase"),
            "wall_seconds": wall, "cpu_seconds": cpu,
            "fresh": len(fresh), "fresh_accepted": sum(bool(rx and rx.fullmatch(s)) for s in fresh),
            "near_misses": len(near), "near_misses_rejected": sum(not (rx and rx.fullmatch(s)) for s in near),
        }
        if log:
            log(f"formats {name}: /{res.pattern}/ {wall:.2f} s")
    return out


REGEL_SPLITS = ("all", "dev", "test")


def run_regel(
    methods=("beam", "evolve", "reinforce"),
    time_budget: float = 60.0,
    seed: int = 0,
    limit: int | None = None,
    suites=("so", "deepregex"),
    progress: bool = False,
    log=None,
    split: str = "all",
) -> dict:
    """Regel's problems; ``split`` keeps the development or test half of
    :mod:`neurosym.bench.regel_split` (tune on ``dev``, report ``test``)."""
    if split not in REGEL_SPLITS:
        raise NeurosymError(f"unknown Regel split {split!r}; expected one of {', '.join(REGEL_SPLITS)}")
    usable, skipped = load_regel(suites=suites)
    if split != "all":
        usable = [p for p in usable if split_of(p["name"]) == split]
        skipped = [p for p in skipped if split_of(p["name"]) == split]
    if limit is not None:
        usable = usable[:limit]
    out = {"usable": len(usable), "skipped": len(skipped), "split": split}
    for method in methods:
        rows = []
        for p in usable:
            res = synthesize_problem(p, method, time_budget, seed, progress)
            try:
                cdfa = pattern_dfa(res.pattern)
            except NeurosymError:
                cdfa = None
            eq = cdfa is not None and equivalent(cdfa, pattern_dfa(p["regex"]))
            f1 = f1_score(res.pattern, p["regex"], fresh_strings(p, cdfa, seed=seed))
            rows.append({"name": p["name"], "pattern": res.pattern, "truth": p["regex"], "solved": res.solved, "equivalent": eq, "f1": f1, "seconds": res.seconds})
            if log:
                log(f"regel {method} {p['name']}: {'ok ' if res.solved else 'no '} eq={eq} f1={f1:.2f} {res.seconds:6.2f}s /{res.pattern}/ truth /{p['regex']}/")
        n = len(rows) or 1
        by_suite = {}
        for suite in sorted({r["name"].split("/")[0] for r in rows}):
            sub = [r for r in rows if r["name"].split("/")[0] == suite]
            by_suite[suite] = {
                "problems": len(sub),
                "solved": sum(r["solved"] for r in sub),
                "equivalent": sum(r["equivalent"] for r in sub),
                "mean_f1": sum(r["f1"] for r in sub) / len(sub),
            }
        out[method] = {
            "by_suite": by_suite,
            "problems": len(rows),
            "solved": sum(r["solved"] for r in rows),
            "equivalent": sum(r["equivalent"] for r in rows),
            "success_rate": sum(r["equivalent"] for r in rows) / n,
            # every problem of the split in the denominator, those without usable ground truth counted as failures
            "problems_all": len(rows) + len(skipped),
            "success_rate_all": sum(r["equivalent"] for r in rows) / ((len(rows) + len(skipped)) or 1),
            "mean_f1": sum(r["f1"] for r in rows) / n,
            "median_seconds": statistics.median([r["seconds"] for r in rows] or [0.0]),
            "rows": rows,
        }
    return out


def run(
    methods: Sequence[str] = ("beam", "evolve", "reinforce"),
    time_budget: float = 60.0,
    regel_time_budget: float | None = None,
    seed: int = 0,
    suites: Sequence[str] = ("alpharegex", "regel"),
    regel_limit: int | None = None,
    progress: bool = False,
    log=None,
    regel_split: str = "all",
    corpus_time_budget: float = 60.0,
    corpus_test: str = "test",
    clock_kind: str = "wall",
) -> dict:
    """Run the benchmarks; returns a dict ``{"alpharegex": {method: ...}, "regel": {...},
    "formats": {...}, "corpus": {...}}`` (the formats suite: :func:`run_formats`, at
    ``time_budget`` seconds per format; the corpus suite: :func:`run_corpus`, ``corpus_time_budget``
    seconds for all its classes, scored on ``corpus_test``). ``clock_kind="cpu"``
    measures every budget and time in process CPU seconds
    (:func:`neurosym.synth.clock.cpu_clock`), so a loaded machine buys the same search.

    Raises :class:`NeurosymError` with a clear message when the shared data is absent."""
    if shared_data_dir() is None and set(suites) - {"formats"}:  # the formats suite needs no data set
        raise NeurosymError(
            "neurosym bench synth needs the shared data sets (../shared/data/alpharegex and ../shared/data/regel, "
            "or $NEUROSYM_SHARED_DATA); they are not available here"
        )
    if clock_kind not in CLOCKS:
        raise NeurosymError(f"clock: unknown kind {clock_kind!r}; expected one of {', '.join(CLOCKS)}")
    with cpu_clock() if clock_kind == "cpu" else contextlib.nullcontext():
        return _run(methods, time_budget, regel_time_budget, seed, suites, regel_limit, progress, log, regel_split, corpus_time_budget, corpus_test)


CLOCKS = ("wall", "cpu")


def _run(methods, time_budget, regel_time_budget, seed, suites, regel_limit, progress, log, regel_split, corpus_time_budget, corpus_test) -> dict:
    t0 = clock.now()
    out: dict = {"time_budget": time_budget, "seed": seed, "methods": list(methods), "clock": clock.clock_name()}
    if "alpharegex" in suites:
        out["alpharegex"] = run_alpharegex(methods, time_budget, seed, progress=progress, log=log)
    if "regel" in suites:
        out["regel"] = run_regel(methods, regel_time_budget or time_budget, seed, limit=regel_limit, progress=progress, log=log, split=regel_split)
    if "formats" in suites:
        out["formats"] = run_formats(time_budget, seed, log=log)
    if "corpus" in suites:
        out["corpus"] = run_corpus(time_budget=corpus_time_budget, test_split=corpus_test, log=log)
    out["seconds"] = clock.now() - t0
    return out



BENCH_SUITES = {
    "alpharegex": (("alpharegex", "benchmarks"),),
    "regel": (("regel", "so"), ("regel", "deepregex")),
    "corpus": (("ud-english-ewt",),),
    "formats": (),
}


def bench_synth_command(
    methods: str = "beam,evolve,reinforce",
    time_budget: float = 60.0,
    regel_time_budget: float | None = None,
    regel_limit: int | None = None,
    suites: str = "alpharegex,regel",
    seed: int = 0,
    log=None,
    regel_split: str = "all",
    corpus_time_budget: float = 60.0,
    corpus_test: str = "test",
    clock_kind: str = "wall",
) -> dict:
    """``neurosym bench synth``: check the comma-separated options and the shared data the
    chosen suites need (a NeurosymError before any work), then :func:`run`."""
    ms = tuple(m.strip() for m in methods.split(",") if m.strip())
    known = bench_methods()
    bad = [m for m in ms if m not in known]
    if bad or not ms:
        raise NeurosymError(f"--methods: unknown method(s) {', '.join(bad) or '(none given)'}; expected some of {', '.join(known)}")
    ss = tuple(x.strip() for x in suites.split(",") if x.strip())
    bad = [x for x in ss if x not in BENCH_SUITES]
    if bad or not ss:
        raise NeurosymError(f"--suites: unknown suite(s) {', '.join(bad) or '(none given)'}; expected some of {', '.join(BENCH_SUITES)}")
    if regel_split not in REGEL_SPLITS:
        raise NeurosymError(f"--regel-split: unknown split {regel_split!r}; expected one of {', '.join(REGEL_SPLITS)}")
    if corpus_test not in ("dev", "test"):
        raise NeurosymError(f"--corpus-test: unknown split {corpus_test!r}; expected dev or test")
    if clock_kind not in CLOCKS:
        raise NeurosymError(f"--clock: unknown clock {clock_kind!r}; expected one of {', '.join(CLOCKS)}")
    for suite in ss:
        for parts in BENCH_SUITES[suite]:
            try:
                shared_data(*parts)
            except NeurosymError as err:
                raise NeurosymError(
                    f"neurosym bench synth --suites {suite} needs the shared data set {'/'.join(parts)} "
                    f"(../shared/data beside the checkout, or $NEUROSYM_SHARED_DATA): {err}"
                ) from None
    return run(
        methods=ms, time_budget=time_budget, regel_time_budget=regel_time_budget, seed=seed, suites=ss, regel_limit=regel_limit,
        log=log, regel_split=regel_split, corpus_time_budget=corpus_time_budget, corpus_test=corpus_test, clock_kind=clock_kind,
    )


__all__ = ["BENCH_SUITES", "CLOCKS", "REGEL_SPLITS", "VARIANTS", "bench_methods", "bench_synth_command", "run", "run_alpharegex", "run_formats", "run_regel"]
