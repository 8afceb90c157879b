"""Determinisation and minimisation of character automata, and their UTF-8 byte form.

A :class:`CharDFA` reads characters through an alphabet *partition*: every character
belongs to exactly one class; characters the automaton never mentions share class 0
(``OTHER``). ``trans`` is a (Q, K) int array over classes, -1 meaning reject. DFAs
here are always trim and minimal, with states numbered in breadth-first order from
the start state (state 0), so two equal languages give identical tables.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from neurosym.compile.nfa import NFA, Label
from neurosym.errors import CompileError

S = TypeVar("S", bound=Hashable)  # a subset of NFA states, as a hashable key

OTHER = 0  # the class of every character the automaton does not mention
DEFAULT_VOCAB_CAP = 10_000  # strings a regex terminal may contribute to a default vocabulary
_OTHER_CANDIDATES = "aZ0 _-.#~\u00a4\u2603"  # tried in order to show a character of class 0
DEFAULT_MAX_STATES = 10_000
DEFAULT_TIME_LIMIT = 30.0  # seconds


@dataclass
class Partition:
    """Characters -> class ids. ``members[k]`` lists the explicit characters of class k
    (class 0 also holds every unmentioned character)."""

    class_of: dict[str, int]
    members: list[list[str]]

    def __len__(self) -> int:
        return len(self.members)

    def classify(self, text: str) -> list[int]:
        get = self.class_of.get
        return [get(c, OTHER) for c in text]

    def example(self, k: int, rng: np.random.Generator) -> str:
        """A character of class ``k`` (for class 0, possibly one the automaton never mentions)."""
        if k == OTHER:
            unmentioned = [c for c in _OTHER_CANDIDATES if c not in self.class_of]
            return str(rng.choice(self.members[OTHER] + unmentioned[:1]))
        return str(rng.choice(self.members[k]))


def partition_labels(labels: list[Label]) -> tuple[Partition, list[np.ndarray]]:
    """The coarsest partition of all characters that every label is a union of.

    Returns the partition and, per label, the array of class ids it contains.
    """
    negated_bits = sum(1 << i for i, (_, neg) in enumerate(labels) if neg)
    signature: dict[str, int] = {}
    for i, (chars, _) in enumerate(labels):
        bit = 1 << i
        for c in chars:
            signature[c] = signature.get(c, 0) | bit
    # a character's membership pattern: in positive labels that list it, in negated labels that don't
    sig_class: dict[int, int] = {negated_bits: OTHER}
    members: list[list[str]] = [[]]
    class_of: dict[str, int] = {}
    for c in sorted(signature):
        sig = (signature[c] & ~negated_bits) | (negated_bits & ~signature[c])
        k = sig_class.get(sig)
        if k is None:
            k = sig_class[sig] = len(members)
            members.append([])
        members[k].append(c)
        class_of[c] = k
    sig_of = {k: s for s, k in sig_class.items()}
    label_classes = [
        np.array([k for k in range(len(members)) if sig_of[k] >> i & 1], dtype=np.int64) for i in range(len(labels))
    ]
    return Partition(class_of, members), label_classes


def subset_construction(
    first: S,
    moves: Callable[[S], Iterable[tuple[Sequence[int], S]]],
    n_symbols: int,
    max_subsets: int,
    too_many: Exception,
    check: Callable[[int], None] | None = None,
) -> tuple[list[S], np.ndarray]:
    """The subset construction's worklist, written once: from the subset ``first``,
    ``moves(subset)`` gives ``(symbols, target subset)`` pairs (a subset with no move on a
    symbol rejects it). Returns the subsets in discovery order (``first`` is 0) and the
    transition table (n, n_symbols), -1 = reject. More than ``max_subsets`` subsets raise
    ``too_many``; ``check(n)`` runs before subset n is expanded (e.g. a time limit)."""
    index = {first: 0}
    subsets = [first]
    rows: list[np.ndarray] = []
    for n, subset in enumerate(subsets):
        if check is not None:
            check(n)
        row = np.full(n_symbols, -1, dtype=np.int64)
        for symbols, target in moves(subset):
            j = index.get(target)
            if j is None:
                if len(subsets) >= max_subsets:
                    raise too_many
                j = index[target] = len(subsets)
                subsets.append(target)
            row[list(symbols)] = j
        rows.append(row)
    return subsets, np.stack(rows)


def determinize(
    nfa: NFA,
    start: int,
    finals: set[int],
    max_states: int = DEFAULT_MAX_STATES,
    time_limit: float = DEFAULT_TIME_LIMIT,
    what: str = "pattern",
    stated_limit: float | None = None,
) -> "CharDFA":
    """Subset construction, then minimisation.

    The construction may hold at most ``max_states + len(nfa)`` subsets (a deterministic
    NFA such as a trie never needs more than ``len(nfa)``); the minimal DFA at most
    ``max_states``. Either limit, or ``time_limit`` seconds, raises :class:`CompileError`
    (whose message quotes ``stated_limit``, the user's whole budget, when the caller has
    already spent part of it).
    """
    t0 = time.monotonic()
    labels: list[Label] = []
    label_id: dict[Label, int] = {}
    arc_lists: list[list[tuple[int, int]]] = []
    for arcs in nfa.arcs:
        row = []
        for lab, dst in arcs:
            li = label_id.get(lab)
            if li is None:
                li = label_id[lab] = len(labels)
                labels.append(lab)
            row.append((li, dst))
        arc_lists.append(row)
    part, label_classes = partition_labels(labels)
    K = len(part)

    closure_cache: dict[int, frozenset[int]] = {}

    def closure(states) -> frozenset[int]:
        out: set[int] = set()
        stack = list(states)
        while stack:
            s = stack.pop()
            if s in out:
                continue
            cached = closure_cache.get(s)
            if cached is not None:
                out |= cached
                continue
            out.add(s)
            stack.extend(nfa.eps[s])
        return frozenset(out)

    def out_of_time(stage: str) -> CompileError:
        return CompileError(f"{what}: {stage} exceeded the time limit of {stated_limit if stated_limit is not None else time_limit:g} s")

    for s in range(len(nfa)):  # memoise single-state closures (cheap, and reused everywhere)
        if s % 4096 == 0 and time.monotonic() - t0 > time_limit:
            raise out_of_time("determinisation")
        closure_cache[s] = closure([s])

    def moves(subset: frozenset[int]) -> Iterator[tuple[list[int], frozenset[int]]]:
        by_class: dict[int, set[int]] = {}
        for s in subset:
            for li, dst in arc_lists[s]:
                for k in label_classes[li].tolist():
                    by_class.setdefault(k, set()).add(dst)
        by_target: dict[frozenset[int], list[int]] = {}
        for k, dsts in by_class.items():
            by_target.setdefault(frozenset(dsts), []).append(k)
        for dsts, ks in by_target.items():
            yield ks, frozenset().union(*(closure_cache[d] for d in dsts))

    def check(n: int) -> None:
        if n % 256 == 0 and time.monotonic() - t0 > time_limit:
            raise out_of_time("determinisation")

    def check_minimisation() -> None:
        if time.monotonic() - t0 > time_limit:
            raise out_of_time("minimisation")

    too_many = CompileError(
        f"{what}: the DFA exceeds the state cap of {max_states:,} states "
        "during determinisation; simplify the pattern or raise max_states"
    )
    subsets, rows = subset_construction(closure_cache[start], moves, K, max_states + len(nfa), too_many, check)
    trans = rows
    final = np.array([bool(s & finals) for s in subsets])
    dfa = CharDFA(trans, final, part)
    dfa = dfa.minimized(check_minimisation)
    if dfa.num_states > max_states:
        raise CompileError(f"{what}: the minimal DFA has {dfa.num_states:,} states, over the state cap of {max_states:,}")
    return dfa


def minimize_trie(children: dict[tuple[int, int], int], final: Sequence[bool], K: int, max_states: int | None = None,
                  check: Callable[[], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The minimal DFA of a trie, in time linear in its size (Revuz's register of
    equivalent states), where Moore's refinement (:func:`minimize_table`) takes one round
    per level: quadratic on a long word. ``children``: ``{(state, class): child}`` with
    every child numbered after its parent (as a trie is built), state 0 the root;
    ``final`` (n,); ``K`` classes. Every state of a trie leads to a word's end, so the
    result is trim; it is numbered as :func:`minimize_table` numbers its result (the start
    0, the rest in breadth-first order, classes ascending). ``max_states``: more distinct
    states than that raises ``OverflowError`` at once; ``check()`` runs every 4,096 states."""
    n = len(final)
    rows: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for (state, k), child in children.items():
        rows[state].append((k, child))
    canon = [0] * n
    register: dict[tuple, int] = {}
    for state in range(n - 1, -1, -1):  # children before parents: their classes are known
        if check is not None and state % 4096 == 0:
            check()
        row = rows[state]
        row.sort()
        key = (bool(final[state]), tuple((k, canon[c]) for k, c in row))
        got = register.get(key)
        if got is None:
            got = register[key] = len(register)
            if max_states is not None and got >= max_states:
                raise OverflowError(got + 1)
        canon[state] = got
    table = [key for key, _ in sorted(register.items(), key=lambda kv: kv[1])]
    order, new_id = [canon[0]], {canon[0]: 0}  # breadth-first from the start, classes ascending
    for old in order:
        for _, child in table[old][1]:
            if child not in new_id:
                new_id[child] = len(order)
                order.append(child)
    trans = np.full((len(order), K), -1, dtype=np.int64)
    out_final = np.zeros(len(order), dtype=bool)
    for new, old in enumerate(order):
        is_final, arcs = table[old]
        out_final[new] = is_final
        for k, child in arcs:
            trans[new, k] = new_id[child]
    return trans, out_final


def minimize_table(
    trans: np.ndarray, final: np.ndarray, start: int = 0, check: Callable[[], None] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Trim and minimise a DFA table (Q, K) with -1 = reject (Moore's refinement, vectorised).

    Returns ``(trans, final)`` of the minimal trim DFA with the start as state 0 and the
    rest in breadth-first order. The empty language gives one non-final state with no arcs.
    ``check()`` runs before every refinement round (a chain of n states takes n rounds),
    e.g. to enforce a time limit by raising.
    """
    Q, K = trans.shape
    sink = Q
    full = np.vstack([np.where(trans < 0, sink, trans), np.full((1, K), sink)])
    # equal columns (symbols every state treats alike: the bytes of one class) refine alike
    col_ids = row_ids(np.ascontiguousarray(full.T))
    _, one_col = np.unique(col_ids, return_index=True)
    narrow = full[:, one_col] if len(one_col) < K else full
    fin = np.append(final.astype(bool), False)
    block = fin.astype(np.int64)
    n_blocks = len(np.unique(block))
    while True:
        if check is not None:
            check()
        sig = np.concatenate([block[:, None], block[narrow]], axis=1)
        new_block = row_ids(sig)
        n_new = int(new_block.max()) + 1
        if n_new == n_blocks:
            break
        block, n_blocks = new_block, n_new
    dead = block[sink]
    # quotient automaton over blocks, keeping only blocks reachable from start that are not dead
    q_trans = np.full((n_blocks, K), -1, dtype=np.int64)
    q_trans[block] = block[full]
    q_final = np.zeros(n_blocks, dtype=bool)
    q_final[block] = fin
    q_trans[q_trans == dead] = -1
    order = breadth_first(q_trans, int(block[start]))
    if order[0] == dead:  # empty language
        return np.full((1, K), -1, dtype=np.int64), np.zeros(1, dtype=bool)
    remap = np.full(n_blocks + 1, -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    out = q_trans[order]
    out = np.where(out >= 0, remap[out], -1)
    return out, q_final[order]


MINIMIZE_BYTES_UP_TO = 4096  # byte tables of more states are trimmed (trim_table), not minimised
KEEP_BYTE_TABLE_BYTES = 1 << 22  # a byte table up to this size is kept with its CharDFA (built once)


def trim_table(trans: np.ndarray, final: np.ndarray, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The states of a DFA table (Q, K) (-1 = reject) reachable from ``start`` and from
    which a final state is reachable, renumbered with the start as 0 (the empty language:
    one non-final state with no arcs): what :func:`minimize_table` keeps, without merging
    equivalent states; linear in the arcs (graph searches, no refinement rounds)."""
    import scipy.sparse as sp  # lazy: `neurosym check x.regex` loads no scipy
    from scipy.sparse.csgraph import breadth_first_order  # lazy: as above

    Q, K = trans.shape
    src, sym = np.nonzero(trans >= 0)
    dst = trans[src, sym]
    graph = sp.csr_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(Q + 1, Q + 1))
    reach = np.zeros(Q + 1, dtype=bool)
    reach[breadth_first_order(graph, start, directed=True, return_predecessors=False)] = True
    finals = np.nonzero(final)[0]
    back = sp.csr_matrix((np.ones(len(src) + len(finals), dtype=np.int8), (np.concatenate([dst, np.full(len(finals), Q)]),
                                                                          np.concatenate([src, finals]))), shape=(Q + 1, Q + 1))
    alive = np.zeros(Q + 1, dtype=bool)
    alive[breadth_first_order(back, Q, directed=True, return_predecessors=False)] = True
    keep = reach[:Q] & alive[:Q]
    if not keep[start]:
        return np.full((1, K), -1, dtype=np.int64), np.zeros(1, dtype=bool)
    order = np.concatenate([[start], np.nonzero(keep & (np.arange(Q) != start))[0]])
    remap = np.full(Q, -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    out = trans[order]
    return np.where(out >= 0, remap[np.maximum(out, 0)], -1), final[order].astype(bool)


def breadth_first(trans: np.ndarray, start: int) -> np.ndarray:
    """The states reachable from ``start`` in a table (Q, K) (-1 = no arc), in
    breadth-first order (columns in order within a state): one vectorised step per level."""
    seen = np.zeros(trans.shape[0], dtype=bool)
    seen[start] = True
    levels = [np.array([start], dtype=np.int64)]
    while len(levels[-1]):
        nxt = trans[levels[-1]].reshape(-1)
        nxt = nxt[nxt >= 0]
        _, first = np.unique(nxt, return_index=True)
        nxt = nxt[np.sort(first)]  # first appearance: the order a FIFO queue would give
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        levels.append(nxt)
    return np.concatenate(levels)


def row_ids(rows: np.ndarray) -> np.ndarray:
    """Ids of the distinct rows of an (N, M) int array: equal rows get equal ids (and
    distinct rows distinct ids). Narrow tables use a lexsort; wide ones a random 64-bit
    projection of each row, checked exactly against each group's first row (falling back
    to ``np.unique(axis=0)`` on a collision, never seen in practice)."""
    if rows.shape[1] <= 64:
        order = np.lexsort(rows.T[::-1])
        ordered = rows[order]
        starts = np.concatenate([[0], np.any(ordered[1:] != ordered[:-1], axis=1).cumsum()])
        ids = np.empty(len(rows), dtype=np.int64)
        ids[order] = starts
        return ids
    weights = np.random.default_rng(0x5EED).integers(1, 2**63, size=rows.shape[1], dtype=np.uint64) | np.uint64(1)
    with np.errstate(over="ignore"):
        h = (rows.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    _, first, ids = np.unique(h, return_index=True, return_inverse=True)
    ids = ids.reshape(-1)
    if np.array_equal(rows, rows[first[ids]]):
        return ids
    _, ids = np.unique(rows, axis=0, return_inverse=True)
    return ids.reshape(-1)


@dataclass
class CharDFA:
    """A DFA over character classes: ``trans`` (Q, K), ``final`` (Q,), start state 0."""

    trans: np.ndarray
    final: np.ndarray
    partition: Partition

    @property
    def num_states(self) -> int:
        return self.trans.shape[0]

    def minimized(self, check: Callable[[], None] | None = None) -> "CharDFA":
        """The minimal trim DFA (``check`` as in :func:`minimize_table`)."""
        trans, final = minimize_table(self.trans, self.final, check=check)
        return CharDFA(trans, final, self.partition).classes_merged()

    def classes_merged(self) -> "CharDFA":
        """This DFA with the classes whose columns are identical merged into one (e.g.
        'a' and 'b' in (a|b)*); the other class stays at index 0."""
        trans, final = self.trans, self.final
        cols, inverse = np.unique(trans.T, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        if len(cols) == trans.shape[1]:
            return CharDFA(trans, final, self.partition)
        # keep OTHER's merged class at index 0 and the rest in first-appearance order
        order: list[int] = []
        for k in [OTHER, *range(trans.shape[1])]:
            if int(inverse[k]) not in order:
                order.append(int(inverse[k]))
        new_id = {old: i for i, old in enumerate(order)}
        members: list[list[str]] = [[] for _ in order]
        class_of: dict[str, int] = {}
        for k, chars in enumerate(self.partition.members):
            nk = new_id[int(inverse[k])]
            members[nk].extend(chars)
        for nk, chars in enumerate(members):
            chars.sort()
            for c in chars:
                class_of[c] = nk
        first_col = {int(g): k for k, g in reversed(list(enumerate(inverse)))}
        new_trans = np.stack([trans[:, first_col[old]] for old in order], axis=1)
        return CharDFA(new_trans, final, Partition(class_of, members))

    def accepts(self, text: str) -> bool:
        s = 0
        for k in self.partition.classify(text):
            s = int(self.trans[s, k])
            if s < 0:
                return False
        return bool(self.final[s])

    def sample(self, n: int, max_len: int = 32, seed: int = 0, stop_prob: float = 0.3) -> list[str]:
        """``n`` random accepted strings of at most ``max_len`` characters."""
        rng = np.random.default_rng(seed)
        paths = sample_paths(self.trans, self.final, n, max_len, seed, stop_prob)
        return ["".join(self.partition.example(k, rng) for k in path) for path in paths]

    def shortest_length(self) -> int | None:
        """The length of the shortest accepted string (None: the language is empty)."""
        d = int(_distance_to_final(self.trans, self.final)[0])
        return d if d <= self.trans.shape[0] else None

    def byte_dfa(self) -> tuple[np.ndarray, np.ndarray]:
        """The same language over UTF-8 bytes as a minimal table: ``(trans (Qb, 256),
        final (Qb,))``, start 0 (see :class:`ByteView` for the states); built once per DFA
        (read-only arrays)."""
        cached = self.__dict__.get("_byte_dfa")
        if cached is None:
            view = ByteView.of(self)
            states = np.arange(view.num_states)
            trans = view.step(states[:, None], np.arange(256)[None, :])
            # a big table (a long counter: a rounds-per-state refinement) is trimmed, not minimised
            cached = (minimize_table if view.num_states <= MINIMIZE_BYTES_UP_TO else trim_table)(trans, view.final(states))
            for a in cached:
                a.setflags(write=False)
            if cached[0].nbytes <= KEEP_BYTE_TABLE_BYTES:  # kept with the DFA (the caches of DFAs stay small)
                self.__dict__["_byte_dfa"] = cached
        return cached


@dataclass
class ByteView:
    """A :class:`CharDFA` read byte by byte, without building the product table.

    A byte state ``s = q * Nd + n`` pairs the character state ``q`` with the node ``n``
    of an incremental UTF-8 decoder (``n = 0``: between characters), so a byte string
    may stop mid-character (as byte-level BPE tokens do). Only well-formed UTF-8 is read
    (see :func:`utf8_decoder`); any other byte string is rejected. Start state 0.
    """

    dfa: CharDFA
    dec_next: np.ndarray
    dec_emit: np.ndarray
    live: np.ndarray  # (Q * Nd,) bool: the character in progress can still be completed

    @classmethod
    def of(cls, dfa: CharDFA) -> "ByteView":
        nxt, emit = utf8_decoder(dfa.partition)
        Nd, K = nxt.shape[0], dfa.trans.shape[1]
        # completes[n, k]: some byte continuation from decoder node n completes a character of class k
        completes = np.zeros((Nd, K), dtype=bool)
        for _ in range(4):  # a UTF-8 character has at most 4 bytes
            n, b = np.nonzero(emit >= 0)
            completes[n, emit[n, b]] = True
            n, b = np.nonzero(nxt >= 0)
            np.logical_or.at(completes, n, completes[nxt[n, b]])
        live = ((dfa.trans >= 0).astype(np.int64) @ completes.T.astype(np.int64)) > 0  # (Q, Nd)
        live[:, 0] = True  # between characters: the character state itself is live
        return cls(dfa, nxt, emit, live.reshape(-1))

    @property
    def num_states(self) -> int:
        return self.dfa.num_states * self.dec_next.shape[0]

    def step(self, states: np.ndarray, byte: np.ndarray) -> np.ndarray:
        """Next byte states for states and bytes (broadcast; -1 in either gives -1)."""
        Nd = self.dec_next.shape[0]
        q, n = states // Nd, states % Nd
        b = np.maximum(byte, 0)
        nxt = self.dec_next[n, b]
        emit = self.dec_emit[n, b]
        after = np.where(emit >= 0, self.dfa.trans[q, np.maximum(emit, 0)], -1)
        out = np.where(nxt >= 0, q * Nd + nxt, np.where(after >= 0, after * Nd, -1))
        ok = (states >= 0) & (byte >= 0) & (out >= 0)
        return np.where(ok & self.live[np.maximum(out, 0)], out, -1)

    def final(self, states: np.ndarray) -> np.ndarray:
        Nd = self.dec_next.shape[0]
        return (states % Nd == 0) & self.dfa.final[states // Nd]


# The bytes that may follow a UTF-8 lead byte, where they are narrower than 80-BF (RFC
# 3629, table 3-7 of the Unicode standard): no overlong forms (E0, F0), no surrogates
# (ED), nothing above U+10FFFF (F4). Every later continuation byte is 80-BF.
FIRST_CONTINUATION = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}
CONTINUATION = (0x80, 0xBF)


def utf8_lead_need(b: int) -> int:
    """Continuation bytes a byte ``b`` asks for at the start of a character: 0 for ASCII,
    1-3 for a lead byte, -1 for a byte that never starts a character (80-C1, F5-FF)."""
    if b < 0x80:
        return 0
    if 0xC2 <= b < 0xE0:
        return 1
    if 0xE0 <= b < 0xF0:
        return 2
    if 0xF0 <= b < 0xF5:
        return 3
    return -1


def utf8_next_bytes(prefix: bytes) -> range:
    """The bytes that may extend ``prefix``, a proper non-empty prefix of a well-formed
    character's encoding."""
    lo, hi = FIRST_CONTINUATION.get(prefix[0], CONTINUATION) if len(prefix) == 1 else CONTINUATION
    return range(lo, hi + 1)


def utf8_decoder(part: Partition) -> tuple[np.ndarray, np.ndarray]:
    """An incremental decoder of well-formed UTF-8 as two (Nd, 256) tables.

    ``next[n, b]`` is the decoder node after byte ``b`` mid-character (or -1) and
    ``emit[n, b]`` the character class completed by ``b`` (or -1). Node 0 is "between
    characters"; other nodes are prefixes of the partition's explicit multi-byte
    characters, plus generic nodes for the rest: "r continuation bytes to come, the next
    in ``lo..hi``". The bytes read are exactly the well-formed UTF-8 strings (what
    ``bytes.decode("utf-8")`` accepts): no overlong forms, surrogates, code points
    above U+10FFFF, stray or missing continuation bytes.
    """
    prefix_node: dict[bytes, int] = {b"": 0}
    for c in part.class_of:
        try:
            enc = c.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no well-formed UTF-8 spells it
            continue
        for i in range(1, len(enc)):
            prefix_node.setdefault(enc[:i], len(prefix_node))
    generic: dict[tuple[int, int, int], int] = {}
    for key in [(r, *CONTINUATION) for r in (1, 2, 3)] + [(utf8_lead_need(b), lo, hi) for b, (lo, hi) in FIRST_CONTINUATION.items()]:
        generic[key] = len(prefix_node) + len(generic)
    Nd = len(prefix_node) + len(generic)
    nxt = np.full((Nd, 256), -1, dtype=np.int64)
    emit = np.full((Nd, 256), -1, dtype=np.int64)
    for b in range(256):
        need = utf8_lead_need(b)
        if need == 0:
            emit[0, b] = part.class_of.get(chr(b), OTHER)
        elif need > 0:
            nxt[0, b] = prefix_node.get(bytes([b]), generic[(need, *FIRST_CONTINUATION.get(b, CONTINUATION))])
    for prefix, node in prefix_node.items():
        if not prefix:
            continue
        need = utf8_lead_need(prefix[0]) - (len(prefix) - 1)
        for b in utf8_next_bytes(prefix):
            seq = prefix + bytes([b])
            if need == 1:
                emit[node, b] = part.class_of.get(seq.decode("utf-8"), OTHER)  # well-formed by construction
            else:
                nxt[node, b] = prefix_node.get(seq, generic[(need - 1, *CONTINUATION)])
    for (need, lo, hi), node in generic.items():
        span = np.arange(lo, hi + 1)
        if need == 1:
            emit[node, span] = OTHER  # a character the partition does not list explicitly
        else:
            nxt[node, span] = generic[(need - 1, *CONTINUATION)]
    return nxt, emit


def _joint_partition(a: Partition, b: Partition) -> tuple[Partition, np.ndarray, np.ndarray]:
    """The partition whose classes are the non-empty intersections of ``a``'s and ``b``'s,
    with each new class's class in ``a`` and in ``b``."""
    pairs: dict[tuple[int, int], int] = {(OTHER, OTHER): OTHER}
    members: list[list[str]] = [[]]
    class_of: dict[str, int] = {}
    for c in sorted(set(a.class_of) | set(b.class_of)):
        key = (a.class_of.get(c, OTHER), b.class_of.get(c, OTHER))
        k = pairs.get(key)
        if k is None:
            k = pairs[key] = len(members)
            members.append([])
        members[k].append(c)
        class_of[c] = k
    ka = np.zeros(len(members), dtype=np.int64)
    kb = np.zeros(len(members), dtype=np.int64)
    for (x, y), k in pairs.items():
        ka[k], kb[k] = x, y
    return Partition(class_of, members), ka, kb


def product(a: CharDFA, b: CharDFA, keep: str = "both", max_states: int = DEFAULT_MAX_STATES) -> CharDFA:
    """The minimal DFA of ``a`` ∩ ``b`` (``keep="both"``) or ``a`` minus ``b``
    (``keep="first"``): the reachable pairs of states, one vectorised step per level of
    the breadth-first search over every class at once. More than ``max_states`` pairs is
    a CompileError."""
    part, ka, kb = _joint_partition(a.partition, b.partition)
    K = len(part.members)
    sink_b = b.trans.shape[0]  # b's missing arcs go to a dead state (kept for the difference)
    tb = np.vstack([np.where(b.trans < 0, sink_b, b.trans), np.full((1, b.trans.shape[1]), sink_b)])
    fb = np.append(b.final.astype(bool), False)
    index = {(0, 0): 0}
    pairs = [(0, 0)]
    rows: list[np.ndarray] = []
    level = np.array([[0, 0]], dtype=np.int64)
    while len(level):
        na = a.trans[level[:, 0][:, None], ka[None, :]]  # (S, K)
        nb = tb[level[:, 1][:, None], kb[None, :]]
        alive = (na >= 0) & ((nb != sink_b) if keep == "both" else True)
        nxt = np.full(na.shape, -1, dtype=np.int64)
        new = []
        for s, k in zip(*np.nonzero(alive)):
            key = (int(na[s, k]), int(nb[s, k]))
            j = index.get(key)
            if j is None:
                j = index[key] = len(pairs)
                pairs.append(key)
                new.append(key)
                if len(pairs) > max_states:
                    raise CompileError(f"the product of two automata has more than {max_states} states")
            nxt[s, k] = j
        rows.append(nxt)
        level = np.array(new, dtype=np.int64).reshape(-1, 2)
    trans = np.vstack(rows) if rows else np.full((1, K), -1, dtype=np.int64)
    pa = np.array([p[0] for p in pairs])
    pb = np.array([p[1] for p in pairs])
    final = a.final[pa].astype(bool) & (fb[pb] if keep == "both" else ~fb[pb])
    return CharDFA(trans, final, part).minimized()


def sample_paths(
    delta: np.ndarray, final: np.ndarray, n: int, max_len: int, seed: int = 0, stop_prob: float = 0.3
) -> list[list[int]]:
    """Random accepted symbol sequences of a DFA table (Q, K) with start state 0.

    Each walk stops at a final state with probability ``stop_prob`` and only takes
    arcs from which a final state is still reachable within the remaining budget."""
    rng = np.random.default_rng(seed)
    dist = _distance_to_final(delta, final)
    if dist[0] > max_len:
        return []
    out = []
    for _ in range(n):
        q, seq = 0, []
        while True:
            left = max_len - len(seq)
            if final[q] and (left == 0 or rng.random() < stop_prob):
                break
            row = delta[q]
            ok = np.nonzero((row >= 0) & (dist[np.maximum(row, 0)] <= left - 1))[0]
            if len(ok) == 0:
                break
            t = int(rng.choice(ok))
            seq.append(t)
            q = int(row[t])
        out.append(seq)
    return out


def _distance_to_final(delta: np.ndarray, final: np.ndarray) -> np.ndarray:
    """Fewest tokens from each state to a final state (a large number if none)."""
    import scipy.sparse as sp  # lazy: `neurosym check x.regex` loads no scipy
    from scipy.sparse.csgraph import shortest_path  # lazy: as above

    Q = delta.shape[0]
    inf = np.iinfo(np.int64).max // 2
    src, sym = np.nonzero(delta >= 0)
    finals = np.nonzero(final)[0]
    # one breadth-first search backwards from a node joined to every final state
    back = sp.csr_matrix((np.ones(len(src) + len(finals)), (np.concatenate([delta[src, sym], np.full(len(finals), Q)]),
                                                             np.concatenate([src, finals]))), shape=(Q + 1, Q + 1))
    hops = shortest_path(back, indices=Q, unweighted=True, directed=True)[:Q]
    return np.where(np.isfinite(hops), np.nan_to_num(hops, posinf=0) - 1, inf).astype(np.int64)


def finite_strings(dfa, cap: int) -> list[str] | None:
    """Every string a character DFA accepts, if finitely many (at most ``cap``) and none
    needs "any other character" (class 0); else ``None``."""
    trans, final, members = dfa.trans, dfa.final, dfa.partition.members
    Q = trans.shape[0]
    state = np.zeros(Q, dtype=np.int8)  # 0 new, 1 on the path, 2 done
    count = np.zeros(Q, dtype=object)

    def visit(q: int) -> bool:  # False on a cycle or an OTHER arc
        state[q] = 1
        total = int(final[q])
        for k in np.nonzero(trans[q] >= 0)[0]:
            if k == OTHER:
                return False
            r = int(trans[q, k])
            if state[r] == 1 or (state[r] == 0 and not visit(r)):
                return False
            total += len(members[k]) * count[r]
        count[q] = total
        state[q] = 2
        return True

    if not visit(0) or count[0] > cap:
        return None
    out: list[str] = []
    stack = [(0, "")]
    while stack:
        q, prefix = stack.pop()
        if final[q]:
            out.append(prefix)
        for k in reversed(np.nonzero(trans[q] >= 0)[0]):
            for ch in reversed(members[k]):
                stack.append((int(trans[q, k]), prefix + ch))
    return sorted(out, key=lambda s: (len(s), s))
