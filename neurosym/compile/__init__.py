"""Compilers from parsed files to tensors: regexes and banks to automata, FSGs to
weighted automata, PCFGs to rule tensors, lexicons to feature banks, and the artifacts
that save them. The package re-exports the regex compiler; the others are in their
modules (:mod:`.fsg`, :mod:`.pcfg`, :mod:`.lexicon`, :mod:`.artifact`)."""

from neurosym.compile.automaton import Automaton
from neurosym.compile.regex import Limits, RegexBank, compile_bank, compile_regex, load_regex

__all__ = ["Automaton", "Limits", "RegexBank", "compile_bank", "compile_regex", "load_regex"]
