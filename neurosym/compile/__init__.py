"""Compilers from parsed files to tensors: automata (regexes, banks), and their artifacts."""

from neurosym.compile.automaton import Automaton
from neurosym.compile.regex import Limits, RegexBank, compile_bank, compile_regex, load_regex

__all__ = ["Automaton", "Limits", "RegexBank", "compile_bank", "compile_regex", "load_regex"]
