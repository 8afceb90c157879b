"""Sampling transforms: temperature, top-k, nucleus, repetition penalty, class mixture
(plain, and inside the class's own mass).

Each is a :class:`~neurosym.decode.processor.LogitsProcessor` acting on (B, V) scores,
vectorised over rows and tokens. ``-inf`` (a forbidden token) stays ``-inf``: put them
after masks and priors, which decide what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch

from neurosym.decode.processor import LogitsProcessor, ProcessorContext, number_arg, register_processor
from neurosym.errors import NeurosymError
from neurosym.semiring import LOG_ZERO

EMPTY = 2**62  # RepetitionPenalty: a history slot without a token yet (above any token id)


class Temperature(LogitsProcessor):
    """scores / t: t < 1 sharpens, t > 1 flattens."""

    def __init__(self, t: float):
        if not (isinstance(t, (int, float)) and math.isfinite(t) and t > 0):
            raise NeurosymError(f"Temperature: t must be a finite number > 0, got {t!r}")
        self.t = float(t)

    def __repr__(self) -> str:
        return f"Temperature({self.t:g})"

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        return scores.div_(self.t)


class TopK(LogitsProcessor):
    """Keep the k highest scores of each row (exactly k: ties broken by ``topk``)."""

    def __init__(self, k: int):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise NeurosymError(f"TopK: k must be a positive integer, got {k!r}")
        self.k = k

    def __repr__(self) -> str:
        return f"TopK({self.k})"

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        top = scores.topk(min(self.k, scores.shape[-1]), dim=-1)
        return torch.full_like(scores, LOG_ZERO).scatter_(-1, top.indices, top.values)


def nucleus_keep(scores: torch.Tensor, p: float) -> torch.Tensor:
    """(B, V) bool: the smallest set of most probable tokens whose probability reaches
    ``p`` (token i is kept when the tokens ranked above it hold less than ``p``; the most
    probable token is always kept). Forbidden tokens are never kept."""
    ordered, order = scores.sort(dim=-1, descending=True)
    probs = torch.softmax(ordered.double(), dim=-1)
    before = probs.cumsum(dim=-1) - probs  # mass ranked strictly above each token (exactly 0 for the first)
    keep_sorted = (before < p) & (ordered > LOG_ZERO)
    return torch.empty_like(keep_sorted).scatter_(-1, order, keep_sorted)


class Nucleus(LogitsProcessor):
    """Nucleus (top-p) sampling (Holtzman et al. 2020): forbid every token outside the
    smallest high-probability set whose mass reaches ``p``."""

    def __init__(self, p: float):
        if not (isinstance(p, (int, float)) and 0 < p <= 1):
            raise NeurosymError(f"Nucleus: p must be in (0, 1], got {p!r}")
        self.p = float(p)

    def __repr__(self) -> str:
        return f"Nucleus({self.p:g})"

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        if self.p >= 1:
            return scores
        return scores.masked_fill_(~nucleus_keep(scores, self.p), LOG_ZERO)


class RepetitionPenalty(LogitsProcessor):
    """The CTRL penalty (Keskar et al. 2019) on the tokens among each row's last
    ``last_k`` tokens (prompt included): a positive score is divided by ``factor``, a
    negative one multiplied by it (``factor > 1`` discourages repeats)."""

    def __init__(self, last_k: int, factor: float):
        if isinstance(last_k, bool) or not isinstance(last_k, int) or last_k < 1:
            raise NeurosymError(f"RepetitionPenalty: last_k must be a positive integer, got {last_k!r}")
        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
            raise NeurosymError(f"RepetitionPenalty: factor must be a finite number > 0, got {factor!r}")
        self.last_k, self.factor = last_k, float(factor)
        self.history = torch.empty(0, last_k, dtype=torch.long)  # each row's last k tokens; EMPTY before the first ones
        self._padded: torch.Tensor | None = None  # (B, V + 1) scores plus a padding column for the empty slots, reused

    def __repr__(self) -> str:
        return f"RepetitionPenalty(last_k={self.last_k}, factor={self.factor:g})"

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        self.history = torch.full((batch_size, self.last_k), EMPTY, dtype=torch.long, device=device)
        self._padded = None

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        shifted = torch.cat([self.history[:, 1:], tokens.to(self.history.device).long()[:, None]], dim=1)
        self.history = shifted if done is None else torch.where(done.to(shifted.device)[:, None], self.history, shifted)

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        B, V = scores.shape
        buf = self._padded
        if buf is None or buf.shape != (B, V + 1) or buf.dtype != scores.dtype or buf.device != scores.device:
            buf = self._padded = torch.zeros(B, V + 1, dtype=scores.dtype, device=scores.device)
        hist = self.history.to(scores.device).clamp(max=V)  # empty slots: the padding column V
        buf[:, :V].copy_(scores)
        seen = buf.gather(1, hist)  # (B, k) the scores of the recent tokens (a token twice: the same value twice)
        buf.scatter_(1, hist, torch.where(seen > 0, seen / self.factor, seen * self.factor))
        return scores.copy_(buf[:, :V])


class ClassMixture(LogitsProcessor):
    """Mix the model's distribution with a uniform one over a class of tokens, then
    truncate (mix-then-truncate, as in the semantic-fusion design):

        p = (1 - alpha) softmax(scores / T) + alpha * uniform(class ∩ allowed)

    then, with ``top_p``, nucleus truncation of p. Tokens forbidden upstream (``-inf``)
    stay forbidden; a row where no class token is allowed keeps the model's distribution.
    The output is log p (truncated tokens ``-inf``).

    classes: token ids, or several collections of ids (their union is the class).
    """

    def __init__(self, classes: Iterable[int] | Iterable[Iterable[int]], alpha: float, T: float = 1.0, top_p: float | None = None):
        ids: set[int] = set()
        for c in classes:
            if isinstance(c, torch.Tensor):
                ids.update(int(x) for x in c.flatten().tolist())
            elif isinstance(c, Iterable):
                ids.update(int(x) for x in c)
            else:
                ids.add(int(c))
        if not ids or min(ids) < 0:
            raise NeurosymError(f"ClassMixture: classes must name at least one token id >= 0, got {sorted(ids)[:5]}")
        if not (isinstance(alpha, (int, float)) and 0 <= alpha <= 1):
            raise NeurosymError(f"ClassMixture: alpha must be in [0, 1], got {alpha!r}")
        if not (isinstance(T, (int, float)) and math.isfinite(T) and T > 0):
            raise NeurosymError(f"ClassMixture: T must be a finite number > 0, got {T!r}")
        if top_p is not None and not (0 < top_p <= 1):
            raise NeurosymError(f"ClassMixture: top_p must be in (0, 1], got {top_p!r}")
        self.ids = torch.tensor(sorted(ids), dtype=torch.long)
        self.alpha, self.T, self.top_p = float(alpha), float(T), top_p

    def __repr__(self) -> str:
        return f"ClassMixture({len(self.ids)} tokens, alpha={self.alpha:g}, T={self.T:g}, top_p={self.top_p})"

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        B, V = scores.shape
        if int(self.ids[-1]) >= V:
            raise NeurosymError(f"ClassMixture: token id {int(self.ids[-1])} is outside the vocabulary of {V} tokens")
        allowed = scores > LOG_ZERO
        member = torch.zeros(V, dtype=torch.bool, device=scores.device)
        member[self.ids.to(scores.device)] = True
        in_class = member[None, :] & allowed  # (B, V)
        count = in_class.sum(dim=1, keepdim=True)
        model = torch.softmax(scores.double() / self.T, dim=1)
        uniform = in_class.double() / count.clamp(min=1)
        p = torch.where(count > 0, (1 - self.alpha) * model + self.alpha * uniform, model)
        out = p.log().to(scores.dtype).masked_fill(~allowed, LOG_ZERO)
        if self.top_p is not None and self.top_p < 1:
            out = out.masked_fill(~nucleus_keep(out, self.top_p), LOG_ZERO)
        return out


class WithinClassMixture(LogitsProcessor):
    """The class mixture inside the class's own mass: with ``q = softmax(scores / T)``
    over the allowed tokens and ``Q_C`` its mass on the allowed class tokens ``C``,

        p(v) = (1 - alpha) q(v) + alpha * Q_C / |C|   for v in C,   p(v) = q(v) otherwise,

    then nucleus ``top_p`` of p (mix, then truncate). Where only the class is allowed
    (``Q_C = 1``) this is :class:`~neurosym.decode.ClassMixture`; where the class competes
    with other tokens (``clause.fsg``'s optional intensifier: an adjective or an
    intensifier may come next) the model keeps its own odds of drawing a class token and
    the mixture only changes which one. So every drawn class token is held out with
    probability ``alpha * |held-out| / |C| + (1 - alpha) * (the model's own share)``
    before the nucleus, wherever it is drawn."""

    def __init__(self, class_ids: Sequence[int], alpha: float, T: float = 1.0, top_p: float | None = None):
        self.spec = ClassMixture(class_ids, alpha, T, top_p)  # checks the arguments, holds the ids
        self.ids, self.alpha, self.T, self.top_p = self.spec.ids, float(alpha), float(T), top_p

    def __repr__(self) -> str:
        return f"WithinClassMixture({len(self.ids)} tokens, alpha={self.alpha:g}, T={self.T:g}, top_p={self.top_p})"

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        V = scores.shape[-1]
        if int(self.ids[-1]) >= V:
            raise NeurosymError(f"WithinClassMixture: token id {int(self.ids[-1])} is outside the vocabulary of {V} tokens")
        member = torch.zeros(V, dtype=torch.bool, device=scores.device)
        member[self.ids.to(scores.device)] = True
        allowed = scores > LOG_ZERO
        in_class = member[None, :] & allowed
        count = in_class.sum(dim=1, keepdim=True).clamp(min=1)
        q = torch.softmax(scores.double() / self.T, dim=1)
        mass = (q * in_class).sum(dim=1, keepdim=True)
        p = torch.where(in_class, (1 - self.alpha) * q + self.alpha * mass / count, q)
        out = p.log().to(scores.dtype).masked_fill(~allowed, LOG_ZERO)
        if self.top_p is not None and self.top_p < 1:
            out = out.masked_fill(~nucleus_keep(out, self.top_p), LOG_ZERO)
        return out


# ---------------------------------------------------------------------- named processors
def _temperature(arg: str | None, ctx: ProcessorContext) -> Temperature:
    return Temperature(number_arg("temperature", arg))


def _top_k(arg: str | None, ctx: ProcessorContext) -> TopK:
    return TopK(int(number_arg("top-k", arg, int)))


def _top_p(arg: str | None, ctx: ProcessorContext) -> Nucleus:
    return Nucleus(number_arg("top-p", arg))


def _repetition(arg: str | None, ctx: ProcessorContext) -> RepetitionPenalty:
    last_k, sep, factor = (arg or "").partition(",")
    if not sep:
        raise NeurosymError("--processor repetition-penalty: expected repetition-penalty:LAST_K,FACTOR")
    return RepetitionPenalty(int(number_arg("repetition-penalty", last_k, int)), number_arg("repetition-penalty", factor))


register_processor("temperature", _temperature, "temperature:T: divide the scores by T")
register_processor("top-k", _top_k, "top-k:K: keep the K best tokens")
register_processor("top-p", _top_p, "top-p:P: nucleus sampling, keep the smallest set of mass P")
register_processor("repetition-penalty", _repetition, "repetition-penalty:LAST_K,FACTOR: penalise the last LAST_K tokens")


__all__ = ["ClassMixture", "Nucleus", "RepetitionPenalty", "Temperature", "TopK", "WithinClassMixture", "nucleus_keep"]
