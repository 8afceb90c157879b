"""``neurosym bench decode``'s processor part: what :class:`~neurosym.decode.GrammarMask`
costs per generated token, through NumPy against the tensor path.

Over the index part's byte-level BPE and patterns (:func:`neurosym.bench.decode.bench_patterns`),
for batches of 1 and 32 rows: a walk is drawn once per pattern and batch (each row takes
the best allowed token under random scores until it ends; ended rows get padding with
``done``), then replayed through ``GrammarMask(backend="numpy")`` (the CPU default) and
``GrammarMask(backend="torch")`` (the tensor path, the CPU path before issue 29),
interleaved, ``repeats`` times, once timed in wall time and once in this thread's CPU
time (the fair figure where other jobs share the machine). Each step times the call
(scores in, masked scores out; the fresh copy of the scores is not timed) and the
advance; the per-token figure is the two together. A first, untimed replay checks that both backends give the same masked
scores and states at every step.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from neurosym.bench.compile import bpe_tokenizer
from neurosym.bench.decode import bench_patterns, percentiles
from neurosym.compile.automaton import Automaton
from neurosym.compile.regex import compile_regex
from neurosym.decode import GrammarMask
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab

BACKENDS = ("numpy", "torch")
CLOCKS = ("wall", "cpu")  # wall time, and this thread's CPU time (the fair figure on a shared machine)


def draw_walk(auto: Automaton, eos: int, batch: int, max_steps: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """(tokens (B,), done (B,) or None) per step: each row takes the best allowed token
    under random scores until it ends (padding with ``done`` afterwards); stops when
    every row has ended or after ``max_steps``."""
    mask = GrammarMask(auto, eos)
    mask.reset(batch)
    gen = torch.Generator().manual_seed(seed)
    done = torch.zeros(batch, dtype=torch.bool)
    walk = []
    for _ in range(max_steps):
        scores = mask(torch.randn(batch, len(auto.vocab), generator=gen))
        tokens = torch.where(done, eos, scores.argmax(dim=1))
        walk.append((tokens, done.clone() if done.any() else None))
        mask.advance(tokens, walk[-1][1])
        done |= tokens == eos
        if bool(done.all()):
            break
    return walk


def replay(mask: GrammarMask, walk: list, scores: torch.Tensor, times: dict[str, list[float]] | None = None) -> list[torch.Tensor]:
    """Run ``mask`` along ``walk``; with ``times``, append µs per call and per advance;
    without, return the masked scores of every step (for the check)."""
    mask.reset(scores.shape[0])
    outs = []
    clock = time.thread_time_ns if times is not None and times.get("clock") == "cpu" else time.perf_counter_ns
    for tokens, done in walk:
        s = scores.clone()
        t0 = clock()
        s = mask(s)
        t1 = clock()
        mask.advance(tokens, done)
        t2 = clock()
        if times is None:
            outs.append(s)
        else:
            times["call"].append((t1 - t0) / 1000)
            times["advance"].append((t2 - t1) / 1000)
            times["step"].append((t2 - t0) / 1000)
    return outs


def check_same(auto: Automaton, eos: int, walk: list, scores: torch.Tensor) -> None:
    """A NeurosymError unless both backends mask every step of ``walk`` the same way."""
    outs = [replay(GrammarMask(auto, eos, backend=b), walk, scores) for b in BACKENDS]
    if not all(torch.equal(a, b) for a, b in zip(*outs)):
        raise NeurosymError("bench decode: GrammarMask's NumPy and tensor backends disagree")


def run(n_words: int = 5000, bpe_size: int = 32000, batches: tuple[int, ...] = (1, 32), repeats: int = 3, max_steps: int = 64,
        threads: int = 1, seed: int = 0, progress: bool = True) -> dict:
    """µs per token (p50, p99) of GrammarMask's call, advance and both, per pattern and
    batch, under each backend, and torch / numpy (> 1: the NumPy path is faster)."""
    torch.set_num_threads(threads)
    tokenizer = bpe_tokenizer(bpe_size)
    tokenizer.add_special_tokens(["<eos>"])  # the end token GrammarMask needs: one id past the BPE's own (as the index part's engines get)
    vocab = Vocab.from_tokenizer(tokenizer)
    eos = vocab.id("<eos>")
    out: dict = {"vocab_size": len(vocab), "threads": threads, "repeats": repeats, "eos_id": eos, "patterns": {}}
    for name, (pattern, _) in bench_patterns(n_words).items():
        auto = compile_regex(pattern, vocab=vocab, max_states=200_000)
        if progress:
            print(f"GrammarMask per token: {name} ({auto.num_states} states) ...", file=sys.stderr, flush=True)
        rows = {}
        for batch in batches:
            walk = draw_walk(auto, eos, batch, max_steps, seed)
            scores = torch.randn(batch, len(vocab), generator=torch.Generator().manual_seed(seed + 1))
            check_same(auto, eos, walk, scores)
            masks = {b: GrammarMask(auto, eos, backend=b) for b in BACKENDS}
            row = {"steps": len(walk)}
            for clock in CLOCKS:
                times = {b: {"clock": clock, "call": [], "advance": [], "step": []} for b in BACKENDS}
                for _ in range(repeats):
                    for b in BACKENDS:  # interleaved, so drifts of the machine's load hit both
                        replay(masks[b], walk, scores, times[b])
                cell = {}
                for b in BACKENDS:
                    for part in ("call", "advance", "step"):
                        cell[f"{b}_{part}_us"] = percentiles(times[b][part])
                cell["ratio_p50"] = cell["torch_step_us"][0] / cell["numpy_step_us"][0]
                cell["ratio_p99"] = cell["torch_step_us"][1] / cell["numpy_step_us"][1]
                row[clock] = cell
            rows[batch] = row
        out["patterns"][name] = rows
    for clock in CLOCKS:
        for batch in batches:
            ratios = [p[batch][clock]["ratio_p50"] for p in out["patterns"].values()]
            out.setdefault(f"geomean_ratio_p50_{clock}", {})[batch] = statistics.geometric_mean(ratios)
    return out


def format_results(r: dict) -> str:
    lines = [f"GrammarMask per token over the {r['vocab_size']}-token BPE (µs p50 / p99 of the call, the advance and both; "
             f"{r['threads']} thread(s), {r['repeats']} interleaved replays; the same masks checked at every step)"]
    for clock in CLOCKS:
        lines.append(f"  {'wall time' if clock == 'wall' else 'CPU time of this thread (other jobs do not enter it)'}:")
        lines.append(f"  {'pattern':<22s} {'batch':>5s} {'steps':>5s}  {'numpy call':>13s} {'numpy adv':>13s} {'numpy step':>15s}  "
                     f"{'torch call':>13s} {'torch adv':>13s} {'torch step':>15s}  torch/numpy")
        for name, rows in r["patterns"].items():
            for batch, row in rows.items():
                c = row[clock]
                cells = [f"{c[f'{b}_{p}_us'][0]:6.1f}/{c[f'{b}_{p}_us'][1]:6.1f}" for b in BACKENDS for p in ("call", "advance", "step")]
                lines.append(f"  {name:<22s} {batch:>5} {row['steps']:>5}  {cells[0]:>13s} {cells[1]:>13s} {cells[2]:>15s}  "
                             f"{cells[3]:>13s} {cells[4]:>13s} {cells[5]:>15s}  {c['ratio_p50']:5.1f}x ({c['ratio_p99']:.1f}x p99)")
        gm = ", ".join(f"batch {b}: {v:.1f}x" for b, v in r[f"geomean_ratio_p50_{clock}"].items())
        lines.append(f"  geometric mean of torch/numpy per token (p50, {clock}): {gm}")
    return "\n".join(lines)


__all__ = ["BACKENDS", "CLOCKS", "check_same", "draw_walk", "format_results", "replay", "run"]
