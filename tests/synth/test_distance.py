import random
import zlib

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from neurosym.synth import regex_ast as ra

from neurosym.compile.regex import pattern_dfa
from neurosym.synth.distance import distances, objective
from references import brute_force_distance, levenshtein

PATTERNS = ["(01)*", "0[01]*1", "1*0?1*0?1*", "(0|11)+", "a(bc)*d?", "[0-9]+x", "()", "0", "(00|1)*0"]


def test_levenshtein():
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3
    assert levenshtein("abc", "abc") == 0


@pytest.mark.parametrize("pattern", PATTERNS)
def test_dp_equals_brute_force(pattern):
    dfa = pattern_dfa(pattern)
    rng = random.Random(zlib.crc32(pattern.encode()))  # hash() of a str changes per process
    alphabet = "01abcdx9"
    strings = ["", "0", "1", "01"] + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5))) for _ in range(12)]
    got = distances(dfa, strings)
    for s, d in zip(strings, got):
        assert d == brute_force_distance(dfa, s), (pattern, s)


def test_accepted_strings_have_distance_zero_and_batch_matches_single():
    dfa = pattern_dfa("[01]*0")
    strings = ["0", "10", "110", "1", "", "0101"]
    batch = distances(dfa, strings)
    assert list(batch) == [0, 0, 0, 1, 1, 1]
    for s, d in zip(strings, batch):
        assert distances(dfa, [s])[0] == d


def test_empty_language_is_infinite():
    dfa = pattern_dfa("[^\\s\\S]")
    assert np.isinf(distances(dfa, ["a", ""])).all()


def test_objective():
    dfa = pattern_dfa("0+")
    score, d, bad = objective(dfa, ["0", "00", "1"], ["000"], size=2, lam=0.1)
    assert list(d) == [0, 0, 1] and bad == 1
    assert score == pytest.approx(0 + 0.5 / 3 + 1.0 + 0.2)
    score, _, _ = objective(dfa, ["0", "00"], ["1"], size=2, lam=0.1)
    assert score == pytest.approx(0.2)  # every example satisfied: only the size term


SMALL_TREES = st.recursive(
    st.sampled_from([ra.Chars("0"), ra.Chars("1"), ra.Chars("01"), ra.EPS]),
    lambda kids: st.one_of(
        st.builds(ra.Star, kids),
        st.builds(ra.Opt, kids),
        st.lists(kids, min_size=2, max_size=3).map(lambda xs: ra.Cat(tuple(xs))),
        st.lists(kids, min_size=2, max_size=2).map(lambda xs: ra.Alt(tuple(xs))),
    ),
    max_leaves=6,
)


@settings(max_examples=40, deadline=None)
@given(SMALL_TREES, st.lists(st.text("012", max_size=3), min_size=1, max_size=4))
def test_dp_equals_brute_force_random(tree, strings):
    dfa = pattern_dfa(ra.to_pattern(tree))
    assume(dfa.num_states <= 4)
    got = distances(dfa, strings)
    for s, d in zip(strings, got):
        assert d == brute_force_distance(dfa, s), (ra.to_pattern(tree), s)
