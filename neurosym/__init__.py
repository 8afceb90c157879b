"""neurosym: symbolic grammars compiled to tensors for neural language models.

Public API::

    import neurosym
    bank = neurosym.load("grammars/dates.regex")          # a RegexBank
    auto = neurosym.compile_regex(r"(19|20)\\d{2}")         # an Automaton over characters
"""

from __future__ import annotations

from pathlib import Path

from neurosym.compile.automaton import Automaton
from neurosym.compile.lexicon import FeatureBank, load_lexicon
from neurosym.compile.fsg import load_fsg
from neurosym.compile.pcfg import RuleTensors, load_pcfg
from neurosym.compile.weighted import Entropy, WeightedAutomaton
from neurosym.compile.regex import Limits, RegexBank, compile_regex, load_regex
from neurosym.errors import CompileError, ConfigError, NeurosymError, SourceError
from neurosym.vocab import Vocab

__version__ = "0.1.0"

LOADERS = {".regex": load_regex, ".fsg": load_fsg, ".pcfg": load_pcfg, ".lex": load_lexicon}


def load(path: str | Path, vocab: Vocab | None = None, **limits):
    """Parse and compile a grammar file, chosen by its extension.

    ``.regex`` gives a :class:`RegexBank`, ``.fsg`` a :class:`WeightedAutomaton`,
    ``.pcfg`` a :class:`RuleTensors` and ``.lex`` a :class:`FeatureBank`. ``limits``
    (``max_states``, ``time_limit``) cap the compilation of automata.
    """
    path = Path(path)
    loader = LOADERS.get(path.suffix)
    if loader is None:
        known = ", ".join(sorted(LOADERS))
        raise NeurosymError(f"{path}: unknown file kind {path.suffix or '(no extension)'!r}; expected one of {known}")
    if not path.is_file():
        raise NeurosymError(f"{path}: no such file")
    return loader(path, vocab, Limits(**limits))


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
    "Vocab",
    "WeightedAutomaton",
    "compile_regex",
    "load",
    "__version__",
]
