"""Fuzzy membership kernels: exact formulas, shapes, properties and gradients."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.errors import NeurosymError
from neurosym.fuzzy import (
    KernelSpec,
    KernelSpecError,
    LinguisticVariable,
    gaussian,
    membership,
    parse_kernel,
    power,
    trapezoidal,
    triangular,
)

X = np.linspace(-1.5, 2.5, 81)
C = np.array([0.2, 0.6, 1.0])


def np_tri(x, a, b, c):
    return np.maximum(0.0, np.minimum((x - a) / (b - a), (c - x) / (c - b)))


def np_trap(x, a, b, c, d):
    return np.maximum(0.0, np.minimum(np.minimum((x - a) / (b - a), 1.0), (d - x) / (d - c)))


def t64(a):
    return torch.tensor(a, dtype=torch.float64)


# ---------------------------------------------------------------------- formulas
def test_power_matches_formula_and_broadcasts_a_terms_axis():
    got = power(t64(X), t64(C), 0.9, 0.35)
    want = 0.9 ** (np.abs(X[:, None] - C[None, :]) / 0.35)
    assert got.shape == (81, 3)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    # (B, L) values against (K,) centres -> (B, L, K)
    assert power(torch.rand(2, 5), torch.tensor(C, dtype=torch.float32)).shape == (2, 5, 3)


def test_triangular_matches_formula():
    a, b, c = np.array([-0.2, 0.2, 0.6]), C, np.array([0.6, 1.0, 1.4])
    got = triangular(t64(X), t64(a), t64(b), t64(c))
    np.testing.assert_allclose(got.numpy(), np_tri(X[:, None], a, b, c), rtol=1e-12, atol=1e-15)


def test_trapezoidal_matches_formula():
    a, b, c, d = np.array([0.0, 0.3]), np.array([0.2, 0.5]), np.array([0.4, 0.9]), np.array([0.8, 1.2])
    got = trapezoidal(t64(X), t64(a), t64(b), t64(c), t64(d))
    np.testing.assert_allclose(got.numpy(), np_trap(X[:, None], a, b, c, d), rtol=1e-12, atol=1e-15)


def test_gaussian_matches_formula():
    got = gaussian(t64(X), t64(C), t64([0.1, 0.2, 0.3]))
    want = np.exp(-((X[:, None] - C) ** 2) / (2 * np.array([0.1, 0.2, 0.3]) ** 2))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_vertical_edges_and_open_shoulders():
    x = t64([-5.0, 0.0, 0.1, 0.5, 1.0, 5.0])
    step = triangular(x, 0.0, 0.0, 1.0)[:, 0]  # a == b: a vertical left edge at 0
    assert step.tolist() == [0.0, 1.0, 0.9, 0.5, 0.0, 0.0]
    shoulder = trapezoidal(x, -math.inf, -math.inf, 0.0, 1.0)[:, 0]  # open to the left
    assert shoulder.tolist() == [1.0, 1.0, 0.9, 0.5, 0.0, 0.0]
    assert torch.isfinite(shoulder).all()


# ---------------------------------------------------------------------- properties
finite = st.floats(-10, 10, allow_nan=False)
width = st.floats(0.05, 5, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(x=finite, c=finite, base=st.floats(0.01, 0.99), tau=width, sigma=width, w=width, top=st.floats(0, 3))
def test_memberships_lie_in_unit_interval_peak_at_centre_and_are_symmetric(x, c, base, tau, sigma, w, top):
    xs = t64([x, 2 * c - x, c])  # x, its mirror image about c, and c itself
    for m in (
        power(xs, c, base, tau)[:, 0],
        gaussian(xs, c, sigma)[:, 0],
        triangular(xs, c - w, c, c + w)[:, 0],
        trapezoidal(xs, c - top - w, c - top, c + top, c + top + w)[:, 0],
    ):
        assert ((m >= 0) & (m <= 1)).all()
        assert m[2].item() == pytest.approx(1.0)  # peak 1 at the centre
        assert m[0].item() == pytest.approx(m[1].item(), abs=1e-9)  # symmetric about the centre


@settings(max_examples=100, deadline=None)
@given(x1=finite, x2=finite, c=finite, base=st.floats(0.01, 0.99), tau=width)
def test_power_decreases_with_distance(x1, x2, c, base, tau):
    near, far = sorted([x1, x2], key=lambda x: abs(x - c))
    m = power(t64([near, far]), c, base, tau)[:, 0]
    assert m[0] >= m[1]


@settings(max_examples=100, deadline=None)
@given(x=st.floats(-3, 3))
def test_default_triangular_partition_sums_to_one(x):
    var = LinguisticVariable(["low", "med", "high"], [0.2, 0.6, 1.0], "triangular")
    assert var(torch.tensor([x], dtype=torch.float32)).sum().item() == pytest.approx(1.0, abs=1e-6)


# ---------------------------------------------------------------------- gradients
def test_gradients_flow_to_values_centres_and_widths():
    x = t64([0.05, 0.47, 0.93, 1.31]).requires_grad_()
    c = t64([0.2, 0.6, 1.0]).requires_grad_()
    tau = t64([0.35, 0.3, 0.4]).requires_grad_()
    base = t64([0.9, 0.8, 0.7]).requires_grad_()
    sigma = t64([0.2, 0.3, 0.25]).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, c, b, t: power(x, c, b, t), (x, c, base, tau))
    assert torch.autograd.gradcheck(lambda x, c, s: gaussian(x, c, s), (x, c, sigma))
    a = t64([-0.3, 0.25, 0.55]).requires_grad_()
    b = t64([0.1, 0.65, 1.05]).requires_grad_()
    cc = t64([0.55, 1.2, 1.5]).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, a, b, c: triangular(x, a, b, c), (x, a, b, cc))
    d = t64([0.9, 1.4, 1.9]).requires_grad_()
    b2 = t64([0.0, 0.4, 0.8]).requires_grad_()
    c2 = t64([0.3, 0.5, 1.2]).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, a, b, c, d: trapezoidal(x, a, b, c, d), (x, a, b2, c2, d))


def test_learnable_variable_trains_its_centres():
    var = LinguisticVariable(["low", "high"], [0.0, 1.0], "gaussian(sigma=0.5)", learnable=True)
    names = {n for n, _ in var.named_parameters()}
    assert names == {"p_c", "p_sigma"}
    opt = torch.optim.SGD(var.parameters(), lr=0.5)
    x = torch.full((16,), 0.3)
    for _ in range(50):
        opt.zero_grad()
        (1 - var(x)[:, 1]).pow(2).mean().backward()  # pull "high" towards 0.3
        opt.step()
    assert var.p_c[1].item() < 0.6
    fixed = LinguisticVariable(["low", "high"], [0.0, 1.0], "power(base=0.9, tau=0.35)")
    assert list(fixed.parameters()) == [] and fixed.names == ["low", "high"] and len(fixed) == 2


# ---------------------------------------------------------------------- specs
def test_kernel_specs_parse_with_defaults():
    assert parse_kernel("power(base=0.9, tau=0.35)") == KernelSpec("power", {"base": 0.9, "tau": 0.35})
    assert parse_kernel("power") == KernelSpec("power", {"base": 0.9, "tau": 0.35})
    assert parse_kernel(" gaussian( sigma = 2e-1 ) ").params == {"sigma": 0.2}
    assert parse_kernel("trapezoidal(top=0, slope=0.3)").params == {"top": 0.0, "slope": 0.3}
    assert str(parse_kernel("power(tau=0.5)")) == "power(base=0.9, tau=0.5)"
    assert str(parse_kernel("triangular")) == "triangular()"


@pytest.mark.parametrize(
    "spec, offset, words",
    [
        ("gauss(sigma=1)", 0, "unknown kernel 'gauss'"),
        ("gaussian", 0, "needs sigma"),
        ("power(base=1.5)", 11, "base must be in (0, 1)"),
        ("power(tau=0)", 10, "tau must be > 0"),
        ("power(bse=0.5)", 6, "unknown parameter 'bse'"),
        ("power(base=x)", 6, "expected key=number"),
        ("power(tau=0.3, tau=0.2)", 15, "given twice"),
        ("power(base=0.5", 5, "expected '('"),
    ],
)
def test_bad_kernel_specs_say_where(spec, offset, words):
    with pytest.raises(KernelSpecError) as info:
        parse_kernel(spec)
    assert words in str(info.value) and info.value.offset == offset


def test_membership_uses_spec_shapes():
    x = t64([0.0, 0.4, 1.0])
    spec = parse_kernel("triangular(width=0.4)")
    np.testing.assert_allclose(membership(spec, x, t64(C)).numpy(), np_tri(x.numpy()[:, None], C - 0.4, C, C + 0.4), atol=1e-15)
    spec = parse_kernel("trapezoidal(top=0.1, slope=0.2)")
    want = np_trap(x.numpy()[:, None], C - 0.3, C - 0.1, C + 0.1, C + 0.3)
    np.testing.assert_allclose(membership(spec, x, t64(C)).numpy(), want, atol=1e-15)


def test_variable_errors():
    with pytest.raises(NeurosymError, match="3 term names but 2 centres"):
        LinguisticVariable(["a", "b", "c"], [0.0, 1.0])
    with pytest.raises(NeurosymError, match="duplicate term names"):
        LinguisticVariable(["a", "a"], [0.0, 1.0])
    with pytest.raises(NeurosymError, match="single term needs width"):
        LinguisticVariable(["a"], [0.0], "triangular")
