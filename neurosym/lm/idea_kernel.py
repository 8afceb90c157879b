"""Idea gating's fused training objective as one Triton kernel (optional: CUDA tensors, or
the CPU under Triton's interpreter, ``TRITON_INTERPRET=1`` set before triton is imported).

:func:`idea_rows` computes, for logits and idea logits (N, V), every V-wide part of
:func:`~neurosym.lm.idea.idea_objective` (the torch path, ``kernel="torch"``, is its
reference): the gate, the CE of the gated logits with its gradient, the gate's derivative
and the BCE's negatives with their gradient. One program per row, two passes over V tiles:

1. read logits and z, gate, keep an online (max, sum of exp) of the gated row, and add the
   row's ``softplus(z)`` over the kept columns (the BCE as if every entry were negative);
2. read them again and write ``g_logits = (softmax(gated) - onehot(t)) / n_ce`` and
   ``g_z = g_logits * alpha * keep * s (1 - s) / (s + eps) + bce_scale * col * s``
   (s = sigmoid(z)).

So an (N, V) block costs 4 reads and 2 writes (the second read mostly from L2) instead of
the torch path's twenty or so element-wise kernels over it. The BCE's positives, (N, K)
entries, stay in torch (the caller adds them). Compute is float32 (float64 for float64
inputs); bf16 / fp16 inputs are read and up-cast.

This module imports triton at the top: :mod:`neurosym.lm.idea` imports it lazily, only
when the Triton path is asked for (triton is not a dependency of neurosym).
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl
from torch import Tensor
from triton.runtime.interpreter import InterpretedFunction

BLOCK_V = 1024
"""Vocabulary entries per tile of a row (at most; a power of two). With 4 entries per thread
(``num_warps = BLOCK / 128``, at most 8) each thread loads 16 bytes at a time and the
kernel compiles for sm_90 to about 48 registers without spills (2048 entries on 8 warps
took 106, a quarter of the SM's warps): chosen from the compiled kernel, not yet timed."""


@triton.jit
def _gate(zz, alpha, beta, eps, OUTSIDE: tl.constexpr):
    """The gate of idea logits (any shape), the mask where its clamp lets the gradient
    through, ``s = sigmoid(z)`` and ``u = exp(-|z|)`` (for the softplus): the gate's
    operations in the same order as ``idea_gate``; the sigmoid from ``u``, so no exp overflows."""
    u = tl.exp(-tl.abs(zz))
    s = tl.where(zz >= 0, 1.0 / (1.0 + u), u / (1.0 + u))
    log_p = tl.log(s + eps)
    if OUTSIDE:
        keep = log_p >= beta
        gate = tl.maximum(log_p, beta) * alpha
    else:
        scaled = log_p * alpha
        keep = scaled >= beta
        gate = tl.maximum(scaled, beta)
    return gate, keep, s, u


@triton.jit
def _softplus(zz, u):
    """log(1 + exp(z)) = max(z, 0) + log1p(u) with ``u = exp(-|z|)``, log1p written out
    (exact where 1 + u rounds to 1)."""
    w = 1.0 + u
    log1p = tl.where(w == 1.0, u, tl.log(w) * u / tl.where(w == 1.0, 1.0, w - 1.0))
    return tl.maximum(zz, 0.0) + log1p


@triton.jit
def _tile(l_row, z_row, col_ptr, start, V, alpha, beta, eps, OUTSIDE: tl.constexpr, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    """One tile of a row, as both passes read it: offsets, in-range mask, logits, idea
    logits, kept-column flags and :func:`_gate`'s four outputs."""
    offs = start + tl.arange(0, BLOCK)
    inside = offs < V
    x = tl.load(l_row + offs, mask=inside, other=0.0).to(DTYPE)
    zz = tl.load(z_row + offs, mask=inside, other=0.0).to(DTYPE)
    col = tl.load(col_ptr + offs, mask=inside, other=0)
    gate, keep, s, u = _gate(zz, alpha, beta, eps, OUTSIDE)
    return offs, inside, x, zz, col, gate, keep, s, u


@triton.jit
def idea_rows_kernel(logits_ptr, z_ptr, targets_ptr, col_ptr, params_ptr, g_logits_ptr, g_z_ptr, ce_ptr, neg_ptr,
                      V, stride_l, stride_z, stride_g,
                      OUTSIDE: tl.constexpr, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    # params: alpha, beta, eps, 1 / n_ce, weight / n_bce (in the compute dtype: no float32 rounding of alpha in float64)
    alpha = tl.load(params_ptr + 0)
    beta = tl.load(params_ptr + 1)
    eps = tl.load(params_ptr + 2)
    ce_scale = tl.load(params_ptr + 3)
    bce_scale = tl.load(params_ptr + 4)
    t = tl.load(targets_ptr + row)  # -1 on padding
    kept = t >= 0
    ce_scale = tl.where(kept, ce_scale, 0.0)
    bce_scale = tl.where(kept, bce_scale, 0.0)
    tc = tl.maximum(t, 0)
    l_row = logits_ptr + row * stride_l
    z_row = z_ptr + row * stride_z
    # pass 1: the online max and sum of exp of the gated row; the kept columns' softplus(z)
    m = tl.full([], float("-inf"), DTYPE)
    total = tl.zeros([], DTYPE)
    neg = tl.zeros([], DTYPE)
    for start in range(0, V, BLOCK):
        offs, inside, x, zz, col, gate, keep, s, u = _tile(l_row, z_row, col_ptr, start, V, alpha, beta, eps, OUTSIDE, DTYPE, BLOCK)
        gated = tl.where(inside, x + gate, float("-inf"))
        m_new = tl.maximum(m, tl.max(gated, axis=0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # tiles of -inf logits so far: no -inf - -inf
        total = total * tl.exp(m - shift) + tl.sum(tl.exp(gated - shift), axis=0)
        m = m_new
        neg += tl.sum(tl.where(inside & (col != 0), _softplus(zz, u), 0.0), axis=0)
    # the target's gated logit, by the same formula as its tile's
    picked = tl.load(l_row + tc).to(DTYPE) + _gate(tl.load(z_row + tc).to(DTYPE), alpha, beta, eps, OUTSIDE)[0]
    tl.store(ce_ptr + row, tl.where(kept, m + tl.log(total) - picked, 0.0))
    tl.store(neg_ptr + row, tl.where(kept, neg, 0.0))
    # pass 2: the gradients
    inv = ce_scale / total
    gl_row = g_logits_ptr + row * stride_g
    gz_row = g_z_ptr + row * stride_g
    for start in range(0, V, BLOCK):
        offs, inside, x, zz, col, gate, keep, s, u = _tile(l_row, z_row, col_ptr, start, V, alpha, beta, eps, OUTSIDE, DTYPE, BLOCK)
        gl = tl.exp(x + gate - m) * inv - tl.where(offs == tc, ce_scale, 0.0)
        d = s * (1.0 - s) / (s + eps)
        gz = tl.where(keep, gl * d * alpha, 0.0) + tl.where(col != 0, bce_scale * s, 0.0)
        tl.store(gl_row + offs, gl, mask=inside)
        tl.store(gz_row + offs, gz, mask=inside)


def interpreted() -> bool:
    """Whether the kernel runs under Triton's CPU interpreter (``TRITON_INTERPRET=1`` was set
    when this module was imported)."""
    return isinstance(idea_rows_kernel, InterpretedFunction)


def idea_rows(
    logits: Tensor, z: Tensor, targets: Tensor, keep_col: Tensor, *, alpha: float, beta: float, eps: float, outside: bool,
    ce_scale: float, bce_scale: float, block: int | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The V-wide part of the idea objective, one kernel launch: logits, z (N, V), targets
    (N,) long (-1 on padding rows), keep_col (V,) bool -> ``(g_logits, g_z, ce, neg)``:
    the gradients (N, V) of ``ce_scale * sum CE + bce_scale * sum BCE`` with the BCE taken
    as if every entry were negative (float32, float64 for float64 inputs), ``ce`` (N,) each
    row's ``logsumexp(gated) - gated[t]`` and ``neg`` (N,) each row's ``softplus(z)`` over
    the kept columns (0 on padding rows). ``block``: entries per tile (a power of two;
    default ``min(next_power_of_2(V), BLOCK_V)``)."""
    N, V = logits.shape
    cdt = torch.promote_types(torch.promote_types(logits.dtype, z.dtype), torch.float32)
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    if z.stride(-1) != 1:
        z = z.contiguous()
    device = logits.device
    params = torch.tensor([alpha, beta, eps, ce_scale, bce_scale], dtype=cdt).to(device, non_blocking=True)
    g_logits = torch.empty(N, V, dtype=cdt, device=device)
    g_z = torch.empty(N, V, dtype=cdt, device=device)
    ce = torch.empty(N, dtype=cdt, device=device)
    neg = torch.empty(N, dtype=cdt, device=device)
    if N == 0:
        return g_logits, g_z, ce, neg
    block = min(triton.next_power_of_2(V), BLOCK_V) if block is None else block
    launch = dict(OUTSIDE=outside, DTYPE=tl.float64 if cdt == torch.float64 else tl.float32, BLOCK=block, num_warps=min(8, max(1, block // 128)))
    with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():  # Triton launches on the current device
        idea_rows_kernel[(N,)](
            logits, z, targets.to(torch.int64).contiguous(), keep_col.to(torch.int8).contiguous(), params, g_logits, g_z, ce, neg,
            V, logits.stride(0), z.stride(0), g_logits.stride(0), **launch,
        )
    return g_logits, g_z, ce, neg


__all__ = ["BLOCK_V", "idea_rows", "idea_rows_kernel", "interpreted"]
