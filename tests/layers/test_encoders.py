"""Sequence encoders: shapes, padding invariance, gradients and the registry."""


import pytest
import torch

import neurosym
from neurosym.tasks.dyck import pad_sequences
from neurosym.errors import NeurosymError
from neurosym.layers.encoders import ENCODERS, ConvEncoder, build_encoder, masked_pool, padding_mask
from neurosym.vocab import Vocab
from references import rule_tensors_log_prob

V, D = 11, 8


pytestmark = pytest.mark.usefixtures("one_thread")





@pytest.fixture(scope="module")
def bank():
    return neurosym.load("grammars/tomita.regex", vocab=Vocab.chars("01"))  # <pad> is id 0


@pytest.fixture(scope="module")
def grammar():
    return neurosym.load("grammars/arith.pcfg")


def batch_for(name, bank=None, grammar=None, seed=0):
    """(vocab_size, kwargs, ids (B, L) right-padded with 0, lengths) for an encoder."""
    g = torch.Generator().manual_seed(seed)
    if name == "regex":
        seqs = [torch.randint(4, 6, (n,), generator=g).tolist() for n in (6, 3, 1, 5)]  # '0' and '1'
        return len(bank.vocab), {"automata": bank}, *pad_sequences(seqs)
    if name == "pcfg":
        seqs = grammar.sample(4, seed=seed, max_len=9)
        seqs[2] = seqs[2] + [grammar.vocab.id("+")]  # one sentence outside the grammar
        return len(grammar.vocab), {"rules": grammar}, *pad_sequences(seqs)
    seqs = [torch.randint(1, V, (n,), generator=g).tolist() for n in (7, 4, 1, 5)]
    return V, {"stack_dim": 3, "depth": 8} if name == "stack" else {}, *pad_sequences(seqs)


NEURAL = ["mean", "conv", "rnn", "lstm", "attention", "stack"]
SYMBOLIC = ["regex", "pcfg"]


def build(name, bank, grammar, **extra):
    vocab_size, kwargs, ids, lengths = batch_for(name, bank if name == "regex" else None, grammar if name == "pcfg" else None)
    torch.manual_seed(0)
    enc = build_encoder(name, vocab_size, D, **kwargs, **extra)
    enc.eval()
    return enc, ids, lengths


@pytest.mark.parametrize("name", NEURAL + SYMBOLIC)
def test_shapes_pooled_and_per_token(name, request):
    bank = request.getfixturevalue("bank") if name == "regex" else None
    grammar = request.getfixturevalue("grammar") if name == "pcfg" else None
    enc, ids, lengths = build(name, bank, grammar)
    B, L = ids.shape
    assert enc(ids).shape == (B, D)
    assert enc(ids, lengths).shape == (B, D)
    states, mask = enc.tokens(ids, lengths)
    assert states.shape == (B, L, D) and mask.shape == (B, L)
    assert torch.equal(mask, padding_mask(ids, lengths))
    assert torch.all(states[~mask] == 0)  # padding positions are zero
    enc.pooled = False
    assert torch.equal(enc(ids, lengths), states)
    assert torch.isfinite(states).all()


@pytest.mark.parametrize("name", NEURAL + SYMBOLIC)
def test_padding_invariance(name, request):
    bank = request.getfixturevalue("bank") if name == "regex" else None
    grammar = request.getfixturevalue("grammar") if name == "pcfg" else None
    enc, ids, lengths = build(name, bank, grammar)
    padded = torch.cat([ids, torch.zeros(ids.shape[0], 6, dtype=torch.long)], 1)
    garbage = padded.clone()
    garbage[:, ids.shape[1] :] = -1  # any id after the end, when lengths are given
    with torch.no_grad():
        ref = enc(ids, lengths)
        assert torch.allclose(enc(padded, lengths), ref, atol=1e-5)
        assert torch.allclose(enc(padded), ref, atol=1e-5)  # lengths read off the <pad> ids
        assert torch.allclose(enc(garbage, lengths), ref, atol=1e-5)
        garbage[:, : ids.shape[1]] = torch.where(padding_mask(ids, lengths), ids, -1)  # inside the padding too
        assert torch.allclose(enc(garbage, lengths), ref, atol=1e-5)
        tokens = enc.tokens(ids, lengths)[0]
        assert torch.allclose(enc.tokens(padded, lengths)[0][:, : ids.shape[1]], tokens, atol=1e-5)
    # one sequence alone gives what it gives in the batch
    one = enc(ids[1:2, : int(lengths[1])])
    assert torch.allclose(one, ref[1:2], atol=1e-5)


@pytest.mark.parametrize("name", NEURAL)
def test_gradients_reach_the_embeddings(name):
    enc, ids, lengths = build(name, None, None)
    enc.train()
    enc(ids, lengths).pow(2).sum().backward()
    emb = [m for m in enc.modules() if isinstance(m, torch.nn.Embedding)]
    assert len(emb) == 1
    grad = emb[0].weight.grad
    assert grad is not None and torch.isfinite(grad).all()
    used = ids[padding_mask(ids, lengths)].unique()
    assert torch.all(grad[used].abs().sum(-1) > 0)
    assert torch.all(grad[0] == 0)  # the padding row never learns


def test_regex_gradients_reach_the_automata(bank):
    enc, ids, lengths = build("regex", bank, None)
    enc(ids, lengths).sum().backward()
    assert enc.layer.log_weights.grad.abs().sum() > 0 and enc.proj.weight.grad.abs().sum() > 0


def test_regex_features_are_the_layer_acceptances(bank):
    enc, ids, lengths = build("regex", bank, None)
    probs = enc.layer.accept_prob(ids, lengths)
    # untrained: acceptance prob > 0.5 exactly when the DFA accepts
    for b in range(ids.shape[0]):
        word = ids[b, : int(lengths[b])]
        for k, auto in enumerate(bank.patterns.values()):
            assert (probs[b, k] > 0.5) == auto.accepts(word)
    assert torch.allclose(enc(ids, lengths), enc.proj(probs))
    # the per-token state at t is the pooled output of the prefix
    states, _ = enc.tokens(ids, lengths)
    assert torch.allclose(states[0, 2], enc(ids[:1, :3])[0], atol=1e-6)
    with pytest.raises(NeurosymError, match="vocab_size"):
        build_encoder("regex", 99, D, automata=bank)


def test_pcfg_features(grammar):
    enc, ids, lengths = build("pcfg", None, grammar)
    feats = enc.sentence_features(ids, lengths)
    assert feats.shape == (4, enc.num_features) == (4, 2 + grammar.N + int((grammar.binary > float("-inf")).sum()))
    in_grammar = feats[:, 1]
    assert in_grammar.tolist() == [1.0, 1.0, 0.0, 1.0]
    for b in (0, 1, 3):
        n = int(lengths[b])
        assert feats[b, 0].item() == pytest.approx(rule_tensors_log_prob(grammar, ids[b, :n].tolist()) / n, abs=1e-4)
        roots = feats[b, 2 : 2 + grammar.N]
        assert roots.sum().item() == pytest.approx(1.0 if n >= 2 else 0.0, abs=1e-4)
        rules = feats[b, 2 + grammar.N :] * max(n - 1, 1)
        assert rules.sum().item() == pytest.approx(n - 1 if n >= 2 else 0.0, abs=1e-3)  # n - 1 binary nodes
    assert torch.all(feats[2, 2:] == 0)  # no tree: zero posteriors
    states, mask = enc.tokens(ids, lengths)
    post = enc.posteriors(ids, lengths)[1]
    full = [b for b in (0, 1, 3) if int(lengths[b]) >= 2]
    assert torch.allclose(post[full].sum(-1)[mask[full, : post.shape[1]]], torch.ones(1, dtype=post.dtype), atol=1e-4)
    enc(ids, lengths).sum().backward()
    assert enc.proj.weight.grad.abs().sum() > 0
    with pytest.raises(NeurosymError, match="unknown or no pcfg features"):
        build_encoder("pcfg", len(grammar.vocab), D, rules=grammar, features=("trees",))


def test_bidirectional_lstm_last_pooling_reads_both_ends():
    torch.manual_seed(0)
    enc = build_encoder("lstm", V, D, bidirectional=True)
    _, _, ids, lengths = batch_for("lstm")
    states, mask = enc.tokens(ids, lengths)
    pooled = enc(ids, lengths)
    assert torch.allclose(pooled, enc.pool(states, mask), atol=1e-6)
    n = int(lengths[0])
    assert torch.allclose(pooled[0], torch.cat([states[0, n - 1, : D // 2], states[0, 0, D // 2 :]]), atol=1e-6)
    with pytest.raises(NeurosymError, match="even"):
        build_encoder("lstm", V, 7, bidirectional=True)


def test_strided_conv_windows():
    torch.manual_seed(0)
    enc = ConvEncoder(V, D, kernel_size=4, stride=2)
    ids = torch.tensor([[1, 2, 3, 4, 5, 0, 0], [1, 2, 0, 0, 0, 0, 0]])
    states, mask = enc.tokens(ids)
    assert states.shape == (2, 4, D) and mask.tolist() == [[True, True, True, False], [True, False, False, False]]
    padded = torch.cat([ids, torch.zeros(2, 5, dtype=torch.long)], 1)
    assert torch.allclose(enc(padded), enc(ids), atol=1e-6)


def test_masked_pool_modes():
    states = torch.arange(12.0).view(2, 3, 2)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    assert masked_pool(states, mask, "mean").tolist() == [[1.0, 2.0], [0.0, 0.0]]
    assert masked_pool(states, mask, "max").tolist() == [[2.0, 3.0], [0.0, 0.0]]
    assert masked_pool(states, mask, "last").tolist() == [[2.0, 3.0], [0.0, 0.0]]
    assert masked_pool(states, mask, "first").tolist() == [[0.0, 1.0], [0.0, 0.0]]
    with pytest.raises(NeurosymError, match="known: mean, max, last, first"):
        masked_pool(states, mask, "median")


def test_empty_sequences_encode_to_finite_vectors():
    ids = torch.zeros(2, 4, dtype=torch.long)
    ids[0, :2] = torch.tensor([3, 4])
    for name in NEURAL:
        torch.manual_seed(0)
        out = build_encoder(name, V, D)(ids)
        assert torch.isfinite(out).all(), name


def test_registry_and_errors():
    assert set(ENCODERS) == {"mean", "conv", "rnn", "lstm", "attention", "stack", "regex", "pcfg"}
    with pytest.raises(NeurosymError, match="unknown encoder 'gru'; known: attention, conv, lstm, mean, pcfg, regex, rnn, stack"):
        build_encoder("gru", V, D)
    with pytest.raises(NeurosymError, match="encoder 'conv'.*unexpected keyword.*kernel"):
        build_encoder("conv", V, D, kernel=3)
    with pytest.raises(NeurosymError, match="divisible"):
        build_encoder("attention", V, 10, heads=4)
    with pytest.raises(NeurosymError, match="pooling"):
        build_encoder("mean", V, D, pool="median")
    with pytest.raises(NeurosymError, match="lengths"):
        build_encoder("mean", V, D)(torch.ones(2, 3, dtype=torch.long), torch.tensor([4, 1]))
    stack = build_encoder("stack", V, D, hidden_size=5, nondeterministic=True)
    assert stack(torch.ones(2, 3, dtype=torch.long)).shape == (2, D)
