"""The idea gate as a logits processor (neurosym/decode/idea.py): it adds the gate of each
row's own history, and generating through it from the ungated model samples what the
gated model samples."""

from __future__ import annotations

import pytest
import torch

from neurosym.decode import IdeaGate, RepetitionPenalty, generate, ungated
from neurosym.errors import NeurosymError
from neurosym.lm.idea import IdeaConfig, IdeaOutput, idea_gate
from neurosym.lm.model import CausalLM, LMConfig

V, BOS, EOS = 13, 2, 3


def idea_model(variant: str = "published") -> CausalLM:
    torch.manual_seed(1)
    cfg = LMConfig(vocab_size=V, d_model=16, n_layers=2, n_heads=2, d_ff=32, dropout=0.0, max_len=24)
    m = CausalLM(cfg, output=IdeaOutput(16, V, IdeaConfig(hidden=8, alpha=0.7, beta=-1.5, variant=variant)))
    with torch.no_grad():  # larger idea logits, so the gate matters
        m.output.head.out.weight.mul_(40)
    return m.eval()


def test_processor_adds_the_gate_of_each_rows_history():
    m = idea_model()
    proc = IdeaGate(m, BOS)
    proc.reset(2)
    proc.advance(torch.tensor([5, 6]))
    proc.advance(torch.tensor([7, 0]), done=torch.tensor([False, True]))  # row 1 is done: its history stays
    scores = torch.randn(2, V)
    out = proc(scores.clone())
    with torch.no_grad():
        z0 = m(torch.tensor([[BOS, 5, 7]])).extras["idea"][0, -1]
        z1 = m(torch.tensor([[BOS, 6]])).extras["idea"][0, -1]
    expected = scores + torch.stack([idea_gate(z0, 0.7, -1.5), idea_gate(z1, 0.7, -1.5)])
    assert torch.allclose(out, expected, atol=1e-5)
    assert proc.history == [[BOS, 5, 7], [BOS, 6]]


@pytest.mark.parametrize("variant", ["published", "outside"])
def test_generation_through_the_processor_equals_the_gated_model(variant):
    m = idea_model(variant)
    prompts = [[5], [6, 7, 8], [9, 10]]
    direct = generate(m, prompts=prompts, max_len=10, processors=[RepetitionPenalty(20, 1.2)], seed=3, eos_id=EOS, bos_id=BOS)
    with ungated(m):
        plain = generate(m, prompts=prompts, max_len=10, processors=[RepetitionPenalty(20, 1.2)], seed=3, eos_id=EOS, bos_id=BOS)
        gated = generate(m, prompts=prompts, max_len=10, processors=[IdeaGate(m, BOS), RepetitionPenalty(20, 1.2)],
                         seed=3, eos_id=EOS, bos_id=BOS)
    assert m.output.gated  # restored
    assert gated.tokens == direct.tokens
    assert torch.allclose(gated.sample_log_prob, direct.sample_log_prob, atol=1e-6)
    assert plain.tokens != direct.tokens  # the gate changes what is drawn


def test_processor_refuses_a_model_without_idea_head():
    plain = CausalLM(LMConfig(vocab_size=V, d_model=16, n_layers=1, n_heads=2))
    with pytest.raises(NeurosymError, match="no idea head"):
        IdeaGate(plain, BOS)
    with pytest.raises(NeurosymError, match="variant"):
        IdeaGate(idea_model(), BOS, variant="inside")
