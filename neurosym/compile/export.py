r"""Any neurosym grammar written in the grammar languages of other engines (``neurosym export``).

:func:`export_grammar` reads any grammar file (``.pcfg``, a JSON Schema ``.json``,
``.lark``, ``.gbnf``, a ``.regex`` pattern, an ``.fsg``, a ``.txt`` word list) as one
:class:`~neurosym.dsl.pcfg.Grammar` over strings (:func:`string_grammar`: an automaton
becomes a right-linear grammar over character classes, and a grammar whose terminals are
joined by a ``%separator`` gets the separator written into its terminals, so its text is
its terminals concatenated), and writes it for another engine. The `.pcfg` (read by
neurosym's parser; the probabilities are dropped: the peers only mask) is written as

* :func:`to_gbnf`: XGrammar's EBNF (GBNF, as llama.cpp and transformers-cfg read it):
  rules ``name ::= ...``, literals ``"..."``, and each ``/regex/`` lexeme spelled out
  from its syntax tree (character classes, groups, ``*``, ``+``, ``?``; bounded
  repetition written out as copies, which every GBNF dialect reads);
* :func:`to_lark`: a Lark grammar (for lark's own Earley parser, llguidance and SynCode):
  lexemes as Lark regex terminals, literals as strings, no ``%ignore`` (terminals
  concatenate, as under ``%separator ""``);
* :func:`to_recursive_regex`: one pattern of the ``regex`` package, each nonterminal a
  named group in a ``(?(DEFINE)...)`` block called by ``(?&name)``. With
  ``regex.fullmatch(..., partial=True)`` it says whether a text is a viable prefix of
  the grammar's language: the independent judge of a mask difference.

The text of a grammar is its terminals concatenated (``%separator ""``): the grammars
these converters serve write their whitespace themselves (``grammars/json.pcfg``).
The converters refuse a left-recursive grammar for the recursive regex (it would not
terminate) and imported regex-bank terminals (write them as ``/regex/``).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from typing import Any

import numpy as np

from neurosym.compile.dfa import OTHER, CharDFA
from neurosym.compile.spelling import BARE, SPACED, Separator
from neurosym.dsl.pcfg import NT, Grammar, Lexeme, Lit, Production, lexeme_text
from neurosym.dsl.regex_syntax import (
    Alternation, AnyChar, CharClass, Concatenation, EmptyString, Repetition, Syntax, parse_pattern,
)
from neurosym.errors import NeurosymError, Span

MAX_CODEPOINT = 0x10FFFF


def _names(grammar: Grammar, style: str) -> dict[str, str]:
    """A name per nonterminal that the target language accepts (distinct, readable)."""
    out: dict[str, str] = {}
    for i, nt in enumerate(grammar.nonterminals):
        base = re.sub(r"[^A-Za-z0-9]", "_", nt).lower() if style == "lark" else re.sub(r"[^A-Za-z0-9]", "-", nt)
        name = f"n{i}_{base}" if style == "lark" else f"n{i}-{base}"
        out[nt] = "root" if nt == grammar.start and style == "gbnf" else name
    return out


def _symbols(grammar: Grammar) -> None:
    for p in grammar.productions:
        for s in p.rhs:
            if not isinstance(s, (NT, Lit, Lexeme)):
                raise NeurosymError(f"{grammar.path}: the converters take literals and /regex/ terminals; write {s} as a /regex/")


# ---------------------------------------------------------------------- character classes
def _ranges(chars: frozenset[str], negated: bool) -> list[tuple[int, int]]:
    """The code-point ranges of a class (its complement, negated), sorted."""
    points = sorted(ord(c) for c in chars)
    ranges: list[tuple[int, int]] = []
    for p in points:
        if ranges and ranges[-1][1] == p - 1:
            ranges[-1] = (ranges[-1][0], p)
        else:
            ranges.append((p, p))
    if not negated:
        return ranges
    out, at = [], 0
    for lo, hi in ranges:
        if lo > at:
            out.append((at, lo - 1))
        at = hi + 1
    if at <= MAX_CODEPOINT:
        out.append((at, MAX_CODEPOINT))
    return _no_surrogates(out)


def _no_surrogates(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ranges without U+D800-U+DFFF (no UTF-8 text holds a surrogate)."""
    out = []
    for lo, hi in ranges:
        if lo < 0xD800:
            out.append((lo, min(hi, 0xD7FF)))
        if hi > 0xDFFF:
            out.append((max(lo, 0xE000), hi))
    return out


def _class_char(c: int, special: str, hex_escapes: bool = False) -> str:
    ch = chr(c)
    if ch in special or ch == "\\":
        return f"\\x{c:02x}" if hex_escapes else "\\" + ch
    if 0x20 <= c < 0x7F:
        return ch
    return f"\\x{c:02x}" if c < 0x80 else f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"


def _class(ranges: list[tuple[int, int]], special: str, hex_escapes: bool = False) -> str:
    def one(c: int) -> str:
        return _class_char(c, special, hex_escapes)

    parts = [one(lo) if lo == hi else f"{one(lo)}-{one(hi)}" for lo, hi in ranges]
    return "[" + "".join(parts) + "]"


# ---------------------------------------------------------------------- GBNF
def _gbnf_regex(node: Syntax, hx: bool = False) -> str:
    if isinstance(node, Alternation):
        if node.flags_on or node.flags_off:
            raise NeurosymError("the GBNF converter takes patterns without inline flags")
        return "(" + " | ".join(_gbnf_regex(o, hx) for o in node.options) + ")"
    if isinstance(node, Concatenation):
        return "(" + " ".join(_gbnf_regex(p, hx) for p in node.parts) + ")" if node.parts else '""'
    if isinstance(node, Repetition):
        base = _gbnf_regex(node.base, hx)
        if (node.min, node.max) == (0, None):
            return base + "*"
        if (node.min, node.max) == (1, None):
            return base + "+"
        if (node.min, node.max) == (0, 1):
            return base + "?"
        fixed = [base] * node.min
        if node.max is None:
            return "(" + " ".join(fixed + [base + "*"]) + ")"
        tail = ""
        for _ in range(node.max - node.min):  # x{0,2} = (x (x)?)?
            tail = f"({base} {tail})?" if tail else f"{base}?"
        return "(" + " ".join(fixed + ([tail] if tail else [])) + ")" if fixed or tail else '""'
    if isinstance(node, CharClass):
        return _class(_ranges(node.chars, node.negated), "]^-", hx)
    if isinstance(node, AnyChar):
        return "[^\\n]"
    if isinstance(node, EmptyString):
        return '""'
    raise NeurosymError(f"cannot write {node!r} in GBNF")


def _gbnf_literal(text: str, hex_escapes: bool = False) -> str:
    out = []
    for ch in text:
        c = ord(ch)
        out.append(_class_char(c, '"', hex_escapes) if ch in '"\\' else ch if 0x20 <= c < 0x7F else _class_char(c, ""))
    return '"' + "".join(out) + '"'


def to_gbnf(grammar: Grammar, hex_escapes: bool = False) -> str:
    """The grammar in GBNF / XGrammar EBNF; the start rule is ``root``. With
    ``hex_escapes``, a quote, backslash or class metacharacter is written ``\\xHH``
    (transformers-cfg reads no ``\\-`` or ``\\]``; XGrammar reads both)."""
    _symbols(grammar)
    names = _names(grammar, "gbnf")
    lexemes = {s: f"lexeme{i}" for i, s in enumerate(grammar.lexemes)}
    lines = []
    for nt, prods in grammar.by_lhs.items():
        alts = []
        for p in prods:
            syms = [names[s.name] if isinstance(s, NT) else _gbnf_literal(s.text, hex_escapes) if isinstance(s, Lit) else lexemes[s.source] for s in p.rhs]
            alts.append(" ".join(syms) if syms else '""')
        lines.append(f"{names[nt]} ::= " + " | ".join(alts))
    for source, name in lexemes.items():
        lines.append(f"{name} ::= {_gbnf_regex(parse_pattern(source), hex_escapes)}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- Lark
def _lark_literal(text: str) -> str:
    return json.dumps(text)  # a JSON string is a Lark string literal (its escapes are Python's)


def to_lark(grammar: Grammar, start: str = "start") -> str:
    """The grammar in Lark's syntax, with ``start`` the start rule and each lexeme a
    regex terminal ``LEXEMEi``; no ``%ignore`` (terminals concatenate)."""
    _symbols(grammar)
    names = _names(grammar, "lark")
    lexemes = {s: f"LEXEME{i}" for i, s in enumerate(grammar.lexemes)}
    lines = [f"{start}: {names[grammar.start]}"]
    for nt, prods in grammar.by_lhs.items():
        alts = []
        for p in prods:
            syms = [names[s.name] if isinstance(s, NT) else _lark_literal(s.text) if isinstance(s, Lit) else lexemes[s.source] for s in p.rhs]
            alts.append(" ".join(syms))
        lines.append(f"{names[nt]}: " + "\n    | ".join(alts))
    for source, name in lexemes.items():
        lines.append(f"{name}: {lexeme_text(source)}")
    return "\n".join(lines) + "\n"


def lark_parser(grammar: Grammar):
    """lark's Earley parser of the grammar (dynamic lexer: terminals are matched
    character by character, so they may concatenate with nothing between them)."""
    from lark import Lark  # lazy: lark is a dependency, loaded only by the benches and tests that parse

    return Lark(to_lark(grammar), start="start", parser="earley", lexer="dynamic")


# ---------------------------------------------------------------------- the regex package
def _left_recursive(grammar: Grammar) -> str | None:
    """A nonterminal that can derive itself in leftmost position (through nullable
    prefixes), or None."""
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for p in grammar.productions:
            if p.lhs not in nullable and all(isinstance(s, NT) and s.name in nullable for s in p.rhs):
                nullable.add(p.lhs)
                changed = True
    first: dict[str, set[str]] = {nt: set() for nt in grammar.nonterminals}
    for p in grammar.productions:
        for s in p.rhs:
            if not isinstance(s, NT):
                break
            first[p.lhs].add(s.name)
            if s.name not in nullable:
                break
    for nt in grammar.nonterminals:
        seen, stack = set(), list(first[nt])
        while stack:
            x = stack.pop()
            if x == nt:
                return nt
            if x not in seen:
                seen.add(x)
                stack.extend(first[x])
    return None


def to_recursive_regex(grammar: Grammar) -> str:
    """One ``regex``-package pattern whose full matches are the grammar's texts."""
    _symbols(grammar)
    bad = _left_recursive(grammar)
    if bad is not None:
        raise NeurosymError(f"{grammar.path}: {bad} is left-recursive; the recursive regex would not terminate")
    names = {nt: f"n{i}" for i, nt in enumerate(grammar.nonterminals)}
    groups = []
    for nt, prods in grammar.by_lhs.items():
        alts = []
        for p in prods:
            alts.append("".join(f"(?&{names[s.name]})" if isinstance(s, NT) else re.escape(s.text) if isinstance(s, Lit) else f"(?:{s.source})"
                                for s in p.rhs))
        groups.append(f"(?P<{names[nt]}>{'|'.join(alts)})")
    return f"(?(DEFINE){''.join(groups)})(?&{names[grammar.start]})"


class PrefixJudge:
    """Whether a text is in the grammar's language, or a viable prefix of it, by the
    ``regex`` package's (partial) full matching of :func:`to_recursive_regex`."""

    def __init__(self, grammar: Grammar):
        import regex  # lazy: in the bench extra

        self.pattern = regex.compile(to_recursive_regex(grammar))

    def complete(self, text: str) -> bool:
        return self.pattern.fullmatch(text) is not None

    def viable(self, text: str) -> bool:
        return self.pattern.fullmatch(text, partial=True) is not None


# ---------------------------------------------------------------------- any grammar as one over strings
# (neurosym.kinds.string_grammar reads any file into one; these are its parts)
FORMATS = ("lark", "gbnf", "ebnf", "pcfg")
_SPAN = Span(None, 1, 1)


def _class_source(chars: list[str] | frozenset[str], negated: bool) -> str:
    return _class(_ranges(frozenset(chars), negated), "]^-\\[")


def dfa_productions(dfa: CharDFA, prefix: str, weight_of=None) -> tuple[str, list[Production]]:
    """A character DFA as a right-linear grammar: one nonterminal per state, one
    production per (state, character class) arc, a one-character ``/[...]/`` lexeme each,
    and an empty production per final state; the start nonterminal and the productions.
    Probabilities: uniform over a state's choices."""
    members = dfa.partition.members
    mentioned = frozenset(c for k, chars in enumerate(members) if k != OTHER for c in chars)
    classes = [_class_source(mentioned, True) if k == OTHER else _class_source(chars, False) for k, chars in enumerate(members)]
    prods = []
    Q, K = dfa.trans.shape
    for q in range(Q):
        arcs = [(k, int(dfa.trans[q, k])) for k in range(K) if dfa.trans[q, k] >= 0]
        n = len(arcs) + bool(dfa.final[q])
        for k, r in arcs:
            prods.append(Production(f"{prefix}{q}", (Lexeme(classes[k], _SPAN), NT(f"{prefix}{r}", _SPAN)), 1.0 / n, None, _SPAN, _SPAN))
        if dfa.final[q]:
            prods.append(Production(f"{prefix}{q}", (), 1.0 / n, None, _SPAN, _SPAN))
    return f"{prefix}0", prods


def concatenated(grammar: Grammar) -> Grammar:
    """The same language of texts with its separator written into the terminals, so the
    text is the terminals concatenated (``%separator ""``). Each nonterminal is split by
    the context it starts in and the one it leaves (:class:`~neurosym.compile.spelling.Separator`:
    a terminal's glue depends on the context before it, the context after it on the
    terminal), so every text is spelled as neurosym spells it; probabilities kept."""
    if grammar.separator == "":
        return grammar
    sep = Separator(" " if grammar.separator is None else grammar.separator)

    def after(sym) -> int:
        return sep.context_after(sym.text if isinstance(sym, Lit) else "")

    def glued(sym, ctx: int):
        glue = sep.glue(ctx, sym.text if isinstance(sym, Lit) else "x")
        if not glue:
            return [sym]
        return [Lit(glue, sym.span), sym] if not isinstance(sym, Lit) else [Lit(glue + sym.text, sym.span)]

    prods = []
    for p in grammar.productions:
        n = len(p.rhs)
        for ctxs in itertools.product((BARE, SPACED), repeat=n + 1):
            rhs, ok = [], True
            for i, sym in enumerate(p.rhs):
                if isinstance(sym, NT):
                    rhs.append(NT(f"{sym.name}@{ctxs[i]}{ctxs[i + 1]}", sym.span))
                elif after(sym) != ctxs[i + 1]:
                    ok = False
                    break
                else:
                    rhs += glued(sym, ctxs[i])
            if ok and (n or ctxs[0] == ctxs[-1]):
                prods.append(Production(f"{p.lhs}@{ctxs[0]}{ctxs[-1]}", tuple(rhs), p.prob, p.weight, p.span, p.lhs_span))
    start = f"{grammar.start}@S"
    prods = [Production(start, (NT(f"{grammar.start}@{BARE}{c}", _SPAN),), 1.0, None, _SPAN, _SPAN) for c in (BARE, SPACED)] + prods
    return pruned(Grammar(grammar.path, start, grammar.start_span, prods, {}, True, grammar.weights, ""))


def pruned(grammar: Grammar) -> Grammar:
    """Only the productions that derive some text and are reachable; each nonterminal's
    probabilities renormalised over what is left (the split contexts leave some empty)."""
    from neurosym.compile.pcfg_check import generating  # lazy: compile-level analyses

    live = generating(grammar.productions)
    prods = [p for p in grammar.productions if p.lhs in live and all(not isinstance(s, NT) or s.name in live for s in p.rhs)]
    by: dict[str, list[Production]] = {}
    for p in prods:
        by.setdefault(p.lhs, []).append(p)
    seen, todo = {grammar.start}, [grammar.start]
    while todo:
        for p in by.get(todo.pop(), []):
            for s in p.rhs:
                if isinstance(s, NT) and s.name not in seen:
                    seen.add(s.name)
                    todo.append(s.name)
    out = []
    for lhs in dict.fromkeys(p.lhs for p in prods):
        if lhs not in seen:
            continue
        total = sum(p.prob for p in by[lhs]) or 1.0
        out += [Production(p.lhs, p.rhs, p.prob / total, p.weight, p.span, p.lhs_span) for p in by[lhs]]
    return Grammar(grammar.path, grammar.start, grammar.start_span, out, {}, True, grammar.weights, grammar.separator)


def automaton_grammar(auto: Any, path: str, separator: str | None, regex_dfas: dict[int, CharDFA]) -> Grammar:
    """A compiled automaton over words (an ``.fsg``'s, a pattern's own token vocabulary)
    as a right-linear grammar: state q is ``sq``, an arc a literal (or a regex terminal's
    own sub-grammar), stopping an empty production; arc probabilities kept."""
    delta = auto.delta.numpy()
    logp = getattr(auto, "log_probs", None)
    flogp = getattr(auto, "final_log_probs", None)
    final = auto.final.numpy()
    prods: list[Production] = []
    subs: dict[int, str] = {}
    for i, dfa in regex_dfas.items():
        start, rules = dfa_productions(dfa, f"t{i}.")
        subs[i] = start
        prods += rules
    rows = []
    for q in range(delta.shape[0]):
        for v in np.nonzero(delta[q] >= 0)[0]:
            p = math.exp(float(logp[q, v])) if logp is not None else None
            word = auto.vocab.surfaces[int(v)]
            sym = NT(subs[int(v)], _SPAN) if int(v) in subs else Lit(word if isinstance(word, str) else auto.vocab.tokens[int(v)], _SPAN)
            rows.append((f"s{q}", (sym, NT(f"s{int(delta[q, v])}", _SPAN)), p))
        if final[q]:
            rows.append((f"s{q}", (), math.exp(float(flogp[q])) if flogp is not None else None))
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for lhs, _, p in rows:
        totals[lhs] = totals.get(lhs, 0.0) + (p or 0.0)
        counts[lhs] = counts.get(lhs, 0) + 1
    for lhs, rhs, p in rows:
        prob = p / totals[lhs] if p is not None and totals[lhs] > 0 else 1.0 / counts[lhs]
        prods.append(Production(lhs, rhs, prob, None, _SPAN, _SPAN))
    prods.sort(key=lambda p: p.lhs != "s0")
    return pruned(Grammar(path, "s0", _SPAN, prods, {}, True, "prob", separator))


def to_pcfg(grammar: Grammar) -> str:
    """The grammar as ``.pcfg`` text (``%separator ""``, its probabilities)."""
    names = {nt: re.sub(r"[^A-Za-z0-9_.~]", "_", nt) for nt in grammar.nonterminals}
    if len(set(names.values())) != len(names):
        names = {nt: f"N{i}_{v}" for i, (nt, v) in enumerate(names.items())}
    lines = [f"%start {names[grammar.start]}", '%separator ""']
    for p in grammar.productions:
        rhs = " ".join(names[s.name] if isinstance(s, NT) else str(s) for s in p.rhs)
        lines.append(f"{names[p.lhs]} -> {rhs} [{p.prob!r}]".replace("->  [", "-> ["))
    return "\n".join(lines) + "\n"


def write_grammar(grammar: Grammar, to: str) -> str:
    """A grammar over strings (its text: its terminals concatenated) written as ``to``:
    ``lark``, ``gbnf``, ``ebnf`` (XGrammar's EBNF: GBNF's syntax, start rule ``root``) or ``pcfg``."""
    if to not in FORMATS:
        raise NeurosymError(f"unknown format {to!r}; expected one of {', '.join(FORMATS)}")
    if to == "lark":
        return to_lark(grammar)
    if to in ("gbnf", "ebnf"):
        return to_gbnf(grammar)
    return to_pcfg(grammar)


__all__ = [
    "FORMATS", "PrefixJudge", "automaton_grammar", "concatenated", "dfa_productions", "lark_parser", "pruned", "to_gbnf", "to_lark",
    "to_pcfg", "to_recursive_regex", "write_grammar",
]
