"""Evaluation metrics of the semantic-fusion recipe (no label smoothing anywhere).

Notation: logits (B, L, V), targets (B, L) with ``pad_id`` at padding,
``NLL_t = -log softmax(logits_t)[y_t]`` (natural log), ``N`` = non-pad positions.

* ``perplexity``  = ``exp(sum_{t in N} NLL_t / |N|)``, pooled over the whole corpus
  (a total over all tokens, not a mean of per-sentence perplexities).
* ``seen_only_ppl`` = the same restricted to ``S = {t in N: y_t in seen_ids}``: the
  positions whose target is a token seen in training (held-out adjectives excluded).
  The probabilities are still the model's full-vocabulary softmax (not renormalised
  over the seen tokens): only the positions that count change.
* ``focus_token_ce`` = ``mean_{t: y_t in focus_ids} NLL_t`` (e.g. at adjectives); NaN
  when no target is a focus token.
* ``semantic_mse`` = ``mean_{t in mask, f} (pred_tf - target_tf)^2``.
* ``floor_ppl``: the perplexity of the grammar itself, the floor any LM trained on its
  samples tends to at best. The LM reads ``<bos> w1 .. wn`` and predicts
  ``w1 .. wn <eos>``: n + 1 predictions whose true NLLs sum to ``-log P(x)`` (the
  ``<eos>`` prediction pays for the grammar's stop event). Over a large corpus
  ``sum_i -log P(x_i) / sum_i (|x_i| + 1) -> H(X) / (E|X| + 1)``, so the matching floor is
  ``exp(H / (E|X| + 1))`` = ``Entropy.ppl_floor_with_eos`` (``with_eos=True``).
  ``exp(H / E|X|)`` (``with_eos=False``) divides the same total by the words only;
  compared with a PPL counted over n + 1 targets it is too high, and a model
  would seem to beat it. :func:`oracle_logits` turns the grammar into an "LM" whose
  PPL under :func:`perplexity` converges to the ``with_eos`` floor (tests check this).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurosym.errors import NeurosymError


# ---------------------------------------------------------------------- per position
def token_nll(logits: Tensor, targets: Tensor) -> Tensor:
    """NLL_t = -log softmax(logits)[targets]: (B, L, V), (B, L) -> (B, L) float64."""
    logp = F.log_softmax(logits.double(), dim=-1)
    return -logp.gather(-1, targets.long().clamp(min=0).unsqueeze(-1)).squeeze(-1)


def ppl_from_nll(total_nll: float, count: int) -> float:
    """exp(total / count); NaN when count is 0."""
    return math.exp(total_nll / count) if count else float("nan")


def _ids(ids, device) -> Tensor:
    return torch.as_tensor(list(ids) if not isinstance(ids, Tensor) else ids, dtype=torch.long, device=device)


# ---------------------------------------------------------------------- metrics
def perplexity(logits: Tensor, targets: Tensor, pad_id: int = 0) -> float:
    """exp(total NLL over non-pad targets / their number); no smoothing."""
    keep = targets != pad_id
    return ppl_from_nll(float(token_nll(logits, targets)[keep].sum()), int(keep.sum()))


def seen_only_ppl(logits: Tensor, targets: Tensor, seen_ids: Tensor | Sequence[int], pad_id: int = 0) -> float:
    """Perplexity over the non-pad positions whose target is in ``seen_ids`` (see module doc)."""
    keep = (targets != pad_id) & torch.isin(targets, _ids(seen_ids, targets.device))
    return ppl_from_nll(float(token_nll(logits, targets)[keep].sum()), int(keep.sum()))


def focus_token_ce(logits: Tensor, targets: Tensor, focus_ids: Tensor | Sequence[int]) -> float:
    """Mean NLL at positions whose target is a focus token (e.g. an adjective); NaN if none."""
    keep = torch.isin(targets, _ids(focus_ids, targets.device))
    n = int(keep.sum())
    return float(token_nll(logits, targets)[keep].sum()) / n if n else float("nan")


def semantic_mse(aux_pred: Tensor, target: Tensor, mask: Tensor) -> float:
    """Mean squared error over masked positions (B, L) and all features: (B, L, F) x2 -> float; NaN if mask is empty."""
    mask = mask.bool()
    n = int(mask.sum()) * aux_pred.shape[-1]
    return float(((aux_pred.double() - target.double()) ** 2)[mask].sum()) / n if n else float("nan")


# ---------------------------------------------------------------------- the grammar's floor
def floor_ppl(automaton, with_eos: bool = True) -> float:
    """The grammar's perplexity floor from its exact entropy (see module doc):
    ``exp(H / (E|X| + 1))`` with ``with_eos`` (the LM predicts ``<eos>``), else ``exp(H / E|X|)``."""
    h = automaton.entropy()
    return h.ppl_floor_with_eos if with_eos else h.ppl_floor


def oracle_logits(automaton, ids: Tensor, eos_id: int | None = None) -> Tensor:
    """The grammar's exact next-token log-probabilities as LM logits.

    ids (B, L) = ``<bos> w1 .. <pad>...`` -> (B, L, V) float64: position t holds
    ``log P(v | w1..wt)`` for every token v, with the stop probability in the ``<eos>``
    column (they sum to 1). Rows at dead states (padding, after ``<eos>``, rejected
    prefixes) are 0 (uniform); mask them out with the targets.
    """
    if eos_id is None:
        if "<eos>" not in automaton.vocab.tokens:
            raise NeurosymError("the automaton's vocabulary has no <eos> token; pass eos_id=")
        eos_id = automaton.vocab.tokens.index("<eos>")
    ids = torch.as_tensor(ids, dtype=torch.long)
    B, L = ids.shape
    after = automaton.run(ids[:, 1:]) if L > 1 else torch.empty(B, 0, dtype=torch.long)
    states = torch.cat([torch.full((B, 1), automaton.start, dtype=torch.long), after], dim=1)  # (B, L)
    table = automaton.log_probs.clone()  # (Q, V)
    table[:, eos_id] = automaton.final_log_probs
    out = table[states.clamp(min=0)]
    return torch.where((states >= 0)[..., None], out, torch.zeros((), dtype=out.dtype))


# ---------------------------------------------------------------------- a whole evaluation
@torch.no_grad()
def evaluate(
    model: nn.Module,
    batches: Iterable[Mapping[str, Tensor]],
    seen_ids: Tensor | Sequence[int] | None = None,
    focus_ids: Tensor | Sequence[int] | None = None,
    input_keys: Sequence[str] = ("features", "control"),
    aux_head: str = "aux",
    pad_id: int | None = None,
) -> dict[str, float]:
    """Corpus-level metrics of a :class:`~neurosym.lm.model.CausalLM` over batches.

    ``model`` may be any module returning an object with ``logits`` and ``extras``; the
    pad id defaults to ``model.config.pad_id`` (else 0).

    Each batch is a dict with ``ids`` and ``targets`` (B, L) and optionally the model
    inputs named in ``input_keys`` (passed as keyword arguments when present) and
    ``aux_targets`` (B, L, F) (the layout of :func:`neurosym.lm.fusion.make_batch`).
    Sums are pooled over all batches before dividing. Returns

    * ``ppl``, ``nll`` (mean per-token NLL), ``tokens`` (non-pad targets): always;
    * ``seen_ppl``: with ``seen_ids``; ``focus_ce``: with ``focus_ids``;
    * ``sem_mse``: when the model has a head ``aux_head`` and batches have ``aux_targets``.

    The model runs in eval mode (its previous mode is restored).
    """
    pad = getattr(getattr(model, "config", None), "pad_id", 0) if pad_id is None else pad_id
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    seen = None if seen_ids is None else _ids(seen_ids, device)
    focus = None if focus_ids is None else _ids(focus_ids, device)
    sums = {"nll": 0.0, "n": 0, "seen": 0.0, "n_seen": 0, "focus": 0.0, "n_focus": 0, "sq": 0.0, "n_sq": 0}
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            ids, targets = batch["ids"].to(device), batch["targets"].to(device)
            inputs = {k: batch[k].to(device) for k in input_keys if k in batch}
            out = model(ids, **inputs)
            nll = token_nll(out.logits, targets)
            keep = targets != pad
            sums["nll"] += float(nll[keep].sum())
            sums["n"] += int(keep.sum())
            if seen is not None:
                k = keep & torch.isin(targets, seen)
                sums["seen"] += float(nll[k].sum())
                sums["n_seen"] += int(k.sum())
            if focus is not None:
                k = keep & torch.isin(targets, focus)
                sums["focus"] += float(nll[k].sum())
                sums["n_focus"] += int(k.sum())
            if aux_head in out.extras and "aux_targets" in batch:
                pred, target = out.extras[aux_head].double(), batch["aux_targets"].to(device).double()
                sums["sq"] += float(((pred - target) ** 2)[keep].sum())
                sums["n_sq"] += int(keep.sum()) * pred.shape[-1]
    finally:
        model.train(was_training)
    result = {"ppl": ppl_from_nll(sums["nll"], sums["n"]), "nll": sums["nll"] / sums["n"] if sums["n"] else float("nan"), "tokens": sums["n"]}
    if seen is not None:
        result["seen_ppl"] = ppl_from_nll(sums["seen"], sums["n_seen"])
    if focus is not None:
        result["focus_ce"] = sums["focus"] / sums["n_focus"] if sums["n_focus"] else float("nan")
    if sums["n_sq"]:
        result["sem_mse"] = sums["sq"] / sums["n_sq"]
    return result


# ---------------------------------------------------------------------- real-text metrics (issue 17)
def same_pos_miss_rate(predicted: Tensor, gold: Tensor, tags: Sequence[str | None]) -> dict[str, float]:
    """Among the wrong top-1 predictions, the share whose predicted word has the gold word's tag.

    predicted, gold (...) long token ids; ``tags[i]`` is token i's part of speech (e.g. its
    majority UPOS in UD train) or ``None`` (no tag: specials, ``<unk>``, unseen words).
    Counted: positions with ``predicted != gold`` where both tokens have a tag. Returns
    ``same_pos_miss`` (NaN when nothing counts), ``misses`` (counted positions) and
    ``misses_untagged`` (wrong predictions left out for want of a tag).
    """
    names = sorted({t for t in tags if t is not None})
    code = {t: i for i, t in enumerate(names)}
    table = torch.tensor([code[t] if t is not None else -1 for t in tags], dtype=torch.long)
    p, g = predicted.reshape(-1).long().cpu(), gold.reshape(-1).long().cpu()
    wrong = p != g
    tp, tg = table[p], table[g]
    counted = wrong & (tp >= 0) & (tg >= 0)
    n = int(counted.sum())
    same = int((counted & (tp == tg)).sum())
    return {"same_pos_miss": same / n if n else float("nan"), "misses": n, "misses_untagged": int(wrong.sum()) - n}


def embedding_health(W: Tensor) -> dict[str, float]:
    """Health of an embedding matrix W (V, D), V >= 2, in float64.

    * ``mean_cosine``: the mean of ``cos(W[i], W[j])`` over ordered pairs i != j
      (``(|sum_i w_i / |w_i||^2 - V) / (V (V - 1))``; zero rows count as cosine 0);
      near 1 means the rows have collapsed onto one direction (anisotropy).
    * ``effective_rank``: ``exp(H(s / sum s))`` of W's singular values s (Roy & Vetterli,
      2007): D for a matrix using every direction alike, 1 for rank one.
    """
    W = W.detach().double().cpu()
    V = W.shape[0]
    if W.ndim != 2 or V < 2:
        raise NeurosymError(f"embedding_health: expected a (V >= 2, D) matrix, got {tuple(W.shape)}")
    norms = W.norm(dim=-1, keepdim=True)
    unit = torch.where(norms > 0, W / norms.clamp_min(1e-300), torch.zeros_like(W))
    total = unit.sum(0)
    mean_cos = (float(total @ total) - float((unit * unit).sum())) / (V * (V - 1))
    s = torch.linalg.svdvals(W)
    p = s / s.sum() if float(s.sum()) > 0 else s
    eff = math.exp(float(-(torch.xlogy(p, p)).sum())) if float(s.sum()) > 0 else 0.0
    return {"mean_cosine": mean_cos, "effective_rank": eff}


def reliability_bins(confidence: Tensor, correct: Tensor, bins: int = 15) -> dict[str, list[float]]:
    """A reliability diagram's data: top-1 probabilities in ``bins`` equal-width bins of
    (0, 1] (bin b holds ``e_b < c <= e_(b+1)`` for the float64 edges ``e_b = b / M``; c = 0
    goes to the first), per bin the
    ``count``, the mean ``confidence`` and the ``accuracy`` (both NaN for an empty bin),
    and the bins' ``edges`` (M + 1). confidence (...) in [0, 1], correct (...) bool."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise NeurosymError(f"reliability bins must be an integer >= 1, got {bins!r}")
    c = confidence.reshape(-1).double().cpu()
    ok = correct.reshape(-1).double().cpu()
    edges = torch.tensor([b / bins for b in range(bins + 1)], dtype=torch.float64)
    idx = (torch.searchsorted(edges, c) - 1).clamp(0, bins - 1)  # e_(i-1) < c <= e_i: bin i - 1, exactly at the edges
    count = torch.zeros(bins, dtype=torch.float64).index_add_(0, idx, torch.ones_like(c))
    conf = torch.zeros(bins, dtype=torch.float64).index_add_(0, idx, c)
    acc = torch.zeros(bins, dtype=torch.float64).index_add_(0, idx, ok)
    nan = torch.full_like(count, float("nan"))
    return {"edges": edges.tolist(), "count": count.tolist(),
            "confidence": torch.where(count > 0, conf / count.clamp_min(1), nan).tolist(),
            "accuracy": torch.where(count > 0, acc / count.clamp_min(1), nan).tolist()}


def expected_calibration_error(confidence: Tensor, correct: Tensor, bins: int = 15) -> float:
    """ECE of top-1 probabilities: ``sum_b |B_b| / n * |accuracy(B_b) - mean confidence(B_b)|``
    over the bins of :func:`reliability_bins`. confidence (...) in [0, 1], correct (...)
    bool -> float (NaN if empty)."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise NeurosymError(f"expected_calibration_error: bins must be an integer >= 1, got {bins!r}")
    if confidence.numel() == 0:
        return float("nan")
    return ece_of_bins(reliability_bins(confidence, correct, bins))


def ece_of_bins(r: dict[str, list[float]]) -> float:
    """The ECE of :func:`reliability_bins`' data (several runs' bins may be pooled first
    with :func:`pool_reliability`); NaN when every bin is empty."""
    n = sum(r["count"])
    if n == 0:
        return float("nan")
    return sum(k * abs(a - c) for k, a, c in zip(r["count"], r["accuracy"], r["confidence"]) if k > 0) / n


def pool_reliability(runs: Sequence[dict[str, list[float]]]) -> dict[str, list[float]]:
    """Several runs' :func:`reliability_bins` (the same edges) as one: counts added, the
    means weighted by count."""
    if not runs or any(r["edges"] != runs[0]["edges"] for r in runs):
        raise NeurosymError("pool_reliability: expected one or more reliability diagrams with the same bins")
    count = [sum(r["count"][b] for r in runs) for b in range(len(runs[0]["count"]))]
    def mean(key: str) -> list[float]:
        return [sum(r["count"][b] * r[key][b] for r in runs if r["count"][b] > 0) / count[b] if count[b] > 0 else float("nan")
                for b in range(len(count))]
    return {"edges": list(runs[0]["edges"]), "count": count, "confidence": mean("confidence"), "accuracy": mean("accuracy")}


__all__ = [
    "ece_of_bins",
    "embedding_health",
    "evaluate",
    "expected_calibration_error",
    "floor_ppl",
    "focus_token_ce",
    "oracle_logits",
    "perplexity",
    "pool_reliability",
    "ppl_from_nll",
    "reliability_bins",
    "same_pos_miss_rate",
    "semantic_mse",
    "seen_only_ppl",
    "token_nll",
]
