"""The real-semiring star ``W* = (I - W)^-1`` of a sparse weight relation, written once:
unit-rule chains of a PCFG (compile/cnf.py) and <eps> arcs of an FSG (compile/fsg.py)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from neurosym.errors import CompileError


def sparse_star(weights: dict[tuple[int, int], float], n: int, cycle: str) -> sp.csr_matrix:
    """(n, n) sparse ``(I - W)^-1`` for ``W[a, b] = weights[a, b]`` (summed over nothing
    else): the total weight of every path from a to b, the empty path included.

    Only the k symbols the weights touch need a dense (k, k) inverse; every other row is
    the identity. Entries with no path stay exactly 0 (reachability is found by a
    breadth-first search, not read off the inverse). A closure that diverges (spectral
    radius >= 1: a cycle never left) raises ``CompileError(cycle)``."""
    weights = {key: w for key, w in weights.items() if w != 0}
    if not weights:
        return sp.identity(n, format="csr")
    touched = np.array(sorted({s for key in weights for s in key}), dtype=np.int64)
    at = {int(s): i for i, s in enumerate(touched)}
    k = len(touched)
    W = np.zeros((k, k))
    for (a, b), w in weights.items():
        W[at[a], at[b]] += w
    if np.max(np.abs(np.linalg.eigvals(W))) >= 1 - 1e-12:
        raise CompileError(cycle)
    hops = shortest_path(sp.csr_matrix(W > 0), method="D", unweighted=True, directed=True)
    inner = np.where(np.isfinite(hops), np.linalg.inv(np.eye(k) - W), 0.0)
    r, c = np.nonzero(inner)
    outside = np.setdiff1d(np.arange(n), touched)
    rows = np.concatenate([outside, touched[r]])
    cols = np.concatenate([outside, touched[c]])
    vals = np.concatenate([np.ones(len(outside)), inner[r, c]])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
