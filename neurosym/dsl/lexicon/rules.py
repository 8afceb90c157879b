"""The rule language of computed lexicon features (``%feature is_noun = class(SUBJ, OBJ)``):
conditions, values and :class:`FeatureRule`, plain frozen dataclasses beside the regex IR."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from neurosym.errors import Span


@dataclass(frozen=True)
class Name:
    """A name written in a rule (class, feature, role or term), with its position."""

    text: str
    span: Span


@dataclass(frozen=True)
class ClassCond:
    """``class(A, B)``: the token is a member of one of the classes."""

    classes: tuple[Name, ...]
    span: Span


@dataclass(frozen=True)
class TokenCond:
    """``token(".", "!")``: the token's text is one of these."""

    texts: tuple[str, ...]
    span: Span


@dataclass(frozen=True)
class RoleCond:
    """``role(subject)``: the caller's ``roles["subject"]`` is true at the token."""

    role: str
    span: Span


@dataclass(frozen=True)
class BosCond:
    """``bos``: the first real token of the sequence, or the first after a ``<bos>``."""

    span: Span


@dataclass(frozen=True)
class CapitalizedCond:
    """``capitalized``: the token's text starts with an upper-case letter."""

    span: Span


@dataclass(frozen=True)
class HasCond:
    """``has(F)``: the lexicon gives the token a value for lexical feature F."""

    feature: Name
    span: Span


@dataclass(frozen=True)
class PrevCond:
    """``prev(c)``: ``c`` holds at the previous position."""

    inner: "Cond"
    span: Span


@dataclass(frozen=True)
class SeenCond:
    """``seen(c)``: ``c`` held at some earlier position of the segment (strictly before)."""

    inner: "Cond"
    span: Span


@dataclass(frozen=True)
class AndCond:
    left: "Cond"
    right: "Cond"
    span: Span


@dataclass(frozen=True)
class OrCond:
    left: "Cond"
    right: "Cond"
    span: Span


@dataclass(frozen=True)
class NotCond:
    inner: "Cond"
    span: Span


Cond = ClassCond | TokenCond | RoleCond | BosCond | CapitalizedCond | HasCond | PrevCond | SeenCond | AndCond | OrCond | NotCond


@dataclass(frozen=True)
class ValueOf:
    """``value(F, from=prev(c), part=pos, clip=lo..hi, default=x)``: a graded value.

    Steps, in order: the token's value of F (after modifiers); ``from=prev(c)`` takes the
    previous token's value instead, when ``c`` holds there; ``part=pos|neg`` keeps only
    positive (negative) values, as magnitudes; ``clip`` clamps; ``default`` fills the
    positions that have no value."""

    feature: Name
    span: Span
    from_prev: bool = False
    from_cond: Cond | None = None
    part: Literal["pos", "neg"] | None = None
    clip: tuple[float, float] | None = None
    default: float | None = None


@dataclass(frozen=True)
class TermOf:
    """``term(F, T)``: the membership of the token's F value in F's term T."""

    feature: Name
    term: Name
    span: Span


Value = ValueOf | TermOf


@dataclass(frozen=True)
class FeatureRule:
    """A computed feature's definition: ``expr [where gate]``."""

    expr: Cond | Value
    where: Cond | None
    span: Span

    @property
    def graded(self) -> bool:
        return isinstance(self.expr, (ValueOf, TermOf))


def walk_rule(node) -> Iterator:
    """Every node of a rule expression, depth first."""
    yield node
    if isinstance(node, FeatureRule):
        yield from walk_rule(node.expr)
        if node.where is not None:
            yield from walk_rule(node.where)
    elif isinstance(node, (AndCond, OrCond)):
        yield from walk_rule(node.left)
        yield from walk_rule(node.right)
    elif isinstance(node, (NotCond, PrevCond, SeenCond)):
        yield from walk_rule(node.inner)
    elif isinstance(node, ValueOf) and node.from_cond is not None:
        yield from walk_rule(node.from_cond)


def rule_text(rule: FeatureRule) -> str:
    def show(n) -> str:
        if isinstance(n, ClassCond):
            return f"class({', '.join(c.text for c in n.classes)})"
        if isinstance(n, TokenCond):
            return "token(" + ", ".join(f'"{t}"' for t in n.texts) + ")"
        if isinstance(n, RoleCond):
            return f"role({n.role})"
        if isinstance(n, BosCond):
            return "bos"
        if isinstance(n, CapitalizedCond):
            return "capitalized"
        if isinstance(n, HasCond):
            return f"has({n.feature.text})"
        if isinstance(n, PrevCond):
            return f"prev({show(n.inner)})"
        if isinstance(n, SeenCond):
            return f"seen({show(n.inner)})"
        if isinstance(n, AndCond):
            return f"({show(n.left)} & {show(n.right)})"
        if isinstance(n, OrCond):
            return f"({show(n.left)} | {show(n.right)})"
        if isinstance(n, NotCond):
            return f"!{show(n.inner)}"
        if isinstance(n, TermOf):
            return f"term({n.feature.text}, {n.term.text})"
        args = [n.feature.text]
        if n.from_prev:
            args.append(f"from=prev({show(n.from_cond)})" if n.from_cond is not None else "from=prev")
        if n.part:
            args.append(f"part={n.part}")
        if n.clip:
            args.append(f"clip={n.clip[0]:g}..{n.clip[1]:g}")
        if n.default is not None:
            args.append(f"default={n.default:g}")
        return f"value({', '.join(args)})"

    text = show(rule.expr)
    if isinstance(rule.expr, (AndCond, OrCond)):
        text = text[1:-1]
    return text + (f" where {show(rule.where)}" if rule.where is not None else "")
