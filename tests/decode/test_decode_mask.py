"""GrammarMask: every sample is in the language (checked with Python's `re` and the FSG's
own scores), the allowed sets equal a brute-force reference, budgets, positioned
prompt errors."""

from __future__ import annotations

import itertools
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import neurosym
from neurosym.compile.fsg import load_fsg
from neurosym.compile.regex import compile_regex
from neurosym.data import shipped_file
from neurosym.decode import GrammarMask, PromptError, generate, states_allowing
from neurosym.errors import NeurosymError
from neurosym.lm.model import CausalLM, LMConfig
from neurosym.vocab import Vocab

pytestmark = pytest.mark.usefixtures("one_thread")

CHARS = Vocab.chars([chr(i) for i in range(32, 127)])

# The shipped patterns written out by hand as Python regexes (re.ASCII): an independent
# reference for what the compiled automata accept.
LOCAL = r"[A-Za-z0-9_%+-]+(\.[A-Za-z0-9_%+-]+)*"
LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
DOMAIN = rf"{LABEL}(\.{LABEL})*\.[A-Za-z]{{2,24}}"
DIGITS = r"[0-9]+"
INTEGER = rf"[+-]?{DIGITS}"
DECIMAL = rf"[+-]?({DIGITS}\.({DIGITS})?|\.{DIGITS})"
SCIENTIFIC = rf"({INTEGER}|{DECIMAL})[eE][+-]?[0-9]+"
THOUSANDS = r"[1-9][0-9]{0,2}(,[0-9]{3})+"
HEX = r"0[xX][0-9a-fA-F]+"
YEAR, MONTH, DAY = r"(19|20)[0-9]{2}", r"(0[1-9]|1[0-2])", r"(0[1-9]|[12][0-9]|3[01])"
DATE = rf"{YEAR}-{MONTH}-{DAY}"
TIME = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?"
MONTHS = "|".join(shipped_file("grammars/months.txt").read_text().split())
REFERENCE = {
    ("email", "LOCAL"): LOCAL,
    ("email", "LABEL"): LABEL,
    ("email", "DOMAIN"): DOMAIN,
    ("email", "EMAIL"): rf"{LOCAL}@{DOMAIN}",
    ("email", "URL"): rf"(?i:https?://{DOMAIN}(:[0-9]{{1,5}})?(/[A-Za-z0-9._~%-]*)*)",
    ("numbers", "DIGITS"): DIGITS,
    ("numbers", "INTEGER"): INTEGER,
    ("numbers", "DECIMAL"): DECIMAL,
    ("numbers", "SCIENTIFIC"): SCIENTIFIC,
    ("numbers", "THOUSANDS"): THOUSANDS,
    ("numbers", "HEX"): HEX,
    ("numbers", "NUMBER"): f"{INTEGER}|{DECIMAL}|{SCIENTIFIC}|{THOUSANDS}|{HEX}",
    ("dates", "YEAR"): YEAR,
    ("dates", "MONTH"): MONTH,
    ("dates", "DAY"): DAY,
    ("dates", "DATE"): DATE,
    ("dates", "MONTH_NAME"): rf"(?i:{MONTHS})",
    ("dates", "LONG_DATE"): rf"(?i:{MONTHS}) ([1-9]|[12][0-9]|3[01]), {YEAR}",
    ("dates", "TIME"): TIME,
    ("dates", "STAMP"): rf"{DATE}T{TIME}",
}
HEADLINE = [("dates", "DATE"), ("numbers", "NUMBER"), ("email", "EMAIL")]


def random_lm(vocab: Vocab, max_len: int = 32, seed: int = 0) -> CausalLM:
    torch.manual_seed(seed)
    return CausalLM(LMConfig(vocab_size=len(vocab), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=max_len)).eval()


_banks: dict[tuple[str, int], object] = {}


def bank(name: str, vocab: Vocab):
    key = (name, id(vocab))
    if key not in _banks:
        _banks[key] = neurosym.load(shipped_file(f"grammars/{name}.regex"), vocab=vocab)
    return _banks[key]


def sample_pattern(file: str, pattern: str, vocab: Vocab, n: int, max_len: int = 24, seed: int = 0):
    auto = bank(file, vocab)[pattern]
    eos, bos = vocab.id("<eos>"), vocab.id("<bos>")
    out = generate(random_lm(vocab, max_len + 1, seed), n=n, max_len=max_len, processors=[GrammarMask(auto, eos, max_len=max_len)],
                   eos_id=eos, bos_id=bos, seed=seed)
    return auto, out


def check_all_accepted(file: str, pattern: str, vocab: Vocab, n: int, max_len: int = 24) -> None:
    auto, out = sample_pattern(file, pattern, vocab, n, max_len)
    assert out.status == ["eos"] * n, {s: out.status.count(s) for s in set(out.status)}
    ref = re.compile(REFERENCE[(file, pattern)], re.ASCII)
    texts = [vocab.spell(t) for t in out.tokens]
    rejected = [t for t in texts if not ref.fullmatch(t)]
    assert not rejected, rejected[:5]
    assert all(auto.accepts(t) for t in out.tokens)
    assert len(set(texts)) >= 10  # the model explores (MONTH has 12 strings), it does not repeat one


# ---------------------------------------------------------------------- every sample in the language
@pytest.mark.parametrize("file, pattern", HEADLINE)
def test_1000_of_1000_samples_match_each_shipped_bank_over_characters(file, pattern):
    check_all_accepted(file, pattern, CHARS, 1000)


@pytest.mark.slow
@pytest.mark.parametrize("file, pattern", sorted(REFERENCE))
def test_1000_of_1000_samples_match_every_shipped_pattern(file, pattern):
    check_all_accepted(file, pattern, CHARS, 1000, max_len=40)


def test_1000_of_1000_samples_of_clause_fsg_over_the_recipe_word_vocabulary():
    wa = load_fsg(shipped_file("grammars/clause.fsg"))
    vocab = wa.vocab
    eos, bos = vocab.id("<eos>"), vocab.id("<bos>")
    out = generate(random_lm(vocab), n=1000, max_len=20, processors=[GrammarMask(wa, eos)], eos_id=eos, bos_id=bos, seed=1)
    assert out.status == ["eos"] * 1000
    ids = [t for t in out.tokens]
    width = max(map(len, ids))
    grid = torch.tensor([t + [0] * (width - len(t)) for t in ids])
    log_p = wa.log_prob(grid, torch.tensor([len(t) for t in ids]))  # the grammar's own scores
    assert bool(torch.isfinite(log_p).all())
    # spot-check against the grammar as written: a clause is SUBJ VERB the [INTENS] ADJ OBJ PUNCT
    rest = r"\w+ the( (slightly|moderately|very|extremely))? \w+ \w+ [.!?]"  # after the subject
    sentences = [" ".join(vocab.tokens[i] for i in t) for t in ids]
    assert all(re.fullmatch(rf"(Alice|Carol|Eve|Bob|Dave) {rest}( (She|He) {rest})?", s) for s in sentences), sentences[:3]


def test_patterns_over_the_recipe_word_vocabulary():
    vocab = load_fsg(shipped_file("grammars/clause.fsg")).vocab
    tested = 0
    for (file, pattern), ref in sorted(REFERENCE.items()):
        auto = bank(file, vocab)[pattern]
        if not bool(auto.final.any()):
            continue  # no string of these words matches (no digits among them, say)
        eos, bos = vocab.id("<eos>"), vocab.id("<bos>")
        out = generate(random_lm(vocab), n=200, max_len=12, processors=[GrammarMask(auto, eos, max_len=12)],
                       eos_id=eos, bos_id=bos, seed=2)
        assert out.status == ["eos"] * 200
        assert all(re.fullmatch(ref, vocab.spell(t), re.ASCII) for t in out.tokens), pattern
        tested += 1
    assert tested >= 3  # LOCAL, LABEL, DOMAIN (words, and '.' between them)


# ---------------------------------------------------------------------- allowed sets against brute force
def brute_allowed(pattern: str, alphabet: str, prefix: str, depth: int) -> set[str]:
    """Characters c such that some string prefix + c + w (|w| < depth) fullmatches, and
    '' when the prefix itself matches."""
    out = {""} if re.fullmatch(pattern, prefix) else set()
    for c in alphabet:
        for k in range(depth):
            if any(re.fullmatch(pattern, prefix + c + "".join(w)) for w in itertools.product(alphabet, repeat=k)):
                out.add(c)
                break
    return out


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([r"a(bc)?", r"(ab|b)*c?", r"a{1,3}b|c", r"(a|b)(a|c)*"]), st.text("abc", max_size=4))
def test_allowed_tokens_equal_a_brute_force_reference(pattern, prefix):
    vocab = Vocab.chars("abc")
    auto = compile_regex(pattern, vocab)
    mask = GrammarMask(auto, vocab.id("<eos>"))
    mask.reset(1)
    alive = True
    for i, ch in enumerate(prefix):
        tok = torch.tensor([vocab.id(ch)])
        alive = bool(mask.allowed(tok))
        if not alive:
            assert not any(re.fullmatch(pattern, prefix[: i + 1] + "".join(w)) for k in range(5) for w in itertools.product("abc", repeat=k))
            return
        mask.advance(tok)
    got = {vocab.tokens[i] if vocab.tokens[i] != "<eos>" else "" for i in mask.allowed_matrix()[0].nonzero().flatten().tolist()}
    assert got == brute_allowed(pattern, "abc", prefix, depth=5)
    scores = mask(torch.zeros(1, len(vocab)))
    assert torch.equal(scores[0] > float("-inf"), mask.allowed_matrix()[0])
    every = torch.arange(len(vocab))
    mask.tracker.states = mask.tracker.states.expand(len(vocab)).clone()
    mask.tracker.steps = mask.tracker.steps.expand(len(vocab)).clone()
    assert torch.equal(mask.allowed(every), mask.allowed_matrix()[0])


def test_a_complete_match_still_allows_longer_tokens():
    # once "a" is a complete match, outlines-core allows only "bc" or the end; "b" (then "c") is in the language too
    vocab = Vocab.words(["a", "b", "c", "bc"])
    mask = GrammarMask(compile_regex(r"a(bc)?", vocab), vocab.id("<eos>"))
    mask.reset(1)
    mask.advance(torch.tensor([vocab.id("a")]))
    allowed = {vocab.tokens[i] for i in mask.allowed_matrix()[0].nonzero().flatten().tolist()}
    assert allowed == {"b", "bc", "<eos>"}


def test_budget_keeps_every_row_completable():
    vocab = Vocab.chars("ab")
    auto = compile_regex(r"(ab)+", vocab)  # even lengths only
    eos = vocab.id("<eos>")
    for budget in (3, 4, 5, 7):
        out = generate(random_lm(vocab), n=200, max_len=budget, processors=[GrammarMask(auto, eos, max_len=budget)],
                       eos_id=eos, bos_id=vocab.id("<bos>"), seed=budget)
        assert out.status == ["eos"] * 200
        assert all(re.fullmatch(r"(ab)+", vocab.spell(t)) and len(t) + 1 <= budget for t in out.tokens)


def test_states_allowing():
    vocab = Vocab.chars("ab")
    auto = compile_regex(r"a+b", vocab)
    states = states_allowing(auto, [vocab.id("b")])
    assert states and all(bool(auto.mask(torch.tensor([q]))[0, vocab.id("b")]) for q in states)
    assert set(range(auto.num_states)) - set(states) == {q for q in range(auto.num_states) if not bool(auto.mask(torch.tensor([q]))[0, vocab.id("b")])}


# ---------------------------------------------------------------------- prompts and bad input
def test_an_out_of_language_prompt_names_the_prompt_position_token_and_allowed_tokens():
    auto = bank("dates", CHARS)["DATE"]
    eos = CHARS.id("<eos>")
    good, bad = CHARS.encode("2024-0"), CHARS.encode("2024-13")
    with pytest.raises(PromptError) as err:
        generate(random_lm(CHARS), prompts=[good, bad], max_len=8, processors=[GrammarMask(auto, eos)], eos_id=eos,
                 bos_id=CHARS.id("<bos>"), vocab=CHARS)
    msg = str(err.value)
    assert msg.startswith("prompt 1, position 6: token '3' ")
    assert "allowed there: '0' (" in msg and "'1' (" in msg and "'2' (" in msg and "'4'" not in msg
    assert isinstance(err.value, NeurosymError)


def test_prompt_continuations_stay_in_the_language():
    auto = bank("dates", CHARS)["DATE"]
    eos = CHARS.id("<eos>")
    prompts = [CHARS.encode("19"), CHARS.encode("2024-1"), []]
    out = generate(random_lm(CHARS), prompts=prompts, max_len=12, processors=[GrammarMask(auto, eos)], eos_id=eos,
                   bos_id=CHARS.id("<bos>"), seed=3)
    assert out.status == ["eos"] * 3
    texts = out.texts(CHARS)
    assert all(re.fullmatch(DATE, t) for t in texts) and texts[0].startswith("19") and texts[1].startswith("2024-1")


def test_bad_arguments():
    auto = compile_regex("ab", CHARS)
    with pytest.raises(NeurosymError, match="eos_id must be a token id"):
        GrammarMask(auto, len(CHARS))
    with pytest.raises(NeurosymError, match="max_len must be a positive"):
        GrammarMask(auto, 0, max_len=0)
    mask = GrammarMask(auto, CHARS.id("<eos>"))
    mask.reset(2)
    with pytest.raises(NeurosymError, match="scores have 5 tokens"):
        mask(torch.zeros(2, 5))



# ---------------------------------------------------------------------- a byte-level BPE vocabulary
def local_bpe(vocab_size: int = 600) -> Vocab:
    """A byte-level BPE trained here on the shipped grammars and lexicons (no download),
    with <pad> <unk> <bos> <eos> as special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    text = [p.read_text(encoding="utf-8") for p in sorted(shipped_file("grammars/dates.regex").parent.glob("*.*")) if p.suffix in (".regex", ".fsg", ".pcfg", ".txt")]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<unk>", "<bos>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(text, trainer)
    return Vocab.from_tokenizer(tok)


@pytest.mark.parametrize("file, pattern", HEADLINE)
def test_1000_of_1000_samples_match_each_shipped_bank_over_a_byte_level_bpe(file, pattern):
    vocab = local_bpe()
    assert vocab.kind == "bytes"
    auto, out = sample_pattern(file, pattern, vocab, 1000, max_len=40)
    assert out.status == ["eos"] * 1000, {s: out.status.count(s) for s in set(out.status)}
    ref = re.compile(REFERENCE[(file, pattern)], re.ASCII)
    texts = [b"".join(vocab.surfaces[t] for t in row).decode("utf-8") for row in out.tokens]
    rejected = [t for t in texts if not ref.fullmatch(t)]
    assert not rejected, rejected[:5]
    assert len(set(texts)) >= 10
    assert any(len(vocab.surfaces[t]) > 1 for row in out.tokens for t in row)  # multi-byte tokens were used
