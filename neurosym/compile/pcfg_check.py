"""PCFG checks: probabilities that sum to one, undefined, unreachable and non-generating
nonterminals, and consistency (the spectral radius of the expected-children matrix).

:func:`check_pcfg` reports :class:`Finding` s (errors raise with ``strict``); the CNF
conversion (:mod:`neurosym.compile.cnf`) relies on a grammar that passes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import networkx as nx
import numpy as np

from neurosym.dsl.pcfg import NT, Grammar, Production, as_grammar
from neurosym.errors import SourceError, Span

RADIUS_LIMIT = 1.0 - 1e-9


class Finding(NamedTuple):
    """One result of :func:`check_pcfg`: ``severity`` is ``"error"``, ``"warning"`` or ``"info"``."""

    severity: str
    span: Span
    message: str

    def __str__(self) -> str:
        return f"{self.span}: {self.severity}: {self.message}"


@dataclass
class Analysis:
    """Numbers behind the checks, over the positive-probability rules.

    ``useful`` lists the reachable, generating nonterminals; ``expected_children``
    (U, U) is ``M[A, B]`` = expected number of ``B`` in one expansion of ``A`` over them;
    ``radius`` its spectral radius; ``expected_length`` the start symbol's expected
    sentence length (``None`` when ``radius >= 1``)."""

    reachable: list[str]
    generating: list[str]
    useful: list[str]
    expected_children: np.ndarray
    radius: float
    expected_length: float | None


def generating(prods: list[Production]) -> set[str]:
    """The nonterminals that derive some terminal string through ``prods`` (a fixpoint)."""
    gen: set[str] = set()
    changed = True
    while changed:
        changed = False
        for p in prods:
            if p.lhs not in gen and all(not isinstance(s, NT) or s.name in gen for s in p.rhs):
                gen.add(p.lhs)
                changed = True
    return gen


def analyze(grammar: Grammar) -> Analysis:
    """Reachability, generating symbols, the expected-children matrix and its radius."""
    prods = [p for p in grammar.productions if p.prob > 0]
    gen = generating(prods)
    by_lhs: dict[str, list] = {}
    for p in prods:
        by_lhs.setdefault(p.lhs, []).append(p)
    reach, todo = {grammar.start}, [grammar.start]
    while todo:
        for p in by_lhs.get(todo.pop(), []):
            for s in p.rhs:
                if isinstance(s, NT) and s.name not in reach:
                    reach.add(s.name)
                    todo.append(s.name)
    order = grammar.nonterminals
    useful = [a for a in order if a in reach and a in gen]
    idx = {a: i for i, a in enumerate(useful)}
    M = np.zeros((len(useful), len(useful)))
    t = np.zeros(len(useful))
    for p in prods:
        if p.lhs in idx and all(not isinstance(s, NT) or s.name in gen for s in p.rhs):
            for s in p.rhs:
                if isinstance(s, NT):
                    M[idx[p.lhs], idx[s.name]] += p.prob
                else:
                    t[idx[p.lhs]] += p.prob
    radius = float(np.max(np.abs(np.linalg.eigvals(M)))) if len(useful) else 0.0
    length = None
    if radius < RADIUS_LIMIT and grammar.start in idx:
        length = float(np.linalg.solve(np.eye(len(useful)) - M, t)[idx[grammar.start]])
    return Analysis([a for a in order if a in reach], [a for a in order if a in gen], useful, M, radius, length)


def check_pcfg(grammar: Grammar | str | Path, strict: bool = True) -> list[Finding]:
    """Findings about a grammar (a parsed :class:`Grammar` or a path), sorted by position.

    Errors: non-generating nonterminals (no finite string) and inconsistency (the
    expected-children matrix has spectral radius >= 1, so mass leaks to infinite trees).
    Warnings: unreachable nonterminals, duplicate rules. Info: a grammar without weights
    (uniform). With ``strict``, the first error raises as a :class:`SourceError`
    (non-generating ones before inconsistency, which they usually cause).
    Parse-level problems (syntax, undefined names, sums, ranges) raise while parsing."""
    grammar = as_grammar(grammar)
    a = analyze(grammar)
    first = {lhs: grammar.first_rule(lhs).lhs_span for lhs in grammar.nonterminals}
    out: list[Finding] = []
    if grammar.weights == "uniform":
        out.append(Finding("info", grammar.productions[0].lhs_span, "no probabilities are given: each nonterminal's alternatives are equally likely"))
    seen: dict[tuple, object] = {}
    for p in grammar.productions:
        key = (p.lhs, tuple((type(s).__name__, getattr(s, "name", getattr(s, "text", None))) for s in p.rhs))
        if key in seen:
            out.append(Finding("warning", p.span, f"duplicate rule {p.lhs} -> {' '.join(map(str, p.rhs))} (also at line {seen[key].span.line}); their probabilities add up"))
        else:
            seen[key] = p
    for lhs in grammar.nonterminals:
        if lhs not in a.reachable:
            out.append(Finding("warning", first[lhs], f"{lhs} is unreachable from the start symbol {grammar.start}"))
    dead = [lhs for lhs in grammar.nonterminals if lhs not in a.generating]
    for lhs in dead:
        out.append(Finding("error", first[lhs], f"{lhs} derives no finite string: each of its rules uses a nonterminal that never stops expanding (non-generating: {', '.join(dead)})"))
    if a.radius >= RADIUS_LIMIT:
        members, sub = _worst_component(a)
        at = min((first[m] for m in members), key=lambda s: (s.line, s.col))
        out.append(Finding(
            "error", at,
            f"the grammar is inconsistent: the expected-children matrix has spectral radius {a.radius:.6g} >= 1 "
            f"(through {', '.join(members)}: {sub:.6g}), so probability leaks to infinite trees; lower the recursive rules' probabilities",
        ))
    out.sort(key=lambda f: (f.span.line, f.span.col))
    if strict:
        errors = [f for f in out if f.severity == "error"]
        if errors:
            dead_first = [f for f in errors if "derives no finite string" in f.message]
            err = (dead_first or errors)[0]
            raise SourceError.at(err.span, err.message)
    return out


def _worst_component(a: Analysis) -> tuple[list[str], float]:
    g = nx.DiGraph()
    g.add_nodes_from(range(len(a.useful)))
    g.add_edges_from(zip(*np.nonzero(a.expected_children)))
    best, best_r = [], -1.0
    for comp in nx.strongly_connected_components(g):
        ix = sorted(comp)
        r = float(np.max(np.abs(np.linalg.eigvals(a.expected_children[np.ix_(ix, ix)]))))
        if r > best_r:
            best, best_r = ix, r
    return [a.useful[i] for i in best], best_r


__all__ = ["Analysis", "Finding", "RADIUS_LIMIT", "analyze", "check_pcfg", "generating"]
