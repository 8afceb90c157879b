"""The posterior used to choose among consistent regexes (neurosym.synth.posterior)."""

import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.synth import regex_ast as ra
from neurosym.synth import synthesize
from neurosym.synth.posterior import Posterior, choose, log_likelihood, prior_cost, refine, shrinking_edits
from neurosym.synth.dfa_cache import compiled_dfa
from neurosym.synth.simplify import simplify


def _strings(alphabet: str, n: int):
    for k in range(n + 1):
        for t in itertools.product(alphabet, repeat=k):
            yield "".join(t)


def _reference_log_p(pattern: str, s: str, alphabet: str, horizon: int = 5) -> float:
    """log P(s) of the uniform walk, with `re` alone: a prefix is live if some extension
    of at most `horizon` characters matches."""
    rx = re.compile(pattern)

    def live(w: str) -> bool:
        return any(rx.fullmatch(w + x) for x in _strings(alphabet, horizon))

    total = 0.0
    for t in range(len(s) + 1):
        w = s[:t]
        choices = sum(live(w + c) for c in alphabet) + bool(rx.fullmatch(w))
        total -= math.log(choices)
    return total


PATTERNS = ["a*", "(a|b)*", "ab*", "a(ba)*b?", "(aa|b)+", "a?b+a", "(ab|ba)*a"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_log_likelihood_equals_reference_walk(pattern):
    dfa = compiled_dfa(ra.parse(pattern))
    rx = re.compile(pattern)
    strings = [s for s in _strings("ab", 5) if rx.fullmatch(s)]
    got = log_likelihood(dfa, strings, "ab")
    want = [_reference_log_p(pattern, s, "ab") for s in strings]
    np.testing.assert_allclose(got, want, atol=1e-12)
    rejected = [s for s in _strings("ab", 4) if not rx.fullmatch(s)]
    assert np.all(np.isneginf(log_likelihood(dfa, rejected, "ab")))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "ab", "a*", "b+", "(a|b)", "b?", "(ab)*"]), min_size=1, max_size=4))
def test_probabilities_sum_to_at_most_one(parts):
    pattern = "".join(parts)
    dfa = compiled_dfa(ra.parse(pattern))
    p = np.exp(log_likelihood(dfa, list(_strings("ab", 9)), "ab"))
    assert p.sum() <= 1 + 1e-9
    # a*: P(a^k) = 2^-(k+1) over {a, b}, so strings up to length 9 carry 1 - 2^-10
    if pattern == "a*":
        assert p.sum() == pytest.approx(1 - 2.0**-10)


def test_smaller_languages_make_examples_likelier():
    post = Posterior(["12.5", "33.5", "71.5"], beta=0.0)
    assert post(ra.parse("[0-9][0-9]\\.5")) > post(ra.parse("[0-9]+\\.5")) > post(ra.parse(".*5"))
    assert post(ra.parse("[0-9]")) == -math.inf  # rejects the positives


def test_prior_cost_counts_repetitions_once():
    d = ra.Chars("0123456789")
    three = simplify(ra.parse("[0-9]{3}"))
    assert ra.runs(three.items, min_run=2) == [(d, 3, False)]
    assert prior_cost(three) < 3 * prior_cost(d)
    assert ra.runs(simplify(ra.parse("[0-9]{4,}")).items, min_run=2) == [(d, 4, True)]
    assert prior_cost(ra.parse("[0-9]{4,}")) == prior_cost(ra.parse("[0-9]{4}")) + 5
    assert prior_cost(ra.parse("a")) > prior_cost(ra.parse("[a-z]"))  # classes generalise
    assert prior_cost(ra.parse("[0-9]|a")) > prior_cost(ra.parse("[0-9]"))


def test_shrinking_edits_only_shrink():
    r = ra.parse("(.*|x)[0-9]+.?")
    seen = frozenset("x1 ")
    big = compiled_dfa(r)
    for x in shrinking_edits(r, seen):
        small = compiled_dfa(x)
        for s in _strings("x1 ", 4):
            assert not small.accepts(s) or big.accepts(s), (ra.to_pattern(x), s)


def test_refine_and_choose_keep_examples_and_pick_tight_structure():
    pos, neg = ["12.5", "33.5", "71.5"], ["12.4", "abc"]
    post = Posterior(pos, neg)
    r = refine(ra.parse(".*5"), pos, post)
    rx = re.compile(ra.to_pattern(r))
    assert all(rx.fullmatch(s) for s in pos) and not any(rx.fullmatch(s) for s in neg)
    best = choose([ra.parse(".*5"), ra.parse("[0-9]+\\.[0-9]")], pos, neg)
    assert ra.to_pattern(best) == "[0-9][0-9]\\.5"


def test_synthesize_with_posterior_selection():
    res = synthesize(["12.5", "33.5", "71.5"], ["12.4", "1.5", "abc"], time_budget=5, select="posterior")
    assert res.solved and res.pattern.startswith("[0-9][0-9]\\.5")
    with pytest.raises(Exception, match="select"):
        synthesize(["ab"], time_budget=1, select="best")
