"""Exact Levenshtein distance from strings to the language of a character DFA.

``d(s, L) = min over w in L of lev(s, w)`` by a dynamic program over (position, state),
vectorised over states and over a batch of strings (padded, with lengths):

* ``D[0] = closure(start)``; from ``D[i]`` to ``D[i+1]`` reading ``s[i]``:
  a *match* follows an arc labelled with ``s[i]``'s class (cost 0), a *substitution*
  follows any arc (cost 1), a *deletion* stays in place (cost 1);
* every layer is then closed under *insertions* (follow any arc without reading,
  cost 1) with one min-plus product by the all-pairs arc-count distances ``G``
  (Floyd-Warshall over the DFA's arc graph, computed once per DFA);
* the answer is the least cost in a final state after the last character.

Every class of the DFA's partition has at least one character (class 0 holds every
character the pattern does not mention), so each arc stands for a real character.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from neurosym.layers.softlev import automaton_edit_distance
from neurosym.semiring import LOG_ZERO, MIN_PLUS

INF = -LOG_ZERO  # the min-plus (cost) zero: an impossible edit path


class DistanceTables:
    """Per-DFA tables of the edit-distance program (cached on the DFA object), as float64
    tensors for :func:`neurosym.layers.softlev.automaton_edit_distance` in (min, +)."""

    def __init__(self, dfa):
        trans = np.asarray(dfa.trans)
        S, K = trans.shape
        adj = np.zeros((S, S), dtype=bool)
        src, k = np.nonzero(trans >= 0)
        adj[src, trans[src, k]] = True
        big = MIN_PLUS.zero
        self.insert = torch.from_numpy(np.where(adj, 1.0, big))  # (S, S): insert a character along any arc
        read = np.broadcast_to(np.where(adj, 1.0, big), (K, S, S)).copy()  # substitute: follow any arc
        read[k, src, trans[src, k]] = 0.0  # match: read a character of class k along its own arc
        self.read = torch.from_numpy(read)  # (K, S, S)
        self.start = torch.full((S,), big, dtype=torch.float64)
        self.start[0] = 0.0
        self.final = torch.from_numpy(np.where(np.asarray(dfa.final, dtype=bool), 0.0, big))
        self.S = S


def _tables(dfa) -> DistanceTables:
    t = getattr(dfa, "_synth_distance_tables", None)
    if t is None:
        t = DistanceTables(dfa)
        try:
            object.__setattr__(dfa, "_synth_distance_tables", t)
        except AttributeError:  # pragma: no cover - slotted DFA
            pass
    return t


def encode(dfa, strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Class ids of a batch of strings, padded: ``(classes (B, Lmax), lengths (B,))``."""
    rows = [dfa.partition.classify(s) for s in strings]
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    L = int(lengths.max()) if len(rows) else 0
    cls = np.zeros((len(rows), max(L, 1)), dtype=np.int64)
    for b, r in enumerate(rows):
        cls[b, : len(r)] = r
    return cls, lengths


def distances(dfa, strings: Sequence[str]) -> np.ndarray:
    """The edit distance of every string to the DFA's language, as a float array
    (``inf`` when the language is empty): the shared edit-distance program in (min, +)."""
    B = len(strings)
    if B == 0:
        return np.zeros(0)
    t = _tables(dfa)
    cls, lengths = encode(dfa, strings)
    symbols = torch.from_numpy(cls)
    active = torch.arange(symbols.shape[1]) < torch.from_numpy(lengths)[:, None]
    with torch.no_grad():
        d = automaton_edit_distance(t.read, symbols, active, t.start, t.final, t.insert, 1.0, MIN_PLUS).numpy()
    return np.where(d >= MIN_PLUS.zero, INF, d)


def objective(
    dfa,
    positives: Sequence[str],
    negatives: Sequence[str] = (),
    size: int = 0,
    lam: float = 0.05,
    neg_penalty: float = 1.0,
    miss_penalty: float = 0.5,
) -> tuple[float, np.ndarray, int]:
    """``median distance of positives + neg_penalty * accepted negatives + lam * size``,
    plus ``miss_penalty`` times the fraction of rejected positives (a tie-break: the
    median alone does not see a minority of rejected positives).

    Returns ``(score, distances of positives, number of accepted negatives)``; lower is
    better, and ``score == lam * size`` exactly when every example is satisfied."""
    d = distances(dfa, positives) if len(positives) else np.zeros(0)
    med = float(np.median(d)) if len(d) else 0.0
    if not np.isfinite(med):
        med = 1e6
    miss = float((d > 0).mean()) if len(d) else 0.0
    bad = sum(dfa.accepts(s) for s in negatives)
    return med + miss_penalty * miss + neg_penalty * bad + lam * size, d, int(bad)


__all__ = ["DistanceTables", "distances", "encode", "objective"]
