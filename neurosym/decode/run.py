"""What ``neurosym generate`` and ``neurosym eval --grammar`` do with a trained run: load
it, compile a grammar over its vocabulary (through the one front door,
:func:`neurosym.kinds.load_grammar`), and sample.

* :func:`generate_from_run` samples through the processors
  :func:`neurosym.decode.grammar_processors` picks (a ``GrammarMask``, a ``PCFGMask``)
  and any registered processors named, and scores each sample.
* :func:`grammaticality` samples the model *unconstrained* and measures how many samples
  are sentences of the grammar (and, of those cut off by the length budget, how many are
  still viable prefixes of one).

A run is what ``neurosym train`` writes: a folder with ``last.pt`` (or a checkpoint file
itself). A run of the built-in ``lm`` task (:func:`neurosym.lm.task.is_lm_run`) is read by
:func:`neurosym.lm.task.load_lm_run`: its own vocabulary, checksummed weights, native or
Hugging Face model (``[model] hf = DIR``, with or without LoRA). Any other run's
checkpoint holds the config whose task rebuilds the model and knows the vocabulary
(``task.vocab``, or the vocabulary of the task's grammar, ``task.auto.vocab``, as in the
semantic-fusion recipe). A fusion model reads the task's feature bank on the generated
prefix.

The vocabulary a grammar is compiled over is the run's, padded to the model's output rows
(a transformers model may have more rows than its tokenizer has tokens: those ids spell
nothing, so no grammar allows them, and unconstrained sampling bans them). An ``.fsg`` or
``.pcfg`` over a sub-word tokenizer compiles only when each of its words is one token of
the vocabulary; otherwise it is refused with one line that names this limitation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neurosym.decode.generate import Generation, feature_inputs, generate
from neurosym.decode.grammar import budget_of, grammar_processors
from neurosym.decode.guide import Guide, compile_guide, guide_of
from neurosym.decode.mask import TokenBan
from neurosym.decode.processor import LogitsProcessor, ProcessorContext, build_processor
from neurosym.errors import NeurosymError
from neurosym.lm.checkpoint import load_checkpoint
from neurosym.lm.config import Config
from neurosym.lm.hf_model import HFCausalLM
from neurosym.lm.model import CausalLM
from neurosym.lm.task import is_lm_run, load_lm_run, special_ids
from neurosym.lm.train import resolve_task
from neurosym.vocab import Vocab



@dataclass
class LoadedRun:
    """A trained model ready to sample: ``model`` (eval mode), its ``vocab`` (padded to
    the model's output rows), the ``task`` and ``config``; ``eos_id`` ends a sample,
    ``start_id`` is read before it (``<bos>``, or the end token where the vocabulary has
    no ``<bos>``: the lm task's stream is then ``doc <eos> doc <eos> ...``);
    ``size`` is the number of the run's own tokens (ids from ``size`` on spell nothing)."""

    model: CausalLM | HFCausalLM
    vocab: Vocab
    task: Any
    config: Config
    eos_id: int
    start_id: int | None
    size: int


def load_run(path: str | Path) -> LoadedRun:
    """A run folder (its ``last.pt``) or a checkpoint file -> :class:`LoadedRun`."""
    if is_lm_run(path):
        task, model = load_lm_run(path)
        vocab, config = task.vocab, task.config
        _, eos, bos = special_ids(vocab)
        start = bos if bos is not None else eos
    else:
        folder = Path(path)
        if folder.is_dir() and not (folder / "last.pt").exists():
            raise NeurosymError(f"{folder}: not a run folder (it holds no last.pt checkpoint; a run folder is run.out_dir/run.name "
                                "of a finished or interrupted training)")
        state = load_checkpoint(path)
        config = Config.from_dict(state["config"])
        task = resolve_task(config)
        model = task.build_model(config)
        if not isinstance(model, CausalLM):
            raise NeurosymError(f"{path}: the run's model is a {type(model).__name__}, generate needs a CausalLM")
        model.load_state_dict(state["model"])
        model.eval()
        vocab = getattr(task, "vocab", None) or getattr(getattr(task, "auto", None), "vocab", None)
        if not isinstance(vocab, Vocab):
            raise NeurosymError(f"{path}: the run's task ({config.run.task}) does not say its vocabulary (task.vocab)")
        eos = _special(vocab, "<eos>")
        start = vocab.id("<bos>") if "<bos>" in vocab else None
    rows = model.lm_head.weight.shape[0]
    if rows < len(vocab):
        raise NeurosymError(f"{path}: the model has {rows} output rows for {len(vocab)} tokens")
    return LoadedRun(model, vocab.padded(rows), task, config, eos, start, len(vocab))


def run_grammar(grammar: str, loaded: LoadedRun) -> Guide:
    """``grammar`` compiled over the run's vocabulary into a guide
    (:func:`~neurosym.decode.guide.compile_guide`, cached). Over a byte-level or character
    vocabulary an ``.fsg``/``.pcfg`` is read as a language of strings (docs/strings.md),
    so its words need not be tokens; over a word vocabulary each of its words must be one
    token."""
    return compile_guide(grammar, loaded.vocab)


def sample_run(
    loaded: LoadedRun, processors: Sequence[LogitsProcessor], n: int, prompt_ids: Sequence[int] = (), seed: int = 0, max_len: int = 40,
) -> Generation:
    """``n`` samples of at most ``max_len`` tokens (end included) after ``prompt_ids``,
    through ``processors``; a fusion model reads its task's features of each prefix."""
    model = loaded.model
    kwargs: dict[str, Any] = {}
    adapter = model.adapter
    if adapter is not None:
        bank, fsg = getattr(loaded.task, "bank", None), getattr(loaded.task, "auto", None)
        if bank is None:
            raise NeurosymError("a fusion model needs its task's feature bank (task.bank)")
        kwargs["position_inputs"] = feature_inputs(bank, fsg, bos=loaded.start_id is not None)
        if getattr(adapter, "n_control", 0):
            kwargs["inputs"] = {"control": torch.zeros(n, adapter.n_control)}  # no steering: a neutral control
    return generate(model, n=n, prompts=[list(prompt_ids)], max_len=max_len, processors=list(processors), seed=seed,
                    eos_id=loaded.eos_id, bos_id=loaded.start_id, vocab=loaded.vocab, **kwargs)


def budget(loaded: LoadedRun, prompt_length: int, max_len: int) -> int:
    """Tokens a sample may generate after a prompt: ``max_len``, or less where the model's
    positions run out (it reads the start token, the prompt and all but the last token)."""
    context = prompt_length + (loaded.start_id is not None)
    room = min(max_len, loaded.model.max_len - context + 1)
    if room < 1:
        raise NeurosymError(f"--prompt is {prompt_length} tokens: no room left in the model's {loaded.model.max_len} positions")
    return room


def unused_ban(loaded: LoadedRun) -> list[LogitsProcessor]:
    """A :class:`TokenBan` of the model's output rows beyond the run's tokens (none when there are none)."""
    unused = range(loaded.size, len(loaded.vocab))
    return [TokenBan(unused, len(loaded.vocab))] if len(unused) else []


def generate_from_run(
    run: str | Path,
    grammar: str | None,
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
    and enforced by :func:`neurosym.decode.grammar_processors` (its mask); None samples
    freely (only the run's own tokens);
    ``processors`` are registered processor names (``NAME`` or ``NAME:ARG``,
    :func:`neurosym.decode.processor.build_processor`), applied after the grammar in
    order, then ``temperature`` and ``top_p`` (the processors ``temperature`` and
    ``top-p``)."""
    loaded = load_run(run)
    vocab = loaded.vocab
    auto = run_grammar(grammar, loaded) if grammar is not None else None
    prompt_ids = vocab.encode(prompt) if prompt else []
    room = budget(loaded, len(prompt_ids), max_len)
    if auto is not None:
        chain = grammar_processors(auto, loaded.eos_id, max_len=budget_of(auto, len(prompt_ids) + room))
    else:
        chain = unused_ban(loaded)
    ctx = ProcessorContext(vocab, loaded.eos_id, room)
    named = [*processors, *([f"temperature:{temperature!r}"] if temperature != 1.0 else []), *([f"top-p:{top_p!r}"] if top_p < 1.0 else [])]
    chain += [build_processor(spec, ctx) for spec in named]
    out = sample_run(loaded, chain, n, prompt_ids, seed, room)
    rows = []
    guide = guide_of(auto) if auto is not None else None
    for b in range(n):
        full = prompt_ids + out.tokens[b]
        exact = guide.sentence_log_prob(full) if guide is not None and out.status[b] == "eos" else None
        rows.append({
            "text": vocab.decode(full), "tokens": full, "status": out.status[b],
            "grammar_log_prob": exact, "model_log_prob": float(out.model_log_prob[b]),
        })
    return rows


def membership(grammar: Any, rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sentence, viable)`` (B,) bool for token rows: whether each row is a sentence of
    the grammar, and whether it is a viable prefix of one (some continuation makes it a
    sentence): the grammar's guide answers (:meth:`~neurosym.decode.guide.Guide.membership`)."""
    sentence, viable = guide_of(grammar).membership(rows)
    return torch.from_numpy(np.asarray(sentence, dtype=bool)), torch.from_numpy(np.asarray(viable, dtype=bool))


def grammaticality(run: str | Path, grammar: str, n: int = 200, seed: int = 0, max_len: int = 40) -> dict[str, Any]:
    """``neurosym eval RUN --grammar FILE``: draw ``n`` unconstrained samples from the model
    (temperature 1, at most ``max_len`` tokens, end included) and report ``rate``, the
    fraction of the ``n`` samples that ended and are sentences of ``grammar``, and
    ``viable_prefix_rate``, the fraction of the unfinished samples (cut off by the budget)
    that are still viable prefixes of a sentence (None when every sample ended). Each
    sample is listed under ``samples`` with its text, tokens, status and verdicts."""
    loaded = load_run(run)
    auto = run_grammar(grammar, loaded)
    room = budget(loaded, 0, max_len)
    out = sample_run(loaded, unused_ban(loaded), n, (), seed, room)
    sentence, viable = membership(auto, out.tokens)
    ended = torch.tensor([s == "eos" for s in out.status], dtype=torch.bool)
    sentence, viable = sentence & ended, viable & ~ended
    finished, unfinished = int(ended.sum()), int((~ended).sum())
    samples = [{"text": loaded.vocab.decode(t), "tokens": t, "status": s, "sentence": bool(a), "viable_prefix": bool(v) if s != "eos" else None}
               for t, s, a, v in zip(out.tokens, out.status, sentence.tolist(), viable.tolist())]
    return {
        "grammar": str(grammar), "n": n, "seed": seed, "max_len": room,
        "finished": finished, "sentences": int(sentence.sum()), "rate": int(sentence.sum()) / n if n else None,
        "unfinished": unfinished, "viable": int(viable.sum()), "viable_prefix_rate": int(viable.sum()) / unfinished if unfinished else None,
        "samples": samples,
    }


def format_grammaticality(report: dict[str, Any]) -> str:
    """One line: the share of samples that are sentences, and of unfinished ones that are viable."""
    line = (f"grammaticality {report['rate']:.4f} ({report['sentences']} of {report['n']} unconstrained samples are sentences of "
            f"{report['grammar']}; {report['finished']} ended within {report['max_len']} tokens)")
    if report["unfinished"]:
        line += f"; viable prefixes {report['viable_prefix_rate']:.4f} ({report['viable']} of {report['unfinished']} unfinished)"
    return line


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


__all__ = [
    "LoadedRun", "budget", "format_grammaticality", "format_samples", "generate_from_run", "grammaticality", "load_run",
    "membership", "run_grammar", "sample_run", "unused_ban",
]
