"""The registry of file kinds and the one grammar front door (issue 27): what a string
or a file becomes, the per-kind summaries, word lists read by one rule, artifact kind
names that agree with the registry, and the one place that picks a grammar's processors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

import neurosym
from neurosym import kinds
from neurosym.cli.main import main
from neurosym.compile import artifact
from neurosym.compile.automaton import Automaton
from neurosym.compile.pcfg import RuleTensors
from neurosym.compile.regex import compile_regex, load_regex
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.decode import (
    FSGPrior, GrammarMask, Nucleus, PCFGMask, PCFGPrior, ProcessorContext, RepetitionPenalty, Temperature, TokenBan, TopK,
    build_processor, grammar_processors, processor_names, register_processor,
)
from neurosym.dsl.regex import parse_regex_bank
from neurosym.dsl.words import read_word_list
from neurosym.errors import NeurosymError, SourceError
from neurosym.vocab import Vocab

ROOT = Path(__file__).resolve().parents[1]
CLAUSE = "grammars/clause.fsg"


# ---------------------------------------------------------------------- the registry
def test_the_shipped_kinds_and_their_suffixes():
    assert [(k.name, k.suffix) for k in kinds.registered()] == [
        ("regex", ".regex"), ("fsg", ".fsg"), ("pcfg", ".pcfg"), ("schema", ".json"), ("lark", ".lark"), ("gbnf", ".gbnf"),
        ("lexicon", ".lex"), ("words", ".txt"), ("artifact", ".safetensors"),
    ]
    assert kinds.kind_of("a/b.fsg").name == "fsg"
    with pytest.raises(NeurosymError, match=r"unknown file kind '.xyz'; expected one of .fsg, .gbnf, .json, .lark, .lex, .pcfg"):
        kinds.kind_of("b.xyz")


def test_register_checks_its_input_and_unregister_restores():
    with pytest.raises(NeurosymError, match="suffix such as"):
        kinds.Kind("bad", "toy", lambda p, v, l: None)
    with pytest.raises(NeurosymError, match="expects a neurosym.kinds.Kind"):
        kinds.register("toy")
    with pytest.raises(NeurosymError, match="'words' .* is registered already"):
        kinds.register(kinds.Kind("list", ".txt", lambda p, v, l: None))
    with pytest.raises(NeurosymError, match="no kind named 'nope'"):
        kinds.unregister("nope")
    words = kinds.unregister("words")
    try:
        assert ".txt" not in kinds.BY_SUFFIX
        assert kinds.kind_of_object(compile_regex("ab")) is None  # no kind describes an Automaton now
    finally:
        kinds.register(words)
    assert kinds.registered()[-1] is words and kinds.kind_of_object(compile_regex("ab")) is words


def test_summary_is_the_kind_record_field_found_by_type():
    fsg, pcfg = neurosym.load(CLAUSE), neurosym.load("grammars/arith.pcfg")
    bank, lex = neurosym.load("grammars/dates.regex"), neurosym.load("lexicons/sentiment.lex")
    assert [kinds.summary(x)["kind"] for x in (fsg, pcfg, bank, lex, bank["YEAR"])] == ["fsg", "pcfg", "regex", "lexicon", "automaton"]
    assert kinds.kind_of_object(fsg).name == "fsg"  # a WeightedAutomaton is an Automaton: the nearest class answers
    assert kinds.summary(bank["YEAR"])["what"] == f"{bank['YEAR'].num_states} states"
    with pytest.raises(NeurosymError, match="no summary for a dict"):
        kinds.summary({})


# ---------------------------------------------------------------------- the front door
def test_what_a_string_becomes():
    assert isinstance(kinds.load_grammar(CLAUSE), WeightedAutomaton)
    assert isinstance(kinds.load_grammar("grammars/arith.pcfg"), RuleTensors)
    bank = load_regex(ROOT / "grammars" / "dates.regex")
    year = kinds.load_grammar("grammars/dates.regex:YEAR", bank.vocab)  # only that pattern compiled: the bank's automaton
    assert type(year) is Automaton and year.name == "YEAR" and torch.equal(year.delta, bank["YEAR"].delta)
    assert kinds.load_grammar("grammars/months.txt").accepts("March")
    regex = kinds.load_grammar("(ab)+c")
    assert regex.accepts("ababc") and not regex.accepts("abc c")
    assert kinds.load_grammar("a:b").accepts("a:b")  # ':' in a regex is not FILE:NAME unless FILE has a known suffix
    assert kinds.load_grammar("a" * 300).accepts("a" * 300)  # longer than any file name: still a regex
    with pytest.raises(NeurosymError, match="no such grammar file"):
        kinds.load_grammar("a" * 300 + ".fsg")


def test_a_bank_with_one_pattern_needs_no_name(tmp_path):
    one = tmp_path / "one.regex"
    one.write_text('ONLY: /[ab]+/\n')
    assert kinds.load_grammar(str(one)).accepts("abba")
    assert kinds.load_grammar(one).accepts("b")  # a Path too


def test_front_door_errors_are_one_clear_line(tmp_path):
    cases = {
        "grammars/dates.regex": "has 8 patterns (YEAR, MONTH, DAY, DATE, MONTH_NAME, LONG_DATE, TIME, STAMP); name one as",
        "grammars/dates.regex:NOPE": "no pattern named NOPE; the bank has YEAR",
        "grammars/clause.fsg:S": "only a .regex bank (FILE.regex:NAME) has patterns to name (drop :S)",
        "lexicons/sentiment.lex": "a .lex lexicon is not a grammar to decode with; expected a .regex bank",
        "nope.pcfg": "nope.pcfg: no such grammar file (for a regex that ends in .pcfg, wrap it in a group: (nope.pcfg))",
        "grammars/nope.txt": "no such grammar file",
    }
    for spec, message in cases.items():
        with pytest.raises(NeurosymError, match=None) as err:
            kinds.load_grammar(spec)
        assert message in str(err.value), (spec, str(err.value))
    with pytest.raises(NeurosymError, match="unknown file kind"):
        kinds.load_grammar(Path("x.unknown"))
    listed = tmp_path / "words.list"
    listed.write_text("red\n")
    with pytest.raises(NeurosymError, match=r"words.list: a file of unknown kind '.list'; expected one of .*a word list is a .txt file"):
        kinds.load_grammar(str(listed))
    with pytest.raises(NeurosymError, match=r"a regex holds 8 parts .*pass one"):
        kinds.load_grammar(neurosym.load("grammars/dates.regex"))
    with pytest.raises(NeurosymError, match="a FeatureBank is not a grammar to decode with"):
        kinds.load_grammar(neurosym.load("lexicons/sentiment.lex"))


def test_compiled_grammars_and_artifacts_are_checked_against_the_vocabulary(tmp_path):
    fsg = neurosym.load(CLAUSE)
    assert kinds.load_grammar(fsg, fsg.vocab) is fsg
    other = Vocab.words(["a", "b"])
    with pytest.raises(NeurosymError, match="not the tokenizer's vocabulary"):
        kinds.load_grammar(fsg, other)
    saved = artifact.save(fsg, tmp_path / "clause.safetensors")
    back = kinds.load_grammar(str(saved), fsg.vocab)  # an artifact keeps its vocabulary; an equal one is accepted
    assert torch.equal(back.log_probs, fsg.log_probs)
    with pytest.raises(NeurosymError, match="compiled over"):
        kinds.load_grammar(str(saved), other)
    lex = artifact.save(neurosym.load("lexicons/sentiment.lex"), tmp_path / "lex.safetensors")
    with pytest.raises(NeurosymError, match="a FeatureBank is not a grammar"):
        kinds.load_grammar(str(lex))


# ---------------------------------------------------------------------- word lists
def test_word_lists_one_rule(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("# comment\n\n  New York  \nParis\n#not a word\n Paris\n", encoding="utf-8")
    assert read_word_list(path) == ("New York", "Paris", "Paris")
    auto = neurosym.load(path)
    assert auto.accepts("New York") and auto.accepts("Paris") and not auto.accepts("#not a word") and not auto.accepts("")
    empty = tmp_path / "empty.txt"
    empty.write_text("# only a comment\n\n")
    with pytest.raises(SourceError, match=r"empty.txt:1:1: the word list is empty"):
        neurosym.load(empty)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\ncaf\xc3\xa9 \xff\n")
    with pytest.raises(SourceError, match=r"bad.txt:2:6: the file is not UTF-8 \(invalid start byte, byte 0xff\)"):
        read_word_list(bad)


def test_a_bank_reads_its_word_lists_by_the_same_rule(tmp_path):
    (tmp_path / "names.txt").write_text("# names\nAlice\n\nBob\n")
    bank = parse_regex_bank('NAME: %words "names.txt"\n', path=tmp_path / "b.regex")
    assert bank.patterns["NAME"].expr.words == ("Alice", "Bob")
    (tmp_path / "bad.txt").write_bytes(b"Alice\n\xffBob\n")
    with pytest.raises(SourceError, match=r"bad.txt:2:1: the file is not UTF-8"):
        parse_regex_bank('NAME: %words "bad.txt"\n', path=tmp_path / "b.regex")


def test_word_lists_through_the_file_commands(tmp_path):
    path = tmp_path / "colours.txt"
    path.write_text("# colours\nred\ngreen\n\nblue\n")
    runner = CliRunner()
    check = runner.invoke(main, ["check", "--json", str(path)])
    assert check.exit_code == 0, check.output
    assert json.loads(check.output)[0]["kind"] == "automaton"
    inspect = runner.invoke(main, ["inspect", str(path)])
    assert inspect.exit_code == 0 and "colours" in inspect.output, inspect.output
    sample = runner.invoke(main, ["sample", str(path), "-n", "8", "--json"])
    assert sample.exit_code == 0 and set(json.loads(sample.output)) <= {"red", "green", "blue"}


# ---------------------------------------------------------------------- artifact kind names
def test_artifact_kinds_are_the_registry_names_and_old_names_still_load(tmp_path):
    shipped = {k.name for k in kinds.registered()}
    assert set(artifact.KINDS) - {"automaton"} <= shipped and {"regex", "lexicon"} <= set(artifact.KINDS)
    for obj, new, old in ((neurosym.load("grammars/dates.regex"), "regex", "bank"), (neurosym.load("lexicons/sentiment.lex"), "lexicon", "features")):
        path = artifact.save(obj, tmp_path / f"{new}.safetensors")
        data = path.read_bytes()
        header = artifact._read_header(data)
        assert header["kind"] == new and artifact.artifact_kind(path) == new
        # as written before issue 27: the old kind name, and a checksum over the tensors alone
        tensors = st_load(data)
        header["kind"] = old
        header.pop("checksum_covers", None)
        header["checksum"] = artifact.checksum(tensors, header)
        legacy = tmp_path / f"{old}.safetensors"
        legacy.write_bytes(st_save(tensors, metadata={"neurosym": json.dumps(header)}))
        assert artifact.artifact_kind(legacy) == new
        assert type(neurosym.load(legacy)) is type(obj) and kinds.summary(neurosym.load(legacy))["kind"] == new


# ---------------------------------------------------------------------- processors
def test_one_function_picks_a_grammars_processors():
    fsg = neurosym.load(CLAUSE)
    eos = fsg.vocab.id("<eos>")
    kinds_of = lambda procs: [type(p) for p in procs]  # noqa: E731
    assert kinds_of(grammar_processors(fsg, eos)) == [GrammarMask]
    assert kinds_of(grammar_processors(fsg, eos, "prior", 0.5)) == [FSGPrior]
    both = grammar_processors(fsg, eos, "both", 0.5, max_len=9)
    assert kinds_of(both) == [FSGPrior, GrammarMask] and both[0].weight == 0.5 and both[1].max_len == 9
    pcfg = neurosym.load("grammars/arith.pcfg")
    peos = pcfg.vocab.id("<eos>")
    assert kinds_of(grammar_processors(pcfg, peos)) == [PCFGMask]
    assert kinds_of(grammar_processors(pcfg, peos, "both")) == [PCFGPrior, PCFGMask]
    with pytest.raises(NeurosymError, match="not .pcfg grammars"):
        grammar_processors(pcfg, peos, max_len=5)
    regex = compile_regex("ab", fsg.vocab)
    with pytest.raises(NeurosymError, match="needs a weighted grammar"):
        grammar_processors(regex, eos, "prior")
    with pytest.raises(NeurosymError, match="use must be one of mask, prior, both"):
        grammar_processors(fsg, eos, "masks")
    with pytest.raises(NeurosymError, match="weight must be a number > 0"):
        grammar_processors(fsg, eos, "prior", 0)
    with pytest.raises(NeurosymError, match="expected a compiled grammar"):
        grammar_processors(neurosym.load("grammars/dates.regex"), eos)


def test_named_processors():
    vocab = Vocab.words(["Alice", "Bob"])
    ctx = ProcessorContext(vocab, vocab.id("<eos>"), 10)
    assert {"ban", "repetition-penalty", "temperature", "top-k", "top-p"} <= set(processor_names())
    built = [build_processor(s, ctx) for s in ("temperature:0.5", "top-k:3", "top-p:0.9", "repetition-penalty:4,1.5", "ban:Bob")]
    assert [type(p) for p in built] == [Temperature, TopK, Nucleus, RepetitionPenalty, TokenBan]
    assert built[0].t == 0.5 and built[1].k == 3
    scores = built[4](torch.zeros(2, len(vocab)))
    assert bool((scores[:, vocab.id("Bob")] == float("-inf")).all()) and bool((scores[:, vocab.id("Alice")] == 0).all())
    for spec, message in (("temperature", "expected temperature:NUMBER"), ("top-k:x", "'x' is not an integer"), ("ban:Zoe", "'Zoe' not in the vocabulary"),
                          ("nope", "no processor named 'nope'; registered: ban,"), ("temperature:-1", "finite number > 0")):
        with pytest.raises(NeurosymError, match=message):
            build_processor(spec, ctx)
    with pytest.raises(NeurosymError, match="registered already"):
        register_processor("ban", lambda arg, ctx: None)
    with pytest.raises(NeurosymError, match="use letters, digits"):
        register_processor("a b", lambda arg, ctx: None)
