"""Saving, loading and caching compiled automata.

An artifact is one ``.safetensors`` file: the tensors (transition tables, finals,
weights, the character DFAs) plus a JSON header under the metadata key ``neurosym``
(format version, names, the vocabulary, character classes). Files are written
atomically: to a temporary file in the same folder, fsynced, then renamed, so a
killed process never leaves a half-written artifact.

The cache keys an artifact by the sha256 of every source file it was built from
(the bank, its imports and word lists), the vocabulary's hash, the limits and the
neurosym version.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from neurosym.compile.automaton import Automaton
from neurosym.compile.dfa import CharDFA, Partition
from neurosym.compile.regex import Limits, RegexBank, compile_bank
from neurosym.dsl import ir
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab

FORMAT = "neurosym-automata"
FORMAT_VERSION = 1


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def to_bytes(obj: Automaton | RegexBank) -> bytes:
    """Serialise an automaton or a bank (tensors + JSON header) to safetensors bytes."""
    if isinstance(obj, RegexBank):
        autos, kind = list(obj.patterns.values()), "bank"
        weights = obj.weights
    elif isinstance(obj, Automaton):
        autos, kind = [obj], "automaton"
        weights = torch.ones(1)
    else:
        raise NeurosymError(f"cannot save a {type(obj).__name__}; expected an Automaton or a RegexBank")
    tensors: dict[str, torch.Tensor] = {"weights": weights.float().contiguous()}
    partitions = []
    for i, a in enumerate(autos):
        tensors[f"{i}.delta"] = a.delta.contiguous()
        tensors[f"{i}.final"] = a.final.contiguous()
        if a.char_dfa is not None:
            tensors[f"{i}.char_trans"] = torch.from_numpy(np.ascontiguousarray(a.char_dfa.trans))
            tensors[f"{i}.char_final"] = torch.from_numpy(np.ascontiguousarray(a.char_dfa.final))
            partitions.append(a.char_dfa.partition.members)
        else:
            partitions.append(None)
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "names": [a.name for a in autos],
        "sources": [a.source for a in autos],
        "path": getattr(obj, "path", None),
        "partitions": partitions,
        "vocab": autos[0].vocab.to_json() if autos else obj.vocab.to_json(),
    }
    return st_save(tensors, metadata={"neurosym": json.dumps(header)})


def from_bytes(data: bytes, origin: str = "<bytes>") -> Automaton | RegexBank:
    """Inverse of :func:`to_bytes`."""
    try:
        tensors = st_load(data)
        header = _read_header(data)
    except (SafetensorError, ValueError, KeyError) as err:
        raise NeurosymError(f"{origin}: not a neurosym artifact ({err})") from None
    if header.get("format") != FORMAT or header.get("format_version") != FORMAT_VERSION:
        raise NeurosymError(f"{origin}: artifact format {header.get('format')!r} v{header.get('format_version')} is not {FORMAT!r} v{FORMAT_VERSION}")
    vocab = Vocab.from_json(header["vocab"])
    autos = []
    for i, (name, source, members) in enumerate(zip(header["names"], header["sources"], header["partitions"])):
        char_dfa = None
        if members is not None:
            class_of = {c: k for k, chars in enumerate(members) for c in chars}
            char_dfa = CharDFA(tensors[f"{i}.char_trans"].numpy(), tensors[f"{i}.char_final"].numpy(), Partition(class_of, members))
        autos.append(Automaton(tensors[f"{i}.delta"], tensors[f"{i}.final"], vocab, char_dfa=char_dfa, name=name, source=source))
    if header["kind"] == "automaton":
        return autos[0]
    return RegexBank({a.name: a for a in autos}, tensors["weights"], vocab, path=header.get("path"))


def _read_header(data: bytes) -> dict:
    n = int.from_bytes(data[:8], "little")
    meta = json.loads(data[8 : 8 + n])["__metadata__"]
    return json.loads(meta["neurosym"])


def save(obj: Automaton | RegexBank, path: str | Path) -> Path:
    """Save atomically to ``path`` (a ``.safetensors`` file)."""
    path = Path(path)
    atomic_write_bytes(path, to_bytes(obj))
    return path


def load_artifact(path: str | Path) -> Automaton | RegexBank:
    """Load a file written by :func:`save`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NeurosymError(f"{path}: no such artifact") from None
    return from_bytes(data, str(path))


# ---------------------------------------------------------------------- cache
def default_cache_dir() -> Path:
    return Path(os.environ.get("NEUROSYM_CACHE", Path.home() / ".cache" / "neurosym"))


def bank_sources(bank: ir.Bank) -> list[str]:
    """Every file a parsed bank was built from: the bank, its imports and its word lists."""
    files = {rule.scope for rule in bank.rules.values() if rule.scope}
    if bank.path:
        files.add(str(Path(bank.path).resolve()))
    for rule in bank.rules.values():
        files.update(w.path for w in ir.walk(rule.expr) if isinstance(w, ir.Words))
    return sorted(files)


def cache_key(sources: list[str], vocab: Vocab | None, limits: Limits) -> str:
    """sha256 over the sources' contents, the vocabulary hash, the limits and the version."""
    from neurosym import __version__

    h = hashlib.sha256(f"{FORMAT}/{FORMAT_VERSION}/{__version__}/{limits.max_states}/{limits.time_limit}".encode())
    for src in sources:
        h.update(b"\x00" + Path(src).name.encode() + b"\x00" + hashlib.sha256(Path(src).read_bytes()).digest())
    h.update(b"\x01" + (vocab.sha256() if vocab is not None else "default").encode())
    return h.hexdigest()


def load_cached(path: str | Path, vocab: Vocab | None = None, limits: Limits = Limits(), cache_dir: str | Path | None = None) -> RegexBank:
    """Compile a `.regex` bank, reusing a cached artifact when no source has changed."""
    from neurosym.dsl.regex_bank import load_regex_bank

    bank_ir = load_regex_bank(path)
    key = cache_key(bank_sources(bank_ir), vocab, limits)
    target = Path(cache_dir or default_cache_dir()) / f"{key}.safetensors"
    if target.is_file():
        try:
            cached = load_artifact(target)
            if isinstance(cached, RegexBank):
                return cached
        except NeurosymError:
            pass  # an unreadable cache entry is rebuilt below
    bank = compile_bank(bank_ir, vocab, limits)
    save(bank, target)
    return bank
