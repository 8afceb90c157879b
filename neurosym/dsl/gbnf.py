"""`.gbnf` grammars (llama.cpp's GBNF, as llama.cpp, XGrammar and transformers-cfg read
them) -> a ``.pcfg`` grammar over strings.

Parsed by lark (``gbnf.lark`` beside this module). The start rule is ``root``. A part of
a rule that names no rule (literals, classes, ``.``, groups and repetitions of them) is
one ``/regex/`` lexeme; literals standing alone stay literals; the rest become
nonterminals (``x*`` a right-recursive list, ``x{m,n}`` written out). Terminals
concatenate (``%separator ""``); each nonterminal's alternatives are equally likely.
"""

from __future__ import annotations

import re
from pathlib import Path

from lark import Token, Tree

from neurosym.dsl.ecma_regex import escape_char
from neurosym.dsl.pcfg import NT, Grammar, Lexeme, Lit, uniform_grammar
from neurosym.dsl.source import parse_text, read_source
from neurosym.errors import NeurosymError, SourceError, Span

GRAMMAR = "gbnf.lark"
FRIENDLY = {"RULEHEAD": "a rule (name ::=)", "NAME": "a rule name", "STRING": 'a "literal"', "CLASS": "a [class]",
            "QUANT": "*, +, ? or {m,n}", "DOT": "'.'", "LPAR": "'('", "RPAR": "')'", "VBAR": "'|'"}
MAX_REPEAT = 1000
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "^": "^", "/": "/"}


def _unescape(body: str, span: Span) -> list[str]:
    """The characters of a literal's or class's body (GBNF escapes decoded)."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1:i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in ("x", "u", "U"):
            n = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = body[i + 2:i + 2 + n]
            if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise SourceError.at(span, f"bad escape \\{nxt}{digits}: expected {n} hex digits")
            out.append(chr(int(digits, 16)))
            i += 2 + n
        else:
            raise SourceError.at(span, f"unknown escape \\{nxt}")
    return out


def _class_regex(text: str, span: Span) -> str:
    body = text[1:-1]
    negated = body.startswith("^")
    chars = _unescape(body[1:] if negated else body, span)
    items, i = [], 0
    while i < len(chars):
        if i + 2 < len(chars) and chars[i + 1] == "-":
            lo, hi = chars[i], chars[i + 2]
            if ord(lo) > ord(hi):
                raise SourceError.at(span, f"bad range {lo!r}-{hi!r} in {text}")
            items.append(escape_char(lo) + "-" + escape_char(hi))
            i += 3
        else:
            items.append(escape_char(chars[i]))
            i += 1
    if not items:
        return "[\\s\\S]" if negated else "(?!x)x"
    return ("[^" if negated else "[") + "".join(items) + "]"


def _merged(symbols: list) -> list:
    """Runs of terminals holding a lexeme joined into one lexeme (their texts concatenate)."""
    out: list = []
    run: list = []

    def flush() -> None:
        if any(isinstance(s, Lexeme) for s in run):
            out.append(Lexeme("".join(s.source if isinstance(s, Lexeme) else "".join(escape_char(c) for c in s.text) for s in run),
                              run[0].span))
        else:
            out.extend(run)
        run.clear()

    for s in symbols:
        if isinstance(s, (Lexeme, Lit)):
            run.append(s)
        else:
            flush()
            out.append(s)
    flush()
    return out


def _quant(q: str) -> tuple[int, int | None]:
    if q == "*":
        return 0, None
    if q == "+":
        return 1, None
    if q == "?":
        return 0, 1
    lo, _, hi = q.strip("{} \t").partition(",")
    lo_n = int(lo)
    if "," not in q:
        return lo_n, lo_n
    return lo_n, int(hi) if hi.strip() else None


class _Builder:
    def __init__(self, display: str | None):
        self.display = display
        self.rows: list[tuple[str, tuple]] = []
        self.fresh_count = 0
        self.defined: dict[str, Span] = {}
        self.used: list[tuple[str, Span]] = []

    def span(self, node) -> Span:
        meta = node if isinstance(node, Token) else getattr(node, "meta", None)
        line = getattr(meta, "line", None) or 1
        col = getattr(meta, "column", None) or 1
        return Span(self.display, line, col)

    def fresh(self, hint: str) -> str:
        self.fresh_count += 1
        return f"{hint}~{self.fresh_count}"

    # -- ref-free parts as one regex
    def regex(self, node) -> str | None:
        """Python regex source of a part naming no rule, else None."""
        if isinstance(node, Tree):
            kind = node.data
            if kind == "string":
                return "".join(escape_char(c) for c in _unescape(node.children[0][1:-1], self.span(node.children[0])))
            if kind == "char_class":
                return _class_regex(str(node.children[0]), self.span(node.children[0]))
            if kind == "any":
                return "[\\s\\S]"
            if kind == "ref":
                return None
            if kind == "group":
                return self.regex(node.children[0])
            if kind == "alts":
                parts = [self.regex(c) for c in node.children]
                return None if any(p is None for p in parts) else "(?:" + "|".join(parts) + ")"
            if kind == "seq":
                parts = [self.regex(c) for c in node.children]
                return None if any(p is None for p in parts) else "".join(parts)
            if kind == "item":
                base = self.regex(node.children[0])
                if base is None or len(node.children) == 1:
                    return base
                lo, hi = _quant(str(node.children[1]))
                self._check_repeat(lo, hi, node)
                return f"(?:{base}){{{lo},{'' if hi is None else hi}}}"
        raise NeurosymError(f"unexpected GBNF node {node!r}")

    def _check_repeat(self, lo: int, hi: int | None, node) -> None:
        if max(lo, hi or 0) > MAX_REPEAT:
            raise SourceError.at(self.span(node), f"a repetition above {MAX_REPEAT} is not read")
        if hi is not None and hi < lo:
            raise SourceError.at(self.span(node), f"repetition {{{lo},{hi}}}: the maximum is below the minimum")

    # -- everything else as rules
    def symbols(self, node, hint: str) -> list:
        """The symbols one item of a sequence stands for."""
        span = self.span(node)
        if node.data == "item" and len(node.children) == 1:
            node = node.children[0]
        if node.data == "string":
            chars = _unescape(node.children[0][1:-1], self.span(node.children[0]))
            return [Lit("".join(chars), span)] if chars else []
        if node.data == "ref":
            name = str(node.children[0])
            self.used.append((name, span))
            return [NT(name, span)]
        source = self.regex(node)
        if source is not None:
            return [Lexeme(source, span)]
        if node.data == "group":
            return [NT(self.alternatives(node.children[0], hint), span)]
        if node.data == "item":
            lo, hi = _quant(str(node.children[1]))
            self._check_repeat(lo, hi, node)
            x = self.symbols(node.children[0], hint)
            return self.repeat(x, lo, hi, hint, span)
        raise NeurosymError(f"unexpected GBNF node {node.data}")

    def repeat(self, x: list, lo: int, hi: int | None, hint: str, span: Span) -> list:
        out = x * lo
        if hi is None:
            star = self.fresh(hint)
            self.rows += [(star, ()), (star, tuple(x) + (NT(star, span),))]
            return out + [NT(star, span)]
        tail = None
        for _ in range(hi - lo):  # x{0,k}: '' | x x{0,k-1}
            nt = self.fresh(hint)
            self.rows += [(nt, ()), (nt, tuple(x) + ((NT(tail, span),) if tail else ()))]
            tail = nt
        return out + ([NT(tail, span)] if tail else [])

    def alternatives(self, alts: Tree, hint: str, name: str | None = None) -> str:
        name = name or self.fresh(hint)
        for seq in alts.children:
            rhs = _merged([s for item in seq.children for s in self.symbols(item, name)])
            self.rows.append((name, tuple(rhs)))
        return name

    def build(self, tree: Tree) -> Grammar:
        for rule in tree.children:
            head = rule.children[0]
            name = re.sub(r"\s*::=$", "", str(head)).strip()
            if name in self.defined:
                self.alternatives(rule.children[1], name, name)  # llama.cpp: a second definition adds alternatives
            else:
                self.defined[name] = self.span(head)
                self.alternatives(rule.children[1], name, name)
        if "root" not in self.defined:
            raise SourceError("a GBNF grammar starts at the rule 'root', which this one does not define", self.display, 1, 1)
        for name, span in self.used:
            if name not in self.defined:
                raise SourceError.at(span, f"undefined rule {name}")
        span = Span(self.display, 1, 1)
        root_first = sorted(self.rows, key=lambda r: r[0] != "root")
        return uniform_grammar([(lhs, rhs, self.defined.get(lhs, span)) for lhs, rhs in root_first], "root", self.display,
                               self.defined["root"])


def parse_gbnf(text: str, path: str | Path | None = None) -> Grammar:
    """The grammar of GBNF text (``path`` names it in errors)."""
    display = None if path is None else str(path)
    return _Builder(display).build(parse_text(GRAMMAR, text, display, FRIENDLY))


def read_gbnf(path: str | Path) -> Grammar:
    """Read a ``.gbnf`` file."""
    path = Path(path)
    try:
        return parse_gbnf(read_source(path, str(path)), path)
    except RecursionError:
        raise NeurosymError(f"{path}: the grammar nests too deeply to read") from None


__all__ = ["parse_gbnf", "read_gbnf"]
