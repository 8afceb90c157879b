"""``neurosym bench train``: time per training step of the LM variants at the same size.

All variants share the semantic-KL recipe's architecture (:class:`~neurosym.experiments.semantic_kl.ModelSection`
defaults) and one batch of WikiText-2 windows (trained-on split: valid.txt), so only what a
variant adds is timed:

* ``baseline``: :class:`~neurosym.lm.model.CausalLM`, fused cross-entropy;
* ``fusion``: the same LM with the semantic-fusion adapter and auxiliary head
  (:func:`~neurosym.lm.fusion.build_fusion_lm`) over ``lexicons/sentiment.lex``'s features
  of the batch (real text has no grammar roles: the role inputs are all false), its loss
  CE + the auxiliary BCE;
* ``semantic-kl``: the baseline LM with :func:`~neurosym.lm.semantic_kl.semantic_kl_terms`
  (cosine, T = 0.1, lam = 0.5, the hidden-state fast path), the recipe's ``kl-T0.1``;
* ``idea-gating``: the baseline LM with the tied idea head and gate as its output layer
  (:class:`~neurosym.lm.idea.IdeaOutput`, default :class:`~neurosym.lm.idea.IdeaConfig`),
  its loss CE of the gated logits + the idea BCE (stop words: the 50 most frequent tokens of the batch),
  computed as the recipe does (:func:`~neurosym.lm.idea.idea_training_loss`: the fused objective).

A step is forward, loss, backward and the AdamW update. Steps are interleaved across the
variants (a load change on a shared machine hits all alike) and timed in **process CPU
time** (``time.process_time``: time this process spent computing, not waiting for a
core), with the best and the median of ``repeats`` steps; ratios are to the baseline's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from neurosym.compile.lexicon import load_lexicon
from neurosym.data import shipped_file
from neurosym.data.text import WordVocab, corpus_path, lm_windows, read_lines
from neurosym.errors import NeurosymError
from neurosym.experiments.semantic_kl import RECIPE_DATA, RECIPE_OPTIM, ModelSection
from neurosym.lm.fusion import build_fusion_lm
from neurosym.lm.idea import IdeaConfig, IdeaOutput, idea_training_loss, stop_word_ids
from neurosym.lm.losses import aux_bce
from neurosym.lm.model import CausalLM, LMConfig
from neurosym.lm.semantic_kl import semantic_kl_terms
from neurosym.lm.train import param_groups
from neurosym.vocab import Vocab

VARIANTS = ("baseline", "fusion", "semantic-kl", "idea-gating")


def _setup(variant: str, vocab: WordVocab, ids: torch.Tensor, targets: torch.Tensor, m: ModelSection, bank) -> tuple[torch.nn.Module, Callable]:
    lm = LMConfig(vocab_size=len(vocab), d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads, d_ff=m.d_ff,
                  dropout=m.dropout, max_len=ids.shape[1], positions=m.positions, pad_id=0)
    V = len(vocab)
    if variant == "baseline":
        model = CausalLM(lm)

        def loss() -> torch.Tensor:
            return F.cross_entropy(model(ids).logits.reshape(-1, V).float(), targets.reshape(-1))
    elif variant == "semantic-kl":
        model = CausalLM(lm)

        def loss() -> torch.Tensor:
            out = model(ids)
            kl, ce = semantic_kl_terms(out.logits, targets, model.lm_head.weight, 0.1, "cosine", hidden=out.hidden)
            return 0.5 * kl + 0.5 * ce
    elif variant == "fusion":
        no_role = torch.zeros(ids.shape, dtype=torch.bool)
        roles = {"head": no_role, "object": no_role, "subject": no_role}
        features = bank.featurize(ids, roles)  # (B, L, F)
        aux_targets = bank.featurize(targets, roles)
        model = build_fusion_lm(lm, features.shape[-1], 0, aux_hidden=128)

        def loss() -> torch.Tensor:
            out = model(ids, features=features)
            ce = F.cross_entropy(out.logits.reshape(-1, V).float(), targets.reshape(-1))
            return ce + aux_bce(out.extras["aux"], aux_targets, torch.ones(ids.shape, dtype=torch.bool), 0.5)
    elif variant == "idea-gating":
        idea = IdeaConfig()
        model = CausalLM(lm, output=IdeaOutput(m.d_model, V, idea))
        stop = stop_word_ids(ids, idea.stop_words, V, exclude=(0,))

        def loss() -> torch.Tensor:
            return idea_training_loss(model, ids, targets, stop, 0)[0]  # the recipe's fused CE(gated) + weight * BCE
    else:
        raise NeurosymError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    return model, loss


def run(
    variants: Sequence[str] = VARIANTS, repeats: int = 20, warmup: int = 3, threads: int | None = 1,
    batch_size: int = RECIPE_OPTIM["batch_size"], window: int = RECIPE_DATA["window"], min_freq: int = RECIPE_DATA["min_freq"],
    model: dict | None = None,
) -> dict:
    """Time ``repeats`` interleaved training steps of each variant after ``warmup`` steps.

    Returns ``{"setup": {...}, "<variant>": {"best_ms", "median_ms", "params", "ratio_best",
    "ratio_median"}}`` (ratios to the baseline's best / median; the baseline is always timed)."""
    if "baseline" not in variants:
        variants = ("baseline", *variants)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise NeurosymError(f"unknown variant(s) {', '.join(unknown)}; expected some of {', '.join(VARIANTS)}")
    m = ModelSection(**(model or {}))
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        lines = read_lines(corpus_path("wikitext-2", "valid"))
        vocab = WordVocab.build(lines, min_freq=min_freq)
        ids, targets = lm_windows(vocab.encode_lines(lines), window)
        ids, targets = ids[:batch_size], targets[:batch_size]
        bank = None
        if "fusion" in variants:
            words = Vocab(list(vocab.tokens), [None] * 3 + list(vocab.tokens[3:]), "word", unk=vocab.unk_id)
            bank = load_lexicon(shipped_file("lexicons/sentiment.lex"), words)
        setups = []
        for v in variants:
            torch.manual_seed(0)
            net, loss = _setup(v, vocab, ids, targets, m, bank)
            net.train()
            opt = torch.optim.AdamW(param_groups(net, RECIPE_OPTIM["weight_decay"]), lr=RECIPE_OPTIM["lr"])
            setups.append((v, net, loss, opt))

        def step(loss: Callable, opt: torch.optim.Optimizer) -> float:
            started = time.process_time()
            opt.zero_grad(set_to_none=True)
            loss().backward()
            opt.step()
            return time.process_time() - started

        for _, _, loss, opt in setups:
            for _ in range(warmup):
                step(loss, opt)
        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(repeats):
            for v, _, loss, opt in setups:
                times[v].append(step(loss, opt))
    finally:
        torch.set_num_threads(before)
    out: dict = {"setup": {"dataset": "WikiText-2 valid.txt (the split the recipe trains on)", "batch": batch_size, "window": window,
                           "vocab_size": len(vocab), "threads": threads, "repeats": repeats, "clock": "process CPU time",
                           "model": {k: getattr(m, k) for k in ("d_model", "n_layers", "n_heads", "d_ff")}}}
    for v, net, _, _ in setups:
        out[v] = {"best_ms": 1000 * min(times[v]), "median_ms": 1000 * statistics.median(times[v]),
                  "params": sum(p.numel() for p in net.parameters())}
    for v in variants:
        out[v]["ratio_best"] = out[v]["best_ms"] / out["baseline"]["best_ms"]
        out[v]["ratio_median"] = out[v]["median_ms"] / out["baseline"]["median_ms"]
    return out


def format_results(r: dict) -> str:
    """A Markdown table of the step times and ratios."""
    s = r["setup"]
    lines = [f"training step time: {s['batch']} windows of {s['window']} tokens, vocabulary {s['vocab_size']:,}, "
             f"{s['threads']} thread(s), {s['repeats']} interleaved steps each, {s['clock']}", "",
             "| variant | parameters | best ms/step | median ms/step | ratio (best) | ratio (median) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for v in (k for k in r if k != "setup"):
        m = r[v]
        lines.append(f"| {v} | {m['params']:,} | {m['best_ms']:.1f} | {m['median_ms']:.1f} | {m['ratio_best']:.3f}x | {m['ratio_median']:.3f}x |")
    return "\n".join(lines)
