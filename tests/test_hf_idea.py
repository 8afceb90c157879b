"""Idea gating on a randomly initialised GPT-2 built from a config (neurosym/hf_idea.py):
parameter counts, the gated logits, the loss and its gradients, and generation through
the logits processor against a hand-written greedy loop; LoRA adapters through peft
(skipped without peft). No download."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")

from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

from neurosym.errors import NeurosymError  # noqa: E402
from neurosym.hf_idea import IdeaGatedLM, IdeaGateLogitsProcessor, LoraSettings  # noqa: E402
from neurosym.lm.idea import IdeaConfig, idea_gate, idea_parameters  # noqa: E402

V, D = 50, 32


def gpt2(seed: int = 0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=V, n_positions=32, n_embd=D, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).eval()


def idea_lm(tied: bool = True, **kw) -> IdeaGatedLM:
    m = IdeaGatedLM(gpt2(), IdeaConfig(hidden=16, tied=tied, alpha=0.5, **kw))
    with torch.no_grad():
        m.head.out.weight.mul_(2000)  # idea logits that vary across the vocabulary: a gate that matters
    return m.eval()


def test_parameter_counts_tied_and_untied():
    base = sum(p.numel() for p in gpt2().parameters())
    for tied in (True, False):
        m = IdeaGatedLM(gpt2(), IdeaConfig(hidden=16, tied=tied))
        assert sum(p.numel() for p in m.parameters()) - base == idea_parameters(D, V, 16, tied)


def test_gated_logits_and_loss_gradients():
    m = idea_lm(stop_words=0)
    ids = torch.randint(1, V, (3, 9))
    out = m(ids)
    assert torch.allclose(out.logits, out.ungated + idea_gate(out.idea, 0.5))
    direct = m.base(ids).logits
    assert torch.allclose(out.ungated, direct, atol=1e-5)
    m.train()
    stop = torch.tensor([5, 7])
    m.stop_ids = stop
    mask = torch.ones_like(ids)
    mask[2, 6:] = 0
    out = m(ids, attention_mask=mask, labels=ids)
    assert out.loss is not None and torch.isfinite(out.loss)
    z = out.idea
    z.retain_grad()
    out.idea_bce.backward()
    assert z.grad[..., stop].abs().max() == 0  # stop words: no idea-loss gradient
    assert z.grad[:, -1].abs().max() == 0  # the last position predicts nothing
    assert z.grad[2, 5:].abs().max() == 0  # padded targets: none
    assert m.head.fc.weight.grad is not None and m.head.fc.weight.grad.abs().sum() > 0
    assert int(m.steps) == 1


def test_freeze_base_trains_only_the_head():
    m = IdeaGatedLM(gpt2(), IdeaConfig(hidden=8), freeze_base=True)
    trainable = sum(p.numel() for p in m.parameters() if p.requires_grad)
    assert trainable == idea_parameters(D, V, 8, True)


def test_processor_in_generate_equals_greedy_on_gated_logits():
    m = idea_lm()
    prompt = torch.randint(1, V, (2, 4))
    gen = m.base.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=6, do_sample=False,
                          logits_processor=[IdeaGateLogitsProcessor(m)], pad_token_id=0, eos_token_id=None)
    ids = prompt.clone()
    with torch.no_grad():
        for _ in range(6):
            nxt = m(ids).logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], 1)
    assert torch.equal(gen, ids)
    plain = m.base.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=None)
    assert not torch.equal(plain, gen)  # the gate changes the greedy path


def test_processor_reads_left_padded_prompts_like_unpadded_ones():
    m = idea_lm()
    row = torch.randint(1, V, (1, 3))
    padded = torch.cat([torch.zeros(1, 2, dtype=torch.long), row], 1)
    scores = torch.zeros(1, V)
    a = IdeaGateLogitsProcessor(m)(row, scores.clone())
    b = IdeaGateLogitsProcessor(m, pad_token_id=0)(padded, scores.clone())
    assert torch.allclose(a, b, atol=1e-5)


def test_errors():
    with pytest.raises(NeurosymError, match="IdeaGatedLM"):
        IdeaGateLogitsProcessor(gpt2())


def _peft():
    return pytest.importorskip("peft", reason="peft (the hf extra) is not installed: LoRA is untested here")


def test_lora_trains_adapters_and_the_head_and_leaves_the_base_weights():
    _peft()
    r = 4
    m = IdeaGatedLM(gpt2(), IdeaConfig(hidden=8, alpha=0.5), lora=LoraSettings(r=r, alpha=8, dropout=0.0))
    plain = IdeaGatedLM(gpt2(), IdeaConfig(hidden=8, alpha=0.5))
    plain.head.load_state_dict(m.head.state_dict())
    ids = torch.randint(1, V, (3, 9))
    m.eval()
    with torch.no_grad():  # the adapters' B matrices start at zero: the wrapped model computes what the base did
        assert torch.allclose(m(ids).logits, plain.eval()(ids).logits, atol=1e-5)
    trainable = {n: p for n, p in m.named_parameters() if p.requires_grad}
    lora = {n: p for n, p in trainable.items() if "lora_" in n}
    # peft's default target on GPT-2 is c_attn (D -> 3D) in each of the 2 layers: A (r, D) and B (3D, r)
    assert sum(p.numel() for p in lora.values()) == 2 * (r * D + 3 * D * r)
    assert sum(p.numel() for n, p in trainable.items() if n.startswith("head.")) == idea_parameters(D, V, 8, True)
    assert set(trainable) == set(lora) | {n for n in trainable if n.startswith("head.")}
    frozen = {n: p.detach().clone() for n, p in m.named_parameters() if not p.requires_grad}
    assert frozen  # the base's own weights
    opt = torch.optim.AdamW(trainable.values(), lr=1e-2)
    m.train()
    losses = []
    for _ in range(8):
        opt.zero_grad()
        out = m(ids, labels=ids)
        out.loss.backward()
        assert all(p.grad is not None for n, p in lora.items() if "lora_B" in n)  # B gets a gradient at once (A's is 0 while B = 0)
        opt.step()
        losses.append(float(out.loss.detach()))
    assert losses[-1] < losses[0]
    assert all(torch.equal(p, frozen[n]) for n, p in m.named_parameters() if n in frozen)
    assert any(p.abs().sum() > 0 for n, p in lora.items() if "lora_B" in n)  # the adapters moved


def test_lora_model_generates_through_the_processor():
    _peft()
    m = IdeaGatedLM(gpt2(), IdeaConfig(hidden=16, alpha=0.5), lora=LoraSettings(r=2, dropout=0.0)).eval()
    with torch.no_grad():
        m.head.out.weight.mul_(2000)
    prompt = torch.randint(1, V, (2, 4))
    gen = m.base.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=5, do_sample=False,
                          logits_processor=[IdeaGateLogitsProcessor(m)], pad_token_id=0, eos_token_id=None)
    ids = prompt.clone()
    with torch.no_grad():
        for _ in range(5):
            ids = torch.cat([ids, m(ids).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(gen, ids)


def test_lora_errors():
    _peft()
    with pytest.raises(NeurosymError, match="conflict"):
        IdeaGatedLM(gpt2(), lora=LoraSettings(), freeze_base=True)
    with pytest.raises(NeurosymError, match="LoRA on GPT2LMHeadModel"):
        IdeaGatedLM(gpt2(), lora=LoraSettings(target_modules=["no_such_module"]))
    with pytest.raises(NeurosymError, match="LoraSettings.r"):
        LoraSettings(r=0)
