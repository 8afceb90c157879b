"""What ``neurosym generate`` does: load a trained run, compile a grammar over its
vocabulary (through the one front door, :func:`neurosym.kinds.load_grammar`), sample
through the processors :func:`neurosym.decode.grammar_processors` picks (a
``GrammarMask``, a ``PCFGMask``) and any registered processors named, and score each
sample.

A run is what ``neurosym train`` writes: a folder with ``last.pt`` (or a checkpoint file
itself). The checkpoint holds the config; the config's task rebuilds the model (whose
weights the checkpoint holds) and knows the vocabulary (``task.vocab``, or the
vocabulary of the task's grammar, ``task.auto.vocab``, as in the semantic-fusion
recipe). A fusion model reads the task's feature bank on the generated prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from neurosym.compile.pcfg import RuleTensors
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.decode.generate import feature_inputs, generate
from neurosym.decode.grammar import budget_of, grammar_processors
from neurosym.decode.processor import ProcessorContext, build_processor
from neurosym.errors import NeurosymError
from neurosym.kinds import load_grammar
from neurosym.layers.prefix import prefix_state
from neurosym.lm.checkpoint import load_checkpoint
from neurosym.lm.config import Config
from neurosym.lm.model import CausalLM
from neurosym.lm.train import resolve_task
from neurosym.vocab import Vocab


@dataclass
class LoadedRun:
    """A trained model ready to sample: ``model`` (eval mode), its ``vocab``, the ``task``."""

    model: CausalLM
    vocab: Vocab
    task: Any
    config: Config


def load_run(path: str | Path) -> LoadedRun:
    """A run folder (its ``last.pt``) or a checkpoint file -> :class:`LoadedRun`."""
    state = load_checkpoint(path)
    config = Config.from_dict(state["config"])
    task = resolve_task(config)
    model = task.build_model(config)
    if not isinstance(model, CausalLM):
        raise NeurosymError(f"{path}: the run's model is a {type(model).__name__}, generate needs a CausalLM")
    model.load_state_dict(state["model"])
    vocab = getattr(task, "vocab", None) or getattr(getattr(task, "auto", None), "vocab", None)
    if not isinstance(vocab, Vocab):
        raise NeurosymError(f"{path}: the run's task ({config.run.task}) does not say its vocabulary (task.vocab)")
    return LoadedRun(model.eval(), vocab, task, config)


def generate_from_run(
    run: str | Path,
    grammar: str,
    prompt: str | None = None,
    n: int = 5,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    max_len: int = 40,
    processors: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """``neurosym generate``: one dict per sample (``text``, ``tokens``, ``status``,
    ``grammar_log_prob`` — the FSG's or PCFG's exact log P of the whole text, else None —
    and ``model_log_prob`` of the generated tokens given the prompt).

    ``grammar`` is read by :func:`neurosym.kinds.load_grammar` over the run's vocabulary
    and enforced by :func:`neurosym.decode.grammar_processors` (its mask);
    ``processors`` are registered processor names (``NAME`` or ``NAME:ARG``,
    :func:`neurosym.decode.processor.build_processor`), applied after the grammar in
    order, then ``temperature`` and ``top_p`` (the processors ``temperature`` and
    ``top-p``)."""
    loaded = load_run(run)
    model, vocab = loaded.model, loaded.vocab
    auto = load_grammar(grammar, vocab)
    eos = _special(vocab, "<eos>")
    bos = vocab.id("<bos>") if "<bos>" in vocab else None
    prompt_ids = vocab.encode(prompt) if prompt else []
    context = len(prompt_ids) + (bos is not None)
    budget = min(max_len, model.config.max_len - context + 1)  # the model reads at most max_len positions
    if budget < 1:
        raise NeurosymError(f"--prompt is {len(prompt_ids)} tokens: no room left in the model's {model.config.max_len} positions")
    chain = grammar_processors(auto, eos, max_len=budget_of(auto, len(prompt_ids) + budget))
    ctx = ProcessorContext(vocab, eos, budget)
    named = [*processors, *([f"temperature:{temperature!r}"] if temperature != 1.0 else []), *([f"top-p:{top_p!r}"] if top_p < 1.0 else [])]
    chain += [build_processor(spec, ctx) for spec in named]
    kwargs: dict[str, Any] = {}
    adapter = model.adapter
    if adapter is not None:
        bank, fsg = getattr(loaded.task, "bank", None), getattr(loaded.task, "auto", None)
        if bank is None:
            raise NeurosymError(f"{run}: a fusion model needs its task's feature bank (task.bank)")
        kwargs["position_inputs"] = feature_inputs(bank, fsg)
        if getattr(adapter, "n_control", 0):
            kwargs["inputs"] = {"control": torch.zeros(n, adapter.n_control)}  # no steering: a neutral control
    out = generate(model, n=n, prompts=[prompt_ids], max_len=budget, processors=chain, seed=seed, eos_id=eos,
                   bos_id=bos, vocab=vocab, **kwargs)
    rows = []
    for b in range(n):
        full = prompt_ids + out.tokens[b]
        exact = None
        if isinstance(auto, WeightedAutomaton) and out.status[b] == "eos":
            exact = float(auto.log_prob(torch.tensor([full], dtype=torch.long).reshape(1, len(full)))[0])
        elif isinstance(auto, RuleTensors) and out.status[b] == "eos":
            exact = float(prefix_state(auto, torch.tensor([full], dtype=torch.long).reshape(1, len(full))).sentence_log_prob[0])
        rows.append({
            "text": vocab.decode(full), "tokens": full, "status": out.status[b],
            "grammar_log_prob": exact, "model_log_prob": float(out.model_log_prob[b]),
        })
    return rows


def _special(vocab: Vocab, token: str) -> int:
    if token not in vocab:
        raise NeurosymError(f"the run's vocabulary has no {token} token to end samples with")
    return vocab.id(token)


def format_samples(rows: list[dict[str, Any]]) -> str:
    """One line per sample: the text, then its grammar and model log-probabilities."""
    lines = []
    for r in rows:
        g = "n/a" if r["grammar_log_prob"] is None else f"{r['grammar_log_prob']:.4f}"
        end = "" if r["status"] == "eos" else f"  ({r['status']})"
        lines.append(f"{r['text']}\tgrammar logP {g}\tmodel logP {r['model_log_prob']:.4f}{end}")
    return "\n".join(lines)


__all__ = ["LoadedRun", "format_samples", "generate_from_run", "load_run"]
