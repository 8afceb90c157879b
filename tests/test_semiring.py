"""Semirings against naive broadcast-and-reduce references (float64), with -inf entries,
badly balanced operands, shared right operands and gradients."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import neurosym.semiring as semiring_module
from neurosym.semiring import MIN_PLUS, LogSemiring, MaxSemiring, SoftMinSemiring

NEG = float("-inf")
DT = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")


def naive_log_matmul(a, b):
    return torch.logsumexp(a[..., :, :, None] + b[..., None, :, :], -2)


def naive_max_matmul(a, b):
    return (a[..., :, :, None] + b[..., None, :, :]).amax(-2)


def randn(*shape, seed=0):
    return torch.randn(*shape, dtype=DT, generator=torch.Generator().manual_seed(seed))


def with_holes(x, p=0.3, seed=1):
    """``x`` with a fraction ``p`` of entries set to -inf, plus one all -inf row and column."""
    x = x.clone()
    x[torch.rand(x.shape, generator=torch.Generator().manual_seed(seed)) < p] = NEG
    x[..., 0, :] = NEG
    x[..., :, -1] = NEG
    return x


def check_close(ours, ref, tol=1e-9):
    assert ours.shape == ref.shape
    assert torch.equal(torch.isneginf(ours), torch.isneginf(ref))
    fin = torch.isfinite(ref)
    assert not torch.isnan(ours).any()
    assert torch.allclose(ours[fin], ref[fin], rtol=tol, atol=tol)


# ---------------------------------------------------------------------- log semiring: values
@pytest.mark.parametrize("shape_a, shape_b", [((4, 5), (5, 3)), ((2, 4, 5), (2, 5, 3)), ((2, 3, 4, 5), (5, 6)), ((1, 4, 5), (3, 5, 2))])
def test_log_matmul_matches_naive(shape_a, shape_b):
    a, b = randn(*shape_a, seed=0) * 3, randn(*shape_b, seed=1) * 3
    check_close(LogSemiring.matmul(a, b), naive_log_matmul(a, b))


def test_log_matmul_with_minus_inf_entries_rows_and_columns():
    a, b = with_holes(randn(3, 6, 7, seed=2), seed=3), with_holes(randn(3, 7, 5, seed=4), seed=5)
    a[1] = NEG  # a whole batch entry
    out = LogSemiring.matmul(a, b)
    check_close(out, naive_log_matmul(a, b))
    assert torch.isneginf(out[:, 0]).all() and torch.isneginf(out[..., -1]).all() and torch.isneginf(out[1]).all()


def test_log_matmul_balances_opposite_trends():
    """The inside pass's case: left scores grow with k and right scores shrink, so the
    two maxima over k sit at opposite ends, far above every term a[i, k] + b[k, j]."""
    k = torch.arange(30, dtype=DT)
    a = randn(4, 30, seed=6) + 40 * k  # (I, K)
    b = randn(30, 5, seed=7) - 40 * k[:, None]  # (K, J)
    check_close(LogSemiring.matmul(a, b), naive_log_matmul(a, b))
    check_close(LogSemiring.matmul(a.float(), b.float()).double(), naive_log_matmul(a, b), tol=1e-4)


def test_log_matmul_large_offsets():
    a, b = randn(2, 3, 4, seed=8) + 500, randn(2, 4, 3, seed=9) - 900
    check_close(LogSemiring.matmul(a, b), naive_log_matmul(a, b))


def test_prepared_operand_is_reused_and_sliced():
    b = with_holes(randn(5, 6, 4, seed=10), seed=11)
    prepared = LogSemiring.prepare(b)
    for seed in (12, 13):
        a = randn(5, 3, 6, seed=seed)
        check_close(LogSemiring.matmul(a, prepared), naive_log_matmul(a, b))
    a = randn(2, 3, 6, seed=14)
    check_close(LogSemiring.matmul(a, prepared[1:3]), naive_log_matmul(a, b[1:3]))
    assert MaxSemiring.prepare(b) is b


# ---------------------------------------------------------------------- log semiring: gradients
def finite_entries(a, b, op):
    """``op`` as a function of the finite entries of ``a`` and ``b`` only (the -inf ones
    stay fixed), returning its finite outputs: gradcheck cannot perturb -inf."""
    ma, mb = torch.isfinite(a), torch.isfinite(b)
    keep = torch.isfinite(op(a, b))

    def f(x, y):
        A = torch.full_like(a, NEG).masked_scatter(ma, x)
        B = torch.full_like(b, NEG).masked_scatter(mb, y)
        return op(A, B)[keep]

    return f, (a[ma].clone().requires_grad_(), b[mb].clone().requires_grad_())


@pytest.mark.parametrize("shape_a, shape_b", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)), ((2, 2, 3, 4), (2, 1, 4, 5))])
def test_log_matmul_gradcheck(shape_a, shape_b):
    a, b = randn(*shape_a, seed=14).requires_grad_(), randn(*shape_b, seed=15).requires_grad_()
    assert torch.autograd.gradcheck(LogSemiring.matmul, (a, b))


def test_log_matmul_gradcheck_with_minus_inf():
    a, b = with_holes(randn(2, 4, 5, seed=16), seed=17), with_holes(randn(2, 5, 4, seed=18), seed=19)
    assert torch.autograd.gradcheck(*finite_entries(a, b, LogSemiring.matmul))


def test_log_matmul_gradients_match_naive_and_have_no_nan():
    a, b = with_holes(randn(3, 5, 6, seed=20), seed=21), with_holes(randn(3, 6, 4, seed=22), seed=23)
    a.requires_grad_(), b.requires_grad_()
    out = LogSemiring.matmul(a, b)
    g = randn(*out.shape, seed=24)
    ga, gb = torch.autograd.grad(out, (a, b), g)
    assert not ga.isnan().any() and not gb.isnan().any()
    # reference: d out[i, j] / d a[i, k] = exp(a[i, k] + b[k, j] - out[i, j]) over finite outputs
    ref = naive_log_matmul(a.detach(), b.detach())
    w = torch.exp(a.detach()[..., :, :, None] + b.detach()[..., None, :, :] - ref[..., :, None, :])
    w = torch.where(torch.isfinite(ref)[..., :, None, :], w, 0.0).nan_to_num(0.0)
    assert torch.allclose(ga, (w * g[..., :, None, :]).sum(-1), atol=1e-12)
    assert torch.allclose(gb, (w * g[..., :, None, :]).sum(-3), atol=1e-12)


def test_prepared_operand_gradients_sum_over_uses():
    b = randn(4, 5, 3, seed=25).requires_grad_()
    a1, a2 = randn(2, 4, 4, 5, seed=26).requires_grad_(), randn(2, 3, 5, seed=27).requires_grad_()
    p = LogSemiring.prepare(b)
    ours = torch.autograd.grad(LogSemiring.matmul(a1, p).sum() + LogSemiring.matmul(a2, p[1:3]).exp().sum(), (a1, a2, b))
    ref = torch.autograd.grad(naive_log_matmul(a1, b).sum() + naive_log_matmul(a2, b[1:3]).exp().sum(), (a1, a2, b))
    for x, y in zip(ours, ref):
        assert torch.allclose(x, y, atol=1e-10)


def test_log_sum_and_plus():
    x = with_holes(randn(4, 6, seed=28), seed=29).requires_grad_()
    out = LogSemiring.sum(x, -1)
    assert torch.isneginf(out[0])  # the all -inf row
    assert torch.allclose(out[1:], torch.logsumexp(x.detach(), -1)[1:])
    (g,) = torch.autograd.grad(out.sum(), x)
    assert not g.isnan().any() and torch.all(g[0] == 0)
    assert torch.allclose(g[1:], torch.softmax(x.detach()[1:], -1))
    a, b = randn(3, seed=30), torch.tensor([NEG, 0.5, NEG], dtype=DT)
    assert torch.allclose(LogSemiring.plus(a, b), torch.logaddexp(a, b))
    assert torch.isneginf(LogSemiring.plus(torch.tensor(NEG), torch.tensor(NEG)))
    assert torch.equal(LogSemiring.times(a, b), a + b)
    assert LogSemiring.zero == NEG and LogSemiring.one == 0.0
    assert torch.autograd.gradcheck(lambda y: LogSemiring.sum(y, 0), (randn(5, 3, seed=31).requires_grad_(),))


def plain_log_sum(x, dim):
    """The log-semiring sum by autograd of the textbook formula (the reference for the
    custom Function): shifted by the finite max, -inf and a zero gradient where every
    term is -inf."""
    m = x.detach().amax(dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    s = torch.exp(x - m).sum(dim, keepdim=True)
    ok = s > 0
    return (torch.where(ok, torch.log(torch.where(ok, s, 1.0)), NEG) + m).squeeze(dim)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), seed=st.integers(0, 10_000), holes=st.floats(0.0, 1.0),
       scale=st.sampled_from([1.0, 30.0, 300.0]), dtype=st.sampled_from([torch.float32, torch.float64]), data=st.data())
def test_log_sum_function_matches_autograd_of_the_formula(shape, seed, holes, scale, dtype, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    g = torch.Generator().manual_seed(seed)
    x = (scale * torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype)
    x[torch.rand(shape, generator=g) < holes] = NEG  # all -inf slices included
    grad = torch.randn([n for i, n in enumerate(shape) if i != dim % len(shape)], generator=g, dtype=torch.float64).to(dtype)
    ours_x, ref_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours, ref = LogSemiring.sum(ours_x, dim), plain_log_sum(ref_x, dim)
    assert torch.equal(ours.detach(), ref.detach())  # the same formula: the same value
    (g_ours,) = torch.autograd.grad(ours, ours_x, grad)
    (g_ref,) = torch.autograd.grad(ref, ref_x, grad)
    assert not g_ours.isnan().any() and not g_ref.isnan().any()
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert torch.allclose(g_ours, g_ref, rtol=tol, atol=tol)
    assert torch.all(g_ours[torch.isneginf(x)] == 0)


def test_log_sum_gradcheck_with_minus_inf():
    x = with_holes(randn(4, 5, seed=32), seed=33).requires_grad_()
    for dim in (0, 1, -1):
        assert torch.autograd.gradcheck(lambda y: LogSemiring.sum(y, dim).nan_to_num(0.0, 0.0, 0.0), (x,))  # noqa: B023


# ---------------------------------------------------------------------- max semiring
@pytest.mark.parametrize("chunk", [2**24, 7])
def test_max_matmul_matches_naive(monkeypatch, chunk):
    monkeypatch.setattr(semiring_module, "MAX_CHUNK", chunk)
    a, b = with_holes(randn(2, 5, 6, seed=32), seed=33), with_holes(randn(6, 4, seed=34), seed=35)
    assert torch.equal(MaxSemiring.matmul(a, b), naive_max_matmul(a, b))


def test_max_matmul_gradcheck_and_indicator_gradients():
    a, b = randn(2, 3, 4, seed=36).requires_grad_(), randn(2, 4, 5, seed=37).requires_grad_()
    assert torch.autograd.gradcheck(MaxSemiring.matmul, (a, b))
    # ties: every output passes its gradient to exactly one (a, b) pair
    a, b = torch.zeros(3, 4, dtype=DT, requires_grad=True), torch.zeros(4, 2, dtype=DT, requires_grad=True)
    ga, gb = torch.autograd.grad(MaxSemiring.matmul(a, b).sum(), (a, b))
    assert set(ga.unique().tolist()) <= {0.0, 1.0, 2.0} and ga.sum() == 6 and gb.sum() == 6
    assert torch.all((ga > 0).sum(-1) == 1)


def test_max_sum_plus_and_indicator():
    x = randn(3, 5, seed=38).requires_grad_()
    out = MaxSemiring.sum(x, -1)
    assert torch.equal(out, x.detach().amax(-1))
    (g,) = torch.autograd.grad(out.sum(), x)
    assert torch.equal(g, torch.nn.functional.one_hot(x.detach().argmax(-1), 5).to(DT))
    tie = torch.zeros(4, dtype=DT, requires_grad=True)
    (g,) = torch.autograd.grad(MaxSemiring.sum(tie, 0), tie)
    assert g.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert torch.equal(MaxSemiring.plus(torch.tensor([1.0, NEG]), torch.tensor([0.0, 2.0])), torch.tensor([1.0, 2.0]))


# ---------------------------------------------------------------------- cost semirings


def _shortest_paths(w: torch.Tensor) -> torch.Tensor:
    """Floyd-Warshall in float64, the reference for the (min, +) closure."""
    n = w.shape[0]
    d = w.clone().double()
    d.fill_diagonal_(0.0)
    for m in range(n):
        d = torch.minimum(d, d[:, m : m + 1] + d[m : m + 1, :])
    return d


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 10_000), density=st.floats(0.1, 1.0))
def test_min_plus_star_is_all_pairs_shortest_paths(n, seed, density):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(n, n, generator=g, dtype=torch.float64) * 5
    w[torch.rand(n, n, generator=g) > density] = MIN_PLUS.zero
    got = MIN_PLUS.star(w)
    ref = _shortest_paths(w)
    reachable = ref < MIN_PLUS.zero / 2
    assert torch.allclose(got[reachable], ref[reachable])
    assert (got[~reachable] >= MIN_PLUS.zero / 2).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("temperature", [0.0, 0.3, 2.0])
def test_soft_min_matmul_against_loops(dtype, temperature):
    sr = SoftMinSemiring(temperature)
    g = torch.Generator().manual_seed(1)
    a = torch.rand(3, 4, 5, generator=g, dtype=dtype) * 4
    b = torch.rand(3, 5, 2, generator=g, dtype=dtype) * 4
    got = sr.matmul(a, b)
    for bi in range(3):
        for i in range(4):
            for j in range(2):
                terms = (a[bi, i, :] + b[bi, :, j]).double()
                ref = terms.min() if temperature == 0 else -temperature * torch.logsumexp(-terms / temperature, 0)
                assert got[bi, i, j].item() == pytest.approx(ref.item(), rel=1e-5, abs=1e-5)


def test_soft_min_is_a_semiring_and_tends_to_min():
    g = torch.Generator().manual_seed(2)
    a, b, c = (torch.rand(4, 4, generator=g, dtype=torch.float64) for _ in range(3))
    for t in (0.0, 0.5):
        sr = SoftMinSemiring(t)
        assert torch.allclose(sr.matmul(sr.matmul(a, b), c), sr.matmul(a, sr.matmul(b, c)))  # associative
        assert torch.allclose(sr.matmul(a, sr.plus(b, c)), sr.plus(sr.matmul(a, b), sr.matmul(a, c)))  # distributive
        eye = sr.star(torch.full((4, 4), sr.zero, dtype=torch.float64))
        assert torch.allclose(sr.matmul(a, eye), a)  # the identity of star(no arcs)
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    for t in (1.0, 0.1, 0.01):
        soft = SoftMinSemiring(t).sum(x)
        assert x.min() - t * torch.log(torch.tensor(3.0)) <= soft <= x.min()  # at most T log n below the min
    with pytest.raises(ValueError, match="temperature"):
        SoftMinSemiring(-1.0)


def test_log_matmul_keeps_exact_minus_inf_without_the_slow_path(monkeypatch):
    """Entries with no finite term are -inf already and skip the term-by-term recompute
    (a sparse chart is mostly such entries); finite ones stay exact."""
    import neurosym.semiring as sr

    g = torch.Generator().manual_seed(0)
    a = torch.randn(6, 5, generator=g).masked_fill(torch.rand(6, 5, generator=g) < 0.7, float("-inf"))
    b = torch.randn(5, 4, generator=g).masked_fill(torch.rand(5, 4, generator=g) < 0.7, float("-inf"))
    recomputed = []
    real_sum = sr.LogSemiring.sum
    monkeypatch.setattr(sr.LogSemiring, "sum", staticmethod(lambda x, dim=-1: recomputed.append(tuple(x.shape)) or real_sum(x, dim)))
    c = sr.LogSemiring.matmul(a, b)
    expected = torch.logsumexp(a.double()[:, :, None] + b.double()[None], 1)
    assert torch.isinf(expected).sum() > 0
    assert torch.equal(torch.isinf(c), torch.isinf(expected))
    assert torch.allclose(c[torch.isfinite(c)].double(), expected[torch.isfinite(expected)], atol=1e-5)
    assert recomputed == []


def _star_by_products(a: torch.Tensor) -> torch.Tensor:
    """The definition, I ⊕ a ⊕ ... ⊕ a^(n-1) by n - 1 products (the reference)."""
    n = a.shape[-1]
    eye = torch.full_like(a, MIN_PLUS.zero)
    eye.diagonal().fill_(0.0)
    r = eye
    for _ in range(n - 1):
        r = MIN_PLUS.plus(eye, MIN_PLUS.matmul(r, a))
    return r


@pytest.mark.parametrize("seed", range(40))
def test_min_plus_star_by_squaring_equals_the_products(seed):
    """(min, +) with costs >= 0 squares (I ⊕ a) instead of n - 1 products: exact on integer
    costs (edit distances), equal to rounding on real ones, unreachable pairs kept at zero."""
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(1, 16, (), generator=g))
    a = torch.rand(n, n, generator=g, dtype=torch.float64) * 5
    a = torch.where(torch.rand(n, n, generator=g) < seed / 40, torch.full_like(a, MIN_PLUS.zero), a)
    ints = a.round().where(a < MIN_PLUS.zero, a)
    assert torch.equal(MIN_PLUS.star(ints), _star_by_products(ints))
    torch.testing.assert_close(MIN_PLUS.star(a), _star_by_products(a), rtol=1e-12, atol=0)
