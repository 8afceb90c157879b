"""Losses against hand computations."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from neurosym.lm.losses import class_uniformizer, aux_bce, label_smoothed_ce


def _softmax(row: list[float]) -> list[float]:
    m = max(row)
    z = sum(math.exp(x - m) for x in row)
    return [math.exp(x - m) / z for x in row]


# ---------------------------------------------------------------------- label smoothing
def test_label_smoothed_ce_by_hand():
    torch.manual_seed(0)
    B, L, V, eps = 2, 3, 5, 0.1
    logits = torch.randn(B, L, V, dtype=torch.float64)
    targets = torch.tensor([[1, 4, 0], [2, 0, 0]])  # 0 = pad
    terms = []
    for b in range(B):
        for t in range(L):
            y = int(targets[b, t])
            if y == 0:
                continue
            p = _softmax(logits[b, t].tolist())
            nll = -math.log(p[y])
            smooth = -sum(math.log(q) for q in p) / V
            terms.append((1 - eps) * nll + eps * smooth)
    expected = sum(terms) / len(terms)
    assert label_smoothed_ce(logits, targets, epsilon=eps).item() == pytest.approx(expected, rel=1e-6)
    # the same as torch's definition of label smoothing
    ref = F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=0, label_smoothing=eps)
    assert label_smoothed_ce(logits, targets, epsilon=eps).item() == pytest.approx(ref.item(), rel=1e-6)
    assert label_smoothed_ce(logits, targets, epsilon=0.0).item() == pytest.approx(
        F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=0).item(), rel=1e-6
    )


def test_label_smoothed_ce_ignores_pads():
    torch.manual_seed(1)
    logits = torch.randn(1, 4, 6)
    targets = torch.tensor([[3, 2, 0, 0]])
    loss = label_smoothed_ce(logits, targets)
    # the pad positions' logits do not matter, and the mean is over the 2 real targets only
    other = logits.clone()
    other[:, 2:] = 100 * torch.randn(1, 2, 6)
    assert label_smoothed_ce(other, targets).item() == pytest.approx(loss.item(), rel=1e-6)
    assert label_smoothed_ce(logits[:, :2], targets[:, :2]).item() == pytest.approx(loss.item(), rel=1e-6)
    # another pad id
    assert label_smoothed_ce(logits, torch.tensor([[3, 2, 5, 5]]), pad_id=5).item() == pytest.approx(loss.item(), rel=1e-6)
    # nothing to count: 0, and backward still works
    x = torch.randn(1, 2, 6, requires_grad=True)
    zero = label_smoothed_ce(x, torch.zeros(1, 2, dtype=torch.long))
    zero.backward()
    assert zero.item() == 0.0 and x.grad.abs().sum() == 0


def test_label_smoothed_ce_of_uniform_logits_is_log_v():
    V = 7
    loss = label_smoothed_ce(torch.zeros(2, 3, V), torch.ones(2, 3, dtype=torch.long), epsilon=0.3)
    assert loss.item() == pytest.approx(math.log(V), rel=1e-6)


# ---------------------------------------------------------------------- auxiliary BCE
def test_aux_bce_by_hand():
    pred = torch.tensor([[[0.9, 0.2], [0.5, 0.5]], [[0.3, 0.6], [0.01, 0.99]]])
    target = torch.tensor([[[1.0, 0.0], [0.3, 0.7]], [[0.5, 0.5], [0.0, 1.0]]])
    mask = torch.tensor([[True, True], [True, False]])
    terms = []
    for b, t in [(0, 0), (0, 1), (1, 0)]:
        for f in range(2):
            p, y = float(pred[b, t, f]), float(target[b, t, f])
            terms.append(-(y * math.log(p) + (1 - y) * math.log(1 - p)))
    expected = 0.5 * sum(terms) / len(terms)
    assert aux_bce(pred, target, mask).item() == pytest.approx(expected, rel=1e-6)
    assert aux_bce(pred, target, mask, weight=2.0).item() == pytest.approx(4 * expected, rel=1e-6)
    assert aux_bce(pred, target, torch.zeros(2, 2, dtype=torch.bool)).item() == 0.0


def test_aux_bce_is_minimal_at_the_soft_target():
    target = torch.tensor([[[0.3, 0.8]]])
    mask = torch.ones(1, 1, dtype=torch.bool)
    at = aux_bce(target.clone(), target, mask)
    for delta in (-0.1, 0.1):
        assert aux_bce((target + delta).clamp(0.01, 0.99), target, mask) > at


# ---------------------------------------------------------------------- the uniformizer
def test_uniformizer_is_log_c_minus_entropy():
    torch.manual_seed(2)
    V = 8
    cls = torch.tensor([2, 5, 6])
    logits = torch.randn(2, 3, V, dtype=torch.float64)
    targets = torch.tensor([[5, 1, 2], [0, 6, 3]])  # class targets at (0,0), (0,2), (1,1)
    kls = []
    for b, t in [(0, 0), (0, 2), (1, 1)]:
        p = _softmax([float(logits[b, t, c]) for c in cls])
        H = -sum(q * math.log(q) for q in p)
        kls.append(math.log(3) - H)
    expected = 0.01 * sum(kls) / 3
    assert class_uniformizer(logits, targets, cls).item() == pytest.approx(expected, rel=1e-6)
    assert class_uniformizer(logits, targets, cls, weight=1.0).item() == pytest.approx(100 * expected, rel=1e-6)
    # KL(p || U) direction: equals sum p log(p / (1/C))
    p = torch.softmax(logits[0, 0, cls], -1)
    kl = (p * (p * 3).log()).sum()
    assert class_uniformizer(logits[:1, :1], targets[:1, :1], cls, weight=1.0).item() == pytest.approx(kl.item(), rel=1e-6)


def test_uniformizer_is_zero_for_uniform_class_logits_and_without_class_targets():
    V = 6
    cls = torch.tensor([1, 3])
    logits = torch.randn(1, 4, V)
    logits[..., 1] = logits[..., 3] = 0.7  # indifferent within the class; the rest is arbitrary
    targets = torch.tensor([[1, 3, 2, 0]])
    assert class_uniformizer(logits, targets, cls).item() == pytest.approx(0.0, abs=1e-7)
    x = torch.randn(1, 4, V, requires_grad=True)
    none = class_uniformizer(x, torch.tensor([[2, 4, 5, 0]]), cls)
    none.backward()
    assert none.item() == 0.0 and x.grad.abs().sum() == 0


def test_uniformizer_gradient_only_touches_class_logits():
    cls = torch.tensor([1, 3])
    x = torch.randn(1, 2, 5, requires_grad=True)
    class_uniformizer(x, torch.tensor([[3, 0]]), cls).backward()
    g = x.grad[0]
    assert g[0, cls].abs().sum() > 0
    assert g[0, [0, 2, 4]].abs().sum() == 0 and g[1].abs().sum() == 0
