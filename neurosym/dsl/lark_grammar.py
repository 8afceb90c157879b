"""`.lark` grammars (Lark's EBNF, as llguidance, SynCode and lark itself read them) -> a
``.pcfg`` grammar over strings.

The file is read by lark's own grammar loader (``lark.Lark``: rules, EBNF operators,
templates, ``%import`` of lark's common terminals, terminals built from terminals), which
hands back plain rules over terminals; each terminal becomes a literal (a Lark string)
or a ``/regex/`` lexeme (a Lark pattern, Python syntax, its flags as an inline group).
Terminals concatenate (``%separator ""``); what ``%ignore`` names may stand between any
two symbols of a rule and around the text, as Lark's lexer skips it. Each nonterminal's
alternatives are equally likely (``neurosym fit`` learns weights from examples).
"""

from __future__ import annotations

import re

from pathlib import Path

from neurosym.dsl.pcfg import NT, Grammar, Lexeme, Lit, Symbol, uniform_grammar
from neurosym.dsl.source import read_source
from neurosym.errors import NeurosymError, SourceError, Span


# lark's shipped terminals written with a lookbehind, as the regular language lark's lexer
# reads with them (its match stops at the first quote not escaped)
REGULAR = {
    '".*?(?<!\\\\)(\\\\\\\\)*?"': '"(?:[^"\\\\\\n]|\\\\[^\\n])*"',  # common.ESCAPED_STRING
}


def parse_lark(text: str, path: str | Path | None = None, start: str = "start") -> Grammar:
    """The grammar of Lark text (``start``: its start rule)."""
    from lark import Lark  # lazy: lark's grammar loader, for .lark files only
    from lark.exceptions import LarkError
    from lark.lexer import PatternStr

    display = None if path is None else str(path)
    try:
        lark = Lark(text, start=start, parser="earley", lexer="dynamic", keep_all_tokens=True,
                    import_paths=[str(Path(path).resolve().parent)] if path is not None else [])
    except LarkError as err:
        line, col = getattr(err, "line", 1), getattr(err, "column", 1)
        raise SourceError(f"not a Lark grammar: {str(err).strip().splitlines()[0]}", display, line if isinstance(line, int) and line > 0 else 1,
                          col if isinstance(col, int) and col > 0 else 1) from None
    span = Span(display, 1, 1)
    terminals: dict[str, Symbol] = {}
    for t in lark.terminals:
        p = t.pattern
        flags = "".join(sorted(f for f in p.flags if f in "ims"))
        if isinstance(p, PatternStr) and not flags:
            if not p.value:
                raise SourceError(f"terminal {t.name} is the empty string", display, 1, 1)
            terminals[t.name] = Lit(p.value, span)
        else:
            source = re.escape(p.value) if isinstance(p, PatternStr) else REGULAR.get(p.value, p.value)
            terminals[t.name] = Lexeme(f"(?{flags}:{source})" if flags else source, span)
    ignored = [terminals[name] for name in lark.ignore_tokens if name in terminals]
    gap = "%ignored" if ignored else None
    rows: list[tuple[str, tuple]] = []
    for rule in lark.rules:
        syms = []
        for i, s in enumerate(rule.expansion):
            if i and gap:
                syms.append(NT(gap, span))
            syms.append(terminals[s.name] if s.is_term else NT(s.name, span))
        rows.append((rule.origin.name, tuple(syms)))
    starts = [name for name, _ in rows if name == start]
    if not starts:
        raise SourceError(f"the grammar has no rule {start!r} to start from", display, 1, 1)
    top = "%text"
    rows.insert(0, (top, ((NT(gap, span),) if gap else ()) + (NT(start, span),) + ((NT(gap, span),) if gap else ())))
    if gap:  # any run of ignored terminals, or none
        rows += [(gap, ())] + [(gap, (t, NT(gap, span))) for t in ignored]
    return uniform_grammar([(lhs, rhs, span) for lhs, rhs in rows], top, display, span)


def read_lark(path: str | Path) -> Grammar:
    """Read a ``.lark`` file (its ``%import``\\ s resolve against its folder)."""
    path = Path(path)
    try:
        return parse_lark(read_source(path, str(path)), path)
    except RecursionError:
        raise NeurosymError(f"{path}: the grammar nests too deeply to read") from None


__all__ = ["parse_lark", "read_lark"]
