"""Regex synthesis from a labelled corpus: one regex per class, checked on every example.

::

    from neurosym.synth.corpus import synthesize_corpus, read_corpus, write_bank
    pairs = read_corpus("en_ewt-ud-train.conllu", label="UPOS")    # [(form, label), ...]
    results = synthesize_corpus(pairs, classes=["NUM", "PUNCT"], time_budget=60)
    write_bank("found.regex", results)                             # NUM: /.../ ...

Each class's positives are the forms carrying its label, the negatives the other
classes' forms; a form seen with several labels counts, per token, for each. The search
runs on a small *sample* of the distinct forms, stratified by shape (runs of digits,
letters by case and punctuation) and by length, with the negatives that share a
positive's shape first (near misses); a counter-example loop (as in CEGIS) then
verifies the candidate on *every* form, adds the forms it gets wrong (the most frequent
first) to the sample and searches again, keeping the candidate that is best on the
full set, until nothing is wrong outside the sample, ``rounds`` are done or the time
is up. The candidates come from format induction (:func:`neurosym.synth.generalise.induce_weighted`
at each granularity); they are compared on the full set by the module's objective
with weighted examples: misclassified tokens + ``lam`` per unit of AST size (the
edit-distance term is left out: at this scale every example is either right or
wrong, and a wrong one costs 1 per token).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from neurosym.synth import clock
from neurosym.compile.regex import compile_bank, pattern_dfa
from neurosym.dsl.regex import parse_regex_bank
from neurosym.dsl.source import read_text_file
from neurosym.data.text import conllu_sentences, field_column
from neurosym.errors import NeurosymError, SourceError
from neurosym.files import atomic_write_bytes
from neurosym.synth import regex_ast as ra
from neurosym.synth.bank import bank_entry
from neurosym.synth.generalise import GRANULARITIES, induce_weighted, shape

CONLLU_COLUMNS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
SAMPLE_POSITIVES = 60
SAMPLE_NEGATIVES = 200
COUNTER_EXAMPLES = 30  # forms added to the sample per round (each of positives and negatives)
ROUNDS = 8
# Misclassified tokens a unit of AST size is worth, at LAM_TOKENS tokens and more; a
# smaller corpus weighs size proportionally less (a 7-line TSV must still get its
# formats). Tuned on UD English-EWT train -> dev only (0.02, 0.1, 0.25, 0.5, 1.0 tried:
# 0.25 gives the best unseen-form F1 on dev for PUNCT, SYM and PROPN together).
LAM = 0.25
LAM_TOKENS = 200_000


# ---------------------------------------------------------------------- readers


def read_conllu(path: str | Path, label: str = "UPOS") -> list[tuple[str, str]]:
    """``(FORM, label column)`` of every word line of a CoNLL-U file (multi-word token
    ranges ``1-2`` and empty nodes ``1.1`` are skipped, as they are not words of the
    basic tree). ``label`` is a column name (``UPOS``, ``XPOS``, ``DEPREL``, ...)."""
    path = Path(path)
    col = label.upper()
    if col not in CONLLU_COLUMNS:
        raise NeurosymError(f"{path}: unknown CoNLL-U column {label!r}; expected one of {', '.join(CONLLU_COLUMNS)}")
    k = CONLLU_COLUMNS.index(col)
    return [(cols[1], cols[k]) for sentence in conllu_sentences(_lines(path), path) for _, cols in sentence]


def read_tsv(path: str | Path) -> list[tuple[str, str]]:
    """``string<TAB>label`` lines (the string may be empty; blank lines are skipped)."""
    path = Path(path)
    out: list[tuple[str, str]] = []
    for lineno, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            col = field_column(line, min(len(cols), 2))  # where the label goes, or the first extra column
            raise SourceError(f"expected 'string<TAB>label', got {len(cols)} tab-separated column(s)", path, lineno, col)
        if not cols[1].strip():
            raise SourceError("empty label", path, lineno, field_column(line, 1))
        out.append((cols[0], cols[1].strip()))
    return out


def read_corpus(path: str | Path, label: str | None = None) -> list[tuple[str, str]]:
    """A CoNLL-U file (``.conllu``/``.conll``; ``label`` a column, default ``UPOS``) or
    a TSV of ``string<TAB>label`` (any other suffix; ``label`` must not be given)."""
    path = Path(path)
    if path.suffix.lower() in (".conllu", ".conll"):
        return read_conllu(path, label or "UPOS")
    if label is not None:
        raise NeurosymError(f"{path}: --label names a CoNLL-U column; a TSV file's label is its second column")
    return read_tsv(path)


def _lines(path: Path) -> list[str]:
    text = read_text_file(path, "give a CoNLL-U (.conllu) or TSV (string<TAB>label) file")
    return text.split("\n") if not text.endswith("\n") else text[:-1].split("\n")


# ---------------------------------------------------------------------- names


def sanitise_names(labels: Iterable[str]) -> dict[str, str]:
    """Bank names for labels: upper case, other characters as ``_``, a leading digit
    prefixed with ``_``; clashes get ``_2``, ``_3``, ..."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for lab in labels:
        name = re.sub(r"[^A-Z0-9_]", "_", lab.upper()) or "_"
        if name[0].isdigit():
            name = "_" + name
        base, k = name, 2
        while name in used:
            name = f"{base}_{k}"
            k += 1
        used.add(name)
        out[lab] = name
    return out


# ---------------------------------------------------------------------- the loop


@dataclass
class Round:
    """One pass of the counter-example loop."""

    pattern: str
    sample_positives: int
    sample_negatives: int
    sample_errors: float  # misclassified tokens among the sample's forms
    full_errors: float  # misclassified tokens on the full set
    seconds: float


@dataclass
class ClassResult:
    """The regex of one class and how it does on every example it was built from.

    ``tp``/``fp``/``fn``/``tn`` count tokens (a form seen with two labels counts
    for each); ``accuracy`` = (tp + tn) / tokens."""

    label: str
    name: str
    pattern: str
    tp: int
    fp: int
    fn: int
    tn: int
    forms: int  # distinct forms with this label
    tokens: int  # tokens with this label
    seconds: float
    rounds: list[Round] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / max(1, self.tp + self.fp + self.fn + self.tn)

    @property
    def precision(self) -> float:
        return self.tp / max(1, self.tp + self.fp)

    @property
    def recall(self) -> float:
        return self.tp / max(1, self.tp + self.fn)

    @property
    def f1(self) -> float:
        return 2 * self.tp / max(1, 2 * self.tp + self.fp + self.fn)

    def __str__(self) -> str:
        return (
            f"{self.name}: /{self.pattern}/  accuracy {self.accuracy:.4f}  P {self.precision:.3f} R {self.recall:.3f} "
            f"F1 {self.f1:.3f}  ({self.tokens} tokens, {self.forms} forms, {len(self.rounds)} rounds, {self.seconds:.1f} s)"
        )


class Table:
    """Label counts per distinct form."""

    def __init__(self, pairs: Iterable[tuple[str, str]]):
        self.by_form: dict[str, Counter] = defaultdict(Counter)
        n = 0
        for i, item in enumerate(pairs):
            if not (isinstance(item, tuple | list) and len(item) == 2 and all(isinstance(x, str) for x in item)):
                raise NeurosymError(f"example {i}: expected a (string, label) pair of strings, got {item!r}")
            self.by_form[item[0]][item[1]] += 1
            n += 1
        self.tokens = n
        self.label_tokens: Counter = Counter()
        self.label_forms: Counter = Counter()
        for c in self.by_form.values():
            self.label_tokens.update(c)
            self.label_forms.update(c.keys())

    def weights(self, label: str) -> tuple[dict[str, float], dict[str, float]]:
        """Per form, the tokens gained by accepting it (positives) or lost (negatives):
        ``count(label) - count(other labels)``; ties are left out."""
        pos, neg = {}, {}
        for form, c in self.by_form.items():
            d = 2 * c[label] - sum(c.values())
            if d > 0:
                pos[form] = float(d)
            elif d < 0:
                neg[form] = float(-d)
        return pos, neg

    def confusion(self, label: str, accepts) -> tuple[int, int, int, int]:
        """Token counts ``tp, fp, fn, tn`` of a predicate on forms."""
        tp = fp = fn = tn = 0
        for form, c in self.by_form.items():
            k = c[label]
            rest = sum(c.values()) - k
            if accepts(form):
                tp += k
                fp += rest
            else:
                fn += k
                tn += rest
        return tp, fp, fn, tn


def stratified_sample(weights: dict[str, float], k: int, near: set[str] | None = None) -> list[str]:
    """Up to ``k`` forms: round-robin over strata ``(shape, length band)``, the heaviest
    first within a stratum; strata holding a ``near`` shape come first."""
    strata: dict[tuple, list[str]] = defaultdict(list)
    for form in sorted(weights, key=lambda f: (-weights[f], f)):
        sh = shape(form)
        strata[(sh, min(len(form), 12) // 3)].append(form)
    order = sorted(strata, key=lambda key: (near is not None and key[0] not in near, -weights[strata[key][0]], key))
    out: list[str] = []
    depth = 0
    while len(out) < k and any(len(strata[key]) > depth for key in order):
        for key in order:
            if depth < len(strata[key]):
                out.append(strata[key][depth])
                if len(out) >= k:
                    break
        depth += 1
    return out


def _errors(rx: re.Pattern, pos: dict[str, float], neg: dict[str, float], forms=None) -> float:
    if forms is None:
        return sum(w for f, w in pos.items() if not rx.fullmatch(f)) + sum(w for f, w in neg.items() if rx.fullmatch(f))
    return sum(pos.get(f, 0.0) for f in forms if f in pos and not rx.fullmatch(f)) + sum(
        neg.get(f, 0.0) for f in forms if f in neg and rx.fullmatch(f)
    )


def learn_class(
    table: Table,
    label: str,
    time_budget: float = 60.0,
    rounds: int = ROUNDS,
    sample_positives: int = SAMPLE_POSITIVES,
    sample_negatives: int = SAMPLE_NEGATIVES,
    counter_examples: int = COUNTER_EXAMPLES,
    lam: float | None = None,
) -> tuple[str, list[Round]]:
    """The counter-example loop for one class; returns the best pattern on the full set
    (misclassified tokens + ``lam`` per unit of AST size; default ``LAM`` scaled by
    the corpus's tokens / ``LAM_TOKENS``, at most ``LAM``) and the rounds."""
    t_end = clock.now() + time_budget
    if lam is None:
        lam = LAM * min(1.0, table.tokens / LAM_TOKENS)
    pos, neg = table.weights(label)
    if not pos:
        raise NeurosymError(f"class {label!r} has no form it labels more often than the other classes do")
    sample_pos = stratified_sample(pos, sample_positives)
    pos_shapes = {shape(f) for f in sample_pos}
    sample_neg = stratified_sample(neg, sample_negatives, near=pos_shapes)
    history: list[Round] = []
    best: tuple[float, str] | None = None
    for _ in range(max(1, rounds)):
        t0 = clock.now()
        sp = {f: pos[f] for f in sample_pos}
        sn = {f: neg[f] for f in sample_neg}
        cands = []
        for gran in GRANULARITIES:
            node = induce_weighted(sp, sn, lam=lam, granularity=gran)
            pattern = ra.to_pattern(node)
            rx = re.compile(pattern)
            full = _errors(rx, pos, neg)
            cands.append((full + lam * ra.size(node), full, pattern, rx))
        score, full, pattern, rx = min(cands, key=lambda c: (c[0], len(c[2])))
        sample_err = _errors(rx, sp, sn)
        history.append(Round(pattern, len(sp), len(sn), sample_err, full, clock.now() - t0))
        if best is None or score < best[0]:
            best = (score, pattern)
        if clock.now() > t_end:
            break
        in_sample = set(sample_pos) | set(sample_neg)
        missed = sorted((f for f in pos if f not in in_sample and not rx.fullmatch(f)), key=lambda f: (-pos[f], f))
        wrong = sorted((f for f in neg if f not in in_sample and rx.fullmatch(f)), key=lambda f: (-neg[f], f))
        if not missed and not wrong:
            break  # nothing wrong outside the sample: more rounds would see the same examples
        sample_pos += missed[:counter_examples]
        sample_neg += wrong[:counter_examples]
    assert best is not None
    return best[1], history


def synthesize_corpus(
    pairs: Sequence[tuple[str, str]],
    classes: Sequence[str] | None = None,
    time_budget: float = 60.0,
    progress=None,
    **options,
) -> list[ClassResult]:
    """One regex per class from ``(string, label)`` pairs.

    Args:
        pairs: the labelled examples (a token of a corpus per pair).
        classes: the labels to learn (default every label, most tokens first); an
            unknown label, or one with no form it labels most, is a ``NeurosymError``.
        time_budget: seconds for all classes together (split evenly).
        progress: a callable given each :class:`ClassResult` as it is done.
        options: passed to :func:`learn_class` (``rounds``, ``sample_positives``, ``lam``, ...).
    """
    table = Table(pairs)
    if not table.tokens:
        raise NeurosymError("the corpus has no examples")
    labels = list(classes) if classes is not None else [lab for lab, _ in table.label_tokens.most_common()]
    unknown = [lab for lab in labels if lab not in table.label_tokens]
    if unknown:
        known = ", ".join(sorted(table.label_tokens))
        raise NeurosymError(f"class(es) {', '.join(map(repr, unknown))} have no example (the labels are {known})")
    names = sanitise_names(labels)
    per_class = time_budget / max(1, len(labels))
    out: list[ClassResult] = []
    for lab in labels:
        t0 = clock.now()
        pattern, history = learn_class(table, lab, per_class, **options)
        rx = re.compile(pattern)
        tp, fp, fn, tn = table.confusion(lab, lambda f: rx.fullmatch(f) is not None)
        res = ClassResult(lab, names[lab], pattern, tp, fp, fn, tn, table.label_forms[lab], table.label_tokens[lab], clock.now() - t0, history)
        out.append(res)
        if progress is not None:
            progress(res)
    return out


# ---------------------------------------------------------------------- the bank


def bank_text(results: Sequence[ClassResult]) -> str:
    """The ``.regex`` bank: one ``NAME: /pattern/`` line per class."""
    return "".join(bank_entry(r.name, r.pattern) + "\n" for r in results)


def check_patterns(results: Sequence[ClassResult], forms: Iterable[str]) -> None:
    """Every pattern's compiled DFA agrees with Python's ``re.fullmatch`` on every form
    (a ``NeurosymError`` naming the class and the form otherwise)."""
    forms = list(forms)
    for r in results:
        dfa = pattern_dfa(r.pattern)
        rx = re.compile(r.pattern)
        for f in forms:
            if dfa.accepts(f) != (rx.fullmatch(f) is not None):
                raise NeurosymError(f"{r.name}: /{r.pattern}/ and Python's re disagree on {f!r}")


def write_bank(path: str | Path, results: Sequence[ClassResult], forms: Iterable[str] | None = None) -> Path:
    """Write the bank atomically after parsing and compiling it whole (and, given
    ``forms``, checking every pattern against ``re`` on them)."""
    path = Path(path)
    text = bank_text(results)
    compile_bank(parse_regex_bank(text, path=path))
    if forms is not None:
        check_patterns(results, forms)
    return atomic_write_bytes(path, text.encode("utf-8"), make_parents=False)


def format_results(results: Sequence[ClassResult]) -> str:
    """A table of the classes' patterns and their figures on the examples."""
    lines = [f"  {'class':10s} {'tokens':>7s} {'forms':>6s} {'acc':>7s} {'P':>6s} {'R':>6s} {'F1':>6s} {'rounds':>6s} {'s':>6s}  pattern"]
    for r in results:
        lines.append(
            f"  {r.name:10s} {r.tokens:7d} {r.forms:6d} {r.accuracy:7.4f} {r.precision:6.3f} {r.recall:6.3f} {r.f1:6.3f} "
            f"{len(r.rounds):6d} {r.seconds:6.1f}  /{r.pattern if len(r.pattern) <= 80 else r.pattern[:77] + '...'}/"
        )
    return "\n".join(lines)


__all__ = [
    "ClassResult",
    "Round",
    "Table",
    "bank_text",
    "check_patterns",
    "format_results",
    "learn_class",
    "read_conllu",
    "read_corpus",
    "read_tsv",
    "sanitise_names",
    "stratified_sample",
    "synthesize_corpus",
    "write_bank",
]
