"""`.fsg` compilation: probabilities, sampling, exact entropy and roles, checked against
independent references (path sums over the grammar as written, enumeration of finite
languages, Monte-Carlo estimates with fixed seeds)."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neurosym
from neurosym.compile.fsg import analyze, compile_fsg
from neurosym.compile.regex import Limits
from neurosym.dsl.fsg import parse_fsg
from neurosym.errors import CompileError

ROOT = Path(__file__).resolve().parents[2]

BRANCHY = """
%start A
A B 'the' 0.5
A B 'a' 0.3
A C 'some' 0.2
B C 'big' 0.25
B C <eps> 0.75
C D 'cat' 0.6 role=subject
C D 'dog' 0.4 role=subject
D 0.3
D A 'and' 0.7
"""

AMBIGUOUS = """
%start 0
0 1 a 0.5
0 2 a 0.3
0 3 b 0.2
1 3 x 0.5
1 0.5
2 3 x 0.2
2 3 y 0.8
3 0 <eps> 0.1
3 0.9
"""

FINITE = """
0 1 the 0.7
0 1 <eps> 0.3
1 2 red 0.2
1 2 <eps> 0.8
2 3 cat 0.5
2 3 cats 0.5
3 4 sleep 0.5
3 0.5
4 1.0
"""


def path_prob(g, words: list[str]) -> float:
    """Sum over every path of the grammar as written (no determinization, no closure
    matrix): a recursion over (state, position) that follows <eps> arcs up to a depth."""
    arcs = defaultdict(list)
    for a in g.arcs:
        arcs[a.src].append(a)
    final = {f.state: g.probability(f.weight) for f in g.finals}
    total = defaultdict(float)
    for a in g.arcs:
        total[a.src] += g.probability(a.weight)
    for f in g.finals:
        total[f.state] += g.probability(f.weight)
    norm = (lambda q: total[q]) if g.normalize else (lambda q: 1.0)

    def go(q: str, i: int, depth: int) -> float:
        if depth > 60:
            return 0.0
        p = final.get(q, 0.0) / norm(q) if i == len(words) else 0.0
        for a in arcs[q]:
            w = g.probability(a.weight) / norm(q)
            if a.label.kind == "eps":
                p += w * go(a.dst, i, depth + 1)
            elif i < len(words) and a.label.text == words[i]:
                p += w * go(a.dst, i + 1, depth + 1)
        return p

    return go(g.start_state, 0, 0)


def sentence_ids(w, words: list[str]) -> torch.Tensor:
    return torch.tensor([[w.vocab.id(x) for x in words]], dtype=torch.long)


@pytest.mark.parametrize("text", [BRANCHY, AMBIGUOUS, FINITE])
def test_log_prob_equals_the_sum_over_paths(text):
    g = parse_fsg(text)
    w = compile_fsg(g)
    rng = random.Random(0)
    words = [t for t in w.vocab.tokens if t not in ("<pad>", "<unk>", "<bos>", "<eos>")]
    cases = [w.vocab.decode(s).split() for s in w.sample(200, seed=3)]
    cases += [[rng.choice(words) for _ in range(rng.randint(0, 5))] for _ in range(200)]
    for sent in cases:
        expected = path_prob(g, sent)
        got = float(w.log_prob(sentence_ids(w, sent))[0]) if sent else float(w.final_log_probs[w.start])
        if expected == 0:
            assert got == -math.inf, sent
        else:
            assert got == pytest.approx(math.log(expected), abs=1e-9), sent


def test_batched_log_prob_with_lengths_matches_one_at_a_time():
    w = compile_fsg(parse_fsg(BRANCHY))
    sents = w.sample(50, seed=5)
    L = max(map(len, sents))
    ids = torch.tensor([s + [0] * (L - len(s)) for s in sents])
    lengths = torch.tensor([len(s) for s in sents])
    batched = w.log_prob(ids, lengths)
    for s, lp in zip(sents, batched.tolist()):
        assert lp == pytest.approx(float(w.log_prob(torch.tensor([s]))[0]), abs=1e-12)


def test_finite_language_sums_to_one_and_entropy_is_exact():
    g = parse_fsg(FINITE)
    w = compile_fsg(g)
    words = ["the", "red", "cat", "cats", "sleep"]
    # enumerate every sentence up to the longest possible (4 tokens)
    sentences = [[]]
    frontier = [[]]
    for _ in range(4):
        frontier = [s + [x] for s in frontier for x in words]
        sentences += frontier
    probs = [path_prob(g, s) for s in sentences]
    assert sum(probs) == pytest.approx(1.0, abs=1e-12)
    H = -sum(p * math.log(p) for p in probs if p > 0)
    EL = sum(p * len(s) for p, s in zip(probs, sentences))
    ent = w.entropy()
    assert ent.per_sentence == pytest.approx(H, abs=1e-12)
    assert ent.expected_length == pytest.approx(EL, abs=1e-12)
    assert ent.per_token == pytest.approx(H / EL, abs=1e-12)
    assert ent.ppl_floor == pytest.approx(math.exp(H / EL))


@pytest.mark.parametrize("text", [BRANCHY, AMBIGUOUS])
def test_exact_entropy_matches_monte_carlo(text):
    w = compile_fsg(parse_fsg(text))
    sents = w.sample(20000, seed=11)
    L = max(map(len, sents))
    ids = torch.tensor([s + [0] * (L - len(s)) for s in sents])
    nll = -w.log_prob(ids, torch.tensor([len(s) for s in sents]))
    se = float(nll.std()) / math.sqrt(len(sents))
    ent = w.entropy()
    assert abs(float(nll.mean()) - ent.per_sentence) < 4 * se
    mean_len = sum(map(len, sents)) / len(sents)
    assert mean_len == pytest.approx(ent.expected_length, rel=0.03)


def test_sampled_frequencies_match_arc_probabilities():
    """Chi-square on the (state, next event) counts of 20,000 sampled sentences."""
    w = compile_fsg(parse_fsg(BRANCHY))
    sents = w.sample(20000, seed=7)
    counts: dict[int, Counter] = defaultdict(Counter)
    for s in sents:
        q = w.start
        for t in s:
            counts[q][t] += 1
            q = int(w.delta[q, t])
        counts[q]["stop"] += 1
    chi2, dof = 0.0, 0
    for q, c in counts.items():
        n = sum(c.values())
        events = {t: math.exp(float(w.log_probs[q, t])) for t in (w.log_probs[q] > -math.inf).nonzero().flatten().tolist()}
        if w.final[q]:
            events["stop"] = math.exp(float(w.final_log_probs[q]))
        assert set(c) <= set(events)
        for e, p in events.items():
            chi2 += (c[e] - n * p) ** 2 / (n * p)
        dof += len(events) - 1
    # chi2 has mean dof and sd sqrt(2 dof); six sd is far beyond chance for a fixed seed
    assert chi2 < dof + 6 * math.sqrt(2 * dof), (chi2, dof)
    # and the arc probabilities are the ones written: P(the) = 0.5 at the start
    first = Counter(s[0] for s in sents)
    assert first[w.vocab.id("the")] / len(sents) == pytest.approx(0.5, abs=0.015)


def test_sampling_is_reproducible_and_max_len_conditions():
    w = compile_fsg(parse_fsg(BRANCHY))
    assert w.sample(30, seed=1) == w.sample(30, seed=1)
    assert w.sample(30, seed=1) != w.sample(30, seed=2)
    short = w.sample(300, max_len=3, seed=0)
    assert len(short) == 300 and all(len(s) <= 3 for s in short)
    assert all(w.accepts(s) for s in short)


def test_roles_mark_arcs_and_are_causal():
    w = compile_fsg(parse_fsg(BRANCHY))
    sents = w.sample(40, seed=2)
    L = max(map(len, sents))
    ids = torch.tensor([s + [w.vocab.id("and")] * (L - len(s)) for s in sents])
    roles = w.roles(ids)["subject"]
    nouns = {w.vocab.id("cat"), w.vocab.id("dog")}
    for row, s in zip(roles.tolist(), sents):
        assert row[: len(s)] == [t in nouns for t in s]
    # changing tokens after t never changes roles up to t
    g = torch.Generator().manual_seed(0)
    for t in range(L - 1):
        other = ids.clone()
        other[:, t + 1 :] = torch.randint(0, len(w.vocab), (ids.shape[0], L - t - 1), generator=g)
        assert torch.equal(w.roles(other)["subject"][:, : t + 1], roles[:, : t + 1])


def test_normalize_rescales_each_state():
    text = "%normalize\nA B x 2\nA B y 6\nB 3\n"
    w = compile_fsg(parse_fsg(text))
    assert math.exp(float(w.log_probs[0, w.vocab.id("x")])) == pytest.approx(0.25)
    assert math.exp(float(w.final_log_probs[int(w.delta[0, w.vocab.id("x")])])) == pytest.approx(1.0)


def test_logprob_weights():
    text = f"%weights logprob\nA B x {math.log(0.2)}\nA B y {math.log(0.8)}\nB\n"
    w = compile_fsg(parse_fsg(text))
    assert float(w.log_probs[0, w.vocab.id("y")]) == pytest.approx(math.log(0.8))


def test_epsilon_cycles_are_closed_exactly():
    text = "A B <eps> 0.5\nA C x 0.5\nB A <eps> 0.5\nB C y 0.5\nC\n"
    g = parse_fsg(text)
    w = compile_fsg(g)
    # P(x) = 0.5 / (1 - 0.25), P(y) = 0.25 / (1 - 0.25)
    assert math.exp(float(w.log_probs[0, w.vocab.id("x")])) == pytest.approx(2 / 3, abs=1e-12)
    assert math.exp(float(w.log_probs[0, w.vocab.id("y")])) == pytest.approx(1 / 3, abs=1e-12)


def test_regex_terminals_read_matching_tokens(tmp_path):
    (tmp_path / "num.regex").write_text("NUM: /[0-9]+/\nWORD: /[a-z]+/\n")
    (tmp_path / "g.fsg").write_text('%import "num.regex" (NUM)\nA B NUM\nB C \'items\'\nC\n')
    vocab = neurosym.Vocab.words(["12", "7", "x1", "items", "abc"])
    w = neurosym.load(tmp_path / "g.fsg", vocab=vocab)
    first = (w.log_probs[0] > -math.inf).nonzero().flatten().tolist()
    assert sorted(vocab.tokens[i] for i in first) == ["12", "7"]
    assert math.exp(float(w.log_probs[0, vocab.id("7")])) == pytest.approx(0.5)
    assert w.accepts("12 items") and not w.accepts("x1 items")


def test_ambiguity_beyond_the_state_cap_stops_with_a_message():
    # (a|b)* a (a|b)^k with a uniform choice: the posterior needs 2^k deterministic states
    k = 9
    lines = ["0 0 a 0.25", "0 0 b 0.25", "0 1 a 0.25", "0 0.25"]
    lines += [f"{i} {i + 1} a 0.5\n{i} {i + 1} b 0.5" for i in range(1, k + 1)]
    lines.append(f"{k + 1} 1.0")
    with pytest.raises(CompileError, match="max_states"):
        compile_fsg(parse_fsg("\n".join(lines)), limits=Limits(max_states=100))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.data())
def test_random_grammars_agree_with_path_sums(data):
    """Random grammars, deterministic or not: whenever the weighted subset construction
    terminates, every sentence gets the probability summed over all of its paths; it may
    only refuse (with the max_states message) when some state reads a token on two arcs."""
    n = data.draw(st.integers(2, 5), label="states")
    words = ["a", "b", "c"]
    lines = []
    ambiguous = False
    for q in range(n):
        k = data.draw(st.integers(1, 3), label="arcs")
        weights = [data.draw(st.floats(0.05, 1.0), label="w") for _ in range(k + 1)]
        z = sum(weights)
        labels = [data.draw(st.sampled_from(words), label="label") for _ in range(k)]
        ambiguous |= len(set(labels)) < k
        for j in range(k):
            # the first arc goes to the next state, so every state is reachable
            dst = (q + 1) % n if j == 0 else data.draw(st.integers(0, n - 1), label="dst")
            lines.append(f"{q} {dst} {labels[j]} {weights[j] / z!r}")
        lines.append(f"{q} {weights[k] / z!r}")  # every state may stop: none is dead
    g = parse_fsg("\n".join(lines))
    try:
        w = compile_fsg(g, limits=Limits(max_states=300))
    except CompileError as e:
        assert ambiguous and "max_states" in str(e)
        return
    for s in w.sample(20, max_len=6, seed=0) + [["a"], ["b", "a"], ["c", "c", "a"]]:
        s = [x if isinstance(x, str) else w.vocab.tokens[x] for x in s]
        if any(x not in w.vocab for x in s):
            continue
        p = path_prob(g, s)
        lp = float(w.log_prob(sentence_ids(w, s))[0]) if s else float(w.final_log_probs[w.start])
        assert (lp == -math.inf) if p == 0 else lp == pytest.approx(math.log(p), abs=1e-9)


def test_analysis_reports_cycles():
    a = analyze(parse_fsg(BRANCHY))
    assert a.infinite and sorted(a.cycles[0]) == ["A", "B", "C", "D"]
    assert not analyze(parse_fsg(FINITE)).infinite


# ---------------------------------------------------------------------- excluded words
SHARED_ARC = """
A B @COL 0.6
A B 'cat' 0.4
B C 'runs' 1.0
C 0.5
C A 'and' 0.5
"""


def _sentence_prob(w, words):
    ids = torch.tensor([[w.vocab.id(x) for x in words]])
    return math.exp(float(w.log_prob(ids)[0]))


def _grammar(tmp_path, body=SHARED_ARC):
    lex = tmp_path / "c.lex"
    lex.write_text("%class COL red green blue\n")
    return parse_fsg(f'%start A\n%import "{lex.as_posix()}" (COL)\n' + body, path=tmp_path / "g.fsg")


def test_exclusion_renormalises_within_the_arc(tmp_path):
    g = _grammar(tmp_path)
    full = compile_fsg(g)
    held = compile_fsg(g, full.vocab, exclude=["red"])
    assert held.vocab.tokens == full.vocab.tokens  # the vocabulary keeps the word
    # the class arc keeps its 0.6, now shared by two words; 'cat' and the rest keep theirs
    assert _sentence_prob(full, ["green", "runs"]) == pytest.approx(0.2 * 0.5)
    assert _sentence_prob(held, ["green", "runs"]) == pytest.approx(0.3 * 0.5)
    assert _sentence_prob(held, ["blue", "runs"]) == pytest.approx(0.3 * 0.5)
    assert _sentence_prob(held, ["cat", "runs"]) == pytest.approx(0.4 * 0.5)
    assert _sentence_prob(held, ["red", "runs"]) == 0.0
    assert _sentence_prob(held, ["cat", "runs", "and", "green", "runs"]) == pytest.approx(0.4 * 0.5 * 0.3 * 0.5)
    # sampled: no excluded word, and the structure (how often a sentence continues) unchanged
    n = 20000
    sents = held.sample(n, seed=4)
    assert not any(held.vocab.id("red") in s for s in sents)
    assert sum(held.vocab.id("and") in s for s in sents) / n == pytest.approx(0.5, abs=0.015)


def test_excluding_every_word_of_an_arc_or_an_unknown_word_is_an_error(tmp_path):
    g = _grammar(tmp_path)
    with pytest.raises(CompileError, match=r"g.fsg:\d+:\d+: every token of 'cat' is excluded"):
        compile_fsg(g, exclude=["cat"])
    with pytest.raises(CompileError, match="every token of @COL is excluded"):
        compile_fsg(g, exclude=["red", "green", "blue"])
    with pytest.raises(CompileError, match="'zebra'.*not in the vocabulary"):
        compile_fsg(g, exclude=["zebra"])
