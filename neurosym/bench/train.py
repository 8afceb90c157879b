"""``neurosym bench train``: time per training step of the LM variants at the same size.

All variants share the semantic-KL recipe's architecture (:data:`~neurosym.experiments.semantic_kl.RECIPE_MODEL`
defaults) and one batch of WikiText-2 windows (the vocabulary of valid.txt by default, of
the standard train.txt with ``split="train"``, as the recipes now train), so only what a
variant adds is timed:

* ``baseline``: :class:`~neurosym.lm.model.CausalLM`, fused cross-entropy;
* ``fusion``: the same LM with the semantic-fusion adapter and auxiliary head
  (:func:`~neurosym.lm.fusion.build_fusion_lm`) over ``lexicons/sentiment.lex``'s features
  of the batch (real text has no grammar roles: the role inputs are all false), its loss
  CE + the auxiliary BCE;
* ``semantic-kl``: the baseline LM with :func:`~neurosym.lm.semantic_kl.semantic_kl_terms`
  (cosine, T = 0.1, lam = 0.5, the hidden-state fast path), the recipe's ``kl-T0.1``;
* ``semantic-kl-logits``: the same loss by the logits path (no ``hidden``: what a model
  whose logits are not ``hidden @ W.T`` takes), which trades the fast path's two (U, V, D)
  products for passes over (B, L, V): the faster of the two depends on the device;
* ``idea-gating``: the baseline LM with the tied idea head and gate as its output layer
  (:class:`~neurosym.lm.idea.IdeaOutput`, default :class:`~neurosym.lm.idea.IdeaConfig`),
  its loss CE of the gated logits + the idea BCE (stop words: the 50 most frequent tokens of the batch),
  computed as the recipe does (:func:`~neurosym.lm.idea.idea_training_loss`: the fused objective)
  with its torch row blocks (``kernel="torch"``);
* ``idea-gating-triton``: the same model and loss with the objective's V-wide part in one
  Triton kernel (``kernel="triton"``, :mod:`neurosym.lm.idea_kernel`; what ``kernel="auto"``
  runs on CUDA when triton imports);
* ``idea-gating-compile``: the same with the objective's torch operators, one row block of
  every row, through ``torch.compile`` (``kernel="compile"``: inductor fuses them into a few
  generated kernels; the first, untimed warm-up step compiles: every variant's first step is
  reported as ``first_step_s``).

The two kernel variants are timed on CUDA only (where the issue's step-time targets are, and
where Triton runs); otherwise the JSON says why they were skipped (``{"skipped": reason}``).
On CUDA the run also checks each against the torch blocks on the device (:func:`kernel_check`,
under ``check``).

A step is forward, loss, backward and the AdamW update. Steps are interleaved across the
variants (a load change on a shared machine hits all alike) and timed in **process CPU
time** (``time.process_time``: time this process spent computing, not waiting for a
core) on the CPU, in **wall time after** ``torch.cuda.synchronize`` on CUDA, with the best
and the median of ``repeats`` steps; ratios are to the baseline's.

``launches=True`` also counts, with ``torch.profiler``, the operators one step of each
variant runs that would each launch a kernel on a GPU (leaf ``aten::`` calls but views,
reshapes and allocations; on CUDA the CUDA kernels themselves): the **CPU proxy** of the
launch overhead that makes a step of many small operators slow on CUDA (issue 30).
``gpu_shape=True`` takes the semantic-KL recipe's ``--gpu`` shape (d_model 512, 6
layers, windows of 256, every word of the split in the vocabulary).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from neurosym.bench.inside import check_device
from neurosym.bench.launches import count_launches
from neurosym.compile.lexicon import load_lexicon
from neurosym.data import shared_data_dir, shipped_file
from neurosym.data.text import WordVocab, corpus_path, lm_windows, read_lines
from neurosym.errors import NeurosymError
from neurosym.experiments.semantic_kl import GPU_DATA, GPU_MODEL, RECIPE_DATA, RECIPE_MODEL, RECIPE_OPTIM
from neurosym.kernels import timing_skip_reason
from neurosym.lm.fusion import build_fusion_lm
from neurosym.lm.idea import (
    CPU_BLOCK_ELEMENTS, IdeaConfig, IdeaOutput, idea_block_elements, idea_objective, idea_training_loss, resolve_kernel, stop_word_ids,
)
from neurosym.lm.losses import aux_bce
from neurosym.lm.model import CausalLM, LMConfig, LMSection
from neurosym.lm.semantic_kl import semantic_kl_terms
from neurosym.lm.train import param_groups
from neurosym.vocab import Vocab

VARIANTS = ("baseline", "fusion", "semantic-kl", "semantic-kl-logits", "idea-gating", "idea-gating-triton", "idea-gating-compile")
KERNEL_VARIANTS = {"idea-gating-triton": "triton", "idea-gating-compile": "compile"}
"""The variants that run idea gating's objective with another ``kernel=`` than the torch blocks."""


def _setup(variant: str, vocab: WordVocab, ids: torch.Tensor, targets: torch.Tensor, m: LMSection, bank,
           block_elements: int | None = None) -> tuple[torch.nn.Module, Callable]:
    lm = LMConfig(vocab_size=len(vocab), d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads, d_ff=m.d_ff,
                  dropout=m.dropout, max_len=ids.shape[1], positions=m.positions, pad_id=0)
    V = len(vocab)
    if variant == "baseline":
        model = CausalLM(lm)

        def loss() -> torch.Tensor:
            return F.cross_entropy(model(ids).logits.reshape(-1, V).float(), targets.reshape(-1))
    elif variant in ("semantic-kl", "semantic-kl-logits"):
        model = CausalLM(lm)
        fast = variant == "semantic-kl"

        def loss() -> torch.Tensor:
            out = model(ids)
            kl, ce = semantic_kl_terms(out.logits, targets, model.lm_head.weight, 0.1, "cosine", hidden=out.hidden if fast else None)
            return 0.5 * kl + 0.5 * ce
    elif variant == "fusion":
        no_role = torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
        roles = {"head": no_role, "object": no_role, "subject": no_role}
        features = bank.featurize(ids.cpu(), {k: r.cpu() for k, r in roles.items()}).to(ids.device)  # (B, L, F)
        aux_targets = bank.featurize(targets.cpu(), {k: r.cpu() for k, r in roles.items()}).to(ids.device)
        model = build_fusion_lm(lm, features.shape[-1], 0, aux_hidden=128)

        def loss() -> torch.Tensor:
            out = model(ids, features=features)
            ce = F.cross_entropy(out.logits.reshape(-1, V).float(), targets.reshape(-1))
            return ce + aux_bce(out.extras["aux"], aux_targets, torch.ones(ids.shape, dtype=torch.bool, device=ids.device), 0.5)
    elif variant == "idea-gating" or variant in KERNEL_VARIANTS:
        idea = IdeaConfig()
        model = CausalLM(lm, output=IdeaOutput(m.d_model, V, idea))
        stop = stop_word_ids(ids, idea.stop_words, V, exclude=(0,))
        kernel = KERNEL_VARIANTS.get(variant, "torch")

        def loss() -> torch.Tensor:  # the recipe's fused CE(gated) + weight * BCE
            return idea_training_loss(model, ids, targets, stop, 0, block_elements=block_elements, kernel=kernel)[0]
    else:
        raise NeurosymError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    return model, loss


def kernel_skip_reason(variant: str, device: torch.device) -> str | None:
    """Why the kernel variant ``variant`` (:data:`KERNEL_VARIANTS`) cannot be timed on
    ``device`` (None: it can): both are timed on CUDA only, Triton's when triton imports."""
    if KERNEL_VARIANTS[variant] == "triton":
        return timing_skip_reason(device, resolve_kernel)
    return None if torch.device(device).type == "cuda" else f"the compiled objective is timed on CUDA only (device {device})"


def kernel_check(targets: torch.Tensor, vocab_size: int, device: torch.device, kernel: str = "triton", seed: int = 0) -> dict:
    """The ``kernel`` implementation of the objective against the torch row blocks on ``device``:
    :func:`~neurosym.lm.idea.idea_objective` of random logits and idea logits (B, L, V)
    (normal, standard deviation 3) at the targets (B, L) and :class:`~neurosym.lm.idea.IdeaConfig`'s
    defaults, both implementations, value and gradients: ``{"kernel", "rows", "vocab_size", "total_torch",
    "total_kernel", "total_rel_diff", "g_logits_max_abs_diff", "g_logits_max_abs", "g_z_max_abs_diff", "g_z_max_abs"}``."""
    idea = IdeaConfig()
    g = torch.Generator(device=device).manual_seed(seed)
    shape = (*targets.shape, vocab_size)
    logits = 3 * torch.randn(shape, generator=g, device=device)
    z = 3 * torch.randn(shape, generator=g, device=device)
    stop = stop_word_ids(targets, idea.stop_words, vocab_size, exclude=(0,))
    got = {}
    for impl in ("torch", kernel):
        lg, zz = logits.clone().requires_grad_(True), z.clone().requires_grad_(True)
        total = idea_objective(lg, zz, targets, alpha=idea.alpha, window=idea.window, pad_id=0, beta=idea.beta, eps=idea.eps,
                               variant=idea.variant, weight=idea.weight, stop_ids=stop, pos_weight=idea.pos_weight, kernel=impl)[0]
        total.backward()
        got[impl] = (float(total.detach()), lg.grad, zz.grad)
        del lg, zz, total
    (t_torch, gl_torch, gz_torch), (t_kernel, gl_kernel, gz_kernel) = got["torch"], got[kernel]
    return {"kernel": kernel, "rows": targets.numel(), "vocab_size": vocab_size, "total_torch": t_torch, "total_kernel": t_kernel,
            "total_rel_diff": abs(t_kernel - t_torch) / abs(t_torch),
            "g_logits_max_abs_diff": float((gl_kernel - gl_torch).abs().max()), "g_logits_max_abs": float(gl_torch.abs().max()),
            "g_z_max_abs_diff": float((gz_kernel - gz_torch).abs().max()), "g_z_max_abs": float(gz_torch.abs().max())}


def run(
    variants: Sequence[str] = VARIANTS, repeats: int = 20, warmup: int = 3, threads: int | None = 1,
    batch_size: int = RECIPE_OPTIM["batch_size"], window: int | None = None, min_freq: int | None = None,
    model: dict | None = None, device: str = "cpu", gpu_shape: bool = False, launches: bool = False,
    split: str = "valid", data_dir: str | Path | None = None,
) -> dict:
    """Time ``repeats`` interleaved training steps of each variant after ``warmup`` steps on
    ``device``; with ``launches``, count one step's kernel launches (:func:`count_launches`).
    The kernel variants are timed only where they can be (:func:`kernel_skip_reason`; else
    ``{"skipped": reason}``), each with its check against the torch blocks (:func:`kernel_check`).

    ``window`` and ``min_freq`` default to the recipe's (its ``--gpu`` shape's with
    ``gpu_shape``, which also takes :data:`~neurosym.experiments.semantic_kl.GPU_MODEL` under
    ``model``). ``split``: the WikiText-2 file the vocabulary and the batch come from,
    ``valid`` (the shipped copy; V = 13,778 at the ``--gpu`` shape) or ``train`` (the
    standard train.txt of ``data_dir`` or the shared data: V = 33,279 at min_freq 1, the
    recipes' vocabulary). Returns ``{"setup": {...}, "<variant>": {"best_ms", "median_ms", "params",
    "ratio_best", "ratio_median"[, "launches", "launch_ratio"]}}`` (ratios to the baseline's
    best / median / launches; the baseline is always timed)."""
    if "baseline" not in variants:
        variants = ("baseline", *variants)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise NeurosymError(f"unknown variant(s) {', '.join(unknown)}; expected some of {', '.join(VARIANTS)}")
    check_device(device)
    if split not in ("valid", "train"):
        raise NeurosymError(f"--split: expected valid or train, got {split!r}")
    if split == "train" and data_dir is None:
        data_dir = shared_data_dir()
        if data_dir is None:
            raise NeurosymError("--split train: WikiText-2's train.txt is not in the shipped copy; no shared data folder was found")
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    skipped = {}
    for v in KERNEL_VARIANTS:
        if v in variants and (reason := kernel_skip_reason(v, dev)) is not None:
            skipped[v] = reason
    variants = tuple(v for v in variants if v not in skipped)
    data = GPU_DATA if gpu_shape else RECIPE_DATA
    window = data["window"] if window is None else window
    min_freq = data["min_freq"] if min_freq is None else min_freq
    m = LMSection(**(RECIPE_MODEL | (GPU_MODEL if gpu_shape else {}) | (model or {})))
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        source = corpus_path("wikitext-2", split, data_dir if split == "train" else None)
        lines = read_lines(source)
        vocab = WordVocab.build(lines, min_freq=min_freq)
        ids, targets = lm_windows(vocab.encode_lines(lines), window)
        ids, targets = ids[:batch_size].to(dev), targets[:batch_size].to(dev)
        bank = None
        if "fusion" in variants:
            words = Vocab(list(vocab.tokens), [None] * 3 + list(vocab.tokens[3:]), "word", unk=vocab.unk_id)
            bank = load_lexicon(shipped_file("lexicons/sentiment.lex"), words)
        setups = []
        for v in variants:
            torch.manual_seed(0)
            net, loss = _setup(v, vocab, ids, targets, m, bank)
            net.to(dev).train()
            opt = torch.optim.AdamW(param_groups(net, RECIPE_OPTIM["weight_decay"]), lr=RECIPE_OPTIM["lr"])
            setups.append((v, net, loss, opt))

        def update(loss: Callable, opt: torch.optim.Optimizer) -> None:
            opt.zero_grad(set_to_none=True)
            loss().backward()
            opt.step()

        def step(loss: Callable, opt: torch.optim.Optimizer) -> float:
            if cuda:
                torch.cuda.synchronize(dev)
                started = time.perf_counter()
                update(loss, opt)
                torch.cuda.synchronize(dev)
                return time.perf_counter() - started
            started = time.process_time()
            update(loss, opt)
            return time.process_time() - started

        first_step = {}
        for v, _, loss, opt in setups:
            for _ in range(warmup):
                seconds = step(loss, opt)
                first_step.setdefault(v, seconds)
        checks = {v: kernel_check(targets[:8], len(vocab), dev, KERNEL_VARIANTS[v]) for v in variants if v in KERNEL_VARIANTS}
        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(repeats):
            for v, _, loss, opt in setups:
                times[v].append(step(loss, opt))
        counted = {v: count_launches(lambda: update(loss, opt), dev) for v, _, loss, opt in setups} if launches else {}  # noqa: B023
        if launches and "idea-gating" in variants:  # the fused objective's row blocks: the CPU's cache-sized ones vs one block
            blocks = {"cpu_blocks": CPU_BLOCK_ELEMENTS, "one_block": ids.numel() * len(vocab)}
            idea_launches = {}
            for name, elements in blocks.items():
                torch.manual_seed(0)
                net, loss = _setup("idea-gating", vocab, ids, targets, m, bank, block_elements=elements)
                net.to(dev).train()
                opt = torch.optim.AdamW(param_groups(net, RECIPE_OPTIM["weight_decay"]), lr=RECIPE_OPTIM["lr"])
                update(loss, opt)  # the optimizer's state exists before the counted step, as above
                idea_launches[name] = count_launches(lambda: update(loss, opt), dev)  # noqa: B023
                del net, loss, opt
    finally:
        torch.set_num_threads(before)
    out: dict = {"setup": {"dataset": f"WikiText-2 {source.name} (its vocabulary at min_freq {min_freq})", "batch": batch_size, "window": window,
                           "vocab_size": len(vocab), "threads": threads, "repeats": repeats, "device": str(dev),
                           "card": torch.cuda.get_device_name(dev) if cuda else None, "torch": torch.__version__,
                           "shape": "the semantic-KL recipe's --gpu shape" if gpu_shape else "the semantic-KL recipe's CPU shape",
                           "clock": "wall time between torch.cuda.synchronize calls" if cuda else "process CPU time",
                           "model": {k: getattr(m, k) for k in ("d_model", "n_layers", "n_heads", "d_ff")}}}
    if launches:
        out["setup"]["launches"] = ("CUDA kernels per step (torch.profiler)" if cuda else
                                    "CPU proxy: leaf aten operators per step that are not views or allocations (torch.profiler), "
                                    "each a kernel launch on a GPU")
    for v, net, _, _ in setups:
        out[v] = {"best_ms": 1000 * min(times[v]), "median_ms": 1000 * statistics.median(times[v]),
                  "params": sum(p.numel() for p in net.parameters())}
        if v in first_step:  # the first warm-up step: where idea-gating-compile compiles
            out[v]["first_step_s"] = first_step[v]
        if launches:
            out[v]["launches"] = counted[v]
    for v, reason in skipped.items():
        out[v] = {"skipped": reason}
    for v, check in checks.items():
        out[v]["check"] = check
    for v in variants:
        out[v]["ratio_best"] = out[v]["best_ms"] / out["baseline"]["best_ms"]
        out[v]["ratio_median"] = out[v]["median_ms"] / out["baseline"]["median_ms"]
        if launches:
            out[v]["launch_ratio"] = counted[v] / counted["baseline"]
    if launches and "idea-gating" in variants:
        out["idea-gating"]["block_elements"] = idea_block_elements(dev)
        for name, n in idea_launches.items():
            out["idea-gating"][f"launches_{name}"] = n
            out["idea-gating"][f"launch_ratio_{name}"] = n / counted["baseline"]
    return out


def format_results(r: dict) -> str:
    """A Markdown table of the step times and ratios."""
    s = r["setup"]
    launches = "launches" in s
    lines = [f"training step time: {s['batch']} windows of {s['window']} tokens, vocabulary {s['vocab_size']:,}, "
             f"{s['threads']} thread(s), device {s.get('device', 'cpu')}{' (' + s['card'] + ')' if s.get('card') else ''}, "
             f"{s['repeats']} interleaved steps each, {s['clock']}", "",
             "| variant | parameters | best ms/step | median ms/step | ratio (best) | ratio (median) |" + (" launches | launch ratio |" if launches else ""),
             "| --- | --- | --- | --- | --- | --- |" + (" --- | --- |" if launches else "")]
    for v in (k for k in r if k != "setup" and "skipped" not in r[k]):
        m = r[v]
        lines.append(f"| {v} | {m['params']:,} | {m['best_ms']:.1f} | {m['median_ms']:.1f} | {m['ratio_best']:.3f}x | {m['ratio_median']:.3f}x |"
                     + (f" {m['launches']:,} | {m['launch_ratio']:.2f}x |" if launches else ""))
    for v in (k for k in r if k != "setup"):
        if "skipped" in r[v]:
            lines += ["", f"{v}: skipped ({r[v]['skipped']})"]
        elif "check" in r[v]:
            c = r[v]["check"]
            lines += ["", f"{v} against the torch blocks on this device ({c['rows']:,} rows of {c['vocab_size']:,}): loss {c['total_kernel']:.6f} vs "
                          f"{c['total_torch']:.6f} (relative difference {c['total_rel_diff']:.1e}), gradients' largest difference "
                          f"{c['g_logits_max_abs_diff']:.1e} (logits; largest entry {c['g_logits_max_abs']:.1e}) and "
                          f"{c['g_z_max_abs_diff']:.1e} (z; {c['g_z_max_abs']:.1e})"]
    if launches:
        lines += ["", f"launches: {s['launches']}"]
        idea = r.get("idea-gating", {})
        if "launches_cpu_blocks" in idea:
            lines.append(f"idea-gating's fused objective: {idea['launches_cpu_blocks']:,} launches ({idea['launch_ratio_cpu_blocks']:.2f}x) with "
                         f"the CPU's row blocks of {CPU_BLOCK_ELEMENTS:,} entries, {idea['launches_one_block']:,} "
                         f"({idea['launch_ratio_one_block']:.2f}x) with one block (CUDA's default when memory allows); "
                         f"this device's blocks: {idea['block_elements']:,} entries")
    return "\n".join(lines)
