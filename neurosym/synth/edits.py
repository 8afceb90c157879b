"""The single-edit neighbourhood of a synthesis regex (local search): its subtrees, a
subtree replaced, and every regex one edit away."""

from __future__ import annotations

from neurosym.synth.regex_ast import NARY, UNARY, Alt, Cat, Hole, Node
from neurosym.synth.simplify import simplify


def subtrees(r: Node, path: tuple = ()):
    """Yield ``(path, node)`` for every node, root first; a path is a tuple of child indices."""
    yield path, r
    t = type(r)
    if t in NARY:
        for i, x in enumerate(r.items):
            yield from subtrees(x, path + (i,))
    elif t in UNARY:
        yield from subtrees(r.child, path + (0,))


def replace_at(r: Node, path: tuple, new: Node) -> Node:
    """``r`` with the node at ``path`` replaced by ``new``."""
    if not path:
        return new
    t = type(r)
    i, rest = path[0], path[1:]
    if t in NARY:
        items = list(r.items)
        items[i] = replace_at(items[i], rest, new)
        return t(tuple(items))
    return t(replace_at(r.child, rest, new))


def edits(r: Node, leaves: list[Node], with_holes: bool = False) -> list[Node]:
    """The single-edit neighbourhood of ``r``, simplified and deduplicated (``r`` excluded).

    At every node: replace it by a leaf (or a hole), wrap it in ``*``, ``+`` or ``?``,
    unwrap it (a postfix by its operand, a sequence or alternation by one of its items),
    concatenate a leaf before or after it, alternate it with a leaf, and delete one
    item of a sequence or alternation.
    """
    out: dict[Node, None] = {}
    base = simplify(r)

    def add(x: Node) -> None:
        x = simplify(x)
        if x != base:
            out.setdefault(x, None)

    for path, node in subtrees(r):
        t = type(node)
        for leaf in leaves:
            if leaf != node:
                add(replace_at(r, path, leaf))
        if with_holes and t is not Hole:
            add(replace_at(r, path, Hole()))
        for w in UNARY:
            if t is not w:
                add(replace_at(r, path, w(node)))
        if t in UNARY:
            add(replace_at(r, path, node.child))
        if t in NARY:
            for i, x in enumerate(node.items):
                add(replace_at(r, path, x))
                if len(node.items) > 2:
                    add(replace_at(r, path, t(node.items[:i] + node.items[i + 1 :])))
        for leaf in leaves:
            add(replace_at(r, path, Cat((node, leaf))))
            add(replace_at(r, path, Cat((leaf, node))))
            add(replace_at(r, path, Alt((node, leaf))))
    return list(out)


__all__ = ["edits", "replace_at", "subtrees"]
