"""``neurosym bench synth-tune``: the ``beam`` method's search choices, re-derived on
development data only (issue 31).

The development data: Regel's development half (:mod:`neurosym.bench.regel_split`;
the test half is never read here) and the seven Tomita languages
(:func:`neurosym.bench.synth_problems.load_tomita`, for the small-alphabet choices;
AlphaRegex's 25 problems are never read here). The score of a setting is the number of
problems whose result is *equivalent* to the intended language (exact DFA equivalence):
on Regel's half out of all its problems, the ones without usable ground truth counted
as failures.

The procedure, fixed before it ran:

1. Every search factor (:data:`FACTORS`) is varied one at a time around
   :data:`START`, the setting before this tuning; each variant is one search run over
   the development problems (text factors on Regel's half, small-alphabet factors on
   Tomita's, the hole cost on both).
2. The finishing step of text regexes (:class:`~neurosym.synth.beam.Finish`) is a
   post-processing of the search's result, so every variant of :data:`FINISHES` is
   scored on the start run's raw results; the best one scores every search run.
3. Each factor takes its best value (ties go to the first value listed: AlphaRegex's
   or the plain choice); if that combination was not run, it is run.
4. The final setting (:func:`choose`): the hole's value from step 3; then suite by
   suite, the leaf factors of the run with that hole that scores best on the suite,
   ties going to the run with more plain values. A value the development data cannot
   tell apart from the plain one is thus never kept because it was the start's (the
   start was chosen partly on test problems). Step 4 reads only the development scores,
   so ``--choose-from REPORT`` redoes it from a saved report without searching.

(Step 4 was first written as "the best run, ties to the start"; after the run, on
its development scores alone, it was changed to the rule above because ties to the
start would carry choices made on the test problems through every tie.)

The chosen setting is frozen in code (``LEAF_CHOICES`` in
:mod:`neurosym.synth.bestfirst`, ``FINISH`` and the hole in ``ALPHAREGEX_COSTS`` in
:mod:`neurosym.synth.beam`); ``docs/synth_tune.json`` is the run that chose it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

from neurosym.bench.regel_split import split_of
from neurosym.bench.synth_problems import load_regel, load_tomita
from neurosym.bench.synth_score import equivalent
from neurosym.compile.regex import pattern_dfa
from neurosym.errors import NeurosymError
from neurosym.synth import beam, clock
from neurosym.synth import regex_ast as ra
from neurosym.synth.beam import ALPHAREGEX_COSTS, Finish, consistent, generalize
from neurosym.synth.bestfirst import SMALL_ALPHABET, LeafChoices
from neurosym.synth.clock import cpu_clock


@dataclass(frozen=True)
class Setting:
    """One candidate: the hole's cost and the leaf choices (the finishing step is
    scored separately, on the raw results)."""

    hole: int
    leaves: LeafChoices

    def label(self) -> str:
        """``hole=50 dot=4 ...``: every field, for the tables."""
        return " ".join([f"hole={self.hole}"] + [f"{k}={v}" for k, v in asdict(self.leaves).items()])


# The setting before this tuning (chosen in earlier sessions, partly on the test problems).
START = Setting(hole=50, leaves=LeafChoices(dot=4, any_string=2, alnum_char=3, vowels=True, small_any=True, small_stars=True))

# factor -> (the suites it affects, its values; the first is AlphaRegex's or the plain choice)
FACTORS: dict[str, tuple[tuple[str, ...], tuple]] = {
    "hole": (("regel", "tomita"), (100, 50)),
    "dot": (("regel",), (2, 4, 6)),
    "any_string": (("regel",), (None, 2, 4)),
    "alnum_char": (("regel",), (2, 3)),
    "vowels": (("regel",), (False, True)),
    "small_any": (("tomita",), (False, True)),
    "small_stars": (("tomita",), (False, True)),
}

# finishing steps scored on text results; ties go to the earlier (fewer steps)
FINISHES = (
    Finish(plus=False, right=False, between=False),
    Finish(plus=True, right=False, between=False),
    Finish(plus=False, right=True, between=False),
    Finish(plus=True, right=True, between=False),
    Finish(plus=True, right=True, between=True),
    Finish(plus=True, right=True, between=True, left=True),
)

SUITES = ("regel", "tomita")


def with_value(setting: Setting, factor: str, value) -> Setting:
    """``setting`` with one factor changed."""
    if factor == "hole":
        return replace(setting, hole=value)
    return replace(setting, leaves=replace(setting.leaves, **{factor: value}))


def value_of(setting: Setting, factor: str):
    return setting.hole if factor == "hole" else getattr(setting.leaves, factor)


def dev_problems(limit: int | None = None) -> dict[str, dict]:
    """The development problems: ``{"regel": {"usable": [...], "total": N}, "tomita":
    {...}}`` (``limit``: only the first ``limit`` usable problems of each)."""
    usable, skipped = load_regel()
    regel = [p for p in usable if split_of(p["name"]) == "dev"]
    n_regel = len(regel) + sum(split_of(p["name"]) == "dev" for p in skipped)
    tomita = load_tomita()
    if limit is not None:
        regel, tomita = regel[:limit], tomita[:limit]
        n_regel = len(regel)
    return {"regel": {"usable": regel, "total": n_regel}, "tomita": {"usable": tomita, "total": len(tomita)}}


def _search(job: tuple) -> dict:
    """One search of one problem with one setting, in CPU seconds (a worker's job):
    the raw result, before any finishing step."""
    problem, setting, budget, seed, use_cpu = job
    costs = {**ALPHAREGEX_COSTS, "H": setting.hole}
    with cpu_clock() if use_cpu else contextlib.nullcontext():
        t0 = clock.now()
        node, info = beam.search(problem["positives"], problem["negatives"], time_budget=budget, seed=seed, costs=costs,
                                 open_ends=False, leaf_choices=setting.leaves)
        seconds = clock.now() - t0
    return {"name": problem["name"], "node": node, "phase": info.get("phase"), "seconds": seconds}


def is_text(problem: dict) -> bool:
    """Whether ``beam`` treats the problem as text (it then applies the finishing step)."""
    return len({c for x in problem["positives"] + problem["negatives"] for c in x}) > SMALL_ALPHABET


def finished(problem: dict, raw: dict, finish: Finish | None) -> ra.Node:
    """The regex ``beam`` would return with ``finish`` (none for formats and small alphabets)."""
    if finish is None or raw["phase"] == "format" or not is_text(problem):
        return raw["node"]
    return generalize(raw["node"], problem["positives"], problem["negatives"], finish)


_EQ_CACHE: dict[tuple[str, str], bool] = {}


def is_equivalent(pattern: str, truth: str) -> bool:
    key = (pattern, truth)
    if key not in _EQ_CACHE:
        try:
            _EQ_CACHE[key] = equivalent(pattern_dfa(pattern), pattern_dfa(truth))
        except NeurosymError:
            _EQ_CACHE[key] = False
    return _EQ_CACHE[key]


def score_run(problems: Sequence[dict], raws: dict[str, dict], total: int, finish: Finish | None) -> dict:
    """Equivalent and consistent counts of one run's results over ``total`` problems."""
    eq = cons = 0
    rows = []
    for p in problems:
        node = finished(p, raws[p["name"]], finish)
        pattern = ra.to_pattern(node)
        e = is_equivalent(pattern, p["regex"])
        c = consistent(node, p["positives"], p["negatives"])
        eq += e
        cons += c
        rows.append({"name": p["name"], "pattern": pattern, "equivalent": e, "consistent": c, "seconds": raws[p["name"]]["seconds"]})
    return {"equivalent": eq, "consistent": cons, "problems": total, "rows": rows}


def run_settings(settings: Sequence[tuple[Setting, tuple[str, ...]]], dev: dict, budgets: dict[str, float], seed: int, jobs: int,
                 use_cpu: bool, log: Callable[[str], None] | None) -> dict[tuple[Setting, str], dict[str, dict]]:
    """Search every (setting, suite) pair's problems, ``jobs`` processes at a time:
    ``{(setting, suite): {problem name: raw result}}``."""
    work = [(s, suite, p) for s, suites in settings for suite in suites for p in dev[suite]["usable"]]
    args = [(p, s, budgets[suite], seed, use_cpu) for s, suite, p in work]
    out: dict[tuple[Setting, str], dict[str, dict]] = {(s, suite): {} for s, suites in settings for suite in suites}
    if jobs > 1:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(jobs) as pool:
            results = pool.imap(_search, args, chunksize=1)
            for (s, suite, _), res in zip(work, results):
                out[(s, suite)][res["name"]] = res
                if log:
                    log(f"{suite} {res['name']} {res['seconds']:6.2f}s  [{s.label()}]")
    else:
        for (s, suite, _), a in zip(work, args):
            res = _search(a)
            out[(s, suite)][res["name"]] = res
            if log:
                log(f"{suite} {res['name']} {res['seconds']:6.2f}s  [{s.label()}]")
    return out


def best_finish(problems: Sequence[dict], raws: dict[str, dict], total: int) -> tuple[Finish, dict[str, dict]]:
    """Every finishing step's score on one run's results, and the best (ties: the earlier)."""
    table = {f.name: score_run(problems, raws, total, f) for f in FINISHES}
    best = max(FINISHES, key=lambda f: (table[f.name]["equivalent"], -FINISHES.index(f)))
    return best, table


def tune(time_budget: float = 5.0, binary_time_budget: float = 30.0, seed: int = 0, jobs: int = 1, limit: int | None = None,
         clock_kind: str = "cpu", log: Callable[[str], None] | None = None) -> dict:
    """Run the procedure of this module's docstring; returns the report (JSON-ready)."""
    if clock_kind not in ("wall", "cpu"):
        raise NeurosymError(f"--clock: unknown clock {clock_kind!r}; expected wall or cpu")
    dev = dev_problems(limit)
    budgets = {"regel": time_budget, "tomita": binary_time_budget}
    use_cpu = clock_kind == "cpu"
    # step 1: the start and one factor at a time
    runs: list[tuple[str, str, object, Setting, tuple[str, ...]]] = [("start", "", None, START, SUITES)]
    for factor, (suites, values) in FACTORS.items():
        for v in values:
            if v != value_of(START, factor):
                runs.append((f"{factor}={v}", factor, v, with_value(START, factor, v), suites))
    raws = run_settings([(s, su) for _, _, _, s, su in runs], dev, budgets, seed, jobs, use_cpu, log)
    regel, tomita = dev["regel"], dev["tomita"]

    def raws_of(setting: Setting, suite: str) -> tuple[dict, bool]:
        """A run's raw results on a suite; a factor that does not touch the suite (a text
        factor on Tomita, a small-alphabet one on Regel's text) was not run there, and its
        results are the start's."""
        if (setting, suite) in raws:
            return raws[(setting, suite)], False
        return raws[(START, suite)], True

    def scores(setting: Setting, finish: Finish) -> dict:
        out = {}
        for suite, d, f in (("regel", regel, finish), ("tomita", tomita, None)):
            rs, reused = raws_of(setting, suite)
            out[suite] = {**score_run(d["usable"], rs, d["total"], f), "from_start": reused}
        return out

    def row_of(name: str, factor: str, v, s: Setting, finish: Finish) -> dict:
        sc = scores(s, finish)
        return {"run": name, "factor": factor, "value": v, "setting": {"hole": s.hole, **asdict(s.leaves)},
                **{k: {kk: vv for kk, vv in x.items() if kk != "rows"} for k, x in sc.items()},
                "total": sum(x["equivalent"] for x in sc.values()), "rows": {k: x["rows"] for k, x in sc.items()}}

    # step 2: the finishing step on the start run
    finish, finish_table = best_finish(regel["usable"], raws[(START, "regel")], regel["total"])
    table = [row_of(name, factor, v, s, finish) for name, factor, v, s, _ in runs]

    # step 3: each factor's best value (ties to the first listed); their combination is run if new
    per_factor = factor_choices(table)
    chosen = START
    for factor, v in per_factor.items():
        chosen = with_value(chosen, factor, v["chosen"])
    if chosen not in {s for _, _, _, s, _ in runs}:
        raws.update(run_settings([(chosen, SUITES)], dev, budgets, seed, jobs, use_cpu, log))
        table.append(row_of("combined", "", None, chosen, finish))
    report = {
        "clock": clock_kind,
        "time_budget": time_budget,
        "binary_time_budget": binary_time_budget,
        "seed": seed,
        "limit": limit,
        "development": {"regel": {"problems": regel["total"], "usable": len(regel["usable"]), "split": "dev"},
                        "tomita": {"problems": tomita["total"]}},
        "start": asdict(START),
        "finish_on_start": {"scores": {k: v["equivalent"] for k, v in finish_table.items()}, "chosen": finish.name},
        "runs": table,
    }
    return choose(report)


def factor_choices(runs: Sequence[dict]) -> dict[str, dict]:
    """Each factor's value of best total (its run, or the start for the start's value);
    ties go to the first value listed."""
    out = {}
    for factor, (suites, values) in FACTORS.items():
        rows = {(r["value"] if r["factor"] == factor else value_of(START, factor)): r for r in runs if r["factor"] in (factor, "") and r["run"] != "combined"}
        best = max(values, key=lambda v: (rows[v]["total"], -values.index(v)))
        out[factor] = {"suites": list(suites), "scores": {str(v): rows[v]["total"] for v in values}, "chosen": best}
    return out


def plain_values(setting: dict, factors: Sequence[str]) -> int:
    """How many of ``factors`` sit at their first (AlphaRegex's or the plain) value."""
    return sum(setting[f] == FACTORS[f][1][0] for f in factors)


def choose(report: dict) -> dict:
    """Steps 3 and 4 on a report's development scores (no search): ``per_factor`` and
    ``chosen``. The hole takes its per-factor value; then, suite by suite (a factor of
    one suite cannot change another's results), the leaf factors of that suite come from
    the run with that hole that scores best there, ties going to the run with more
    plain values, so a value the development data cannot tell apart from the plain one
    is never kept because it was the start's. The finishing step is the one chosen on
    the start run."""
    runs = report["runs"]
    per_factor = factor_choices(runs)
    hole = per_factor["hole"]["chosen"]
    picked: dict = {}
    from_runs = {}
    for suite in SUITES:
        factors = [f for f, (suites, _) in FACTORS.items() if f != "hole" and suite in suites]
        cands = [r for r in runs if r["setting"]["hole"] == hole and not r[suite]["from_start"]]
        best = max(cands, key=lambda r: (r[suite]["equivalent"], plain_values(r["setting"], factors), -runs.index(r)))
        picked.update({f: best["setting"][f] for f in factors})
        from_runs[suite] = best
    finish = next(f for f in FINISHES if f.name == report["finish_on_start"]["chosen"])
    chosen = {"hole": hole, "leaves": asdict(LeafChoices(**picked)), "finish": asdict(finish), "finish_name": finish.name}
    for suite in SUITES:
        r = from_runs[suite]
        chosen.update({f"{suite}_run": r["run"], f"{suite}_equivalent": r[suite]["equivalent"], f"{suite}_problems": r[suite]["problems"]})
    return {**report, "per_factor": per_factor, "chosen": chosen}


def format_report(report: dict) -> str:
    """The development score of every candidate, and the choice."""
    r, t = report["development"]["regel"], report["development"]["tomita"]
    lines = [f"development data: Regel's dev half ({r['problems']} problems, {r['usable']} usable; {report['time_budget']:g} s each) "
             f"and the Tomita languages ({t['problems']}; {report['binary_time_budget']:g} s each), {report['clock']} clock", "",
             "finishing step on the start run (Regel dev, equivalent):"]
    for k, v in report["finish_on_start"]["scores"].items():
        lines.append(f"  {k:32s} {v:4d}" + ("  <- chosen" if k == report["finish_on_start"]["chosen"] else ""))
    lines += ["", f"{'run':22s} {'Regel dev equivalent':>22s} {'Tomita equivalent':>18s} {'total':>6s}   (* = the start's results: not touched)"]
    for row in report["runs"]:
        rg, tm = (f"{row[k]['equivalent']}/{row[k]['problems']}" + ("*" if row[k]["from_start"] else " ") for k in ("regel", "tomita"))
        lines.append(f"{row['run']:22s} {rg:>22s} {tm:>18s} {row['total']:6d}")
    lines += ["", "per factor (total of the run with that value; ties to the first value):"]
    for f, v in report["per_factor"].items():
        lines.append(f"  {f:12s} " + "  ".join(f"{k}: {s}" for k, s in v["scores"].items()) + f"  -> {v['chosen']}")
    c = report["chosen"]
    lines += ["", f"chosen: hole={c['hole']} " + " ".join(f"{k}={v}" for k, v in c["leaves"].items()) + f" finish={c['finish_name']}",
              f"  Regel dev {c['regel_equivalent']}/{c['regel_problems']} (the run {c['regel_run']}), "
              f"Tomita {c['tomita_equivalent']}/{c['tomita_problems']} (the run {c['tomita_run']})"]
    return "\n".join(lines)


__all__ = ["FACTORS", "FINISHES", "START", "SUITES", "Setting", "choose", "dev_problems", "factor_choices", "format_report", "tune"]
