"""PCFGPrior and PCFGMask (neurosym.decode.pcfg). Sampling with PCFGPrior alone on zero
logits reproduces the grammar's own distribution: per-position chi-square tests against
the exact distribution (a finite grammar, by enumeration) or the grammar's own sampler
(RuleTensors.sample: agreement.pcfg, arith.pcfg), and the mean log-probability of the
samples against the exact entropy (or the grammar sampler's mean). A tiny sampling loop
here drives reset / __call__ / advance with torch.multinomial."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from neurosym.compile.pcfg import RuleTensors, load_pcfg
from neurosym.decode import generate
from neurosym.decode.pcfg import PCFGMask, PCFGPrior
from neurosym.errors import NeurosymError
from neurosym.layers.inside import sentence_log_prob
from neurosym.layers.prefix import prefix_state
from neurosym.lm.model import CausalLM, LMConfig
from neurosym.vocab import Vocab
from references import entropy_of, finite_language

ROOT = Path(__file__).resolve().parents[2]
NEG = float("-inf")
P_MIN = 1e-3  # per chi-square test

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------------- helpers
def finite_grammar() -> RuleTensors:
    """A fixed random grammar with a finite language: empty and one-token sentences, a
    token two preterminals share, and words it never emits."""
    rng = np.random.default_rng(7)
    N, T, V = 3, 3, 5
    S = N + T
    binary = np.zeros((N, S, S))
    for a in range(N):  # A uses only nonterminals above it: acyclic
        cells = [(b, c) for b in range(a + 1, S) for c in range(a + 1, S) if rng.random() < 0.6] or [(N, N)]
        for b, c in cells:
            binary[a, b, c] = rng.random() + 0.1
        binary[a] /= binary[a].sum()
    emit = np.zeros((T, V))
    emit[0, [0, 1]] = [0.7, 0.3]
    emit[1, [1, 2, 3]] = [0.2, 0.5, 0.3]
    emit[2, [4]] = [1.0]
    words = [f"w{i}" for i in range(V)] + ["unused"]
    vocab = Vocab.words(words)
    full = np.zeros((T, len(vocab)))
    full[:, [vocab.id(w) for w in words[:V]]] = emit
    log = lambda x: torch.tensor(np.log(np.asarray(x, dtype=np.float64)), dtype=torch.float64)  # noqa: E731
    with np.errstate(divide="ignore"):
        return RuleTensors(
            root=log([0.6, 0.1, 0.05]), binary=log(binary), emit=log(full), root_term=log([0.1, 0.0, 0.1]), empty=log(0.05),
            nonterminals=["A0", "A1", "A2"], preterminals=["P0", "P1", "P2"], vocab=vocab,
        )


def sample(processors, V: int, n: int, eos: int, seed: int, max_len: int, chunk: int = 5000) -> list[list[int]]:
    """Sentences drawn on zero model logits through ``processors``: per step scores ->
    softmax -> torch.multinomial -> advance. Rows that do not end within ``max_len``
    tokens are dropped (the samples are conditioned on at most ``max_len`` tokens)."""
    gen = torch.Generator().manual_seed(seed)
    out: list[list[int]] = []
    while len(out) < n:
        B = min(chunk, n - len(out))
        for p in processors:
            p.reset(B)
        done = torch.zeros(B, dtype=torch.bool)
        rows: list[list[int]] = [[] for _ in range(B)]
        for _ in range(max_len + 1):
            scores = torch.zeros(B, V, dtype=torch.float64)
            for p in processors:
                scores = p(scores)
            probs = torch.softmax(scores, -1)
            probs[done] = 1.0 / V  # finished rows draw a placeholder
            tokens = torch.multinomial(probs, 1, generator=gen)[:, 0]
            for b in torch.nonzero(~done & (tokens != eos))[:, 0].tolist():
                rows[b].append(int(tokens[b]))
            for p in processors:
                p.advance(tokens, done)
            done |= tokens == eos
            if bool(done.all()):
                break
        out += [r for r, d in zip(rows, done.tolist()) if d]
    return out[:n]


def position_categories(sentences, p: int) -> list:
    """What each sentence that reaches position p has there: its token, or END."""
    return [s[p] if p < len(s) else "END" for s in sentences if len(s) >= p]


def chisquare_exact(observed: Counter, expected: dict[object, float]) -> float:
    """p-value of observed counts against exact probabilities (small cells merged)."""
    n = sum(observed.values())
    assert set(observed) <= set(expected), set(observed) - set(expected)
    keys = sorted(expected, key=lambda k: -expected[k])
    big = [k for k in keys if expected[k] * n >= 5]
    small = [k for k in keys if expected[k] * n < 5]
    obs = [observed.get(k, 0) for k in big] + ([sum(observed.get(k, 0) for k in small)] if small else [])
    exp = [expected[k] * n for k in big] + ([sum(expected[k] for k in small) * n] if small else [])
    if len(obs) < 2:
        return 1.0
    return float(stats.chisquare(obs, np.array(exp) * n / sum(exp)).pvalue)


def chisquare_two_samples(a: list, b: list) -> float:
    """p-value of the contingency test that two samples of categories share a distribution
    (categories with fewer than 10 draws in both merged)."""
    ca, cb = Counter(a), Counter(b)
    keys = [k for k in set(ca) | set(cb) if ca[k] + cb[k] >= 10]
    rest = [k for k in set(ca) | set(cb) if k not in keys]
    table = [[ca[k] for k in keys], [cb[k] for k in keys]]
    if rest:
        table[0].append(sum(ca[k] for k in rest))
        table[1].append(sum(cb[k] for k in rest))
    if len(table[0]) < 2:
        return 1.0
    return float(stats.chi2_contingency(np.array(table)).pvalue)


def batch(sentences) -> tuple[torch.Tensor, torch.Tensor]:
    L = max(map(len, sentences))
    ids = torch.zeros(len(sentences), max(L, 1), dtype=torch.long)
    for b, s in enumerate(sentences):
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, torch.tensor([len(s) for s in sentences])


def log_probs(rt: RuleTensors, sentences) -> np.ndarray:
    """(n,) log P(sentence), from the prefix chart (tests/layers/test_prefix.py checks it
    against the inside algorithm; the inside pass is slow on these sparse grammars)."""
    return prefix_state(rt, *batch(sentences)).sentence_log_prob.numpy()


def inside_log_probs(rt: RuleTensors, sentences) -> np.ndarray:
    return sentence_log_prob(rt, *batch(sentences)).numpy()


# ---------------------------------------------------------------------- the prior reproduces the grammar
def test_prior_alone_reproduces_a_finite_grammar():
    rt = finite_grammar()
    language = finite_language(rt)
    total = sum(language.values())
    eos = rt.vocab.id("<eos>")
    n = 5000
    got = sample([PCFGPrior(rt, 1.0, eos)], len(rt.vocab), n, eos, seed=0, max_len=12)
    assert len(got) == n
    assert all(tuple(s) in language for s in got)
    # the whole sentence, and per position
    assert chisquare_exact(Counter(map(tuple, got)), {s: p / total for s, p in language.items()}) > P_MIN
    longest = max(map(len, language))
    for p in range(longest + 1):
        reach = {s: q for s, q in language.items() if len(s) >= p}
        mass = sum(reach.values())
        expected: dict = {}
        for s, q in reach.items():
            key = s[p] if p < len(s) else "END"
            expected[key] = expected.get(key, 0.0) + q / mass
        assert chisquare_exact(Counter(position_categories(got, p)), expected) > P_MIN, p
    # mean log-probability against the exact entropy, within 3 standard errors
    lp = np.array([math.log(language[tuple(s)] / total) for s in got])
    assert abs(-lp.mean() - entropy_of(language)) <= 3 * lp.std(ddof=1) / math.sqrt(n)


def check_against_grammar_sampler(rt: RuleTensors, n: int, max_len: int, chunk: int) -> None:
    eos = rt.vocab.id("<eos>")
    ours = sample([PCFGPrior(rt, 1.0, eos)], len(rt.vocab), n, eos, seed=1, max_len=max_len, chunk=chunk)
    theirs = rt.sample(n, seed=2, max_len=max_len)
    for p in range(max_len + 1):
        a, b = position_categories(ours, p), position_categories(theirs, p)
        if min(len(a), len(b)) < 50:
            break
        assert chisquare_two_samples(a, b) > P_MIN, p
    la, lb = log_probs(rt, ours), log_probs(rt, theirs)
    se = math.sqrt(la.var(ddof=1) / len(la) + lb.var(ddof=1) / len(lb))
    assert abs(la.mean() - lb.mean()) <= 3 * se, (la.mean(), lb.mean(), se)


@pytest.mark.slow
@pytest.mark.parametrize("name,max_len", [("agreement.pcfg", 30), ("arith.pcfg", 40)])
def test_prior_alone_reproduces_the_shipped_grammars(name, max_len):
    rt = load_pcfg(ROOT / "grammars" / name).to(torch.float64)
    check_against_grammar_sampler(rt, 5000, max_len, chunk=500)


def test_prior_alone_reproduces_arith_quickly():
    rt = load_pcfg(ROOT / "grammars" / "arith.pcfg").to(torch.float64)
    check_against_grammar_sampler(rt, 600, 16, chunk=600)


# ---------------------------------------------------------------------- scores, masks, log_prob
def test_prior_adds_weighted_conditional_log_probs_and_mask_forbids_zeros():
    rt = load_pcfg(ROOT / "grammars" / "arith.pcfg").to(torch.float64)
    eos, V = rt.vocab.id("<eos>"), len(rt.vocab) + 2  # a model with two ids the grammar lacks
    prefixes = [[rt.vocab.id(w) for w in text.split()] for text in ("( 1 +", "2 * 3", "( ( 4", "")]
    prior, mask = PCFGPrior(rt, 0.5, eos), PCFGMask(rt, eos)
    for proc in (prior, mask):
        proc.reset(len(prefixes))
        for k in range(max(map(len, prefixes))):
            proc.advance(torch.tensor([p[k] if k < len(p) else 0 for p in prefixes]), torch.tensor([k >= len(p) for p in prefixes]))
    logits = torch.randn(len(prefixes), V, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    got_prior, got_mask = prior(logits.clone()), mask(logits.clone())
    for b, p in enumerate(prefixes):
        ref = prefix_state(rt, torch.tensor([p]).reshape(1, len(p)))
        nxt, end = ref.next_token_log_probs()
        want = torch.full((V,), NEG, dtype=torch.float64)
        want[: len(rt.vocab)] = nxt[0]
        want[eos] = end[0]
        assert torch.allclose(got_prior[b], logits[b] + 0.5 * want, rtol=0, atol=1e-12)
        assert torch.equal(got_mask[b] == NEG, want == NEG)
        assert torch.equal(got_mask[b][want > NEG], logits[b][want > NEG])
    assert (got_mask[:, len(rt.vocab) :] == NEG).all()
    assert got_mask[1, eos] > NEG and got_mask[0, eos] == NEG  # "2 * 3" is a sentence, "( 1 +" is not
    toks = torch.tensor([rt.vocab.id(")"), eos, rt.vocab.id(")"), rt.vocab.id("(")])
    assert prior.allowed(toks).tolist() == mask.allowed(toks).tolist() == [False, True, True, True]
    assert prior.describe_allowed(1)[0] in (eos, rt.vocab.id("+"), rt.vocab.id("-"), rt.vocab.id("*"), rt.vocab.id("/"))
    assert set(mask.describe_allowed(0, limit=100)) == set(torch.nonzero(want_row(rt, prefixes[0], eos, V) > NEG)[:, 0].tolist())


def want_row(rt, prefix, eos, V):
    ref = prefix_state(rt, torch.tensor([prefix]).reshape(1, len(prefix)))
    nxt, end = ref.next_token_log_probs()
    out = torch.full((V,), NEG, dtype=torch.float64)
    out[: len(rt.vocab)] = nxt[0]
    out[eos] = end[0]
    return out


def test_log_probs_of_a_sentence_sum_to_its_grammar_probability():
    rt = load_pcfg(ROOT / "grammars" / "agreement.pcfg").to(torch.float64)
    eos = rt.vocab.id("<eos>")
    sentences = rt.sample(6, seed=4, max_len=30)
    prior = PCFGPrior(rt, 2.0, eos)
    prior.reset(len(sentences))
    L = max(map(len, sentences))
    total = torch.zeros(len(sentences), dtype=torch.float64)
    for k in range(L + 1):
        tokens = torch.tensor([s[k] if k < len(s) else eos for s in sentences])
        done = torch.tensor([k > len(s) for s in sentences])
        total += torch.where(done, 0.0, prior.log_prob(tokens))
        prior.advance(tokens, done)
    want = torch.from_numpy(inside_log_probs(rt, sentences)) - prior.grammar.log_total
    assert torch.allclose(total, want, rtol=1e-10, atol=1e-10)


def test_mask_keeps_random_model_samples_in_the_language():
    rt = load_pcfg(ROOT / "grammars" / "agreement.pcfg").to(torch.float64)
    eos, V = rt.vocab.id("<eos>"), len(rt.vocab)
    mask = PCFGMask(rt, eos)
    gen = torch.Generator().manual_seed(3)
    B = 200
    mask.reset(B)
    done = torch.zeros(B, dtype=torch.bool)
    rows: list[list[int]] = [[] for _ in range(B)]
    for _ in range(40):
        scores = mask(3 * torch.randn(B, V, generator=gen, dtype=torch.float64))
        probs = torch.softmax(scores, -1)
        probs[done] = 1.0 / V
        tokens = torch.multinomial(probs, 1, generator=gen)[:, 0]
        assert mask.allowed(tokens)[~done].all()
        for b in torch.nonzero(~done & (tokens != eos))[:, 0].tolist():
            rows[b].append(int(tokens[b]))
        mask.advance(tokens, done)
        done |= tokens == eos
    finished = [r for r, d in zip(rows, done.tolist()) if d]
    assert len(finished) >= 150
    assert np.isfinite(log_probs(rt, finished)).all()
    assert np.isfinite(inside_log_probs(rt, sorted(finished, key=len)[:10])).all()


def test_a_row_out_of_the_language_has_no_continuation():
    rt = load_pcfg(ROOT / "grammars" / "arith.pcfg").to(torch.float64)
    eos = rt.vocab.id("<eos>")
    mask = PCFGMask(rt, eos)
    mask.reset(2)
    mask.advance(torch.tensor([rt.vocab.id("+"), rt.vocab.id("1")]))
    scores = mask(torch.zeros(2, len(rt.vocab), dtype=torch.float64))
    assert (scores[0] == NEG).all() and (scores[1] > NEG).any()
    assert mask.describe_allowed(0) == [] and eos in mask.describe_allowed(1)


def test_generate_with_prompts_of_different_lengths():
    # generate() marks rows that still read their prompt as done: the prior must let them resume
    rt = load_pcfg(ROOT / "grammars" / "arith.pcfg").to(torch.float64)
    vocab = rt.vocab
    eos, bos = vocab.id("<eos>"), vocab.id("<bos>")
    model = CausalLM(LMConfig(vocab_size=len(vocab), d_model=8, n_layers=1, n_heads=2, d_ff=16, max_len=48)).eval()
    prompts = [[vocab.id(w) for w in text.split()] for text in ("( 1", "( ( 2 + 3 ) * ( 4", "7 -")]
    prior = PCFGPrior(rt, 1.0, eos)
    out = generate(model, prompts=prompts, max_len=30, processors=[prior, PCFGMask(rt, eos)], eos_id=eos, bos_id=bos, seed=1)
    for p, tokens, status, glp in zip(prompts, out.tokens, out.status, out.grammar_log_prob.tolist()):
        if status == "eos":
            full = p + tokens
            ref = prefix_state(rt, torch.tensor([p]))
            want = inside_log_probs(rt, [full])[0] - ref.prefix_log_prob.item()
            assert np.isfinite(want)
            assert glp == pytest.approx(want, rel=1e-9, abs=1e-9)  # the sum of the prior's and the mask's (None) log_prob
    assert out.status.count("eos") >= 2


def test_bad_arguments_are_errors():
    rt = load_pcfg(ROOT / "grammars" / "arith.pcfg")
    with pytest.raises(NeurosymError, match="weight"):
        PCFGPrior(rt, -1.0)
    with pytest.raises(NeurosymError, match="weight"):
        PCFGPrior(rt, float("nan"))
    with pytest.raises(NeurosymError, match="id of its own"):
        PCFGMask(rt, eos_id=rt.vocab.id("+"))
    prior = PCFGPrior(rt, 1.0)
    with pytest.raises(NeurosymError, match="reset"):
        prior(torch.zeros(1, len(rt.vocab)))
    prior.reset(2)
    with pytest.raises(NeurosymError, match="columns"):
        prior(torch.zeros(2, len(rt.vocab) - 1))
    with pytest.raises(NeurosymError, match="B = 2"):
        prior(torch.zeros(3, len(rt.vocab)))
    unweighted = PCFGPrior(rt, 0.0)
    unweighted.reset(1)
    s = torch.randn(1, len(rt.vocab))
    assert torch.equal(unweighted(s.clone()), s) and unweighted.allowed(torch.tensor([rt.vocab.id(")")])).all()


def test_the_chi_square_check_has_power():
    # a tempered prior (weight 0.5) draws another distribution: the same checks must reject it
    rt = finite_grammar()
    language = finite_language(rt)
    total = sum(language.values())
    eos = rt.vocab.id("<eos>")
    got = sample([PCFGPrior(rt, 0.5, eos)], len(rt.vocab), 5000, eos, seed=0, max_len=12)
    assert chisquare_exact(Counter(map(tuple, got)), {s: p / total for s, p in language.items()}) < 1e-6
    lp = np.array([math.log(language[tuple(s)] / total) for s in got])
    assert abs(-lp.mean() - entropy_of(language)) > 3 * lp.std(ddof=1) / math.sqrt(len(got))


def test_processors_of_a_grammar_without_cnf_nonterminals_end_rows_that_leave_it(tmp_path):
    """Issue 33: a start symbol with only lexical rules (no CNF nonterminal), unreachable
    rules beside it; the processors follow a prefix out of the language without an error."""
    path = tmp_path / "g.pcfg"
    path.write_text("S -> 'a' [0.107] | 'b' [0.893]\nU -> 'a' U2 [1]\nU2 -> 'b' [1]\n")
    rules = load_pcfg(path)
    V, eos = len(rules.vocab), rules.vocab.id("<eos>")
    a, b = rules.vocab.id("a"), rules.vocab.id("b")
    prior, mask = PCFGPrior(rules), PCFGMask(rules)
    seen = []
    for proc in (prior, mask):
        proc.reset(1)
        rows = []
        for token in (a, a, b):
            rows.append(proc(torch.zeros(1, V, dtype=torch.float64))[0])
            proc.advance(torch.tensor([token]))
        seen.append(rows)
    (p0, p1, p2), (m0, m1, m2) = seen
    assert math.isclose(p0[a].exp().item(), 0.107, rel_tol=1e-15) and math.isclose(p0[b].exp().item(), 0.893, rel_tol=1e-15)
    assert p0[eos] == -math.inf and p1[eos] == 0.0 and bool((p1[:eos] == -math.inf).all() and (p1[eos + 1 :] == -math.inf).all())
    assert bool((p2 == -math.inf).all()) and bool((m2 == -math.inf).all())
    assert torch.equal(torch.isfinite(m0), torch.isfinite(p0)) and torch.equal(torch.isfinite(m1), torch.isfinite(p1))
