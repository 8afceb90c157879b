"""The per-token step's NumPy fast path (`TokenStepper`, `Automaton.step_numpy`,
`Automaton.next_state`) against the tensor path (`Automaton.step_torch`) and the kept
arcs: states identical over random walks, batched and unbatched, with rejected states,
special tokens and ids outside the vocabulary; masks read along the walks identical
between the packed-row fast path and the tensor path."""

from __future__ import annotations

import copy
import pickle
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

import neurosym
from neurosym.compile import automaton as automaton_module
from neurosym.compile.automaton import Automaton, unpack_bits
from neurosym.vocab import Vocab

pytestmark = pytest.mark.usefixtures("one_thread")
HYP = dict(deadline=None, derandomize=True, database=None, max_examples=40)

WORDS = ["the", "cat", "café", "naïve", "crème", "中文", "文字", "😀", "😀😀", "été", "1999", "2024", "x", "Über", "Zoë", "—", "–", "°C"]
BYTE_PATTERNS = [r"[A-Z][a-z]+( [a-z]+)*", r"(19|20)\d{2}", r".*é.*", r"(?s).*", r"[^\x00-\x7f]+", r"([a-zé]|😀)+( [0-9]+)?", r"the|cat|café|中文"]
CHAR_PATTERNS = [r"(a|b)*-1", r"a(bc)?", r"[^a]*x", r""]
WORD_PATTERNS = [r"the (cat|dog)( the (cat|dog))*", r".*"]


def corpus() -> list[str]:
    rng = random.Random(0)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))) for _ in range(3000)]


@pytest.fixture(scope="module")
def bpe_vocab() -> Vocab:
    """A small byte-level BPE trained here (tokens split multi-byte characters)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|endoftext|>"], show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    return Vocab.from_tokenizer(tok)


def automata(vocab: Vocab, patterns: list[str]) -> list[Automaton]:
    """Each pattern compiled (walker automaton), and the same as kept arcs, as a dense
    table, and with its masks stored sparsely wherever that is smaller."""
    out = []
    for p in patterns:
        auto = neurosym.compile_regex(p, vocab=vocab)
        assert auto.stepper is not None, p
        # the dense copy is built from the arcs, not through ``auto.delta``: the walker
        # automaton keeps no dense table, so it steps through its TokenStepper
        out += [auto, Automaton.from_arcs(auto.arcs, vocab), Automaton(torch.from_numpy(auto.arcs.dense()), auto.final, vocab)]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(automaton_module, "DENSE_MASK_BYTES", 0)
            out.append(Automaton.from_index(auto.arcs, auto.walker, vocab))
    return out


@pytest.fixture(scope="module")
def cases(bpe_vocab) -> list[Automaton]:
    char_vocab = Vocab.chars(list("ab-1cx"))
    word_vocab = Vocab.words(["the", "cat", "dog", "a"])
    return automata(bpe_vocab, BYTE_PATTERNS) + automata(char_vocab, CHAR_PATTERNS) + automata(word_vocab, WORD_PATTERNS)


def probe_tokens(auto: Automaton, rng: np.random.Generator, n: int) -> np.ndarray:
    """Random token ids, ids outside the vocabulary and special tokens among them."""
    V = len(auto.vocab)
    special = [i for i, s in enumerate(auto.vocab.surfaces) if s is None]
    pool = np.concatenate([rng.integers(0, V, n), [-1, V, V + 5, *special]])
    return rng.permutation(pool)


def test_batched_step_equals_the_tensor_path_and_the_arcs(cases):
    rng = np.random.default_rng(0)
    for auto in cases:
        Q, V = auto.num_states, len(auto.vocab)
        states = np.concatenate([np.arange(Q), [-1]])
        tokens = probe_tokens(auto, rng, 200)
        grid_s, grid_t = np.broadcast_arrays(states[:, None], tokens[None, :])
        fast = auto.step_numpy(grid_s, grid_t)
        slow = auto.step_torch(torch.from_numpy(grid_s.copy()), torch.from_numpy(grid_t.copy())).numpy()
        np.testing.assert_array_equal(fast, slow)
        dense = auto.arcs.dense()  # the arcs, as a (Q, V) table
        inside = (grid_s >= 0) & (grid_t >= 0) & (grid_t < V)
        want = np.where(inside, dense[np.maximum(grid_s, 0), np.clip(grid_t, 0, V - 1)], -1)
        np.testing.assert_array_equal(fast, want)
        # the torch API on CPU is the fast path, with broadcasting kept
        stepped = auto.step(torch.from_numpy(states)[:, None], torch.from_numpy(tokens)[None, :])
        assert stepped.dtype == torch.long and stepped.shape == (len(states), len(tokens))
        np.testing.assert_array_equal(stepped.numpy(), want)
        # one pair at a time, through every entry point
        for q, t, expect in zip(grid_s.reshape(-1)[::7].tolist(), grid_t.reshape(-1)[::7].tolist(), want.reshape(-1)[::7].tolist()):
            assert auto.next_state(q, t) == expect
            assert int(auto.step(torch.tensor(q), torch.tensor(t))) == expect
            assert int(auto.step_numpy(np.int64(q), np.int64(t))) == expect


def walk(auto: Automaton, rng: np.random.Generator, length: int) -> list[tuple[int, int]]:
    """A random walk: mostly allowed tokens (read from the mask), sometimes any token."""
    out, q = [], auto.start
    for _ in range(length):
        allowed = np.nonzero(auto.mask(torch.tensor([q]))[0].numpy())[0]
        t = int(rng.choice(allowed)) if len(allowed) and rng.random() < 0.9 else int(rng.integers(-1, len(auto.vocab) + 1))
        out.append((q, t))
        q = auto.next_state(q, t)
        if q < 0:
            break
    return out


def test_random_walks_agree_unbatched_and_batched(cases):
    rng = np.random.default_rng(1)
    for auto in cases:
        walks = [walk(auto, rng, 12) for _ in range(16)]
        buf = np.zeros(auto.words, dtype=np.int32)
        for w in walks:  # unbatched: every step through each path, and the mask of each state
            for q, t in w:
                fast = auto.next_state(q, t)
                assert fast == int(auto.step_torch(torch.tensor([q]), torch.tensor([t]))[0]) == int(auto.step(torch.tensor([q]), torch.tensor([t]))[0])
                auto.write_mask(q, buf)
                np.testing.assert_array_equal(buf, auto.mask_words(torch.tensor(q)).numpy())
        # batched: the walks side by side, padded with rejected rows and unknown tokens
        L = max(len(w) for w in walks)
        tokens = np.array([[w[i][1] if i < len(w) else -1 for i in range(L)] for w in walks])
        fast = auto.run(torch.from_numpy(tokens)).numpy()
        states = torch.full((len(walks),), auto.start, dtype=torch.long)
        for i in range(L):
            states = auto.step_torch(states, torch.from_numpy(tokens[:, i]))
            np.testing.assert_array_equal(fast[:, i], states.numpy())
            words = auto.mask_words(torch.from_numpy(fast[:, i]))
            for row, q in enumerate(fast[:, i].tolist()):
                if q >= 0:
                    auto.write_mask(q, buf)
                    np.testing.assert_array_equal(buf, words[row].numpy())


@settings(**HYP)
@given(text=st.text(alphabet="aé中😀 x19", max_size=12), cut=st.integers(0, 40))
def test_tokens_that_split_characters_step_the_same_way(bpe_vocab, text, cut):
    """A string's bytes cut into random tokens (splitting characters anywhere): the fast
    path, the tensor path and acceptance of the whole text agree."""
    auto = neurosym.compile_regex(r"([a-zé]|😀)+( [0-9]+)?", vocab=bpe_vocab)
    ids = {s: i for i, s in enumerate(bpe_vocab.surfaces) if isinstance(s, bytes)}
    data = text.encode()
    rng = random.Random(cut)
    seq, i = [], 0
    while i < len(data):
        n = rng.choice([k for k in range(1, min(6, len(data) - i) + 1) if data[i : i + k] in ids])
        seq.append(ids[data[i : i + n]])
        i += n
    q_fast = q_torch = auto.start
    for t in seq:
        q_fast, q_torch = auto.next_state(q_fast, t), int(auto.step_torch(torch.tensor(q_torch), torch.tensor(t)))
        assert q_fast == q_torch
    ok = q_fast >= 0 and bool(auto.final[q_fast])
    assert ok == auto.accepts(seq) == auto.char_dfa.accepts(text)


def test_stepper_tables_are_counted_in_the_index_bytes(bpe_vocab):
    auto = neurosym.compile_regex(r"(19|20)\d{2}", vocab=bpe_vocab)
    assert auto.index_bytes() >= auto.walker.nbytes() + auto.stepper.nbytes() > auto.walker.nbytes()


def test_numpy_masks_equal_the_tensor_masks(cases):
    """`mask_words` / `mask` on CPU go through NumPy; the tensor path (kept for
    accelerators) is the packed rows read with torch and `unpack_bits`."""
    assert any(auto.mask_dense is None for auto in cases) and any(auto.mask_dense is not None for auto in cases)
    for auto in cases:
        flat = np.concatenate([np.arange(auto.num_states), [-1, 0, -1], [-1] * ((auto.num_states + 3) % 2)]).astype(np.int64)
        states = flat.reshape(-1, 2)  # (n, 2): shapes are kept
        words = auto.mask_words_numpy(states)
        assert words.shape == (*states.shape, auto.words) and words.dtype == np.int32
        for (i, j), q in np.ndenumerate(states):
            ref = np.zeros(auto.words, dtype=np.int32)
            if q >= 0:
                auto.write_mask(int(q), ref)
            np.testing.assert_array_equal(words[i, j], ref)
            arcs = auto.arcs
            allowed = np.zeros(len(auto.vocab), dtype=bool)
            if q >= 0:
                allowed[arcs.tokens[arcs.indptr[q]: arcs.indptr[q + 1]]] = True
            np.testing.assert_array_equal(auto.mask_numpy(states)[i, j], allowed)
        np.testing.assert_array_equal(auto.mask(torch.from_numpy(states)).numpy(), unpack_bits(torch.from_numpy(words), len(auto.vocab)).numpy())
        np.testing.assert_array_equal(auto.mask_words(torch.from_numpy(states)).numpy(), words)


def test_a_compiled_automaton_pickles_and_copies(bpe_vocab):
    """The stepper's memoryviews are rebuilt after pickling and deep copies."""
    auto = neurosym.compile_regex(r"([a-zé]|😀)+( [0-9]+)?", vocab=bpe_vocab)
    states = np.arange(auto.num_states)[:, None]
    tokens = np.arange(len(bpe_vocab))[None, :]
    for again in (pickle.loads(pickle.dumps(auto)), copy.deepcopy(auto)):
        np.testing.assert_array_equal(again.step_numpy(states, tokens), auto.step_numpy(states, tokens))
        assert [again.next_state(q, t) for q in range(auto.num_states) for t in range(0, len(bpe_vocab), 7)] == [
            auto.next_state(q, t) for q in range(auto.num_states) for t in range(0, len(bpe_vocab), 7)
        ]
