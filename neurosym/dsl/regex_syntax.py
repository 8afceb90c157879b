"""Python-syntax regex patterns -> a plain syntax tree: the one adapter to interegular.

interegular parses the pattern; its tree is built from private classes
(``_Concatenation``, ``_Repeated``, ``_CharGroup``, the ``_DOT`` and ``_EMPTY``
singletons), so this module is the only one that reads it
(``tests/test_architecture.py`` holds every other module to interegular's public
names). :func:`parse_pattern` checks a pattern, parses it and gives back our own
frozen dataclasses, which the NFA builder (:mod:`neurosym.compile.nfa`) and the
synthesis AST (:mod:`neurosym.synth.regex_ast`) walk:

* :class:`Alternation` — options, with the inline flags the group turns on and off
  (letters ``i``, ``m``, ``s``); the root of every parsed pattern;
* :class:`Concatenation` — parts in order;
* :class:`Repetition` — ``base{min,max}`` (``max=None``: unbounded);
* :class:`CharClass` — a set of characters, or every character but them (``negated``);
* :data:`ANY_CHAR` — ``.``; :data:`EMPTY_STRING` — the empty string.
"""

from __future__ import annotations

from dataclasses import dataclass

import interegular
from interegular import patterns as ire

from neurosym.dsl.pattern_check import check_pattern, normalize_pattern
from neurosym.errors import SourceError, Span


@dataclass(frozen=True)
class Alternation:
    """``a|b|...``; ``flags_on`` / ``flags_off`` are the inline flags (``i``, ``m``,
    ``s``) a group such as ``(?i:...)`` or ``(?-i:...)`` sets for its options."""

    options: tuple[Syntax, ...]
    flags_on: frozenset[str] = frozenset()
    flags_off: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Concatenation:
    parts: tuple[Syntax, ...]


@dataclass(frozen=True)
class Repetition:
    """``base{min,max}``; ``max`` is None when unbounded (``*``, ``+``, ``{m,}``)."""

    base: Syntax
    min: int
    max: int | None


@dataclass(frozen=True)
class CharClass:
    """One character of ``chars`` (or, ``negated``, any character not in ``chars``)."""

    chars: frozenset[str]
    negated: bool = False


@dataclass(frozen=True)
class AnyChar:
    """``.``: any character but a newline (any character at all under the ``s`` flag)."""


@dataclass(frozen=True)
class EmptyString:
    """The empty string."""


Syntax = Alternation | Concatenation | Repetition | CharClass | AnyChar | EmptyString
ANY_CHAR = AnyChar()
EMPTY_STRING = EmptyString()

FLAG_LETTERS = (("i", ire.REFlags.CASE_INSENSITIVE), ("m", ire.REFlags.MULTILINE), ("s", ire.REFlags.SINGLE_LINE))
SENTINEL = "\x00"


class UnsupportedConstruct(Exception):
    """A node of interegular's tree with no regular-language reading (e.g. a lookaround)."""


def flag_letters(flags: ire.REFlags) -> frozenset[str]:
    """interegular's flag set as letters (``i``, ``m``, ``s``)."""
    return frozenset(letter for letter, flag in FLAG_LETTERS if flags & flag)


def convert(node) -> Syntax:
    """interegular's tree -> ours (raises :class:`UnsupportedConstruct` on a node that is
    none of the six)."""
    if isinstance(node, ire.Pattern):
        return Alternation(tuple(convert(o) for o in node.options), flag_letters(node.added_flags), flag_letters(node.removed_flags))
    if isinstance(node, ire._Concatenation):
        return Concatenation(tuple(convert(p) for p in node.parts))
    if isinstance(node, ire._Repeated):
        return Repetition(convert(node.base), node.min, node.max)
    if isinstance(node, ire._CharGroup):
        return CharClass(frozenset(node.chars), bool(node.negated))
    if node is ire._DOT:
        return ANY_CHAR
    if node is ire._EMPTY:
        return EMPTY_STRING
    raise UnsupportedConstruct(type(node).__name__)


def parse_pattern(pattern: str, span: Span | None = None, ignore_case: bool = False) -> Alternation:
    """Check and parse a Python-syntax pattern into its syntax tree (errors carry positions).

    ``span``, when given, is the position of the pattern's first character;
    ``ignore_case`` says whether the ``i`` flag applies from outside the pattern."""
    at = span or Span(None, 1, 1)
    check_pattern(pattern, Span(at.path, at.line, at.col - 1), ignore_case)
    try:
        # interegular's public parse simplifies, and simplify() loses the removed flags of
        # a scoped group wrapped in a group of one option, e.g. (?-i:a) as the whole pattern
        # under flags="i". Parsed as one option of a two-option alternation (a NUL sentinel
        # the other), the pattern is never collapsed; the sentinel option is then dropped.
        parsed = interegular.parse_pattern(f"(?:{normalize_pattern(pattern)}|{SENTINEL})")
        tree = convert(parsed)
        *options, sentinel = tree.options
        if not options or sentinel != Concatenation((CharClass(frozenset(SENTINEL)),)):
            raise ire.InvalidSyntax("unexpected parse")  # never for a pattern that parses on its own
        return Alternation(tuple(options), tree.flags_on, tree.flags_off)
    except (ire.Unsupported, UnsupportedConstruct) as err:
        raise SourceError.at(at, f"unsupported regex feature: {err}; only regular languages are supported") from None
    except (ire.InvalidSyntax, ValueError) as err:
        raise SourceError.at(at, f"cannot parse the pattern {pattern!r}: {err or 'invalid syntax'}") from None


__all__ = [
    "ANY_CHAR", "EMPTY_STRING", "AnyChar", "Alternation", "CharClass", "Concatenation", "EmptyString", "Repetition", "Syntax",
    "parse_pattern",
]
