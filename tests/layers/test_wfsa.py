"""RegexLayer: the untrained layer is the DFA; gradients, training, snapping back, KL, low rank."""

import random
import re

import pytest
import torch

import neurosym
from neurosym.compile.regex import compile_bank
from neurosym.dsl import parse_regex_bank
from neurosym.errors import NeurosymError
from neurosym.layers.wfsa import RegexLayer, DenseForward, dense_step, forward_scores
from neurosym.vocab import Vocab

PATTERNS = [r"(19|20)[0-9]{2}", r"a(b|c)*d", r"[0-9]+(\.[0-9]+)?", r"x?y+z"]
ALPHABET = "0123456789abcd.xyz" + "e-! "  # the patterns' characters plus distractors


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def vocab():
    return Vocab.chars(ALPHABET, specials=("<unk>",))


@pytest.fixture(scope="module")
def autos(vocab):
    return [neurosym.compile_regex(p, vocab=vocab) for p in PATTERNS]


def pad(seqs: list[list[int]], fill: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    L = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), L), fill, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, torch.tensor([len(s) for s in seqs])


def random_strings(autos, vocab, n=10_000, seed=0) -> list[str]:
    rng = random.Random(seed)
    strings = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12))) for _ in range(n)]
    for k, a in enumerate(autos):  # positives, and near misses made from them
        for s in a.sample(300, max_len=12, seed=k):
            text = vocab.spell(s)
            strings.append(text)
            if text:
                i = rng.randrange(len(text))
                strings.append(text[:i] + rng.choice(ALPHABET) + text[i + 1 :])
    return strings


def reference_scores(layer: RegexLayer, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The forward algorithm written plainly in log space (autograd through logsumexp)."""

    def finite(x):
        return x.masked_fill(x == float("-inf"), -1e4)

    w = finite(layer.token_log_weights())  # (V, K, Q, Q)
    alpha = finite(layer._start()).expand(ids.shape[0], -1, -1)
    for t in range(ids.shape[1]):
        nxt = torch.logsumexp(alpha.unsqueeze(-1) + w[ids[:, t].clamp(min=0)], dim=-2)
        alpha = torch.where((t < lengths)[:, None, None], nxt, alpha)
    return torch.logsumexp(alpha + finite(layer._final()), dim=-1)


# ---------------------------------------------------------------------- the untrained layer is the DFA
def test_untrained_layer_accepts_exactly_what_the_automata_accept(autos, vocab):
    layer = RegexLayer(autos)
    strings = random_strings(autos, vocab)
    ids, lengths = pad([vocab.encode(s) for s in strings])
    with torch.no_grad():
        prob = layer.accept_prob(ids, lengths)
    ours = prob > 0.5
    dfa = torch.tensor([[a.accepts(s) for a in autos] for s in strings])
    python = torch.tensor([[bool(re.fullmatch(p, s, re.ASCII)) for p in PATTERNS] for s in strings])
    assert torch.equal(dfa, python)
    assert dfa.sum(0).min() >= 300  # positives are well represented
    assert torch.equal(ours, dfa)
    assert prob.shape == (len(strings), len(PATTERNS))


def test_scores_are_zero_on_accepted_and_below_threshold_on_rejected(autos, vocab):
    layer = RegexLayer(autos, penalty=-30.0)
    assert layer.threshold == -15.0
    strings = random_strings(autos, vocab, n=2000)
    ids, lengths = pad([vocab.encode(s) for s in strings])
    with torch.no_grad():
        scores = layer(ids, lengths)
    dfa = torch.tensor([[a.accepts(s) for a in autos] for s in strings])
    assert scores[dfa].abs().max() < 1e-4
    assert scores[~dfa].max() < -20


def test_a_regex_bank_and_names(vocab):
    bank = compile_bank(parse_regex_bank('YEAR: /(19|20)[0-9]{2}/\nDOT: "."\n'), vocab)
    layer = RegexLayer(bank)
    assert layer.names == ["YEAR", "DOT"]
    ids, lengths = pad([vocab.encode(s) for s in ["1999", ".", "2a"]])
    with torch.no_grad():
        assert (layer.accept_prob(ids, lengths) > 0.5).tolist() == [[True, False], [False, True], [False, False]]


def test_bad_input(autos, vocab):
    other = neurosym.compile_regex("ab")  # its own vocabulary
    with pytest.raises(NeurosymError, match="share one vocabulary"):
        RegexLayer([autos[0], other])
    with pytest.raises(NeurosymError, match="at least one"):
        RegexLayer([])
    with pytest.raises(NeurosymError, match="penalty"):
        RegexLayer(autos, penalty=1.0)
    layer = RegexLayer(autos)
    with pytest.raises(NeurosymError, match="token ids"):
        layer(torch.tensor([[0, -1]]))
    with pytest.raises(NeurosymError, match="lengths"):
        layer(torch.tensor([[0, 1]]), torch.tensor([3]))


# ---------------------------------------------------------------------- padding and gradients
def test_padding_is_ignored(autos, vocab):
    layer = RegexLayer(autos)
    with torch.no_grad():
        layer.log_weights.add_(torch.randn_like(layer.log_weights))
    strings = ["1999", "", "abcbd", "3.14", "yyz", "0"]
    ids, lengths = pad([vocab.encode(s) for s in strings], fill=-1)
    with torch.no_grad():
        batch = layer(ids, lengths)
        for i, s in enumerate(strings):
            alone = layer(torch.tensor([vocab.encode(s)], dtype=torch.long).reshape(1, len(s)))
            torch.testing.assert_close(batch[i], alone[0])
        # whatever sits beyond the lengths does not matter
        other, _ = pad([vocab.encode(s) for s in strings], fill=3)
        torch.testing.assert_close(layer(other, lengths), batch)


def test_gradients_flow_and_match_the_plain_log_space_algorithm(autos, vocab):
    torch.manual_seed(0)
    layer = RegexLayer(autos).double()
    with torch.no_grad():  # away from the 0 / -20 corners, so every weight matters
        layer.log_weights.add_(3 * torch.randn_like(layer.log_weights))
        layer.start_weights.add_(torch.randn_like(layer.start_weights))
        layer.final_weights.add_(torch.randn_like(layer.final_weights))
    ids, lengths = pad([vocab.encode(s) for s in ["1999", "", "abcbd", "3.14", "yyz", "0e-"]])
    g = torch.randn(6, len(autos), dtype=torch.double)
    params = [layer.log_weights, layer.start_weights, layer.final_weights]

    (layer(ids, lengths) * g).sum().backward()
    ours = [p.grad.clone() for p in params]
    layer.zero_grad()
    (reference_scores(layer, ids, lengths) * g).sum().backward()
    for a, b in zip(ours, (p.grad for p in params)):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(layer(ids, lengths), reference_scores(layer, ids, lengths))

    layer.zero_grad()
    layer.accept_prob(ids, lengths).sum().backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hand_written_backward_equals_autograd_through_the_shared_loop(autos, vocab, dtype):
    """The dense path's backward algorithm against autograd through forward_scores (the one
    forward loop both paths run), with padding, on perturbed weights."""
    torch.manual_seed(3)
    layer = RegexLayer(autos).to(dtype)
    with torch.no_grad():
        layer.log_weights.add_(2 * torch.randn_like(layer.log_weights))
    ids, lengths = pad([vocab.encode(s) for s in ["1999", "", "abcbd", "3.14", "yyz"]])
    ids, active = layer._check_ids(ids, lengths)
    inputs = [layer.token_log_weights().detach().requires_grad_(), layer._start().detach().requires_grad_(),
              layer._final().detach().requires_grad_()]
    g = torch.randn(5, len(autos), dtype=dtype)
    (DenseForward.apply(*inputs, ids, active, layer.state_mask) * g).sum().backward()
    manual = [x.grad.clone() for x in inputs]
    for x in inputs:
        x.grad = None
    step, _, _ = dense_step(inputs[0])
    (forward_scores(inputs[1], inputs[2], step, ids, active, layer.state_mask) * g).sum().backward()
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-10)
    for a, b in zip(manual, (x.grad for x in inputs)):
        finite = torch.isfinite(b)
        torch.testing.assert_close(a[finite], b[finite], **tol)


def test_gradcheck_small():
    torch.manual_seed(1)
    vocab = Vocab.chars("abcdxy", specials=())
    layer = RegexLayer([neurosym.compile_regex(p, vocab=vocab) for p in ["a(b|c)*d", "x?y"]]).double()
    ids, lengths = pad([vocab.encode(s) for s in ["abd", "y", "ac"]])
    names = ["log_weights", "start_weights", "final_weights"]
    inputs = tuple((getattr(layer, n).detach() + torch.randn_like(getattr(layer, n))).requires_grad_() for n in names)

    def scores(*weights):
        return torch.func.functional_call(layer, dict(zip(names, weights)), (ids, lengths))

    assert torch.autograd.gradcheck(scores, inputs)


# ---------------------------------------------------------------------- KL, training, snapping back
def test_kl_to_prior(autos):
    layer = RegexLayer(autos)
    assert layer.kl_to_prior().abs() < 1e-5
    assert layer.kl_to_prior(per_automaton=True).shape == (len(autos),)
    with torch.no_grad():
        layer.log_weights[:, 1].add_(torch.randn_like(layer.log_weights[:, 1]))
    per = layer.kl_to_prior(per_automaton=True)
    assert per[1] > 0.01 and per[[0, 2, 3]].abs().max() < 1e-5
    layer.kl_to_prior().backward()
    assert layer.log_weights.grad[:, 1].abs().sum() > 0


def test_untrained_snap_back_gives_the_compiled_automata(autos):
    for a, b in zip(autos, RegexLayer(autos).snap_back()):
        assert torch.equal(a.delta, b.delta) and torch.equal(a.final, b.final) and b.start == 0


def check_valid(auto: neurosym.Automaton, vocab: Vocab) -> None:
    Q = auto.num_states
    assert auto.delta.dtype == torch.long and auto.delta.shape == (Q, len(vocab))
    assert int(auto.delta.min()) >= -1 and int(auto.delta.max()) < Q
    assert 0 <= auto.start < Q and auto.final.shape == (Q,) and auto.final.dtype == torch.bool


def test_training_changes_weights_and_snaps_back_to_a_dfa_of_the_target():
    vocab = Vocab.chars("abc", specials=())
    start = [neurosym.compile_regex(p, vocab=vocab) for p in ["ab", "ab", "c+"]]
    targets = [r"ab+", r"a?b", r"c+"]  # learn a loop on b; learn a second way in; keep c+
    rng = random.Random(0)
    strings = sorted({"".join(rng.choice("abc") for _ in range(rng.randint(0, 6))) for _ in range(300)} | {"ab" + "b" * n for n in range(5)})
    labels = torch.tensor([[float(bool(re.fullmatch(t, s))) for t in targets] for s in strings])
    ids, lengths = pad([vocab.encode(s) for s in strings])
    layer = RegexLayer(start, max_groups=1)  # tiny automata: one group, fewer ops per step
    before = layer.log_weights.detach().clone()
    opt = torch.optim.Adam(layer.parameters(), lr=0.1)
    for _ in range(200):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy(layer.accept_prob(ids, lengths), labels)
        loss.backward()
        opt.step()
    assert loss.item() < 0.01
    assert (layer.log_weights.detach() - before).abs().max() > 1.0
    assert layer.kl_to_prior() > 0

    def language_matches(auto, k):
        return all(auto.accepts(s) == bool(y[k]) for s, y in zip(strings, labels.tolist()))

    argmax = layer.snap_back()  # the layer learned a?b with two start states: argmax keeps one
    subset = layer.snap_back(mode="subset")
    for auto in [*argmax, *subset, *layer.snap_back(minimize=False), *layer.snap_back(minimize=False, mode="subset")]:
        check_valid(auto, vocab)
    assert language_matches(argmax[0], 0) and language_matches(argmax[2], 2)
    assert all(language_matches(auto, k) for k, auto in enumerate(subset))
    assert all(subset[0].accepts("ab" + "b" * n) for n in range(8))  # beyond the training lengths
    with pytest.raises(NeurosymError, match="mode"):
        layer.snap_back(mode="viterbi")


# ---------------------------------------------------------------------- low rank
def test_low_rank_fits_the_dfas_with_enough_rank_and_trains(autos, vocab):
    strings = random_strings(autos, vocab, n=1000, seed=3)
    ids, lengths = pad([vocab.encode(s) for s in strings])
    dfa = torch.tensor([[a.accepts(s) for a in autos] for s in strings])
    layer = RegexLayer(autos, rank=16)
    assert layer.token_factors.shape == (len(vocab), 16)
    assert layer.state_factors.shape == (len(autos), layer.num_states, 16, layer.num_states)
    assert not hasattr(layer, "log_weights")
    with torch.no_grad():
        prob = layer.accept_prob(ids, lengths)
    assert prob.shape == (len(strings), len(autos))
    assert torch.equal(prob > 0.5, dfa)
    assert layer.kl_to_prior() < 1e-3
    for a, b in zip(autos, layer.snap_back()):
        assert torch.equal(a.delta, b.delta)

    small = RegexLayer(autos, rank=3)
    with torch.no_grad():
        agree = ((small.accept_prob(ids, lengths) > 0.5) == dfa).float().mean()
    assert agree > 0.5  # it runs; rank 3 cannot tell every token class apart
    opt = torch.optim.Adam(small.parameters(), lr=0.05)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy(small.accept_prob(ids[:200], lengths[:200]), dfa[:200].float())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert small.token_factors.grad.abs().sum() > 0


# ---------------------------------------------------------------------- bench smoke test
def test_bench_runs_small():
    from neurosym.bench.wfsa import format_results, regex_list, run

    patterns = regex_list(100)
    assert len(set(patterns)) == 100
    r = run(n_regex=6, batch=4, length=8, repeats=1)
    assert r["automata"] == 6 and r["forward"]["layers"]["per-token"]["tokens_per_second"] > 0
    text = format_results(r)
    assert "baseline" in text and "forward+backward" in text
