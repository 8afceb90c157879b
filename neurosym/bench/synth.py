"""``neurosym bench synth``: regex synthesis on the AlphaRegex and Regel benchmarks.

* **AlphaRegex** (``shared/data/alpharegex``, 25 problems over {0, 1}): each file is a
  description, ``++`` and the positives, ``--`` and the negatives; ``X`` stands for
  both symbols and is expanded (``1X`` -> ``10``, ``11``). A problem is *solved* when
  the regex accepts every positive and no negative. Reported per method: solved
  count, seconds per problem (median, max).
* **Regel** (``shared/data/regel``: ``so/`` 122 StackOverflow and ``deepregex/`` 200
  problems): examples ``"s",+`` / ``"s",-`` and a ground truth in Regel's DSL. Only
  problems whose ground truth avoids ``and``, ``not`` and ``notcc`` (intersection and
  complement) are used; their ground truth is translated to a Python regex
  (:func:`regel_to_regex`: ``concat or optional star repeat repeatatleast
  repeatrange contain startwith endwith`` and the classes ``<num> <let> <low> <cap>
  <any> <alphanum> <vow> <hex> <num1-9> <spec>``; DeepRegex's constants ``<m0>``,
  ``<m1>``, ... are the quoted strings of the description, in order). Reported:
  consistent count (every example right), *equivalent* count (the synthesised DFA
  equals the ground truth's DFA exactly — Regel's notion of success), and the mean F1
  on fresh strings labelled by the ground truth with ``re.fullmatch``: samples of the
  ground truth's and the candidate's languages plus random edits of the examples.
"""

from __future__ import annotations

import contextlib
import re
import statistics
import string
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from neurosym.errors import NeurosymError
from neurosym.synth import regex_ast as ra
from neurosym.compile.regex import pattern_dfa
from neurosym.data import shared_data
from neurosym.synth import clock, synthesize
from neurosym.synth.clock import cpu_clock
from neurosym.synth.corpus import read_corpus, synthesize_corpus
from neurosym.data import shared_data_dir
from neurosym.synth.regel_split import split_of
from neurosym.synth.simplify import simplify

# ---------------------------------------------------------------------- AlphaRegex


def expand_x(line: str) -> list[str]:
    """Every string ``line`` stands for, ``X`` being 0 or 1."""
    out = [""]
    for c in line:
        out = [o + x for o in out for x in ("01" if c == "X" else c)]
    return out


def load_alpharegex(folder: str | Path | None = None) -> list[dict]:
    """The AlphaRegex problems: ``name, description, positives, negatives``."""
    folder = Path(folder) if folder is not None else _shared("alpharegex") / "benchmarks"
    problems = []
    for path in sorted(folder.iterdir(), key=lambda p: (int(re.match(r"no(\d+)", p.name).group(1)), p.name)):
        desc, pos, neg, mode, has_x = [], [], [], None, False
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if line == "++":
                mode = pos
            elif line == "--":
                mode = neg
            elif mode is None:
                desc.append(line)
            elif line:
                mode.extend(expand_x(line))
                has_x = has_x or "X" in line
        problems.append(
            {
                "name": path.name,
                "description": " ".join(desc).strip(),
                "positives": sorted(set(pos)),
                "negatives": sorted(set(neg)),
                "has_x": has_x,
            }
        )
    return problems


def load_alpharegex_reference(path: str | Path | None = None) -> dict[str, str]:
    """The regex the AlphaRegex paper reports for each problem (Python syntax), by
    problem name (``reference.tsv``: name, paper syntax, Python syntax)."""
    path = Path(path) if path is not None else _shared("alpharegex") / "reference.tsv"
    out = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 3:
            raise NeurosymError(f"{path}:{lineno}: expected 3 tab-separated columns, got {len(cols)}")
        out[cols[0]] = cols[2]
    return out


def binary_strings(max_len: int = 10) -> list[str]:
    """Every string over {0, 1} of length at most ``max_len`` (2^(max_len+1) - 1 strings)."""
    out = [""]
    frontier = [""]
    for _ in range(max_len):
        frontier = [x + c for x in frontier for c in "01"]
        out.extend(frontier)
    return out


ALPHAREGEX_LEAVES = (ra.Chars("0"), ra.Chars("1"))


# ---------------------------------------------------------------------- Regel

REGEL_CLASSES = {
    "num": string.digits,
    "let": string.ascii_letters,
    "low": string.ascii_lowercase,
    "cap": string.ascii_uppercase,
    "alphanum": string.ascii_letters + string.digits,
    "vow": "AEIOUaeiou",
    "hex": string.digits + "abcdefABCDEF",
    "num1-9": "123456789",
    "spec": "-,;.+:!@#_$%&*=^",
}
UNSUPPORTED = ("and", "not", "notcc")


def _parse_regel(text: str):
    """Regel DSL text -> nested tuples ``(fn, args...)``, ``("tok", name)`` or ints."""
    i = 0

    def node():
        nonlocal i
        if text[i] == "<":
            j = text.index(">", i + 2) if text[i + 1] == ">" else text.index(">", i + 1)
            tok = text[i + 1 : j]
            i = j + 1
            return ("tok", tok)
        m = re.compile(r"\d+").match(text, i)
        if m:
            i = m.end()
            return int(m.group())
        m = re.compile(r"[a-z]+").match(text, i)
        if not m or text[m.end()] != "(":
            raise NeurosymError(f"cannot parse Regel ground truth {text!r} at {i}")
        fn = m.group()
        i = m.end() + 1
        args = [node()]
        while text[i] == ",":
            i += 1
            args.append(node())
        if text[i] != ")":
            raise NeurosymError(f"cannot parse Regel ground truth {text!r} at {i}")
        i += 1
        return (fn, *args)

    tree = node()
    if i != len(text):
        raise NeurosymError(f"trailing text in Regel ground truth {text!r}")
    return tree


def regel_to_ast(gt: str, constants: Sequence[str] = ()) -> ra.Node:
    """Translate a Regel ground truth without ``and``/``not``/``notcc`` to an AST."""
    anything = ra.Star(ra.ANY)

    def tr(t) -> ra.Node:
        if isinstance(t, int):
            raise NeurosymError("a number where a regex was expected")
        fn, *args = t
        if fn == "tok":
            name = args[0]
            if name == "any":
                return ra.ANY
            if name in REGEL_CLASSES:
                return ra.Chars(REGEL_CLASSES[name])
            m = re.fullmatch(r"m(\d+)", name)
            if m:
                k = int(m.group(1))
                if k >= len(constants):
                    raise NeurosymError(f"no constant for <{name}>")
                return ra.lit(constants[k])
            if len(name) == 1:
                return ra.Chars(name)
            raise NeurosymError(f"unknown Regel token <{name}>")
        if fn in UNSUPPORTED:
            raise NeurosymError(f"{fn}(...) (intersection/complement) is not translated")
        a = [tr(x) if not isinstance(x, int) else x for x in args]
        if fn == "concat":
            return ra.Cat((a[0], a[1]))
        if fn == "or":
            return ra.Alt((a[0], a[1]))
        if fn == "optional":
            return ra.Opt(a[0])
        if fn == "star":
            return ra.Star(a[0])
        if fn == "repeat":
            return ra.repeat(a[0], a[1], a[1])
        if fn == "repeatatleast":
            return ra.repeat(a[0], a[1], None)
        if fn == "repeatrange":
            return ra.repeat(a[0], a[1], a[2])
        if fn == "contain":
            return ra.Cat((anything, a[0], anything))
        if fn == "startwith":
            return ra.Cat((a[0], anything))
        if fn == "endwith":
            return ra.Cat((anything, a[0]))
        raise NeurosymError(f"unknown Regel function {fn}")

    return simplify(tr(_parse_regel(gt.strip())))


def regel_to_regex(gt: str, constants: Sequence[str] = ()) -> str:
    """A Python regex for a Regel ground truth (see :func:`regel_to_ast`)."""
    return ra.to_pattern(regel_to_ast(gt, constants))


def _unquote(s: str) -> str:
    """Python-style escapes in a Regel constant decoded; an unknown escape (``\\s``) stays
    as written, as Python keeps it (without the DeprecationWarning it would print)."""
    if "\\" not in s:
        return s
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return s.encode("latin-1", "backslashreplace").decode("unicode_escape")


def load_regel(folder: str | Path | None = None, suites: Sequence[str] = ("so", "deepregex")) -> tuple[list[dict], list[dict]]:
    """Regel problems as ``(usable, skipped)``; usable ones carry ``regex``, the
    ground truth as a Python pattern; skipped ones a ``reason``."""
    folder = Path(folder) if folder is not None else _shared("regel")
    usable, skipped = [], []
    for suite in suites:
        files = sorted((folder / suite).iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0)
        for path in files:
            text = path.read_text(encoding="utf-8", errors="replace")
            sections: dict[str, list[str]] = {}
            cur = None
            for line in text.splitlines():
                m = re.fullmatch(r"//\s*(.*?)\s*", line)
                if m and m.group(1) in ("natural language", "examples", "example", "ex", "gt", "visual format"):
                    cur = m.group(1)
                    sections[cur] = []
                elif cur is not None:
                    sections[cur].append(line)
            desc = " ".join(sections.get("natural language", [])).strip()
            ex_lines = sections.get("examples") or sections.get("example") or sections.get("ex") or []
            pos, neg = [], []
            for line in ex_lines:
                m = re.fullmatch(r'"(.*)",\s*([+-])\s*', line)
                if m:
                    (pos if m.group(2) == "+" else neg).append(_unquote(m.group(1)))
            gt = "".join(sections.get("gt", [])).strip()
            name = f"{suite}/{path.name}"
            item = {"name": name, "description": desc, "positives": list(dict.fromkeys(pos)), "negatives": list(dict.fromkeys(neg)), "gt": gt}
            neg_set = set(item["positives"])
            item["negatives"] = [s for s in item["negatives"] if s not in neg_set]
            constants = list(dict.fromkeys(re.findall(r'"([^"]+)"', desc))) if suite == "deepregex" else []
            try:
                item["regex"] = regel_to_regex(gt, constants)
                rx = re.compile(item["regex"])
                wrong = [s for s in item["positives"] if not rx.fullmatch(s)] + [s for s in item["negatives"] if rx.fullmatch(s)]
                if wrong:
                    raise NeurosymError(f"translated ground truth disagrees with {len(wrong)} example(s)")
                if not item["positives"]:
                    raise NeurosymError("no positive example")
            except (NeurosymError, ValueError, IndexError, re.error) as err:
                item["reason"] = str(err)
                skipped.append(item)
                continue
            usable.append(item)
    return usable, skipped


# ---------------------------------------------------------------------- scoring


def equivalent(d1, d2) -> bool:
    """Whether two character DFAs accept the same language (product BFS)."""
    chars = set(d1.partition.class_of) | set(d2.partition.class_of)
    pairs = {(d1.partition.class_of.get(c, 0), d2.partition.class_of.get(c, 0)) for c in chars} | {(0, 0)}
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        a, b = stack.pop()
        fa = a >= 0 and bool(d1.final[a])
        fb = b >= 0 and bool(d2.final[b])
        if fa != fb:
            return False
        for k1, k2 in pairs:
            na = int(d1.trans[a, k1]) if a >= 0 else -1
            nb = int(d2.trans[b, k2]) if b >= 0 else -1
            if (na, nb) != (-1, -1) and (na, nb) not in seen:
                seen.add((na, nb))
                stack.append((na, nb))
    return True


def fresh_strings(problem: dict, candidate_dfa, n: int = 200, seed: int = 0) -> list[str]:
    """Fresh strings for F1: samples of the ground truth's and the candidate's languages
    and random edits of the examples (examples themselves excluded)."""
    rng = np.random.default_rng(seed)
    gt_dfa = pattern_dfa(problem["regex"])
    out = set(gt_dfa.sample(n, max_len=24, seed=seed))
    if candidate_dfa is not None:
        out |= set(candidate_dfa.sample(n, max_len=24, seed=seed + 1))
    examples = problem["positives"] + problem["negatives"]
    alphabet = sorted({c for s in examples for c in s} | set(string.ascii_letters[:6] + string.digits[:4] + " -.@"))
    for _ in range(n):
        s = list(examples[int(rng.integers(len(examples)))])
        for _ in range(int(rng.integers(1, 4))):
            op = int(rng.integers(3))
            pos = int(rng.integers(len(s) + 1))
            c = alphabet[int(rng.integers(len(alphabet)))]
            if op == 0:
                s.insert(pos, c)
            elif op == 1 and s:
                del s[min(pos, len(s) - 1)]
            elif s:
                s[min(pos, len(s) - 1)] = c
        out.add("".join(s))
    return sorted(out - set(examples))


def f1_score(pattern: str, truth: str, strings: Sequence[str]) -> float:
    cand, gt = re.compile(pattern), re.compile(truth)
    tp = fp = fn = 0
    for s in strings:
        a, b = bool(cand.fullmatch(s)), bool(gt.fullmatch(s))
        tp += a and b
        fp += a and not b
        fn += b and not a
    if tp == 0:
        return 1.0 if fp == 0 and fn == 0 else 0.0
    return 2 * tp / (2 * tp + fp + fn)


# ---------------------------------------------------------------------- runs


def _shared(name: str) -> Path:
    return shared_data(name)


BENCH_METHODS = ("beam", "beam-posterior", "evolve", "reinforce", "beam-enum", "beam-alphaleaves")


def _synthesize(problem: dict, method: str, time_budget: float, seed: int, progress: bool):
    """``beam-posterior`` is ``beam`` with ``select="posterior"``; ``beam-enum`` is
    ``beam`` without format induction (the enumerator alone); ``beam-alphaleaves`` is
    ``beam`` with AlphaRegex's own leaves (``0``, ``1``, and ``0|1`` in problems whose
    examples use ``X``)."""
    options: dict = {}
    if method == "beam-posterior":
        options["select"] = "posterior"
    elif method == "beam-enum":
        options["formats"] = False
    elif method == "beam-alphaleaves":
        leaves = list(ALPHAREGEX_LEAVES) + ([ra.Chars("01")] if problem.get("has_x") else [])
        options["leaves"] = leaves
    base = "beam" if method.startswith("beam") else method
    return synthesize(problem["positives"], problem["negatives"], method=base, time_budget=time_budget, seed=seed, progress=progress, **options)


def run_alpharegex(methods=("beam", "evolve", "reinforce"), time_budget: float = 60.0, seed: int = 0, problems=None, progress: bool = False, log=None) -> dict:
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
            res = _synthesize(p, method, time_budget, seed, progress)
            row = {"name": p["name"], "pattern": res.pattern, "solved": res.solved, "seconds": res.seconds, "size": res.size}
            ref = reference.get(p["name"])
            if ref is not None:  # like for like with the paper: its regex as the reference language
                row["reference"] = ref
                row["equivalent"] = equivalent(pattern_dfa(res.pattern), pattern_dfa(ref))
                examples = set(p["positives"]) | set(p["negatives"])
                row["f1"] = f1_score(res.pattern, ref, [x for x in universe if x not in examples])
            rows.append(row)
            if log:
                log(f"alpharegex {method} {p['name']}: {'ok ' if res.solved else 'no '} {res.seconds:6.2f}s /{res.pattern}/ eq={row.get('equivalent')}")
        secs = [r["seconds"] for r in rows]
        with_ref = [r for r in rows if "equivalent" in r]
        out[method] = {
            "problems": len(rows),
            "equivalent": sum(r["equivalent"] for r in with_ref),
            "with_reference": len(with_ref),
            "mean_f1": sum(r["f1"] for r in with_ref) / len(with_ref) if with_ref else float("nan"),
            "solved": sum(r["solved"] for r in rows),
            "median_seconds": statistics.median(secs) if secs else 0.0,
            "max_seconds": max(secs) if secs else 0.0,
            "solved_median_seconds": statistics.median([r["seconds"] for r in rows if r["solved"]] or [0.0]),
            "rows": rows,
        }
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
    :mod:`neurosym.synth.regel_split` (tune on ``dev``, report ``test``)."""
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
            res = _synthesize(p, method, time_budget, seed, progress)
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
    "corpus": {...}}`` (the corpus suite: :func:`run_corpus`, ``corpus_time_budget``
    seconds for all its classes, scored on ``corpus_test``). ``clock_kind="cpu"``
    measures every budget and time in process CPU seconds
    (:func:`neurosym.synth.clock.cpu_clock`), so a loaded machine buys the same search.

    Raises :class:`NeurosymError` with a clear message when the shared data is absent."""
    if shared_data_dir() is None:
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
    if "corpus" in suites:
        out["corpus"] = run_corpus(time_budget=corpus_time_budget, test_split=corpus_test, log=log)
    out["seconds"] = clock.now() - t0
    return out


def format_results(results: dict) -> str:
    """A plain-text table of :func:`run`'s results."""
    unit = "CPU s" if results.get("clock") == "cpu" else "s"
    lines = [
        f"regex synthesis (time budget {results.get('time_budget', '?')} {unit} per problem, seed {results.get('seed', '?')}; "
        f"{'budgets and times in process CPU seconds' if unit != 's' else 'wall-clock budgets and times'})"
    ]
    if "alpharegex" in results:
        lines.append(
            "AlphaRegex: solved = accepts every positive and no negative; equivalent = same language as the paper's "
            "reported regex; F1 on every string of length <= 10 not among the examples, labelled by that regex"
        )
        lines.append(f"  {'method':16s} {'solved':>8s} {'equivalent':>11s} {'mean F1':>8s} {'median s':>9s} {'max s':>8s}")
        for m, r in results["alpharegex"].items():
            eq = f"{r['equivalent']:>4d}/{r['with_reference']:<3d}" if r.get("with_reference") else "       -"
            f1 = f"{r['mean_f1']:8.3f}" if r.get("with_reference") else "       -"
            lines.append(
                f"  {m:16s} {r['solved']:>4d}/{r['problems']:<3d} {eq:>11s} {f1} {r['median_seconds']:9.2f} {r['max_seconds']:8.2f}"
            )
    if "regel" in results:
        rg = results["regel"]
        lines.append(
            f"Regel (examples only; split {rg.get('split', 'all')}; {rg['usable']} problems without and/not, {rg['skipped']} skipped): "
            "consistent = every example right, equivalent = same DFA as the ground truth"
        )
        lines.append(f"  {'method':14s} {'consistent':>11s} {'equivalent':>11s} {'success':>8s} {'mean F1':>8s} {'median s':>9s}")
        for m, r in rg.items():
            if not isinstance(r, dict):
                continue
            lines.append(
                f"  {m:14s} {r['solved']:>5d}/{r['problems']:<5d} {r['equivalent']:>5d}/{r['problems']:<5d} "
                f"{100 * r['success_rate']:7.1f}% {r['mean_f1']:8.3f} {r['median_seconds']:9.2f}"
            )
            for suite, b in r.get("by_suite", {}).items():
                lines.append(
                    f"    {suite:12s} {b['solved']:>5d}/{b['problems']:<5d} {b['equivalent']:>5d}/{b['problems']:<5d} "
                    f"{100 * b['equivalent'] / max(b['problems'], 1):7.1f}% {b['mean_f1']:8.3f}"
                )
    if "corpus" in results:
        lines.append(format_corpus(results["corpus"]))
    if "seconds" in results:
        lines.append(f"total {results['seconds']:.0f} s")
    return "\n".join(lines)



# ---------------------------------------------------------------------- corpus

CORPUS_CLASSES = ("NUM", "PUNCT", "SYM", "X", "PROPN")


def _prf(tp: int, fp: int, fn: int) -> dict:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": r, "f1": 2 * tp / (2 * tp + fp + fn) if tp else 0.0}


def memorised(train: Sequence[tuple[str, str]]):
    """The memorised-forms baseline: each training form's majority label (ties: the
    label seen first), an unseen form the majority class of the training tokens."""
    by_form: dict[str, Counter] = {}
    for form, label in train:
        by_form.setdefault(form, Counter())[label] += 1
    majority = Counter(label for _, label in train).most_common(1)[0][0]
    table = {form: c.most_common(1)[0][0] for form, c in by_form.items()}
    return lambda form: table.get(form, majority), majority


SHAPE_RUN = 4  # longest run of one character kind a shape keeps


def word_shape(form: str) -> str:
    """A form's word shape: upper-case letters ``X``, lower-case ``x``, digits ``d``, other
    letters ``L``, every other character itself, and runs of one kind cut to
    ``SHAPE_RUN`` (``"Varsha"`` -> ``"Xxxxx"``, ``"12.50"`` -> ``"dd.dd"``, ``"2024-01-15"``
    -> ``"dddd-dd-dd"``)."""
    out: list[str] = []
    run = 0
    for ch in form:
        k = "X" if ch.isupper() else "x" if ch.islower() else "d" if ch.isdigit() else "L" if ch.isalpha() else ch
        run = run + 1 if out and out[-1] == k and k in "XxdL" else 1
        if run <= SHAPE_RUN:
            out.append(k)
    return "".join(out)


def shaped(train: Sequence[tuple[str, str]]):
    """The word-shape baseline: a training form gets its majority label (as in
    :func:`memorised`); an unseen form gets the majority label of the training tokens of
    its :func:`word_shape`, an unseen shape the majority class."""
    known, majority = memorised(train)
    by_form = {form for form, _ in train}
    by_shape: dict[str, Counter] = {}
    for form, label in train:
        by_shape.setdefault(word_shape(form), Counter())[label] += 1
    table = {shape: c.most_common(1)[0][0] for shape, c in by_shape.items()}
    return lambda form: known(form) if form in by_form else table.get(word_shape(form), majority)


BASELINES = ("memorised", "shape")


def run_corpus(
    classes: Sequence[str] = CORPUS_CLASSES,
    time_budget: float = 60.0,
    train_split: str = "train",
    test_split: str = "test",
    label: str = "UPOS",
    log=None,
    **options,
) -> dict:
    """Corpus mode on UD English-EWT: one regex per class learnt from ``train_split``'s
    tokens (negatives: every other label's tokens), scored on ``test_split``'s tokens —
    precision, recall and F1 of "the form fullmatches the class's regex" against the
    gold label, on all test tokens and on the tokens whose form never occurs in
    training — next to the memorised-forms baseline (:func:`memorised`) and the
    word-shape baseline (:func:`shaped`). Tune on
    ``test_split="dev"``; report ``"test"``."""
    folder = _shared("ud-english-ewt")
    train = read_corpus(folder / f"en_ewt-ud-{train_split}.conllu", label)
    test = read_corpus(folder / f"en_ewt-ud-{test_split}.conllu", label)
    t0 = clock.now()
    results = synthesize_corpus(train, classes=classes, time_budget=time_budget, progress=(lambda r: log(str(r))) if log else None, **options)
    seconds = clock.now() - t0
    seen = {form for form, _ in train}
    predict, majority = memorised(train)
    by_shape = shaped(train)
    rows = {}
    for res in results:
        rx = re.compile(res.pattern)
        row = {"pattern": res.pattern, "train_accuracy": res.accuracy, "train_f1": res.f1, "seconds": res.seconds, "rounds": len(res.rounds)}
        for scope in ("all", "unseen"):
            toks = [(f, lab) for f, lab in test if scope == "all" or f not in seen]
            counts = {"regex": [0, 0, 0], "memorised": [0, 0, 0], "shape": [0, 0, 0]}
            for form, gold in toks:
                guesses = (("regex", rx.fullmatch(form) is not None), ("memorised", predict(form) == res.label), ("shape", by_shape(form) == res.label))
                for who, guess in guesses:
                    truth = gold == res.label
                    c = counts[who]
                    c[0] += guess and truth
                    c[1] += guess and not truth
                    c[2] += truth and not guess
            row[scope] = {who: _prf(*c) for who, c in counts.items()}
            row[scope]["tokens"] = sum(1 for _, lab in toks if lab == res.label)
        rows[res.label] = row
    return {
        "train": train_split,
        "test": test_split,
        "train_tokens": len(train),
        "test_tokens": len(test),
        "unseen_test_tokens": sum(1 for f, _ in test if f not in seen),
        "majority_class": majority,
        "seconds": seconds,
        "time_budget": time_budget,
        "classes": rows,
    }


def format_corpus(res: dict) -> str:
    """The corpus table: F1 (P/R) of the regexes, of memorisation and of word shapes, on all
    test tokens and on unseen forms."""
    lines = [
        f"UD English-EWT, {res['train']} ({res['train_tokens']} tokens) -> {res['test']} ({res['test_tokens']} tokens, "
        f"{res['unseen_test_tokens']} with a form unseen in {res['train']}); memorised = majority label of the training form, "
        f"unseen -> {res['majority_class']}; shape = memorised, an unseen form the majority label of its word shape; "
        f"synthesis {res['seconds']:.0f} s",
        f"  {'class':6s} {'gold':>5s} {'regex F1 (P/R)':>18s} {'memorised':>18s} {'shape':>18s} | "
        f"{'unseen':>6s} {'regex F1 (P/R)':>18s} {'memorised':>18s} {'shape':>18s}",
    ]

    def cell(x: dict) -> str:
        return f"{x['f1']:.3f} ({x['precision']:.2f}/{x['recall']:.2f})"

    for lab, row in res["classes"].items():
        a, u = row["all"], row["unseen"]
        lines.append(
            f"  {lab:6s} {a['tokens']:5d} {cell(a['regex']):>18s} {cell(a['memorised']):>18s} {cell(a['shape']):>18s} | "
            f"{u['tokens']:6d} {cell(u['regex']):>18s} {cell(u['memorised']):>18s} {cell(u['shape']):>18s}"
        )
    for lab, row in res["classes"].items():
        p = row["pattern"]
        lines.append(f"  {lab}: /{p if len(p) <= 100 else p[:97] + '...'}/")
    return "\n".join(lines)


BENCH_SUITES = {
    "alpharegex": (("alpharegex", "benchmarks"),),
    "regel": (("regel", "so"), ("regel", "deepregex")),
    "corpus": (("ud-english-ewt",),),
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
    bad = [m for m in ms if m not in BENCH_METHODS]
    if bad or not ms:
        raise NeurosymError(f"--methods: unknown method(s) {', '.join(bad) or '(none given)'}; expected some of {', '.join(BENCH_METHODS)}")
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


__all__ = [
    "bench_synth_command",
    "equivalent",
    "expand_x",
    "f1_score",
    "format_results",
    "fresh_strings",
    "load_alpharegex",
    "load_regel",
    "regel_to_ast",
    "regel_to_regex",
    "run",
    "run_alpharegex",
    "run_regel",
    "run_corpus",
    "format_corpus",
    "memorised",
    "shaped",
    "word_shape",
    "load_alpharegex_reference",
    "binary_strings",
]
