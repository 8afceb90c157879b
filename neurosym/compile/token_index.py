"""The token index: which tokens of a vocabulary each DFA state allows, and where they lead.

A token-level automaton is a character (or byte) DFA read through a vocabulary. Rather
than walking every token from every state (states x tokens x token length), the
vocabulary is laid out once as a trie of its surfaces (:class:`VocabTrie`), and the trie
is walked breadth-first from every DFA state at once, carrying only the (state, trie
node) pairs that are still alive. The cost is the number of live pairs — at most states
x trie nodes, usually far fewer — with one vectorised step per trie level.

The result is sparse (:class:`TokenArcs`: CSR rows of (token, next state) per state),
trimmed to the states that are reachable by tokens and can still reach a final state,
and minimised at the token level. Each state's allowed-token set is also packed into
32-bit words (``mask_bits``), deduplicated across states (``mask_row``), so a decoding
mask is one row lookup.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from neurosym.compile.dfa import OTHER, ByteView, CharDFA
from neurosym.vocab import Vocab

WORD_BITS = 32


# ---------------------------------------------------------------------- the vocabulary trie
@dataclass(frozen=True)
class VocabTrie:
    """Every token surface as a path from the root (node 0) of a symbol trie.

    Nodes are numbered level by level, and within a level by (parent, symbol), so the
    children of a node are contiguous: ``child_start[n]:child_start[n + 1]``.

    Attributes:
        symbol: (N,) int64 code point (character/word vocabularies) or byte value
            (byte vocabularies) on the arc into each node; -1 at the root.
        child_start: (N + 1,) int64 CSR offsets of each node's children.
        level_start: (D + 2,) int64: nodes of depth d are ``level_start[d]:level_start[d + 1]``.
        end_start, end_token: CSR from node to the tokens that end there (tokens with
            equal surfaces share a node; the empty surface ends at the root).
        special: (V,) bool, tokens with no surface (they never move an automaton).
        alphabet: (A,) the distinct symbols of the vocabulary, ascending.
        token_symbols: (V, L) int16/int32 each token's symbols as indices into
            ``alphabet``, -1 after its end; ``token_len`` (V,) their counts.
    """

    symbol: np.ndarray
    child_start: np.ndarray
    level_start: np.ndarray
    end_start: np.ndarray
    end_token: np.ndarray
    special: np.ndarray
    alphabet: np.ndarray
    token_symbols: np.ndarray
    token_len: np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.symbol)


_TRIES: dict[int, tuple[weakref.ref, VocabTrie]] = {}


def vocab_trie(vocab: Vocab) -> VocabTrie:
    """The trie of ``vocab``'s surfaces (bytes for byte vocabularies, else code points),
    built once per vocabulary object."""
    hit = _TRIES.get(id(vocab))
    if hit is not None and hit[0]() is vocab:
        return hit[1]
    trie = build_trie(vocab.surfaces, as_bytes=vocab.kind == "bytes")
    _TRIES[id(vocab)] = (weakref.ref(vocab, lambda _, key=id(vocab): _TRIES.pop(key, None)), trie)
    return trie


_SYMBOL_TUPLES: dict[int, tuple[weakref.ref, list[tuple[int, ...]]]] = {}


def token_symbol_tuples(trie: VocabTrie) -> list[tuple[int, ...]]:
    """Each token's symbols (indices into ``trie.alphabet``) as a Python tuple, for
    stepping one token in plain Python; built once per trie (a vocabulary's tries are
    cached, so once per vocabulary)."""
    hit = _SYMBOL_TUPLES.get(id(trie))
    if hit is not None and hit[0]() is trie:
        return hit[1]
    flat = trie.token_symbols[trie.token_symbols >= 0].tolist()  # row-major: each token's symbols in order
    ends = np.cumsum(trie.token_len).tolist()
    tuples = [tuple(flat[a:b]) for a, b in zip([0, *ends[:-1]], ends)]
    _SYMBOL_TUPLES[id(trie)] = (weakref.ref(trie, lambda _, key=id(trie): _SYMBOL_TUPLES.pop(key, None)), tuples)
    return tuples


def build_trie(surfaces: list, as_bytes: bool) -> VocabTrie:
    """Build the trie with one vectorised step per depth (no Python loop over nodes)."""
    V = len(surfaces)
    special = np.array([s is None for s in surfaces], dtype=bool)
    seqs = [b"" if s is None else (bytes(s) if as_bytes else s) for s in surfaces]
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=V)
    lmax = int(lengths.max()) if V else 0
    sym = np.full((V, max(lmax, 1)), -1, dtype=np.int64)
    if as_bytes:
        flat = np.frombuffer(b"".join(seqs), dtype=np.uint8).astype(np.int64)
    else:
        flat = np.fromiter((ord(c) for s in seqs for c in s), dtype=np.int64, count=int(lengths.sum()))
    rows = np.repeat(np.arange(V), lengths)
    cols = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    sym[rows, cols] = flat

    node = np.zeros(V, dtype=np.int64)  # each token's node at the current depth (root = 0)
    symbols = [np.array([-1], dtype=np.int64)]
    parents = [np.array([-1], dtype=np.int64)]
    level_start = [0, 1]
    end_node = np.where(lengths == 0, 0, -1)
    n_nodes = 1
    for d in range(lmax):
        live = np.nonzero(lengths > d)[0]
        key = node[live] * 0x200000 + sym[live, d]  # parent-major: children stay contiguous
        uniq, inv = np.unique(key, return_inverse=True)
        node[live] = n_nodes + inv.reshape(-1)
        parents.append(uniq // 0x200000)
        symbols.append(uniq % 0x200000)
        ends = live[lengths[live] == d + 1]
        end_node[ends] = node[ends]
        n_nodes += len(uniq)
        level_start.append(n_nodes)
    parent = np.concatenate(parents)
    child_count = np.bincount(parent[1:], minlength=n_nodes)
    child_start = np.concatenate([[0], np.cumsum(child_count)]).astype(np.int64) + 1  # node 0 has no parent
    end_node[special] = -1
    order = np.argsort(end_node, kind="stable")
    order = order[end_node[order] >= 0]
    end_count = np.bincount(end_node[order], minlength=n_nodes)
    end_start = np.concatenate([[0], np.cumsum(end_count)]).astype(np.int64)
    alphabet, ids = np.unique(flat, return_inverse=True)
    token_symbols = np.full(sym.shape, -1, dtype=np.int16 if len(alphabet) < 2**15 else np.int32)
    token_symbols[rows, cols] = ids.reshape(-1)
    return VocabTrie(
        np.concatenate(symbols), child_start, np.array(level_start, dtype=np.int64), end_start, order.astype(np.int64),
        special, alphabet, token_symbols, lengths,
    )


# ---------------------------------------------------------------------- sparse token arcs
@dataclass
class TokenArcs:
    """A trim token-level DFA as CSR rows, start state 0.

    Attributes:
        indptr: (Q + 1,) int64 row offsets; row q holds the arcs leaving state q.
        tokens: (E,) int64 token ids, ascending within each row.
        targets: (E,) int64 next states.
        final: (Q,) bool.
        num_tokens: V.
    """

    indptr: np.ndarray
    tokens: np.ndarray
    targets: np.ndarray
    final: np.ndarray
    num_tokens: int

    @property
    def num_states(self) -> int:
        return len(self.final)

    @property
    def sources(self) -> np.ndarray:
        """(E,) the source state of every arc."""
        return np.repeat(np.arange(self.num_states), np.diff(self.indptr))

    @classmethod
    def from_triples(cls, src: np.ndarray, tok: np.ndarray, dst: np.ndarray, final: np.ndarray, num_tokens: int) -> "TokenArcs":
        """Arcs in any order (no duplicate (src, tok) pairs) -> CSR."""
        Q = len(final)
        order = np.lexsort((tok, src))
        indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=Q))]).astype(np.int64)
        return cls(indptr, tok[order].astype(np.int64), dst[order].astype(np.int64), final.astype(bool), num_tokens)

    @classmethod
    def from_dense(cls, delta: np.ndarray, final: np.ndarray) -> "TokenArcs":
        """From a (Q, V) table of next states, -1 = reject (not trimmed)."""
        src, tok = np.nonzero(delta >= 0)
        return cls.from_triples(src, tok, delta[src, tok], np.asarray(final, dtype=bool), delta.shape[1])

    def dense(self) -> np.ndarray:
        """(Q, V) int64 next states, -1 = reject."""
        out = np.full((self.num_states, self.num_tokens), -1, dtype=np.int64)
        out[self.sources, self.tokens] = self.targets
        return out

    def reach(self, seeds: np.ndarray, forward: bool) -> np.ndarray:
        """(Q,) bool: the states reachable from ``seeds`` (forward) or that reach them
        (backward), one vectorised step per breadth-first level."""
        Q = self.num_states
        if forward:
            indptr, nbr = self.indptr, self.targets
        else:
            src = self.sources
            order = np.argsort(self.targets, kind="stable")
            indptr = np.concatenate([[0], np.cumsum(np.bincount(self.targets, minlength=Q))]).astype(np.int64)
            nbr = src[order]
        seen = np.zeros(Q, dtype=bool)
        seen[seeds] = True
        frontier = np.nonzero(seen)[0]
        while len(frontier):
            idx, _ = expand(indptr[frontier], indptr[frontier + 1] - indptr[frontier])
            nxt = np.unique(nbr[idx])
            frontier = nxt[~seen[nxt]]
            seen[frontier] = True
        return seen

    def trimmed(self, start: int = 0) -> "TokenArcs":
        """Only the states reachable from ``start`` that can reach a final state,
        renumbered breadth-first from ``start`` (which becomes 0). The empty language
        gives one non-final state with no arcs."""
        return self.trimmed_with_map(start)[0]

    def trimmed_with_map(self, start: int = 0) -> tuple["TokenArcs", np.ndarray]:
        """:meth:`trimmed`, and (Q,) each old state's new number (-1: dropped)."""
        live = self.reach(np.array([start]), True) & self.reach(np.nonzero(self.final)[0], False)
        if not live[start]:
            empty = TokenArcs(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(1, dtype=bool), self.num_tokens)
            mapping = np.full(self.num_states, -1, dtype=np.int64)
            mapping[start] = 0
            return empty, mapping
        src = self.sources
        keep = live[src] & live[self.targets]
        return _renumber(src[keep], self.tokens[keep], self.targets[keep], self.final, live, start, self.num_tokens)

    def minimized(self) -> "TokenArcs":
        """The minimal equivalent DFA (of a trim one), renumbered breadth-first from 0."""
        return self.minimized_with_map()[0]

    def minimized_with_map(self, check: Callable[[], None] | None = None) -> tuple["TokenArcs", np.ndarray]:
        """:meth:`minimized`, and (Q,) each old state's new number. ``check()`` runs before
        every refinement round (a chain of n states takes n rounds)."""
        src = self.sources
        block = self.final.astype(np.int64)
        n_blocks = len(np.unique(block))
        while True:
            if check is not None:
                check()
            new = group_rows(self.indptr, [self.tokens, block[self.targets]], block)
            n_new = int(new.max()) + 1 if len(new) else 0
            block = new
            if n_new == n_blocks:
                break
            n_blocks = n_new
        if n_blocks == self.num_states:
            return self, np.arange(self.num_states)
        rep = np.full(n_blocks, self.num_states, dtype=np.int64)
        np.minimum.at(rep, block, np.arange(self.num_states))  # the first state of each block
        keep = rep[block[src]] == src
        fin = np.zeros(n_blocks, dtype=bool)
        fin[block] = self.final
        live = np.ones(n_blocks, dtype=bool)
        arcs, new_id = _renumber(block[src[keep]], self.tokens[keep], block[self.targets[keep]], fin, live, int(block[0]), self.num_tokens)
        return arcs, new_id[block]

    def packed_masks(self) -> tuple[np.ndarray, np.ndarray]:
        """The allowed-token set of every state as 32-bit words, deduplicated:
        ``(bits (M, ceil(V / 32)) int32, row (Q,) int64)``; state q allows token v iff
        bit ``v % 32`` of ``bits[row[q], v // 32]`` is set."""
        Q = self.num_states
        row = group_rows(self.indptr, [self.tokens], np.zeros(Q, dtype=np.int64))
        M = int(row.max()) + 1 if Q else 0
        first = np.full(M, Q, dtype=np.int64)
        np.minimum.at(first, row, np.arange(Q))
        W = (self.num_tokens + WORD_BITS - 1) // WORD_BITS
        bits = np.zeros((M, max(W, 1)), dtype=np.uint32)
        arcs, counts = expand(self.indptr[first], self.indptr[first + 1] - self.indptr[first])
        owner = np.repeat(np.arange(M), counts)
        tok = self.tokens[arcs]
        np.bitwise_or.at(bits, (owner, tok // WORD_BITS), (np.uint32(1) << (tok % WORD_BITS).astype(np.uint32)))
        return bits.view(np.int32), row


def expand(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The concatenated ranges ``starts[i] : starts[i] + counts[i]`` as one index array
    (and ``counts``, for repeating per-range values alongside)."""
    total = int(counts.sum())
    before = np.cumsum(counts) - counts
    return np.repeat(starts - before, counts) + np.arange(total, dtype=np.int64), counts


def _renumber(src, tok, dst, final, live, start, V) -> tuple[TokenArcs, np.ndarray]:
    """Renumber the ``live`` states breadth-first from ``start`` (vectorised by levels);
    also returns each old state's new number (-1: not reached)."""
    n = len(live)
    order = np.argsort(src, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).astype(np.int64)
    dst_sorted = dst[order]
    new_id = np.full(n, -1, dtype=np.int64)
    new_id[start] = 0
    frontier, count = np.array([start]), 1
    while len(frontier):
        idx, _ = expand(indptr[frontier], indptr[frontier + 1] - indptr[frontier])
        nxt = dst_sorted[idx]
        _, first = np.unique(nxt, return_index=True)
        nxt = nxt[np.sort(first)]  # first-appearance order keeps the numbering deterministic
        nxt = nxt[new_id[nxt] < 0]
        new_id[nxt] = np.arange(count, count + len(nxt))
        count += len(nxt)
        frontier = nxt
    keep = new_id[src] >= 0
    fin = np.zeros(count, dtype=bool)
    fin[new_id[new_id >= 0]] = final[new_id >= 0]
    return TokenArcs.from_triples(new_id[src[keep]], tok[keep], new_id[dst[keep]], fin, V), new_id


# ---------------------------------------------------------------------- grouping sparse rows
def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijective scramble of uint64 values."""
    x = x.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def group_rows(indptr: np.ndarray, columns: list[np.ndarray], labels: np.ndarray) -> np.ndarray:
    """Ids of the distinct (label, row) pairs of a CSR table, exactly.

    A row is the sequence of tuples ``(columns[0][i], columns[1][i], ...)`` for its arcs
    ``i``. Rows are grouped by an order-independent 64-bit hash, then every row is
    compared with its group's first row; a hash collision (never seen in practice)
    falls back to exact grouping by Python tuples. Returns (Q,) int64 ids numbered in
    order of first appearance.
    """
    Q = len(labels)
    with np.errstate(over="ignore"):
        h = _mix(labels.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15))
        arc = np.zeros(len(columns[0]), dtype=np.uint64)
        for k, col in enumerate(columns):
            arc = _mix(arc ^ _mix(col.astype(np.uint64) + np.uint64(k + 1)))
        sums = np.zeros(Q, dtype=np.uint64)
        np.add.at(sums, np.repeat(np.arange(Q), np.diff(indptr)), arc)
        h = _mix(h ^ sums) ^ _mix(np.diff(indptr).astype(np.uint64))
    _, first, ids = np.unique(h, return_index=True, return_inverse=True)
    ids = ids.reshape(-1)
    rep = first[ids]  # each state's group representative
    deg = np.diff(indptr)
    ok = bool(((deg == deg[rep]) & (labels == labels[rep])).all())
    if ok:
        pos = np.arange(len(columns[0])) - np.repeat(indptr[:-1], deg)
        mate = np.repeat(indptr[rep], deg) + pos
        ok = all(np.array_equal(col, col[mate]) for col in columns)
    if not ok:  # a collision: group exactly
        rows = {}
        out = np.empty(Q, dtype=np.int64)
        for q in range(Q):
            key = (int(labels[q]), *(tuple(col[indptr[q]: indptr[q + 1]].tolist()) for col in columns))
            out[q] = rows.setdefault(key, len(rows))
        return out
    # renumber groups by first appearance
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[ids].astype(np.int64)


# ---------------------------------------------------------------------- the walk
Step = Callable[[np.ndarray, np.ndarray], np.ndarray]


def walk_trie(
    step: Step, node_symbol: np.ndarray, trie: VocabTrie, sources: np.ndarray, visited: list | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Walk the trie from each of ``sources`` (DFA states) at once, one level at a time.

    ``step(states, symbols)`` gives next states (-1 = reject, and a symbol -1 rejects);
    ``node_symbol`` (N,) is the symbol on the arc into each trie node. Only live
    (state, node) pairs are carried. Returns the arcs ``(src, token, dst)`` of every
    token whose whole surface survives. ``visited``, if given, receives arrays of every
    state the walk passes through (token boundaries and mid-token states alike).
    """
    origin = sources.astype(np.int64)  # the source each live pair started from
    cur = origin.copy()  # the DFA state it has reached
    node = np.zeros(len(origin), dtype=np.int64)  # the trie node it has reached
    srcs, toks, dsts = [], [], []

    def emit(q0, state, nd):
        idx, counts = expand(trie.end_start[nd], trie.end_start[nd + 1] - trie.end_start[nd])
        if len(idx):
            srcs.append(np.repeat(q0, counts))
            toks.append(trie.end_token[idx])
            dsts.append(np.repeat(state, counts))

    emit(origin, cur, node)  # the empty surface stays put
    while len(node):
        child, counts = expand(trie.child_start[node], trie.child_start[node + 1] - trie.child_start[node])
        if not len(child):
            break
        rep = np.repeat(np.arange(len(node)), counts)
        state = step(cur[rep], node_symbol[child])
        alive = state >= 0
        origin, cur, node = origin[rep][alive], state[alive], child[alive]
        if visited is not None:
            visited.append(np.unique(cur))
        emit(origin, cur, node)
    if not srcs:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return np.concatenate(srcs), np.concatenate(toks), np.concatenate(dsts)


def explore(
    step: Step, final: Callable[[np.ndarray], np.ndarray], node_symbol: np.ndarray, trie: VocabTrie, num_tokens: int,
    visited: list | None = None, seeds: np.ndarray | None = None,
) -> tuple[TokenArcs, np.ndarray]:
    """The token-level DFA from state 0: breadth-first over DFA states, each frontier
    walked through the trie at once, starting from ``seeds`` (default: state 0 alone;
    more seeds — states likely to be reached — mean fewer, larger walks). States are
    renumbered in discovery order (seeds first, in order; state 0 must be the first
    seed). Also returns the original state of each new number. The caller trims."""
    seeds = np.zeros(1, dtype=np.int64) if seeds is None else np.asarray(seeds, dtype=np.int64)
    order = np.argsort(seeds, kind="stable")
    seen, new_id = seeds[order], order.astype(np.int64)  # original states found so far, sorted, and their new numbers
    found = [seeds.copy()]  # original states in discovery order
    frontier, count = seeds.copy(), len(seeds)
    srcs, toks, dsts = [], [], []
    while len(frontier):
        src, tok, dst = walk_trie(step, node_symbol, trie, frontier, visited)
        srcs.append(src), toks.append(tok), dsts.append(dst)
        cand = np.unique(dst)
        hit = seen[np.minimum(np.searchsorted(seen, cand), len(seen) - 1)] == cand
        frontier = cand[~hit]
        found.append(frontier)
        seen = np.concatenate([seen, frontier])
        new_id = np.concatenate([new_id, np.arange(count, count + len(frontier))])
        order = np.argsort(seen, kind="stable")
        seen, new_id = seen[order], new_id[order]
        count += len(frontier)

    def relabel(x: np.ndarray) -> np.ndarray:
        return new_id[np.searchsorted(seen, x)]

    src, tok, dst = (np.concatenate(x) for x in (srcs, toks, dsts))
    original = np.concatenate(found)
    return TokenArcs.from_triples(relabel(src), tok, relabel(dst), final(original), num_tokens), original


def symbol_classes(dfa: CharDFA, trie: VocabTrie) -> np.ndarray:
    """(N,) the character class of each trie node's symbol (code points; OTHER for
    characters outside the DFA's alphabet)."""
    codes, inv = np.unique(trie.symbol, return_inverse=True)
    cls = np.array([dfa.partition.class_of.get(chr(c), OTHER) if c >= 0 else -1 for c in codes.tolist()], dtype=np.int64)
    return cls[inv.reshape(-1)]


@dataclass
class TokenWalker:
    """Steps a token-level DFA without storing its arcs: each token's symbols (its
    characters, or its bytes) are read through a symbol-level DFA.

    Attributes:
        table: (S, C) int32 next symbol state, -1 = reject.
        columns: (A,) int16 the table column of each symbol of the vocabulary's
            alphabet (-1: rejected from every state).
        enter: (Q,) int64 a symbol state standing for each token state.
        leave: (S,) int64 the token state of a symbol state reached at a token
            boundary (-1: no live token state there).
        unk_next: (Q,) int64 where ``<unk>`` goes from each token state (character
            vocabularies), or None.
    """

    table: np.ndarray
    columns: np.ndarray
    enter: np.ndarray
    leave: np.ndarray
    unk_next: np.ndarray | None = None

    def nbytes(self) -> int:
        parts = [self.table, self.columns, self.enter, self.leave] + ([self.unk_next] if self.unk_next is not None else [])
        return sum(p.nbytes for p in parts)

    def arcs(self, trie: VocabTrie, final: np.ndarray, unk: int | None) -> TokenArcs:
        """Every arc, recomputed by walking the trie from each token state."""
        table = self.table
        cols = np.full(trie.num_nodes, -1, dtype=np.int64)
        if len(trie.alphabet):
            at = np.minimum(np.searchsorted(trie.alphabet, trie.symbol), len(trie.alphabet) - 1)
            cols = np.where(trie.symbol >= 0, self.columns[at], -1)

        def step(states: np.ndarray, c: np.ndarray) -> np.ndarray:
            return np.where(c >= 0, table[states, np.maximum(c, 0)], -1)

        src, tok, dst = walk_trie(step, cols.astype(np.int64), trie, self.enter)
        src, dst = _origin_of(self.enter, src), self.leave[dst]
        keep = dst >= 0
        src, tok, dst = src[keep], tok[keep], dst[keep]
        if self.unk_next is not None and unk is not None:
            has = np.nonzero(self.unk_next >= 0)[0]
            src, tok, dst = np.concatenate([src, has]), np.concatenate([tok, np.full(len(has), unk)]), np.concatenate([dst, self.unk_next[has]])
        return TokenArcs.from_triples(src, tok, dst, final, len(trie.token_len))


class TokenStepper:
    """A :class:`TokenWalker` laid out for the per-token step in NumPy: a batch of
    (state, token) pairs advances with one gather per symbol position of the longest
    token in the batch (:meth:`step`), a single pair in plain Python over memoryviews
    (:meth:`next_state`); no torch, no per-row Python work in the batch.

    The symbol table gets two extra columns, "pad" (stay put: a shorter token has ended)
    and "reject", and a last row, the sink, that rejects everything; a rejected state is
    -1, so ``s * W + column`` wraps to the sink row and stays there: a symbol step is
    ``s = flat[s * W + column]`` whatever happened before. The walker's ``table`` becomes
    a view of this one (the same values, no second copy).

    Attributes:
        flat: ((S + 1) * W,) the extended table, W = C + 2 (int32 unless too large).
        width: W.
        enter: (Q + 1,) int64 the symbol state standing for each token state; entry Q
            (the rejected state) is -1.
        leave: (S + 1,) int64 the token state of each symbol state; the last entry (read
            by -1) is -1.
        columns: (A + 1,) the table column of each vocabulary symbol, "pad" at index A
            (so the trie's -1 padding after a token's end reads as "stay put").
        symbols: (V, L) the vocabulary's token symbols (the trie's, shared).
        length: (V,) each token's symbol count; special: (V,) tokens that reject (a
            character vocabulary's ``<unk>`` goes by ``unk_next`` instead).
    """

    def __init__(self, walker: TokenWalker, trie: VocabTrie, unk: int | None = None):
        table = walker.table
        S, C = table.shape
        W = C + 2
        full = np.empty((S + 1, W), dtype=np.int32 if (S + 1) * W < 2**31 else np.int64)
        full[:S, :C] = table
        full[:S, C] = np.arange(S)  # pad: stay
        full[:, C + 1] = -1  # reject
        full[S, :] = -1  # the sink: what -1 reads
        walker.table = full[:S, :C]  # the same values, one copy
        self.flat, self.width = full.reshape(-1), W
        Q = len(walker.enter)
        self.enter = np.append(walker.enter, -1).astype(np.int64)
        self.leave = np.append(walker.leave, -1).astype(np.int64)
        self.columns = np.append(np.where(walker.columns >= 0, walker.columns, C + 1), C).astype(np.int64)
        self.symbols, self.length = trie.token_symbols, trie.token_len
        self.special = trie.special.copy()
        self.num_states, self.num_tokens = Q, len(trie.token_len)
        self.unk = unk if walker.unk_next is not None else None
        self.unk_next = None if self.unk is None else np.append(walker.unk_next, -1).astype(np.int64)
        if self.unk is not None:
            self.special[self.unk] = False  # handled apart
        self._special = self.special.tolist()
        self._symbols = token_symbol_tuples(trie)  # shared by every automaton over the vocabulary
        self._column_list = self.columns.tolist()
        self._views()

    def _views(self) -> None:
        """The single-pair path's memoryviews (plain Python ints without numpy scalars)."""
        self._flat, self._enter, self._leave = (memoryview(a) for a in (self.flat, self.enter, self.leave))

    def __getstate__(self) -> dict:  # memoryviews do not pickle or deep-copy: rebuilt on load
        return {k: v for k, v in self.__dict__.items() if k not in ("_flat", "_enter", "_leave")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._views()

    def nbytes(self) -> int:
        """Bytes held beyond the walker's own tables (its ``table`` is a view of ``flat``;
        the vocabulary's symbols are shared)."""
        extra = self.flat.nbytes - self.flat.itemsize * (self.width - 2) * (len(self.leave) - 1)
        return extra + sum(a.nbytes for a in (self.enter, self.leave, self.columns)) + (0 if self.unk_next is None else self.unk_next.nbytes)

    def step(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Next token states for states and tokens (int arrays, broadcast together):
        -1 where the state is -1, the token is outside ``0..V-1``, a special token, or
        rejected."""
        states, tokens = np.asarray(states, dtype=np.int64), np.asarray(tokens, dtype=np.int64)
        if states.shape != tokens.shape:
            states, tokens = np.broadcast_arrays(states, tokens)
        shape = states.shape
        if states.size == 1:  # one pair: the plain-Python path has no per-array overhead
            return np.full(shape, self.next_state(int(states.reshape(-1)[0]), int(tokens.reshape(-1)[0])), dtype=np.int64)
        q, t = np.ascontiguousarray(states).reshape(-1), np.ascontiguousarray(tokens).reshape(-1)
        ok = (q.view(np.uint64) < self.num_states) & (t.view(np.uint64) < self.num_tokens)  # negatives wrap to huge
        all_ok = bool(ok.all())
        if not all_ok:
            q, t = np.where(ok, q, self.num_states), np.where(ok, t, 0)
        s = self.enter[q]
        L = int(self.length[t].max()) if len(t) else 0
        if L:
            cols = self.columns[self.symbols[t, :L]]  # (n, L); -1 padding reads the pad column
            W, flat = self.width, self.flat
            for i in range(L):
                s = flat[s * W + cols[:, i]]  # -1 * W + column: the sink row
        out = self.leave[s]
        reject = self.special[t]
        if not all_ok:
            reject |= ~ok
        out[reject] = -1
        if self.unk is not None:
            at = (t == self.unk) & ok
            out[at] = self.unk_next[q[at]]
        return out.reshape(shape)

    def next_state(self, state: int, token: int) -> int:
        """One (state, token) pair in plain Python: the next state, or -1."""
        if not (0 <= state < self.num_states and 0 <= token < self.num_tokens):
            return -1
        if self._special[token]:
            return -1
        if token == self.unk:
            return int(self.unk_next[state])
        s, flat, columns, W = self._enter[state], self._flat, self._column_list, self.width
        for a in self._symbols[token]:
            s = flat[s * W + columns[a]]
        return self._leave[s]


def _origin_of(enter: np.ndarray, symbol_states: np.ndarray) -> np.ndarray:
    """The token state whose ``enter`` is each of ``symbol_states`` (enter is injective)."""
    order = np.argsort(enter)
    return order[np.searchsorted(enter[order], symbol_states)]


def token_index(dfa: CharDFA, vocab: Vocab, check: Callable[[], None] | None = None) -> tuple[TokenArcs, TokenWalker]:
    """The minimal trim token-level DFA of ``dfa`` over ``vocab`` (start state 0): its
    arcs, and a :class:`TokenWalker` that steps it without them.

    Character and word vocabularies walk characters; byte vocabularies walk UTF-8
    bytes through a :class:`~neurosym.compile.dfa.ByteView` (a state may sit inside a
    character). Special tokens reject, except a character vocabulary's ``<unk>``,
    which stands for "some character not in the vocabulary" and moves wherever all
    such characters agree.
    """
    trie = vocab_trie(vocab)
    unk_targets = None
    if vocab.kind == "bytes":
        view = ByteView.of(dfa)
        visited: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
        between = np.arange(dfa.num_states, dtype=np.int64) * view.dec_next.shape[0]  # (q, between characters): one walk covers most
        arcs, original = explore(view.step, view.final, trie.symbol, trie, len(vocab), visited, seeds=between)
        states = np.unique(np.concatenate(visited + [original]))  # every byte state a token walk meets
        raw = view.step(states[:, None], np.arange(256)[None, :])
        pos = np.minimum(np.searchsorted(states, raw), len(states) - 1)
        table = np.where((raw >= 0) & (states[pos] == raw), pos, -1)
        symbol_state = np.searchsorted(states, original)  # explored id -> table row
        columns_of_symbol = trie.alphabet  # a byte is its own column before merging
    else:
        trans = dfa.trans

        def step(states: np.ndarray, cls: np.ndarray) -> np.ndarray:
            return np.where(cls >= 0, trans[states, np.maximum(cls, 0)], -1)

        src, tok, dst = walk_trie(step, symbol_classes(dfa, trie), trie, np.arange(dfa.num_states))
        if vocab.kind == "char" and vocab.unk is not None:
            unk_targets = unknown_char_targets(dfa, vocab)
            q = np.nonzero(unk_targets >= 0)[0]
            src, tok, dst = np.concatenate([src, q]), np.concatenate([tok, np.full(len(q), vocab.unk)]), np.concatenate([dst, unk_targets[q]])
        arcs = TokenArcs.from_triples(src, tok, dst, dfa.final, len(vocab))
        table = trans
        symbol_state = np.arange(dfa.num_states)
        columns_of_symbol = np.array([dfa.partition.class_of.get(chr(c), OTHER) for c in trie.alphabet.tolist()], dtype=np.int64)
    trimmed, trim_map = arcs.trimmed_with_map()
    final_arcs, min_map = trimmed.minimized_with_map(check)
    token_state = np.where(trim_map >= 0, min_map[np.maximum(trim_map, 0)], -1)  # arcs' state -> final state
    # merge identical columns so the table stays narrow
    uniq_cols, col_of = np.unique(table.T, axis=0, return_inverse=True)
    col_of = col_of.reshape(-1)
    columns = col_of[columns_of_symbol].astype(np.int16 if len(uniq_cols) < 2**15 else np.int32)
    leave = np.full(table.shape[0], -1, dtype=np.int64)
    leave[symbol_state] = token_state
    Q = final_arcs.num_states
    enter = np.full(Q, -1, dtype=np.int64)
    alive = token_state >= 0
    np.maximum.at(enter, token_state[alive], symbol_state[alive])  # any member of a merged block will do
    unk_next = None
    if unk_targets is not None:
        unk_next = np.where(unk_targets[enter] >= 0, leave[np.maximum(unk_targets[enter], 0)], -1)
    walker = TokenWalker(np.ascontiguousarray(uniq_cols.T).astype(np.int32), columns, enter, leave, unk_next)
    return final_arcs, walker


def token_arcs(dfa: CharDFA, vocab: Vocab) -> TokenArcs:
    """The arcs of :func:`token_index` alone."""
    return token_index(dfa, vocab)[0]


def unknown_char_targets(dfa: CharDFA, vocab: Vocab) -> np.ndarray:
    """Where ``<unk>`` goes from each state: the common target of every character class
    a character outside the vocabulary could be in, or -1 if they disagree."""
    known = {s for s in vocab.surfaces if isinstance(s, str)}
    classes = {OTHER} | {k for c, k in dfa.partition.class_of.items() if c not in known}
    cols = dfa.trans[:, sorted(classes)]
    agree = (cols == cols[:, :1]).all(axis=1)
    return np.where(agree, cols[:, 0], -1)
