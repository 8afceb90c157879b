"""Parser for `.fsg` weighted finite-state grammars: lark LALR grammar -> plain IR.

One line per arc (``SRC DST LABEL [WEIGHT] [key=value ...]``), final state
(``STATE [WEIGHT]``) or directive (``%start``, ``%weights prob|logprob``,
``%normalize``, ``%threshold``, ``%import``, ``%separator``). This module checks what can be checked
from the text alone — numbers, ranges, attributes, duplicate finals, directives,
import files — and leaves vocabulary, lexicon and graph checks to the compiler
(:mod:`neurosym.compile.fsg`). Every error carries ``path:line:col``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from lark import Token, Tree

from neurosym.dsl.fastlines import merge, split_fast, token
from neurosym.dsl.errors import resolve_path
from neurosym.dsl.escapes import unquote
from neurosym.dsl.source import parse_text, read_source
from neurosym.errors import NeurosymError, SourceError, Span

GRAMMAR = "fsg.lark"  # the lark grammar, beside this module
FRIENDLY = {
    "WORD": "a state, label or weight",
    "STRING": "a quoted word",
    "EPS": "<eps>",
    "CLASS": "@CLASS or @feature:term",
    "KEY": "an attribute (key=value)",
}
ARC_ATTRIBUTES = {"role": "a role name such as subject, or several joined by + (object+head)", "threshold": "a number in (0, 1]"}
MAX_WEIGHT = 1e300  # %normalize sums a state's weights: larger ones would overflow
IMPORT_KINDS = {".regex": "regex", ".lex": "lex"}
_UPPER = re.compile(r"[A-Z_][A-Z0-9_]*\Z")
_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

LabelKind = Literal["literal", "eps", "terminal", "class", "term"]


@dataclass(frozen=True)
class Label:
    """An arc label: a literal word, ``<eps>``, a regex-bank terminal (``YEAR``), a
    lexicon class (``@ADJ_POS``) or a fuzzy term (``@polarity:pos``)."""

    kind: LabelKind
    text: str  # the word, terminal name, class name or feature name
    span: Span
    term: str | None = None

    def __str__(self) -> str:
        if self.kind == "literal":
            return repr(self.text)
        if self.kind == "eps":
            return "<eps>"
        if self.kind == "class":
            return f"@{self.text}"
        if self.kind == "term":
            return f"@{self.text}:{self.term}"
        return self.text


@dataclass
class Arc:
    src: str
    dst: str
    label: Label
    weight: float  # as written (a probability, or a log-probability under %weights logprob)
    span: Span  # the source state
    dst_span: Span
    weight_span: Span | None = None
    role: str | None = None  # one role, or several joined by '+'
    threshold: float | None = None

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.role.split("+")) if self.role else ()


@dataclass
class Final:
    state: str
    weight: float
    span: Span
    weight_span: Span | None = None


@dataclass
class Import:
    path: Path  # resolved
    kind: Literal["regex", "lex"]
    names: list[tuple[str, Span]] | None  # None: everything the file defines
    span: Span


@dataclass
class FsgGrammar:
    """A parsed `.fsg` file."""

    path: str | None
    arcs: list[Arc] = field(default_factory=list)
    finals: list[Final] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    start: tuple[str, Span] | None = None
    weights: Literal["prob", "logprob"] = "prob"
    normalize: bool = False
    threshold: float = 0.5
    separator: str | None = None  # %separator: how terminals join into text (None: the default, neurosym.compile.spelling)

    @property
    def start_state(self) -> str:
        if self.start is not None:
            return self.start[0]
        if self.arcs:
            return self.arcs[0].src
        if self.finals:
            return self.finals[0].state
        raise NeurosymError(f"{self.path or '<string>'}: the grammar has no arcs and no final states")

    def probability(self, weight: float) -> float:
        """A written weight as a probability."""
        return math.exp(weight) if self.weights == "logprob" else weight


def read_fsg(path: str | Path) -> FsgGrammar:
    """Parse an `.fsg` file; imports resolve against its folder."""
    p = Path(path)
    return parse_fsg(read_source(p, str(p)), p)


def parse_fsg(text: str, path: str | Path | None = None) -> FsgGrammar:
    """Parse `.fsg` text; imports resolve against ``path``'s folder (or the cwd)."""
    display = str(path) if path is not None else None
    folder = Path(path).resolve().parent if path is not None else Path.cwd()
    slow, fast = split_fast(text, fast_line)
    tree = parse_text(GRAMMAR, slow, display, FRIENDLY)
    tree.children = merge(tree.children, fast)
    return _Builder(display, folder).build(tree)


# plain arcs and finals, read without lark (neurosym.dsl.fastlines): bare words, a simple
# label, an optional weight, key=value attributes, a comment after a blank
_W = r"[^\s#'\"@<=(),]+"
_LABEL = r"<eps>|<epsilon>|@[A-Za-z_][A-Za-z0-9_]*(?::[A-Za-z_][A-Za-z0-9_]*)?|'[^'\\\n]*'|\"[^\"\\\n]*\"|" + _W
_ATTR = r"[a-z_][a-z0-9_]*=" + _W
_FAST = re.compile(
    r"[ \t]*(" + _W + r")(?:[ \t]+(" + _W + r"))?(?:[ \t]+(" + _LABEL + r"))?(?:[ \t]+(?![a-z_][a-z0-9_]*=)(" + _W + r"))?"
    r"((?:[ \t]+" + _ATTR + r")*)[ \t]*(?:(?<=[ \t])#.*)?"
)
_ATTR_RE = re.compile(r"([a-z_][a-z0-9_]*)=(" + _W + r")")
_LABEL_KIND = {"<": "eps", "@": "lexicon", "'": "literal", '"': "literal"}


def fast_line(line: str, number: int) -> Tree | None:
    """The tree lark gives a plain arc or final line, or ``None`` for any other line."""
    if line.lstrip(" \t")[:1] in ("%", ""):
        return None
    m = _FAST.fullmatch(line)
    if m is None or (m.group(3) is not None and m.group(2) is None) or (m.group(3) is None and m.group(4) is not None):
        return None  # not the shape of an arc (SRC DST LABEL [W]) or a final (STATE [W])
    words = [token("WORD", m.group(k), number, m.start(k) + 1) for k in (1, 2, 4) if m.group(k) is not None]
    attrs = []
    if m.group(5):
        base = m.start(5) + 1
        for a in _ATTR_RE.finditer(m.group(5)):
            key = token("KEY", a.group(1), number, base + a.start())
            attrs.append(Tree("attr", [key, token("WORD", a.group(2), number, base + a.start(2))]))
    if m.group(3) is None:  # STATE [WEIGHT]
        return Tree("final", [*words, *attrs])
    lab = m.group(3)
    kind = _LABEL_KIND.get(lab[0], "bare")
    label_tok = token({"eps": "EPS", "lexicon": "CLASS", "literal": "STRING", "bare": "WORD"}[kind], lab, number, m.start(3) + 1)
    return Tree("arc", [words[0], words[1], Tree(kind, [label_tok]), *words[2:], *attrs])


class _Builder:
    def __init__(self, path: str | None, folder: Path):
        self.path = path
        self.folder = folder
        self.g = FsgGrammar(path)
        self.seen: dict[str, Span] = {}  # directives given once
        self.final_of: dict[str, Final] = {}  # final states by name (duplicates are errors)

    def span(self, tok: Token) -> Span:
        return Span(self.path, tok.line, tok.column)

    def fail(self, tok: Token, message: str) -> SourceError:
        return SourceError.at(self.span(tok), message)

    def build(self, tree: Tree) -> FsgGrammar:
        for item in tree.children:
            getattr(self, item.data)(item)
        self._check_weights()
        return self.g

    # ------------------------------------------------------------------ directives
    def once(self, tok: Token, name: str) -> None:
        if name in self.seen:
            first = self.seen[name]
            raise self.fail(tok, f"%{name} is given twice (first at line {first.line})")
        self.seen[name] = self.span(tok)

    def start_state(self, t: Tree) -> None:
        (tok,) = t.children
        self.once(tok, "start")
        self.g.start = (str(tok), self.span(tok))

    def weights(self, t: Tree) -> None:
        (tok,) = t.children
        self.once(tok, "weights")
        if str(tok) not in ("prob", "logprob"):
            raise self.fail(tok, f"expected 'prob' or 'logprob' after %weights, got {str(tok)!r}")
        if self.g.arcs or self.g.finals:
            raise self.fail(tok, "%weights must come before the first arc or final state")
        self.g.weights = str(tok)

    def normalize(self, t: Tree) -> None:
        self.g.normalize = True

    def separator(self, t: Tree) -> None:
        (tok,) = t.children
        self.once(tok, "separator")
        self.g.separator = unquote(tok, self.span(tok), "a quoted separator")

    def threshold(self, t: Tree) -> None:
        (tok,) = t.children
        self.once(tok, "threshold")
        self.g.threshold = self.fraction(tok, "%threshold")

    def import_(self, t: Tree) -> None:
        path_tok, *names = t.children
        rel = unquote(path_tok, self.span(path_tok), "a quoted word")
        target = resolve_path(self.folder, rel, self.span(path_tok))
        kind = IMPORT_KINDS.get(target.suffix)
        if kind is None:
            raise self.fail(path_tok, f"cannot import {rel!r}: expected a .regex bank or a .lex lexicon")
        if not target.is_file():
            raise self.fail(path_tok, f"cannot import {rel!r}: no such file ({target})")
        listed = [(str(n), self.span(n)) for n in names] if names else None
        self.g.imports.append(Import(target, kind, listed, self.span(path_tok)))

    # ------------------------------------------------------------------ lines
    def arc(self, t: Tree) -> None:
        src, dst, label_tree, *rest = t.children
        weight_tok = rest[0] if rest and isinstance(rest[0], Token) else None
        attrs = [a for a in rest if isinstance(a, Tree)]
        label = self.label(label_tree)
        weight = self.weight(weight_tok) if weight_tok is not None else self.one()
        arc = Arc(str(src), str(dst), label, weight, self.span(src), self.span(dst), self.span(weight_tok) if weight_tok else None)
        for key, value in (a.children for a in attrs):
            if key == "role":
                if not all(_ROLE.match(part) for part in str(value).split("+")):
                    raise self.fail(value, f"expected role names (letters, digits, _) joined by +, got {str(value)!r}")
                if label.kind == "eps":
                    raise self.fail(key, "an <eps> arc reads no token, so it cannot mark a role; put role= on a token arc")
                arc.role = str(value)
            elif key == "threshold":
                if label.kind != "term":
                    raise self.fail(key, "threshold= applies to fuzzy-term labels (@feature:term) only")
                arc.threshold = self.fraction(value, "threshold")
            else:
                known = ", ".join(sorted(ARC_ATTRIBUTES))
                raise self.fail(key, f"unknown arc attribute {str(key)!r}; expected one of {known}")
        self.g.arcs.append(arc)

    def final(self, t: Tree) -> None:
        state, *rest = t.children
        weight_tok = rest[0] if rest and isinstance(rest[0], Token) else None
        for a in rest:
            if isinstance(a, Tree):
                raise self.fail(a.children[0], "final states take no attributes")
        first = self.final_of.get(str(state))
        if first is not None:
            raise self.fail(state, f"state {str(state)!r} is declared final twice (first at line {first.span.line})")
        weight = self.weight(weight_tok) if weight_tok is not None else self.one()
        self.g.finals.append(Final(str(state), weight, self.span(state), self.span(weight_tok) if weight_tok is not None else None))
        self.final_of[str(state)] = self.g.finals[-1]

    def label(self, t: Tree) -> Label:
        (tok,) = t.children
        at = self.span(tok)
        if t.data == "literal":
            word = unquote(tok, at, "a quoted word")
            if not word:
                raise self.fail(tok, "an empty literal reads nothing; use <eps>")
            return Label("literal", word, at)
        if t.data == "eps":
            return Label("eps", "", at)
        if t.data == "lexicon":
            name, _, term = str(tok)[1:].partition(":")
            return Label("term", name, at, term) if term else Label("class", name, at)
        word = str(tok)
        if _UPPER.match(word) and any(c.isalpha() for c in word):
            return Label("terminal", word, at)
        return Label("literal", word, at)

    # ------------------------------------------------------------------ numbers
    def one(self) -> float:
        return 0.0 if self.g.weights == "logprob" else 1.0

    def number(self, tok: Token, what: str) -> float:
        try:
            value = float(str(tok))
        except ValueError:
            raise self.fail(tok, f"expected {what}, got {str(tok)!r}") from None
        if math.isnan(value):
            raise self.fail(tok, f"expected {what}, got NaN")
        return value

    def weight(self, tok: Token) -> float:
        if self.g.weights == "logprob":
            value = self.number(tok, "a log-probability (a number <= 0)")
            if value == math.inf:
                raise self.fail(tok, "a log-probability cannot be +inf")
        else:
            value = self.number(tok, "a weight (a number >= 0)")
            if not 0 <= value <= MAX_WEIGHT:
                raise self.fail(tok, f"weight {str(tok)} is out of range: expected a number from 0 to {MAX_WEIGHT:g}")
        return value

    def fraction(self, tok: Token, what: str) -> float:
        """A membership threshold: a number in (0, 1] (0 would admit every word)."""
        value = self.number(tok, f"a number in (0, 1] for {what}")
        if not 0.0 < value <= 1.0:
            raise self.fail(tok, f"{what} {str(tok)} is out of range: expected a number in (0, 1]")
        return value

    def _check_weights(self) -> None:
        """Without %normalize, each weight is a probability: at most 1."""
        if self.g.normalize:
            return
        for arc in self.g.arcs:
            if arc.weight_span is not None and self.g.probability(arc.weight) > 1.0 + 1e-9:
                raise SourceError.at(arc.weight_span, f"weight {arc.weight:g} is out of range: {self._expected()}")
        for f in self.g.finals:
            if self.g.probability(f.weight) > 1.0 + 1e-9:
                raise SourceError.at(f.weight_span or f.span, f"final weight {f.weight:g} is out of range: {self._expected()}")

    def _expected(self) -> str:
        if self.g.weights == "logprob":
            return "a log-probability must be <= 0 (or add %normalize)"
        return "a probability must be in [0, 1] (or add %normalize)"
