"""`generate`: batched sampling from a :class:`~neurosym.lm.model.CausalLM` through a
chain of logits processors, with the model's key/value cache.

Each step reads one position per row (the KV cache holds the rest), turns the last
logits (B, V) into scores through every processor in order, samples each row's token,
and advances every processor with the tokens. A row ends

* ``"eos"``: it drew ``eos_id``;
* ``"dead_end"``: the processors left it no token at all (not even ``eos_id``);
* ``"max_len"``: it generated ``max_len`` tokens, or the model's context is full.

Prompts are fed through every processor first, token by token; a prompt a processor
rejects is a :class:`PromptError` naming the prompt, the position, the token and a few
tokens that were allowed there. Then the model reads ``[bos_id] + prompt`` (the part all
rows share in length at once, the rest one position per step alongside the rows that
already sample).

Per row, the result carries the model's log-probability of the generated tokens
(``eos_id`` included, from the raw logits), the log-probability under the processed
distribution they were drawn from, and the grammar's: the sum of every processor's
:meth:`~neurosym.decode.processor.LogitsProcessor.log_prob` (grammar priors), i.e. the
exact ``log P(continuation | prompt)`` of an :class:`~neurosym.decode.priors.FSGPrior`'s
grammar; None when no processor defines one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from neurosym.decode.processor import LogitsProcessor
from neurosym.errors import NeurosymError
from neurosym.lm.model import CausalLM
from neurosym.semiring import LOG_ZERO
from neurosym.vocab import Vocab

STATUS = ("max_len", "eos", "dead_end")
PositionInputs = Callable[[torch.Tensor], Mapping[str, torch.Tensor]]


class PromptError(NeurosymError):
    """A prompt that a processor (a grammar) does not allow."""


@dataclass
class Generation:
    """What :func:`generate` returns; row b of each field belongs to prompt/sample b.

    tokens: the generated token ids (prompt excluded, ``eos_id`` excluded).
    prompts: the prompts as given.
    status: ``"eos"``, ``"dead_end"`` or ``"max_len"`` (see the module docstring).
    model_log_prob: (B,) float64, sum of the model's log-softmax of the generated tokens.
    sample_log_prob: (B,) float64, the same under the processed distribution sampled from.
    grammar_log_prob: (B,) float64 sum of the processors' own log-probabilities, or None.
    """

    tokens: list[list[int]]
    prompts: list[list[int]]
    status: list[str]
    model_log_prob: torch.Tensor
    sample_log_prob: torch.Tensor
    grammar_log_prob: torch.Tensor | None

    def __len__(self) -> int:
        return len(self.tokens)

    def texts(self, vocab: Vocab, with_prompt: bool = True) -> list[str]:
        """Each row decoded with ``vocab`` (the prompt first unless ``with_prompt=False``)."""
        return [vocab.decode((p if with_prompt else []) + t) for p, t in zip(self.prompts, self.tokens)]


def _describe(tokens: Sequence[int], vocab: Vocab | None) -> str:
    if vocab is None:
        return ", ".join(str(t) for t in tokens)
    return ", ".join(f"{vocab.tokens[t]!r} ({t})" if 0 <= t < len(vocab) else str(t) for t in tokens)


def feed_prompts(processors: Sequence[LogitsProcessor], prompts: list[list[int]], device: torch.device, vocab: Vocab | None = None) -> None:
    """Reset every processor for len(prompts) rows and advance it through the prompts,
    token by token (rows whose prompt is shorter are marked done). Raises
    :class:`PromptError` at the first token a processor does not allow."""
    B = len(prompts)
    for p in processors:
        p.reset(B, device)
    longest = max((len(p) for p in prompts), default=0)
    if longest == 0:
        return
    lengths = torch.tensor([len(p) for p in prompts], device=device)
    grid = torch.zeros(B, longest, dtype=torch.long, device=device)
    for b, p in enumerate(prompts):
        grid[b, : len(p)] = torch.tensor(p, dtype=torch.long)
    for t in range(longest):
        done = lengths <= t
        tokens = grid[:, t]
        for proc in processors:
            ok = proc.allowed(tokens) | done
            if not bool(ok.all()):
                b = int((~ok).nonzero()[0])
                allowed = proc.describe_allowed(b)
                shown = _describe(allowed, vocab) if allowed else "no token"
                raise PromptError(f"prompt {b}, position {t}: token {_describe([int(tokens[b])], vocab)} is not allowed by {proc!r}; allowed there: {shown}")
        for proc in processors:
            proc.advance(tokens, done)


def _as_prompts(n: int | None, prompts: Sequence[Sequence[int]] | None) -> list[list[int]]:
    if prompts is None:
        if n is None or n < 0:
            raise NeurosymError(f"generate: give n >= 0 rows or a list of prompts (n={n!r})")
        return [[] for _ in range(n)]
    rows = [[int(t) for t in p] for p in prompts]
    if n is not None and n != len(rows):
        if len(rows) != 1:
            raise NeurosymError(f"generate: n={n} rows but {len(rows)} prompts (give one prompt to repeat it n times)")
        rows = [list(rows[0]) for _ in range(n)]
    return rows


@torch.no_grad()
def generate(
    model: CausalLM,
    n: int | None = None,
    prompts: Sequence[Sequence[int]] | None = None,
    max_len: int = 32,
    processors: Sequence[LogitsProcessor] = (),
    seed: int = 0,
    eos_id: int | None = None,
    bos_id: int | None = None,
    inputs: Mapping[str, Any] | None = None,
    position_inputs: PositionInputs | None = None,
    vocab: Vocab | None = None,
) -> Generation:
    """Sample ``n`` rows (or one per prompt) of at most ``max_len`` new tokens each.

    model: a :class:`CausalLM` (put in eval mode here). processors: applied in order to
    each step's (B, V) scores. seed: the same seed gives the same samples. eos_id: ends
    a row (None: rows end at ``max_len`` only). bos_id: read before each prompt.
    inputs: the adapter's per-row inputs (e.g. ``control=`` (B, C)). position_inputs:
    ``f(ids (B, T)) -> {name: (B, T, ...)}``, the adapter's per-position inputs of every
    position read so far (e.g. :func:`feature_inputs`). vocab: only for error messages.
    """
    rows = _as_prompts(n, prompts)
    B = len(rows)
    if max_len < 0:
        raise NeurosymError(f"generate: max_len must be >= 0, got {max_len}")
    device = next(model.parameters()).device
    model.eval()
    feed_prompts(processors, rows, device, vocab)
    context = [([bos_id] if bos_id is not None else []) + p for p in rows]
    limit = model.max_len
    for b, c in enumerate(context):
        if not c:
            raise NeurosymError(f"generate: prompt {b} is empty and there is no bos_id to start from")
        if len(c) > limit:
            raise NeurosymError(f"generate: prompt {b} needs {len(c)} positions, the model reads at most LMConfig.max_len={limit}")
    model_lp = torch.zeros(B, dtype=torch.float64, device=device)
    sample_lp = torch.zeros(B, dtype=torch.float64, device=device)
    grammar_lp = torch.zeros(B, dtype=torch.float64, device=device)
    has_grammar = False
    if B == 0 or max_len == 0:
        return Generation([[] for _ in rows], rows, ["max_len"] * B, model_lp, sample_lp, None)

    gen = torch.Generator(device=device).manual_seed(seed)
    ctx_len = torch.tensor([len(c) for c in context], device=device)
    width = int(ctx_len.max())
    grid = torch.zeros(B, width, dtype=torch.long, device=device)
    for b, c in enumerate(context):
        grid[b, : len(c)] = torch.tensor(c, dtype=torch.long)

    fed = int(ctx_len.min())  # positions every row has read: the shared prefix is read at once
    history = grid[:, :fed]  # (B, fed): what the model has read, row by row
    live = torch.arange(B, device=device)  # the rows still in the model's batch
    cache = model.new_cache(B)
    logits = _step(model, history, history, cache, live, inputs, position_inputs)  # (B, V)
    finished = torch.zeros(B, dtype=torch.bool, device=device)
    code = torch.zeros(B, dtype=torch.long, device=device)  # index into STATUS
    count = torch.zeros(B, dtype=torch.long, device=device)
    taken, kept = [], []  # per step: (B,) tokens, and which of them are generated tokens
    while True:
        forced = fed < ctx_len  # rows still reading their prompt
        sampling = ~forced & ~finished
        tokens = torch.where(forced, grid[:, min(fed, width - 1)], torch.zeros_like(ctx_len))
        if bool(sampling.any()):
            full = torch.zeros(B, logits.shape[-1], dtype=logits.dtype, device=device)
            full[live] = logits
            scores = full.clone()
            for proc in processors:
                scores = proc(scores)
            dead = sampling & ~(scores > LOG_ZERO).any(dim=1)
            go = sampling & ~dead
            log_p = torch.log_softmax(scores.double(), dim=1)
            safe = torch.where(go[:, None], log_p, 0.0)  # dead and idle rows draw a placeholder
            drawn = torch.multinomial(safe.exp(), 1, generator=gen).squeeze(1)
            tokens = torch.where(go, drawn, tokens)
            pick = tokens[:, None]
            model_lp += torch.where(go, torch.log_softmax(full.double(), dim=1).gather(1, pick).squeeze(1), 0.0)
            sample_lp += torch.where(go, log_p.gather(1, pick).squeeze(1), 0.0)
            for proc in processors:
                lp = proc.log_prob(tokens)
                if lp is not None:
                    has_grammar = True
                    grammar_lp += torch.where(go, lp.to(device=device, dtype=torch.float64), 0.0)
            ended = go & (tokens == eos_id) if eos_id is not None else torch.zeros_like(go)
            for proc in processors:
                proc.advance(tokens, ~go | ended)
            taken.append(tokens)
            kept.append(go & ~ended)
            code = torch.where(ended, STATUS.index("eos"), torch.where(dead, STATUS.index("dead_end"), code))
            count += go.long()
            finished |= dead | ended | (go & (count >= max_len))
        if bool(finished.all()) or fed >= limit:
            break
        # the next position: prompt tokens for forced rows, the drawn ones for the others
        history = torch.cat([history, tokens[:, None]], dim=1)
        fed += 1
        keep = ~finished[live]
        if not bool(keep.all()):
            live_keep = keep.nonzero().flatten()
            cache = cache.select(live_keep)
            live = live[live_keep]
        logits = _step(model, history[live, -1:], history[live], cache, live, inputs, position_inputs)
    if taken:
        ids, mask = torch.stack(taken, dim=1).tolist(), torch.stack(kept, dim=1).tolist()
        out = [[t for t, k in zip(row, ks) if k] for row, ks in zip(ids, mask)]
    else:
        out = [[] for _ in rows]
    status = [STATUS[c] for c in code.tolist()]
    return Generation(out, rows, status, model_lp, sample_lp, grammar_lp if has_grammar else None)


def _step(model, ids, history, cache, live, inputs, position_inputs) -> torch.Tensor:
    """Read ``ids`` (B', T) of the live rows through the cache; the last logits (B', V)."""
    kwargs: dict[str, Any] = {}
    for k, v in (inputs or {}).items():
        kwargs[k] = v[live] if isinstance(v, torch.Tensor) else v
    if position_inputs is not None:
        for k, v in position_inputs(history).items():
            kwargs[k] = v[:, -ids.shape[1] :]
    return model(ids, cache=cache, **kwargs).logits[:, -1]


def feature_inputs(bank, automaton=None, bos: bool = True) -> PositionInputs:
    """``position_inputs`` for a fusion model: ``features=`` the bank's causal features of
    the ids read so far, with the automaton's roles (a compiled FSG's ``roles``) as in
    :func:`neurosym.lm.fusion.make_batch`: the first position (``<bos>`` if ``bos``) has no role."""

    def features(ids: torch.Tensor) -> dict[str, torch.Tensor]:
        roles = None
        if automaton is not None and bank.roles:
            words = ids[:, 1:] if bos else ids
            found = automaton.roles(words)
            if bos:
                found = {r: torch.cat([torch.zeros(ids.shape[0], 1, dtype=torch.bool, device=m.device), m], dim=1) for r, m in found.items()}
            roles = found
        return {"features": bank.featurize(ids, roles)}

    return features


__all__ = ["STATUS", "Generation", "PromptError", "feature_inputs", "feed_prompts", "generate"]
