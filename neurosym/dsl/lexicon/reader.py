"""Reading `.lex` files: the lark parser, includes (``%include``) with cycle detection, and
the text of every file read (:class:`LexiconReader`), for artifacts to re-parse later."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path

from lark import Lark, Tree
from lark.exceptions import UnexpectedInput

from neurosym.dsl.errors import check_source_size, lark_error, read_error
from neurosym.dsl.fastlines import merge, split_fast, token
from neurosym.dsl.lexicon.builder import LexiconBuilder
from neurosym.dsl.lexicon.model import Lexicon
from neurosym.dsl.lexicon.raw import RAW_FORMATS, check_format, read_raw
from neurosym.errors import NeurosymError, SourceError, Span


FRIENDLY = {
    "IDENT": "a name",
    "WORD": "a word",
    "STRING": "a quoted string",
    "NUMBER": "a number",
    "RANGE": "a range lo..hi",
    "KERNEL": "a kernel spec such as power(base=0.9, tau=0.35)",
    "WHERE": "'where'",
}


FORMAT_LINE = re.compile(r"^[ \t]*%format\b[^\n]*(\n|$)", re.M)

# the plain lines of a big lexicon, read without lark (neurosym.dsl.fastlines): a %class of
# bare words, and an entry of a bare word with name=number values; comments after a blank
_WORD = r"[^\s\"'#%=][^\s=]*"
_NUMBER = r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?"
_TAIL = r"[ \t]*(?:(?<=[ \t])#.*)?$"
_CLASS_LINE = re.compile(  # the first member may follow the name directly: `%class A: x` lists ':' and x
    r"([ \t]*)%class([ \t]+)([A-Za-z_][A-Za-z0-9_]*)((?:[ \t]+|(?=[^\sA-Za-z0-9_]))" + _WORD + r"(?:[ \t]+" + _WORD + r")*)" + _TAIL
)
_ENTRY_LINE = re.compile(r"([ \t]*)(" + _WORD + r")((?:[ \t]+[A-Za-z_][A-Za-z0-9_]*=" + _NUMBER + r")*)" + _TAIL)
_BLANK_RUN = re.compile(r"[^ \t]+")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(" + _NUMBER + r")(?=[ \t]|$)")


def fast_line(line: str, number: int) -> Tree | None:
    """The tree lark gives a plain ``%class`` or entry line, or ``None`` for any other line."""
    if line.lstrip(" \t").startswith("%"):
        m = _CLASS_LINE.fullmatch(line)
        if m is None:
            return None
        col = m.end(3) + 1
        members = [Tree("member", [token("WORD", w.group(), number, col + w.start())]) for w in _BLANK_RUN.finditer(m.group(4))]
        return Tree("wordclass", [token("IDENT", m.group(3), number, m.start(3) + 1), *members])
    m = _ENTRY_LINE.fullmatch(line)
    if m is None:
        return None
    col = m.end(2) + 1
    assigns = []
    for a in _ASSIGN.finditer(m.group(3)):
        start = col + a.start()
        key = token("IDENT", a.group(1), number, start)
        assigns.append(Tree("assign", [key, token("NUMBER", a.group(2), number, start + len(a.group(1)) + 1)]))
    return Tree("entry", [Tree("headword", [token("WORD", m.group(2), number, m.start(2) + 1)]), *assigns])


@lru_cache(maxsize=1)
def lexicon_parser() -> Lark:
    return Lark.open(str(Path(__file__).with_name("lexicon.lark")), parser="lalr", propagate_positions=True)


def read_lexicon(path: str | Path, format: str | None = None) -> Lexicon:
    """Parse a lexicon file: a `.lex` file, or a raw VADER / AFINN file with
    ``format="vader"`` / ``"afinn"`` (``format=None`` means ``"lex"``)."""
    path = Path(path)
    return LexiconReader().load(path.resolve(), display=str(path), fmt=format or "lex")


def parse_lexicon(text: str, path: str | Path | None = None, format: str = "lex") -> Lexicon:
    """Parse lexicon text; includes resolve against ``path``'s folder (or the cwd)."""
    loader = LexiconReader()
    check_format(format)
    if path is None:
        return loader.parse(text, display=None, key="<string>", folder=Path.cwd(), fmt=format)
    p = Path(path)
    return loader.parse(text, display=str(p), key=str(p.resolve()), folder=p.resolve().parent, fmt=format)


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
        if self.reader is None:
            check_source_size(path)
        text = self.reader(path) if self.reader is not None else path.read_text(encoding="utf-8")
        self.sources[str(path)] = text
        return text

    def reparse(self, key: str, display: str | None, fmt: str = "lex", folder: str | Path | None = None) -> Lexicon:
        """The lexicon whose main text is recorded under ``key`` (``Lexicon.source_key``),
        its includes resolved against ``folder`` (default: ``key``'s folder)."""
        check_format(fmt)
        text = self.read(Path(key))
        self.loading.add(key)
        try:
            return self.parse(text, display=display, key=key, folder=Path(folder) if folder is not None else Path(key).parent, fmt=fmt)
        finally:
            self.loading.discard(key)

    def load(self, path: Path, display: str, fmt: str, at: Span | None = None) -> Lexicon:
        check_format(fmt, at)
        key = str(path)
        if key in self.loading:
            raise SourceError.at(at or Span(display, 1, 1), f"include cycle: {display} includes itself (directly or indirectly)")
        try:
            text = self.read(path)
        except UnicodeDecodeError as err:
            raise SourceError.not_utf8(err, display) from None
        except (OSError, ValueError) as err:
            if at is not None:
                raise SourceError.at(at, read_error(err, display)) from None
            raise NeurosymError(f"{display}: {read_error(err, 'the file')}") from None
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
            read_raw(lex, text, fmt, display, first_line=1, declare_at=Span(display, 1, 1))
            lex.sources = dict(self.sources)
            return lex
        m = FORMAT_LINE.search(text)
        header, raw, raw_line = (text[: m.end()], text[m.end() :], text.count("\n", 0, m.end()) + 1) if m else (text, "", 0)
        if m and not m.group(1):  # %format on the last line, without a newline
            raw_line = text.count("\n") + 2
        slow, fast = split_fast(header, fast_line)
        try:
            tree = lexicon_parser().parse(slow if slow.endswith("\n") else slow + "\n")
        except UnexpectedInput as err:
            raise syntax_error(err, display, slow) from None
        tree.children = merge(tree.children, fast)
        builder = LexiconBuilder(self, lex, display, folder)
        builder.build(tree)
        if builder.raw_format is not None:
            read_raw(lex, raw, builder.raw_format, display, first_line=raw_line, declare_at=builder.raw_format_span)
        builder.finish()
        lex.sources = dict(self.sources)  # after the includes, so they are all there
        return lex


def syntax_error(err: UnexpectedInput, display: str | None, text: str) -> SourceError:
    """lark's error, or a clearer one for a misspelt ``%directive``."""
    pos = getattr(err, "pos_in_stream", None)
    if isinstance(pos, int) and text.startswith("%", pos):
        m = re.match(r"%\w*", text[pos:])
        if m and m.group(0) not in ("%feature", "%class", "%modifier", "%include", "%format"):
            return SourceError(f"unknown directive {m.group(0)!r}; expected one of %feature, %class, %modifier, %include, %format", display, err.line, err.column)
    return lark_error(err, lexicon_parser(), display, text, FRIENDLY)
