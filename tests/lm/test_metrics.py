"""Metrics: hand computations, uniform models, and the perplexity floor of a grammar."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

import neurosym
from neurosym.compile.fsg import compile_fsg
from neurosym.dsl.fsg import parse_fsg
from neurosym.lm import (
    CausalLM,
    LMConfig,
    LMOutput,
    build_fusion_lm,
    evaluate,
    floor_ppl,
    focus_token_ce,
    make_batch,
    oracle_logits,
    perplexity,
    semantic_mse,
    seen_only_ppl,
    token_nll,
)

ROOT = Path(__file__).resolve().parents[2]

# a small infinite grammar (sentences joined by 'and'), E|X| ~ 9.7
LOOPY = """
%start A
A B 'the' 0.5
A B 'a' 0.3
A C 'some' 0.2
B C 'big' 0.25
B C <eps> 0.75
C D 'cat' 0.6
C D 'dog' 0.4
D 0.3
D A 'and' 0.7
"""


# ---------------------------------------------------------------------- hand computations
def test_perplexity_of_uniform_logits_is_the_vocabulary_size():
    V = 11
    targets = torch.tensor([[3, 4, 5, 0, 0], [1, 2, 0, 0, 0]])
    assert perplexity(torch.zeros(2, 5, V), targets) == pytest.approx(V, rel=1e-9)
    assert perplexity(torch.full((2, 5, V), 3.0), targets) == pytest.approx(V, rel=1e-9)
    assert seen_only_ppl(torch.zeros(2, 5, V), targets, [1, 3]) == pytest.approx(V, rel=1e-9)
    assert focus_token_ce(torch.zeros(2, 5, V), targets, [4, 5]) == pytest.approx(math.log(V), rel=1e-9)


def test_perplexity_seen_and_focus_by_hand():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 6, dtype=torch.float64)
    targets = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
    logp = torch.log_softmax(logits, -1)
    nll = {(b, t): -float(logp[b, t, targets[b, t]]) for b in range(2) for t in range(4) if targets[b, t] != 0}
    assert perplexity(logits, targets) == pytest.approx(math.exp(sum(nll.values()) / 5), rel=1e-9)
    seen = [1, 3, 4]  # 2 and 5 held out
    s = [v for (b, t), v in nll.items() if int(targets[b, t]) in seen]
    assert seen_only_ppl(logits, targets, seen) == pytest.approx(math.exp(sum(s) / 3), rel=1e-9)
    assert seen_only_ppl(logits, targets, torch.tensor(seen)) == pytest.approx(math.exp(sum(s) / 3), rel=1e-9)
    assert seen_only_ppl(logits, targets, range(6)) == pytest.approx(perplexity(logits, targets), rel=1e-12)
    f = [v for (b, t), v in nll.items() if int(targets[b, t]) in (2, 5)]
    assert focus_token_ce(logits, targets, [2, 5]) == pytest.approx(sum(f) / 2, rel=1e-9)
    assert math.isnan(focus_token_ce(logits, targets, [9]))
    # no smoothing: a confident correct model has PPL -> 1
    sharp = torch.full((1, 2, 6), -50.0)
    sharp[0, 0, 1] = sharp[0, 1, 2] = 50.0
    assert perplexity(sharp, torch.tensor([[1, 2]])) == pytest.approx(1.0, abs=1e-9)


def test_semantic_mse_by_hand():
    pred = torch.tensor([[[0.5, 1.0], [0.0, 0.2]]])
    target = torch.tensor([[[0.0, 1.0], [1.0, 1.0]]])
    assert semantic_mse(pred, target, torch.tensor([[True, False]])) == pytest.approx(0.25 / 2)
    assert semantic_mse(pred, target, torch.tensor([[True, True]])) == pytest.approx((0.25 + 1 + 0.64) / 4)
    assert math.isnan(semantic_mse(pred, target, torch.tensor([[False, False]])))


# ---------------------------------------------------------------------- evaluate
@pytest.fixture(scope="module")
def recipe():
    auto = neurosym.load(ROOT / "grammars" / "clause.fsg")
    bank = neurosym.load(ROOT / "lexicons" / "sentiment.lex", auto.vocab)
    return auto, bank


def test_evaluate_a_uniform_model(recipe):
    auto, bank = recipe
    V = len(auto.vocab)
    model = CausalLM(LMConfig(vocab_size=V, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32))
    with torch.no_grad():
        model.tok_emb.weight.zero_()  # tied: every logit is 0
    batches = [make_batch(auto.sample(8, seed=s), auto, bank) for s in range(3)]
    adjectives = (bank.table[:, bank.column("is_adj")] > 0).nonzero().squeeze(1)
    m = evaluate(model, batches, seen_ids=range(V), focus_ids=adjectives)
    assert m["ppl"] == pytest.approx(V, rel=1e-6) and m["seen_ppl"] == pytest.approx(V, rel=1e-6)
    assert m["nll"] == pytest.approx(math.log(V), rel=1e-6) and m["focus_ce"] == pytest.approx(math.log(V), rel=1e-6)
    assert m["tokens"] == sum(int((b["targets"] != 0).sum()) for b in batches)
    assert "sem_mse" not in m
    assert model.training  # the mode is restored


def test_evaluate_pools_batches_and_reports_sem_mse(recipe):
    auto, bank = recipe
    torch.manual_seed(0)
    model = build_fusion_lm(LMConfig(vocab_size=len(auto.vocab), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32), len(bank.names))
    model.eval()
    batches = [make_batch(auto.sample(n, seed=n), auto, bank) for n in (3, 9)]
    adjectives = (bank.table[:, bank.column("is_adj")] > 0).nonzero().squeeze(1)
    held_out = adjectives[:2]
    seen = [v for v in range(len(auto.vocab)) if v not in held_out.tolist()]
    m = evaluate(model, batches, seen_ids=seen, focus_ids=adjectives)
    with torch.no_grad():
        outs = [model(b["ids"], features=b["features"]) for b in batches]
    # pooled over tokens: the same as one concatenated computation
    logits = torch.cat([o.logits.reshape(-1, o.logits.shape[-1]) for o in outs])[None]
    targets = torch.cat([b["targets"].reshape(-1) for b in batches])[None]
    assert m["ppl"] == pytest.approx(perplexity(logits, targets), rel=1e-9)
    assert m["seen_ppl"] == pytest.approx(seen_only_ppl(logits, targets, seen), rel=1e-9)
    assert m["focus_ce"] == pytest.approx(focus_token_ce(logits, targets, adjectives), rel=1e-9)
    pred = torch.cat([o.extras["aux"].reshape(-1, len(bank.names)) for o in outs])[None]
    aux_t = torch.cat([b["aux_targets"].reshape(-1, len(bank.names)) for b in batches])[None]
    assert m["sem_mse"] == pytest.approx(semantic_mse(pred, aux_t, targets != 0), rel=1e-9)
    assert not model.training


# ---------------------------------------------------------------------- the floor
class Oracle(nn.Module):
    """The grammar itself as an LM: logits = its exact next-token log-probabilities."""

    def __init__(self, auto):
        super().__init__()
        self.auto = auto

    def forward(self, ids, **inputs):
        return LMOutput(logits=oracle_logits(self.auto, ids), hidden=None)


def _corpus_nll(auto, sentences, chunk=4000):
    """Per-sentence true NLL sums (n+1 predictions each, via oracle_logits) and counts."""
    sums, counts = [], []
    sentences = sorted(sentences, key=len)
    for i in range(0, len(sentences), chunk):
        b = make_batch(sentences[i : i + chunk], auto)
        keep = b["targets"] != 0
        nll = torch.where(keep, token_nll(oracle_logits(auto, b["ids"]), b["targets"]), torch.zeros((), dtype=torch.float64))
        sums.append(nll.sum(1))
        counts.append(keep.sum(1))
        # exact: the n + 1 conditional NLLs of a sentence add up to -log P(sentence), stop included
        words = b["ids"][:, 1:]
        assert torch.allclose(nll.sum(1), -auto.log_prob(words, b["lengths"] - 1), atol=1e-9)
    return torch.cat(sums), torch.cat(counts).double()


@pytest.mark.parametrize("grammar", ["loopy", "clause"])
def test_true_distribution_approaches_the_with_eos_floor(grammar):
    auto = compile_fsg(parse_fsg(LOOPY)) if grammar == "loopy" else neurosym.load(ROOT / "grammars" / "clause.fsg")
    sentences = auto.sample(8000, seed=0)
    s, n = _corpus_nll(auto, sentences)
    rate = float(s.sum() / n.sum())  # pooled per-token NLL of the true distribution
    # standard error of the ratio estimator sum(s) / sum(n)
    se = float((s - rate * n).std() / n.mean()) / math.sqrt(len(sentences))
    with_eos, without = math.log(floor_ppl(auto, with_eos=True)), math.log(floor_ppl(auto, with_eos=False))
    assert abs(rate - with_eos) < 4 * se and abs(math.exp(rate) / math.exp(with_eos) - 1) < 0.01
    assert abs(rate - without) > 20 * se  # dividing by the words only is the wrong floor here
    assert floor_ppl(auto, with_eos=True) == auto.entropy().ppl_floor_with_eos
    assert floor_ppl(auto) < floor_ppl(auto, with_eos=False)


def test_evaluate_of_the_grammar_is_at_the_floor():
    auto = neurosym.load(ROOT / "grammars" / "clause.fsg")
    batches = [make_batch(auto.sample(2000, seed=s), auto) for s in range(3)]
    m = evaluate(Oracle(auto), batches)
    assert m["ppl"] == pytest.approx(floor_ppl(auto), rel=0.02)


def test_oracle_logits_are_normalised_next_token_distributions():
    auto = compile_fsg(parse_fsg(LOOPY))
    b = make_batch(auto.sample(50, seed=1), auto)
    logits = oracle_logits(auto, b["ids"])
    keep = b["targets"] != 0
    assert torch.allclose(logits[keep].exp().sum(-1), torch.ones(int(keep.sum()), dtype=torch.float64))
    eos = auto.vocab.tokens.index("<eos>")
    # <eos> gets probability only where the grammar may stop, i.e. after 'cat' or 'dog'
    last_word = torch.tensor([[auto.vocab.tokens[int(i)] in ("cat", "dog") for i in row] for row in b["ids"]])
    assert torch.equal((logits[..., eos] > -math.inf) & keep, last_word & keep)
