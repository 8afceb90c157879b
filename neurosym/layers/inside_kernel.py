"""The log-semiring inside pass as Triton kernels, one launch per span width forward and
one per span width backward (optional: CUDA tensors, or the CPU under Triton's
interpreter, ``TRITON_INTERPRET=1`` set before triton is imported).

:func:`log_partition` takes the potentials of :func:`neurosym.layers.inside.inside` (terms
(B, L, T), rules (B, N, N+T, N+T), possibly an ``expand``-ed shared tensor, roots (B, N),
lengths (B,)) and returns log Z (B,), differentiable in terms, rules and roots; the torch
path of ``inside`` is its reference (``kernel="torch"``).

**The chart.** One dense tensor ``D`` (B, L+1, L, S), S = N + T, in the compute dtype:
``D[b, w, i, s]`` scores symbol s over the span of width w starting at token i, so
``D[b, 1, i, N + t] = terms[b, i, t]`` (a token's preterminals) and ``D[b, w, i, A]``,
w >= 2, the inside score of nonterminal A; every other entry is -inf. A child of a span
is then always ``D[b, width, start]`` whatever its kind.

**Forward**, for w = 2 .. max(lengths), one launch: a program per (span start i, sentence
b, block of BA parents A) computes

    D[b, w, i, A] = logsumexp_{r, c} rules[b, A, r, c] + P[r, c],
    P[r, c] = logsumexp_{k} D[b, k, i, r] + D[b, w - k, i + k, c]

over tiles (BR, BC) of the child pairs (r, c): each tile lies in one of the four regions
(nonterminal or preterminal left child, the same on the right), and the region fixes the
splits k that can produce it (both nonterminals: k = 2 .. w-2; a token on the left: k = 1,
if w >= 3; on the right: k = w - 1, if w >= 3; two tokens: k = 1, if w = 2), so no split
is tried that cannot parse. ``P`` is an online (max, sum of exp) over the splits and the
sum over (r, c) another one over the tiles: exact logsumexps (every term is shifted by
its own running max, nothing underflows that matters), float32, or float64 for float64
inputs. log Z = logsumexp_A roots[b, A] + D[b, lengths[b], 0, A] (torch), -inf for
lengths < 2.

**Backward** (the outside pass), for w = max(lengths) .. 2, one launch with two kinds of
programs. ``G`` (like ``D``) holds ``d loss / d D`` in linear space (the incoming gradient
times the marginals: bounded, so plain sums): the root spans get ``g * softmax(roots + top)``
before the first launch, and the spans of width w are complete when launch w starts.

* a program per parent span (i, b): for every tile, ``X[A, r, c] = G_p[A] exp(rules + P -
  D_p[A])`` (each factor <= 1), ``W[r, c] = sum_A X`` and, for each split k of the tile's
  region, ``E = W exp(D_left[r] + D_right[c] - P)``: its row sums are added to the left
  child's ``G``, its column sums to the right child's. **These adds are ``tl.atomic_add``**:
  within a launch a child span is the left child of one parent and the right child of
  another (two programs), and one program adds several tiles into the same child entries;
  no other atomics are used, and an entry gets at most a few adds per launch (no contention).
* a program per (sentence group, block of parents, tile): ``d rules`` of that slice is a
  **gather**: it loops over the launch's parent spans (and the group's sentences),
  recomputing ``P`` and ``X`` for its tile, and adds the sum to its own slice of the rule
  gradient once (it is the slice's only writer: no atomics). Per-sentence rules get one
  group per sentence; batch-shared rules are summed over groups of sentences, then over
  the groups (one torch sum).

After the last launch, ``d terms = G[:, 1, :, N:]``; ``d roots`` is the softmax above.
Exact 0 gradients for every ``-inf`` potential and for sentences with no tree (log Z =
-inf, lengths < 2), never NaN: every ``exp(x - y)`` with ``y = -inf`` is masked, as the
torch path's ``nan_to_num`` does (it gives zeros there too).

Launches per forward + backward: 2 (max(lengths) - 1) Triton kernels and a few torch
operators around them (the chart's initialisation, log Z, the gradient buffers). Tile
sizes (:data:`TILES`) are chosen so that the kernels compile for sm_90 without register
spills; not yet timed on a GPU.

This module imports triton at the top: :mod:`neurosym.layers.inside` imports it lazily,
only when the Triton path is asked for (triton is not a dependency of neurosym).
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable
from triton.runtime.interpreter import InterpretedFunction

from neurosym.semiring import LOG_ZERO

NEG = tl.constexpr(LOG_ZERO)  # log 0 inside the kernels (a global a kernel reads must be a constexpr)
TILES = {torch.float32: (16, 16, 32), torch.float64: (8, 16, 16)}
"""Largest tiles per compute dtype: (parents per block BA, left children per tile BR, right
children per tile BC), each a power of two, shrunk to the grammar's sizes. With 8 warps both
kernels compile for sm_90 without register spills at these sizes (ptxas through Triton's
ahead-of-time compiler, ``tests/layers/test_inside_kernel.py``); 16 x 16 x 32 in float64, or
on 4 warps in float32, spills. Not yet timed on a GPU."""
NUM_WARPS = 8
"""Warps per program for tiles of at least 2048 entries (4 below)."""
SHARED_GROUPS = 16
"""Sentence groups whose rule gradients are summed apart (then added) for batch-shared rules."""


# ---------------------------------------------------------------------- tiles
@triton.jit
def _tile(t_r, t_c, N, T, w, BR: tl.constexpr, BC: tl.constexpr):
    """Tile (t_r, t_c) of the child pairs: row and column starts and ends in 0..S, and the
    splits [k_lo, k_hi] that can produce its region (empty when k_lo > k_hi)."""
    rbn = tl.cdiv(N, BR)
    cbn = tl.cdiv(N, BC)
    row_pt = t_r >= rbn
    col_pt = t_c >= cbn
    r0 = tl.where(row_pt, N + (t_r - rbn) * BR, t_r * BR)
    r_end = tl.where(row_pt, N + T, N)
    c0 = tl.where(col_pt, N + (t_c - cbn) * BC, t_c * BC)
    c_end = tl.where(col_pt, N + T, N)
    narrow = tl.where(w >= 3, 0, 1)  # 1: the width-2 spans, where only two tokens parse
    k_lo = tl.where(row_pt, 1, tl.where(col_pt, w - 1, 2))
    k_hi = tl.where(row_pt, tl.where(col_pt, narrow, 1 - narrow), tl.where(col_pt, w - 1 - narrow, w - 2))
    return r0, r_end, c0, c_end, k_lo, k_hi


@triton.jit
def _pairs(d_b, sd_w, sd_i, w, i, r0, r_end, c0, c_end, k_lo, k_hi, DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    """P (BR, BC): logsumexp over splits k_lo..k_hi of D[w=k, i, row] + D[w-k, i+k, col]
    (-inf outside the tile), by an online max and sum of exp; with the rows, columns and
    their masks."""
    rows = r0 + tl.arange(0, BR)
    cols = c0 + tl.arange(0, BC)
    rmask = rows < r_end
    cmask = cols < c_end
    pm = tl.full([BR, BC], NEG, DTYPE)
    ps = tl.zeros([BR, BC], DTYPE)
    for k in range(k_lo, k_hi + 1):
        left = tl.load(d_b + k * sd_w + i * sd_i + rows, mask=rmask, other=NEG)
        right = tl.load(d_b + (w - k) * sd_w + (i + k) * sd_i + cols, mask=cmask, other=NEG)
        x = left[:, None] + right[None, :]
        m_new = tl.maximum(pm, x)
        shift = tl.where(m_new == NEG, 0.0, m_new)  # all -inf so far: no -inf - -inf
        ps = ps * tl.exp(pm - shift) + tl.exp(x - shift)
        pm = m_new
    p = tl.where(ps > 0.0, pm + tl.log(tl.where(ps > 0.0, ps, 1.0)), NEG)
    return p, rows, cols, rmask, cmask


@triton.jit
def _rule_tile(r_b, sr_a, sr_l, sr_r, a, amask, rows, rmask, cols, cmask, DTYPE: tl.constexpr):
    """rules[b, a, rows, cols] (BA, BR, BC) in the compute dtype, -inf outside."""
    ptr = r_b + a[:, None, None] * sr_a + rows[None, :, None] * sr_l + cols[None, None, :] * sr_r
    mask = amask[:, None, None] & rmask[None, :, None] & cmask[None, None, :]
    return tl.load(ptr, mask=mask, other=NEG).to(DTYPE)


@triton.jit
def _outflow(g_b, d_b, r_b, sd_w, sd_i, sr_a, sr_l, sr_r, w, i, p, rows, rmask, cols, cmask, a0, N,
             DTYPE: tl.constexpr, BA: tl.constexpr):
    """X (BA, BR, BC) of the parents a0 .. a0+BA of span (w, i): ``G_p[A] exp(rules + P - D_p[A])``,
    0 where the parent is impossible (D_p = -inf) or out of range."""
    a = a0 + tl.arange(0, BA)
    amask = a < N
    dp = tl.load(d_b + w * sd_w + i * sd_i + a, mask=amask, other=NEG)
    gp = tl.load(g_b + w * sd_w + i * sd_i + a, mask=amask, other=0.0)
    ok = dp > NEG
    dps = tl.where(ok, dp, 0.0)
    rule = _rule_tile(r_b, sr_a, sr_l, sr_r, a, amask, rows, rmask, cols, cmask, DTYPE)
    e = tl.exp(rule + p[None, :, :] - dps[:, None, None])
    return tl.where(ok[:, None, None], gp[:, None, None] * e, 0.0), a, amask


@triton.jit
def _any_gradient(g_b, sd_w, sd_i, w, i, N, DTYPE: tl.constexpr, BA: tl.constexpr):
    """Whether some parent of span (w, i) has a nonzero gradient."""
    top = tl.zeros([BA], DTYPE)
    for a0 in range(0, N, BA):
        a = a0 + tl.arange(0, BA)
        top = tl.maximum(top, tl.abs(tl.load(g_b + w * sd_w + i * sd_i + a, mask=a < N, other=0.0)))
    return tl.max(top, axis=0) > 0.0


# ---------------------------------------------------------------------- forward
@triton.jit
def inside_width_kernel(d_ptr, r_ptr, N, T, w, n, nba, sd_b, sd_w, sd_i, sr_b, sr_a, sr_l, sr_r,
                        DTYPE: tl.constexpr, BA: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    """The spans of width w: a program per (i, b, block of parents), grid n * B * nba."""
    pid = tl.program_id(0).to(tl.int64)
    ab = pid % nba
    i = (pid // nba) % n
    b = pid // (nba * n)
    d_b = d_ptr + b * sd_b
    r_b = r_ptr + b * sr_b
    a = ab * BA + tl.arange(0, BA)
    amask = a < N
    m = tl.full([BA], NEG, DTYPE)
    s = tl.zeros([BA], DTYPE)
    for t_r in range(tl.cdiv(N, BR) + tl.cdiv(T, BR)):
        for t_c in range(tl.cdiv(N, BC) + tl.cdiv(T, BC)):
            r0, r_end, c0, c_end, k_lo, k_hi = _tile(t_r, t_c, N, T, w, BR, BC)
            if k_lo <= k_hi:
                p, rows, cols, rmask, cmask = _pairs(d_b, sd_w, sd_i, w, i, r0, r_end, c0, c_end, k_lo, k_hi, DTYPE, BR, BC)
                y = _rule_tile(r_b, sr_a, sr_l, sr_r, a, amask, rows, rmask, cols, cmask, DTYPE) + p[None, :, :]
                m_new = tl.maximum(m, tl.max(tl.max(y, axis=2), axis=1))
                shift = tl.where(m_new == NEG, 0.0, m_new)
                s = s * tl.exp(m - shift) + tl.sum(tl.sum(tl.exp(y - shift[:, None, None]), axis=2), axis=1)
                m = m_new
    out = tl.where(s > 0.0, m + tl.log(tl.where(s > 0.0, s, 1.0)), NEG)
    tl.store(d_b + w * sd_w + i * sd_i + a, out, mask=amask)


# ---------------------------------------------------------------------- backward
@triton.jit
def outside_width_kernel(d_ptr, g_ptr, r_ptr, dr_ptr, B, N, T, w, n, nba, n_tiles_c, n_tiles, spg,
                         sd_b, sd_w, sd_i, sr_b, sr_a, sr_l, sr_r, sdr_g, sdr_a, sdr_l,
                         DTYPE: tl.constexpr, BA: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    """The parents of width w. Programs 0 .. n*B-1: parent (i, b) sends its gradient to its
    children (atomic adds into G). The others, (group, block of parents, tile): the rule
    gradient of that slice, summed over the width's spans and the group's sentences."""
    pid = tl.program_id(0).to(tl.int64)
    if pid < n * B:
        i = pid % n
        b = pid // n
        d_b = d_ptr + b * sd_b
        g_b = g_ptr + b * sd_b
        r_b = r_ptr + b * sr_b
        if _any_gradient(g_b, sd_w, sd_i, w, i, N, DTYPE, BA):
            for t in range(n_tiles):
                r0, r_end, c0, c_end, k_lo, k_hi = _tile(t // n_tiles_c, t % n_tiles_c, N, T, w, BR, BC)
                if k_lo <= k_hi:
                    p, rows, cols, rmask, cmask = _pairs(d_b, sd_w, sd_i, w, i, r0, r_end, c0, c_end, k_lo, k_hi, DTYPE, BR, BC)
                    wt = tl.zeros([BR, BC], DTYPE)
                    for a0 in range(0, N, BA):
                        x, a, amask = _outflow(g_b, d_b, r_b, sd_w, sd_i, sr_a, sr_l, sr_r, w, i, p, rows, rmask, cols, cmask, a0, N, DTYPE, BA)
                        wt += tl.sum(x, axis=0)
                    fin = p > NEG
                    ps = tl.where(fin, p, 0.0)
                    for k in range(k_lo, k_hi + 1):
                        left = tl.load(d_b + k * sd_w + i * sd_i + rows, mask=rmask, other=NEG)
                        right = tl.load(d_b + (w - k) * sd_w + (i + k) * sd_i + cols, mask=cmask, other=NEG)
                        e = tl.where(fin, wt * tl.exp(left[:, None] + right[None, :] - ps), 0.0)
                        tl.atomic_add(g_b + k * sd_w + i * sd_i + rows, tl.sum(e, axis=1), mask=rmask)
                        tl.atomic_add(g_b + (w - k) * sd_w + (i + k) * sd_i + cols, tl.sum(e, axis=0), mask=cmask)
    else:
        q = pid - n * B
        t = q % n_tiles
        ab = (q // n_tiles) % nba
        grp = q // (n_tiles * nba)
        r0, r_end, c0, c_end, k_lo, k_hi = _tile(t // n_tiles_c, t % n_tiles_c, N, T, w, BR, BC)
        if k_lo <= k_hi:
            acc = tl.zeros([BA, BR, BC], DTYPE)
            b_hi = tl.minimum(grp * spg + spg, B)
            for b in range(grp * spg, b_hi):
                d_b = d_ptr + b * sd_b
                g_b = g_ptr + b * sd_b
                r_b = r_ptr + b * sr_b
                for i in range(n):
                    if _any_gradient(g_b, sd_w, sd_i, w, i, N, DTYPE, BA):
                        p, rows, cols, rmask, cmask = _pairs(d_b, sd_w, sd_i, w, i, r0, r_end, c0, c_end, k_lo, k_hi, DTYPE, BR, BC)
                        x, a, amask = _outflow(g_b, d_b, r_b, sd_w, sd_i, sr_a, sr_l, sr_r, w, i, p, rows, rmask, cols, cmask, ab * BA, N, DTYPE, BA)
                        acc += x
            a = ab * BA + tl.arange(0, BA)
            rows = r0 + tl.arange(0, BR)
            cols = c0 + tl.arange(0, BC)
            mask = (a < N)[:, None, None] & (rows < r_end)[None, :, None] & (cols < c_end)[None, None, :]
            ptr = dr_ptr + grp * sdr_g + a[:, None, None] * sdr_a + rows[None, :, None] * sdr_l + cols[None, None, :]
            tl.store(ptr, tl.load(ptr, mask=mask, other=0.0) + acc, mask=mask)


# ---------------------------------------------------------------------- the autograd function
INTERPRETED = isinstance(inside_width_kernel, InterpretedFunction)


def interpreted() -> bool:
    """Whether the kernels run under Triton's CPU interpreter (``TRITON_INTERPRET=1`` was set
    when this module was imported)."""
    return INTERPRETED


def compute_dtype(*potentials: Tensor) -> torch.dtype:
    """float64 if a potential is float64, else float32 (half inputs are read and up-cast)."""
    out = torch.float32
    for x in potentials:
        out = torch.promote_types(out, x.dtype)
    return out


def tiles(N: int, T: int, dtype: torch.dtype, blocks: tuple[int, int, int] | None = None) -> tuple[int, int, int]:
    """(BA, BR, BC): ``blocks`` if given, else the largest of :data:`TILES` for the compute
    ``dtype`` that the grammar's sizes need."""
    if blocks is not None:
        return blocks
    most = triton.next_power_of_2(max(N, T))
    ba, br, bc = TILES[dtype]
    return min(triton.next_power_of_2(N), ba), min(most, br), min(most, bc)


def warps(blocks: tuple[int, int, int]) -> int:
    """Warps per program for tiles ``blocks`` (:data:`NUM_WARPS` for big ones)."""
    return NUM_WARPS if blocks[0] * blocks[1] * blocks[2] >= 2048 else 4


class _LogPartition(torch.autograd.Function):
    """log Z (B,) of the potentials; forward and backward are the width kernels above."""

    @staticmethod
    def forward(ctx, terms: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor, shared: bool, blocks: tuple[int, int, int]) -> Tensor:
        B, L, T = terms.shape
        N = roots.shape[1]
        cdt = compute_dtype(terms, rules, roots)
        dtype = tl.float64 if cdt == torch.float64 else tl.float32
        d = terms.new_full((B, L + 1, L, N + T), LOG_ZERO, dtype=cdt)
        d[:, 1, :, N:] = terms
        top_len = int(lengths.max()) if B else 0
        ba, br, bc = blocks
        nba = triton.cdiv(N, ba)
        sr_b = 0 if shared else rules.stride(0)
        with _on(terms.device):
            for w in range(2, top_len + 1):
                n = L - w + 1
                inside_width_kernel[(n * B * nba,)](
                    d, rules, N, T, w, n, nba, *d.stride()[:3], sr_b, *rules.stride()[1:], DTYPE=dtype, BA=ba, BR=br, BC=bc, num_warps=warps(blocks))
        top = d[torch.arange(B, device=d.device), lengths, 0, :N]  # (B, N); lengths 0 and 1 read -inf rows
        log_z = torch.logsumexp(roots.to(cdt) + top, -1)
        ctx.save_for_backward(d, rules, roots, lengths, log_z)
        ctx.shape, ctx.shared, ctx.blocks, ctx.top_len, ctx.dtype = (B, L, N, T), shared, blocks, top_len, dtype
        ctx.dtypes = terms.dtype, rules.dtype, roots.dtype
        return log_z.to(terms.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple:
        d, rules, roots, lengths, log_z = ctx.saved_tensors
        B, L, N, T = ctx.shape
        S = N + T
        cdt = d.dtype
        ba, br, bc = ctx.blocks
        g = grad.to(cdt)
        top = d[torch.arange(B, device=d.device), lengths, 0, :N]
        finite = torch.isfinite(log_z)
        z = torch.where(finite, log_z, torch.zeros_like(log_z))
        # d loss / d roots = d loss / d top = g * softmax(roots + top); 0 for sentences with no tree
        root = torch.where(finite[:, None], torch.exp(roots.to(cdt) + top - z[:, None]) * g[:, None], torch.zeros_like(top))
        gbuf = torch.zeros_like(d)
        gbuf[torch.arange(B, device=d.device), lengths, 0, :N] = root
        want_rules = ctx.needs_input_grad[1]
        groups = (min(B, SHARED_GROUPS) if ctx.shared else B) if want_rules else 0
        spg = triton.cdiv(B, groups) if groups else 1
        groups = triton.cdiv(B, spg) if groups else 0
        drules = torch.zeros((max(groups, 1), N, S, S), dtype=cdt, device=d.device)
        nba = triton.cdiv(N, ba)
        n_tiles_c = triton.cdiv(N, bc) + triton.cdiv(T, bc)
        n_tiles = (triton.cdiv(N, br) + triton.cdiv(T, br)) * n_tiles_c
        sr_b = 0 if ctx.shared else rules.stride(0)
        with _on(d.device):
            for w in range(ctx.top_len, 1, -1):
                n = L - w + 1
                outside_width_kernel[(n * B + groups * nba * n_tiles,)](
                    d, gbuf, rules, drules, B, N, T, w, n, nba, n_tiles_c, n_tiles, spg,
                    *d.stride()[:3], sr_b, *rules.stride()[1:], *drules.stride()[:3],
                    DTYPE=ctx.dtype, BA=ba, BR=br, BC=bc, num_warps=warps(ctx.blocks))
        g_rules = (drules.sum(0, keepdim=True) if ctx.shared and groups > 1 else drules) if want_rules else None
        g_terms = gbuf[:, 1, :, N:]
        return (*(None if x is None else x.to(dt) for x, dt in zip((g_terms, g_rules, root), ctx.dtypes)), None, None, None)


def _on(device: torch.device):
    """Triton launches on the current CUDA device: make it ``device``'s."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def log_partition(terms: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor, blocks: tuple[int, int, int] | None = None) -> Tensor:
    """log Z (B,) of terms (B, L, T), rules (B, N, N+T, N+T), roots (B, N) for sentence
    lengths (B,) long (checked by the caller, :func:`neurosym.layers.inside.inside`), by the
    width kernels; differentiable in the three potentials (first order). A batch-shared
    ``rules`` (stride 0 on B, or B = 1) is read without copies and its gradient summed once.
    ``blocks``: (BA, BR, BC) tiles, powers of two (default :func:`tiles`)."""
    B, L, T = terms.shape
    N = roots.shape[1]
    shared = rules.shape[0] == 1 or rules.stride(0) == 0
    if shared:
        rules = rules[:1]
    if B == 0 or N == 0 or T == 0 or L < 2:  # no tree anywhere (as inside(): a constant)
        return terms.new_full((B,), LOG_ZERO)
    return _LogPartition.apply(terms, rules, roots, lengths, shared, tiles(N, T, compute_dtype(terms, rules, roots), blocks))


__all__ = ["INTERPRETED", "NUM_WARPS", "SHARED_GROUPS", "TILES", "compute_dtype", "inside_width_kernel", "interpreted", "log_partition", "outside_width_kernel", "tiles", "warps"]
