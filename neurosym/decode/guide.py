"""Compiled guides: a grammar compiled once for one vocabulary, behind one small protocol.

Every grammar kind — a regex or a bank pattern, a word list, an ``.fsg``, a ``.pcfg``
(regex terminals too), a kind registered from outside — becomes a :class:`Guide` over a
:class:`~neurosym.vocab.Vocab` (built once per tokenizer, :meth:`Vocab.from_tokenizer`)::

    vocab = neurosym.Vocab.from_tokenizer("tokenizer.json")      # or a transformers tokenizer
    guide = neurosym.compile_guide("grammars/json.pcfg", vocab)  # cached by (content, vocabulary)
    m = guide.matcher()
    mask = np.zeros(guide.mask_words, dtype=np.int32)
    m.fill_mask(mask)        # token i allowed <=> bit i % 32 of mask[i // 32]
    m.accept(token)          # False (and nothing changes) when the token is not allowed
    m.can_end(); m.copy(); m.rollback(1)
    m.log_probs()            # weighted guides: exact log P(token | text) (V,) and the end at [V]

A guide's capabilities are its members: :attr:`Guide.weighted` (exact next-token
probabilities), :attr:`Guide.bounded` (a completion budget for masks), and the
processors it gives :func:`neurosym.decode.grammar_processors`, ``neurosym generate``,
``eval --grammar`` and :class:`neurosym.hf.GrammarLogitsProcessor`
(:meth:`Guide.processors`), the membership of token rows (:meth:`Guide.membership`) and a
sentence's exact log-probability (:meth:`Guide.sentence_log_prob`). Which guide a
compiled grammar gets is decided in one place, :data:`GUIDES`: an automaton over the
tokens (:class:`AutomatonGuide`), rule tensors over the tokens (:class:`RulesGuide`), or
a grammar read as strings over a tokenizer (:class:`StringGuide`, what a kind's
``strings`` loader gives, :class:`neurosym.kinds.Kind`).
"""

from __future__ import annotations

import json

import os
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neurosym.compile.automaton import Automaton
from neurosym.compile.pcfg import RuleTensors
from neurosym.compile.regex import Limits
from neurosym.compile.spelling import SpelledGrammar
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.decode.mask import NUMPY_FLOATS, GrammarMask, add_rows, byte_bias
from neurosym.decode.priors import FSGPrior
from neurosym.decode.processor import LogitsProcessor
from neurosym.decode.tokenized import CACHE_LIMIT, FSGTerminals, PCFGTerminals, SpelledMask, SpelledPrior, StringPrefixModel, read_texts, support_model
from neurosym.errors import NeurosymError
from neurosym.files import file_stamp, recording_reads
from neurosym.kinds import load_grammar, registered
from neurosym.layers.earley import EarleyRecognizer
from neurosym.layers.prefix import PrefixGrammar, prefix_state
from neurosym.semiring import LOG_ZERO
from neurosym.vocab import Vocab

USES = ("mask", "prior", "both")


# ---------------------------------------------------------------------- the protocol
class Guide(ABC):
    """One grammar compiled for one vocabulary (``len(vocab)`` tokens): immutable,
    shared by every :class:`Matcher` it makes and every processor it gives."""

    weighted = False  # exact next-token probabilities (Matcher.log_probs, prior processors)
    bounded = False  # masks that can bound a completion's length (processors(max_len=...))
    _what = "this grammar"  # what the guide reads, for messages

    def __init__(self, grammar: Any, vocab: Vocab):
        self.grammar, self.vocab = grammar, vocab

    @property
    def name(self) -> str:
        return str(getattr(self.grammar, "name", None) or getattr(self.grammar, "path", None) or type(self.grammar).__name__)

    @property
    def mask_words(self) -> int:
        """The length of a packed mask: ``(len(vocab) + 31) // 32`` int32 words."""
        return (len(self.vocab) + 31) // 32

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, vocab={self.vocab!r})"

    @abstractmethod
    def matcher(self) -> "Matcher":
        """A matcher at the start of a text (one per generation or request)."""

    def processors(self, eos_id: int, use: str = "mask", weight: float = 1.0, max_len: int | None = None) -> list[LogitsProcessor]:
        """The logits processors that enforce this guide, in the order to apply them.
        ``use``: ``"mask"`` (only tokens that keep each row inside the grammar; the end
        where the text is a sentence), ``"prior"`` (add ``weight * log P_grammar(token |
        text)``; weighted guides) or ``"both"`` (the prior, then the mask); ``max_len``
        (tokens from the reset, end included): a completion budget, bounded guides only."""
        if use not in USES:
            raise NeurosymError(f"use must be one of {', '.join(USES)}, got {use!r}")
        if use != "mask" and not (isinstance(weight, (int, float)) and not isinstance(weight, bool) and weight > 0):
            raise NeurosymError(f"a grammar prior's weight must be a number > 0, got {weight!r}")
        if use != "mask" and not self.weighted:
            raise NeurosymError("a grammar prior needs a weighted grammar (an .fsg or a .pcfg); a regex or a word list only masks")
        if max_len is not None and not self.bounded:
            raise NeurosymError(f"a completion budget (max_len, max_new_tokens) is supported for automata (regexes, word lists, .fsg over "
                                f"the tokens), not {self._what}")
        return self._processors(eos_id, use, float(weight), max_len)

    @abstractmethod
    def _processors(self, eos_id: int, use: str, weight: float, max_len: int | None) -> list[LogitsProcessor]:
        """:meth:`processors` after its checks."""

    @abstractmethod
    def membership(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """``(sentence, viable)`` (B,) bool for token rows: each row is a sentence of the
        grammar; each row is a viable prefix of one."""

    def sentence_log_prob(self, tokens: Sequence[int]) -> float | None:
        """The exact log-probability of a whole sentence (weighted guides), else None."""
        return None


class Matcher(ABC):
    """One text being written under a :class:`Guide`: which tokens may come next, and the
    text's state as tokens are accepted. ``copy`` gives an independent matcher at the same
    place; ``rollback(k)`` undoes the last ``k`` accepted tokens (speculative decoding)."""

    def __init__(self, guide: Guide):
        self.guide = guide
        self.tokens: list[int] = []  # the accepted tokens, in order

    def fill_mask(self, out: np.ndarray | torch.Tensor) -> None:
        """Write the allowed next tokens into ``out`` (``guide.mask_words``,) int32 in place:
        token ``i`` is bit ``i % 32`` of word ``i // 32`` (the end is :meth:`can_end`)."""
        view = out.numpy() if isinstance(out, torch.Tensor) else out
        if not (isinstance(view, np.ndarray) and view.dtype == np.int32 and view.shape == (self.guide.mask_words,)):
            raise NeurosymError(f"fill_mask: expected an int32 array of shape ({self.guide.mask_words},), got "
                                f"{getattr(view, 'dtype', type(view).__name__)} {getattr(view, 'shape', '')}")
        self._fill(view)

    def allowed(self) -> np.ndarray:
        """(V,) bool: the allowed next tokens (:meth:`fill_mask`, unpacked)."""
        words = np.zeros(self.guide.mask_words, dtype=np.int32)
        self._fill(words)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")
        return bits[: len(self.guide.vocab)].astype(bool)

    @abstractmethod
    def _fill(self, out: np.ndarray) -> None:
        """:meth:`fill_mask` after its checks."""

    @abstractmethod
    def accept(self, token: int) -> bool:
        """Take ``token``: True, or False with the matcher unchanged when it is not allowed."""

    @abstractmethod
    def can_end(self) -> bool:
        """Whether the text so far is a sentence of the grammar."""

    @abstractmethod
    def copy(self) -> "Matcher":
        """An independent matcher at the same place (same history)."""

    @abstractmethod
    def _undo(self, k: int) -> None:
        """:meth:`rollback` after its checks."""

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (0 <= k <= the number accepted)."""
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= len(self.tokens):
            raise NeurosymError(f"rollback: expected 0 <= k <= {len(self.tokens)} (the tokens accepted), got {k!r}")
        if k:
            self._undo(k)
            del self.tokens[len(self.tokens) - k:]

    def log_probs(self) -> np.ndarray:
        """(V + 1,) float64: the exact ``log P(token | text)`` of every token, and at index
        ``V`` ``log P(end | text)`` (weighted guides; ``-inf`` where impossible)."""
        if not self.guide.weighted:
            raise NeurosymError(f"{self.guide.name}: log_probs needs a weighted grammar (an .fsg or a .pcfg); this one only masks")
        return self._log_probs()

    @abstractmethod
    def _log_probs(self) -> np.ndarray:
        """:meth:`log_probs` of a weighted guide's matcher, after its check."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.guide.name}, {len(self.tokens)} tokens)"


def _pack(allowed: np.ndarray, out: np.ndarray) -> None:
    """``allowed`` (V,) bool packed into ``out`` (ceil(V / 32),) int32, little-endian bits."""
    packed = np.packbits(allowed, bitorder="little")
    raw = out.view(np.uint8)
    raw[: len(packed)] = packed
    raw[len(packed):] = 0


# ---------------------------------------------------------------------- automata over the tokens
class AutomatonGuide(Guide):
    """A token-level automaton (a regex, a bank pattern, a word list; an ``.fsg`` over a
    word vocabulary, weighted): the state is one integer, a mask one precomputed row."""

    bounded = True
    _what = "automata"

    def __init__(self, grammar: Automaton, vocab: Vocab):
        super().__init__(grammar, vocab)
        self.weighted = isinstance(grammar, WeightedAutomaton)
        self.final = grammar.final.cpu().numpy().astype(bool)
        self._log_table: np.ndarray | None = None

    def matcher(self) -> "AutomatonMatcher":
        return AutomatonMatcher(self)

    def log_table(self) -> np.ndarray:
        """(Q, V + 1) float64: each state's next-token log-probabilities and the end (built once)."""
        if self._log_table is None:
            g = self.grammar
            self._log_table = np.concatenate([g.log_probs.cpu().double().numpy(), g.final_log_probs.cpu().double().numpy()[:, None]], 1)
        return self._log_table

    def _processors(self, eos_id: int, use: str, weight: float, max_len: int | None) -> list[LogitsProcessor]:
        out: list[LogitsProcessor] = [FSGPrior(self.grammar, weight, eos_id)] if use != "mask" else []
        return out + ([GrammarMask(self.grammar, eos_id, max_len=max_len)] if use != "prior" else [])

    def membership(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Automata are trim (every state left can still reach a final one), so a prefix is
        viable iff it was not rejected."""
        g = self.grammar
        ids, lengths = (t.numpy() for t in _padded(rows))
        states = np.full(len(rows), g.start, dtype=np.int64)
        for i in range(int(lengths.max(initial=0))):  # a row shorter keeps its state; any id outside the vocabulary rejects
            states = np.where(lengths > i, g.step_numpy(states, ids[:, i]), states)
        viable = states >= 0
        return viable & self.final[np.maximum(states, 0)], viable

    def sentence_log_prob(self, tokens: Sequence[int]) -> float | None:
        if not self.weighted:
            return None
        return float(self.grammar.log_prob(torch.tensor([list(tokens)], dtype=torch.long))[0])


class StateMatcher(Matcher):
    """A matcher whose state is one value (an automaton's state, an interned Earley
    column): ``accept`` steps it (:meth:`_next`), the history keeps the earlier ones."""

    def __init__(self, guide: Guide, state: Any):
        super().__init__(guide)
        self.state = state
        self.history: list[Any] = []

    @abstractmethod
    def _next(self, token: int) -> Any:
        """The state after ``token``, or None where it is not allowed."""

    def _forget(self) -> None:
        """Drop what was computed from the state (the state changed backwards, or was copied)."""

    def accept(self, token: int) -> bool:
        t = int(token)
        nxt = self._next(t)
        if nxt is None:
            return False
        self.history.append(self.state)
        self.state = nxt
        self.tokens.append(t)
        return True

    def copy(self) -> "StateMatcher":
        other = type(self)(self.guide)
        other.state, other.history, other.tokens = self.state, list(self.history), list(self.tokens)
        return other

    def _undo(self, k: int) -> None:
        self.state = self.history[-k]
        del self.history[len(self.history) - k:]
        self._forget()


class AutomatonMatcher(StateMatcher):
    def __init__(self, guide: AutomatonGuide):
        super().__init__(guide, int(guide.grammar.start))

    def _fill(self, out: np.ndarray) -> None:
        self.guide.grammar.write_mask(self.state, out)

    def _next(self, token: int) -> int | None:
        nxt = self.guide.grammar.next_state(self.state, token)
        return None if nxt < 0 else nxt

    def can_end(self) -> bool:
        return bool(self.guide.final[self.state])

    def _log_probs(self) -> np.ndarray:
        return self.guide.log_table()[self.state].copy()


# ---------------------------------------------------------------------- PCFG rule tensors over the tokens
class RulesGuide(Guide):
    """A ``.pcfg`` over a word vocabulary (its terminals are the tokens): masks from a
    boolean Earley recogniser, probabilities from the exact prefix chart (float64)."""

    weighted = True
    _what = ".pcfg grammars"

    def __init__(self, grammar: RuleTensors, vocab: Vocab):
        super().__init__(grammar, vocab)
        self.recognizer = EarleyRecognizer(grammar)
        self._prefix: PrefixGrammar | None = None

    def prefix_grammar(self) -> PrefixGrammar:
        """The float64 prefix-chart grammar on the CPU (built once, on first use)."""
        if self._prefix is None:
            self._prefix = PrefixGrammar.from_rules(self.grammar, torch.float64).to("cpu")
        return self._prefix

    def matcher(self) -> "RulesMatcher":
        return RulesMatcher(self)

    def _processors(self, eos_id: int, use: str, weight: float, max_len: int | None) -> list[LogitsProcessor]:
        from neurosym.decode.pcfg import PCFGMask, PCFGPrior  # lazy: the prefix-probability charts load only for PCFGs

        out: list[LogitsProcessor] = [PCFGPrior(self.grammar, weight, eos_id)] if use != "mask" else []
        return out + ([PCFGMask(self.grammar, eos_id)] if use != "prior" else [])

    def membership(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        ids, lengths = _padded(rows)
        state = prefix_state(self.grammar, ids, lengths)
        return torch.isfinite(state.sentence_log_prob).cpu().numpy(), torch.isfinite(state.prefix_log_prob).cpu().numpy()

    def sentence_log_prob(self, tokens: Sequence[int]) -> float | None:
        return float(prefix_state(self.grammar, torch.tensor([list(tokens)], dtype=torch.long)).sentence_log_prob[0])


class RulesMatcher(StateMatcher):
    """The state is the recogniser's interned column; probabilities come from a prefix
    chart that follows the accepted tokens (built on the first :meth:`log_probs`)."""

    def __init__(self, guide: RulesGuide):
        super().__init__(guide, guide.recognizer.start())
        self._chart: PCFGTerminals | None = None

    def _support(self) -> np.ndarray:
        return self.guide.recognizer.distribution(self.state)[0]

    def _fill(self, out: np.ndarray) -> None:
        _pack(self._support() > 0, out)

    def _next(self, token: int) -> Any:
        support = self._support()
        if not (0 <= token < len(support) and support[token] > 0):
            return None
        return self.guide.recognizer.advance(self.state, token)

    def can_end(self) -> bool:
        return self.state.sentence

    def _forget(self) -> None:
        self._chart = None

    def _log_probs(self) -> np.ndarray:
        if self._chart is None:
            self._chart = PCFGTerminals(self.guide.grammar, self.guide.prefix_grammar())
        chart = self._chart
        k = len(self.tokens)  # the chart follows the accepted tokens, one column per token, from its longest kept prefix
        while tuple(self.tokens[:k]) not in chart.states:
            k -= 1
        context = tuple(self.tokens[:k])
        for t in self.tokens[k:]:
            context = chart.advance(context, t)
        chart.retain({context})
        probs, end = chart.distribution(context)
        with np.errstate(divide="ignore"):
            return np.log(np.concatenate([probs, [end]]))


# ---------------------------------------------------------------------- grammars read as strings over a tokenizer
class StringGuide(Guide):
    """An ``.fsg`` or ``.pcfg`` (or a registered kind's grammar) read as a language of
    strings over a tokenizer (:class:`~neurosym.compile.spelling.SpelledGrammar`): masks
    from the string-level support model, probabilities from the exact string-level prior
    (:class:`~neurosym.decode.tokenized.StringPrefixModel`).

    A matcher's state is a set of hypotheses (terminal-level context, spelling context,
    word-trie node or lexeme state) whose contexts are interned (the Earley recogniser's
    columns, an FSG's states), so equal states are equal keys: the packed mask, the end
    and the step on a token are kept per state here, shared by every matcher, and found
    again along any text of the same shape (a step that was seen is a lookup). The token
    trie, the joint walks and the first mask are built once, here."""

    weighted = True
    _what = "grammars read as strings"

    def __init__(self, grammar: SpelledGrammar, vocab: Vocab):
        super().__init__(grammar, vocab)
        self.support_terminals = support_model(grammar.terminals)
        self.tables = StringPrefixModel(grammar, support=True, model=self.support_terminals)
        rules = grammar.terminals if isinstance(grammar.terminals, RuleTensors) else None
        self._prefix = None if rules is None else PrefixGrammar.from_rules(rules, torch.float64).to("cpu")
        self.spells = np.array([bool(u) for u in self.tables.units], dtype=bool)  # tokens that spell text
        self._masks: dict[frozenset, np.ndarray] = {}  # state -> its packed mask, as bytes (mask_words * 4,) uint8
        self._ends: dict[frozenset, bool] = {}
        self._steps: dict[tuple[frozenset, int], tuple[frozenset, dict] | None] = {}  # (state, token) -> the next state, or None
        self._reads: dict[tuple[tuple, int], dict] = {}  # (hypothesis, token) -> the hypotheses it leads to
        self.tables.reset(1)
        self.start = dict(self.tables.rows[0])  # the empty text's hypotheses
        self.start_key = frozenset(self.start)
        self.mask_bytes(self.start_key, self.start)  # the first mask, read once here

    def prior_terminals(self):
        """A fresh terminal-level model with probabilities (a matcher's own: its contexts live with it)."""
        g = self.grammar.terminals
        return PCFGTerminals(g, self._prefix) if isinstance(g, RuleTensors) else FSGTerminals(g)

    def matcher(self) -> "StringMatcher":
        return StringMatcher(self)

    # ------------------------------------------------------------------ per-state tables, filled as states are met
    def _bounded(self, cache: dict) -> dict:
        """``cache``, emptied first past :data:`CACHE_LIMIT` entries (the shared model's own
        per-context caches too): a bound on memory, never on correctness."""
        for c in (cache, self.tables.viable, self.tables.cums, self.tables.bits):
            if len(c) > CACHE_LIMIT:
                c.clear()
        return cache

    def mask_bytes(self, key: frozenset, hyps: dict) -> np.ndarray:
        """The packed mask of a state, ``(mask_words * 4,)`` uint8 (kept; read-only)."""
        got = self._masks.get(key)
        if got is None:
            got = np.zeros(self.mask_words * 4, dtype=np.uint8)
            n = (len(self.vocab) + 7) // 8
            for hyp in hyps:
                got[:n] |= self.tables.viable_bits(*hyp, 0)
            got.flags.writeable = False
            self._bounded(self._masks)[key] = got
        return got

    def can_end(self, key: frozenset, hyps: dict) -> bool:
        got = self._ends.get(key)
        if got is None:
            model = self.support_terminals
            got = any(node == 0 and model.distribution(context)[1] > 0 for (context, _, node) in hyps)
            self._bounded(self._ends)[key] = got
        return got

    def step(self, key: frozenset, hyps: dict, token: int) -> tuple[frozenset, dict] | None:
        """The state after ``token`` (one that spells text, in range), or None where the text
        would be no prefix of a sentence."""
        k = (key, token)
        if k in self._steps:
            return self._steps[k]
        got = self._inside_lexeme(hyps, token)
        if got is None:  # a support model reads each hypothesis on its own (weights are all 1): one kept read per hypothesis
            nxt: dict = {}
            for hyp in hyps:
                nxt.update(self._read_one(hyp, token))
            got = (frozenset(nxt), nxt) if nxt else None
        self._bounded(self._steps)[k] = got
        return got

    def _read_one(self, hyp: tuple, token: int) -> dict:
        """The hypotheses one hypothesis leads to on ``token`` (kept)."""
        k = (hyp, token)
        got = self._reads.get(k)
        if got is None:
            got = self._bounded(self._reads)[k] = self.tables.read({hyp: 1.0}, self.tables.units[token])
        return got

    def _inside_lexeme(self, hyps: dict, token: int) -> tuple[frozenset, dict] | None:
        """The one-lexeme fast path of :meth:`step`: one hypothesis inside a lexeme and a
        token whose bytes keep it inside, through states that are not final (a string's
        content): one table lookup (:meth:`StringPrefixModel.lexeme_steps`); None where it
        does not apply (the full read then answers)."""
        if len(hyps) != 1:
            return None
        (context, ctx, node), = hyps
        if not isinstance(node, tuple):
            return None
        w, q = node
        q2 = int(self.tables.lexeme_steps(ctx, w, q)[token])
        if q2 < 0 or not self.tables.lex_open[ctx][w][q2]:
            return None
        nxt = {(context, ctx, (w, q2)): 1.0}
        return frozenset(nxt), nxt

    # ------------------------------------------------------------------ processors and texts
    def _processors(self, eos_id: int, use: str, weight: float, max_len: int | None) -> list[LogitsProcessor]:
        if use == "mask":  # the guide's own matchers: the masks and steps it keeps per state
            return [GuideMask(self, eos_id)]
        prior = SpelledPrior(self.grammar, weight, eos_id, tables=self.tables)
        return [prior] + ([SpelledMask(self.grammar, eos_id, shared=prior)] if use == "both" else [])  # one string model for both

    def membership(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        sentence, viable, _ = read_texts(self.grammar, [list(r) for r in rows], tables=self.tables)
        return sentence, viable

    def sentence_log_prob(self, tokens: Sequence[int]) -> float | None:
        logp = float(read_texts(self.grammar, [list(tokens)], tables=self.tables)[2][0])
        return None if np.isnan(logp) else logp


class StringMatcher(Matcher):
    def __init__(self, guide: StringGuide):
        super().__init__(guide)
        self.hyps, self.key = guide.start, guide.start_key  # never changed in place: shared with the guide and the history
        self.history: list[tuple[dict, frozenset]] = []  # the state before each accepted token
        self._prior: StringPrefixModel | None = None  # the exact string-level prior, built on the first log_probs

    def _fill(self, out: np.ndarray) -> None:
        out.view(np.uint8)[:] = self.guide.mask_bytes(self.key, self.hyps)

    def accept(self, token: int) -> bool:
        g = self.guide
        t = int(token)
        if not (0 <= t < len(g.spells) and g.spells[t]):  # out of range, or a token that spells nothing (the end)
            return False
        mask = g._masks.get(self.key)
        if mask is not None and not mask[t >> 3] >> (t & 7) & 1:
            return False
        nxt = g.step(self.key, self.hyps, t)
        if nxt is None:
            return False
        self.history.append((self.hyps, self.key))
        self.key, self.hyps = nxt
        self.tokens.append(t)
        if self._prior is not None:
            self._prior.advance(np.array([t], dtype=np.int64))
        return True

    def can_end(self) -> bool:
        return self.guide.can_end(self.key, self.hyps)

    def copy(self) -> "StringMatcher":
        other = StringMatcher(self.guide)
        other.hyps, other.key = self.hyps, self.key
        other.history, other.tokens = list(self.history), list(self.tokens)
        return other

    def _undo(self, k: int) -> None:
        self.hyps, self.key = self.history[-k]
        del self.history[len(self.history) - k:]
        self._prior = None  # rebuilt from the remaining tokens on the next log_probs

    def _log_probs(self) -> np.ndarray:
        if self._prior is None:
            prior = StringPrefixModel(self.guide.grammar, like=self.guide.tables, model=self.guide.prior_terminals())
            prior.reset(1)
            for t in self.tokens:
                prior.advance(np.array([t], dtype=np.int64))
            self._prior = prior
        nxt, end = self._prior.next_probs()
        with np.errstate(divide="ignore"):
            return np.log(np.concatenate([nxt[0], end]))


class GuideMask(LogitsProcessor):
    """Forbid (``-inf``) every token a guide's matchers do not allow next, one matcher per
    row; ``eos_id`` only where the row's text is a sentence (``can_end``). The masks are
    the matchers' packed bits (:meth:`Matcher.fill_mask`), each byte read through a
    (256, 8) table of biases (``byte_bias``), added in one step. A row that takes a token
    its matcher refuses (another processor chose it) has nothing left: every score -inf.

    scores: (B, V_model) with ``V_model >= len(guide.vocab)``; ids past the vocabulary are
    forbidden."""

    def __init__(self, guide: Guide, eos_id: int):
        V = len(guide.vocab)
        if not isinstance(eos_id, int) or isinstance(eos_id, bool) or not 0 <= eos_id < V:
            raise NeurosymError(f"GuideMask: eos_id must be a token id in [0, {V}), got {eos_id!r}")
        if guide.vocab.surfaces[eos_id] is not None:
            raise NeurosymError(f"GuideMask: eos_id {eos_id} spells {guide.vocab.surfaces[eos_id]!r}; the end needs a token that spells nothing")
        self.guide, self.eos_id, self.V = guide, eos_id, V
        self.matchers: list[Matcher] = []
        self.dead = np.zeros(0, dtype=bool)  # rows whose text left the grammar
        self._words = np.zeros((0, guide.mask_words), dtype=np.int32)
        self._buffers: dict[tuple, np.ndarray] = {}
        self._started = False

    def __repr__(self) -> str:
        return f"GuideMask({self.guide.name})"

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        self.matchers = [self.guide.matcher() for _ in range(batch_size)]
        self.dead = np.zeros(batch_size, dtype=bool)
        self._words = np.zeros((batch_size, self.guide.mask_words), dtype=np.int32)
        self._started = True

    def _check(self) -> None:
        if not self._started:
            raise NeurosymError("GuideMask: call reset(batch_size) before using the processor")

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        self._check()
        ids = torch.as_tensor(tokens).long().cpu().tolist()
        skip = [False] * len(ids) if done is None else torch.as_tensor(done).bool().cpu().tolist()
        for b, (t, s) in enumerate(zip(ids, skip)):
            if s or t == self.eos_id or self.dead[b]:
                continue
            if not self.matchers[b].accept(t):
                self.dead[b] = True

    def bias_numpy(self, dtype: np.dtype = np.dtype(np.float32)) -> np.ndarray:
        """(B, V) of ``dtype``: 0 where each row may go next (the end included), -inf
        elsewhere; valid until the next call."""
        self._check()
        B = len(self.matchers)
        words = self._words
        for b, m in enumerate(self.matchers):
            if self.dead[b]:
                words[b] = 0
            else:
                m.fill_mask(words[b])
        key = (B, dtype)
        out = self._buffers.get(key)
        if out is None:
            out = self._buffers[key] = np.empty((B, self.guide.mask_words * 32), dtype=dtype)
        np.take(byte_bias(dtype), words.view(np.uint8), axis=0, out=out.reshape(B, -1, 8))
        bias = out[:, : self.V]
        bias[:, self.eos_id] = [0.0 if not d and m.can_end() else LOG_ZERO for m, d in zip(self.matchers, self.dead)]
        return bias

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        B = len(self.matchers)
        if scores.dim() != 2 or scores.shape[0] != B or scores.shape[1] < self.V:
            raise NeurosymError(f"GuideMask: expected scores (B, V) with B = {B}, V >= {self.V}; got {tuple(scores.shape)}")
        bias = self.bias_numpy(NUMPY_FLOATS.get(scores.dtype, np.dtype(np.float32)))
        head = scores[:, : self.V]
        if scores.shape[1] == self.V:
            add_rows(scores, bias)
        else:
            head.add_(torch.from_numpy(bias).to(device=scores.device, dtype=scores.dtype))
            scores[:, self.V:] = LOG_ZERO
        return scores

    def allowed(self, tokens: torch.Tensor) -> torch.Tensor:
        self._check()
        out = []
        for b, t in enumerate(torch.as_tensor(tokens).long().cpu().tolist()):
            m = self.matchers[b]
            if self.dead[b] or not 0 <= t < self.V:
                out.append(False)
            elif t == self.eos_id:
                out.append(m.can_end())
            else:
                out.append(m.copy().accept(t))
        return torch.tensor(out, dtype=torch.bool, device=torch.as_tensor(tokens).device)

    def describe_allowed(self, row: int, limit: int = 8) -> list[int]:
        if self.dead[row]:
            return []
        ids = np.nonzero(self.matchers[row].allowed())[0][:limit].tolist()
        return ids + ([self.eos_id] if self.matchers[row].can_end() and len(ids) < limit else [])


def _padded(rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows as ``(ids (B, max(L, 1)), lengths (B,))`` long tensors, padded with 0."""
    L = max((len(r) for r in rows), default=0)
    ids = torch.zeros(len(rows), max(L, 1), dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, : len(r)] = torch.tensor(list(r), dtype=torch.long)
    return ids, torch.tensor([len(r) for r in rows], dtype=torch.long)


# ---------------------------------------------------------------------- which guide, and the cache
GUIDES: tuple[tuple[type, type[Guide]], ...] = (  # the one table from a compiled grammar to its guide (first match wins)
    (SpelledGrammar, StringGuide),
    (RuleTensors, RulesGuide),
    (Automaton, AutomatonGuide),
)
CACHE_SIZE = 32  # compiled guides kept (least recently used dropped first)
_GUIDES: OrderedDict[tuple, tuple[Guide, tuple]] = OrderedDict()  # key -> (guide, the stamps of the files it read)
_OBJECTS: dict[int, tuple[Any, Guide]] = {}  # id(compiled grammar) -> (it, its guide)


def guide_of(grammar: Any, keep: bool = True) -> Guide:
    """The guide of a compiled grammar (as :func:`neurosym.kinds.load_grammar` returns
    them), kept for the most recent :data:`CACHE_SIZE` grammar objects (``keep=False``:
    built and not kept, as ``compile_guide(..., cache=False)`` asks)."""
    if isinstance(grammar, Guide):
        return grammar
    hit = _OBJECTS.get(id(grammar))
    if hit is not None and hit[0] is grammar:
        return hit[1]
    for compiled, guide_class in GUIDES:
        if isinstance(grammar, compiled):
            guide = guide_class(grammar, grammar.vocab)
            break
    else:
        raise NeurosymError(f"expected a compiled grammar (an Automaton, RuleTensors or a grammar over strings), got a {type(grammar).__name__}")
    if not keep:
        return guide
    if len(_OBJECTS) >= CACHE_SIZE:
        _OBJECTS.pop(next(iter(_OBJECTS)))
    _OBJECTS[id(grammar)] = (grammar, guide)
    return guide


def _stamp(path: str) -> tuple | None:
    """``(path, its stat stamp)``, or None when it is gone."""
    stamp = file_stamp(path)
    return None if stamp is None else (path, stamp)


def _key(spec: Any, vocab: Vocab, limits: Limits) -> tuple | None:
    """What a compiled guide is cached under: the grammar (a regex's text, a file's path;
    the files it read are checked unchanged on every hit), the vocabulary's content hash
    and the limits; None for what is not cached (compiled objects: :func:`guide_of`)."""
    if isinstance(spec, (str, Path)):  # the registered kinds too: a kind replaced or removed reads the file anew
        return (type(spec).__name__, str(spec), vocab.sha256(), repr(limits), tuple(map(id, registered())))
    if isinstance(spec, dict):  # a JSON Schema: its text, in its own key order (the properties' order matters)
        try:
            return ("schema", json.dumps(spec, ensure_ascii=False), vocab.sha256(), repr(limits))
        except (TypeError, ValueError):
            return None
    return None


def compile_guide(spec: Any, vocab: Vocab, limits: Limits = Limits(), cache: bool = True) -> Guide:
    """``spec`` compiled once over ``vocab`` into a :class:`Guide`.

    ``spec`` is what :func:`neurosym.kinds.load_grammar` takes: a grammar file (``.regex``
    patterns as ``FILE:NAME``, ``.fsg``, ``.pcfg``, a ``.txt`` word list, an artifact, a
    registered kind; ``grammars/...`` names the shipped ones), a regex string, a JSON
    Schema (a ``.json`` file or a dict, docs/json_schema.md), or a compiled grammar
    (checked to be over ``vocab``); or a guide (returned as it is).
    Compiled guides are kept by (grammar, vocabulary content, limits), so asking again
    costs a lookup; a file's guide is compiled again when the file, or any file it read
    (imports, word lists), has changed. ``cache=False`` compiles afresh."""
    if not isinstance(vocab, Vocab):
        raise NeurosymError(f"compile_guide needs a neurosym.Vocab (neurosym.Vocab.from_tokenizer(tokenizer)), got {type(vocab).__name__}")
    if isinstance(spec, Guide):
        if spec.vocab != vocab:
            raise NeurosymError(f"the guide was compiled for {spec.vocab!r}, not the vocabulary asked for, {vocab!r}")
        return spec
    key = _key(spec, vocab, limits) if cache else None
    if key is not None:
        hit = _GUIDES.get(key)
        if hit is not None and all(_stamp(s[0]) == s for s in hit[1]):
            _GUIDES.move_to_end(key)
            return hit[0]
    if not isinstance(spec, (str, Path, dict)):
        return guide_of(load_grammar(spec, vocab, limits), keep=cache)
    with recording_reads() as reads:
        grammar = load_grammar(spec, vocab, limits)
    guide = guide_of(grammar, keep=cache)
    if key is not None:
        _GUIDES[key] = (guide, tuple(s for s in map(_stamp, sorted(reads)) if s is not None))
        while len(_GUIDES) > CACHE_SIZE:
            _GUIDES.popitem(last=False)
    return guide


__all__ = [
    "AutomatonGuide", "AutomatonMatcher", "GUIDES", "Guide", "GuideMask", "Matcher", "RulesGuide", "RulesMatcher", "StringGuide", "StringMatcher",
    "USES", "compile_guide", "guide_of",
]
