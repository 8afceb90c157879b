"""Grammar priors: FSGPrior alone reproduces the FSG's distribution (chi-square), its
log-probabilities are the grammar's exact ones; RegexPrior equals the layer's forward
algorithm on every continuation; MixturePrior is the probability-space mixture and its
gradient reaches c."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from neurosym.compile.fsg import load_fsg
from neurosym.compile.regex import compile_regex
from neurosym.data import shipped_file
from neurosym.decode import FSGPrior, GrammarMask, MixturePrior, RegexPrior, generate
from neurosym.decode.priors import learnable
from neurosym.errors import NeurosymError
from neurosym.layers.wfsa import RegexLayer
from neurosym.lm.model import CausalLM, LMConfig
from neurosym.vocab import Vocab

pytestmark = pytest.mark.usefixtures("one_thread")


def zero_lm(vocab_size: int, max_len: int = 32) -> CausalLM:
    """A model whose logits are exactly 0: the tied embedding is zero."""
    model = CausalLM(LMConfig(vocab_size=vocab_size, d_model=8, n_layers=1, n_heads=2, d_ff=16, max_len=max_len)).eval()
    with torch.no_grad():
        model.tok_emb.weight.zero_()
    return model


@pytest.fixture(scope="module")
def clause():
    return load_fsg(shipped_file("grammars/clause.fsg"))


@pytest.fixture(scope="module")
def clause_samples(clause):
    vocab = clause.vocab
    eos, bos = vocab.id("<eos>"), vocab.id("<bos>")
    out = generate(zero_lm(len(vocab)), n=4000, max_len=20, processors=[FSGPrior(clause, 1.0, eos)], eos_id=eos, bos_id=bos, seed=0)
    assert out.status == ["eos"] * 4000
    return out


def test_fsg_prior_alone_draws_first_words_with_the_grammar_probabilities(clause, clause_samples):
    first = np.array([t[0] for t in clause_samples.tokens])
    p = clause.log_probs[clause.start].exp().numpy()
    support = np.nonzero(p > 0)[0]
    observed = np.array([(first == v).sum() for v in support])
    assert observed.sum() == len(first)
    assert stats.chisquare(observed, p[support] * len(first)).pvalue > 1e-3


def test_fsg_prior_alone_draws_sentence_lengths_with_the_grammar_probabilities(clause, clause_samples):
    # exact length distribution by the forward recursion over the automaton's states
    Q = clause.num_states
    step = torch.zeros(Q, Q, dtype=torch.float64)
    d = clause.delta
    src, tok = (d >= 0).nonzero(as_tuple=True)
    step.index_put_((src, d[src, tok]), clause.log_probs[src, tok].exp(), accumulate=True)
    stop = clause.final_log_probs.exp()
    mass = torch.zeros(Q, dtype=torch.float64)
    mass[clause.start] = 1.0
    expected = []
    for _ in range(21):
        expected.append(float(mass @ stop))
        mass = mass @ step
    lengths = np.array([len(t) for t in clause_samples.tokens])
    support = [n for n, e in enumerate(expected) if e > 0]
    assert math.isclose(sum(expected[n] for n in support), 1.0, rel_tol=1e-9)
    observed = np.array([(lengths == n).sum() for n in support])
    assert stats.chisquare(observed, np.array([expected[n] for n in support]) * len(lengths)).pvalue > 1e-3


def test_grammar_log_prob_is_the_exact_sentence_probability_and_matches_the_entropy(clause, clause_samples):
    ids = clause_samples.tokens
    width = max(map(len, ids))
    grid = torch.tensor([t + [0] * (width - len(t)) for t in ids])
    exact = clause.log_prob(grid, torch.tensor([len(t) for t in ids]))
    assert torch.allclose(clause_samples.grammar_log_prob, exact, atol=1e-9)
    # the model is uniform, so sampling from the product is sampling from the grammar
    assert torch.allclose(clause_samples.sample_log_prob, exact, atol=1e-6)
    lp = exact.numpy()
    H = clause.entropy().per_sentence
    assert abs(-lp.mean() - H) < 4 * lp.std(ddof=1) / math.sqrt(len(lp))


def test_fsg_prior_with_a_weight_is_a_product_of_experts(clause):
    vocab = clause.vocab
    eos = vocab.id("<eos>")
    prior = FSGPrior(clause, 0.5, eos)
    prior.reset(2)
    scores = torch.randn(2, len(vocab))
    out = prior(scores.clone())
    row = clause.log_probs[clause.start].clone()
    row[eos] = clause.final_log_probs[clause.start]
    expected = torch.where(row > -math.inf, scores + 0.5 * row.float(), torch.tensor(-math.inf))
    assert torch.allclose(out, expected.expand(2, -1), atol=1e-6)
    assert torch.equal(prior.allowed(torch.tensor([vocab.id("Alice"), vocab.id("the")])), torch.tensor([True, False]))


def test_fsg_prior_rejects_bad_arguments(clause):
    with pytest.raises(NeurosymError, match="needs a WeightedAutomaton"):
        FSGPrior(compile_regex("ab"), 1.0, 0)
    with pytest.raises(NeurosymError, match="weight must be a finite number >= 0"):
        FSGPrior(clause, -1.0)
    with pytest.raises(NeurosymError, match="the grammar reads token"):
        FSGPrior(clause, 1.0, clause.vocab.id("the"))


# ---------------------------------------------------------------------- RegexPrior
def regex_layer(seed: int = 0) -> tuple[RegexLayer, Vocab]:
    vocab = Vocab.chars("abc")
    autos = [compile_regex(r"a(b|c)*", vocab), compile_regex(r"(ab)+", vocab)]
    autos[0].name, autos[1].name = "A", "AB"
    layer = RegexLayer(autos).double()
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in (layer.log_weights, layer.final_weights, layer.start_weights):
            p.add_(torch.randn_like(p))  # a "trained" layer: every weight moved
    return layer, vocab


@pytest.mark.parametrize("pattern", ["A", "AB"])
def test_regex_prior_equals_the_forward_algorithm_on_every_continuation(pattern):
    layer, vocab = regex_layer()
    eos = vocab.id("<eos>")
    k = layer.names.index(pattern)
    prior = RegexPrior(layer, 1.0, eos, pattern=pattern)
    prior.reset(1)
    open_end = regex_layer()[0]  # the same layer with every final weight 0: the mass of every path
    with torch.no_grad():
        open_end.final_weights.copy_(torch.where(layer.state_mask, 0.0, layer.penalty))
    prefix: list[int] = []
    for ch in "abab":
        V = len(vocab)
        with torch.no_grad():
            cont = open_end(torch.tensor([prefix + [v] for v in range(V)]))[:, k]  # (V,)
            stop = layer(torch.tensor([prefix], dtype=torch.long).reshape(1, len(prefix)))[0, k]
        ref = cont.clone()
        ref[eos] = stop
        assert torch.allclose(prior.log_prior()[0], torch.log_softmax(ref, 0), atol=1e-9)
        tok = vocab.id(ch)
        prior.advance(torch.tensor([tok]))
        prefix.append(tok)


def test_regex_prior_needs_a_pattern_when_the_layer_has_several():
    layer, vocab = regex_layer()
    with pytest.raises(NeurosymError, match="choose one with pattern="):
        RegexPrior(layer, 1.0, vocab.id("<eos>"))
    with pytest.raises(NeurosymError, match="no pattern 'X'"):
        RegexPrior(layer, 1.0, vocab.id("<eos>"), pattern="X")


def test_untrained_regex_prior_prefers_the_language():
    vocab = Vocab.chars("ab")
    layer = RegexLayer(compile_regex(r"(ab)+", vocab))
    eos = vocab.id("<eos>")
    out = generate(zero_lm(len(vocab)), n=200, max_len=12, processors=[RegexPrior(layer, 1.0, eos)], eos_id=eos,
                   bos_id=vocab.id("<bos>"), seed=0)
    accepted = sum(vocab.spell(t) in {"ab" * k for k in range(1, 7)} for t, s in zip(out.tokens, out.status) if s == "eos")
    assert accepted >= 195  # off-language tokens weigh exp(-20): soft, but nearly a mask


# ---------------------------------------------------------------------- MixturePrior
def test_mixture_is_the_probability_space_mixture_and_c_gets_a_gradient(clause):
    vocab = clause.vocab
    eos = vocab.id("<eos>")
    other = load_fsg(shipped_file("grammars/clause.fsg"), vocab, exclude=["good", "Alice"])
    c = learnable([0.3, -0.2])
    mix = MixturePrior([FSGPrior(clause, 1.0, eos), FSGPrior(other, 1.0, eos)], c)
    mix.reset(3)
    for word in ["Bob", "cooks", "the"]:
        mix.advance(torch.full((3,), vocab.id(word)))
    lp = mix.log_prior()
    w = torch.softmax(c.detach().double(), 0)
    a, b = (p.log_prior().exp() for p in mix.priors)
    assert torch.allclose(lp.exp(), w[0] * a + w[1] * b, atol=1e-12)
    assert torch.allclose(lp.exp().sum(1), torch.ones(3, dtype=torch.float64))
    tokens = torch.tensor([vocab.id("good"), vocab.id("bad"), vocab.id("very")])
    mix.log_prob(tokens).sum().backward()
    assert c.grad is not None and bool((c.grad != 0).all())
    # the gradient is d/dc log sum_k w_k p_k = w_k (p_k / p - 1) summed over rows
    pk = torch.stack([a.gather(1, tokens[:, None]).squeeze(1), b.gather(1, tokens[:, None]).squeeze(1)])  # (K, B)
    p = (w[:, None] * pk).sum(0)
    expected = (w[:, None] * (pk / p - 1)).sum(1)
    assert torch.allclose(c.grad.double(), expected, atol=1e-6)


def test_mixture_checks_its_arguments(clause):
    eos = clause.vocab.id("<eos>")
    with pytest.raises(NeurosymError, match="non-empty list of priors"):
        MixturePrior([GrammarMask(clause, eos)])
    with pytest.raises(NeurosymError, match=r"one logit per prior, shape \(1,\)"):
        MixturePrior([FSGPrior(clause, 1.0, eos)], [0.0, 1.0])
