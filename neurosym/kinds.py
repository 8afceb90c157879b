"""The registry of file kinds: one record per kind of file neurosym reads.

Each :class:`Kind` says how a file of that kind is compiled (``load``), reported
(``inspect``), sampled (``sample``) and summarised once compiled (``summary``), and which
compiled type and artifact kind belong to it. :func:`neurosym.load`, every command of the
CLI and the artifact code go through this table, so a new kind is one new record::

    kind = kind_of("grammars/clause.fsg")     # the .fsg record
    auto = load("grammars/clause.fsg")          # a WeightedAutomaton
    report, text, drawn = kind.inspect(Path("grammars/clause.fsg"), InspectOptions())

Compiled artifacts (``.safetensors``) are a kind too: their header names the compiled
type, and :mod:`neurosym.compile.artifact` holds one codec per type.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neurosym.compile.regex import Limits, load_regex
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab

# Each kind's compiler, reports and artifact codecs are imported when a file of that kind
# is met (``# lazy`` below): `neurosym check x.regex` loads neither the FSG, PCFG and
# lexicon compilers nor safetensors.


@dataclass(frozen=True)
class InspectOptions:
    """What ``neurosym inspect`` asks of a report (each kind reads what applies to it)."""

    names: tuple[str, ...] = ()  # regex banks: only these patterns
    words: tuple[str, ...] = ()  # lexicons: these words in the term tables
    samples: int = 5
    seed: int = 0
    draw: Path | None = None  # automata and FSGs: draw to this image or .dot file
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class SampleOptions:
    """What ``neurosym sample`` asks: ``n`` samples of at most ``max_len`` tokens."""

    n: int = 10
    seed: int = 0
    max_len: int = 60
    trees: bool = False  # PCFGs: bracketed derivation trees
    pattern: str | None = None  # regex banks: the pattern to sample
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Kind:
    """One kind of file: its suffix and the three things done with it (compile, report,
    sample); :func:`summary` describes what ``load`` returns."""

    name: str
    suffix: str
    load: Callable[[Path, Vocab | None, Limits], Any]
    inspect: Callable[[Path, InspectOptions], tuple[dict, str, Path | None]]
    sample: Callable[[Path, SampleOptions], list[str]]


# ---------------------------------------------------------------------- summaries
def _is(obj: Any, module: str, name: str) -> bool:
    """``isinstance(obj, module.name)``, without importing ``module``: an object of a class
    whose module was never imported cannot be an instance of it."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(obj, getattr(loaded, name))


def summary(obj: Any) -> dict:
    """Sizes of any compiled object, its kind and a one-line ``what``."""
    if _is(obj, "neurosym.compile.regex", "RegexBank"):
        out = {"kind": "regex", "patterns": len(obj), "states": int(obj.offsets[-1]), "vocab_size": len(obj.vocab)}
        out["what"] = f"{out['patterns']} patterns, {out['states']} states"
    elif _is(obj, "neurosym.compile.weighted", "WeightedAutomaton"):
        out = {"kind": "fsg", "states": obj.num_states, "vocab_size": len(obj.vocab), "ppl_floor": obj.entropy().ppl_floor}
        out["what"] = f"{out['states']} states, {out['vocab_size']} tokens, perplexity floor {out['ppl_floor']:.4g}"
    elif _is(obj, "neurosym.compile.pcfg", "RuleTensors"):
        out = {"kind": "pcfg", "nonterminals": obj.N, "preterminals": obj.T, "vocab_size": len(obj.vocab)}
        out["what"] = f"CNF with {obj.N} nonterminals, {obj.T} preterminals, {len(obj.vocab)} tokens"
    elif _is(obj, "neurosym.compile.lexicon", "FeatureBank"):
        out = {"kind": "lexicon", "features": len(obj.names), "vocab_size": len(obj.vocab), "roles": obj.roles}
        out["what"] = f"{len(obj.names)} feature columns over {len(obj.vocab)} tokens"
    elif _is(obj, "neurosym.compile.automaton", "Automaton"):
        out = {"kind": "automaton", "patterns": 1, "states": obj.num_states, "vocab_size": len(obj.vocab)}
        out["what"] = f"{obj.num_states} states"
    else:
        raise NeurosymError(f"no summary for a {type(obj).__name__}")
    return out


# ---------------------------------------------------------------------- per-kind loaders
def _load_fsg(path: Path, vocab: Vocab | None, limits: Limits) -> Any:
    from neurosym.compile.fsg import load_fsg  # lazy: only .fsg files need the FSG compiler

    return load_fsg(path, vocab, limits)


def _load_pcfg(path: Path, vocab: Vocab | None, limits: Limits) -> Any:
    from neurosym.compile.pcfg import load_pcfg  # lazy: only .pcfg files need the PCFG compiler

    return load_pcfg(path, vocab, limits)


def _load_lexicon(path: Path, vocab: Vocab | None, limits: Limits) -> Any:
    from neurosym.compile.lexicon import load_lexicon  # lazy: only .lex files need the lexicon compiler

    return load_lexicon(path, vocab, limits)


def _load_artifact(path: Path, vocab: Vocab | None, limits: Limits) -> Any:
    from neurosym.compile.artifact import load_artifact  # lazy: safetensors and every codec, for artifacts only

    if vocab is not None:
        raise NeurosymError(f"{path}: a compiled artifact keeps its own vocabulary; pass no vocab")
    return load_artifact(path)


# ---------------------------------------------------------------------- per-kind reports
def _no_drawing(draw: Path | None, what: str) -> None:
    if draw is not None:
        raise NeurosymError(f"--draw draws automata and FSGs, not {what}")
    return None


def _inspect_bank(path: Path, o: InspectOptions) -> tuple[dict, str, Path | None]:
    from neurosym import report  # lazy: the reports import every compiler

    bank = report.load_any(path, max_states=o.limits.max_states, time_limit=o.limits.time_limit)
    unknown = [n for n in o.names if n not in bank.patterns]
    if unknown:
        raise NeurosymError(f"{path}: no pattern named {', '.join(unknown)}; the bank has {', '.join(bank.names)}")
    r = report.describe_bank(bank, list(o.names) or None, o.samples)
    drawn = report.draw_automaton(bank.patterns[o.names[0] if o.names else bank.names[0]], o.draw) if o.draw is not None else None
    return r, report.format_report(r), drawn


def _inspect_fsg(path: Path, o: InspectOptions) -> tuple[dict, str, Path | None]:
    from neurosym import report  # lazy: the reports import every compiler

    r = report.describe_fsg(path, o.limits, o.samples, o.seed)
    drawn = report.draw_fsg(path, o.draw) if o.draw is not None else None
    return r, report.format_fsg(r), drawn


def _inspect_pcfg(path: Path, o: InspectOptions) -> tuple[dict, str, Path | None]:
    from neurosym import report  # lazy: the reports import every compiler

    _no_drawing(o.draw, "a PCFG")
    r = report.describe_pcfg(path, o.samples, o.seed)
    return r, report.format_pcfg(r), None


def _inspect_lexicon(path: Path, o: InspectOptions) -> tuple[dict, str, Path | None]:
    from neurosym import report  # lazy: the reports import every compiler

    _no_drawing(o.draw, "a lexicon")
    r = report.describe_lexicon(path, list(o.words) or None)
    return r, report.format_lexicon(r), None


def _inspect_artifact(path: Path, o: InspectOptions) -> tuple[dict, str, Path | None]:
    from neurosym import report  # lazy: the reports import every compiler
    from neurosym.compile.artifact import artifact_kind  # lazy: safetensors and every codec, for artifacts only

    kind = artifact_kind(path)
    if kind in ("pcfg", "features"):
        _no_drawing(o.draw, "a PCFG or lexicon artifact")
        r = report.describe_artifact(path, o.samples, o.seed)
        return r, report.format_artifact(r), None
    if kind == "fsg":
        _no_drawing(o.draw, "an FSG artifact (draw its source grammar)")
        r = report.describe_fsg_artifact(path, o.samples, o.seed)
        return r, report.format_fsg(r), None
    return _inspect_bank(path, o)


# ---------------------------------------------------------------------- per-kind samplers
def _sample_regex(path: Path, o: SampleOptions) -> list[str]:
    bank = load_regex(path, None, o.limits)
    if not bank.names:
        raise NeurosymError(f"{path}: the bank defines no pattern to sample")
    name = o.pattern or bank.names[0]
    if name not in bank.patterns:
        raise NeurosymError(f"{path}: no pattern named {name}; the bank has {', '.join(bank.names)}")
    out = bank.patterns[name].char_dfa.sample(o.n, max_len=o.max_len, seed=o.seed)
    if o.n and not out:
        raise NeurosymError(f"{path}: pattern {name} has no string of at most {o.max_len} characters; raise --max-len")
    return out


def _sample_fsg(path: Path, o: SampleOptions) -> list[str]:
    return _sentences(_load_fsg(path, None, o.limits), o)


def _sentences(auto: Any, o: SampleOptions) -> list[str]:
    """``o.n`` sentences of a compiled FSG (a WeightedAutomaton), words joined by spaces."""
    return [" ".join(auto.vocab.tokens[i] for i in s) for s in auto.sample(o.n, max_len=o.max_len, seed=o.seed)]


def _sample_artifact(path: Path, o: SampleOptions) -> list[str]:
    """An FSG artifact samples as its source grammar does (same seed, same sentences)."""
    obj = _load_artifact(path, None, o.limits)
    if not _is(obj, "neurosym.compile.weighted", "WeightedAutomaton"):
        raise NeurosymError(f"{path}: sample the source grammar; of compiled artifacts only FSGs sample")
    return _sentences(obj, o)


def _sample_pcfg(path: Path, o: SampleOptions) -> list[str]:
    from neurosym.compile.pcfg_check import check_pcfg  # lazy: only .pcfg files need the PCFG checks
    from neurosym.compile.pcfg_sample import sample_trees  # lazy: only .pcfg files need the PCFG sampler
    from neurosym.dsl.pcfg import read_pcfg  # lazy: only .pcfg files need the PCFG parser

    grammar = read_pcfg(path)
    check_pcfg(grammar, strict=True)
    drawn = sample_trees(grammar, o.n, seed=o.seed, max_len=o.max_len, limits=o.limits)
    return [str(t) if o.trees else " ".join(t.leaves()) for t in drawn]


def _cannot_sample(why: str) -> Callable[[Path, SampleOptions], list[str]]:
    def sample(path: Path, o: SampleOptions) -> list[str]:
        raise NeurosymError(f"{path}: {why}")

    return sample


KINDS: tuple[Kind, ...] = (
    Kind("regex", ".regex", load_regex, _inspect_bank, _sample_regex),
    Kind("fsg", ".fsg", _load_fsg, _inspect_fsg, _sample_fsg),
    Kind("pcfg", ".pcfg", _load_pcfg, _inspect_pcfg, _sample_pcfg),
    Kind("lexicon", ".lex", _load_lexicon, _inspect_lexicon,
         _cannot_sample("a lexicon describes tokens and does not generate sentences; sample its FSG instead")),
    Kind("artifact", ".safetensors", _load_artifact, _inspect_artifact, _sample_artifact),
)
BY_SUFFIX: dict[str, Kind] = {k.suffix: k for k in KINDS}
SOURCE_SUFFIXES = tuple(k.suffix for k in KINDS if k.name != "artifact")


def kind_of(path: str | Path) -> Kind:
    """The record for ``path``'s suffix; a NeurosymError naming the known suffixes otherwise."""
    path = Path(path)
    kind = BY_SUFFIX.get(path.suffix)
    if kind is None:
        known = ", ".join(sorted(BY_SUFFIX))
        raise NeurosymError(f"{path}: unknown file kind {path.suffix or '(no extension)'!r}; expected one of {known}")
    return kind


def _too_deep(path: Path) -> NeurosymError:
    return NeurosymError(
        f"{path}: the input nests too deeply to process (brackets, '!' or prev(...) hundreds of levels deep); "
        "flatten it or split it into named parts"
    )


def load(path: str | Path, vocab: Vocab | None = None, limits: Limits = Limits()) -> Any:
    """Parse and compile a grammar file (or read an artifact), chosen by its suffix."""
    path = Path(path)
    kind = kind_of(path)
    if not path.is_file():
        raise NeurosymError(f"{path}: no such file")
    try:
        return kind.load(path, vocab, limits)
    except RecursionError:
        raise _too_deep(path) from None


def inspect(path: str | Path, options: InspectOptions = InspectOptions()) -> tuple[dict, str, Path | None]:
    """``(report dict, text, drawn file or None)`` for any file neurosym reads."""
    path = Path(path)
    kind = kind_of(path)
    if not path.is_file():
        raise NeurosymError(f"{path}: no such file")
    try:
        return kind.inspect(path, options)
    except RecursionError:
        raise _too_deep(path) from None


def sample(path: str | Path, options: SampleOptions = SampleOptions()) -> list[str]:
    """``options.n`` samples of a grammar file, one string each."""
    path = Path(path)
    kind = kind_of(path)
    if options.trees and kind.name != "pcfg":
        raise NeurosymError("--trees applies to PCFGs only")
    if not path.is_file():
        raise NeurosymError(f"{path}: no such file")
    try:
        return kind.sample(path, options)
    except RecursionError:
        raise _too_deep(path) from None


__all__ = ["BY_SUFFIX", "InspectOptions", "KINDS", "Kind", "SampleOptions", "inspect", "kind_of", "load", "sample", "summary"]
