"""generate: reproducible for a seed, log-probabilities equal a full forward's (so the
cache and the prompt handling are right), row endings, bad arguments."""

from __future__ import annotations

import pytest
import torch

from neurosym.compile.fsg import load_fsg
from neurosym.compile.lexicon import load_lexicon
from neurosym.data import shipped_file
from neurosym.decode import GrammarMask, LogitsProcessor, Temperature, feature_inputs, generate
from neurosym.errors import NeurosymError
from neurosym.lm.fusion import build_fusion_lm
from neurosym.lm.model import CausalLM, LMConfig

pytestmark = pytest.mark.usefixtures("one_thread")
V, BOS, EOS = 12, 1, 2


def lm(positions: str = "sinusoidal", max_len: int = 24, seed: int = 0) -> CausalLM:
    torch.manual_seed(seed)
    return CausalLM(LMConfig(vocab_size=V, d_model=16, n_layers=2, n_heads=2, d_ff=32, max_len=max_len, positions=positions)).eval()


def full_log_prob(model, prompt, tokens, eos_ended, **inputs) -> float:
    """log P(tokens [+ EOS] | BOS prompt) from one full forward pass."""
    seq = [BOS, *prompt, *tokens] + ([EOS] if eos_ended else [])
    ids = torch.tensor([seq])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids[:, :-1], **inputs).logits.double(), -1)[0]
    start = len(prompt)  # position predicting the first generated token
    targets = ids[0, start + 1 :]
    return float(logp[start:].gather(1, targets[:, None]).sum())


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
def test_model_log_prob_equals_a_full_forward(positions):
    model = lm(positions)
    prompts = [[3, 4, 5], [], [6], [7, 8, 9, 10, 11]]
    out = generate(model, prompts=prompts, max_len=10, seed=1, eos_id=EOS, bos_id=BOS)
    assert [len(p) for p in out.prompts] == [3, 0, 1, 5]
    for b in range(4):
        ref = full_log_prob(model, prompts[b], out.tokens[b], out.status[b] == "eos")
        assert abs(float(out.model_log_prob[b]) - ref) < 1e-5, b
    assert torch.allclose(out.sample_log_prob, out.model_log_prob)  # no processor: sampled from the model
    assert out.grammar_log_prob is None
    assert all(s == "eos" or len(t) == 10 for s, t in zip(out.status, out.tokens))


def test_fusion_model_with_features_of_the_generated_prefix():
    wa = load_fsg(shipped_file("grammars/clause.fsg"))
    vocab = wa.vocab
    bank = load_lexicon(shipped_file("lexicons/sentiment.lex"), vocab)
    torch.manual_seed(0)
    model = build_fusion_lm(LMConfig(vocab_size=len(vocab), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=24), len(bank.names), n_control=2).eval()
    eos, bos = vocab.id("<eos>"), vocab.id("<bos>")
    control = torch.rand(3, 2)
    feats = feature_inputs(bank, wa)
    out = generate(model, n=3, max_len=20, processors=[GrammarMask(wa, eos)], eos_id=eos, bos_id=bos, seed=0,
                   inputs={"control": control}, position_inputs=feats)
    assert out.status == ["eos"] * 3
    for b in range(3):
        seq = torch.tensor([[bos, *out.tokens[b], eos]])
        inputs = {"features": feats(seq[:, :-1])["features"], "control": control[b : b + 1]}
        with torch.no_grad():
            logp = torch.log_softmax(model(seq[:, :-1], **inputs).logits.double(), -1)[0]
        ref = float(logp.gather(1, seq[0, 1:, None]).sum())
        assert abs(float(out.model_log_prob[b]) - ref) < 1e-5


def test_the_same_seed_gives_the_same_samples():
    model = lm()
    procs = lambda: [Temperature(1.5)]  # noqa: E731
    a = generate(model, n=16, max_len=12, processors=procs(), seed=7, eos_id=EOS, bos_id=BOS)
    b = generate(model, n=16, max_len=12, processors=procs(), seed=7, eos_id=EOS, bos_id=BOS)
    c = generate(model, n=16, max_len=12, processors=procs(), seed=8, eos_id=EOS, bos_id=BOS)
    assert a.tokens == b.tokens and torch.equal(a.model_log_prob, b.model_log_prob)
    assert a.tokens != c.tokens


class ForbidAllAfter(LogitsProcessor):
    """Allows everything for the first ``k`` tokens of a row, then nothing (not even EOS)."""

    def __init__(self, k: int):
        self.k = k

    def reset(self, batch_size, device="cpu"):
        self.n = torch.zeros(batch_size, dtype=torch.long)

    def advance(self, tokens, done=None):
        self.n += 1 if done is None else (~done).long()

    def __call__(self, scores):
        return scores.masked_fill_((self.n >= self.k)[:, None], float("-inf"))


def test_rows_end_at_eos_dead_ends_and_max_len():
    model = lm()
    out = generate(model, n=30, max_len=6, processors=[ForbidAllAfter(3)], seed=0, eos_id=EOS, bos_id=BOS)
    for tokens, status in zip(out.tokens, out.status):
        assert status in ("eos", "dead_end")
        assert len(tokens) == 3 if status == "dead_end" else len(tokens) < 3
        assert EOS not in tokens
    assert "dead_end" in out.status
    # without eos_id rows end at max_len, or where the model's context is full
    long = generate(model, n=3, max_len=100, seed=0, bos_id=BOS)
    assert long.status == ["max_len"] * 3 and [len(t) for t in long.tokens] == [24] * 3
    short = generate(model, n=3, max_len=5, seed=0, bos_id=BOS)
    assert [len(t) for t in short.tokens] == [5] * 3 and short.tokens == [t[:5] for t in long.tokens]


def test_bad_arguments_are_neurosym_errors():
    model = lm()
    with pytest.raises(NeurosymError, match="n=3 rows but 2 prompts"):
        generate(model, n=3, prompts=[[3], [4]])
    with pytest.raises(NeurosymError, match="prompt 0 is empty and there is no bos_id"):
        generate(model, n=1)
    with pytest.raises(NeurosymError, match=r"prompt 1 needs 25 positions, .*LMConfig.max_len=24"):
        generate(model, prompts=[[3], [4] * 24], bos_id=BOS)
    with pytest.raises(NeurosymError, match="give n >= 0 rows or a list of prompts"):
        generate(model)
    one = generate(model, n=4, prompts=[[3, 4]], bos_id=BOS, max_len=2)
    assert one.prompts == [[3, 4]] * 4 and len(one) == 4
