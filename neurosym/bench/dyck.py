"""``neurosym bench dyck``: a stack RNN against an LSTM on Dyck-2 recognition, trained on
short strings and tested on longer ones that nest deeper (docs/encoders.md).

Both encoders (:class:`~neurosym.layers.encoders.StackEncoder`,
:class:`~neurosym.layers.encoders.LSTMEncoder`) get the same hidden size and a linear
classifier on their last state; negatives are one ``retype`` / ``delete`` / ``insert``
away from a balanced word (:meth:`neurosym.tasks.dyck.Dyck.recognition`), and
``depth_bias`` > 1 makes the test words nest deeper than the training words.
``tests/layers/test_pda.py`` runs it (slow) and asserts the stack RNN wins.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch
from torch import nn

from neurosym.experiments import harness
from neurosym.layers.encoders import LSTMEncoder, StackEncoder
from neurosym.tasks.dyck import Dyck, Recognition

# the setting of docs/encoders.md's table
SETTINGS = {"hidden": 16, "stack_dim": 4, "stack_depth": 48, "depth_bias": 1.1, "lr": 5e-3, "steps": 1000, "batch": 32,
            "train": (10_000, 2, 40), "test": (1000, 42, 80), "val": (1000, 2, 40)}
MODELS = ("stack", "lstm")


def train_and_test(name: str, train: Recognition, test: Recognition, vocab_size: int, seed: int, val: Recognition | None = None,
                   settings: dict = SETTINGS) -> dict:
    """Train ``name`` ("stack" or "lstm") + a linear head on ``train`` from initial
    weights and batch order drawn with ``seed`` (Adam, gradients clipped at 1); the
    accuracy on ``test`` (overall and by kind of string) and on ``val``."""
    s = settings
    torch.manual_seed(seed)
    enc = StackEncoder(vocab_size, s["hidden"], stack_dim=s["stack_dim"], depth=s["stack_depth"]) if name == "stack" else LSTMEncoder(vocab_size, s["hidden"])
    head = nn.Linear(s["hidden"], 1)
    params = [*enc.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=s["lr"])
    start, step, epoch = time.process_time(), 0, 0
    while step < s["steps"]:
        for ids, n, y in train.batches(s["batch"], seed=1000 * seed + epoch):
            loss = nn.functional.binary_cross_entropy_with_logits(head(enc(ids, n)).squeeze(-1), y)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            if step >= s["steps"]:
                break
        epoch += 1
    enc.eval()

    def correct(data: Recognition) -> torch.Tensor:
        """(N,) bool: whether each string is classified right."""
        with torch.no_grad():
            return torch.cat([(head(enc(ids, n)).squeeze(-1) > 0).float() for ids, n, _ in data.batches(250)]) == data.labels

    right = correct(test)
    by_kind = {k: float(right[[i for i, kk in enumerate(test.kinds) if kk == k]].float().mean()) for k in sorted(set(test.kinds))}
    out = {"acc": float(right.float().mean()), "by_kind": by_kind, "params": sum(p.numel() for p in params), "cpu_seconds": time.process_time() - start}
    if val is not None:
        out["val_acc"] = float(correct(val).float().mean())
    return out


def max_depths(dyck: Dyck, data: Recognition, kind: str | None = None) -> list[int]:
    """The deepest nesting of each string of ``data`` (of one ``kind`` when given)."""
    return [max(dyck.depths(ids[: int(n)].tolist()), default=0) for ids, n, k in zip(data.ids, data.lengths, data.kinds) if kind is None or k == kind]


def run(seeds: Sequence[int] = (0, 1), threads: int = 1, settings: dict = SETTINGS) -> dict:
    """Both encoders from each seed: accuracies, parameters, CPU seconds, how much
    deeper the balanced test words nest than any training word, and the stack encoder
    against the LSTM on test accuracy (Welch's test over seeds; the verdict says
    "better" only when p < 0.05)."""
    torch.set_num_threads(threads)
    dyck = Dyck(2)
    s = settings
    train = dyck.recognition(s["train"][0], s["train"][1], s["train"][2], seed=0, eos=True, depth_bias=s["depth_bias"])
    test = dyck.recognition(s["test"][0], s["test"][1], s["test"][2], seed=1, eos=True, depth_bias=s["depth_bias"])
    val = dyck.recognition(s["val"][0], s["val"][1], s["val"][2], seed=2, eos=True, depth_bias=s["depth_bias"])  # the training lengths, held out
    train_deepest = max(max_depths(dyck, train))
    test_depths = max_depths(dyck, test, "balanced")
    runs = {name: {str(seed): train_and_test(name, train, test, len(dyck.vocab), seed, val, s) for seed in seeds} for name in MODELS}
    accs = {name: [r["acc"] for r in runs[name].values()] for name in MODELS}
    diff = statistics.mean(accs["stack"]) - statistics.mean(accs["lstm"])
    test = harness.welch(accs["stack"], accs["lstm"])
    return {
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in s.items()}, "seeds": list(seeds), "threads": threads,
        "depths": {"train_max": train_deepest, "test_balanced_median": statistics.median(test_depths), "test_balanced_max": max(test_depths),
                   "test_balanced_deeper_than_train": sum(d > train_deepest for d in test_depths) / len(test_depths)},
        "runs": runs,
        "mean_acc": {name: statistics.mean(r["acc"] for r in runs[name].values()) for name in MODELS},
        "stack_minus_lstm": diff,
        "welch": test,
        "stack_ahead_on_seeds": sum(runs["stack"][k]["acc"] > runs["lstm"][k]["acc"] for k in runs["stack"]),
        "verdict": harness.verdict_sentence(diff, test["p"], lower_is_better=False),  # the stack encoder against the LSTM, on test accuracy
    }


def format_results(r: dict) -> str:
    """One line per encoder: parameters, held-out and test accuracy per seed, test mean."""
    d = r["depths"]
    lines = [f"Dyck-2 recognition, trained on lengths {r['settings']['train'][1]}..{r['settings']['train'][2]} (deepest {d['train_max']}), "
             f"tested on {r['settings']['test'][1]}..{r['settings']['test'][2]} (balanced: median depth {d['test_balanced_median']}, "
             f"up to {d['test_balanced_max']}, {100 * d['test_balanced_deeper_than_train']:.0f}% deeper than any training word)"]
    for name, runs in r["runs"].items():
        first = next(iter(runs.values()))
        val = " / ".join(f"{x['val_acc']:.3f}" for x in runs.values())
        acc = " / ".join(f"{x['acc']:.3f}" for x in runs.values())
        lines.append(f"  {name:6s} {first['params']:>6,} parameters  held-out {val}  test {acc}  mean {r['mean_acc'][name]:.3f}")
    lines.append(f"  stack - lstm {r['stack_minus_lstm']:+.3f} (stack ahead on {r['stack_ahead_on_seeds']} of {len(r['seeds'])} seeds): {r['verdict']}")
    return "\n".join(lines)


__all__ = ["MODELS", "SETTINGS", "format_results", "max_depths", "run", "train_and_test"]
