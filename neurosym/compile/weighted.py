"""`WeightedAutomaton`: a deterministic probabilistic automaton over tokens.

It is an :class:`Automaton` (so decoding masks, ``step`` and ``run`` work unchanged)
whose arcs carry log-probabilities and whose states carry stopping log-probabilities:
at every state, the probabilities of the outgoing tokens and of stopping sum to 1.
A sentence's probability is the product along its (unique) path times the stopping
probability at the end, which makes sampling, scoring and the exact entropy of the
generated language simple tensor computations.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import networkx as nx
import numpy as np
import torch

from neurosym.compile.automaton import Automaton
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab


@dataclass(frozen=True)
class Entropy:
    """The exact entropy of the distribution over sentences a grammar generates.

    ``per_sentence``: H(X) in nats. ``expected_length``: E[|X|] in tokens.
    ``per_token``: H(X) / E[|X|]; ``ppl_floor = exp(per_token)``. A model that assigns
    probabilities to whole sentences, where they end included, has per-token
    cross-entropy at least H(X) / N on a large sample, N being the tokens counted per
    sentence: E[|X|] when the end is folded into the last word's prediction
    (``ppl_floor``), E[|X|] + 1 when an end-of-sentence token is predicted and counted
    (``ppl_floor_with_eos``, the usual LM set-up). A model never charged for where
    sentences end is bounded only by (H(X) - H(|X|)) / E[|X|].
    """

    per_sentence: float
    expected_length: float
    per_token: float
    ppl_floor: float
    ppl_floor_with_eos: float

    @property
    def per_sentence_bits(self) -> float:
        return self.per_sentence / math.log(2)

    def to_dict(self) -> dict:
        return {**asdict(self), "per_sentence_bits": self.per_sentence_bits}


class WeightedAutomaton(Automaton):
    """A DFA over token ids with arc and stopping log-probabilities.

    Attributes (besides :class:`Automaton`'s):
        log_probs: (Q, V) float64, log P(token | state); -inf where ``delta`` is -1.
        final_log_probs: (Q,) float64, log P(stop | state); -inf at non-final states.
        role_tables: role name -> (Q, V) float64, the probability that reading token v
            in state q takes an arc marked with that role (1 or 0 for an unambiguous grammar).
        graph: the source grammar as a networkx MultiDiGraph (for analysis and drawing).
    """

    def __init__(
        self,
        delta: torch.Tensor,
        log_probs: torch.Tensor,
        final_log_probs: torch.Tensor,
        vocab: Vocab,
        role_tables: Mapping[str, torch.Tensor] | None = None,
        name: str | None = None,
        source: str | None = None,
        graph: nx.MultiDiGraph | None = None,
    ):
        super().__init__(delta, final_log_probs > -math.inf, vocab, name=name, source=source)
        if log_probs.shape != delta.shape or final_log_probs.shape != (delta.shape[0],):
            raise NeurosymError("log_probs must be (Q, V) and final_log_probs (Q,) for delta (Q, V)")
        self.log_probs = log_probs.double()
        self.final_log_probs = final_log_probs.double()
        self.role_tables = {k: v.double() for k, v in (role_tables or {}).items()}
        self.graph = graph

    def __repr__(self) -> str:
        label = f"{self.name}: " if self.name else ""
        return f"WeightedAutomaton({label}{self.num_states} states, {int(self.final.sum())} final, vocab={self.vocab!r})"

    # ------------------------------------------------------------------ scoring
    def log_prob(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """log P(sentence): ids (B, L) (padding after ``lengths``) -> (B,) float64; -inf if rejected."""
        ids = torch.as_tensor(ids, dtype=torch.long)
        if ids.dim() == 1:
            ids = ids.unsqueeze(0)
        B, L = ids.shape
        lengths = torch.full((B,), L, dtype=torch.long) if lengths is None else torch.as_tensor(lengths, dtype=torch.long)
        pos = torch.arange(L)
        valid = pos.unsqueeze(0) < lengths.unsqueeze(1)  # (B, L)
        states = self.run(torch.where(valid, ids, 0))  # (B, L) after each token
        before = torch.cat([torch.full((B, 1), self.start, dtype=torch.long), states[:, :-1]], dim=1)
        arc = self.log_probs[before.clamp(min=0), ids.clamp(min=0)]
        arc = torch.where(before < 0, torch.tensor(-math.inf, dtype=torch.float64), arc)
        total = torch.where(valid, arc, torch.zeros((), dtype=torch.float64)).sum(dim=1)
        last = torch.where(lengths > 0, states.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1), torch.full((B,), self.start))
        stop = torch.where(last < 0, torch.tensor(-math.inf, dtype=torch.float64), self.final_log_probs[last.clamp(min=0)])
        return total + stop

    def roles(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """Which positions take an arc marked with each role: ids (B, L) -> {role: (B, L) bool}.

        Causal by construction: position t depends on tokens 0..t only. A position in a
        rejected prefix has no role."""
        ids = torch.as_tensor(ids, dtype=torch.long)
        if ids.dim() == 1:
            return {r: m[0] for r, m in self.roles(ids.unsqueeze(0)).items()}
        B, L = ids.shape
        states = self.run(ids)
        before = torch.cat([torch.full((B, 1), self.start, dtype=torch.long), states[:, :-1]], dim=1)
        alive = (before >= 0) & (states >= 0)
        return {r: (table[before.clamp(min=0), ids] > 0.5) & alive for r, table in self.role_tables.items()}

    # ------------------------------------------------------------------ the Markov chain
    def transition_matrix(self) -> np.ndarray:
        """(Q, Q) float64: P[q, q'] = P(next state q' | state q), the stopping mass left out."""
        Q = self.num_states
        d = self.delta.numpy()
        p = np.exp(self.log_probs.numpy())
        src, tok = np.nonzero(d >= 0)
        P = np.zeros((Q, Q))
        np.add.at(P, (src, d[src, tok]), p[src, tok])
        return P

    def expected_visits(self) -> np.ndarray:
        """(Q,) expected number of visits to each state per sentence: solves (I - P^T) n = e_start,
        as a sparse system (the arcs, not a dense (Q, Q) matrix: grammars of many
        thousands of states solve in well under a second)."""
        from scipy.sparse import csr_matrix, identity  # lazy: scipy is slow to import and only entropies need it
        from scipy.sparse.linalg import MatrixRankWarning, spsolve  # lazy: as above

        Q = self.num_states
        arcs = self.arcs
        p = np.exp(self.log_probs.numpy()[arcs.sources, arcs.tokens])
        PT = csr_matrix((p, (arcs.targets, arcs.sources)), shape=(Q, Q))  # duplicates are summed
        e = np.zeros(Q)
        e[self.start] = 1.0
        with warnings.catch_warnings():
            warnings.simplefilter("error", MatrixRankWarning)
            try:
                n = np.atleast_1d(spsolve((identity(Q, format="csr") - PT).tocsc(), e))
            except (MatrixRankWarning, RuntimeError):
                n = np.full(Q, np.nan)
        if not np.all(np.isfinite(n)) or (n < -1e-9).any():
            raise NeurosymError("the grammar never stops with probability 1, so it has no finite expected length")
        return n

    def entropy(self) -> Entropy:
        """The exact entropy of the generated language (see :class:`Entropy`).

        H(X) = sum_q E[visits to q] * H(next event at q), where the next event is a token
        or stopping; E[|X|] = sum_q E[visits to q] * P(not stopping at q)."""
        n = self.expected_visits()
        Q, arcs = self.num_states, self.arcs  # over the arcs only, never the dense (Q, V) table
        lp = self.log_probs.numpy()[arcs.sources, arcs.tokens]
        lf = self.final_log_probs.numpy()
        with np.errstate(invalid="ignore"):
            h_arcs = -np.bincount(arcs.sources, weights=np.where(np.isfinite(lp), np.exp(lp) * lp, 0.0), minlength=Q)
            h_stop = -np.where(np.isfinite(lf), np.exp(lf) * lf, 0.0)
        H = float(n @ (h_arcs + h_stop))
        go = np.bincount(arcs.sources, weights=np.exp(lp), minlength=Q)
        length = float(n @ go)
        per_token = H / length if length > 0 else 0.0
        return Entropy(H, length, per_token, math.exp(per_token), math.exp(H / (length + 1.0)))

    def cyclic_components(self) -> list[list[int]]:
        """The compiled states that lie on a cycle of arcs with positive probability, one
        sorted list per strongly connected component (ordered by first state); empty when
        the language is finite."""
        live = (self.delta >= 0) & (self.log_probs > -math.inf)
        src, tok = live.nonzero(as_tuple=True)
        g = nx.DiGraph()
        g.add_nodes_from(range(self.num_states))
        g.add_edges_from(zip(src.tolist(), self.delta[src, tok].tolist()))
        comps = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1 or g.has_edge(next(iter(c)), next(iter(c)))]
        return sorted(comps)

    # ------------------------------------------------------------------ sampling
    def sample(self, n: int, max_len: int | None = None, seed: int = 0) -> list[list[int]]:
        """``n`` sentences drawn from the grammar's distribution, as token id lists.

        With ``max_len``, sentences longer than it are redrawn (so the result follows the
        distribution conditioned on length <= max_len). Vectorised over the batch."""
        gen = torch.Generator().manual_seed(seed)
        out: list[list[int]] = []
        if self.final_log_probs[self.start] == 0.0 and not (self.log_probs[self.start] > -math.inf).any():
            return [[] for _ in range(n)]
        table = torch.cat([self.log_probs, self.final_log_probs.unsqueeze(1)], dim=1).exp().float()  # (Q, V + 1)
        stop = table.shape[1] - 1
        cap = max_len if max_len is not None else 100_000
        chunk = max(1, min(n, 2**22 // table.shape[1]))
        tries = 0
        while len(out) < n:
            tries += 1
            if tries > 1000:
                raise NeurosymError(f"could not draw {n} sentences of at most {max_len} tokens in 1000 rounds")
            m = min(chunk, max(n - len(out), 1))
            rows = self._sample_batch(table, stop, m, cap, gen)
            out.extend(r for r in rows if r is not None)
        return out[:n]

    def _sample_batch(self, table: torch.Tensor, stop: int, m: int, cap: int, gen: torch.Generator) -> list[list[int] | None]:
        states = torch.full((m,), self.start, dtype=torch.long)
        done = torch.zeros(m, dtype=torch.bool)
        steps = []
        for _ in range(cap + 1):
            if bool(done.all()):
                break
            tok = torch.multinomial(table[states], 1, generator=gen).squeeze(1)
            ended = tok == stop
            tok = torch.where(done | ended, torch.full_like(tok, -1), tok)
            steps.append(tok)
            done = done | ended
            states = torch.where(done, states, self.delta[states, tok.clamp(min=0)])
        seqs = torch.stack(steps, dim=1) if steps else torch.empty(m, 0, dtype=torch.long)
        return [[t for t in row if t >= 0] if ok else None for row, ok in zip(seqs.tolist(), done.tolist())]
