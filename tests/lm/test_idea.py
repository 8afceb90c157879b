"""Idea gating (neurosym/lm/idea.py): targets against a naive reference, the gate and
its variant against hand-computed values, stop-word masking of gradients, the ramp, the
output layer inside CausalLM, parameter counts and config errors."""

from __future__ import annotations

import math

import pytest
import torch

from neurosym.errors import ConfigError, NeurosymError
from neurosym.lm.idea import (
    IdeaConfig, IdeaOutput, idea_gate, idea_loss, idea_objective, idea_parameters, idea_perplexities, idea_targets,
    idea_training_loss, matched_d_ff, ramped_alpha, stop_word_ids, xray,
)
from neurosym.lm.model import CausalLM, LMConfig


def naive_targets(targets: torch.Tensor, V: int, K: int, pad: int) -> torch.Tensor:
    B, L = targets.shape
    out = torch.zeros(B, L, V)
    for b in range(B):
        for t in range(L):
            for j in range(K):
                if t + j < L:
                    v = int(targets[b, t + j])
                    if v != pad:
                        out[b, t, v] = 1.0
    return out


@pytest.mark.parametrize("seed", range(6))
def test_targets_equal_naive_reference(seed):
    g = torch.Generator().manual_seed(seed)
    B, L, V = 3, int(torch.randint(1, 13, (1,), generator=g)), 9
    K = int(torch.randint(1, 8, (1,), generator=g))
    pad = int(torch.randint(0, V, (1,), generator=g))
    targets = torch.randint(0, V, (B, L), generator=g)
    lengths = torch.randint(0, L + 1, (B,), generator=g)  # right padding of random length (0: all pad)
    targets[torch.arange(L)[None, :] >= lengths[:, None]] = pad
    assert torch.equal(idea_targets(targets, V, K, pad), naive_targets(targets, V, K, pad))


def test_targets_window_longer_than_row_and_by_hand():
    t = torch.tensor([[4, 5, 4, 6, 0, 0]])
    y = idea_targets(t, 7, 2, pad_id=0)
    assert y[0, 0].nonzero().flatten().tolist() == [4, 5]
    assert y[0, 2].nonzero().flatten().tolist() == [4, 6]
    assert y[0, 3].nonzero().flatten().tolist() == [6]  # cut at the padding
    assert y[0, 4].sum() == 0 and y[0, 5].sum() == 0
    assert torch.equal(idea_targets(t, 7, 50, 0)[0, 0].nonzero().flatten(), torch.tensor([4, 5, 6]))


def test_gate_published_and_variant_by_hand():
    z = torch.tensor([0.0, 3.0, -6.0])
    eps = 1e-6
    logs = [math.log(1 / (1 + math.exp(-v)) + eps) for v in (0.0, 3.0, -6.0)]  # -0.6931, -0.0486, -6.0025
    pub = idea_gate(z, 0.5, -2.0, eps, "published")
    expected_pub = [max(0.5 * v, -2.0) for v in logs]  # -0.3466, -0.0243, -2.0 (0.5 * -6.0025 = -3.0 clamped)
    assert torch.allclose(pub, torch.tensor(expected_pub), atol=1e-6)
    assert pub[2].item() == -2.0
    out = idea_gate(z, 0.5, -2.0, eps, "outside")
    expected_out = [0.5 * max(v, -2.0) for v in logs]  # -0.3466, -0.0243, -1.0
    assert torch.allclose(out, torch.tensor(expected_out), atol=1e-6)
    assert out[2].item() == pytest.approx(-1.0)
    assert idea_gate(z, 0.0, -2.0).abs().max() == 0  # alpha 0: no gate
    with pytest.raises(NeurosymError, match="variant"):
        idea_gate(z, 0.5, variant="inside")


def test_ramp():
    assert ramped_alpha(0.5, 0, 100) == 0.0
    assert ramped_alpha(0.5, 50, 100) == 0.25
    assert ramped_alpha(0.5, 500, 100) == 0.5
    assert ramped_alpha(0.5, 0, 0) == 0.5


def test_stop_words_are_most_frequent_and_lose_exactly_their_gradient():
    ids = torch.tensor([[1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 0, 0]])
    assert stop_word_ids(ids, 2, 6, exclude=[0]).tolist() == [3, 4]
    assert stop_word_ids(ids, 10, 6, exclude=[0]).tolist() == [1, 2, 3, 4]  # only the tokens that occur
    g = torch.Generator().manual_seed(0)
    z = torch.randn(2, 5, 6, generator=g, requires_grad=True)
    targets = torch.randint(1, 6, (2, 5), generator=g)
    targets[1, 3:] = 0
    stop = torch.tensor([2, 5])
    idea_loss(z, targets, 3, pad_id=0, stop_ids=stop).backward()
    grad = z.grad
    assert grad[..., stop].abs().max() == 0  # stop words: no gradient
    assert grad[..., 0].abs().max() == 0  # pad column: none
    assert grad[1, 3:].abs().max() == 0  # pad positions: none
    assert (grad[0][..., [1, 3, 4]].abs() > 0).all() and (grad[1, :3][..., [1, 3, 4]].abs() > 0).all()
    # the masked loss equals BCE over the kept entries only
    y = naive_targets(targets, 6, 3, 0)
    keep = [(b, t, v) for b in range(2) for t in range(5) for v in (1, 3, 4) if targets[b, t] != 0]
    ref = sum(torch.nn.functional.binary_cross_entropy_with_logits(z[b, t, v], y[b, t, v]) for b, t, v in keep) / len(keep)
    assert idea_loss(z, targets, 3, 0, stop).item() == pytest.approx(ref.item(), rel=1e-6)


def test_pos_weight_scales_positive_terms():
    z = torch.zeros(1, 2, 4)
    targets = torch.tensor([[1, 2]])
    base = idea_loss(z, targets, 2, 0)
    weighted = idea_loss(z, targets, 2, 0, pos_weight=3.0)
    # 6 entries (2 positions x columns 1..3), 3 positives: log 2 each, positives x3
    assert base.item() == pytest.approx(math.log(2))
    assert weighted.item() == pytest.approx((3 * 3 * math.log(2) + 3 * math.log(2)) / 6)


def _model(tied=True, **idea):
    cfg = LMConfig(vocab_size=11, d_model=16, n_layers=2, n_heads=2, d_ff=32, dropout=0.0, max_len=16)
    torch.manual_seed(0)
    return CausalLM(cfg, output=IdeaOutput(16, 11, IdeaConfig(hidden=8, tied=tied, **idea)))


def test_output_layer_in_the_model_and_parameter_counts():
    base = CausalLM(LMConfig(vocab_size=11, d_model=16, n_layers=2, n_heads=2, d_ff=32, dropout=0.0, max_len=16))
    tied, untied = _model(True), _model(False)
    assert tied.num_parameters() - base.num_parameters() == idea_parameters(16, 11, 8, True) == 16 * 8 + 8 + 8 * 16 + 16
    assert untied.num_parameters() - base.num_parameters() == idea_parameters(16, 11, 8, False) == 16 * 8 + 8 + 8 * 11 + 11
    d_ff = matched_d_ff(16, 2, 32, idea_parameters(16, 11, 8, True))
    matched = CausalLM(LMConfig(vocab_size=11, d_model=16, n_layers=2, n_heads=2, d_ff=d_ff, dropout=0.0, max_len=16))
    assert abs(matched.num_parameters() - tied.num_parameters()) <= 2 * (2 * 16 + 1)
    ids = torch.randint(1, 11, (2, 7))
    out = tied(ids)
    assert set(out.extras) == {"idea", "ungated"} and out.extras["idea"].shape == (2, 7, 11)
    gate = tied.output.gate(out.extras["idea"])
    assert torch.allclose(out.logits, out.extras["ungated"] + gate)
    assert torch.allclose(out.extras["ungated"], out.hidden @ tied.tok_emb.weight.t())


def test_ramp_counts_training_steps_and_survives_state_dict():
    m = _model(alpha=0.5, ramp_steps=4)
    assert m.output.alpha == 0.0
    m.train()
    ids = torch.randint(1, 11, (2, 5))
    out = m(ids)
    assert torch.equal(out.logits, out.extras["ungated"])  # alpha was 0 on the first step
    m(ids)
    assert m.output.alpha == 0.25
    m.eval()
    m(ids)
    assert m.output.alpha == 0.25  # evaluation does not count
    other = _model(alpha=0.5, ramp_steps=4)
    other.load_state_dict(m.state_dict())
    assert other.output.alpha == 0.25


def test_cache_matches_full_forward():
    m = _model()
    m.eval()
    ids = torch.randint(1, 11, (2, 6))
    full = m(ids).logits
    cache = m.new_cache(2)
    steps = torch.cat([m(ids[:, :3], cache=cache).logits, m(ids[:, 3:4], cache=cache).logits, m(ids[:, 4:], cache=cache).logits], 1)
    assert torch.allclose(full, steps, atol=1e-5)


def test_perplexities_and_xray():
    m = _model()
    ids = torch.randint(1, 11, (3, 6))
    targets = torch.cat([ids[:, 1:], torch.zeros(3, 1, dtype=torch.long)], 1)
    r = idea_perplexities(m, [{"ids": ids, "targets": targets}], pad_id=0)
    with torch.no_grad():
        out = m.eval()(ids)
    keep = targets != 0
    lp = torch.log_softmax(out.logits.double(), -1).gather(-1, targets[..., None]).squeeze(-1)
    assert r["ppl"] == pytest.approx(math.exp(-float(lp[keep].mean())))
    assert r["tokens"] == int(keep.sum()) and r["ppl_ungated"] > 1
    x = xray(m, [1, 2, 3], k=3)
    assert len(x["boost"]) == 3 and x["boost"][0][1] >= x["suppress"][0][1]
    with pytest.raises(NeurosymError, match="idea gate"):
        xray(CausalLM(LMConfig(vocab_size=11, d_model=16, n_layers=1, n_heads=2)), [1])


@pytest.mark.parametrize(
    "kwargs, key",
    [({"window": 0}, "model.idea_window"), ({"alpha": -1.0}, "model.idea_alpha"), ({"beta": 1.0}, "model.idea_beta"),
     ({"variant": "inside"}, "model.idea_variant"), ({"pos_weight": 0.0}, "model.idea_pos_weight"),
     ({"stop_words": -1}, "model.idea_stop_words"), ({"eps": 0.0}, "model.idea_eps"), ({"hidden": True}, "model.idea_hidden")],
)
def test_config_errors_name_the_key(kwargs, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        IdeaConfig(**kwargs)


@pytest.mark.parametrize("seed", range(5))
def test_sparse_loss_equals_dense_bce_with_its_gradient(seed):
    g = torch.Generator().manual_seed(seed)
    B, L, V, K, pad = 3, 11, 17, int(torch.randint(1, 9, (1,), generator=g)), 0
    targets = torch.randint(1, V, (B, L), generator=g)
    targets[1, 7:] = pad
    targets[2, :] = torch.randint(1, 4, (L,), generator=g)  # many repeats inside a window
    stop = torch.tensor([2, 9])
    pw = [None, 2.5][seed % 2]
    z1 = (3 * torch.randn(B, L, V, generator=g)).requires_grad_(True)
    z2 = z1.detach().clone().requires_grad_(True)
    sparse = idea_loss(z1, targets, K, pad, stop, pos_weight=pw)
    y = naive_targets(targets, V, K, pad)
    keep = (targets != pad)[..., None].float() * torch.tensor([0.0 if v in (pad, 2, 9) else 1.0 for v in range(V)])
    pos = None if pw is None else torch.tensor(pw)
    dense = torch.nn.functional.binary_cross_entropy_with_logits(z2, y, weight=keep.expand_as(y), pos_weight=pos, reduction="sum") / keep.sum()
    assert sparse.item() == pytest.approx(dense.item(), rel=1e-5)
    sparse.backward()
    dense.backward()
    assert torch.allclose(z1.grad, z2.grad, atol=1e-7)


@pytest.mark.parametrize("variant", ["published", "outside"])
def test_gate_values_and_gradient_equal_the_formula_under_autograd(variant):
    g = torch.Generator().manual_seed(3)
    z1 = (4 * torch.randn(5, 7, 31, generator=g, dtype=torch.float64)).requires_grad_(True)
    z2 = z1.detach().clone().requires_grad_(True)
    alpha, beta, eps = 0.7, -1.5, 1e-6
    ref = torch.log(torch.sigmoid(z2) + eps)
    ref = torch.clamp(alpha * ref, min=beta) if variant == "published" else alpha * torch.clamp(ref, min=beta)
    out = idea_gate(z1, alpha, beta, eps, variant)
    assert torch.equal(out, ref)
    w = torch.randn(5, 7, 31, generator=g, dtype=torch.float64)
    (out * w).sum().backward()
    (ref * w).sum().backward()
    assert torch.allclose(z1.grad, z2.grad, atol=1e-12)
    assert torch.autograd.gradcheck(lambda z: idea_gate(z, alpha, beta, eps, variant), (z1.detach()[:1, :2].clone().requires_grad_(True),))


def naive_objective(logits, z, targets, *, alpha, beta, eps, variant, K, pad, stop, weight, pos_weight):
    """The training loss written out densely, every step under autograd: the gate by its
    formula, CE of the renormalised gated logits, masked BCE against naive multi-hot targets."""
    V = logits.shape[-1]
    gate = torch.log(torch.sigmoid(z) + eps)
    gate = torch.clamp(alpha * gate, min=beta) if variant == "published" else alpha * torch.clamp(gate, min=beta)
    ce = torch.nn.functional.cross_entropy((logits + gate).reshape(-1, V), targets.reshape(-1), ignore_index=pad)
    y = naive_targets(targets, V, K, pad).to(z.dtype)
    keep = (targets != pad)[..., None].to(z.dtype) * torch.tensor([0.0 if v == pad or v in stop else 1.0 for v in range(V)], dtype=z.dtype)
    pos = None if pos_weight is None else torch.tensor(pos_weight, dtype=z.dtype)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(z, y, weight=keep.expand_as(y), pos_weight=pos, reduction="sum") / keep.sum()
    return ce + weight * bce, ce, bce


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("variant", ["published", "outside"])
@pytest.mark.parametrize("seed", range(3))
def test_fused_objective_equals_the_naive_loss_and_gradients(dtype, variant, seed):
    g = torch.Generator().manual_seed(seed)
    B, L, V, pad = 3, 13, 29, [0, 5, 0][seed]
    K = int(torch.randint(1, 9, (1,), generator=g))
    targets = torch.randint(0, V, (B, L), generator=g)
    targets[targets == pad] = (pad + 1) % V
    targets[1, 8:] = pad  # right padding
    targets[2, :] = torch.randint(1, 4, (L,), generator=g)  # many repeats inside a window
    stop = [2, 9]
    kw = dict(alpha=[0.5, 0.8, 0.0][seed], beta=[-2.0, -1.0, -2.0][seed], eps=1e-6, variant=variant)
    weight, pw = [1.0, 0.3, 2.0][seed], [None, 2.5, None][seed]
    l1 = (3 * torch.randn(B, L, V, generator=g, dtype=dtype)).requires_grad_(True)
    z1 = (4 * torch.randn(B, L, V, generator=g, dtype=dtype)).requires_grad_(True)
    l2, z2 = l1.detach().clone().requires_grad_(True), z1.detach().clone().requires_grad_(True)
    # blocks of 2 rows at V = 29: several blocks, the last one short
    total, ce, bce = idea_objective(l1, z1, targets, window=K, pad_id=pad, weight=weight, stop_ids=stop, pos_weight=pw, block_elements=58, **kw)
    ref, ref_ce, ref_bce = naive_objective(l2, z2, targets, K=K, pad=pad, stop=stop, weight=weight, pos_weight=pw, **kw)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-13)
    assert total.dtype == dtype and not ce.requires_grad and not bce.requires_grad
    torch.testing.assert_close(total, ref, **tol)
    torch.testing.assert_close(ce, ref_ce.detach(), **tol)
    torch.testing.assert_close(bce, ref_bce.detach(), **tol)
    w = torch.tensor(1.7, dtype=dtype)  # an upstream gradient other than 1 goes through the scaling branch
    (w * total).backward()
    (w * ref).backward()
    torch.testing.assert_close(l1.grad, l2.grad, **tol)
    torch.testing.assert_close(z1.grad, z2.grad, **tol)
    assert z1.grad.abs().sum() > 0 and l1.grad.abs().sum() > 0


def test_fused_objective_blocks_do_not_change_the_result_and_stop_words_get_no_gradient():
    g = torch.Generator().manual_seed(11)
    B, L, V = 2, 9, 23
    targets = torch.randint(1, V, (B, L), generator=g)
    logits, z = torch.randn(B, L, V, generator=g), 3 * torch.randn(B, L, V, generator=g)
    results = []
    for block in (1, 23 * 3, 23 * 100):
        zz = z.clone().requires_grad_(True)
        total, _, _ = idea_objective(logits, zz, targets, alpha=0.0, window=4, stop_ids=[3, 7], block_elements=block)
        total.backward()
        results.append((total.detach(), zz.grad))
    for total, grad in results[1:]:
        torch.testing.assert_close(total, results[0][0], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(grad, results[0][1], rtol=1e-6, atol=1e-9)
    # alpha = 0: the gate passes no gradient, so z's gradient is the BCE's alone, zero on stop words and pad
    grad = results[0][1]
    assert torch.all(grad[..., [0, 3, 7]] == 0) and torch.all(grad[..., [1, 2, 4]].abs().sum() > 0)


def test_fused_objective_errors():
    with pytest.raises(NeurosymError, match="expected logits and z"):
        idea_objective(torch.zeros(2, 3, 5), torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.long), alpha=0.5, window=2)
    with pytest.raises(NeurosymError, match="variant"):
        idea_objective(torch.zeros(2, 3, 5), torch.zeros(2, 3, 5), torch.ones(2, 3, dtype=torch.long), alpha=0.5, window=2, variant="x")
    with pytest.raises(NeurosymError, match="no idea gate"):
        idea_training_loss(CausalLM(LMConfig(vocab_size=5, d_model=8, n_layers=1, n_heads=2, d_ff=8)), torch.ones(1, 3, dtype=torch.long),
                           torch.ones(1, 3, dtype=torch.long), None, 0)


def test_training_loss_equals_the_unfused_recipe_loss_and_keeps_the_ramp():
    torch.manual_seed(0)
    V, pad = 31, 0
    cfg = IdeaConfig(window=5, hidden=16, ramp_steps=4, weight=0.6, pos_weight=1.5)
    m1 = CausalLM(LMConfig(vocab_size=V, d_model=16, n_layers=1, n_heads=2, d_ff=32, dropout=0.0, max_len=12), output=IdeaOutput(16, V, cfg))
    m2 = CausalLM(LMConfig(vocab_size=V, d_model=16, n_layers=1, n_heads=2, d_ff=32, dropout=0.0, max_len=12), output=IdeaOutput(16, V, cfg))
    m2.load_state_dict(m1.state_dict())
    ids = torch.randint(1, V, (3, 12))
    targets = torch.randint(1, V, (3, 12))
    targets[0, 9:] = pad
    stop = torch.tensor([4, 5])
    for _ in range(3):  # the ramp moves: each training forward pass counts a step in both models
        total, ce, bce = idea_training_loss(m1, ids, targets, stop, pad)
        out = m2(ids)
        ref_ce = torch.nn.functional.cross_entropy(out.logits.reshape(-1, V), targets.reshape(-1), ignore_index=pad)
        ref = ref_ce + cfg.weight * idea_loss(out.extras["idea"], targets, cfg.window, pad, stop, cfg.pos_weight)
        torch.testing.assert_close(total, ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ce, ref_ce.detach(), rtol=1e-5, atol=1e-6)
        m1.zero_grad()
        m2.zero_grad()
        total.backward()
        ref.backward()
        for (name, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
            torch.testing.assert_close(p1.grad, p2.grad, rtol=1e-4, atol=1e-6, msg=name)
    assert int(m1.output.steps) == int(m2.output.steps) == 3 and m1.output.gated  # the gate is back on after the loss


def test_block_size_follows_the_device(monkeypatch):
    from neurosym.lm.idea import CPU_BLOCK_ELEMENTS, CUDA_BYTES_PER_ENTRY, idea_block_elements

    assert idea_block_elements("cpu") == CPU_BLOCK_ELEMENTS
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (64 << 30, 80 << 30))  # 64 GiB free
    assert idea_block_elements("cuda:0") == (64 << 30) // CUDA_BYTES_PER_ENTRY  # a 32 x 256 x 33k step is one block
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (1 << 20, 80 << 30))  # almost none free
    assert idea_block_elements("cuda") == CPU_BLOCK_ELEMENTS


def test_kernel_switch_without_triton(monkeypatch):
    """kernel=: auto is the torch blocks on the CPU (triton never imported for it) and on CUDA
    without triton; triton without the package, or on CPU tensors outside Triton's
    interpreter, is a clear error; a bad name is an error. The CPU result does not depend
    on kernel= (auto and torch are the same path)."""
    from types import SimpleNamespace

    import neurosym.lm.idea as idea

    def never():
        raise AssertionError("triton was looked up for a CPU tensor under kernel='auto'")

    monkeypatch.setattr(idea, "_kernel_module", never)
    assert idea.resolve_kernel("auto", "cpu") == "torch" and idea.resolve_kernel("torch", "cuda:0") == "torch"
    g = torch.Generator().manual_seed(1)
    logits, z, targets = torch.randn(2, 5, 11, generator=g), torch.randn(2, 5, 11, generator=g), torch.randint(1, 11, (2, 5), generator=g)
    a = idea_objective(logits, z, targets, alpha=0.5, window=3)
    b = idea_objective(logits, z, targets, alpha=0.5, window=3, kernel="torch")
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    monkeypatch.setattr(idea, "_kernel_module", lambda: None)  # triton does not import
    assert idea.resolve_kernel("auto", "cuda") == "torch"
    with pytest.raises(NeurosymError, match="needs the triton package"):
        idea_objective(logits, z, targets, alpha=0.5, window=3, kernel="triton")
    monkeypatch.setattr(idea, "_kernel_module", lambda: SimpleNamespace(interpreted=lambda: False))  # triton, compiled for a GPU
    assert idea.resolve_kernel("auto", "cuda") == "triton" and idea.resolve_kernel("triton", "cuda:1") == "triton"
    with pytest.raises(NeurosymError, match="runs on CUDA tensors"):
        idea_objective(logits, z, targets, alpha=0.5, window=3, kernel="triton")
    with pytest.raises(NeurosymError, match="kernel must be one of auto, torch, triton"):
        idea_objective(logits, z, targets, alpha=0.5, window=3, kernel="cuda")
    with pytest.raises(NeurosymError, match="kernel must be one of"):
        idea_training_loss(_model(), torch.ones(1, 3, dtype=torch.long), torch.ones(1, 3, dtype=torch.long), None, 0, kernel="fast")
    assert IdeaConfig().kernel == "torch"  # training stays on the torch blocks unless a config opts in
    with pytest.raises(ConfigError, match="model.idea_kernel: expected one of 'auto', 'torch', 'triton'"):
        IdeaConfig(kernel="fast")
    monkeypatch.setattr(idea, "_kernel_module", lambda: None)
    model = _model(kernel="triton")
    with pytest.raises(NeurosymError, match="needs the triton package"):  # the config's kernel is the default of idea_training_loss
        idea_training_loss(model, torch.ones(1, 3, dtype=torch.long), torch.ones(1, 3, dtype=torch.long), None, 0)
