"""PCFG -> CNF -> RuleTensors: string probabilities are kept exactly, mass sums to 1,
samples follow the distribution, checks report positions, shipped grammars work."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from neurosym.compile.cnf import CNFGrammar, to_cnf
from neurosym.compile.dfa import finite_strings
from neurosym.compile.pcfg import RuleTensors, compile_pcfg, format_summary, load_pcfg, summary
from neurosym.compile.pcfg_check import analyze, check_pcfg
from neurosym.compile.pcfg_sample import sample_sentences, sample_trees
from neurosym.compile.regex import pattern_dfa
from neurosym.dsl.pcfg import NT, Grammar, Terminal, read_pcfg, parse_pcfg
from neurosym.errors import SourceError
from neurosym.vocab import Vocab
from references import rule_tensors_log_prob, cnf_prob

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "pcfg"
SMALL = ["epsilon.pcfg", "unit_cycles.pcfg", "long_rules.pcfg", "logprob.pcfg"]


# ---------------------------------------------------------------------- an independent reference
class Reference:
    """Inside probabilities on the *original* grammar, independent of the CNF code.

    For every string ``u`` (memoised, shortest first), ``P_A(u)`` sums over every rule
    ``A -> X1..Xk`` and every way to cut ``u`` into k (possibly empty) pieces that the
    symbols derive. A piece equal to ``u`` itself (the others empty: unit and epsilon
    paths) makes ``P(u)`` depend on itself, so each string is solved by fixed-point
    iteration from 0; the empty string likewise (its least fixed point)."""

    def __init__(self, grammar: Grammar):
        self.names = grammar.nonterminals
        self.idx = {a: i for i, a in enumerate(self.names)}
        self.rules = [
            (self.idx[p.lhs], [("N", self.idx[s.name]) if isinstance(s, NT) else ("T", s.terminal) for s in p.rhs], p.prob)
            for p in grammar.productions
            if p.prob > 0
        ]
        self.start = self.idx[grammar.start]
        self.memo: dict[tuple, np.ndarray] = {}

    def seq(self, rhs, u: tuple, cur: np.ndarray) -> float:
        L = len(u)
        dp = np.zeros(L + 1)
        dp[0] = 1.0
        for kind, x in rhs:
            new = np.zeros(L + 1)
            for a in range(L + 1):
                if dp[a] == 0:
                    continue
                if kind == "T":
                    if a < L and u[a] == x:
                        new[a + 1] += dp[a]
                    continue
                for b in range(a, L + 1):
                    piece = u[a:b]
                    val = cur[x] if len(piece) == L else self.inside(piece)[x]
                    new[b] += dp[a] * val
            dp = new
        return dp[L]

    def inside(self, u: tuple) -> np.ndarray:
        if u in self.memo:
            return self.memo[u]
        cur = np.zeros(len(self.names))
        for _ in range(20_000):
            new = np.zeros_like(cur)
            for a, rhs, p in self.rules:
                new[a] += p * self.seq(rhs, u, cur)
            done = np.max(np.abs(new - cur)) <= 1e-17
            cur = new
            if done:
                break
        self.memo[u] = cur
        return cur

    def prob(self, u) -> float:
        return float(self.inside(tuple(u))[self.start])


def lit(*words: str) -> tuple[Terminal, ...]:
    return tuple(Terminal("literal", w) for w in words)


def all_strings(terminals, max_len: int):
    for n in range(max_len + 1):
        yield from itertools.product(terminals, repeat=n)


def assert_same_distribution(grammar: Grammar, max_len: int) -> CNFGrammar:
    cnf = to_cnf(grammar)
    ref = Reference(grammar)
    terms = grammar.terminals
    for u in all_strings(terms, max_len):
        before, after = ref.prob(u), cnf_prob(cnf, u)
        assert after == pytest.approx(before, rel=1e-9, abs=1e-12), (u, before, after)
    return cnf


# ---------------------------------------------------------------------- exactness of CNF
@pytest.mark.parametrize("name", SMALL)
def test_every_short_string_keeps_its_probability(name):
    grammar = read_pcfg(DATA / name)
    assert len(grammar.terminals) <= 3
    assert_same_distribution(grammar, 6)


def test_unit_cycle_closure_is_exact():
    g = parse_pcfg("S -> A [0.5] | 'x' [0.5]\nA -> B [0.3] | 'a' [0.7]\nB -> A [0.2] | 'b' [0.8]")
    cnf = assert_same_distribution(g, 3)
    # P(a) from S: 0.5 * sum over chains A (B A)^k -> a = 0.5 * 0.7 / (1 - 0.3 * 0.2)
    assert cnf_prob(cnf, lit("a")) == pytest.approx(0.5 * 0.7 / (1 - 0.06), rel=1e-12)
    assert cnf_prob(cnf, lit("b")) == pytest.approx(0.5 * 0.3 * 0.8 / (1 - 0.06), rel=1e-12)


def test_empty_sentence_and_length_one_mass_are_kept():
    g = parse_pcfg("S -> A A [0.5] | 'x' [0.5]\nA -> 'a' [0.4] | [0.6]")
    cnf = assert_same_distribution(g, 4)
    assert cnf.empty == pytest.approx(0.5 * 0.36, rel=1e-12)
    assert cnf_prob(cnf, lit("a")) == pytest.approx(0.5 * 2 * 0.4 * 0.6, rel=1e-12)
    assert cnf_prob(cnf, lit("x")) == pytest.approx(0.5, rel=1e-12)
    assert cnf.root.sum() + cnf.root_term.sum() + cnf.empty == pytest.approx(1.0, abs=1e-12)


def test_only_the_empty_sentence():
    cnf = to_cnf(parse_pcfg("S -> [1.0]"))
    assert cnf.empty == 1.0 and cnf.N == 0 and cnf.T == 0
    rt = compile_pcfg(parse_pcfg("S -> A [1.0]\nA -> [0.5] | B B [0.5]\nB -> [1.0]"))
    assert float(rt.empty) == 0.0 and rt.sample(3) == [[], [], []]


def test_null_probability_is_the_least_fixed_point_to_machine_precision():
    # e = 0.3 + 0.4 e^2 has roots (1 -+ sqrt(0.52)) / 0.8; the least one is P(A =>* empty)
    g = parse_pcfg("S -> 'x' S [0.5] | A [0.5]\nA -> A A [0.4] | 'a' [0.3] | [0.3]")
    e_a = (1 - math.sqrt(0.52)) / 0.8
    cnf = assert_same_distribution(g, 4)
    assert cnf.empty == pytest.approx(0.5 * e_a, rel=1e-14)


def test_cnf_cky_matches_enumerating_every_binary_tree():
    grammar = read_pcfg(DATA / "long_rules.pcfg")
    cnf = to_cnf(grammar)
    G = cnf.binary_dense()
    col = {t: k for k, t in enumerate(cnf.terminals)}

    def trees(i, j):  # every bracketing of u[i:j], as nested tuples
        if j - i == 1:
            yield i
            return
        for k in range(i + 1, j):
            for left in trees(i, k):
                for right in trees(k, j):
                    yield (left, right)

    def value(tree, u):  # (N+T,) probability of each label deriving the tree's yield
        if isinstance(tree, int):
            return np.concatenate([np.zeros(cnf.N), cnf.lexical[:, col[u[tree]]]])
        left, right = value(tree[0], u), value(tree[1], u)
        out = np.zeros(cnf.N + cnf.T)
        for a in range(cnf.N):
            out[a] = sum(G[a, b, c] * left[b] * right[c] for b in range(cnf.N + cnf.T) for c in range(cnf.N + cnf.T))
        return out

    for u in all_strings(cnf.terminals, 4):
        if len(u) < 2:
            continue
        total = sum(cnf.root @ value(t, u)[: cnf.N] for t in trees(0, len(u)))
        assert cnf_prob(cnf, u) == pytest.approx(total, rel=1e-12, abs=1e-15)


def test_rule_tensors_match_the_cnf():
    grammar = read_pcfg(DATA / "epsilon.pcfg")
    cnf = to_cnf(grammar)
    rt = compile_pcfg(cnf, dtype=torch.float64)
    total = rt.root.exp().sum() + rt.root_term.exp().sum() + rt.empty.exp()
    assert float(total) == pytest.approx(1.0, abs=1e-12)
    assert rt.binary.shape == (rt.N, rt.N + rt.T, rt.N + rt.T) and rt.emit.shape == (rt.T, len(rt.vocab))
    assert torch.allclose(torch.logsumexp(rt.binary.reshape(rt.N, -1), 1), torch.zeros(rt.N, dtype=torch.float64))
    assert torch.allclose(torch.logsumexp(rt.emit, 1), torch.zeros(rt.T, dtype=torch.float64))
    for u in all_strings(cnf.terminals, 4):
        ids = [rt.vocab.id(t.value) for t in u]
        assert math.exp(rule_tensors_log_prob(rt, ids)) == pytest.approx(cnf_prob(cnf, u), rel=1e-9, abs=1e-15)


def test_nltk_sentences_keep_their_probability():
    """Sentences sampled from the larger NLTK grammars: reference vs CNF vs tensors."""
    for name in ["nltk_toy_pcfg1.pcfg", "nltk_toy_pcfg2.pcfg", "nltk_book_grammar2.pcfg"]:
        grammar = read_pcfg(DATA / name)
        cnf = to_cnf(grammar)
        ref = Reference(grammar)
        rt = compile_pcfg(cnf, dtype=torch.float64)
        for sent in sample_sentences(grammar, 12, seed=3, max_len=7):
            p = ref.prob(lit(*sent))
            assert p > 0
            assert cnf_prob(cnf, lit(*sent)) == pytest.approx(p, rel=1e-9)
            assert math.exp(rule_tensors_log_prob(rt, rt.vocab.encode(" ".join(sent)))) == pytest.approx(p, rel=1e-9)


# random small grammars ------------------------------------------------------------------
@st.composite
def random_pcfg(draw):
    names = ["S", "A", "B"][: draw(st.integers(1, 3))]
    symbols = names + ["'a'", "'b'"]
    lines = []
    for lhs in names:
        k = draw(st.integers(1, 4))
        weights = [draw(st.integers(1, 9)) for _ in range(k)]
        alts = []
        for w in weights:
            rhs = draw(st.lists(st.sampled_from(symbols), min_size=0, max_size=3))
            alts.append(f"{' '.join(rhs)} [{w}]")
        lines.append(f"{lhs} -> " + " | ".join(alts))
    return "%normalize\n" + "\n".join(lines) + "\n"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(random_pcfg())
def test_random_pcfgs_keep_every_string_probability(text):
    grammar = parse_pcfg(text)
    findings = check_pcfg(grammar, strict=False)
    assume(not any(f.severity == "error" for f in findings))
    assume(analyze(grammar).radius < 0.8)
    assert_same_distribution(grammar, 6)


# ---------------------------------------------------------------------- total mass, sampling
def length_distribution(cnf: CNFGrammar, max_len: int) -> np.ndarray:
    """P(sentence length = n) for n <= max_len: CKY with every token alike."""
    G = cnf.binary_dense()
    lam = np.concatenate([np.zeros(cnf.N), np.ones(cnf.T)])  # width-1 inside, all tokens merged
    inside = {1: lam}
    out = np.zeros(max_len + 1)
    out[0] = cnf.empty
    if max_len >= 1:
        out[1] = cnf.root_term.sum()
    for w in range(2, max_len + 1):
        acc = sum(np.outer(inside[k], inside[w - k]) for k in range(1, w))
        nt = np.einsum("abc,bc->a", G, acc)
        inside[w] = np.concatenate([nt, np.zeros(cnf.T)])
        out[w] = cnf.root @ nt
    return out


@pytest.mark.parametrize("name", [*SMALL, "nltk_toy_pcfg1.pcfg", "nltk_book_groucho.pcfg", "../../../grammars/arith.pcfg"])
def test_total_probability_approaches_one(name):
    grammar = read_pcfg(DATA / name)
    cnf = to_cnf(grammar)
    dist = length_distribution(cnf, 150)
    expected = analyze(grammar).expected_length
    assert float(dist @ np.arange(151)) <= expected + 1e-9
    assert 1 - expected / 150 <= dist.sum() <= 1 + 1e-9  # Markov's bound on the tail
    assert dist.sum() > 0.995
    if len(grammar.terminals) <= 3:  # and the per-string sums agree with the lengths
        per_length = np.zeros(5)
        for u in all_strings(grammar.terminals, 4):
            per_length[len(u)] += cnf_prob(cnf, u)
        np.testing.assert_allclose(per_length, dist[:5], rtol=1e-9, atol=1e-14)


def chi_square_ok(counts: Counter, probs: dict, n: int) -> None:
    """Every string with expected count >= 20 lands within 5 standard deviations, and
    the chi-square statistic over them is within a generous bound."""
    stat, dof = 0.0, 0
    for u, p in probs.items():
        exp = n * p
        if exp < 20:
            continue
        obs = counts.get(u, 0)
        assert abs(obs - exp) <= 5 * math.sqrt(exp * (1 - p)) + 1, (u, obs, exp)
        stat += (obs - exp) ** 2 / exp
        dof += 1
    assert dof >= 3
    assert stat <= dof + 6 * math.sqrt(2 * dof) + 10


@pytest.mark.parametrize("name", ["epsilon.pcfg", "unit_cycles.pcfg", "long_rules.pcfg"])
def test_sampled_frequencies_match_string_probabilities(name):
    grammar = read_pcfg(DATA / name)
    cnf = to_cnf(grammar)
    probs = {u: cnf_prob(cnf, u) for u in all_strings(grammar.terminals, 5)}
    n = 20_000
    rt = compile_pcfg(cnf, dtype=torch.float64)
    tensor_samples = Counter(tuple(Terminal("literal", rt.vocab.tokens[i]) for i in s) for s in rt.sample(n, seed=0, max_len=200))
    chi_square_ok(tensor_samples, probs, n)
    symbolic = Counter(lit(*s) for s in sample_sentences(grammar, 5000, seed=1, max_len=200))
    chi_square_ok(symbolic, probs, 5000)


def test_sampling_is_seeded_and_respects_max_len():
    rt = load_pcfg(ROOT / "grammars" / "arith.pcfg")
    a, b = rt.sample(50, seed=7, max_len=9), rt.sample(50, seed=7, max_len=9)
    assert a == b and all(1 <= len(s) <= 9 for s in a)
    assert rt.sample(50, seed=8, max_len=9) != a


# ---------------------------------------------------------------------- checks with positions
@pytest.mark.parametrize(
    "name, where, words",
    [
        ("err_syntax.pcfg", "3:4", "expected '->'"),
        ("err_undefined.pcfg", "3:9", "undefined nonterminal Obj"),
        ("err_sum.pcfg", "2:1", "sum to 0.9"),
        ("err_range.pcfg", "2:12", "out of range [0, 1]"),
        ("err_nongenerating.pcfg", "3:1", "Loop derives no finite string"),
        ("err_inconsistent.pcfg", "3:1", "spectral radius 1.2"),
    ],
)
def test_errors_name_file_line_and_column(name, where, words):
    path = DATA / name
    with pytest.raises(SourceError) as err:
        load_pcfg(path)
    assert str(err.value).startswith(f"{path}:{where}: ")
    assert words in str(err.value)


def test_unreachable_is_a_positioned_warning():
    path = DATA / "err_unreachable.pcfg"
    findings = check_pcfg(path)
    assert [(f.severity, str(f.span)) for f in findings] == [("warning", f"{path}:2:3")]
    assert str(findings[0]) == f"{path}:2:3: warning: Orphan is unreachable from the start symbol S"
    severity, span, message = findings[0]  # a plain (severity, span, message) triple
    assert load_pcfg(path).sample(2) == [[4], [4]]


def test_duplicates_and_uniform_weights_are_reported():
    g = parse_pcfg("S -> 'a' [0.5] | T [0.25] | 'a' [0.25]\nT -> 'b' [1]", "d.pcfg")
    assert [str(f) for f in check_pcfg(g)] == ["d.pcfg:1:29: warning: duplicate rule S -> 'a' (also at line 1); their probabilities add up"]
    assert cnf_prob(to_cnf(g), lit("a")) == pytest.approx(0.75)
    cfg = check_pcfg(DATA / "nltk_book_grammar1.pcfg")
    assert [(f.severity, f.span.line, f.span.col) for f in cfg] == [("info", 3, 3)]


def test_regex_terminal_strings_keep_their_probability():
    assert_same_distribution(read_pcfg(DATA / "dates.pcfg"), 4)


def test_nonstrict_check_lists_every_error():
    g = parse_pcfg("S -> 'x' T [0.5] | D [0.5]\nT -> T T [0.7] | 'a' [0.3]\nD -> D [1.0]", "f.pcfg")
    found = check_pcfg(g, strict=False)
    assert [(f.severity, str(f.span)) for f in found] == [("error", "f.pcfg:2:1"), ("error", "f.pcfg:3:1")]
    with pytest.raises(SourceError, match=r"^f.pcfg:3:1: D derives no finite string"):
        check_pcfg(g)


def test_critical_grammar_is_reported():
    # NLTK's documented CFG (nltk.grammar) with uniform weights is critical: NP -> NP PP | Det N,
    # PP -> P NP gives NP 1.0 expected NP children
    text = "S -> NP VP\nPP -> P NP\nNP -> Det N | NP PP\nVP -> V NP | VP PP\nDet -> 'a' | 'the'\nN -> 'dog' | 'cat'\nV -> 'chased' | 'sat'\nP -> 'on' | 'in'\n"
    with pytest.raises(SourceError, match=r"^g.pcfg:2:1: the grammar is inconsistent: .*spectral radius 1 >= 1"):
        check_pcfg(parse_pcfg(text, "g.pcfg"))


# ---------------------------------------------------------------------- vocabularies and regex terminals
def test_regex_terminals_with_the_default_vocabulary():
    rt = load_pcfg(DATA / "dates.pcfg")
    assert "1999" in rt.vocab and "12" in rt.vocab and "in" in rt.vocab
    years = [t for t in rt.vocab.tokens if len(t) == 4 and t.isdigit()]
    assert len(years) == 200
    p1999 = math.exp(rule_tensors_log_prob(rt, rt.vocab.encode("in 1999")))
    assert p1999 == pytest.approx(0.6 / 200, rel=1e-5)
    p = math.exp(rule_tensors_log_prob(rt, rt.vocab.encode("in 07 / 2001")))
    assert p == pytest.approx(0.4 / 12 / 200, rel=1e-5)
    for sent in sample_sentences(DATA / "dates.pcfg", 5, seed=0):
        assert sent[0] == "in" and len(sent[-1]) == 4


def test_regex_terminals_over_a_given_vocabulary():
    vocab = Vocab.words(["1", "22", "333", "+", "x"])
    rt = load_pcfg(DATA / "numbers.pcfg", vocab)
    digits = [vocab.id(w) for w in ("1", "22", "333")]
    assert torch.allclose(rt.emit.exp()[:, digits].sum(1).max(), torch.tensor(1.0, dtype=torch.float64))
    assert math.exp(rule_tensors_log_prob(rt, vocab.encode("22 + 1"))) == pytest.approx(0.25 / 9, rel=1e-5)
    with pytest.raises(SourceError, match=r"numbers.pcfg:3:6: regex terminal DIGITS matches infinitely many"):
        load_pcfg(DATA / "numbers.pcfg")
    with pytest.raises(SourceError, match=r"numbers.pcfg:3:6: regex terminal DIGITS matches no token"):
        load_pcfg(DATA / "numbers.pcfg", Vocab.words(["+", "x"]))
    with pytest.raises(SourceError, match=r"numbers.pcfg:3:28: terminal '\+' is not a token"):
        load_pcfg(DATA / "numbers.pcfg", Vocab.words(["1"]))


def test_finite_strings():
    assert finite_strings(pattern_dfa("a[bc]?|d"), 10) == ["a", "d", "ab", "ac"]
    assert finite_strings(pattern_dfa("a+"), 10) is None
    assert finite_strings(pattern_dfa("[0-9]{3}"), 10) is None  # 1000 strings, over the cap
    assert finite_strings(pattern_dfa("[^a]"), 10) is None  # "any other character"


# ---------------------------------------------------------------------- tensors, summaries, shipped grammars
def test_potentials_and_device_moves():
    rt = load_pcfg(DATA / "nltk_toy_pcfg1.pcfg")
    ids = torch.tensor([rt.vocab.encode("I saw the man"), rt.vocab.encode("John ate the telescope")])
    terms, rules, roots = rt.potentials(ids)
    assert terms.shape == (2, 4, rt.T) and rules.shape == (2, rt.N, rt.N + rt.T, rt.N + rt.T) and roots.shape == (2, rt.N)
    r64 = rt.to(torch.float64)
    assert isinstance(r64, RuleTensors) and r64.binary.dtype == torch.float64 and r64.emit.dtype == torch.float64
    assert rt.to("cpu").binary.device.type == "cpu"
    assert rule_tensors_log_prob(r64, ids[0].tolist()) == pytest.approx(rule_tensors_log_prob(rt, ids[0].tolist()), rel=1e-5)
    assert "N=4" in repr(rt)


def test_summary_and_trees():
    s = summary(DATA / "epsilon.pcfg")
    assert s["rules"] == {"total": 8, "epsilon": 3, "lexical": 1, "unit": 1, "binary": 1, "mixed": 2, "long": 0}
    assert s["cnf"]["nonterminals"] >= 1 and 0 < s["empty_probability"] < 1
    assert 0 < s["consistency_radius"] < 1 and s["expected_length"] > 0
    assert "consistency: spectral radius" in format_summary(s)
    bad = summary(DATA / "err_inconsistent.pcfg")
    assert bad["cnf"] is None and bad["expected_length"] is None and "error" in bad["findings"][0]
    tree = sample_trees(DATA / "nltk_toy_pcfg1.pcfg", 1, seed=0)[0]
    assert str(tree).startswith("(S (NP") and all(f" {w})" in str(tree) for w in tree.leaves())
    assert tree.leaves() == [w for w in str(tree).replace(")", " ").split() if not w.startswith("(")]


@pytest.mark.parametrize("name", ["arith.pcfg", "agreement.pcfg"])
def test_shipped_grammars_load_check_and_sample(name):
    path = ROOT / "grammars" / name
    grammar = read_pcfg(path)
    assert check_pcfg(grammar) == []
    a = analyze(grammar)
    assert a.radius < 0.9 and 3 < a.expected_length < 12
    rt = load_pcfg(path)
    sents = rt.sample(200, seed=0, max_len=20)
    assert all(s for s in sents)
    from neurosym.layers.inside import sentence_log_prob

    L = max(map(len, sents))
    ids = torch.tensor([s + [0] * (L - len(s)) for s in sents])
    lp = sentence_log_prob(rt, ids, torch.tensor([len(s) for s in sents]))
    assert torch.isfinite(lp).all()  # every sample is in the language
    for s, x in sorted(zip(sents, lp.tolist()), key=lambda p: len(p[0]))[:3]:  # the plain CKY agrees
        assert rule_tensors_log_prob(rt, s) == pytest.approx(x, abs=1e-4)
    assert len(sample_sentences(grammar, 5, seed=0)) == 5


def test_agreement_sentences_agree():
    rt = load_pcfg(ROOT / "grammars" / "agreement.pcfg")
    sg_verbs = {"is", "was", "opens", "likes", "sees", "sleeps", "falls", "shines"}
    pl_nouns = {"keys", "cabinets", "authors", "books", "dogs", "pictures", "teachers"}
    attractors = 0
    for tree in sample_trees(ROOT / "grammars" / "agreement.pcfg", 200, seed=0):
        subject, vp = tree.children[0], tree.children[1]
        plural = subject.label == "NP_pl"
        verb = vp.children[0].children[0]
        assert (verb in sg_verbs) != plural
        noun = subject.children[1].children[0]
        assert (noun in pl_nouns) == plural
        attractors += len(subject.children) == 3 and subject.children[2].label.startswith("PP")
    assert attractors > 40
    assert math.exp(rule_tensors_log_prob(rt, rt.vocab.encode("the key to the cabinets is rusty ."))) > 0
    assert math.exp(rule_tensors_log_prob(rt, rt.vocab.encode("the key to the cabinets are rusty ."))) == 0.0
