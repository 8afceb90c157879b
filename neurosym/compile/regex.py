"""Regexes and `.regex` banks -> automata.

Pipeline: pattern text -> lexical check (positions of unsupported features) ->
syntax tree (:mod:`neurosym.dsl.regex_syntax`, interegular's parser underneath) ->
character NFA (word lists as tries) -> subset construction with a state cap and a
time cap -> minimal character DFA -> token-level `Automaton`.

Semantics are Python's ``re.fullmatch`` with ``re.ASCII``: ``\\d \\w \\s`` and the ``i``
flag are ASCII-only; a pattern denotes a set of strings, so ``a|ab`` accepts ``ab``.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from neurosym.compile.automaton import Automaton
from neurosym.compile.dfa import DEFAULT_MAX_STATES, DEFAULT_TIME_LIMIT, OTHER, CharDFA, Partition, determinize, minimize_trie
from neurosym.compile.nfa import Builder, Frag
from neurosym.compile.token_index import token_index
from neurosym.dsl import regex_ir
from neurosym.dsl.regex_syntax import parse_pattern
from neurosym.errors import CompileError, NeurosymError, SourceError, Span
from neurosym.vocab import Vocab
from neurosym.dsl.regex import read_regex_bank, too_many_patterns
from neurosym.dsl.words import read_word_list

REGEX_SPECIALS = ("<unk>",)  # a default character vocabulary's only special: "any other character"
ALLOWED_FLAGS = frozenset("is")


DEFAULT_MAX_PATTERNS = 5_000  # patterns per bank: each needs its own automaton (several ms apiece)
DEFAULT_MAX_CNF_SYMBOLS = 5_000  # a PCFG's CNF symbols before elimination
DEFAULT_MAX_ELEMENTS = 2**27  # the largest dense table compilation allocates (512 MiB of float32)


@dataclass(frozen=True)
class Limits:
    """Caps on compilation, each checked before the work or memory it bounds.

    Attributes:
        max_states: minimal-DFA states per pattern (and deterministic FSG states).
        time_limit: wall-clock seconds per pattern (NFA building and determinisation) or
            per FSG determinisation.
        max_patterns: patterns in one `.regex` bank, its imports included.
        max_cnf_symbols: symbols of a PCFG's Chomsky normal form before epsilon and unit
            elimination (nonterminals, lifted terminals, binarisation symbols).
        max_elements: elements of the largest dense table: a PCFG's ``binary``
            (N, N+T, N+T) or ``emit`` (T, V), an FSG's (Q, V) tables.
    """

    max_states: int = DEFAULT_MAX_STATES
    time_limit: float = DEFAULT_TIME_LIMIT
    max_patterns: int = DEFAULT_MAX_PATTERNS
    max_cnf_symbols: int = DEFAULT_MAX_CNF_SYMBOLS
    max_elements: int = DEFAULT_MAX_ELEMENTS


LITERAL_RUN = re.compile(r"(?:[^\\|()\[\]{}.*+?^$]|\\[^0-9A-Za-z])*")  # characters and escaped punctuation


def literal_alternatives(pattern: str) -> list[str] | None:
    """The words of a pattern that is nothing but an alternation of literals
    (``cat|dog|a\\.b``), else None. Such a pattern is a word list: a trie compiles it in
    linear time, where the NFA route is quadratic or worse in the number of words. One
    group around the whole alternation (``(?:cat|dog)``, ``(cat|dog)``) changes nothing
    for a full match and is allowed."""
    for opener in ("(?:", "("):
        if pattern.startswith(opener) and pattern.endswith(")"):
            inner = pattern[len(opener) : -1]
            trailing = len(inner) - len(inner.rstrip("\\"))
            if trailing % 2 == 0:  # the closing parenthesis is not escaped
                return literal_alternatives(inner) if inner else None
            return None
    words, pos = [], 0
    while True:
        m = LITERAL_RUN.match(pattern, pos)
        words.append(re.sub(r"\\(.)", r"\1", m.group(), flags=re.DOTALL))
        pos = m.end()
        if pos == len(pattern):
            return words
        if pattern[pos] != "|":
            return None
        pos += 1


_PATTERN_DFAS: OrderedDict[tuple, CharDFA] = OrderedDict()  # (pattern, flags, max_states) -> its DFA
PATTERN_CACHE_SIZE = 256
_BUILT: OrderedDict[str, CharDFA] = OrderedDict()  # pattern -> a DFA built without parsing it (register_pattern)
BUILT_SIZE = 4096


def register_pattern(pattern: str, dfa: CharDFA) -> str:
    """Say that ``dfa`` is the language of the Python-syntax ``pattern``, for a DFA built
    directly (a JSON string's length bounds as a counter, an intersection or a difference
    of automata): :func:`pattern_dfa` then answers with ``dfa`` instead of parsing
    ``pattern``, which may hold what the parser here does not read (a lookahead saying the
    intersection; :mod:`re` reads it, so every reference still can). Returns ``pattern``."""
    _BUILT[pattern] = dfa
    _BUILT.move_to_end(pattern)
    while len(_BUILT) > BUILT_SIZE:
        _BUILT.popitem(last=False)
    return pattern


def registered_pattern(pattern: str) -> CharDFA | None:
    """The DFA :func:`register_pattern` holds for ``pattern``, or None."""
    return _BUILT.get(pattern)


def pattern_dfa(pattern: str, flags: str = "", limits: Limits = Limits(), span: Span | None = None) -> CharDFA:
    """The minimal character DFA of a Python-syntax pattern (flags: ``i`` and/or ``s``).
    An alternation of plain literals takes the word-list route (:func:`words_dfa`).
    The last :data:`PATTERN_CACHE_SIZE` DFAs built are kept (a grammar's lexemes are
    compiled for its rules, then spelled over a tokenizer: each is built once)."""
    built = _BUILT.get(pattern) if not flags else None
    if built is not None:
        if built.num_states > limits.max_states:
            raise CompileError(f"{span or '<string>'}: {_shown(pattern)}: {built.num_states} states, above the limit of {limits.max_states}")
        return built
    key = (pattern, flags, limits.max_states)
    hit = _PATTERN_DFAS.get(key)
    if hit is not None:
        _PATTERN_DFAS.move_to_end(key)
        return hit
    dfa = _pattern_dfa(pattern, flags, limits, span)
    _PATTERN_DFAS[key] = dfa
    while len(_PATTERN_DFAS) > PATTERN_CACHE_SIZE:
        _PATTERN_DFAS.popitem(last=False)
    return dfa


def _pattern_dfa(pattern: str, flags: str, limits: Limits, span: Span | None) -> CharDFA:
    _check_flags(flags, span)
    words = literal_alternatives(pattern)
    if words is not None and len(words) > 1:
        return words_dfa(words, ignore_case="i" in flags, limits=limits)
    started = time.monotonic()
    ast = parse_pattern(pattern, span, ignore_case="i" in flags)
    what = f"{span}: {_shown(pattern)}" if span is not None else _shown(pattern)
    b = Builder(max_states=_nfa_cap(limits), deadline=started + limits.time_limit, what=what)
    frag = b.regex(ast, ignore_case="i" in flags, dotall="s" in flags)
    return determinize(b.nfa, frag.start, {frag.end}, limits.max_states, _left(started, limits, b), what=what, stated_limit=limits.time_limit)


def words_dfa(words: Iterable[str], ignore_case: bool = False, limits: Limits = Limits(), what: str = "word list") -> CharDFA:
    """The minimal character DFA of a word list.

    A trie is already deterministic, so its table is filled directly (one state per
    distinct prefix, one class per character) and minimised: linear in the list, where
    an alternation handed to a regex compiler is quadratic or worse. With
    ``ignore_case``, words are folded to ASCII lower case and each ASCII letter shares
    a class with its upper case."""
    started = time.monotonic()
    fold = (lambda w: "".join(c.lower() if c.isascii() else c for c in w)) if ignore_case else (lambda w: w)
    words = [fold(w) for w in words]
    alphabet = sorted({c for w in words for c in w})
    class_of = {c: k + 1 for k, c in enumerate(alphabet)}
    members: list[list[str]] = [[]] + [[c] for c in alphabet]
    if ignore_case:
        for c in alphabet:
            if c.isascii() and c.isalpha():
                class_of[c.upper()] = class_of[c]
                members[class_of[c]].append(c.upper())
    children: dict[tuple[int, int], int] = {}
    final = [False]
    for word in words:
        state = 0
        for ch in word:
            key = (state, class_of[ch])
            nxt = children.get(key)
            if nxt is None:
                nxt = children[key] = len(final)
                final.append(False)
            state = nxt
        final[state] = True
        if len(final) > limits.max_states + len(word) and time.monotonic() - started > limits.time_limit:  # a huge trie: still in time?
            raise CompileError(f"{what}: reading the words exceeded the time limit of {limits.time_limit:g} s")
    def check() -> None:
        if time.monotonic() - started > limits.time_limit:
            raise CompileError(f"{what}: minimisation exceeded the time limit of {limits.time_limit:g} s")

    try:  # linear in the trie (a long word is a long chain: Moore's rounds would be quadratic), stopped at the cap
        trans, final_min = minimize_trie(children, final, len(alphabet) + 1, max_states=limits.max_states, check=check)
    except OverflowError:
        raise CompileError(f"{what}: its {len(words):,} words compile to a minimal DFA of more than {limits.max_states:,} states, over "
                           f"the state cap of {limits.max_states:,}; raise the cap (--max-states N; max_states=N in Python)") from None
    return CharDFA(trans, final_min, Partition(class_of, members)).classes_merged()


def default_vocab(dfas: Iterable[CharDFA]) -> Vocab:
    """A character vocabulary covering every character the DFAs tell apart, plus ``<unk>``
    for every other character."""
    chars: set[str] = set()
    for dfa in dfas:
        for k, members in enumerate(dfa.partition.members):
            if k != OTHER:
                chars.update(members)
    return Vocab.chars(sorted(chars), specials=REGEX_SPECIALS)


def to_automaton(dfa: CharDFA, vocab: Vocab | None = None, name: str | None = None, source: str | None = None,
                 deadline: tuple[float, float, str] | None = None) -> Automaton:
    """A token-level automaton for ``vocab`` (default: :func:`default_vocab`). ``deadline``:
    ``(started, seconds, what)``, a time limit shared with the phases before (a CompileError
    names ``what`` when the token-level minimisation runs past it)."""
    vocab = vocab if vocab is not None else default_vocab([dfa])
    check = None
    if deadline is not None:
        started, seconds, what = deadline

        def check() -> None:
            if time.monotonic() - started > seconds:
                raise CompileError(f"{what}: the token automaton exceeded the time limit of {seconds:g} s")

    return Automaton.from_index(*token_index(dfa, vocab, check), vocab, char_dfa=dfa, name=name, source=source)


def compile_regex(
    pattern: str,
    vocab: Vocab | None = None,
    flags: str = "",
    max_states: int = DEFAULT_MAX_STATES,
    time_limit: float = DEFAULT_TIME_LIMIT,
) -> Automaton:
    """Compile one Python-syntax regex to an :class:`Automaton` over ``vocab``.

    Without a vocabulary, the automaton reads characters (a character vocabulary of the
    pattern's alphabet, with ``<unk>`` standing for any other character), so
    ``compile_regex(p).accepts(s) == bool(re.fullmatch(p, s, re.ASCII))`` for any ``s``.
    """
    started = time.monotonic()
    dfa = pattern_dfa(pattern, flags, Limits(max_states, time_limit))
    return to_automaton(dfa, vocab, source=pattern, deadline=(started, time_limit, "pattern"))


# ---------------------------------------------------------------------- banks
@dataclass
class RegexBank:
    """Named automata over one vocabulary, also stacked block-diagonally.

    Attributes:
        patterns: name -> Automaton, in bank order.
        weights: (P,) float tensor of the patterns' ``weight`` attributes.
        delta: (sum Q, V) long tensor; pattern p's states are ``offsets[p]:offsets[p+1]``
            and its next-state entries are already shifted by ``offsets[p]`` (-1 = reject).
        starts: (P,) long tensor of start states in the stacked numbering.
        final: (sum Q,) bool tensor.
        offsets: (P + 1,) long tensor.
    """

    patterns: dict[str, Automaton]
    weights: torch.Tensor
    vocab: Vocab
    path: str | None = None
    starts: torch.Tensor = field(init=False)
    final: torch.Tensor = field(init=False)
    offsets: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        autos = list(self.patterns.values())
        sizes = torch.tensor([a.num_states for a in autos], dtype=torch.long)
        self.offsets = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
        self.starts = self.offsets[:-1].clone()
        self.final = torch.cat([a.final for a in autos]) if autos else torch.empty(0, dtype=torch.bool)
        self._delta: torch.Tensor | None = None

    @property
    def delta(self) -> torch.Tensor:
        """The stacked (sum Q, V) table, built on first use (the patterns keep no dense
        tables of their own: over a 32k BPE it is sum Q x 256 KB)."""
        if self._delta is None:
            blocks = [torch.from_numpy(np.where(d >= 0, d + off, d)) for d, off in ((a.arcs.dense(), off) for a, off in zip(self.patterns.values(), self.offsets.tolist()))]
            self._delta = torch.cat(blocks) if blocks else torch.empty(0, len(self.vocab), dtype=torch.long)
        return self._delta

    @property
    def names(self) -> list[str]:
        return list(self.patterns)

    def __len__(self) -> int:
        return len(self.patterns)

    def __getitem__(self, name: str) -> Automaton:
        return self.patterns[name]

    def __repr__(self) -> str:
        return f"RegexBank({len(self)} patterns, {int(self.offsets[-1])} states, vocab={self.vocab!r})"

    def run(self, ids: torch.Tensor) -> torch.Tensor:
        """Final stacked states of every pattern: ids (B, L) -> (B, P), -1 once rejected."""
        B, L = ids.shape
        states = self.starts.expand(B, -1).clone()
        for t in range(L):
            nxt = self.delta[states.clamp(min=0), ids[:, t : t + 1].expand_as(states)]
            states = torch.where(states < 0, states, nxt)
        return states

    def accepts(self, ids: torch.Tensor) -> torch.Tensor:
        """Which patterns accept each sequence: ids (B, L) -> (B, P) bool."""
        states = self.run(ids)
        return (states >= 0) & self.final[states.clamp(min=0)]


def compile_bank(bank: regex_ir.Bank, vocab: Vocab | None = None, limits: Limits = Limits()) -> RegexBank:
    """Compile every pattern of a parsed bank (imports included) over one vocabulary."""
    if len(bank.patterns) > limits.max_patterns:
        over = list(bank.patterns.values())[limits.max_patterns]
        raise SourceError.at(over.span, too_many_patterns(f"{len(bank.patterns):,}", limits.max_patterns))
    dfas = {name: rule_dfa(bank, rule, limits) for name, rule in bank.patterns.items()}
    vocab = vocab if vocab is not None else default_vocab(dfas.values())
    autos = {name: to_automaton(d, vocab, name=name, source=bank.path) for name, d in dfas.items()}
    weights = torch.tensor([bank.patterns[n].weight for n in autos], dtype=torch.float32)
    return RegexBank(autos, weights, vocab, path=bank.path)


def rule_dfa(bank: regex_ir.Bank, rule: regex_ir.Pattern, limits: Limits = Limits()) -> CharDFA:
    """The minimal character DFA of one bank rule (references expanded, word lists as tries)."""
    started = time.monotonic()
    what = f"{rule.span}: {rule.name}"
    b = Builder(max_states=_nfa_cap(limits), deadline=started + limits.time_limit, what=what)
    frag = _RuleBuilder(bank, b, limits).rule(rule, stack=())
    return determinize(b.nfa, frag.start, {frag.end}, limits.max_states, _left(started, limits, b), what=what, stated_limit=limits.time_limit)


def _left(started: float, limits: Limits, b: Builder) -> float:
    """The time determinisation may still take, after the NFA took its share."""
    left = limits.time_limit - (time.monotonic() - started)
    if left <= 0:
        raise b.error("ran over the time limit while building its NFA")
    return left


def _shown(pattern: str, width: int = 60) -> str:
    return f"/{pattern}/" if len(pattern) <= width else f"/{pattern[:width]}.../ ({len(pattern):,} characters)"


class _RuleBuilder:
    """Expands a rule's expression into NFA fragments; referenced rules are built once and copied."""

    def __init__(self, bank: regex_ir.Bank, builder: Builder, limits: Limits):
        self.bank = bank
        self.limits = limits
        self.b = builder
        self.built: dict[tuple[str, str], Frag] = {}

    def rule(self, rule: regex_ir.Pattern, stack: tuple[tuple[str, str], ...]) -> Frag:
        key = (rule.scope, rule.name)
        if key in stack:
            raise SourceError.at(rule.span, f"{rule.name} refers to itself; banks describe regular languages and cannot recurse")
        _check_flags(rule.flags, rule.span)
        if key in self.built:
            with self.b.building(f"a copy of {rule.name} (referenced again)"):
                return self.b.copy(self.built[key])
        frag = self.expr(rule.expr, "i" in rule.flags, "s" in rule.flags, (*stack, key))
        self.built[key] = frag
        return frag

    def expr(self, e: regex_ir.Expr, ic: bool, dotall: bool, stack) -> Frag:
        b = self.b
        if isinstance(e, regex_ir.Regex):
            return b.regex(parse_pattern(e.pattern, e.span.shifted(1), ic), ignore_case=ic, dotall=dotall)
        if isinstance(e, regex_ir.Literal):
            return b.literal(e.text, ignore_case=ic)
        if isinstance(e, regex_ir.Words):
            at = e.span
            return b.dfa(words_dfa(e.words, ignore_case=ic, limits=self.limits, what=f"{at.path or '<string>'}:{at.line}:{at.col}: %words {e.path}"))
        if isinstance(e, regex_ir.Ref):
            return self.rule(self.bank.resolve(e), stack)
        if isinstance(e, regex_ir.Seq):
            return b.seq([self.expr(x, ic, dotall, stack) for x in e.items])
        if isinstance(e, regex_ir.Choice):
            with b.building(f"an alternation of {len(e.options):,} options at {e.span}"):
                return b.alt([self.expr(x, ic, dotall, stack) for x in e.options])
        if isinstance(e, regex_ir.Repeat):
            return b.repeat(self.expr(e.item, ic, dotall, stack), e.min, e.max)
        raise TypeError(f"unknown bank expression {type(e).__name__}")


def _nfa_cap(limits: Limits) -> int:
    return max(100_000, 20 * limits.max_states)


def _check_flags(flags: str, span: Span | None) -> None:
    bad = sorted(set(flags) - ALLOWED_FLAGS)
    if bad:
        msg = f"unsupported flag(s) {''.join(bad)!r}; expected letters from 'i' (ignore case) and 's' (dot matches newline)"
        raise SourceError.at(span or Span(None, 1, 1), msg)


def load_regex(path: str | Path, vocab: Vocab | None = None, limits: Limits = Limits()) -> RegexBank:
    """Parse and compile a `.regex` bank file (more than ``limits.max_patterns`` rules in
    the file is an error before it is parsed)."""
    return compile_bank(read_regex_bank(path, max_patterns=limits.max_patterns), vocab, limits)


def load_pattern(path: str | Path, name: str | None, vocab: Vocab | None = None, limits: Limits = Limits()) -> Automaton:
    """One pattern of a `.regex` bank file as an :class:`Automaton` (only that pattern is
    compiled): ``name``, or the bank's only pattern when ``name`` is None."""
    bank = read_regex_bank(path, max_patterns=limits.max_patterns)
    names = list(bank.patterns)
    if name is None:
        if len(names) != 1:
            listed = ", ".join(names) or "none"
            raise NeurosymError(f"{path} has {len(names)} patterns ({listed}); name one as {path}:NAME")
        name = names[0]
    if name not in bank.patterns:
        raise NeurosymError(f"{path}: no pattern named {name}; the bank has {', '.join(names)}")
    return to_automaton(rule_dfa(bank, bank.patterns[name], limits), vocab, name=name, source=f"{path}:{name}")


def load_word_list(path: str | Path, vocab: Vocab | None = None, limits: Limits = Limits()) -> Automaton:
    """A word list file (one word a line; the rule of :mod:`neurosym.dsl.words`) as an
    :class:`Automaton` accepting exactly its words."""
    path = Path(path)
    started = time.monotonic()
    dfa = words_dfa(read_word_list(path), limits=limits, what=str(path))
    return to_automaton(dfa, vocab, name=path.stem, source=str(path), deadline=(started, limits.time_limit, str(path)))


__all__ = [
    "Limits",
    "RegexBank",
    "compile_bank",
    "compile_regex",
    "default_vocab",
    "load_pattern",
    "load_regex",
    "load_word_list",
    "pattern_dfa",
    "rule_dfa",
    "to_automaton",
    "words_dfa",
]
