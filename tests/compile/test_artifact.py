"""Artifacts: save/load roundtrips, atomic writes, and the source-hash cache."""

import os

import pytest
import torch

import neurosym
from neurosym.compile import artifact
from neurosym.compile.regex import Limits
from neurosym.errors import NeurosymError
from neurosym.files import atomic_write_bytes
from neurosym.vocab import Vocab

BANK = """\
YEAR: /(19|20)[0-9]{2}/
MONTH: /0[1-9]|1[0-2]/
DATE[weight=2.5]: YEAR "-" MONTH
WORD: %words "words.txt"
"""


@pytest.fixture
def bank_file(tmp_path):
    (tmp_path / "words.txt").write_text("alpha\nbeta\ngamma\n")
    path = tmp_path / "dates.regex"
    path.write_text(BANK)
    return path


def _same(a, b):
    assert torch.equal(a.delta, b.delta) and torch.equal(a.final, b.final)
    assert a.vocab == b.vocab and a.name == b.name


def test_bank_roundtrip(bank_file, tmp_path):
    bank = neurosym.load(bank_file)
    out = artifact.save(bank, tmp_path / "out" / "bank.safetensors")
    back = artifact.load_artifact(out)
    assert back.names == bank.names == ["YEAR", "MONTH", "DATE", "WORD"]
    assert torch.equal(back.weights, bank.weights) and float(back.weights[2]) == 2.5
    assert torch.equal(back.delta, bank.delta) and torch.equal(back.offsets, bank.offsets)
    for name in bank.names:
        _same(back[name], bank[name])
        assert back[name].char_dfa.accepts("1999") == bank[name].char_dfa.accepts("1999")
    assert back["DATE"].accepts("2024-05") and not back["DATE"].accepts("2024-13")


def test_automaton_roundtrip_over_a_word_vocab(tmp_path):
    vocab = Vocab.words(["ab", "a", "b", "c"])
    auto = neurosym.compile_regex("(ab|c)+", vocab=vocab)
    back = artifact.load_artifact(artifact.save(auto, tmp_path / "a.safetensors"))
    _same(auto, back)
    assert back.accepts([vocab.id("a"), vocab.id("b"), vocab.id("c")])


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "x.safetensors"
    target.write_bytes(b"old")

    def boom(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"new contents")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.safetensors"]  # the temporary file is gone


def test_bad_artifact_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00hello")
    with pytest.raises(NeurosymError, match="not a neurosym artifact"):
        artifact.load_artifact(bad)
    with pytest.raises(NeurosymError, match="no such artifact"):
        artifact.load_artifact(tmp_path / "missing.safetensors")


def test_cache_hits_and_invalidates_on_any_source(bank_file, tmp_path):
    cache = tmp_path / "cache"
    first = artifact.load_cached(bank_file, cache_dir=cache)
    files = list(cache.iterdir())
    assert len(files) == 1
    again = artifact.load_cached(bank_file, cache_dir=cache)
    assert list(cache.iterdir()) == files and torch.equal(again.delta, first.delta)
    # a changed word list (not the bank file itself) is a new key
    (tmp_path / "words.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
    changed = artifact.load_cached(bank_file, cache_dir=cache)
    assert len(list(cache.iterdir())) == 2 and changed["WORD"].accepts("delta")
    # a different vocabulary or limits is a new key too
    artifact.load_cached(bank_file, vocab=Vocab.chars("0123456789-abdeglmpt"), cache_dir=cache)
    artifact.load_cached(bank_file, limits=Limits(max_states=500), cache_dir=cache)
    assert len(list(cache.iterdir())) == 4
