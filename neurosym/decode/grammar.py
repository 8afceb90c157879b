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

from neurosym.decode.guide import USES, guide_of
from neurosym.decode.processor import LogitsProcessor


def grammar_processors(
    grammar: Any, eos_id: int, use: str = "mask", weight: float = 1.0, max_len: int | None = None,
) -> list[LogitsProcessor]:
    """The processors that enforce ``grammar`` (a :class:`~neurosym.decode.guide.Guide`, or
    a compiled grammar as :func:`neurosym.kinds.load_grammar` returns it: its guide is
    :func:`~neurosym.decode.guide.guide_of`), in the order to apply them; see the module
    docstring for ``use``, ``weight`` and ``max_len``. What a grammar can do is its guide's
    to say (:meth:`~neurosym.decode.guide.Guide.processors`)."""
    return guide_of(grammar).processors(eos_id, use, weight, max_len)


def budget_of(grammar: Any, max_len: int | None) -> int | None:
    """``max_len`` where ``grammar``'s guide can bound a completion (an automaton), else None."""
    return max_len if guide_of(grammar).bounded else None


__all__ = ["USES", "budget_of", "grammar_processors"]
