"""The registry of file kinds, and the one front door from a file or a string to a
compiled grammar.

Each :class:`Kind` says how a file of that kind is compiled (``load``), reported
(``inspect``), sampled (``sample``) and summarised once compiled (``summary``), which
type ``load`` returns (``compiled``), and whether that is a grammar decoding can follow
(``grammar``) or a file of named parts to choose from (``part``, a ``.regex`` bank).
:func:`neurosym.load`, every command of the CLI, the artifact code, ``neurosym
generate`` (:mod:`neurosym.decode.run`) and :mod:`neurosym.hf` go through this table,
so a new kind is one :func:`register` call (docs/architecture.md, "How to add a file
kind")::

    kind = kind_of("grammars/clause.fsg")              # the .fsg record
    auto = load("grammars/clause.fsg")                  # a WeightedAutomaton
    date = load_grammar("grammars/dates.regex:DATE", vocab)  # one pattern, over vocab
    year = load_grammar(r"(19|20)[0-9]{2}", vocab)      # a regex string
    report, text, drawn = kind.inspect(Path("grammars/clause.fsg"), InspectOptions())

The shipped kinds: ``regex`` (``.regex`` banks), ``fsg``, ``pcfg``, ``lexicon``
(``.lex``), ``words`` (``.txt`` word lists, read by :mod:`neurosym.dsl.words`) and
``artifact`` (``.safetensors``: its header names the compiled type, and
:mod:`neurosym.compile.artifact` holds one codec per type, named as the kinds here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neurosym.compile.regex import Limits, compile_regex, load_pattern, load_regex, load_word_list
from neurosym.errors import NeurosymError, Span
from neurosym.files import resolve_data_path
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


Loader = Callable[[Path, "Vocab | None", Limits], Any]
Inspector = Callable[[Path, InspectOptions], "tuple[dict, str, Path | None]"]
Sampler = Callable[[Path, SampleOptions], "list[str]"]
PartLoader = Callable[[Path, "str | None", "Vocab | None", Limits], Any]
StringLoader = Callable[[Path, "Vocab", Limits], Any]


@dataclass(frozen=True)
class Kind:
    """One kind of file neurosym reads.

    Attributes:
        name: the kind's name (``"fsg"``); also the artifact kind of what it compiles to.
        suffix: the file suffix that selects it (``".fsg"``), dot included.
        load: ``(path, vocab or None, limits) -> compiled object``; parse and compile.
        inspect: ``(path, InspectOptions) -> (report dict, text, drawn file or None)``
            for ``neurosym inspect``; None: the report is :func:`summary` of the loaded file.
        sample: ``(path, SampleOptions) -> list of strings`` for ``neurosym sample``;
            None: the kind does not sample.
        summary: ``compiled object -> dict`` with at least ``kind`` and a one-line
            ``what`` (``neurosym check``/``compile``); None: none of its own.
        compiled: ``"package.module:Class"`` of what ``load`` returns; :func:`summary`
            and :func:`load_grammar` find a compiled object's kind by it (the first kind
            registered for a class, or for its nearest base class, answers).
        title: how messages name a file of this kind (``"an .fsg grammar"``).
        grammar: what ``load`` returns is a grammar decoding can follow (an
            ``Automaton`` or ``RuleTensors``: :func:`neurosym.decode.grammar_processors`).
        part: for a file of named parts (a ``.regex`` bank): ``(path, name or None,
            vocab, limits) -> one grammar``; ``FILE:NAME`` names the part, and a file
            with one part needs no name.
        own_vocab: the file carries its vocabulary (a compiled artifact): ``load`` takes
            no vocab, and :func:`load_grammar` checks the one asked for against it.
        rules: ``path ->`` the file as a parsed ``.pcfg`` grammar
            (:class:`~neurosym.dsl.pcfg.Grammar`) for a kind that is one (``.pcfg``, a
            JSON Schema, ``.lark``, ``.gbnf``): ``neurosym export`` and ``neurosym fit``
            read it. :func:`rules_kind` builds such a kind from it alone.
        strings: how a file of this kind is read over a tokenizer's vocabulary (kind
            ``"bytes"`` or ``"char"``) as a language of strings: ``(path, vocab, limits) ->``
            a :class:`~neurosym.compile.spelling.SpelledGrammar` (its terminals spelled out,
            docs/strings.md), which :func:`neurosym.compile_guide` turns into a guide over
            any tokenizer. None: ``load`` over that vocabulary is used as it is (an
            automaton over the tokens, as a regex or a word list compiles).
    """

    name: str
    suffix: str
    load: Loader
    inspect: Inspector | None = None
    sample: Sampler | None = None
    summary: Callable[[Any], dict] | None = None
    compiled: str | None = None
    title: str = ""
    grammar: bool = False
    part: PartLoader | None = None
    own_vocab: bool = False
    strings: StringLoader | None = None
    rules: Callable[[Path], Any] | None = None

    def __post_init__(self):
        if not self.name or not self.suffix.startswith(".") or len(self.suffix) < 2:
            raise NeurosymError(f"Kind({self.name!r}, {self.suffix!r}): expected a name and a suffix such as '.toy'")


# ---------------------------------------------------------------------- summaries
def _regex_summary(obj: Any) -> dict:
    out = {"kind": "regex", "patterns": len(obj), "states": int(obj.offsets[-1]), "vocab_size": len(obj.vocab)}
    out["what"] = f"{out['patterns']} patterns, {out['states']} states"
    return out


def _fsg_summary(obj: Any) -> dict:
    out = {"kind": "fsg", "states": obj.num_states, "vocab_size": len(obj.vocab), "ppl_floor": obj.entropy().ppl_floor}
    out["what"] = f"{out['states']} states, {out['vocab_size']} tokens, perplexity floor {out['ppl_floor']:.4g}"
    return out


def _pcfg_summary(obj: Any) -> dict:
    out = {"kind": "pcfg", "nonterminals": obj.N, "preterminals": obj.T, "vocab_size": len(obj.vocab)}
    out["what"] = f"CNF with {obj.N} nonterminals, {obj.T} preterminals, {len(obj.vocab)} tokens"
    return out


def _lexicon_summary(obj: Any) -> dict:
    out = {"kind": "lexicon", "features": len(obj.names), "vocab_size": len(obj.vocab), "roles": obj.roles}
    out["what"] = f"{len(obj.names)} feature columns over {len(obj.vocab)} tokens"
    return out


def _automaton_summary(obj: Any) -> dict:
    out = {"kind": "automaton", "patterns": 1, "states": obj.num_states, "vocab_size": len(obj.vocab)}
    out["what"] = f"{obj.num_states} states"
    return out


def kind_of_object(obj: Any) -> Kind | None:
    """The kind whose ``compiled`` type is ``obj``'s class or its nearest base class
    (the first registered wins), or None. Reads class names only: no module is imported."""
    for cls in type(obj).__mro__:
        found = _BY_TYPE.get(f"{cls.__module__}:{cls.__qualname__}")
        if found is not None:
            return found
    return None


def summary(obj: Any) -> dict:
    """Sizes of any compiled object, its kind and a one-line ``what``."""
    kind = kind_of_object(obj)
    if kind is None or kind.summary is None:
        raise NeurosymError(f"no summary for a {type(obj).__name__}")
    return kind.summary(obj)


# ---------------------------------------------------------------------- per-kind loaders
def _load_fsg(path: Path, vocab: Vocab | None, limits: Limits) -> Any:
    from neurosym.compile.fsg import load_fsg  # lazy: only .fsg files need the FSG compiler

    return load_fsg(path, vocab, limits)


def _load_pcfg(path: Path, vocab: Vocab | None, limits: Limits) -> Any:
    from neurosym.compile.pcfg import load_pcfg  # lazy: only .pcfg files need the PCFG compiler

    return load_pcfg(path, vocab, limits)


def _spelled(path: Path, vocab: Vocab, limits: Limits) -> Any:
    from neurosym.compile.spelling import load_spelled  # lazy: the FSG and PCFG compilers load with their files

    return load_spelled(path, vocab, limits)


def _schema(path: Path) -> Any:
    from neurosym.compile.json_schema import load_schema_grammar  # lazy: only schemas need the schema compiler

    return load_schema_grammar(path)


def _lark(path: Path) -> Any:
    from neurosym.compile.pcfg_check import consistent  # lazy: the PCFG analyses
    from neurosym.dsl.lark_grammar import read_lark  # lazy: only .lark files need lark's grammar loader

    return consistent(read_lark(path))


def _gbnf(path: Path) -> Any:
    from neurosym.compile.pcfg_check import consistent  # lazy: the PCFG analyses
    from neurosym.dsl.gbnf import read_gbnf  # lazy: only .gbnf files need the GBNF parser

    return consistent(read_gbnf(path))


def _read_pcfg(path: Path) -> Any:
    from neurosym.dsl.pcfg import read_pcfg  # lazy: only .pcfg files need the PCFG parser

    return read_pcfg(path)


def rules_kind(name: str, suffix: str, rules: Callable[[Path], Any], title: str = "") -> Kind:
    """A kind whose files read as a ``.pcfg`` grammar (``rules(path) -> Grammar``): it
    compiles, spells over tokenizers, samples, inspects and exports as a ``.pcfg`` does
    (the JSON Schema, ``.lark`` and ``.gbnf`` kinds are three)."""

    def load(path: Path, vocab: Vocab | None, limits: Limits) -> Any:
        from neurosym.compile.pcfg import load_pcfg  # lazy: as for .pcfg files

        return load_pcfg(rules(path), vocab, limits)

    def strings(path: Path, vocab: Vocab, limits: Limits) -> Any:
        from neurosym.compile.spelling import spell_pcfg  # lazy: as for .pcfg files

        return spell_pcfg(rules(path), vocab, limits)

    def inspect(path: Path, o: InspectOptions) -> tuple[dict, str, Path | None]:
        from neurosym import report  # lazy: the reports import every compiler

        _no_drawing(o.draw, title or f"a {suffix} grammar")
        r = report.describe_pcfg(rules(path), o.samples, o.seed)
        return r, report.format_pcfg(r), None

    return Kind(name, suffix, load, inspect=inspect, sample=lambda path, o: _sample_rules(rules(path), o), summary=_pcfg_summary,
                title=title, grammar=True, strings=strings, rules=rules)


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
    """A regex bank, a word list, or an automaton / bank artifact, reported as a bank."""
    from neurosym import report  # lazy: the reports import every compiler

    bank = report.as_bank(load(path, None, o.limits))
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
    if kind in ("pcfg", "lexicon"):
        _no_drawing(o.draw, "a PCFG or lexicon artifact")
        r = report.describe_artifact(path, o.samples, o.seed)
        return r, report.format_artifact(r), None
    if kind == "fsg":
        _no_drawing(o.draw, "an FSG artifact (draw its source grammar)")
        r = report.describe_fsg_artifact(path, o.samples, o.seed)
        return r, report.format_fsg(r), None
    return _inspect_bank(path, o)


def _inspect_summary(path: Path, o: InspectOptions) -> tuple[dict, str, Path | None]:
    """The report of a kind without one of its own: the summary of the loaded file."""
    _no_drawing(o.draw, f"a {kind_of(path).name} file")
    r = {"path": str(path), **summary(load(path, None, o.limits))}
    return r, f"{path}: {r['what']}", None


# ---------------------------------------------------------------------- per-kind samplers
def _sample_automata(path: Path, o: SampleOptions) -> list[str]:
    """Strings of a regex bank's pattern (``o.pattern``, default the first) or of a word
    list: uniform random walks of the character DFA."""
    obj = load(path, None, o.limits)
    patterns = obj.patterns if hasattr(obj, "patterns") else {obj.name: obj}
    names = list(patterns)
    if not names:
        raise NeurosymError(f"{path}: the bank defines no pattern to sample")
    name = o.pattern or names[0]
    if name not in patterns:
        raise NeurosymError(f"{path}: no pattern named {name}; the bank has {', '.join(names)}")
    out = patterns[name].char_dfa.sample(o.n, max_len=o.max_len, seed=o.seed)
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
    kind = kind_of_object(obj)
    if kind is None or kind.name != "fsg":
        raise NeurosymError(f"{path}: sample the source grammar; of compiled artifacts only FSGs sample")
    return _sentences(obj, o)


def _sample_pcfg(path: Path, o: SampleOptions) -> list[str]:
    from neurosym.dsl.pcfg import read_pcfg  # lazy: only .pcfg files need the PCFG parser

    return _sample_rules(read_pcfg(path), o)


def _sample_rules(grammar: Any, o: SampleOptions) -> list[str]:
    """``o.n`` sentences (or trees) of a parsed ``.pcfg`` grammar."""
    from neurosym.compile.pcfg_check import check_pcfg  # lazy: only .pcfg files need the PCFG checks
    from neurosym.compile.pcfg_sample import sample_trees  # lazy: only .pcfg files need the PCFG sampler
    from neurosym.compile.spelling import Separator  # lazy: as above

    check_pcfg(grammar, strict=True)
    drawn = sample_trees(grammar, o.n, seed=o.seed, max_len=o.max_len, limits=o.limits)
    # a grammar that declares %separator prints its text (json.pcfg's terminals concatenate); others, their terminals spaced
    join = Separator(grammar.separator).join if getattr(grammar, "separator", None) is not None else " ".join
    return [str(t) if o.trees else join(t.leaves()) for t in drawn]


def _cannot_sample(why: str) -> Sampler:
    def sample(path: Path, o: SampleOptions) -> list[str]:
        raise NeurosymError(f"{path}: {why}")

    return sample


# ---------------------------------------------------------------------- the registry
BY_SUFFIX: dict[str, Kind] = {}  # suffix -> kind, in registration order
_BY_NAME: dict[str, Kind] = {}
_BY_TYPE: dict[str, Kind] = {}  # "module:Class" -> the first kind registered for it


def register(kind: Kind, replace: bool = False) -> Kind:
    """Add ``kind`` to the registry: from now on its suffix is read by :func:`load`,
    :func:`inspect`, :func:`sample`, :func:`load_grammar` (so ``neurosym.load``, ``neurosym
    check / compile / inspect / sample`` and ``neurosym generate --grammar``). A name or a
    suffix already taken is an error unless ``replace``. Returns ``kind``."""
    if not isinstance(kind, Kind):
        raise NeurosymError(f"register expects a neurosym.kinds.Kind, got {type(kind).__name__}")
    taken = list({id(k): k for k in (_BY_NAME.get(kind.name), BY_SUFFIX.get(kind.suffix)) if k is not None}.values())  # one kind may hold both
    if taken and not replace:
        raise NeurosymError(f"kind {kind.name!r} ({kind.suffix}): {taken[0].name!r} ({taken[0].suffix}) is registered already; "
                            "pass replace=True to replace it")
    for old in taken:
        unregister(old.name)
    _BY_NAME[kind.name] = kind
    BY_SUFFIX[kind.suffix] = kind
    if kind.compiled is not None:
        _BY_TYPE.setdefault(kind.compiled, kind)
    return kind


def unregister(name: str) -> Kind:
    """Remove the kind called ``name`` (a NeurosymError if there is none); returns it."""
    kind = _BY_NAME.pop(name, None)
    if kind is None:
        raise NeurosymError(f"no kind named {name!r}; registered: {', '.join(_BY_NAME)}")
    del BY_SUFFIX[kind.suffix]
    if _BY_TYPE.get(kind.compiled) is kind:
        del _BY_TYPE[kind.compiled]
        heir = next((k for k in _BY_NAME.values() if k.compiled == kind.compiled), None)
        if heir is not None:
            _BY_TYPE[kind.compiled] = heir
    return kind


def registered() -> tuple[Kind, ...]:
    """Every registered kind, in registration order."""
    return tuple(_BY_NAME.values())


for _kind in (
    Kind("regex", ".regex", load_regex, inspect=_inspect_bank, sample=_sample_automata, summary=_regex_summary,
         compiled="neurosym.compile.regex:RegexBank", title="a .regex bank (FILE.regex:NAME)", part=load_pattern),
    Kind("fsg", ".fsg", _load_fsg, inspect=_inspect_fsg, sample=_sample_fsg, summary=_fsg_summary,
         compiled="neurosym.compile.weighted:WeightedAutomaton", title="an .fsg grammar", grammar=True, strings=_spelled),
    Kind("pcfg", ".pcfg", _load_pcfg, inspect=_inspect_pcfg, sample=_sample_pcfg, summary=_pcfg_summary,
         compiled="neurosym.compile.pcfg:RuleTensors", title="a .pcfg grammar", grammar=True, strings=_spelled, rules=_read_pcfg),
    rules_kind("schema", ".json", _schema, title="a .json JSON Schema"),
    rules_kind("lark", ".lark", _lark, title="a .lark grammar"),
    rules_kind("gbnf", ".gbnf", _gbnf, title="a .gbnf grammar"),
    Kind("lexicon", ".lex", _load_lexicon, inspect=_inspect_lexicon,
         sample=_cannot_sample("a lexicon describes tokens and does not generate sentences; sample its FSG instead"),
         summary=_lexicon_summary, compiled="neurosym.compile.lexicon:FeatureBank", title="a .lex lexicon"),
    Kind("words", ".txt", load_word_list, inspect=_inspect_bank, sample=_sample_automata, summary=_automaton_summary,
         compiled="neurosym.compile.automaton:Automaton", title="a .txt word list", grammar=True),
    Kind("artifact", ".safetensors", _load_artifact, inspect=_inspect_artifact, sample=_sample_artifact,
         title="a compiled .safetensors artifact", own_vocab=True),
):
    register(_kind)


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


def _existing(path: str | Path) -> tuple[Path, Kind]:
    """The file and its kind; ``grammars/...`` and ``lexicons/...`` name the shipped copies
    when no such local file exists (the one resolver, :func:`neurosym.files.resolve_data_path`)."""
    path = Path(path)
    kind = kind_of(path)
    if path.is_dir():
        raise NeurosymError(f"{path}: is a folder, not a {kind.name} file")
    if not path.exists():
        try:
            path = resolve_data_path(path)
        except NeurosymError:  # grammars/... that is not shipped either
            raise NeurosymError(f"{path}: no such file") from None
    if not path.is_file():  # a device, a FIFO or a socket (or a link to one): never read
        raise NeurosymError(f"{path}: not a regular file (only regular files are read)" if path.exists() else f"{path}: no such file")
    return path, kind


def load(path: str | Path, vocab: Vocab | None = None, limits: Limits = Limits(), dtype: Any = None) -> Any:
    """Parse and compile a grammar file (or read an artifact), chosen by its suffix.

    ``dtype`` (a floating ``torch.dtype``) casts what the file compiles to, for objects
    that hold probabilities as floating tensors and can be cast (``RuleTensors``: rules
    are computed at float64 from the file's text, then cast, so ``torch.float32`` is an
    explicit choice that rounds once). ``None`` keeps the compiler's own precision."""
    path, kind = _existing(path)
    try:
        obj = kind.load(path, vocab, limits)
    except RecursionError:
        raise _too_deep(path) from None
    if dtype is None:
        return obj
    if not callable(getattr(obj, "to", None)):
        raise NeurosymError(f"{path}: dtype={dtype} applies to grammars compiled to floating tensors (.pcfg rule tensors); "
                            f"a {kind.name} file compiles to {type(obj).__name__}, which has none to cast")
    return obj.to(dtype=dtype)


def inspect(path: str | Path, options: InspectOptions = InspectOptions()) -> tuple[dict, str, Path | None]:
    """``(report dict, text, drawn file or None)`` for any file neurosym reads."""
    path, kind = _existing(path)
    try:
        return (kind.inspect or _inspect_summary)(path, options)
    except RecursionError:
        raise _too_deep(path) from None


def sample(path: str | Path, options: SampleOptions = SampleOptions()) -> list[str]:
    """``options.n`` samples of a grammar file, one string each."""
    path = Path(path)
    kind = kind_of(path)
    if options.trees and kind.rules is None:
        raise NeurosymError("--trees applies to grammars with rules (.pcfg, JSON Schemas, .lark, .gbnf) only")
    path, kind = _existing(path)
    if kind.sample is None:
        raise NeurosymError(f"{path}: a {kind.name} file does not sample")
    try:
        return kind.sample(path, options)
    except RecursionError:
        raise _too_deep(path) from None


# ---------------------------------------------------------------------- the grammar front door
def _grammar_titles() -> str:
    titles = [k.title or f"a {k.suffix} file" for k in _BY_NAME.values() if k.grammar or k.part is not None or k.own_vocab]
    return ", ".join(titles[:-1]) + " or " + titles[-1] if len(titles) > 1 else "".join(titles)


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False for a string no file can have as its name (too long, NUL)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _is_special(path: Path) -> bool:
    """Whether ``path`` is there but is neither a regular file nor a folder (a device, a
    FIFO, a socket, or a link to one); False for a string no file can have as its name."""
    try:
        return path.exists() and not path.is_dir() and not path.is_file()
    except (OSError, ValueError):
        return False


def _grammar_file(spec: str | Path) -> tuple[Path, str | None, Kind] | None:
    """``(path, part name or None, kind)`` when ``spec`` names a file of a registered
    kind (``FILE`` or ``FILE:NAME``; ``grammars/...`` and ``lexicons/...`` name shipped
    files too), else None: a string that is a regex."""
    text, name = str(spec), None
    if isinstance(spec, str) and Path(spec).suffix not in BY_SUFFIX and ":" in spec:
        head, _, part = spec.rpartition(":")
        if Path(head).suffix in BY_SUFFIX:
            text, name = head, part
    kind = BY_SUFFIX.get(Path(text).suffix)
    if kind is None:
        if isinstance(spec, Path):
            kind_of(spec)  # a Path is always a file: an unknown suffix is an error
        if _is_file(Path(text)):  # a file of no registered kind is not meant as a regex
            known = ", ".join(sorted(BY_SUFFIX))
            raise NeurosymError(f"{text}: a file of unknown kind {Path(text).suffix or '(no extension)'!r}; expected one of {known} "
                                f"(a word list is a .txt file; for a regex that names a file, wrap it in a group: ({text}))")
        return None
    try:
        path = resolve_data_path(text)
    except (NeurosymError, OSError, ValueError):  # grammars/... that is not shipped either; no possible file name
        path = Path(text)
    if not _is_file(path):
        if _is_special(path):
            raise NeurosymError(f"{text}: not a regular file (only regular files are read)")
        hint = "" if isinstance(spec, Path) else f" (for a regex that ends in {kind.suffix}, wrap it in a group: ({spec}))"
        raise NeurosymError(f"{text}: no such grammar file{hint}")
    return path, name, kind


def _over(obj: Any, vocab: Vocab | None, origin: str) -> Any:
    """``obj`` if it is a grammar to decode with over ``vocab`` (any vocab when None)."""
    kind = kind_of_object(obj)
    if kind is None or not (kind.grammar or kind.part is not None):
        raise NeurosymError(f"{origin}: a {type(obj).__name__} is not a grammar to decode with; expected {_grammar_titles()}, "
                            "a regex, or a compiled automaton or rule tensors")
    if not kind.grammar:
        names = list(getattr(obj, "names", ()))
        raise NeurosymError(f"{origin}: a {kind.name} holds {len(names)} parts ({', '.join(names)}); pass one, as obj['NAME'] or FILE:NAME")
    if vocab is not None and obj.vocab != vocab:
        raise NeurosymError(
            f"{origin}: compiled over {obj.vocab!r}, not the tokenizer's vocabulary (or the run's) decoded over, {vocab!r}; "
            "compile it over that vocabulary (for a transformers model, neurosym.hf.tokenizer_vocab(tokenizer, "
            "model.config.vocab_size)), or pass its source"
        )
    return obj


def load_grammar(grammar: Any, vocab: Vocab | None = None, limits: Limits = Limits()) -> Any:
    """The one front door from a file or a string to a grammar decoding can follow (an
    ``Automaton``, a ``WeightedAutomaton`` for an ``.fsg``, ``RuleTensors`` for a
    ``.pcfg``), compiled over ``vocab`` (default: the grammar's own vocabulary).

    ``grammar`` is one of:

    * a file of a registered kind (a :class:`~pathlib.Path`, or a string ending in its
      suffix): ``clause.fsg``, ``arith.pcfg``, ``words.txt`` (a word list,
      docs/words.md), a compiled ``x.safetensors``; a ``.regex`` bank's pattern as
      ``dates.regex:DATE`` (a bank with one pattern needs no name); ``grammars/...`` and
      ``lexicons/...`` also name the files shipped with neurosym. A string ending in a
      registered suffix names a file, never a regex;
    * any other string: a Python-syntax regex;
    * a JSON Schema as a Python ``dict`` (or a ``.json`` file holding one;
      :mod:`neurosym.compile.json_schema`, docs/json_schema.md);
    * a compiled automaton or rule tensors (checked to be over ``vocab``).

    A lexicon (``.lex``) is not a grammar: it describes tokens.

    Over a tokenizer's vocabulary (kind ``"bytes"`` or ``"char"``), a kind that declares
    ``strings`` (``.fsg`` and ``.pcfg``, and any registered kind that does) is read as a
    language of strings: compiled over its own terminals and spelled under its
    ``%separator`` (a :class:`~neurosym.compile.spelling.SpelledGrammar`,
    docs/strings.md), so its words need not be tokens. Over a word vocabulary its
    terminals are the tokens, as before.
    """
    if isinstance(grammar, (dict, bool)):  # a JSON Schema as a Python value
        from neurosym.compile.json_schema import schema_grammar  # lazy: only schemas need the schema compiler

        rules = schema_grammar(grammar)
        if vocab is not None and vocab.kind in ("bytes", "char"):
            from neurosym.compile.spelling import spell_pcfg  # lazy: as for .pcfg files

            return spell_pcfg(rules, vocab, limits)
        from neurosym.compile.pcfg import load_pcfg  # lazy: as for .pcfg files

        return load_pcfg(rules, vocab, limits)
    if not isinstance(grammar, (str, Path)):
        if type(grammar).__name__ == "SpelledGrammar":  # a grammar over strings, already spelled for some vocabulary
            if vocab is not None and grammar.vocab != vocab:
                raise NeurosymError(f"the grammar over strings was spelled for {grammar.vocab!r}, not the vocabulary decoded over, {vocab!r}")
            return grammar
        return _over(grammar, vocab, "the compiled grammar")
    found = _grammar_file(grammar)
    if found is None:
        return compile_regex(grammar, vocab, max_states=limits.max_states, time_limit=limits.time_limit)
    path, name, kind = found
    if name is not None and kind.part is None:
        raise NeurosymError(f"{path}:{name}: only {', '.join(k.title for k in _BY_NAME.values() if k.part)} "
                            f"has patterns to name (drop :{name})")
    if not (kind.grammar or kind.part is not None or kind.own_vocab):
        raise NeurosymError(f"{path}: {kind.title or 'a ' + kind.name + ' file'} is not a grammar to decode with; expected {_grammar_titles()}")
    try:
        if kind.strings is not None and vocab is not None and vocab.kind in ("bytes", "char"):  # read as strings over a tokenizer
            return kind.strings(path, vocab, limits)
        if kind.part is not None:
            return kind.part(path, name, vocab, limits)
        return _over(kind.load(path, None if kind.own_vocab else vocab, limits), vocab, str(path))
    except RecursionError:
        raise _too_deep(path) from None


# ---------------------------------------------------------------------- any grammar as one over strings (neurosym export)
def string_grammar(spec: Any) -> Any:
    """Any grammar neurosym reads, as one :class:`Grammar` whose text is its terminals
    concatenated: a ``.pcfg``, ``.lark`` or ``.gbnf`` file or a JSON Schema (a ``.json``
    file or a dict) as parsed; an ``.fsg`` (its compiled automaton, regex terminals as
    sub-grammars), a ``.regex`` pattern (``FILE:NAME``), a ``.txt`` word list or a regex
    string as a right-linear grammar over character classes."""
    from neurosym.compile.export import automaton_grammar, concatenated, dfa_productions, pruned  # lazy: export only
    from neurosym.dsl.pcfg import Grammar  # lazy: as above

    if isinstance(spec, Grammar):
        return concatenated(spec)
    if isinstance(spec, (dict, bool)):
        from neurosym.compile.json_schema import schema_grammar  # lazy: only schemas need the schema compiler

        return schema_grammar(spec)
    found = _grammar_file(spec)
    if found is None:  # a regex string
        from neurosym.compile.regex import pattern_dfa  # lazy: as above

        start, prods = dfa_productions(pattern_dfa(str(spec)), "q")
        return pruned(Grammar(None, start, Span(None, 1, 1), prods, {}, True, "uniform", ""))
    path, name, kind = found
    if kind.rules is not None:
        return concatenated(kind.rules(path))
    if kind.name == "fsg":
        from neurosym.compile.fsg import compile_fsg, opaque_terminal, regex_terminals  # lazy: only .fsg files need the FSG compiler
        from neurosym.dsl.fsg import read_fsg  # lazy: as above

        g = read_fsg(path)
        auto = compile_fsg(g, None, opaque_terminals=True)
        dfas = {auto.vocab.id(opaque_terminal(n)): dfa for n, dfa in regex_terminals(g).items() if opaque_terminal(n) in auto.vocab}
        return concatenated(automaton_grammar(auto, str(path), g.separator, dfas))
    if kind.part is not None or kind.name == "words":
        auto = kind.part(path, name, None, Limits()) if kind.part is not None else kind.load(path, None, Limits())
        if auto.char_dfa is None:
            raise NeurosymError(f"{path}: no character automaton to export")
        start, prods = dfa_productions(auto.char_dfa, "q")
        return pruned(Grammar(str(path), start, Span(None, 1, 1), prods, {}, True, "uniform", ""))
    raise NeurosymError(f"{path}: {kind.title or kind.name} is not a grammar to export")


def Limits():
    from neurosym.compile.regex import Limits  # lazy

    return Limits()


def export_grammar(spec: Any, to: str) -> str:
    """``spec`` (as :func:`string_grammar` reads it) written for another engine: ``lark``,
    ``gbnf``, ``ebnf`` (XGrammar's EBNF: GBNF's syntax, start rule ``root``) or ``pcfg``
    (``neurosym export``)."""
    from neurosym.compile.export import FORMATS, write_grammar  # lazy: export only

    if to not in FORMATS:
        raise NeurosymError(f"unknown format {to!r}; expected one of {', '.join(FORMATS)}")
    return write_grammar(string_grammar(spec), to)


__all__ = [
    "BY_SUFFIX", "InspectOptions", "Kind", "SampleOptions", "export_grammar", "inspect", "kind_of", "kind_of_object", "load", "load_grammar",
    "register", "registered", "rules_kind", "sample", "string_grammar", "summary", "unregister",
]
