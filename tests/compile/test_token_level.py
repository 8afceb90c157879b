"""Token-level automata: a byte-level BPE trained on WikiText-2, word and character
vocabularies, the `Automaton` methods, liveness and minimality, and the caps.

Reference semantics throughout: a token sequence is accepted exactly when the text it
spells satisfies ``re.fullmatch(p, text, re.ASCII)``, however the text is tokenized.
"""

from __future__ import annotations

import codecs
import random
import re
import time
from functools import lru_cache
from pathlib import Path

import networkx as nx
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from regex_reference import fullmatch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

import neurosym
from neurosym.errors import CompileError
from neurosym.vocab import Vocab

WIKITEXT = Path(__file__).resolve().parents[2].parent / "shared/data/wikitext-2/valid.txt"
HYP = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
    database=None,
)

# ASCII and non-ASCII patterns; WikiText-2 has en/em dashes, degree and pound signs, accents
BPE_PATTERNS = [
    r"[A-Z][a-z]+( [a-z]+)*",
    r".*the.*",
    r"(?i).*THE .*",
    r"(19|20)\d{2}",
    r"( ?[\w,.])+",
    r"[ -~]*",
    r" = [^=]+ = ",
    r".*<unk>.*",
    r"[^ ]*é[^ ]*",
    r"caf(é|e) (crème|noir)",
    r"[^–]*",
    r".*[–—].*",
    r"[^–]* – [^–]*",
    r".*\d+ °[CF]?.*",
    r"£ ?\d+(,\d{3})*",
    r"x[é-ü]+",
    r"[^\x00-\x7f]+",
    r"(?s).*",
]


def reference(pattern: str, text: str) -> bool:
    """``re.fullmatch(pattern, text, re.ASCII)`` without backtracking (tests/regex_reference.py)."""
    return fullmatch(pattern, text, re.ASCII)


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def wikitext_lines() -> list[str]:
    if not WIKITEXT.is_file():
        pytest.skip(f"needs the WikiText-2 validation split at {WIKITEXT} (the shared data folder is absent)")
    with WIKITEXT.open(encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(3000), f)]


@pytest.fixture(scope="module")
def bpe(wikitext_lines) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte is a token
        special_tokens=["<|endoftext|>"],
        show_progress=False,
    )
    tok.train_from_iterator(wikitext_lines, trainer)
    return tok


@pytest.fixture(scope="module")
def bpe_vocab(bpe) -> Vocab:
    vocab = Vocab.from_tokenizer(bpe)
    assert vocab.kind == "bytes" and len(vocab) == bpe.get_vocab_size() == 2000
    return vocab


@pytest.fixture(scope="module")
def bpe_autos(bpe_vocab):
    return {p: neurosym.compile_regex(p, vocab=bpe_vocab) for p in BPE_PATTERNS}


@pytest.fixture(scope="module")
def byte_ids(bpe_vocab) -> dict[bytes, int]:
    """Token id of every surface (all 256 single bytes are tokens)."""
    ids = {s: i for i, s in enumerate(bpe_vocab.surfaces) if isinstance(s, bytes)}
    assert all(bytes([b]) in ids for b in range(256))
    return ids


def random_tokenization(data: bytes, surfaces: dict[bytes, int], rng: random.Random) -> list[int]:
    """A random segmentation of ``data`` into vocabulary tokens (not the tokenizer's own)."""
    out, i = [], 0
    while i < len(data):
        options = [n for n in range(1, min(8, len(data) - i) + 1) if data[i : i + n] in surfaces]
        n = rng.choice(options)
        out.append(surfaces[data[i : i + n]])
        i += n
    return out


# ---------------------------------------------------------------------- BPE vs re
def test_bpe_splits_characters_on_its_own(bpe, bpe_vocab):
    """The trained tokenizer itself produces tokens that end inside a UTF-8 character."""
    mid = [s for s in bpe_vocab.surfaces if isinstance(s, bytes) and _ends_mid_character(s)]
    assert mid, "expected tokens such as b' \\xe2\\x80' that end mid-character"
    ids = bpe.encode("café").ids
    assert bpe_vocab.spell(ids) == "café".encode()


def _ends_mid_character(data: bytes) -> bool:
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return decoder.getstate()[0] != b""


def test_bpe_wikitext_lines_accepted_iff_fullmatch(bpe, bpe_vocab, bpe_autos, wikitext_lines):
    rng = random.Random(0)
    lines = [line for line in wikitext_lines if line.strip()]
    texts = {line[: rng.randint(0, 80)] for line in lines[:400]}
    texts |= {line.strip()[: rng.randint(0, 30)] for line in lines[:400]}
    texts |= {line for line in lines if not line.isascii()}  # every non-ASCII line in full
    texts |= {" = Homarus gammarus = ", "1999", "2024", "café crème", "cafe noir", "café  noir", "xéü", "xé中", "£ 1,000", "£5", "é", "–", ""}
    texts |= {"8 °C", "12 °", "x ° y", " – ", "a – b – c"}
    for pattern, auto in bpe_autos.items():
        verdicts = []
        for s in sorted(texts):
            ids = bpe.encode(s).ids
            assert bpe_vocab.spell(ids) == s.encode("utf-8")
            expected = reference(pattern, s)
            assert auto.accepts(ids) == expected, (pattern, s)
            verdicts.append(expected)
        if pattern != "(?s).*":  # both outcomes must be exercised
            assert any(verdicts) and not all(verdicts), pattern
    assert bpe_autos[r"[^\x00-\x7f]+"].accepts(bpe.encode("–—°").ids)


@settings(max_examples=400, **HYP)
@given(s=st.text(alphabet="aeTh é19 20crèmfnoix,.–—°£ü中😀ß\n", max_size=16))
def test_bpe_hypothesis_strings(bpe, bpe_vocab, bpe_autos, s):
    ids = bpe.encode(s).ids
    assert bpe_vocab.spell(ids) == s.encode("utf-8")
    for pattern, auto in bpe_autos.items():
        assert auto.accepts(ids) == reference(pattern, s), (pattern, s)


@settings(max_examples=150, **HYP)
@given(s=st.text(alphabet="aeTh é19 20crèmfnoix,.–—°£ü中😀", max_size=12), seed=st.integers(0, 2**16))
def test_any_tokenization_of_the_same_text_is_treated_alike(bpe_vocab, bpe_autos, byte_ids, s, seed):
    """Acceptance depends on the spelled bytes only, not on how they were cut into tokens
    (random segmentations mostly split multi-byte characters across tokens)."""
    rng = random.Random(seed)
    data = s.encode("utf-8")
    cuts = [random_tokenization(data, byte_ids, rng) for _ in range(3)] + [[byte_ids[bytes([b])] for b in data]]
    for pattern, auto in bpe_autos.items():
        expected = reference(pattern, s)
        for ids in cuts:
            assert bpe_vocab.spell(ids) == data
            assert auto.accepts(ids) == expected, (pattern, s, [bpe_vocab.surfaces[i] for i in ids])


def test_single_byte_tokens_spelling_multibyte_characters(bpe_autos, byte_ids):
    b = lambda data: [byte_ids[bytes([x])] for x in data]  # noqa: E731 - one token per byte
    e_acute = b("é".encode())  # b'\xc3' b'\xa9'
    assert len(e_acute) == 2
    any_e = bpe_autos[r"[^ ]*é[^ ]*"]
    assert any_e.accepts(b(b"x") + e_acute) and any_e.accepts(e_acute + b(b"y"))
    assert not any_e.accepts(b(b"x") + e_acute[:1]), "stopping mid-character is not accepted"
    assert not any_e.accepts(b("è".encode())), "è shares the lead byte of é"
    assert not any_e.accepts(b("é é".encode()))
    cafe = bpe_autos[r"caf(é|e) (crème|noir)"]
    assert cafe.accepts(b("café crème".encode())) and cafe.accepts(b("cafe noir".encode()))
    assert not cafe.accepts(b("cafè crème".encode())) and not cafe.accepts(b("café crèm".encode()))
    dash = bpe_autos[r"[^–]* – [^–]*"]
    assert dash.accepts(b("a – b".encode())) and not dash.accepts(b("a — b".encode()))  # en vs em dash: last byte differs
    assert bpe_autos[r"x[é-ü]+"].accepts(b("xéü".encode())) and not bpe_autos[r"x[é-ü]+"].accepts(b("xý".encode()))


def test_invalid_utf8_is_rejected(bpe_autos, byte_ids):
    """Byte strings that are not UTF-8 text (truncated characters, stray continuation
    bytes, impossible lead bytes) are rejected even by a pattern accepting all text."""
    everything = bpe_autos[r"(?s).*"]
    b = lambda data: [byte_ids[bytes([x])] for x in data]  # noqa: E731
    assert everything.accepts(b("é中😀\n".encode())) and everything.accepts([])
    for bad in [b"\xc3", b"a\xe4\xb8", b"\xa9", b"a\x80b", b"\xc3a", b"\xff", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80"]:
        assert not everything.accepts(b(bad)), bad


# prefix-completability oracles written independently of the compiler: a text is a
# prefix of some string in the language exactly when it fullmatches the prefix regex
PREFIX_CASES = [
    # pattern, prefix regex, prefix text (its last character will be cut mid-way)
    (r"[^ ]*é[^ ]*", r"[^ ]*", "xé"),
    (r"x[é-ü]+", r"x[é-ü]*", "xé"),
    (r"[^–]*", r"[^–]*", "a –"),
    (r"[^–]* – [^–]*", r"[^–]*( –( [^–]*)?)?", "a –"),
    (r"caf(é|e) (crème|noir)", r"|c|ca|caf|caf[ée]|caf[ée] (|c|cr|crè|crèm|crème|n|no|noi|noir)", "café"),
]


def _completable(prefix_regex: str, data: bytes) -> bool:
    """Whether ``data`` (possibly ending inside a character) can be extended to text
    that fullmatches ``prefix_regex``; invalid UTF-8 never can."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(data, final=False)
    except UnicodeDecodeError:
        return False
    pending = decoder.getstate()[0]
    if not pending:
        return reference(prefix_regex, text)
    return any(reference(prefix_regex, text + c) for c in _completions(pending))


@lru_cache(maxsize=None)
def _completions(pending: bytes) -> tuple[str, ...]:
    """Every character whose UTF-8 encoding starts with ``pending``."""
    need = {0xC: 2, 0xD: 2, 0xE: 3, 0xF: 4}[pending[0] >> 4]
    out = []

    def extend(prefix: bytes):
        if len(prefix) == need:
            try:
                out.append(prefix.decode("utf-8"))
            except UnicodeDecodeError:
                pass
            return
        for b in range(0x80, 0xC0):
            extend(prefix + bytes([b]))

    extend(pending)
    return tuple(out)


@pytest.mark.parametrize("pattern, prefix_regex, text", PREFIX_CASES)
def test_mask_after_a_mid_character_prefix(bpe_vocab, bpe_autos, byte_ids, pattern, prefix_regex, text):
    auto = bpe_autos[pattern]
    full = text.encode("utf-8")
    cut = full[:-1]  # drop the last byte: the prefix now ends inside a character
    assert _ends_mid_character(cut)
    rng = random.Random(1)
    tokenizations = [[byte_ids[bytes([x])] for x in cut]] + [random_tokenization(cut, byte_ids, rng) for _ in range(3)]
    masks = []
    for ids in tokenizations:
        states = auto.run(torch.tensor([ids]))[0]
        q = states[-1]
        assert bool((states >= 0).all()) and not bool(auto.final[q]), "a live, non-accepting mid-character state"
        masks.append(auto.mask(q.unsqueeze(0))[0])
    for m in masks[1:]:
        assert torch.equal(m, masks[0]), "the mask depends on the bytes so far, not on their tokenization"
    mask = masks[0]
    for t, surface in enumerate(bpe_vocab.surfaces):
        expected = surface is not None and _completable(prefix_regex, cut + surface)
        assert bool(mask[t]) == expected, (pattern, cut, surface)
    # the byte completing the character is allowed exactly when the text is a prefix of the language
    assert bool(mask[byte_ids[full[-1:]]]) == reference(prefix_regex, text) == (pattern != r"[^–]*")
    assert 0 < int(mask.sum()) < len(bpe_vocab)
    # after an allowed token the state stays live; after a disallowed one it is -1
    q = auto.run(torch.tensor([tokenizations[0]]))[0, -1:]
    nxt = auto.step(q.expand(len(bpe_vocab)), torch.arange(len(bpe_vocab)))
    assert torch.equal(nxt >= 0, mask)


def test_bpe_accepts_text_directly(bpe, bpe_autos):
    """``accepts(str)`` encodes with the vocabulary's tokenizer."""
    for s in ["café crème", "cafe noir", "The cat", " = Gameplay = ", "x–y"]:
        for pattern, auto in bpe_autos.items():
            assert auto.accepts(s) == auto.accepts(bpe.encode(s).ids) == reference(pattern, s)


# ---------------------------------------------------------------------- word and character vocabularies
WORDS = ["the", " ", "cat", "cats", "s", "ca", "t", "dog", "é", "café", "caf", "e", "crème", "-", "the cat"]
WORD_PATTERNS = [r"the (cat|dog)s?", r"(ca|t|s)*", r"caf(é|e)( crème)?", r"[a-z ]*", r".*é.*", r"(the|cat|s| )+", r"[^ ]+"]


@pytest.fixture(scope="module")
def word_autos():
    vocab = Vocab.words(WORDS)
    return vocab, {p: neurosym.compile_regex(p, vocab=vocab) for p in WORD_PATTERNS}


@settings(max_examples=300, **HYP)
@given(picks=st.lists(st.sampled_from(WORDS), max_size=8))
def test_word_vocabulary_sequences_accepted_iff_spelling_fullmatches(word_autos, picks):
    vocab, autos = word_autos
    ids = [vocab.id(w) for w in picks]
    text = vocab.spell(ids)
    assert text == "".join(picks)
    for pattern, auto in autos.items():
        assert auto.accepts(ids) == reference(pattern, text), (pattern, picks)


def test_word_vocabulary_examples(word_autos):
    vocab, autos = word_autos
    ids = lambda *ws: [vocab.id(w) for w in ws]  # noqa: E731
    auto = autos[r"the (cat|dog)s?"]
    for seq in [("the", " ", "cat"), ("the", " ", "cats"), ("the", " ", "cat", "s"), ("the", " ", "ca", "t", "s"), ("the cat",), ("the cat", "s")]:
        assert auto.accepts(ids(*seq)), seq
    assert not auto.accepts(ids("the", "cat")) and not auto.accepts(ids("the", " ", "cat", " "))
    for special in range(4):  # <pad> <unk> <bos> <eos> spell nothing and are rejected everywhere
        assert vocab.surfaces[special] is None and not (auto.delta[:, special] >= 0).any()
    assert autos[r"caf(é|e)( crème)?"].accepts(ids("café", " ", "crème")) and autos[r"caf(é|e)( crème)?"].accepts(ids("caf", "é"))
    for seq in auto.sample(40, seed=2):
        assert reference(r"the (cat|dog)s?", vocab.spell(seq))


CORPUS = "hello world, café crème!\nthe cat sat."
CHAR_PATTERNS = [r"[a-z]+( [a-z]+)*", r"h.*!", r"[^é]*", r"\w+", r".+", r"[^x]*", r"(?s).*", r"[\s\S]x", r"caf(é|e)"]


@pytest.fixture(scope="module")
def char_autos():
    vocab = Vocab.chars_from_corpus(CORPUS)
    return vocab, {p: neurosym.compile_regex(p, vocab=vocab) for p in CHAR_PATTERNS}


# characters outside the corpus vocabulary: letters, digits, space-like, newline-free, non-ASCII, x
OUTSIDE = "xyzQ0_\t\x00中😀ü"


@settings(max_examples=300, **HYP)
@given(text=st.text(alphabet=CORPUS + OUTSIDE, max_size=10))
def test_char_vocabulary_from_corpus(char_autos, text):
    """Characters of the corpus are tokens; any other character is read as <unk>, which
    the automaton follows only where every character outside the vocabulary agrees."""
    vocab, autos = char_autos
    assert not set(OUTSIDE) & set(CORPUS)
    ids = vocab.encode(text)
    assert len(ids) == len(text) and (vocab.unk in ids) == bool(set(text) & set(OUTSIDE))
    for pattern, auto in autos.items():
        got = auto.accepts(ids)
        if vocab.unk not in ids:
            assert got == reference(pattern, text), (pattern, text)
        elif got:  # <unk> accepted: then every outside character in every <unk> slot would be
            slots = [i for i, c in enumerate(text) if c in OUTSIDE]
            for c in OUTSIDE:
                for i in slots:
                    assert reference(pattern, text[:i] + c + text[i + 1 :]), (pattern, text, i, c)
                assert reference(pattern, "".join(c if ch in OUTSIDE else ch for ch in text)), (pattern, text, c)


def test_char_vocabulary_unk_examples(char_autos):
    vocab, autos = char_autos
    unk = vocab.unk
    assert vocab.tokens[unk] == "<unk>" and vocab.surfaces[unk] is None
    h = vocab.id("h")
    # '\n' is in the corpus, so <unk> can never be a newline: '.' accepts it
    assert "\n" in vocab and autos[r"h.*!"].accepts([h, unk, unk, vocab.id("!")])
    assert autos[r".+"].accepts([unk]) and autos[r"(?s).*"].accepts([unk, unk])
    # <unk> might be 'x' (not in the corpus) or might not: [^x] cannot decide, so it rejects
    assert not autos[r"[^x]*"].accepts([unk]) and autos[r"[^x]*"].accepts(vocab.encode("hello"))
    # ...but é is in the corpus, so <unk> is certainly not é
    assert autos[r"[^é]*"].accepts([h, unk]) and not autos[r"[^é]*"].accepts(vocab.encode("café"))
    # \w: <unk> may be a letter or a symbol
    assert not autos[r"\w+"].accepts([unk]) and autos[r"\w+"].accepts(vocab.encode("hello"))
    assert autos[r"[\s\S]x"].num_states >= 1 and not autos[r"[\s\S]x"].accepts([unk, unk])
    # Vocab.chars without the newline: now <unk> might be '\n', which '.' rejects
    no_newline = Vocab.chars_from_corpus(CORPUS.replace("\n", ""))
    dot = neurosym.compile_regex(r"h.", vocab=no_newline)
    assert not dot.accepts([no_newline.id("h"), no_newline.unk])
    assert neurosym.compile_regex(r"(?s)h.", vocab=no_newline).accepts([no_newline.id("h"), no_newline.unk])


def test_unk_is_conservative_when_outside_characters_lead_apart():
    """One automaton state per prefix: if outside characters lead to different states,
    <unk> rejects even when each of them would be accepted on its own."""
    vocab = Vocab.chars("zq")  # outside: 'y' and everything else except z, q
    auto = neurosym.compile_regex(r"[^z]|yz", vocab=vocab)
    assert all(reference(r"[^z]|yz", c) for c in "yaé")  # each outside character alone is accepted...
    assert not auto.accepts([vocab.unk])  # ...but 'y' and 'a' lead to different states
    assert auto.accepts(vocab.encode("q")) and not auto.accepts(vocab.encode("z"))


# ---------------------------------------------------------------------- Automaton methods
METHOD_PATTERNS = [r"(ab|c)+d?", r"[a-c]*abc", r"x|y(z|é)*", r"(?i)the", r"\d{2,3}(\.\d)?", r"[^ab]b"]


@pytest.mark.parametrize("pattern", METHOD_PATTERNS)
def test_mask_step_run_agree_with_delta(pattern):
    auto = neurosym.compile_regex(pattern)
    Q, V = auto.delta.shape
    states = torch.tensor([*range(Q), -1, -1])
    m = auto.mask(states)
    assert m.shape == (Q + 2, V) and m.dtype == torch.bool
    assert torch.equal(m[:Q], auto.delta >= 0) and not m[Q:].any()
    m2 = auto.mask(states.view(-1, 1))  # any leading shape
    assert m2.shape == (Q + 2, 1, V) and torch.equal(m2[:, 0], m)
    # step over every (state, token) pair, -1 included
    ss = states.repeat_interleave(V)
    tt = torch.arange(V).repeat(Q + 2)
    nxt = auto.step(ss, tt).view(Q + 2, V)
    assert torch.equal(nxt[:Q], auto.delta) and (nxt[Q:] == -1).all()
    # run on a batch matches accepts and step-by-step stepping
    rng = random.Random(3)
    seqs = [[rng.randrange(V) for _ in range(6)] for _ in range(50)]
    seqs += [(s + [rng.randrange(V) for _ in range(6)])[:6] for s in auto.sample(30, max_len=6, seed=1)]
    ids = torch.tensor(seqs)
    run = auto.run(ids)
    assert run.shape == ids.shape
    for b, seq in enumerate(ids.tolist()):
        q = auto.start
        for t, tok in enumerate(seq):
            q = int(auto.delta[q, tok]) if q >= 0 else -1
            assert int(run[b, t]) == q
        assert auto.accepts(seq) == (q >= 0 and bool(auto.final[q]))


@pytest.mark.parametrize("pattern", METHOD_PATTERNS)
def test_log_transitions(pattern):
    auto = neurosym.compile_regex(pattern)
    Q, V = auto.delta.shape
    lt = auto.log_transitions()
    assert lt.shape == (Q, Q, V) and lt.dtype == torch.float32
    expected = torch.full((Q, Q, V), float("-inf"))
    for s in range(Q):
        for v in range(V):
            t = int(auto.delta[s, v])
            if t >= 0:
                expected[s, t, v] = 0.0
    assert torch.equal(lt, expected)
    assert ((lt == 0) | torch.isneginf(lt)).all()
    assert auto.log_transitions(torch.float64).dtype == torch.float64
    # a state has some finite weight exactly when it has an arc
    total = torch.logsumexp(lt.reshape(Q, -1), dim=1)
    assert torch.equal(torch.isfinite(total), (auto.delta >= 0).any(1))


def _state_graph_checks(auto):
    Q, V = auto.delta.shape
    g = auto.to_networkx()
    assert isinstance(g, nx.MultiDiGraph) and g.number_of_nodes() == Q
    assert [q for q, d in g.nodes(data=True) if d["start"]] == [auto.start]
    assert [q for q, d in g.nodes(data=True) if d["final"]] == auto.final.nonzero().flatten().tolist()
    delta = auto.delta.numpy()
    arcs = set()
    for s, t, d in g.edges(data=True):
        assert d["tokens"] and isinstance(d["label"], str)
        assert (delta[s, d["tokens"]] == t).all()
        arcs.update((s, v) for v in d["tokens"])
    assert len(arcs) == int((delta >= 0).sum()) == sum(len(d["tokens"]) for *_, d in g.edges(data=True))
    src, tok = (delta >= 0).nonzero()
    assert g.number_of_edges() == len(set(zip(src.tolist(), delta[src, tok].tolist())))
    # trim: every state is reachable from the start and can reach a final state
    reachable = nx.descendants(g, auto.start) | {auto.start}
    finals = [q for q in range(Q) if auto.final[q]]
    coreachable = set(finals).union(*(nx.ancestors(g, f) for f in finals))
    if finals:
        assert reachable == set(range(Q)) and coreachable == set(range(Q))
    else:  # the empty language: a single state with no arcs
        assert Q == 1 and g.number_of_edges() == 0


def _is_minimal(delta: torch.Tensor, final: torch.Tensor) -> bool:
    """Moore refinement written out: no two states of a trim DFA are equivalent."""
    Q = delta.shape[0]
    block = [int(f) for f in final.tolist()]
    while True:
        sigs = [(block[q], tuple(block[t] if t >= 0 else -1 for t in delta[q].tolist())) for q in range(Q)]
        ids = {s: i for i, s in enumerate(dict.fromkeys(sigs))}
        new = [ids[s] for s in sigs]
        if len(set(new)) == len(set(block)):
            return len(set(new)) == Q
        block = new


@pytest.mark.parametrize("pattern", METHOD_PATTERNS + [r"[^\s\S]", r"(a|b)*a(a|b){3}", r"(ab|ba)*", r"a|ab"])
def test_to_networkx_liveness_and_minimality(pattern):
    auto = neurosym.compile_regex(pattern)
    _state_graph_checks(auto)
    assert _is_minimal(auto.delta, auto.final)


def test_bpe_automata_are_trim_and_minimal(bpe_autos):
    for pattern, auto in bpe_autos.items():
        _state_graph_checks(auto)
        assert _is_minimal(auto.delta, auto.final), pattern
        assert auto.log_transitions().shape == (auto.num_states, auto.num_states, 2000)


EQUIVALENT = [
    ("(a|b)*", "(a*b*)*"),
    ("a(ba)*", "(ab)*a"),
    ("(a|b)*abb", "(a|b)*ab(b)"),
    ("[ab]+", "(a|b)(a|b)*"),
    ("x{2,3}", "xxx?"),
    ("(?i)ab", "[aA][bB]"),
    (r"\d+", "[0-9]+"),
    ("a|ab", "ab?"),
    ("(é|e)+", "[eé]+"),
    ("a*?b", "a*b"),
]


@pytest.mark.parametrize("p, q", EQUIVALENT)
def test_equivalent_patterns_give_identical_tables(p, q):
    ap, aq = neurosym.compile_regex(p), neurosym.compile_regex(q)
    assert ap.vocab.tokens == aq.vocab.tokens
    assert torch.equal(ap.delta, aq.delta) and torch.equal(ap.final, aq.final)
    # also over a shared vocabulary that is not their own alphabet
    vocab = Vocab.chars("abxeé0129AB")
    assert torch.equal(neurosym.compile_regex(p, vocab=vocab).delta, neurosym.compile_regex(q, vocab=vocab).delta)


def test_equivalent_patterns_give_identical_bpe_tables(bpe_vocab):
    for p, q in [(r"(19|20)\d\d", r"(19|20)[0-9]{2}"), ("caf(é|e)", "café|cafe"), (r"[^–]*", r"([^–]|–{0})*")]:
        ap, aq = neurosym.compile_regex(p, vocab=bpe_vocab), neurosym.compile_regex(q, vocab=bpe_vocab)
        assert torch.equal(ap.delta, aq.delta) and torch.equal(ap.final, aq.final), (p, q)


# ---------------------------------------------------------------------- caps
def test_state_cap_stops_quickly():
    t0 = time.perf_counter()
    with pytest.raises(CompileError, match=r"state cap of 10,000") as err:
        neurosym.compile_regex("(a|b)*a(a|b){30}")
    assert time.perf_counter() - t0 < 10
    assert "max_states" in str(err.value)


def test_raising_the_state_cap():
    with pytest.raises(CompileError, match="state cap of 100"):
        neurosym.compile_regex("(a|b)*a(a|b){8}", max_states=100)
    auto = neurosym.compile_regex("(a|b)*a(a|b){8}", max_states=512)
    assert auto.num_states == 2**9  # the last 9 characters must be remembered
    rng = random.Random(0)
    for _ in range(200):
        s = "".join(rng.choice("ab") for _ in range(rng.randint(0, 14)))
        assert auto.accepts(s) == reference("(a|b)*a(a|b){8}", s)


def test_nfa_and_time_caps():
    with pytest.raises(CompileError, match="NFA states"):
        neurosym.compile_regex("(ab){60000}")
    t0 = time.perf_counter()
    with pytest.raises(CompileError, match="time limit"):
        neurosym.compile_regex("(a|b|c|d)*a(a|b|c|d){12}", max_states=10**7, time_limit=0.2)
    assert time.perf_counter() - t0 < 10
