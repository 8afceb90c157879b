"""The inside pass's Triton kernels (neurosym/layers/inside_kernel.py) against the torch path
(``inside(..., kernel="torch")``) and against a float64 textbook CKY under autograd
(tests/references.py's ``cky_log_z``): log Z and the gradients of terms, rules and roots, on
random and adversarial inputs (sparse grammars, huge and tiny scores, lengths 0, 1, 2 and L
in one batch, sentences with no parse, B = 1, batch-shared ``expand``-ed rules, N != T, tiles
smaller than the grammar, float32 and float64), and a hypothesis test over small shapes.

Without a GPU the kernels run under Triton's CPU interpreter: ``TRITON_INTERPRET=1`` is set
before triton is imported (and again while this module's tests run; the interpreter reads it
at launch too). The interpreter is slow (about a second per pass at L = 5), so shapes stay
tiny. With a GPU the same tests run the compiled kernels on CUDA tensors. Skipped when triton
is not installed (it is optional; CI has none): the switch's errors without triton are tested
in test_inside.py."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.errors import NeurosymError
from neurosym.layers.inside import inside, resolve_kernel
from neurosym.semiring import LogSemiring, MaxSemiring
from references import cky_log_z
from triton_kernels import import_triton_kernels

inside_kernel, DEVICE = import_triton_kernels("neurosym.layers.inside_kernel")
CUDA = DEVICE == "cuda"

pytestmark = pytest.mark.usefixtures("one_thread", "interpret")
NEG = float("-inf")


def potentials(B, L, N, T, *, seed=0, dtype=torch.float64, scale=1.0, sparsity=0.0):
    """Random (terms, rules, roots) of scale ``scale``; a fraction ``sparsity`` of the rules
    and of the terms is impossible (-inf)."""
    g = torch.Generator().manual_seed(seed)
    terms = scale * torch.randn(B, L, T, generator=g, dtype=torch.float64)
    rules = scale * torch.randn(B, N, N + T, N + T, generator=g, dtype=torch.float64)
    roots = scale * torch.randn(B, N, generator=g, dtype=torch.float64)
    rules[torch.rand(rules.shape, generator=g) < sparsity] = NEG
    terms[torch.rand(terms.shape, generator=g) < sparsity / 2] = NEG
    return terms.to(dtype), rules.to(dtype), roots.to(dtype)


def log_z_and_grads(fn, terms, rules, roots, lengths, upstream, base=None):
    """fn's log Z (B,) and the gradients of ``sum(upstream * log Z over finite entries)`` in
    terms, rules (or ``base``, the tensor ``rules`` was expanded from) and roots."""
    leaves = [x.detach().clone().requires_grad_() for x in (terms, rules if base is None else base, roots)]
    r = leaves[1] if base is None else leaves[1].expand_as(rules)
    log_z = fn(leaves[0], r, leaves[2], lengths)
    finite = torch.isfinite(log_z.detach())
    if log_z.requires_grad:  # the reference's is a constant when no sentence has 2 tokens
        (torch.where(finite, log_z, torch.zeros_like(log_z)) * upstream.to(log_z.dtype)).sum().backward()
    return log_z.detach(), [torch.zeros_like(x) if x.grad is None else x.grad for x in leaves]


def kernel(t, r, o, n, blocks=None):
    return inside_kernel.log_partition(t, r, o, n, blocks=blocks) if blocks else inside(t, r, o, n, kernel="triton")


def torch_path(t, r, o, n):
    return inside(t, r, o, n, kernel="torch")


def check(pots, lengths, *, upstream=None, blocks=None, shared=False, rtol=None, atol=None, log_z_atol=None):
    """The kernel against the torch path (same dtype) and the float64 CKY: log Z and the three
    gradients (to ``rtol``/``atol``; log Z to ``log_z_atol`` if given); no NaN anywhere;
    returns the kernel's (log Z, grads)."""
    terms, rules, roots = (x.to(DEVICE) for x in pots)
    B, dtype = terms.shape[0], terms.dtype
    lengths = torch.as_tensor(lengths, device=DEVICE)
    upstream = torch.linspace(-1.5, 2.0, B, dtype=torch.float64) if upstream is None else upstream
    base = rules[:1].clone() if shared else None
    if shared:
        rules = base.expand(B, -1, -1, -1)
    got = log_z_and_grads(lambda t, r, o, n: kernel(t, r, o, n, blocks), terms, rules, roots, lengths, upstream.to(DEVICE), base)
    same = log_z_and_grads(torch_path, terms, rules, roots, lengths, upstream.to(DEVICE), base)
    ref = log_z_and_grads(cky_log_z, *(x.detach().cpu().double() for x in (terms, rules, roots)), lengths.cpu(), upstream,
                          None if base is None else base.detach().cpu().double())
    f64 = dtype == torch.float64
    tol = dict(rtol=1e-10 if f64 else 2e-5, atol=1e-10 if f64 else 2e-5) if rtol is None else dict(rtol=rtol, atol=atol)
    assert got[0].dtype == dtype and got[0].device.type == DEVICE
    for x in (got[0], *got[1]):
        assert not torch.isnan(x).any()
    for name, k, t, r in zip(("log Z", "terms", "rules", "roots"), (got[0], *got[1]), (same[0], *same[1]), (ref[0], *ref[1])):
        assert torch.equal(torch.isneginf(k.cpu()), torch.isneginf(r)), name
        assert torch.equal(torch.isneginf(k), torch.isneginf(t)), name
        fin = torch.isfinite(r)
        tols = tol | dict(atol=log_z_atol) if name == "log Z" and log_z_atol is not None else tol
        torch.testing.assert_close(k.cpu().double()[fin], r[fin], **tols, msg=lambda m: f"{name}: kernel vs float64 CKY: {m}")
        torch.testing.assert_close(k[fin.to(k.device)], t[fin.to(k.device)], **tols, msg=lambda m: f"{name}: kernel vs torch path: {m}")
    return got


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("N, T, sparsity", [(3, 2, 0.0), (2, 3, 0.4)])
def test_kernel_equals_the_torch_path_and_the_float64_cky(dtype, N, T, sparsity):
    pots = potentials(3, 5, N, T, seed=N + 7 * T, dtype=dtype, sparsity=sparsity)
    log_z, grads = check(pots, [5, 2, 4])
    assert torch.isfinite(log_z).all() and all(g.abs().sum() > 0 for g in grads)


def test_lengths_zero_one_two_and_L_and_a_sentence_with_no_parse():
    terms, rules, roots = potentials(5, 4, 2, 3, seed=3)
    terms[4, 2] = NEG  # token 2 of sentence 4 has no preterminal: no tree
    log_z, (g_terms, g_rules, g_roots) = check((terms, rules, roots), [4, 0, 1, 2, 4])
    assert torch.isneginf(log_z[[1, 2, 4]]).all() and torch.isfinite(log_z[[0, 3]]).all()
    for g in (g_terms, g_rules, g_roots):  # no tree: exactly zero, as the torch path
        assert torch.all(g[[1, 2, 4]] == 0)
    assert torch.all(g_terms[3, 2:] == 0) and torch.all(g_terms[0] != 0)  # padding gets nothing


def test_huge_and_tiny_scores_float32():
    """Scores of scale 100 (log Z spans hundreds of nats, products underflow a shifted
    exp-matmul) and one of 1e-3: float32 against the float64 CKY, log Z to 1e-3 relative
    and the gradients (marginals) to 1e-4."""
    for scale, seed in ((100.0, 0), (1e-3, 1)):
        pots = potentials(2, 5, 3, 2, seed=seed, dtype=torch.float32, scale=scale, sparsity=0.3)
        ref = cky_log_z(*(p.double() for p in pots), torch.tensor([5, 4]))
        check(pots, [5, 4], rtol=1e-5, atol=1e-4, log_z_atol=1e-3 * float(ref.abs().max().clamp_min(1.0)))


def test_batch_shared_rules_and_one_sentence():
    """expand-ed rules (stride 0 on B: their gradient summed once, onto the base tensor), and B = 1."""
    check(potentials(3, 4, 3, 2, seed=11, sparsity=0.3), [4, 3, 4], shared=True)
    check(tuple(p[:1] for p in potentials(1, 4, 2, 2, seed=12)), [4], upstream=torch.tensor([1.0]))


def test_tiles_smaller_than_the_grammar(monkeypatch):
    """Tiles of 2 over N = 3, T = 3 (several row, column and parent blocks, partial ones),
    shared rules whose gradient is summed in two groups of sentences (2 + 1)."""
    monkeypatch.setattr(inside_kernel, "SHARED_GROUPS", 2)
    check(potentials(3, 3, 3, 3, seed=13, sparsity=0.3), [3, 2, 3], shared=True, blocks=(2, 2, 2))


@pytest.mark.slow
def test_tiles_smaller_than_the_grammar_longer(monkeypatch):
    """As above at L = 5 with N = 3, T = 5 and per-sentence rules too (about 30 s interpreted)."""
    monkeypatch.setattr(inside_kernel, "SHARED_GROUPS", 2)
    pots = potentials(3, 5, 3, 5, seed=11, sparsity=0.3)
    check(pots, [5, 3, 4], shared=True, blocks=(2, 2, 2))
    check(pots, [5, 3, 4], blocks=(2, 2, 2))
    check(pots, [5, 3, 4], blocks=(4, 2, 4))


def test_every_rule_impossible_and_a_grammar_of_one_symbol():
    terms, rules, roots = potentials(2, 3, 1, 1, seed=5)
    log_z, grads = check((terms, rules, roots), [3, 2])
    assert torch.isfinite(log_z).all()
    rules[:] = NEG
    log_z, grads = check((terms, rules, roots), [3, 2])
    assert torch.isneginf(log_z).all() and all(torch.all(g == 0) for g in grads)


def test_kernel_launches_per_pass(monkeypatch):
    """One launch per span width forward and one backward, up to the longest sentence."""
    launches = []

    class Counting:
        def __init__(self, name, fn):
            self.name, self.fn = name, fn

        def __getitem__(self, grid):
            launches.append(self.name)
            return self.fn[grid]

    for name in ("inside_width_kernel", "outside_width_kernel"):
        monkeypatch.setattr(inside_kernel, name, Counting(name, getattr(inside_kernel, name)))
    terms, rules, roots = (x.to(DEVICE).requires_grad_() for x in potentials(2, 6, 2, 2, seed=2))
    inside(terms, rules, roots, torch.tensor([4, 3], device=DEVICE), kernel="triton").sum().backward()
    assert launches == ["inside_width_kernel"] * 3 + ["outside_width_kernel"] * 3


def test_torch_operators_around_the_kernels_do_not_grow_with_the_length(monkeypatch):
    """With both kernels stubbed out, torch.profiler counts the torch operators of a
    forward + backward (``count_launches``: the CPU proxy, or CUDA kernels): a fixed number,
    43 on the CPU, whatever the length; the pass adds its 2 (L - 1) kernel launches."""
    from neurosym.bench.launches import count_launches

    class Stub:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    for name in ("inside_width_kernel", "outside_width_kernel"):
        monkeypatch.setattr(inside_kernel, name, Stub())
    counts = []
    for L in (5, 20):
        terms, rules, roots = (x.to(DEVICE).float().requires_grad_() for x in potentials(8, L, 32, 32, seed=L))
        counts.append(count_launches(lambda: inside(terms, rules, roots, kernel="triton").sum().backward(), torch.device(DEVICE)))
    assert counts[0] == counts[1] <= 50, counts
    if DEVICE == "cpu":
        assert counts[0] == 43


def test_half_inputs_compute_in_float32_and_a_retained_graph_backward_twice():
    terms, rules, roots = (x.to(DEVICE) for x in potentials(2, 3, 2, 2, seed=21, dtype=torch.float16))
    lengths = torch.tensor([3, 2], device=DEVICE)
    half = log_z_and_grads(kernel, terms, rules, roots, lengths, torch.ones(2))
    full = log_z_and_grads(kernel, terms.float(), rules.float(), roots.float(), lengths, torch.ones(2))
    assert half[0].dtype == torch.float16 and all(g.dtype == torch.float16 for g in half[1])
    for a, b in zip((half[0], *half[1]), (full[0], *full[1])):
        torch.testing.assert_close(a, b.half())  # the same float32 arithmetic, rounded once
    leaves = [x.float().requires_grad_() for x in (terms, rules, roots)]
    log_z = inside(*leaves, lengths, kernel="triton").sum()
    first = torch.autograd.grad(log_z, leaves, retain_graph=True)
    for a, b in zip(first, torch.autograd.grad(log_z, leaves)):
        assert torch.equal(a, b)


def test_the_switch(monkeypatch):
    assert resolve_kernel("auto", "cpu") == "torch"  # the CPU's behaviour is unchanged
    assert resolve_kernel("torch", DEVICE) == "torch"
    assert resolve_kernel("triton", DEVICE) == "triton"
    assert resolve_kernel("auto", DEVICE, MaxSemiring) == "torch"
    assert resolve_kernel("auto", "cuda", LogSemiring) == "triton"
    with pytest.raises(NeurosymError, match="LogSemiring"):
        resolve_kernel("triton", DEVICE, MaxSemiring)
    terms, rules, roots = (x.to(DEVICE) for x in potentials(1, 3, 2, 2))
    with pytest.raises(NeurosymError, match="kernel must be one of"):
        inside(terms, rules, roots, kernel="cuda")
    monkeypatch.setattr(inside_kernel, "INTERPRETED", False)  # CPU tensors, compiled kernels
    with pytest.raises(NeurosymError, match="runs on CUDA tensors"):
        inside(terms.cpu(), rules.cpu(), roots.cpu(), kernel="triton")


@settings(max_examples=12, deadline=None)
@given(
    B=st.integers(1, 2), L=st.integers(2, 4), N=st.integers(1, 3), T=st.integers(1, 3),
    sparsity=st.sampled_from([0.0, 0.5]), scale=st.sampled_from([0.5, 20.0]), seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_hypothesis_small_shapes(B, L, N, T, sparsity, scale, seed, data):
    lengths = data.draw(st.lists(st.integers(0, L), min_size=B, max_size=B))
    check(potentials(B, L, N, T, seed=seed, scale=scale, sparsity=sparsity), lengths)


COMPILE = """
import inspect, subprocess, sys
from pathlib import Path
import torch, triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from neurosym.layers import inside_kernel

dtype = getattr(torch, sys.argv[1])
name = "fp32" if dtype == torch.float32 else "fp64"
blocks = inside_kernel.tiles(64, 64, dtype)
assert blocks == inside_kernel.TILES[dtype]
tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
for fn in (inside_kernel.inside_width_kernel, inside_kernel.outside_width_kernel):
    sig = {p: "constexpr" if p in ("DTYPE", "BA", "BR", "BC") else "*fp32" if p == "r_ptr" else "*" + name if p.endswith("_ptr")
           else "i64" if p.startswith("s") else "i32" for p in inspect.signature(fn.fn).parameters}
    consts = dict(DTYPE=tl.float32 if dtype == torch.float32 else tl.float64, BA=blocks[0], BR=blocks[1], BC=blocks[2])
    compiled = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": inside_kernel.warps(blocks)})
    Path(sys.argv[2]).write_bytes(compiled.asm["cubin"])
    print(fn.__name__, subprocess.run([str(tool), "-res-usage", sys.argv[2]], capture_output=True, text=True, check=True).stdout)
"""


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kernels_compile_for_sm90_without_spills(dtype, tmp_path):
    """Both kernels through Triton's ahead-of-time compiler for an H100 (sm_90), no GPU
    needed, in a fresh process without the interpreter: the interpreter accepts code the
    compiler refuses (a global that is not a constexpr did), and the default tiles must not
    spill registers (cuobjdump's STACK:0). Seconds with a warm Triton cache."""
    import subprocess
    import sys
    from pathlib import Path

    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump").exists():
        pytest.skip("this triton has no CUDA backend tools (cuobjdump)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"TRITON_DEFAULT_FP_FUSION": "1"}
    out = subprocess.run([sys.executable, "-c", COMPILE, dtype, str(tmp_path / "kernel.cubin")], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    usage = [line for line in out.stdout.splitlines() if "REG:" in line]
    assert len(usage) == 2 and all("STACK:0 " in line for line in usage), out.stdout
