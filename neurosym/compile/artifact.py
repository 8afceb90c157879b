"""Saving, loading and caching compiled automata, grammars and feature banks.

An artifact is one ``.safetensors`` file: the tensors plus a JSON header under the
metadata key ``neurosym`` (format, format version, kind, names, the vocabulary, ...).
The header's ``kind`` says what the file holds:

* ``"automaton"``: one :class:`Automaton`: its arcs as CSR rows (``0.indptr`` (Q+1,),
  ``0.tokens`` and ``0.targets`` (E,) int32, tokens ascending in each row), ``0.final``,
  and its character DFA (a 32k-token BPE automaton is stored in its arcs, not a (Q, V) table);
* ``"regex"``: a :class:`RegexBank` (``weights`` and each pattern's ``i.indptr`` ...);
* ``"fsg"``: a :class:`WeightedAutomaton` (``delta``, ``final``, ``log_probs``,
  ``final_log_probs`` and one ``role.<name>`` table per role, all float64);
* ``"pcfg"``: a :class:`RuleTensors` (``root``, ``binary``, ``emit``, ``root_term``,
  ``empty`` in their own dtype; the symbol names, start symbol and path in the header);
* ``"lexicon"``: a :class:`FeatureBank`. Its rules need the lexicon itself, so the
  header holds the lexicon's source texts (the file and every include, as read), and
  loading re-parses them (never the files on disk) and rebuilds the bank; ``table`` is
  stored too, and the rebuilt bank must reproduce it exactly.

The kinds are named as the file kinds of :mod:`neurosym.kinds` (``regex``, ``fsg``,
``pcfg``, ``lexicon``; ``automaton`` for one automaton: a pattern, a regex string or a
word list). Artifacts written before issue 27 name ``regex`` ``"bank"`` and ``lexicon``
``"features"``; they are still read.

Files are written atomically: to a temporary file in the same folder, fsynced, then
renamed, so a killed process never leaves a half-written artifact.

The cache keys an artifact by the sha256 of every source file it was built from
(the bank, its imports and word lists), the vocabulary's hash, the limits and the
neurosym version.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from neurosym.compile.automaton import Automaton
from neurosym.compile.dfa import CharDFA, Partition
from neurosym.compile.lexicon import FeatureBank
from neurosym.compile.pcfg import RuleTensors
from neurosym.compile.token_index import TokenArcs
from neurosym.compile.regex import Limits, RegexBank, compile_bank
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.dsl import regex_ir
from neurosym.errors import NeurosymError
from neurosym.files import atomic_write_bytes, digest, read_input
from neurosym.version import __version__
from neurosym.vocab import Vocab
from neurosym.dsl.lexicon import LexiconReader
from neurosym.dsl.regex import read_regex_bank

FORMAT = "neurosym-automata"
FORMAT_VERSION = 2  # v2: automata stored as sparse arcs instead of dense (Q, V) tables
COMPILER_REVISION = 1  # in the cache key: bump when the same sources compile differently (1: byte automata read well-formed UTF-8 only)
CHECKSUM_COVERS = "tensors+header"  # what the header's checksum is taken over (absent: the tensors alone)
RULE_TENSORS = ("root", "binary", "emit", "root_term", "empty")

Artifact = Union[Automaton, RegexBank, WeightedAutomaton, RuleTensors, FeatureBank]


def _own(t: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU copy (safetensors refuses views that share storage)."""
    return t.detach().cpu().contiguous().clone()


def to_bytes(obj: Artifact) -> bytes:
    """Serialise an automaton, bank, weighted automaton (FSG), rule tensors (PCFG) or
    feature bank (lexicon) to safetensors bytes: tensors + JSON header."""
    codec = BY_KIND.get(kind_of_object(obj))
    if codec is None:
        raise NeurosymError(f"cannot save a {type(obj).__name__}; expected {', '.join(c.type.__name__ for c in CODECS)}")
    tensors, header = codec.encode(obj)
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, **header, "checksum_covers": CHECKSUM_COVERS}
    header["checksum"] = checksum(tensors, header)
    return st_save(tensors, metadata={"neurosym": json.dumps(header)})


def checksum(tensors: dict[str, torch.Tensor], header: dict) -> str:
    """The artifact's checksum: the tensors and every header field but the checksum itself
    (so a renamed pattern or an edited vocabulary is caught as well as a flipped bit).
    Artifacts written before the header was covered (no ``checksum_covers``) carry the
    tensors' digest alone and are still read."""
    if header.get("checksum_covers") != CHECKSUM_COVERS:
        return digest(tensors)
    return digest({"tensors": tensors, "header": {k: v for k, v in header.items() if k != "checksum"}})


def _automata_to_tensors(obj: Automaton | RegexBank) -> tuple[dict[str, torch.Tensor], dict]:
    if isinstance(obj, RegexBank):
        autos, kind = list(obj.patterns.values()), "regex"
        weights = obj.weights
    else:
        autos, kind = [obj], "automaton"
        weights = torch.ones(1)
    tensors: dict[str, torch.Tensor] = {"weights": weights.float().contiguous()}
    partitions = []
    for i, a in enumerate(autos):
        arcs = a.arcs
        tensors[f"{i}.indptr"] = torch.from_numpy(arcs.indptr.astype(np.int64))
        tensors[f"{i}.tokens"] = torch.from_numpy(arcs.tokens.astype(np.int32))
        tensors[f"{i}.targets"] = torch.from_numpy(arcs.targets.astype(np.int32))
        tensors[f"{i}.final"] = _own(a.final)
        if a.char_dfa is not None:
            tensors[f"{i}.char_trans"] = torch.from_numpy(np.ascontiguousarray(a.char_dfa.trans))
            tensors[f"{i}.char_final"] = torch.from_numpy(np.ascontiguousarray(a.char_dfa.final))
            partitions.append(a.char_dfa.partition.members)
        else:
            partitions.append(None)
    header = {
        "kind": kind,
        "names": [a.name for a in autos],
        "sources": [a.source for a in autos],
        "path": getattr(obj, "path", None),
        "partitions": partitions,
        "vocab": autos[0].vocab.to_json() if autos else obj.vocab.to_json(),
    }
    return tensors, header


def _fsg_to_tensors(w: WeightedAutomaton) -> tuple[dict[str, torch.Tensor], dict]:
    tensors = {
        "delta": _own(w.delta),
        "final": _own(w.final),
        "log_probs": _own(w.log_probs.double()),
        "final_log_probs": _own(w.final_log_probs.double()),
    }
    for role, table in w.role_tables.items():
        tensors[f"role.{role}"] = _own(table.double())
    header = {"kind": "fsg", "name": w.name, "source": w.source, "roles": list(w.role_tables), "vocab": w.vocab.to_json()}
    return tensors, header


def _pcfg_to_tensors(r: RuleTensors) -> tuple[dict[str, torch.Tensor], dict]:
    tensors = {k: _own(getattr(r, k)) for k in RULE_TENSORS}
    header = {
        "kind": "pcfg",
        "nonterminals": list(r.nonterminals),
        "preterminals": list(r.preterminals),
        "start": r.start,
        "path": None if r.path is None else str(r.path),
        "vocab": r.vocab.to_json(),
    }
    if r.lexemes:  # absent for grammars without /regex/ terminals (their artifacts are unchanged)
        header["lexemes"] = {str(k): v for k, v in sorted(r.lexemes.items())}
    return tensors, header


def _features_to_tensors(bank: FeatureBank) -> tuple[dict[str, torch.Tensor], dict]:
    lex = bank.lexicon
    if lex.source_key is None or lex.source_key not in lex.sources:
        raise NeurosymError("cannot save this FeatureBank: its lexicon was not parsed from text (load_lexicon, parse_lexicon), so there are no sources to store")
    header = {
        "kind": "lexicon",
        "path": lex.path,
        "lexicon": {"sources": dict(lex.sources), "key": lex.source_key, "format": lex.source_format, "folder": lex.source_folder},
        "ignore_case": bool(bank.ignore_case),
        "bos": bank.bos,
        "pad": bank.pad,
        "columns": list(bank.names),
        "vocab": bank.vocab.to_json(),
    }
    return {"table": _own(bank.table)}, header


def from_bytes(data: bytes, origin: str = "<bytes>") -> Artifact:
    """Inverse of :func:`to_bytes`."""
    try:
        tensors = st_load(data)
        header = _read_header(data)
    except (SafetensorError, ValueError, KeyError, TypeError) as err:
        raise NeurosymError(f"{origin}: not a neurosym artifact ({err})") from None
    if not isinstance(header, dict):
        raise NeurosymError(f"{origin}: not a neurosym artifact (its header is not a JSON object)")
    if header.get("format") != FORMAT or header.get("format_version") != FORMAT_VERSION:
        raise NeurosymError(f"{origin}: artifact format {header.get('format')!r} v{header.get('format_version')} is not {FORMAT!r} v{FORMAT_VERSION}")
    raw_kind = header.get("kind")
    kind = CANONICAL.get(raw_kind) if isinstance(raw_kind, str) else None  # artifacts written before issue 27 say "bank" and "features"
    if kind is None:
        raise NeurosymError(f"{origin}: unknown artifact kind {header.get('kind')!r}; this neurosym reads {', '.join(KINDS)}")
    if "checksum_covers" in header and header["checksum_covers"] != CHECKSUM_COVERS:
        raise NeurosymError(f"{origin}: the artifact's checksum covers {header['checksum_covers']!r}, which this neurosym "
                            "does not know; recompile it from its source with `neurosym compile`")
    if "checksum" in header and header["checksum"] != checksum(tensors, header):
        raise NeurosymError(f"{origin}: corrupt artifact: its tensors or header do not match the checksum written with them; "
                            "recompile it from its source with `neurosym compile`")
    try:
        vocab = Vocab.from_json(header["vocab"])
        _validate(kind, tensors, header, len(vocab), origin)
        return BY_KIND[kind].decode(tensors, header, vocab, origin)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as err:
        raise NeurosymError(f"{origin}: the {kind} artifact is malformed ({type(err).__name__}: {err})") from None


def _validate(kind: str, tensors: dict[str, torch.Tensor], header: dict, V: int, origin: str) -> None:
    """Shapes, index ranges and probabilities an artifact must have, checked before use
    (a file written by hand, or by a buggy tool, must not crash or mislead later)."""

    def bad(what: str) -> NeurosymError:
        return NeurosymError(f"{origin}: the {kind} artifact is invalid: {what}")

    def table(name: str, states: int) -> None:
        d = tensors[name]
        if d.dim() != 2 or d.shape[1] != V or d.dtype not in (torch.int32, torch.int64):
            raise bad(f"{name} must be an integer (states, {V}) table, got {tuple(d.shape)} {d.dtype}")
        if d.numel() and (int(d.min()) < -1 or int(d.max()) >= states):
            raise bad(f"{name} holds a next state outside [-1, {states})")

    def sparse_arcs(i: int) -> None:
        ptr, tok, dst, fin = (tensors.get(f"{i}.{k}") for k in ("indptr", "tokens", "targets", "final"))
        if any(x is None for x in (ptr, tok, dst, fin)):
            raise bad(f"pattern {i} lacks one of indptr, tokens, targets, final")
        if ptr.dim() != 1 or tok.dim() != 1 or dst.shape != tok.shape or fin.dim() != 1 or ptr.numel() != fin.numel() + 1:
            raise bad(f"{i}.indptr/tokens/targets/final have inconsistent shapes")
        if any(x.dtype not in (torch.int32, torch.int64) for x in (ptr, tok, dst)):
            raise bad(f"{i}.indptr/tokens/targets must be integers")
        Q, E = fin.numel(), tok.numel()
        if int(ptr[0]) != 0 or int(ptr[-1]) != E or (ptr[1:] < ptr[:-1]).any():
            raise bad(f"{i}.indptr is not a valid row index (0 ... {E}, non-decreasing)")
        if E and (int(tok.min()) < 0 or int(tok.max()) >= V):
            raise bad(f"{i}.tokens holds a token outside [0, {V})")
        if E and (int(dst.min()) < 0 or int(dst.max()) >= Q):
            raise bad(f"{i}.targets holds a next state outside [0, {Q})")
        rows = torch.repeat_interleave(torch.arange(Q), ptr[1:] - ptr[:-1])
        same_row = rows[1:] == rows[:-1]
        if (same_row & (tok[1:] <= tok[:-1])).any():
            raise bad(f"{i}.tokens are not strictly ascending within a state's row")

    if kind in ("automaton", "regex"):
        for i in range(len(header["names"])):
            sparse_arcs(i)
    elif kind == "fsg":
        table("delta", tensors["delta"].shape[0])
        lp, fin = tensors["log_probs"], tensors["final_log_probs"]
        if lp.shape != tensors["delta"].shape or fin.shape != lp.shape[:1]:
            raise bad("log_probs / final_log_probs do not match delta")
        if torch.isnan(lp).any() or torch.isnan(fin).any() or (lp > 1e-9).any() or (fin > 1e-9).any():
            raise bad("a log-probability is NaN or above 0")
        mass = torch.logsumexp(torch.cat([lp, fin[:, None]], 1), 1).exp()
        live = mass > 0
        if not torch.allclose(mass[live], torch.ones_like(mass[live]), atol=1e-6):
            raise bad("a state's outgoing probabilities do not sum to 1")
    elif kind == "pcfg":
        N, T = len(header["nonterminals"]), len(header["preterminals"])
        shapes = {"root": (N,), "binary": (N, N + T, N + T), "emit": (T, V), "root_term": (T,), "empty": ()}
        for name, shape in shapes.items():
            x = tensors[name]
            if tuple(x.shape) != shape:
                raise bad(f"{name} has shape {tuple(x.shape)}, expected {shape}")
            if torch.isnan(x).any() or (x > 1e-4).any():
                raise bad(f"{name} holds a log-probability that is NaN or above 0")


def _automata_from_tensors(tensors: dict[str, torch.Tensor], header: dict, vocab: Vocab, origin: str) -> Automaton | RegexBank:
    autos = []
    for i, (name, source, members) in enumerate(zip(header["names"], header["sources"], header["partitions"])):
        char_dfa = None
        if members is not None:
            class_of = {c: k for k, chars in enumerate(members) for c in chars}
            char_dfa = CharDFA(tensors[f"{i}.char_trans"].numpy(), tensors[f"{i}.char_final"].numpy(), Partition(class_of, members))
        arcs = TokenArcs(
            tensors[f"{i}.indptr"].numpy().astype(np.int64), tensors[f"{i}.tokens"].numpy().astype(np.int64),
            tensors[f"{i}.targets"].numpy().astype(np.int64), tensors[f"{i}.final"].numpy().astype(bool), len(vocab),
        )
        autos.append(Automaton.from_arcs(arcs, vocab, char_dfa=char_dfa, name=name, source=source))
    if CANONICAL[header["kind"]] == "automaton":
        return autos[0]
    return RegexBank({a.name: a for a in autos}, tensors["weights"], vocab, path=header.get("path"))


def _fsg_from_tensors(tensors: dict[str, torch.Tensor], header: dict, vocab: Vocab, origin: str) -> WeightedAutomaton:
    roles = {r: tensors[f"role.{r}"] for r in header["roles"]}
    w = WeightedAutomaton(tensors["delta"], tensors["log_probs"], tensors["final_log_probs"], vocab, roles, name=header.get("name"), source=header.get("source"))
    if not torch.equal(w.final, tensors["final"].bool()):
        raise NeurosymError(f"{origin}: artifact is inconsistent: the stored finals differ from the states with a stopping probability")
    return w


def _pcfg_from_tensors(tensors: dict[str, torch.Tensor], header: dict, vocab: Vocab, origin: str) -> RuleTensors:
    return RuleTensors(
        **{k: tensors[k] for k in RULE_TENSORS},
        nonterminals=list(header["nonterminals"]),
        preterminals=list(header["preterminals"]),
        vocab=vocab,
        start=header["start"],
        path=header.get("path"),
        lexemes=_lexemes(header.get("lexemes", {}), len(vocab), origin),
    )


def _lexemes(stored: object, V: int, origin: str) -> dict[int, str]:
    """A PCFG artifact's ``lexemes`` header (token id -> regex source), checked."""
    if not isinstance(stored, dict) or not all(isinstance(k, str) and k.isdigit() and 0 <= int(k) < V and isinstance(v, str) for k, v in stored.items()):
        raise NeurosymError(f"{origin}: artifact is inconsistent: its lexemes are not a map from token ids below {V} to regex sources")
    return {int(k): v for k, v in stored.items()}


def _features_from_tensors(tensors: dict[str, torch.Tensor], header: dict, vocab: Vocab, origin: str) -> FeatureBank:
    src = header["lexicon"]
    try:
        lexicon = LexiconReader.from_sources(src["sources"]).reparse(src["key"], header.get("path"), src.get("format", "lex"), src.get("folder"))
        bank = FeatureBank(lexicon, vocab, ignore_case=bool(header["ignore_case"]), bos=header["bos"], pad=header["pad"])
    except NeurosymError as err:
        raise NeurosymError(f"{origin}: artifact is inconsistent: its stored lexicon does not rebuild ({err})") from None
    stored = tensors["table"]
    same = bank.table.shape == stored.shape and bank.table.dtype == stored.dtype and bool(((bank.table == stored) | (bank.table.isnan() & stored.isnan())).all())
    if not same or bank.names != list(header.get("columns", bank.names)):
        raise NeurosymError(f"{origin}: artifact is inconsistent: the feature table rebuilt from its lexicon differs from the stored one")
    return bank


@dataclass(frozen=True)
class Codec:
    """How one compiled type becomes tensors + header and back; ``kinds`` are the header
    kinds it reads, the first the one it writes (the file kind's name in
    :mod:`neurosym.kinds`; later ones are older names still read)."""

    type: type
    kinds: tuple[str, ...]
    encode: Callable[[Any], tuple[dict[str, torch.Tensor], dict]]
    decode: Callable[[dict[str, torch.Tensor], dict, Vocab, str], Any]


# the first codec whose type matches saves an object: WeightedAutomaton before Automaton
CODECS = (
    Codec(WeightedAutomaton, ("fsg",), _fsg_to_tensors, _fsg_from_tensors),
    Codec(RuleTensors, ("pcfg",), _pcfg_to_tensors, _pcfg_from_tensors),
    Codec(FeatureBank, ("lexicon", "features"), _features_to_tensors, _features_from_tensors),
    Codec(RegexBank, ("regex", "bank"), _automata_to_tensors, _automata_from_tensors),
    Codec(Automaton, ("automaton",), _automata_to_tensors, _automata_from_tensors),
)
BY_KIND = {k: c for c in CODECS for k in c.kinds}
CANONICAL = {k: c.kinds[0] for c in CODECS for k in c.kinds}  # any name read -> the name written
KINDS = tuple(c.kinds[0] for c in CODECS)  # the kinds written today


def kind_of_object(obj: Any) -> str | None:
    """The header ``kind`` :func:`save` writes for ``obj`` (None for a type it cannot save)."""
    codec = next((c for c in CODECS if isinstance(obj, c.type)), None)
    return None if codec is None else codec.kinds[0]


def _read_header(data: bytes) -> dict:
    n = int.from_bytes(data[:8], "little")
    meta = json.loads(data[8 : 8 + n])["__metadata__"]
    return json.loads(meta["neurosym"])


def artifact_kind(path: str | Path) -> str | None:
    """The ``kind`` in a saved artifact's header (automaton, regex, fsg, pcfg, lexicon;
    the older names bank and features read as regex and lexicon), or None when the file
    is missing or not an artifact. Reads the header only."""
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if not 0 < n < 1 << 30:
                return None
            meta = json.loads(f.read(n))["__metadata__"]
        kind = json.loads(meta["neurosym"]).get("kind")
        return CANONICAL.get(kind, kind)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(obj: Artifact, path: str | Path) -> Path:
    """Save atomically to ``path`` (a ``.safetensors`` file)."""
    path = Path(path)
    atomic_write_bytes(path, to_bytes(obj))
    return path


def load_artifact(path: str | Path) -> Artifact:
    """Load a file written by :func:`save` (see the module docstring for the kinds)."""
    path = Path(path)
    try:
        data = read_input(path)  # a regular file only
    except FileNotFoundError:
        raise NeurosymError(f"{path}: no such artifact") from None
    except OSError as err:
        raise NeurosymError(f"{path}: cannot read the artifact: {err.strerror or err}") from None
    return from_bytes(data, str(path))


# ---------------------------------------------------------------------- cache
def default_cache_dir() -> Path:
    return Path(os.environ.get("NEUROSYM_CACHE", Path.home() / ".cache" / "neurosym"))


def bank_sources(bank: regex_ir.Bank) -> list[str]:
    """Every file a parsed bank was built from: the bank, its imports and its word lists."""
    files = {rule.scope for rule in bank.rules.values() if rule.scope}
    if bank.path:
        files.add(str(Path(bank.path).resolve()))
    for rule in bank.rules.values():
        files.update(w.path for w in regex_ir.walk_expr(rule.expr) if isinstance(w, regex_ir.Words))
    return sorted(files)


def cache_key(sources: list[str], vocab: Vocab | None, limits: Limits) -> str:
    """sha256 over the sources' contents, the vocabulary hash, the limits, the version and
    the compiler revision."""
    h = hashlib.sha256(f"{FORMAT}/{FORMAT_VERSION}/r{COMPILER_REVISION}/{__version__}/{limits.max_states}/{limits.time_limit}".encode())
    for src in sources:
        h.update(b"\x00" + Path(src).name.encode() + b"\x00" + hashlib.sha256(Path(src).read_bytes()).digest())
    h.update(b"\x01" + (vocab.sha256() if vocab is not None else "default").encode())
    return h.hexdigest()


def load_cached(path: str | Path, vocab: Vocab | None = None, limits: Limits = Limits(), cache_dir: str | Path | None = None) -> RegexBank:
    """Compile a `.regex` bank, reusing a cached artifact when no source has changed."""
    bank_ir = read_regex_bank(path)
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
