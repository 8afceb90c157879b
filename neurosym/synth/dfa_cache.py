"""Compiled DFAs of synthesis regexes, cached by printed pattern (an LRU of
:func:`neurosym.compile.regex.pattern_dfa` results, bounded in entries and bytes)."""

from __future__ import annotations

from collections import OrderedDict

from neurosym.compile.regex import Limits, pattern_dfa  # the same DFA as compile_regex(p).char_dfa
from neurosym.synth.regex_ast import Node, to_pattern
from neurosym.synth.simplify import simplify

MAX_CACHE_MB = 128


def dfa_bytes(dfa) -> int:
    """Bytes a cached DFA may come to hold: its tables plus the edit-distance tables
    :mod:`neurosym.synth.distance` attaches to it (``(K + 1) S^2 + 2 S`` float64s)."""
    S, K = dfa.trans.shape
    return int(dfa.trans.nbytes + dfa.final.nbytes + 8 * ((K + 1) * S * S + 2 * S) + 1024)


class DFACache:
    """An LRU cache of compiled character DFAs, keyed by canonical pattern text.

    It holds at most ``maxsize`` DFAs and at most ``max_mb`` MB of them (by
    :func:`dfa_bytes`), dropping the least recently used first; a DFA larger than the
    whole budget is returned but not kept. Compilation is capped (``max_states``,
    ``time_limit`` seconds): a search must not stall on one candidate whose DFA blows
    up; such a candidate raises :class:`~neurosym.errors.CompileError`."""

    def __init__(self, maxsize: int = 4096, max_states: int = 1000, time_limit: float = 2.0, max_mb: float = MAX_CACHE_MB):
        self.maxsize = maxsize
        self.max_states = max_states
        self.time_limit = time_limit
        self.max_bytes = int(max_mb * 2**20)
        self._d: OrderedDict[str, tuple[object, int]] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._d)

    def __call__(self, r: Node | str):
        """The minimal :class:`~neurosym.compile.dfa.CharDFA` of a node or pattern."""
        pattern = to_pattern(simplify(r)) if isinstance(r, Node) else r
        hit = self._d.get(pattern)
        if hit is not None:
            self.hits += 1
            self._d.move_to_end(pattern)
            return hit[0]
        self.misses += 1
        d = pattern_dfa(pattern, limits=Limits(self.max_states, self.time_limit))
        size = dfa_bytes(d)
        if size > self.max_bytes:
            return d
        self._d[pattern] = (d, size)
        self.bytes += size
        while len(self._d) > self.maxsize or self.bytes > self.max_bytes:
            _, (_, dropped) = self._d.popitem(last=False)
            self.bytes -= dropped
        return d


compiled_dfa = DFACache()


__all__ = ["DFACache", "MAX_CACHE_MB", "compiled_dfa", "dfa_bytes"]
