"""AlphaRegex-style best-first enumeration of partial regexes, with pruning.

States are partial regexes with holes, popped in order of *cost*: a sum of per-node
costs (``costs``: one per operator, ``L`` per leaf unless the leaf carries its own,
``H`` per hole). With unit costs this is the binary-tree size and a hole is a lower
bound on any completion, so the first complete solution popped is a smallest one; a
hole dearer than a leaf (as AlphaRegex's) makes the search greedier, completing
partial regexes sooner, at the price of that guarantee. A state's leftmost hole is
expanded into a leaf
(a character or a class), ``□*``, ``□+``, ``□?``, ``□□`` or ``□|□``. A new state is
kept only if

* its over-approximation (holes = any string) accepts every positive example, and
* its under-approximation (holes = the empty language) accepts no negative example,

as in AlphaRegex (Lee, So, Oh, GPCE 2016). Every operator is monotone, so a state
failing either test has no solution below it.

Unlike AlphaRegex, complete subtrees are evaluated as vectors over the infixes of the
examples (:mod:`neurosym.synth.infix`) and replaced by the id of their
observational-equivalence class: a subtree equivalent (on the examples) to a cheaper
one already seen is pruned, and two states that differ only by equivalent subtrees
are searched once. Forms that :func:`~neurosym.synth.regex_ast.simplify` would shrink
(``(r*)*``, ``(r?)+``, left-nested sequences and alternations, ``r?|s``) are never
generated, alternatives are ordered, and the complete head of a sequence or
alternation chain is folded into one class (``a(b□)`` -> ``(ab)□``).

``redundancy=True`` adds AlphaRegex's redundancy test (every alternative, star and
option must be used by some positive; see :meth:`BestFirst.redundant`); it prunes
about a fifth of the states here but costs more than it saves, so it is off.
"""

from __future__ import annotations

import heapq
import itertools
import string
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from neurosym.synth import clock
from neurosym.synth import regex_ast as ra
from neurosym.synth.infix import InfixSpace
from neurosym.synth.simplify import simplify

HOLE = ("H",)
MAX_SPLITS = 16
UNARY_OPS = ("*", "+", "?")
_CLASSES = [
    frozenset(string.digits),
    frozenset(string.ascii_lowercase),
    frozenset(string.ascii_uppercase),
    frozenset(string.ascii_letters),
    frozenset(string.ascii_letters + string.digits),
    frozenset("AEIOUaeiou"),
]


SMALL_ALPHABET = 4
# Memory bound. The search's tables are sized from a byte budget, MAX_SEARCH_MB, before
# the search starts: each table gets a share and holds at most share / (bytes per entry)
# entries. Bytes per entry are estimates for 64-bit CPython, measured with a deep
# sys.getsizeof over the tables after 40,000 expansions of the hex-colour search (8
# positives, 7 negatives, 151 infixes: docs/synth.md's memory table) and rounded up;
# n is the number of infixes, the length of every evaluation vector. docs/synth.md has
# the resident memory this gives.
MAX_SEARCH_MB = 512
STATE_BYTES = 400  # a frontier state: its heap item, new tuples and seen-table slot (measured 386)
CLOSED_BYTES = 300  # an expanded state kept in the seen table (measured about 270)
CLASS_BYTES = 450  # an equivalence class besides its vector and key of n bytes each (measured 430)
EVAL_BYTES = 400  # an evaluation-memo entry besides its two vectors of n bytes (measured 380)
MADE_BYTES = 110  # a (operator, class ids) -> class entry (measured 103)
# shares of the budget: frontier and seen states, classes, evaluation memo, made memo
SHARES = {"frontier": 0.55, "classes": 0.25, "eval": 0.15, "made": 0.05}
MAX_MEMO = 500_000  # the most entries of each memo, whatever the budget


@dataclass(frozen=True)
class MemoryBound:
    """How many entries each table of a :class:`BestFirst` search may hold.

    ``frontier``: states in the priority queue (a full queue drops its dearer half);
    ``seen``: states in the duplicate table (past it, it is rebuilt from the queue,
    forgetting expanded states); ``classes``: observational-equivalence classes (past it,
    a complete subtree with a new vector is pruned); ``eval`` and ``made``: memo entries
    (a full memo is cleared).
    """

    frontier: int
    seen: int
    classes: int
    eval: int
    made: int

    @classmethod
    def from_budget(cls, mb: float, n_infixes: int, redundancy: bool = False) -> "MemoryBound":
        """The bound that keeps the estimated size of every table within ``mb`` MB."""
        budget = mb * 2**20
        vec = n_infixes + 112  # a numpy bool vector of n elements
        class_bytes = CLASS_BYTES + vec + n_infixes + 33  # vector, bytes key, AST, cost
        if redundancy:  # (W, P, U): up to 1 + 2 * MAX_SPLITS more vectors
            class_bytes += (1 + 2 * MAX_SPLITS) * vec
        frontier = int(SHARES["frontier"] * budget / (STATE_BYTES + CLOSED_BYTES))
        return cls(
            frontier=max(64, frontier),
            seen=max(128, 2 * frontier),
            classes=max(1024, int(SHARES["classes"] * budget / class_bytes)),
            eval=max(1024, min(MAX_MEMO, int(SHARES["eval"] * budget / (EVAL_BYTES + 2 * vec)))),
            made=max(1024, min(MAX_MEMO, int(SHARES["made"] * budget / MADE_BYTES))),
        )

    def estimated_mb(self, n_infixes: int, redundancy: bool = False) -> float:
        """The estimated size of the tables when all are full, in MB."""
        vec = n_infixes + 112
        class_bytes = CLASS_BYTES + vec + n_infixes + 33 + ((1 + 2 * MAX_SPLITS) * vec if redundancy else 0)
        total = (
            self.frontier * STATE_BYTES
            + (self.seen - self.frontier) * CLOSED_BYTES
            + self.classes * class_bytes
            + self.eval * (EVAL_BYTES + 2 * vec)
            + self.made * MADE_BYTES
        )
        return total / 2**20


@dataclass(frozen=True)
class LeafChoices:
    """The leaf alphabet's tunable choices (costs in half-bases: 2 = one plain leaf).

    Text alphabets: ``dot`` and ``any_string`` price ``.`` and ``.*`` (``None``: no such
    leaf), ``alnum_char`` a letter or digit written as itself (punctuation costs one
    base), ``vowels`` adds the class ``[AEIOUaeiou]``. Small alphabets (at most
    :data:`SMALL_ALPHABET` characters): ``small_any`` adds "any string" (``[01]*``) and
    ``small_stars`` each character's star (``0*``, ``1*``).

    The defaults, :data:`LEAF_CHOICES`, are chosen on development data only, by
    ``neurosym bench synth-tune`` (:mod:`neurosym.bench.synth_tune`)."""

    dot: int | None = 4
    any_string: int | None = 2
    alnum_char: int = 3
    vowels: bool = True
    small_any: bool = True
    small_stars: bool = True


# Chosen on development data only: `neurosym bench synth-tune --jobs 2` (Regel's development
# half, neurosym/bench/regel_split.py, and the Tomita languages; never Regel's test half or
# AlphaRegex's problems), its choice redone by `neurosym bench synth-tune --choose-from RUN
# -o docs/synth_tune.json`. docs/synth_tune.json holds every candidate's development score;
# docs/synth.md ("The search's choices, made on development data only") has the table.
# Development data cannot tell dot 2/4/6 or alnum_char 2/3 apart one at a time, but the plain
# pair (2, 2) loses one Regel problem (41 against 42), so (4, 3) stays; [AEIOUaeiou] gains 4
# and `.*` at one base 2; the small-alphabet leaves [01]* and 0*, 1* change nothing on Tomita
# and are off.
LEAF_CHOICES = LeafChoices(dot=4, any_string=2, alnum_char=3, vowels=True, small_any=False, small_stars=False)


def default_leaves(positives: Sequence[str], negatives: Sequence[str] = (), choices: LeafChoices = LEAF_CHOICES) -> list[ra.Node]:
    """Leaves to build from (see :func:`weighted_leaves`)."""
    return [leaf for leaf, _ in weighted_leaves(positives, negatives, choices=choices)]


def weighted_leaves(
    positives: Sequence[str], negatives: Sequence[str] = (), base: int = 20, choices: LeafChoices = LEAF_CHOICES
) -> list[tuple[ra.Node, int]]:
    """Leaves and their costs (``base`` is the cost of a plain leaf; ``choices``, a
    :class:`LeafChoices`, prices the rest).

    Small alphabets (at most four characters in the positives, e.g. AlphaRegex's
    {0, 1}): each character, the class of all of them, and with the default choices
    "any string" (``[01]*``, as AlphaRegex's ``X*``) and each character's star (``0*``,
    ``1*``: runs of one symbol are the usual glue of counting languages), all at ``base``.

    Larger alphabets (text): the classes ``[0-9] [a-z] [A-Z] [A-Za-z] [0-9A-Za-z]``
    (and ``[AEIOUaeiou]`` if ``choices.vowels``) that meet the positives at ``base``,
    punctuation and spaces at ``base``, letters and digits at ``choices.alnum_char``
    half-bases, ``.`` and ``.*`` at ``choices.dot`` and ``choices.any_string``
    half-bases. Classes that contain the same characters of the examples as an earlier
    class are dropped.
    """
    chars = sorted({c for s in positives for c in s})
    seen_chars = {c for s in list(positives) + list(negatives) for c in s}
    if not chars:
        return [(ra.Chars(sorted(seen_chars)[0] if seen_chars else "a"), base)]
    own = frozenset(chars)
    if len(seen_chars | own) <= SMALL_ALPHABET:
        leaves = [(ra.Chars(c), base) for c in chars]
        if len(own) > 1:
            leaves.append((ra.Chars(own), base))
        if choices.small_any:
            leaves.append((ra.Star(ra.Chars(own) if len(own) > 1 else ra.Chars(chars[0])), base))
        if choices.small_stars and len(own) > 1:
            leaves.extend((ra.Star(ra.Chars(c)), base) for c in chars)
        return leaves
    leaves: list[tuple[ra.Node, int]] = []
    keys: set[frozenset] = set()
    for cls in _CLASSES if choices.vowels else _CLASSES[:-1]:
        key = cls & seen_chars
        if cls & own and key not in keys:
            keys.add(key)
            leaves.append((ra.Chars(cls), base))
    for c in chars:
        leaves.append((ra.Chars(c), choices.alnum_char * base // 2 if c.isalnum() else base))
    if choices.dot is not None:
        leaves.append((ra.ANY, choices.dot * base // 2))
    if choices.any_string is not None:
        leaves.append((ra.Star(ra.ANY), choices.any_string * base // 2))
    return leaves


class BestFirst:
    """Best-first search for a smallest regex accepting every positive and no negative.

    Args:
        positives, negatives: the examples.
        leaves: leaves, or ``(leaf, cost)`` pairs (default :func:`weighted_leaves`).
        ops: the operators to use, a subset of ``"*+?.|"`` (``.`` = concatenation).
        costs: per-node costs ``{"*", "+", "?", ".", "|", "L", "H"}`` (default all 1).
        redundancy: also apply AlphaRegex's redundancy test.
        max_search_mb: the memory budget of the search's tables, in MB: every table's
            size is fixed from it before the search starts (:class:`MemoryBound`), so
            their estimated total stays within it. When a table is full the search is
            no longer exhaustive: a full frontier drops its dearer half, a full class
            table prunes subtrees with a new vector.
        max_frontier: the most states the priority queue holds (default: from the budget).
        max_memo: the most entries each memo holds before it is cleared (default: from
            the budget).
        max_classes: the most observational-equivalence classes (default: from the budget).
    """

    def __init__(
        self,
        positives: Sequence[str],
        negatives: Sequence[str] = (),
        leaves: Sequence[ra.Node | tuple[ra.Node, int]] | None = None,
        ops: str = "*+?.|",
        costs: dict | None = None,
        redundancy: bool = False,
        max_frontier: int | None = None,
        max_memo: int | None = None,
        max_search_mb: float = MAX_SEARCH_MB,
        max_classes: int | None = None,
    ):
        self.redundancy = redundancy
        self.positives = list(positives)
        self.negatives = list(negatives)
        self.space = sp = InfixSpace(self.positives + self.negatives)
        bound = MemoryBound.from_budget(max_search_mb, sp.n, redundancy)
        if max_frontier is not None:
            bound = replace(bound, frontier=max(2, max_frontier), seen=max(4, 2 * max_frontier))
        if max_memo is not None:
            bound = replace(bound, eval=max_memo, made=max_memo)
        if max_classes is not None:
            bound = replace(bound, classes=max_classes)
        self.bound = bound
        self.pruned = 0  # states dropped from a full frontier
        self.class_drops = 0  # subtrees pruned because the class table was full
        self.peak_frontier = 0  # the most states the frontier held
        self.peak_seen = 0
        self.splits: list[tuple] = []  # per class: (W, P, U) of AlphaRegex's redundancy test
        self._split_memo: dict[tuple, tuple] = {}
        self.pos = sp.ids(self.positives)
        self.neg = sp.ids(self.negatives)
        self.ops = ops
        self.op_cost = {"*": 1, "+": 1, "?": 1, ".": 1, "|": 1, "L": 1, "H": 1}
        self.op_cost.update(costs or {})
        self.vecs: list[np.ndarray] = []
        self.cost: list[int] = []
        self.ast: list[ra.Node] = []
        self.root: list[str] = []
        self.by_key: dict[bytes, int] = {}
        self.leaf_ids: list[int] = []
        if leaves is None:
            scale = self.op_cost["L"] / 20
            leaves = [(leaf, max(1, round(c * scale))) for leaf, c in weighted_leaves(self.positives, self.negatives)]
        for item in leaves:
            leaf, lc = item if isinstance(item, tuple) else (item, self.op_cost["L"])
            v = sp.vector(leaf)
            c = self._component(v, lc, leaf, "L", (v, [v], [v]))
            if c is not None and c[1] not in self.leaf_ids:
                self.leaf_ids.append(c[1])
        self._eval_memo: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._made: dict[tuple, int] = {}
        self._prod_cache: dict[tuple, list] = {}
        self.expanded = 0
        self.generated = 0
        self.best_partial: list[tuple[float, int]] = []  # (error, component id) of complete candidates

    # ------------------------------------------------------------------ components
    def _component(self, vec: np.ndarray, cost: int, ast: ra.Node, root: str, splits=None):
        key = vec.tobytes()
        j = self.by_key.get(key)
        if j is not None:
            if self.cost[j] < cost:
                return None  # a cheaper equivalent exists: searched elsewhere
            if self.cost[j] > cost:
                self.cost[j], self.ast[j], self.root[j] = cost, ast, root
                if self.redundancy and splits is not None:
                    self.splits[j] = splits
            return ("C", j)
        if len(self.vecs) >= self.bound.classes and root != "L":
            self.class_drops += 1
            return None  # the class table is full: a subtree with a new vector is pruned
        if self.redundancy:
            self.splits.append(splits if splits is not None else (vec, [vec], [vec]))
        j = len(self.vecs)
        self.by_key[key] = j
        self.vecs.append(vec)
        self.cost.append(cost)
        self.ast.append(ast)
        self.root.append(root)
        return ("C", j)

    def _make(self, tag: str, *kids):
        k0 = kids[0]
        if k0[0] != "C" or (len(kids) == 2 and kids[1][0] != "C"):
            if k0[0] == "C" and tag in ".|" and kids[1][0] == tag and kids[1][1][0] == "C":
                # fold a complete head into the head of the chain: a(b□) -> (ab)□, a|(b|□) -> (a|b)|□
                head = self._make(tag, k0, kids[1][1])
                return None if head is None else (tag, head, kids[1][2])
            return (tag, *kids)
        ids = [k[1] for k in kids]
        cost = self.op_cost[tag] + sum(self.cost[i] for i in ids)
        key = (tag, *ids)
        j = self._made.get(key)
        if j is not None:  # this combination was built before: same vector, same class
            if j < 0 or self.cost[j] < cost:
                return None
            return ("C", j)
        out = self._build(tag, ids, cost)
        if len(self._made) >= self.bound.made:
            self._made.clear()
        self._made[key] = -1 if out is None else out[1]
        return out

    def _build(self, tag: str, ids: list, cost: int):
        sp = self.space
        splits = None
        if tag in UNARY_OPS:
            v = self.vecs[ids[0]]
            if tag == "*":
                vec, ast = sp.star(v), ra.Star(self.ast[ids[0]])
            elif tag == "+":
                vec, ast = sp.plus(v), ra.Plus(self.ast[ids[0]])
            else:
                vec, ast = sp.opt(v), ra.Opt(self.ast[ids[0]])
            if self.redundancy:
                splits = self._combine(tag, vec, [(v, self.splits[ids[0]])])
        elif tag == ".":
            a, b = ids
            vec, ast = sp.concat(self.vecs[a], self.vecs[b]), ra.Cat((self.ast[a], self.ast[b]))
            if self.redundancy:
                splits = self._combine(tag, vec, [(self.vecs[a], self.splits[a]), (self.vecs[b], self.splits[b])])
        else:
            a, b = ids
            if a == b or (a > b and self.root[a] != "|" and self.root[b] != "|"):
                return None  # r|r, or the mirrored order (searched as b|a)
            vec, ast = self.vecs[a] | self.vecs[b], ra.Alt((self.ast[a], self.ast[b]))
            if self.redundancy:
                splits = self._combine(tag, vec, [(self.vecs[a], self.splits[a]), (self.vecs[b], self.splits[b])])
        return self._component(vec, cost, ast, tag, splits)

    # ------------------------------------------------------------------ states
    def _productions(self, ctx):
        """(replacement, added cost, added holes) for a hole whose parent is ``ctx``."""
        out = self._prod_cache.get(ctx)
        if out is None:
            out = self._prod_cache[ctx] = self._productions_uncached(ctx)
        return out

    def _productions_uncached(self, ctx):
        L = self.op_cost["H"]
        out = [(("C", i), self.cost[i] - L, -1) for i in self.leaf_ids]
        parent, side = ctx
        for op in UNARY_OPS:
            if op in self.ops and parent not in UNARY_OPS and not (op == "?" and parent == "|"):
                out.append(((op, HOLE), self.op_cost[op], 0))
        for op in ".|":
            if op in self.ops and not (parent == op and side == 0):
                out.append(((op, HOLE, HOLE), self.op_cost[op] + L, 1))
        return out

    def _expand(self, p, ctx):
        """Successors of ``p`` (its leftmost hole expanded) as (state, added cost, added holes);
        ``None`` if ``p`` has no hole. Pruned successors are dropped."""
        tag = p[0]
        if tag == "H":
            return self._productions(ctx)
        if tag == "C":
            return None
        make = self._make
        if len(p) == 2:
            sub = self._expand(p[1], (tag, 0))
            if sub is None:
                return None
            out = [(make(tag, s), dc, dh) for s, dc, dh in sub]
        else:
            sub = self._expand(p[1], (tag, 0))
            if sub is not None:
                out = [(make(tag, s, p[2]), dc, dh) for s, dc, dh in sub]
            else:
                sub = self._expand(p[2], (tag, 1))
                if sub is None:
                    return None
                out = [(make(tag, p[1], s), dc, dh) for s, dc, dh in sub]
        return [x for x in out if x[0] is not None]

    def _eval(self, p):
        """(over, under) approximation vectors of a partial regex."""
        tag = p[0]
        if tag == "C":
            v = self.vecs[p[1]]
            return v, v
        if tag == "H":
            return self.space.ones, self.space.zeros
        r = self._eval_memo.get(p)
        if r is not None:
            return r
        sp = self.space
        if len(p) == 2:
            f = sp.star if tag == "*" else sp.plus if tag == "+" else sp.opt
            o, u = self._eval(p[1])
            r = (f(o), f(u))
        else:
            (o1, u1), (o2, u2) = self._eval(p[1]), self._eval(p[2])
            if tag == ".":
                r = (sp.concat(o1, o2), sp.concat(u1, u2))
            else:
                r = (o1 | o2, u1 | u2)
        if len(self._eval_memo) >= self.bound.eval:
            self._eval_memo.clear()
        self._eval_memo[p] = r
        return r

    def _combine(self, tag: str, own: np.ndarray, kids: list) -> tuple:
        """AlphaRegex's redundancy data of a node from its children's ``(vector, (W, P, U))``.

        ``W`` is the vector of the *unrolled* node (``r*`` and ``r+`` as ``r r r*``,
        ``r?`` as ``r``), ``P`` the vectors of its splits (one per choice of alternative
        outside stars), ``U`` the splits of the unrolled node; ``own`` is the node's vector.
        """
        sp = self.space
        if tag in "*+":
            v, (_, P, _) = kids[0]
            t = sp.plus(v)
            r = (sp.concat(v, t), [own], [sp.concat(x, t) for x in P])
        elif tag == "?":
            _, (W, _, U) = kids[0]
            r = (W, [own], U)
        elif tag == ".":
            (va, (Wa, Pa, Ua)), (vb, (Wb, Pb, Ub)) = kids
            r = (
                sp.concat(Wa, Wb),
                [sp.concat(x, vb) for x in Pa] + [sp.concat(va, x) for x in Pb],
                [sp.concat(x, Wb) for x in Ua] + [sp.concat(Wa, x) for x in Ub],
            )
        else:
            (_, (Wa, Pa, Ua)), (_, (Wb, Pb, Ub)) = kids
            r = (Wa | Wb, Pa + Pb, Ua + Ub)
        W, P, U = r
        return W, P[:MAX_SPLITS], U[:MAX_SPLITS]

    def _splits(self, p) -> tuple:
        """``(W, P, U)`` of a partial regex, holes being any string (see :meth:`_combine`)."""
        tag = p[0]
        if tag == "C":
            return self.splits[p[1]]
        if tag == "H":
            o = self.space.ones
            return (o, [o], [o])
        r = self._split_memo.get(p)
        if r is not None:
            return r
        kids = [(self._eval(k)[0], self._splits(k)) for k in p[1:]]
        r = self._combine(tag, self._eval(p)[0], kids)
        if len(self._split_memo) >= self.bound.eval:
            self._split_memo.clear()
        self._split_memo[p] = r
        return r

    def redundant(self, p) -> bool:
        """AlphaRegex's redundancy test: some split of the unrolled regex (holes = any
        string) accepts no positive, i.e. an alternative is never taken, a star never
        iterated twice or an option never taken, so a smaller regex would do."""
        pos = self.pos
        return any(not v[pos].any() for v in self._splits(p)[2])

    def consistent(self, vec: np.ndarray) -> bool:
        return bool(vec[self.pos].all()) and not bool(vec[self.neg].any())

    def _note(self, cid: int) -> None:
        """Keep the few best complete candidates (fewest misclassified examples, then cost)."""
        v = self.vecs[cid]
        err = int((~v[self.pos]).sum()) + int(v[self.neg].sum())
        item = (err + 0.01 * self.cost[cid], cid)
        if len(self.best_partial) < 16:
            heapq.heappush(self.best_partial, (-item[0], cid))
        elif -self.best_partial[0][0] > item[0]:
            heapq.heapreplace(self.best_partial, (-item[0], cid))

    def candidates(self) -> list[ra.Node]:
        """The best complete (not necessarily consistent) regexes seen, best first."""
        return [simplify(self.ast[c]) for _, c in sorted(self.best_partial, reverse=True)]

    # ------------------------------------------------------------------ search
    def search(self, time_budget: float = 10.0, max_cost: float = float("inf"), progress=None) -> ra.Node | None:
        """A smallest consistent regex, or ``None`` if none is found within the budget."""
        for _, node in self.solutions(time_budget, max_cost, progress):
            return node
        return None

    def solutions(self, time_budget: float = 10.0, max_cost: float = float("inf"), progress=None):
        """Yield ``(cost, regex)`` for consistent regexes in order of cost (one per
        observational-equivalence class), until the budget or the costs run out.

        The caller may tighten ``self.deadline`` (a ``clock.now()`` value) and
        ``self.max_cost`` between solutions."""
        self.deadline = clock.now() + time_budget
        self.max_cost = max_cost
        bound = self.bound
        counter = itertools.count()
        done: set[int] = set()
        heap = [(self.op_cost["H"], 1, next(counter), HOLE)]
        seen: dict[tuple, int] = {HOLE: self.op_cost["H"]}
        self._heap, self._seen = heap, seen
        last_cost = 0
        while heap:
            cost, h, _, p = heapq.heappop(heap)
            if p[0] == "C":
                if p[1] not in done:
                    done.add(p[1])
                    yield cost, simplify(self.ast[p[1]])
                continue
            if seen.get(p, cost) < cost:
                continue
            self.expanded += 1
            if cost > self.max_cost or (self.expanded % 256 == 0 and clock.now() > self.deadline):
                return
            if progress is not None and cost != last_cost:
                progress.set_postfix_str(f"cost {cost}, {self.expanded} states")
                last_cost = cost
            for q, dc, dh in self._expand(p, (None, None)) or ():
                c = cost + dc
                if c > self.max_cost or seen.get(q, c + 1) <= c:
                    continue
                self.generated += 1
                if q[0] == "C":
                    self._note(q[1])
                    if not self.consistent(self.vecs[q[1]]):
                        continue
                else:
                    over, under = self._eval(q)
                    if not over[self.pos].all() or under[self.neg].any():
                        continue
                if self.redundancy and self.redundant(q):
                    continue
                if len(heap) >= bound.frontier:  # full: keep the cheaper half
                    heap = self._evict(heap)
                    seen = {item[3]: item[0] for item in heap}
                    self._heap, self._seen = heap, seen
                    if c > heap[-1][0]:  # dearer than every state kept: it would go first
                        self.pruned += 1
                        continue
                if len(seen) >= bound.seen:  # full: forget expanded states (they may be expanded again)
                    seen = {item[3]: item[0] for item in heap}
                    self._seen = seen
                seen[q] = c
                heapq.heappush(heap, (c, h + dh, next(counter), q))
            self.peak_frontier = max(self.peak_frontier, len(heap))
            self.peak_seen = max(self.peak_seen, len(seen))

    def _evict(self, heap: list) -> list:
        """The cheaper half of a full frontier (ties: fewer holes, then older), as a
        sorted list, which is a heap; the rest is dropped and counted in ``pruned``."""
        keep = heapq.nsmallest(max(1, self.bound.frontier // 2), heap)
        self.pruned += len(heap) - len(keep)
        return keep


__all__ = ["BestFirst", "LEAF_CHOICES", "LeafChoices", "MAX_MEMO", "MAX_SEARCH_MB", "MemoryBound", "default_leaves", "weighted_leaves"]
