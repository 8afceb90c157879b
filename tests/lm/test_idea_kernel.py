"""Idea gating's Triton kernel (neurosym/lm/idea_kernel.py) against the torch row blocks
(``idea_objective(kernel="torch")``) and against a dense float64 reference under autograd:
values and both gradients, both gate variants, on random and adversarial inputs (rows all
padding, no kept column / every column kept, huge and tiny logits, alpha 0, V not a
multiple of the tile, one row).

Without a GPU the kernel runs under Triton's CPU interpreter: ``TRITON_INTERPRET=1`` is
set before triton is imported (and again while this module's tests run; the interpreter
reads it at launch too). With a GPU the same tests run the compiled kernel on CUDA
tensors. Skipped when triton is not installed (it is optional; CI has none)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.lm.idea import idea_objective, idea_training_loss, resolve_kernel
from triton_kernels import import_triton_kernels

idea_kernel, DEVICE = import_triton_kernels("neurosym.lm.idea_kernel")
CUDA = DEVICE == "cuda"

pytestmark = pytest.mark.usefixtures("one_thread", "interpret")


def dense_rows(logits, z, targets, keep_col, *, alpha, beta, eps, outside, ce_scale, bce_scale):
    """idea_rows' contract written densely in float64 under autograd: the gate by its
    formula, each kept row's CE of the gated logits, its softplus(z) over the kept columns."""
    lg = logits.detach().double().requires_grad_(True)
    zz = z.detach().double().requires_grad_(True)
    gate = torch.log(torch.sigmoid(zz) + eps)
    gate = alpha * torch.clamp(gate, min=beta) if outside else torch.clamp(alpha * gate, min=beta)
    gated = lg + gate
    kept = targets >= 0
    zero = torch.zeros((), dtype=torch.float64)
    ce = torch.where(kept, torch.logsumexp(gated, -1) - gated.gather(-1, targets.clamp(min=0)[:, None]).squeeze(-1), zero)
    neg = torch.where(kept, (F.softplus(zz) * keep_col.double()).sum(-1), zero)
    (ce_scale * ce.sum() + bce_scale * neg.sum()).backward()
    return lg.grad, zz.grad, ce.detach(), neg.detach()


def objectives(logits, z, targets, **kw):
    """(total, ce, bce, logits' gradient, z's gradient) of the torch path and of the kernel,
    each under an upstream gradient of 1.7 (the backward's scaling branch)."""
    out = []
    for kernel in ("torch", "triton"):
        lg, zz = logits.detach().clone().requires_grad_(True), z.detach().clone().requires_grad_(True)
        total, ce, bce = idea_objective(lg, zz, targets, kernel=kernel, **kw)
        (1.7 * total).backward()
        out.append((total.detach(), ce, bce, lg.grad, zz.grad))
    return out


def naive_objective(logits, z, targets, *, alpha, beta, eps, variant, window, pad_id, stop_ids, weight, pos_weight):
    """The training loss densely in float64 under autograd (the gate, CE of the gated logits,
    masked BCE against multi-hot targets built by a loop)."""
    B, L, V = logits.shape
    lg = logits.detach().double().requires_grad_(True)
    zz = z.detach().double().requires_grad_(True)
    gate = torch.log(torch.sigmoid(zz) + eps)
    gate = torch.clamp(alpha * gate, min=beta) if variant == "published" else alpha * torch.clamp(gate, min=beta)
    ce = F.cross_entropy((lg + gate).reshape(-1, V), targets.reshape(-1), ignore_index=pad_id)
    y = torch.zeros(B, L, V, dtype=torch.float64)
    for b in range(B):
        for t in range(L):
            for j in range(window):
                if t + j < L and int(targets[b, t + j]) != pad_id:
                    y[b, t, int(targets[b, t + j])] = 1.0
    col = torch.tensor([0.0 if v == pad_id or v in stop_ids else 1.0 for v in range(V)], dtype=torch.float64)
    keep = (targets != pad_id)[..., None].double() * col
    pos = None if pos_weight is None else torch.tensor(pos_weight, dtype=torch.float64)
    bce = F.binary_cross_entropy_with_logits(zz, y, weight=keep.expand_as(y), pos_weight=pos, reduction="sum") / keep.sum()
    total = ce + weight * bce
    (1.7 * total).backward()
    return total.detach(), ce.detach(), bce.detach(), lg.grad, zz.grad


def close(a, b, rtol, atol):
    torch.testing.assert_close(a.to(b.dtype), b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("variant", ["published", "outside"])
@pytest.mark.parametrize("seed", range(2))
def test_kernel_equals_the_torch_blocks_and_the_float64_reference(dtype, variant, seed):
    g = torch.Generator().manual_seed(seed)
    B, L, V, pad = 3, 7, [29, 67][seed], [0, 4][seed]  # V not a multiple of any tile
    targets = torch.randint(0, V, (B, L), generator=g)
    targets[targets == pad] = pad + 1
    targets[1, 4:] = pad  # right padding
    targets[2, :] = torch.randint(1, 4, (L,), generator=g)  # repeats inside a window
    kw = dict(alpha=[0.6, 1.3][seed], beta=[-2.0, -0.7][seed], eps=1e-6, variant=variant, window=[4, 9][seed], pad_id=pad,
              stop_ids=[2, 9], weight=[1.0, 0.3][seed], pos_weight=[None, 2.5][seed])
    logits = (3 * torch.randn(B, L, V, generator=g, dtype=dtype)).to(DEVICE)
    z = (4 * torch.randn(B, L, V, generator=g, dtype=dtype)).to(DEVICE)
    torch_out, kernel_out = objectives(logits, z, targets.to(DEVICE), **kw)
    ref = naive_objective(logits.cpu(), z.cpu(), targets, **kw)
    tight = dict(rtol=1e-5, atol=1e-7) if dtype == torch.float32 else dict(rtol=1e-11, atol=1e-14)
    for name, k, t, r in zip(("total", "ce", "bce", "logits' gradient", "z's gradient"), kernel_out, torch_out, ref):
        assert k.dtype == dtype and k.device.type == DEVICE, name
        close(k, t, **tight)  # the kernel and the torch blocks: the same arithmetic up to rounding
        close(k.cpu(), r, rtol=1e-5 if dtype == torch.float32 else 1e-11, atol=1e-7 if dtype == torch.float32 else 1e-14)
    assert kernel_out[3].abs().sum() > 0 and kernel_out[4].abs().sum() > 0


@pytest.mark.parametrize("variant", ["published", "outside"])
def test_kernel_rows_against_the_dense_float64_reference_over_tiles(variant):
    """idea_rows directly, every column kept (the front door always drops pad), float64, tiles
    of 8 over V = 29 and of 32 (one partial tile) and the default."""
    g = torch.Generator().manual_seed(5)
    N, V = 6, 29
    logits, z = 5 * torch.randn(N, V, generator=g, dtype=torch.float64), 6 * torch.randn(N, V, generator=g, dtype=torch.float64)
    targets = torch.randint(0, V, (N,), generator=g)
    targets[[1, 4]] = -1
    keep_col = torch.ones(V, dtype=torch.bool)
    kw = dict(alpha=0.8, beta=-1.2, eps=1e-6, outside=variant == "outside", ce_scale=1 / 4, bce_scale=0.7 / (4 * V))
    ref = dense_rows(logits, z, targets, keep_col, **kw)
    for block in (8, 32, None):
        out = idea_kernel.idea_rows(logits.to(DEVICE), z.to(DEVICE), targets.to(DEVICE), keep_col.to(DEVICE), block=block, **kw)
        for o, r in zip(out, ref):
            close(o.cpu(), r, rtol=1e-12, atol=1e-15)
    assert torch.all(out[0][[1, 4]] == 0) and torch.all(out[1][[1, 4]] == 0) and torch.all(out[2][[1, 4]] == 0)


def test_padding_rows_no_kept_column_alpha_zero_and_one_row():
    g = torch.Generator().manual_seed(2)
    V = 13
    # every target is padding: ce and bce are 0 and nothing gets a gradient
    logits, z = torch.randn(2, 3, V, generator=g), torch.randn(2, 3, V, generator=g)
    for out in objectives(logits.to(DEVICE), z.to(DEVICE), torch.zeros(2, 3, dtype=torch.long, device=DEVICE), alpha=0.5, window=2):
        assert all(float(x.abs().sum()) == 0 for x in out)
    # every column a stop word: bce 0, z's gradient only through the gate
    targets = torch.randint(1, V, (2, 3), generator=g).to(DEVICE)
    kw = dict(alpha=0.9, window=3, stop_ids=list(range(V)))
    t, k = objectives(logits.to(DEVICE), z.to(DEVICE), targets, **kw)
    assert float(k[2]) == 0 and float(t[2]) == 0
    for a, b in zip(k, t):
        close(a, b, rtol=1e-5, atol=1e-7)
    # alpha 0: the gate is 0 and passes no gradient; z's gradient is the BCE's alone, 0 on pad and stop words
    t, k = objectives(logits.to(DEVICE), z.to(DEVICE), targets, alpha=0.0, window=3, stop_ids=[3, 5])
    for a, b in zip(k, t):
        close(a, b, rtol=1e-5, atol=1e-7)
    assert torch.all(k[4][..., [0, 3, 5]] == 0)
    # one row (B = L = 1), V = 1 + a tile: the last tile holds one entry
    logits, z = torch.randn(1, 1, 33, generator=g), torch.randn(1, 1, 33, generator=g)
    t, k = objectives(logits.to(DEVICE), z.to(DEVICE), torch.tensor([[7]], device=DEVICE), alpha=0.5, window=1)
    for a, b in zip(k, t):
        close(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("variant", ["published", "outside"])
def test_gate_exactly_on_its_clamp_passes_the_gradient(variant):
    """z = 0 with eps = 0.5: log(sigmoid(0) + 0.5) = log(1) = 0 = beta, on the clamp's edge,
    where torch.clamp (and idea_gate) pass the gradient; so does the kernel."""
    g = torch.Generator().manual_seed(8)
    N, V = 3, 11
    logits = torch.randn(N, V, generator=g, dtype=torch.float64)
    z = torch.zeros(N, V, dtype=torch.float64)
    z[:, ::2] = torch.randn(N, (V + 1) // 2, generator=g, dtype=torch.float64)  # off the edge between
    targets = torch.tensor([1, 4, 6])
    keep_col = torch.ones(V, dtype=torch.bool)
    kw = dict(alpha=0.7, beta=0.0, eps=0.5, outside=variant == "outside", ce_scale=1 / N, bce_scale=0.0)
    ref = dense_rows(logits, z, targets, keep_col, **kw)
    out = idea_kernel.idea_rows(logits.to(DEVICE), z.to(DEVICE), targets.to(DEVICE), keep_col.to(DEVICE), block=4, **kw)
    assert torch.all(ref[1][:, 1::2] != 0)  # the edge passes the gradient
    for o, r in zip(out, ref):
        close(o.cpu(), r, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("scale", [1e4, 1e-4])
@pytest.mark.parametrize("variant", ["published", "outside"])
def test_huge_and_tiny_logits(scale, variant):
    """Logits and idea logits of 1e4 (exp overflows without the running max; sigmoid saturates
    to 0 and 1) and of 1e-4 (a flat softmax): float64 against the dense reference, float32
    against the torch blocks (equal up to the rounding of a gated logit of 1e4, 1e-3)."""
    g = torch.Generator().manual_seed(7)
    N, V = 5, 37
    logits, z = scale * torch.randn(N, V, generator=g, dtype=torch.float64), scale * torch.randn(N, V, generator=g, dtype=torch.float64)
    targets = torch.randint(0, V, (N,), generator=g)
    keep_col = torch.rand(V, generator=g) < 0.7
    kw = dict(alpha=0.5, beta=-3.0, eps=1e-6, outside=variant == "outside", ce_scale=1 / N, bce_scale=1.0 / (N * int(keep_col.sum())))
    ref = dense_rows(logits, z, targets, keep_col, **kw)
    out = idea_kernel.idea_rows(logits.to(DEVICE), z.to(DEVICE), targets.to(DEVICE), keep_col.to(DEVICE), block=16, **kw)
    for o, r in zip(out, ref):
        assert torch.isfinite(o).all()
        close(o.cpu(), r, rtol=1e-11, atol=1e-12 * max(1.0, scale))
    pad = 0
    t3 = targets.reshape(1, N).clamp(min=1)
    t_out, k_out = objectives(logits.float().reshape(1, N, V).to(DEVICE), z.float().reshape(1, N, V).to(DEVICE), t3.to(DEVICE),
                              alpha=0.5, beta=-3.0, variant=variant, window=2, pad_id=pad)
    for a, b in zip(k_out, t_out):
        assert torch.isfinite(a).all()
        close(a, b, rtol=1e-5, atol=2e-3 if scale > 1 else 1e-7)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_inputs_are_read_and_up_cast(dtype):
    g = torch.Generator().manual_seed(4)
    logits, z = (2 * torch.randn(2, 4, 41, generator=g)).to(dtype), (3 * torch.randn(2, 4, 41, generator=g)).to(dtype)
    targets = torch.randint(1, 41, (2, 4), generator=g)
    t, k = objectives(logits.to(DEVICE), z.to(DEVICE), targets.to(DEVICE), alpha=0.5, window=3, stop_ids=[1])
    assert k[0].dtype == torch.float32 and k[3].dtype == k[4].dtype == dtype  # gradients in the inputs' dtype, as the torch path
    for a, b in zip(k[:3], t[:3]):
        close(a, b, rtol=1e-5, atol=1e-7)
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10  # float32 gradients a rounding apart may round to neighbours
    for a, b in zip(k[3:], t[3:]):
        close(a.float(), b.float(), rtol=ulp, atol=1e-7)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5), v=st.integers(1, 40), block=st.sampled_from([1, 2, 8, 64]), seed=st.integers(0, 2**31 - 1),
       l_scale=st.sampled_from([0.0, 1e-3, 3.0, 80.0, 1e5]), z_scale=st.sampled_from([0.0, 1.0, 30.0, 1e4]),
       alpha=st.sampled_from([0.0, 0.5, 2.0]), beta=st.sampled_from([0.0, -1.0, -40.0]), eps=st.sampled_from([1e-12, 1e-6, 0.5]),
       outside=st.booleans(), pad_share=st.sampled_from([0.0, 0.5, 1.0]), keep_share=st.sampled_from([0.0, 0.5, 1.0]))
def test_kernel_rows_on_adversarial_inputs(n, v, block, seed, l_scale, z_scale, alpha, beta, eps, outside, pad_share, keep_share):
    """Hypothesis: float64 rows of any small shape and tile, logits from 0 to 1e5, rows and
    columns all kept, mixed or none, against the dense float64 reference."""
    g = torch.Generator().manual_seed(seed)
    logits = l_scale * torch.randn(n, v, generator=g, dtype=torch.float64)
    z = z_scale * torch.randn(n, v, generator=g, dtype=torch.float64)
    targets = torch.randint(0, v, (n,), generator=g)
    targets[torch.rand(n, generator=g) < pad_share] = -1
    keep_col = torch.rand(v, generator=g) < keep_share
    kept_rows = int((targets >= 0).sum())
    kw = dict(alpha=alpha, beta=beta, eps=eps, outside=outside, ce_scale=1 / kept_rows if kept_rows else 0.0,
              bce_scale=0.5 / (kept_rows * int(keep_col.sum())) if kept_rows and keep_col.any() else 0.0)
    ref = dense_rows(logits, z, targets, keep_col, **kw)
    out = idea_kernel.idea_rows(logits.to(DEVICE), z.to(DEVICE), targets.to(DEVICE), keep_col.to(DEVICE), block=block, **kw)
    for o, r in zip(out, ref):
        assert torch.isfinite(o).all()
        close(o.cpu(), r, rtol=1e-10, atol=1e-12 * max(1.0, l_scale, z_scale))


def test_training_loss_through_the_kernel():
    """idea_training_loss(kernel="triton"): the same loss and parameter gradients as the torch path."""
    from neurosym.lm.idea import IdeaConfig, IdeaOutput
    from neurosym.lm.model import CausalLM, LMConfig

    torch.manual_seed(0)
    V = 23
    cfg = IdeaConfig(window=4, hidden=8, weight=0.6, pos_weight=1.5, variant="outside")
    lm = LMConfig(vocab_size=V, d_model=8, n_layers=1, n_heads=2, d_ff=16, dropout=0.0, max_len=6)
    m1, m2 = CausalLM(lm, output=IdeaOutput(8, V, cfg)), CausalLM(lm, output=IdeaOutput(8, V, cfg))
    m2.load_state_dict(m1.state_dict())
    m1.to(DEVICE)
    m2.to(DEVICE)
    ids = torch.randint(1, V, (2, 6), device=DEVICE)
    targets = torch.randint(1, V, (2, 6), device=DEVICE)
    targets[1, 4:] = 0
    t1 = idea_training_loss(m1, ids, targets, torch.tensor([3], device=DEVICE), 0, kernel="triton")
    t2 = idea_training_loss(m2, ids, targets, torch.tensor([3], device=DEVICE), 0, kernel="torch")
    for a, b in zip(t1, t2):
        close(a, b, rtol=1e-5, atol=1e-7)
    t1[0].backward()
    t2[0].backward()
    for (name, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        close(p1.grad, p2.grad, rtol=1e-4, atol=1e-7)


def test_resolve_kernel_with_triton_installed():
    assert resolve_kernel("triton", DEVICE) == "triton"
    assert resolve_kernel("auto", "cuda") == "triton"  # CUDA and triton imports
    assert resolve_kernel("auto", "cpu") == "torch" and resolve_kernel("torch", "cuda") == "torch"


def test_bench_train_times_the_kernel_and_checks_it_against_the_torch_blocks(monkeypatch):
    """bench train's idea-gating-triton variant, timed and checked as on CUDA (where it is
    offered): here under the interpreter, at a tiny size, the CUDA-only gate lifted."""
    from neurosym.bench import train

    monkeypatch.setattr(train, "kernel_skip_reason", lambda variant, device: None)
    r = train.run(variants=("idea-gating", "idea-gating-triton"), repeats=1, warmup=1, batch_size=2, window=8, device=DEVICE,
                  model={"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32})
    assert set(r) == {"setup", "baseline", "idea-gating", "idea-gating-triton"}
    t, k = r["idea-gating"], r["idea-gating-triton"]
    assert k["params"] == t["params"] and k["best_ms"] > 0 and k["ratio_median"] == pytest.approx(k["median_ms"] / r["baseline"]["median_ms"])
    c = k["check"]
    assert c["kernel"] == "triton" and c["rows"] == 16 and c["vocab_size"] == r["setup"]["vocab_size"] and c["total_rel_diff"] < 1e-6
    assert c["g_logits_max_abs_diff"] <= 1e-6 * c["g_logits_max_abs"] and c["g_z_max_abs_diff"] <= 1e-6 * c["g_z_max_abs"]
    assert "idea-gating-triton against the torch blocks on this device (16 rows" in train.format_results(r)


def test_masked_logits_minus_infinity_in_whole_tiles():
    """Logits of -inf (masked words) filling the first tiles of a row: the online maximum
    starts at -inf there, and the kernel still equals the dense reference (no nan)."""
    g = torch.Generator().manual_seed(9)
    N, V = 3, 40
    logits = torch.randn(N, V, generator=g, dtype=torch.float64)
    logits[:, :16] = float("-inf")  # two whole tiles of 8
    logits[2, 30:] = float("-inf")
    z = 2 * torch.randn(N, V, generator=g, dtype=torch.float64)
    targets = torch.tensor([20, 35, -1])
    keep_col = torch.rand(V, generator=g) < 0.5
    kw = dict(alpha=0.5, beta=-2.0, eps=1e-6, outside=False, ce_scale=0.5, bce_scale=0.01)
    ref = dense_rows(logits, z, targets, keep_col, **kw)
    out = idea_kernel.idea_rows(logits.to(DEVICE), z.to(DEVICE), targets.to(DEVICE), keep_col.to(DEVICE), block=8, **kw)
    for o, r in zip(out, ref):
        assert not torch.isnan(o).any()
        close(o.cpu(), r, rtol=1e-12, atol=1e-15)


COMPILE = r"""
import os, sys
os.environ.pop("TRITON_INTERPRET", None)
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from neurosym.lm import idea_kernel

assert not idea_kernel.interpreted()
kernel = idea_kernel.idea_rows_kernel
for data, dtype in (("fp32", tl.float32), ("bf16", tl.float32), ("fp64", tl.float64)):
    out = "fp64" if dtype == tl.float64 else "fp32"
    signature = {"logits_ptr": "*" + data, "z_ptr": "*" + data, "targets_ptr": "*i64", "col_ptr": "*i8", "params_ptr": "*" + out,
                 "g_logits_ptr": "*" + out, "g_z_ptr": "*" + out, "ce_ptr": "*" + out, "neg_ptr": "*" + out,
                 "V": "i32", "stride_l": "i32", "stride_z": "i32", "stride_g": "i32",
                 "OUTSIDE": "constexpr", "DTYPE": "constexpr", "BLOCK": "constexpr"}
    for outside in (False, True):
        source = ASTSource(fn=kernel, signature=signature, constexprs={"OUTSIDE": outside, "DTYPE": dtype, "BLOCK": idea_kernel.BLOCK_V})
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
        assert len(compiled.asm["cubin"]) > 0
        print(data, outside, "ok")
"""


@pytest.mark.skipif(DEVICE == "cuda", reason="on a GPU the tests above run the compiled kernel itself")
def test_kernel_compiles_for_an_h100_without_a_gpu(tmp_path):
    """The interpreter runs the kernel as Python: it does not see what only the compiler
    checks (a loop-carried value changing type, say). Here Triton compiles it, outside the
    interpreter, for an H100 (sm_90) down to a cubin (its bundled ptxas), for float32,
    bfloat16 and float64 inputs and both gate variants."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"TRITON_CACHE_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env, timeout=300)
    if run.returncode and "ptxas" in run.stderr and "not found" in run.stderr.lower():
        pytest.skip("this triton has no ptxas to compile with")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["fp32", "False", "ok", "fp32", "True", "ok", "bf16", "False", "ok", "bf16", "True", "ok",
                                  "fp64", "False", "ok", "fp64", "True", "ok"]
