"""compile/closure.sparse_star against a dense inverse and a brute-force path sum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.compile.closure import sparse_star
from neurosym.errors import CompileError


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8), k=st.integers(0, 10))
def test_sparse_star_equals_the_dense_inverse_with_exact_zeros(seed, n, k):
    rng = np.random.default_rng(seed)
    W = np.zeros((n, n))
    for _ in range(k):
        W[rng.integers(n), rng.integers(n)] += rng.random()
    rows = W.sum(axis=1, keepdims=True)
    W = np.where(rows > 0, 0.9 * W / np.maximum(rows, 1e-300), 0.0)  # substochastic: the closure converges
    weights = {(a, b): W[a, b] for a, b in zip(*np.nonzero(W))}
    star = sparse_star(weights, n, "cycle").toarray()
    np.testing.assert_allclose(star, np.linalg.inv(np.eye(n) - W), atol=1e-10)
    reach = np.eye(n, dtype=bool) | (W > 0)
    for _ in range(n):
        reach = reach | ((reach.astype(int) @ (W > 0).astype(int)) > 0)
    assert np.array_equal(star != 0, reach)  # no path, exactly zero


def test_a_cycle_that_is_never_left_is_an_error():
    with pytest.raises(CompileError, match="^the cycle$"):
        sparse_star({(0, 1): 1.0, (1, 0): 1.0}, 3, "the cycle")
    assert sparse_star({}, 2, "x").toarray().tolist() == [[1.0, 0.0], [0.0, 1.0]]
