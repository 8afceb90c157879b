"""The ``reinforce`` method: a GRU policy writes regexes as prefix-order tokens.

Tokens: the leaves, ``*``, ``+``, ``?`` (one operand), ``.`` (concatenation) and ``|``
(two operands). A sequence is complete when no operand is pending; tokens that could
not be completed within ``max_tokens`` are masked out, so every sample is a regex.
The policy (token embedding + pending-operand count -> GRU -> logits) is trained by
REINFORCE with reward ``-objective`` (:func:`~neurosym.synth.distance.objective`),
a moving-average baseline and an entropy bonus. Seeded; stops at the time budget or
when a sample satisfies every example.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from neurosym.semiring import LOG_ZERO
from neurosym.synth import clock
from neurosym.synth import regex_ast as ra
from neurosym.synth.beam import Progress, Scorer
from neurosym.synth.bestfirst import default_leaves
from neurosym.synth.simplify import simplify

OPS = [("*", 1), ("+", 1), ("?", 1), (".", 2), ("|", 2)]


class Policy(nn.Module):
    def __init__(self, n_tokens: int, hidden: int = 64, max_tokens: int = 24):
        super().__init__()
        self.embed = nn.Embedding(n_tokens + 1, hidden)  # + a start token
        self.pending = nn.Embedding(max_tokens + 2, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, n_tokens)
        self.hidden = hidden

    def step(self, prev: torch.Tensor, pending: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.cell(self.embed(prev) + self.pending(pending), h)
        return self.out(h), h


class _Adam:
    """A minimal Adam (``torch.optim`` imports the compiler stack on first use, which
    costs seconds of a short time budget)."""

    def __init__(self, params: list[torch.Tensor], lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params, self.lr, self.betas, self.eps, self.t = params, lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            mhat = m / (1 - b1**self.t)
            vhat = v / (1 - b2**self.t)
            p.sub_(self.lr * mhat / (vhat.sqrt() + self.eps))


def decode(tokens: list[int], vocab: list) -> ra.Node:
    """Prefix-order token ids -> AST."""
    pos = 0

    def rec() -> ra.Node:
        nonlocal pos
        kind = vocab[tokens[pos]]
        pos += 1
        if isinstance(kind, ra.Node):
            return kind
        if kind == "*":
            return ra.Star(rec())
        if kind == "+":
            return ra.Plus(rec())
        if kind == "?":
            return ra.Opt(rec())
        a = rec()
        b = rec()
        return ra.Cat((a, b)) if kind == "." else ra.Alt((a, b))

    return rec()


def search(
    positives: Sequence[str],
    negatives: Sequence[str] = (),
    time_budget: float = 10.0,
    seed: int = 0,
    lam: float = 0.02,
    progress: bool = False,
    leaves: Sequence[ra.Node] | None = None,
    batch: int = 32,
    max_tokens: int = 24,
    lr: float = 3e-3,
    entropy: float = 0.01,
    baseline_decay: float = 0.9,
) -> tuple[ra.Node, dict]:
    """Run the ``reinforce`` method; returns ``(best regex, info)``
    (a :class:`~neurosym.synth.methods.Search`, registered in :mod:`neurosym.synth.methods`)."""
    t_end = clock.now() + time_budget
    leaves = list(leaves) if leaves is not None else default_leaves(positives, negatives)
    vocab: list = list(leaves) + [op for op, _ in OPS]
    arity = torch.tensor([0] * len(leaves) + [a for _, a in OPS])
    n_tok = len(vocab)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny network: extra threads only spin (and slow a shared machine)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    policy = Policy(n_tok, max_tokens=max_tokens)
    opt = _Adam(list(policy.parameters()), lr=lr)
    scorer = Scorer(positives, negatives, lam)
    baseline = None
    best, best_score = leaves[0], float("inf")
    steps = 0
    bar = Progress(progress, time_budget, "synth reinforce")
    try:
        while clock.now() < t_end:
            h = torch.zeros(batch, policy.hidden)
            prev = torch.full((batch,), n_tok, dtype=torch.long)
            pending = torch.ones(batch, dtype=torch.long)
            logp = torch.zeros(batch)
            ent = torch.zeros(batch)
            seqs = [[] for _ in range(batch)]
            for t in range(max_tokens):
                active = pending > 0
                if not active.any():
                    break
                logits, h = policy.step(prev, pending.clamp(max=max_tokens + 1), h)
                # a token keeps the sequence completable if pending - 1 + arity <= tokens left after it
                left = max_tokens - t - 1
                ok = (pending[:, None] - 1 + arity[None, :]) <= left
                logits = logits.masked_fill(~ok, LOG_ZERO)
                dist = torch.distributions.Categorical(logits=logits)
                tok = torch.multinomial(dist.probs, 1, generator=gen).squeeze(1)
                logp = logp + torch.where(active, dist.log_prob(tok), torch.zeros(()))
                ent = ent + torch.where(active, dist.entropy(), torch.zeros(()))
                for b in torch.nonzero(active).flatten().tolist():
                    seqs[b].append(int(tok[b]))
                pending = torch.where(active, pending - 1 + arity[tok], pending)
                prev = torch.where(active, tok, prev)
            rewards = []
            for s in seqs:
                r = simplify(decode(s, vocab))
                sc = scorer(r)
                if sc < best_score:
                    best, best_score = r, sc
                rewards.append(-min(sc, 50.0))
            rew = torch.tensor(rewards)
            mean = float(rew.mean())
            baseline = mean if baseline is None else baseline_decay * baseline + (1 - baseline_decay) * mean
            loss = -((rew - baseline) * logp).mean() - entropy * ent.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            bar.tick(f"step {steps} best {best_score:.2f}")
            if scorer.solved(best):
                break
    finally:
        bar.close()
        torch.set_num_threads(threads)
    return best, {"steps": steps, "evaluations": scorer.evaluations}


__all__ = ["Policy", "decode", "search"]
