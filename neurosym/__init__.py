"""neurosym: symbolic grammars compiled to tensors for neural language models.

Public API::

    import neurosym
    bank = neurosym.load("grammars/dates.regex")          # a RegexBank
    auto = neurosym.compile_regex(r"(19|20)\\d{2}")         # an Automaton over characters
    date = neurosym.load_grammar("grammars/dates.regex:DATE", vocab)   # one grammar to decode with, over vocab
    vocab = neurosym.Vocab.from_tokenizer("tokenizer.json")           # a tokenizer's vocabulary, built once
    guide = neurosym.compile_guide("grammars/json.pcfg", vocab)       # a grammar compiled once for it: guide.matcher()

The names below load their modules on first use (PEP 562), so ``import neurosym`` (and
``neurosym --help``) does not pay for torch until something needs it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from neurosym.errors import CompileError, ConfigError, NeurosymError, SourceError, TaskError
from neurosym.version import __version__

_LAZY = {
    "Automaton": "neurosym.compile.automaton",
    "Entropy": "neurosym.compile.weighted",
    "FeatureBank": "neurosym.compile.lexicon",
    "Limits": "neurosym.compile.regex",
    "RegexBank": "neurosym.compile.regex",
    "RuleTensors": "neurosym.compile.pcfg",
    "Vocab": "neurosym.vocab",
    "WeightedAutomaton": "neurosym.compile.weighted",
    "Guide": "neurosym.decode.guide",
    "Matcher": "neurosym.decode.guide",
    "compile_guide": "neurosym.decode.guide",
    "compile_regex": "neurosym.compile.regex",
    "load_grammar": "neurosym.kinds",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:  # a subpackage or module: neurosym.kinds, neurosym.layers, ...
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def load(path: str | Path, vocab=None, dtype=None, **limits):
    """Parse and compile a grammar file (or read a compiled artifact), chosen by its
    suffix through the registry :mod:`neurosym.kinds`.

    ``.regex`` gives a :class:`RegexBank`, ``.fsg`` a :class:`WeightedAutomaton`,
    ``.pcfg`` a :class:`RuleTensors`, ``.lex`` a :class:`FeatureBank`, ``.txt`` (a word
    list) an :class:`Automaton` and ``.safetensors`` the object it holds; a kind
    registered with :func:`neurosym.kinds.register` is read too. ``limits``
    (``max_states``, ``time_limit``) cap the compilation of automata. ``dtype`` casts a
    ``.pcfg``'s rule tensors (float64 by default, computed from the file's text at full
    precision; ``torch.float32`` rounds them once). For one grammar to decode with
    (``FILE.regex:NAME``, a regex string, ...) see :func:`load_grammar`."""
    from neurosym import kinds  # lazy: the registry imports every compiler (and torch)
    from neurosym.compile.regex import Limits  # lazy: as above

    return kinds.load(path, vocab, Limits(**limits), dtype=dtype)


__all__ = [
    "Automaton",
    "CompileError",
    "ConfigError",
    "Entropy",
    "FeatureBank",
    "Guide",
    "Limits",
    "Matcher",
    "NeurosymError",
    "RegexBank",
    "RuleTensors",
    "SourceError",
    "TaskError",
    "Vocab",
    "WeightedAutomaton",
    "compile_guide",
    "compile_regex",
    "load",
    "load_grammar",
    "__version__",
]
