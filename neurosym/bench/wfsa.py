"""``neurosym bench wfsa``: throughput of the RegexLayer forward algorithm.

100 regexes (words, digit patterns, character classes; a fixed deterministic list) are
compiled over one character vocabulary (printable ASCII plus ``<unk>``) and stacked in
a :class:`~neurosym.layers.wfsa.RegexLayer`. A random (64, 128) batch of token ids is
scored, forward only and forward + backward, and compared with a dense baseline:

    the same number of steps (L), each one dense matmul h <- h @ W with h (B, K·Q) and
    W (K·Q, K·Q) float32, i.e. a linear recurrence as wide as the layer's stacked states
    (forward + backward: a sum of the last state, backpropagated to W).

The baseline's weight has (K·Q)² parameters, the layer's transitions K·Q²·V: the same
count when K = V (here K = 100 automata, V = 96 tokens: 2.89M vs 2.77M). Ratios are
baseline seconds / layer seconds (above 1: the layer is faster). Optionally
(``rank=r``) a low-rank layer over the same automata is timed too.
"""

from __future__ import annotations

import string
import sys
import time

import torch
from neurosym.compile.regex import compile_regex
from neurosym.layers.wfsa import RegexLayer
from neurosym.vocab import Vocab

WORDS = [
    "hello", "world", "neural", "symbol", "regex", "token", "state", "graph", "tensor", "python",
    "torch", "layer", "train", "model", "parse", "lexer", "vocab", "index", "batch", "score",
]  # fmt: skip


def regex_list(n: int = 100) -> list[str]:
    """``n`` distinct regexes: words, optional plurals, digit counts, decimals, dates,
    hex ids, capitalised words, word alternations and e-mail-like patterns."""
    templates = [
        lambda w, i: w,
        lambda w, i: f"{w}s?",
        lambda w, i: f"[A-Z]{w[1:]}|{w}",
        lambda w, i: f"{w[:3]}[a-z]*",
        lambda w, i: f"[0-9]{{{2 + i % 5}}}",
        lambda w, i: f"[0-9]+(\\.[0-9]{{1,{1 + i % 4}}})?",
        lambda w, i: f"({w}|{WORDS[(i + 7) % len(WORDS)]})( {w[:2]})*",
        lambda w, i: f"[a-f0-9]{{{1 + i % 3},{4 + i % 3}}}-{w[:2]}",
        lambda w, i: f"\\d{{1,2}}/\\d{{1,2}}/(19|20)\\d\\d|{w}",
        lambda w, i: f"[{w[:3]}]+@[a-z]+\\.(com|org|net)",
    ]
    out: list[str] = []
    i = 0
    while len(out) < n:
        w = WORDS[i % len(WORDS)]
        pattern = templates[(i + i // len(WORDS)) % len(templates)](w, i)
        if pattern not in out:
            out.append(pattern)
        i += 1
    return out


def build_layer(n_regex: int):
    """The per-token layer over printable ASCII + ``<unk>``, its vocabulary and automata."""
    vocab = Vocab.chars(string.printable[:95], specials=("<unk>",))
    autos = [compile_regex(p, vocab=vocab) for p in regex_list(n_regex)]
    return RegexLayer(autos), vocab, autos


def _time(fn, repeats: int) -> float:
    """Best-of-``repeats`` seconds after one warm-up call."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(
    n_regex: int = 100,
    batch: int = 64,
    length: int = 128,
    repeats: int = 5,
    rank: int | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> dict:
    """Tokens per second of the per-token layer (and of a ``rank``-factored one, unless
    ``rank`` is None), forward and forward + backward, next to the matmul baseline.
    ``threads`` sets torch's CPU threads for the run (default: unchanged)."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _run(n_regex, batch, length, repeats, rank, progress)
    finally:
        torch.set_num_threads(before)


def _run(n_regex: int, batch: int, length: int, repeats: int, rank: int | None, progress: bool) -> dict:
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if progress else (lambda m: None)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    layer, vocab, autos = build_layer(n_regex)
    compile_s = time.perf_counter() - t0
    K, Q, V = layer.delta.shape
    ids = torch.randint(len(vocab), (batch, length))
    tokens = batch * length
    say(f"RegexLayer: {K} automata, Q={Q}, V={V}; batch ({batch}, {length})")

    def fwd(model):
        def go():
            with torch.no_grad():
                model(ids)

        return go

    def fwd_bwd(model):
        def go():
            model.zero_grad(set_to_none=True)
            model(ids).sum().backward()

        return go

    D = K * Q
    w = (torch.randn(D, D) / D**0.5).requires_grad_()
    h0 = torch.randn(batch, D)

    def dense(track: bool):
        h = h0
        for _ in range(length):
            h = h @ w
        if track:
            w.grad = None
            h.sum().backward()

    def dense_fwd():
        with torch.no_grad():
            dense(False)

    models = {"per-token": layer}
    if rank is not None:
        models[f"rank {rank}"] = RegexLayer(autos, rank=rank)
    rows = {}
    for name, make in [("forward", fwd), ("forward_backward", fwd_bwd)]:
        say(f"  {name}: matmul baseline...")
        base = _time(dense_fwd if name == "forward" else (lambda: dense(True)), repeats)
        rows[name] = {"baseline_seconds": base, "baseline_tokens_per_second": tokens / base, "layers": {}}
        for label, model in models.items():
            say(f"  {name}: RegexLayer ({label})...")
            ours = _time(make(model), repeats)
            rows[name]["layers"][label] = {"seconds": ours, "tokens_per_second": tokens / ours, "ratio_to_baseline": base / ours}
    return {
        "groups": [[len(m), q] for m, q in layer.groups],
        "rank": rank,
        "automata": K,
        "padded_states": Q,
        "state_counts": layer.state_mask.sum(1).tolist(),
        "vocab_size": V,
        "batch": batch,
        "length": length,
        "threads": torch.get_num_threads(),
        "compile_seconds": compile_s,
        "transition_parameters": K * Q * Q * V,
        "baseline_parameters": D * D,
        "baseline": f"per step one dense matmul h @ W, h ({batch}, {D}), W ({D}, {D}) float32 (K·Q = {K}·{Q}); {length} steps",
        **rows,
    }


def format_results(r: dict) -> str:
    counts = r["state_counts"]
    groups = ", ".join(f"{n}x Q={q}" for n, q in r["groups"])
    lines = [
        f"RegexLayer: {r['automata']} regexes over {r['vocab_size']} character tokens, "
        f"states {min(counts)}..{max(counts)} (mean {sum(counts) / len(counts):.1f}), padded to Q={r['padded_states']}; "
        f"run in size groups {groups}; compiled + built in {r['compile_seconds']:.2f} s",
        f"batch ({r['batch']}, {r['length']}), {r['threads']} CPU thread(s), best of the repeats",
        f"baseline: {r['baseline']}",
        f"parameters: layer transitions {r['transition_parameters']:,} (K·Q·Q·V), baseline {r['baseline_parameters']:,} ((K·Q)²)",
        f"  {'':<18}{'':<11}{'seconds':>9}{'tokens/s':>12}{'vs matmul':>11}",
    ]
    for name in ("forward", "forward_backward"):
        x = r[name]
        label = name.replace("_", "+")
        lines.append(f"  {label:<18}{'matmul':<11}{x['baseline_seconds']:>9.3f}{x['baseline_tokens_per_second']:>12,.0f}{'1.00x':>11}")
        for layer, y in x["layers"].items():
            lines.append(f"  {'':<18}{layer:<11}{y['seconds']:>9.3f}{y['tokens_per_second']:>12,.0f}{y['ratio_to_baseline']:>10.2f}x")
    lines.append("  (vs matmul = baseline seconds / layer seconds: above 1 the layer is faster)")
    return "\n".join(lines)


__all__ = ["format_results", "regex_list", "run"]
