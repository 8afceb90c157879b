"""Token-level automata: byte-level BPE (WikiText-2), word and character vocabularies,
the Automaton methods, liveness and minimality, and the state cap."""

import random
import re
import time

import networkx as nx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

import neurosym
from neurosym.data import shared_data_dir
from neurosym.errors import CompileError
from neurosym.vocab import Vocab

BPE_PATTERNS = [r"[A-Z][a-z]+( [a-z]+)*", r".*the.*", r"(19|20)\d{2}", r"[^ ]*é[^ ]*", r"( ?[\w,.])+", r"caf(é|e) (crème|noir)"]


@pytest.fixture(scope="module")
def wikitext_lines():
    root = shared_data_dir()
    if root is None or not (root / "wikitext-2" / "valid.txt").is_file():
        pytest.skip("needs ../shared/data/wikitext-2/valid.txt (the shared data folder is absent)")
    return [l.strip() for l in (root / "wikitext-2" / "valid.txt").read_text(encoding="utf-8").splitlines() if l.strip()][:3000]


@pytest.fixture(scope="module")
def bpe(wikitext_lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|endoftext|>"], show_progress=False
    )
    tok.train_from_iterator(wikitext_lines + ["café crème, résumé naïve"] * 3, trainer)
    return tok


@pytest.fixture(scope="module")
def bpe_autos(bpe):
    vocab = Vocab.from_tokenizer(bpe)
    return vocab, {p: neurosym.compile_regex(p, vocab=vocab) for p in BPE_PATTERNS}


def test_bpe_token_sequences_accepted_iff_text_fullmatches(bpe, bpe_autos, wikitext_lines):
    vocab, autos = bpe_autos
    rng = random.Random(0)
    texts = [l[: rng.randint(0, 60)] for l in wikitext_lines[:300]]
    texts += ["1999", "2024", "Café crème", "café noir", "cafe crème", "The cat", "résumé", "naïve é", "é", ""]
    for p, auto in autos.items():
        for s in texts:
            ids = bpe.encode(s).ids
            assert auto.accepts(ids) == bool(re.fullmatch(p, s, re.ASCII)), (p, s)


@settings(max_examples=150, deadline=None)
@given(s=st.text(alphabet="aeTh é19 20crèmf,.中", max_size=14))
def test_bpe_hypothesis_strings(bpe, bpe_autos, s):
    vocab, autos = bpe_autos
    ids = bpe.encode(s).ids
    assert vocab.spell(ids) == s.encode()
    for p, auto in autos.items():
        assert auto.accepts(ids) == bool(re.fullmatch(p, s, re.ASCII)), (p, s)


def test_tokens_that_split_a_character(bpe_autos):
    vocab, autos = bpe_autos
    byte_id = {s: i for i, s in enumerate(vocab.surfaces) if isinstance(s, bytes) and len(s) == 1}
    e_acute = [byte_id[b"\xc3"], byte_id[b"\xa9"]]  # 'é' as two single-byte tokens
    auto = autos[r"[^ ]*é[^ ]*"]
    assert auto.accepts([byte_id[b"x"], *e_acute]) and not auto.accepts([byte_id[b"x"], e_acute[0]])
    # after the lead byte only continuation bytes that complete a character are allowed
    state = auto.run(torch.tensor([[byte_id[b"x"], e_acute[0]]]))[0, -1]
    allowed = auto.mask(state.unsqueeze(0))[0]
    for i, s in enumerate(vocab.surfaces):
        if s is None:
            assert not allowed[i]
            continue
        q = auto.step(state.unsqueeze(0), torch.tensor([i]))
        completable = bool((q >= 0).all())
        assert bool(allowed[i]) == completable
        if len(s) == 1:
            assert bool(allowed[i]) == (0x80 <= s[0] < 0xC0)


def test_word_vocabulary():
    vocab = Vocab.words(["the", " ", "cat", "cats", "dog", "s"])
    auto = neurosym.compile_regex(r"the (cat|dog)s?", vocab=vocab)
    ids = lambda *ws: [vocab.id(w) for w in ws]  # noqa: E731
    assert auto.accepts(ids("the", " ", "cat")) and auto.accepts(ids("the", " ", "cats"))
    assert auto.accepts(ids("the", " ", "cat", "s")) and auto.accepts(ids("the", " ", "dog", "s"))
    assert not auto.accepts(ids("the", "cat")) and not auto.accepts([vocab.unk])
    for seq in auto.sample(30, seed=2):
        assert re.fullmatch(r"the (cat|dog)s?", vocab.spell(seq))


def test_char_vocabulary_unk_means_any_other_character():
    vocab = Vocab.chars_from_corpus("abc\n")
    a_then_any = neurosym.compile_regex(r"a.", vocab=vocab)
    assert a_then_any.accepts([vocab.id("a"), vocab.unk])  # every character outside {a, b, c, \n} is fine after 'a'
    without_newline = Vocab.chars_from_corpus("abc")  # now <unk> might be '\n', which '.' does not match
    assert not neurosym.compile_regex(r"a.", vocab=without_newline).accepts([vocab.id("a"), vocab.unk])
    only_x = neurosym.compile_regex(r"ax", vocab=vocab)  # 'x' is not in the vocabulary: <unk> might or might not be 'x'
    assert not only_x.accepts([vocab.id("a"), vocab.unk])
    not_x = neurosym.compile_regex(r"a[^x]", vocab=vocab)
    assert not not_x.accepts([vocab.id("a"), vocab.unk])
    assert not_x.accepts(vocab.encode("ab"))


def test_automaton_methods_are_consistent():
    auto = neurosym.compile_regex(r"(ab|c)+d?")
    Q, V = auto.delta.shape
    states = torch.tensor([0, 1, -1])
    m = auto.mask(states)
    assert m.shape == (3, V) and torch.equal(m[0], auto.delta[0] >= 0) and not m[2].any()
    lt = auto.log_transitions()
    assert lt.shape == (Q, Q, V)
    arcs = (lt == 0).nonzero().tolist()
    assert sorted((s, t, v) for s, t, v in arcs) == sorted(
        (s, int(auto.delta[s, v]), v) for s in range(Q) for v in range(V) if auto.delta[s, v] >= 0
    )
    assert torch.isinf(lt).sum() == Q * Q * V - len(arcs)
    ids = torch.tensor([auto.ids("abcd"), auto.ids("abda")])
    run = auto.run(ids)
    assert bool(auto.final[run[0, -1]]) and run[1, -1] == -1
    g = auto.to_networkx()
    assert g.number_of_nodes() == Q
    assert sum(len(d["tokens"]) for _, _, d in g.edges(data=True)) == int((auto.delta >= 0).sum())
    finals = [q for q, d in g.nodes(data=True) if d["final"]]
    for q in g.nodes:  # trim: every state reachable from the start and co-reachable to a final state
        assert nx.has_path(g, 0, q) and any(nx.has_path(g, q, f) for f in finals)


def test_state_cap_stops_quickly_and_can_be_raised():
    t0 = time.perf_counter()
    with pytest.raises(CompileError, match="state cap of 10,000"):
        neurosym.compile_regex("(a|b)*a(a|b){30}")
    assert time.perf_counter() - t0 < 10
    auto = neurosym.compile_regex("(a|b)*a(a|b){8}", max_states=600)
    assert auto.num_states == 2**9
    with pytest.raises(CompileError, match="state cap of 100"):
        neurosym.compile_regex("(a|b)*a(a|b){8}", max_states=100)
    with pytest.raises(CompileError, match="NFA states"):
        neurosym.compile_regex("(ab){60000}")


def test_time_cap():
    with pytest.raises(CompileError, match="time limit"):
        neurosym.compile_regex("(a|b|c|d)*a(a|b|c|d){12}", max_states=10**7, time_limit=0.2)
