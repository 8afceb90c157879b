"""Exact prefix probabilities of a PCFG, left to right, one token at a time.

For a prefix ``w_1..w_k`` of a compiled grammar (:class:`RuleTensors`, in CNF):

* ``P(w_1..w_k ...)``: the total probability of the sentences that start with it;
* ``P(w_1..w_k)``: the probability that the prefix is a whole sentence;
* ``P(w_1..w_k v ...)`` for every token ``v`` at once;

so that ``P(v | prefix) = P(prefix v ...) / P(prefix ...)`` and ``P(end | prefix) =
P(prefix) / P(prefix ...)``. This is Jelinek & Lafferty's (1991) computation, run
forward: positions ``0..k`` are fence posts, span ``[i, j)`` covers tokens ``i..j-1``,
and symbols are coded as in ``RuleTensors`` (N nonterminals, then T preterminals):

* inside ``β[i, j, X]``: the weight of ``X`` deriving exactly the tokens of ``[i, j)``
  (a preterminal spans one token, a nonterminal two or more);
* forward ``O[i, X]``: the weight of every partial derivation whose yield begins with
  the tokens before ``i``, in which a node ``X`` starts at ``i``; each node waiting to the
  right of that path counts with its partition function ``Z`` (all its completions).

A new token ``w`` at position ``k - 1`` costs the chart column of spans ending at ``k``:

1. ``β[k-1, k, t] = emit[t, w]``; then ``β[i, k, A] = ⊕_{A -> B C} p · β[i, m, B] β[m, k, C]``
   over split points ``m``, right children first (``m = k-1, k-2, .., 1``; each step is
   one batched operation over every ``i < m``);
2. predictions ``s[X] = ⊕_{i < k, A -> B X} O[i, A] p β[i, k, B]`` (a left child ``B``
   ends at ``k``, its sibling ``X`` starts there);
3. ``O[k] = s ⊗ K``, where ``K`` closes left corners once for the grammar: a node
   ``A`` at ``k`` has its left child at ``k`` too, ``L[A, X] = ⊕_C p(A -> X C) Z_C``,
   ``L* = (I - L_NN)^-1`` (``compile.closure.sparse_star``), ``K = [[L*, L* L_NT], [0, I]]``.

Then ``P(prefix ...) = ⊕_t O[k-1, t] emit[t, w]``, ``P(prefix v ...) = ⊕_t O[k, t]
emit[t, v]`` (all ``v`` at once, through the preterminals) and ``P(prefix) = root ·
β[0, k]`` (``root_term``, ``empty`` for one and no token).

Everything is in log space (``-inf`` = impossible, kept exact: no underflow decides
whether a token is possible). Rules are used as lists grouped by the symbol they
produce (padded with ``-inf``), so a sparse grammar costs its rules, not ``N·S²``.
The weights ``Z`` make the results exact for deficient (inconsistent) grammars too:
``P(prefix ...)`` is then the weight of the finite derivations, and conditionals are
those of the renormalised grammar. Not differentiable (the chart is written in place).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from neurosym.compile.closure import least_fixed_point, sparse_star
from neurosym.errors import CompileError, NeurosymError
from neurosym.semiring import LOG_ZERO

if TYPE_CHECKING:
    from neurosym.compile.pcfg import RuleTensors

START_CAPACITY = 8  # chart positions allocated at first; doubled when full


# ---------------------------------------------------------------------- the grammar, prepared once
@dataclass(frozen=True)
class PrefixGrammar:
    """A PCFG prepared for prefix probabilities (log space, one dtype and device).

    Attributes:
        N, T, V: nonterminals, preterminals, tokens; symbols ``S = N + T``.
        root (N,), root_term (T,), empty (): the start weights of ``RuleTensors``.
        emit_by_token: (V, T) ``emit.T``: the preterminals' weights for a token.
        log_z: (S,) log partition function of every symbol (0 for a consistent grammar).
        log_total: () log of the grammar's total weight (0 when normalised and consistent).
        closure: (S, S) ``K``: a symbol predicted at a position -> the nodes starting there.
        pt_rules: (D, N) triples ``(left, right, log p)``: column A lists the rules of
            parent A whose right child is a preterminal (``left``, ``right`` index symbols;
            padding has ``log p = -inf``); ``nt_rules`` the same for a nonterminal right child.
        by_sibling: (D, S) triples ``(parent, left, log p)`` of the rules producing each
            right child.
        by_token: (D, V) pairs ``(preterminal, log p)`` emitting each token.
    """

    N: int
    T: int
    V: int
    root: Tensor
    root_term: Tensor
    empty: Tensor
    emit_by_token: Tensor
    log_z: Tensor
    log_total: Tensor
    closure: Tensor
    pt_rules: tuple[Tensor, Tensor, Tensor]
    nt_rules: tuple[Tensor, Tensor, Tensor]
    by_sibling: tuple[Tensor, Tensor, Tensor]
    by_token: tuple[Tensor, Tensor]

    @property
    def dtype(self) -> torch.dtype:
        return self.root.dtype

    @property
    def device(self) -> torch.device:
        return self.root.device

    @classmethod
    def from_rules(cls, rules: "RuleTensors", dtype: torch.dtype = torch.float64) -> "PrefixGrammar":
        """Prepare compiled rule tensors: partition functions, the left-corner closure
        and the rule lists. Raises :class:`NeurosymError` for NaN or ``+inf`` weights, and
        for weights whose total diverges (unnormalised rules with no finite sum)."""
        if dtype not in (torch.float32, torch.float64):
            raise NeurosymError(f"prefix probabilities run in float32 or float64, not {dtype}")
        device = rules.binary.device
        N, T = rules.N, rules.T
        S = N + T
        arrays = {k: getattr(rules, k).detach().to("cpu", torch.float64).numpy() for k in ("root", "binary", "emit", "root_term", "empty")}
        for name, x in arrays.items():
            if np.isnan(x).any() or np.isposinf(x).any():
                raise NeurosymError(f"RuleTensors.{name} holds NaN or +inf; log weights must be finite or -inf")
        emit = arrays["emit"]
        V = emit.shape[1]
        a, b, c = np.nonzero(np.isfinite(arrays["binary"]))
        p = np.exp(arrays["binary"][a, b, c])
        z_t = np.exp(emit).sum(1)
        z = _partition(N, z_t, a, b, c, p)
        live = (z > 0)[a] & (z > 0)[b] & (z > 0)[c]  # a rule with a child of no finite derivation is never used
        a, b, c, p = a[live], b[live], c[live], p[live]
        closure = _closure(N, T, z, a, b, c, p)
        with np.errstate(divide="ignore"):
            lp, log_z = np.log(p), np.log(z)
            root = np.where(z[:N] > 0, arrays["root"], -np.inf)
            total = np.logaddexp.reduce(np.concatenate([[float(arrays["empty"])], root + log_z[:N], arrays["root_term"] + log_z[N:]]))
            log_closure = np.log(closure)
        pt, nt = c >= N, c < N
        t_idx, v_idx = np.nonzero(np.isfinite(emit))

        def tensor(x, integer=False) -> Tensor:
            return torch.as_tensor(np.asarray(x), dtype=torch.long if integer else dtype, device=device)

        def table(groups, n, *cols) -> tuple[Tensor, ...]:  # (D, n) each: reductions run over a leading dim
            idx, logp = _padded(groups, n, cols[:-1], cols[-1])
            return (*(tensor(i.T.copy(), True) for i in idx), tensor(logp.T.copy()))

        return cls(
            N=N,
            T=T,
            V=V,
            root=tensor(root),
            root_term=tensor(arrays["root_term"]),
            empty=tensor(arrays["empty"]),
            emit_by_token=tensor(emit.T.copy()),
            log_z=tensor(log_z),
            log_total=tensor(total),
            closure=tensor(log_closure),
            pt_rules=table(a[pt], N, b[pt], c[pt], lp[pt]),
            nt_rules=table(a[nt], N, b[nt], c[nt], lp[nt]),
            by_sibling=table(c, S, a, b, lp),
            by_token=table(v_idx, V, t_idx, emit[t_idx, v_idx]),
        )

    def to(self, device: torch.device | str) -> "PrefixGrammar":
        """The same grammar on another device."""
        moved = {}
        for f in fields(self):
            x = getattr(self, f.name)
            if isinstance(x, Tensor):
                moved[f.name] = x.to(device)
            elif isinstance(x, tuple):
                moved[f.name] = tuple(t.to(device) for t in x)
        return replace(self, **moved)


def _padded(groups: np.ndarray, n: int, index_cols: tuple, logp: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Entries grouped by ``groups`` (values in 0..n-1) as (n, D) arrays, ``D`` the largest
    group (at least 1); padding has index 0 and ``log p = -inf``."""
    order = np.argsort(groups, kind="stable")
    g = groups[order]
    counts = np.bincount(g, minlength=n)
    D = max(1, int(counts.max(initial=0)))
    rank = np.arange(len(g)) - np.repeat(np.cumsum(counts) - counts, counts)
    idx = [np.zeros((n, D), dtype=np.int64) for _ in index_cols]
    out = np.full((n, D), -np.inf)
    for dst, src in zip(idx, index_cols):
        dst[g, rank] = np.asarray(src)[order]
    out[g, rank] = logp[order]
    return idx, out


def _partition(N: int, z_t: np.ndarray, a, b, c, p) -> np.ndarray:
    """(S,) partition functions: ``z_t`` for preterminals; for nonterminals the least
    solution of ``Z_A = sum p Z_B Z_C`` (:func:`neurosym.compile.closure.least_fixed_point`).
    Exactly 0 for a nonterminal with no finite derivation."""
    z = least_fixed_point(N, a, b, c, p, z_t)
    if z is None:
        raise NeurosymError(
            "the grammar's total weight diverges (its rules' weights have no finite partition function); "
            "prefix probabilities need normalised (or at least summable) rule weights"
        )
    return np.concatenate([z, z_t])


def _closure(N: int, T: int, z: np.ndarray, a, b, c, p) -> np.ndarray:
    """(S, S) ``K``: ``K[A, X]`` the weight of node ``X`` starting where a predicted
    ``A`` starts (a chain of left children, their right siblings weighted by ``Z``);
    ``K[t, t] = 1``. The star ``L* = (I - L_NN)^-1`` is
    :func:`neurosym.compile.closure.sparse_star`. Entries with no such chain are exactly
    0, the others at least the smallest normal float, whatever the rounding."""
    S = N + T
    L = np.zeros((N, S))
    np.add.at(L, (a, b), p * z[c])
    rows, cols = np.nonzero(L[:, :N])
    try:
        star = sparse_star(dict(zip(zip(rows.tolist(), cols.tolist()), L[rows, cols].tolist())), N, "")
    except CompileError:
        raise NeurosymError(
            "the grammar's left-corner chains do not converge (spectral radius of the left-corner matrix >= 1); "
            "its rule weights are not summable"
        ) from None
    K = np.zeros((S, S))
    K[:N, :N] = star.toarray()
    K[:N, N:] = star @ L[:, N:]
    K[N:, N:] = np.eye(T)
    reach = np.zeros((S, S), dtype=bool)  # the chains: star's pattern, then one left corner into a preterminal
    reach[:N, :N] = K[:N, :N] != 0
    reach[:N, N:] = (reach[:N, :N].astype(np.float64) @ (L[:, N:] > 0)) > 0
    reach[N:, N:] = np.eye(T, dtype=bool)
    return np.where(reach, np.maximum(K, np.finfo(np.float64).tiny), 0.0)


# ---------------------------------------------------------------------- the chart, one column per token
class PrefixState:
    """Prefix probabilities of a batch of B rows, extended one token at a time.

    ``append(tokens)`` adds, for every row that takes a token, the chart column of its
    new position (cost: the spans that end there). Rows may skip steps (``skip``) and
    so hold prefixes of different lengths; each row's column is read and written by
    its own index. A row whose prefix became impossible stays so (all its results are
    ``-inf``).

    Attributes (log space):
        prefix_log_prob: (B,) ``log P(prefix ...)``.
        sentence_log_prob: (B,) ``log P(prefix)``: the prefix as a whole sentence.
        next_preterminal: (B, T) ``log`` of the weight of the prefix followed by a node
            of preterminal ``t``; ``next_log_prob()`` contracts it with ``emit``.
        length: (B,) tokens appended to each row.
    """

    def __init__(self, grammar: PrefixGrammar, batch_size: int, device: torch.device | str | None = None):
        device = torch.device(device) if device is not None else grammar.device
        self.grammar = grammar if device == grammar.device else grammar.to(device)
        g = self.grammar
        B, S = batch_size, g.N + g.T
        cap = START_CAPACITY
        self.chart = torch.full((B, cap + 1, cap + 1, S), LOG_ZERO, dtype=g.dtype, device=device)  # [b, j, w]: span [j - w, j)
        self.forward = torch.full((B, cap + 1, S), LOG_ZERO, dtype=g.dtype, device=device)  # [b, i]: O[i]
        start = torch.cat([g.root, g.root_term]).expand(B, S)
        self.forward[:, 0] = _vecmat(start, g.closure)
        self.prefix_log_prob = g.log_total.expand(B).clone()
        self.sentence_log_prob = g.empty.expand(B).clone()
        self.next_preterminal = self.forward[:, 0, g.N :].clone()
        self.length = torch.zeros(B, dtype=torch.long, device=device)

    @property
    def batch_size(self) -> int:
        return self.length.shape[0]

    @property
    def device(self) -> torch.device:
        return self.length.device

    def clone(self) -> "PrefixState":
        """An independent copy (the same grammar; charts copied), to extend one prefix in
        several ways."""
        out = object.__new__(PrefixState)
        out.grammar = self.grammar
        for name in ("chart", "forward", "prefix_log_prob", "sentence_log_prob", "next_preterminal", "length"):
            setattr(out, name, getattr(self, name).clone())
        return out

    # ------------------------------------------------------------------ queries
    def next_log_prob(self) -> Tensor:
        """(B, V) ``log P(prefix v ...)`` for every token ``v``."""
        g = self.grammar
        if g.T == 0:  # a grammar of the empty sentence alone emits nothing
            return self.next_preterminal.new_full((self.batch_size, g.V), LOG_ZERO)
        t, lp = g.by_token
        return _logsumexp(self.next_preterminal[:, t] + lp, 1)

    def token_log_prob(self, tokens: Tensor) -> Tensor:
        """(B,) ``log P(prefix v ...)`` for one token per row; ``-inf`` for ids outside
        the grammar's vocabulary (0..V-1)."""
        return torch.logsumexp(self.next_preterminal + self._emissions(tokens), -1)

    def next_token_log_probs(self) -> tuple[Tensor, Tensor]:
        """``(log P(v | prefix) (B, V), log P(end | prefix) (B,))``; rows of impossible
        prefixes get ``-inf`` everywhere."""
        ok = torch.isfinite(self.prefix_log_prob)
        norm = torch.where(ok, self.prefix_log_prob, 0.0)
        nxt = torch.where(ok[:, None], self.next_log_prob() - norm[:, None], LOG_ZERO)
        end = torch.where(ok, self.sentence_log_prob - norm, LOG_ZERO)
        return nxt, end

    def _emissions(self, tokens: Tensor) -> Tensor:
        """(B, T) ``emit[:, tokens]``, ``-inf`` for ids outside 0..V-1."""
        g = self.grammar
        tokens = torch.as_tensor(tokens, device=self.device).long()
        ok = (tokens >= 0) & (tokens < g.V)
        e = g.emit_by_token[tokens.clamp(0, g.V - 1)]
        return torch.where(ok[:, None], e, LOG_ZERO)

    # ------------------------------------------------------------------ one more token
    @torch.no_grad()
    def append(self, tokens: Tensor, skip: Tensor | None = None) -> None:
        """Extend every row by its token: tokens (B,) long. Rows with ``skip`` (B,) set do
        not take their token (their state does not move). An id outside the vocabulary
        (or one the grammar never emits) makes the row's prefix impossible."""
        B = self.batch_size
        tokens = torch.as_tensor(tokens, device=self.device).long()
        if tokens.shape != (B,):
            raise NeurosymError(f"expected one token per row, shape ({B},); got {tuple(tokens.shape)}")
        take = torch.isfinite(self.prefix_log_prob)  # an impossible prefix stays impossible
        if skip is not None:
            skip = torch.as_tensor(skip, device=self.device).bool()
            if skip.shape != (B,):
                raise NeurosymError(f"skip must be (B,) = ({B},); got {tuple(skip.shape)}")
            take &= ~skip
        rows = take.nonzero()[:, 0]
        self.length += skip.logical_not().long() if skip is not None else 1
        if rows.numel() == 0:
            return
        K = self.length[rows]  # each row's new column: spans ending at K
        c = int(K.max())  # the widest new span
        self._grow(c)
        g, N = self.grammar, self.grammar.N
        a = rows.numel()
        at = torch.arange(a, device=self.device)
        e = self._emissions(tokens[rows])  # (a, T)
        prefix = torch.logsumexp(self.forward[rows, K - 1, N:] + e, -1)
        col = self.chart.new_full((a, c + 1, self.chart.shape[-1]), LOG_ZERO)  # by width w: span [K - w, K)
        col[:, 1, N:] = e
        lockstep = a == self.batch_size and bool((K == c).all())  # every row at the same column: slices, no gathers
        # widths with an analysis in some row; without nonterminals no span is wider than one token
        alive = [False, N > 0 and bool((e > LOG_ZERO).any())] + [False] * (c - 1)
        for d in range(1, c):  # right child of width d, final once the narrower ones are in
            if not alive[d]:
                continue
            # left children: the spans ending where the right child starts, by width 1 .. c - d
            left = self.chart[:, c - d, 1 : c - d + 1] if lockstep else self.chart[rows, (K - d).clamp(min=0), 1 : c - d + 1]
            ltab, rtab, lp = g.pt_rules if d == 1 else g.nt_rules
            x = left[:, :, ltab] + (col[:, d, rtab] + lp)[:, None]  # (a, c - d, D, N)
            col[:, d + 1 :, :N] = torch.logaddexp(col[:, d + 1 :, :N], _logsumexp(x, 2))
            alive = (col[:, :, :N].amax((0, 2)) > LOG_ZERO).tolist()
        self.chart[rows, K, : c + 1] = col
        one = torch.logsumexp(g.root_term + e, -1)
        longer = torch.logsumexp(g.root + col[at, K, :N], -1)
        sentence = torch.where(K == 1, one, longer)
        parent, left, lp = g.by_sibling
        starts = (K[:, None] - torch.arange(1, c + 1, device=self.device)).clamp(min=0)  # (a, c): span [K - w, K) starts there
        x = self.forward[rows[:, None], starts][:, :, parent] + col[:, 1:, left] + lp  # (a, c, D, S)
        predicted = _logsumexp(x.flatten(1, 2), 1)  # (a, S)
        nxt = _vecmat(predicted, g.closure)
        self.forward[rows, K] = nxt
        self.prefix_log_prob[rows] = prefix
        self.sentence_log_prob[rows] = sentence
        self.next_preterminal[rows] = nxt[:, N:]

    def _grow(self, k: int) -> None:
        """Double the chart until column ``k`` fits."""
        cap = self.chart.shape[1] - 1
        if k <= cap:
            return
        new = cap
        while new < k:
            new *= 2
        b, S = self.chart.shape[0], self.chart.shape[-1]
        chart = self.chart.new_full((b, new + 1, new + 1, S), LOG_ZERO)
        chart[:, : cap + 1, : cap + 1] = self.chart
        forward = self.forward.new_full((b, new + 1, S), LOG_ZERO)
        forward[:, : cap + 1] = self.forward
        self.chart, self.forward = chart, forward


def _logsumexp(x: Tensor, dim: int) -> Tensor:
    """``torch.logsumexp`` over ``dim`` (exact; ``-inf`` for an all ``-inf`` slice); a short
    dim (the grammar tables' padded one) is folded by ``logaddexp``, one fused op a term."""
    n = x.shape[dim]
    if n == 0 or n > 4:
        return torch.logsumexp(x, dim)
    parts = x.unbind(dim)
    out = parts[0]
    for part in parts[1:]:
        out = torch.logaddexp(out, part)
    return out


def _vecmat(x: Tensor, m: Tensor) -> Tensor:
    """(b, I) x (I, J) -> (b, J) in log space, exactly (a logsumexp over I)."""
    return torch.logsumexp(x[:, :, None] + m, 1)


def prefix_state(rules: "RuleTensors | PrefixGrammar", ids: Tensor, lengths: Tensor | None = None, dtype: torch.dtype = torch.float64) -> PrefixState:
    """A :class:`PrefixState` fed the prefixes ``ids`` (B, L) from scratch (row ``b`` is
    ``ids[b, :lengths[b]]``), for reading their prefix, sentence and next-token
    probabilities."""
    grammar = rules if isinstance(rules, PrefixGrammar) else PrefixGrammar.from_rules(rules, dtype)
    ids = torch.as_tensor(ids, device=grammar.device).long()
    if ids.dim() != 2:
        raise NeurosymError(f"ids must be (B, L); got {tuple(ids.shape)}")
    B, L = ids.shape
    lengths = torch.full((B,), L, dtype=torch.long, device=ids.device) if lengths is None else torch.as_tensor(lengths, device=ids.device).long()
    if lengths.shape != (B,) or bool(((lengths < 0) | (lengths > L)).any()):
        raise NeurosymError(f"lengths must be (B,) = ({B},) integers in 0..{L}")
    state = PrefixState(grammar, B, ids.device)
    for i in range(int(lengths.max()) if B else 0):
        state.append(ids[:, i], skip=lengths <= i)
    return state


__all__ = ["PrefixGrammar", "PrefixState", "prefix_state"]
