"""Real-text metrics of issue 17 on hand-made inputs, against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.errors import NeurosymError
from neurosym.lm.metrics import embedding_health, expected_calibration_error, same_pos_miss_rate


def test_same_pos_miss_rate_by_hand():
    tags = [None, None, "NOUN", "NOUN", "VERB", "DET"]  # ids 0, 1 untagged (<pad>, <unk>)
    gold = torch.tensor([2, 2, 4, 5, 3, 2, 1])
    pred = torch.tensor([2, 3, 2, 4, 2, 1, 4])
    # position 0 right; 1 wrong NOUN->NOUN (same); 2 wrong VERB->NOUN; 3 wrong DET->VERB;
    # 4 wrong NOUN->NOUN (same); 5 wrong but predicted <unk> (untagged); 6 gold <unk> (untagged)
    out = same_pos_miss_rate(pred, gold, tags)
    assert out == {"same_pos_miss": 2 / 4, "misses": 4, "misses_untagged": 2}
    nothing = same_pos_miss_rate(gold, gold, tags)
    assert math.isnan(nothing["same_pos_miss"]) and nothing["misses"] == 0


def test_embedding_health_by_hand():
    W = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    # cosines: (0,1) 0, (0,2) 1, (1,2) 0 -> mean over the 3 pairs 1/3
    h = embedding_health(W)
    assert h["mean_cosine"] == pytest.approx(1 / 3)
    # singular values of W: 2 and sqrt(10) -> p = (2, sqrt 10) / (2 + sqrt 10)
    s = torch.tensor([2.0, math.sqrt(10.0)], dtype=torch.float64)
    p = s / s.sum()
    assert h["effective_rank"] == pytest.approx(math.exp(float(-(p * p.log()).sum())))
    assert embedding_health(torch.eye(4))["effective_rank"] == pytest.approx(4.0)
    assert embedding_health(torch.eye(4))["mean_cosine"] == pytest.approx(0.0)
    collapsed = torch.tensor([[1.0, 1.0], [2.0, 2.0], [0.5, 0.5]])
    assert embedding_health(collapsed) == pytest.approx({"mean_cosine": 1.0, "effective_rank": 1.0})
    with pytest.raises(NeurosymError, match="V >= 2"):
        embedding_health(torch.ones(1, 3))


@settings(max_examples=30, deadline=None)
@given(V=st.integers(2, 12), D=st.integers(1, 6), seed=st.integers(0, 1000))
def test_mean_cosine_equals_the_pairwise_mean(V, D, seed):
    W = torch.randn(V, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    unit = W / W.norm(dim=-1, keepdim=True)
    cos = unit @ unit.T
    want = (cos.sum() - cos.diagonal().sum()) / (V * (V - 1))
    assert embedding_health(W)["mean_cosine"] == pytest.approx(float(want), abs=1e-9)


def test_ece_by_hand():
    conf = torch.tensor([0.95, 0.95, 0.55, 0.55, 0.55, 0.0])
    correct = torch.tensor([True, False, True, True, False, False])
    # 10 bins: bin (0.9, 1]: conf 0.95, acc 0.5 -> 2/6 * 0.45; bin (0.5, 0.6]: conf 0.55, acc 2/3
    # -> 3/6 * |0.55 - 2/3|; c = 0 sits in the first bin: conf 0, acc 0 -> 0
    want = 2 / 6 * 0.45 + 3 / 6 * abs(0.55 - 2 / 3)
    assert expected_calibration_error(conf, correct, bins=10) == pytest.approx(want)
    assert expected_calibration_error(torch.tensor([1.0, 1.0]), torch.tensor([True, True])) == 0.0
    assert math.isnan(expected_calibration_error(torch.tensor([]), torch.tensor([], dtype=torch.bool)))
    with pytest.raises(NeurosymError, match="bins"):
        expected_calibration_error(conf, correct, bins=0)
