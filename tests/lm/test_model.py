"""CausalLM: configuration checks, tied weights, causality, positions and plug-ins."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from neurosym.errors import ConfigError
from neurosym.lm.model import CausalLM, LMConfig, LMOutput, apply_rotary, rotary_tables, sinusoidal_table

V = 23

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: extra threads only spin-wait on a busy machine


def small(positions: str = "sinusoidal", **kw) -> LMConfig:
    return LMConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, d_ff=64, max_len=24, positions=positions, **kw)


# ---------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "field, value",
    [
        ("vocab_size", 0),
        ("d_model", -8),
        ("n_layers", 0),
        ("n_heads", 0),
        ("d_ff", 0),
        ("max_len", 0),
        ("d_model", 2.5),
        ("dropout", 1.0),
        ("dropout", -0.1),
        ("positions", "learned"),
        ("pad_id", V),
        ("pad_id", -1),
    ],
)
def test_config_errors_name_the_field(field, value):
    kw = dict(vocab_size=V, d_model=32, n_heads=4)
    kw[field] = value
    with pytest.raises(ConfigError, match=rf"LMConfig\.{field}\b"):
        LMConfig(**kw)


def test_config_heads_must_divide_d_model():
    with pytest.raises(ConfigError, match=r"LMConfig\.d_model .*LMConfig\.n_heads"):
        LMConfig(vocab_size=V, d_model=30, n_heads=4)


def test_config_rotary_needs_even_head_dim():
    LMConfig(vocab_size=V, d_model=12, n_heads=4)  # head_dim 3 is fine for sinusoidal
    with pytest.raises(ConfigError, match=r"LMConfig\.d_model / n_heads = 3 must be even"):
        LMConfig(vocab_size=V, d_model=12, n_heads=4, positions="rotary")


def test_defaults():
    c = LMConfig(vocab_size=V)
    assert (c.d_model, c.n_layers, c.n_heads, c.d_ff, c.dropout, c.max_len, c.positions, c.pad_id) == (128, 4, 4, 256, 0.1, 64, "sinusoidal", 0)


def test_too_long_input_names_max_len():
    model = CausalLM(small())
    with pytest.raises(ConfigError, match="max_len"):
        model(torch.zeros(1, 25, dtype=torch.long))


# ---------------------------------------------------------------------- weights
def test_embedding_and_output_projection_are_one_parameter():
    model = CausalLM(small())
    assert model.lm_head.weight is model.tok_emb.weight
    names = [n for n, _ in model.named_parameters()]
    assert "tok_emb.weight" in names and "lm_head.weight" not in names  # listed once
    # a gradient step moves both
    out = model(torch.randint(1, V, (2, 5)))
    out.logits.sum().backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    assert model.lm_head.weight is model.tok_emb.weight


def test_num_parameters_counts_the_tied_matrix_once():
    cfg = small()
    model = CausalLM(cfg)
    D, F, n = cfg.d_model, cfg.d_ff, cfg.n_layers
    per_block = 2 * 2 * D + (3 * D * D + 3 * D) + (D * D + D) + (D * F + F) + (F * D + D)
    assert model.num_parameters() == V * D + n * per_block + 2 * D
    model.tok_emb.weight.requires_grad_(False)
    assert model.num_parameters(trainable_only=True) == n * per_block + 2 * D


def test_output_shapes_and_every_parameter_gets_a_gradient():
    model = CausalLM(small("rotary"))
    out = model(torch.randint(1, V, (3, 7)))
    assert isinstance(out, LMOutput)
    assert out.logits.shape == (3, 7, V) and out.hidden.shape == (3, 7, 32) and out.extras == {}
    out.logits.logsumexp(-1).mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


# ---------------------------------------------------------------------- causality
@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
def test_logits_up_to_t_ignore_later_tokens(positions):
    torch.manual_seed(0)
    model = CausalLM(small(positions)).eval()
    B, L = 4, 16
    ids = torch.randint(1, V, (B, L))
    # one batch: the original rows, then for every t the rows with tokens after t redrawn
    variants = [ids]
    for t in range(L):
        changed = ids.clone()
        changed[:, t + 1 :] = torch.randint(1, V, (B, L - 1 - t))
        variants.append(changed)
    with torch.no_grad():
        logits = model(torch.cat(variants)).logits.view(L + 1, B, L, V)
    base = logits[0]
    for t in range(L):
        out = logits[t + 1]
        assert torch.allclose(out[:, : t + 1], base[:, : t + 1], atol=1e-6), t
        if t < L - 1:
            assert not torch.allclose(out[:, t + 1 :], base[:, t + 1 :], atol=1e-6)


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
def test_trailing_padding_does_not_change_real_positions(positions):
    model = CausalLM(small(positions)).eval()
    ids = torch.randint(1, V, (1, 6))
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    assert torch.allclose(model(padded).logits[:, :6], model(ids).logits, atol=1e-6)


def test_dropout_only_in_training():
    model = CausalLM(small(dropout=0.5))
    ids = torch.randint(1, V, (2, 8))
    model.eval()
    assert torch.equal(model(ids).logits, model(ids).logits)
    model.train()
    assert not torch.equal(model(ids).logits, model(ids).logits)


# ---------------------------------------------------------------------- positions
def test_sinusoidal_table_formula():
    pe = sinusoidal_table(10, 6)
    for p in (0, 3, 9):
        for i in range(3):
            angle = p / 10000 ** (2 * i / 6)
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert sinusoidal_table(4, 5).shape == (4, 5)


def test_rotary_scores_depend_on_relative_position_only():
    cos, sin = rotary_tables(32, 8)
    q, k = torch.randn(8), torch.randn(8)

    def score(i, j):
        qi = apply_rotary(q.view(1, 1, 1, 8), cos[i : i + 1], sin[i : i + 1])
        kj = apply_rotary(k.view(1, 1, 1, 8), cos[j : j + 1], sin[j : j + 1])
        return (qi * kj).sum().item()

    assert score(3, 1) == pytest.approx(score(13, 11), abs=1e-5)
    assert score(0, 0) == pytest.approx(float(q @ k), abs=1e-5)
    assert apply_rotary(q.view(1, 1, 1, 8), cos[5:6], sin[5:6]).norm().item() == pytest.approx(q.norm().item(), abs=1e-5)


# ---------------------------------------------------------------------- plug-ins
class Recorder(nn.Module):
    """An adapter that adds a learned bias scaled by ``scale=`` and records what it got."""

    def __init__(self, d_model: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.seen = {}

    def forward(self, emb, **inputs):
        self.seen = {"shape": tuple(emb.shape), **inputs}
        return emb + inputs["scale"][:, None, None] * self.bias


def test_adapter_and_heads_plug_in_without_editing_the_model():
    cfg = small()
    adapter = Recorder(cfg.d_model)
    heads = {"mean": nn.Identity(), "probe": nn.Linear(cfg.d_model, 3)}
    model = CausalLM(cfg, adapter=adapter, heads=heads).eval()
    ids = torch.randint(1, V, (2, 5))
    plain = CausalLM(cfg).eval()
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith(("adapter.", "heads."))})

    out = model(ids, scale=torch.zeros(2), other="x")
    assert adapter.seen["shape"] == (2, 5, cfg.d_model) and adapter.seen["other"] == "x"
    assert torch.allclose(out.logits, plain(ids).logits, atol=1e-6)  # zero bias: same model
    assert set(out.extras) == {"mean", "probe"}
    assert torch.equal(out.extras["mean"], out.hidden) and out.extras["probe"].shape == (2, 5, 3)

    # the adapter's parameters are the model's and receive gradients
    assert any(p is adapter.bias for p in model.parameters())
    with torch.no_grad():
        adapter.bias.copy_(torch.randn(cfg.d_model))  # not constant: LayerNorm removes a constant shift
    assert not torch.allclose(model(ids, scale=torch.ones(2)).logits, out.logits)
    model(ids, scale=torch.ones(2)).logits.sum().backward()
    assert adapter.bias.grad is not None and adapter.bias.grad.abs().sum() > 0
    # a plug-in keeps its own initialisation
    assert torch.equal(model.heads["probe"].weight, heads["probe"].weight)


class ScaledOutput(nn.Module):
    """An output layer ``hidden @ (scale * weight)^T`` that records what it got."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(2.0))
        self.seen = ()

    def forward(self, hidden, weight):
        self.seen = (hidden, weight)
        return hidden @ (self.scale * weight).T


def test_output_layer_plugs_in_with_the_tied_weight():
    torch.manual_seed(0)
    cfg = small()
    output = ScaledOutput()
    model = CausalLM(cfg, output=output).eval()
    ids = torch.randint(1, V, (2, 5))
    out = model(ids)
    hidden, weight = output.seen
    assert weight is model.tok_emb.weight and torch.equal(hidden, out.hidden)
    assert torch.allclose(out.logits, 2.0 * (out.hidden @ model.tok_emb.weight.T), atol=1e-5)
    assert any(p is output.scale for p in model.parameters())
    out.logits.sum().backward()
    assert output.scale.grad is not None and model.tok_emb.weight.grad is not None


def test_baseline_ignores_extra_inputs():
    model = CausalLM(small()).eval()
    ids = torch.randint(1, V, (2, 5))
    assert torch.equal(model(ids, features=torch.rand(2, 5, 4)).logits, model(ids).logits)


# ---------------------------------------------------------------------- key/value cache
def _incremental_logits(model, ids, splits, **inputs):
    """Logits of ids (B, L) read in chunks of the given sizes through one KV cache."""
    cache = model.new_cache(ids.shape[0])
    outs, at = [], 0
    for size in splits:
        chunk = {k: (v[:, at : at + size] if k == "features" else v) for k, v in inputs.items()}
        outs.append(model(ids[:, at : at + size], cache=cache, **chunk).logits)
        at += size
    assert cache.length == ids.shape[1]
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
@pytest.mark.parametrize("fusion", [False, True, "lexical"])
def test_incremental_decoding_equals_the_full_forward(dtype, positions, fusion):
    from neurosym.lm.fusion import build_fusion_lm

    torch.manual_seed(3)
    cfg = small(positions)
    B, L, F, C = 3, 17, 5, 2
    if fusion == "lexical":  # the lexical output layer with a trained-looking (nonzero) W_o and control dropout set
        model = build_fusion_lm(cfg, F, n_control=C, control_dropout=0.1, descriptions=torch.rand(V, 4))
        with torch.no_grad():
            model.output.W_o.normal_(std=0.1)
    else:
        model = build_fusion_lm(cfg, F, n_control=C) if fusion else CausalLM(cfg)
    model = model.to(dtype).eval()
    ids = torch.randint(1, V, (B, L))
    inputs = {"features": torch.rand(B, L, F, dtype=dtype), "control": torch.rand(B, C, dtype=dtype)} if fusion else {}
    with torch.no_grad():
        full = model(ids, **inputs).logits
        one_by_one = _incremental_logits(model, ids, [1] * L, **inputs)
        prefill_then_steps = _incremental_logits(model, ids, [6, 1, 1, 4, 5], **inputs)
    assert full.dtype == one_by_one.dtype == dtype
    assert (one_by_one - full).abs().max() < 1e-5
    assert (prefill_then_steps - full).abs().max() < 1e-5


def test_cache_rows_can_be_selected_and_length_is_checked():
    torch.manual_seed(4)
    model = CausalLM(small("rotary")).eval()
    ids = torch.randint(1, V, (4, 10))
    with torch.no_grad():
        full = model(ids).logits
        cache = model.new_cache(4)
        model(ids[:, :6], cache=cache)
        kept = cache.select(torch.tensor([2, 0]))
        step = model(ids[[2, 0], 6:], cache=kept).logits
    assert kept.length == 10 and cache.length == 6
    assert (step - full[[2, 0], 6:]).abs().max() < 1e-5
    cache = model.new_cache(1)
    model(torch.ones(1, 24, dtype=torch.long), cache=cache)
    with pytest.raises(ConfigError, match="sequence length 25 exceeds LMConfig.max_len=24"):
        model(torch.ones(1, 1, dtype=torch.long), cache=cache)


# ---------------------------------------------------------------------- blank inputs
def test_blank_inputs_read_chosen_tokens_as_zero_and_leave_the_output_side_alone():
    torch.manual_seed(0)
    model = CausalLM(small(dropout=0.0)).eval()
    ids = torch.tensor([[1, 5, 7, 5, 2]])
    before = model(ids).logits
    e_before = model.embed(ids)
    model.blank_inputs([5])
    e = model.embed(ids)
    assert torch.equal(e[0, 1], torch.zeros(32)) and torch.equal(e[0, 3], torch.zeros(32))
    assert torch.equal(e[0, [0, 2, 4]], e_before[0, [0, 2, 4]])
    after = model(ids).logits
    assert torch.equal(after[0, 0], before[0, 0])  # positions before the first blank read the same inputs (causal)
    assert not torch.allclose(after[0, 1:], before[0, 1:])
    # the tied output row of the blank token is untouched: its logit is h . E[5] as before
    assert torch.equal(model.lm_head.weight[5], model.tok_emb.weight[5]) and model.tok_emb.weight[5].abs().sum() > 0
    assert "blank" not in model.state_dict()  # rebuilt by whoever builds the model, not saved with the weights


def test_blank_dropout_blanks_only_its_tokens_only_in_training_at_about_its_rate():
    torch.manual_seed(0)
    model = CausalLM(small()).train()
    model.blank_inputs([], dropout_ids=[3, 4], dropout=0.25)
    ids = torch.randint(0, V, (64, 24))
    zero = model.embed(ids).abs().sum(-1) == 0  # (B, L)
    chosen = (ids == 3) | (ids == 4)
    assert not zero[~chosen].any()
    rate = zero[chosen].float().mean().item()
    n = int(chosen.sum())
    assert abs(rate - 0.25) < 4 * math.sqrt(0.25 * 0.75 / n), (rate, n)
    model.eval()
    assert not (model.embed(ids).abs().sum(-1) == 0).any()  # never in eval mode


@pytest.mark.parametrize("args, message", [(([V],), "out of range"), (([], [-1]), "out of range"), (([], [1], 1.0), "dropout must be"),
                                           (([], [1], True), "dropout must be")])
def test_blank_inputs_bad_arguments(args, message):
    with pytest.raises(ConfigError, match=message):
        CausalLM(small()).blank_inputs(*args)
