"""The linear minimisation of a trie (neurosym.compile.dfa.minimize_trie, issue 44 point 4)
equals Moore's refinement (minimize_table) state for state, and a word list with one long
line is refused at the state cap in about a second instead of running for minutes."""

from __future__ import annotations

import random
import re
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.compile.dfa import minimize_table, minimize_trie
from neurosym.compile.regex import Limits, words_dfa
from neurosym.errors import CompileError


def trie(words: list[str]) -> tuple[dict, list[bool], int]:
    alphabet = sorted({c for w in words for c in w})
    cls = {c: k + 1 for k, c in enumerate(alphabet)}
    children: dict[tuple[int, int], int] = {}
    final = [False]
    for w in words:
        s = 0
        for c in w:
            nxt = children.get((s, cls[c]))
            if nxt is None:
                nxt = children[(s, cls[c])] = len(final)
                final.append(False)
            s = nxt
        final[s] = True
    return children, final, len(alphabet) + 1


def check_equal(words: list[str]) -> None:
    children, final, K = trie(words)
    table = np.full((len(final), K), -1, dtype=np.int64)
    for (s, k), c in children.items():
        table[s, k] = c
    want = minimize_table(table, np.array(final))
    got = minimize_trie(children, final, K)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), words


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="abc", max_size=7), max_size=12))
def test_equals_moores_refinement(words):
    check_equal(words)


def test_equals_moores_refinement_on_word_lists_with_shared_suffixes():
    rng = random.Random(0)
    stems = ["walk", "talk", "jump", "play", "stay", "run"]
    for _ in range(30):
        words = [rng.choice(stems) + rng.choice(["", "s", "ed", "ing", "er", "ers"]) for _ in range(rng.randint(1, 25))]
        check_equal(words)


def test_the_compiled_word_list_still_matches_python_re():
    words = ["cat", "cats", "dog", "dogs", "catalog", "do", ""]
    dfa = words_dfa(words)
    pattern = re.compile("|".join(map(re.escape, words)))
    for s in ["", "cat", "cats", "catal", "catalog", "dogs", "dogss", "d", "do", "x"]:
        assert dfa.accepts(s) == bool(pattern.fullmatch(s)), s


def test_a_long_single_line_is_refused_at_the_cap_at_once():
    t0 = time.monotonic()
    with pytest.raises(CompileError, match="more than 10,000 states, over the state cap of 10,000"):
        words_dfa(["ab" * 500_000], limits=Limits(max_states=10_000, time_limit=5))
    assert time.monotonic() - t0 < 5


def test_the_time_limit_stops_a_large_trie():
    words = ["".join(random.Random(i).choice("abcdefgh") for _ in range(40)) for i in range(20_000)]
    t0 = time.monotonic()
    with pytest.raises(CompileError, match="time limit"):
        words_dfa(words, limits=Limits(max_states=10_000_000, time_limit=0.05))
    assert time.monotonic() - t0 < 3


def test_the_time_limit_holds_in_the_token_automaton_too(tmp_path):
    """With the state cap raised, a long word list line reaches the token-level
    minimisation (one round per level of a chain): the shared time limit stops it there."""
    from neurosym.compile.regex import load_word_list

    path = tmp_path / "long.txt"
    path.write_text("ab" * 25_000 + "\n", encoding="utf-8")
    t0 = time.monotonic()
    with pytest.raises(CompileError, match="exceeded the time limit of 1 s"):
        load_word_list(path, limits=Limits(max_states=200_000, time_limit=1))
    assert time.monotonic() - t0 < 4
