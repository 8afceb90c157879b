"""Semirings for dynamic programs written once (after pytorch-struct).

A dynamic program such as the inside algorithm only adds (``plus``, ``sum``),
multiplies (``times``) and contracts (``matmul``); which semiring it runs in decides
what it computes:

* :class:`LogSemiring` (logsumexp, +): log partition functions; gradients are
  marginals.
* :class:`MaxSemiring` (max, +): best scores; gradients are 0/1 indicators of the
  best structure.

Both work on log-potentials, where ``zero = -inf`` (impossible) and ``one = 0``.

* :class:`SoftMinSemiring` (soft-min with temperature T, +) over *costs*:
  ``a ⊕ b = -T log(exp(-a/T) + exp(-b/T))``; at T = 0 the tropical (min, +) semiring
  (:data:`MIN_PLUS`). Its zero is the finite ``-LOG_ZERO_FINITE``, so gradients through
  smoothed minima of impossible paths stay NaN-free. Edit distances run in it.
Semirings are plain classes used as namespaces: pass the class itself
(``inside(..., semiring=MaxSemiring)``).

``LogSemiring.matmul`` never materialises the (..., i, k, j) broadcast: it shifts both
operands by maxima (balanced over k, see :class:`_LogMatmul`), exponentiates, calls a
real ``torch.matmul`` and takes the log back. A term ``a[i, k] + b[k, j]`` more than
about 87 nats (float32; 708 in float64) below the shift ``x[i] + y[j]`` underflows in
that product, so every entry whose shifted sum came out below ``exp(RECOMPUTE_NATS)``
(-inf included) is recomputed exactly by a gathered logsumexp over k. The result is
exact in float32 for any input, at the cost of ``O(K)`` per recomputed entry (none on
well-scaled inputs). A right operand used for many products can be prepared
(exponentiated) once: ``prepare(b)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

LOG_ZERO = float("-inf")  # log 0: the semiring zero of every log-space dynamic program
# A finite stand-in for LOG_ZERO, for the few places where -inf would turn into NaN
# (inf - inf in a clamped log-sum's gradient, 0 * inf in a KL, a soft minimum over
# "no path" costs). exp() of it is 0 in every float dtype; sums of a few stay finite.
LOG_ZERO_FINITE = -1e30
MAX_CHUNK = 2**24  # elements of the (..., i, k, j) broadcast the max semiring holds at once


# ---------------------------------------------------------------------- the log matmul
def _max(x: Tensor, dim: int) -> Tensor:
    """The (detached) max of ``x`` over ``dim``, kept as a size-1 dim; 0 for an all
    ``-inf`` slice, so that subtracting it never makes ``-inf - -inf``."""
    return x.detach().amax(dim, keepdim=True).nan_to_num_(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class LogOperand:
    """A right operand ``b`` (..., K, J) of :meth:`LogSemiring.matmul`, exponentiated
    once for many products: ``exp = exp(b - t - y)`` with ``t[k] = max_j b[k, j]`` and
    ``y[j] = max_k b[k, j] - t[k]`` (so ``exp <= 1``). Indexing slices the batch dims."""

    exp: Tensor  # (..., K, J)
    t: Tensor  # (..., K, 1); -inf for an all -inf row
    y: Tensor  # (..., 1, J)
    raw: Tensor  # (..., K, J): ``b`` itself, for the entries recomputed exactly

    def __getitem__(self, index) -> "LogOperand":
        index = index if isinstance(index, tuple) else (index,)
        return LogOperand(self.exp[index], self.t[index], self.y[index], self.raw[index])


class _Exp(torch.autograd.Function):
    """``b -> (exp(b - t - y), t, y)``; only the first output is differentiable, and its
    gradient becomes ``b``'s once, however many products used it."""

    @staticmethod
    def forward(ctx, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        t = b.amax(-1, keepdim=True)
        b_exp = b - t.nan_to_num(0.0, 0.0, 0.0)
        y = _max(b_exp, -2)
        b_exp.sub_(y).exp_()
        ctx.mark_non_differentiable(t, y)
        ctx.set_materialize_grads(False)  # no zero tensors for the gradients of t and y
        ctx.save_for_backward(b_exp)
        return b_exp, t, y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor | None, _t, _y) -> Tensor | None:
        if grad is None:
            return None
        (b_exp,) = ctx.saved_tensors
        return (grad * b_exp).nan_to_num_(0.0, 0.0, 0.0)  # exp 0 (b = -inf) times inf: no gradient


class _LogMatmul(torch.autograd.Function):
    """``c = log(exp(a) @ exp(b))`` for a prepared ``b`` (see :class:`LogOperand`):

        a[i, k] + b[k, j] = (a[i, k] + t[k] - x[i]) + (b[k, j] - t[k] - y[j]) + x[i] + y[j]

    with ``x[i] = max_k a[i, k] + t[k]``: both brackets are <= 0, so their exponentials
    multiply in a real matmul, and moving ``t[k]`` (the best of row k of ``b``) to the
    left balances the two sides split point by split point. (Shifting each side by its
    own max over k is not enough for CKY: a left child's score grows with the split
    point while the right child's shrinks, so ``max_k a + max_k b`` can sit hundreds of
    nats above every term.) Saves ``exp(a + t - x)``, the operand and ``c``."""

    @staticmethod
    def forward(ctx, a: Tensor, b_exp: Tensor, t: Tensor, y: Tensor) -> Tensor:
        a_exp = a + t.mT
        x = _max(a_exp, -1)
        a_exp.sub_(x).exp_()
        c = (a_exp @ b_exp).log_()  # log 0 = -inf
        lost = c < recompute_nats(c.dtype)  # underflowed, or too close to it to trust
        c.add_(x).add_(y)
        ctx.mark_non_differentiable(lost)
        ctx.set_materialize_grads(False)  # no zero tensor for the gradient of ``lost``
        ctx.save_for_backward(a_exp, b_exp, x, y, c)
        ctx.a_shape = a.shape
        return c, lost

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor | None, _lost) -> tuple:
        if grad is None:
            return None, None, None, None
        a_exp, b_exp, x, y, c = ctx.saved_tensors
        # dc[i, j] / da[i, k] = exp(a[i, k] + b[k, j] - c[i, j]) = a_exp[i, k] * b_exp[k, j] * exp(x[i] + y[j] - c[i, j]);
        # where c underflowed (-inf or subnormal) the last factor overflows: no gradient there
        w = (x - c).add_(y).exp_().mul_(grad).nan_to_num_(0.0, 0.0, 0.0)
        grad_a = _sum_to((w @ b_exp.mT).mul_(a_exp).nan_to_num_(0.0, 0.0, 0.0), ctx.a_shape)
        if b_exp.dim() == 2 and a_exp.dim() > 2:  # one shared right operand: fold the batch into rows
            grad_b = a_exp.reshape(-1, a_exp.shape[-1]).T @ w.reshape(-1, w.shape[-1])
        else:
            grad_b = _sum_to(a_exp.mT @ w, b_exp.shape)
        return grad_a, grad_b, None, None


def _sum_to(x: Tensor, shape: torch.Size) -> Tensor:
    """``x`` summed down to a broadcast ``shape`` (no operator when it already has it)."""
    return x if x.shape == shape else x.sum_to_size(shape)


class _LogSumExp(torch.autograd.Function):
    """``log sum_dim exp(x)`` shifted by the (finite) max; an all ``-inf`` slice gives
    ``-inf`` (log 0) and a zero gradient. The gradient is ``exp(x - out)`` times the
    incoming one: four operators, where autograd's chain through max, exp, sum and log
    takes about ten."""

    @staticmethod
    def forward(ctx, x: Tensor, dim: int) -> Tensor:
        m = _max(x, dim)
        out = (x - m).exp_().sum(dim, keepdim=True).log_().add_(m)  # all -inf: log 0 + 0
        ctx.save_for_backward(x, out)
        ctx.dim = dim
        return out.squeeze(dim)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple:
        x, out = ctx.saved_tensors
        # out = -inf (no finite term): -inf - -inf is NaN there, and that slice gets no gradient
        return (x - out).exp_().mul_(grad.unsqueeze(ctx.dim)).nan_to_num_(0.0, 0.0, 0.0), None


def recompute_nats(dtype: torch.dtype) -> float:
    """The log of the smallest shifted sum :meth:`LogSemiring.matmul` trusts: 0.7 of the
    log of the smallest normal number (-61 nats in float32, -496 in float64). A sum above
    it is made of terms whose factors are normal numbers, so it is exact to a few ulps."""
    return 0.7 * math.log(torch.finfo(dtype).tiny)


def _recompute(c: Tensor, lost: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``c`` with the ``lost`` entries replaced by ``logsumexp_k a[..., i, k] + b[..., k, j]``
    computed term by term (differentiable; the shifted product passes no gradient there)."""
    if not bool(lost.any()):
        return c
    # an entry with no finite term is exactly -inf already: only the others need the slow path
    # (a sparse grammar's chart is mostly such entries)
    terms = torch.matmul(torch.isfinite(a).to(c.dtype), torch.isfinite(b).to(c.dtype))
    idx = (lost & (terms > 0)).nonzero(as_tuple=True)
    if idx[0].numel() == 0:
        return c
    batch = c.shape[:-2]
    a = a.expand(*batch, *a.shape[-2:])
    b = b.expand(*batch, *b.shape[-2:])
    *bi, i, j = idx
    rows = a[(*bi, i)]  # (n, K)
    cols = b.mT[(*bi, j)]  # (n, K)
    return c.index_put(idx, LogSemiring.sum(rows + cols, -1))


# ---------------------------------------------------------------------- semirings
class Semiring:
    """The interface: ``zero``, ``one``, ``plus``, ``sum``, ``times``, ``matmul`` and
    ``prepare``. All ops broadcast like torch."""

    zero: float = LOG_ZERO
    one: float = 0.0

    @classmethod
    def plus(cls, a: Tensor, b: Tensor) -> Tensor:
        """Semiring addition of two tensors."""
        return cls.sum(torch.stack(torch.broadcast_tensors(a, b)), 0)

    @staticmethod
    def sum(x: Tensor, dim: int = -1) -> Tensor:
        """Semiring sum over ``dim`` (removed)."""
        raise NotImplementedError

    @staticmethod
    def times(a: Tensor, b: Tensor) -> Tensor:
        """Semiring product: ``a + b`` in both log-space semirings."""
        return a + b

    @staticmethod
    def matmul(a: Tensor, b) -> Tensor:
        """(..., I, K) x (..., K, J) -> (..., I, J): ``sum_k a[..., i, k] * b[..., k, j]``;
        ``b`` may be a tensor or ``prepare(tensor)``."""
        raise NotImplementedError

    @staticmethod
    def prepare(b: Tensor):
        """``b`` as a right operand of :meth:`matmul` for many products; slicing it
        slices the batch dims. (The identity unless a semiring has work to share.)"""
        return b


class LogSemiring(Semiring):
    """(logsumexp, +, -inf, 0): log partition functions; gradients are marginals."""

    @staticmethod
    def sum(x: Tensor, dim: int = -1) -> Tensor:
        """``logsumexp`` over ``dim``; an all ``-inf`` slice gives ``-inf`` and a zero
        gradient (``torch.logsumexp`` gives NaN there)."""
        return _LogSumExp.apply(x, dim)

    @staticmethod
    def matmul(a: Tensor, b: Tensor | LogOperand) -> Tensor:
        """``log sum_k exp(a[..., i, k] + b[..., k, j])`` by a real ``torch.matmul`` of
        shifted exponentials (never the (..., i, k, j) broadcast); all ``-inf`` rows or
        columns give ``-inf``, never NaN."""
        b = b if isinstance(b, LogOperand) else LogSemiring.prepare(b)
        c, lost = _LogMatmul.apply(a, b.exp, b.t, b.y)
        return _recompute(c, lost, a, b.raw)

    @staticmethod
    def prepare(b: Tensor) -> LogOperand:
        """``b`` exponentiated once (shifted into range) for many products."""
        return LogOperand(*_Exp.apply(b), b)


class MaxSemiring(Semiring):
    """(max, +, -inf, 0): best scores; gradients are 0/1 indicators of the argmax
    (ties go to the first maximum, so each max passes its gradient to one entry)."""

    @staticmethod
    def sum(x: Tensor, dim: int = -1) -> Tensor:
        """``max`` over ``dim``."""
        return x.max(dim).values

    @staticmethod
    def matmul(a: Tensor, b: Tensor) -> Tensor:
        """``max_k a[..., i, k] + b[..., k, j]``, materialising the (..., i, k, j)
        broadcast for a block of rows i at a time (at most ``MAX_CHUNK`` elements)."""
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        rows, k, j = a.shape[-2], a.shape[-1], b.shape[-1]
        step = max(1, MAX_CHUNK // max(1, math.prod(batch) * k * j))
        if rows == 0 or k == 0:
            fill = LOG_ZERO if k == 0 else 0.0
            return a.new_full((*batch, rows, j), fill)
        blocks = [
            (a[..., r : r + step, :, None] + b[..., None, :, :]).max(-2).values
            for r in range(0, rows, step)
        ]
        return torch.cat(blocks, -2)




def softmin(x: Tensor, dim: int, temperature: float) -> Tensor:
    """``-T logsumexp(-x / T)`` along ``dim``; the plain min when ``temperature == 0``."""
    if temperature == 0:
        return x.amin(dim)
    return -temperature * torch.logsumexp(-x / temperature, dim)


class SoftMinSemiring:
    """(soft-min_T, +, no-path, 0) over costs; ``temperature == 0`` is (min, +).

    An instance, since it carries its temperature: ``SoftMinSemiring(0.5).matmul(a, b)``.
    ``zero`` is the finite no-path cost ``-LOG_ZERO_FINITE``; results are clamped to it."""

    def __init__(self, temperature: float = 0.0):
        if not float(temperature) >= 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        self.temperature = float(temperature)
        self.zero = -LOG_ZERO_FINITE
        self.one = 0.0

    def __repr__(self) -> str:
        return f"SoftMinSemiring(temperature={self.temperature:g})"

    def sum(self, x: Tensor, dim: int = -1) -> Tensor:
        """Soft minimum over ``dim`` (removed), at most ``zero`` (T > 0; at T = 0 sums of
        no-path costs may exceed ``zero`` and still mean no path: compare with >=)."""
        if self.temperature == 0:
            return x.amin(dim)
        return softmin(x, dim, self.temperature).clamp(max=self.zero)

    def plus(self, a: Tensor, b: Tensor) -> Tensor:
        if self.temperature == 0:
            return torch.minimum(a, b)
        return self.sum(torch.stack(torch.broadcast_tensors(a, b)), 0)

    @staticmethod
    def times(a: Tensor, b: Tensor) -> Tensor:
        return a + b

    def matmul(self, a: Tensor, b: Tensor) -> Tensor:
        """(..., I, K) x (..., K, J) -> (..., I, J): ``⊕_k a[i, k] + b[k, j]`` (materialises
        the (..., I, K, J) broadcast: cost matrices here are automaton-sized)."""
        return self.sum(a.unsqueeze(-1) + b.unsqueeze(-3), -2)

    def star(self, a: Tensor) -> Tensor:
        """``I ⊕ a ⊕ a² ⊕ ... ⊕ a^(n-1)`` for an (n, n) matrix: every path of fewer than n
        steps, each counted once (all the shortest ones when T = 0)."""
        n = a.shape[-1]
        eye = torch.full_like(a, self.zero)
        eye.diagonal(dim1=-2, dim2=-1).fill_(0.0)
        if self.temperature == 0 and bool((a >= 0).all()):
            # (min, +) with non-negative costs: a path of n or more steps holds a cycle that
            # costs >= 0, so squaring (I ⊕ a) ceil(log2 n) times gives the same minima in
            # O(n^3 log n) instead of the n - 1 products' O(n^4)
            r = self.plus(eye, a)
            steps = 1
            while steps < n - 1:
                r = self.matmul(r, r)
                steps *= 2
            return r
        r = eye
        for _ in range(n - 1):
            r = self.plus(eye, self.matmul(r, a))
        return r


MIN_PLUS = SoftMinSemiring(0.0)  # the tropical semiring: exact shortest paths and edit distances

__all__ = ["LOG_ZERO", "LOG_ZERO_FINITE", "MIN_PLUS", "SoftMinSemiring", "LogOperand", "softmin", "LogSemiring", "MaxSemiring", "Semiring"]
