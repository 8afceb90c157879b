"""The semantic pass over a `.lex` parse tree: declarations, rules and body lines into a
:class:`Lexicon`, with positioned errors."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Protocol

from lark import Token, Tree

from neurosym.dsl.errors import read_error
from neurosym.dsl.escapes import unquote
from neurosym.dsl.lexicon.model import Entry, Feature, Lexicon, Modifier, Terms, WordClass, did_you_mean
from neurosym.dsl.lexicon.raw import RAW_FORMATS, check_format, check_range, read_raw
from neurosym.dsl.lexicon.rules import AndCond, BosCond, CapitalizedCond, ClassCond, Cond, FeatureRule, HasCond, Name, NotCond, OrCond, PrevCond, RoleCond, SeenCond, TermOf, TokenCond, Value, ValueOf, walk_rule
from neurosym.errors import SourceError, Span
from neurosym.fuzzy import KernelSpec, KernelSpecError


FEATURE_OPTIONS = ("range", "terms", "kernel", "centers")
MAX_MAGNITUDE = 1e30  # numbers of a lexicon stay far inside float32 (features are float32 tensors)
MAX_WINDOW = 1000  # tokens a modifier may reach back


DEFAULT_KERNEL = "triangular"


DEFAULT_WINDOW = 3


class IncludeReader(Protocol):
    """What the builder needs to follow ``%include``: :class:`~neurosym.dsl.lexicon.reader.LexiconReader`."""

    def resolve(self, path: Path) -> Path: ...

    def read(self, path: Path) -> str: ...

    def load(self, path: Path, display: str, fmt: str, at: Span | None = None) -> "Lexicon": ...


class LexiconBuilder:
    """Turns one file's parse tree into its Lexicon, in passes: declarations, includes,
    raw lines, entries, then the checks that need everything (rules, modifiers, columns)."""

    def __init__(self, loader: IncludeReader, lex: Lexicon, display: str | None, folder: Path):
        self.loader = loader
        self.lex = lex
        self.display = display
        self.folder = folder
        self.raw_format: str | None = None
        self.raw_format_span: Span | None = None
        self.local_entries: dict[tuple[str, str], Span] = {}

    def span(self, node: Tree | Token) -> Span:
        if isinstance(node, Token):
            return Span(self.display, node.line, node.column)
        return Span(self.display, node.meta.line, node.meta.column)

    def fail(self, node, message: str) -> SourceError:
        return SourceError.at(node if isinstance(node, Span) else self.span(node), message)

    # ------------------------------------------------------------------ passes
    def build(self, tree: Tree) -> None:
        items = [t for t in tree.children if isinstance(t, Tree)]
        for t in items:
            if t.data == "feature":
                self.feature(t)
            elif t.data == "wordclass":
                self.wordclass(t)
            elif t.data == "modifier":
                self.modifier(t)
            elif t.data == "format":
                self.format(t)
        for t in items:
            if t.data == "include":
                self.include(t)
        self.entries = [t for t in items if t.data == "entry"]

    def finish(self) -> None:
        for t in self.entries:
            self.entry(t)
        for f in self.lex.features.values():
            if f.rule is not None and f.span.path == self.display:
                self.check_rule(f)
        for m in self.lex.modifiers.values():
            if m.span.path == self.display:
                f = self.lex.features.get(m.target)
                if f is None:
                    raise self.fail(m.span, f"modifier {m.word!r} changes feature {m.target!r}, which is not declared{did_you_mean(m.target, self.lex.features)}")
                if f.rule is not None:
                    raise self.fail(m.span, f"modifier {m.word!r} changes {m.target!r}, a computed feature; modifiers change lexical features")
        for c in self.lex.classes.values():
            if c.name in self.lex.features:
                raise self.fail(c.span, f"class {c.name} has the name of a feature (declared at {self.lex.features[c.name].span}); use distinct names")
        owner: dict[str, Feature] = {}
        for f in self.lex.outputs:
            for c in f.columns:
                if c in owner and owner[c] is not f:
                    raise self.fail(f.span, f"column {c!r} of feature {f.name!r} clashes with feature {owner[c].name!r} (line {owner[c].span.line})")
                owner[c] = f

    # ------------------------------------------------------------------ declarations
    def declare(self, table: dict, name: str, obj, at: Span, what: str) -> None:
        if name in table:
            first = table[name].span
            raise self.fail(at, f"duplicate {what} {name!r} (first declared at {first})")
        table[name] = obj

    def feature(self, t: Tree) -> None:
        name_tok, *rest = t.children
        rule = None
        if rest and isinstance(rest[0], Tree) and rest[0].data == "rule":
            rule = self.rule(rest[0])
            rest = rest[1:]
        opts = self.options(rest, FEATURE_OPTIONS, "feature")
        f = Feature(str(name_tok), self.span(name_tok), rule=rule)
        if "range" in opts:
            f.range = opts["range"][0]
        if "terms" in opts or "kernel" in opts or "centers" in opts:
            f.terms = self.terms(f, opts)
        self.declare(self.lex.features, f.name, f, f.span, "feature")

    def terms(self, f: Feature, opts: dict) -> Terms:
        if "terms" not in opts:
            key = "kernel" if "kernel" in opts else "centers"
            raise self.fail(opts[key][1], f"{key}= needs terms=... (the names of the fuzzy terms)")
        names, at = opts["terms"]
        if len(set(names)) != len(names):
            raise self.fail(at, f"duplicate term names in {','.join(names)}")
        if "kernel" in opts:
            text, kat = opts["kernel"]
            try:
                kernel = KernelSpec.parse(text)
            except KernelSpecError as err:
                raise self.fail(kat.shifted(err.offset), f"bad kernel spec: {err.message}") from None
        else:
            kernel, kat = KernelSpec.parse(DEFAULT_KERNEL), at
        if "centers" in opts:
            centers, cat = opts["centers"]
            if len(centers) != len(names):
                raise self.fail(cat, f"{len(centers)} centers for {len(names)} terms ({','.join(names)})")
        elif f.range is not None:
            lo, hi = f.range
            k = len(names)
            centers = [lo + (hi - lo) * i / (k - 1) for i in range(k)] if k > 1 else [(lo + hi) / 2]
        else:
            raise self.fail(at, "terms need centers=c1,c2,... or a range=lo..hi to spread them over")
        if kernel.name == "triangular" and math.isnan(kernel.params["width"]) and len(names) < 2:
            raise self.fail(kat, "a triangular kernel with one term needs triangular(width=...)")
        return Terms(tuple(names), kernel, tuple(float(c) for c in centers))

    def options(self, opts: list, allowed: tuple[str, ...], what: str) -> dict:
        """``key=value`` options -> {key: (value, span of the value)}."""
        out: dict = {}
        for opt in opts:
            key, val = opt.children
            k = str(key)
            if k not in allowed:
                raise self.fail(key, f"unknown {what} option {k!r}; expected one of {', '.join(allowed)}")
            if k in out:
                raise self.fail(key, f"option {k!r} given twice")
            at = self.span(val)
            kind = val.data if isinstance(val, Tree) else "token"
            toks = val.children if isinstance(val, Tree) else [val]
            if k == "range":
                if kind != "range":
                    raise self.fail(at, f"range= expects lo..hi, got {show_node(val)}")
                out[k] = (parse_range(str(toks[0]), at, self), at)
            elif k == "terms":
                if kind != "names":
                    raise self.fail(at, f"terms= expects names such as low,med,high, got {show_node(val)}")
                out[k] = ([str(x) for x in toks], at)
            elif k == "kernel":
                if kind == "kernel" or (kind == "names" and len(toks) == 1):
                    out[k] = (str(toks[0]), at)
                else:
                    raise self.fail(at, f"kernel= expects a kernel spec such as power(base=0.9, tau=0.35), got {show_node(val)}")
            elif k == "centers":
                if kind != "numbers":
                    raise self.fail(at, f"centers= expects numbers such as 0.2,0.6,1.0, got {show_node(val)}")
                out[k] = ([float(x) for x in toks], at)
            elif k == "format":
                if kind != "names" or len(toks) != 1:
                    raise self.fail(at, f"format= expects one of lex, {', '.join(RAW_FORMATS)}, got {show_node(val)}")
                out[k] = (str(toks[0]), at)
        return out

    def wordclass(self, t: Tree) -> None:
        name_tok, *members = t.children
        words: dict[str, None] = {}  # insertion-ordered; a set lookup per word keeps long classes linear
        for m in members:
            tok = m.children[0]
            w = self.word(tok)
            if w in words:
                raise self.fail(tok, f"{w!r} is listed twice in class {name_tok}")
            words[w] = None
        self.declare(self.lex.classes, str(name_tok), WordClass(str(name_tok), tuple(words), self.span(name_tok)), self.span(name_tok), "class")

    def modifier(self, t: Tree) -> None:
        word_tree, *opts = t.children
        tok = word_tree.children[0]
        word = self.word(tok)
        kind = None
        amount = 0.0
        target, window = "polarity", DEFAULT_WINDOW
        given: set[str] = set()
        for opt in opts:
            key, *val = [c for c in opt.children if c is not None]
            k = str(key)
            if k in given:
                raise self.fail(key, f"option {k!r} given twice")
            given.add(k)
            v = val[0] if val else None
            if k in ("booster", "negation"):
                if kind is not None:
                    raise self.fail(key, "a modifier is a booster or a negation, not both")
                kind = k
                if v is None:
                    if k == "booster":
                        raise self.fail(key, "booster needs an amount: booster=0.293")
                    amount = 1.0
                else:
                    amount = self.number(v, f"{k}=")
                    if k == "negation" and not amount > 0:
                        raise self.fail(v, f"negation scale must be > 0, got {v}")
            elif k == "on":
                if v is None or v.type != "IDENT":
                    raise self.fail(key, "on= expects a feature name")
                target = str(v)
            elif k == "window":
                n = self.number(v, "window=") if v is not None else -1
                if v is None or n != int(n) or not 1 <= n <= MAX_WINDOW:
                    raise self.fail(v if v is not None else key, f"window= expects a whole number from 1 to {MAX_WINDOW}")
                window = int(n)
            else:
                raise self.fail(key, f"unknown modifier option {k!r}; expected booster=, negation, on=, window=")
        if kind is None:
            raise self.fail(tok, f"modifier {word!r} needs booster=AMOUNT or negation")
        self.declare(self.lex.modifiers, word, Modifier(word, kind, amount, target, window, self.span(tok)), self.span(tok), "modifier")

    def number(self, tok: Token, what: str) -> float:
        if tok.type != "NUMBER":
            raise self.fail(tok, f"{what} expects a number, got {str(tok)!r}")
        return self.bounded(tok, what)

    def bounded(self, tok: Token, what: str) -> float:
        """``float(tok)``, or an error if it is not finite or beyond +-MAX_MAGNITUDE."""
        x = float(tok)
        if not abs(x) <= MAX_MAGNITUDE:
            raise self.fail(tok, f"{what} {str(tok)} is out of the supported range [-{MAX_MAGNITUDE:g}, {MAX_MAGNITUDE:g}]")
        return x

    def format(self, t: Tree) -> None:
        tok = t.children[0]
        name = str(tok)
        if name not in RAW_FORMATS:
            raise self.fail(tok, f"unknown format {name!r}; expected one of {', '.join(RAW_FORMATS)} (the lines after %format are read in it)")
        self.raw_format, self.raw_format_span = name, self.span(t)

    def include(self, t: Tree) -> None:
        file_tok, *opts = t.children
        at = self.span(file_tok)
        rel = unquote(file_tok, at)
        fmt_opt = self.options(opts, ("format",), "include").get("format")
        fmt = fmt_opt[0] if fmt_opt else ("lex" if rel.endswith(".lex") else None)
        if fmt is None:
            raise self.fail(file_tok, f"say how to read {rel}: add format=vader or format=afinn (or name a .lex file)")
        check_format(fmt, fmt_opt[1] if fmt_opt else at)
        if "\0" in rel or any(len(part) > 255 for part in Path(rel).parts):
            raise self.fail(file_tok, f"cannot use the path {rel!r}: a NUL byte or a name over 255 characters")
        target = self.loader.resolve(self.folder / rel)
        display = rel if self.display is None else str(Path(self.display).parent / rel)
        if fmt in RAW_FORMATS:
            try:
                text = self.loader.read(target)  # recorded in the lexicon's sources
            except (OSError, ValueError) as err:
                raise self.fail(file_tok, read_error(err, rel)) from None
            read_raw(self.lex, text, fmt, display, first_line=1, declare_at=at)
            return
        other = self.loader.load(target, display, "lex", at=at)
        for table, what in ((other.features, "feature"), (other.classes, "class"), (other.modifiers, "modifier")):
            mine = getattr(self.lex, {"feature": "features", "class": "classes", "modifier": "modifiers"}[what])
            for name, obj in table.items():
                if name in mine:
                    raise self.fail(mine[name].span, f"duplicate {what} {name!r}: {rel} declares it too (at {obj.span})")
                mine[name] = obj
        self.lex.entries.extend(other.entries)
        self.lex.duplicates.extend(other.duplicates)
        for w, vals in other.values.items():
            self.lex.values.setdefault(w, {}).update(vals)
        for f in other.formats:
            if f not in self.lex.formats:
                self.lex.formats.append(f)

    # ------------------------------------------------------------------ entries
    def word(self, tok: Token) -> str:
        if tok.type == "STRING":
            w = unquote(tok, self.span(tok))
            if not w.strip():
                raise self.fail(tok, "a word cannot be empty or blank")
            return w
        return str(tok)

    def entry(self, t: Tree) -> None:
        head, *assigns = t.children
        tok = head.children[0]
        word = self.word(tok)
        values: dict[str, float] = {}
        for a in assigns:
            key, val = a.children
            k = str(key)
            f = self.lex.features.get(k)
            if f is None:
                raise self.fail(key, f"unknown feature {k!r}{did_you_mean(k, [n for n, x in self.lex.features.items() if x.rule is None])}")
            if f.rule is not None:
                raise self.fail(key, f"{k!r} is computed by a rule (line {f.span.line}); entries set lexical features only")
            if (word, k) in self.local_entries:
                raise self.fail(key, f"duplicate value of {k} for {word!r} (first at line {self.local_entries[(word, k)].line})")
            self.local_entries[(word, k)] = self.span(key)
            v = self.bounded(val, f"the value of {k}")
            check_range(f, v, self.span(val))
            values[k] = v
        self.lex.entries.append(Entry(word, values, self.span(tok)))
        self.lex.values.setdefault(word, {}).update(values)

    # ------------------------------------------------------------------ rules: syntax
    def rule(self, t: Tree) -> FeatureRule:
        expr = self.expr(t.children[0])
        where = None
        if len(t.children) > 1:
            where = self.expr(t.children[2])
            self.require_cond(where, "after 'where'")
        return FeatureRule(expr, where, self.span(t))

    def require_cond(self, node, context: str) -> None:
        if isinstance(node, (ValueOf, TermOf)):
            raise self.fail(node.span, f"{'value' if isinstance(node, ValueOf) else 'term'}(...) is a graded value, not a condition; it cannot appear {context}")

    def expr(self, t) -> Cond | Value:
        kind = t.data
        at = self.span(t)
        if kind in ("and_", "or_"):
            left, right = self.expr(t.children[0]), self.expr(t.children[1])
            sym = "&" if kind == "and_" else "|"
            self.require_cond(left, f"around {sym!r}")
            self.require_cond(right, f"around {sym!r}")
            return (AndCond if kind == "and_" else OrCond)(left, right, at)
        if kind == "not_":
            inner = self.expr(t.children[0])
            self.require_cond(inner, "after '!'")
            return NotCond(inner, at)
        if kind == "name":
            tok = t.children[0]
            name = str(tok)
            if name == "bos":
                return BosCond(at)
            if name == "capitalized":
                return CapitalizedCond(at)
            if name in CALLS:
                raise self.fail(tok, f"{name} needs arguments: {CALLS[name]}")
            raise self.fail(tok, f"unknown name {name!r} in a rule; expected bos, capitalized or a call such as class(NAME){did_you_mean(name, ['bos', 'capitalized', *CALLS])}")
        if kind == "call":
            return self.call(t)
        raise self.fail(at, f"expected a condition or value(...) here, got {show_node(t)}")

    def call(self, t: Tree) -> Cond | Value:
        name_tok, *args = t.children
        args = [a for a in args if a is not None]
        fn = str(name_tok)
        at = self.span(name_tok)
        if fn not in CALLS:
            raise self.fail(name_tok, f"unknown function {fn!r}; expected one of {', '.join(CALLS)}{did_you_mean(fn, CALLS)}")
        pos = [a for a in args if not (isinstance(a, Tree) and a.data == "kw")]
        kws = {}
        for a in args:
            if isinstance(a, Tree) and a.data == "kw":
                key = a.children[0]
                if fn != "value":
                    raise self.fail(key, f"{fn}() takes no options; usage: {CALLS[fn]}")
                if str(key) in kws:
                    raise self.fail(key, f"option {key} given twice")
                kws[str(key)] = (key, a.children[1])
        if fn in ("class", "role", "has", "prev", "seen", "term", "value") and not pos:
            raise self.fail(name_tok, f"{fn}() needs arguments: {CALLS[fn]}")
        if fn == "class":
            return ClassCond(tuple(self.name_arg(a, "a class name") for a in pos), at)
        if fn == "token":
            if not pos:
                raise self.fail(name_tok, f"token() needs arguments: {CALLS[fn]}")
            texts = []
            for a in pos:
                if not (isinstance(a, Tree) and a.data == "string"):
                    raise self.fail(a, f"token() expects quoted strings such as token(\".\"), got {show_node(a)}")
                texts.append(unquote(a.children[0], self.span(a)))
            return TokenCond(tuple(texts), at)
        if fn in ("role", "has", "prev", "seen"):
            if len(pos) != 1:
                raise self.fail(name_tok, f"{fn}() takes one argument: {CALLS[fn]}")
            if fn == "role":
                return RoleCond(self.name_arg(pos[0], "a role name").text, at)
            if fn == "has":
                return HasCond(self.name_arg(pos[0], "a feature name"), at)
            inner = self.expr(pos[0])
            self.require_cond(inner, f"inside {fn}()")
            return (PrevCond if fn == "prev" else SeenCond)(inner, at)
        if fn == "term":
            if len(pos) != 2:
                raise self.fail(name_tok, f"term() takes two arguments: {CALLS[fn]}")
            return TermOf(self.name_arg(pos[0], "a feature name"), self.name_arg(pos[1], "a term name"), at)
        # value(F, from=..., part=..., clip=..., default=...)
        if len(pos) != 1:
            raise self.fail(name_tok, f"value() takes one feature name and options: {CALLS['value']}")
        feature = self.name_arg(pos[0], "a feature name")
        opts: dict = {}
        for key, (ktok, v) in kws.items():
            if key == "from":
                if isinstance(v, Tree) and v.data == "name" and str(v.children[0]) == "prev":
                    opts["from_prev"] = True
                    continue
                node = self.expr(v) if isinstance(v, Tree) and v.data in ("call",) else None
                if not isinstance(node, PrevCond):
                    raise self.fail(v, f"from= expects prev or prev(condition), got {show_node(v)}")
                opts["from_prev"], opts["from_cond"] = True, node.inner
            elif key == "part":
                if not (isinstance(v, Tree) and v.data == "name" and str(v.children[0]) in ("pos", "neg")):
                    raise self.fail(v, f"part= expects pos or neg, got {show_node(v)}")
                opts["part"] = str(v.children[0])
            elif key == "clip":
                if not (isinstance(v, Tree) and v.data == "range"):
                    raise self.fail(v, f"clip= expects lo..hi, got {show_node(v)}")
                opts["clip"] = parse_range(str(v.children[0]), self.span(v), self)
            elif key == "default":
                if not (isinstance(v, Tree) and v.data == "number"):
                    raise self.fail(v, f"default= expects a number, got {show_node(v)}")
                opts["default"] = float(v.children[0])
            else:
                raise self.fail(ktok, f"unknown value() option {key!r}; expected from=, part=, clip=, default=")
        return ValueOf(feature, at, **opts)

    def name_arg(self, a, what: str) -> Name:
        if isinstance(a, Tree) and a.data == "name":
            tok = a.children[0]
            return Name(str(tok), self.span(tok))
        raise self.fail(a, f"expected {what}, got {show_node(a)}")

    # ------------------------------------------------------------------ rules: meaning
    def check_rule(self, f: Feature) -> None:
        lex = self.lex
        rule = f.rule
        assert rule is not None
        for node in walk_rule(rule):
            if isinstance(node, ClassCond):
                for c in node.classes:
                    if c.text not in lex.classes:
                        raise self.fail(c.span, f"unknown class {c.text!r}{did_you_mean(c.text, lex.classes)}")
            elif isinstance(node, (HasCond, ValueOf, TermOf)):
                name = node.feature
                g = lex.features.get(name.text)
                if g is None:
                    raise self.fail(name.span, f"unknown feature {name.text!r}{did_you_mean(name.text, lex.features)}")
                if g.rule is not None:
                    raise self.fail(name.span, f"{name.text!r} is a computed feature; rules read lexical features (declared without '=')")
                if isinstance(node, TermOf):
                    if g.terms is None:
                        raise self.fail(name.span, f"feature {name.text!r} has no terms (declare terms=... on it)")
                    if node.term.text not in g.terms.names:
                        raise self.fail(node.term.span, f"unknown term {node.term.text!r} of {name.text}; its terms are {', '.join(g.terms.names)}")
        if f.terms is not None and not rule.graded:
            raise self.fail(f.span, f"feature {f.name!r} is a condition (0 or 1); fuzzy terms need a graded rule such as value(...)")


CALLS = {
    "class": "class(NAME, ...)",
    "token": 'token("text", ...)',
    "role": "role(name)",
    "has": "has(feature)",
    "prev": "prev(condition)",
    "seen": "seen(condition)",
    "value": "value(feature, from=prev(condition), part=pos|neg, clip=lo..hi, default=x)",
    "term": "term(feature, term)",
}


def parse_range(text: str, at: Span, builder: LexiconBuilder) -> tuple[float, float]:
    m = re.fullmatch(r"(.+?)\.\.(.+)", text)
    assert m is not None  # the RANGE terminal guarantees the shape
    lo, hi = float(m.group(1)), float(m.group(2))
    if not (abs(lo) <= MAX_MAGNITUDE and abs(hi) <= MAX_MAGNITUDE):
        raise builder.fail(at, f"range {text} is out of the supported range [-{MAX_MAGNITUDE:g}, {MAX_MAGNITUDE:g}]")
    if not lo < hi:
        raise builder.fail(at, f"empty range {text}: lo must be below hi")
    return lo, hi


def show_node(node) -> str:
    if isinstance(node, Token):
        return repr(str(node))
    toks = [str(t) for t in node.scan_values(lambda v: isinstance(v, Token))]
    text = " ".join(toks)
    return repr(text if len(text) < 40 else text[:37] + "...")
