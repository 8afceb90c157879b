"""WeightedAutomaton.cyclic_components against an independent reference: the transitive
closure of the live-arc relation by repeated boolean matrix products (issue 14.6: what
`inspect` of an FSG artifact reports as its cycles)."""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.compile.weighted import WeightedAutomaton
from neurosym.vocab import Vocab


def reference_components(delta: np.ndarray, live: np.ndarray) -> list[list[int]]:
    """States on a cycle, grouped by mutual reachability (closure by squaring)."""
    Q = delta.shape[0]
    step = np.zeros((Q, Q), dtype=bool)
    for q, v in zip(*np.nonzero(live)):
        step[q, delta[q, v]] = True
    reach = step.copy()
    for _ in range(max(1, Q).bit_length() + 1):
        reach = reach | ((reach.astype(int) @ reach.astype(int)) > 0)
    on_cycle = [q for q in range(Q) if reach[q, q]]
    groups: dict[tuple, list[int]] = {}
    for q in on_cycle:
        key = tuple(p for p in on_cycle if reach[q, p] and reach[p, q])
        groups.setdefault(key, []).append(q)
    return sorted(sorted(g) for g in groups.values())


@st.composite
def automata(draw):
    Q, V = draw(st.integers(1, 7)), draw(st.integers(1, 4))
    delta = np.array(draw(st.lists(st.integers(-1, Q - 1), min_size=Q * V, max_size=Q * V))).reshape(Q, V)
    weights = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=Q * V, max_size=Q * V))).reshape(Q, V)
    weights = np.where(delta >= 0, weights, 0.0)
    stop = np.array(draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=Q, max_size=Q)))
    total = weights.sum(1) + stop
    stop = np.where(total == 0, 1.0, stop)  # a state with nothing to do stops
    total = weights.sum(1) + stop
    with np.errstate(divide="ignore"):
        lp, fl = np.log(weights / total[:, None]), np.log(stop / total)
    return delta, lp, fl


@given(automata())
@settings(max_examples=150, deadline=None)
def test_cyclic_components_match_the_transitive_closure(parts):
    delta, lp, fl = parts
    vocab = Vocab.words([f"t{i}" for i in range(delta.shape[1])], specials=())
    w = WeightedAutomaton(torch.tensor(delta), torch.tensor(lp), torch.tensor(fl), vocab)
    live = (delta >= 0) & (lp > -math.inf)  # a zero-probability arc is no path
    assert w.cyclic_components() == reference_components(delta, live)
