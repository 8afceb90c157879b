"""A parsed lexicon: features, word classes, modifiers and entries (:class:`Lexicon`), and
its summary."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Literal

from neurosym.dsl.lexicon.rules import FeatureRule, TokenCond, rule_text, walk_rule
from neurosym.errors import NeurosymError, Span
from neurosym.fuzzy import KernelSpec


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
    rule: FeatureRule | None = None

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
            for node in walk_rule(f.rule):
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
            raise NeurosymError(f"{self._where()}no feature {name!r}{did_you_mean(name, self.features)}")
        return f

    def class_words(self, name: str) -> list[str]:
        """The members of word class ``name``, in declared order."""
        c = self.classes.get(name)
        if c is None:
            raise NeurosymError(f"{self._where()}no class {name!r}{did_you_mean(name, self.classes)}")
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
                d["rule"] = rule_text(f.rule)
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


def did_you_mean(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f"; known: {', '.join(sorted(known))}" if known and len(known) <= 12 else ""
