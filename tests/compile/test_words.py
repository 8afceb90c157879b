"""Word lists: ``words_dfa`` builds a minimal DFA straight from a trie.

It must accept exactly the listed words (set membership; with ``ignore_case``,
membership after folding ASCII letters only), and be the same minimal table that
compiling the escaped alternation ``w1|w2|...`` through ``pattern_dfa`` gives.
"""

from __future__ import annotations

import random
import re
import time

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurosym.compile.dfa import OTHER, CharDFA
from neurosym.compile.regex import Limits, default_vocab, pattern_dfa, to_automaton, words_dfa
from neurosym.errors import CompileError
from neurosym.vocab import Vocab

HYP = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
LETTERS = "abcé中😀 -"
CASED = "aAbBzZéÉßK\u212a"  # ASCII letters of both cases, and non-ASCII ones that must not fold

words_st = st.lists(st.text(alphabet=LETTERS, max_size=6), max_size=25)


@st.composite
def affixed_words(draw, alphabet=LETTERS):
    """Words sharing prefixes and suffixes: stems x endings, plus some loose words."""
    stems = draw(st.lists(st.text(alphabet=alphabet, min_size=1, max_size=4), min_size=1, max_size=5))
    ends = draw(st.lists(st.text(alphabet=alphabet, max_size=3), min_size=1, max_size=4))
    loose = draw(st.lists(st.text(alphabet=alphabet, max_size=5), max_size=6))
    combos = [s + e for s in stems for e in ends]
    return draw(st.permutations(combos + loose))


def ascii_lower(s: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in s)


def probes(words: list[str], alphabet: str, rng: random.Random) -> list[str]:
    """Strings near the list: the words, their prefixes, one-character edits and
    extensions, case swaps, and random strings."""
    out = {""}
    for w in words:
        out.update(w[:i] for i in range(len(w) + 1))
        out.add(w.swapcase())
        out.add(w.upper())
        out.add(w + rng.choice(alphabet))
        if w:
            i = rng.randrange(len(w))
            out.add(w[:i] + w[i + 1 :])
            out.add(w[:i] + rng.choice(alphabet) + w[i + 1 :])
            out.add(w[::-1])
    out.update("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7))) for _ in range(30))
    return sorted(out)


def canonical(dfa: CharDFA):
    """The table with class columns ordered by their member characters and states
    renumbered breadth-first in that column order: equal for two minimal DFAs of one
    language whatever numbering their classes got (state numbering follows class order)."""
    keys = [(k != OTHER, sorted(m)) for k, m in enumerate(dfa.partition.members)]
    order = sorted(range(len(keys)), key=lambda k: keys[k])
    trans = dfa.trans[:, order]
    number = {0: 0}
    queue = [0]
    for q in queue:
        for t in trans[q].tolist():
            if t >= 0 and t not in number:
                number[t] = len(number)
                queue.append(t)
    assert len(number) == dfa.num_states, "trim: every state is reachable"
    old = sorted(number, key=number.get)
    table = [[number[t] if t >= 0 else -1 for t in trans[q].tolist()] for q in old]
    return table, [bool(dfa.final[q]) for q in old], [keys[k] for k in order]


def is_minimal(trans: np.ndarray, final: np.ndarray) -> bool:
    """No two states are equivalent (Moore refinement), and every state is live."""
    Q = trans.shape[0]
    block = [int(f) for f in final]
    while True:
        sigs = [(block[q], tuple(block[t] if t >= 0 else -1 for t in trans[q])) for q in range(Q)]
        ids = {s: i for i, s in enumerate(dict.fromkeys(sigs))}
        new = [ids[s] for s in sigs]
        if len(set(new)) == len(set(block)):
            break
        block = new
    if len(set(new)) != Q:
        return False
    co = {q for q in range(Q) if final[q]}  # co-reachable: can reach a final state
    while True:
        more = {q for q in range(Q) if any(t in co for t in trans[q] if t >= 0)} - co
        if not more:
            break
        co |= more
    return co == set(range(Q)) or (Q == 1 and not final.any())


# ---------------------------------------------------------------------- membership
@settings(max_examples=300, **HYP)
@given(words=st.one_of(words_st, affixed_words()), seed=st.integers(0, 2**16))
def test_accepts_exactly_the_words(words, seed):
    dfa = words_dfa(words)
    members = set(words)
    for s in probes(words, LETTERS + "xZ", random.Random(seed)):
        assert dfa.accepts(s) == (s in members), (words, s)
    assert is_minimal(dfa.trans, dfa.final)
    # order and duplicates do not matter: the same minimal table
    again = words_dfa(sorted(words, reverse=True) + words[:3])
    assert canonical(again) == canonical(dfa)


@settings(max_examples=300, **HYP)
@given(words=st.one_of(st.lists(st.text(alphabet=CASED + "x", max_size=5), max_size=20), affixed_words(CASED)), seed=st.integers(0, 2**16))
def test_ignore_case_folds_ascii_letters_only(words, seed):
    dfa = words_dfa(words, ignore_case=True)
    folded = {ascii_lower(w) for w in words}
    alternation = "|".join(map(re.escape, words))
    for s in probes(words, CASED + "x", random.Random(seed)):
        expected = ascii_lower(s) in folded
        assert dfa.accepts(s) == expected, (words, s)
        if words:  # the same as re with ASCII case folding
            assert expected == (re.fullmatch(alternation, s, re.ASCII | re.IGNORECASE) is not None)
    assert is_minimal(dfa.trans, dfa.final)


def test_examples():
    dfa = words_dfa(["walking", "talking", "walked", "talked"])
    assert all(dfa.accepts(w) for w in ["walking", "talking", "walked", "talked"])
    assert not any(dfa.accepts(w) for w in ["walk", "stalking", "Walking", "talkinged", ""])
    # a trie would need 19 states; the minimal DFA shares the stems' tails and the suffixes
    assert dfa.num_states == 9
    cased = words_dfa(["Straße", "ÉCOLE", "naïve", "HTTP"], ignore_case=True)
    assert cased.accepts("STRAßE") and cased.accepts("straße") and cased.accepts("http") and cased.accepts("NAÏVE".replace("Ï", "ï"))
    assert not cased.accepts("STRASSE") and not cased.accepts("école") and not cased.accepts("NAÏVE")
    assert cased.accepts("École") and cased.accepts("ÉcOlE")


def test_edge_cases():
    empty = words_dfa([])
    assert not empty.accepts("") and not empty.accepts("a") and not empty.final.any()
    only_empty = words_dfa([""])
    assert only_empty.accepts("") and not only_empty.accepts("a")
    both = words_dfa(["", "a", "a"])
    assert both.accepts("") and both.accepts("a") and not both.accepts("aa")
    assert words_dfa(["a\nb", "\t"]).accepts("a\nb") and not words_dfa(["a\nb"]).accepts("ab")
    emoji = words_dfa(["😀", "😀😀"])
    assert emoji.accepts("😀😀") and not emoji.accepts("😁") and emoji.num_states == 3


def test_state_cap():
    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefgh") for _ in range(8)) for _ in range(200)]  # little sharing
    with pytest.raises(CompileError, match="state cap of 50"):
        words_dfa(words, limits=Limits(max_states=50))
    assert words_dfa(words, limits=Limits(max_states=100_000)).num_states > 50


def test_large_list_is_fast_and_exact():
    rng = random.Random(7)
    words = list({"".join(rng.choice("abcdefghijklmnopqrstuvwxyzéü") for _ in range(rng.randint(1, 10))) for _ in range(30_000)})
    t0 = time.process_time()  # CPU time: other jobs on the machine do not count
    with pytest.raises(CompileError, match="state cap of 10,000"):  # random words share few suffixes
        words_dfa(words)
    dfa = words_dfa(words, limits=Limits(max_states=200_000))
    assert time.process_time() - t0 < 15
    assert 10_000 < dfa.num_states < 1 + sum(map(len, words))
    members = set(words)
    for w in words[:2000]:
        assert dfa.accepts(w)
        assert dfa.accepts(w + "q") == (w + "q" in members)
        assert dfa.accepts(w[:-1]) == (w[:-1] in members)


# ---------------------------------------------------------------------- same table as the alternation
@settings(max_examples=200, **HYP)
@given(words=st.one_of(st.lists(st.text(alphabet=LETTERS + ".*|()[]\\#~&", max_size=5), min_size=1, max_size=8), affixed_words()), ignore_case=st.booleans())
def test_same_minimal_table_as_the_escaped_alternation(words, ignore_case):
    trie = words_dfa(words, ignore_case=ignore_case)
    alternation = pattern_dfa("|".join(map(re.escape, words)), flags="i" if ignore_case else "")
    assert canonical(trie) == canonical(alternation), words
    vocab = default_vocab([trie, alternation])
    a, b = to_automaton(trie, vocab), to_automaton(alternation, vocab)
    assert torch.equal(a.delta, b.delta) and torch.equal(a.final, b.final)


def test_same_table_examples():
    for words in [["walking", "talking", "walked", "talked"], ["a", "ab", "abc", "b"], ["café", "cafe", "中文", "😀x", "a b", "x-y", "1.5"]]:
        trie, alt = words_dfa(words), pattern_dfa("|".join(map(re.escape, words)))
        assert (trie.trans == alt.trans).all() and (trie.final == alt.final).all(), words
        assert trie.num_states == alt.num_states


def test_word_lists_as_token_automata():
    words = ["the", "then", "there", "cat", "café"]
    auto = to_automaton(words_dfa(words))
    for s in ["the", "then", "there", "cat", "café", "thee", "ca", "cafe", "", "thé"]:
        assert auto.accepts(s) == (s in words), s
    sampled = {auto.vocab.spell(ids) for ids in auto.sample(200, seed=1)}
    assert sampled == set(words)  # every word is reachable, nothing else is
    # over a word vocabulary whose tokens cut the words differently
    vocab = Vocab.words(["th", "e", "n", "re", "the", "c", "at", "af", "é", "ca"])
    wauto = to_automaton(words_dfa(words), vocab)
    ids = lambda *ws: [vocab.id(w) for w in ws]  # noqa: E731
    assert wauto.accepts(ids("th", "e")) and wauto.accepts(ids("the", "re")) and wauto.accepts(ids("c", "af", "é"))
    assert not wauto.accepts(ids("th", "e", "e")) and not wauto.accepts(ids("ca"))


# ---------------------------------------------------------------------- alternations of literals
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from neurosym.compile.regex import literal_alternatives, pattern_dfa  # noqa: E402


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.text(alphabet="ab.|\\*é ", max_size=4), min_size=2, max_size=6), st.text(alphabet="ab.|\\*é ", max_size=5), st.booleans())
def test_an_alternation_of_literals_takes_the_word_route_with_re_semantics(words, probe, ignore_case):
    import re

    pattern = "|".join(re.escape(w) for w in words)
    assert literal_alternatives(pattern) is not None
    for wrapped in (f"(?:{pattern})", f"({pattern})"):  # one group around the whole alternation: still a word list
        assert literal_alternatives(wrapped) == literal_alternatives(pattern)
        dfa = pattern_dfa(wrapped, flags="i" if ignore_case else "")
        assert dfa.accepts(probe) == (re.fullmatch(wrapped, probe, re.ASCII | (re.IGNORECASE if ignore_case else 0)) is not None)
    dfa = pattern_dfa(pattern, flags="i" if ignore_case else "")
    expected = re.fullmatch(pattern, probe, re.ASCII | (re.IGNORECASE if ignore_case else 0)) is not None
    assert dfa.accepts(probe) == expected


def test_patterns_with_operators_are_not_word_lists():
    for pattern in [r"a|b*", r"\d|a", r"(a)|b", r"a|[b]", r"a.|b", r"^a|b", r"(a)|(b)", r"(?:a)|(b)", r"(?:a|b)*", r"(a\)", "()", "(?:)"]:
        assert literal_alternatives(pattern) is None
    assert literal_alternatives(r"a\|b|c\\|d") == ["a|b", "c\\", "d"]
    assert literal_alternatives(r"((a|b))") == ["a", "b"]  # nested groups around the whole: still a word list


def test_the_state_cap_names_the_word_list_and_the_option(tmp_path):
    """A word list over the state cap (issue 32): the message names the file (or the
    %words line of a bank) and how to raise the cap."""
    import random
    import string

    import pytest

    import neurosym
    from neurosym.errors import CompileError

    r = random.Random(0)
    words = sorted({"".join(r.choice(string.ascii_lowercase) for _ in range(r.randint(3, 12))) for _ in range(400)})
    (tmp_path / "w.txt").write_text("\n".join(words) + "\n")
    with pytest.raises(CompileError, match=r"w\.txt: its 400 words compile to a minimal DFA of more than 100 states, over the state cap of 100; raise the cap \(--max-states N"):
        neurosym.load(tmp_path / "w.txt", max_states=100)
    (tmp_path / "b.regex").write_text('W: %words "w.txt"\n')
    with pytest.raises(CompileError, match=r"b\.regex:1:11: %words .*w\.txt: its 400 words"):
        neurosym.load(tmp_path / "b.regex", max_states=100)
    assert neurosym.load(tmp_path / "w.txt", max_states=100_000).accepts(words[0])
