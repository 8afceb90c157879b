"""Prefix probabilities (neurosym.layers.prefix) against brute force over the sentences
of finite grammars, Jelinek & Lafferty's recursion written the textbook way
(tests/references.py), and their own identities; float32 against float64; one token at
a time against from scratch; the unusual grammars (one-token and empty sentences,
deficient and divergent weights, tokens the grammar never emits)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurosym.compile.pcfg import RuleTensors, load_pcfg
from neurosym.errors import NeurosymError
from neurosym.layers.inside import sentence_log_prob
from neurosym.layers.prefix import PrefixGrammar, PrefixState, prefix_state
from neurosym.vocab import Vocab
from references import finite_language, jelinek_lafferty, partition_functions

ROOT = Path(__file__).resolve().parents[2]
NEG = float("-inf")
REL = 1e-9

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------------- grammars
def make_rules(binary, emit, root, root_term, empty, words=None) -> RuleTensors:
    """RuleTensors (float64) from probability arrays; the vocabulary is ``Vocab.words``
    (4 specials the grammar never emits, then the words)."""
    binary, emit, root, root_term = (np.asarray(x, dtype=np.float64) for x in (binary, emit, root, root_term))
    N, T = binary.shape[0], emit.shape[0]
    words = words or [f"w{i}" for i in range(emit.shape[1])]
    vocab = Vocab.words(words)
    full = np.zeros((T, len(vocab)))
    full[:, [vocab.id(w) for w in words]] = emit
    with np.errstate(divide="ignore"):
        log = lambda x: torch.tensor(np.log(np.asarray(x, dtype=np.float64)), dtype=torch.float64)  # noqa: E731
        return RuleTensors(
            root=log(root), binary=log(binary), emit=log(full), root_term=log(root_term), empty=log(empty),
            nonterminals=[f"A{i}" for i in range(N)], preterminals=[f"P{i}" for i in range(T)], vocab=vocab,
        )


def random_rules(seed: int, N: int, T: int, V: int, finite: bool, deficient: float = 1.0, density: float = 0.5) -> RuleTensors:
    """A random CNF grammar. ``finite``: nonterminal A uses only nonterminals above it
    (an acyclic grammar, a finite language). Each nonterminal's rules sum to
    ``deficient`` (< 1: a deficient grammar); recursion may make it deficient anyway."""
    rng = np.random.default_rng(seed)
    S = N + T
    binary = np.zeros((N, S, S))
    for a in range(N):
        ok = np.ones((S, S), dtype=bool)
        if finite:
            ok[: a + 1, :] = False
            ok[:, : a + 1] = False
        cells = np.argwhere(ok)
        pick = cells[rng.random(len(cells)) < density]
        if len(pick) == 0:
            pick = cells[rng.integers(len(cells))][None]
        binary[a, pick[:, 0], pick[:, 1]] = rng.random(len(pick)) + 0.05
        binary[a] *= deficient / binary[a].sum()
    emit = np.zeros((T, V))
    for t in range(T):
        cols = rng.random(V) < density
        cols[rng.integers(V)] = True
        emit[t, cols] = rng.random(cols.sum()) + 0.05
        emit[t] /= emit[t].sum()
    start = rng.random(N + T + 1) * (rng.random(N + T + 1) < 0.7)
    start[0] += 0.1  # some sentence of two or more tokens
    start /= start.sum()
    return make_rules(binary, emit, start[:N], start[N : N + T], start[-1])


def grammar_prefixes(rt: RuleTensors, seed: int, n: int, max_len: int) -> list[list[int]]:
    """Prefixes the grammar can produce (each token drawn among those of positive prefix
    probability), and a few that leave the language or use ids outside it."""
    rng = np.random.default_rng(seed)
    g = PrefixGrammar.from_rules(rt)
    out = []
    for _ in range(n):
        state, prefix = PrefixState(g, 1), []
        for _ in range(int(rng.integers(0, max_len + 1))):
            ok = torch.nonzero(torch.isfinite(state.next_log_prob()[0]))[:, 0].tolist()
            if not ok:
                break
            prefix.append(int(rng.choice(ok)))
            state.append(torch.tensor(prefix[-1:]))
        out.append(prefix)
    V = len(rt.vocab)
    out += [[int(rng.integers(V)) for _ in range(3)], [0], out[0] + [V + 5], [-1]]
    return out


def check_identity(state: PrefixState) -> None:
    """P(prefix ...) = P(prefix) + sum_v P(prefix v ...), to REL."""
    lhs = state.prefix_log_prob
    rhs = torch.logaddexp(state.sentence_log_prob, torch.logsumexp(state.next_log_prob(), -1))
    assert torch.equal(torch.isfinite(lhs), torch.isfinite(rhs))
    fin = torch.isfinite(lhs)
    assert ((lhs[fin] - rhs[fin]).abs() <= REL).all(), (lhs, rhs)


def close(a: float, b: float, rel: float = REL) -> bool:
    return (a == 0 and b == 0) or abs(a - b) <= rel * max(abs(a), abs(b))


# ---------------------------------------------------------------------- finite languages: brute force
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3), st.integers(1, 3), st.integers(2, 4), st.floats(0.6, 1.0), st.integers(0, 2**31))
def test_finite_grammars_match_brute_force(N, T, V, deficient, seed):
    rt = random_rules(seed, N, T, V, finite=True, deficient=deficient)
    language = finite_language(rt)
    Vg = len(rt.vocab)
    prefixes = {()} | {s[:k] for s in language for k in range(len(s) + 1)}
    prefixes = sorted(prefixes, key=lambda p: (len(p), p))[:25] + [(0,), (Vg - 1, Vg - 1)]
    for prefix in prefixes:
        state = prefix_state(rt, torch.tensor([list(prefix)]).reshape(1, len(prefix)))
        k = len(prefix)
        starting = {s: p for s, p in language.items() if s[:k] == prefix}
        assert close(math.exp(state.prefix_log_prob.item()), sum(starting.values())), prefix
        assert close(math.exp(state.sentence_log_prob.item()), language.get(prefix, 0.0)), prefix
        nxt = torch.zeros(Vg, dtype=torch.float64)
        for s, p in starting.items():
            if len(s) > k:
                nxt[s[k]] += p
        got = state.next_log_prob()[0].exp()
        assert torch.equal(got > 0, nxt > 0), prefix  # exact zeros: no underflow decides
        assert torch.allclose(got, nxt, rtol=REL, atol=0), prefix
        check_identity(state)


def test_brute_force_reference_sums_to_the_grammar_total():
    rt = random_rules(3, 3, 2, 3, finite=True)
    assert sum(finite_language(rt).values()) == pytest.approx(1.0, rel=1e-12)
    for ids, p in list(finite_language(rt).items())[:20]:
        assert math.exp(sentence_log_prob(rt, torch.tensor([list(ids)]).reshape(1, len(ids))).item()) == pytest.approx(p, rel=1e-9)


# ---------------------------------------------------------------------- recursive grammars: identity and JL
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3), st.integers(1, 3), st.integers(2, 4), st.integers(0, 2**31))
def test_recursive_grammars_identity_and_jelinek_lafferty(N, T, V, seed):
    rt = random_rules(seed, N, T, V, finite=False, density=0.4)
    prefixes = grammar_prefixes(rt, seed, 6, 6)
    lengths = torch.tensor([len(p) for p in prefixes])
    ids = torch.zeros(len(prefixes), int(lengths.max()), dtype=torch.long)
    for b, p in enumerate(prefixes):
        ids[b, : len(p)] = torch.tensor(p, dtype=torch.long)
    state = prefix_state(rt, ids, lengths)  # a batch of different lengths at once
    check_identity(state)
    for b, p in enumerate(prefixes[:5]):
        assert close(math.exp(state.prefix_log_prob[b].item()), jelinek_lafferty(rt, p), 1e-8), p
    b = 1  # next-token probabilities against JL one token at a time
    for v in range(len(rt.vocab)):
        assert close(math.exp(state.next_log_prob()[b, v].item()), jelinek_lafferty(rt, prefixes[b] + [v]), 1e-8)


@pytest.mark.parametrize("name", ["agreement.pcfg", "arith.pcfg"])
def test_shipped_grammars_against_jelinek_lafferty_and_inside(name):
    rt = load_pcfg(ROOT / "grammars" / name).to(torch.float64)
    sentences = [s for s in rt.sample(40, seed=2, max_len=30) if len(s) >= 3][:6]
    lengths = torch.tensor([len(s) for s in sentences])
    ids = torch.zeros(len(sentences), int(lengths.max()), dtype=torch.long)
    for b, s in enumerate(sentences):
        ids[b, : len(s)] = torch.tensor(s)
    full = prefix_state(rt, ids, lengths)
    assert torch.allclose(full.sentence_log_prob, sentence_log_prob(rt, ids, lengths), rtol=1e-12, atol=1e-12)
    check_identity(full)
    for s in sentences[:3]:
        for k in sorted({0, 1, 2, len(s) // 2, len(s)}):
            state = prefix_state(rt, torch.tensor([s[:k]]).reshape(1, k))
            assert close(math.exp(state.prefix_log_prob.item()), jelinek_lafferty(rt, s[:k])), (s, k)
            check_identity(state)


# ---------------------------------------------------------------------- incremental, float32
def test_incremental_equals_from_scratch():
    rt = load_pcfg(ROOT / "grammars" / "arith.pcfg").to(torch.float64)
    sentences = [s for s in rt.sample(300, seed=5, max_len=40) if len(s) >= 18][:4]  # past the first chart doubling
    assert len(sentences) == 4
    g = PrefixGrammar.from_rules(rt)
    L = max(map(len, sentences))
    running = PrefixState(g, len(sentences))
    for k in range(L + 1):
        live = [b for b, s in enumerate(sentences) if len(s) >= k]
        ids = torch.tensor([sentences[b][:k] for b in live]).reshape(len(live), k)
        scratch = prefix_state(g, ids)
        for name in ("prefix_log_prob", "sentence_log_prob"):
            assert torch.allclose(getattr(running, name)[live], getattr(scratch, name), rtol=1e-12, atol=1e-12), (k, name)
        assert torch.allclose(running.next_log_prob()[live], scratch.next_log_prob(), rtol=1e-12, atol=1e-12)
        if k < L:
            tokens = torch.tensor([s[k] if k < len(s) else 0 for s in sentences])
            running.append(tokens, skip=torch.tensor([k >= len(s) for s in sentences]))
    assert running.length.tolist() == [len(s) for s in sentences]


@pytest.mark.parametrize("name", ["agreement.pcfg", "arith.pcfg", "random"])
def test_float32_matches_float64(name):
    rt = random_rules(11, 3, 3, 4, finite=False) if name == "random" else load_pcfg(ROOT / "grammars" / name)
    sentences = grammar_prefixes(rt.to(torch.float64), 1, 8, 25)
    lengths = torch.tensor([len(s) for s in sentences])
    ids = torch.zeros(len(sentences), int(lengths.max()), dtype=torch.long)
    for b, s in enumerate(sentences):
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
    got = {dt: prefix_state(PrefixGrammar.from_rules(rt, dt), ids, lengths) for dt in (torch.float32, torch.float64)}
    for read in (lambda s: s.prefix_log_prob, lambda s: s.sentence_log_prob, lambda s: s.next_log_prob()):
        lo, hi = read(got[torch.float32]).double(), read(got[torch.float64])
        assert torch.equal(torch.isfinite(lo), torch.isfinite(hi))
        fin = torch.isfinite(hi)
        assert ((lo[fin] - hi[fin]).abs() <= 1e-5 * hi[fin].abs().clamp_min(1.0)).all()


# ---------------------------------------------------------------------- unusual grammars
def test_one_token_and_empty_sentences():
    # sentences: "" (0.2), "a" (0.3, via root_term), "a b" (0.5)
    rt = make_rules([[[0, 0, 0], [0, 0, 1.0], [0, 0, 0]]], [[1.0, 0], [0, 1.0]], [0.5], [0.3, 0.0], 0.2, words=["a", "b"])
    a, b = rt.vocab.id("a"), rt.vocab.id("b")
    st0 = prefix_state(rt, torch.zeros(1, 0, dtype=torch.long))
    assert st0.prefix_log_prob.exp().item() == pytest.approx(1.0)
    assert st0.sentence_log_prob.exp().item() == pytest.approx(0.2)
    assert st0.next_log_prob()[0, a].exp().item() == pytest.approx(0.8)
    st1 = prefix_state(rt, torch.tensor([[a]]))
    nxt, end = st1.next_token_log_probs()
    assert end.exp().item() == pytest.approx(0.3 / 0.8) and nxt[0, b].exp().item() == pytest.approx(0.5 / 0.8)
    st2 = prefix_state(rt, torch.tensor([[a, b]]))
    assert st2.next_token_log_probs()[1].exp().item() == pytest.approx(1.0)
    assert (st2.next_log_prob() == NEG).all()


def test_deficient_grammar_has_the_weight_of_finite_derivations():
    # S -> S S [0.6] | a [0.4]: the finite derivations weigh Z = 2/3 (the least root of Z = 0.6 Z^2 + 0.4).
    # In CNF, S over two or more tokens is the nonterminal, "a" the preterminal, whose 0.4 moves
    # into the rules: S -> X Y [0.6 w_X w_Y], w = (1, 0.4) (rules summing to 1.176: unnormalised)
    w = np.array([1.0, 0.4])
    rt = make_rules([0.6 * np.outer(w, w)], [[1.0]], [1.0], [0.4], 0.0, words=["a"])
    g = PrefixGrammar.from_rules(rt)
    assert g.log_total.exp().item() == pytest.approx(2 / 3, rel=1e-12)
    a = rt.vocab.id("a")
    state = prefix_state(g, torch.full((1, 5), a))
    # every sentence is a^n, with weight Catalan(n - 1) 0.6^(n-1) 0.4^n
    shorter = sum(math.comb(2 * n - 2, n - 1) / n * 0.6 ** (n - 1) * 0.4**n for n in range(1, 5))
    assert state.prefix_log_prob.exp().item() == pytest.approx(2 / 3 - shorter, rel=1e-12)
    assert state.prefix_log_prob.exp().item() == pytest.approx(jelinek_lafferty(rt, [a] * 5), rel=1e-10)
    check_identity(state)
    assert partition_functions(rt)[0] == pytest.approx(2 / 3 - 0.4, rel=1e-9)  # the nonterminal: two or more tokens


def test_nonterminal_without_finite_derivations_is_ignored():
    # A1 -> A1 A1 only: no finite tree; S -> P P | A1 P
    binary = np.zeros((2, 3, 3))
    binary[0, 2, 2], binary[0, 1, 2] = 0.5, 0.5
    binary[1, 1, 1] = 1.0
    rt = make_rules(binary, [[1.0]], [1.0, 0.0], [0.0], 0.0, words=["a"])
    a = rt.vocab.id("a")
    state = prefix_state(rt, torch.tensor([[a]]))
    assert state.prefix_log_prob.exp().item() == pytest.approx(0.5)
    assert state.prefix_log_prob.exp().item() == pytest.approx(jelinek_lafferty(rt, [a]))
    check_identity(state)


def test_tokens_outside_the_grammar_make_the_prefix_impossible():
    rt = load_pcfg(ROOT / "grammars" / "arith.pcfg").to(torch.float64)
    V = len(rt.vocab)
    one = rt.vocab.id("1")
    state = prefix_state(rt, torch.tensor([[one, rt.vocab.id("<pad>")], [one, V + 3], [one, -2], [one, one]]))
    assert state.prefix_log_prob.tolist() == [NEG] * 4  # "1 1" is not arithmetic either
    assert (state.next_log_prob() == NEG).all() and (state.sentence_log_prob == NEG).all()
    nxt, end = state.next_token_log_probs()
    assert (nxt == NEG).all() and (end == NEG).all()
    state.append(torch.tensor([one] * 4))  # dead rows stay dead
    assert state.prefix_log_prob.tolist() == [NEG] * 4 and state.length.tolist() == [3] * 4


def test_rows_that_skip_keep_their_results_and_resume():
    rt = load_pcfg(ROOT / "grammars" / "arith.pcfg").to(torch.float64)
    s = [rt.vocab.id(w) for w in "( 1 + 2 ) * 3 - ( 4 / 5 )".split()]
    # row 0 takes every token; row 1 pauses over steps 2..4; row 2 stops after 5 tokens; row 3 starts late
    plan = [lambda k: False, lambda k: 2 <= k <= 4, lambda k: k >= 5, lambda k: k < 6]
    state = PrefixState(PrefixGrammar.from_rules(rt), 4)
    fed = [[] for _ in plan]
    for k in range(len(s) + 3):
        skip = [f(k) for f in plan]
        tokens = [s[len(fed[b])] if len(fed[b]) < len(s) else 0 for b in range(4)]
        skip = [sk or len(fed[b]) >= len(s) for b, sk in enumerate(skip)]
        state.append(torch.tensor(tokens), skip=torch.tensor(skip))
        for b in range(4):
            if not skip[b]:
                fed[b].append(tokens[b])
        for b in range(4):
            ref = prefix_state(rt, torch.tensor([fed[b]]).reshape(1, len(fed[b])))
            assert state.length[b].item() == len(fed[b])
            assert state.prefix_log_prob[b].item() == pytest.approx(ref.prefix_log_prob.item(), rel=1e-12)
            got, want = state.sentence_log_prob[b].item(), ref.sentence_log_prob.item()
            assert got == want or abs(got - want) <= 1e-12 * abs(want)
            assert torch.allclose(state.next_log_prob()[b], ref.next_log_prob()[0], rtol=1e-12, atol=0)
    assert [len(f) for f in fed] == [len(s), len(s), 5, len(s) - 3]


def test_bad_weights_and_inputs_are_errors():
    with pytest.raises(NeurosymError, match="diverges"):
        PrefixGrammar.from_rules(make_rules([[[3.0, 0], [0, 3.0]]], [[1.0]], [1.0], [0.0], 0.0))  # Z = 3 Z^2 + 3: no root
    nan = make_rules([[[0.5, 0], [0, 0.5]]], [[1.0]], [1.0], [0.0], 0.0)
    nan.binary[0, 0, 0] = float("nan")
    with pytest.raises(NeurosymError, match="NaN"):
        PrefixGrammar.from_rules(nan)
    rt = load_pcfg(ROOT / "grammars" / "arith.pcfg")
    with pytest.raises(NeurosymError, match="float32 or float64"):
        PrefixGrammar.from_rules(rt, torch.float16)
    state = PrefixState(PrefixGrammar.from_rules(rt), 2)
    with pytest.raises(NeurosymError, match="one token per row"):
        state.append(torch.tensor([1, 2, 3]))
    with pytest.raises(NeurosymError, match="lengths"):
        prefix_state(rt, torch.zeros(2, 3, dtype=torch.long), torch.tensor([1, 4]))
