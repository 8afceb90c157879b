"""Differential tests: compiled automata accept exactly what Python's re.fullmatch accepts.

Reference semantics: ``re.fullmatch(p, s, re.ASCII)``, computed by tests/regex_reference.py
(re's own parser, no backtracking: re itself hangs on nested quantifiers) (neurosym's \\d \\w \\s and case
folding are ASCII). Strings come from hypothesis: random text over the pattern's own
characters plus outsiders, strings hypothesis builds to match the pattern, and strings
sampled from the automaton itself.
"""

import re
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from regex_reference import fullmatch

import neurosym
from neurosym.compile.regex import pattern_dfa

DATA = Path(__file__).resolve().parents[1] / "data" / "differential_regexes.txt"
PATTERNS = [line for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")]
EXTRA = "aZ0 \n\té中_-.😀"


@lru_cache(maxsize=None)
def compiled(pattern: str):
    return neurosym.compile_regex(pattern, max_states=20_000)


def alphabet(pattern: str) -> str:
    return "".join(sorted(set(pattern) | set(EXTRA) | {"A", "b", "B", "9"}))


def reference(pattern: str, s: str) -> bool:
    """``re.fullmatch(pattern, s, re.ASCII)``, without re's exponential backtracking."""
    return fullmatch(pattern, s, re.ASCII)


def test_the_corpus_is_large_and_unique():
    assert len(PATTERNS) >= 100 and len(set(PATTERNS)) == len(PATTERNS)


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_random_strings_agree_with_re(pattern, data):
    auto = compiled(pattern)
    s = data.draw(st.text(alphabet=alphabet(pattern), max_size=12), label="random")
    assert auto.accepts(s) == reference(pattern, s), repr(s)
    flags = re.ASCII if pattern.isascii() else 0  # hypothesis draws only ASCII under re.ASCII
    positives = st.from_regex(re.compile(pattern, flags), fullmatch=True).filter(lambda x: len(x) < 40 and reference(pattern, x))
    s = data.draw(positives, label="positive")
    assert reference(pattern, s)
    assert auto.accepts(s), repr(s)
    # one edit away from a positive string: the boundary of the language
    if s:
        i = data.draw(st.integers(0, len(s) - 1))
        c = data.draw(st.sampled_from(alphabet(pattern)))
        for t in (s[:i] + s[i + 1 :], s[:i] + c + s[i + 1 :], s[:i] + c + s[i:]):
            assert auto.accepts(t) == reference(pattern, t), repr(t)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_sampled_strings_fullmatch(pattern):
    auto = compiled(pattern)
    for s in auto.char_dfa.sample(25, max_len=20, seed=3):
        assert reference(pattern, s), repr(s)
    for ids in auto.sample(10, max_len=20, seed=4):
        assert auto.accepts(ids)
        assert reference(pattern, auto.vocab.spell(ids))


@pytest.mark.parametrize("pattern", PATTERNS[::4])
@settings(max_examples=40, deadline=None)
@given(text=st.text(alphabet="aé中😀\x80\x7f0b", max_size=8))
def test_byte_dfa_agrees_on_utf8(pattern, text):
    trans, final = compiled(pattern).char_dfa.byte_dfa()
    q = 0
    for b in text.encode("utf-8"):
        q = int(trans[q, b])
        if q < 0:
            break
    assert (q >= 0 and bool(final[q])) == reference(pattern, text)


@pytest.mark.parametrize("flags, re_flags", [("i", re.IGNORECASE), ("s", re.DOTALL), ("is", re.IGNORECASE | re.DOTALL)])
@settings(max_examples=150, deadline=None)
@given(s=st.text(alphabet="aAbBcC\nxé", max_size=8))
def test_flags_agree_with_re(flags, re_flags, s):
    for pattern in ["a.c", "[a-b]+C?", "(?-i:a)b*", "[^b]x?"]:
        if "-i" in pattern and "i" not in flags:
            continue
        auto = neurosym.compile_regex(pattern, flags=flags)
        assert auto.accepts(s) == fullmatch(pattern, s, re.ASCII | re_flags), (pattern, s)


def test_deliberate_ascii_difference():
    # Python's default (Unicode) \d matches Arabic-Indic digits; neurosym, like re.ASCII, does not.
    assert re.fullmatch(r"\d", "٣") and not re.fullmatch(r"\d", "٣", re.ASCII)
    assert not neurosym.compile_regex(r"\d").accepts("٣")
    assert not neurosym.compile_regex(r"\w").accepts("é") and re.fullmatch(r"\w", "é")
    # ASCII case folding: 'K' does not match the Kelvin sign under re.ASCII | re.IGNORECASE.
    assert not neurosym.compile_regex("k", flags="i").accepts("\u212a")


def test_set_semantics():
    auto = neurosym.compile_regex("a|ab")
    assert auto.accepts("ab") and auto.accepts("a") and not auto.accepts("abb")
    assert neurosym.compile_regex("a*?").accepts("aaa")  # lazy quantifiers denote the same set


def test_equal_languages_give_identical_tables():
    import torch

    pairs = [("(a|b)*", "(a*b*)*"), ("a(ba)*", "(ab)*a"), ("(a|b)*abb", "(a|b)*ab(b)")]
    for p, q in pairs:
        dp, dq = pattern_dfa(p), pattern_dfa(q)
        assert (dp.trans == dq.trans).all() and (dp.final == dq.final).all(), (p, q)
        assert torch.equal(neurosym.compile_regex(p).delta, neurosym.compile_regex(q).delta)
