"""Idea gating's objective through ``torch.compile`` (``idea_objective(kernel="compile")``):
against the dense naive loss under autograd and against the torch row blocks, values and
both gradients, both gate variants, float32 and float64, padding rows, stop words, alpha 0;
a changing alpha and loss scale do not recompile it; a compile failure is a clear error.

On the CPU ``torch.compile`` generates C++ and needs a working compiler: the tests that
compile are skipped, with the reason, without one. They are under ``-m slow`` (the first
compile in a process takes some 25 s on 2 cores); the failure path runs by default."""

from __future__ import annotations

import shutil

import pytest
import torch

from neurosym.errors import NeurosymError
from neurosym.lm.idea import idea_objective

from test_idea import naive_objective

@pytest.fixture(scope="module")
def compiles_here():
    """Skip (with the reason) where torch.compile cannot build CPU kernels at all: no C++
    compiler on PATH, or one that cannot build them (without, say, Python's headers)."""
    if not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        pytest.skip("torch.compile on the CPU needs a C++ compiler; none is on PATH")
    try:
        torch.compile(lambda x: torch.sigmoid(x) + 1.0, fullgraph=True)(torch.ones(3))
    except Exception as e:  # inductor's failures come in many types
        pytest.skip(f"torch.compile cannot build CPU kernels here: {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}")


def _inputs(seed: int, dtype: torch.dtype, B: int = 3, L: int = 11, V: int = 37, pad: int = 0):
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(0, V, (B, L), generator=g)
    targets[targets == pad] = (pad + 1) % V
    targets[1, 6:] = pad  # right padding
    targets[2, :] = torch.randint(1, 4, (L,), generator=g)  # repeats inside a window
    logits = 3 * torch.randn(B, L, V, generator=g, dtype=dtype)
    z = 4 * torch.randn(B, L, V, generator=g, dtype=dtype)
    logits[0, 0, :5] = -1e4  # near-masked words
    z[0, 1] = 30.0  # a saturated gate: sigmoid(z) rounds to 1
    z[0, 2] = -30.0  # and a floored one
    return logits, z, targets


def _run(logits, z, targets, kernel, **kw):
    lg, zz = logits.clone().requires_grad_(True), z.clone().requires_grad_(True)
    total, ce, bce = idea_objective(lg, zz, targets, kernel=kernel, **kw)
    (1.3 * total).backward()
    return total.detach(), ce, bce, lg.grad, zz.grad


@pytest.mark.slow  # the first compile in a process takes some 25 s on 2 cores
@pytest.mark.usefixtures("compiles_here")
@pytest.mark.parametrize(("dtype", "variant"), [
    (torch.float32, "published"), (torch.float64, "published"), (torch.float32, "outside"), (torch.float64, "outside"),
])
def test_compiled_objective_equals_the_naive_loss_and_the_torch_blocks(dtype, variant):
    torch._dynamo.reset()
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-13)
    for seed, (alpha, beta, weight, pw) in enumerate([(0.5, -2.0, 1.0, None), (0.9, -1.0, 0.3, 2.5), (0.0, -2.0, 2.0, None)]):
        logits, z, targets = _inputs(seed, dtype)
        kw = dict(alpha=alpha, beta=beta, eps=1e-6, variant=variant, window=4, pad_id=0, weight=weight, stop_ids=[2, 9], pos_weight=pw)
        got = _run(logits, z, targets, "compile", **kw)
        blocks = _run(logits, z, targets, "torch", block_elements=37 * 2, **kw)  # several row blocks, the last one short
        lg, zz = logits.clone().requires_grad_(True), z.clone().requires_grad_(True)
        ref = naive_objective(lg, zz, targets, alpha=alpha, beta=beta, eps=1e-6, variant=variant, K=4, pad=0, stop=[2, 9],
                              weight=weight, pos_weight=pw)
        (1.3 * ref[0]).backward()
        assert got[0].dtype == dtype
        for a, b, r in zip(got, blocks, (ref[0].detach(), ref[1].detach(), ref[2].detach(), lg.grad, zz.grad)):
            torch.testing.assert_close(a, r, **tol)
            torch.testing.assert_close(a, b, **tol)


@pytest.mark.slow
@pytest.mark.usefixtures("compiles_here")
def test_alpha_and_the_loss_scale_change_without_recompiling():
    """alpha ramps every step and the CE scale follows the batch's padding: both enter the
    compiled block as 0-d tensors, so one graph serves them (a new shape may add one)."""
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    logits, z, targets = _inputs(5, torch.float32)
    _run(logits, z, targets, "compile", alpha=0.1, window=3)
    graphs = counters["stats"]["unique_graphs"]
    for alpha in (0.2, 0.35, 0.5):
        targets = targets.clone()
        targets[0, -int(alpha * 10):] = 0  # more padding each time: another CE and BCE scale
        got = _run(logits, z, targets, "compile", alpha=alpha, window=3)
        torch.testing.assert_close(got[0], _run(logits, z, targets, "torch", alpha=alpha, window=3)[0], rtol=1e-5, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == graphs


def test_a_compile_failure_is_a_clear_error(monkeypatch):
    import neurosym.lm.idea as idea

    def broken():
        def run(*args):
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nand a long traceback")
        return run

    monkeypatch.setattr(idea, "_compiled_block", broken)
    logits, z, targets = _inputs(0, torch.float32)
    with pytest.raises(NeurosymError, match=r"^idea_objective: kernel='compile' failed \(RuntimeError: InvalidCxxCompiler: No working "
                                            r"C\+\+ compiler found\); use kernel='torch'$"):
        idea_objective(logits, z, targets, alpha=0.5, window=3, kernel="compile")


@pytest.mark.slow
@pytest.mark.usefixtures("compiles_here")
def test_bench_train_times_the_compiled_objective_and_checks_it_against_the_torch_blocks(monkeypatch):
    """bench train's idea-gating-compile variant, timed and checked as on CUDA (where it is
    offered): here on the CPU, at a tiny size, the CUDA-only gate lifted."""
    from neurosym.bench import train

    assert train.kernel_skip_reason("idea-gating-compile", torch.device("cpu")) == "the compiled objective is timed on CUDA only (device cpu)"
    monkeypatch.setattr(train, "kernel_skip_reason", lambda variant, device: None)
    r = train.run(variants=("idea-gating", "idea-gating-compile"), repeats=1, warmup=1, batch_size=2, window=8,
                  model={"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32})
    assert set(r) == {"setup", "baseline", "idea-gating", "idea-gating-compile"}
    t, k = r["idea-gating"], r["idea-gating-compile"]
    assert k["params"] == t["params"] and k["best_ms"] > 0 and k["first_step_s"] > 0
    c = k["check"]
    assert c["kernel"] == "compile" and c["rows"] == 16 and c["vocab_size"] == r["setup"]["vocab_size"] and c["total_rel_diff"] < 1e-6
    assert c["g_logits_max_abs_diff"] <= 1e-6 * c["g_logits_max_abs"] and c["g_z_max_abs_diff"] <= 1e-6 * c["g_z_max_abs"]
    assert "idea-gating-compile against the torch blocks on this device (16 rows" in train.format_results(r)
