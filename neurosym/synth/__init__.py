"""Regex synthesis from example strings.

::

    from neurosym.synth import synthesize
    res = synthesize(["0", "10", "110"], ["1", "01"], time_budget=5)
    res.pattern, res.solved          # e.g. '[01]*0', True

Methods (the registry :mod:`neurosym.synth.methods`; add one with
:func:`~neurosym.synth.methods.register_method`): ``"beam"`` (over text, format induction first — character classes and
counts learned from the examples, :mod:`neurosym.synth.generalise`; then AlphaRegex-style best-first enumeration with pruning, then a
local beam search on the edit-distance objective), ``"evolve"`` (a genetic algorithm
over ASTs) and ``"reinforce"`` (a GRU policy emitting prefix-order tokens, trained by
REINFORCE). Every result is compiled with :func:`neurosym.compile_regex`; ``solved``
means it accepts every positive and no negative, checked with the compiled DFA *and*
with Python's ``re.fullmatch``.

The names below load their modules on first use (PEP 562): reading the method
registry (``neurosym synth --help``) loads neither numpy nor torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "SynthResult": "neurosym.synth.synthesis",
    "distances": "neurosym.synth.distance",
    "get_method": "neurosym.synth.methods",
    "method_names": "neurosym.synth.methods",
    "objective": "neurosym.synth.distance",
    "register_method": "neurosym.synth.methods",
    "score_on_examples": "neurosym.synth.synthesis",
    "synthesize": "neurosym.synth.synthesis",
    "synthesize_corpus": "neurosym.synth.corpus",
    "unregister_method": "neurosym.synth.methods",
    "write_to_bank": "neurosym.synth.bank",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:  # submodules (neurosym.synth.regex_ast, ...) are found by the import system
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "SynthResult",
    "distances",
    "get_method",
    "method_names",
    "objective",
    "register_method",
    "score_on_examples",
    "synthesize",
    "synthesize_corpus",
    "unregister_method",
    "write_to_bank",
]
