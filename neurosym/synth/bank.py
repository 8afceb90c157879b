"""Append a synthesised pattern to a ``.regex`` bank file, atomically."""

from __future__ import annotations

import re
from pathlib import Path

from neurosym.errors import NeurosymError
from neurosym.files import atomic_write_bytes
from neurosym.compile.regex import compile_bank
from neurosym.dsl.regex import parse_regex_bank

NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_RULE = re.compile(r"^\s*([A-Z_][A-Z0-9_]*)\s*(?:\[[^\]]*\])?\s*:", re.M)


def check_name(name: str) -> str:
    """``name`` if it can name a bank pattern (``[A-Z_][A-Z0-9_]*``), else a NeurosymError."""
    if not NAME.fullmatch(name):
        raise NeurosymError(f"bad pattern name {name!r}: bank names are UPPERCASE, [A-Z_][A-Z0-9_]*")
    return name


def bank_entry(name: str, pattern: str) -> str:
    """The bank line ``NAME: /pattern/`` (slashes in the pattern written ``\\/``)."""
    check_name(name)
    if "\n" in pattern or "\r" in pattern:
        raise NeurosymError("a bank pattern must fit on one line (write \\n for a newline)")
    body = re.sub(r"(?<!\\)((?:\\\\)*)/", r"\1\\/", pattern)
    return f"{name}: /{body}/"


def write_to_bank(path: str | Path, name: str, pattern: str) -> None:
    """Append ``NAME: /pattern/`` to the bank at ``path`` (created if missing).

    Refuses a name the bank already defines, and a result that does not compile
    (the whole bank is parsed and compiled before anything is written); the file is
    replaced atomically, so readers see the old bank or the new one.
    """
    path = Path(path)
    entry = bank_entry(name, pattern)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    existing = {m.group(1) for m in _RULE.finditer(old)}
    if old.strip():
        existing |= set(parse_regex_bank(old, path=path).patterns)  # imported names count too
    if name in existing:
        raise NeurosymError(f"{path}: the bank already has a pattern named {name}; choose another name")
    text = old + ("" if not old or old.endswith("\n") else "\n") + entry + "\n"
    bank = parse_regex_bank(text, path=path)
    if name not in bank.patterns:  # pragma: no cover - the grammar accepted it under another name
        raise NeurosymError(f"{path}: {name} did not parse as a new pattern")
    compile_bank(bank)
    atomic_write_bytes(path, text.encode("utf-8"))


__all__ = ["bank_entry", "check_name", "write_to_bank"]
