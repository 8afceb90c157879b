"""Differentiable symbolic layers: the inside algorithm over PCFG rule tensors, the
WFSA regex layer, soft Levenshtein, differentiable stacks and sequence encoders."""

from neurosym.layers.softlev import soft_levenshtein, soft_levenshtein_to_automaton
from neurosym.layers.wfsa import RegexLayer

__all__ = ["RegexLayer", "soft_levenshtein", "soft_levenshtein_to_automaton"]
