"""The inside algorithm for PCFGs in Chomsky normal form, batched and written once
over a semiring, and everything autograd builds on it: marginals, expected rule
counts, Viterbi parses, exact posterior samples and losses.

Potentials follow pytorch-struct's ``SentCFG`` (log-space scores; ``-inf`` = impossible):

* ``terms`` (B, L, T): preterminal ``t`` over token ``i``;
* ``rules`` (B, N, N+T, N+T): the rule ``A -> B C``; children index the N
  nonterminals first, then the T preterminals;
* ``roots`` (B, N): the root nonterminal.

A tree of an n-token sentence puts one preterminal over every token and a
nonterminal over every other node, so it has n - 1 binary nodes and every
nonterminal spans at least two tokens. Its score is the sum of its parts' scores and
``log Z = log sum_trees exp(score)``. A one-token (or empty) sentence has no tree:
``log Z = -inf`` (``SentCFG`` returns about ``-1e5`` there, its finite stand-in for
``-inf``). :func:`sentence_log_prob` adds a grammar's one-token and empty sentences.

Spans are written ``(i, j)`` with both ends included (pytorch-struct's convention):
tokens ``i..j``, ``j > i`` for a nonterminal. With ``lengths``, sentence ``b`` is
``tokens[:lengths[b]]`` and its root is the span ``(0, lengths[b] - 1)``; padded
positions never change its results (their potentials must not be NaN).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, NamedTuple, Sequence

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from neurosym.errors import NeurosymError
from neurosym.kernels import KERNELS, choose_kernel
from neurosym.semiring import LOG_ZERO, LogSemiring, MaxSemiring, Semiring

if TYPE_CHECKING:
    from neurosym.compile.pcfg import RuleTensors

SAMPLE_CHUNK = 2**24  # elements of (nodes, splits, N+T, N+T) scored at once when sampling


class Parse(NamedTuple):
    """A binary tree over ``len(tags)`` tokens: ``tags[i]`` is token i's preterminal
    (0..T-1); ``spans`` are its nonterminal nodes ``(i, j, A)`` (A in 0..N-1 covers
    tokens i..j, j > i) in pre-order, the root ``(0, n - 1, A)`` first."""

    spans: list[tuple[int, int, int]]
    tags: list[int]


class Marginals(NamedTuple):
    """Posterior marginals (gradients of ``log Z``) of a batch of sentences.

    Attributes:
        log_z: (B,) log partition.
        terms: (B, L, T) P(token i has preterminal t).
        rules: (B, N, N+T, N+T) expected number of uses of ``A -> B C``.
        roots: (B, N) P(root nonterminal is A).
        spans: (B, L, L, N) P(tokens i..j form a node labelled A); zero unless j > i.
    """

    log_z: Tensor
    terms: Tensor
    rules: Tensor
    roots: Tensor
    spans: Tensor


# ---------------------------------------------------------------------- the dynamic program
def _check(terms: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor | None) -> Tensor:
    """Validate shapes; return ``lengths`` as a (B,) long tensor (default: all L)."""
    if terms.dim() != 3 or rules.dim() != 4 or roots.dim() != 2:
        raise NeurosymError(f"expected terms (B, L, T), rules (B, N, N+T, N+T), roots (B, N); got {tuple(terms.shape)}, {tuple(rules.shape)}, {tuple(roots.shape)}")
    B, L, T = terms.shape
    N = roots.shape[1]
    if rules.shape != (B, N, N + T, N + T) or roots.shape[0] != B:
        raise NeurosymError(f"rules must be (B, N, N+T, N+T) = {(B, N, N + T, N + T)} and roots (B, N) = {(B, N)}; got {tuple(rules.shape)} and {tuple(roots.shape)}")
    if lengths is None:
        return torch.full((B,), L, dtype=torch.long, device=terms.device)
    lengths = torch.as_tensor(lengths, device=terms.device).long()
    if lengths.shape != (B,) or bool(((lengths < 0) | (lengths > L)).any()):
        raise NeurosymError(f"lengths must be (B,) = ({B},) integers in 0..{L}; got {lengths.tolist()}")
    return lengths


class _Rules(NamedTuple):
    """The rules as right operands of semiring matmuls, by the kinds of the children
    (nonterminal or preterminal); the parent A is always the last dim."""

    both_nt: Tensor  # (..., N*N, N)  [B C, A]
    both_pt: Tensor  # (..., T*T, N)  [B C, A]
    nt_pt: Tensor  # (..., T, N*N)  [C, B A]: left nonterminal B, right preterminal C
    pt_nt: Tensor  # (..., T, N*N)  [B, C A]: left preterminal B, right nonterminal C


def _split_rules(rules: Tensor, N: int) -> _Rules:
    """(B, N, S, S) -> :class:`_Rules`; a batch-shared tensor (stride 0, as from
    ``expand``) is split once, without the batch dim."""
    r = rules[0] if rules.shape[0] == 1 or rules.stride(0) == 0 else rules  # (..., A, B, C)
    nt, pt = slice(0, N), slice(N, None)
    return _Rules(
        both_nt=r[..., nt, nt].flatten(-2).mT,
        both_pt=r[..., pt, pt].flatten(-2).mT,
        nt_pt=r[..., nt, pt].permute(*range(r.dim() - 3), -1, -2, -3).flatten(-2),
        pt_nt=r[..., pt, nt].permute(*range(r.dim() - 3), -2, -1, -3).flatten(-2),
    )


def _operand_fields(op) -> list[Tensor]:
    """The tensors of a prepared right operand: a tensor, or a dataclass of tensors
    (:class:`~neurosym.semiring.LogOperand`)."""
    return [op] if isinstance(op, Tensor) else [getattr(op, f.name) for f in dataclasses.fields(op)]


def _operand(like, fields: list[Tensor]):
    """The prepared operand of ``like``'s kind made of ``fields``."""
    return fields[0] if isinstance(like, Tensor) else type(like)(*fields)


def _by_width(x: Tensor, w: int) -> Tensor:
    """The view (B, 2, n, ...) of ``x`` (B, 2, L, ...) for spans of width w (n = L - w + 1):
    ``[:, 0, i] = x[:, 0, i + w - 1]`` (the token at a span's end) and ``[:, 1, i] = x[:, 1, i]``
    (the token at its start)."""
    B, _, L = x.shape[:3]
    s = x.stride()
    return x.as_strided((B, 2, L - w + 1, *x.shape[3:]), (s[0], s[1] - (w - 1) * s[2], s[2], *s[3:]), x.storage_offset() + (w - 1) * s[2])


def _next_to_token(c: Tensor, w: int) -> Tensor:
    """The nonterminal child of every span of width w whose other child is one token,
    a view (B, 2, n, 1, N) of the chart ``c`` (B, L, L + 1, N): ``[:, 0, i]`` spans
    ``i .. i+w-2`` (the token is ``i+w-1``), ``[:, 1, i]`` spans ``i+1 .. i+w-1`` (the
    token is ``i``). The two halves overlap."""
    B, L, _, N = c.shape
    s = c.stride()
    return c.as_strided((B, 2, L - w + 1, 1, N), (s[0], s[1], s[1], s[3], s[3]), c.storage_offset() + (w - 1) * s[2])


def _children(c: Tensor, w: int) -> tuple[Tensor, Tensor]:
    """Both-nonterminal children of every span of width w, views (B, n, w-3, N) of the
    chart ``c`` (B, L, L + 1, N) with no copy: ``left[:, i, k-2]`` spans ``i .. i+k-1``
    and ``right[:, i, k-2]`` spans ``i+k .. i+w-1``, for the splits k = 2 .. w-2."""
    B, L, _, N = c.shape
    n = L - w + 1
    s = c.stride()
    right = c.as_strided((B, n, w - 3, N), (s[0], s[1], s[1] - s[2], s[3]), c.storage_offset() + 2 * s[1] + (w - 2) * s[2])
    return c[:, :n, 2 : w - 1], right


def _leaf(x: Tensor, grad: bool) -> Tensor:
    """``x`` detached, a leaf of a width's graph (requiring grad if ``grad``)."""
    return x.detach().requires_grad_(grad)


def _build(semiring: type[Semiring], terms: Tensor, rules: Tensor, grad_terms: bool, grad_rules: bool, grad: bool) -> tuple[Tensor, list, tuple]:
    """The chart (B, L, L + 1, N) of :class:`_Chart`; with a gradient wanted, also each
    width's graph ``(out, leaves)`` (leaves: detached views of the chart and of the
    prepared operands) and the graph before the loop, ``(terms, rules, width 2, token
    operand's tensors, rule operand's tensors)``. ``grad``: build the graphs (a gradient of
    the chart itself is wanted, if not of ``terms`` or ``rules``)."""
    B, L, T = terms.shape
    N = rules.shape[1]
    with torch.enable_grad() if grad else torch.no_grad():
        terms_in, rules_in = _leaf(terms, grad_terms), _leaf(rules, grad_rules)
        r = _split_rules(rules_in, N)
        # the tokens folded into the rules: [:, 0] a token right of a nonterminal, [:, 1] left of one
        folded = torch.stack([semiring.matmul(terms_in, x).unflatten(-1, (N, N)) for x in (r.nt_pt, r.pt_nt)], 1)  # (B, 2, L, N, N)
        token = semiring.prepare(folded)
        both_nt = semiring.prepare(r.both_nt)
        two_tokens = semiring.times(terms_in[:, :-1, :, None], terms_in[:, 1:, None, :]).flatten(-2)  # (B, L-1, T*T)
        width2 = semiring.matmul(two_tokens, r.both_pt)  # (B, L-1, N)
        chart = terms.new_full((B, L, L + 1, N), semiring.zero)
        chart[:, : L - 1, 2] = width2.detach()
        token_f = [_leaf(x, grad and x.requires_grad) for x in _operand_fields(token)]
        both_f = [_leaf(x, grad and x.requires_grad) for x in _operand_fields(both_nt)]
        steps = []
        for w in range(3, L + 1):
            n = L - w + 1
            near = _leaf(_next_to_token(chart, w), grad)
            tok = [_leaf(_by_width(x, w), x.requires_grad) for x in token_f]
            parts = [semiring.matmul(near, _operand(token, tok)).squeeze(-2)]  # (B, 2, n, N)
            leaves = [near, *tok]
            if w >= 4:
                left, right = (_leaf(x, grad) for x in _children(chart, w))
                pairs = semiring.matmul(left.mT, right)  # (B, n, N, N): summed over the split points
                parts.append(semiring.matmul(pairs.flatten(-2), _operand(both_nt, both_f))[:, None])  # (B, 1, n, N)
                leaves += [left, right, *both_f]
            out = semiring.sum(torch.cat(parts, 1), 1)  # (B, n, N)
            chart[:, :n, w] = out.detach()
            if grad:
                steps.append((out, leaves))
    return chart, steps, (terms_in, rules_in, width2, _operand_fields(token), _operand_fields(both_nt))


class _Chart(torch.autograd.Function):
    """The inside chart (B, L, L + 1, N): ``chart[:, i, w]`` scores the nonterminals of
    the span of width w >= 2 starting at token i (``semiring.zero`` elsewhere), as one
    autograd node. The forward keeps each width's small graph, built on detached views
    of the chart; the backward runs them from the widest span down, adding each one's
    gradients into one chart-shaped buffer through the same views (one operator per
    child view), where autograd over slices of a growing chart zero-pads and adds a
    full gradient per slice read. The backward frees the width graphs as it goes; a
    second backward through a retained graph rebuilds them from the saved inputs.
    ``probe`` (or None) is never read: its gradient is the chart's (``marginals``'s spans)."""

    @staticmethod
    def forward(ctx, semiring: type[Semiring], terms: Tensor, rules: Tensor, probe: Tensor | None) -> Tensor:
        chart, steps, prep = _build(semiring, terms, rules, ctx.needs_input_grad[1], ctx.needs_input_grad[2], any(ctx.needs_input_grad))
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(terms, rules)
            ctx.semiring, ctx.steps, ctx.prep = semiring, steps, prep
        return chart

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_chart: Tensor) -> tuple:
        g = grad_chart.contiguous().clone()  # d(out)/d(chart), completed width by width from the widest
        B, L, _, N = g.shape
        if ctx.steps is None:  # a second backward through a retained graph
            terms, rules = ctx.saved_tensors
            ctx.steps, ctx.prep = _build(ctx.semiring, terms, rules, ctx.needs_input_grad[1], ctx.needs_input_grad[2], True)[1:]
        steps, (terms_in, rules_in, width2, token_f, both_f) = ctx.steps, ctx.prep
        ctx.steps = ctx.prep = None  # freed as the backward goes
        g_token: list[Tensor | None] = [None] * len(token_f)
        g_both: list[Tensor | None] = [None] * len(both_f)
        for w in range(L, 2, -1):
            out, leaves = steps[w - 3]
            steps[w - 3] = None
            n = L - w + 1
            want = [x for x in leaves if x.requires_grad]
            got = dict(zip(map(id, want), torch.autograd.grad(out, want, g[:, :n, w], allow_unused=True)))
            near, tok = leaves[0], leaves[1 : 1 + len(token_f)]
            if got.get(id(near)) is not None:
                gn = got[id(near)][:, :, :, 0]
                g[:, :n, w - 1].add_(gn[:, 0])
                g[:, 1 : n + 1, w - 1].add_(gn[:, 1])
            for f, x in enumerate(tok):
                if got.get(id(x)) is not None:
                    if g_token[f] is None:
                        g_token[f] = torch.zeros_like(token_f[f])
                    _by_width(g_token[f], w).add_(got[id(x)])
            if w >= 4:
                left, right, *both = leaves[1 + len(token_f) :]
                for view, x in zip(_children(g, w), (left, right)):
                    if got.get(id(x)) is not None:
                        view.add_(got[id(x)])
                for f, x in enumerate(both):
                    gx = got.get(id(x))
                    if gx is not None:
                        g_both[f] = gx if g_both[f] is None else g_both[f].add_(gx)
        outs, grads = [width2], [g[:, : L - 1, 2]]
        for fields, gs in ((token_f, g_token), (both_f, g_both)):
            outs += [x for x, gx in zip(fields, gs) if gx is not None]
            grads += [gx for gx in gs if gx is not None]
        want = [x for x in (terms_in, rules_in) if x.requires_grad]
        got = dict(zip(map(id, want), torch.autograd.grad(outs, want, grads, allow_unused=True))) if want else {}
        return None, got.get(id(terms_in)), got.get(id(rules_in)), g if ctx.needs_input_grad[3] else None


def _chart(terms: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor, semiring: type[Semiring], probe: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """log Z (B,) and the chart (B, L, L + 1, N): ``chart[:, i, w]`` scores the
    nonterminals of the span of width w >= 2 starting at token i (``semiring.zero`` for
    widths 0 and 1 and past the end). ``probe`` (B, L, L + 1, N) zeros, if given, gets
    the chart's gradient.

    A span of width w splits after its first k tokens (k = 1 .. w-1); a child of one
    token is a preterminal, a longer one a nonterminal. For every span of a width at
    once, in the semiring:

    * both children nonterminals (k = 2 .. w-2): the children at all split points are
      strided views of the chart, left and right (B, spans, splits, N); one batched
      matmul sums over split points, (B, spans, N, splits) x (B, spans, splits, N) ->
      (B, spans, N, N) pairs, and another contracts the pairs with the rules,
      (B, spans, N*N) x (N*N, N);
    * a nonterminal next to a single token (k = w-1 or k = 1): the token's terms are
      folded into the rules once per position, (B, L, T) x (T, N*N), leaving one
      vector-matrix product per span and side, (B, 2, spans, 1, N) x (B, 2, spans, N, N);
    * two tokens (w = 2): (B, L-1, T*T) x (T*T, N)."""
    B = terms.shape[0]
    chart = _Chart.apply(semiring, terms, rules, probe)
    top = chart[torch.arange(B, device=terms.device), 0, lengths]  # (B, N); lengths 0 and 1 read the zero columns
    return semiring.sum(semiring.times(roots, top), -1), chart


@functools.cache
def _kernel_module():
    """neurosym.layers.inside_kernel, or None when triton does not import (tried once)."""
    try:
        from neurosym.layers import inside_kernel  # lazy: triton is optional and heavy
    except ImportError:
        return None
    return inside_kernel


def resolve_kernel(kernel: str, device: torch.device | str, semiring: type[Semiring] = LogSemiring) -> str:
    """The implementation :func:`inside` runs for ``kernel`` (one of :data:`KERNELS`) on
    tensors of ``device`` in ``semiring``: ``"torch"`` or ``"triton"``
    (:func:`~neurosym.kernels.choose_kernel`; the Triton kernels compute log Z only, so
    another semiring runs the torch path, and ``triton`` with it is a :class:`NeurosymError`)."""
    unsupported = None if semiring is LogSemiring else f"computes log Z (LogSemiring), not {semiring.__name__}"
    return choose_kernel(kernel, device, _kernel_module, "inside", unsupported)


def inside(terms: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor | None = None, semiring: type[Semiring] = LogSemiring,
           kernel: str = "torch") -> Tensor:
    """The semiring sum over binary trees of each sentence: (B,).

    Args:
        terms: (B, L, T) preterminal scores.
        rules: (B, N, N+T, N+T) rule scores (an ``expand``-ed shared tensor is used
            without copies).
        roots: (B, N) root scores.
        lengths: (B,) sentence lengths (default: all L).
        semiring: :class:`LogSemiring` (log Z) or :class:`MaxSemiring` (best score).
        kernel: the implementation (:func:`resolve_kernel`): ``"torch"``, the chart of
            batched semiring operators below (any semiring, any device); ``"triton"``, the
            log semiring's pass as Triton kernels, one launch per span width forward and
            one backward (:mod:`neurosym.layers.inside_kernel`); ``"auto"``, Triton for
            :class:`LogSemiring` on CUDA when triton imports, else torch. The default is
            ``"torch"`` until the kernels have been timed on a GPU (issue 30); on the CPU
            ``auto`` is always torch. :func:`marginals`, :func:`viterbi` and
            :func:`sample_parses` always run the torch path.

    Sentences of fewer than 2 tokens have no tree and give ``semiring.zero`` (-inf).
    Differentiable: gradients of ``log Z`` are marginals, those of the max score the
    best tree's indicators (see :func:`marginals`, :func:`viterbi`)."""
    lengths = _check(terms, rules, roots, lengths)
    if terms.shape[1] < 2:
        return terms.new_full((terms.shape[0],), semiring.zero)
    if resolve_kernel(kernel, terms.device, semiring) == "triton":
        return _kernel_module().log_partition(terms, rules, roots, lengths)
    return _chart(terms, rules, roots, lengths, semiring)[0]


# ---------------------------------------------------------------------- by autograd
def _parts(terms: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor | None, semiring: type[Semiring]) -> Marginals:
    """Differentiate the semiring sum (of the sentences where it is finite) with
    respect to every part, on detached copies: marginals (log) or indicators (max)."""
    lengths = _check(terms, rules, roots, lengths)
    B, L, T = terms.shape
    N = roots.shape[1]
    with torch.enable_grad():
        # contiguous: a batch-shared ``rules`` gets its own copy per sentence, so rule counts are per sentence
        terms, rules, roots = (x.detach().contiguous().requires_grad_() for x in (terms, rules, roots))
        probe = terms.new_zeros(B, L, L + 1, N).requires_grad_()  # its gradient: the chart's
        if L < 2:
            log_z = terms.new_full((B,), semiring.zero)
        else:
            log_z = _chart(terms, rules, roots, lengths, semiring, probe)[0]
        finite = torch.isfinite(log_z)
        objective = torch.where(finite, log_z, torch.zeros_like(log_z)).sum()
        grads = torch.autograd.grad(objective, [terms, rules, roots, probe], allow_unused=True) if finite.any() else [None] * 4
    g_terms, g_rules, g_roots = (torch.zeros_like(x) if g is None else g for x, g in zip((terms, rules, roots), grads))
    spans = terms.new_zeros(B, L, L, N)
    if grads[3] is not None:
        for w in range(2, L + 1):
            spans.diagonal(w - 1, 1, 2).copy_(grads[3][:, : L - w + 1, w].mT)  # span (i, i + w - 1)
    return Marginals(log_z.detach(), g_terms, g_rules, g_roots, spans)


def marginals(terms: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor | None = None) -> Marginals:
    """Posterior marginals of terms (B, L, T), rules (B, N, N+T, N+T), roots (B, N) and
    spans (B, L, L, N), as the gradients of ``log Z`` (inside-outside by backprop).
    Results are detached; sentences without a tree get zeros."""
    return _parts(terms, rules, roots, lengths, LogSemiring)


def expected_rule_counts(terms: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor | None = None) -> Tensor:
    """(B, N, N+T, N+T): expected number of uses of each rule ``A -> B C`` per sentence."""
    return marginals(terms, rules, roots, lengths).rules


def _parse_from_indicators(spans: Tensor, terms: Tensor, n: int) -> Parse:
    """The tree behind 0/1 indicators: spans (L, L, N) and terms (L, T)."""
    nodes = sorted(((i, j, a) for i, j, a in torch.nonzero(spans > 0.5).tolist()), key=lambda s: (s[0], -s[1]))
    return Parse(nodes, terms[:n].argmax(-1).tolist())


def viterbi(terms: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, list[Parse | None]]:
    """The best tree of each sentence: its score (B,) (detached; differentiate
    ``inside(..., semiring=MaxSemiring)`` for a differentiable one) and the tree,
    read off the gradient of the max score (``None`` where no tree exists)."""
    best = _parts(terms, rules, roots, lengths, MaxSemiring)
    n = _check(terms, rules, roots, lengths).tolist()
    parses = [
        _parse_from_indicators(best.spans[b], best.terms[b], n[b]) if torch.isfinite(best.log_z[b]) else None
        for b in range(terms.shape[0])
    ]
    return best.log_z, parses


# ---------------------------------------------------------------------- sampling
def sample_parses(
    terms: Tensor,
    rules: Tensor,
    roots: Tensor,
    lengths: Tensor | None = None,
    n: int = 1,
    generator: torch.Generator | None = None,
) -> list[list[Parse | None]]:
    """``n`` trees per sentence from the posterior ``exp(score - log Z)``: ``out[b][s]``.

    Top-down from the inside chart: draw the root label, then for every open node
    ``(i, j, A)`` draw (split, B, C) with probability proportional to
    ``exp(rules[A, B, C] + inside(left, B) + inside(right, C))``; all open nodes of all
    samples are drawn together, level by level. ``None`` where no tree exists."""
    lengths = _check(terms, rules, roots, lengths)
    B, L, T = terms.shape
    N, S = roots.shape[1], roots.shape[1] + T
    if L < 2:
        return [[None] * n for _ in range(B)]
    with torch.no_grad():
        log_z, chart = _chart(terms, rules, roots, lengths, LogSemiring)
        dense = terms.new_full((B, L, L, S), LOG_ZERO)  # dense[b, i, j]: span (i, j), nonterminals then preterminals
        dense.diagonal(0, 1, 2)[:, N:] = terms.mT
        for w in range(2, L + 1):
            dense.diagonal(w - 1, 1, 2)[:, :N] = chart[:, : L - w + 1, w].mT
        ok = torch.isfinite(log_z) & (lengths >= 2)
        sent = torch.arange(B, device=terms.device).repeat_interleave(n)[ok.repeat_interleave(n)]
        owner = torch.arange(B * n, device=terms.device)[ok.repeat_interleave(n)]
        last = lengths[sent] - 1
        root_scores = roots[sent] + dense[sent, 0, last, :N]
        label = torch.multinomial(torch.softmax(root_scores, -1), 1, generator=generator)[:, 0]
        nodes = [[] for _ in range(B * n)]
        tags = [[0] * int(lengths[b]) for b in range(B) for _ in range(n)]
        frontier = (owner, sent, torch.zeros_like(sent), last, label)
        while frontier[0].numel():
            frontier = _expand(frontier, dense, rules, nodes, tags, N, generator)
    out = [[None] * n for _ in range(B)]
    for s in range(B * n):
        if ok[s // n]:
            out[s // n][s % n] = Parse(sorted(nodes[s], key=lambda x: (x[0], -x[1])), tags[s])
    return out


def _expand(frontier, dense: Tensor, rules: Tensor, nodes: list, tags: list, N: int, generator) -> tuple[Tensor, ...]:
    """Draw (split, left label, right label) for every open node; record the nodes and
    the preterminals; return the children that are open nodes."""
    owner, sent, i, j, label = frontier  # (M,) each: sample, sentence, first and last token, nonterminal
    for sample, node in zip(owner.tolist(), zip(i.tolist(), j.tolist(), label.tolist())):
        nodes[sample].append(node)
    S = dense.shape[-1]
    K = int((j - i).max())  # splits: left child i .. i+k-1, right child i+k .. j, k = 1 .. K
    step = max(1, SAMPLE_CHUNK // (K * S * S))
    picks = [
        _draw_splits(dense, rules, sent[r : r + step], i[r : r + step], j[r : r + step], label[r : r + step], K, generator)
        for r in range(0, len(sent), step)
    ]
    k, left, right = (torch.cat(x) for x in zip(*picks))
    children = []
    for start, end, sym in ((i, i + k - 1, left), (i + k, j, right)):
        leaf = start == end
        for sample, token, tag in zip(owner[leaf].tolist(), start[leaf].tolist(), (sym[leaf] - N).tolist()):
            tags[sample][token] = tag
        children.append(tuple(x[~leaf] for x in (owner, sent, start, end, sym)))
    return tuple(torch.cat(x) for x in zip(*children))


def _draw_splits(dense: Tensor, rules: Tensor, sent: Tensor, i: Tensor, j: Tensor, label: Tensor, K: int, generator) -> tuple[Tensor, Tensor, Tensor]:
    """For nodes ``(i, j, label)`` of sentences ``sent`` (M,): draw split k (1..j-i) and
    child labels (M,) each from ``rules[label, B, C] + in(i, i+k-1, B) + in(i+k, j, C)``."""
    S = dense.shape[-1]
    k = torch.arange(1, K + 1, device=dense.device)
    valid = k[None, :] <= (j - i)[:, None]  # (M, K)
    mid = torch.minimum(i[:, None] + k[None, :], j[:, None])  # first token of the right child
    left = dense[sent[:, None], i[:, None], mid - 1]  # (M, K, S)
    right = dense[sent[:, None], mid, j[:, None]]
    scores = left[:, :, :, None] + right[:, :, None, :] + rules[sent, label][:, None]  # (M, K, S, S)
    scores = scores.masked_fill(~valid[:, :, None, None], LOG_ZERO).flatten(1)
    pick = torch.multinomial(torch.softmax(scores, -1), 1, generator=generator)[:, 0]
    return pick // (S * S) + 1, pick // S % S, pick % S


# ---------------------------------------------------------------------- trees and losses
def tree_parts(parse: Parse, N: int) -> tuple[int, list[tuple[int, int, int]], list[int]]:
    """The root label, the rules ``(A, B, C)`` (children coded as in ``rules``:
    preterminal t is N + t) and the tags of a tree; raises :class:`NeurosymError` if
    ``parse`` is not a binary tree over its tokens."""
    n = len(parse.tags)
    label = {}
    for i, j, a in parse.spans:
        if not (0 <= i < j < n) or (i, j) in label:
            raise NeurosymError(f"bad or repeated span ({i}, {j}) in a tree over {n} tokens")
        label[i, j] = a
    if (0, n - 1) not in label:
        raise NeurosymError(f"a tree over {n} tokens needs a root span (0, {n - 1}) (one-token sentences have no tree)")
    found: list[tuple[int, int, int]] = []
    stack = [(0, n - 1)]
    while stack:
        i, j = stack.pop()
        k = next((k for k in range(j - 1, i, -1) if (i, k) in label), i)  # left child ends at k
        if k + 1 < j and (k + 1, j) not in label:
            raise NeurosymError(f"span ({i}, {j}) has left child ({i}, {k}) but no right child ({k + 1}, {j})")
        code = [label[c] if c in label else N + parse.tags[c[0]] for c in ((i, k), (k + 1, j))]
        found.append((label[i, j], *code))
        stack += [c for c in ((k + 1, j), (i, k)) if c[0] < c[1]]
    if len(found) != len(label):
        raise NeurosymError(f"{len(label) - len(found)} span(s) of the tree are not nodes of one binary tree (crossing or nested wrongly)")
    return label[0, n - 1], found, list(parse.tags)


def tree_score(terms: Tensor, rules: Tensor, roots: Tensor, trees: Sequence[Parse]) -> Tensor:
    """(B,) the score of one given tree per sentence: root + rules + terms. Differentiable."""
    B, L, T = terms.shape
    N = roots.shape[1]
    if len(trees) != B:
        raise NeurosymError(f"expected {B} trees, got {len(trees)}")
    rb, ra, rl, rr, tb, ti, tt, root = [], [], [], [], [], [], [], []
    for b, tree in enumerate(trees):
        top, found, tags = tree_parts(tree, N)
        if len(tags) > L or not all(0 <= t < T for t in tags) or not all(0 <= a < N for a, _, _ in found):
            raise NeurosymError(f"tree {b}: labels must be nonterminals 0..{N - 1} and tags preterminals 0..{T - 1} over at most {L} tokens")
        root.append(top)
        for a, left, right in found:
            rb.append(b), ra.append(a), rl.append(left), rr.append(right)
        tb += [b] * len(tags)
        ti += range(len(tags))
        tt += tags
    dev = terms.device
    ix = lambda x: torch.tensor(x, dtype=torch.long, device=dev)  # noqa: E731
    score = roots[torch.arange(B, device=dev), ix(root)]
    score = score.index_add(0, ix(rb), rules[ix(rb), ix(ra), ix(rl), ix(rr)])
    return score.index_add(0, ix(tb), terms[ix(tb), ix(ti), ix(tt)])


def nll_unsupervised(terms: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor | None = None) -> Tensor:
    """(B,) ``-log Z``: for a normalised grammar, ``-log p(sentence)`` summed over trees."""
    return -inside(terms, rules, roots, lengths)


def nll_supervised(terms: Tensor, rules: Tensor, roots: Tensor, trees: Sequence[Parse], lengths: Tensor | None = None) -> Tensor:
    """(B,) ``log Z - score(gold tree)`` = ``-log p(tree | sentence)`` (a CRF loss);
    each tree must cover its sentence (``len(tree.tags) == lengths[b]``)."""
    n = _check(terms, rules, roots, lengths).tolist()
    for b, tree in enumerate(trees):
        if len(tree.tags) != n[b]:
            raise NeurosymError(f"tree {b} has {len(tree.tags)} tags for a sentence of {n[b]} tokens")
    return inside(terms, rules, roots, lengths) - tree_score(terms, rules, roots, trees)


# ---------------------------------------------------------------------- grammars
def sentence_log_prob(rules: "RuleTensors", ids: Tensor, lengths: Tensor | None = None) -> Tensor:
    """(B,) ``log P(sentence)`` under a compiled PCFG for token ids (B, L), counting
    every sentence length: the inside pass for >= 2 tokens, ``root_term`` for one token
    and ``empty`` for none. Positions at or after ``lengths[b]`` are ignored."""
    ids = torch.as_tensor(ids, device=rules.binary.device).long()
    if ids.dim() != 2:
        raise NeurosymError(f"ids must be (B, L); got {tuple(ids.shape)}")
    B, L = ids.shape
    lengths = torch.full((B,), L, dtype=torch.long, device=ids.device) if lengths is None else torch.as_tensor(lengths, device=ids.device).long()
    ids = torch.where(torch.arange(L, device=ids.device) < lengths[:, None], ids, torch.zeros_like(ids))
    terms, binary, roots = rules.potentials(ids)
    longer = inside(terms, binary, roots, lengths)
    empty = rules.empty.expand(B)
    if L == 0:
        return empty.clone()
    one = LogSemiring.sum(rules.root_term + terms[:, 0], -1)
    return torch.where(lengths == 0, empty, torch.where(lengths == 1, one, longer))


__all__ = [
    "KERNELS",
    "Marginals",
    "Parse",
    "expected_rule_counts",
    "inside",
    "marginals",
    "nll_supervised",
    "nll_unsupervised",
    "resolve_kernel",
    "sample_parses",
    "sentence_log_prob",
    "tree_parts",
    "tree_score",
    "viterbi",
]
