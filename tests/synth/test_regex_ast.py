import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from regex_reference import fullmatch

import neurosym
from neurosym.errors import NeurosymError
from neurosym.synth import regex_ast as ra
from neurosym.synth.infix import InfixSpace
from neurosym.synth.dfa_cache import DFACache
from neurosym.synth.edits import edits
from neurosym.synth.simplify import simplify

LEAVES = [ra.Chars("0"), ra.Chars("1"), ra.Chars("01"), ra.Chars("a"), ra.ANY]


def trees(max_leaves=12):
    leaf = st.sampled_from(LEAVES + [ra.EPS])
    return st.recursive(
        leaf,
        lambda kids: st.one_of(
            st.builds(ra.Star, kids),
            st.builds(ra.Plus, kids),
            st.builds(ra.Opt, kids),
            st.lists(kids, min_size=2, max_size=3).map(lambda xs: ra.Cat(tuple(xs))),
            st.lists(kids, min_size=2, max_size=3).map(lambda xs: ra.Alt(tuple(xs))),
        ),
        max_leaves=max_leaves,
    )


def strings_over(alphabet="01a", n=60, max_len=6, seed=0):
    import random

    rng = random.Random(seed)
    out = {""}
    while len(out) < n:
        out.add("".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_len))))
    return sorted(out)


@pytest.mark.parametrize(
    "pattern",
    ["0[01]*", "(01)*", "(0|1)*0", "1?(01)*0?", "[0-9]+\\.[a-z]", "a|b|()", "(a*)*b", "[ab-]x\\|y", "\\(\\)\\*\\+\\?"],
)
def test_print_parse_round_trip(pattern):
    r = ra.parse(pattern)
    printed = ra.to_pattern(r)
    assert ra.parse(printed) == r
    for s in ["", "0", "01", "0101", "a", "b", "ab-x|y", "()*+?", "1.5x", "3.b", "aab"]:
        assert fullmatch(pattern, s) == fullmatch(printed, s)


def test_printing_escapes_and_classes():
    assert ra.to_pattern(ra.Chars("0123456789")) == "[0-9]"
    assert ra.to_pattern(ra.Chars("ab")) == "[ab]"
    assert ra.to_pattern(ra.Chars(".")) == "\\."
    assert ra.to_pattern(ra.Chars("]-")) == "[\\-\\]]"
    assert ra.to_pattern(ra.Star(ra.Cat((ra.Chars("0"), ra.Chars("1"))))) == "(01)*"
    assert ra.to_pattern(ra.Opt(ra.Star(ra.Chars("0")))) == "(0*)?"  # never the lazy 0*?
    assert ra.to_pattern(ra.EPS) == "()"
    assert ra.parse("\\d{2,3}") == ra.parse("[0-9][0-9]([0-9])?")
    with pytest.raises(NeurosymError):
        ra.parse("a(?=b)")
    with pytest.raises(NeurosymError):
        ra.parse("[^a]")


@pytest.mark.parametrize(
    "pattern, printed",
    [
        ("[0-9]{3}-[0-9]{3}-[0-9]{4}x?y?z?", "[0-9]{3}-[0-9]{3}-[0-9]{4}x?y?z?"),
        ("[0-9][0-9][0-9]", "[0-9]{3}"),
        ("x{3,}", "x{3,}"),
        ("xxx*", "xx+"),  # runs shorter than three stay written out
        ("a{2}b", "aab"),
        ("(a|b){4}c", "[ab]{4}c"),
        ("(ab){3}", "ababab"),  # only runs of one item are counted
        ("a{0,}", "a*"),
        ("a[0-9]{2,4}", "a[0-9][0-9]([0-9][0-9]?)?"),
    ],
)
def test_counted_runs_print_and_round_trip(pattern, printed):
    r = simplify(ra.parse(pattern))
    assert ra.to_pattern(r) == printed
    assert ra.parse(printed) == r
    for w in strings_over("0ab-x", n=80, max_len=12) + ["123-456-7890", "xxxx", "abab" + "c", "a123"]:
        assert fullmatch(pattern, w) == fullmatch(printed, w), w
    assert neurosym.compile_regex(printed).char_dfa.accepts("123-456-7890") == fullmatch(printed, "123-456-7890")


@settings(max_examples=150, deadline=None)
@given(trees())
def test_print_parse_round_trip_random(r):
    printed = ra.to_pattern(r)
    back = ra.parse(printed)
    assert ra.to_pattern(back) == printed or simplify(back) == simplify(r)
    for s in strings_over(n=25):
        assert fullmatch(printed, s) == fullmatch(ra.to_pattern(back), s)


@settings(max_examples=200, deadline=None)
@given(trees())
def test_simplify_keeps_language_and_never_grows(r):
    s = simplify(r)
    assert ra.size(s) <= ra.size(r)
    assert simplify(s) == s  # idempotent
    assert ra.parse(ra.to_pattern(s)) == s  # canonical forms round-trip exactly
    p, q = ra.to_pattern(r), ra.to_pattern(s)
    for w in strings_over(n=40):
        assert fullmatch(p, w) == fullmatch(q, w), (p, q, w)


@pytest.mark.parametrize(
    "before, after",
    [
        ("(0*)*", "0*"),
        ("(0+)*", "0*"),
        ("(0?)*", "0*"),
        ("(0*)+", "0*"),
        ("(0+)?", "0*"),
        ("(0?)?", "0?"),
        ("()|0", "0?"),
        ("0|()|0*", "0*"),
        ("1|0", "[01]"),
        ("(0(1(0)))", "010"),
        ("b|a|b", "[ab]"),
        ("(ab|c)|(d|ab)", "[cd]|ab"),
        ("(0*|1)*", "[01]*"),
        ("(0*1*)*", "[01]*"),
        ("0*0*", "0*"),
        ("00*", "0+"),
        ("0*0", "0+"),
        ("0?0*", "0*"),
        ("()0()", "0"),
        ("0[^\\s\\S]", "[^\\s\\S]"),
        ("([^\\s\\S])*", "()"),
    ],
)
def test_canonical_forms(before, after):
    assert ra.to_pattern(simplify(ra.parse(before))) == after


def test_alternatives_sorted_so_equivalent_orders_coincide():
    a = simplify(ra.parse("01|1*|0"))
    b = simplify(ra.parse("0|01|1*"))
    assert a == b


def test_size_and_holes():
    assert ra.size(ra.parse("0[01]*")) == 4
    assert ra.size(ra.parse("a|b|c")) == 5  # parse keeps the alternation: 3 leaves, 2 joins
    assert ra.size(simplify(ra.parse("a|b|c"))) == 1
    h = ra.Cat((ra.Chars("0"), ra.Hole()))
    assert ra.holes(h) == 1 and ra.to_pattern(h) == "0□"
    assert ra.to_pattern(ra.fill(h, ra.Star(ra.ANY))) == "0.*"


def test_edits_neighbourhood():
    r = ra.parse("0[01]*")
    nb = edits(r, [ra.Chars("0"), ra.Chars("1")])
    pats = {ra.to_pattern(x) for x in nb}
    assert "1[01]*" in pats  # replace a leaf
    assert "0" in pats  # unwrap / delete
    assert "(0[01]*)*" in pats  # wrap
    assert "0[01]*1" in pats  # concatenate a leaf
    assert r not in nb and len(nb) == len(set(nb))
    assert all(simplify(x) == x for x in nb)
    assert any(ra.holes(x) for x in edits(r, [ra.Chars("0")], with_holes=True))


def test_compiled_dfa_cache_agrees_with_compile_regex():
    cache = DFACache(maxsize=2)
    r = ra.parse("(01)*")
    d = cache(r)
    assert cache(ra.parse("(01)*")) is d and cache.hits == 1
    auto = neurosym.compile_regex("(01)*")
    for s in ["", "01", "0101", "0", "10"]:
        assert d.accepts(s) == auto.char_dfa.accepts(s) == bool(re.fullmatch("(01)*", s))
    cache("0")
    cache("1")
    assert len(cache) == 2  # LRU bound
    assert cache("1") is cache("1") and "(01)*" not in cache._d  # the least recently used went


def test_compiled_dfa_cache_is_bounded_in_bytes():
    from neurosym.synth.dfa_cache import dfa_bytes

    probe = DFACache()
    sizes = {p: dfa_bytes(probe(p)) for p in ["a", "ab", "abc", "abcd", "[0-9]{3}-[0-9]{4}x?y?z?"]}
    budget = sizes["abcd"] + sizes["abc"]  # room for the last two of the first four
    cache = DFACache(max_mb=budget / 2**20)
    for p in ["a", "ab", "abc", "abcd"]:
        cache(p)
        assert cache.bytes <= budget and cache.bytes == sum(size for _, size in cache._d.values())
    assert list(cache._d) == ["abc", "abcd"]
    assert sizes["[0-9]{3}-[0-9]{4}x?y?z?"] > budget
    big = cache("[0-9]{3}-[0-9]{4}x?y?z?")  # larger than the whole budget: returned, not kept
    assert big.accepts("555-1234") and "[0-9]{3}-[0-9]{4}x?y?z?" not in cache._d
    assert list(cache._d) == ["abc", "abcd"] and cache.bytes <= budget


@settings(max_examples=100, deadline=None)
@given(trees(max_leaves=8))
def test_infix_vectors_match_python_re(r):
    words = strings_over(n=12, max_len=5, seed=3)
    space = InfixSpace(words)
    v = space.vector(r)
    p = ra.to_pattern(r)
    for w in words:
        assert bool(v[space.index[w]]) == fullmatch(p, w), (p, w)
