"""Parser for `.regex` banks: lark LALR grammar -> IR, then a semantic pass.

The semantic pass reports, at the offending position: duplicate names, undefined and
recursive references, unknown attributes and bad values, missing or empty word lists,
missing imports and names an import does not define, and unsupported regex features.
"""

from __future__ import annotations

import re
from pathlib import Path

from lark import Token, Tree

from neurosym.dsl import regex_ir
from neurosym.dsl.errors import read_error, read_source_bytes, resolve_path
from neurosym.dsl.escapes import unquote
from neurosym.dsl.pattern_check import check_pattern
from neurosym.dsl.source import IncludeReader, parse_text
from neurosym.dsl.words import decode_utf8, parse_word_list
from neurosym.errors import SourceError, Span

FRIENDLY = {
    "NAME": "a pattern name (UPPERCASE)",
    "STRING": "a quoted literal",
    "REGEX": "a /regex/",
    "QUANT": "a quantifier (? * + {m,n})",
    "KEY": "an attribute name",
    "VALUE": "an attribute value",
}
ATTRIBUTES = {"weight": "a non-negative number", "flags": "letters from 'i' (ignore case) and 's' (dot matches newline)"}


def read_regex_bank(path: str | Path, max_patterns: int | None = None) -> regex_ir.Bank:
    """Parse a `.regex` file, its imports and word lists. With ``max_patterns``, a file
    with more rules is a SourceError at the first rule over the cap, found by a scan of
    the text before it is parsed (so a huge bank fails in a moment)."""
    path = Path(path)
    return _Loader(max_patterns).load(path.resolve(), display=str(path))


RULE_START = re.compile(r"^[ \t]*[A-Z_][A-Z0-9_]*[ \t]*[\[:]", re.M)


def too_many_patterns(count: str, cap: int) -> str:
    """The message for a bank over the pattern cap."""
    return (
        f"the bank defines {count} patterns, over the cap of {cap:,} (Limits.max_patterns): each pattern compiles to "
        "its own automaton; split the bank, use %words for word lists, or raise the cap"
    )


def parse_regex_bank(text: str, path: str | Path | None = None) -> regex_ir.Bank:
    """Parse bank text; imports and word lists resolve against ``path``'s folder (or the cwd)."""
    loader = _Loader()
    if path is None:
        return loader.parse(text, display=None, scope="<string>", folder=Path.cwd())
    p = Path(path)
    return loader.parse(text, display=str(p), scope=str(p.resolve()), folder=p.resolve().parent)


class _Loader(IncludeReader):
    """Loads banks recursively; each file once, import cycles reported."""

    def __init__(self, max_patterns: int | None = None) -> None:
        super().__init__("import")
        self.loaded: dict[str, regex_ir.Bank] = {}
        self.max_patterns = max_patterns

    def load(self, path: Path, display: str, at: Span | None = None) -> regex_ir.Bank:
        key = str(path)
        if key not in self.loaded:
            self.loaded[key] = self.include(path, display, at, lambda text: self.parse(text, display=display, scope=key, folder=path.parent))
        return self.loaded[key]

    def parse(self, text: str, display: str | None, scope: str, folder: Path) -> regex_ir.Bank:
        if self.max_patterns is not None:
            self.check_count(text, display)
        tree = parse_text("regex.lark", text, display, FRIENDLY)
        builder = _Builder(self, display, scope, folder)
        for item in tree.children:
            if isinstance(item, Tree):
                builder.item(item)
        builder.check_references()
        return builder.bank

    def check_count(self, text: str, display: str | None) -> None:
        """A SourceError at the first rule line past ``max_patterns`` (a rule is one line
        that starts with its NAME, then ``[`` or ``:``)."""
        for k, m in enumerate(RULE_START.finditer(text)):
            if k == self.max_patterns:
                line = text.count("\n", 0, m.start()) + 1
                col = len(m.group()) - len(m.group().lstrip(" \t")) + 1
                total = sum(1 for _ in RULE_START.finditer(text))
                raise SourceError(too_many_patterns(f"{total:,}", self.max_patterns), display, line, col)


class _Builder:
    def __init__(self, loader: _Loader, display: str | None, scope: str, folder: Path):
        self.loader = loader
        self.display = display
        self.scope = scope
        self.folder = folder
        self.bank = regex_ir.Bank(display)
        self.local_refs: list[regex_ir.Ref] = []

    def span(self, node: Tree | Token) -> Span:
        if isinstance(node, Token):
            return Span(self.display, node.line, node.column)
        return Span(self.display, node.meta.line, node.meta.column)

    # ---------------------------------------------------------------- items
    def item(self, tree: Tree) -> None:
        if tree.data == "import_":
            self.import_(tree)
        else:
            self.rule(tree)

    def define(self, name: str, rule: regex_ir.Pattern, at: Span) -> None:
        if name in self.bank.patterns:
            first = self.bank.patterns[name].span
            raise SourceError.at(at, f"duplicate pattern {name} (first defined at line {first.line})")
        self.bank.patterns[name] = rule
        self.bank.rules[(self.scope, name)] = rule

    def import_(self, tree: Tree) -> None:
        file_tok, *names = tree.children
        rel = unquote(file_tok, self.span(file_tok))
        target = resolve_path(self.folder, rel, self.span(file_tok))
        other = self.loader.load(target, display=rel if self.display is None else str(Path(self.display).parent / rel), at=self.span(file_tok))
        self.bank.rules.update(other.rules)
        for tok in names:
            rule = other.patterns.get(str(tok))
            if rule is None:
                have = ", ".join(other.patterns) or "no patterns"
                raise SourceError.at(self.span(tok), f"{rel} does not define {tok} (it defines {have})")
            self.define(str(tok), rule, self.span(tok))

    def rule(self, tree: Tree) -> None:
        name_tok, *rest = tree.children
        attrs = self.attrs(rest[0]) if len(rest) == 2 else {}
        expr = self.expr(rest[-1])
        rule = regex_ir.Pattern(str(name_tok), expr, attrs.get("weight", 1.0), attrs.get("flags", ""), self.span(name_tok), self.scope)
        self.define(str(name_tok), rule, self.span(name_tok))

    def attrs(self, tree: Tree) -> dict:
        out: dict = {}
        for attr in tree.children:
            key, value = attr.children
            k, v, at = str(key), str(value), self.span(value)
            if k not in ATTRIBUTES:
                raise SourceError.at(self.span(key), f"unknown attribute {k!r}; expected one of {', '.join(ATTRIBUTES)}")
            if k in out:
                raise SourceError.at(self.span(key), f"attribute {k!r} given twice")
            if k == "weight":
                try:
                    w = float(v)
                except ValueError:
                    w = float("nan")
                if not (w >= 0 and w != float("inf")):
                    raise SourceError.at(at, f"weight must be {ATTRIBUTES['weight']}, got {v!r}")
                out[k] = w
            else:
                bad = sorted(set(v) - set("is"))
                if bad:
                    raise SourceError.at(at, f"flags must be {ATTRIBUTES['flags']}; got {''.join(bad)!r}")
                out[k] = "".join(sorted(set(v)))
        return out

    # ---------------------------------------------------------------- expressions
    def expr(self, tree: Tree | Token) -> regex_ir.Expr:
        kind = tree.data
        at = self.span(tree)
        if kind == "alt":
            options = [self.expr(c) for c in tree.children]
            return options[0] if len(options) == 1 else regex_ir.Choice(tuple(options), at)
        if kind == "seq":
            items = [self.expr(c) for c in tree.children]
            return items[0] if len(items) == 1 else regex_ir.Seq(tuple(items), at)
        if kind == "repeat":
            item = self.expr(tree.children[0])
            if len(tree.children) == 1:
                return item
            q = tree.children[1]
            lo, hi = _quantifier(str(q), self.span(q))
            return regex_ir.Repeat(item, lo, hi, at)
        if kind == "group":
            return self.expr(tree.children[0])
        tok = tree.children[0]
        at = self.span(tok)
        if kind == "ref":
            ref = regex_ir.Ref(str(tok), self.scope, at)
            self.local_refs.append(ref)
            return ref
        if kind == "literal":
            return regex_ir.Literal(unquote(tok, at), at)
        if kind == "regex":
            pattern = str(tok)[1:-1]
            check_pattern(pattern, at)
            return regex_ir.Regex(pattern, at)
        if kind == "words":
            return self.words(tok, at)
        raise AssertionError(f"unknown tree {kind}")  # the grammar has no other atoms

    def words(self, tok: Token, at: Span) -> regex_ir.Words:
        rel = unquote(tok, at)
        path = resolve_path(self.folder, rel, at)
        try:
            text = decode_utf8(read_source_bytes(path), str(path))  # bad bytes: positioned in the word list itself
        except FileNotFoundError:
            raise SourceError.at(at, f"no such word list {rel}") from None
        except UnicodeDecodeError as err:  # the place of the bad byte in the word list itself
            raise SourceError.not_utf8(err, path) from None
        except (OSError, ValueError) as err:
            raise SourceError.at(at, "word list: " + read_error(err, rel)) from None
        words = parse_word_list(text)  # the one word-list rule (neurosym/dsl/words.py)
        if not words:
            raise SourceError.at(at, f"word list {rel} is empty")
        return regex_ir.Words(str(path), words, at)

    # ---------------------------------------------------------------- references
    def check_references(self) -> None:
        for ref in self.local_refs:
            if (ref.scope, ref.name) not in self.bank.rules:
                raise SourceError.at(ref.span, f"undefined pattern {ref.name}")
        state: dict[tuple[str, str], int] = {}  # 1 = on the current path, 2 = done

        def visit(key: tuple[str, str]) -> None:
            state[key] = 1
            for node in regex_ir.walk_expr(self.bank.rules[key].expr):
                if isinstance(node, regex_ir.Ref):
                    k = (node.scope, node.name)
                    if state.get(k) == 1:
                        raise SourceError.at(node.span, f"{node.name} refers to itself (through {key[1]}); a bank describes regular languages and cannot recurse")
                    if state.get(k) is None:
                        visit(k)
            state[key] = 2

        for key in list(self.bank.rules):
            if state.get(key) is None:
                visit(key)


def _quantifier(q: str, at: Span) -> tuple[int, int | None]:
    if q == "?":
        return 0, 1
    if q == "*":
        return 0, None
    if q == "+":
        return 1, None
    body = q[1:-1]
    lo_s, sep, hi_s = body.partition(",")
    if not lo_s and not sep:
        raise SourceError.at(at, "empty repeat {}; expected {m}, {m,}, {,n} or {m,n}")
    lo = int(lo_s) if lo_s else 0
    hi = (int(hi_s) if hi_s else None) if sep else lo
    if hi is not None and hi < lo:
        raise SourceError.at(at, f"repeat bounds {q} are reversed")
    return lo, hi

