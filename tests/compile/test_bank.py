"""A bank stacks its automata block-diagonally; running the stack equals running each."""

import random
from pathlib import Path

import torch

import neurosym
from neurosym.vocab import Vocab

ROOT = Path(__file__).resolve().parents[2]


def test_stacked_bank_matches_each_pattern():
    bank = neurosym.load(ROOT / "grammars" / "tomita.regex")
    P = len(bank)
    assert bank.offsets.shape == (P + 1,) and bank.starts.tolist() == bank.offsets[:-1].tolist()
    assert bank.delta.shape == (int(bank.offsets[-1]), len(bank.vocab))
    for p, auto in enumerate(bank.patterns.values()):
        lo, hi = int(bank.offsets[p]), int(bank.offsets[p + 1])
        block = bank.delta[lo:hi]
        assert torch.equal(torch.where(block >= 0, block - lo, block), auto.delta)  # block-diagonal
        assert torch.equal(bank.final[lo:hi], auto.final)
    rng = random.Random(0)
    texts = ["".join(rng.choice("01") for _ in range(8)) for _ in range(200)]
    ids = torch.tensor([bank.vocab.encode(t) for t in texts])
    got = bank.accepts(ids)
    assert got.shape == (200, P)
    want = torch.tensor([[auto.accepts(t) for auto in bank.patterns.values()] for t in texts])
    assert torch.equal(got, want)


def test_bank_over_a_shared_vocabulary():
    vocab = Vocab.chars("0123456789-:T")
    bank = neurosym.load(ROOT / "grammars" / "dates.regex", vocab=vocab, max_states=5000)
    assert all(a.vocab is vocab for a in bank.patterns.values())
    ids = torch.tensor([vocab.encode("1999-12-31T23:59"), vocab.encode("1999-12-31T24:00")])
    got = dict(zip(bank.names, bank.accepts(ids).T.tolist()))
    assert got["STAMP"] == [True, False] and got["DATE"] == [False, False]
    assert bank.weights[bank.names.index("DATE")] == 2.0
