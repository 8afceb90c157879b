"""Artifacts of the grammar kinds: FSGs ("fsg"), PCFGs ("pcfg") and lexicons
("features") round-trip through ``save`` / ``load_artifact`` unchanged."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save as st_save

import neurosym
from neurosym.compile import artifact
from neurosym.compile.lexicon import FeatureBank, load_lexicon
from neurosym.compile.fsg import compile_fsg
from neurosym.compile.pcfg import RuleTensors, load_pcfg
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.dsl.fsg import parse_fsg
from neurosym.dsl.lexicon import LexiconReader, parse_lexicon
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab
from references import rule_tensors_log_prob

ROOT = Path(__file__).resolve().parents[2]
LEX_DATA = ROOT / "tests" / "data" / "lex"

FSG = """
%start 0
0 1 Alice 0.5 role=subject
0 1 Bob 0.3 role=subject
0 1 <eps> 0.2
1 2 reads 0.6
1 2 writes 0.4
2 3 the 0.7 role=object
2 3 a 0.3 role=object
3 4 book 0.5 role=object+head
3 4 paper 0.5 role=object+head
4 0.6
4 0 and 0.4
"""


def _roundtrip(obj, tmp_path: Path, name: str = "a.safetensors"):
    return artifact.load_artifact(artifact.save(obj, tmp_path / name))


# ---------------------------------------------------------------------- fsg
def test_fsg_roundtrip(tmp_path):
    auto = compile_fsg(parse_fsg(FSG))
    back = _roundtrip(auto, tmp_path)
    assert isinstance(back, WeightedAutomaton)
    assert back.vocab == auto.vocab and back.name == auto.name and back.source == auto.source
    for k in ("delta", "final", "log_probs", "final_log_probs"):
        assert torch.equal(getattr(back, k), getattr(auto, k)), k
    assert back.log_probs.dtype == torch.float64 and back.final_log_probs.dtype == torch.float64
    assert list(back.role_tables) == list(auto.role_tables) and set(auto.role_tables) == {"subject", "object", "head"}
    for r, table in auto.role_tables.items():
        assert torch.equal(back.role_tables[r], table) and back.role_tables[r].dtype == torch.float64
    assert back.entropy() == auto.entropy()

    sents = auto.sample(40, max_len=30, seed=3)
    assert sents == back.sample(40, max_len=30, seed=3)
    L = max(len(s) for s in sents)
    ids = torch.tensor([s + [0] * (L - len(s)) for s in sents])
    lengths = torch.tensor([len(s) for s in sents])
    before, after = auto.log_prob(ids, lengths), back.log_prob(ids, lengths)
    assert torch.equal(before, after) and bool((before > -math.inf).all())
    ra, rb = auto.roles(ids), back.roles(ids)
    assert ra.keys() == rb.keys() and all(torch.equal(ra[k], rb[k]) for k in ra)
    assert bool(ra["subject"].any())


def test_fsg_is_saved_as_fsg_not_automaton(tmp_path):
    auto = compile_fsg(parse_fsg(FSG))
    path = artifact.save(auto, tmp_path / "g.safetensors")
    assert artifact._read_header(path.read_bytes())["kind"] == "fsg"


# ---------------------------------------------------------------------- pcfg
@pytest.mark.parametrize("name", ["arith.pcfg", "agreement.pcfg"])
def test_pcfg_roundtrip(tmp_path, name):
    rules = load_pcfg(ROOT / "grammars" / name)
    back = _roundtrip(rules, tmp_path)
    assert isinstance(back, RuleTensors)
    for k in artifact.RULE_TENSORS:
        a, b = getattr(rules, k), getattr(back, k)
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), k
    assert back.nonterminals == rules.nonterminals and back.preterminals == rules.preterminals
    assert back.start == rules.start and back.path == rules.path and back.vocab == rules.vocab
    short = sorted(rules.sample(20, seed=1, max_len=20), key=len)[:3]  # log_prob is a plain CKY: keep it short
    for s in short:
        assert rule_tensors_log_prob(back, s) == rule_tensors_log_prob(rules, s) > -math.inf


def test_pcfg_keeps_a_float64_dtype(tmp_path):
    rules = load_pcfg(ROOT / "grammars" / "arith.pcfg").to(torch.float64)
    back = _roundtrip(rules, tmp_path)
    assert all(getattr(back, k).dtype == torch.float64 for k in artifact.RULE_TENSORS)
    assert torch.equal(back.binary, rules.binary)


# ---------------------------------------------------------------------- features
def _batch(bank: FeatureBank, sentences: list[list[str]]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    L = max(len(s) for s in sentences)
    pad = bank.vocab.tokens.index("<pad>")
    ids = torch.tensor([[bank.vocab.id(w) for w in s] + [pad] * (L - len(s)) for s in sentences])
    gen = torch.Generator().manual_seed(0)
    roles = {r: torch.rand(ids.shape, generator=gen) > 0.5 for r in bank.roles}
    return ids, roles


def _same_bank(a: FeatureBank, b: FeatureBank, sentences: list[list[str]]) -> None:
    assert isinstance(b, FeatureBank)
    assert b.names == a.names and b.roles == a.roles and b.vocab == a.vocab
    assert (b.ignore_case, b.bos, b.pad) == (a.ignore_case, a.bos, a.pad)
    assert b.lexicon.path == a.lexicon.path and b.lexicon.sources == a.lexicon.sources
    assert torch.equal(b.table, a.table)
    ids, roles = _batch(a, sentences)
    assert torch.equal(a.featurize(ids, roles), b.featurize(ids, roles))


SENTENCES = [
    ["<bos>", "Alice", "finishes", "the", "very", "good", "task", ".", "She", "reviews", "the", "awful", "paper", "!"],
    ["<bos>", "Bob", "cooks", "the", "slightly", "pleasant", "meal", "?", "He", "trains", "the", "extremely", "bad", "model", "."],
]


def test_sentiment_lexicon_roundtrip(tmp_path):
    bank = load_lexicon(ROOT / "lexicons" / "sentiment.lex")
    assert bank.roles  # contextual features: roles, bos, seen(...), value(from=prev)
    _same_bank(bank, _roundtrip(bank, tmp_path), SENTENCES)


def test_lexicon_with_raw_includes_roundtrip(tmp_path):
    bank = load_lexicon(LEX_DATA / "includes.lex")
    keys = set(bank.lexicon.sources)
    assert keys == {str((LEX_DATA / f).resolve()) for f in ("includes.lex", "mini_vader.txt", "mini_afinn.txt")}
    assert bank.lexicon.source_key == str((LEX_DATA / "includes.lex").resolve())
    words = [w for w in bank.vocab.tokens if not w.startswith("<")]
    _same_bank(bank, _roundtrip(bank, tmp_path), [["<bos>", *words], words[::-1]])


def test_lexicon_loads_after_its_files_are_gone(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    for f in ("mini_vader.txt", "mini_afinn.txt"):
        shutil.copy(LEX_DATA / f, src / "sub" / f)
    shutil.copy(LEX_DATA / "small.lex", src / "small.lex")
    (src / "sub" / "main.lex").write_text(
        '%include "../small.lex"\n'
        '%include "mini_vader.txt" format=vader\n'
        '%include "mini_afinn.txt" format=afinn\n'
        "%feature warm = class(ADJ) & seen(token(\"very\"))\n"
        "%feature pol = value(polarity, from=prev(class(INTENS)), default=0)\n"
    )
    bank = load_lexicon(src / "sub" / "main.lex", ignore_case=True)
    assert len(bank.lexicon.sources) == 4
    out = artifact.save(bank, tmp_path / "out" / "lex.safetensors")
    shutil.rmtree(src)
    back = artifact.load_artifact(out)
    words = [w for w in bank.vocab.tokens if not w.startswith("<")]
    _same_bank(bank, back, [["<bos>", *words], ["very", "good", "not", "bad", "slightly", "so-so"]])


def test_lexicon_parsed_from_a_string_roundtrips(tmp_path):
    lex = parse_lexicon("%feature p range=-1..1\n%feature q = value(p, part=pos) where bos\ngood p=0.5\nbad p=-0.5\n")
    assert lex.source_key == "<string>" and list(lex.sources) == ["<string>"]
    bank = FeatureBank(lex, load_lexicon(ROOT / "lexicons" / "sentiment.lex").vocab, bos="<bos>", pad="<pad>")
    _same_bank(bank, _roundtrip(bank, tmp_path), SENTENCES)


def test_reparse_never_reads_the_disk_and_names_missing_sources():
    loader = LexiconReader.from_sources({"/nowhere/a.lex": '%include "b.lex"\n'})
    with pytest.raises(NeurosymError, match="stored sources"):
        loader.reparse("/nowhere/a.lex", "a.lex")
    lex = LexiconReader.from_sources({"/nowhere/a.lex": '%include "sub/../b.lex"\n', "/nowhere/b.lex": "%feature p\nx p=1\n"}).reparse("/nowhere/a.lex", "a.lex")
    assert lex.values == {"x": {"p": 1.0}}


def test_tampered_feature_table_is_inconsistent(tmp_path):
    bank = load_lexicon(LEX_DATA / "small.lex")
    tensors, header = artifact._features_to_tensors(bank)
    tensors["table"] = tensors["table"] + 1.0
    header = {"format": artifact.FORMAT, "format_version": artifact.FORMAT_VERSION, **header}
    (tmp_path / "bad.safetensors").write_bytes(st_save(tensors, metadata={"neurosym": json.dumps(header)}))
    with pytest.raises(NeurosymError, match="artifact is inconsistent"):
        artifact.load_artifact(tmp_path / "bad.safetensors")


# ---------------------------------------------------------------------- files
def test_atomic_save_leaves_no_temporary_files(tmp_path):
    out = tmp_path / "out"
    artifact.save(compile_fsg(parse_fsg(FSG)), out / "g.safetensors")
    artifact.save(load_pcfg(ROOT / "grammars" / "arith.pcfg"), out / "p.safetensors")
    artifact.save(load_lexicon(LEX_DATA / "small.lex"), out / "l.safetensors")
    artifact.save(load_lexicon(LEX_DATA / "small.lex"), out / "l.safetensors")  # overwrite
    assert sorted(p.name for p in out.iterdir()) == ["g.safetensors", "l.safetensors", "p.safetensors"]


@pytest.mark.parametrize("make", ["fsg", "pcfg", "features"])
def test_corrupted_artifact_is_a_neurosym_error(tmp_path, make):
    obj = {
        "fsg": lambda: compile_fsg(parse_fsg(FSG)),
        "pcfg": lambda: load_pcfg(ROOT / "grammars" / "arith.pcfg"),
        "features": lambda: load_lexicon(LEX_DATA / "small.lex"),
    }[make]()
    data = artifact.save(obj, tmp_path / "x.safetensors").read_bytes()
    for bad in (data[: len(data) // 2], data[:7], b"\xff" * 64, data[:8] + b"[" + data[9:]):
        (tmp_path / "x.safetensors").write_bytes(bad)
        with pytest.raises(NeurosymError):
            artifact.load_artifact(tmp_path / "x.safetensors")


def test_old_kinds_still_load(tmp_path):
    vocab = Vocab.words(["ab", "a", "b", "c"])
    auto = neurosym.compile_regex("(ab|c)+", vocab=vocab)
    back = artifact.load_artifact(artifact.save(auto, tmp_path / "a.safetensors"))
    assert type(back) is not WeightedAutomaton and torch.equal(back.delta, auto.delta)
    assert artifact._read_header((tmp_path / "a.safetensors").read_bytes())["kind"] == "automaton"
