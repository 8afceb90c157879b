"""The token index (compile/token_index.py): the vocabulary trie, the sparse walk, the
token-level trim and minimisation, and the packed masks, each against a dense or
brute-force reference. (tests/compile/test_token_level.py checks the resulting
automata against Python's ``re`` over real vocabularies.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import neurosym.compile.token_index as ti
from neurosym.compile.automaton import Automaton, unpack_bits
from neurosym.compile.dfa import minimize_table
from neurosym.compile.regex import compile_regex, pattern_dfa
from neurosym.compile.token_index import TokenArcs, build_trie, group_rows, token_arcs
from neurosym.vocab import Vocab

HYP = dict(deadline=None, derandomize=True, database=None)


def descend(trie: ti.VocabTrie, symbols: list[int]) -> int:
    """The trie node spelling ``symbols``, found child by child (-1 if absent)."""
    node = 0
    for s in symbols:
        kids = range(trie.child_start[node], trie.child_start[node + 1])
        hits = [k for k in kids if trie.symbol[k] == s]
        if len(hits) != 1:
            return -1
        node = hits[0]
    return node


@settings(max_examples=150, **HYP)
@given(st.lists(st.one_of(st.none(), st.text(alphabet="abé中\x00", max_size=5)), max_size=30))
def test_trie_spells_every_surface(surfaces):
    trie = build_trie(surfaces, as_bytes=False)
    ends = {}
    for node in range(trie.num_nodes):
        for t in trie.end_token[trie.end_start[node]: trie.end_start[node + 1]]:
            ends[int(t)] = node
    for v, s in enumerate(surfaces):
        if s is None:
            assert v not in ends and trie.special[v]
        else:
            assert ends[v] == descend(trie, [ord(c) for c in s])
    # children are contiguous and level-ordered: every node but the root has one parent range
    assert trie.child_start[-1] == trie.num_nodes and (np.diff(trie.child_start) >= 0).all()
    assert trie.level_start[-1] == trie.num_nodes


def test_byte_trie_uses_bytes():
    trie = build_trie([b"\xe4\xb8", b"\xe4\xb8\xad", b"a", None], as_bytes=True)
    assert descend(trie, [0xE4, 0xB8, 0xAD]) >= 0 and descend(trie, [ord("a")]) >= 0
    assert trie.end_token.tolist().count(3) == 0


def random_table(draw_seed: int, Q: int, V: int, p_arc: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(draw_seed)
    delta = np.where(rng.random((Q, V)) < p_arc, rng.integers(0, Q, (Q, V)), -1)
    final = rng.random(Q) < 0.4
    return delta, final


@settings(max_examples=300, **HYP)
@given(seed=st.integers(0, 2**32 - 1), Q=st.integers(1, 9), V=st.integers(1, 6), p_arc=st.floats(0.1, 0.9))
def test_trim_and_minimise_match_the_dense_reference(seed, Q, V, p_arc):
    delta, final = random_table(seed, Q, V, p_arc)
    ref_delta, ref_final = minimize_table(delta, final)
    arcs = TokenArcs.from_dense(delta, final).trimmed().minimized()
    # both number states breadth-first from the start, tokens in order: identical tables
    np.testing.assert_array_equal(arcs.dense(), ref_delta)
    np.testing.assert_array_equal(arcs.final, ref_final)


@settings(max_examples=200, **HYP)
@given(seed=st.integers(0, 2**32 - 1), Q=st.integers(1, 12), V=st.integers(1, 70), p_arc=st.floats(0.0, 1.0))
def test_packed_masks_unpack_to_the_dense_mask(seed, Q, V, p_arc):
    delta, final = random_table(seed, Q, V, p_arc)
    arcs = TokenArcs.from_dense(delta, final)
    bits, row = arcs.packed_masks()
    assert bits.shape[1] == (V + 31) // 32 and len(np.unique(bits, axis=0)) == len(bits)  # deduplicated
    dense = unpack_bits(torch.from_numpy(bits[row]), V).numpy()
    np.testing.assert_array_equal(dense, delta >= 0)


def test_group_rows_is_exact_when_every_hash_collides(monkeypatch):
    rng = np.random.default_rng(0)
    Q = 40
    counts = rng.integers(0, 4, Q)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    cols = [rng.integers(0, 3, indptr[-1]), rng.integers(0, 2, indptr[-1])]
    labels = rng.integers(0, 2, Q)
    honest = group_rows(indptr, cols, labels)
    monkeypatch.setattr(ti, "_mix", lambda x: np.zeros_like(x, dtype=np.uint64))
    forced = group_rows(indptr, cols, labels)
    np.testing.assert_array_equal(honest, forced)
    rows = [(int(labels[q]), tuple(zip(cols[0][indptr[q]: indptr[q + 1]].tolist(), cols[1][indptr[q]: indptr[q + 1]].tolist()))) for q in range(Q)]
    for a in range(Q):
        for b in range(Q):
            assert (honest[a] == honest[b]) == (rows[a] == rows[b])


def word_vocab(words: list[str]) -> Vocab:
    return Vocab(["<pad>", "<eos>", *words], [None, None, *words], "word")


def test_complete_match_forbids_tokens_that_leave_it_incomplete():
    """``a(bc)?`` over {a, b, c, bc}: after ``a`` (already a complete match) both ``bc``
    and ``b`` keep the text completable (``b`` then ``c``), so both are allowed, and the
    end is allowed; ``c`` is not. (outlines-core allows only ``bc`` or the end here.)"""
    vocab = word_vocab(["a", "b", "c", "bc"])
    auto = compile_regex(r"a(bc)?", vocab=vocab)
    after_a = auto.step(torch.tensor(auto.start), torch.tensor(vocab.id("a")))
    allowed = {vocab.tokens[i] for i in auto.mask(after_a).nonzero().flatten().tolist()}
    assert allowed == {"b", "bc"} and bool(auto.final[after_a])
    after_ab = auto.step(after_a, torch.tensor(vocab.id("b")))
    assert {vocab.tokens[i] for i in auto.mask(after_ab).nonzero().flatten().tolist()} == {"c"}
    assert not bool(auto.final[after_ab])


def test_step_rejects_unknown_tokens_and_keeps_dead_rows_dead():
    vocab = word_vocab(["x", "y"])
    auto = compile_regex(r"x+", vocab=vocab)
    states = torch.tensor([0, 0, 0, -1, 0])
    tokens = torch.tensor([vocab.id("x"), vocab.id("y"), 99, vocab.id("x"), -3])
    assert auto.step(states, tokens).tolist() == [1 if auto.num_states > 1 else 0, -1, -1, -1, -1]


def test_dense_and_sparse_constructions_agree():
    vocab = Vocab.chars(list("ab-1"))
    auto = compile_regex(r"(a|b)*-1", vocab=vocab)
    again = Automaton(auto.delta, auto.final, vocab)
    states = torch.arange(auto.num_states)
    torch.testing.assert_close(again.mask_words(states), auto.mask_words(states))
    tokens = torch.arange(-1, len(vocab) + 1)
    grid_s, grid_t = torch.cartesian_prod(torch.arange(-1, auto.num_states), tokens).unbind(1)
    assert torch.equal(again.step(grid_s, grid_t), auto.step(grid_s, grid_t))  # arcs vs walker, bad ids included
    assert auto.walker is not None and again.walker is None
    np.testing.assert_array_equal(auto.arcs.dense(), again.arcs.dense())


@pytest.mark.parametrize("pattern", [r"é+ü", r"[^a]*", r"(19|20)[0-9]{2}", r"x{5}"])
def test_byte_vocabulary_walk_equals_walking_every_token_through_the_byte_table(pattern):
    """Reference: every token's bytes walked one by one through the minimal byte table."""
    surfaces = [None] + [bytes([b]) for b in range(256)] + ["é".encode(), "ü".encode()[:1], b"19", b"20", b"xx", b"\xc3"]
    vocab = Vocab([f"t{i}" for i in range(len(surfaces))], surfaces, "bytes")  # duplicate surfaces on purpose
    dfa = pattern_dfa(pattern)
    trans, final = dfa.byte_dfa()
    ref = np.full((trans.shape[0], len(vocab)), -1)
    for q in range(trans.shape[0]):
        for v, s in enumerate(surfaces):
            if s is None:
                continue
            state = q
            for b in s:
                state = trans[state, b] if state >= 0 else -1
            ref[q, v] = state
    ref_delta, ref_final = minimize_table(ref, final)
    arcs = token_arcs(dfa, vocab)
    np.testing.assert_array_equal(arcs.dense(), ref_delta)
    np.testing.assert_array_equal(arcs.final, ref_final)


@pytest.mark.parametrize("pattern", [r"(a|b)*-1", r"a(bc)?", r"x+", r""])
def test_next_state_agrees_with_step(pattern):
    vocab = Vocab.chars(list("ab-1cx"))
    for auto in (compile_regex(pattern, vocab=vocab), Automaton(compile_regex(pattern, vocab=vocab).delta, compile_regex(pattern, vocab=vocab).final, vocab)):
        for q in range(-1, auto.num_states):
            for t in range(-1, len(vocab) + 1):
                assert auto.next_state(q, t) == int(auto.step(torch.tensor(q), torch.tensor(t))), (q, t)


@pytest.mark.parametrize("budget", [0, 1 << 20])
def test_dense_and_sparse_mask_storage_agree(budget, monkeypatch):
    """Rows with many allowed tokens are stored densely, sparse ones sparsely unless the
    dense table fits the budget; both write the same packed words."""
    from neurosym.compile import automaton as automaton_module

    monkeypatch.setattr(automaton_module, "DENSE_MASK_BYTES", budget)
    vocab = Vocab.chars([chr(c) for c in range(32, 1200)])  # 37 words a row
    for pattern, dense in [(r"[ -ӯ]*x", True), (r"ab|cd", budget > 0)]:
        auto = compile_regex(pattern, vocab=vocab)
        assert (auto.mask_dense is not None) == dense
        states = torch.arange(-1, auto.num_states)
        words = auto.mask_words(states)
        expected = (auto.delta[states.clamp(min=0)] >= 0) & (states >= 0)[:, None]
        assert torch.equal(unpack_bits(words, len(vocab)), expected)
        out = np.zeros(auto.words, dtype=np.int32)
        for q in range(auto.num_states):
            auto.write_mask(q, out)
            assert np.array_equal(out, words[q + 1].numpy())
