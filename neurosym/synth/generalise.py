"""Format induction for text: character-class generalisation and counted repetitions.

Each positive is cut into *tokens* at one of three granularities:

* ``fine``: runs of digits (``D``), of lower-case letters (``L``), of upper-case
  letters (``U``); every other character is a token kind of its own (a run of ``-``
  is one ``-`` token of some length);
* ``word``: runs of digits, runs of letters (``A``), runs of punctuation and symbols
  (``P``, their class being the characters seen there), other characters as above;
* ``alnum``: runs of letters and digits (``W``), the rest as ``word``.

Positives with the same sequence of token kinds (their *signature*) form a group; a
signature ``K (p K)+`` (``1,000,000``, ``1.2.3``) is folded into a loop. Each group
becomes a template, one slot per token: the slot's text when every member of a group
of two or more has the same text there, else the tightest character class covering
the slot's characters (``[0-9]``, ``[0-9a-f]``, ``[a-z]``, ...) with a count learned
from the slot's lengths — ``{4}`` when they are all 4, else a set of lengths, a range
``{a,b}`` or ``+``, whichever gives the shortest description (model bits + the bits of
the lengths seen, the *minimum description length* principle). A group whose
signature extends a shorter group's signature is merged into it as an optional tail
(``[0-9]{5}`` and ``[0-9]{5}-[0-9]{4}`` -> ``[0-9]{5}(-[0-9]{4})?``; a loop becomes
``*``).

:func:`candidates` returns one regex per granularity and merge choice with its
description length in bits; :func:`induce` keeps the consistent one (every positive,
no negative) of shortest description. :func:`induce_weighted` is the corpus version:
examples carry weights (token counts), and each group keeps its template, becomes the
alternation of its members' literal forms, or is dropped, whichever costs least in
misclassified weight + ``lam`` per character of regex.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field

from neurosym.synth import regex_ast as ra
from neurosym.synth.simplify import simplify

GRANULARITIES = ("fine", "word", "alnum")
LENGTH_BITS = 4.0  # model bits per stated length (a length up to 16)
GROUP_BITS = 8.0  # model bits per alternative (group)
SLOT_BITS = 2.0  # model bits per slot (which class or literal)
MAX_LITERALS = 200  # literal forms kept per class in corpus mode

_DIGITS = frozenset(string.digits)
_LOWER = frozenset(string.ascii_lowercase)
_UPPER = frozenset(string.ascii_uppercase)
_LETTERS = _LOWER | _UPPER
_ALNUM = _LETTERS | _DIGITS
_HEX_LOWER = _DIGITS | frozenset("abcdef")
_HEX_UPPER = _DIGITS | frozenset("ABCDEF")
_HEX = _HEX_LOWER | _HEX_UPPER

# classes a slot of each kind may take, tight first
_KIND_CLASSES: dict[str, tuple[frozenset, ...]] = {
    "D": (_DIGITS,),
    "L": (_LOWER,),
    "U": (_UPPER,),
    "A": (_LOWER, _UPPER, _LETTERS),
    "W": (_DIGITS, _LOWER, _UPPER, _HEX_LOWER, _HEX_UPPER, _HEX, _LETTERS, _ALNUM),
}


def kind_of(c: str, granularity: str) -> str:
    """The token kind of character ``c`` at a granularity: ``D L U A W`` as above, ``P``
    for punctuation and symbols at the ``word`` and ``alnum`` granularities (a run of
    them is one token whose class is the characters seen there), else the character
    itself (``fine`` punctuation, spaces, non-ASCII letters)."""
    if c in _DIGITS:
        return "W" if granularity == "alnum" else "D"
    if c in _LETTERS:
        if granularity == "alnum":
            return "W"
        if granularity == "word":
            return "A"
        return "L" if c in _LOWER else "U"
    if granularity != "fine" and not c.isalnum() and not c.isspace():
        return "P"
    return c


def tokens(s: str, granularity: str) -> list[tuple[str, str]]:
    """``s`` as ``(kind, text)`` runs."""
    out: list[tuple[str, str]] = []
    for c in s:
        k = kind_of(c, granularity)
        if out and out[-1][0] == k:
            out[-1] = (k, out[-1][1] + c)
        else:
            out.append((k, c))
    return out


def shape(s: str) -> str:
    """A short shape key of ``s`` (fine kinds, each run once): ``"2024-01-05"`` -> ``"D-D-D"``."""
    return "".join(k for k, _ in tokens(s, "fine"))


# ---------------------------------------------------------------------- slots


def _length_model(lengths: Sequence[int]) -> tuple[tuple, float]:
    """The count of a slot: ``("exact", n)``, ``("set", ns)``, ``("range", a, b)`` or
    ``("plus",)``, and its description length in bits (model + data)."""
    ls = list(lengths)
    distinct = sorted(set(ls))
    if len(distinct) == 1:
        return ("exact", distinct[0]), LENGTH_BITS
    n = len(ls)
    options = []
    if len(distinct) <= 3:
        options.append((("set", tuple(distinct)), LENGTH_BITS * len(distinct) + n * math.log2(len(distinct))))
    lo, hi = distinct[0], distinct[-1]
    options.append((("range", lo, hi), 2 * LENGTH_BITS + n * math.log2(hi - lo + 1)))
    lo1 = distinct[0]
    p = 1.0 / (1.0 + sum(x - lo1 for x in ls) / n)  # geometric above the shortest: P(l) = p (1-p)^(l - lo1)
    bits = -sum(math.log2(p) + (x - lo1) * math.log2(1 - p) for x in ls)
    options.append((("plus", lo1), LENGTH_BITS * (lo1 > 1) + bits))
    return min(options, key=lambda o: o[1])


def _count_node(x: ra.Node, model: tuple) -> ra.Node:
    tag = model[0]
    if tag == "exact":
        return ra.repeat(x, model[1], model[1])
    if tag == "set":
        return ra.alt(*(ra.repeat(x, n, n) for n in model[1]))
    if tag == "range":
        return ra.repeat(x, model[1], model[2])
    return ra.repeat(x, model[1], None)


@dataclass
class Slot:
    """One token position of a group: its kind and the texts the members have there."""

    kind: str
    texts: list[str] = field(default_factory=list)

    def node(self, n_members: int) -> tuple[ra.Node, float]:
        """The slot as a regex and its description length in bits (all members)."""
        distinct = set(self.texts)
        if len(distinct) == 1 and n_members >= 2:  # a shared text is cheaper stated once
            text = self.texts[0]
            return ra.lit(text), SLOT_BITS + 6.0 * len(text)
        chars = frozenset("".join(self.texts))
        model, len_bits = _length_model([len(t) for t in self.texts])
        if self.kind in _KIND_CLASSES:
            cls = next(c for c in _KIND_CLASSES[self.kind] if chars <= c)
        elif self.kind == "P":  # punctuation runs: the characters seen there
            cls = chars
        else:
            cls = frozenset(self.kind)
        data = sum(len(t) for t in self.texts) * math.log2(len(cls))
        return _count_node(ra.Chars(cls), model), SLOT_BITS + len_bits + data


@dataclass
class Group:
    """Positives sharing a signature; ``loop`` marks a folded ``K (p K)+`` signature."""

    signature: tuple
    members: list[str]
    slots: list[Slot]
    loop: tuple[Slot, Slot] | None = None  # (separator, item) slots of the loop
    loop_counts: list[int] = field(default_factory=list)  # repetitions of the loop per member
    tails: list["Group"] = field(default_factory=list)  # optional extensions merged in

    def node(self) -> tuple[ra.Node, float]:
        n = len(self.members) + sum(len(t.members) for t in self.tails)
        items, bits = [], GROUP_BITS
        for s in self.slots:
            x, b = s.node(n)
            items.append(x)
            bits += b
        if self.loop is not None:
            x, b = _loop_node(self.loop, self.loop_counts)
            items.append(x)
            bits += b
        alternatives = []
        for t in self.tails:
            tail_items, tail_bits = [], 0.0
            for s in t.slots[len(self.slots) :]:
                x, b = s.node(len(t.members))
                tail_items.append(x)
                tail_bits += b
            if t.loop is not None:
                x, b = _loop_node(t.loop, t.loop_counts)
                tail_items.append(x)
                tail_bits += b
            alternatives.append(ra.cat(*tail_items))
            bits += tail_bits
        if alternatives:  # the tails are alternatives after the shared prefix
            items.append(ra.Opt(ra.alt(*alternatives)))
            bits += n * math.log2(len(alternatives) + 1)  # which tail, or none
        return simplify(ra.cat(*items)), bits


def _loop_node(loop: tuple[Slot, Slot], counts: list[int]) -> tuple[ra.Node, float]:
    """``(sep item){k}`` / ``(sep item)+`` ...: the loop's body and a count learned from
    the repetitions seen, as a slot's length is."""
    sep, item = loop
    reps = len(sep.texts)
    (xs, bs), (xi, bi) = sep.node(reps), item.node(reps)
    model, len_bits = _length_model(counts)
    return _count_node(ra.cat(xs, xi), model), bs + bi + len_bits


def _fold_loop(toks: list[tuple[str, str]]) -> tuple[tuple, list, list] | None:
    """``K p K p K`` (at least two separators, one kind ``K``, one separator ``p``) as
    ``(signature, head tokens, [(sep, item), ...])``; ``None`` otherwise."""
    if len(toks) < 5 or len(toks) % 2 == 0:
        return None
    ks = [k for k, _ in toks]
    item, sep = ks[0], ks[1]
    if sep in _KIND_CLASSES or any(k != item for k in ks[0::2]) or any(k != sep for k in ks[1::2]):
        return None
    reps = [(toks[i], toks[i + 1]) for i in range(1, len(toks), 2)]
    return (item, ("loop", sep, item)), [toks[0]], reps


def groups(positives: Sequence[str], granularity: str, loops: bool = True) -> list[Group]:
    """The positives grouped by signature at ``granularity`` (first-seen order)."""
    by_sig: dict[tuple, Group] = {}
    for s in positives:
        toks = tokens(s, granularity)
        folded = _fold_loop(toks) if loops else None
        if folded is not None:
            sig, head, reps = folded
        else:
            sig, head, reps = tuple(k for k, _ in toks), toks, []
        g = by_sig.get(sig)
        if g is None:
            g = by_sig[sig] = Group(sig, [], [Slot(k) for k, _ in head], (Slot(sig[-1][1]), Slot(sig[-1][2])) if reps else None)
        g.members.append(s)
        if reps:
            g.loop_counts.append(len(reps))
        for slot, (_, text) in zip(g.slots, head):
            slot.texts.append(text)
        for (_, sep_text), (_, item_text) in reps:
            g.loop[0].texts.append(sep_text)
            g.loop[1].texts.append(item_text)
    return list(by_sig.values())


def merge_prefixes(gs: list[Group]) -> list[Group]:
    """Merge each group whose signature extends a shorter group's signature into that
    group as an optional tail; the shared prefix slots pool both groups' texts."""
    out: list[Group] = []
    for g in sorted(gs, key=lambda g: len(g.signature)):
        host = None
        for h in out:
            if h.loop is None and not h.tails and len(h.signature) < len(g.signature) and g.signature[: len(h.signature)] == h.signature:
                host = h
                break
        if host is None:
            out.append(Group(g.signature, list(g.members), [Slot(s.kind, list(s.texts)) for s in g.slots], g.loop, list(g.loop_counts)))
            continue
        for hs, gs_ in zip(host.slots, g.slots):
            hs.texts.extend(gs_.texts)
        host.tails.append(g)
    return out


@dataclass
class Candidate:
    """A regex from format induction and its description length (bits)."""

    node: ra.Node
    bits: float
    granularity: str
    merged: bool

    @property
    def pattern(self) -> str:
        return ra.to_pattern(self.node)


def _alternation(gs: list[Group]) -> tuple[ra.Node, float]:
    nodes, bits = [], 0.0
    n = sum(len(g.members) + sum(len(t.members) for t in g.tails) for g in gs)
    for g in gs:
        x, b = g.node()
        nodes.append(x)
        bits += b
    bits += n * math.log2(len(gs)) if len(gs) > 1 else 0.0
    return simplify(ra.alt(*nodes)), bits


def candidates(positives: Sequence[str]) -> list[Candidate]:
    """One regex per granularity and merge choice, shortest description first."""
    pos = list(dict.fromkeys(positives))
    out: dict[ra.Node, Candidate] = {}
    for gran, loops in [(g, lp) for g in GRANULARITIES for lp in (True, False)]:
        base = groups(pos, gran, loops)
        for merged in (False, True):
            gs = merge_prefixes(base) if merged else base
            node, bits = _alternation(gs)
            if node not in out or out[node].bits > bits:
                out[node] = Candidate(node, bits, gran, merged)
    return sorted(out.values(), key=lambda c: (c.bits, ra.size(c.node)))


CHAR_BITS = math.log2(95)  # a printable ASCII character


def literal_bits(positives: Sequence[str]) -> float:
    """The description length of the positives written out (each with an end mark)."""
    return sum((len(s) + 1) * CHAR_BITS for s in dict.fromkeys(positives))


def compression(c: Candidate, positives: Sequence[str]) -> float:
    """The candidate's description length over the positives' literal length: below 1
    the template compresses the examples (it has found shared structure)."""
    return c.bits / max(literal_bits(positives), 1e-9)


def induce(positives: Sequence[str], negatives: Sequence[str] = ()) -> Candidate | None:
    """The consistent candidate of shortest description, or ``None`` (checked with
    ``re.fullmatch``; callers verify with the compiled DFA too)."""
    for c in candidates(positives):
        rx = re.compile(c.pattern)
        if all(rx.fullmatch(s) for s in positives) and not any(rx.fullmatch(s) for s in negatives):
            return c
    return None


def induce_weighted(
    positives: dict[str, float],
    negatives: dict[str, float],
    lam: float = 0.02,
    granularity: str = "fine",
    max_literals: int = MAX_LITERALS,
) -> ra.Node:
    """A regex for weighted examples (``form -> count``) that may not be separable.

    Groups the positives at ``granularity`` (prefix tails merged); each group keeps its
    template, becomes the alternation of its members' literal forms (the most frequent
    ``max_literals`` across groups) or is dropped, whichever costs least in
    misclassified weight + ``lam`` per AST node (the weights of the module's
    objective: 1 per accepted negative, ``lam`` per unit of size)."""
    kept: list[ra.Node] = []
    literals: list[tuple[float, str]] = []
    neg_items = list(negatives.items())
    for g in merge_prefixes(groups(list(positives), granularity)):
        node, _ = g.node()
        pattern = ra.to_pattern(node)
        rx = re.compile(pattern)
        members = g.members + [m for t in g.tails for m in t.members]
        w_members = sum(positives[m] for m in members)
        fp = sum(w for s, w in neg_items if rx.fullmatch(s))
        general = fp + lam * ra.size(node)
        literal = lam * sum(2 * len(m) for m in members)  # m - 1 joins, m leaves, one alternation
        drop = w_members
        best = min(general, literal, drop)
        if best == general:
            kept.append(node)
        elif best == literal:
            literals.extend((positives[m], m) for m in members)
    literals.sort(key=lambda x: (-x[0], x[1]))
    lits = [ra.lit(m) for _, m in literals[:max_literals]]
    parts = kept + lits
    if not parts:
        return ra.EMPTY
    return simplify(ra.alt(*parts))


__all__ = ["Candidate", "GRANULARITIES", "candidates", "compression", "literal_bits", "groups", "induce", "induce_weighted", "merge_prefixes", "shape", "tokens"]
