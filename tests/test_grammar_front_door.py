"""One grammar front door (issue 27): ``neurosym generate --grammar F`` and
``neurosym.hf.GrammarLogitsProcessor(F, tokenizer)`` compile the same language from the
same file, for every file shipped in ``grammars/`` (every pattern of every bank) and for
word lists with ``#`` comment lines and blank lines.

Both paths run as users run them: the CLI through click's runner, with the trained run
replaced by one whose vocabulary is the tokenizer's (no training here), stopped at the
sampler, where the processors it built are recorded; the transformers bridge as it is
constructed. The compiled automata and rule tensors of the two paths are compared tensor
by tensor, and word lists are also checked against the words they hold.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from click.testing import CliRunner

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

import neurosym  # noqa: E402
import neurosym.decode.run as run_module  # noqa: E402
from neurosym.cli.main import main  # noqa: E402
from neurosym.compile.automaton import Automaton  # noqa: E402
from neurosym.compile.pcfg import RuleTensors  # noqa: E402
from neurosym.compile.spelling import SpelledGrammar  # noqa: E402
from neurosym.compile.weighted import WeightedAutomaton  # noqa: E402
from neurosym.decode.run import LoadedRun  # noqa: E402
from neurosym.dsl.words import read_word_list  # noqa: E402
from neurosym.hf import GrammarLogitsProcessor, tokenizer_vocab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[1]
GRAMMARS = sorted(p for p in (ROOT / "grammars").iterdir() if p.is_file() and p.suffix != ".py")
EOS = "<eos>"
# grammars whose terminals are strings that span many tokens (json.pcfg's /regex/ strings and
# numbers): not a word-level grammar over the test tokenizer; compiled over it, each lexeme
# must match one token, and `generate` refuses it at the lexeme's position
STRING_LEVEL = {"json.pcfg"}
WORD_LIST = "# weekdays, with a comment line\n\nMonday\n  Tuesday  \n# Friday is commented out\n\nWednesday\n"


def specs() -> list[str]:
    """Every shipped grammar as ``--grammar`` names it: each bank pattern as FILE:NAME."""
    out = []
    for path in GRAMMARS:
        rel = f"grammars/{path.name}"
        if path.name in STRING_LEVEL:
            continue
        if path.suffix == ".regex":
            out += [f"{rel}:{name}" for name in neurosym.load(path).names]
        else:
            out.append(rel)
    return out


def test_every_shipped_grammar_file_is_covered():
    assert {p.suffix for p in GRAMMARS} == {".regex", ".fsg", ".pcfg", ".txt"}
    assert len(specs()) > len(GRAMMARS)  # banks contribute one spec per pattern


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on the shipped grammars, plus every word of the shipped
    FSGs and PCFGs as an added token (their terminals must be tokens)."""
    lines = [line for p in GRAMMARS for line in p.read_text(encoding="utf-8").splitlines()]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, clean_up_tokenization_spaces=False)
    words = sorted({t for p in GRAMMARS if p.suffix in (".fsg", ".pcfg") for t in neurosym.load(p).vocab.tokens if not t.startswith("<")})
    hf.add_tokens(words)
    return hf


class Stop(Exception):
    """Raised by the sampler stand-in once ``neurosym generate`` has built its processors."""


@pytest.fixture
def generate_grammar(tokenizer, monkeypatch):
    """``spec -> (compiled grammar, processors)`` as ``neurosym generate --grammar spec``
    builds them over the tokenizer's vocabulary."""
    vocab = tokenizer_vocab(tokenizer)
    model = SimpleNamespace(max_len=64, adapter=None)
    seen: dict = {}
    real_compile = run_module.compile_guide

    def compile_guide(spec, v, *args, **kwargs):  # compiled afresh: the hf processor below may not reuse this guide
        guide = real_compile(spec, v, *args, **kwargs, cache=False)
        seen["grammar"] = guide.grammar
        return guide

    def sampler(model, **kwargs):
        seen["processors"] = kwargs["processors"]
        raise Stop

    start = vocab.id("<bos>") if "<bos>" in vocab else None
    loaded = LoadedRun(model, vocab, SimpleNamespace(), None, eos_id=vocab.id("<eos>"), start_id=start, size=len(vocab))
    monkeypatch.setattr(run_module, "load_run", lambda path: loaded)
    monkeypatch.setattr(run_module, "compile_guide", compile_guide)
    monkeypatch.setattr(run_module, "generate", sampler)

    def build(spec: str):
        seen.clear()
        result = CliRunner().invoke(main, ["--debug", "generate", "some-run", "--grammar", spec, "-n", "1"])  # --debug: the sampler's Stop propagates
        assert isinstance(result.exception, Stop), result.output
        return seen["grammar"], seen["processors"]

    return build


def assert_same_grammar(a, b) -> None:
    assert type(a) is type(b)
    assert a.vocab == b.vocab
    if isinstance(a, SpelledGrammar):  # an .fsg or .pcfg over the tokenizer: the same terminals, the same spelling
        assert a.spelling.words == b.spelling.words and a.spelling.separator == b.spelling.separator
        a, b = a.terminals, b.terminals
        assert a.vocab == b.vocab
    if isinstance(a, RuleTensors):
        for name in ("root", "binary", "emit", "root_term", "empty"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name
        assert (a.nonterminals, a.preterminals, a.start) == (b.nonterminals, b.preterminals, b.start)
        return
    assert isinstance(a, Automaton)
    assert a.start == b.start and torch.equal(a.final, b.final) and torch.equal(a.delta, b.delta)
    if isinstance(a, WeightedAutomaton):
        assert torch.equal(a.log_probs, b.log_probs) and torch.equal(a.final_log_probs, b.final_log_probs)


@pytest.mark.parametrize("spec", specs())
def test_generate_and_the_hf_processor_compile_the_same_language(spec, tokenizer, generate_grammar):
    via_cli, procs = generate_grammar(spec)
    via_hf = GrammarLogitsProcessor(spec, tokenizer)
    assert_same_grammar(via_cli, via_hf.grammar)
    assert [type(p) for p in procs] == [type(p) for p in via_hf.processors]  # the same mask, picked in one place


def test_word_lists_follow_one_rule_on_both_paths(tmp_path, tokenizer, generate_grammar):
    words = tmp_path / "weekdays.txt"
    words.write_text(WORD_LIST, encoding="utf-8")
    assert read_word_list(words) == ("Monday", "Tuesday", "Wednesday")
    via_cli, _ = generate_grammar(str(words))
    via_hf = GrammarLogitsProcessor(str(words), tokenizer).grammar
    assert_same_grammar(via_cli, via_hf)
    for auto in (via_cli, via_hf, neurosym.load(words)):
        for word in ("Monday", "Tuesday", "Wednesday"):
            assert auto.accepts(word.encode() if auto.vocab.kind == "bytes" else word), word
        for line in ("# weekdays, with a comment line", "Friday", "# Friday is commented out", "", "  Tuesday  "):
            assert not auto.accepts(line.encode() if auto.vocab.kind == "bytes" else line), line
