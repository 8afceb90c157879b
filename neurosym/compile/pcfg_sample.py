"""The prior sampler of a PCFG, written once (:func:`expand`: every nonterminal of every
sentential form rewritten at once, top-down): for the grammar as written, derivation
trees with regex terminals drawn from their DFAs (:func:`sample_trees`,
:func:`sample_sentences`); for compiled rule tensors, token ids
(:func:`sample_token_ids`, behind ``RuleTensors.sample``).

The posterior sampler, trees of a given sentence, is
:func:`neurosym.layers.inside.sample_parses`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from neurosym.compile.regex import Limits, pattern_dfa, rule_dfa
from neurosym.dsl.pcfg import NT, Grammar, Lexeme, as_grammar
from neurosym.errors import CompileError
from neurosym.semiring import LOG_ZERO


class CompiledRules(Protocol):
    """What :func:`sample_token_ids` reads of a :class:`~neurosym.compile.pcfg.RuleTensors`."""

    root: torch.Tensor
    binary: torch.Tensor
    emit: torch.Tensor
    root_term: torch.Tensor
    empty: torch.Tensor

    @property
    def N(self) -> int: ...

    @property
    def T(self) -> int: ...


@dataclass
class Tree:
    """A derivation: ``label`` and children (trees or leaf strings). Prints bracketed."""

    label: str
    children: list

    def leaves(self) -> list[str]:
        out: list[str] = []
        stack: list = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, Tree):
                stack.extend(reversed(node.children))
            else:
                out.append(node)
        return out

    def __str__(self) -> str:
        parts = [str(c) if isinstance(c, Tree) else _leaf(c) for c in self.children]
        return f"({' '.join([self.label, *parts])})"


def _leaf(s: str) -> str:
    return s if s and not any(c.isspace() or c in "()" for c in s) else repr(s)


# ---------------------------------------------------------------------- the sampler
@dataclass
class RuleTable:
    """Rules as arrays, for :func:`expand`. Symbols ``0..n_nt-1`` are nonterminals; any
    other symbol is a leaf. Rule ``r`` rewrites ``lhs[r]`` (sorted) to
    ``rhs[ptr[r]:ptr[r + 1]]`` with weight ``prob[r]`` (normalised per nonterminal).
    ``min_tokens`` (symbols,): a lower bound on the tokens each symbol derives (all 1 when
    None), by which a sentential form past ``max_len`` is dropped early."""

    n_nt: int
    lhs: np.ndarray
    prob: np.ndarray
    ptr: np.ndarray
    rhs: np.ndarray
    min_tokens: np.ndarray | None = None


@dataclass
class Derivations:
    """What :func:`expand` returns. ``symbol`` (F,) the leaves of every kept form in
    order, ``owner`` (F,) the sentence each belongs to (sorted); ``keep`` (m,) the
    sentences that fit ``max_len``. With ``trees``: ``node_symbol`` and ``parent`` (nodes,)
    for every node drawn (roots are nodes ``0..m-1``, parent -1)."""

    symbol: np.ndarray
    owner: np.ndarray
    keep: np.ndarray
    node_symbol: np.ndarray | None = None
    parent: np.ndarray | None = None


def expand(table: RuleTable, roots: np.ndarray, max_len: int, rng: np.random.Generator, owner: np.ndarray | None = None,
           count: int | None = None, trees: bool = False) -> Derivations:
    """Rewrite every nonterminal of every sentential form at once until only leaves are
    left: one rule draw per nonterminal and step, vectorised over the forms (a flat
    (symbols,) array). A form whose ``min_tokens`` exceed ``max_len`` is dropped (its
    sentence rejected), as is one still unfinished after ``100 * max_len + 1000`` steps.

    ``roots`` (k,) start symbols of sentences ``owner`` (default ``0..k-1``) among
    ``count`` (default k); ``trees`` records every node's parent."""
    k = len(roots)
    owner = np.arange(k) if owner is None else np.asarray(owner, dtype=np.int64)
    m = k if count is None else count
    sym = np.asarray(roots, dtype=np.int64)
    weight = table.min_tokens
    cdf = _block_cdf(table.lhs, table.prob)
    length_of = np.diff(table.ptr)
    keep = np.zeros(m, dtype=bool)
    keep[owner] = True
    node = np.arange(k) if trees else None
    node_symbol, parent = [sym.copy()], [np.full(k, -1, dtype=np.int64)]
    next_id = k
    for _step in range(100 * max_len + 1000):
        is_nt = sym < table.n_nt
        if not is_nt.any():
            break
        r = _draw(cdf, sym[is_nt], rng)
        counts = np.ones(len(sym), dtype=np.int64)
        counts[is_nt] = length_of[r]
        starts = np.cumsum(counts) - counts
        new = np.empty(int(counts.sum()), dtype=np.int64)
        new[starts[~is_nt]] = sym[~is_nt]
        kid_pos = np.repeat(starts[is_nt], length_of[r]) + _ranks(length_of[r])
        new[kid_pos] = table.rhs[np.repeat(table.ptr[r], length_of[r]) + _ranks(length_of[r])]
        if trees:
            new_node = np.empty(len(new), dtype=np.int64)
            new_node[starts[~is_nt]] = node[~is_nt]
            ids = next_id + np.arange(len(kid_pos))
            next_id += len(kid_pos)
            new_node[kid_pos] = ids
            node_symbol.append(new[kid_pos])
            parent.append(np.repeat(node[is_nt], length_of[r]))
            node = new_node
        owner = np.repeat(owner, counts)
        sym = new
        length = np.bincount(owner, weights=None if weight is None else weight[sym], minlength=m)
        ok = length[owner] <= max_len
        sym, owner = sym[ok], owner[ok]
        if trees:
            node = node[ok]
        keep &= ~(length > max_len)
    else:
        unfinished = np.zeros(m, dtype=bool)
        unfinished[owner[sym < table.n_nt]] = True
        keep &= ~unfinished
        ok = keep[owner]
        sym, owner = sym[ok], owner[ok]
    if not trees:
        return Derivations(sym, owner, keep)
    return Derivations(sym, owner, keep, np.concatenate(node_symbol), np.concatenate(parent))


def _ranks(lengths: np.ndarray) -> np.ndarray:
    """``0..l-1`` for each ``l`` in ``lengths``, concatenated."""
    total = int(lengths.sum())
    return np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _block_cdf(rows: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Cumulative probabilities of entries grouped by (sorted) ``rows``, shifted so row r
    occupies ``(r, r + 1]``: searching ``r + u`` draws from row r."""
    if len(p) == 0:
        return np.zeros(0)
    totals = np.bincount(rows, weights=p)
    csum = np.cumsum(p)
    before = np.concatenate([[0.0], np.cumsum(totals)])[rows]
    cdf = (csum - before) / totals[rows] + rows
    last = np.r_[rows[1:] != rows[:-1], True]
    cdf[last] = rows[last] + 1.0
    return cdf


def _draw(cdf: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One entry index per row in ``rows``, drawn from the row's distribution."""
    x = np.minimum(rows + rng.random(len(rows)), np.nextafter(rows + 1.0, 0))
    return np.searchsorted(cdf, x, side="right")


def sample_trees(grammar: Grammar | str | Path, n: int, seed: int = 0, max_len: int = 50, limits: Limits = Limits()) -> list[Tree]:
    """``n`` derivation trees of the grammar itself (regex terminals sample a string of
    their pattern), conditioned on at most ``max_len`` tokens (longer ones are redrawn).
    Drawn by :func:`expand`, the sampler :meth:`RuleTensors.sample` uses too."""
    grammar = as_grammar(grammar)
    rng = np.random.default_rng(seed)
    names = list(grammar.by_lhs)
    nt_id = {name: i for i, name in enumerate(names)}
    terminals: list = []
    t_id: dict = {}
    lhs, prob, rhs, ptr = [], [], [], [0]
    for a, name in enumerate(names):
        for p in grammar.by_lhs[name]:
            if p.prob <= 0:
                continue
            for sym in p.rhs:
                if isinstance(sym, NT):
                    rhs.append(nt_id[sym.name])
                else:
                    if sym.terminal not in t_id:
                        t_id[sym.terminal] = len(names) + len(terminals)
                        terminals.append(sym)
                    rhs.append(t_id[sym.terminal])
            lhs.append(a)
            prob.append(p.prob)
            ptr.append(len(rhs))
    table = RuleTable(len(names), np.array(lhs, dtype=np.int64), np.array(prob), np.array(ptr, dtype=np.int64), np.array(rhs, dtype=np.int64))
    table.min_tokens = _min_tokens(table, len(names) + len(terminals))
    dfas: dict[str, object] = {}
    out: list[Tree] = []
    for _round in range(1000):
        need = n - len(out)
        if need <= 0:
            break
        m = max(need, 16) * 2
        d = expand(table, np.full(m, nt_id[grammar.start], dtype=np.int64), max_len, rng, trees=True)
        children: dict[int, list[int]] = {}
        for child, parent in enumerate(d.parent.tolist()):
            if parent >= 0:
                children.setdefault(parent, []).append(child)
        for s in np.nonzero(d.keep)[0].tolist():
            out.append(_tree(int(s), d.node_symbol, children, names, terminals, grammar, dfas, rng, limits))
    if len(out) < n:
        raise CompileError(f"could not sample {n} sentences of at most {max_len} tokens; raise max_len")
    return out[:n]


def sample_sentences(grammar: Grammar | str | Path, n: int, seed: int = 0, max_len: int = 50, limits: Limits = Limits()) -> list[list[str]]:
    """``n`` sentences (lists of token strings) from the grammar itself; see :func:`sample_trees`."""
    return [t.leaves() for t in sample_trees(grammar, n, seed, max_len, limits)]


def _tree(node: int, node_symbol, children, names, terminals, grammar: Grammar, dfas, rng, limits: Limits) -> Tree:
    """The tree below ``node`` (a derivation root), regex terminals drawn from their DFAs."""
    root = Tree(names[node_symbol[node]], [])
    stack = [(node, root)]
    while stack:
        at, tree = stack.pop()
        for child in children.get(at, []):
            sym = int(node_symbol[child])
            if sym < len(names):
                sub = Tree(names[sym], [])
                tree.children.append(sub)
                stack.append((child, sub))
                continue
            t = terminals[sym - len(names)]
            if t.terminal.kind == "literal":
                tree.children.append(t.text)
                continue
            if t.terminal.kind == "lexeme":
                tree.children.append(sample_lexeme(t, dfas, rng, limits))
                continue
            if t.name not in dfas:
                imp = grammar.imports[t.name]
                dfas[t.name] = rule_dfa(imp.bank, imp.rule, limits)
            words = dfas[t.name].sample(1, max_len=24, seed=int(rng.integers(2**31)))
            if not words:
                raise CompileError(f"{t.span}: regex terminal {t.name} has no string of at most 24 characters to sample")
            tree.children.append(Tree(t.name, [words[0]]))
    return root


LEXEME_MAX_CHARS = 24  # the longest string a sampled regex terminal may draw
LEXEME_STOP = 0.3  # the chance a sampled regex terminal stops at each accepting state


def sample_lexeme(t: Lexeme, dfas: dict, rng: np.random.Generator, limits: Limits = Limits()) -> str:
    """One string of a ``/regex/`` terminal's language, by a random walk over its minimal
    character DFA (:meth:`CharDFA.sample`): at an accepting state the walk stops with
    probability 0.3; otherwise it takes, uniformly, one of the character classes from which
    an accepting state is still reachable within 24 characters (the shortest string's
    length + 24 when every string is longer), and a character uniformly from that class.
    Every drawn string is in the language (not a distribution the grammar defines: a
    lexeme carries no probability inside it)."""
    key = ("lexeme", t.source)
    if key not in dfas:
        dfas[key] = pattern_dfa(t.source, limits=limits, span=t.span.shifted(1))
    seed = int(rng.integers(2**31))
    words = dfas[key].sample(1, max_len=LEXEME_MAX_CHARS, seed=seed, stop_prob=LEXEME_STOP)
    if not words:  # every string is longer (a uuid, a date-time): walks of up to the shortest length + 24
        shortest = dfas[key].shortest_length()
        if shortest is not None:
            words = dfas[key].sample(1, max_len=shortest + LEXEME_MAX_CHARS, seed=seed, stop_prob=LEXEME_STOP)
    if not words:
        raise CompileError(f"{t.span}: regex terminal {t} has no string to sample")
    return words[0]


def _min_tokens(table: RuleTable, n_symbols: int) -> np.ndarray:
    """(symbols,) the fewest tokens each symbol derives (terminals 1; a nonterminal with no
    finite derivation a number past every cap)."""
    big = float(2**40)
    out = np.full(n_symbols, 1.0)
    out[: table.n_nt] = big
    length = np.diff(table.ptr)
    owner = np.repeat(np.arange(len(length)), length)
    for _ in range(table.n_nt + 1):
        per_rule = np.bincount(owner, weights=out[table.rhs], minlength=len(length)) if len(owner) else np.zeros(len(length))
        best = np.full(table.n_nt, big)
        np.minimum.at(best, table.lhs, np.minimum(per_rule, big))
        if np.array_equal(best, out[: table.n_nt]):
            break
        out[: table.n_nt] = best
    return out


# ---------------------------------------------------------------------- compiled rule tensors
def sample_token_ids(rules: CompiledRules, n: int, seed: int = 0, max_len: int = 64) -> list[list[int]]:
    """``n`` sentences of compiled rule tensors as lists of token ids, conditioned on at
    most ``max_len`` tokens (:meth:`RuleTensors.sample`): the start weights pick the empty
    sentence, a preterminal or a nonterminal; :func:`expand` rewrites the nonterminals;
    each preterminal then emits a token."""
    rng = np.random.default_rng(seed)
    N, T = rules.N, rules.T
    a_parts, b_parts, c_parts, p_parts = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
    for a in range(N):  # row by row: never a dense float64 copy of ``binary``
        row = rules.binary[a].detach()
        bc = torch.nonzero(row > LOG_ZERO)
        a_parts.append(np.full(len(bc), a, dtype=np.int64))
        b_parts.append(bc[:, 0].cpu().numpy())
        c_parts.append(bc[:, 1].cpu().numpy())
        p_parts.append(row[bc[:, 0], bc[:, 1]].double().exp().cpu().numpy())
    a, b, c, p = (np.concatenate(x) for x in (a_parts, b_parts, c_parts, p_parts))
    table = RuleTable(N, a, p, np.arange(len(a) + 1, dtype=np.int64) * 2, np.stack([b, c], 1).reshape(-1))
    E = rules.emit.detach().double().exp().cpu().numpy()
    t, v = np.nonzero(E)
    ecdf = _block_cdf(t, E[t, v])
    scdf = np.cumsum(np.concatenate([[float(rules.empty.exp())], rules.root_term.detach().double().exp().cpu().numpy(), rules.root.detach().double().exp().cpu().numpy()]))
    out: list[list[int]] = []
    for _round in range(1000):
        need = n - len(out)
        if need <= 0:
            break
        m = max(need, 16) * 2
        first = np.minimum(np.searchsorted(scdf, rng.random(m) * scdf[-1], side="right"), len(scdf) - 1)
        keep = first > 0  # the empty sentence has no symbols
        sym = np.where(first <= T, N + first - 1, first - 1 - T)[keep]
        d = expand(table, sym, max_len, rng, owner=np.nonzero(keep)[0], count=m)
        keep &= d.keep | (first == 0)
        tokens = v[_draw(ecdf, d.symbol - N, rng)] if len(d.symbol) else np.zeros(0, dtype=np.int64)
        bounds = np.searchsorted(d.owner, np.arange(m + 1))
        for s in range(m):
            if first[s] == 0:
                out.append([])
            elif keep[s]:
                out.append(tokens[bounds[s] : bounds[s + 1]].tolist())
    if len(out) < n:
        raise CompileError(f"could not sample {n} sentences of at most {max_len} tokens; raise max_len")
    return out[:n]


__all__ = [
    "CompiledRules", "Derivations", "LEXEME_MAX_CHARS", "LEXEME_STOP", "RuleTable", "Tree", "expand", "sample_lexeme", "sample_sentences",
    "sample_token_ids", "sample_trees",
]
