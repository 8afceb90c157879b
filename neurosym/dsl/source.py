"""Source text of every DSL, read and parsed one way: :func:`read_source` (the size cap,
UTF-8, an error naming the file or the include that named it), :class:`IncludeReader`
(a file and the files it imports or includes, each recorded, cycles reported at the
include), and :func:`lark_parser` / :func:`parse_text` (one LALR parser per grammar
file, built once, its errors as ``path:line:col: expected ..., got ...``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from lark import Lark, Tree
from lark.exceptions import UnexpectedInput

from neurosym.dsl.errors import lark_error, read_error, read_source_bytes
from neurosym.errors import NeurosymError, SourceError, Span
from neurosym.files import read_input

DSL_FOLDER = Path(__file__).parent
Result = TypeVar("Result")


# ---------------------------------------------------------------------- parsers
@lru_cache(maxsize=None)
def lark_parser(grammar: str) -> Lark:
    """The LALR parser (positions kept) of the lark grammar ``grammar``, a path relative
    to ``neurosym/dsl/`` (``"pcfg.lark"``, ``"lexicon/lexicon.lark"``); built once."""
    return Lark.open(str(DSL_FOLDER / grammar), parser="lalr", propagate_positions=True)


def parse_text(
    grammar: str,
    text: str,
    display: str | None,
    friendly: dict[str, str],
    error: Callable[[UnexpectedInput], SourceError | None] | None = None,
) -> Tree:
    """``text`` parsed by :func:`lark_parser` (a final newline added when missing). A
    syntax error is a :class:`SourceError` at its position in ``display``: ``error``'s,
    when it gives one, else lark's expected/got message with ``friendly`` names."""
    parser = lark_parser(grammar)
    try:
        return parser.parse(text if text.endswith("\n") else text + "\n")
    except UnexpectedInput as err:
        raise ((error(err) if error is not None else None) or lark_error(err, parser, display, text, friendly)) from None


# ---------------------------------------------------------------------- reading files
def read_source(path: Path, display: str, at: Span | None = None, read: Callable[[Path], str] | None = None) -> str:
    """The text of ``path`` (through ``read`` instead of the disk when given; the disk's
    files are held to the source-size cap first). Not UTF-8: a SourceError at
    ``display``:1:1. Missing or unreadable: a SourceError at ``at`` (the include that
    named the file), or a NeurosymError naming ``display`` for a top-level file."""
    try:
        if read is not None:
            return read(path)
        return read_source_bytes(path, display).decode("utf-8")
    except UnicodeDecodeError as err:
        raise SourceError.not_utf8(err, display) from None
    except (OSError, ValueError) as err:
        if at is not None:
            raise SourceError.at(at, read_error(err, display)) from None
        raise NeurosymError(f"{display}: {read_error(err, 'the file')}") from None


class IncludeReader:
    """Reads a file and the files it includes: every text read is kept in ``sources``
    (key -> text); a file that includes itself, directly or not, is a SourceError at the
    include. ``read`` (a path -> text function) replaces the disk."""

    def __init__(self, verb: str = "include", read: Callable[[Path], str] | None = None) -> None:
        self.verb = verb  # "import" or "include", as the format spells it
        self.loading: set[str] = set()
        self.sources: dict[str, str] = {}
        self.reader = read

    def read(self, path: Path, display: str | None = None) -> str:
        """The raw text of ``path`` (disk or ``read``), recorded in ``sources``; OSError,
        ValueError and UnicodeDecodeError pass through."""
        text = self.reader(path) if self.reader is not None else read_source_bytes(path, display).decode("utf-8")
        self.sources[str(path)] = text
        return text

    def include(self, path: Path, display: str, at: Span | None, parse: Callable[[str], Result]) -> Result:
        """``parse(text)`` of ``path``, with the cycle check around it; read errors as
        :func:`read_source` gives them."""
        key = str(path)
        if key in self.loading:
            raise SourceError.at(at or Span(display, 1, 1), f"{self.verb} cycle: {display} {self.verb}s itself (directly or indirectly)")
        text = read_source(path, display, at, lambda p: self.read(p, display))
        self.loading.add(key)
        try:
            return parse(text)
        finally:
            self.loading.discard(key)


def read_text_file(path: Path, folder_hint: str) -> str:
    """The text of a data file a command reads whole (examples, a corpus): a missing file,
    a folder (``folder_hint`` says what to give instead), an unreadable file and invalid
    UTF-8 (at its line and column) are one-line errors."""
    try:
        return read_input(path).decode("utf-8")
    except FileNotFoundError:
        raise NeurosymError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise NeurosymError(f"{path}: is a folder; {folder_hint}") from None
    except OSError as err:
        raise NeurosymError(f"{path}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise SourceError.not_utf8(err, path) from None


__all__ = ["IncludeReader", "lark_parser", "parse_text", "read_source", "read_text_file"]
