"""Grammars over strings: terminals spelled out, joined by a separator policy.

An ``.fsg`` or ``.pcfg`` reads terminals (words). To meet a tokenizer whose tokens are
byte strings (GPT-2's byte-level BPE: ``" the"``, ``"Al"``, ``"ice."``) the grammar is
read as a language of *strings*: a sentence ``w1 .. wk`` is the text

    spell(w1) + glue(w1, w2) + spell(w2) + ... + glue(w(k-1), wk) + spell(wk)

where ``spell(w)`` is the terminal's own text (UTF-8 bytes for a byte vocabulary, code
points for a character one) and ``glue`` is the :class:`Separator` policy, declared in
the grammar file with ``%separator "TEXT"`` (docs/strings.md):

* the default (no directive, or ``%separator " "``) is the text a detokenizer writes:
  one space between words, except before a terminal made only of closing punctuation
  (every character in ``. , ! ? ; : ) ] }``: ``task .`` is written ``task.``) and after
  a terminal made only of opening brackets (every character in ``( [ {``: ``( 1`` is
  written ``(1``);
* ``%separator ""``: terminals concatenate (JSON-like grammars, ``a*b`` over letters);
* any other text (``%separator "_"``) joins every pair of terminals, with the same
  punctuation rule.

The glue in front of a terminal depends only on the terminal and on a *context* after
the previous one: :data:`BARE` (at the start, after an opening bracket, or with an
empty separator) or :data:`SPACED`. So the terminals' surfaces in a context,
``glue + spell(w)``, form one :class:`WordTrie` per context, sorted so that the words
below a trie node are a contiguous range of the sorted order (a prefix sum over the
words' probabilities in that order gives the mass of any node in O(1)).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neurosym.compile.fsg import compile_fsg, opaque_terminal, regex_terminals
from neurosym.compile.pcfg import RuleTensors, compile_pcfg
from neurosym.compile.pcfg_check import check_pcfg
from neurosym.compile.cnf import to_cnf
from neurosym.compile.regex import Limits, pattern_dfa
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.dsl.fsg import read_fsg
from neurosym.dsl.pcfg import Grammar, read_pcfg
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab

CLOSING = frozenset(".,!?;:)]}")  # a terminal made only of these takes no separator before it
OPENING = frozenset("([{")  # a terminal made only of these takes no separator after it
DEFAULT_SEPARATOR = " "
BARE, SPACED = 0, 1  # the contexts: no glue before the next terminal / the separator before it


@dataclass(frozen=True)
class Separator:
    """How a grammar's terminals are joined into text (module docstring)."""

    text: str = DEFAULT_SEPARATOR

    def attaches_left(self, word: str) -> bool:
        """No separator before ``word``: it is closing punctuation."""
        return bool(word) and all(c in CLOSING for c in word)

    def attaches_right(self, word: str) -> bool:
        """No separator after ``word``: it is an opening bracket."""
        return bool(word) and all(c in OPENING for c in word)

    def context_after(self, word: str) -> int:
        """The context a terminal leaves: :data:`BARE` or :data:`SPACED`."""
        return BARE if not self.text or self.attaches_right(word) else SPACED

    def glue(self, context: int, word: str) -> str:
        """The text in front of ``word`` in ``context``."""
        return self.text if context == SPACED and not self.attaches_left(word) else ""

    def join(self, words: list[str]) -> str:
        """The text of a sentence ``words``."""
        out, context = [], BARE
        for w in words:
            out.append(self.glue(context, w) + w)
            context = self.context_after(w)
        return "".join(out)


@dataclass
class WordTrie:
    """The surfaces of a grammar's terminals in one context, as a trie of symbols (bytes or
    code points); node 0 is the root.

    Attributes:
        child: per node, ``{symbol: child node}``.
        lo, hi: (nodes,) int64: the words below a node (their surfaces start with the
            node's path) are ``order[lo:hi]``.
        n_ends: (nodes,) int64: how many words end exactly at a node; they come first in
            its range (a prefix sorts before its extensions).
        ends: per node, the terminal ids ending there.
        order: (K,) int64 terminal ids sorted by surface.
    """

    child: list[dict[int, int]]
    lo: np.ndarray
    hi: np.ndarray
    n_ends: np.ndarray
    ends: list[tuple[int, ...]]
    order: np.ndarray

    @classmethod
    def build(cls, surfaces: dict[int, tuple[int, ...]]) -> "WordTrie":
        """From ``{terminal id: non-empty surface}``."""
        ranked = sorted(surfaces.items(), key=lambda kv: (kv[1], kv[0]))
        child: list[dict[int, int]] = [{}]
        lo, hi, ends = [0], [len(ranked)], [[]]
        for rank, (word, surface) in enumerate(ranked):
            node = 0
            for sym in surface:
                nxt = child[node].get(sym)
                if nxt is None:
                    nxt = child[node][sym] = len(child)
                    child.append({})
                    lo.append(rank)
                    hi.append(rank + 1)
                    ends.append([])
                hi[nxt] = rank + 1
                node = nxt
            ends[node].append(word)
        return cls(
            child=child,
            lo=np.array(lo, dtype=np.int64),
            hi=np.array(hi, dtype=np.int64),
            n_ends=np.array([len(e) for e in ends], dtype=np.int64),
            ends=[tuple(e) for e in ends],
            order=np.array([w for w, _ in ranked], dtype=np.int64),
        )

    @property
    def num_nodes(self) -> int:
        return len(self.child)


class Spelling:
    """A grammar's terminals spelled out under a separator policy, in the symbols of a
    vocabulary kind (``"bytes"``: UTF-8 bytes; ``"char"``: code points).

    Attributes:
        words: (T,) each terminal id's text (None: a special that is never spelled, or a
            lexeme).
        separator: the :class:`Separator`.
        tries: one :class:`WordTrie` per context (:data:`BARE`, :data:`SPACED`).
        after: (T,) int64: the context each terminal leaves.
        lexemes: per context, ``{terminal id: (trans (Q, 256), final (Q,))}``: each regex
            lexeme's surface (the glue, then any string of its pattern) as a trim byte
            DFA, start 0 (bytes vocabularies only).
    """

    def __init__(self, words: list[str | None], separator: Separator, units: str = "bytes",
                 lexemes: dict[int, tuple[np.ndarray, np.ndarray]] | None = None):
        if units not in ("bytes", "char"):
            raise NeurosymError(f"terminals are spelled in bytes or characters, not {units!r}")
        lexemes = dict(lexemes or {})
        if lexemes and units != "bytes":
            raise NeurosymError("regex lexemes are read over byte vocabularies (a tokenizer's); this one is of characters")
        self.words, self.separator, self.units = [None if i in lexemes else w for i, w in enumerate(words)], separator, units
        for w in self.words:
            if w == "":
                raise NeurosymError("a terminal spelled as the empty string cannot be read from text")
        self.after = np.array([separator.context_after(w or "") for w in self.words], dtype=np.int64)
        self.lexemes = tuple({w: _after_glue(self.symbols(separator.glue(ctx, "x")), *dfa) for w, dfa in lexemes.items()} for ctx in (BARE, SPACED))
        self.tries = tuple(
            WordTrie.build({i: self.symbols(separator.glue(ctx, w) + w) for i, w in enumerate(self.words) if w is not None}) for ctx in (BARE, SPACED)
        )

    def symbols(self, text: str) -> tuple[int, ...]:
        """``text`` as trie symbols."""
        return tuple(text.encode("utf-8")) if self.units == "bytes" else tuple(map(ord, text))

    def text(self, word_ids: list[int]) -> str:
        """The text of a sentence of terminal ids."""
        return self.separator.join([self.words[i] for i in word_ids])


def _after_glue(glue: tuple[int, ...], trans: np.ndarray, final: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A byte DFA that reads ``glue`` first, then the language of ``(trans, final)``."""
    g = len(glue)
    out = np.full((g + trans.shape[0], 256), -1, dtype=np.int64)
    for i, b in enumerate(glue):
        out[i, b] = i + 1
    out[g:] = np.where(trans >= 0, trans + g, -1)
    return out, np.concatenate([np.zeros(g, dtype=bool), final.astype(bool)])


@dataclass
class SpelledGrammar:
    """A weighted grammar read as a language of strings, to decode over ``vocab`` (a
    tokenizer's byte or character vocabulary).

    Attributes:
        terminals: the grammar over its own terminals: a :class:`WeightedAutomaton`
            (``.fsg``) or :class:`RuleTensors` (``.pcfg``), over a word vocabulary.
        spelling: how those terminals are written (:class:`Spelling`).
        vocab: the vocabulary decoding reads (any tokenizer's tokens).
        path: the grammar file, for messages.
    """

    terminals: WeightedAutomaton | RuleTensors
    spelling: Spelling
    vocab: Vocab
    path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path or "grammar"

    def text(self, word_ids: list[int]) -> str:
        return self.spelling.text(word_ids)


def spell(terminals: WeightedAutomaton | RuleTensors, vocab: Vocab, separator: str | None = None, path: str | None = None,
          lexemes: dict[int, tuple[np.ndarray, np.ndarray]] | None = None) -> SpelledGrammar:
    """``terminals`` (compiled over their own word vocabulary) read as strings over
    ``vocab`` (kind ``"bytes"`` or ``"char"``), joined by ``separator`` (None: the default).
    ``lexemes``: ``{terminal id: byte DFA (trans, final)}`` of the terminals that stand for
    a regex (default: a ``.pcfg``'s ``RuleTensors.lexemes``)."""
    if vocab.kind not in ("bytes", "char"):
        raise NeurosymError(f"a grammar over strings is decoded over a byte or character vocabulary, not a {vocab.kind!r} one")
    words = [s if isinstance(s, str) else None for s in terminals.vocab.surfaces]
    sep = Separator(DEFAULT_SEPARATOR if separator is None else separator)
    if lexemes is None:
        sources = getattr(terminals, "lexemes", None) or {}
        lexemes = {int(i): pattern_dfa(src).byte_dfa() for i, src in sources.items()}
    return SpelledGrammar(terminals, Spelling(words, sep, vocab.kind, lexemes), vocab, path)


def load_spelled(path: str | Path, vocab: Vocab, limits: Limits = Limits()) -> SpelledGrammar:
    """Read an ``.fsg`` or ``.pcfg`` file as a language of strings over ``vocab``: compiled
    over its own terminals, spelled under its ``%separator`` (docs/strings.md)."""
    path = Path(path)
    if path.suffix == ".fsg":
        g = read_fsg(path)
        auto = compile_fsg(g, None, limits, opaque_terminals=True)
        dfas = {auto.vocab.id(opaque_terminal(n)): dfa for n, dfa in regex_terminals(g, limits).items() if opaque_terminal(n) in auto.vocab}
        return spell(auto, vocab, g.separator, str(path), {i: dfa.byte_dfa() for i, dfa in dfas.items()})
    if path.suffix == ".pcfg":
        return spell_pcfg(read_pcfg(path), vocab, limits)
    raise NeurosymError(f"{path}: only .fsg and .pcfg grammars are read as strings")


def spell_pcfg(grammar: Grammar, vocab: Vocab, limits: Limits = Limits()) -> SpelledGrammar:
    """A parsed ``.pcfg`` grammar (from a file, or compiled from a JSON Schema) as a
    language of strings over ``vocab``: checked, compiled over its own terminals, spelled
    under its ``%separator``."""
    check_pcfg(grammar, strict=True)
    rules = compile_pcfg(to_cnf(grammar, check=False, max_symbols=limits.max_cnf_symbols), None, limits)
    return spell(rules, vocab, grammar.separator, grammar.path)


__all__ = ["BARE", "CLOSING", "OPENING", "SPACED", "Separator", "SpelledGrammar", "Spelling", "WordTrie", "load_spelled", "spell", "spell_pcfg"]
