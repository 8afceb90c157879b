"""The logits-processor protocol every decoding step goes through.

A processor holds per-row state (an automaton state, a prefix chart, a history) for a
batch of B rows being decoded together. :func:`neurosym.decode.generate` drives it:

    proc.reset(B, device)                 # before the first token of a batch
    for each prompt position / step:
        scores = proc(scores)             # (B, V) float log-space scores -> (B, V)
        proc.advance(tokens)              # (B,) long: the token each row took

``scores`` are unnormalised log-weights; ``-inf`` forbids a token. A processor may
modify ``scores`` in place and must return the tensor to use next. ``advance`` is
called once per position with the chosen tokens, so no processor ever recomputes from
the start of the sequence. Rows that already ended receive ``pad`` tokens; processors
ignore them (see ``done`` in :meth:`advance`).

A processor that constrains the language also answers :meth:`allowed`: which of the
given tokens it permits at each row's current state (used to check prompts and to stop
rows that have no continuation left). A processor that defines a distribution over
sequences (a grammar prior) also answers :meth:`log_prob`, which ``generate`` sums into
each row's grammar log-probability.

Processors are also **named**: :func:`register_processor` declares a factory under a
name, and ``neurosym generate --processor NAME[:ARG]`` (and
:func:`neurosym.decode.run.generate_from_run`, ``processors=[...]``) builds it by that
name through :func:`build_processor`. The built-in names (``temperature``, ``top-k``,
``top-p``, ``repetition-penalty``, ``ban``) are registered beside their classes;
:func:`processor_names` lists every name (docs/architecture.md, "How to add a decoding
processor")::

    register_processor("shout", lambda arg, ctx: Shout(ctx.vocab), "prefer upper case")
    build_processor("top-p:0.9", ProcessorContext(vocab, eos_id))   # Nucleus(0.9)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab


class LogitsProcessor:
    """Base class: the identity processor with no state."""

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        """Start B fresh rows (every row at the grammar's start, empty history)."""

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        """scores (B, V) -> (B, V) for the next token."""
        return scores

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        """Feed the token each row took: tokens (B,) long; ``done`` (B,) bool marks rows
        that had already finished (their token is padding and must not move the state)."""

    def allowed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Whether each row may take ``tokens`` (B,) next: (B,) bool. Unconstrained here."""
        return torch.ones(tokens.shape[0], dtype=torch.bool, device=tokens.device)

    def describe_allowed(self, row: int, limit: int = 8) -> list[int]:
        """A few token ids row ``row`` may take next (for error messages); [] if any."""
        return []

    def log_prob(self, tokens: torch.Tensor) -> torch.Tensor | None:
        """The processor's own log P(token | row's state) for ``tokens`` (B,): (B,) float64,
        or None if it defines no distribution (masks, sampling transforms). Called before
        :meth:`advance` with the same tokens."""
        return None


# ---------------------------------------------------------------------- named processors
@dataclass(frozen=True)
class ProcessorContext:
    """What a named processor's factory may read: the ``vocab`` decoded over, the
    ``eos_id`` that ends a row, and ``max_len``, the most tokens a row generates after its
    prompt (end included; None when unbounded)."""

    vocab: Vocab
    eos_id: int
    max_len: int | None = None


Factory = Callable[["str | None", ProcessorContext], LogitsProcessor]


@dataclass(frozen=True)
class NamedProcessor:
    """A registered processor: ``build(arg, context)`` makes one (``arg`` is the text
    after ``NAME:``, None without it); ``help`` is one line for listings."""

    name: str
    build: Factory
    help: str = ""


_PROCESSORS: dict[str, NamedProcessor] = {}


def register_processor(name: str, build: Factory, help: str = "", replace: bool = False) -> NamedProcessor:
    """Declare the factory ``build(arg, context) -> LogitsProcessor`` under ``name``
    (letters, digits, ``-`` and ``_``). A name already taken is an error unless
    ``replace``."""
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise NeurosymError(f"processor name {name!r}: use letters, digits, '-' and '_'")
    if not callable(build):
        raise NeurosymError(f"processor {name!r}: build must be callable (arg, context) -> LogitsProcessor")
    if name in _PROCESSORS and not replace:
        raise NeurosymError(f"processor {name!r} is registered already; pass replace=True to replace it")
    entry = NamedProcessor(name, build, help)
    _PROCESSORS[name] = entry
    return entry


def unregister_processor(name: str) -> NamedProcessor:
    """Remove the processor registered as ``name``; returns its entry."""
    if name not in _PROCESSORS:
        raise NeurosymError(f"no processor named {name!r}; registered: {', '.join(sorted(_PROCESSORS))}")
    return _PROCESSORS.pop(name)


def processor_names() -> dict[str, str]:
    """Every registered name and its one-line help, sorted by name."""
    return {n: _PROCESSORS[n].help for n in sorted(_PROCESSORS)}


def build_processor(spec: str, context: ProcessorContext) -> LogitsProcessor:
    """The processor ``spec`` names: ``NAME`` or ``NAME:ARG`` (``top-p:0.9``)."""
    name, sep, arg = spec.partition(":")
    entry = _PROCESSORS.get(name.strip())
    if entry is None:
        raise NeurosymError(f"--processor {spec}: no processor named {name!r}; registered: {', '.join(sorted(_PROCESSORS))}")
    proc = entry.build(arg if sep else None, context)
    if not isinstance(proc, LogitsProcessor):
        raise NeurosymError(f"--processor {spec}: the factory returned a {type(proc).__name__}, not a LogitsProcessor")
    return proc


def number_arg(spec: str, arg: str | None, kind: type = float) -> float:
    """``arg`` as a number for processor ``spec`` (a clear error when missing or not one)."""
    if arg is None:
        raise NeurosymError(f"--processor {spec}: expected {spec}:NUMBER")
    try:
        return kind(arg)
    except ValueError:
        raise NeurosymError(f"--processor {spec}:{arg}: {arg!r} is not {'an integer' if kind is int else 'a number'}") from None


__all__ = [
    "LogitsProcessor", "NamedProcessor", "ProcessorContext", "build_processor", "number_arg", "processor_names",
    "register_processor", "unregister_processor",
]
