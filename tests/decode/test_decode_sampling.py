"""Sampling transforms and FeatureSteer against direct references (sorted cumulative
sums, argsort, hand examples)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from neurosym.compile.fsg import load_fsg
from neurosym.compile.lexicon import load_lexicon
from neurosym.data import shipped_file
from neurosym.decode import ClassMixture, FeatureSteer, Nucleus, RepetitionPenalty, Temperature, TopK, states_allowing
from neurosym.errors import NeurosymError

NEG = -math.inf
rows = arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 12)),
              elements=st.one_of(st.floats(-8, 8), st.just(NEG)))


def nucleus_reference(row: np.ndarray, p: float) -> set[int]:
    """The smallest most-probable set reaching mass p, by a loop over the sorted tokens."""
    finite = np.isfinite(row)
    if not finite.any():
        return set()
    probs = np.where(finite, np.exp(row - row[finite].max()), 0.0)
    probs /= probs.sum()
    kept, mass = set(), 0.0
    for i in sorted(range(len(row)), key=lambda i: -row[i]):  # stable: ties in index order, like torch.sort
        if mass >= p or probs[i] == 0:
            break
        kept.add(i)
        mass += probs[i]
    return kept


@settings(max_examples=200, deadline=None)
@given(rows, st.floats(0.05, 0.99))
def test_nucleus_keeps_the_smallest_set_reaching_p(scores, p):
    t = torch.tensor(scores)
    out = Nucleus(p)(t.clone())
    for b in range(t.shape[0]):
        kept = set((out[b] > NEG).nonzero().flatten().tolist())
        ref = nucleus_reference(scores[b], p)
        if kept != ref:  # only ties at the boundary may be ordered differently
            vals = sorted(scores[b][list(kept ^ ref)])
            assert len(kept) == len(ref) and vals[0] == vals[-1]
        assert torch.equal(out[b][out[b] > NEG], t[b][out[b] > NEG])


@settings(max_examples=100, deadline=None)
@given(rows, st.integers(1, 15))
def test_top_k_keeps_the_k_largest(scores, k):
    t = torch.tensor(scores)
    out = TopK(k)(t.clone())
    for b in range(t.shape[0]):
        kept = (out[b] > NEG).nonzero().flatten().tolist()
        finite = int(np.isfinite(scores[b]).sum())
        assert len(kept) == min(k, finite)
        threshold = np.sort(scores[b])[::-1][min(k, len(scores[b])) - 1]
        assert all(scores[b][i] >= threshold for i in kept)


def test_temperature_scales_the_distribution():
    s = torch.tensor([[1.0, 2.0, NEG, 0.5]])
    out = Temperature(0.5)(s.clone())
    assert torch.allclose(torch.softmax(out, 1), torch.softmax(s * 2, 1))
    with pytest.raises(NeurosymError, match="t must be a finite number > 0"):
        Temperature(0)


def test_repetition_penalty_on_a_hand_example():
    pen = RepetitionPenalty(last_k=2, factor=2.0)
    pen.reset(2)
    pen.advance(torch.tensor([1, 3]))
    pen.advance(torch.tensor([2, 3]), done=torch.tensor([False, True]))  # row 1 finished: its token is padding
    pen.advance(torch.tensor([0, 4]))  # row 0's window is now {2, 0}: token 1 fell out
    scores = torch.tensor([[4.0, 4.0, -1.0, 3.0, NEG], [1.0, 2.0, 3.0, -3.0, 5.0]])
    out = pen(scores.clone())
    assert torch.equal(out[0], torch.tensor([2.0, 4.0, -2.0, 3.0, NEG]))  # positive halved, negative doubled
    assert torch.equal(out[1], torch.tensor([1.0, 2.0, 3.0, -6.0, 2.5]))  # window {3, 4}


def test_class_mixture_mixes_then_truncates():
    # model: token 0 holds 0.9; the class {2, 3}; token 3 is forbidden upstream
    logp = torch.log(torch.tensor([[0.9, 0.06, 0.04, 0.0]]))
    mix = ClassMixture([[2], [3]], alpha=0.5, T=1.0)
    p = mix(logp.clone()).exp()[0]
    assert torch.allclose(p, torch.tensor([0.45, 0.03, 0.52, 0.0]), atol=1e-6)  # uniform over class ∩ allowed = {2}
    # mix-then-truncate keeps token 2 in the 0.5-nucleus; truncate-then-mix would have dropped it
    truncated = ClassMixture([2, 3], alpha=0.5, top_p=0.5)(logp.clone())
    assert (truncated[0] > NEG).nonzero().flatten().tolist() == [2]
    assert torch.equal(Nucleus(0.5)(logp.clone())[0] > NEG, torch.tensor([True, False, False, False]))
    # same as ClassMixture without top_p followed by Nucleus
    assert torch.equal(Nucleus(0.5)(mix(logp.clone())), truncated)
    # no class token allowed: the model's distribution, temperature applied
    hot = ClassMixture([3], alpha=0.5, T=2.0)(logp.clone())
    assert torch.allclose(hot.exp()[0], torch.softmax(logp[0] / 2, 0), atol=1e-6)


def test_class_mixture_checks_arguments():
    with pytest.raises(NeurosymError, match="alpha must be in"):
        ClassMixture([1], alpha=1.5)
    with pytest.raises(NeurosymError, match="outside the vocabulary"):
        ClassMixture([9], alpha=0.5)(torch.zeros(1, 4))


def test_feature_steer_shifts_by_memberships_at_the_chosen_states():
    wa = load_fsg(shipped_file("grammars/clause.fsg"))
    vocab = wa.vocab
    bank = load_lexicon(shipped_file("lexicons/sentiment.lex"), vocab)
    adjectives = [vocab.id(w) for w in ("good", "awful")]
    at = states_allowing(wa, adjectives)
    steer = FeatureSteer(bank, {"pos_high": 3.0, "neg_high": -1.0}, at_states=at, automaton=wa)
    steer.reset(2)
    for word in ["Bob", "cooks", "the"]:
        steer.advance(torch.tensor([vocab.id(word), vocab.id(word)]), done=torch.tensor([False, word == "the"]))
    scores = torch.zeros(2, len(vocab))
    out = steer(scores.clone())
    table = bank.table
    shift = 3.0 * table[:, bank.column("pos_high")] - 1.0 * table[:, bank.column("neg_high")]
    assert torch.allclose(out[0], shift)  # row 0 is before an adjective
    assert torch.equal(out[1], torch.zeros(len(vocab)))  # row 1 stopped before 'the'
    assert out[0, vocab.id("excellent")] > out[0, vocab.id("good")] > 0 > out[0, vocab.id("awful")]
    unsteered = FeatureSteer(bank, {"pos_high": 1.0})
    unsteered.reset(2)
    assert torch.allclose(unsteered(scores.clone()), table[:, bank.column("pos_high")].expand(2, -1))
    with pytest.raises(NeurosymError, match="needs the automaton"):
        FeatureSteer(bank, {"pos_high": 1.0}, at_states=[0])
    with pytest.raises(NeurosymError, match="no feature column 'nope'"):
        FeatureSteer(bank, {"nope": 1.0})


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_repetition_penalty_equals_a_loop_over_each_window(k, V, steps, seed):
    g = torch.Generator().manual_seed(seed)
    B = 3
    pen = RepetitionPenalty(last_k=k, factor=1.5)
    pen.reset(B)
    taken: list[list[int]] = [[] for _ in range(B)]
    for _ in range(steps):
        tokens = torch.randint(0, V, (B,), generator=g)
        done = torch.rand(B, generator=g) < 0.3
        pen.advance(tokens, done)
        for b in range(B):
            if not done[b]:
                taken[b].append(int(tokens[b]))
    scores = torch.randn(B, V, generator=g, dtype=torch.float64)
    scores[0, 0] = NEG
    expected = scores.clone()
    for b in range(B):
        for v in set(taken[b][-k:]):
            x = float(scores[b, v])
            expected[b, v] = x / 1.5 if x > 0 else x * 1.5
    assert torch.equal(pen(scores.clone()), expected)
