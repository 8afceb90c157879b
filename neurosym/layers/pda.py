"""Differentiable pushdown memory: stack-augmented RNNs.

Two recurrent encoders whose controller (an LSTM or GRU cell) reads and drives a stack.
Both map token ids (B, L) to hidden states (B, L, H), vectorised over the batch and
looping over time; with ``lengths`` every state past a sequence's end is frozen and
its outputs are zero (the recurrence is causal, so padding never changes earlier
outputs).

* :class:`StackRNN` — the stack-augmented RNN of Joulin & Mikolov (2015, "Inferring
  Algorithmic Patterns with Stack-Augmented Recurrent Nets"): a fixed-depth stack
  tensor updated by a soft mixture of push / pop / no-op (a softmax over three
  actions), read through its top ``read_k`` cells. ``hard=True`` uses one-hot argmax
  actions in the forward pass and the soft actions' gradient (straight-through).
* :class:`NondeterministicStackRNN` — the NS-RNN of DuSell & Chiang (2020, "Learning
  Context-Free Languages with Nondeterministic Stack RNNs"): the controller weights
  the transitions of a small weighted PDA (push / replace / pop over Q states and S
  stack symbols), and the reading is the exact distribution over (state, top symbol)
  summed over *all* runs, by Lang's cubic-time dynamic program (:class:`NondeterministicStack`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils import checkpoint as _checkpoint

from neurosym.errors import NeurosymError
from neurosym.semiring import LOG_ZERO_FINITE

ACTIONS = ("push", "pop", "noop")
"""The order of the three Joulin–Mikolov actions in action tensors (..., 3)."""

NEG = LOG_ZERO_FINITE  # clamped log-scores: gradients of logsumexp stay NaN-free
"""Stands for log 0 in the nondeterministic stack: finite, so gradients stay finite."""

CHECKPOINT_AFTER = 32
"""Sequences longer than this recompute the nondeterministic stack in the backward pass."""


def _cell(kind: str, input_size: int, hidden_size: int) -> nn.Module:
    if kind == "lstm":
        return nn.LSTMCell(input_size, hidden_size)
    if kind == "gru":
        return nn.GRUCell(input_size, hidden_size)
    raise NeurosymError(f"unknown controller cell {kind!r}; known: gru, lstm")


def _active(ids: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor | None:
    """(B, L) bool, True before each sequence's end; None when there are no lengths."""
    if ids.dim() != 2:
        raise NeurosymError(f"ids must be (B, L), got {tuple(ids.shape)}")
    if lengths is None:
        return None
    lengths = torch.as_tensor(lengths, device=ids.device).long()
    if lengths.shape != ids.shape[:1]:
        raise NeurosymError(f"lengths must be (B,) = ({ids.shape[0]},), got {tuple(lengths.shape)}")
    return torch.arange(ids.shape[1], device=ids.device) < lengths.unsqueeze(1)


class _Controller(nn.Module):
    """Embedding + recurrent cell, stepped by hand: ``step(x_t (B, E+R), state) -> state``."""

    def __init__(self, vocab_size: int, embed_dim: int, read_size: int, hidden_size: int, cell: str, padding_idx: int | None):
        super().__init__()
        self.kind = cell
        self.hidden_size = hidden_size
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=padding_idx)
        self.cell = _cell(cell, embed_dim + read_size, hidden_size)

    def embed_ids(self, ids: torch.Tensor, active: torch.Tensor | None) -> torch.Tensor:
        """(B, L) -> (B, L, E); ids past a sequence's end may hold anything (e.g. -1)."""
        if active is not None:
            ids = ids.masked_fill(~active, self.embed.padding_idx if self.embed.padding_idx is not None else 0)
        return self.embed(ids)

    def initial(self, batch: int, ref: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = ref.new_zeros(batch, self.hidden_size)
        return (h, h.clone()) if self.kind == "lstm" else (h,)

    def step(self, x: torch.Tensor, state: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        out = self.cell(x, state if self.kind == "lstm" else state[0])
        return out if self.kind == "lstm" else (out,)


def _keep(active_t: torch.Tensor | None, new, old):
    """``new`` where the sequence is still running (active_t (B,)), else ``old``; works on tuples."""
    if active_t is None:
        return new
    if isinstance(new, tuple):
        return tuple(_keep(active_t, n, o) for n, o in zip(new, old))
    mask = active_t.view(-1, *([1] * (new.dim() - 1)))
    return torch.where(mask, new, old)


# ---------------------------------------------------------------------- Joulin & Mikolov
def stack_update(stack: torch.Tensor, actions: torch.Tensor, value: torch.Tensor, empty: float = -1.0) -> torch.Tensor:
    """One Joulin–Mikolov stack step.

    stack: (B, N, M), cell 0 the top; actions: (B, 3) weights of push, pop, no-op;
    value: (B, M) what a push puts on top. Returns the (B, N, M) mixture
    ``a_push * push(stack) + a_pop * pop(stack) + a_noop * stack``; a pop fills the bottom
    cell with ``empty`` and a push drops the bottom cell.
    """
    B, N, M = stack.shape
    pushed = torch.cat([value.unsqueeze(1), stack[:, :-1]], dim=1)
    popped = torch.cat([stack[:, 1:], stack.new_full((B, 1, M), empty)], dim=1)
    a = actions.unsqueeze(-1).unsqueeze(-1)  # (B, 3, 1, 1)
    return a[:, 0] * pushed + a[:, 1] * popped + a[:, 2] * stack


def run_stack(actions: torch.Tensor, values: torch.Tensor, depth: int, empty: float = -1.0) -> torch.Tensor:
    """Stacks after each step of given actions (B, L, 3) and push values (B, L, M):
    (B, L, depth, M), starting from an all-``empty`` stack."""
    B, L, M = values.shape
    stack = values.new_full((B, depth, M), empty)
    out = []
    for t in range(L):
        stack = stack_update(stack, actions[:, t], values[:, t], empty)
        out.append(stack)
    return torch.stack(out, dim=1) if out else values.new_full((B, 0, depth, M), empty)


class _StraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, probs: torch.Tensor) -> torch.Tensor:
        return F.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


def straight_through(probs: torch.Tensor) -> torch.Tensor:
    """The exact one-hot argmax of ``probs`` (..., A) in the forward pass; in the
    backward pass the gradient goes to ``probs`` unchanged (as if the forward pass had
    returned ``probs``): the straight-through estimator."""
    return _StraightThrough.apply(probs)


class StackRNN(nn.Module):
    """An RNN with a differentiable stack (Joulin & Mikolov, 2015).

    At step t the controller reads ``[embed(x_t); top read_k cells of the stack]`` and
    updates its state h_t; h_t gives the action distribution ``softmax(A h_t)`` over
    (push, pop, no-op) and the push value ``sigmoid(D h_t)`` (B, stack_dim); the stack is
    then updated with :func:`stack_update`. Empty cells hold ``empty`` (-1, as in the
    paper), outside the (0, 1) range of pushed values, so the controller can see depth.

    Args:
        vocab_size: number of token ids.
        hidden_size: H, the controller's state size and the output size.
        embed_dim: token embedding size (default H).
        stack_dim: M, the width of a stack cell.
        depth: N, the number of stack cells (pushes beyond it drop the bottom).
        read_k: how many top cells the controller reads.
        cell: ``"lstm"`` or ``"gru"``.
        hard: straight-through hard actions (see :func:`straight_through`).
        padding_idx: the embedding row kept at zero (``None`` for none).
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int = 64,
        embed_dim: int | None = None,
        stack_dim: int = 8,
        depth: int = 64,
        read_k: int = 2,
        cell: str = "lstm",
        hard: bool = False,
        padding_idx: int | None = 0,
        empty: float = -1.0,
    ):
        super().__init__()
        if not 1 <= read_k <= depth:
            raise NeurosymError(f"read_k must be in [1, depth={depth}], got {read_k}")
        self.hidden_size, self.stack_dim, self.depth, self.read_k = hidden_size, stack_dim, depth, read_k
        self.hard, self.empty = hard, float(empty)
        self.controller = _Controller(vocab_size, embed_dim or hidden_size, read_k * stack_dim, hidden_size, cell, padding_idx)
        self.action = nn.Linear(hidden_size, 3)
        self.push_value = nn.Linear(hidden_size, stack_dim)

    @property
    def output_size(self) -> int:
        return self.hidden_size

    def actions(self, h: torch.Tensor) -> torch.Tensor:
        """(B, H) -> (B, 3) action weights (one-hot in the forward pass when ``hard``)."""
        probs = torch.softmax(self.action(h), dim=-1)
        return straight_through(probs) if self.hard else probs

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor | None = None, return_actions: bool = False):
        """ids (B, L) -> hidden states (B, L, H); with ``return_actions`` also the
        (B, L, 3) action weights (zero past each sequence's end)."""
        active = _active(ids, lengths)
        B, L = ids.shape
        emb = self.controller.embed_ids(ids, active)  # (B, L, E)
        state = self.controller.initial(B, emb)
        stack = emb.new_full((B, self.depth, self.stack_dim), self.empty)
        outs, acts = [], []
        for t in range(L):
            act_t = None if active is None else active[:, t]
            read = stack[:, : self.read_k].reshape(B, -1)
            new_state = self.controller.step(torch.cat([emb[:, t], read], dim=-1), state)
            h = new_state[0]
            a = self.actions(h)
            new_stack = stack_update(stack, a, torch.sigmoid(self.push_value(h)), self.empty)
            state, stack = _keep(act_t, new_state, state), _keep(act_t, new_stack, stack)
            keep = 1.0 if act_t is None else act_t.unsqueeze(-1).to(h.dtype)
            outs.append(h * keep)
            acts.append(a * keep)
        hidden = torch.stack(outs, 1) if outs else emb.new_zeros(B, 0, self.hidden_size)
        if return_actions:
            return hidden, (torch.stack(acts, 1) if acts else emb.new_zeros(B, 0, 3))
        return hidden


# ---------------------------------------------------------------------- DuSell & Chiang
def _logmatmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Log-space matrix product over the last two dims: (..., n, m) x (..., m, p)."""
    return torch.logsumexp(a.unsqueeze(-1) + b.unsqueeze(-3), dim=-2)


def _next_gamma(push: torch.Tensor, repl: torch.Tensor, pop: torch.Tensor, *cols: torch.Tensor) -> torch.Tensor:
    """Column j of the inner weights from columns 0..j-1 (j = len(cols)).

    ``cols[k]`` (B, R, Q, S, Q, S) holds ``gamma[i -> k][q, x -> r, y]`` in row i + 1
    (rows -1 .. k-1; later rows are NEG). push, repl: (B, Q, S, Q, S); pop: (B, Q, S, Q).
    """
    j = len(cols)
    prev = cols[-1]
    B, R, Q, S = prev.shape[:4]
    QS = Q * S
    # replace: gamma[i -> j-1][q,x -> s,z] * repl[s,z -> r,y], for i = -1 .. j-2
    repl_term = _logmatmul(prev[:, :j].reshape(B, j, QS, QS), repl.reshape(B, 1, QS, QS))  # (B, j, QS, QS)
    rows = [repl_term]
    if j >= 2:
        # pop: sum over k in [i+1, j-2] of gamma[i -> k][q,x -> t,y] * gamma'[k][t,y -> r], where
        # gamma'[k][t,y -> r] = sum_{s,z} gamma[k -> j-1][t,y -> s,z] * pop[s,z -> r], i = -1 .. j-3
        g_prime = _logmatmul(prev[:, 1:j].reshape(B, j - 1, QS, QS), pop.reshape(B, 1, QS, Q))  # (B, K, t·y, r)
        g_prime = g_prime.view(B, j - 1, Q, S, Q)
        inner = torch.stack([c[:, : j - 1] for c in cols[: j - 1]], dim=-1)  # (B, I, q, x, t, y, K)
        inner = inner.permute(0, 1, 2, 3, 5, 6, 4).reshape(B, j - 1, Q, S, S, 1, -1)  # (B, I, q, x, y, 1, K·t)
        g_prime = g_prime.permute(0, 3, 4, 1, 2).reshape(B, 1, 1, 1, S, Q, -1)  # (B, 1, 1, 1, y, r, K·t)
        pop_term = torch.logsumexp(inner + g_prime, dim=-1)  # (B, I, q, x, y, r)
        pop_term = pop_term.transpose(-1, -2).reshape(B, j - 1, QS, QS)
        rows[0] = torch.cat([torch.logaddexp(repl_term[:, : j - 1], pop_term), repl_term[:, j - 1 :]], dim=1)
    rows.append(push.reshape(B, 1, QS, QS))  # i = j-1: push y on top of x
    col = torch.cat(rows, dim=1)  # rows -1 .. j-1
    pad = col.new_full((B, R - (j + 1), QS, QS), NEG)
    return torch.cat([col, pad], dim=1).clamp_min(NEG).view(B, R, Q, S, Q, S)


class NondeterministicStack:
    """The stack WFA of DuSell & Chiang (2020): a weighted PDA run over all action
    sequences at once, in log space, vectorised over the batch and states.

    The PDA starts in state 0 with the bottom symbol ⊥ = stack symbol 0. Each step has
    log-weights ``push[b, q, x, r, y]`` (state q, top x -> state r, push y on x),
    ``repl[b, q, x, r, y]`` (replace the top x by y) and ``pop[b, q, x, r]``; ⊥ can be
    replaced but never popped. Lang's algorithm keeps inner weights
    ``gamma[i -> t][q, x -> r, y]`` (runs from time i to t that push one symbol on the x
    on top at time i, never expose x, and end with y directly on x) and forward weights
    ``alpha[t][r, y]`` (all runs of t steps ending in state r with top y)::

        gamma[t-1 -> t] = push_t
        gamma[i -> t]  += sum_{s,z} gamma[i -> t-1][.. s,z] repl_t[s,z -> r,y]
        gamma[i -> t]  += sum_{k=i+1}^{t-2} sum_{u} gamma[i -> k][.. u,y] sum_{s,z} gamma[k -> t-1][u,y -> s,z] pop_t[s,z -> r]
        alpha[t][r,y]   = sum_{i=-1}^{t-1} sum_{q,x} alpha[i][q,x] gamma[i -> t][q,x -> r,y]

    with the initial ⊥ "pushed" from time -1 to 0 (``gamma[-1 -> 0][0,⊥ -> 0,⊥] = 1``,
    ``alpha[-1] = alpha[0] = one-hot(0, ⊥)``), so runs can pop back down to ⊥. Time
    O(t² Q³ S²) per step, O(L³) in all. A step's intermediates take O(B t² Q³ S²)
    memory; with ``checkpoint`` they are recomputed in the backward pass instead of
    stored, so memory is that of gamma, O(B L² Q² S²), for about twice the time.

    Args:
        batch, num_states (Q), stack_symbols (S), max_steps: sizes.
        like: a tensor whose dtype and device to use.
        checkpoint: recompute each step in the backward pass; ``None`` (default) does
            so when ``max_steps`` exceeds :data:`CHECKPOINT_AFTER`.
    """

    def __init__(self, batch: int, num_states: int, stack_symbols: int, max_steps: int, like: torch.Tensor, checkpoint: bool | None = None):
        self.B, self.Q, self.S, self.R = batch, num_states, stack_symbols, max_steps + 2
        self.checkpoint = max_steps > CHECKPOINT_AFTER if checkpoint is None else checkpoint
        init = like.new_full((batch, self.R, num_states, stack_symbols, num_states, stack_symbols), NEG)
        init[:, 0, 0, 0, 0, 0] = 0.0  # gamma[-1 -> 0][q0, ⊥ -> q0, ⊥] = 1
        self.gamma: list[torch.Tensor] = [init]  # gamma[t] = column t
        start = like.new_full((batch, num_states, stack_symbols), NEG)
        start[:, 0, 0] = 0.0
        self.alpha: list[torch.Tensor] = [start, start]  # alpha[-1], alpha[0]

    @property
    def steps(self) -> int:
        return len(self.gamma) - 1

    def update(self, push: torch.Tensor, repl: torch.Tensor, pop: torch.Tensor) -> torch.Tensor:
        """One step with log-weights push, repl (B, Q, S, Q, S) and pop (B, Q, S, Q) (-inf
        allowed); returns log alpha (B, Q, S) of the new time step."""
        if self.steps + 2 > self.R:
            raise NeurosymError(f"the nondeterministic stack was sized for {self.R - 2} steps")
        push, repl, pop = push.clamp_min(NEG), repl.clamp_min(NEG), pop.clamp_min(NEG)
        if self.checkpoint and torch.is_grad_enabled():
            col = _checkpoint.checkpoint(_next_gamma, push, repl, pop, *self.gamma, use_reentrant=False)
        else:
            col = _next_gamma(push, repl, pop, *self.gamma)
        self.gamma.append(col)
        t = self.steps
        B, QS = self.B, self.Q * self.S
        alphas = torch.stack(self.alpha, dim=1).reshape(B, t + 1, QS)  # alpha[-1 .. t-1]
        g = col[:, : t + 1].reshape(B, t + 1, QS, QS)
        new = torch.logsumexp(alphas.unsqueeze(-1) + g, dim=(1, 2)).clamp_min(NEG)
        self.alpha.append(new.view(B, self.Q, self.S))
        return self.alpha[-1]

    def reading(self, states: bool = True) -> torch.Tensor:
        """The normalised distribution over (state, top symbol) of the latest step:
        (B, Q·S), or (B, S) over top symbols only with ``states=False``."""
        a = self.alpha[-1]
        if not states:
            a = torch.logsumexp(a, dim=1)
        return torch.softmax(a.reshape(self.B, -1), dim=-1)


def nondeterministic_readings(push: torch.Tensor, repl: torch.Tensor, pop: torch.Tensor, checkpoint: bool | None = None) -> torch.Tensor:
    """Readings of a nondeterministic stack over a whole sequence of given log-weights:
    push, repl (B, L, Q, S, Q, S), pop (B, L, Q, S, Q) -> (B, L, Q, S), the distribution
    over (state, top symbol) after each step."""
    B, L, Q, S = push.shape[:4]
    stack = NondeterministicStack(B, Q, S, L, push, checkpoint=checkpoint)
    out = []
    for t in range(L):
        stack.update(push[:, t], repl[:, t], pop[:, t])
        out.append(stack.reading().view(B, Q, S))
    return torch.stack(out, 1) if out else push.new_zeros(B, 0, Q, S)


class NondeterministicStackRNN(nn.Module):
    """An RNN reading a nondeterministic stack (DuSell & Chiang, 2020).

    At step t the controller reads ``[embed(x_t); r_{t-1}]`` where r is the stack
    reading, the (Q·S) distribution over (PDA state, top stack symbol) summed over all
    PDA runs (r_0 is the initial one-hot). Its state h_t gives the log-weights of every
    push / replace / pop transition (a linear layer; with ``normalize`` a log-softmax
    over each (state, top) row, so weights are probabilities), and the stack takes one
    step (:class:`NondeterministicStack`). Time O(L³) per sequence: keep L, Q, S small.

    Args:
        vocab_size: number of token ids.
        hidden_size: H, the controller's state size and the output size.
        embed_dim: token embedding size (default H).
        num_states: Q, PDA states (default 2).
        stack_symbols: S, stack symbols including the bottom ⊥ (default 2).
        cell: ``"lstm"`` or ``"gru"``.
        normalize: log-softmax the transition weights per (state, top symbol).
        checkpoint: recompute the dynamic program in the backward pass (saves memory);
            ``None``: for sequences longer than :data:`CHECKPOINT_AFTER`.
        padding_idx: the embedding row kept at zero (``None`` for none).
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int = 64,
        embed_dim: int | None = None,
        num_states: int = 2,
        stack_symbols: int = 2,
        cell: str = "lstm",
        normalize: bool = True,
        checkpoint: bool | None = None,
        padding_idx: int | None = 0,
    ):
        super().__init__()
        if num_states < 1 or stack_symbols < 1:
            raise NeurosymError(f"need at least one state and one stack symbol, got Q={num_states}, S={stack_symbols}")
        self.hidden_size, self.Q, self.S = hidden_size, num_states, stack_symbols
        self.normalize, self.checkpoint = normalize, checkpoint
        QS = num_states * stack_symbols
        self.controller = _Controller(vocab_size, embed_dim or hidden_size, QS, hidden_size, cell, padding_idx)
        self.transitions = nn.Linear(hidden_size, QS * (2 * QS + num_states))

    @property
    def output_size(self) -> int:
        return self.hidden_size

    def transition_log_weights(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, H) -> push, repl (B, Q, S, Q, S) and pop (B, Q, S, Q) log-weights."""
        B, Q, S = h.shape[0], self.Q, self.S
        logits = self.transitions(h).view(B, Q * S, 2 * Q * S + Q)
        if self.normalize:
            logits = torch.log_softmax(logits, dim=-1)
        push, repl, pop = logits.split([Q * S, Q * S, Q], dim=-1)
        return push.reshape(B, Q, S, Q, S), repl.reshape(B, Q, S, Q, S), pop.reshape(B, Q, S, Q)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor | None = None, return_readings: bool = False):
        """ids (B, L) -> hidden states (B, L, H); with ``return_readings`` also the stack
        readings (B, L, Q·S) after each step (zero past each sequence's end)."""
        active = _active(ids, lengths)
        B, L = ids.shape
        emb = self.controller.embed_ids(ids, active)
        state = self.controller.initial(B, emb)
        stack = NondeterministicStack(B, self.Q, self.S, max(L, 1), emb, checkpoint=self.checkpoint)
        reading = stack.reading()
        outs, reads = [], []
        for t in range(L):
            act_t = None if active is None else active[:, t]
            new_state = self.controller.step(torch.cat([emb[:, t], reading], dim=-1), state)
            state = _keep(act_t, new_state, state)
            keep = 1.0 if act_t is None else act_t.unsqueeze(-1).to(emb.dtype)
            outs.append(new_state[0] * keep)
            if t < L - 1 or return_readings:  # the last reading feeds nothing
                stack.update(*self.transition_log_weights(new_state[0]))
                reading = _keep(act_t, stack.reading(), reading)
                reads.append(reading * keep)
        hidden = torch.stack(outs, 1) if outs else emb.new_zeros(B, 0, self.hidden_size)
        if return_readings:
            return hidden, (torch.stack(reads, 1) if reads else emb.new_zeros(B, 0, self.Q * self.S))
        return hidden


__all__ = [
    "ACTIONS",
    "NondeterministicStack",
    "NondeterministicStackRNN",
    "StackRNN",
    "nondeterministic_readings",
    "run_stack",
    "stack_update",
    "straight_through",
]
