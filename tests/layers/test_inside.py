"""The inside layer against brute-force enumeration of every binary tree, pytorch-struct's
SentCFG, the PCFG references (RuleTensors.log_prob, CNFGrammar.prob), and a chi-square
test of posterior samples. Everything in float64."""

from __future__ import annotations

import itertools
import math
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
import torch_struct  # in the test extra: the reference must run, not skip

from neurosym.compile.cnf import to_cnf
from neurosym.compile.pcfg import compile_pcfg, load_pcfg
from neurosym.dsl.pcfg import read_pcfg
from neurosym.errors import NeurosymError
from neurosym.layers.inside import (
    Parse,
    expected_rule_counts,
    inside,
    marginals,
    nll_supervised,
    nll_unsupervised,
    resolve_kernel,
    sample_parses,
    sentence_log_prob,
    tree_parts,
    tree_score,
    viterbi,
)
from neurosym.semiring import LogSemiring, MaxSemiring
from references import rule_tensors_log_prob, cnf_prob

ROOT = Path(__file__).resolve().parents[2]
DT = torch.float64
NEG = float("-inf")
TOL = 1e-9


pytestmark = pytest.mark.usefixtures("one_thread")


def potentials(B, L, N, T, seed=0, sparsity=0.0):
    """Random (terms, rules, roots); a fraction ``sparsity`` of rules is impossible."""
    g = torch.Generator().manual_seed(seed)
    terms = torch.randn(B, L, T, dtype=DT, generator=g)
    rules = torch.randn(B, N, N + T, N + T, dtype=DT, generator=g)
    rules[torch.rand(rules.shape, generator=g) < sparsity] = NEG
    roots = torch.randn(B, N, dtype=DT, generator=g)
    return terms, rules, roots


# ---------------------------------------------------------------------- brute force
def enumerate_trees(terms, rules, roots, n):
    """Every tree of one sentence (terms (L, T), rules (N, S, S), roots (N,)) over its
    first n tokens: a list of (score, spans, tags, rule uses, root), spans inclusive."""
    T, N = terms.shape[1], roots.shape[0]

    @lru_cache(maxsize=None)
    def sub(i, j):  # (score, spans, tags, uses, symbol code) for every subtree over tokens i..j
        if i == j:
            return [(float(terms[i, t]), (), (t,), (), N + t) for t in range(T)]
        out = []
        for k in range(i, j):
            for left, right in itertools.product(sub(i, k), sub(k + 1, j)):
                for a in range(N):
                    s = float(rules[a, left[4], right[4]]) + left[0] + right[0]
                    out.append((s, ((i, j, a),) + left[1] + right[1], left[2] + right[2], ((a, left[4], right[4]),) + left[3] + right[3], a))
        return out

    if n < 2:
        return []
    return [(s + float(roots[a]), spans, tags, uses, a) for s, spans, tags, uses, a in sub(0, n - 1)]


def brute_force(terms, rules, roots, n):
    """log Z, max score, and span / term / rule / root marginals by enumeration."""
    trees = [t for t in enumerate_trees(terms, rules, roots, n) if t[0] > NEG]
    L, T = terms.shape
    N, S = roots.shape[0], rules.shape[-1]
    spans, tags, uses, tops = torch.zeros(L, L, N, dtype=DT), torch.zeros(L, T, dtype=DT), torch.zeros(N, S, S, dtype=DT), torch.zeros(N, dtype=DT)
    if not trees:
        return NEG, NEG, spans, tags, uses, tops
    scores = torch.tensor([t[0] for t in trees], dtype=DT)
    log_z = torch.logsumexp(scores, 0)
    for p, (_, sp, tg, us, a) in zip(torch.exp(scores - log_z).tolist(), trees):
        for i, j, lab in sp:
            spans[i, j, lab] += p
        for i, t in enumerate(tg):
            tags[i, t] += p
        for a_, b_, c_ in us:
            uses[a_, b_, c_] += p
        tops[a] += p
    return float(log_z), float(scores.max()), spans, tags, uses, tops


def assert_close(x, y, tol=TOL):
    x, y = torch.as_tensor(x, dtype=DT), torch.as_tensor(y, dtype=DT)
    assert torch.equal(torch.isneginf(x), torch.isneginf(y)), (x, y)
    fin = torch.isfinite(y)
    assert torch.allclose(x[fin], y[fin], rtol=tol, atol=tol), (x, y)


CASES = [  # (N, T, lengths); the batch mixes lengths, padded to max(lengths)
    (1, 1, [5, 4, 2]),
    (2, 1, [3, 5]),
    (1, 3, [4, 2]),
    (2, 2, [4, 3, 1]),
    (3, 2, [4, 3]),
    (2, 3, [4, 2]),
    (3, 3, [3, 2, 0]),
]


@pytest.mark.parametrize("N, T, lengths", CASES)
@pytest.mark.parametrize("sparsity", [0.0, 0.4])
def test_against_brute_force(N, T, lengths, sparsity):
    B, L = len(lengths), max(lengths)
    terms, rules, roots = potentials(B, L, N, T, seed=N * 10 + T, sparsity=sparsity)
    lens = torch.tensor(lengths)
    log_z = inside(terms, rules, roots, lens)
    best, parses = viterbi(terms, rules, roots, lens)
    marg = marginals(terms, rules, roots, lens)
    for b, n in enumerate(lengths):
        z, mx, spans, tags, uses, tops = brute_force(terms[b], rules[b], roots[b], n)
        assert_close(log_z[b], z)
        assert_close(marg.log_z[b], z)
        assert_close(best[b], mx)
        assert_close(marg.spans[b], spans)
        assert_close(marg.terms[b], tags)
        assert_close(marg.rules[b], uses)
        assert_close(marg.roots[b], tops)
        if mx == NEG:
            assert parses[b] is None
        else:  # the Viterbi tree is a valid tree scoring the max
            root, found, tg = tree_parts(parses[b], N)
            assert len(parses[b].spans) == n - 1 and len(tg) == n
            assert parses[b].spans[0][:2] == (0, n - 1)
            assert_close(tree_score(terms[b : b + 1], rules[b : b + 1], roots[b : b + 1], [parses[b]]), [mx])


def test_full_length_default_equals_explicit_lengths():
    terms, rules, roots = potentials(3, 5, 2, 2, seed=1)
    assert_close(inside(terms, rules, roots), inside(terms, rules, roots, torch.tensor([5, 5, 5])))


def test_padding_does_not_matter():
    terms, rules, roots = potentials(2, 5, 2, 3, seed=2)
    lens = torch.tensor([3, 5])
    junk = terms.clone()
    junk[0, 3:] = torch.tensor([NEG, 50.0, -7.0], dtype=DT)
    m1, m2 = marginals(terms, rules, roots, lens), marginals(junk, rules, roots, lens)
    for x, y in zip(m1, m2):
        assert_close(x, y)
    assert torch.all(m2.terms[0, 3:] == 0) and torch.all(m2.spans[0, :, 3:] == 0)


def test_short_sentences_have_no_tree():
    terms, rules, roots = potentials(3, 2, 2, 2, seed=3)
    z = inside(terms, rules, roots, torch.tensor([2, 1, 0]))
    assert torch.isfinite(z[0]) and torch.isneginf(z[1:]).all()
    assert torch.isneginf(inside(terms[:, :1], rules, roots)).all()
    assert torch.isneginf(inside(terms[:, :0], rules, roots)).all()
    assert viterbi(terms, rules, roots, torch.tensor([2, 1, 0]))[1][1:] == [None, None]


def test_max_semiring_inside_and_gradients_through_minus_inf():
    terms, rules, roots = potentials(2, 4, 2, 2, seed=4, sparsity=0.5)
    terms.requires_grad_(), rules.requires_grad_(), roots.requires_grad_()
    z = inside(terms, rules, roots, torch.tensor([4, 1]))
    g = torch.autograd.grad(z[torch.isfinite(z)].sum(), (terms, rules, roots))
    assert all(not x.isnan().any() for x in g)
    best = inside(terms, rules, roots, semiring=MaxSemiring)
    assert_close(best, viterbi(terms, rules, roots)[0])


def test_gradcheck():
    terms, rules, roots = potentials(2, 4, 2, 1, seed=5)
    args = tuple(x.requires_grad_() for x in (terms, rules, roots))
    assert torch.autograd.gradcheck(lambda a, b, c: inside(a, b, c, torch.tensor([4, 3])), args)
    assert torch.autograd.gradcheck(lambda a, b, c: inside(a, b, c, semiring=MaxSemiring), args, fast_mode=True)


def test_shared_rules_expand_without_copy():
    terms, rules, roots = potentials(3, 4, 2, 2, seed=6)
    shared = rules[:1].expand(3, -1, -1, -1)
    assert_close(inside(terms, shared, roots), inside(terms, shared.contiguous(), roots))
    counts = expected_rule_counts(terms, shared, roots)
    for b in range(3):  # still one count tensor per sentence
        assert_close(counts[b], brute_force(terms[b], rules[0], roots[b], 4)[4])
    base = rules[0].clone().requires_grad_()
    (g,) = torch.autograd.grad(inside(terms, base.expand(3, -1, -1, -1), roots).sum(), base)
    assert_close(g, counts.sum(0))


def test_marginals_are_consistent():
    terms, rules, roots = potentials(2, 6, 3, 3, seed=7)
    lens = torch.tensor([6, 4])
    m = marginals(terms, rules, roots, lens)
    assert_close(m.terms.sum(-1), (torch.arange(6) < lens[:, None]).to(DT))
    assert_close(m.roots.sum(-1), torch.ones(2, dtype=DT))
    assert_close(m.spans.sum((1, 2, 3)), (lens - 1).to(DT))  # n - 1 nodes per tree
    assert_close(m.rules.sum((1, 2, 3)), (lens - 1).to(DT))


def test_bad_shapes_and_lengths_raise():
    terms, rules, roots = potentials(2, 3, 2, 2)
    with pytest.raises(NeurosymError):
        inside(terms, rules[:, :1], roots)
    with pytest.raises(NeurosymError):
        inside(terms, rules, roots, torch.tensor([4, 1]))
    with pytest.raises(NeurosymError):
        inside(terms[0], rules, roots)


# ---------------------------------------------------------------------- trees and losses
def test_losses_against_brute_force():
    terms, rules, roots = potentials(2, 4, 2, 2, seed=8)
    lens = torch.tensor([4, 3])
    trees = []
    for b, n in enumerate(lens.tolist()):
        all_trees = enumerate_trees(terms[b], rules[b], roots[b], n)
        trees.append((all_trees[b * 7 % len(all_trees)], torch.logsumexp(torch.tensor([t[0] for t in all_trees], dtype=DT), 0)))
    gold = [Parse(sorted(t[1], key=lambda s: (s[0], -s[1])), list(t[2])) for t, _ in trees]
    assert_close(nll_supervised(terms, rules, roots, gold, lens), [float(z) - t[0] for t, z in trees])
    assert_close(nll_unsupervised(terms, rules, roots, lens), [-float(z) for _, z in trees])
    args = tuple(x.clone().requires_grad_() for x in (terms, rules, roots))
    assert torch.autograd.gradcheck(lambda a, b, c: nll_supervised(a, b, c, gold, lens), args, fast_mode=True)


def test_tree_parts_reads_binary_structure_and_rejects_bad_trees():
    N = 2
    tree = Parse([(0, 3, 0), (0, 1, 1), (2, 3, 0)], [0, 1, 1, 0])
    assert tree_parts(tree, N) == (0, [(0, 1, 0), (1, 2, 3), (0, 3, 2)], [0, 1, 1, 0])
    for bad in (
        Parse([(0, 3, 0), (0, 1, 1), (1, 2, 0)], [0] * 4),  # crossing
        Parse([(0, 3, 0), (0, 1, 1)], [0] * 4),  # (2, 3) missing
        Parse([(0, 2, 0), (0, 1, 1)], [0] * 4),  # no root over all tokens
        Parse([(0, 1, 0), (0, 1, 1)], [0] * 2),  # repeated span
        Parse([], [0]),  # one token: no tree
        Parse([(0, 3, 0), (0, 2, 1), (0, 1, 1), (2, 3, 0)], [0] * 4),  # (2, 3) is not a node of the tree
    ):
        with pytest.raises(NeurosymError):
            tree_parts(bad, N)
    terms, rules, roots = potentials(1, 4, 2, 2)
    with pytest.raises(NeurosymError):
        nll_supervised(terms, rules, roots, [Parse([(0, 2, 0), (0, 1, 1)], [0, 0, 0])])


# ---------------------------------------------------------------------- sampling
def chi_square_p(observed: Counter, expected: dict, n: int) -> float:
    """p-value of Pearson's chi-square, pooling categories expected < 5 times."""
    stat, df, pool_o, pool_e = 0.0, -1, 0, 0.0
    for key, p in expected.items():
        e = p * n
        if e < 5:
            pool_o, pool_e = pool_o + observed.get(key, 0), pool_e + e
            continue
        stat += (observed.get(key, 0) - e) ** 2 / e
        df += 1
    if pool_e > 0:
        stat += (pool_o - pool_e) ** 2 / pool_e
        df += 1
    assert sum(observed.values()) == n and set(observed) <= set(expected)
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=DT), torch.tensor(stat / 2, dtype=DT)))


def test_samples_follow_the_posterior():
    terms, rules, roots = potentials(2, 4, 2, 2, seed=9, sparsity=0.3)
    lens = torch.tensor([3, 4])
    n = 4000
    samples = sample_parses(terms, rules, roots, lens, n=n, generator=torch.Generator().manual_seed(0))
    for b, length in enumerate(lens.tolist()):
        trees = enumerate_trees(terms[b], rules[b], roots[b], length)
        z = torch.logsumexp(torch.tensor([t[0] for t in trees], dtype=DT), 0)
        expected = {(tuple(sorted(t[1])), t[2]): math.exp(t[0] - z) for t in trees if t[0] > NEG}
        observed = Counter((tuple(sorted(p.spans)), tuple(p.tags)) for p in samples[b])
        for p in samples[b][:50]:
            tree_parts(p, 2)
        assert chi_square_p(observed, expected, n) > 1e-3


def test_sampling_is_seeded_and_marks_missing_trees():
    terms, rules, roots = potentials(2, 3, 2, 2, seed=10)
    lens = torch.tensor([3, 1])
    a = sample_parses(terms, rules, roots, lens, n=5, generator=torch.Generator().manual_seed(1))
    b = sample_parses(terms, rules, roots, lens, n=5, generator=torch.Generator().manual_seed(1))
    assert a == b and a[1] == [None] * 5 and all(p is not None for p in a[0])


# ---------------------------------------------------------------------- pytorch-struct
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("N, T, lengths", [(3, 4, [6, 4, 2]), (4, 2, [5, 5]), (2, 3, [7, 3])])
def test_against_torch_struct(N, T, lengths):
    B, L = len(lengths), max(lengths)
    terms, rules, roots = potentials(B, L, N, T, seed=11 + N)
    lens = torch.tensor(lengths)
    dist = torch_struct.SentCFG((terms, rules, roots), lengths=lens)
    assert_close(inside(terms, rules, roots, lens), dist.partition.detach())
    assert_close(viterbi(terms, rules, roots, lens)[0], dist.max.detach())
    m_terms, m_rules, m_roots, m_spans = (x.detach() for x in dist.marginals)
    ours = marginals(terms, rules, roots, lens)
    assert_close(ours.terms, m_terms)
    assert_close(ours.rules, m_rules)
    assert_close(ours.roots, m_roots)
    for w in range(2, L + 1):  # theirs: [b, width - 2, start]; ours: [b, start, end]
        for i in range(L - w + 1):
            assert_close(ours.spans[:, i, i + w - 1], m_spans[:, w - 2, i])


# ---------------------------------------------------------------------- grammars
def test_sentence_log_prob_on_arith():
    path = ROOT / "grammars" / "arith.pcfg"
    cnf = to_cnf(read_pcfg(path), check=False)
    rules = compile_pcfg(cnf, dtype=DT)
    sents = [s for s in rules.sample(20, seed=0, max_len=10)]
    sents += [rules.vocab.encode("( 1 + 2 ) * 3"), rules.vocab.encode("7"), rules.vocab.encode("( 1"), []]
    L = max(map(len, sents))
    ids = torch.tensor([s + [0] * (L - len(s)) for s in sents])
    lens = torch.tensor([len(s) for s in sents])
    ours = sentence_log_prob(rules, ids, lens)
    for s, lp in zip(sents, ours.tolist()):
        ref = rule_tensors_log_prob(rules, s)
        p = cnf_prob(cnf, [rules.vocab.tokens[i] for i in s])
        assert_close(lp, ref)
        assert_close(lp, math.log(p) if p > 0 else NEG)
    assert lens.min() == 0 and (lens == 1).any() and torch.isneginf(ours[-2])
    assert_close(sentence_log_prob(rules, ids[:, :0]), rules.empty.expand(len(sents)))  # L = 0 and L = 1 batches
    assert_close(sentence_log_prob(rules, ids[:, :1]), [rule_tensors_log_prob(rules, s[:1]) for s in ids.tolist()])
    f32 = sentence_log_prob(load_pcfg(path), ids, lens).double()  # float32 tensors agree to float32 precision
    fin = torch.isfinite(ours)
    assert torch.equal(torch.isneginf(f32), ~fin) and torch.allclose(f32[fin], ours[fin], atol=1e-4)


def test_sentence_log_prob_gradients_are_finite():
    rules = load_pcfg(ROOT / "grammars" / "arith.pcfg")
    rules = rules.to(torch.float64)
    emit = rules.emit.clone().requires_grad_()
    rules.emit = emit
    ids = torch.tensor([rules.vocab.encode("1 + 2"), rules.vocab.encode("( 3 )"), rules.vocab.encode("4 0 0")])
    lp = sentence_log_prob(rules, ids, torch.tensor([3, 2, 1]))
    assert torch.isfinite(lp[[0, 2]]).all() and torch.isneginf(lp[1])
    (g,) = torch.autograd.grad(lp[torch.isfinite(lp)].sum(), emit)
    assert torch.isfinite(g).all()


def test_marginals_when_no_sentence_reaches_the_longest_width():
    """Widths no finite sentence uses get zero span marginals, not an error."""
    from pathlib import Path

    import neurosym
    from neurosym.layers.inside import marginals

    rules = neurosym.load(Path(__file__).resolve().parents[2] / "grammars" / "arith.pcfg").to(torch.float64)
    v = rules.vocab
    ids = torch.tensor([[v.id("("), v.id("("), v.id("("), v.id("(")], [v.id("1"), v.id("+"), v.id("2"), 0]])
    m = marginals(*rules.potentials(ids), torch.tensor([4, 3]))
    assert m.log_z[0] == -float("inf") and torch.isfinite(m.log_z[1])
    assert m.spans[0].abs().sum() == 0 and m.spans[1, 0, 2].sum() == pytest.approx(1.0)


# ---------------------------------------------------------------------- the one-node chart against plain autograd
def _plain_sum(x, semiring):
    """The semiring sum over the last dim by autograd of the textbook formulas."""
    if semiring is MaxSemiring:
        return x.max(-1).values
    m = x.detach().amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    s = torch.exp(x - m).sum(-1, keepdim=True)
    ok = s > 0
    return (torch.where(ok, torch.log(torch.where(ok, s, 1.0)), NEG) + m).squeeze(-1)


def plain_cky(terms, rules, roots, lengths, semiring, spans):
    """CKY span by span and split by split over (N+T)-vectors, by plain autograd (no
    custom Function, no folding of tokens, no strided views): the reference for the
    chart's hand-run backward. ``spans`` (B, L, L, N) zeros are added to every
    nonterminal cell, so their gradients are the span marginals."""
    B, L, T = terms.shape
    N = roots.shape[1]
    out = []
    for b in range(B):
        n = int(lengths[b])
        if n < 2:
            out.append(terms.new_tensor(NEG))
            continue
        cell = {(i, i): torch.cat([terms.new_full((N,), NEG), terms[b, i]]) for i in range(n)}
        for w in range(2, n + 1):
            for i in range(n - w + 1):
                j = i + w - 1
                split = torch.stack([rules[b] + cell[i, k][None, :, None] + cell[k + 1, j][None, None, :] for k in range(i, j)], 1)  # (N, splits, S, S)
                cell[i, j] = torch.cat([_plain_sum(split.flatten(1), semiring) + spans[b, i, j], terms.new_full((T,), NEG)])
        out.append(_plain_sum(roots[b] + cell[0, n - 1][:N], semiring))
    return torch.stack(out)


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 3), L=st.integers(2, 6), N=st.integers(1, 3), T=st.integers(1, 3), sparsity=st.sampled_from([0.0, 0.3, 0.7]),
       scale=st.sampled_from([1.0, 40.0]), seed=st.integers(0, 10_000), semiring=st.sampled_from([LogSemiring, MaxSemiring]), data=st.data())
def test_chart_gradients_match_plain_autograd(B, L, N, T, sparsity, scale, seed, semiring, data):
    """log Z (or the best score) and the gradients of terms, rules, roots and every span
    of the one-node chart equal plain autograd of a CKY written span by span, with -inf
    rules and short or empty sentences (float64)."""
    terms, rules, roots = (scale * x for x in potentials(B, L, N, T, seed=seed, sparsity=sparsity))
    lengths = torch.tensor(data.draw(st.lists(st.integers(0, L), min_size=B, max_size=B)))
    ref_in = [x.clone().requires_grad_() for x in (terms, rules, roots, terms.new_zeros(B, L, L, N))]
    ref = plain_cky(*ref_in[:3], lengths, semiring, ref_in[3])
    ours = inside(terms, rules, roots, lengths, semiring=semiring)
    fin = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(ours), fin)
    assert_close(ours[fin], ref[fin])
    if not fin.any():
        return
    g_ref = torch.autograd.grad(ref[fin].sum(), ref_in, allow_unused=True)
    ours_in = [x.clone().requires_grad_() for x in (terms, rules, roots)]
    g_ours = torch.autograd.grad(inside(*ours_in, lengths, semiring=semiring)[fin].sum(), ours_in)
    for a, r in zip(g_ours, g_ref[:3]):
        assert not a.isnan().any()
        assert_close(a, torch.zeros_like(a) if r is None else r)
    if semiring is LogSemiring:  # the span marginals: the chart's gradient
        got = marginals(terms, rules, roots, lengths).spans[fin]
        assert_close(got, g_ref[3][fin])
    else:
        best = viterbi(terms, rules, roots, lengths)[1]
        assert all((p is not None) == bool(f) for p, f in zip(best, fin))


def test_chart_backward_twice_with_a_retained_graph():
    terms, rules, roots = (x.requires_grad_() for x in potentials(2, 6, 3, 2, seed=11, sparsity=0.3))
    log_z = inside(terms, rules, roots, torch.tensor([6, 4])).sum()
    first = torch.autograd.grad(log_z, (terms, rules, roots), retain_graph=True)
    second = torch.autograd.grad(log_z, (terms, rules, roots))
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_chart_without_gradients_keeps_no_graph():
    terms, rules, roots = potentials(2, 5, 2, 2, seed=12)
    with torch.no_grad():
        log_z = inside(terms, rules, roots)
    assert not log_z.requires_grad
    assert_close(log_z, inside(terms.requires_grad_(), rules, roots).detach())


def test_kernel_switch_without_triton(monkeypatch):
    """``kernel=`` with triton absent (as in CI): ``auto`` and ``torch`` run the torch path
    on any device, ``triton`` is a clear NeurosymError, as are a MaxSemiring Triton pass
    and an unknown name; the CPU default is the torch path."""
    monkeypatch.setattr(sys.modules["neurosym.layers.inside"], "_kernel_module", lambda: None)  # the package exports the function ``inside``
    assert resolve_kernel("auto", "cuda") == "torch" and resolve_kernel("auto", "cpu") == "torch"
    with pytest.raises(NeurosymError, match="needs the triton package"):
        resolve_kernel("triton", "cuda")
    with pytest.raises(NeurosymError, match="LogSemiring"):
        resolve_kernel("triton", "cuda", MaxSemiring)
    terms, rules, roots = potentials(2, 4, 2, 2, seed=13)
    with pytest.raises(NeurosymError, match="needs the triton package"):
        inside(terms, rules, roots, kernel="triton")
    with pytest.raises(NeurosymError, match="kernel must be one of"):
        inside(terms, rules, roots, kernel="fused")
    assert torch.equal(inside(terms, rules, roots), inside(terms, rules, roots, kernel="torch"))
    assert torch.equal(inside(terms, rules, roots, semiring=MaxSemiring, kernel="auto"), inside(terms, rules, roots, semiring=MaxSemiring))
