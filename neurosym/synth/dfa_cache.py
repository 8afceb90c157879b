"""Compiled DFAs of synthesis regexes, cached by printed pattern (an LRU of
:func:`neurosym.compile.regex.pattern_dfa` results)."""

from __future__ import annotations

from collections import OrderedDict

from neurosym.compile.regex import Limits, pattern_dfa  # the same DFA as compile_regex(p).char_dfa
from neurosym.synth.regex_ast import Node, to_pattern
from neurosym.synth.simplify import simplify


class DFACache:
    """An LRU cache of compiled character DFAs, keyed by canonical pattern text.

    Compilation is capped (``max_states``, ``time_limit`` seconds): a search must not
    stall on one candidate whose DFA blows up; such a candidate raises
    :class:`~neurosym.errors.CompileError`."""

    def __init__(self, maxsize: int = 4096, max_states: int = 1000, time_limit: float = 2.0):
        self.maxsize = maxsize
        self.max_states = max_states
        self.time_limit = time_limit
        self._d: OrderedDict[str, object] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __call__(self, r: Node | str):
        """The minimal :class:`~neurosym.compile.dfa.CharDFA` of a node or pattern."""
        pattern = to_pattern(simplify(r)) if isinstance(r, Node) else r
        d = self._d.get(pattern)
        if d is not None:
            self.hits += 1
            self._d.move_to_end(pattern)
            return d
        self.misses += 1

        d = pattern_dfa(pattern, limits=Limits(self.max_states, self.time_limit))
        self._d[pattern] = d
        if len(self._d) > self.maxsize:
            self._d.popitem(last=False)
        return d


compiled_dfa = DFACache()


__all__ = ["DFACache", "compiled_dfa"]
