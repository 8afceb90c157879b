"""neurosym: symbolic grammars compiled to tensors for neural language models.

Public API::

    import neurosym
    bank = neurosym.load("grammars/dates.regex")          # a RegexBank
    auto = neurosym.compile_regex(r"(19|20)\\d{2}")         # an Automaton over characters
"""

from __future__ import annotations

from pathlib import Path

from neurosym import kinds
from neurosym.compile.automaton import Automaton
from neurosym.compile.lexicon import FeatureBank
from neurosym.compile.pcfg import RuleTensors
from neurosym.compile.regex import Limits, RegexBank, compile_regex
from neurosym.compile.weighted import Entropy, WeightedAutomaton
from neurosym.errors import CompileError, ConfigError, NeurosymError, SourceError, TaskError
from neurosym.version import __version__
from neurosym.vocab import Vocab


def load(path: str | Path, vocab: Vocab | None = None, **limits):
    """Parse and compile a grammar file (or read a compiled artifact), chosen by its
    suffix through the registry :mod:`neurosym.kinds`.

    ``.regex`` gives a :class:`RegexBank`, ``.fsg`` a :class:`WeightedAutomaton`,
    ``.pcfg`` a :class:`RuleTensors`, ``.lex`` a :class:`FeatureBank` and
    ``.safetensors`` the object it holds. ``limits`` (``max_states``, ``time_limit``)
    cap the compilation of automata."""
    return kinds.load(path, vocab, Limits(**limits))


__all__ = [
    "Automaton",
    "CompileError",
    "ConfigError",
    "Entropy",
    "FeatureBank",
    "Limits",
    "NeurosymError",
    "RegexBank",
    "RuleTensors",
    "SourceError",
    "TaskError",
    "Vocab",
    "WeightedAutomaton",
    "compile_regex",
    "load",
    "__version__",
]
