"""Soft Levenshtein: differentiable edit distances, between sequences and to a regular language.

The hard edit distance is a min over alignments; here every min is the smoothed min
``softmin_T(x) = -T log sum exp(-x / T)``, which is differentiable in the costs and
tends to the min as ``T -> 0`` (it is at most ``T log n`` below the min of n terms).
``temperature=0`` gives the exact (hard) distance.

* :func:`soft_levenshtein`: between two batches of token sequences (or embeddings),
  with unit costs or a (V, V) substitution-cost matrix. The dynamic programme sweeps
  anti-diagonals (wavefronts): La + Lb vectorised steps, not La x Lb cell updates.
* :func:`soft_levenshtein_to_automaton`: from each sequence to the language of an
  :class:`~neurosym.compile.automaton.Automaton` (the cheapest edit into any accepted
  string). The programme runs over (position, state), vectorised over the batch and
  the states.
"""

from __future__ import annotations

import torch

from neurosym.compile.automaton import Automaton
from neurosym.errors import NeurosymError
from neurosym.semiring import LOG_ZERO_FINITE, SoftMinSemiring, softmin

BIG = -LOG_ZERO_FINITE  # the cost of "no path": finite, so gradients through smoothed mins stay NaN-free


def soft_levenshtein(
    a: torch.Tensor,
    b: torch.Tensor,
    temperature: float = 1.0,
    a_lengths: torch.Tensor | None = None,
    b_lengths: torch.Tensor | None = None,
    cost_matrix: torch.Tensor | None = None,
    ins_cost: float | torch.Tensor = 1.0,
    del_cost: float | torch.Tensor = 1.0,
) -> torch.Tensor:
    """Soft edit distance from each ``a[n]`` to ``b[n]``: (B,).

    Args:
        a, b: token ids (B, La) and (B, Lb); or embeddings (B, La, D) and (B, Lb, D),
            whose substitution cost is the Euclidean distance.
        temperature: T >= 0 of the smoothed min (0: exact distance).
        a_lengths, b_lengths: (B,) true lengths (default: the full widths); later
            positions are padding and may hold anything.
        cost_matrix: (V, V) substitution costs ``C[a_token, b_token]`` for ids
            (default: 0 if equal, else 1). Differentiable.
        ins_cost, del_cost: cost of inserting a token of ``b`` / deleting one of ``a``
            (floats or 0-d tensors; differentiable).
    """
    _check_temperature(temperature)
    if a.dim() != b.dim() or a.dim() not in (2, 3) or a.shape[0] != b.shape[0]:
        raise NeurosymError(f"a and b must both be (B, L) ids or (B, L, D) embeddings, got {tuple(a.shape)} and {tuple(b.shape)}")
    B, La, Lb = a.shape[0], a.shape[1], b.shape[1]
    if a.dim() == 3:
        sub = torch.cdist(a, b)  # (B, La, Lb)
    elif cost_matrix is not None:
        sub = cost_matrix[a.long().clamp(min=0).unsqueeze(2), b.long().clamp(min=0).unsqueeze(1)]
    else:
        sub = (a.unsqueeze(2) != b.unsqueeze(1)).to(torch.get_default_dtype())
    la = _lengths(a_lengths, B, La, a.device)
    lb = _lengths(b_lengths, B, Lb, a.device)
    dtype, dev = sub.dtype, sub.device

    # Diagonal d holds the cells (i, d - i) for i = 0..La (invalid cells hold BIG).
    i = torch.arange(La + 1, device=dev)
    padded = torch.nn.functional.pad(sub, (1, 0, 1, 0), value=BIG)  # (B, La + 1, Lb + 1): cell (i, j) -> sub[i-1, j-1]
    big_col = torch.full((B, 1), BIG, dtype=dtype, device=dev)
    prev2 = torch.full((B, La + 1), BIG, dtype=dtype, device=dev)
    prev1 = torch.where(i == 0, 0.0, BIG).to(dtype).expand(B, -1)  # diagonal 0: the empty alignment
    out = torch.where(la + lb == 0, 0.0, BIG).to(dtype)
    for d in range(1, La + Lb + 1):
        j = d - i
        valid = (j >= 0) & (j <= Lb)
        sub_d = padded[:, i, j.clamp(0, Lb)]  # (B, La + 1): cost of cell (i, j)'s substitution
        candidates = torch.stack(
            [
                torch.cat([big_col, prev1[:, :-1]], 1) + del_cost,  # from (i-1, j): delete a[i]
                prev1 + ins_cost,  # from (i, j-1): insert b[j]
                torch.cat([big_col, prev2[:, :-1]], 1) + sub_d,  # from (i-1, j-1): substitute
            ]
        )
        cur = torch.where(valid, softmin(candidates, 0, temperature), BIG)
        done = la + lb == d
        if bool(done.any()):
            out = torch.where(done, cur.gather(1, la.unsqueeze(1)).squeeze(1), out)
        prev2, prev1 = prev1, cur
    return out


def soft_levenshtein_to_automaton(
    ids: torch.Tensor,
    automaton: Automaton,
    temperature: float = 1.0,
    lengths: torch.Tensor | None = None,
    cost_matrix: torch.Tensor | None = None,
    ins_cost: float | torch.Tensor = 1.0,
    del_cost: float | torch.Tensor = 1.0,
) -> torch.Tensor:
    """Soft edit distance from each sequence to the automaton's language: (B, L) -> (B,).

    ``D[t, q]`` is the soft cost of turning the first t tokens into a string that leads
    from the start to state q. Reading token x along an arc labelled v costs
    ``C[x, v]`` (unit: 0 if v == x else 1), deleting x costs ``del_cost``, and inserting
    any arc's token costs ``ins_cost``. After each position, insertions are closed by
    ``Q - 1`` relaxations ``R <- D ⊕ (R ⊗ Ins)`` (soft (min, +) algebra; each insertion
    path of up to Q - 1 arcs is counted once, enough for every shortest one). The
    result is the soft min over final states after the last token. Parallel arcs
    (several tokens between the same states) each count as a path, so with T > 0 the
    value also rewards many ways of matching; at T -> 0 it is the exact distance.

    Args:
        ids: (B, L) token ids of ``automaton.vocab``.
        temperature: T >= 0 (0: exact distance).
        lengths: (B,) true lengths (later positions are padding).
        cost_matrix: (V, V) substitution costs ``C[input token, arc token]``. Memory:
            (U, V, Q, Q) for the U distinct input tokens.
        ins_cost, del_cost: floats or 0-d tensors (differentiable).
    """
    _check_temperature(temperature)
    if ids.dim() != 2:
        raise NeurosymError(f"ids must be (B, L), got {tuple(ids.shape)}")
    B, L = ids.shape
    delta = automaton.delta.to(ids.device)
    Q, V = delta.shape
    dtype = cost_matrix.dtype if cost_matrix is not None else torch.get_default_dtype()
    lens = _lengths(lengths, B, L, ids.device)
    active = torch.arange(L, device=ids.device) < lens.unsqueeze(1)  # (B, L)
    ids = ids.long().masked_fill(~active, 0)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= V):
        raise NeurosymError(f"token ids must be in [0, {V})")

    # no_arc[v, q, q'] = 0 on the automaton's arcs, BIG elsewhere
    arcs = torch.zeros(V, Q, Q + 1, dtype=torch.bool, device=ids.device)
    arcs.scatter_(2, delta.where(delta >= 0, Q).t().unsqueeze(-1), True)
    no_arc = torch.where(arcs[:, :, :Q], 0.0, BIG).to(dtype)
    ins = softmin(no_arc + ins_cost, 0, temperature)  # (Q, Q): any arc's token, inserted
    uniq, inverse = ids.unique(return_inverse=True)  # (U,), (B, L)
    C = cost_matrix[uniq] if cost_matrix is not None else (uniq.unsqueeze(1) != torch.arange(V, device=ids.device)).to(dtype)
    subst = softmin(C[:, :, None, None] + no_arc, 1, temperature)  # (U, Q, Q): read the token along an arc
    start = torch.full((Q,), BIG, dtype=dtype, device=ids.device)
    start[automaton.start] = 0.0
    final = torch.where(automaton.final.to(ids.device), 0.0, BIG).to(dtype)
    return automaton_edit_distance(subst, inverse, active, start, final, ins, del_cost, SoftMinSemiring(temperature))


def automaton_edit_distance(
    read: torch.Tensor,
    symbols: torch.Tensor,
    active: torch.Tensor,
    start: torch.Tensor,
    final: torch.Tensor,
    insert: torch.Tensor,
    delete: float | torch.Tensor,
    semiring: SoftMinSemiring,
) -> torch.Tensor:
    """The edit distance from sequences to an automaton's language, written once over a
    cost semiring: (soft-min, +) for :func:`soft_levenshtein_to_automaton`, (min, +) for
    regex synthesis (:func:`neurosym.synth.distance.distances`).

    ``D[t, q]`` is the cost of editing the first t symbols into a string that leads from
    the start to state q; reading symbol x along the arc q -> q' costs ``read[x, q, q']``
    (match or substitution), deleting it costs ``delete``, and the insertions after it
    follow the closure ``insert*`` (:meth:`SoftMinSemiring.star`):

        D[0]   = start ⊗ insert*
        D[t+1] = ((D[t] ⊗ read[x_t]) ⊕ (D[t] + delete)) ⊗ insert*
        result = ⊕_q D[L, q] + final[q]

    Args:
        read: (U, Q, Q) costs per input symbol; ``symbols`` (B, L) index its first dim.
        active: (B, L) bool, False on padding (those steps leave D unchanged).
        start, final: (Q,) costs (0 on the start / final states, ``semiring.zero`` elsewhere).
        insert: (Q, Q) cost of inserting one symbol along an arc.
    Returns (B,) costs; ``semiring.zero`` where no edit reaches the language.
    """
    closure = semiring.star(insert)  # (Q, Q)
    B, L = symbols.shape

    def vecmat(d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:  # (B, Q) x (B|, Q, Q) -> (B, Q)
        return semiring.matmul(d.unsqueeze(-2), m).squeeze(-2)

    d = vecmat(start.expand(B, -1), closure)
    for t in range(L):
        step = semiring.plus(vecmat(d, read[symbols[:, t]]), d + delete)
        d = torch.where(active[:, t, None], vecmat(step, closure), d)
    return semiring.sum(d + final, -1)


def _check_temperature(temperature: float) -> None:
    if not float(temperature) >= 0:
        raise NeurosymError(f"temperature must be >= 0, got {temperature}")


def _lengths(lengths: torch.Tensor | None, B: int, L: int, device) -> torch.Tensor:
    if lengths is None:
        return torch.full((B,), L, dtype=torch.long, device=device)
    lengths = torch.as_tensor(lengths, device=device).long()
    if lengths.shape != (B,) or bool((lengths < 0).any()) or bool((lengths > L).any()):
        raise NeurosymError(f"lengths must be (B,) = ({B},) values in [0, {L}]")
    return lengths


__all__ = ["automaton_edit_distance", "soft_levenshtein", "soft_levenshtein_to_automaton", "softmin"]
