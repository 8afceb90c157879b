"""Dyck-k tasks: balanced positives, minimally corrupted negatives, seeds, next-token targets."""

import collections
import math

import numpy as np
import pytest
import torch

from neurosym.tasks.dyck import CORRUPTIONS, Dyck, dyck_vocab, pad_sequences
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab


def stack_balanced(tokens: list[str], pairs: dict[str, str]) -> bool:
    """The reference: an explicit stack over bracket strings."""
    closing = {c: o for o, c in pairs.items()}
    stack = []
    for t in tokens:
        if t in pairs:
            stack.append(t)
        elif t in closing:
            if not stack or stack.pop() != closing[t]:
                return False
        else:
            return False
    return not stack


PAIRS2 = {"(": ")", "[": "]"}


@pytest.fixture(scope="module")
def dyck():
    return Dyck(k=2)


def strings(dyck, ids):
    return [dyck.vocab.tokens[i] for i in ids]


def test_vocab_is_word_vocab_with_pad_zero():
    v = dyck_vocab(3)
    assert isinstance(v, Vocab) and v.kind == "word"
    assert v.tokens[:4] == ["<pad>", "<unk>", "<bos>", "<eos>"]
    assert v.tokens[4:] == ["(", ")", "[", "]", "{", "}"]
    assert v.encode("( [ ] )") == [4, 6, 7, 5]
    assert dyck_vocab(6).tokens[-2:] == ["(6", ")6"]


def test_positives_are_balanced_and_lengths_controlled(dyck):
    words = dyck.sample(2000, min_len=4, max_len=20, seed=3)
    assert all(stack_balanced(strings(dyck, w), PAIRS2) for w in words)
    lengths = collections.Counter(len(w) for w in words)
    assert set(lengths) == set(range(4, 21, 2))
    assert min(lengths.values()) > 2000 / 9 * 0.7  # roughly uniform over the 9 even lengths
    assert {t for w in words for t in strings(dyck, w)} == {"(", ")", "[", "]"}


def test_words_are_uniform_given_length():
    # Dyck-2 words of length 6: Catalan(3) * 2^3 = 40, each equally likely
    words = Dyck(2).sample(40_000, 6, 6, seed=0)
    counts = collections.Counter(map(tuple, words))
    assert len(counts) == 40
    expected = 1000
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 80  # 39 degrees of freedom: p < 1e-4 above this


def test_depth_bias_tilts_towards_deep_nesting(dyck):
    flat = dyck.sample(1000, 30, 40, seed=0)
    deep = dyck.sample(1000, 30, 40, seed=0, depth_bias=1.1)
    assert all(dyck.is_balanced(w) for w in deep)
    mean_depth = lambda ws: sum(max(dyck.depths(w)) for w in ws) / len(ws)  # noqa: E731
    assert mean_depth(deep) > mean_depth(flat) + 1.5
    # exact: length-4 skeletons are ()() (area 1+0+1+0 = 2) and (()) (area 1+2+1 = 4)
    words = Dyck(1).sample(20_000, 4, 4, seed=1, depth_bias=2.0)
    share = sum(w[1] == w[0] for w in words) / len(words)  # '( (' opens the nested skeleton
    assert share == pytest.approx(4 / (4 + 1), abs=0.015)  # weights 2^4 : 2^2
    with pytest.raises(NeurosymError, match="depth_bias"):
        dyck.sample(3, depth_bias=0.0)


def test_seeds_reproduce(dyck):
    assert dyck.sample(50, 2, 30, seed=7) == dyck.sample(50, 2, 30, seed=7)
    assert dyck.sample(50, 2, 30, seed=7) != dyck.sample(50, 2, 30, seed=8)
    a, b = dyck.recognition(200, seed=1), dyck.recognition(200, seed=1)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.labels, b.labels) and a.kinds == b.kinds
    assert not torch.equal(a.ids, dyck.recognition(200, seed=2).ids)


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_each_corruption_is_unbalanced_and_minimal(dyck, kind):
    neg, kinds = dyck.negatives(300, 2, 24, seed=0, corruptions=[kind])
    assert kinds == [kind] * 300
    for w in neg:
        toks = strings(dyck, w)
        assert not stack_balanced(toks, PAIRS2)
        assert not dyck.is_balanced(w)
    if kind in ("delete", "insert"):
        assert all(len(w) % 2 == 1 for w in neg)
    else:
        assert all(len(w) % 2 == 0 for w in neg)  # length-preserving: no parity shortcut


def test_corruptions_are_one_edit_from_a_word(dyck):
    rng = np.random.default_rng(0)
    for w in dyck.sample(200, 2, 16, seed=1):
        ins = dyck.corrupt(w, "insert", rng)
        assert any(ins[:i] + ins[i + 1 :] == w for i in range(len(ins)))
        rt = dyck.corrupt(w, "retype", rng)
        diff = [i for i in range(len(w)) if rt[i] != w[i]]
        assert len(diff) == 1 and (w[diff[0]] in dyck.opens) == (rt[diff[0]] in dyck.opens)


def test_recognition_set_is_balanced_and_labelled(dyck):
    data = dyck.recognition(1000, 2, 40, seed=0, eos=True)
    assert len(data) == 1000 and data.labels.sum() == 500
    assert collections.Counter(data.kinds) == {"balanced": 500, "retype": 167, "delete": 167, "insert": 166}
    for ids, n, y, kind in zip(data.ids.tolist(), data.lengths.tolist(), data.labels.tolist(), data.kinds):
        assert ids[n - 1] == dyck.eos and all(t == dyck.pad for t in ids[n:])
        body = strings(dyck, ids[: n - 1])
        assert stack_balanced(body, PAIRS2) == (y == 1.0) == (kind == "balanced")
    batches = list(data.batches(64, seed=0))
    assert sum(len(b[2]) for b in batches) == 1000
    assert all(b[0].shape[1] == int(b[1].max()) for b in batches)


def test_longer_test_lengths(dyck):
    data = dyck.recognition(200, 42, 80, seed=5)
    pos = data.lengths[data.labels == 1]
    assert int(pos.min()) >= 42 and int(pos.max()) <= 80
    assert int(data.lengths.min()) >= 41 and int(data.lengths.max()) <= 81


def test_next_token_targets(dyck):
    words = [dyck.vocab.encode("( [ ] )"), dyck.vocab.encode("[ ]")]
    nt = dyck.next_token(words)
    assert nt.inputs.shape == (2, 5) and nt.lengths.tolist() == [5, 3]
    assert nt.inputs[0, 0] == dyck.bos
    v = dyck.vocab
    allowed = lambda b, t: {v.tokens[i] for i in torch.nonzero(nt.targets[b, t]).flatten().tolist()}  # noqa: E731
    assert allowed(0, 0) == {"(", "[", "<eos>"}
    assert allowed(0, 1) == {"(", "[", ")"}
    assert allowed(0, 2) == {"(", "[", "]"}
    assert allowed(0, 3) == {"(", "[", ")"}
    assert allowed(0, 4) == {"(", "[", "<eos>"}
    assert not nt.targets[1, 3:].any()
    assert nt.depth[0].tolist() == [0, 1, 2, 1, 0]
    # the true next token is always allowed
    for w in dyck.sample(50, 2, 20, seed=0):
        t = dyck.next_token([w])
        nxt = w + [dyck.eos]
        assert all(t.targets[0, i, nxt[i]] for i in range(len(nxt)))
    with pytest.raises(NeurosymError, match="balanced"):
        dyck.allowed_next(dyck.vocab.encode("( ]"))


def test_errors_and_helpers():
    with pytest.raises(NeurosymError, match="k >= 1"):
        Dyck(0)
    with pytest.raises(NeurosymError, match="even length"):
        Dyck(2).sample(3, 5, 5)
    with pytest.raises(NeurosymError, match="unknown corruption"):
        Dyck(2).negatives(3, corruptions=["nope"])
    with pytest.raises(NeurosymError, match="k >= 2"):
        Dyck(1).negatives(3, corruptions=["retype"])
    with pytest.raises(NeurosymError, match="no token"):
        Dyck(2, vocab=Vocab.words(["(", ")"]))
    ids, lengths = pad_sequences([[4, 5], [], [6]], pad=0)
    assert ids.tolist() == [[4, 5], [0, 0], [6, 0]] and lengths.tolist() == [2, 0, 1]
    assert Dyck(2).sample(3, 0, 0) == [[], [], []]
    assert math.isclose(float(Dyck(1).recognition(10, seed=0, corruptions=["insert"]).labels.mean()), 0.5)
