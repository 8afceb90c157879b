"""Compiled guides (neurosym.decode.guide): ``neurosym.compile_guide(spec, vocab)`` and its matchers.

Every guide kind -- a regex and a ``.txt`` word list over a byte-level BPE (automata over
the tokens), ``grammars/json.pcfg`` (regex lexemes), ``grammars/clause.fsg`` and
``grammars/arith.pcfg`` read as strings over the BPE, ``clause.fsg`` over its own words (a weighted automaton) and ``arith.pcfg`` over its
own words (rule tensors) -- is walked along seeded random paths, and at every step the
matcher's packed mask, its end and its log-probabilities are compared with the logits
processors the same guide gives (``guide.processors``), which the decoding paths already
test. JSON has an independent oracle besides: ``json.loads`` on every token prefix of real
documents, and obvious corruptions refused exactly at the corrupted byte; clause.fsg over the
BPE has the FSG's own probability of a text's words. Then ``copy``, ``rollback``,
``membership``, the guide cache and ``Vocab.from_tokenizer``.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

import neurosym
from neurosym.decode.guide import AutomatonGuide, GuideMask, RulesGuide, StringGuide
from neurosym.decode.tokenized import SpelledMask
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[2]
EOS = "<eos>"
REGEX = r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])|[a-z]+( [a-z]+){0,3}"


# ---------------------------------------------------------------------- fixtures
def json_objects() -> list:
    return [
        {}, [], "", 0, -0.0, 1e300, -2.5e-7, 12345678901234567890, True, False, None, -0.5e10,
        {"name": "Zoë", "tags": ["a", "b\n", "\t\"quoted\"\\/"], "n": [1, 2.5, -3, 4e10], "ok": None},
        [[[[]]], {"": {"": [{}]}}, "\u2603 snow", "\U0001f600 emoji", "\x00\x1f control"],
        {"nested": {"deep": {"deeper": [1, {"x": [True, False, None]}]}}, "unicode": "日本語 ñ €"},
        {"id": 17, "user": {"login": "ada", "score": 0.93}, "items": list(range(6))},
    ]


LAYOUTS = [{}, {"indent": 2}, {"separators": (",", ":")}, {"ensure_ascii": False}, {"indent": "\t", "ensure_ascii": False, "separators": (", ", ": ")}]
RAW_JSON = ['{"x": -0.5e10, "y": 1E+2, "z": 0.0e-0, "w": -12.25E-3}', "  [1 ,2\r\n, 3 ]\t\n", '"\\u00e9\\ud83d\\ude00 \\b\\f"', "-0", "null "]


def training_lines() -> list[str]:
    """A few hundred lines: the shipped grammars' files and some JSON (the BPE learns their pieces)."""
    files = sorted((ROOT / "grammars").glob("*.*"))
    lines = [line for f in files if f.suffix in (".fsg", ".pcfg", ".regex", ".txt") for line in f.read_text(encoding="utf-8").splitlines()]
    lines += [line for o in json_objects() for kw in LAYOUTS for line in json.dumps(o, **kw).splitlines()]
    lines += ["Alice finishes the very good task. Bob reviews the awful paper!", "1999-12 2024-01 hello world"] * 3
    return lines


def train_bpe(vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(training_lines(), trainer)
    return tok


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return train_bpe(600)


@pytest.fixture(scope="module")
def bpe(tok) -> Vocab:
    vocab = Vocab.from_tokenizer(tok)
    assert vocab.kind == "bytes" and len(vocab) % 32 != 0  # the last mask word has unused bits
    assert vocab.surfaces[tok.token_to_id(EOS)] is None
    return vocab


@dataclass
class Case:
    name: str
    guide: object
    eos: int  # a token that spells nothing: the processors' end column

    @property
    def V(self) -> int:
        return len(self.guide.vocab)


CASES = ["regex-bpe", "words-bpe", "json-bpe", "clause-bpe", "arith-bpe", "clause-words", "arith-words"]
STRING_CASES = {"json-bpe", "clause-bpe", "arith-bpe"}
WEIGHTED = {"json-bpe", "clause-bpe", "arith-bpe", "clause-words", "arith-words"}


@pytest.fixture(scope="module")
def cases(tok, bpe) -> dict[str, Case]:
    eos = tok.token_to_id(EOS)
    fsg = neurosym.load("grammars/clause.fsg")
    rules = neurosym.load("grammars/arith.pcfg")
    out = {
        "regex-bpe": Case("regex-bpe", neurosym.compile_guide(REGEX, bpe), eos),
        "words-bpe": Case("words-bpe", neurosym.compile_guide("grammars/months.txt", bpe), eos),
        "json-bpe": Case("json-bpe", neurosym.compile_guide("grammars/json.pcfg", bpe), eos),
        "clause-bpe": Case("clause-bpe", neurosym.compile_guide("grammars/clause.fsg", bpe), eos),
        "arith-bpe": Case("arith-bpe", neurosym.compile_guide("grammars/arith.pcfg", bpe), eos),
        "clause-words": Case("clause-words", neurosym.compile_guide(fsg, fsg.vocab), fsg.vocab.id("<eos>")),
        "arith-words": Case("arith-words", neurosym.compile_guide(rules, rules.vocab), rules.vocab.id("<eos>")),
    }
    kinds = {n: type(c.guide) for n, c in out.items()}
    assert kinds == {"regex-bpe": AutomatonGuide, "words-bpe": AutomatonGuide, "json-bpe": StringGuide, "clause-bpe": StringGuide,
                     "arith-bpe": StringGuide, "clause-words": AutomatonGuide, "arith-words": RulesGuide}
    assert {n for n, c in out.items() if c.guide.weighted} == WEIGHTED
    assert {n for n, c in out.items() if c.guide.bounded} == {"regex-bpe", "words-bpe", "clause-words"}
    return out


@pytest.fixture(params=CASES)
def case(request, cases) -> Case:
    return cases[request.param]


# ---------------------------------------------------------------------- helpers
def packed(m, fill: int = -1) -> np.ndarray:
    """``m.fill_mask`` into a buffer that starts with every bit ``fill``."""
    out = np.full(m.guide.mask_words, fill, dtype=np.int32)
    m.fill_mask(out)
    return out


def unpack(words: np.ndarray, V: int) -> tuple[np.ndarray, np.ndarray]:
    bits = np.unpackbits(words.view(np.uint8), bitorder="little").astype(bool)
    return bits[:V], bits[V:]


def mask_of(m) -> np.ndarray:
    """The matcher's allowed tokens (V,) bool, read from ``fill_mask`` (checked against
    ``allowed()``, a torch buffer, and the unused bits of the last word)."""
    V = len(m.guide.vocab)
    words = packed(m, -1)
    allowed, beyond = unpack(words, V)
    assert len(words) == (V + 31) // 32 and len(beyond) == 32 * len(words) - V
    assert not beyond.any(), "bits beyond V are set"
    assert np.array_equal(unpack(packed(m, 0), V)[0], allowed)  # the buffer's old content does not matter
    buf = torch.full((m.guide.mask_words,), 7, dtype=torch.int32)
    m.fill_mask(buf)
    assert np.array_equal(buf.numpy(), words)
    assert np.array_equal(m.allowed(), allowed)
    return allowed


def processors(case: Case, use: str):
    """The processor a matcher is checked against. A string guide's own mask processor is
    built on its matchers (GuideMask), so its masks are checked against SpelledMask, the
    string model's processor that shares none of the guide's per-state tables."""
    if use == "mask" and isinstance(case.guide, StringGuide):
        proc = SpelledMask(case.guide.grammar, case.eos)
    else:
        procs = case.guide.processors(case.eos, use)
        assert len(procs) == 1
        proc = procs[0]
    proc.reset(1)
    return proc


def processor_scores(proc, case: Case) -> np.ndarray:
    return proc(torch.zeros(1, case.V, dtype=torch.float64))[0].numpy().copy()


def as_end_column(lp: np.ndarray, case: Case) -> np.ndarray:
    """A matcher's (V + 1,) log-probabilities as a processor's (V,) row: the end at eos."""
    assert lp.shape == (case.V + 1,) and lp.dtype == np.float64
    assert lp[case.eos] == -np.inf  # eos spells nothing: no token of the grammar
    row = lp[: case.V].copy()
    row[case.eos] = lp[case.V]
    return row


def assert_close_logs(a: np.ndarray, b: np.ndarray, tol: float = 1e-12) -> None:
    assert np.array_equal(np.isfinite(a), np.isfinite(b)), np.nonzero(np.isfinite(a) != np.isfinite(b))
    fin = np.isfinite(a)
    assert np.all(np.abs(a[fin] - b[fin]) <= tol), np.abs(a[fin] - b[fin]).max()


def check_step(case: Case, m, mask_proc, prior_proc) -> np.ndarray:
    """Matcher against processors at one place of a walk; returns the allowed tokens."""
    allowed = mask_of(m)
    scores = processor_scores(mask_proc, case)
    finite = np.isfinite(scores)
    assert m.can_end() == bool(finite[case.eos])
    finite[case.eos] = False
    assert np.array_equal(allowed, finite), (case.name, m.tokens, np.nonzero(allowed != finite))
    assert not allowed[case.eos]
    if prior_proc is not None:
        lp = m.log_probs()
        assert_close_logs(as_end_column(lp, case), processor_scores(prior_proc, case))
        assert abs(np.exp(lp).sum() - 1.0) < 1e-9
        if isinstance(case.guide, StringGuide):  # the prior writes texts one way: its support lies inside the mask
            assert not (np.isfinite(lp[: case.V]) & ~allowed).any()
            assert not np.isfinite(lp[case.V]) or m.can_end()
        else:
            assert np.array_equal(np.isfinite(lp[: case.V]), allowed)
            assert bool(np.isfinite(lp[case.V])) == m.can_end()
    return allowed


def assert_refuses(case: Case, m, rng: random.Random, allowed: np.ndarray) -> None:
    """A few disallowed tokens (a special one, ids out of range, ordinary ones) are
    refused, and the matcher is as it was (also a fresh copy, which has no mask cached)."""
    before = (list(m.tokens), packed(m).copy(), m.can_end())
    ordinary = [t for t in np.nonzero(~allowed)[0].tolist() if case.guide.vocab.surfaces[t] is not None]
    bad = [case.eos, case.V, case.V + 1000, -1] + rng.sample(ordinary, min(3, len(ordinary)))
    for t in bad:
        assert m.accept(t) is False, (case.name, t)
        assert (list(m.tokens), m.can_end()) == (before[0], before[2]) and np.array_equal(packed(m), before[1])
    for t in [case.V, -1] + bad[4:]:
        other = m.copy()
        assert other.accept(t) is False, (case.name, t)
        assert other.tokens == before[0] and np.array_equal(packed(other), before[1]) and other.can_end() == before[2]


def walk(case: Case, seed: int, steps: int = 24, refuse: bool = True) -> tuple[list[int], list[bool], list[float]]:
    """A seeded random walk: uniformly among the allowed tokens, ending with probability
    0.2 where the text can end. Every step is checked (:func:`check_step`). Returns the
    tokens, ``can_end`` at every prefix and the chosen tokens' log-probabilities (the end
    last, when the walk ended)."""
    rng = random.Random(seed)
    m = case.guide.matcher()
    mask_proc = processors(case, "mask")
    prior_proc = processors(case, "prior") if case.guide.weighted else None
    ends, logps = [], []
    for step in range(steps + 1):
        allowed = check_step(case, m, mask_proc, prior_proc)
        ends.append(m.can_end())
        if refuse:
            assert_refuses(case, m, rng, allowed)
        choices = np.nonzero(allowed)[0].tolist()
        if not choices:
            assert m.can_end()  # a guide never strands a text that is not a sentence
        if step == steps:  # the budget is spent (checked at the last place too)
            break
        if not choices or (m.can_end() and rng.random() < 0.2):
            if case.guide.weighted:
                logps.append(float(m.log_probs()[case.V]))
            return list(m.tokens), ends, logps
        t = rng.choice(choices)
        if case.guide.weighted:
            logps.append(float(m.log_probs()[t]))
        assert m.accept(t) is True
        assert m.tokens[-1] == t
        for p in (mask_proc, prior_proc):
            if p is not None:
                p.advance(torch.tensor([t]))
    return list(m.tokens), ends, logps


def replay(guide, tokens: list[int]):
    m = guide.matcher()
    for t in tokens:
        assert m.accept(t), (tokens, t)
    return m


def assert_same_place(a, b) -> None:
    """Two matchers of one guide at the same place: mask, end and log-probabilities."""
    assert a.tokens == b.tokens
    assert np.array_equal(packed(a), packed(b))
    assert a.can_end() == b.can_end()
    if a.guide.weighted:
        assert_close_logs(a.log_probs(), b.log_probs())


def text_of(vocab: Vocab, tokens: list[int]) -> bytes:
    return b"".join(vocab.surfaces[t] for t in tokens)


# ---------------------------------------------------------------------- walks against the processors
@pytest.mark.parametrize("seed", range(10))
def test_walks_agree_with_the_processors(case, seed):
    tokens, ends, logps = walk(case, seed, steps=32)
    assert len(ends) == len(tokens) + 1
    # membership reads the same language: every prefix viable, the sentences where can_end was
    rows = [tokens[:i] for i in range(len(tokens) + 1)]
    sentence, viable = case.guide.membership(rows)
    assert viable.all() and sentence.tolist() == ends
    if case.guide.weighted and not isinstance(case.guide, StringGuide) and len(logps) == len(tokens) + 1:
        # an ended walk over the grammar's own tokens: the chain of log_probs is the sentence's log-probability
        assert math.isclose(sum(logps), case.guide.sentence_log_prob(tokens), rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(case.guide, StringGuide) and ends[-1]:  # a text of the language has a probability (json's lexemes: none)
        logp = case.guide.sentence_log_prob(tokens)
        assert logp is None if case.name == "json-bpe" else (math.isfinite(logp) and logp < 0)
    if not case.guide.weighted:
        assert case.guide.sentence_log_prob(tokens) is None


def test_walks_reach_sentences(cases):
    """The walks are not trivial: most of them end in a sentence, with tokens."""
    for case in cases.values():
        ended = 0
        for seed in range(6):
            tokens, ends, _ = walk(case, seed, refuse=False)
            ended += ends[-1]
            assert len(tokens) >= 1
        assert ended >= 3, case.name


def test_string_walk_texts_are_sentences(cases):
    """clause.fsg over the BPE: an ended walk's text is a sentence of the FSG read word by word."""
    case = cases["clause-bpe"]
    fsg = neurosym.load("grammars/clause.fsg")
    done = 0
    for seed in range(6):
        tokens, ends, _ = walk(case, seed, refuse=False)
        if not ends[-1]:
            continue
        text = text_of(case.guide.vocab, tokens).decode()
        words = re.findall(r"[^ .!?]+|[.!?]", text)
        assert all(w in fsg.vocab for w in words), text
        assert fsg.accepts([fsg.vocab.id(w) for w in words]), text
        done += 1
    assert done >= 3


@pytest.mark.parametrize("name", CASES)
def test_accept_refuses_a_special_token_on_a_fresh_matcher(cases, name):
    """A matcher that has not filled a mask yet must refuse the end token (it spells
    nothing and no grammar reads it) just as one that has."""
    case = cases[name]
    fresh = case.guide.matcher()
    assert fresh.accept(case.eos) is False
    assert fresh.tokens == []
    tokens, _, _ = walk(case, 0, steps=3, refuse=False)
    m = replay(case.guide, tokens)
    assert m.accept(case.eos) is False and m.tokens == tokens


@pytest.mark.parametrize("name", CASES)
def test_membership_of_rows_with_the_end_token(cases, name):
    """A row holding a token that spells nothing (the end token) is no text of the
    grammar: neither a sentence nor viable, wherever the token stands."""
    case = cases[name]
    tokens, ends, _ = walk(case, 1, steps=6, refuse=False)
    assert tokens
    rows = [[case.eos], tokens + [case.eos], [case.eos] + tokens, tokens[:1] + [case.eos] + tokens[1:]]
    sentence, viable = case.guide.membership(rows)
    assert sentence.tolist() == [False] * 4
    assert viable.tolist() == [False] * 4


@pytest.mark.parametrize("name", CASES)
def test_membership_of_rows_with_ids_out_of_range(cases, name):
    """A row holding an id that is no token (``V``, ``-1``, ``-5``) is neither a sentence nor viable."""
    case = cases[name]
    tokens, _, _ = walk(case, 1, steps=6, refuse=False)
    rows = [[case.V], tokens + [case.V + 3], [-1], tokens + [-5]]
    sentence, viable = case.guide.membership(rows)
    assert sentence.tolist() == [False] * 4
    assert viable.tolist() == [False] * 4


def test_string_prior_gives_the_fsg_probability_of_the_text(cases, tok):
    """clause.fsg over the BPE: a text's probability does not depend on how it was
    tokenized (sentence_log_prob), equals the FSG's probability of its words, and is the
    chain of the matcher's log_probs along the prior's own tokens (sampled from them)."""
    case = cases["clause-bpe"]
    guide, V = case.guide, case.V
    fsg = neurosym.load("grammars/clause.fsg")
    single = {s[0]: i for i, s in enumerate(guide.vocab.surfaces) if s is not None and len(s) == 1}
    rng = np.random.default_rng(0)
    seen = 0
    for seed in range(8):
        m, chain = guide.matcher(), 0.0
        for _ in range(80):
            lp = m.log_probs()
            p = np.exp(lp)
            i = int(rng.choice(V + 1, p=p / p.sum()))
            chain += lp[i]
            if i == V:
                break
            assert m.accept(i)
        else:
            continue
        assert m.can_end()
        text = text_of(guide.vocab, m.tokens).decode()
        words = re.findall(r"[^ .!?]+|[.!?]", text)
        want = float(fsg.log_prob(torch.tensor([[fsg.vocab.id(w) for w in words]]))[0])
        assert math.isclose(chain, want, rel_tol=1e-9, abs_tol=1e-9), text
        assert math.isclose(guide.sentence_log_prob(m.tokens), want, rel_tol=1e-9, abs_tol=1e-9), text
        byte_ids = [single[b] for b in text.encode()]  # the same text one byte per token
        assert byte_ids != m.tokens
        assert math.isclose(guide.sentence_log_prob(byte_ids), want, rel_tol=1e-9, abs_tol=1e-9), text
        assert math.isclose(guide.sentence_log_prob(tok.encode(text).ids), want, rel_tol=1e-9, abs_tol=1e-9), text
        seen += 1
    assert seen >= 4


def test_fill_mask_rejects_wrong_buffers(case):
    m = case.guide.matcher()
    n = case.guide.mask_words
    assert n == (case.V + 31) // 32
    for bad in (np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.uint32), np.zeros(n, dtype=np.float32), np.zeros(n + 1, dtype=np.int32),
                np.zeros((1, n), dtype=np.int32), np.zeros(max(n - 1, 0), dtype=np.int32), torch.zeros(n, dtype=torch.int64), [0] * n):
        with pytest.raises(NeurosymError, match="fill_mask"):
            m.fill_mask(bad)
    good = np.zeros(n, dtype=np.int32)
    m.fill_mask(good)
    assert unpack(good, case.V)[0].any()  # something may start a text


def test_log_probs_need_a_weighted_guide(case):
    m = case.guide.matcher()
    if case.guide.weighted:
        lp = m.log_probs()
        assert lp.shape == (case.V + 1,) and abs(np.exp(lp).sum() - 1) < 1e-9
        for use in ("prior", "both"):
            assert len(case.guide.processors(case.eos, use)) == (1 if use == "prior" else 2)
    else:
        with pytest.raises(NeurosymError, match="weighted"):
            m.log_probs()
        with pytest.raises(NeurosymError, match="weighted"):
            case.guide.processors(case.eos, "prior")
    with pytest.raises(NeurosymError, match="use must be"):
        case.guide.processors(case.eos, "nope")
    if not case.guide.bounded:
        with pytest.raises(NeurosymError, match="budget"):
            case.guide.processors(case.eos, "mask", max_len=5)


# ---------------------------------------------------------------------- JSON against json.loads
def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


def json_ok(text: bytes) -> bool:
    """Whether ``text`` is one JSON document (RFC 8259: no NaN or Infinity), by json.loads."""
    try:
        json.loads(text.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError):
        return False
    return True


def json_docs() -> list[str]:
    docs = [json.dumps(o, **kw) for o in json_objects() for kw in LAYOUTS] + RAW_JSON
    for d in docs:
        assert json_ok(d.encode())
    return docs


def test_json_documents_are_walked_and_end_exactly_where_json_loads_accepts(cases, tok):
    guide = cases["json-bpe"].guide
    vocab = guide.vocab
    docs = json_docs()
    assert len(docs) > 80
    checked = ended_early = short = 0
    for doc in docs:
        ids = tok.encode(doc).ids
        assert text_of(vocab, ids) == doc.encode()
        m = guide.matcher()
        ends = []
        for i, t in enumerate(ids):
            prefix = text_of(vocab, ids[:i])
            assert m.can_end() == json_ok(prefix), (doc, prefix)
            ends.append(m.can_end())
            ended_early += m.can_end() and i > 0
            assert mask_of(m)[t], (doc, prefix, vocab.surfaces[t])
            assert m.accept(t), (doc, prefix, vocab.surfaces[t])
            checked += 1
        assert m.can_end(), doc
        ends.append(True)
        if len(ids) <= 12:  # membership reads exact probabilities (slow on long documents): the short ones
            sentence, viable = guide.membership([ids[:i] for i in range(len(ids) + 1)])
            assert viable.all() and sentence.tolist() == ends, doc
            short += 1
    assert checked > 1000 and ended_early > 0 and short > 10  # some proper prefixes are documents (12 of 123, a value before its trailing space)


# (valid prefix, a completion that shows it is one, the corrupting text, the rest of the document)
CORRUPTIONS = [
    ('{"a":', " 1}", "}", ' 1, "b": [2]}'),
    ("[", "1]", ",", "1, 2]"),
    ('{"a" ', ": 1}", "1", "}"),
    ("[1 ", "]", "2", "]"),
    ("tru", "e", "x", ""),
    ("{", "}", ",", '"a": 1}'),
    ('["ab', '"]', "\x01", 'c"]'),
    ("0", "", "1", ""),
    ("[1,", "2]", "]", ""),
    ('{"a": 1,', '"b": 2}', "}", ""),
    ('"\\', 'n"', "x", '"'),
    ("1.", "5", "e", "3"),
    ("-", "1", "a", ""),
    ("[] ", "", "[", "]"),
    ('{"k": [true, {"n": null}], "z"', ": 0}", "}", ""),
    ('  {"x": -0.5', "e10}", "+", "e10}"),
    ("nul", "l", "L", ""),
    ('{"\u00e9t\u00e9": "\u65e5', '"}', "\n", '"}'),
]


@pytest.mark.parametrize("prefix, completion, bad, rest", CORRUPTIONS)
def test_json_corruption_is_refused_at_the_corrupted_byte(cases, tok, prefix, completion, bad, rest):
    assert json_ok((prefix + completion).encode())  # the prefix is a viable prefix: it completes
    guide = cases["json-bpe"].guide
    vocab = guide.vocab
    text = prefix + bad + rest
    cut = len(prefix.encode())
    ids = tok.encode(text).ids
    assert text_of(vocab, ids) == text.encode()
    m = guide.matcher()
    at = 0
    for t in ids:
        end = at + len(vocab.surfaces[t])
        if end <= cut:  # wholly inside the valid prefix
            assert m.accept(t), (text, vocab.surfaces[t])
            at = end
            continue
        # the first token that reaches the corrupted byte
        allowed_before, end_before = mask_of(m), m.can_end()
        assert not allowed_before[t], (text, vocab.surfaces[t])
        assert m.accept(t) is False
        assert np.array_equal(mask_of(m), allowed_before) and m.can_end() == end_before
        assert text_of(vocab, m.tokens) == text.encode()[:at]
        sentence, viable = guide.membership([ids[: len(m.tokens) + 1]])
        assert not viable[0] and not sentence[0]
        return
    raise AssertionError(f"{text!r}: every token was accepted")


# ---------------------------------------------------------------------- copy and rollback
@pytest.mark.parametrize("seed", range(3))
def test_copies_evolve_independently(case, seed):
    rng = random.Random(100 + seed)
    tokens, _, _ = walk(case, 100 + seed, steps=rng.randint(1, 6), refuse=False)
    m = replay(case.guide, tokens)
    if case.guide.weighted:
        m.log_probs()  # the original's prior exists before the copy
    c = m.copy()
    assert c is not m and c.tokens == m.tokens and c.tokens is not m.tokens
    assert_same_place(c, m)
    choices = np.nonzero(m.allowed())[0].tolist()
    if len(choices) < 2:
        return
    a, b = rng.sample(choices, 2)  # the two part ways at once
    assert m.accept(a) and c.accept(b)
    assert m.tokens == tokens + [a] and c.tokens == tokens + [b]
    for _ in range(4):
        assert_same_place(m, replay(case.guide, m.tokens))
        assert_same_place(c, replay(case.guide, c.tokens))
        if rng.random() < 0.5:  # a copy of a copy
            c = c.copy()
        for x in (m, c):
            options = np.nonzero(x.allowed())[0].tolist()
            if options:
                assert x.accept(rng.choice(options))
    assert m.tokens[: len(tokens)] == c.tokens[: len(tokens)] == tokens and m.tokens[len(tokens)] != c.tokens[len(tokens)]


@pytest.mark.parametrize("seed", range(3))
def test_rollback_equals_a_fresh_replay(case, seed):
    rng = random.Random(200 + seed)
    tokens, _, _ = walk(case, 200 + seed, steps=12, refuse=False)
    n = len(tokens)
    for k in sorted({0, 1, n // 2, n}):
        if k > n:
            continue
        m = case.guide.matcher()
        for t in tokens:  # log_probs along the way: the prior follows the accepted tokens
            if case.guide.weighted:
                m.log_probs()
            assert m.accept(t)
        m.rollback(k)
        assert m.tokens == tokens[: n - k]
        assert_same_place(m, replay(case.guide, tokens[: n - k]))
        choices = np.nonzero(m.allowed())[0].tolist()
        if choices:  # it goes on from there as a fresh matcher would
            t = rng.choice(choices)
            assert m.accept(t)
            assert_same_place(m, replay(case.guide, tokens[: n - k] + [t]))
    # a rollback then more rollbacks, over a copy too
    m = replay(case.guide, tokens)
    c = m.copy()
    if n >= 2:
        m.rollback(1)
        m.rollback(1)
        assert_same_place(m, replay(case.guide, tokens[:-2]))
        assert_same_place(c, replay(case.guide, tokens))  # the copy kept its place


def test_rollback_checks_its_argument(case):
    tokens, _, _ = walk(case, 300, steps=5, refuse=False)
    m = replay(case.guide, tokens)
    before = (packed(m).copy(), m.can_end(), m.log_probs() if case.guide.weighted else None)
    for bad in (len(tokens) + 1, -1, True, 1.0, "1", None):
        with pytest.raises(NeurosymError, match="rollback"):
            m.rollback(bad)
        assert m.tokens == tokens
    m.rollback(0)
    assert m.tokens == tokens and np.array_equal(packed(m), before[0]) and m.can_end() == before[1]
    if case.guide.weighted:
        assert_close_logs(m.log_probs(), before[2], tol=0.0)
    fresh = case.guide.matcher()
    fresh.rollback(0)
    with pytest.raises(NeurosymError, match="rollback"):
        fresh.rollback(1)
    m.rollback(len(tokens))
    assert_same_place(m, case.guide.matcher())


# ---------------------------------------------------------------------- the guide cache
def test_the_same_spec_and_vocab_give_the_same_guide(bpe, tok):
    for spec in (REGEX, "grammars/months.txt", "grammars/json.pcfg", "grammars/clause.fsg", "grammars/dates.regex:DATE"):
        g = neurosym.compile_guide(spec, bpe)
        assert neurosym.compile_guide(spec, bpe) is g
        assert neurosym.compile_guide(spec, Vocab.from_tokenizer(tok)) is g  # the same vocabulary object, kept per tokenizer
        assert neurosym.compile_guide(g, bpe) is g  # a guide is returned as it is
        fresh = neurosym.compile_guide(spec, bpe, cache=False)
        assert fresh is not g and type(fresh) is type(g) and fresh.vocab == bpe
        assert neurosym.compile_guide(spec, bpe) is g  # cache=False left the cached one in place
        assert np.array_equal(fresh.matcher().allowed(), g.matcher().allowed())


def test_another_vocabulary_gives_another_guide(bpe):
    small = Vocab.from_tokenizer(train_bpe(300))
    padded = bpe.padded(len(bpe) + 40)
    for spec in ("grammars/json.pcfg", REGEX):
        g = neurosym.compile_guide(spec, bpe)
        for other in (small, padded):
            h = neurosym.compile_guide(spec, other)
            assert h is not g and h.vocab == other and len(h.matcher().allowed()) == len(other)
            assert h.mask_words == (len(other) + 31) // 32
        # the padded ids spell nothing: never allowed, and the rest reads as over bpe
        hp = neurosym.compile_guide(spec, padded).matcher()
        allowed = hp.allowed()
        assert not allowed[len(bpe):].any() and np.array_equal(allowed[: len(bpe)], g.matcher().allowed())
    with pytest.raises(NeurosymError, match="compiled for"):
        neurosym.compile_guide(neurosym.compile_guide(REGEX, bpe), padded)
    with pytest.raises(NeurosymError, match="Vocab"):
        neurosym.compile_guide(REGEX, "not a vocab")


def accepts_text(guide, tok, text: str) -> bool:
    """Whether the guide's matcher takes ``text``'s BPE tokens and ends there."""
    m = guide.matcher()
    return all(m.accept(t) for t in tok.encode(text).ids) and m.can_end()


def rewrite(path: Path, text: str) -> None:
    old = path.stat() if path.exists() else None
    path.write_text(text, encoding="utf-8")
    if old is not None:
        assert path.stat().st_size != old.st_size  # the stamp changes whatever the clock's resolution


def test_an_edited_grammar_file_is_compiled_again(tmp_path, bpe, tok):
    pcfg = tmp_path / "answer.pcfg"
    rewrite(pcfg, "S -> 'yes' [0.5] | 'no' [0.5]\n")
    first = neurosym.compile_guide(str(pcfg), bpe)
    assert isinstance(first, StringGuide) and neurosym.compile_guide(str(pcfg), bpe) is first
    assert accepts_text(first, tok, "yes") and not accepts_text(first, tok, "maybe")
    rewrite(pcfg, "S -> 'maybe' [0.7] | 'never' [0.3]\n")
    second = neurosym.compile_guide(str(pcfg), bpe)
    assert second is not first and neurosym.compile_guide(str(pcfg), bpe) is second
    assert accepts_text(second, tok, "maybe") and accepts_text(second, tok, "never") and not accepts_text(second, tok, "yes")
    assert accepts_text(first, tok, "yes")  # a guide already handed out keeps its grammar

    regex = tmp_path / "code.regex"
    rewrite(regex, "CODE: /ab+/\n")
    g = neurosym.compile_guide(str(regex), bpe)
    assert isinstance(g, AutomatonGuide) and accepts_text(g, tok, "abbb") and not accepts_text(g, tok, "cd")
    rewrite(regex, "CODE: /(cd)+|x/\n")
    h = neurosym.compile_guide(str(regex), bpe)
    assert h is not g and accepts_text(h, tok, "cdcd") and not accepts_text(h, tok, "abbb")


def test_an_edited_imported_file_is_compiled_again(tmp_path, bpe, tok):
    """The guide of an .fsg is compiled again when a file it imports changes."""
    (tmp_path / "n.fsg").write_text('%import "n.regex" (NUM)\nS A \'take\' 1.0\nA E NUM 1.0\nE 1.0\n')
    rewrite(tmp_path / "n.regex", "NUM: /[0-9]+/\n")
    g = neurosym.compile_guide(str(tmp_path / "n.fsg"), bpe)
    assert accepts_text(g, tok, "take 12") and not accepts_text(g, tok, "take ab")
    assert neurosym.compile_guide(str(tmp_path / "n.fsg"), bpe) is g
    rewrite(tmp_path / "n.regex", "NUM: /[a-c]+|[0-1]/\n")
    h = neurosym.compile_guide(str(tmp_path / "n.fsg"), bpe)
    assert h is not g and accepts_text(h, tok, "take ab") and not accepts_text(h, tok, "take 12")


# ---------------------------------------------------------------------- Vocab.from_tokenizer
def test_vocab_from_tokenizer_is_kept_per_tokenizer_object(tok, bpe):
    assert Vocab.from_tokenizer(tok) is bpe
    other = Tokenizer.from_str(tok.to_str())  # the same tokenizer, another object
    again = Vocab.from_tokenizer(other)
    assert again == bpe and again is not bpe and Vocab.from_tokenizer(other) is again
    sized = Vocab.from_tokenizer(tok, size=len(bpe) + 5)
    assert sized is not bpe and Vocab.from_tokenizer(tok, size=len(bpe) + 5) is sized
    assert Vocab.from_tokenizer(tok) is bpe


def test_vocab_from_a_tokenizer_file_or_folder(tmp_path, tok, bpe):
    folder = tmp_path / "saved"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    for spec in (folder, str(folder), folder / "tokenizer.json", str(folder / "tokenizer.json")):
        v = Vocab.from_tokenizer(spec)
        assert v == bpe and v.sha256() == bpe.sha256() and v.kind == "bytes"
    with pytest.raises(NeurosymError, match="tokenizer.json"):
        Vocab.from_tokenizer(tmp_path)  # a folder without one
    with pytest.raises(NeurosymError, match="missing.json"):
        Vocab.from_tokenizer(tmp_path / "missing.json")
    with pytest.raises(NeurosymError, match="Vocab.from_tokenizer"):
        Vocab.from_tokenizer(object())
    # a guide compiled over the vocabulary read from the folder is the one compiled over bpe
    assert neurosym.compile_guide("grammars/months.txt", Vocab.from_tokenizer(folder)) is neurosym.compile_guide("grammars/months.txt", bpe)


def test_vocab_from_a_transformers_tokenizer(tok, bpe):
    transformers = pytest.importorskip("transformers")
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS)
    v = Vocab.from_tokenizer(hf)
    assert v.kind == "bytes" and Vocab.from_tokenizer(hf) is v
    special = set(hf.all_special_ids)
    assert tok.token_to_id(EOS) in special
    assert len(v) == len(hf) and len(v) >= len(bpe)
    for i in range(len(v)):
        if i in special:
            assert v.surfaces[i] is None
        elif i < len(bpe):
            assert v.surfaces[i] == bpe.surfaces[i], i
    assert sum(s is not None for s in v.surfaces) == sum(s is not None for s in bpe.surfaces)
    # the bytes are what the tokenizer writes
    text = '{"name": "Zoë", "n": [1, 2.5]}'
    assert b"".join(v.surfaces[i] for i in hf(text)["input_ids"]) == text.encode()
    size = len(v) + 9
    wide = Vocab.from_tokenizer(hf, size=size)
    assert len(wide) == size and wide.surfaces[: len(v)] == v.surfaces and wide.tokens[: len(v)] == v.tokens
    assert wide.surfaces[len(v):] == [None] * 9 and all(t.startswith("<unused") for t in wide.tokens[len(v):])
    assert Vocab.from_tokenizer(hf, size=size) is wide
    padded = Vocab.from_tokenizer(tok, size=len(bpe) + 3)
    assert len(padded) == len(bpe) + 3 and padded.surfaces[len(bpe):] == [None] * 3 and padded.surfaces[: len(bpe)] == bpe.surfaces
    g = neurosym.compile_guide("grammars/json.pcfg", wide)
    assert not g.matcher().allowed()[len(v):].any()  # the padding spells nothing: never allowed
    with pytest.raises(NeurosymError, match="vocab_size"):
        Vocab.from_tokenizer(hf, size=0)


def test_a_tokenizer_that_grew_tokens_is_read_again(tok):
    grown = Tokenizer.from_str(tok.to_str())
    before = Vocab.from_tokenizer(grown)
    grown.add_special_tokens(["<sep>"])
    grown.add_tokens(["hello world"])
    after = Vocab.from_tokenizer(grown)
    assert after is not before and len(after) == len(before) + 2
    assert after.surfaces[: len(before)] == before.surfaces
    assert after.surfaces[-2:] == [None, b"hello world"]  # a special token spells nothing; an added one its text
    assert Vocab.from_tokenizer(grown) is after
    g = neurosym.compile_guide("grammars/months.txt", after)
    assert g is not neurosym.compile_guide("grammars/months.txt", before)
    m = g.matcher()
    assert not m.allowed()[len(before)] and not m.accept(len(before))


@pytest.mark.parametrize("name", STRING_CASES)
def test_the_guide_mask_processor_equals_spelled_mask_in_a_batch(cases, name):
    """A string guide's mask processor (GuideMask, one matcher per row) gives the scores of
    SpelledMask (the string model's own processor) for a batch of rows walked apart, on
    scores wider than the vocabulary, rows that ended included."""
    case = cases[name]
    walks = [walk(case, seed, steps=8, refuse=False)[0] for seed in range(3)]
    ours, theirs = case.guide.processors(case.eos, "mask")[0], SpelledMask(case.guide.grammar, case.eos)
    assert isinstance(ours, GuideMask)
    B, width = len(walks), case.V + 3
    for p in (ours, theirs):
        p.reset(B)
    done = torch.zeros(B, dtype=torch.bool)
    for step in range(max(len(w) for w in walks) + 1):
        a = ours(torch.zeros(B, width, dtype=torch.float64))
        b = theirs(torch.zeros(B, width, dtype=torch.float64))
        assert torch.equal(torch.isfinite(a), torch.isfinite(b)), step
        tokens = torch.tensor([w[step] if step < len(w) else case.eos for w in walks])
        assert ours.allowed(tokens).tolist() == theirs.allowed(tokens).tolist()
        for p in (ours, theirs):
            p.advance(tokens, done)
        done |= tokens == case.eos
