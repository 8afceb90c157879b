"""The inside pass in float32 on badly scaled potentials, against a float64 logsumexp CKY.

A shifted exp-matmul loses every entry whose terms all lie ~87 nats below its shift;
`LogSemiring.matmul` recomputes those exactly. The reference is tests/references.py's
``cky_log_z``. These potentials span hundreds of nats
(scaled random scores; normalised PCFGs whose log-probabilities reach -1500), where the
shifted product alone was wrong by up to ~500 nats.
"""

from __future__ import annotations

import pytest
import torch

from neurosym.layers.inside import inside, marginals
from neurosym.semiring import LogSemiring
from references import cky_log_z

B, L, N, T, V = 4, 10, 4, 5, 12
LENGTHS = torch.tensor([10, 7, 4, 2])


def scaled(scale: float, seed: int):
    g = torch.Generator().manual_seed(seed)
    return (
        scale * torch.randn(B, L, T, dtype=torch.float64, generator=g),
        scale * torch.randn(B, N, N + T, N + T, dtype=torch.float64, generator=g),
        scale * torch.randn(B, N, dtype=torch.float64, generator=g),
    )


def normalised_pcfg(scale: float, seed: int):
    """A PCFG with log_softmax(scale * randn) rule, emission and root distributions."""
    g = torch.Generator().manual_seed(seed)
    rules = torch.log_softmax(scale * torch.randn(N, (N + T) ** 2, dtype=torch.float64, generator=g), -1).view(N, N + T, N + T)
    emit = torch.log_softmax(scale * torch.randn(T, V, dtype=torch.float64, generator=g), -1)  # (T, V)
    words = torch.randint(V, (B, L), generator=g)
    terms = emit.T[words]  # (B, L, T)
    roots = torch.log_softmax(scale * torch.randn(N, dtype=torch.float64, generator=g), -1)
    return terms, rules.expand(B, -1, -1, -1).contiguous(), roots.expand(B, -1).contiguous()


CASES = [("scaled", s, seed) for s in (50.0, 100.0, 200.0) for seed in (0, 1)] + [
    ("pcfg", s, seed) for s in (100.0, 200.0) for seed in (0, 1, 2)
]


@pytest.mark.parametrize("kind,scale,seed", CASES)
def test_float32_log_z_and_marginals_match_float64(kind, scale, seed):
    pots = scaled(scale, seed) if kind == "scaled" else normalised_pcfg(scale, seed)
    ref = cky_log_z(*pots, LENGTHS)
    assert torch.isfinite(ref).all()
    tol = 1e-3 * ref.abs().clamp_min(1.0)
    got = inside(*(p.float() for p in pots), LENGTHS).double()
    assert ((got - ref).abs() <= tol).all(), (got, ref)

    # marginals: gradients of the float64 reference against the layer's in float32
    leaves = [p.clone().requires_grad_() for p in pots]
    cky_log_z(*leaves, LENGTHS).sum().backward()
    m = marginals(*(p.float() for p in pots), LENGTHS)
    for name, got_m, leaf in zip(("terms", "rules", "roots"), (m.terms, m.rules, m.roots), leaves):
        err = (got_m.double() - leaf.grad).abs().max().item()
        assert err <= 1e-3, f"{name} marginals off by {err}"


def test_the_smallest_underflow_case():
    got = LogSemiring.matmul(torch.tensor([[-200.0, 0.0]]), torch.tensor([[0.0, -200.0], [-200.0, 0.0]]))
    exact = torch.logsumexp(torch.tensor([-200.0, -200.0], dtype=torch.float64), 0).item()
    assert got[0, 0].item() == pytest.approx(exact, abs=1e-4)  # -199.307, not -inf
    assert got[0, 1].item() == pytest.approx(0.0, abs=1e-6)
