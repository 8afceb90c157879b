"""The processors that make decoding follow a compiled grammar, chosen in one place.

:func:`grammar_processors` is the only code that picks processors for a grammar; ``neurosym
generate`` (:mod:`neurosym.decode.run`) and :class:`neurosym.hf.GrammarLogitsProcessor`
both call it, so the same grammar constrains both the same way::

    grammar = neurosym.kinds.load_grammar("grammars/clause.fsg", vocab)
    procs = grammar_processors(grammar, eos_id)                             # the mask
    procs = grammar_processors(grammar, eos_id, use="prior", weight=0.5)    # 0.5 log P_G(token | prefix)
    procs = grammar_processors(grammar, eos_id, use="both", max_len=40)     # prior, then mask in 40 tokens

``use`` is ``"mask"`` (only tokens that keep the row inside the grammar; end-of-sequence
where the prefix is a sentence), ``"prior"`` (add ``weight * log P_grammar(token |
prefix)``: a product of experts, which also forbids every token of probability zero;
weighted grammars only, an ``.fsg`` or a ``.pcfg``) or ``"both"`` (the prior, then the
mask). ``max_len`` (tokens from the processors' reset, end included) bounds the mask of an
automaton: only tokens after which the row can still end in time; PCFG masks have no
such bound. An ``.fsg`` or ``.pcfg`` loaded over a tokenizer (a
:class:`~neurosym.compile.spelling.SpelledGrammar`) gets :class:`~neurosym.decode.tokenized.SpelledPrior`
and :class:`~neurosym.decode.tokenized.SpelledMask`, the same weights read as strings (a
mask alone over a ``.pcfg`` reads a boolean Earley recogniser,
:mod:`neurosym.layers.earley`; with ``"both"`` it reads the prior's exact chart).
"""

from __future__ import annotations

from typing import Any

from neurosym.compile.automaton import Automaton
from neurosym.compile.pcfg import RuleTensors
from neurosym.compile.spelling import SpelledGrammar
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.decode.mask import GrammarMask
from neurosym.decode.priors import FSGPrior
from neurosym.decode.processor import LogitsProcessor
from neurosym.decode.tokenized import SpelledMask, SpelledPrior
from neurosym.errors import NeurosymError

USES = ("mask", "prior", "both")


def grammar_processors(
    grammar: Any, eos_id: int, use: str = "mask", weight: float = 1.0, max_len: int | None = None,
) -> list[LogitsProcessor]:
    """The processors that enforce ``grammar`` (an ``Automaton``, a ``WeightedAutomaton``
    or ``RuleTensors``, as :func:`neurosym.kinds.load_grammar` returns them), in the order
    to apply them; see the module docstring for ``use``, ``weight`` and ``max_len``."""
    if use not in USES:
        raise NeurosymError(f"use must be one of {', '.join(USES)}, got {use!r}")
    if use != "mask" and not (isinstance(weight, (int, float)) and weight > 0):
        raise NeurosymError(f"a grammar prior's weight must be a number > 0, got {weight!r}")
    if isinstance(grammar, SpelledGrammar):  # an .fsg or .pcfg over a tokenizer: the string-level prefix model
        if max_len is not None:
            raise NeurosymError("a completion budget (max_len, max_new_tokens) is supported for automata (regexes, word lists), not grammars read as strings")
        if use == "mask":
            return [SpelledMask(grammar, eos_id)]
        prior = SpelledPrior(grammar, weight, eos_id)
        return [prior] + ([SpelledMask(grammar, eos_id, shared=prior)] if use == "both" else [])  # one string model for both
    if isinstance(grammar, RuleTensors):
        if max_len is not None:
            raise NeurosymError("a completion budget (max_len, max_new_tokens) is supported for automata (regexes, .fsg, word lists), not .pcfg grammars")
        from neurosym.decode.pcfg import PCFGMask, PCFGPrior  # lazy: the prefix-probability charts load only for PCFGs

        prior: list[LogitsProcessor] = [PCFGPrior(grammar, weight, eos_id)] if use != "mask" else []
        return prior + ([PCFGMask(grammar, eos_id)] if use != "prior" else [])
    if not isinstance(grammar, Automaton):
        raise NeurosymError(f"expected a compiled grammar (an Automaton or RuleTensors), got a {type(grammar).__name__}")
    out: list[LogitsProcessor] = []
    if use != "mask":
        if not isinstance(grammar, WeightedAutomaton):
            raise NeurosymError("a grammar prior needs a weighted grammar (an .fsg or a .pcfg); a regex or a word list only masks")
        out.append(FSGPrior(grammar, weight, eos_id))
    if use != "prior":
        out.append(GrammarMask(grammar, eos_id, max_len=max_len))
    return out


def budget_of(grammar: Any, max_len: int | None) -> int | None:
    """``max_len`` where ``grammar`` can bound a completion (an automaton), else None."""
    return None if isinstance(grammar, (RuleTensors, SpelledGrammar)) else max_len


__all__ = ["USES", "budget_of", "grammar_processors"]
