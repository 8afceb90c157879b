"""Real-text metrics of issue 17 on hand-made inputs, against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.errors import NeurosymError
from neurosym.lm.metrics import ece_of_bins, embedding_health, expected_calibration_error, pool_reliability, reliability_bins, same_pos_miss_rate


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


def _bins_by_loop(conf: list[float], correct: list[bool], bins: int) -> tuple[list[int], list[float], list[float]]:
    """The reference: each value put in its bin one by one (edges b / bins, c in (e_b, e_b+1])."""
    members: list[list[int]] = [[] for _ in range(bins)]
    for i, c in enumerate(conf):
        b = 0
        while b < bins - 1 and c > (b + 1) / bins:
            b += 1
        members[b].append(i)
    count = [len(m) for m in members]
    mean_c = [sum(conf[i] for i in m) / len(m) if m else math.nan for m in members]
    acc = [sum(correct[i] for i in m) / len(m) if m else math.nan for m in members]
    return count, mean_c, acc


@given(st.lists(st.tuples(st.one_of(st.sampled_from([0.0, 0.1, 0.2, 0.5, 1 / 3, 0.9, 1.0]), st.floats(0, 1)), st.booleans()),
                min_size=1, max_size=40),
       st.integers(1, 12))
@settings(max_examples=150, deadline=None)
def test_reliability_bins_match_a_loop_and_give_the_ece(pairs, bins):
    conf = [c for c, _ in pairs]
    correct = [k for _, k in pairs]
    r = reliability_bins(torch.tensor(conf, dtype=torch.float64), torch.tensor(correct), bins)
    count, mean_c, acc = _bins_by_loop(conf, correct, bins)
    assert r["count"] == count and len(r["edges"]) == bins + 1 and r["edges"][0] == 0 and r["edges"][-1] == 1
    for got, want in ((r["confidence"], mean_c), (r["accuracy"], acc)):
        assert all((math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, abs=1e-12) for g, w in zip(got, want))
    n = len(conf)
    ece = sum(k / n * abs(a - c) for k, a, c in zip(count, acc, mean_c) if k)
    assert expected_calibration_error(torch.tensor(conf, dtype=torch.float64), torch.tensor(correct), bins) == pytest.approx(ece, abs=1e-12)


def test_pooled_reliability_equals_the_bins_of_all_tokens_together():
    g = torch.Generator().manual_seed(0)
    parts = [(torch.rand(n, generator=g), torch.rand(n, generator=g) < 0.4) for n in (50, 7, 300)]
    pooled = pool_reliability([reliability_bins(c, k, 10) for c, k in parts])
    whole = reliability_bins(torch.cat([c for c, _ in parts]), torch.cat([k for _, k in parts]), 10)
    assert pooled["count"] == whole["count"] and pooled["edges"] == whole["edges"]
    for key in ("confidence", "accuracy"):
        assert all((math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12) for a, b in zip(pooled[key], whole[key]))
    assert ece_of_bins(pooled) == pytest.approx(ece_of_bins(whole), abs=1e-12)
    with pytest.raises(NeurosymError, match="same bins"):
        pool_reliability([reliability_bins(*parts[0], 10), reliability_bins(*parts[1], 5)])
    with pytest.raises(NeurosymError, match="bins"):
        reliability_bins(*parts[0], 0)
