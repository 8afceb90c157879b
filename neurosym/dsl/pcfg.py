"""Parser for `.pcfg` grammars: lark LALR grammar -> IR (:class:`Grammar`), then a name pass.

The format is NLTK's ``CFG``/``PCFG`` text (``S -> NP VP [1.0]``, ``|`` alternatives,
``'word'`` / ``"word"`` terminals, empty alternatives for the empty string, ``%start``)
plus ``#`` comments, ``%normalize``, ``%weights prob|logprob``,
``%import "bank.regex" (NAME, ...)`` for regex-bank terminals, ``/regex/`` lexemes
(a terminal written like a Lark terminal: one string of the pattern's language) and
``%separator "TEXT"`` (how terminals join into text over a tokenizer,
:mod:`neurosym.compile.spelling`).

This module reports, at the offending position: syntax errors, bad directives, missing
or out-of-range probabilities, per-nonterminal sums that are not 1, empty literals,
undefined nonterminals, rules for imported terminals and a start symbol without rules.
The analyses that need numbers (unreachable, non-generating, inconsistent) are in
:mod:`neurosym.compile.pcfg`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from lark import Token, Tree

from neurosym.dsl import regex_ir
from neurosym.dsl.fastlines import merge, split_fast, token
from neurosym.dsl.errors import resolve_path
from neurosym.dsl.escapes import unquote
from neurosym.dsl.source import parse_text, read_source
from neurosym.errors import SourceError, Span
from neurosym.dsl.regex import read_regex_bank
from neurosym.dsl.regex_syntax import parse_pattern

SUM_TOLERANCE = 1e-6
GRAMMAR = "pcfg.lark"  # the lark grammar, beside this module
FRIENDLY = {
    "NAME": "a nonterminal name",
    "STRING": "a quoted terminal",
    "REGEX": "a /regex/ terminal",
    "PROB": "a [probability]",
    "ARROW": "'->'",
    "OR": "'|'",
    "DIRECTIVE": "a %directive",
    "LPAR": "'('",
    "RPAR": "')'",
    "_COMMA": "','",
}
DIRECTIVES = ("start", "normalize", "weights", "import", "separator")


# ---------------------------------------------------------------------- IR
class Terminal(NamedTuple):
    """A terminal symbol: ``kind`` is ``"literal"`` (``value`` is the word), ``"regex"``
    (``value`` is the imported pattern's name) or ``"lexeme"`` (``value`` is the source of
    a ``/regex/`` written in the rule, Python syntax, without the slashes)."""

    kind: str
    value: str

    def __str__(self) -> str:
        if self.kind == "lexeme":
            return lexeme_text(self.value)
        return self.value if self.kind == "regex" else repr(self.value)


def lexeme_text(source: str) -> str:
    """How a lexeme is written in a `.pcfg` file: ``/source/``, each unescaped ``/`` as ``\\/``."""
    return "/" + re.sub(r"(\\.)|/", lambda m: m.group(1) or "\\/", source) + "/"


def lexeme_source(text: str) -> str:
    """The pattern of a ``/.../`` token: the slashes dropped and each ``\\/`` read as ``/``
    (other escapes are the pattern's own)."""
    return re.sub(r"\\(.)", lambda m: "/" if m.group(1) == "/" else m.group(0), text[1:-1])


@dataclass(frozen=True)
class NT:
    """A nonterminal occurrence on a right-hand side."""

    name: str
    span: Span

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Lit:
    """A quoted terminal: one token whose text is ``text``."""

    text: str
    span: Span

    @property
    def terminal(self) -> Terminal:
        return Terminal("literal", self.text)

    def __str__(self) -> str:
        return repr(self.text)


@dataclass(frozen=True)
class RegexTerm:
    """An imported regex-bank terminal: one token whose text the pattern fully matches."""

    name: str
    span: Span

    @property
    def terminal(self) -> Terminal:
        return Terminal("regex", self.name)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Lexeme:
    """A ``/regex/`` terminal: one lexeme, any string the pattern (Python syntax, the
    adapter :mod:`neurosym.dsl.regex_syntax`) fully matches; ``source`` is the pattern."""

    source: str
    span: Span

    @property
    def terminal(self) -> Terminal:
        return Terminal("lexeme", self.source)

    def __str__(self) -> str:
        return lexeme_text(self.source)


Symbol = NT | Lit | RegexTerm | Lexeme


@dataclass
class Production:
    """One alternative ``lhs -> rhs [prob]``.

    ``prob`` is the probability after ``%weights`` and ``%normalize`` (the alternatives of
    one nonterminal sum to exactly 1); ``weight`` is the number as written (``None`` if
    none was). ``span`` is the alternative's first symbol (for an empty one, the ``->``
    or ``|`` before it); ``lhs_span`` is the rule's left-hand side.
    """

    lhs: str
    rhs: tuple[Symbol, ...]
    prob: float
    weight: float | None
    span: Span
    lhs_span: Span
    weight_span: Span | None = None

    def __str__(self) -> str:
        return f"{self.lhs} -> {' '.join(str(s) for s in self.rhs)} [{self.prob!r}]"


@dataclass(frozen=True)
class TerminalImport:
    """``%import "file" (NAME)``: one pattern of a regex bank used as a terminal."""

    name: str
    file: str
    span: Span
    bank: regex_ir.Bank

    @property
    def rule(self) -> regex_ir.Pattern:
        return self.bank.patterns[self.name]


@dataclass
class Grammar:
    """A parsed `.pcfg` file.

    Attributes:
        path: the file as given (``None`` for text).
        start: the start nonterminal; ``start_span`` its ``%start`` or first rule.
        productions: every alternative, in file order.
        imports: regex terminals by name.
        normalize: whether ``%normalize`` was given.
        weights: ``"prob"``, ``"logprob"`` or ``"uniform"`` (no weights written at all:
            every nonterminal's alternatives are equally likely, as for an NLTK ``CFG``).
    """

    path: str | None
    start: str
    start_span: Span
    productions: list[Production]
    imports: dict[str, TerminalImport] = field(default_factory=dict)
    normalize: bool = False
    weights: str = "prob"
    separator: str | None = None  # %separator: how terminals join into text (None: the default, neurosym.compile.spelling)

    @property
    def nonterminals(self) -> list[str]:
        """Left-hand sides in order of first appearance."""
        return list(dict.fromkeys(p.lhs for p in self.productions))

    @property
    def by_lhs(self) -> dict[str, list[Production]]:
        out: dict[str, list[Production]] = {}
        for p in self.productions:
            out.setdefault(p.lhs, []).append(p)
        return out

    def first_rule(self, lhs: str) -> Production:
        return next(p for p in self.productions if p.lhs == lhs)

    @property
    def lexemes(self) -> list[str]:
        """The source of every ``/regex/`` terminal, in order of first appearance."""
        return [t.value for t in self.terminals if t.kind == "lexeme"]

    @property
    def terminals(self) -> list[Terminal]:
        """Every terminal used, in order of first appearance."""
        return list(dict.fromkeys(s.terminal for p in self.productions for s in p.rhs if not isinstance(s, NT)))

    def terminal_spans(self) -> dict[Terminal, Span]:
        """Each terminal's first use."""
        out: dict[Terminal, Span] = {}
        for p in self.productions:
            for s in p.rhs:
                if not isinstance(s, NT):
                    out.setdefault(s.terminal, s.span)
        return out

    def __str__(self) -> str:
        head = [f"%start {self.start}"]
        files: dict[str, list[str]] = {}
        for imp in self.imports.values():
            files.setdefault(imp.file, []).append(imp.name)
        head += [f'%import "{f}" ({", ".join(names)})' for f, names in files.items()]
        if self.separator is not None:
            head.append("%separator " + json.dumps(self.separator, ensure_ascii=False))
        return "\n".join(head + [str(p) for p in self.productions]) + "\n"


def uniform_grammar(rows: list[tuple[str, tuple, Span]], start: str, path: str | None, start_span: Span) -> Grammar:
    """A grammar over strings (terminals concatenated) from ``(lhs, rhs, span)`` rows, each
    nonterminal's alternatives equally likely: what a grammar read without weights (a
    ``.lark`` or ``.gbnf`` file) becomes."""
    counts: dict[str, int] = {}
    for lhs, _, _ in rows:
        counts[lhs] = counts.get(lhs, 0) + 1
    prods = [Production(lhs, rhs, 1.0 / counts[lhs], None, span, span) for lhs, rhs, span in rows]
    return Grammar(path, start, start_span, prods, {}, True, "uniform", "")


# ---------------------------------------------------------------------- parsing
def read_pcfg(path: str | Path) -> Grammar:
    """Parse a `.pcfg` file (imports resolve against its folder)."""
    p = Path(path)
    return parse_pcfg(read_source(p, str(p)), p)


def as_grammar(g: "Grammar | str | Path") -> Grammar:
    """``g`` itself if parsed already, else the grammar read from the file ``g``."""
    return g if isinstance(g, Grammar) else read_pcfg(g)


def parse_pcfg(text: str, path: str | Path | None = None) -> Grammar:
    """Parse grammar text; ``path`` names it in errors and anchors ``%import`` (default: the cwd)."""
    display = None if path is None else str(path)
    folder = Path.cwd() if path is None else Path(path).resolve().parent
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    slow, fast = split_fast(text, fast_line, _alone)
    tree = parse_text(GRAMMAR, slow, display, FRIENDLY)
    tree.children = merge(tree.children, fast)
    return _Builder(display, folder).build(tree)


# one-line rules, read without lark (neurosym.dsl.fastlines); a line that a trailing `\`
# joins to its neighbour, or that a `|` line below continues, is left to lark
_NAME = r"(?:[^\s'\"\[\]|#%(),\\-]|-(?!>))(?:[^\s'\"\[\]|#(),\\-]|-(?!>))*"
_RULE_TOKENS = re.compile(
    r"[ \t\f]*(?:(?P<REGEX>/(?:\\.|[^/\\\n])+/)|(?P<NAME>" + _NAME + r")|(?P<STRING>\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')|(?P<PROB>\[[^\]\n]*\])"
    r"|(?P<ARROW>->)|(?P<OR>\|)|(?P<COMMENT>#.*))"
)
_CONTINUES = re.compile(r"[ \t]*\|")
_SKIPPED = re.compile(r"[ \t]*(?:#.*)?")


def _alone(lines: list[str]) -> list[bool]:
    """Per line, whether it is a whole item: no `\\` joins it to a neighbour and no `|`
    line (after blank and comment lines) continues it. One backward pass (a file of many
    comment lines must not cost a scan per line)."""
    out = [True] * len(lines)
    continued = False  # the next line that is not blank or a comment starts with `|`
    for i in range(len(lines) - 1, -1, -1):
        joined = "\\" in lines[i] or (i > 0 and lines[i - 1].rstrip(" \t\f").endswith("\\"))
        out[i] = not joined and not continued
        if _CONTINUES.match(lines[i]):
            continued = True
        elif not _SKIPPED.fullmatch(lines[i]):
            continued = False
    return out


def fast_line(line: str, number: int) -> Tree | None:
    """The tree lark gives a one-line rule (``A -> B 'c' [0.5] | [0.5]``), or ``None``."""
    toks: list[Token] = []
    pos, end = 0, len(line.rstrip(" \t\f"))
    while pos < end:
        m = _RULE_TOKENS.match(line, pos)
        if m is None or m.end() == m.start(m.lastgroup):
            return None
        kind = m.lastgroup
        if kind != "COMMENT":
            toks.append(token(kind, m.group(kind), number, m.start(kind) + 1))
        pos = m.end()
    if len(toks) < 2 or toks[0].type != "NAME" or toks[1].type != "ARROW" or any(t.type == "ARROW" for t in toks[2:]):
        return None
    children: list = [toks[0], toks[1]]
    alt: list[Token] = []
    for t in toks[2:]:
        if t.type == "OR":
            children += [Tree("alternative", alt), t]
            alt = []
        else:
            alt.append(t)
    children.append(Tree("alternative", alt))
    return Tree("rule", children)


class _Alt(NamedTuple):
    lhs: str
    lhs_span: Span
    rhs: tuple
    weight: str | None
    weight_span: Span | None
    span: Span


class _Builder:
    def __init__(self, display: str | None, folder: Path):
        self.display = display
        self.folder = folder
        self.alts: list[_Alt] = []
        self.start: tuple[str, Span] | None = None
        self.normalize = False
        self.weights: tuple[str, Span] | None = None
        self.imports: dict[str, TerminalImport] = {}
        self.separator: tuple[str, Span] | None = None

    def span(self, node: Tree | Token) -> Span:
        if isinstance(node, Token):
            return Span(self.display, node.line, node.column)
        return Span(self.display, node.meta.line, node.meta.column)

    def end_span(self, tok: Token) -> Span:
        """The position of a token's last character (the ``|`` of a multi-line OR)."""
        return Span(self.display, tok.end_line, tok.end_column - 1)

    # ------------------------------------------------------------------ items
    def build(self, tree: Tree) -> Grammar:
        for item in tree.children:
            if isinstance(item, Tree):
                {"rule": self.rule, "directive": self.directive, "header": self.header}[item.data](item)
        return self.finish()

    def header(self, tree: Tree) -> None:
        """NLTK's ``Grammar with N productions (start state = S)``: a ``%start S``."""
        tok = tree.children[0]
        name = str(tok).rsplit("= ", 1)[1][:-1]
        if self.start is None:
            self.start = (name, self.span(tok).shifted(str(tok).rindex("= ") + 2))

    def rule(self, tree: Tree) -> None:
        lhs_tok, before, *rest = tree.children
        lhs, lhs_span = str(lhs_tok), self.span(lhs_tok)
        for node in rest:
            if isinstance(node, Token):  # the OR before the next alternative
                before = node
                continue
            self.alternative(lhs, lhs_span, node, self.end_span(before) if before.type == "OR" else self.span(before))

    def alternative(self, lhs: str, lhs_span: Span, tree: Tree, sep_span: Span) -> None:
        rhs: list = []
        weight: str | None = None
        weight_span: Span | None = None
        for tok in tree.children:
            at = self.span(tok)
            if tok.type == "PROB":
                if weight is not None:
                    raise SourceError.at(at, f"a second probability for one alternative (the first is {weight} at column {weight_span.col})")
                weight, weight_span = str(tok)[1:-1].strip(), at
            elif tok.type == "STRING":
                text = unquote(tok, at, strict=False)
                if text == "":
                    raise SourceError.at(at, "empty terminal ''; write an empty alternative (e.g. A -> 'x' [0.5] | [0.5]) for the empty string")
                rhs.append(Lit(text, at))
            elif tok.type == "REGEX":
                source = lexeme_source(str(tok))
                parse_pattern(source, at.shifted(1))  # a bad pattern is reported at its own column
                rhs.append(Lexeme(source, at))
            else:
                rhs.append(NT(str(tok), at))
        symbols = [tok for tok in tree.children if tok.type != "PROB"]
        span = self.span(symbols[0]) if symbols else sep_span
        self.alts.append(_Alt(lhs, lhs_span, tuple(rhs), weight, weight_span, span))

    def directive(self, tree: Tree) -> None:
        head, *args = tree.children
        at = self.span(head)
        name = str(head)[1:].strip()
        if name not in DIRECTIVES:
            raise SourceError.at(at, f"unknown directive %{name}; expected one of {', '.join('%' + d for d in DIRECTIVES)}")
        kinds = [a.type if isinstance(a, Token) else "names" for a in args]
        want = {"start": ["NAME"], "normalize": [], "weights": ["NAME"], "import": ["STRING", "names"], "separator": ["STRING"]}[name]
        if kinds != want:
            usage = {
                "start": "%start NAME",
                "normalize": "%normalize",
                "weights": "%weights prob|logprob",
                "import": '%import "file.regex" (NAME, ...)',
                "separator": '%separator " " (or "" for terminals that concatenate)',
            }[name]
            bad = args[len(want)] if len(args) > len(want) and kinds[: len(want)] == want else (args[0] if args else head)
            raise SourceError.at(self.span(bad) if bad is not head else at, f"bad %{name} directive; write {usage}")
        if name == "start":
            if self.start is not None:
                raise SourceError.at(at, f"a second %start (the first is at line {self.start[1].line})")
            self.start = (str(args[0]), self.span(args[0]))
        elif name == "normalize":
            self.normalize = True
        elif name == "weights":
            value, vat = str(args[0]), self.span(args[0])
            if value not in ("prob", "logprob"):
                raise SourceError.at(vat, f"unknown weight kind {value!r}; expected prob or logprob")
            if self.weights is not None and self.weights[0] != value:
                raise SourceError.at(vat, f"%weights {value} contradicts %weights {self.weights[0]} at line {self.weights[1].line}")
            self.weights = (value, vat)
        elif name == "separator":
            if self.separator is not None:
                raise SourceError.at(at, f"a second %separator (the first is at line {self.separator[1].line})")
            self.separator = (unquote(args[0], self.span(args[0]), "a quoted separator"), at)
        else:
            self.import_(args[0], args[1])

    def import_(self, file_tok: Token, names: Tree) -> None:
        at = self.span(file_tok)
        rel = unquote(file_tok, at, strict=False)
        target = resolve_path(self.folder, rel, at)
        if not target.is_file():
            raise SourceError.at(at, f"no such file {rel}" if not target.exists() else f"{rel} is not a file")
        if target.suffix != ".regex":
            raise SourceError.at(at, f"%import takes terminals from a regex bank (.regex); {rel} is "
                                     f"{'a ' + target.suffix + ' file' if target.suffix else 'not one'} (a .pcfg cannot import another grammar's rules)")
        shown = rel if self.display is None else str(Path(self.display).parent / rel)
        bank = read_regex_bank(shown if Path(shown).resolve() == target else target)
        for tok in names.children:
            if tok.type != "NAME":
                continue
            name, nat = str(tok), self.span(tok)
            if name not in bank.patterns:
                have = ", ".join(bank.patterns) or "no patterns"
                raise SourceError.at(nat, f"{rel} does not define {name} (it defines {have})")
            if name in self.imports:
                raise SourceError.at(nat, f"{name} is imported twice (first at line {self.imports[name].span.line})")
            self.imports[name] = TerminalImport(name, rel, nat, bank)

    # ------------------------------------------------------------------ semantics
    def finish(self) -> Grammar:
        if not self.alts:
            raise SourceError("the grammar has no rules (expected lines like S -> NP VP [1.0])", self.display, 1, 1)
        kind = self.weights[0] if self.weights else "prob"
        written = any(a.weight is not None for a in self.alts)
        normalize = self.normalize or not written
        if not written:
            kind = "uniform"
        values = [self.value(a, kind, normalize) for a in self.alts]
        lhs_of = {}
        for a in self.alts:
            lhs_of.setdefault(a.lhs, a.lhs_span)
            if a.lhs in self.imports:
                imp = self.imports[a.lhs]
                raise SourceError.at(a.lhs_span, f"{a.lhs} is a regex terminal (imported at line {imp.span.line}); it cannot have rules")
        probs = self.normalized(values, kind, normalize)
        prods = []
        for a, p, w in zip(self.alts, probs, values):
            rhs = tuple(self.resolve(s, lhs_of) for s in a.rhs)
            prods.append(Production(a.lhs, rhs, p, None if a.weight is None else w, a.span, a.lhs_span, a.weight_span))
        if self.start is not None:
            start, start_span = self.start
            if start not in lhs_of:
                hint = " (it is a regex terminal)" if start in self.imports else ""
                raise SourceError.at(start_span, f"start symbol {start} has no rules{hint}")
        else:
            start, start_span = self.alts[0].lhs, self.alts[0].lhs_span
        separator = self.separator[0] if self.separator else None
        return Grammar(self.display, start, start_span, prods, dict(self.imports), self.normalize, kind, separator)

    def resolve(self, sym, lhs_of: dict) -> Symbol:
        if not isinstance(sym, NT) or sym.name in lhs_of:
            return sym
        if sym.name in self.imports:
            return RegexTerm(sym.name, sym.span)
        hint = ""
        if sym.name.isupper() and sym.name.replace("_", "").isalnum():
            hint = '; to use a regex-bank pattern as a terminal, add %import "file.regex" (' + sym.name + ")"
        raise SourceError.at(sym.span, f"undefined nonterminal {sym.name} (no rule has it on the left){hint}")

    def value(self, a: _Alt, kind: str, normalize: bool) -> float:
        """The alternative's weight as a number, range-checked (1.0 / 0.0 when unwritten)."""
        if a.weight is None:
            if not normalize:
                raise SourceError.at(a.span, f"this alternative of {a.lhs} has no probability; write one like [0.5] or add %normalize")
            return 0.0 if kind == "logprob" else 1.0
        at = a.weight_span
        try:
            v = float(a.weight)
        except ValueError:
            raise SourceError.at(at, f"expected a number in [...], got {a.weight!r}") from None
        if math.isnan(v):
            raise SourceError.at(at, "a probability cannot be NaN")
        if kind == "logprob":
            if v == math.inf or (v > 0 and not normalize):
                raise SourceError.at(at, f"log-probability {a.weight} is out of range: it must be <= 0 (a probability <= 1)")
            return v
        if not normalize and not 0.0 <= v <= 1.0:
            raise SourceError.at(at, f"probability {a.weight} is out of range [0, 1]")
        if normalize and not 0.0 <= v < math.inf:
            raise SourceError.at(at, f"weight {a.weight} is out of range: %normalize weights must be non-negative and finite")
        return v

    def normalized(self, values: list[float], kind: str, normalize: bool) -> list[float]:
        """Per-LHS probabilities summing to exactly 1 (sums off by more than 1e-6 are errors
        unless ``%normalize``)."""
        groups: dict[str, list[int]] = {}
        for i, a in enumerate(self.alts):
            groups.setdefault(a.lhs, []).append(i)
        out = [0.0] * len(values)
        for lhs, idx in groups.items():
            vs = [values[i] for i in idx]
            if kind == "logprob":
                top = max(vs)
                ps = [0.0 if top == -math.inf else math.exp(v - top) for v in vs] if normalize else [math.exp(v) for v in vs]
            else:
                ps = vs
            try:
                total = math.fsum(ps)
            except OverflowError:  # huge weights under %normalize: rescale by the largest first
                top = max(ps)
                ps = [v / top for v in ps]
                total = math.fsum(ps)
            first = self.alts[idx[0]].lhs_span
            if normalize:
                if total == 0.0:
                    raise SourceError.at(first, f"every weight of {lhs} is 0, so %normalize cannot rescale them")
            elif abs(total - 1.0) > SUM_TOLERANCE:
                raise SourceError.at(first, f"the probabilities of {lhs} sum to {total:.10g}, not 1 (fix them or add %normalize)")
            for i, p in zip(idx, ps):
                out[i] = p / total
        return out



__all__ = [
    "Grammar",
    "Lexeme",
    "Lit",
    "NT",
    "Production",
    "RegexTerm",
    "Symbol",
    "Terminal",
    "TerminalImport",
    "as_grammar",
    "lexeme_source",
    "lexeme_text",
    "read_pcfg",
    "parse_pcfg",
    "uniform_grammar",
]
