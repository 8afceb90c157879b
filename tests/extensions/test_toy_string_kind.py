"""A file kind registered from outside that reads as a language of strings over a tokenizer
(issue 41): a toy grammar format (``.toyc``: ``NAME -> word NAME ... | ...`` rules, every
alternative equally likely, capitalised symbols are nonterminals) turned into ``.pcfg``
text and compiled with neurosym's own functions. Its :class:`~neurosym.kinds.Kind`
declares ``strings=``, a loader that spells the compiled rules over any byte vocabulary,
so ``neurosym.compile_guide("x.toyc", bpe_vocab)`` gives a string guide and
``neurosym.hf.GrammarLogitsProcessor("x.toyc", tokenizer)`` constrains a transformers
model to the toy language. The kind is unregistered after each test."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
import torch


from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

import neurosym  # noqa: E402
from neurosym import kinds  # noqa: E402
from neurosym.compile.cnf import to_cnf  # noqa: E402
from neurosym.compile.pcfg import RuleTensors, compile_pcfg  # noqa: E402
from neurosym.compile.pcfg_check import check_pcfg  # noqa: E402
from neurosym.compile.regex import Limits  # noqa: E402
from neurosym.compile.spelling import SpelledGrammar, spell  # noqa: E402
from neurosym.decode.guide import RulesGuide, StringGuide  # noqa: E402
from neurosym.dsl.pcfg import parse_pcfg  # noqa: E402
from neurosym.errors import NeurosymError, SourceError  # noqa: E402
from neurosym.vocab import Vocab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

EOS = "<|endoftext|>"
TOY = """\
# a toy language: every alternative equally likely; capitalised symbols are rules
S      -> the ANIMAL VERB | a ANIMAL VERB quietly
ANIMAL -> cat | dog | small ANIMAL
VERB   -> sleeps | runs | eats fish
"""
# the same language, written independently as a Python regex (ANIMAL recurses on the left: a regular language)
SENTENCE = re.compile(r"the (small )*(cat|dog) (sleeps|runs|eats fish)|a (small )*(cat|dog) (sleeps|runs|eats fish) quietly")


# ---------------------------------------------------------------------- the toy kind
def toyc_to_pcfg(path: Path) -> str:
    """A ``.toyc`` file as ``.pcfg`` text: alternatives equally likely, words quoted."""
    lines = ["%start S"]
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        head, arrow, body = line.partition("->")
        if not arrow or not head.strip().isidentifier() or not head.strip()[0].isupper():
            raise SourceError("expected NAME -> symbols | symbols ...", str(path), n, 1)
        alts = [a.split() for a in body.split("|")]
        if any(not a for a in alts):
            raise SourceError("an empty alternative", str(path), n, 1)
        p = 1.0 / len(alts)
        lines.append(f"{head.strip()} -> " + " | ".join(" ".join(s if s[0].isupper() else repr(s) for s in a) + f" [{p!r}]" for a in alts))
    return "\n".join(lines) + "\n"


def toyc_cnf(path: Path):
    grammar = parse_pcfg(toyc_to_pcfg(path), path)
    check_pcfg(grammar, strict=True)
    return to_cnf(grammar, check=False)


def load_toyc(path: Path, vocab: Vocab | None, limits: Limits) -> RuleTensors:
    """Over no vocabulary or a word vocabulary: the rules over the words (the terminals are the tokens)."""
    return compile_pcfg(toyc_cnf(path), vocab, limits)


def toyc_strings(path: Path, vocab: Vocab, limits: Limits) -> SpelledGrammar:
    """Over a tokenizer's vocabulary: the rules over their own words, spelled with the default separator."""
    return spell(compile_pcfg(toyc_cnf(path), None, limits), vocab, None, str(path))


TOYC = kinds.Kind("toyc", ".toyc", load_toyc, title="a .toyc toy grammar", grammar=True, strings=toyc_strings)


@pytest.fixture
def toyc_kind():
    kinds.register(TOYC)
    yield TOYC
    kinds.unregister("toyc")


@pytest.fixture
def toyc_file(tmp_path) -> Path:
    path = tmp_path / "animals.toyc"
    path.write_text(TOY, encoding="utf-8")
    return path


def sentences(max_small: int = 2) -> list[str]:
    """Every sentence with at most ``max_small`` 'small's."""
    out = []
    for det, k, noun, verb in itertools.product(["the", "a"], range(max_small + 1), ["cat", "dog"], ["sleeps", "runs", "eats fish"]):
        out.append(" ".join([det] + ["small"] * k + [noun, verb] + (["quietly"] if det == "a" else [])))
    return out


def viable(text: str) -> bool:
    """``text`` is a prefix of a sentence (enough 'small's to cover it)."""
    return any(s.startswith(text) for s in sentences(max_small=text.count("small") + 1))


@pytest.fixture(scope="module")
def hf_tokenizer():
    """A fast transformers tokenizer around a small byte-level BPE. transformers is imported
    here, not at the top: importing its models imports triton, and the Triton kernel tests
    that run later in the session import triton under its CPU interpreter first."""
    transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    lines = sentences(3) * 4 + ["the quick brown fox jumps over the lazy dog", "cats and dogs sleep quietly", "fish eat small things"] * 10
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines, trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS, padding_side="left", clean_up_tokenization_spaces=False)


@pytest.fixture(scope="module")
def hf():
    """neurosym.hf, imported when a test needs it (see hf_tokenizer)."""
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    from neurosym import hf as module  # lazy: transformers imports triton

    return module


@pytest.fixture(scope="module")
def model(hf_tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel  # lazy: see hf_tokenizer
    torch.manual_seed(0)
    eos = hf_tokenizer.eos_token_id
    config = GPT2Config(vocab_size=len(hf_tokenizer), n_positions=64, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    return GPT2LMHeadModel(config).eval()


# ---------------------------------------------------------------------- tests
def test_the_oracle_is_the_toy_language():
    assert all(SENTENCE.fullmatch(s) for s in sentences(3))
    assert len(set(sentences(2))) == 2 * 3 * 2 * 3
    assert not SENTENCE.fullmatch("a cat sleeps") and viable("a cat sleeps") and viable("the sm") and not viable("the cat quietly")


def test_a_toy_string_kind_gives_a_string_guide(toyc_kind, toyc_file, hf_tokenizer):
    bpe = Vocab.from_tokenizer(hf_tokenizer)
    guide = neurosym.compile_guide(str(toyc_file), bpe)
    assert isinstance(guide, StringGuide) and guide.weighted and not guide.bounded
    assert isinstance(guide.grammar, SpelledGrammar) and guide.grammar.vocab is bpe
    assert neurosym.compile_guide(str(toyc_file), bpe) is guide  # cached like a shipped kind
    tokenized_across_words = 0
    for text in ["the cat sleeps", "a small small dog eats fish quietly", "the small cat eats fish", "a dog runs quietly"]:
        ids = hf_tokenizer(text)["input_ids"]
        assert b"".join(bpe.surfaces[i] for i in ids) == text.encode()
        tokenized_across_words += any(b" " in bpe.surfaces[i].strip(b" ") or bpe.surfaces[i].startswith(b" ") for i in ids)
        m = guide.matcher()
        for i, t in enumerate(ids):
            assert not m.can_end(), (text, i)  # no sentence is a proper prefix of another
            assert m.allowed()[t], (text, bpe.surfaces[t])
            assert m.accept(t), (text, bpe.surfaces[t])
        assert m.can_end(), text
        assert not m.allowed()[hf_tokenizer.eos_token_id]
        lp = m.log_probs()
        assert lp[len(bpe)] == pytest.approx(0.0, abs=1e-12)  # after a whole sentence the text must end
        sentence, ok = guide.membership([ids])
        assert sentence[0] and ok[0]
    assert tokenized_across_words > 0  # the BPE's tokens do not follow the grammar's words


def test_a_toy_string_kind_refuses_non_sentences(toyc_kind, toyc_file, hf_tokenizer):
    bpe = Vocab.from_tokenizer(hf_tokenizer)
    guide = neurosym.compile_guide(str(toyc_file), bpe)
    refused = 0
    for text, done in [("the dog eats quietly", "the dog eats"), ("the cat sleeps quietly", "the cat sleeps"), ("a cat dog", "a cat"),
                       ("small cat", ""), ("the  cat sleeps", "the ")]:
        ids = hf_tokenizer(text)["input_ids"]
        m = guide.matcher()
        for t in ids:
            if not m.accept(t):
                break
        taken = b"".join(bpe.surfaces[i] for i in m.tokens).decode()
        assert len(m.tokens) < len(ids), text  # some token was refused
        assert taken.startswith(done[: len(taken)]) and len(taken) <= len(text)
        assert viable(taken) and m.can_end() == bool(SENTENCE.fullmatch(taken)), (text, taken)
        refused += 1
    m = guide.matcher()  # a viable prefix that is no sentence: every token taken, no end
    assert all(m.accept(t) for t in hf_tokenizer("a cat sleeps")["input_ids"]) and not m.can_end()
    assert refused == 5


def test_a_toy_string_kind_over_its_own_words_is_rules(toyc_kind, toyc_file):
    rules = neurosym.load(toyc_file)
    assert isinstance(rules, RuleTensors)
    guide = neurosym.compile_guide(rules, rules.vocab)
    assert isinstance(guide, RulesGuide)
    words = [rules.vocab.id(w) for w in "a small dog eats fish quietly".split()]
    m = guide.matcher()
    assert all(m.accept(w) for w in words) and m.can_end()
    # a (1/2), one small then dog (1/3 * 1/3), eats fish (1/3)
    assert guide.sentence_log_prob(words) == pytest.approx(math.log(0.5 / 27), abs=1e-12)


def test_generate_with_a_toy_string_kind_writes_only_toy_sentences(toyc_kind, toyc_file, hf_tokenizer, model, hf):
    eos = hf_tokenizer.eos_token_id
    drawn: list[tuple[str, bool]] = []
    for prior_weight in (0.0, 1.0):
        proc = hf.GrammarLogitsProcessor(str(toyc_file), hf_tokenizer, prior_weight=prior_weight)
        assert isinstance(proc.guide, StringGuide)
        for seed in range(2):
            enc = hf_tokenizer([EOS] * 16, return_tensors="pt")
            torch.manual_seed(seed)
            out = model.generate(**enc, logits_processor=[proc], do_sample=True, max_new_tokens=16, pad_token_id=eos)
            new = out[:, enc["input_ids"].shape[1]:]
            finished = (new == eos).any(dim=1).tolist()
            drawn += list(zip(hf.continuations(hf_tokenizer, out, enc["input_ids"].shape[1]), finished))
    done = [t for t, f in drawn if f]
    assert len(drawn) == 64 and len(done) >= 16
    for text in done:
        assert SENTENCE.fullmatch(text), text
    for text, f in drawn:
        assert viable(text), text  # unfinished rows: a prefix of a sentence
    assert len(set(done)) >= 4  # sampling, not one fixed path
    with pytest.raises(NeurosymError, match="budget"):  # a grammar read as strings is not bounded
        hf.GrammarLogitsProcessor(str(toyc_file), hf_tokenizer, max_new_tokens=8)


def test_the_toy_string_kind_is_gone_after_unregister(tmp_path, hf_tokenizer):
    path = tmp_path / "gone.toyc"
    path.write_text(TOY, encoding="utf-8")
    with pytest.raises(NeurosymError, match="unknown kind|unknown file kind"):
        neurosym.compile_guide(str(path), Vocab.from_tokenizer(hf_tokenizer))


def zebra_strings(path: Path, vocab: Vocab, limits: Limits) -> SpelledGrammar:
    """Another loader for the same suffix: the one-sentence language 'zebra'."""
    return spell(compile_pcfg(parse_pcfg("S -> 'zebra' [1.0]\n")), vocab)


def takes(guide, hf_tokenizer, text: str) -> bool:
    m = guide.matcher()
    return all(m.accept(t) for t in hf_tokenizer(text)["input_ids"]) and m.can_end()


def unregister_toyc() -> None:
    if any(k.name == "toyc" for k in kinds.registered()):
        kinds.unregister("toyc")


def test_the_guide_cache_follows_the_kind_registry(tmp_path, hf_tokenizer):
    path = tmp_path / "cached.toyc"
    path.write_text(TOY, encoding="utf-8")
    bpe = Vocab.from_tokenizer(hf_tokenizer)
    kinds.register(TOYC)
    try:
        first = neurosym.compile_guide(str(path), bpe)
        assert takes(first, hf_tokenizer, "the cat sleeps")
        kinds.unregister("toyc")
        kinds.register(kinds.Kind("toyc", ".toyc", load_toyc, grammar=True, strings=zebra_strings))
        replaced = neurosym.compile_guide(str(path), bpe)
        assert takes(replaced, hf_tokenizer, "zebra") and not takes(replaced, hf_tokenizer, "the cat sleeps")
        kinds.unregister("toyc")
        with pytest.raises(NeurosymError, match="a file of unknown kind"):
            neurosym.compile_guide(str(path), bpe)
    finally:
        unregister_toyc()


def test_a_kind_registered_again_with_replace_replaces_it(hf_tokenizer, tmp_path):
    path = tmp_path / "again.toyc"
    path.write_text(TOY, encoding="utf-8")
    kinds.register(TOYC)
    try:
        zebra = kinds.Kind("toyc", ".toyc", load_toyc, grammar=True, strings=zebra_strings)
        assert kinds.register(zebra, replace=True) is zebra
        assert kinds.kind_of(path) is zebra
        assert takes(neurosym.compile_guide(str(path), Vocab.from_tokenizer(hf_tokenizer), cache=False), hf_tokenizer, "zebra")
    finally:
        unregister_toyc()
