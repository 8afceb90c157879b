"""Choosing among consistent regexes: a prior on size, a likelihood by the size principle.

Few examples are consistent with many regexes; the smallest one often generalises
badly (``.*5`` fits ``12.5`` and ``33.5`` as well as ``[0-9]{2}\\.5`` does). We rank
candidates by a posterior

    log P(r | examples) = sum over positives of log P(s | r)  -  beta * cost(r)

* ``cost(r)`` (:func:`prior_cost`) is a cost in the enumerator's units (AlphaRegex's
  per-node costs, classes cheaper than letters), with counted repetitions
  ``x{k}``/``x{k,}`` costing one operator instead of ``k`` copies;
* ``P(s | r)`` (:func:`log_likelihood`) is the probability that a uniform walk on the
  minimal DFA of ``r`` spells ``s``: from each state, every character of a finite
  universe (printable ASCII and the examples' characters) that leads to a live state,
  and stopping if the state is final, are equally likely. A regex with a smaller
  language gives its examples more probability — Tenenbaum's *size principle* — so
  ``.*`` is paid for once per character it matches.

:func:`refine` then climbs from a consistent regex through language-*shrinking* edits
(tighter classes, ``*`` -> ``+``/``{k}``/``{k,}``, ``.*`` -> ε, an alternative
dropped, ...) while every positive stays accepted and the posterior improves;
negatives stay rejected because the language only shrinks.
"""

from __future__ import annotations

import math
import string
from collections.abc import Iterable, Sequence

import numpy as np

from neurosym.synth import clock
from neurosym.errors import NeurosymError
from neurosym.synth import regex_ast as ra
from neurosym.synth.dfa_cache import compiled_dfa
from neurosym.synth.edits import replace_at, subtrees
from neurosym.synth.simplify import simplify

PRINTABLE = "".join(chr(i) for i in range(32, 127))
BETA = 0.3  # nats per unit of cost: a leaf (cost 20) is worth 6 nats of likelihood

VOWELS = frozenset("AEIOUaeiou")
KNOWN_CLASSES: list[frozenset] = [
    frozenset(string.digits),
    frozenset(string.ascii_lowercase),
    frozenset(string.ascii_uppercase),
    frozenset(string.ascii_letters),
    frozenset(string.ascii_letters + string.digits),
    VOWELS,
]
NODE_COSTS = {"L": 20, "|": 30, ".": 5, "*": 20, "?": 20, "+": 20, "{": 30}
RARE_CLASS_COST = 30  # vowels: a rarer concept than letters or digits
ANY_COST = 20  # `.`
ANY_STRING_COST = 20  # `.*` as one leaf


def universe(examples: Iterable[str]) -> str:
    """Printable ASCII plus every character of the examples, sorted."""
    return "".join(sorted(set(PRINTABLE) | {c for s in examples for c in s}))


# ---------------------------------------------------------------------- likelihood
def _live(trans: np.ndarray, final: np.ndarray) -> np.ndarray:
    """States from which a final state is reachable, (Q,) bool."""
    live = np.asarray(final, dtype=bool).copy()
    while True:
        nxt = np.where(trans >= 0, live[np.maximum(trans, 0)], False).any(axis=1) | live
        if (nxt == live).all():
            return live
        live = nxt


def branching(dfa, chars: str) -> np.ndarray:
    """Per state, the number of choices of a uniform walk: characters of ``chars`` that
    lead to a live state, plus one for stopping in a final state. (Q,) float."""
    trans = np.asarray(dfa.trans)
    final = np.asarray(dfa.final, dtype=bool)
    counts = np.bincount(np.asarray(dfa.partition.classify(chars), dtype=np.int64), minlength=trans.shape[1])
    live = _live(trans, final)
    ok = (trans >= 0) & live[np.maximum(trans, 0)]
    return (ok * counts[None, :]).sum(axis=1).astype(float) + final


def log_likelihood(dfa, strings: Sequence[str], chars: str) -> np.ndarray:
    """``log P(s | r)`` in nats for each string under the uniform walk on ``dfa``
    (``-inf`` if ``dfa`` rejects it). (N,) float."""
    trans = np.asarray(dfa.trans)
    final = np.asarray(dfa.final, dtype=bool)
    logb = np.log(np.maximum(branching(dfa, chars), 1.0))
    out = np.empty(len(strings))
    for i, s in enumerate(strings):
        q, total = 0, 0.0
        for k in dfa.partition.classify(s):
            total -= logb[q]
            q = int(trans[q, k])
            if q < 0:
                break
        out[i] = total - logb[q] if q >= 0 and final[q] else -math.inf
    return out


# ---------------------------------------------------------------------- prior
def _chars_cost(chars: frozenset) -> float:
    if chars in KNOWN_CLASSES:
        return RARE_CLASS_COST if chars == VOWELS else NODE_COSTS["L"]
    if len(chars) == 1:
        c = next(iter(chars))
        return NODE_COSTS["L"] * 1.5 if c.isalnum() else NODE_COSTS["L"]
    # a union of known classes and characters, as the enumerator would build it
    rest, parts = set(chars), 0
    cost = 0.0
    for cls in sorted(KNOWN_CLASSES, key=len, reverse=True):
        if cls <= rest:
            rest -= cls
            cost += NODE_COSTS["L"]
            parts += 1
    for c in rest:
        cost += _chars_cost(frozenset(c))
        parts += 1
    return cost + NODE_COSTS["|"] * (parts - 1)


def prior_cost(r: ra.Node) -> float:
    """The prior's cost of ``r``, in the enumerator's units (a class leaf 20, ``|`` 30,
    concatenation 5, ``*``/``+``/``?`` 20, a counted repetition 30; unlike the
    enumerator, ``.`` costs as much as a class and vowels more than other classes)."""
    t = type(r)
    if t is ra.Chars:
        return _chars_cost(r.chars)
    if t is ra.AnyChar:
        return ANY_COST
    if t in (ra.Eps, ra.Empty, ra.Hole):
        return NODE_COSTS["L"]
    if t is ra.Star and r.child == ra.ANY:
        return ANY_STRING_COST
    if t is ra.Star:
        return NODE_COSTS["*"] + prior_cost(r.child)
    if t is ra.Plus:
        return NODE_COSTS["+"] + prior_cost(r.child)
    if t is ra.Opt:
        return NODE_COSTS["?"] + prior_cost(r.child)
    if t is ra.Alt:
        return NODE_COSTS["|"] * (len(r.items) - 1) + sum(prior_cost(x) for x in r.items)
    groups = ra.runs(r.items, min_run=2)
    total = NODE_COSTS["."] * (len(groups) - 1)
    for x, k, unbounded in groups:
        c = prior_cost(x)
        if k == 1:
            total += c
        else:
            plain = k * c + NODE_COSTS["."] * (k - 1) + (NODE_COSTS["+"] if unbounded else 0)
            total += min(plain, c + NODE_COSTS["{"] + (NODE_COSTS["."] if unbounded else 0))
    return float(total)


# ---------------------------------------------------------------------- posterior
class Posterior:
    """``log P(r | positives)`` up to a constant, cached per canonical regex."""

    def __init__(self, positives: Sequence[str], negatives: Sequence[str] = (), beta: float = BETA):
        self.positives = list(positives)
        self.negatives = list(negatives)
        self.chars = universe(list(positives) + list(negatives))
        self.beta = beta
        self.cache: dict[ra.Node, float] = {}

    def __call__(self, r: ra.Node) -> float:
        r = simplify(r)
        s = self.cache.get(r)
        if s is None:
            try:
                dfa = compiled_dfa(r)
            except NeurosymError:
                s = -math.inf
            else:
                if any(dfa.accepts(x) for x in self.negatives):
                    s = -math.inf
                else:
                    s = float(log_likelihood(dfa, self.positives, self.chars).sum()) - self.beta * prior_cost(r)
            self.cache[r] = s
        return s


def _tighter_leaves(node: ra.Node, chars_seen: frozenset) -> list[ra.Node]:
    """Smaller character sets to put in place of a ``.`` or class leaf."""
    have = None if type(node) is ra.AnyChar else node.chars
    out: list[ra.Node] = []
    for cls in KNOWN_CLASSES:
        if have is None or cls < have:
            out.append(ra.Chars(cls))
    for c in sorted(chars_seen):
        if have is None or (c in have and len(have) > 1):
            out.append(ra.Chars(c))
    return out


def shrinking_edits(r: ra.Node, chars_seen: frozenset, max_count: int = 8) -> list[ra.Node]:
    """Single edits of ``r`` whose language is a subset of ``r``'s, simplified."""
    out: dict[ra.Node, None] = {}
    base = simplify(r)

    def add(x: ra.Node) -> None:
        x = simplify(x)
        if x != base:
            out.setdefault(x, None)

    for path, node in subtrees(r):
        t = type(node)
        if t in (ra.Chars, ra.AnyChar):
            for leaf in _tighter_leaves(node, chars_seen):
                add(replace_at(r, path, leaf))
        elif t is ra.Star:
            add(replace_at(r, path, ra.EPS))
            add(replace_at(r, path, ra.Plus(node.child)))
            add(replace_at(r, path, ra.Opt(node.child)))
            if node.child == ra.ANY:
                for cls in KNOWN_CLASSES:
                    add(replace_at(r, path, ra.Star(ra.Chars(cls))))
        elif t is ra.Plus:
            add(replace_at(r, path, node.child))
        elif t is ra.Opt:
            add(replace_at(r, path, node.child))
            add(replace_at(r, path, ra.EPS))
        elif t is ra.Alt:
            for i in range(len(node.items)):
                add(replace_at(r, path, ra.alt(*(node.items[:i] + node.items[i + 1 :]))))
        if t in (ra.Star, ra.Plus):
            lo = 0 if t is ra.Star else 1
            for k in range(max(2, lo), max_count + 1):
                add(replace_at(r, path, ra.repeat(node.child, k, k)))
                add(replace_at(r, path, ra.repeat(node.child, k, None)))
    return list(out)


def refine(
    r: ra.Node,
    positives: Sequence[str],
    posterior: Posterior,
    t_end: float | None = None,
    max_steps: int = 50,
) -> ra.Node:
    """Hill-climb from ``r`` by :func:`shrinking_edits` that keep every positive accepted,
    to a local maximum of ``posterior``."""
    seen = frozenset(c for s in positives for c in s)
    best, best_score = simplify(r), posterior(r)
    for _ in range(max_steps):
        improved = False
        for x in shrinking_edits(best, seen):
            if t_end is not None and clock.now() > t_end:
                return best
            s = posterior(x)
            if s > best_score + 1e-9:
                best, best_score, improved = x, s, True
        if not improved:
            break
    return best


def choose(
    candidates: Sequence[ra.Node],
    positives: Sequence[str],
    negatives: Sequence[str] = (),
    beta: float = BETA,
    t_end: float | None = None,
) -> ra.Node:
    """The maximum-posterior regex among ``candidates`` (all consistent) and their
    refinements. Ties go to the earlier candidate."""
    post = Posterior(positives, negatives, beta)
    best, best_score = None, -math.inf
    for c in candidates:
        x = refine(c, positives, post, t_end)
        s = post(x)
        if best is None or s > best_score + 1e-9:
            best, best_score = x, s
        if t_end is not None and clock.now() > t_end:
            break
    return best if best is not None else simplify(candidates[0])


__all__ = [
    "BETA",
    "Posterior",
    "branching",
    "choose",
    "log_likelihood",
    "prior_cost",
    "refine",
    "shrinking_edits",
    "universe",
]
