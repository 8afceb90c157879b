"""Differential tests: ``compile_regex(p).accepts(s) == bool(re.fullmatch(p, s, re.ASCII))``.

The patterns live in ``tests/data/regexes.txt``. Strings come from

* an exhaustive enumeration of short strings over a small alphabet per pattern,
* hypothesis: random text over the pattern's own characters plus outsiders
  (non-ASCII, newline, Unicode digits/spaces that only Unicode-mode ``re`` treats
  as ``\\d``/``\\s``), strings hypothesis builds to fullmatch the pattern, and
  one-edit mutations of those,
* the automaton itself (``Automaton.sample`` and ``CharDFA.sample``).

Also: the ``i``/``s`` flags, the deliberate ASCII-only difference to default ``re``,
set semantics (``a|ab``), the UTF-8 byte DFA, and the known disagreements listed in
``tests/data/regex_disagreements.txt`` (each is now rejected with a clear error or agrees).
"""

from __future__ import annotations

import ast
import itertools
import random
import re
import warnings
import zlib
from collections import deque
from functools import lru_cache
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from regex_reference import fullmatch

import neurosym
from neurosym.compile.dfa import OTHER
from neurosym.errors import NeurosymError

DATA = Path(__file__).resolve().parents[1] / "data"


def _load_patterns() -> list[str]:
    lines = (DATA / "regexes.txt").read_text(encoding="utf-8").split("\n")
    return [line for line in lines if line.strip() and not line.startswith("#")]


def _load_disagreements() -> list[tuple[str, str, str, str]]:
    rows = []
    for line in (DATA / "regex_disagreements.txt").read_text(encoding="utf-8").split("\n"):
        if line.strip() and not line.startswith("#"):
            pattern, flags, example, cause = line.split("\t")
            rows.append((pattern, flags, ast.literal_eval(example), cause))
    return rows


pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning")

PATTERNS = _load_patterns()
DISAGREEMENTS = _load_disagreements()

# outsiders: non-ASCII letters, CJK, emoji, control characters, and characters that
# Unicode-mode re (but not re.ASCII) treats as \d, \s, \w or case variants of ASCII letters
EXTRA = "é\nZ0 \t\rÉß中😀\x00\x0b\x1c\x85\xa0\u0663\u212a\u017f\u0130"
RE_FLAGS = {"": 0, "i": re.IGNORECASE, "s": re.DOTALL, "is": re.IGNORECASE | re.DOTALL}
SETTINGS = dict(
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)


def max_positive_len(pattern: str) -> int:
    """Positive strings are at most this long (their mutations at most twice as long)."""
    return 120


def reference(pattern: str, s: str, flags: str = "") -> bool:
    """``re.fullmatch`` semantics without re's exponential backtracking (tests/regex_reference.py)."""
    return fullmatch(pattern, s, re.ASCII | RE_FLAGS[flags])


@lru_cache(maxsize=None)
def compiled(pattern: str, flags: str = ""):
    return neurosym.compile_regex(pattern, flags=flags)


@lru_cache(maxsize=None)
def byte_table(pattern: str):
    return compiled(pattern).char_dfa.byte_dfa()


@lru_cache(maxsize=None)
def alphabet(pattern: str) -> str:
    """The pattern's own characters, the first, middle and last member of each character
    class the compiled DFA distinguishes (e.g. 'a', 'n', 'z' for ``[a-z]``), and the outsiders."""
    chars = set(pattern) | set(EXTRA)
    for members in compiled(pattern).char_dfa.partition.members:
        chars.update(members[:1] + members[len(members) // 2 :][:1] + members[-1:])
    return "".join(sorted(chars))


@lru_cache(maxsize=None)
def positives(pattern: str):
    """Hypothesis strings that fullmatch the pattern under re.ASCII.

    Hypothesis draws only ASCII characters for a pattern compiled with re.ASCII, so
    non-ASCII patterns, and patterns matching only non-ASCII strings, are compiled
    without it and the draws filtered."""
    flags = re.ASCII if pattern.isascii() and _has_ascii_string(pattern) else 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        strategy = st.from_regex(re.compile(pattern, flags), fullmatch=True)
    return strategy.filter(lambda s: len(s) <= max_positive_len(pattern) and reference(pattern, s))


def _has_ascii_string(pattern: str) -> bool:
    """Whether the language holds a string of ASCII characters only (not so for
    ``[^\\x00-\\x7f]+``, which hypothesis cannot draw from under re.ASCII)."""
    dfa = compiled(pattern).char_dfa
    ascii_classes = sorted({dfa.partition.class_of.get(chr(b), OTHER) for b in range(128)})
    seen, todo = {0}, [0]
    while todo:
        q = todo.pop()
        if dfa.final[q]:
            return True
        for k in ascii_classes:
            t = int(dfa.trans[q, k])
            if t >= 0 and t not in seen:
                seen.add(t)
                todo.append(t)
    return False


def byte_accepts(table, data: bytes) -> tuple[bool, list[int]]:
    trans, final = table
    q, states = 0, []
    for b in data:
        q = int(trans[q, b])
        states.append(q)
        if q < 0:
            return False, states
    return bool(final[q]), states


def accepts_batch(auto, strings: list[str]) -> list[bool]:
    """Acceptance of many strings at once through ``Automaton.run`` (grouped by length)."""
    out: dict[str, bool] = {}
    by_len: dict[int, list[str]] = {}
    for s in strings:
        by_len.setdefault(len(s), []).append(s)
    for n, group in by_len.items():
        if n == 0:
            out[""] = bool(auto.final[auto.start])
            continue
        ids = torch.tensor([auto.ids(s) for s in group], dtype=torch.long)
        last = auto.run(ids)[:, -1]
        ok = (last >= 0) & auto.final[last.clamp(min=0)]
        out.update(zip(group, ok.tolist()))
    return [out[s] for s in strings]


# ---------------------------------------------------------------------- the corpus
def test_corpus_is_large_unique_and_compiles():
    assert len(PATTERNS) >= 120
    assert len(set(PATTERNS)) == len(PATTERNS)
    assert all(p == p.strip() for p in PATTERNS), "patterns are taken verbatim: no stray whitespace"
    for p in PATTERNS:
        auto = compiled(p)
        assert auto.num_states >= 1 and auto.delta.shape == (auto.num_states, len(auto.vocab))
        assert auto.vocab.kind == "char" and auto.vocab.unk == 0 and auto.vocab.surfaces[0] is None


def test_disagreement_patterns_are_not_in_the_corpus():
    # a pattern may be in both only when it disagrees under flags (e.g. [^\Wa] is fine without 'i')
    assert not {p for p, flags, *_ in DISAGREEMENTS if not flags} & set(PATTERNS)


# ---------------------------------------------------------------------- exhaustive short strings
@pytest.mark.parametrize("pattern", PATTERNS)
def test_short_strings_agree_with_re(pattern):
    """Every string of length <= 3 over a small alphabet (pattern characters, class
    representatives, a few outsiders), plus random longer ones; checked through both
    ``accepts`` (batched via ``run``) and the character DFA."""
    auto = compiled(pattern)
    small = sorted(set(alphabet(pattern)) - set(EXTRA) | set("é\nZ0 \u0663"))
    rng = random.Random(zlib.crc32(pattern.encode()))
    if len(small) > 16:
        small = rng.sample(small, 16)
    strings = ["".join(t) for n in range(4) for t in itertools.product(small, repeat=n)]
    big = alphabet(pattern)
    strings += ["".join(rng.choice(big) for _ in range(rng.randint(4, 12))) for _ in range(300)]
    got = accepts_batch(auto, strings)
    for s, g in zip(strings, got):
        ref = reference(pattern, s)
        assert g == ref, f"{pattern!r} on {s!r}: automaton {g}, re {ref}"
        assert auto.char_dfa.accepts(s) == ref, f"CharDFA {pattern!r} on {s!r}"


# ---------------------------------------------------------------------- hypothesis
@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=12, **SETTINGS)
@given(data=st.data())
def test_hypothesis_strings_agree_with_re(pattern, data):
    auto = compiled(pattern)
    chars = alphabet(pattern)
    s = data.draw(st.text(alphabet=chars, max_size=16), label="random")
    assert auto.accepts(s) == reference(pattern, s), repr(s)
    if not bool(auto.final.any()):  # an empty language (e.g. [^\s\S]): nothing to draw
        return
    s = data.draw(positives(pattern), label="positive")
    assert auto.accepts(s), f"{pattern!r} must accept {s!r}"
    # one edit away from a positive: the boundary of the language
    if s:
        i = data.draw(st.integers(0, len(s) - 1), label="position")
        c = data.draw(st.sampled_from(chars), label="char")
        for t in (s[:i] + s[i + 1 :], s[:i] + c + s[i + 1 :], s[:i] + c + s[i:], s + s[i:]):
            assert auto.accepts(t) == reference(pattern, t), repr(t)


def test_empty_languages_are_really_empty():
    empty = [p for p in PATTERNS if not compiled(p).final.any()]
    assert r"[^\s\S]" in empty and r"[^\d\D]" in empty
    for p in empty:
        auto = compiled(p)
        assert auto.num_states == 1 and not (auto.delta >= 0).any()
        assert auto.sample(5) == [] and auto.char_dfa.sample(5) == []


# ---------------------------------------------------------------------- sampling
def _has_accepted_sequence(delta, final, max_len: int) -> bool:
    """BFS: is some final state within ``max_len`` steps of state 0 over ``delta``?"""
    dist = {0: 0}
    queue = deque([0])
    while queue:
        q = queue.popleft()
        if final[q]:
            return True
        if dist[q] == max_len:
            continue
        for t in delta[q].tolist():
            if t >= 0 and t not in dist:
                dist[t] = dist[q] + 1
                queue.append(t)
    return False


@pytest.mark.parametrize("pattern", PATTERNS)
def test_sampled_strings_fullmatch(pattern):
    auto = compiled(pattern)
    unk = auto.vocab.unk
    samples = auto.sample(20, max_len=24, seed=5)
    for ids in samples:
        assert unk not in ids, "the special <unk> token is never sampled"
        assert len(ids) <= 24 and auto.accepts(ids)
        s = auto.vocab.spell(ids)
        assert reference(pattern, s), f"{pattern!r}: sampled {s!r} does not fullmatch"
    # sampling finds nothing exactly when every accepted sequence of <= 24 tokens needs <unk>
    no_unk = auto.delta.clone()
    no_unk[:, unk] = -1
    assert (samples == []) == (not _has_accepted_sequence(no_unk, auto.final.tolist(), 24))
    # the character DFA samples class representatives, including characters it never mentions
    for s in auto.char_dfa.sample(20, max_len=24, seed=6):
        assert reference(pattern, s), f"{pattern!r}: CharDFA sampled {s!r}"
        assert auto.accepts(s)


def test_some_languages_are_reachable_only_through_unk():
    # [^\x00-\x7f]+ names no non-ASCII character: every accepted string is spelled with <unk>
    auto = compiled(r"[^\x00-\x7f]+")
    assert auto.sample(5) == []
    assert auto.accepts([auto.vocab.unk]) and auto.accepts("éé") and not auto.accepts("é!")
    assert all(reference(r"[^\x00-\x7f]+", s) for s in auto.char_dfa.sample(10, seed=1))


# ---------------------------------------------------------------------- flags
FLAG_PATTERNS = PATTERNS[::3] + ["a.c", "[a-b]+C?", "(?-i:a)b", "[^b]x?", "hello", "K", "(?s:.)(?-s:.)"]
FLAG_PATTERNS += [p for p in PATTERNS if "(?" in p or "\\W" in p or "." in p]  # whatever the flags can change


def _flag_cases():
    cases = []
    for pattern in sorted(set(FLAG_PATTERNS)):
        for flags in ["i", "s", "is"]:
            cases.append(pytest.param(pattern, flags, id=f"{pattern!r}-{flags}"))
    return cases


@pytest.mark.parametrize("pattern, flags", _flag_cases())
@settings(max_examples=4, **SETTINGS)
@given(data=st.data())
def test_flags_agree_with_re(pattern, flags, data):
    try:
        auto = compiled(pattern, flags)
    except NeurosymError:  # only the recorded disagreements may be rejected, and only under these flags
        assert any(p == pattern and set(f) <= set(flags) for p, f, *_ in DISAGREEMENTS), pattern
        return
    chars = alphabet(pattern) + "aAbBcCkKsS\n"
    s = data.draw(st.text(alphabet=chars, max_size=10), label="random")
    assert auto.accepts(s) == reference(pattern, s, flags), repr(s)
    for p, f, example, _ in DISAGREEMENTS:  # the recorded counterexample of a former disagreement
        if p == pattern and f and set(f) <= set(flags):
            assert auto.accepts(example) == reference(pattern, example, flags), repr(example)
    # case-swapped and newline-spliced variants of a sample exercise exactly what the flags change
    for ids in auto.sample(2, max_len=12, seed=data.draw(st.integers(0, 99), label="seed")):
        t = auto.vocab.spell(ids)
        for u in (t, t.swapcase(), t.upper(), t.replace("a", "\n")):
            assert auto.accepts(u) == reference(pattern, u, flags), repr(u)


def test_flags_examples():
    i = neurosym.compile_regex("(ab|cd)e", flags="i")
    assert all(i.accepts(s) for s in ["abe", "ABE", "aBe", "CDE", "cDe"]) and not i.accepts("abd")
    dot = neurosym.compile_regex("a.b")
    dotall = neurosym.compile_regex("a.b", flags="s")
    assert not dot.accepts("a\nb") and dotall.accepts("a\nb") and dot.accepts("a\rb")
    assert neurosym.compile_regex("(?-i:a)b", flags="i").accepts("aB")
    assert not neurosym.compile_regex("(?-i:a)b", flags="i").accepts("Ab")
    assert neurosym.compile_regex("(?i:ab)c").accepts("ABc") and not neurosym.compile_regex("(?i:ab)c").accepts("ABC")
    assert neurosym.compile_regex("(?s:.)(?-s:.)").accepts("\na") and not neurosym.compile_regex("(?s:.)(?-s:.)").accepts("a\n")
    with pytest.raises(NeurosymError, match="unsupported flag"):
        neurosym.compile_regex("a", flags="x")


def test_deliberate_ascii_difference():
    """Matching is ASCII-only, like re.ASCII and unlike Python's default Unicode mode."""
    arabic_three = "\u0663"  # ARABIC-INDIC DIGIT THREE
    assert re.fullmatch(r"\d", arabic_three)  # default re: a digit
    assert not re.fullmatch(r"\d", arabic_three, re.ASCII)
    assert not neurosym.compile_regex(r"\d").accepts(arabic_three)
    assert neurosym.compile_regex(r"\D").accepts(arabic_three)
    # \w: é is a word character only in Unicode mode
    assert re.fullmatch(r"\w", "é") and not neurosym.compile_regex(r"\w").accepts("é")
    assert neurosym.compile_regex(r"\W").accepts("é")
    # \s: NEL, NO-BREAK SPACE and the information separators are Unicode whitespace only
    for c in "\x85\xa0\x1c":
        assert re.fullmatch(r"\s", c) and not neurosym.compile_regex(r"\s").accepts(c), repr(c)
    for c in " \t\n\r\f\v":
        assert neurosym.compile_regex(r"\s").accepts(c), repr(c)
    # case folding: only ASCII letters. KELVIN SIGN and LONG S fold to k and s in Unicode mode
    assert re.fullmatch("k", "\u212a", re.IGNORECASE) and not neurosym.compile_regex("k", flags="i").accepts("\u212a")
    assert re.fullmatch("s", "\u017f", re.IGNORECASE) and not neurosym.compile_regex("s", flags="i").accepts("\u017f")
    assert re.fullmatch("é", "É", re.IGNORECASE) and not neurosym.compile_regex("é", flags="i").accepts("É")
    assert neurosym.compile_regex("é", flags="i").accepts("é")


def test_set_semantics_not_leftmost_first():
    """A pattern denotes a set of strings: alternation order and laziness do not matter."""
    assert re.match("a|ab", "ab").group() == "a"  # re.match stops at the first alternative...
    for p in ["a|ab", "ab|a"]:
        auto = compiled(p)
        assert auto.accepts("ab") and auto.accepts("a") and not auto.accepts("abb") and not auto.accepts("")
    assert torch.equal(compiled("a|ab").delta, compiled("ab|a").delta)
    assert compiled("(a|ab)(c|bcd)").accepts("abcd") and compiled("(a|ab)(c|bcd)").accepts("abc")
    assert compiled("a*?b").accepts("aaab") and compiled("a+?").accepts("aaaa")
    for lazy, greedy in [("a*?b", "a*b"), ("a+?", "a+"), ("a??", "a?"), ("a{2,3}?", "a{2,3}"), ("(ab)*?c", "(ab)*c")]:
        assert torch.equal(neurosym.compile_regex(lazy).delta, neurosym.compile_regex(greedy).delta), lazy


# ---------------------------------------------------------------------- UTF-8 bytes
@pytest.mark.parametrize("pattern", PATTERNS[::2])
@settings(max_examples=8, **SETTINGS)
@given(text=st.text(alphabet="aZ0 é中😀\u0663\x7f\x80\n.-ß", max_size=10))
def test_byte_dfa_agrees_with_char_dfa(pattern, text):
    auto = compiled(pattern)
    table = byte_table(pattern)
    for s in [text, *auto.char_dfa.sample(1, max_len=10, seed=len(text))]:
        ok, states = byte_accepts(table, s.encode("utf-8"))
        assert ok == auto.char_dfa.accepts(s) == reference(pattern, s), repr(s)
        if ok:  # the byte table is trim: every byte prefix of an accepted string is live
            assert all(q >= 0 for q in states)


@pytest.mark.parametrize("pattern", ["é+", "[é-ü]+", "[^é]", "中文", "😀+", "a😀b", "naïve résumé", ".", r"\W", r"[^\x00-\x7f]+"])
def test_byte_dfa_never_accepts_mid_character(pattern):
    trans, final = byte_table(pattern)
    auto = compiled(pattern)
    for s in auto.char_dfa.sample(30, max_len=8, seed=2) + ["é", "中文", "😀", "aé", "a😀b"]:
        data = s.encode("utf-8")
        ok, states = byte_accepts((trans, final), data)
        assert ok == reference(pattern, s), repr(s)
        # every proper prefix that ends inside a multi-byte character is non-final
        ends = {len(s[:i].encode("utf-8")) for i in range(len(s) + 1)}
        for n, q in enumerate(states, start=1):
            if n not in ends and q >= 0:
                assert not final[q], f"{pattern!r}: accepting after {data[:n]!r}"


def test_byte_dfa_distinguishes_multibyte_characters_sharing_a_lead_byte():
    # é (c3 a9) and ß (c3 9f) share the lead byte c3; 中 (e4 b8 ad) and 丰 (e4 b8 b0) share two bytes
    for pattern, yes, no in [("é", "é", "ß"), ("[^é]", "ß", "é"), ("中", "中", "丰"), ("😀", "😀", "😁")]:
        table = byte_table(pattern)
        assert byte_accepts(table, yes.encode())[0] and not byte_accepts(table, no.encode())[0], pattern
        assert reference(pattern, yes) and not reference(pattern, no)


# ---------------------------------------------------------------------- known disagreements
@pytest.mark.parametrize("pattern, flags, example, cause", DISAGREEMENTS, ids=[repr(d[0]) + d[1] for d in DISAGREEMENTS])
def test_former_disagreements_are_rejected_or_agree(pattern, flags, example, cause):
    """compile_regex either rejects the pattern with a NeurosymError or agrees with re
    on the recorded counterexample (and on nearby strings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            auto = neurosym.compile_regex(pattern, flags=flags)
        except NeurosymError:
            return
    for s in [example, example.swapcase(), example + example, "", "a", "A", "b", "\n", "_", "0"]:
        assert auto.accepts(s) == reference(pattern, s, flags), f"{pattern!r} flags={flags!r} on {s!r}: {cause}"

