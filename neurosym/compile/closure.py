"""PCFG and FSG quantities that are fixed points, each written once.

* :func:`sparse_star`: the real-semiring star ``W* = (I - W)^-1`` of a sparse weight
  relation (unit-rule chains of a PCFG in compile/cnf.py, <eps> arcs of an FSG in
  compile/fsg.py, left-corner chains of prefix probabilities in layers/prefix.py).
* :func:`least_fixed_point`: the least non-negative solution of a PCFG's polynomial
  system ``x = f(x)`` (probabilities of deriving the empty string in compile/cnf.py,
  partition functions in layers/prefix.py): Newton steps from 0, then fixed-point steps.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, shortest_path
from scipy.sparse.linalg import splu

from neurosym.errors import CompileError

FIXPOINT_TOL = 1e-15  # relative change at which the least-fixed-point iteration stops
FIXPOINT_MAX_ITER = 100_000
FIXPOINT_DIVERGED = 1e30  # a component past this: the system has no finite solution


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
    if spectral_radius(W) >= 1 - 1e-12:
        raise CompileError(cycle)
    hops = shortest_path(sp.csr_matrix(W > 0), method="D", unweighted=True, directed=True)
    if k <= 64:
        star = np.linalg.inv(np.eye(k) - W)
    else:  # a sparse LU: grammars' chains are sparse, and a dense inverse is cubic in k
        star = splu(sp.csc_matrix(sp.identity(k) - sp.csr_matrix(W))).solve(np.eye(k))
    inner = np.where(np.isfinite(hops), star, 0.0)
    r, c = np.nonzero(inner)
    outside = np.setdiff1d(np.arange(n), touched)
    rows = np.concatenate([outside, touched[r]])
    cols = np.concatenate([outside, touched[c]])
    vals = np.concatenate([np.ones(len(outside)), inner[r, c]])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))


def spectral_radius(W: np.ndarray) -> float:
    """The spectral radius of a non-negative (k, k) matrix: the largest over its strongly
    connected components (an acyclic part has only zero eigenvalues), each block's
    eigenvalues computed on its own — a grammar's chains are mostly acyclic, so this costs
    far less than the eigenvalues of the whole matrix."""
    k = W.shape[0]
    if k == 0:
        return 0.0
    n_comp, comp = connected_components(sp.csr_matrix(W != 0), directed=True, connection="strong")
    radius = 0.0
    sizes = np.bincount(comp, minlength=n_comp)
    loops = np.abs(np.diag(W))
    for c in np.nonzero(sizes > 1)[0]:
        idx = np.nonzero(comp == c)[0]
        radius = max(radius, float(np.max(np.abs(np.linalg.eigvals(W[np.ix_(idx, idx)])))))
    single = sizes[comp] == 1
    if single.any():
        radius = max(radius, float(loops[single].max()))
    return radius


def least_fixed_point(n: int, lhs: np.ndarray, left: np.ndarray, right: np.ndarray, p: np.ndarray, constants: np.ndarray) -> np.ndarray | None:
    """(n,) the least non-negative solution of ``x_a = sum_{r: lhs[r] = a} p[r] v[left[r]] v[right[r]]``
    with ``v = concat(x, constants)`` (so a rule may read unknowns and constants:
    ``constants`` holds 1 for rules of fewer than two symbols, a preterminal's total weight,
    ...; all non-negative).

    Newton's method from 0 (a step solves ``(I - J) d = f(x) - x``) while ``I - J`` is a
    nonsingular M-matrix (spectral radius of ``J`` below 1), where each step stays below
    the least solution; a plain fixed-point step ``x <- f(x)`` elsewhere; never below the
    fixed-point step, so the iterates rise monotonically. Stops when no component moves
    by more than ``FIXPOINT_TOL`` relative. A component that has no derivation stays exactly
    0. Returns ``None`` when the iterates diverge (the system has no finite solution)."""
    lhs, left, right = (np.asarray(a, dtype=np.int64) for a in (lhs, left, right))
    p = np.asarray(p, dtype=np.float64)
    v = np.concatenate([np.zeros(n), np.asarray(constants, dtype=np.float64)])
    if n == 0:
        return v[:0]
    eye = np.eye(n)
    for _ in range(FIXPOINT_MAX_ITER):
        x = v[:n]
        f = np.bincount(lhs, weights=p * v[left] * v[right], minlength=n)
        J = np.zeros((n, len(v)))
        np.add.at(J, (lhs, left), p * v[right])
        np.add.at(J, (lhs, right), p * v[left])
        JN = J[:, :n]
        step = f - x
        if np.max(np.abs(np.linalg.eigvals(JN))) < 1:
            newton = np.linalg.solve(eye - JN, step)
            if np.all(np.isfinite(newton)):
                step = newton
        new = np.maximum(x + step, f)
        if not np.all(np.isfinite(new)) or new.max() > FIXPOINT_DIVERGED:
            return None
        done = np.all(np.abs(new - x) <= FIXPOINT_TOL * new)
        v[:n] = new
        if done:
            return v[:n].copy()
    return None


__all__ = ["least_fixed_point", "sparse_star", "spectral_radius"]
