"""Issue 29's sampling Must-show: a randomly initialised GPT-2 over a byte-level BPE trained
here (no download), constrained by ``GrammarLogitsProcessor("grammars/json.pcfg", ...)``
``arith.pcfg`` and ``clause.fsg``: every finished sample is accepted by an independent
reference (``json.loads``; lark's Earley parser of the same grammar; the FSG's word-level
automaton, which never sees the string runtime, after splitting the text by the default
separator policy) and every unfinished one is a viable prefix (the ``regex`` package's
partial match of the grammar; for arith, written by the policy and completable; for the FSG, its complete words are a viable word prefix
and the partial last word begins a word that can follow)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
pytest.importorskip("regex", reason="the bench extra's regex package judges the prefixes")

from lark import Lark  # noqa: E402
from lark.exceptions import LarkError  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast  # noqa: E402

from neurosym.compile.export import PrefixJudge, to_lark  # noqa: E402
from neurosym.bench.decode_cfg import json_documents  # noqa: E402
from neurosym.compile.fsg import load_fsg  # noqa: E402
from neurosym.decode.run import membership  # noqa: E402
from neurosym.dsl.pcfg import read_pcfg  # noqa: E402
from neurosym.hf import GrammarLogitsProcessor, continuations  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

ROOT = Path(__file__).resolve().parents[1]
EOS = "<|endoftext|>"
SAMPLES, BATCH, MAX_NEW = 1000, 100, 32


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    files = sorted((ROOT / "grammars").glob("*.*"))
    lines = [line for f in files if f.suffix in (".fsg", ".pcfg", ".regex", ".txt") for line in f.read_text(encoding="utf-8").splitlines()]
    lines += [line for d in json_documents() for line in d.splitlines()]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS, padding_side="left", clean_up_tokenization_spaces=False)


@pytest.fixture(scope="module")
def model(tokenizer) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=128, n_embd=64, n_layer=2, n_head=2,
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id)
    return GPT2LMHeadModel(config).eval()


def samples(model, tokenizer, grammar: str, n: int = SAMPLES) -> list[tuple[str, bool]]:
    """``n`` continuations of an empty prompt (the end token as prompt) under the
    grammar's mask, each with whether it finished (emitted the end token)."""
    proc = GrammarLogitsProcessor(grammar, tokenizer)
    out: list[tuple[str, bool]] = []
    for seed in range(n // BATCH):
        enc = tokenizer([EOS] * BATCH, return_tensors="pt")
        torch.manual_seed(seed)
        ids = model.generate(**enc, logits_processor=[proc], do_sample=True, max_new_tokens=MAX_NEW, pad_token_id=tokenizer.eos_token_id)
        new = ids[:, 1:]
        finished = (new == tokenizer.eos_token_id).any(dim=1).tolist()
        out += list(zip(continuations(tokenizer, ids, 1), finished))
    return out


def test_json_samples_are_json(model, tokenizer):
    judge = PrefixJudge(read_pcfg(ROOT / "grammars" / "json.pcfg"))
    drawn = samples(model, tokenizer, str(ROOT / "grammars" / "json.pcfg"))
    done = [t for t, f in drawn if f]
    print(f"json.pcfg: {len(done)} of {len(drawn)} samples finished")
    assert len(drawn) == SAMPLES and len(done) > 0
    for text in done:
        json.loads(text)  # every finished sample: raises if it is not JSON
    for text, f in drawn:
        assert judge.viable(text), text  # finished or not, a prefix of the grammar's texts


def test_arith_samples_parse(model, tokenizer):
    grammar = read_pcfg(ROOT / "grammars" / "arith.pcfg")
    # arith.pcfg keeps the default separator (single spaces, no space inside brackets):
    # lark reads the same rules with spaces ignored (a superset of the separator policy)
    parser = Lark(to_lark(grammar) + '%ignore " "\n', start="start", parser="earley", lexer="dynamic")
    drawn = samples(model, tokenizer, str(ROOT / "grammars" / "arith.pcfg"))
    done = [t for t, f in drawn if f]
    print(f"arith.pcfg: {len(done)} of {len(drawn)} samples finished")
    assert len(drawn) == SAMPLES and len(done) > 0
    for text in done:
        try:
            parser.parse(text)
        except LarkError as err:
            raise AssertionError(f"{text!r}: {err}") from None
    for text, f in drawn:  # unfinished: written by the separator policy, and completable
        if not f:
            assert arith_viable(text, parser), text


def arith_join(words: list[str]) -> str:
    """The default separator policy on arith's words, written out independently: one space
    between words, none after ``(`` and none before ``)``."""
    out = words[0] if words else ""
    for prev, w in zip(words, words[1:]):
        out += w if prev == "(" or w == ")" else " " + w
    return out


def arith_viable(text: str, parser) -> bool:
    """Is ``text`` a prefix of some sentence of arith.pcfg under the default policy? Its
    words must be written by the policy (a trailing separator allowed where a word may
    follow), and the canonical completion must parse: a number after an operator, ``(``
    or nothing, then ``)`` for each open bracket. A last word that could be cut (``1``
    of ``10``) is a whole number here too, so the completion covers it."""
    words = re.findall(r"[0-9]+|[-+*/()]", text)
    if "".join(words) != text.replace(" ", ""):
        return False
    join = arith_join(words)
    if text not in (join, join + " ") or (text.endswith(" ") and words and words[-1] == "("):
        return False
    done = list(words)
    if not done or done[-1] in "+-*/(":
        done.append("1")
    done += [")"] * (words.count("(") - words.count(")"))
    try:
        parser.parse(arith_join(done))
    except LarkError:
        return False
    return True


def test_clause_samples_are_sentences_of_the_fsg(model, tokenizer):
    auto = load_fsg(ROOT / "grammars" / "clause.fsg")
    words = [w for w in auto.vocab.tokens if not w.startswith("<")]
    drawn = samples(model, tokenizer, str(ROOT / "grammars" / "clause.fsg"))
    done = [t for t, f in drawn if f]
    print(f"clause.fsg: {len(done)} of {len(drawn)} samples finished")
    assert len(drawn) == SAMPLES and len(done) > 0

    def ids(text: str) -> list[int] | None:  # the default policy: words apart by one space, . ! ? attached
        parts = re.findall(r"[^ .!?]+|[.!?]", text)
        if " ".join(parts).replace(" .", ".").replace(" !", "!").replace(" ?", "?") != text:
            return None  # not written by the policy (a double space, a leading space, ...)
        return [auto.vocab.id(w) if w in auto.vocab else -1 for w in parts]

    for text in done:
        row = ids(text)
        assert row is not None and -1 not in row, text
        sentence, _ = membership(auto, [row])
        assert bool(sentence[0]), text
    for text, f in drawn:
        if f:
            continue
        complete, partial = (text, "") if text.endswith((" ", ".", "!", "?")) or not text else text.rsplit(" ", 1) if " " in text else ("", text)
        if partial and partial[-1] in ".!?":  # a word then its attached mark: both complete
            complete, partial = text, ""
        row = ids(complete.rstrip(" ")) if complete.strip() else []
        assert row is not None and -1 not in row, text
        heads = [w for w in words if w.startswith(partial)] if partial else [None]
        rows = [row + ([auto.vocab.id(w)] if w is not None else []) for w in heads]
        _, viable = membership(auto, rows)
        assert bool(viable.any()), text


OTHER_ENGINES = ROOT / "tests" / "data" / "grammars"


def test_other_engines_grammars_constrain_a_gpt2(model, tokenizer):
    """Issue 42: a user's own Lark grammar and llama.cpp's documented JSON GBNF, read as
    they are, constrain the model: every finished sample is in the language as lark (for
    the .lark) and ``json.loads`` (for the .gbnf) read it."""
    lark_file = OTHER_ENGINES / "arith_user.lark"
    parser = Lark(lark_file.read_text(), parser="earley")
    drawn = samples(model, tokenizer, str(lark_file), n=200)
    done = [t for t, f in drawn if f]
    print(f"arith_user.lark: {len(done)} of {len(drawn)} samples finished")
    assert len(done) > 0
    for text in done:
        parser.parse(text)  # raises if lark refuses it
    drawn = samples(model, tokenizer, str(OTHER_ENGINES / "llama_cpp_json.gbnf"), n=200)
    done = [t for t, f in drawn if f]
    print(f"llama_cpp_json.gbnf: {len(done)} of {len(drawn)} samples finished")
    assert len(done) > 0
    for text in done:
        assert isinstance(json.loads(text), dict), text  # the grammar's root is an object


def test_a_json_schema_constrains_a_gpt2(model, tokenizer):
    """A JSON Schema (a dict) through GrammarLogitsProcessor: every finished sample is an
    instance by the jsonschema package."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99},
                                               "tag": {"enum": ["a", "b"]}}, "required": ["id"], "additionalProperties": False}
    proc = GrammarLogitsProcessor(schema, tokenizer)
    done = []
    for seed in range(2):
        enc = tokenizer([EOS] * BATCH, return_tensors="pt")
        torch.manual_seed(seed)
        ids = model.generate(**enc, logits_processor=[proc], do_sample=True, max_new_tokens=MAX_NEW, pad_token_id=tokenizer.eos_token_id)
        finished = (ids[:, 1:] == tokenizer.eos_token_id).any(dim=1).tolist()
        done += [t for t, f in zip(continuations(tokenizer, ids, 1), finished) if f]
    assert done
    for text in done:
        jsonschema.validate(json.loads(text), schema)
