"""The canonical form of synthesis regexes: :func:`simplify` rewrites a regex to a
smaller or equal one with the same language, so equivalent candidates are searched once."""

from __future__ import annotations

from functools import lru_cache

from neurosym.synth.regex_ast import ANY, EMPTY, EPS, LEAVES, UNARY, Alt, AnyChar, Cat, Chars, Empty, Eps, Hole, Node, Opt, Plus, Star, nullable, size, to_pattern


def _sort_key(r: Node) -> tuple:
    return (size(r), to_pattern(r))


def _strip(r: Node) -> Node:
    """Drop an outer ``*``/``+``/``?``: inside a star they change nothing."""
    while type(r) in UNARY:
        r = r.child
    return r


def simplify(r: Node) -> Node:
    """A canonical form of ``r`` (never larger, same language).

    Flattens nested concatenations and alternations, sorts and dedupes alternatives,
    merges single-character alternatives into one class, drops ``()`` from sequences,
    rewrites ``ε|r`` to ``r?``, ``(r*)*``, ``(r+)*``, ``(r?)*``, ``(r*)+``, ``(r?)+``
    and ``(r+)?`` to ``r*``, ``(r?)?`` to ``r?``, ``r??``-like options of nullable
    ``r`` to ``r``, ``(a*|b)*`` to ``(a|b)*``, ``(a*b*)*`` to ``(a|b)*``, ``r*r*`` to
    ``r*``, ``rr*``/``r*r`` to ``r+`` and ``.*[a-z]*`` to ``.*``. Holes are opaque.
    """
    return _simplify(r)


@lru_cache(maxsize=65536)
def _simplify(r: Node) -> Node:
    t = type(r)
    if t in LEAVES:
        return r
    if t is Cat:
        items: list[Node] = []
        for x in r.items:
            x = _simplify(x)
            if type(x) is Cat:
                items.extend(x.items)
            elif type(x) is Eps:
                continue
            elif type(x) is Empty:
                return EMPTY
            else:
                items.append(x)
        items = _merge_runs(items)
        if not items:
            return EPS
        return items[0] if len(items) == 1 else Cat(tuple(items))
    if t is Alt:
        flat: list[Node] = []
        for x in r.items:
            x = _simplify(x)
            flat.extend(x.items if type(x) is Alt else [x])
        return _simplify_alt(flat)
    c = _simplify(r.child)
    tc = type(c)
    if tc is Empty:
        return EMPTY if t is Plus else EPS
    if tc is Eps:
        return EPS
    if t is Star:
        return _star(c)
    if t is Plus:
        if tc is Plus:
            return c
        if tc in (Star, Opt) or nullable(c):
            return _star(c)
        return Plus(c)
    # Opt
    if tc is Plus:
        return _star(c.child)
    if nullable(c):
        return c
    return Opt(c)


def _star(c: Node) -> Node:
    """``Star`` of a simplified node: inside a star, ``*``/``+``/``?`` on alternatives and
    sequences of nullable items are redundant: ``(a*|b)* = (a|b)*``, ``(a*b*)* = (a|b)*``."""
    flat: list[Node] = []

    def add(x: Node) -> None:
        x = _strip(x)
        tx = type(x)
        if tx is Alt or (tx is Cat and all(nullable(y) for y in x.items)):
            for y in x.items:
                add(y)
        elif tx is not Eps:
            flat.append(x)

    add(c)
    if not flat:
        return EPS
    c = _strip(flat[0] if len(flat) == 1 else _simplify_alt(flat))
    if type(c) in (Eps, Empty):
        return EPS
    return Star(c)


def _simplify_alt(flat: list[Node]) -> Node:
    has_eps = False
    chars: set[str] = set()
    any_char = False
    rest: list[Node] = []
    seen: set = set()
    for x in flat:
        tx = type(x)
        if tx is Empty:
            continue
        if tx is Eps:
            has_eps = True
        elif tx is Chars:
            chars |= x.chars
        elif tx is AnyChar:
            any_char = True
        elif tx is Hole or x not in seen:
            seen.add(x)
            rest.append(x)
    if any_char:
        chars = {c for c in chars if c == "\n"}
        rest.append(ANY)
    if chars:
        rest.append(Chars(chars))
    # r | r* -> r*, r | r+ -> r+, r | r? -> r?, r+ | r* -> r*
    wrapped = {type(x): set() for x in rest}
    for x in rest:
        if type(x) in UNARY:
            wrapped[type(x)].add(x.child)
    covered = wrapped.get(Star, set()) | wrapped.get(Plus, set()) | wrapped.get(Opt, set())
    rest = [x for x in rest if not (x in covered and type(x) is not Hole)]
    if Star in wrapped:
        rest = [x for x in rest if not (type(x) in (Plus, Opt) and x.child in wrapped[Star])]
    if not rest:
        return EPS if has_eps else EMPTY
    rest.sort(key=_sort_key)
    body = rest[0] if len(rest) == 1 else Alt(tuple(rest))
    if has_eps and not nullable(body):
        if type(body) is Plus:
            return _star(body.child)
        return Opt(body)
    return body


def _merge_runs(items: list[Node]) -> list[Node]:
    """``r* r*`` -> ``r*``, ``r r*``/``r* r`` -> ``r+``, ``r+ r*``/``r* r+`` -> ``r+``,
    ``r? r*``/``r* r?`` -> ``r*`` on neighbouring items."""
    out: list[Node] = []
    for x in items:
        if out:
            y = out[-1]
            merged = _merge_pair(y, x)
            if merged is not None:
                out[-1] = merged
                # a merge may enable another with the item before
                while len(out) >= 2:
                    m2 = _merge_pair(out[-2], out[-1])
                    if m2 is None:
                        break
                    out[-2:] = [m2]
                continue
        out.append(x)
    return out


def _within_any(r: Node) -> bool:
    """Whether a star of ``r`` is inside ``.*`` (single characters other than newline)."""
    return type(r) is AnyChar or (type(r) is Chars and "\n" not in r.chars)


def _merge_pair(y: Node, x: Node) -> Node | None:
    ty, tx = type(y), type(x)
    if Hole in (ty, tx):
        return None
    if ty is Star and tx is Star and y.child == ANY and _within_any(x.child):
        return y  # .*[a-z]* -> .*
    if tx is Star and ty is Star and x.child == ANY and _within_any(y.child):
        return x
    if ty is Star and tx is Star and y.child == x.child:
        return y
    if ty is Star and x == y.child or tx is Star and y == x.child:
        return Plus(x if ty is Star else y)
    if ty is Star and tx in (Plus, Opt) and x.child == y.child:
        return Plus(x.child) if tx is Plus else y
    if tx is Star and ty in (Plus, Opt) and y.child == x.child:
        return Plus(y.child) if ty is Plus else x
    return None


__all__ = ["simplify"]
