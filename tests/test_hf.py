"""The Hugging Face bridge (neurosym.hf) on a randomly initialised GPT-2 and a byte-level
BPE tokenizer trained here on the shipped grammar and lexicon files: no download.

Every generated continuation is checked with Python's ``re`` (``fullmatch``, ASCII), an
independent reference for the compiled automata.
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast  # noqa: E402

from neurosym.compile.regex import compile_regex  # noqa: E402
from neurosym.data import shipped_file  # noqa: E402
from neurosym.errors import NeurosymError  # noqa: E402
from neurosym.hf import GrammarLogitsProcessor, continuations, tokenizer_vocab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[1]
EOS = "<|endoftext|>"
MODEL_VOCAB = 1024  # more embedding rows than the tokenizer has tokens, as in many models
PROMPTS = ["Year:", "It happened in the year", "x", "Dates are written as"]  # different lengths: left padding

# independent references, written out by hand from grammars/dates.regex
YEAR = r"(19|20)[0-9]{2}"
DATE = r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"


def corpus_lines() -> list[str]:
    files = sorted((ROOT / "grammars").glob("*")) + sorted((ROOT / "lexicons").glob("*"))
    return [line for f in files if f.suffix in (".fsg", ".pcfg", ".regex", ".txt", ".lex", ".md") for line in f.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus_lines(), trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS, padding_side="left", clean_up_tokenization_spaces=False)
    hf.add_special_tokens({"additional_special_tokens": ["<|sep|>"]})
    hf.add_tokens(["1999", "café"])  # added ordinary tokens: they spell their text
    return hf


@pytest.fixture(scope="module")
def model(tokenizer) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=MODEL_VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=2,
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id)
    return GPT2LMHeadModel(config).eval()


def generate(model, tokenizer, proc, prompts, seed: int, **kwargs) -> tuple[list[str], torch.Tensor]:
    """Continuations of ``prompts`` under ``proc``; also the generated ids (B, new)."""
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    torch.manual_seed(seed)
    kwargs.setdefault("do_sample", True)
    kwargs.setdefault("max_new_tokens", 40)
    out = model.generate(**enc, logits_processor=[proc], pad_token_id=tokenizer.eos_token_id, **kwargs)
    P = enc["input_ids"].shape[1]
    return continuations(tokenizer, out, P), out[:, P:]


def assert_all_match(pattern: str, texts: list[str], new_ids: torch.Tensor, eos: int) -> None:
    bad = [t for t in texts if not re.fullmatch(pattern, t, re.ASCII)]
    assert not bad, f"{len(bad)} of {len(texts)} continuations do not fullmatch {pattern}: {bad[:5]}"
    assert bool((new_ids == eos).any(dim=1).all()), "every row ends with the end-of-sequence token"


# ---------------------------------------------------------------------- the vocabulary
def test_vocab_spells_what_the_tokenizer_decodes(tokenizer):
    vocab = tokenizer_vocab(tokenizer, MODEL_VOCAB)
    assert len(vocab) == MODEL_VOCAB and vocab.kind == "bytes"
    specials = set(tokenizer.all_special_ids)
    assert specials == {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|sep|>")}
    assert all(vocab.surfaces[i] is None for i in specials)
    assert all(s is None for s in vocab.surfaces[len(tokenizer):])  # the model's extra rows spell nothing
    # tokenizers' ByteLevel decoder reads an added token's text through the byte alphabet
    # too ("é" is the stand-in of byte 0xE9), so "café" decodes as "caf\ufffd": the
    # surface is what decode gives, not the text the token was added as
    cafe = tokenizer.convert_tokens_to_ids("café")
    assert vocab.surfaces[cafe] == b"caf\xe9" and tokenizer.decode([cafe]) == "caf\ufffd"
    assert vocab.surfaces[tokenizer.convert_tokens_to_ids("1999")] == b"1999"
    ordinary = [i for i in range(len(tokenizer)) if i not in specials]
    for i in ordinary:
        assert tokenizer.decode([i], clean_up_tokenization_spaces=False) == vocab.surfaces[i].decode("utf-8", "replace"), i
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):  # sequences of tokens that may split UTF-8 characters
        ids = [ordinary[int(j)] for j in torch.randint(len(ordinary), (12,), generator=gen)]
        assert tokenizer.decode(ids, clean_up_tokenization_spaces=False) == b"".join(vocab.surfaces[i] for i in ids).decode("utf-8", "replace")


def test_vocab_of_a_sentencepiece_style_tokenizer():
    from tokenizers.implementations import SentencePieceBPETokenizer

    sp = SentencePieceBPETokenizer()
    sp.train_from_iterator(corpus_lines(), vocab_size=400, special_tokens=["</s>"], show_progress=False)
    hf = PreTrainedTokenizerFast(tokenizer_object=sp._tokenizer, eos_token="</s>", clean_up_tokenization_spaces=False)
    vocab = tokenizer_vocab(hf)
    for i in range(len(hf)):
        if i == hf.eos_token_id:
            assert vocab.surfaces[i] is None
            continue
        text = hf.decode([1, i], clean_up_tokenization_spaces=False)  # after a token: no leading-space strip
        assert text == (vocab.surfaces[1] + vocab.surfaces[i]).decode().lstrip(" ") or text == (vocab.surfaces[1] + vocab.surfaces[i]).decode(), i
    assert any(s.startswith(b" ") for s in vocab.surfaces if s)  # "▁" spells a space
    auto = compile_regex("[a-z]+", vocab)
    ids = hf("hello", add_special_tokens=False)["input_ids"]
    assert auto.accepts(ids) == bool(re.fullmatch("[a-z]+", vocab.spell(ids).decode()))


def test_unsupported_tokenizers_are_clear_errors(tokenizer):
    with pytest.raises(NeurosymError, match="fast tokenizer"):
        tokenizer_vocab("gpt2")
    wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    wordpiece.decoder = decoders.WordPiece()
    with pytest.raises(NeurosymError, match="WordPiece"):
        tokenizer_vocab(PreTrainedTokenizerFast(tokenizer_object=wordpiece, unk_token="[UNK]"))
    with pytest.raises(NeurosymError, match="vocab_size"):
        tokenizer_vocab(tokenizer, 0)


# ---------------------------------------------------------------------- generation
def test_the_documented_example_runs_as_written(model, tokenizer):
    text = (ROOT / "docs" / "hf.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```py\n(.*?)```", text, re.S)
    assert len(blocks) == 3
    env = {"model": model, "tokenizer": tokenizer}
    torch.manual_seed(0)
    exec(compile(blocks[0], "docs/hf.md", "exec"), env)
    P = len(tokenizer("Year:")["input_ids"])
    [year] = continuations(tokenizer, env["out"], P)
    assert re.fullmatch(YEAR, year, re.ASCII) and tokenizer.eos_token_id in env["out"][0, P:].tolist()
    exec(compile(blocks[1], "docs/hf.md", "exec"), env)
    dates = continuations(tokenizer, env["out"], env["prompt"]["input_ids"].shape[1])
    assert len(dates) == 2 and all(re.fullmatch(DATE, d, re.ASCII) for d in dates), dates
    exec(compile(blocks[2], "docs/hf.md", "exec"), env)  # a vocabulary and a guide built once, a processor per request
    proc, guide = env["proc"], env["guide"]
    assert proc.guide is guide and proc.vocab is env["vocab"]
    assert GrammarLogitsProcessor("grammars/json.pcfg", tokenizer, vocab_size=model.config.vocab_size).guide is guide  # looked up
    prompt = tokenizer("Data:", return_tensors="pt")
    out = model.generate(**prompt, logits_processor=[proc], do_sample=True, max_new_tokens=30, pad_token_id=tokenizer.eos_token_id)
    [text] = continuations(tokenizer, out, prompt["input_ids"].shape[1])
    m = guide.matcher()
    assert all(m.accept(t) for t in out[0, prompt["input_ids"].shape[1]:].tolist() if t != tokenizer.eos_token_id), text
    if tokenizer.eos_token_id in out[0].tolist():  # it ended: a whole JSON text
        assert m.can_end(), text


@pytest.mark.parametrize(
    "grammar, reference",
    [
        (YEAR, YEAR),
        ("grammars/dates.regex:DATE", DATE),
        ("grammars/months.txt", None),  # the shipped word list: its words, joined by |
        (r"(red|green|blue|café)( (and|or) (red|green|blue|café))?", None),  # an alternation, with a non-ASCII word
    ],
    ids=["year", "bank-DATE", "word-list", "alternation"],
)
def test_200_of_200_sampled_continuations_fullmatch(model, tokenizer, grammar, reference):
    if reference is None and grammar.endswith(".txt"):
        words = [w.strip() for w in shipped_file(grammar).read_text().splitlines() if w.strip() and not w.startswith("#")]
        reference = "|".join(map(re.escape, words))
    reference = reference or grammar
    proc = GrammarLogitsProcessor(grammar, tokenizer)
    texts: list[str] = []
    for seed in range(4):  # 4 batches of 50, mixed prompt lengths, one processor reused
        got, new = generate(model, tokenizer, proc, PROMPTS * 12 + PROMPTS[:2], seed)
        assert_all_match(reference, got, new, tokenizer.eos_token_id)
        texts += got
    assert len(texts) == 200
    assert len(set(texts)) > 1  # sampling, not one fixed string


def test_greedy_and_beam_search(model, tokenizer):
    proc = GrammarLogitsProcessor("grammars/dates.regex:DATE", tokenizer)
    texts, new = generate(model, tokenizer, proc, PROMPTS, seed=0, do_sample=False)
    assert_all_match(DATE, texts, new, tokenizer.eos_token_id)
    again, _ = generate(model, tokenizer, proc, PROMPTS, seed=1, do_sample=False)
    assert again == texts  # greedy is deterministic, and the reused processor started afresh
    beams, new = generate(model, tokenizer, proc, PROMPTS, seed=0, do_sample=False, num_beams=3, max_new_tokens=14)
    assert_all_match(DATE, beams, new, tokenizer.eos_token_id)


def test_an_unbounded_pattern_ends_within_the_budget(model, tokenizer):
    pattern = r"[a-z]+( [a-z]+)*"
    proc = GrammarLogitsProcessor(pattern, tokenizer, max_new_tokens=8)
    texts, new = generate(model, tokenizer, proc, PROMPTS * 5, seed=3, max_new_tokens=8)
    assert_all_match(pattern, texts, new, tokenizer.eos_token_id)


def test_state_advances_one_token_per_call(model, tokenizer):
    """The prompt is seen once, then each call feeds each row exactly one new token."""
    proc = GrammarLogitsProcessor(r"[0-9]{3,6}", tokenizer)
    calls = {"reset": 0, "advance": 0}
    inner = proc.processors[0]
    reset, advance = inner.reset, inner.advance

    def count_reset(*a, **k):
        calls["reset"] += 1
        return reset(*a, **k)

    def count_advance(tokens, done=None):
        calls["advance"] += 1
        assert tokens.shape == (len(PROMPTS),)
        return advance(tokens, done)

    inner.reset, inner.advance = count_reset, count_advance
    enc = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    steps = []
    proc_call = proc.__call__

    class Spy(transformers.LogitsProcessor):
        def __call__(self, input_ids, scores):
            steps.append(input_ids.shape[1])
            return proc_call(input_ids, scores)

    torch.manual_seed(0)
    model.generate(**enc, logits_processor=[Spy()], do_sample=True, max_new_tokens=10, pad_token_id=tokenizer.eos_token_id)
    assert proc.prompt_length == enc["input_ids"].shape[1] == steps[0]
    assert steps == list(range(steps[0], steps[0] + len(steps)))
    assert calls == {"reset": 1, "advance": len(steps) - 1}


def test_scores_are_not_modified_in_place_and_extra_ids_are_masked(tokenizer):
    proc = GrammarLogitsProcessor(YEAR, tokenizer)
    ids = torch.tensor(tokenizer(["Year:"])["input_ids"])
    scores = torch.zeros(1, MODEL_VOCAB)
    out = proc(ids, scores)
    assert bool((scores == 0).all())
    allowed = torch.isfinite(out[0]).nonzero().flatten().tolist()
    vocab = proc.vocab
    assert allowed and all(vocab.surfaces[i] is not None and re.fullmatch(rf"(1|19|2|20)|{YEAR}|(19|20)[0-9]", vocab.surfaces[i].decode()) for i in allowed)
    assert tokenizer.convert_tokens_to_ids("1999") in allowed
    assert not bool(torch.isfinite(out[0, len(tokenizer):]).any())
    nine = torch.tensor([[tokenizer.convert_tokens_to_ids("1999")]])
    out = proc(torch.cat([ids, nine], 1), torch.zeros(1, MODEL_VOCAB))  # a complete year: only the end is left
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == [tokenizer.eos_token_id]


# ---------------------------------------------------------------------- weighted grammars
FSG = """
%separator ""
S  S  'a'  0.25
S  E  'b'  0.75
E  1.0
"""


def zero_model(model):
    """The model with every logit 0: sampling then draws from the grammar prior alone."""
    flat = copy.deepcopy(model)
    with torch.no_grad():
        flat.lm_head.weight.zero_()
    return flat


def test_fsg_mask_and_prior(model, tokenizer, tmp_path):
    path = tmp_path / "ab.fsg"
    path.write_text(FSG)
    texts, new = generate(model, tokenizer, GrammarLogitsProcessor(path, tokenizer), PROMPTS * 10, seed=0)
    assert_all_match("a*b", texts, new, tokenizer.eos_token_id)
    flat = zero_model(model)
    proc = GrammarLogitsProcessor(str(path), tokenizer, prior_weight=1.0)
    texts, new = generate(flat, tokenizer, proc, PROMPTS * 100, seed=1)
    assert_all_match("a*b", texts, new, tokenizer.eos_token_id)
    share = sum(t == "b" for t in texts) / len(texts)  # P("b") = 0.75 under the grammar
    assert abs(share - 0.75) < 4 * math.sqrt(0.75 * 0.25 / len(texts)), share


def test_pcfg_prior(model, tokenizer, tmp_path):
    pytest.importorskip("neurosym.decode.pcfg", reason="the PCFG processors (neurosym.decode.pcfg) are not available")
    path = tmp_path / "sums.pcfg"
    path.write_text("%separator \"\"\nS -> S '+' N [0.3] | N [0.7]\nN -> '1' [0.5] | '2' [0.5]\n")
    proc = GrammarLogitsProcessor(str(path), tokenizer, prior_weight=1.0)
    texts, new = generate(zero_model(model), tokenizer, proc, PROMPTS * 25, seed=0)
    assert_all_match(r"[12](\+[12])*", texts, new, tokenizer.eos_token_id)
    share = sum(len(t) == 1 for t in texts) / len(texts)  # P(one number) = 0.7
    assert abs(share - 0.7) < 4 * math.sqrt(0.7 * 0.3 / len(texts)), share


# ---------------------------------------------------------------------- bad input
def test_bad_input_is_a_clear_error(model, tokenizer, tmp_path):
    with pytest.raises(NeurosymError, match="no such grammar file"):
        GrammarLogitsProcessor("nope.regex:DATE", tokenizer)
    with pytest.raises(NeurosymError, match="name one as"):
        GrammarLogitsProcessor("grammars/dates.regex", tokenizer)
    with pytest.raises(NeurosymError, match="no pattern named"):
        GrammarLogitsProcessor("grammars/dates.regex:NOPE", tokenizer)
    with pytest.raises(NeurosymError, match="backreference|regular|not supported"):
        GrammarLogitsProcessor(r"(a)\1", tokenizer)
    with pytest.raises(NeurosymError, match="weighted grammar"):
        GrammarLogitsProcessor(YEAR, tokenizer, prior_weight=1.0)
    with pytest.raises(NeurosymError, match="not the tokenizer's vocabulary"):
        GrammarLogitsProcessor(compile_regex(YEAR), tokenizer)
    with pytest.raises(NeurosymError, match="eos_token_id"):
        GrammarLogitsProcessor(YEAR, tokenizer, eos_token_id=tokenizer.convert_tokens_to_ids("1999"))
    fsg = tmp_path / "words.fsg"
    fsg.write_text("S E 'zzzzqqq' 1.0\nE 1.0\n")  # not a token: spelled by several (docs/strings.md)
    texts, new = generate(model, tokenizer, GrammarLogitsProcessor(fsg, tokenizer), PROMPTS, seed=0)
    assert texts == ["zzzzqqq"] * len(PROMPTS)
    proc = GrammarLogitsProcessor(YEAR, tokenizer, vocab_size=MODEL_VOCAB)
    with pytest.raises(NeurosymError, match="vocab_size=900"):
        proc(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 900))
    compiled = compile_regex(YEAR, tokenizer_vocab(tokenizer, MODEL_VOCAB))
    texts, new = generate(model, tokenizer, GrammarLogitsProcessor(compiled, tokenizer, vocab_size=MODEL_VOCAB), PROMPTS, seed=0)
    assert_all_match(YEAR, texts, new, tokenizer.eos_token_id)
