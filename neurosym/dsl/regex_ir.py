"""Plain IR dataclasses for parsed `.regex` banks; every node carries its source span."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from neurosym.errors import SourceError, Span


@dataclass(frozen=True)
class Regex:
    """A ``/pattern/`` atom; ``span`` points at the opening slash."""

    pattern: str
    span: Span


@dataclass(frozen=True)
class Literal:
    text: str
    span: Span


@dataclass(frozen=True)
class Ref:
    """A reference to a pattern, resolved in the namespace of file ``scope``."""

    name: str
    scope: str
    span: Span


@dataclass(frozen=True)
class Words:
    """A ``%words "file"`` word list (``path`` resolved, ``words`` in file order)."""

    path: str
    words: tuple[str, ...]
    span: Span


@dataclass(frozen=True)
class Seq:
    items: tuple["Expr", ...]
    span: Span


@dataclass(frozen=True)
class Choice:
    options: tuple["Expr", ...]
    span: Span


@dataclass(frozen=True)
class Repeat:
    """``item{min,max}``; ``max=None`` is unbounded (``*`` is 0..None, ``+`` 1..None, ``?`` 0..1)."""

    item: "Expr"
    min: int
    max: int | None
    span: Span


Expr = Regex | Literal | Ref | Words | Seq | Choice | Repeat


@dataclass(frozen=True)
class Pattern:
    name: str
    expr: Expr
    weight: float
    flags: str
    span: Span
    scope: str


@dataclass
class Bank:
    """A parsed bank: its own ``patterns`` (imports included, in file order) and every
    rule loaded transitively, keyed by ``(scope, name)``."""

    path: str | None
    patterns: dict[str, Pattern] = field(default_factory=dict)
    rules: dict[tuple[str, str], Pattern] = field(default_factory=dict)

    def resolve(self, ref: Ref) -> Pattern:
        rule = self.rules.get((ref.scope, ref.name))
        if rule is None:
            raise SourceError.at(ref.span, f"undefined pattern {ref.name}")
        return rule


def walk_expr(expr: Expr) -> Iterator[Expr]:
    """Every node of an expression, depth first (references are not followed)."""
    yield expr
    if isinstance(expr, Seq):
        for x in expr.items:
            yield from walk_expr(x)
    elif isinstance(expr, Choice):
        for x in expr.options:
            yield from walk_expr(x)
    elif isinstance(expr, Repeat):
        yield from walk_expr(expr.item)
