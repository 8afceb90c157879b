"""Parser for `.lex` fuzzy feature lexicons (and raw VADER / AFINN files) -> a :class:`Lexicon`.

A `.lex` file declares lexical features (``%feature polarity range=-1..1``), computed
features with a small rule language (``%feature is_noun = class(SUBJ, OBJ)``), word
classes, VADER-style modifiers, includes, and body lines ``word feature=value ...``.
``%format vader|afinn`` makes the rest of a file raw lexicon lines; ``%include "f"
format=vader`` pulls in such a file. The format is documented in docs/lexicon.md.

Parsing is lark LALR (lexicon.lark); a semantic pass then reports, at file:line:col,
unknown features, classes, terms, roles-free misuse of values as conditions, values out
of a declared range, duplicate declarations, bad kernel specs and bad options.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput

from neurosym.dsl.errors import lark_error
from neurosym.dsl.escapes import unquote
from neurosym.errors import NeurosymError, SourceError, Span
from neurosym.fuzzy import KernelSpec, KernelSpecError

FRIENDLY = {
    "IDENT": "a name",
    "WORD": "a word",
    "STRING": "a quoted string",
    "NUMBER": "a number",
    "RANGE": "a range lo..hi",
    "KERNEL": "a kernel spec such as power(base=0.9, tau=0.35)",
    "WHERE": "'where'",
}
RAW_FORMATS = {"vader": (-4.0, 4.0), "afinn": (-5.0, 5.0)}  # raw score scale of each format
FEATURE_OPTIONS = ("range", "terms", "kernel", "centers")
DEFAULT_KERNEL = "triangular"
DEFAULT_WINDOW = 3
_FORMAT_LINE = re.compile(r"^[ \t]*%format\b[^\n]*(\n|$)", re.M)


# ====================================================================== rule AST
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
class Rule:
    """A computed feature's definition: ``expr [where gate]``."""

    expr: Cond | Value
    where: Cond | None
    span: Span

    @property
    def graded(self) -> bool:
        return isinstance(self.expr, (ValueOf, TermOf))


def walk(node) -> Iterator:
    """Every node of a rule expression, depth first."""
    yield node
    if isinstance(node, Rule):
        yield from walk(node.expr)
        if node.where is not None:
            yield from walk(node.where)
    elif isinstance(node, (AndCond, OrCond)):
        yield from walk(node.left)
        yield from walk(node.right)
    elif isinstance(node, (NotCond, PrevCond, SeenCond)):
        yield from walk(node.inner)
    elif isinstance(node, ValueOf) and node.from_cond is not None:
        yield from walk(node.from_cond)


# ====================================================================== declarations
@dataclass(frozen=True)
class Terms:
    """Fuzzy terms of a feature: names, one kernel, one centre per term."""

    names: tuple[str, ...]
    kernel: KernelSpec
    centers: tuple[float, ...]


@dataclass
class Feature:
    """A ``%feature`` declaration: lexical (``rule is None``; entries set its values) or
    computed (a rule). ``columns`` are the FeatureBank columns it yields."""

    name: str
    span: Span
    range: tuple[float, float] | None = None
    terms: Terms | None = None
    rule: Rule | None = None

    @property
    def kind(self) -> str:
        """``lexical``, ``condition`` (0/1) or ``graded``."""
        if self.rule is None:
            return "lexical"
        return "graded" if self.rule.graded else "condition"

    @property
    def columns(self) -> list[str]:
        if self.terms is None:
            return [self.name]
        return [f"{self.name}_{t}" for t in self.terms.names]


@dataclass
class WordClass:
    name: str
    words: tuple[str, ...]
    span: Span


@dataclass
class Modifier:
    """``%modifier WORD booster=b | negation[=s] [on=F] [window=n]``.

    It changes the value of lexical feature ``on`` (default ``polarity``) of the next
    token that has one, if that token is at most ``window`` positions later: a booster
    adds ``b * sign(v)``, a negation multiplies by ``-s`` (``s`` defaults to 1)."""

    word: str
    kind: Literal["booster", "negation"]
    amount: float
    target: str
    window: int
    span: Span


@dataclass
class Entry:
    """One body line: a word and the lexical feature values it sets."""

    word: str
    values: dict[str, float]
    span: Span


@dataclass
class Lexicon:
    """A parsed lexicon: declarations, entries (every body line, in load order, includes
    first) and the merged ``word -> {feature: value}`` map (later lines win)."""

    path: str | None
    features: dict[str, Feature] = field(default_factory=dict)
    classes: dict[str, WordClass] = field(default_factory=dict)
    modifiers: dict[str, Modifier] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    values: dict[str, dict[str, float]] = field(default_factory=dict)
    duplicates: list[Entry] = field(default_factory=list)  # raw-format lines that repeat a word
    formats: list[str] = field(default_factory=list)  # raw formats loaded (vader, afinn)
    # Every text the lexicon was read from (the file itself, `.lex` includes and raw
    # VADER / AFINN includes), keyed by resolved path ("<string>" for parsed text), so
    # it can be re-parsed without the files (see ``LexiconReader.from_sources``). The main
    # text's key is ``source_key``, its format ``source_format``; ``source_folder`` is
    # the folder its includes resolve against.
    sources: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    source_key: str | None = field(default=None, repr=False, compare=False)
    source_format: str = field(default="lex", repr=False, compare=False)
    source_folder: str | None = field(default=None, repr=False, compare=False)

    # ------------------------------------------------------------------ queries
    @property
    def computed(self) -> list[Feature]:
        return [f for f in self.features.values() if f.rule is not None]

    @property
    def lexical(self) -> list[Feature]:
        return [f for f in self.features.values() if f.rule is None]

    @property
    def outputs(self) -> list[Feature]:
        """The features a FeatureBank outputs: the computed ones, or (if there are none)
        the lexical ones."""
        return self.computed or self.lexical

    @property
    def columns(self) -> list[str]:
        return [c for f in self.outputs for c in f.columns]

    def defines(self, name: str) -> bool:
        """Whether ``name`` is a class or a feature of this lexicon."""
        return name in self.classes or name in self.features

    def words(self) -> list[str]:
        """Every word the lexicon mentions, first-seen order: entries, class members,
        modifiers, then the ``token("...")`` literals of rules."""
        out = dict.fromkeys(self.values)
        for c in self.classes.values():
            out.update(dict.fromkeys(c.words))
        out.update(dict.fromkeys(self.modifiers))
        for f in self.computed:
            for node in walk(f.rule):
                if isinstance(node, TokenCond):
                    out.update(dict.fromkeys(node.texts))
        return list(out)

    def value(self, word: str, feature: str) -> float | None:
        """The lexical value of ``feature`` for ``word`` (``None`` if it has none)."""
        self.feature(feature)
        return self.values.get(word, {}).get(feature)

    def feature(self, name: str) -> Feature:
        f = self.features.get(name)
        if f is None:
            raise NeurosymError(f"{self._where()}no feature {name!r}{_suggest(name, self.features)}")
        return f

    def class_words(self, name: str) -> list[str]:
        """The members of word class ``name``, in declared order."""
        c = self.classes.get(name)
        if c is None:
            raise NeurosymError(f"{self._where()}no class {name!r}{_suggest(name, self.classes)}")
        return list(c.words)

    def summary(self) -> dict:
        """A JSON-safe description for ``neurosym inspect``."""
        feats = []
        for f in self.features.values():
            d: dict = {"name": f.name, "kind": f.kind, "range": list(f.range) if f.range else None, "columns": f.columns}
            if f.terms is not None:
                d["terms"] = list(f.terms.names)
                d["kernel"] = str(f.terms.kernel)
                d["centers"] = list(f.terms.centers)
            if f.rule is not None:
                d["rule"] = _rule_text(f.rule)
            d["entries"] = sum(1 for v in self.values.values() if f.name in v) if f.rule is None else None
            feats.append(d)
        return {
            "path": self.path,
            "entries": len(self.entries),
            "words": len(self.words()),
            "valued_words": len(self.values),
            "duplicates": len(self.duplicates),
            "formats": list(self.formats),
            "features": feats,
            "classes": {n: len(c.words) for n, c in self.classes.items()},
            "modifiers": {m.word: {"kind": m.kind, "amount": m.amount, "on": m.target, "window": m.window} for m in self.modifiers.values()},
            "columns": self.columns,
        }

    def format_summary(self) -> str:
        """``summary()`` as a readable table."""
        return format_lexicon_summary(self.summary())

    def _where(self) -> str:
        return f"{self.path}: " if self.path else ""


def format_lexicon_summary(s: dict) -> str:
    """A :meth:`Lexicon.summary` dict as a readable table."""
    lines = [f"lexicon {s['path'] or '<string>'}: {s['entries']} entries, {s['words']} words, {s['valued_words']} with values" + (f", {s['duplicates']} repeated entries (last wins)" if s["duplicates"] else "")]
    lines.append(f"{len(s['columns'])} columns: {', '.join(s['columns'])}")
    lines.append("features:")
    for f in s["features"]:
        extra = f" range={f['range'][0]:g}..{f['range'][1]:g}" if f["range"] else ""
        if "terms" in f:
            extra += f" terms={','.join(f['terms'])} kernel={f['kernel']} centers={','.join(f'{c:g}' for c in f['centers'])}"
        if f.get("rule"):
            extra += f" = {f['rule']}"
        if f["entries"] is not None:
            extra += f" ({f['entries']} words)"
        lines.append(f"  {f['name']:<16} {f['kind']:<9}{extra}")
    if s["classes"]:
        lines.append("classes: " + ", ".join(f"{n} ({k})" for n, k in s["classes"].items()))
    if s["modifiers"]:
        lines.append("modifiers: " + ", ".join(f"{w} ({m['kind']} {m['amount']:g} on {m['on']})" for w, m in s["modifiers"].items()))
    return "\n".join(lines)


def _suggest(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f"; known: {', '.join(sorted(known))}" if known and len(known) <= 12 else ""


def _rule_text(rule: Rule) -> str:
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


# ====================================================================== loading
@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark.open(str(Path(__file__).with_name("lexicon.lark")), parser="lalr", propagate_positions=True)


def read_lexicon(path: str | Path, format: str | None = None) -> Lexicon:
    """Parse a lexicon file: a `.lex` file, or a raw VADER / AFINN file with
    ``format="vader"`` / ``"afinn"`` (``format=None`` means ``"lex"``)."""
    path = Path(path)
    return LexiconReader().load(path.resolve(), display=str(path), fmt=format or "lex")


def parse_lexicon(text: str, path: str | Path | None = None, format: str = "lex") -> Lexicon:
    """Parse lexicon text; includes resolve against ``path``'s folder (or the cwd)."""
    loader = LexiconReader()
    _check_format(format)
    if path is None:
        return loader.parse(text, display=None, key="<string>", folder=Path.cwd(), fmt=format)
    p = Path(path)
    return loader.parse(text, display=str(p), key=str(p.resolve()), folder=p.resolve().parent, fmt=format)


def _check_format(fmt: str, at: Span | None = None) -> None:
    if fmt != "lex" and fmt not in RAW_FORMATS:
        msg = f"unknown lexicon format {fmt!r}; expected lex, {', '.join(RAW_FORMATS)}"
        raise SourceError.at(at, msg) if at is not None else NeurosymError(msg)


class LexiconReader:
    """Loads lexicons recursively; include cycles reported.

    Every text it reads (the main file, `.lex` includes, raw VADER / AFINN includes) is
    kept in ``sources`` (resolved path -> text) and copied into the Lexicon it returns.
    ``reader`` (a path -> text function) replaces the disk; :meth:`from_sources` makes a
    loader that re-parses a lexicon from its recorded sources, without any file."""

    def __init__(self, reader: Callable[[Path], str] | None = None) -> None:
        self.loading: set[str] = set()
        self.sources: dict[str, str] = {}
        self.reader = reader

    @classmethod
    def from_sources(cls, sources: Mapping[str, str]) -> "LexiconReader":
        """A loader that reads from ``sources`` (as in ``Lexicon.sources``) and never from
        disk; a path that is not among them is a NeurosymError."""
        texts = dict(sources)

        def reader(path: Path) -> str:
            try:
                return texts[str(path)]
            except KeyError:
                raise NeurosymError(f"{path}: not among the lexicon's stored sources ({', '.join(sorted(texts)) or 'none'})") from None

        return cls(reader)

    def resolve(self, path: Path) -> Path:
        """An include's key: the resolved path on disk; with a ``reader``, the path
        normalised without touching the disk (the recorded keys were resolved already)."""
        return Path(os.path.normpath(path)) if self.reader is not None else path.resolve()

    def read(self, path: Path) -> str:
        """The text of ``path`` (from disk or the ``reader``), recorded in ``sources``."""
        text = self.reader(path) if self.reader is not None else path.read_text(encoding="utf-8")
        self.sources[str(path)] = text
        return text

    def reparse(self, key: str, display: str | None, fmt: str = "lex", folder: str | Path | None = None) -> Lexicon:
        """The lexicon whose main text is recorded under ``key`` (``Lexicon.source_key``),
        its includes resolved against ``folder`` (default: ``key``'s folder)."""
        _check_format(fmt)
        text = self.read(Path(key))
        self.loading.add(key)
        try:
            return self.parse(text, display=display, key=key, folder=Path(folder) if folder is not None else Path(key).parent, fmt=fmt)
        finally:
            self.loading.discard(key)

    def load(self, path: Path, display: str, fmt: str, at: Span | None = None) -> Lexicon:
        _check_format(fmt, at)
        key = str(path)
        if key in self.loading:
            raise SourceError.at(at or Span(display, 1, 1), f"include cycle: {display} includes itself (directly or indirectly)")
        try:
            text = self.read(path)
        except (FileNotFoundError, IsADirectoryError):
            if at is not None:
                raise SourceError.at(at, f"no such file {display}") from None
            raise NeurosymError(f"{display}: no such file") from None
        except UnicodeDecodeError as err:
            raise SourceError(f"the file is not UTF-8 ({err.reason})", display, 1, 1) from None
        self.loading.add(key)
        try:
            return self.parse(text, display=display, key=key, folder=path.parent, fmt=fmt)
        finally:
            self.loading.discard(key)

    def parse(self, text: str, display: str | None, key: str, folder: Path, fmt: str) -> Lexicon:
        self.sources[key] = text
        lex = Lexicon(display)
        lex.source_key, lex.source_format, lex.source_folder = key, fmt, str(folder)
        if fmt in RAW_FORMATS:
            _read_raw(lex, text, fmt, display, first_line=1, declare_at=Span(display, 1, 1))
            lex.sources = dict(self.sources)
            return lex
        m = _FORMAT_LINE.search(text)
        header, raw, raw_line = (text[: m.end()], text[m.end() :], text.count("\n", 0, m.end()) + 1) if m else (text, "", 0)
        if m and not m.group(1):  # %format on the last line, without a newline
            raw_line = text.count("\n") + 2
        try:
            tree = _parser().parse(header if header.endswith("\n") else header + "\n")
        except UnexpectedInput as err:
            raise _syntax_error(err, display, header) from None
        builder = _Builder(self, lex, display, folder)
        builder.build(tree)
        if builder.raw_format is not None:
            _read_raw(lex, raw, builder.raw_format, display, first_line=raw_line, declare_at=builder.raw_format_span)
        builder.finish()
        lex.sources = dict(self.sources)  # after the includes, so they are all there
        return lex


def _syntax_error(err: UnexpectedInput, display: str | None, text: str) -> SourceError:
    """lark's error, or a clearer one for a misspelt ``%directive``."""
    pos = getattr(err, "pos_in_stream", None)
    if isinstance(pos, int) and text.startswith("%", pos):
        m = re.match(r"%\w*", text[pos:])
        if m and m.group(0) not in ("%feature", "%class", "%modifier", "%include", "%format"):
            return SourceError(f"unknown directive {m.group(0)!r}; expected one of %feature, %class, %modifier, %include, %format", display, err.line, err.column)
    return lark_error(err, _parser(), display, text, FRIENDLY)


# ---------------------------------------------------------------------- raw formats
def _read_raw(lex: Lexicon, text: str, fmt: str, display: str | None, first_line: int, declare_at: Span) -> None:
    """Read VADER (``word TAB mean TAB std TAB [ratings]``) or AFINN (``word TAB int``) lines.

    Sets ``polarity`` = mean / 4 (VADER) or score / 5 (AFINN) and ``valence_raw`` = the raw
    score, declaring them (ranges -1..1 and the format's scale) unless already declared.
    Every non-empty line is one entry; a repeated word keeps its last value (as VADER's
    own loader does) and is listed in ``lexicon.duplicates``."""
    lo, hi = RAW_FORMATS[fmt]
    _declare_auto(lex, "polarity", (-1.0, 1.0), declare_at)
    _declare_auto(lex, "valence_raw", (lo, hi), declare_at)
    for feat in ("polarity", "valence_raw"):
        if lex.features[feat].rule is not None:
            raise SourceError.at(lex.features[feat].span, f"{feat} is set by the {fmt} lines, so it must be a lexical feature (no '=')")
    seen: set[str] = set()
    for i, line in enumerate(text.split("\n")):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        lineno = first_line + i
        fields = line.split("\t")
        word = fields[0]
        if fmt == "vader" and not 2 <= len(fields) <= 4 or fmt == "afinn" and len(fields) != 2:
            want = "word<TAB>mean<TAB>std<TAB>[ratings]" if fmt == "vader" else "word<TAB>integer score"
            raise SourceError(f"expected a {fmt} line {want}, got {len(fields)} tab-separated field(s)", display, lineno, 1)
        if not word:
            raise SourceError(f"empty word in a {fmt} line", display, lineno, 1)
        col = len(word) + 2
        raw = fields[1].strip()
        try:
            score = float(raw) if fmt == "vader" else int(raw)
        except ValueError:
            want = "a number" if fmt == "vader" else "an integer"
            raise SourceError(f"expected {want} (the {fmt} score), got {fields[1]!r}", display, lineno, col) from None
        if not lo <= score <= hi:
            raise SourceError(f"{fmt} score {raw} is outside {lo:g}..{hi:g}", display, lineno, col)
        span = Span(display, lineno, 1)
        values = {"polarity": score / hi, "valence_raw": float(score)}
        for feat in values:
            _check_range(lex.features[feat], values[feat], Span(display, lineno, col))
        entry = Entry(word, values, span)
        if word in seen:
            lex.duplicates.append(entry)
        seen.add(word)
        lex.entries.append(entry)
        lex.values.setdefault(word, {}).update(values)
    if fmt not in lex.formats:
        lex.formats.append(fmt)


def _declare_auto(lex: Lexicon, name: str, rng: tuple[float, float], at: Span) -> None:
    if name not in lex.features:
        lex.features[name] = Feature(name, at, range=rng)


def _check_range(f: Feature, v: float, at: Span) -> None:
    if f.range is not None and not f.range[0] <= v <= f.range[1]:
        raise SourceError.at(at, f"{f.name}={v:g} is outside the declared range {f.range[0]:g}..{f.range[1]:g}")


# ---------------------------------------------------------------------- the tree walker
class _Builder:
    """Turns one file's parse tree into its Lexicon, in passes: declarations, includes,
    raw lines, entries, then the checks that need everything (rules, modifiers, columns)."""

    def __init__(self, loader: LexiconReader, lex: Lexicon, display: str | None, folder: Path):
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
                    raise self.fail(m.span, f"modifier {m.word!r} changes feature {m.target!r}, which is not declared{_suggest(m.target, self.lex.features)}")
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
                    raise self.fail(at, f"range= expects lo..hi, got {_show(val)}")
                out[k] = (_range(str(toks[0]), at, self), at)
            elif k == "terms":
                if kind != "names":
                    raise self.fail(at, f"terms= expects names such as low,med,high, got {_show(val)}")
                out[k] = ([str(x) for x in toks], at)
            elif k == "kernel":
                if kind == "kernel" or (kind == "names" and len(toks) == 1):
                    out[k] = (str(toks[0]), at)
                else:
                    raise self.fail(at, f"kernel= expects a kernel spec such as power(base=0.9, tau=0.35), got {_show(val)}")
            elif k == "centers":
                if kind != "numbers":
                    raise self.fail(at, f"centers= expects numbers such as 0.2,0.6,1.0, got {_show(val)}")
                out[k] = ([float(x) for x in toks], at)
            elif k == "format":
                if kind != "names" or len(toks) != 1:
                    raise self.fail(at, f"format= expects one of lex, {', '.join(RAW_FORMATS)}, got {_show(val)}")
                out[k] = (str(toks[0]), at)
        return out

    def wordclass(self, t: Tree) -> None:
        name_tok, *members = t.children
        words: list[str] = []
        for m in members:
            tok = m.children[0]
            w = self.word(tok)
            if w in words:
                raise self.fail(tok, f"{w!r} is listed twice in class {name_tok}")
            words.append(w)
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
                    raise self.fail(key, f"a modifier is a booster or a negation, not both")
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
                if v is None or n != int(n) or n < 1:
                    raise self.fail(v if v is not None else key, "window= expects a whole number >= 1")
                window = int(n)
            else:
                raise self.fail(key, f"unknown modifier option {k!r}; expected booster=, negation, on=, window=")
        if kind is None:
            raise self.fail(tok, f"modifier {word!r} needs booster=AMOUNT or negation")
        self.declare(self.lex.modifiers, word, Modifier(word, kind, amount, target, window, self.span(tok)), self.span(tok), "modifier")

    def number(self, tok: Token, what: str) -> float:
        if tok.type != "NUMBER":
            raise self.fail(tok, f"{what} expects a number, got {str(tok)!r}")
        return float(tok)

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
        _check_format(fmt, fmt_opt[1] if fmt_opt else at)
        target = self.loader.resolve(self.folder / rel)
        display = rel if self.display is None else str(Path(self.display).parent / rel)
        if fmt in RAW_FORMATS:
            try:
                text = self.loader.read(target)  # recorded in the lexicon's sources
            except (FileNotFoundError, IsADirectoryError):
                raise self.fail(file_tok, f"no such file {rel}") from None
            except UnicodeDecodeError as err:
                raise self.fail(file_tok, f"{rel} is not UTF-8 ({err.reason})") from None
            _read_raw(self.lex, text, fmt, display, first_line=1, declare_at=at)
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
                raise self.fail(key, f"unknown feature {k!r}{_suggest(k, [n for n, x in self.lex.features.items() if x.rule is None])}")
            if f.rule is not None:
                raise self.fail(key, f"{k!r} is computed by a rule (line {f.span.line}); entries set lexical features only")
            if (word, k) in self.local_entries:
                raise self.fail(key, f"duplicate value of {k} for {word!r} (first at line {self.local_entries[(word, k)].line})")
            self.local_entries[(word, k)] = self.span(key)
            v = float(val)
            _check_range(f, v, self.span(val))
            values[k] = v
        self.lex.entries.append(Entry(word, values, self.span(tok)))
        self.lex.values.setdefault(word, {}).update(values)

    # ------------------------------------------------------------------ rules: syntax
    def rule(self, t: Tree) -> Rule:
        expr = self.expr(t.children[0])
        where = None
        if len(t.children) > 1:
            where = self.expr(t.children[2])
            self.require_cond(where, "after 'where'")
        return Rule(expr, where, self.span(t))

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
            raise self.fail(tok, f"unknown name {name!r} in a rule; expected bos, capitalized or a call such as class(NAME){_suggest(name, ['bos', 'capitalized', *CALLS])}")
        if kind == "call":
            return self.call(t)
        raise self.fail(at, f"expected a condition or value(...) here, got {_show(t)}")

    def call(self, t: Tree) -> Cond | Value:
        name_tok, *args = t.children
        args = [a for a in args if a is not None]
        fn = str(name_tok)
        at = self.span(name_tok)
        if fn not in CALLS:
            raise self.fail(name_tok, f"unknown function {fn!r}; expected one of {', '.join(CALLS)}{_suggest(fn, CALLS)}")
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
                    raise self.fail(a, f"token() expects quoted strings such as token(\".\"), got {_show(a)}")
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
                    raise self.fail(v, f"from= expects prev or prev(condition), got {_show(v)}")
                opts["from_prev"], opts["from_cond"] = True, node.inner
            elif key == "part":
                if not (isinstance(v, Tree) and v.data == "name" and str(v.children[0]) in ("pos", "neg")):
                    raise self.fail(v, f"part= expects pos or neg, got {_show(v)}")
                opts["part"] = str(v.children[0])
            elif key == "clip":
                if not (isinstance(v, Tree) and v.data == "range"):
                    raise self.fail(v, f"clip= expects lo..hi, got {_show(v)}")
                opts["clip"] = _range(str(v.children[0]), self.span(v), self)
            elif key == "default":
                if not (isinstance(v, Tree) and v.data == "number"):
                    raise self.fail(v, f"default= expects a number, got {_show(v)}")
                opts["default"] = float(v.children[0])
            else:
                raise self.fail(ktok, f"unknown value() option {key!r}; expected from=, part=, clip=, default=")
        return ValueOf(feature, at, **opts)

    def name_arg(self, a, what: str) -> Name:
        if isinstance(a, Tree) and a.data == "name":
            tok = a.children[0]
            return Name(str(tok), self.span(tok))
        raise self.fail(a, f"expected {what}, got {_show(a)}")

    # ------------------------------------------------------------------ rules: meaning
    def check_rule(self, f: Feature) -> None:
        lex = self.lex
        rule = f.rule
        assert rule is not None
        for node in walk(rule):
            if isinstance(node, ClassCond):
                for c in node.classes:
                    if c.text not in lex.classes:
                        raise self.fail(c.span, f"unknown class {c.text!r}{_suggest(c.text, lex.classes)}")
            elif isinstance(node, (HasCond, ValueOf, TermOf)):
                name = node.feature
                g = lex.features.get(name.text)
                if g is None:
                    raise self.fail(name.span, f"unknown feature {name.text!r}{_suggest(name.text, lex.features)}")
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


def _range(text: str, at: Span, builder: _Builder) -> tuple[float, float]:
    m = re.fullmatch(r"(.+?)\.\.(.+)", text)
    assert m is not None  # the RANGE terminal guarantees the shape
    lo, hi = float(m.group(1)), float(m.group(2))
    if not lo < hi:
        raise builder.fail(at, f"empty range {text}: lo must be below hi")
    return lo, hi


def _show(node) -> str:
    if isinstance(node, Token):
        return repr(str(node))
    toks = [str(t) for t in node.scan_values(lambda v: isinstance(v, Token))]
    text = " ".join(toks)
    return repr(text if len(text) < 40 else text[:37] + "...")


__all__ = [
    "Entry",
    "LexiconReader",
    "Feature",
    "Lexicon",
    "Modifier",
    "Rule",
    "Terms",
    "WordClass",
    "read_lexicon",
    "parse_lexicon",
    "walk",
]
