"""Idea gating: a head that predicts the bag of words of the next K tokens, and a gate
that adds its log-probabilities to the next-token logits.

Notation: hidden (B, L, D) final hidden states, ids (B, L) the input tokens,
targets (B, L) the next tokens (``targets[:, t] = ids[:, t + 1]``, ``pad_id`` at
padding), V the vocabulary, K the window.

* **Idea head** :class:`IdeaHead`: a 2-layer MLP ``D -> H -> GELU -> D`` over the final
  hidden states, then an output layer to V: *tied* (``z = mlp(h) @ E^T``, E the token
  embeddings; no new (V, D) matrix, the default for equal-size comparisons) or *untied*
  (``z = Linear(H, V)(gelu(...))`` as published, ``V * (H + 1)`` more parameters).
  ``z`` (B, L, V) are the idea logits; ``sigmoid(z[b, t, v])`` estimates whether v occurs
  among the next K tokens after position t.
* **Targets** :func:`idea_targets`: ``y[b, t, v] = 1`` iff ``v`` is among
  ``targets[b, t : t + K]`` (the next K tokens), pad excluded; windows are cut at the
  end of the row (and at the first pad). Built by one gather and one scatter.
* **Loss** :func:`idea_loss`: BCE-with-logits over the non-pad positions and the kept
  vocabulary columns (stop words — the top-N most frequent training tokens — and pad are
  dropped, so they receive no gradient), mean over the kept entries, optional
  ``pos_weight``.
* **Gate** :func:`idea_gate`: ``"published"``: ``g = max(alpha * log(sigmoid(z) + eps), beta)``;
  ``"outside"`` (the later code): ``g = alpha * max(log(sigmoid(z) + eps), beta)``.
  The gated next-token logits are ``logits + g``; their log-softmax (renormalised) is
  the model's distribution, on which PPL is computed; the ungated PPL uses ``logits``.
* **Ramp**: alpha grows linearly from 0 to ``alpha`` over ``ramp_steps`` training
  forward passes (counted in a buffer, so checkpoints resume it exactly).

* **Training loss** :func:`idea_objective` (and :func:`idea_training_loss`, the recipe's):
  ``CE(log_softmax(logits + gate)) + weight * BCE`` fused into one pass over row blocks of
  (B, L, V), value and gradient together, ``sigmoid(z)`` computed once; equal to the
  unfused formulas up to float rounding (tests compare values and gradients in float32 and
  float64). On CUDA with triton installed the V-wide part is one Triton kernel instead
  (:mod:`neurosym.lm.idea_kernel`, two passes over each row; ``kernel=`` chooses).

:class:`IdeaOutput` plugs all of it into :class:`~neurosym.lm.model.CausalLM` as its
``output`` layer: it returns the gated logits and ``extras = {"idea": z, "ungated":
logits}``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurosym.errors import ConfigError, NeurosymError
from neurosym.kernels import KERNELS, choose_kernel

GateVariant = Literal["published", "outside"]
GATE_VARIANTS = ("published", "outside")


# ---------------------------------------------------------------------- configuration
@dataclass
class IdeaConfig:
    """Hyper-parameters of the idea head, the gate and the idea loss; checked on
    construction. Bad values raise :class:`~neurosym.errors.ConfigError` naming the key
    as ``model.idea_<field>`` (the keys of a recipe's ``[model]`` table)."""

    window: int = 20  # K: the next K tokens form the bag of words
    hidden: int = 128  # H: the MLP's hidden width
    tied: bool = True  # output layer tied to the token embeddings (equal size) or untied (as published)
    alpha: float = 0.5
    beta: float = -2.0
    eps: float = 1e-6
    variant: GateVariant = "published"
    ramp_steps: int = 0  # alpha goes 0 -> alpha over this many training steps (0: constant alpha)
    weight: float = 1.0  # lambda: total loss = CE(gated) + weight * idea BCE
    stop_words: int = 50  # the N most frequent training tokens get no idea loss
    pos_weight: float | None = None  # BCE weight of the positive entries (None: 1)
    ramp: float | None = None  # the lm task: alpha ramps over this share of the training steps (sets ramp_steps)
    kernel: str = "torch"  # the training objective's implementation (:func:`resolve_kernel`): "torch", "triton", "compile" or "auto"

    def __post_init__(self) -> None:
        for key in ("window", "hidden"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"model.idea_{key}: expected an integer >= 1, got {value!r}")
        for key in ("ramp_steps", "stop_words"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"model.idea_{key}: expected an integer >= 0, got {value!r}")
        if not (_number(self.alpha) and self.alpha >= 0):
            raise ConfigError(f"model.idea_alpha: expected a finite number >= 0, got {self.alpha!r}")
        if not (_number(self.beta) and self.beta <= 0):
            raise ConfigError(f"model.idea_beta: expected a finite number <= 0 (the floor of the log-gate), got {self.beta!r}")
        if not (_number(self.eps) and 0 < self.eps < 1):
            raise ConfigError(f"model.idea_eps: expected a number in (0, 1), got {self.eps!r}")
        if self.variant not in GATE_VARIANTS:
            raise ConfigError(f"model.idea_variant: expected one of {', '.join(map(repr, GATE_VARIANTS))}, got {self.variant!r}")
        if not (_number(self.weight) and self.weight >= 0):
            raise ConfigError(f"model.idea_weight: expected a finite number >= 0, got {self.weight!r}")
        if self.pos_weight is not None and not (_number(self.pos_weight) and self.pos_weight > 0):
            raise ConfigError(f"model.idea_pos_weight: expected a finite number > 0, got {self.pos_weight!r}")
        if self.kernel not in KERNELS:
            raise ConfigError(f"model.idea_kernel: expected one of {', '.join(map(repr, KERNELS))}, got {self.kernel!r}")
        if self.ramp is not None and not (_number(self.ramp) and 0 <= self.ramp <= 1):
            raise ConfigError(f"model.idea_ramp: expected a share of the training steps in [0, 1], got {self.ramp!r}")


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ---------------------------------------------------------------------- targets and loss
def idea_targets(targets: Tensor, vocab_size: int, window: int, pad_id: int = 0) -> Tensor:
    """Multi-hot bags of the next ``window`` tokens: targets (B, L) -> (B, L, V) float.

    ``out[b, t, v] = 1`` iff ``v == targets[b, t + j]`` for some ``0 <= j < window`` with
    ``t + j < L`` and ``targets[b, t + j] != pad_id`` (``pad_id`` itself is never set).
    One gather of a (B, L, K) window index and one scatter; no loop over positions."""
    if targets.dim() != 2:
        raise NeurosymError(f"idea_targets: expected targets of shape (B, L), got {tuple(targets.shape)}")
    if window < 1:
        raise NeurosymError(f"idea_targets: window must be >= 1, got {window}")
    B, L = targets.shape
    padded = F.pad(targets.long(), (0, window - 1), value=pad_id)  # (B, L + K - 1)
    index = torch.arange(L, device=targets.device)[:, None] + torch.arange(window, device=targets.device)[None, :]  # (L, K)
    win = padded[:, index]  # (B, L, K) the next K tokens of each position
    win = torch.where((win == pad_id) | (win < 0) | (win >= vocab_size), vocab_size, win)  # pad -> a dump column
    out = torch.zeros(B, L, vocab_size + 1, device=targets.device)
    out.scatter_(2, win, 1.0)
    return out[..., :vocab_size]


def stop_word_ids(ids: Tensor | Iterable[Sequence[int]], n: int, vocab_size: int, exclude: Sequence[int] = ()) -> Tensor:
    """The ``n`` most frequent token ids of the training data (ties: lower id first),
    ``exclude`` (pad, bos, ...) not counted: (n',) long with n' <= n."""
    flat = ids.reshape(-1).long() if isinstance(ids, Tensor) else torch.tensor([t for row in ids for t in row], dtype=torch.long)
    counts = torch.bincount(flat[(flat >= 0) & (flat < vocab_size)], minlength=vocab_size).double()
    if len(exclude):
        counts[torch.as_tensor(list(exclude), dtype=torch.long, device=counts.device)] = -1.0
    n = min(n, int((counts > 0).sum()))
    # stable order: larger count first, then the lower id
    order = torch.argsort(-counts * (vocab_size + 1) + torch.arange(vocab_size, dtype=torch.float64, device=counts.device))
    return order[:n].sort().values


def window_tokens(targets: Tensor, window: int, pad_id: int, vocab_size: int) -> tuple[Tensor, Tensor]:
    """The distinct tokens of each position's window, sparsely: targets (B, L) ->
    ``tokens`` (B, L, K) long (sorted; ``vocab_size`` where nothing is) and ``first``
    (B, L, K) bool, true at each distinct real token once. ``idea_targets`` is their
    scatter into V columns."""
    B, L = targets.shape
    padded = F.pad(targets.long(), (0, window - 1), value=pad_id)  # (B, L + K - 1)
    index = torch.arange(L, device=targets.device)[:, None] + torch.arange(window, device=targets.device)[None, :]  # (L, K)
    win = padded[:, index]  # (B, L, K)
    win = torch.where((win == pad_id) | (win < 0) | (win >= vocab_size), vocab_size, win)
    tokens = win.sort(dim=-1).values
    first = tokens < vocab_size
    first[..., 1:] &= tokens[..., 1:] != tokens[..., :-1]
    return tokens, first


def idea_loss(
    z: Tensor, targets: Tensor, window: int, pad_id: int = 0, stop_ids: Tensor | Sequence[int] | None = None,
    pos_weight: float | None = None,
) -> Tensor:
    """Masked BCE-with-logits of the idea head: z (B, L, V), targets (B, L) -> scalar.

    Mean over the entries (b, t, v) with ``targets[b, t] != pad_id`` and v neither
    ``pad_id`` nor a stop word; those entries get no gradient. 0 (with a zero gradient)
    when nothing counts. Computed without the dense targets: with ``y`` the multi-hot
    of :func:`idea_targets` and ``p`` the positive weight, ``BCE = softplus(z) +
    y (p softplus(-z) - softplus(z))``, so the V-wide work is one softplus and a
    matrix-vector product with the kept columns; the positives are gathered from the
    (B, L, K) windows (:func:`window_tokens`)."""
    V = z.shape[-1]
    zf = z.float()
    keep_col = torch.ones(V, dtype=torch.bool, device=z.device)
    keep_col[pad_id] = False
    if stop_ids is not None and len(stop_ids):
        keep_col[torch.as_tensor(stop_ids, dtype=torch.long, device=z.device)] = False
    keep_pos = targets != pad_id  # (B, L)
    count = int(keep_pos.sum()) * int(keep_col.sum())
    if not count:
        return z.sum() * 0.0
    negatives = (F.softplus(zf) @ keep_col.float() * keep_pos).sum()  # every kept entry as if y = 0
    tokens, first = window_tokens(targets, window, pad_id, V)
    safe = tokens.clamp(max=V - 1)
    first = first & keep_col[safe] & keep_pos[..., None]
    zp = zf.gather(-1, safe)  # (B, L, K): the positives' logits
    p = 1.0 if pos_weight is None else float(pos_weight)
    positives = ((p * F.softplus(-zp) - F.softplus(zp)) * first).sum()
    return (negatives + positives) / count


# ---------------------------------------------------------------------- the gate
class _Gate(torch.autograd.Function):
    """The gate with a hand-written backward: saves ``sigmoid(z)`` and the unclamped mask
    instead of autograd's chain of five V-wide intermediates (about 3x faster)."""

    @staticmethod
    def forward(ctx, z: Tensor, alpha: float, beta: float, eps: float, outside: bool) -> Tensor:
        s = torch.sigmoid(z)
        log_p = (s + eps).log_()
        if outside:
            keep = log_p >= beta
            g = log_p.clamp_(min=beta).mul_(alpha)
        else:
            g = log_p.mul_(alpha)
            keep = g >= beta
            g.clamp_(min=beta)
        ctx.save_for_backward(s, keep)
        ctx.alpha, ctx.eps = alpha, eps
        return g

    @staticmethod
    def backward(ctx, grad: Tensor):
        s, keep = ctx.saved_tensors
        # d/dz alpha * log(sigmoid(z) + eps) = alpha * s (1 - s) / (s + eps), where the clamp lets it through
        d = (1 - s).mul_(s).div_(s + ctx.eps).mul_(ctx.alpha).mul_(keep)
        return grad * d, None, None, None, None


def idea_gate(z: Tensor, alpha: float, beta: float = -2.0, eps: float = 1e-6, variant: GateVariant = "published") -> Tensor:
    """The additive log-gate of idea logits z (..., V) -> (..., V).

    ``published``: ``max(alpha * log(sigmoid(z) + eps), beta)``;
    ``outside``: ``alpha * max(log(sigmoid(z) + eps), beta)`` (alpha outside the clamp).
    The same operations in the same order as the formula (so the same values); the
    gradient is written by hand (tests compare it with autograd through the formula)."""
    if variant not in GATE_VARIANTS:
        raise NeurosymError(f"idea_gate: variant must be one of {', '.join(GATE_VARIANTS)}, got {variant!r}")
    return _Gate.apply(z, float(alpha), float(beta), float(eps), variant == "outside")


def ramped_alpha(alpha: float, step: int, ramp_steps: int) -> float:
    """``alpha * min(1, step / ramp_steps)`` (``alpha`` when ``ramp_steps`` is 0)."""
    return alpha if ramp_steps <= 0 else alpha * min(1.0, step / ramp_steps)


# ---------------------------------------------------------------------- the fused training objective
# The implementations of idea_objective's V-wide part (kernel=, neurosym.kernels.KERNELS): torch (row blocks of
# _block_grads), compile (_block_grads once on every row, through torch.compile), triton (one Triton kernel,
# neurosym.lm.idea_kernel), auto (Triton on CUDA when triton imports, else torch).


def _block_grads(logits: Tensor, z: Tensor, t: Tensor, rowf: Tensor, col: Tensor, alpha: Tensor, beta: float, eps: float,
                 outside: bool, ce_scale: Tensor, bce_scale: Tensor, out: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One row block of the objective's V-wide part: logits, z (n, V) in the compute dtype,
    t (n, 1) the targets (0 on padding), rowf (n, 1) 1.0 on kept rows, col (V,) 1.0 on kept
    columns, ``alpha``, ``ce_scale``, ``bce_scale`` 0-d tensors (so a compiled block is not
    recompiled as they change) -> the gradients (n, V) of ``ce_scale * sum CE + bce_scale * sum BCE``
    (the BCE as if every entry were negative), and the float64 sums of the rows' CE and of
    the kept entries' ``softplus(z)``. In-place on its own temporaries only; the gradients are
    written into ``out`` (two (n, V) tensors: a row block of the whole step's) when given."""
    # the gate, the same operations in the same order as idea_gate (so the same values)
    s = torch.sigmoid(z)
    s_eps = s + eps
    gate = s_eps.log()
    keep = torch.empty_like(s)  # 1.0 where the clamp lets the gradient through (a float comparison: a bool mask costs 5x)
    if outside:
        torch.ge(gate, beta, out=keep)
        gate.clamp_(min=beta).mul_(alpha)
    else:
        gate.mul_(alpha)
        torch.ge(gate, beta, out=keep)
        gate.clamp_(min=beta)
    gl = gate.add_(logits) if out is None else torch.add(gate, logits, out=out[0])  # the gated logits
    # CE of the gated logits: lse - gated[t]; gradient (softmax - onehot) / n_ce
    picked = gl.gather(-1, t)  # (n, 1)
    top = gl.amax(dim=-1, keepdim=True)
    total_exp = gl.sub_(top).exp_().sum(dim=-1, keepdim=True)  # gl now holds exp(gated - max)
    ce_sum = ((top + total_exp.log() - picked) * rowf).sum(dtype=torch.float64)
    gl.mul_(rowf * ce_scale / total_exp)  # softmax / n_ce on kept rows, 0 on padding
    gl.scatter_add_(-1, t, -rowf * ce_scale)
    # dz = dCE/dgated * alpha s (1 - s) / (s + eps) where the clamp lets it through (as _Gate.backward) ...
    d = torch.addcmul(s, s, s, value=-1.0).div_(s_eps)  # s (1 - s) / (s + eps)
    gz = d.mul_(gl) if out is None else torch.mul(d, gl, out=out[1])
    gz.mul_(keep).mul_(alpha)
    # ... + the BCE's, every kept entry as if y = 0: value softplus(z), gradient s
    neg_sum = (F.softplus(z) @ col * rowf.squeeze(-1)).sum(dtype=torch.float64)
    gz.addcmul_(s, rowf * (col * bce_scale))
    return gl, gz, ce_sum, neg_sum


@functools.cache
def _compiled_block():
    """:func:`_block_grads` through ``torch.compile`` (built once, on first use: the
    ``"compile"`` kernel)."""
    return torch.compile(_block_grads, fullgraph=True)


def _torch_rows(logits: Tensor, z: Tensor, targets: Tensor, keep_col: Tensor, alpha: float, beta: float, eps: float, outside: bool,
                ce_scale: float, bce_scale: float, block: int, compiled: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The V-wide part of the objective in row blocks of ``block`` rows (:func:`_block_grads`;
    one block of every row, through ``torch.compile``, with ``compiled``): logits, z (N, V),
    targets (N,) (-1 on padding) -> the gradients (N, V) of ``ce_scale * sum CE + bce_scale * sum BCE``
    (the BCE as if every entry were negative), and the float64 sums of the rows' CE and of
    the kept entries' ``softplus(z)``."""
    N, V = logits.shape
    cdt = torch.promote_types(torch.promote_types(logits.dtype, z.dtype), torch.float32)  # float32, or float64 for float64 inputs
    col = keep_col.to(cdt)  # (V,)
    rowf = (targets != -1).to(cdt)[:, None]  # (N, 1)
    t = targets.clamp(min=0)[:, None]  # (N, 1)
    a, ce_scale, bce_scale = (torch.tensor(x, dtype=cdt, device=logits.device) for x in (alpha, ce_scale, bce_scale))
    if compiled:
        try:
            return _compiled_block()(logits.to(cdt), z.to(cdt), t, rowf, col, a, beta, eps, outside, ce_scale, bce_scale)
        except Exception as e:  # torch.compile's failures (no C++ compiler for the CPU, a backend error) come as pages of traceback
            reason = (str(e).strip().splitlines() or [""])[0][:300]
            raise NeurosymError(f"idea_objective: kernel='compile' failed ({type(e).__name__}: {reason}); use kernel='torch'") from e
    if block >= N:  # one block: its own gradients, no copy into the step's
        return _block_grads(logits.to(cdt), z.to(cdt), t, rowf, col, a, beta, eps, outside, ce_scale, bce_scale)
    g_logits = torch.empty(N, V, dtype=cdt, device=logits.device)
    g_z = torch.empty(N, V, dtype=cdt, device=logits.device)
    ce_sum = logits.new_zeros((), dtype=torch.float64)
    neg_sum = logits.new_zeros((), dtype=torch.float64)
    for i in range(0, N, block):
        j = min(i + block, N)
        _, _, ce, neg = _block_grads(logits[i:j].to(cdt), z[i:j].to(cdt), t[i:j], rowf[i:j], col, a, beta, eps, outside,
                                     ce_scale, bce_scale, out=(g_logits[i:j], g_z[i:j]))
        ce_sum += ce
        neg_sum += neg
    return g_logits, g_z, ce_sum, neg_sum


class _IdeaObjective(torch.autograd.Function):
    """CE of the gated logits plus ``weight`` times the idea BCE, value and gradient in one
    pass over (N, V) (see :func:`idea_objective`): row blocks of torch operations
    (:func:`_torch_rows`) or one Triton kernel (``triton``: :func:`neurosym.lm.idea_kernel.idea_rows`).
    The gradients with respect to ``logits`` and ``z`` are formed in the forward pass,
    block by block while the block's intermediates are still in cache (or row by row in
    the kernel), and saved; the backward pass scales them by the incoming gradient."""

    @staticmethod
    def forward(ctx, logits: Tensor, z: Tensor, targets: Tensor, tokens: Tensor, first: Tensor, keep_col: Tensor,
                alpha: float, beta: float, eps: float, outside: bool, weight: float, pos_weight: float, block: int, impl: str):
        N, V = logits.shape
        cdt = torch.promote_types(torch.promote_types(logits.dtype, z.dtype), torch.float32)  # float32, or float64 for float64 inputs
        keep_row = targets != -1  # (N,) rows with a real next token (the caller maps pad to -1)
        n_ce = int(keep_row.sum())
        kept_cols = int(keep_col.sum())
        n_bce = n_ce * kept_cols
        ce_scale = 1.0 / n_ce if n_ce else 0.0
        bce_scale = weight / n_bce if n_bce else 0.0
        if impl == "triton":
            from neurosym.lm.idea_kernel import idea_rows  # lazy: triton is optional, loaded only when asked for

            g_logits, g_z, ce_rows, neg_rows = idea_rows(logits, z, targets, keep_col, alpha=alpha, beta=beta, eps=eps, outside=outside,
                                                         ce_scale=ce_scale, bce_scale=bce_scale)
            ce_sum, neg_sum = ce_rows.sum(dtype=torch.float64), neg_rows.sum(dtype=torch.float64)
        else:
            g_logits, g_z, ce_sum, neg_sum = _torch_rows(logits, z, targets, keep_col, alpha, beta, eps, outside, ce_scale, bce_scale, block,
                                                         compiled=impl == "compile")
        # the positives (gathered from the (N, K) windows): y (p softplus(-z) - softplus(z)),
        # gradient y (p (s - 1) - s)
        safe = tokens.clamp(max=V - 1)
        on = first & keep_col[safe] & keep_row[:, None]  # (N, K)
        zp = z.gather(-1, safe).to(cdt)
        sp = torch.sigmoid(zp)
        pos_sum = ((pos_weight * F.softplus(-zp) - F.softplus(zp)) * on).sum(dtype=torch.float64)
        g_z.scatter_add_(-1, safe, (pos_weight * (sp - 1) - sp) * on * bce_scale)
        ce = ce_sum * ce_scale
        bce = (neg_sum + pos_sum) / n_bce if n_bce else neg_sum * 0.0
        ctx.save_for_backward(g_logits, g_z)
        ctx.dtypes = (logits.dtype, z.dtype)
        total = (ce + weight * bce).to(cdt)
        ce, bce = ce.to(cdt), bce.to(cdt)
        ctx.mark_non_differentiable(ce, bce)
        return total, ce, bce

    @staticmethod
    def backward(ctx, grad: Tensor, _ce, _bce):
        g_logits, g_z = ctx.saved_tensors
        if not torch.equal(grad, torch.ones_like(grad)):  # the usual case (loss.backward()) needs no pass
            g_logits, g_z = g_logits * grad, g_z * grad
        return (g_logits.to(ctx.dtypes[0]), g_z.to(ctx.dtypes[1])) + (None,) * 12


CPU_BLOCK_ELEMENTS = 1 << 18
"""Entries of (N, V) per row block of :func:`idea_objective` on the CPU: about a cache's worth."""
CUDA_BYTES_PER_ENTRY = 64
"""Free CUDA memory set aside per entry of a row block: the block's float32 temporaries
(sigmoid, gate, clamp mask, derivative, a few more) with room to spare."""


def idea_block_elements(device: torch.device | str) -> int:
    """Entries per row block of :func:`idea_objective` on ``device``: :data:`CPU_BLOCK_ELEMENTS`
    on the CPU (the block stays in cache); on CUDA, free memory / :data:`CUDA_BYTES_PER_ENTRY`
    (at least the CPU's), so that a training step's (N, V) is one block, or a few, rather than
    hundreds of small launches. The values do not depend on the block size (rows are
    independent; only the float64 sums are added in another order)."""
    device = torch.device(device)
    if device.type != "cuda":
        return CPU_BLOCK_ELEMENTS
    free, _ = torch.cuda.mem_get_info(device)
    return max(CPU_BLOCK_ELEMENTS, free // CUDA_BYTES_PER_ENTRY)


@functools.cache
def _kernel_module():
    """neurosym.lm.idea_kernel, or None when triton does not import (tried once)."""
    try:
        from neurosym.lm import idea_kernel  # lazy: triton is optional and heavy
    except ImportError:
        return None
    return idea_kernel


def resolve_kernel(kernel: str, device: torch.device | str) -> str:
    """The implementation :func:`idea_objective` runs for ``kernel`` (one of :data:`KERNELS`)
    on tensors of ``device``: ``"torch"``, ``"triton"`` or ``"compile"`` (asked for by name only). ``auto`` is Triton on CUDA when
    triton imports, else torch; ``triton`` without triton, or on CPU tensors outside Triton's
    interpreter (``TRITON_INTERPRET=1`` before triton is imported), is a
    :class:`~neurosym.errors.NeurosymError`."""
    return choose_kernel(kernel, device, _kernel_module, "idea_objective", compiled=True)


def idea_objective(
    logits: Tensor, z: Tensor, targets: Tensor, *, alpha: float, window: int, pad_id: int = 0, beta: float = -2.0,
    eps: float = 1e-6, variant: GateVariant = "published", weight: float = 1.0, stop_ids: Tensor | Sequence[int] | None = None,
    pos_weight: float | None = None, block_elements: int | None = None, kernel: str = "torch",
) -> tuple[Tensor, Tensor, Tensor]:
    """The training loss of an idea-gated LM, fused: ``(total, ce, bce)`` with

    ``ce = F.cross_entropy(logits + idea_gate(z, alpha, beta, eps, variant), targets, ignore_index=pad_id)``,
    ``bce = idea_loss(z, targets, window, pad_id, stop_ids, pos_weight)``, ``total = ce + weight * bce``
    (equal to those naive formulas up to float rounding; tests check values and gradients).

    logits, z: (B, L, V) ungated next-token logits and idea logits (any float dtype;
    computed in float32); targets (B, L) with ``pad_id`` at padding. ``total`` carries the
    gradient to ``logits`` and ``z``; ``ce`` and ``bce`` are detached (for logging).

    Why fused: the naive path makes some thirty passes over (B, L, V) arrays too large for
    the cache (sigmoid, log, clamp, add, log-softmax, softplus and their autograd
    backward each read and write all of it). Here the rows are taken in blocks of about
    ``block_elements`` entries (default :func:`idea_block_elements` of the device: a CPU
    cache's worth on the CPU, as much as free memory allows on CUDA, where each block costs
    some twenty kernel launches); each block's gate, gated log-softmax, CE gradient, gate
    derivative and BCE gradient are computed while it is in cache, and ``sigmoid(z)`` is
    computed once for the gate, its derivative and the BCE gradient. The BCE's positives
    come from the sparse (B, L, K) windows (:func:`window_tokens`): no dense target.
    ``ce`` is 0 (with no gradient) when every target is padding (``F.cross_entropy``
    would give nan).

    ``kernel`` (:func:`resolve_kernel`): ``"torch"``, the row blocks above; ``"triton"``, one
    Triton kernel that makes two passes over each row instead (:mod:`neurosym.lm.idea_kernel`,
    ``block_elements`` unused); ``"compile"``, the row-block function once on every row through
    ``torch.compile`` (the first call compiles; a failure is a :class:`NeurosymError`);
    ``"auto"``, Triton on CUDA tensors when triton imports, else torch. The default is
    ``"torch"``, the path measured on a GPU (the other two are tested on the CPU but not yet
    run on a card: opt in with ``kernel=`` or the ``model.idea`` table's ``kernel`` key)."""
    if logits.shape != z.shape or logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise NeurosymError(f"idea_objective: expected logits and z (B, L, V) and targets (B, L), got "
                            f"{tuple(logits.shape)}, {tuple(z.shape)}, {tuple(targets.shape)}")
    if variant not in GATE_VARIANTS:
        raise NeurosymError(f"idea_objective: variant must be one of {', '.join(GATE_VARIANTS)}, got {variant!r}")
    impl = resolve_kernel(kernel, logits.device)
    B, L, V = logits.shape
    keep_col = torch.ones(V, dtype=torch.bool, device=z.device)
    keep_col[pad_id] = False
    if stop_ids is not None and len(stop_ids):
        keep_col[torch.as_tensor(stop_ids, dtype=torch.long, device=z.device)] = False
    tokens, first = window_tokens(targets, window, pad_id, V)
    flat_targets = torch.where(targets == pad_id, -1, targets.long()).reshape(-1)
    if block_elements is None:
        block_elements = idea_block_elements(logits.device)
    block = max(1, block_elements // V)
    return _IdeaObjective.apply(
        logits.reshape(B * L, V), z.reshape(B * L, V), flat_targets, tokens.reshape(B * L, -1), first.reshape(B * L, -1), keep_col,
        float(alpha), float(beta), float(eps), variant == "outside", float(weight), 1.0 if pos_weight is None else float(pos_weight), block,
        impl,
    )


# ---------------------------------------------------------------------- modules
class IdeaHead(nn.Module):
    """hidden (B, L, D) -> idea logits z (B, L, V): ``Linear(D, H)``, GELU, then
    ``Linear(H, D)`` and the tied embedding ``@ weight^T`` (tied), or ``Linear(H, V)``
    (untied)."""

    def __init__(self, d_model: int, vocab_size: int, hidden: int = 128, tied: bool = True):
        super().__init__()
        self.tied = tied
        self.fc = nn.Linear(d_model, hidden)
        self.out = nn.Linear(hidden, d_model if tied else vocab_size)
        for lin in (self.fc, self.out):
            nn.init.normal_(lin.weight, std=0.02)
            nn.init.zeros_(lin.bias)

    def forward(self, hidden: Tensor, weight: Tensor | None = None) -> Tensor:
        """hidden (B, L, D), weight (V, D) the token embeddings (needed when tied) -> (B, L, V)."""
        h = self.out(F.gelu(self.fc(hidden)))
        if not self.tied:
            return h
        if weight is None:
            raise NeurosymError("IdeaHead: a tied idea head needs the token embedding matrix (weight=)")
        return h @ weight.t()


class IdeaOutput(nn.Module):
    """The ``output`` layer of a :class:`~neurosym.lm.model.CausalLM` with idea gating.

    ``forward(hidden (B, L, D), weight (V, D)) -> (gated logits (B, L, V), {"idea": z,
    "ungated": hidden @ weight^T})``. ``gated = False`` returns the ungated logits as the
    logits (for :class:`~neurosym.decode.idea.IdeaGate`, which gates at decoding time).
    Each training forward pass counts one step of the alpha ramp."""

    def __init__(self, d_model: int, vocab_size: int, config: IdeaConfig):
        super().__init__()
        self.config = config
        self.head = IdeaHead(d_model, vocab_size, config.hidden, config.tied)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.gated = True

    @property
    def alpha(self) -> float:
        """The current alpha of the ramp."""
        return ramped_alpha(self.config.alpha, int(self.steps), self.config.ramp_steps)

    def gate(self, z: Tensor) -> Tensor:
        """The gate (..., V) at the current alpha."""
        c = self.config
        return idea_gate(z, self.alpha, c.beta, c.eps, c.variant)

    def forward(self, hidden: Tensor, weight: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        logits = hidden @ weight.t()
        z = self.head(hidden, weight)
        gated = logits + self.gate(z) if self.gated else logits
        if self.training:
            self.steps += 1
        return gated, {"idea": z, "ungated": logits}


def idea_training_loss(
    model: nn.Module, ids: Tensor, targets: Tensor, stop_ids: Tensor | Sequence[int] | None, pad_id: int,
    block_elements: int | None = None, kernel: str | None = None, **inputs,
) -> tuple[Tensor, Tensor, Tensor]:
    """One training forward pass of a :class:`~neurosym.lm.model.CausalLM` whose output
    layer is an :class:`IdeaOutput`, and its loss through :func:`idea_objective`:
    ids, targets (B, L) -> ``(total, ce, bce)`` (``ce``, ``bce`` detached).

    The forward pass runs with the gate deferred (``output.gated = False``: the model returns
    the ungated logits and the idea logits), and the fused objective gates, takes the CE
    of the gated logits and the idea BCE (weight, window, gate and ``pos_weight`` from the
    output's :class:`IdeaConfig`) at the alpha this forward pass had on the ramp. Equal
    to ``F.cross_entropy(model(ids).logits, ...) + weight * idea_loss(...)`` up to rounding.
    ``block_elements``: the objective's row blocks (default: chosen for the device);
    ``kernel``: its implementation (``auto``, ``torch``, ``triton`` or ``compile``: :func:`resolve_kernel`;
    default: the output's ``IdeaConfig.kernel``)."""
    output = getattr(model, "output", None)
    if not isinstance(output, IdeaOutput):
        raise NeurosymError("idea_training_loss: the model has no idea gate (its output layer is not an IdeaOutput)")
    alpha = output.alpha  # before this forward pass counts its step, as the gate inside forward would use
    gated, output.gated = output.gated, False
    try:
        out = model(ids, **inputs)
    finally:
        output.gated = gated
    c = output.config
    return idea_objective(out.logits, out.extras["idea"], targets, alpha=alpha, window=c.window, pad_id=pad_id, beta=c.beta,
                          eps=c.eps, variant=c.variant, weight=c.weight, stop_ids=stop_ids, pos_weight=c.pos_weight,
                          block_elements=block_elements, kernel=c.kernel if kernel is None else kernel)


def idea_parameters(d_model: int, vocab_size: int, hidden: int, tied: bool) -> int:
    """The number of parameters an idea head adds: ``2 D H + H + D`` tied,
    ``D H + H + H V + V`` untied."""
    return d_model * hidden + hidden + (hidden * d_model + d_model if tied else hidden * vocab_size + vocab_size)


def matched_d_ff(d_model: int, n_layers: int, d_ff: int, extra: int) -> int:
    """The baseline's ``d_ff`` that adds about ``extra`` parameters (each unit of d_ff in
    each layer costs ``2 D + 1``), so a baseline matches an idea model's size."""
    return d_ff + round(extra / (n_layers * (2 * d_model + 1)))


# ---------------------------------------------------------------------- evaluation
@torch.no_grad()
def idea_perplexities(model: nn.Module, batches: Iterable[dict[str, Tensor]], pad_id: int) -> dict[str, float]:
    """Corpus PPL of the gated (renormalised) and the ungated distribution of a model
    with an :class:`IdeaOutput`: ``{ppl, ppl_ungated, tokens}``. Batches hold ``ids``
    and ``targets`` (B, L)."""
    device = next(model.parameters()).device
    was = model.training
    model.eval()
    nll = {"ppl": 0.0, "ppl_ungated": 0.0}
    n = 0
    try:
        for batch in batches:
            ids, targets = batch["ids"].to(device), batch["targets"].to(device)
            out = model(ids)
            keep = targets != pad_id
            t = targets.clamp(min=0)[..., None]
            for key, logits in (("ppl", out.logits), ("ppl_ungated", out.extras.get("ungated", out.logits))):
                logits = logits.float()  # log p = logit - logsumexp in float32, summed in float64 (a (B, L, V) float64 copy is 2x the memory)
                lp = (logits.gather(-1, t).squeeze(-1) - torch.logsumexp(logits, dim=-1)).double()
                nll[key] -= float(lp[keep].sum())
            n += int(keep.sum())
    finally:
        model.train(was)
    return {**{k: math.exp(v / n) if n else math.nan for k, v in nll.items()}, "tokens": n}


@torch.no_grad()
def xray(model: nn.Module, ids: Sequence[int], k: int = 10) -> dict[str, list[tuple[int, float]]]:
    """What the gate does after a prompt: the ``k`` tokens it boosts least negatively
    (largest gate) and the ``k`` it suppresses most, as ``(token id, gate value)``, plus the
    change in each token's log-probability: ``{"boost": [...], "suppress": [...],
    "delta_boost": [...], "delta_suppress": [...]}``. ``ids``: the prompt (with <bos>)."""
    output = getattr(model, "output", None)
    if not isinstance(output, IdeaOutput):
        raise NeurosymError("xray: the model has no idea gate (its output layer is not an IdeaOutput)")
    was = model.training
    model.eval()
    try:
        out = model(torch.tensor([list(ids)], dtype=torch.long, device=next(model.parameters()).device))
    finally:
        model.train(was)
    z = out.extras["idea"][0, -1]
    gate = output.gate(z)
    delta = F.log_softmax(out.logits[0, -1].double(), -1) - F.log_softmax(out.extras["ungated"][0, -1].double(), -1)
    top = lambda v, largest: [(int(i), float(v[i])) for i in torch.topk(v, min(k, v.numel()), largest=largest).indices]  # noqa: E731
    return {"boost": top(gate, True), "suppress": top(gate, False), "delta_boost": top(delta, True), "delta_suppress": top(delta, False)}


__all__ = [
    "CPU_BLOCK_ELEMENTS", "CUDA_BYTES_PER_ENTRY", "GATE_VARIANTS", "KERNELS", "IdeaConfig", "IdeaHead", "IdeaOutput", "idea_block_elements", "idea_gate", "idea_loss", "idea_objective", "idea_parameters",
    "idea_perplexities", "idea_targets", "idea_training_loss", "matched_d_ff", "ramped_alpha", "resolve_kernel", "stop_word_ids", "window_tokens", "xray",
]
