"""Exact next-token probabilities of a grammar over strings, for any tokenizer.

A :class:`~neurosym.compile.spelling.SpelledGrammar` is an ``.fsg`` or ``.pcfg`` read as
a language of strings (its terminals spelled out and joined by its separator policy).
For a text ``x`` generated so far and every token ``t`` of any vocabulary (byte-level
BPE with leading-space tokens, characters, words), :class:`StringPrefixModel` gives

    P(t | x)   = P(x + t is a prefix of a sentence) / P(x is a prefix)
    P(end | x) = P(x is a sentence)                  / P(x is a prefix)

exactly (float64) where terminals are literal words. ``P(x is a prefix)`` sums over the
ways ``x`` splits into complete terminals ``w1 .. wk`` followed by a partial one ``p`` (a
proper prefix of the next terminal's surface ``glue + spell(w)``; ambiguity allowed):

    P_prefix(w1 .. wk) * ( sum_{w : p proper prefix of surface(w)} P(w | w1 .. wk)  +  [p = ""] P(end | w1 .. wk) )

Each such split is a *hypothesis* ``(terminal context, spelling context, word-trie node
of p)`` with weight ``P_prefix(w1 .. wk) / P(x is a prefix)``; the inner sum is one
subtraction of a prefix-sum array over the trie's sorted words (a node's words are a
contiguous range). The terminal-level model is a :class:`TerminalModel`: an FSG's
deterministic state (:class:`FSGTerminals`) or a PCFG's prefix chart
(:class:`PCFGTerminals`, :class:`~neurosym.layers.prefix.PrefixState` at float64).

Speed: which tokens can follow a hypothesis depends on its trie node alone, not on its
context, so for every pair (word-trie node, token-trie node) the walk down both tries
is computed once and kept (:class:`Walk`): the tokens that end inside the current
terminal with the trie node they reach (scored by one gather of the prefix sums), and
the *crossings*: a terminal completed inside a token with bytes left, where the walk
goes on under the advanced context from the next trie's root. Only crossings reach the
terminal model at run time (one ``advance`` per terminal and step, cached).
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from neurosym.compile.pcfg import RuleTensors
from neurosym.compile.spelling import BARE, SpelledGrammar
from neurosym.compile.token_index import vocab_trie
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.decode.processor import LogitsProcessor
from neurosym.errors import ConfigError, NeurosymError
from neurosym.layers.earley import EarleyRecognizer
from neurosym.layers.prefix import PrefixGrammar, PrefixState
from neurosym.semiring import LOG_ZERO
from neurosym.vocab import Vocab


# ---------------------------------------------------------------------- terminal-level models
class TerminalModel(Protocol):
    """A distribution over sentences of terminals, read left to right. A *support model*
    (:func:`support_model`, for masks) gives 1 where the distribution is positive and 0
    elsewhere instead of probabilities."""

    def start(self) -> Hashable:
        """The context of the empty prefix."""

    def distribution(self, context: Hashable) -> tuple[np.ndarray, float]:
        """``(P(w | context) (T,) float64, P(end | context))``; they sum to 1."""

    def advance(self, context: Hashable, word: int) -> Hashable:
        """The context after one more terminal ``word`` (of probability > 0)."""

    def retain(self, contexts: set) -> None:
        """Forget every cached context not in ``contexts`` (called once per step)."""


class FSGTerminals:
    """An FSG's terminal-level model: the context is the deterministic automaton's state."""

    def __init__(self, automaton: WeightedAutomaton):
        self.probs = np.exp(automaton.log_probs.detach().cpu().double().numpy())  # (Q, T)
        self.end = np.exp(automaton.final_log_probs.detach().cpu().double().numpy())  # (Q,)
        self.delta = automaton.delta.detach().cpu().numpy().astype(np.int64)  # (Q, T)
        self.start_state = int(automaton.start)

    def start(self) -> int:
        return self.start_state

    def distribution(self, context: int) -> tuple[np.ndarray, float]:
        return self.probs[context], float(self.end[context])

    def advance(self, context: int, word: int) -> int:
        return int(self.delta[context, word])

    def retain(self, contexts: set) -> None:
        """States are kept (a table), nothing to forget."""


class PCFGTerminals:
    """A PCFG's terminal-level model: the context is the terminal sequence, its prefix
    chart a :class:`PrefixState` (one row, float64), extended by cloning."""

    def __init__(self, rules: RuleTensors, grammar: PrefixGrammar | None = None):
        """``grammar``: the rules' float64 :class:`PrefixGrammar` on the CPU when one is
        at hand (a guide's matchers share one), else built here."""
        self.grammar = grammar if grammar is not None else PrefixGrammar.from_rules(rules, torch.float64).to("cpu")
        self.states: dict[tuple, PrefixState] = {(): PrefixState(self.grammar, 1)}
        self.dists: dict[tuple, tuple[np.ndarray, float]] = {}

    def start(self) -> tuple:
        return ()

    def distribution(self, context: tuple) -> tuple[np.ndarray, float]:
        got = self.dists.get(context)
        if got is None:
            nxt, end = self.states[context].next_token_log_probs()
            got = self.dists[context] = (np.exp(nxt[0].numpy()), float(np.exp(end[0].item())))
        return got

    def advance(self, context: tuple, word: int) -> tuple:
        """The context one terminal on (one chart column, on a copy of the context's chart;
        extending every viable terminal at once as one batch measured slower)."""
        key = context + (int(word),)
        if key not in self.states:
            state = self.states[context].clone()
            state.append(torch.tensor([int(word)]))
            self.states[key] = state
        return key

    def retain(self, contexts: set) -> None:
        """Keep the live contexts and their one-terminal extensions (the crossings of the
        next step read them again while a hypothesis stays inside a word)."""
        keep = contexts | {()}
        self.states = {k: v for k, v in self.states.items() if k in keep or k[:-1] in keep}
        self.dists = {k: v for k, v in self.dists.items() if k in self.states}


def terminal_model(terminals: WeightedAutomaton | RuleTensors) -> TerminalModel:
    """The terminal-level model of a compiled ``.fsg`` or ``.pcfg``."""
    if isinstance(terminals, WeightedAutomaton):
        return FSGTerminals(terminals)
    if isinstance(terminals, RuleTensors):
        return PCFGTerminals(terminals)
    raise NeurosymError(f"a grammar over strings needs a compiled .fsg or .pcfg, got {type(terminals).__name__}")


def support_model(terminals: WeightedAutomaton | RuleTensors) -> TerminalModel:
    """A terminal-level model for masks alone: its distribution need only be positive
    exactly where the grammar's is. A ``.pcfg`` gets the boolean Earley recogniser
    (:class:`~neurosym.layers.earley.EarleyRecognizer`: 0/1 support, no chart); an
    ``.fsg`` its table model, already a lookup."""
    if isinstance(terminals, RuleTensors):
        return EarleyRecognizer(terminals)
    return terminal_model(terminals)


# ---------------------------------------------------------------------- longest-match writing
LEXEME_ROWS_LIMIT = 1024  # (V,) rows of lexeme_steps kept per model (128 KB each over a 32k vocabulary)
CACHE_LIMIT = 100_000  # entries of a model's per-context caches kept for interned contexts (Earley columns, FSG states)
LONGER_ROUNDING = 1e-12  # a difference below this share of the token's mass is rounding: 0


def _longer_tokens(trie, n: int):
    """(V, V) sparse 0/1 matrix ``L[t', t] = 1`` where token ``t'`` extends token ``t`` with
    no token in between (the nearest token-ending descendants of ``t``'s trie node). A
    surface spelled by several ids counts once, by its lowest id."""
    end_start, end_token = trie.end_start, trie.end_token
    has = np.diff(end_start) > 0
    has[0] = False  # empty surfaces (none are read)
    rep = np.full(n, -1, dtype=np.int64)
    nodes = np.nonzero(has)[0]
    if len(nodes):
        rep[nodes] = np.minimum.reduceat(end_token, end_start[nodes])  # each node's ids are one CSR run
    parents = _parents(trie.child_start, n)
    anc = np.full(n, -1, dtype=np.int64)  # nearest strict ancestor node that ends a token
    for lo, hi in zip(trie.level_start[1:-1].tolist(), trie.level_start[2:].tolist()):  # one level at a time, top down
        p = parents[lo:hi]
        anc[lo:hi] = np.where(has[p], p, anc[p])
    rows = np.nonzero(has & (anc >= 0))[0]
    V = len(trie.special)
    return sp.csr_matrix((np.ones(len(rows)), (rep[rows], rep[anc[rows]])), shape=(V, V))


def _parents(child_start: np.ndarray, n: int) -> np.ndarray:
    """(n,) each node's parent in a CSR trie (-1 at the root)."""
    return np.concatenate([[-1], np.repeat(np.arange(n), np.diff(child_start))])[:n]


def _preorder(trie, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(n,) pre-order numbers of a CSR trie's nodes (children in order) and (n,) the end
    of each subtree's numbers: node z's subtree is ``pre in [pre[z], post[z])``. One
    vectorised step per level."""
    child_start, levels = trie.child_start, list(zip(trie.level_start[:-1].tolist(), trie.level_start[1:].tolist()))
    parents = _parents(child_start, n)
    size = np.ones(n, dtype=np.int64)
    for lo, hi in reversed(levels[1:]):  # subtree sizes, bottom up
        np.add.at(size, parents[lo:hi], size[lo:hi])
    pre = np.zeros(n, dtype=np.int64)
    for lo, hi in levels[1:]:  # a child starts after its parent and its earlier siblings' subtrees
        p = parents[lo:hi]
        before = np.cumsum(size[lo:hi]) - size[lo:hi]  # sizes of the earlier nodes of the level
        first = child_start[p] - lo  # each parent's first child, within the level
        pre[lo:hi] = pre[p] + 1 + before - before[first]
    return pre, pre + size


def _duplicates(trie) -> np.ndarray:
    """Token ids whose surface a lower id also spells (not the lowest at their trie node)."""
    out = []
    for u in np.nonzero(np.diff(trie.end_start) > 1)[0].tolist():
        ids = np.sort(trie.end_token[trie.end_start[u] : trie.end_start[u + 1]])
        out.extend(ids[1:].tolist())
    return np.array(out, dtype=np.int64)


# ---------------------------------------------------------------------- the joint walk
@dataclass(frozen=True)
class Walk:
    """Tokens read from a word-trie node and a token-trie node on, within one terminal.

    ``tokens`` (n,) with ``lo``, ``hi`` (n,): each token's bytes stay in the word trie and
    end at a node whose words are ``order[lo:hi]``. ``crossings``: ``(m, v)`` pairs where
    a terminal ends at word-trie node ``m`` while the token trie is at ``v`` with longer
    tokens below (they go on from the next terminal's trie root).
    """

    tokens: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    crossings: tuple[tuple[int, int], ...]

    @property
    def empty(self) -> bool:
        return len(self.tokens) == 0 and not self.crossings


_VOCAB_TABLES: dict[int, tuple[weakref.ref, dict]] = {}


def vocab_tables(vocab: Vocab) -> dict:
    """The token-trie tables a :class:`StringPrefixModel` reads, for one vocabulary: its
    trie, each node's children, the tokens' units, the longer-token relation and the trie's
    pre-order numbering. Built once per vocabulary object (what XGrammar keeps in its
    ``TokenizerInfo``), so a second grammar over the same tokenizer builds none of them."""
    hit = _VOCAB_TABLES.get(id(vocab))
    if hit is not None and hit[0]() is vocab:
        return hit[1]
    V = len(vocab)
    trie = vocab_trie(vocab)
    n = trie.num_nodes
    parents = np.repeat(np.arange(n), np.diff(trie.child_start))  # node i >= 1 has parent parents[i - 1]
    token_more_np = np.diff(trie.child_start) > 0
    token_node = np.zeros(V, dtype=np.int64)
    token_node[trie.end_token] = np.repeat(np.arange(n), np.diff(trie.end_start))
    dfs_pre, dfs_post = _preorder(trie, n)
    as_bytes = vocab.kind == "bytes"
    longer = _longer_tokens(trie, n)
    tables = {
        "V": V, "token_trie": trie, "token_ends": (trie.end_start, trie.end_token),
        "token_child": dict(zip(zip(parents.tolist(), trie.symbol[1:].tolist()), range(1, n))),
        "token_more_np": token_more_np, "token_more": token_more_np.tolist(),  # longer tokens below a node
        "units": [() if s is None else (tuple(s) if as_bytes else tuple(map(ord, s))) for s in vocab.surfaces],
        "longer": longer, "longer_csc": longer.tocsc(),
        "token_has_end": (np.diff(trie.end_start) > 0).tolist(), "token_node": token_node,
        "token_depth": np.repeat(np.arange(len(trie.level_start) - 1), np.diff(trie.level_start))[:n],
        "dfs_pre": dfs_pre, "dfs_post": dfs_post, "token_pre": np.where(trie.special, -1, dfs_pre[token_node]),
        "longer_dups": _duplicates(trie),
    }
    _VOCAB_TABLES[id(vocab)] = (weakref.ref(vocab, lambda _, key=id(vocab), kept=_VOCAB_TABLES: kept.pop(key, None)), tables)
    return tables


Hyp = tuple[Hashable, int, "int | tuple[int, int]"]  # (terminal context, spelling context, word-trie node or (lexeme, DFA state))


class StringPrefixModel:
    """Next-token and end probabilities of a :class:`SpelledGrammar` for B texts at once.

    ``reset(B)``, then per step ``next_probs()`` -> ``(P(t | x) (B, V), P(end | x) (B,))``
    (float64; rows sum to 1, an impossible row is all 0) and ``advance(tokens, skip)``.
    Tokens that spell nothing (specials) have probability 0 and leave a row as it is.

    ``support=True``: masks only (:meth:`prefix_probs` ``> 0``, the end ``> 0``), on
    :func:`support_model` (a ``.pcfg``'s Earley recogniser instead of its prefix chart);
    the values are then no probabilities and :meth:`next_probs` refuses.
    """

    STATIC = (  # what depends on the grammar and the vocabulary alone: shared by every model built ``like`` another
        "V", "token_child", "token_more_np", "token_more", "token_trie", "lex", "lex_open", "lex_walks", "token_ends", "units",
        "longer", "longer_csc", "token_has_end", "token_node", "token_depth", "dfs_pre", "dfs_post", "token_pre", "longer_dups", "walks",
    )

    def __init__(self, grammar: SpelledGrammar, support: bool = False, like: "StringPrefixModel | None" = None,
                 model: TerminalModel | None = None):
        """``like``: a model of the same grammar whose static tables (:attr:`STATIC`: the
        token trie, the joint walks, kept as they grow) this one shares, so a second model
        costs no table building; ``model``: the terminal-level model to read (default: a
        new one, :func:`support_model` or :func:`terminal_model`)."""
        self.grammar = grammar
        self.spelling = grammar.spelling
        self.tries = self.spelling.tries
        self.support = support  # masks only: a support model, hypotheses kept at weight 1
        if model is None:
            model = support_model(grammar.terminals) if support else terminal_model(grammar.terminals)
        self.model = model
        if like is not None:
            if like.grammar is not grammar:
                raise NeurosymError("a StringPrefixModel shares the tables of a model of the same grammar only")
            for name in self.STATIC:
                setattr(self, name, getattr(like, name))
        else:
            self._build_tables(grammar)
        self.cums: dict[tuple[Hashable, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.viable: dict[Hyp, np.ndarray] = {}  # support models: the viable token ids per hypothesis
        self.bits: dict[tuple, np.ndarray] = {}  # support models: packed viable tokens per (context, ctx, node, start)
        self.masses: dict[Hyp, float] = {}  # support models: hyp_mass per hypothesis
        self.rows: list[dict[Hyp, float]] = []
        self.pointers: list[list[int]] = []
        self.step = 0  # counts resets and advances: what prefix_probs keeps is valid for one step
        self._raw: tuple[int, np.ndarray, np.ndarray] | None = None

    VOCAB_TABLES = (  # the part of STATIC that depends on the vocabulary alone: built once per vocabulary object
        "V", "token_child", "token_more_np", "token_more", "token_trie", "token_ends", "units", "longer", "longer_csc",
        "token_has_end", "token_node", "token_depth", "dfs_pre", "dfs_post", "token_pre", "longer_dups",
    )

    def _build_tables(self, grammar: SpelledGrammar) -> None:
        """The :attr:`STATIC` tables of ``grammar`` over its vocabulary (those of the
        vocabulary alone, :func:`vocab_tables`, are shared by every grammar over it)."""
        tables = vocab_tables(grammar.vocab)
        for name in self.VOCAB_TABLES:
            setattr(self, name, tables[name])
        self.lex = self.spelling.lexemes  # per context: {lexeme id: (trans, final)}
        self.lex_open = tuple({w: (t >= 0).any(1) for w, (t, _) in d.items()} for d in self.lex)  # states with a way on
        self.lex_walks: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self.lex_steps: dict[tuple[int, int, int], np.ndarray] = {}
        self.walks: dict[tuple[int, int, int], Walk] = {}

    # ------------------------------------------------------------------ static tables
    def walk(self, ctx: int, node: int, start: int) -> Walk:
        """The :class:`Walk` from word-trie node ``node`` of trie ``ctx`` and token-trie
        node ``start`` (tokens ending at ``start`` itself are not read again)."""
        key = (ctx, node, start)
        got = self.walks.get(key)
        if got is not None:
            return got
        trie, child, ends = self.tries[ctx], self.token_child, self.token_ends
        toks, lo, hi, cross = [], [], [], []
        stack = [(node, start)]
        while stack:
            m, v = stack.pop()
            if (m, v) != (node, start):
                for t in ends[1][ends[0][v] : ends[0][v + 1]].tolist():
                    toks.append(t)
                    lo.append(int(trie.lo[m]))
                    hi.append(int(trie.hi[m]))
                if trie.n_ends[m] and self.token_more[v]:
                    cross.append((m, v))
            for sym, m2 in trie.child[m].items():
                v2 = child.get((v, sym))
                if v2 is not None:
                    stack.append((m2, v2))
        got = self.walks[key] = Walk(np.array(toks, dtype=np.int64), np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64), tuple(cross))
        return got

    def _sums(self, context: Hashable, ctx: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(K + 1,) prefix sums of ``P(w | context)`` in trie ``ctx``'s sorted order, (K + 1,)
        prefix counts of the positive ones, and the sorted probabilities (K,)."""
        key = (context, ctx)
        got = self.cums.get(key)
        if got is None:
            probs, _ = self.model.distribution(context)
            p = probs[self.tries[ctx].order]
            got = self.cums[key] = (np.concatenate([[0.0], np.cumsum(p)]), np.concatenate([[0], np.cumsum(p > 0)]), p)
        return got

    def _mass(self, context: Hashable, ctx: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The probability of the words ``order[lo:hi]`` after ``context``, elementwise;
        exactly 0 where they all have probability 0, and never 0 where one has more."""
        cum, count, p = self._sums(context, ctx)
        mass = cum[hi] - cum[lo]
        bad = np.nonzero((count[hi] > count[lo]) & (mass <= 0))[0]
        for i in bad.tolist():  # the prefix sums rounded a tiny positive range away: add it directly
            mass[i] = p[lo[i] : hi[i]].sum()
        return np.where(count[hi] > count[lo], mass, 0.0)

    def hyp_mass(self, hyp: Hyp) -> float:
        """``P(continuations | hyp's words) / P_prefix``: the words strictly below the node
        (those ending at it were already read), plus the end and the lexemes at a trie
        root; inside a lexeme, its whole mass while the pattern can go on."""
        if self.support:  # interned contexts: a support model's masses are kept per hypothesis
            got = self.masses.get(hyp)
            if got is None:
                if len(self.masses) > CACHE_LIMIT:
                    self.masses.clear()
                got = self.masses[hyp] = self._hyp_mass(hyp)
            return got
        return self._hyp_mass(hyp)

    def _hyp_mass(self, hyp: Hyp) -> float:
        context, ctx, node = hyp
        probs, end = self.model.distribution(context)
        if isinstance(node, tuple):
            w, q = node
            return float(probs[w]) if self.lex_open[ctx][w][q] else 0.0
        trie = self.tries[ctx]
        lo, hi = np.array([trie.lo[node] + trie.n_ends[node]]), np.array([trie.hi[node]])
        m = float(self._mass(context, ctx, lo, hi)[0])
        return m + end + sum(float(probs[w]) for w in self.lex[ctx]) if node == 0 else m

    # ------------------------------------------------------------------ state
    def reset(self, batch_size: int) -> None:
        self.rows = [{(self.model.start(), BARE, 0): 1.0} for _ in range(batch_size)]
        self.pointers = [[] for _ in range(batch_size)]
        self.step += 1
        self._retain()

    @property
    def batch_size(self) -> int:
        return len(self.rows)

    def next_probs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(P(t | x) (B, V), P(end | x) (B,))`` float64 under longest-match writing (the
        module docstring): rows sum to 1 (0 for an impossible row)."""
        if self.support:
            raise NeurosymError("a StringPrefixModel built with support=True gives masks (prefix_probs > 0), not probabilities")
        raw, end = self.prefix_probs()
        if self.lex[0]:  # regex lexemes carry no probability inside: the viable tokens' weights, renormalised
            total = raw.sum(1) + end
            ok = total > 0
            scale = np.where(ok, 1.0 / np.where(ok, total, 1.0), 0.0)
            return raw * scale[:, None], end * scale
        out = raw - np.asarray(self.longer.T @ raw.T).T if raw.size else raw
        for b, pointers in enumerate(self.pointers):
            if pointers and self.rows[b]:
                self._earlier_tokens(b, pointers, raw[b], out[b])
        out[(out <= raw * LONGER_ROUNDING)] = 0.0  # all of t's mass went on to longer tokens: exactly 0
        out[:, self.longer_dups] = 0.0
        lost = (out.sum(1) + end <= 0) & (raw.sum(1) > 0)  # a text the prior would not have written (another processor's token)
        out[lost] = raw[lost]  # there: the viable tokens' prefix masses, renormalised
        total = out.sum(1) + end
        ok = total > 0
        scale = np.where(ok, 1.0 / np.where(ok, total, 1.0), 0.0)
        return out * scale[:, None], end * scale

    def _earlier_tokens(self, b: int, pointers: list[int], raw: np.ndarray, out: np.ndarray) -> None:
        """Row ``b``'s longest-match probabilities ``out`` (V,), corrected for the tokens
        already written: a token ``t`` that would make an earlier token's text plus what
        followed it a longer token gets 0 (that earlier token was then not the longest
        match), and one that leaves such a longer token possible loses its mass."""
        hyps = self.rows[b]
        cut: list[tuple[tuple[int, ...], float]] = []  # forbidden continuations f of x, and P(x + f ...)
        for u in pointers:
            shifted = np.zeros(self.V)
            for (context, ctx, node), w in hyps.items():
                self._score(context, ctx, node, u, w, shifted)
            depth = self.token_depth[u]
            cut.extend((self.units[t][depth:], float(shifted[t])) for t in np.nonzero(shifted > 0)[0].tolist())
        if not cut:
            return
        affected: dict[int, list] = {}
        for f, mass in cut:
            z = 0
            for i, sym in enumerate(f):  # tokens that are proper prefixes of f lose P(x + f ...)
                z = self.token_child.get((z, sym))
                if z is None:
                    break
                if i + 1 < len(f):
                    for t in self.token_ends[1][self.token_ends[0][z] : self.token_ends[0][z + 1]].tolist():
                        affected.setdefault(t, []).append((f, mass))
            if z is not None:  # tokens that start with f are never the longest match here
                inside = (self.token_pre >= self.dfs_pre[z]) & (self.token_pre < self.dfs_post[z])
                out[inside] = 0.0
        longer = self.longer_csc
        for t, fs in affected.items():
            if out[t] == 0.0:
                continue
            ext = longer.indices[longer.indptr[t] : longer.indptr[t + 1]].tolist()
            events = {self.units[e]: raw[e] for e in ext}
            for f, mass in fs:
                events.setdefault(f, mass)
            kept: set[tuple[int, ...]] = set()
            total = 0.0
            for f in sorted(events):
                if any(f[:k] in kept for k in range(1, len(f) + 1)):
                    continue  # inside an event already counted
                kept.add(f)
                total += events[f]
            out[t] = raw[t] - total

    def prefix_probs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(P(x + t is a prefix) / P(x is a prefix) (B, V), P(x is a sentence) / P(x is a
        prefix) (B,))`` float64: the viable tokens are those > 0 (tokens that are prefixes of
        one another overlap, so the row may sum to more than 1)."""
        if self._raw is not None and self._raw[0] == self.step:
            return self._raw[1].copy(), self._raw[2].copy()
        out = np.zeros((len(self.rows), self.V))
        end = np.zeros(len(self.rows))
        self._raw = (self.step, out, end)  # filled below; read again (copied) until the next reset or advance
        for b, hyps in enumerate(self.rows):
            for (context, ctx, node), w in hyps.items():
                if node == 0:
                    end[b] += w * self.model.distribution(context)[1]
                if self.support:
                    out[b, self.viable_tokens((context, ctx, node))] += w
                else:
                    self._score(context, ctx, node, 0, w, out[b])
        return out.copy(), end.copy()

    def _expand(self, context: Hashable, ctx: int, node, start: int | tuple[int, ...]) -> tuple[list, list]:
        """One step of the joint walk from ``(node, start)`` under ``context``: ``(direct,
        crossings)``. ``direct``: ``(tokens, P(token's bytes | hypothesis))`` pairs for the
        tokens that end inside the current terminal (a lexeme's tokens get its whole mass);
        ``crossings``: ``(next context, next trie, starts, p)`` for the tokens that go on into
        a next terminal begun at the token-trie nodes ``starts`` (a sorted tuple; a node
        listed twice counts twice, as two hypotheses), ``p`` the probability of the
        terminal completed on the way. ``start`` may itself be such a tuple (with ``node =
        0``); then a token may be listed more than once in ``direct``, each counting.
        :meth:`_score` (probabilities) and :meth:`viable_bits` (the support, kept) both read
        the walk through this one step."""
        probs, _ = self.model.distribution(context)
        direct: list[tuple[np.ndarray, np.ndarray | float]] = []
        crossings: list[tuple[Hashable, int, tuple[int, ...], float]] = []
        if isinstance(node, tuple) or (node == 0 and self.lex[ctx]):  # inside a lexeme, or into every lexeme from a trie root
            for w, q in [node] if isinstance(node, tuple) else [(w, 0) for w in self.lex[ctx]]:
                p = float(probs[w])
                if p <= 0:
                    continue
                tokens, ends = self.lex_walk(ctx, w, q, start)
                if len(tokens):
                    direct.append((tokens, p))
                if len(ends):
                    crossings.append((self.model.advance(context, w), int(self.spelling.after[w]), tuple(sorted(ends.tolist())), p))
            if isinstance(node, tuple):
                return direct, crossings
        if isinstance(start, tuple):
            tokens, lo, hi, cross = self.root_walks(ctx, start)
        else:
            walk = self.walk(ctx, node, start)
            tokens, lo, hi, cross = walk.tokens, walk.lo, walk.hi, walk.crossings
        if len(tokens):
            direct.append((tokens, self._mass(context, ctx, lo, hi)))
        by_word: dict[int, list[int]] = {}
        for m, v in cross:
            for word in self.tries[ctx].ends[m]:
                nxt = int(self.spelling.after[word])
                if probs[word] > 0 and not (self.walk(nxt, 0, v).empty and not self.lex[nxt]):
                    by_word.setdefault(word, []).append(v)
        for word, starts in by_word.items():
            crossings.append((self.model.advance(context, word), int(self.spelling.after[word]), tuple(sorted(starts)), float(probs[word])))
        return direct, crossings

    def _score(self, context: Hashable, ctx: int, node, start: int | tuple[int, ...], weight: float, out: np.ndarray) -> None:
        """Add ``weight * P(token's bytes | hypothesis)`` for every token read from
        ``(node, start)`` (:meth:`_expand`), crossings followed under the advanced contexts."""
        direct, crossings = self._expand(context, ctx, node, start)
        for tokens, values in direct:
            _add(out, tokens, weight * values, isinstance(start, tuple))
        for after, nxt, starts, p in crossings:
            self._score(after, nxt, 0, starts, weight * p, out)

    def viable_tokens(self, hyp: Hyp) -> np.ndarray:
        """A support model's viable token ids after a hypothesis, kept per hypothesis
        (inside a lexeme or a word the same one comes back step after step)."""
        got = self.viable.get(hyp)
        if got is None:
            bits = np.unpackbits(self.viable_bits(*hyp, 0), bitorder="little")[: self.V]
            got = self.viable[hyp] = np.nonzero(bits)[0]
        return got

    def viable_bits(self, context: Hashable, ctx: int, node, start: int | tuple[int, ...]) -> np.ndarray:
        """A support model's viable tokens read from ``(node, start)`` (:meth:`_expand`, as
        :meth:`_score` reads them), packed little-endian into ``ceil(V / 8)`` bytes
        (read-only). Kept per ``(context, ctx, node, start)``: the contexts are interned
        (Earley columns, FSG states), so the same continuation is read once however many
        hypotheses and states cross into it, and the crossings into one next terminal are
        read together from all their token-trie nodes."""
        key = (context, ctx, node, start)
        got = self.bits.get(key)
        if got is not None:
            return got
        if not self.support:
            raise NeurosymError("viable_bits reads a support model (StringPrefixModel(..., support=True))")
        direct, crossings = self._expand(context, ctx, node, start)
        allowed = np.zeros(self.V, dtype=bool)
        for tokens, values in direct:
            allowed[tokens[np.asarray(values) > 0] if np.ndim(values) else tokens] = True
        got = np.packbits(allowed, bitorder="little")
        for after, nxt, starts, _ in crossings:
            got |= self.viable_bits(after, nxt, 0, starts)
        got.flags.writeable = False
        if len(self.bits) > CACHE_LIMIT:
            self.bits.clear()
        self.bits[key] = got
        return got

    def lexeme_steps(self, ctx: int, w: int, q: int) -> np.ndarray:
        """(V,) int32: the state of lexeme ``w``'s surface DFA (in context ``ctx``) after
        each token read from state ``q``, where every byte of the token keeps the lexeme
        going through states that are not final (so reading it forks nothing: the text
        stays inside the lexeme, one hypothesis in, one out); -1 elsewhere. One vectorised
        step per byte down the token trie; kept per ``(ctx, w, q)`` — a row per state
        decoding meets, never a table over every state (a key-exclusion lexeme has thousands)."""
        key = (ctx, w, q)
        got = self.lex_steps.get(key)
        if got is not None:
            return got
        trans, final = self.lex[ctx][w]
        trie = self.token_trie
        cs, sym, es, et = trie.child_start, trie.symbol, trie.end_start, trie.end_token
        got = np.full(self.V, -1, dtype=np.int32)
        v, s = np.zeros(1, dtype=np.int64), np.full(1, q, dtype=np.int64)
        while len(v):
            counts = cs[v + 1] - cs[v]
            kids = _ranges(cs[v], cs[v + 1])
            s2 = trans[np.repeat(s, counts), sym[kids]]
            keep = s2 >= 0
            keep[keep] = ~final[s2[keep]]
            v, s = kids[keep], s2[keep]
            n = es[v + 1] - es[v]
            got[et[_ranges(es[v], es[v + 1])]] = np.repeat(s, n)
        if len(self.lex_steps) >= LEXEME_ROWS_LIMIT:
            self.lex_steps.clear()
        self.lex_steps[key] = got
        return got

    def lex_walk(self, ctx: int, w: int, q: int, start: int | tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Tokens read from lexeme ``w``'s surface-DFA state ``q`` and token-trie node
        ``start`` on (those ending at ``start`` not read again) that stay inside the
        lexeme, and the token-trie nodes where the lexeme may end with longer tokens below
        (crossings). ``start`` may be a tuple of nodes: the walks from all of them at once.
        One vectorised step per byte, kept per ``(ctx, w, q, start)``."""
        key = (ctx, w, q, start)
        got = self.lex_walks.get(key)
        if got is not None:
            return got
        trans, final = self.lex[ctx][w]
        trie = self.token_trie
        cs, sym, es, et = trie.child_start, trie.symbol, trie.end_start, trie.end_token
        v = np.array(start if isinstance(start, tuple) else [start], dtype=np.int64)
        s = np.full(len(v), q, dtype=np.int64)
        toks, cross = [], []
        first = True
        while len(v):
            if not first:
                toks.append(et[_ranges(es[v], es[v + 1])])
                cross.append(v[final[s] & self.token_more_np[v]])
            first = False
            kids = _ranges(cs[v], cs[v + 1])
            s2 = trans[np.repeat(s, cs[v + 1] - cs[v]), sym[kids]]
            keep = s2 >= 0
            v, s = kids[keep], s2[keep]
        empty = np.zeros(0, dtype=np.int64)
        got = self.lex_walks[key] = (np.concatenate(toks) if toks else empty, np.concatenate(cross) if cross else empty)
        return got

    def root_walks(self, ctx: int, starts: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int]]]:
        """The :class:`Walk` from trie ``ctx``'s root and each token-trie node of ``starts``,
        joined: ``(tokens, lo, hi, crossings)`` (kept per ``(ctx, starts)``)."""
        key = ("roots", ctx, starts)
        got = self.lex_walks.get(key)
        if got is None:
            walks = [self.walk(ctx, 0, v) for v in starts]
            got = (np.concatenate([x.tokens for x in walks]), np.concatenate([x.lo for x in walks]),
                   np.concatenate([x.hi for x in walks]), [c for x in walks for c in x.crossings])
            self.lex_walks[key] = got
        return got

    def advance(self, tokens: np.ndarray, skip: np.ndarray | None = None) -> None:
        """Extend each row by its token (B,); rows with ``skip`` set stay as they are."""
        for b, t in enumerate(np.asarray(tokens).tolist()):
            if (skip is not None and skip[b]) or not self.rows[b]:
                continue
            units = self.units[t] if 0 <= t < self.V else None
            if units is None:
                self.rows[b] = {}
            elif units:
                self.rows[b] = self._read(self.rows[b], units)
                self.pointers[b] = self._pointers(self.pointers[b], t, units)
        self.step += 1
        self._retain()

    def restore(self, rows: list[dict[Hyp, float]], pointers: list[list[int]]) -> None:
        """Set the rows' hypotheses and longest-match pointers to ones this model (or a
        model sharing its terminal-level model) had before: a matcher's rollback or copy."""
        self.rows, self.pointers = list(rows), [list(p) for p in pointers]
        self.step += 1
        self._retain()

    def _pointers(self, pointers: list[int], token: int, units: tuple[int, ...]) -> list[int]:
        """The token-trie nodes that still watch for a longer token after ``token``: each
        earlier pointer moved along its bytes (dropped when it leaves the trie or meets a
        token's end), and ``token``'s own node."""
        out: list[int] = []
        for u in pointers:
            z = u
            for sym in units:
                z = self.token_child.get((z, sym))
                if z is None or self.token_has_end[z]:
                    z = None
                    break
            if z is not None and self.token_more[z] and z not in out:
                out.append(z)
        node = self.token_node[token]
        if node > 0 and self.token_more[node] and node not in out:
            out.append(node)
        return out

    def _read(self, hyps: dict[Hyp, float], units: tuple[int, ...]) -> dict[Hyp, float]:
        """The hypotheses after reading ``units``, renormalised (empty: impossible)."""
        frontier = list(hyps.items())
        for sym in units:
            nxt: list[tuple[Hyp, float]] = []
            for (context, ctx, node), w in frontier:
                if isinstance(node, tuple) or (node == 0 and self.lex[ctx]):
                    nxt.extend(self._read_lexemes(context, ctx, node, w, sym))
                    if isinstance(node, tuple):
                        continue
                trie = self.tries[ctx]
                m = trie.child[node].get(sym)
                if m is None:
                    continue
                nxt.append(((context, ctx, m), w))
                if trie.n_ends[m]:
                    probs, _ = self.model.distribution(context)
                    for word in trie.ends[m]:
                        if probs[word] > 0:
                            nxt.append(((self.model.advance(context, word), int(self.spelling.after[word]), 0), w * probs[word]))
            frontier = nxt
        merged: dict[Hyp, float] = {}
        for hyp, w in frontier:
            merged[hyp] = merged.get(hyp, 0.0) + w
        weighted = {h: w * self.hyp_mass(h) for h, w in merged.items()}
        total = sum(weighted.values())
        if not total > 0:
            return {}
        if self.support:  # only positivity counts: no path counts to grow over the steps
            return {h: 1.0 for h in merged if weighted[h] > 0}
        return {h: w / total for h, w in merged.items() if weighted[h] > 0}

    def _read_lexemes(self, context: Hashable, ctx: int, node, w: float, sym: int) -> list[tuple[Hyp, float]]:
        """One byte inside a lexeme (or into every lexeme from a trie root)."""
        probs, _ = self.model.distribution(context)
        items = [node] if isinstance(node, tuple) else [(x, 0) for x in self.lex[ctx] if probs[x] > 0]
        out: list[tuple[Hyp, float]] = []
        for word, q in items:
            trans, final = self.lex[ctx][word]
            q2 = int(trans[q, sym])
            if q2 < 0:
                continue
            out.append(((context, ctx, (word, q2)), w))
            if final[q2]:
                out.append(((self.model.advance(context, word), int(self.spelling.after[word]), 0), w * probs[word]))
        return out

    def _retain(self) -> None:
        """Forget what the rows cannot read again: a prefix chart's contexts (tuples of
        terminals) die with the rows; the contexts of the Earley recogniser and of an FSG
        are interned states found again along any text of the same shape, so their caches
        are kept, bounded by :data:`CACHE_LIMIT` entries (cleared, in place, past it)."""
        live = {h[0] for hyps in self.rows for h in hyps}
        self.model.retain(live)
        if isinstance(self.model, PCFGTerminals):
            self.cums = {k: v for k, v in self.cums.items() if k[0] in self.model.states}
            return
        for cache in (self.viable, self.cums, self.bits, self.masses):
            if len(cache) > CACHE_LIMIT:
                cache.clear()

    def read(self, hyps: dict[Hyp, float], units: tuple[int, ...]) -> dict[Hyp, float]:
        """The hypotheses after reading ``units`` (a token's bytes or code points) from
        ``hyps``, renormalised (empty: the text is no prefix of a sentence)."""
        return self._read(hyps, units)


def read_texts(grammar: SpelledGrammar, rows: list[list[int]], tables: StringPrefixModel | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score B token rows (ids of the grammar's vocabulary, the end token left out) as texts:
    ``(sentence (B,) bool, viable (B,) bool, log P(text is a sentence) (B,) float64)``.
    ``viable``: some continuation makes the text a sentence. The log-probability is the
    telescoping sum of ``log P(x + t is a prefix) / P(x is a prefix)`` over the row's tokens
    plus ``log P(end | x)``, so it is the text's exact probability however it was
    tokenized (``-inf`` off the language; ``nan`` where the grammar has regex lexemes,
    which carry no probability inside them). A special token makes a row impossible.
    ``tables``: a model of the same grammar whose static tables to share."""
    model = StringPrefixModel(grammar, like=tables)
    B = len(rows)
    L = max((len(r) for r in rows), default=0)
    ids = np.zeros((B, L), dtype=np.int64)
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    for b, r in enumerate(rows):
        ids[b, : len(r)] = r
    model.reset(B)
    logp = np.zeros(B)
    at = np.arange(B)
    spells = np.array([bool(u) for u in model.units], dtype=bool)  # tokens that spell text (specials do not)
    bad = np.zeros(B, dtype=bool)  # a special or unknown token: the row is impossible
    with np.errstate(divide="ignore"):
        for i in range(L):
            active = lengths > i
            raw, _ = model.prefix_probs()
            col = ids[:, i]
            inside = (col >= 0) & (col < model.V)
            bad |= active & ~(inside & spells[np.clip(col, 0, model.V - 1)])
            got = np.where(inside, raw[at, np.clip(col, 0, model.V - 1)], 0.0)
            logp += np.where(active, np.log(got), 0.0)
            model.advance(col, ~active | bad)
        _, end = model.prefix_probs()
        logp += np.log(end)
    viable = np.array([bool(r) for r in model.rows], dtype=bool) & ~bad
    if any(model.lex):
        logp = np.full(B, np.nan)
    logp[bad] = -np.inf
    return (end > 0) & ~bad, viable, logp


def _add(out: np.ndarray, tokens: np.ndarray, values, repeats: bool) -> None:
    """``out[tokens] += values``; ``repeats``: a token may be listed more than once (each counts)."""
    if repeats:
        np.add.at(out, tokens, values)
    else:
        out[tokens] += values


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(lo[i], hi[i])`` over i."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    return np.arange(total, dtype=np.int64) + offsets


# ---------------------------------------------------------------------- processors
class _StringProcessor(LogitsProcessor, ABC):
    """Shared state of the processors over a :class:`SpelledGrammar`."""

    masks_only = False  # a processor that reads only the support builds its own model on support_model

    def __init__(self, grammar: SpelledGrammar, eos_id: int, shared: "_StringProcessor | None" = None,
                 tables: StringPrefixModel | None = None):
        if not isinstance(grammar, SpelledGrammar):
            raise NeurosymError(f"{type(self).__name__} needs a grammar over strings (SpelledGrammar), got {type(grammar).__name__}")
        V = len(grammar.vocab)
        if not isinstance(eos_id, int) or not 0 <= eos_id < V:
            raise ConfigError(f"{type(self).__name__}: eos_id must be a token id in [0, {V}), got {eos_id!r}")
        if grammar.vocab.surfaces[eos_id]:
            raise ConfigError(f"{type(self).__name__}: eos_id {eos_id} spells {grammar.vocab.surfaces[eos_id]!r}; the end needs a token that spells nothing")
        if shared is not None and shared.grammar is not grammar:
            raise NeurosymError(f"{type(self).__name__}: a processor shares the model of a processor of the same grammar only")
        self.grammar, self.eos_id = grammar, eos_id
        self.owner = shared is None  # the owner resets and advances the model; a sharing processor reads it
        # tables: a model of the same grammar (a guide's) whose static tables this processor's model shares
        self.model = StringPrefixModel(grammar, support=self.masks_only, like=tables) if shared is None else shared.model
        self._cache: tuple[int, Tensor] | None = None
        self._started = False

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        if self.owner:
            self.model.reset(batch_size)
        self._cache, self._started = None, True

    def advance(self, tokens: Tensor, done: Tensor | None = None) -> None:
        self._check()
        if not self.owner:  # the processor that owns the model (earlier in the chain) advanced it
            return
        tokens = torch.as_tensor(tokens).long().cpu()
        skip = tokens == self.eos_id
        if done is not None:
            skip = skip | torch.as_tensor(done).bool().cpu()
        self.model.advance(tokens.numpy(), skip.numpy())

    def _check(self) -> None:
        if not self._started:
            raise NeurosymError(f"{type(self).__name__}: call reset(batch_size) before using the processor")

    @abstractmethod
    def _probs(self) -> tuple[np.ndarray, np.ndarray]:
        """The model's ``(B, V)`` and ``(B,)`` probabilities this processor reads."""

    def log_probs(self) -> Tensor:
        """(B, V) float64 log-probabilities (:meth:`_probs`), the end at ``eos_id``."""
        self._check()
        if self._cache is None or self._cache[0] != self.model.step:
            nxt, end = self._probs()
            nxt[:, self.eos_id] = end
            with np.errstate(divide="ignore"):
                self._cache = (self.model.step, torch.from_numpy(np.log(nxt)))
        return self._cache[1]

    def _scores_shape(self, scores: Tensor) -> None:
        B, V = self.model.batch_size, len(self.grammar.vocab)
        if scores.dim() != 2 or scores.shape[0] != B or scores.shape[1] < V:
            raise NeurosymError(f"{type(self).__name__}: expected scores (B, V) with B = {B}, V >= {V}; got {tuple(scores.shape)}")

    def allowed(self, tokens: Tensor) -> Tensor:
        return self.log_prob(tokens) > LOG_ZERO

    def log_prob(self, tokens: Tensor) -> Tensor:
        tokens = torch.as_tensor(tokens).long()
        lp = self.log_probs()
        ok = (tokens >= 0) & (tokens < lp.shape[1])
        got = lp.gather(1, tokens.cpu().clamp(0, lp.shape[1] - 1)[:, None]).squeeze(1)
        return torch.where(ok.cpu(), got, LOG_ZERO).to(tokens.device)

    def describe_allowed(self, row: int, limit: int = 8) -> list[int]:
        lp = self.log_probs()[row]
        order = torch.argsort(lp, descending=True, stable=True)
        return order[torch.isfinite(lp[order])][:limit].tolist()


class SpelledPrior(_StringProcessor):
    """Adds ``weight * log P(t | text so far)`` of an ``.fsg`` or ``.pcfg`` read as strings
    (:class:`StringPrefixModel`) to the scores (B, V_model); ``eos_id`` gets ``weight *
    log P(end | text)``. Tokens of probability 0 get ``-inf`` (at any weight)."""

    def __init__(self, grammar: SpelledGrammar, weight: float = 1.0, eos_id: int = 0, tables: StringPrefixModel | None = None):
        weight = float(weight)
        if not (np.isfinite(weight) and weight >= 0):
            raise ConfigError(f"SpelledPrior: weight must be a finite number >= 0, got {weight}")
        super().__init__(grammar, eos_id, tables=tables)
        self.weight = weight

    def __repr__(self) -> str:
        return f"SpelledPrior({self.grammar.name}, weight={self.weight:g})"

    def _probs(self) -> tuple[np.ndarray, np.ndarray]:
        return self.model.next_probs()

    def __call__(self, scores: Tensor) -> Tensor:
        self._scores_shape(scores)
        lp = self.log_probs()
        shift = torch.where(lp == LOG_ZERO, LOG_ZERO, self.weight * lp).to(device=scores.device, dtype=scores.dtype)
        V = shift.shape[1]
        scores[:, :V] += shift
        scores[:, V:] = LOG_ZERO
        return scores


class SpelledMask(_StringProcessor):
    """Sets to ``-inf`` the scores (B, V_model) of tokens after which the text is no prefix
    of a sentence, and ``eos_id`` unless the text is a sentence. ``shared``: a
    :class:`SpelledPrior` of the same grammar earlier in the chain, whose model this mask
    reads (it resets and advances it; :func:`neurosym.decode.grammar_processors` does so
    for ``use="both"``). Alone, it reads a support model (``StringPrefixModel(grammar,
    support=True)``: a ``.pcfg``'s Earley recogniser, not its exact prefix chart)."""

    masks_only = True

    def __repr__(self) -> str:
        return f"SpelledMask({self.grammar.name})"

    def _probs(self) -> tuple[np.ndarray, np.ndarray]:
        return self.model.prefix_probs()  # every viable token, however the text is split

    def log_prob(self, tokens: Tensor) -> None:
        """A mask defines no distribution."""
        return None

    def allowed(self, tokens: Tensor) -> Tensor:
        tokens = torch.as_tensor(tokens).long()
        lp = self.log_probs()
        ok = (tokens >= 0) & (tokens < lp.shape[1])
        got = lp.gather(1, tokens.cpu().clamp(0, lp.shape[1] - 1)[:, None]).squeeze(1)
        return (ok.cpu() & (got > LOG_ZERO)).to(tokens.device)

    def __call__(self, scores: Tensor) -> Tensor:
        self._scores_shape(scores)
        forbid = (self.log_probs() == LOG_ZERO).to(scores.device)
        V = forbid.shape[1]
        scores[:, :V] = scores[:, :V].masked_fill(forbid, LOG_ZERO)
        scores[:, V:] = LOG_ZERO
        return scores


__all__ = ["FSGTerminals", "PCFGTerminals", "SpelledMask", "SpelledPrior", "StringPrefixModel", "TerminalModel", "Walk", "read_texts", "support_model", "terminal_model", "vocab_tables"]
