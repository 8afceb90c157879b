"""Corpora sampled from the recipe FSG: held-out words, seeded batches, causal features."""

from pathlib import Path

import pytest
import torch

import neurosym
from neurosym.data.corpora import batches, choose_holdout, sample_sentences
from neurosym.errors import NeurosymError
from neurosym.lm.fusion import make_batch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def clause():
    auto = neurosym.load(ROOT / "grammars" / "clause.fsg")
    bank = neurosym.load(ROOT / "lexicons" / "sentiment.lex", auto.vocab)
    return auto, bank


def test_held_out_words_never_appear_and_sampling_is_seeded(clause):
    auto, _ = clause
    ex = [auto.vocab.id(w) for w in ("great", "excellent", "awful")]
    a = sample_sentences(auto, 500, seed=1, exclude=ex, max_words=27)
    assert len(a) == 500 and not any(t in ex for s in a for t in s)
    assert a == sample_sentences(auto, 500, seed=1, exclude=ex, max_words=27)
    assert a != sample_sentences(auto, 500, seed=2, exclude=ex, max_words=27)
    every = {t for s in sample_sentences(auto, 500, seed=1) for t in s}
    assert set(ex) <= every  # without exclusions they occur


def test_holding_out_everything_is_an_error(clause):
    auto, _ = clause
    with pytest.raises(NeurosymError, match="hold out fewer"):
        sample_sentences(auto, 10, exclude=[auto.vocab.id("the")])
    with pytest.raises(NeurosymError, match="cannot hold out 6"):
        choose_holdout({"ADJ": ["a", "b"]}, 6, seed=0)
    h = choose_holdout({"P": list("abcde"), "N": list("vwxyz")}, 3, seed=0)
    assert [len(v) for v in h.values()] == [3, 3] and h == choose_holdout({"P": list("abcde"), "N": list("vwxyz")}, 3, seed=0)


def test_held_out_corpus_batches_have_causal_features(clause):
    auto, bank = clause
    s = sample_sentences(auto, 2, seed=5)
    b1 = make_batch(s, auto, bank)
    t = 4
    s2 = [x[:t] + sample_sentences(auto, 1, seed=9)[0][t:] for x in s]
    b2 = make_batch(s2, auto, bank)
    n = t + 1  # inputs 0..t hold <bos> and words 0..t-1
    assert torch.equal(b1["features"][:, :n], b2["features"][:, :n])


def test_batches_cover_every_sentence_once():
    g = torch.Generator().manual_seed(0)
    cut = batches(list(range(10)), 4, g)
    assert [len(c) for c in cut] == [4, 4, 2] and sorted(i for c in cut for i in c) == list(range(10))
    assert batches(list(range(5)), 2) == [[0, 1], [2, 3], [4]]
