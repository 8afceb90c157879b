"""`neurosym generate` and `neurosym eval --grammar` on every kind of run the built-in `lm`
task makes (issue 28): a native word model, a native byte-level BPE model, and Hugging Face
models (a randomly initialised GPT-2 saved with save_pretrained here, no download) with a
word-level or a byte-level BPE tokenizer, with and without LoRA. Every `--json`
continuation is checked with `re.fullmatch`; grammaticality verdicts are checked against
Python's `re` and a brute-force enumeration of the grammar's (finite) language."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.data.text import SPECIALS, BpeVocab
from neurosym.vocab import Vocab
from test_lm_task import HF_CONFIG, cli, make_project, save_tiny_models, sentences

pytestmark = pytest.mark.usefixtures("one_thread")

# the corpus's clauses, written with their spaces: a byte-level vocabulary spells them exactly
SPACED = r"(the cat|the dog|a bird|my friend) (likes|sees|loves|hates) (good|bad|great|sad|happy) (food|music|books|rain) \."
# a smaller language over the same words (for grammaticality: some samples fall outside it)
SUBJECTS, VERBS, ADJECTIVES, NOUNS = ("the cat", "a bird"), ("likes", "sees"), ("good", "bad"), ("food", "music")
LANGUAGE = [" ".join(w) + " ." for w in itertools.product(SUBJECTS, VERBS, ADJECTIVES, NOUNS)]
SMALL = r"(the cat|a bird) (likes|sees) (good|bad) (food|music) \."
SMALL_FSG = """\
%start S
S A 'the' 0.5
S B 'a' 0.5
A C 'cat' 1.0
B C 'bird' 1.0
C D 'likes' 0.5
C D 'sees' 0.5
D E 'good' 0.5
D E 'bad' 0.5
E F 'food' 0.5
E F 'music' 0.5
F G '.' 1.0
G 1.0
"""
SMALL_PCFG = """\
%start S
S -> Subj V Adj N '.' [1.0]
Subj -> 'the' 'cat' [0.5] | 'a' 'bird' [0.5]
V -> 'likes' [0.5] | 'sees' [0.5]
Adj -> 'good' [0.5] | 'bad' [0.5]
N -> 'food' [0.5] | 'music' [0.5]
"""

PLAIN = """\
[run]
name = "{name}"
threads = 1

[data]
train = "corpus/train.txt"
valid = "corpus/valid.txt"
window = 16
{data}

[model]
{model}

[optim]
lr = 1e-2
batch_size = 16
epochs = {epochs}

[log]
progress = false
"""


def train(folder: Path, name: str, text: str, monkeypatch) -> Path:
    (folder / f"{name}.toml").write_text(text)
    monkeypatch.chdir(folder)
    result = cli("train", f"{name}.toml")
    assert result.exit_code == 0, result.output
    return folder / "runs" / name


def save_byte_level_gpt2(folder: Path) -> None:
    """A GPT-2 with a byte-level BPE tokenizer as real GPT-2 has (no <bos>: a sample starts
    after <|endoftext|>), trained here on the corpus, and 5 more output rows than tokens."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<pad>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(sentences(240, 0).splitlines(), trainer=trainer)
    torch.manual_seed(0)
    V = tok.get_vocab_size() + 5
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=V, n_positions=64, n_embd=32, n_layer=1, n_head=2,
                                                                 bos_token_id=0, eos_token_id=0))
    model.save_pretrained(folder / "gpt2-bytes")
    tok.save(str(folder / "gpt2-bytes" / "tokenizer.json"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The native runs: word and bpe vocabularies."""
    folder = tmp_path_factory.mktemp("runs")
    make_project(folder)
    (folder / "small.fsg").write_text(SMALL_FSG)
    (folder / "small.pcfg").write_text(SMALL_PCFG)
    with pytest.MonkeyPatch.context() as mp:
        small = "d_model = 32\nn_layers = 1\nn_heads = 2\nd_ff = 64\nmax_len = 48"
        out = {"word": train(folder, "word", PLAIN.format(name="word", data='tokenizer = "word"', model=small, epochs=8), mp),
               "bpe": train(folder, "bpe", PLAIN.format(name="bpe", data='tokenizer = "bpe"\nbpe_size = 300', model=small, epochs=3), mp)}
    return folder, out


def generate(*args: str) -> list[dict]:
    result = cli("generate", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_bpe_run_generates_words_with_spaces(runs, monkeypatch):
    folder, run = runs
    monkeypatch.chdir(folder)
    rows = generate(str(run["bpe"]), "--grammar", SPACED, "-n", "6", "--seed", "3")
    assert len(rows) == 6
    for r in rows:
        assert r["status"] == "eos" and re.fullmatch(SPACED, r["text"]), r["text"]
        assert " " in r["text"]
    vocab = Vocab.from_json(json.loads((run["bpe"] / "vocab.json").read_text()))
    assert vocab.kind == "bytes" and any(s is not None and s.startswith(b" ") for s in vocab.surfaces)  # sub-words carry the word boundary
    # unconstrained: the text spells exactly the tokens (no words run together)
    report = json.loads(cli("eval", str(run["bpe"]), "--grammar", SPACED, "-n", "20", "--json").output)["grammaticality"]
    assert report["n"] == 20
    for s in report["samples"]:  # the text is what the tokenizer's own (byte-level) decoder makes of the tokens
        assert s["text"] == vocab.tokenizer.decode(s["tokens"], skip_special_tokens=True)


def brute_force(text: str, specials: bool, ended: bool) -> tuple[bool, bool]:
    """(sentence, viable prefix) of a spelled text by enumeration of LANGUAGE (words joined by spaces)."""
    if specials:
        return False, False
    return ended and text in LANGUAGE, (not ended) and any(s.startswith(text) for s in LANGUAGE)


@pytest.mark.parametrize("grammar", ["small.fsg", "small.pcfg", SMALL.replace(" ", "")])
@pytest.mark.parametrize("max_len", [40, 4])
def test_eval_grammaticality_of_a_word_run(runs, monkeypatch, grammar, max_len):
    """Sentences and viable prefixes, against the enumerated language: the word model's
    vocabulary spells a sentence as its words run together, which the regex reads; the
    .fsg and .pcfg read words."""
    folder, run = runs
    monkeypatch.chdir(folder)
    result = cli("eval", "runs/word", "--grammar", grammar, "-n", "60", "--max-len", str(max_len), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    g = report["grammaticality"]
    assert report["ppl"] > 1 and g["n"] == 60 == len(g["samples"]) and g["max_len"] == max_len
    vocab = Vocab.from_json(json.loads((run["word"] / "vocab.json").read_text()))
    for s in g["samples"]:
        special = any(vocab.surfaces[t] is None for t in s["tokens"])
        words = " ".join(vocab.tokens[t] for t in s["tokens"])
        ended = s["status"] == "eos"
        sentence, viable = brute_force(words, special, ended)
        assert s["sentence"] == sentence and (s["viable_prefix"] is None if ended else s["viable_prefix"] == viable), s
        if not special and ended:
            assert s["sentence"] == bool(re.fullmatch(SMALL, words))  # and Python's re agrees
    assert g["sentences"] == sum(s["sentence"] for s in g["samples"]) and g["rate"] == g["sentences"] / 60
    assert g["finished"] + g["unfinished"] == 60 and g["viable"] == sum(bool(s["viable_prefix"]) for s in g["samples"])
    if max_len == 4:  # no sentence is that short: most samples are cut off, and many of those are viable prefixes
        assert g["rate"] == 0 and g["unfinished"] > 30 and g["viable_prefix_rate"] == g["viable"] / g["unfinished"] > 0
    else:
        assert 0 < g["rate"] < 1  # the model learnt the corpus, whose language is larger than the grammar's
    line = cli("eval", "runs/word", "--grammar", grammar, "-n", "60", "--max-len", str(max_len))
    assert line.exit_code == 0 and re.search(rf"\ngrammaticality {g['rate']:.4f} \({g['sentences']} of 60 unconstrained samples", line.output)


def test_eval_grammar_is_reproducible_and_errors_are_one_line(runs, monkeypatch):
    folder, run = runs
    monkeypatch.chdir(folder)
    a = json.loads(cli("eval", "runs/word", "--grammar", "small.fsg", "-n", "10", "--seed", "4", "--json").output)["grammaticality"]
    b = json.loads(cli("eval", "runs/word", "--grammar", "small.fsg", "-n", "10", "--seed", "4", "--json").output)["grammaticality"]
    assert a == b
    missing = cli("eval", "runs/word", "--grammar", "nowhere.fsg")
    assert missing.exit_code == 2 and missing.output.count("\n") == 1 and "nowhere.fsg: no such grammar file" in missing.output
    (folder / "not-a-run").mkdir()
    other = cli("eval", "not-a-run", "--grammar", "small.fsg")
    assert other.exit_code == 2 and other.output.count("\n") == 1 and "--grammar: not-a-run is not a run of the built-in lm task" in other.output


# ---------------------------------------------------------------------- Hugging Face runs
@pytest.fixture(scope="module")
def hf_runs(runs):
    folder, _ = runs
    pytest.importorskip("transformers")
    save_tiny_models(folder)
    save_byte_level_gpt2(folder)
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        out["words"] = train(folder, "hf", HF_CONFIG.format(name="hf", folder="gpt2", lora=""), mp)
        out["bytes"] = train(folder, "hfb", PLAIN.format(name="hfb", data="", model='hf = "gpt2-bytes"\nidea = { weight = 1.0, window = 4, hidden = 16 }', epochs=3), mp)
    return folder, out


def test_generate_on_a_hf_run_follows_a_regex(hf_runs, monkeypatch):
    folder, run = hf_runs
    monkeypatch.chdir(folder)
    # a word-level tokenizer: its tokens are whole words, spelled one after another
    rows = generate("runs/hf", "--grammar", "g.regex", "-n", "5", "--seed", "1")
    pattern = Path("g.regex").read_text().split("/")[1]
    assert len(rows) == 5 and all(r["status"] == "eos" and re.fullmatch(pattern, r["text"]) for r in rows), rows
    # a byte-level BPE tokenizer (no <bos>, more output rows than tokens): the continuation is the text itself
    rows = generate("runs/hfb", "--grammar", SPACED, "-n", "5", "--seed", "2")
    assert all(r["status"] == "eos" and re.fullmatch(SPACED, r["text"]) for r in rows), rows
    prompted = generate("runs/hfb", "--grammar", SPACED, "--prompt", "a bird", "-n", "3")
    assert all(r["text"].startswith("a bird ") and re.fullmatch(SPACED, r["text"]) for r in prompted), prompted
    assert all(r["model_log_prob"] < 0 for r in rows + prompted)
    # without a grammar: free samples of the run's own tokens, the text as the tokenizer decodes them
    vocab = Vocab.from_json(json.loads((run["bytes"] / "vocab.json").read_text()))
    free = generate("runs/hfb", "-n", "4", "--seed", "5")
    assert len(free) == 4 and any(" " in r["text"] for r in free)
    for r in free:
        assert r["grammar_log_prob"] is None and max(r["tokens"]) < len(vocab)
        assert r["text"] == vocab.tokenizer.decode(r["tokens"], skip_special_tokens=True)


def test_fsg_and_pcfg_on_hf_runs(hf_runs, monkeypatch):
    folder, run = hf_runs
    monkeypatch.chdir(folder)
    # words that are single tokens (the word-level tokenizer): the grammar's exact log P comes with each sample
    rows = generate("runs/hf", "--grammar", "small.fsg", "-n", "4")
    for r in rows:
        assert r["status"] == "eos" and r["text"] in {s.replace(" ", "") for s in LANGUAGE} and r["grammar_log_prob"] == pytest.approx(-4 * 0.6931471805599453)
    # a sub-word (byte-level BPE) tokenizer: the grammar is read as strings (words joined by
    # spaces, the period attached), and each sample comes with the text's exact log P
    attached = {s[: -len(" .")] + "." for s in LANGUAGE}
    vocab = Vocab.from_json(json.loads((run["bytes"] / "vocab.json").read_text()))
    for grammar in ("small.fsg", "small.pcfg"):
        rows = generate("runs/hfb", "--grammar", grammar, "-n", "4", "--seed", "3")
        for r in rows:
            assert r["status"] == "eos" and r["text"] in attached, r
            assert r["grammar_log_prob"] == pytest.approx(-4 * 0.6931471805599453, abs=1e-9)
        g = json.loads(cli("eval", "runs/hfb", "--grammar", grammar, "-n", "12", "--max-len", "6", "--json").output)["grammaticality"]
        for s in g["samples"]:
            ended = s["status"] == "eos"
            want = ended and s["text"] in attached, (not ended) and any(a.startswith(s["text"]) for a in attached)
            if any(vocab.surfaces[t] is None for t in s["tokens"]):
                want = (False, False)  # a special token inside: no sentence, and no prefix of one
            assert (s["sentence"], bool(s["viable_prefix"])) == want, s


def test_eval_grammar_on_a_hf_run(hf_runs, monkeypatch):
    folder, run = hf_runs
    monkeypatch.chdir(folder)
    report = json.loads(cli("eval", "runs/hfb", "--grammar", SPACED, "-n", "30", "--json").output)
    g = report["grammaticality"]
    assert g["n"] == 30 and g["max_len"] == 40
    vocab = Vocab.from_json(json.loads((run["bytes"] / "vocab.json").read_text()))
    for s in g["samples"]:
        assert max(s["tokens"], default=0) < len(vocab)  # the 5 rows beyond the tokenizer are never drawn
        special = any(vocab.surfaces[t] is None for t in s["tokens"])
        assert s["sentence"] == (not special and s["status"] == "eos" and re.fullmatch(SPACED, s["text"]) is not None), s


def test_generate_on_a_hf_lora_run(hf_runs, monkeypatch):
    pytest.importorskip("peft", reason="LoRA needs peft (the hf extra)")
    folder, _ = hf_runs
    with pytest.MonkeyPatch.context() as mp:
        train(folder, "hfl", HF_CONFIG.format(name="hfl", folder="gpt2", lora="lora = { r = 4, alpha = 8 }"), mp)
    monkeypatch.chdir(folder)
    rows = generate("runs/hfl", "--grammar", "g.regex", "-n", "5")
    pattern = Path("g.regex").read_text().split("/")[1]
    assert all(r["status"] == "eos" and re.fullmatch(pattern, r["text"]) for r in rows), rows
    g = json.loads(cli("eval", "runs/hfl", "--grammar", "small.fsg", "-n", "10", "--json").output)["grammaticality"]
    assert g["n"] == 10 and 0 <= g["rate"] <= 1


# ---------------------------------------------------------------------- the HF key/value cache
def test_the_hf_cache_gives_the_full_forward_logits():
    transformers = pytest.importorskip("transformers")
    from neurosym.lm.hf_model import HFCausalLM

    torch.manual_seed(0)
    base = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=40, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                                                bos_token_id=0, eos_token_id=0))
    model = HFCausalLM(base).eval()
    ids = torch.randint(0, 40, (3, 10))
    with torch.no_grad():
        full = model(ids).logits
        cache = model.new_cache(3)
        steps = [model(ids[:, :4], cache=cache).logits] + [model(ids[:, t : t + 1], cache=cache).logits for t in range(4, 10)]
        assert cache.length == 10 and torch.allclose(torch.cat(steps, 1), full, atol=1e-5)
        cache = model.new_cache(3)
        model(ids[:, :5], cache=cache)
        cache = cache.select(torch.tensor([2, 0]))  # rows dropped and reordered, as generate does
        assert torch.allclose(model(ids[[2, 0], 5:6], cache=cache).logits, full[[2, 0], 5:6], atol=1e-5)
    assert model.max_len == 16


# ---------------------------------------------------------------------- BPE word boundaries
@pytest.fixture(scope="module")
def bpe() -> BpeVocab:
    return BpeVocab.train(sentences(200, 0).splitlines() + ["Ünïcødé text, with: punctuation! 123"], vocab_size=300)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_bpe_round_trips_any_text(bpe, text):
    for special in SPECIALS:
        text = text.replace(special, "")
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text
    vocab = Vocab.from_tokenizer(bpe.tokenizer)  # the lm task's vocabulary: the same bytes, token by token
    assert vocab.encode(text) == ids and vocab.decode(ids) == text
    assert b"".join(vocab.surfaces[i] for i in ids).decode("utf-8") == text


def test_bpe_keeps_words_apart(bpe):
    ids = bpe.encode("the cat likes good food .")
    assert bpe.decode(ids) == "the cat likes good food ."
    assert bpe.tokens[: len(SPECIALS)] == SPECIALS and len(bpe) == 300
    assert bpe.encode(["the", "cat"]) == bpe.encode("the cat")  # a line of words is joined by single spaces


def test_a_hf_run_compiles_a_regex_as_the_hf_processor_does(hf_runs):
    """`generate` on a transformers run and neurosym.hf.GrammarLogitsProcessor over the same
    tokenizer and model width compile the same automaton (the token index over the tokenizer)."""
    transformers = pytest.importorskip("transformers")
    from neurosym.decode.run import load_run, run_grammar
    from neurosym.hf import GrammarLogitsProcessor

    folder, run = hf_runs
    loaded = load_run(run["bytes"])
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "gpt2-bytes" / "tokenizer.json"),
                                                     eos_token="<|endoftext|>", pad_token="<pad>")
    proc = GrammarLogitsProcessor(SPACED, tokenizer, vocab_size=len(loaded.vocab))
    guide = run_grammar(SPACED, loaded)
    assert guide is proc.guide  # one compiled guide per (grammar, vocabulary): the processor looked up the run's
    ours = guide.grammar
    assert loaded.vocab == proc.vocab and len(loaded.vocab) == loaded.size + 5
    assert ours.start == proc.grammar.start and torch.equal(ours.final, proc.grammar.final) and torch.equal(ours.delta, proc.grammar.delta)
    assert loaded.eos_id == proc.eos_token_id
