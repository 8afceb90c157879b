"""Raw sentiment lexicons: VADER and AFINN lines (``word<TAB>score ...``), read as the
``valence`` feature rescaled to [-1, 1]."""

from __future__ import annotations

from neurosym.dsl.lexicon.model import Entry, Feature, Lexicon
from neurosym.errors import NeurosymError, SourceError, Span


RAW_FORMATS = {"vader": (-4.0, 4.0), "afinn": (-5.0, 5.0)}  # raw score scale of each format


def check_format(fmt: str, at: Span | None = None) -> None:
    if fmt != "lex" and fmt not in RAW_FORMATS:
        msg = f"unknown lexicon format {fmt!r}; expected lex, {', '.join(RAW_FORMATS)}"
        raise SourceError.at(at, msg) if at is not None else NeurosymError(msg)


def read_raw(lex: Lexicon, text: str, fmt: str, display: str | None, first_line: int, declare_at: Span) -> None:
    """Read VADER (``word TAB mean TAB std TAB [ratings]``) or AFINN (``word TAB int``) lines.

    Sets ``polarity`` = mean / 4 (VADER) or score / 5 (AFINN) and ``valence_raw`` = the raw
    score, declaring them (ranges -1..1 and the format's scale) unless already declared.
    Every non-empty line is one entry; a repeated word keeps its last value (as VADER's
    own loader does) and is listed in ``lexicon.duplicates``."""
    lo, hi = RAW_FORMATS[fmt]
    declare_auto(lex, "polarity", (-1.0, 1.0), declare_at)
    declare_auto(lex, "valence_raw", (lo, hi), declare_at)
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
            check_range(lex.features[feat], values[feat], Span(display, lineno, col))
        entry = Entry(word, values, span)
        if word in seen:
            lex.duplicates.append(entry)
        seen.add(word)
        lex.entries.append(entry)
        lex.values.setdefault(word, {}).update(values)
    if fmt not in lex.formats:
        lex.formats.append(fmt)


def declare_auto(lex: Lexicon, name: str, rng: tuple[float, float], at: Span) -> None:
    if name not in lex.features:
        lex.features[name] = Feature(name, at, range=rng)


def check_range(f: Feature, v: float, at: Span) -> None:
    if f.range is not None and not f.range[0] <= v <= f.range[1]:
        raise SourceError.at(at, f"{f.name}={v:g} is outside the declared range {f.range[0]:g}..{f.range[1]:g}")
