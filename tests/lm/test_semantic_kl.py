"""The semantic-KL objective: limits, the detached target, the distinct-target construction."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.errors import ConfigError
from neurosym.lm.semantic_kl import TemperatureSchedule, semantic_kl, semantic_kl_terms, semantic_target

torch.set_default_dtype(torch.float32)


def naive(logits, targets, W, T, sim="dot", lam=1.0, pad_id=None):
    """Per position: q_n = softmax(sim(W[y_n], W) / T) as a dense (N, V) tensor, KL by F.kl_div."""
    V = logits.shape[-1]
    logits, y = logits.reshape(-1, V).double(), targets.reshape(-1)
    if pad_id is not None:
        logits, y = logits[y != pad_id], y[y != pad_id]
    Wd = W.detach().double()
    if sim == "cosine":
        Wd = Wd / Wd.norm(dim=-1, keepdim=True)
    q = torch.stack([torch.softmax(Wd[int(t)] @ Wd.T / T, -1) for t in y])  # (N, V), one row per position
    logp = F.log_softmax(logits, -1)
    kl = F.kl_div(logp, q, reduction="batchmean")
    ce = F.nll_loss(logp, y)
    return lam * kl + (1 - lam) * ce


def batch(B=3, L=5, V=11, D=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(V, D, generator=g, dtype=dtype).requires_grad_()
    hidden = torch.randn(B, L, D, generator=g, dtype=dtype).requires_grad_()
    targets = torch.randint(0, V, (B, L), generator=g)
    return W, hidden, targets


@settings(max_examples=40, deadline=None)
@given(
    B=st.integers(1, 4), L=st.integers(1, 6), V=st.integers(2, 13), D=st.integers(1, 5), seed=st.integers(0, 10_000),
    T=st.floats(0.05, 20.0), sim=st.sampled_from(["dot", "cosine"]), lam=st.floats(0.0, 1.0), pad=st.booleans(),
)
def test_distinct_target_construction_equals_naive(B, L, V, D, seed, T, sim, lam, pad):
    W, hidden, targets = batch(B, L, V, D, seed)
    pad_id = 0 if pad else None
    if pad and bool((targets == 0).all()):
        targets[0, 0] = V - 1 if V > 1 else 0
    logits = hidden @ W.T
    want = naive(logits, targets, W, T, sim, lam, pad_id)
    gw = torch.autograd.grad(want, [hidden, W])
    for kwargs in ({}, {"hidden": hidden}):  # the (U, V) regrouping and the hidden-state fast path
        got = semantic_kl(hidden @ W.T, targets, W, T, sim, lam, pad_id, **kwargs)
        assert got.item() == pytest.approx(want.item(), rel=1e-9, abs=1e-9)
        for a, b in zip(torch.autograd.grad(got, [hidden, W]), gw):
            assert torch.allclose(a, b, rtol=1e-7, atol=1e-9)


def test_float32_fast_path_matches_the_reference_path():
    W, hidden, targets = batch(4, 16, 300, 8, seed=3, dtype=torch.float32)
    a = semantic_kl(hidden @ W.T, targets, W, 0.7, "dot", 0.5)
    b = semantic_kl(hidden @ W.T, targets, W, 0.7, "dot", 0.5, hidden=hidden)
    assert a.item() == pytest.approx(b.item(), rel=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_logits_path_in_low_precision_matches_float64_with_separate_gradients_for_its_terms(dtype):
    """The logits path's custom backward takes the two terms' incoming gradients apart
    (here 0.7 and 0.2: no lam mixes them) and returns the logits' dtype."""
    W, hidden, targets = batch(4, 16, 300, 8, seed=6, dtype=torch.float64)
    targets[0, :3] = 0
    logits64 = (hidden @ W.T).detach().requires_grad_()
    logits = logits64.detach().to(dtype).requires_grad_()
    kl, ce = semantic_kl_terms(logits, targets, W, 0.7, "cosine", pad_id=0)
    (0.7 * kl + 0.2 * ce).backward()
    kl64, ce64 = semantic_kl_terms(logits64.to(dtype).double(), targets, W, 0.7, "cosine", pad_id=0)  # the same rounded logits
    (0.7 * kl64 + 0.2 * ce64).backward()
    assert kl.dtype == ce.dtype == torch.float32 and logits.grad.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    assert kl.item() == pytest.approx(kl64.item(), rel=tol) and ce.item() == pytest.approx(ce64.item(), rel=tol)
    assert torch.allclose(logits.grad.double(), logits64.grad, rtol=tol, atol=tol * logits64.grad.abs().max().item())
    assert torch.all(logits.grad[0, :3] == 0)  # padding positions get no gradient


def test_as_T_goes_to_0_the_cosine_target_is_one_hot_and_the_loss_is_ce():
    W, hidden, targets = batch(seed=1)
    logits = hidden @ W.T
    rows = torch.arange(W.shape[0])
    q = semantic_target(W, rows, 1e-6, "cosine").exp()
    assert torch.equal(q, torch.eye(W.shape[0], dtype=q.dtype))
    ce = F.cross_entropy(logits.reshape(-1, W.shape[0]), targets.reshape(-1))
    for kwargs in ({}, {"hidden": hidden}):
        kl, ce_term = semantic_kl_terms(logits, targets, W, 1e-6, "cosine", **kwargs)
        assert kl.item() == pytest.approx(ce.item(), rel=1e-12)
        assert ce_term.item() == pytest.approx(ce.item(), rel=1e-12)
        assert semantic_kl(logits, targets, W, 1e-6, "cosine", lam=0.3, **kwargs).item() == pytest.approx(ce.item(), rel=1e-12)


def test_as_T_goes_to_0_the_dot_target_is_one_hot_at_the_most_similar_row():
    # the design's caveat: with dot products a longer row can out-score y itself
    W = torch.tensor([[1.0, 0.0], [0.9, 0.1], [5.0, 0.0]], dtype=torch.float64)
    q = semantic_target(W, torch.tensor([0, 1, 2]), 1e-6, "dot").exp()
    assert torch.equal(q, torch.tensor([[0.0, 0.0, 1.0]] * 3, dtype=torch.float64))  # every row picks word 2
    logits = torch.randn(3, 3, dtype=torch.float64)
    kl = semantic_kl(logits, torch.tensor([0, 1, 2]), W, 1e-6, "dot")
    assert kl.item() == pytest.approx(F.cross_entropy(logits, torch.tensor([2, 2, 2])).item(), rel=1e-12)


@pytest.mark.parametrize("sim", ["dot", "cosine"])
def test_as_T_goes_to_infinity_it_is_ce_against_the_uniform_distribution(sim):
    W, hidden, targets = batch(seed=2)
    V = W.shape[0]
    logits = hidden @ W.T
    ce_uniform = -F.log_softmax(logits, -1).mean(-1).mean()  # mean_n sum_v (1/V) * -log p_n(v)
    for kwargs in ({}, {"hidden": hidden}):
        kl, _ = semantic_kl_terms(logits, targets, W, 1e12, sim, **kwargs)
        assert (kl + math.log(V)).item() == pytest.approx(ce_uniform.item(), rel=1e-9)  # KL(U || p) = CE(U, p) - log V


def test_no_gradient_flows_through_the_target():
    W, hidden, targets = batch(seed=4)
    logits = (hidden @ W.T).detach().requires_grad_()  # logits independent of W: only the target reads W
    loss = semantic_kl(logits, targets, W, 0.5, "dot", lam=1.0)
    loss.backward()
    assert W.grad is None and logits.grad is not None
    assert not semantic_target(W, torch.tensor([0, 1]), 0.5).requires_grad
    # the gradient of the logits is p - q exactly (q constant), per position / N
    V = W.shape[0]
    p = torch.softmax(logits.detach(), -1).reshape(-1, V)
    q = semantic_target(W, targets.reshape(-1), 0.5).exp()
    assert torch.allclose(logits.grad.reshape(-1, V), (p - q) / p.shape[0], atol=1e-12)


def test_pad_positions_do_not_count():
    W, hidden, targets = batch(seed=5)
    targets[:, -2:] = 0
    full = semantic_kl(hidden @ W.T, targets, W, 0.8, pad_id=0)
    kept = targets != 0
    part = semantic_kl((hidden @ W.T)[kept], targets[kept], W, 0.8)
    assert full.item() == pytest.approx(part.item(), rel=1e-12)
    zero = semantic_kl(hidden @ W.T, torch.zeros_like(targets), W, 0.8, pad_id=0, hidden=hidden)
    assert zero.item() == 0.0 and zero.requires_grad


def test_bad_arguments_are_config_errors():
    W, hidden, targets = batch()
    logits = hidden @ W.T
    with pytest.raises(ConfigError, match="temperature"):
        semantic_kl(logits, targets, W, 0.0)
    with pytest.raises(ConfigError, match="temperature"):
        semantic_kl(logits, targets, W, float("inf"))
    with pytest.raises(ConfigError, match="similarity"):
        semantic_kl(logits, targets, W, 1.0, sim="euclid")
    with pytest.raises(ConfigError, match="lambda"):
        semantic_kl(logits, targets, W, 1.0, lam=1.5)
    with pytest.raises(ConfigError, match="W must be"):
        semantic_kl(logits, targets, W[:-1], 1.0)
    with pytest.raises(ConfigError, match="hidden must be"):
        semantic_kl(logits, targets, W, 1.0, hidden=hidden[..., :-1])


def test_temperature_schedules():
    assert TemperatureSchedule(2.0).at(5, 10) == 2.0
    up = TemperatureSchedule(0.5, 2.0, "linear")
    assert [up.at(s, 4) for s in range(4)] == pytest.approx([0.5, 1.0, 1.5, 2.0])
    down = TemperatureSchedule(2.0, 0.5, "cosine")
    assert down.at(0, 11) == pytest.approx(2.0) and down.at(10, 11) == pytest.approx(0.5)
    assert down.at(5, 11) == pytest.approx(1.25)  # half way: the mean
    assert down.at(2, 11) > down.at(3, 11)  # decreasing
    with pytest.raises(ConfigError, match="needs an end"):
        TemperatureSchedule(1.0, None, "linear")
    with pytest.raises(ConfigError, match="schedule"):
        TemperatureSchedule(1.0, 2.0, "step")
    with pytest.raises(ConfigError, match="temperature"):
        TemperatureSchedule(-1.0)
