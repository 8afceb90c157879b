"""Synthesis of one regex from positive and negative examples: :func:`synthesize`,
:func:`score_on_examples` and their :class:`SynthResult`.

:func:`synthesize` checks the examples, runs the search of a method from the registry
:mod:`neurosym.synth.methods`, then compiles the regex it found with
:func:`neurosym.compile_regex` and scores it on the examples, whatever the method.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from neurosym.compile.regex import compile_regex
from neurosym.errors import NeurosymError
from neurosym.synth import clock, regex_ast
from neurosym.synth.distance import objective
from neurosym.synth.methods import get_method
from neurosym.synth.regex_ast import parse, size, to_pattern
from neurosym.synth.simplify import simplify


@dataclass
class SynthResult:
    """The outcome of :func:`synthesize`.

    Attributes:
        pattern: the regex (Python ``re`` syntax, full-match semantics).
        score: the objective (lower is better): median edit distance of the positives
            to the language + ``neg_penalty`` per accepted negative + ``lam * size``
            (+ a tie-break for the fraction of rejected positives).
        solved: accepts every positive and no negative (compiled DFA and ``re.fullmatch`` agree).
        size: AST size (binary-tree nodes).
        seconds: time taken, on the synthesis clock (wall-clock time unless inside :func:`neurosym.synth.clock.cpu_clock`).
        method: the method used.
        distances: edit distance of each positive to the language (0 = accepted).
        accepted_negatives: the negatives the regex accepts.
        info: method statistics (states expanded, evaluations, phase, ...).
    """

    pattern: str
    score: float
    solved: bool
    size: int
    seconds: float
    method: str
    distances: list = field(default_factory=list)
    accepted_negatives: list = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def __str__(self) -> str:
        mark = "solved" if self.solved else "not solved"
        return f"/{self.pattern}/ ({mark}, size {self.size}, score {self.score:.3f}, {self.seconds:.2f} s, {self.method})"


def _check_examples(positives, negatives) -> tuple[list[str], list[str]]:
    if isinstance(positives, str) or isinstance(negatives, str):
        raise NeurosymError("positives and negatives must be sequences of strings, not one string")
    pos = list(dict.fromkeys(positives))
    neg = list(dict.fromkeys(negatives))
    if not pos:
        raise NeurosymError("synthesis needs at least one positive example")
    for s in pos + neg:
        if not isinstance(s, str):
            raise NeurosymError(f"examples must be strings, got {type(s).__name__}: {s!r}")
    both = sorted(set(pos) & set(neg))
    if both:
        raise NeurosymError(f"examples are both positive and negative: {both[:5]!r}")
    return pos, neg


def score_on_examples(
    pattern: str | regex_ast.Node,
    positives: Sequence[str],
    negatives: Sequence[str] = (),
    lam: float = 0.02,
    neg_penalty: float = 1.0,
) -> dict:
    """Compile ``pattern`` with :func:`neurosym.compile_regex` and score it on the examples.

    Returns ``pattern, score, solved, size, distances, accepted_negatives``; ``solved``
    requires the compiled DFA and ``re.fullmatch`` to agree that every positive is
    accepted and no negative is."""
    node = simplify(parse(pattern) if isinstance(pattern, str) else pattern)
    text = to_pattern(node)
    dfa = compile_regex(text).char_dfa
    score, d, _ = objective(dfa, positives, negatives, size(node), lam, neg_penalty)
    rx = re.compile(text)
    dfa_ok = all(dfa.accepts(s) for s in positives) and not any(dfa.accepts(s) for s in negatives)
    re_ok = all(rx.fullmatch(s) for s in positives) and not any(rx.fullmatch(s) for s in negatives)
    return {
        "pattern": text,
        "score": float(score),
        "solved": bool(dfa_ok and re_ok),
        "size": size(node),
        "distances": [float(x) for x in d],
        "accepted_negatives": [s for s in negatives if dfa.accepts(s)],
    }


def synthesize(
    positives: Sequence[str],
    negatives: Sequence[str] = (),
    method: str = "beam",
    time_budget: float = 10.0,
    seed: int = 0,
    lam: float = 0.02,
    progress: bool = False,
    leaves: Sequence[regex_ast.Node] | None = None,
    **options,
) -> SynthResult:
    """Find a regex accepting every positive and no negative example.

    Args:
        positives, negatives: example strings (duplicates ignored; a string in both is an error).
        method: a registered method (:func:`neurosym.synth.methods.method_names`: the
            built-ins are ``"beam"``, ``"evolve"`` and ``"reinforce"``).
        time_budget: seconds (the search stops early once solved).
        seed: makes ``evolve``, ``reinforce`` and the local beam reproducible.
        lam: weight of the regex size in the objective.
        progress: show a tqdm progress bar.
        leaves: leaf alphabet (default :func:`neurosym.synth.bestfirst.default_leaves`).
        options: passed to the method, which must declare them (:attr:`Method.options
            <neurosym.synth.methods.Method.options>`; e.g. ``beam_width``, ``population``,
            ``batch``; ``formats=False`` turns off ``beam``'s format induction).
    """
    pos, neg = _check_examples(positives, negatives)
    record = get_method(method)
    unknown = sorted(set(options) - set(record.options))
    if unknown:
        raise NeurosymError(
            f"synthesis method {method!r} has no option {', '.join(unknown)}; its options: {', '.join(record.options) or '(none)'}"
        )
    if time_budget <= 0:
        raise NeurosymError("time_budget must be positive")
    search = record.resolve()
    t0 = clock.now()
    node, info = search(pos, neg, time_budget=time_budget, seed=seed, lam=lam, progress=progress, leaves=leaves, **options)
    seconds = clock.now() - t0
    ev = score_on_examples(node, pos, neg, lam)
    return SynthResult(
        pattern=ev["pattern"],
        score=ev["score"],
        solved=ev["solved"],
        size=ev["size"],
        seconds=seconds,
        method=method,
        distances=ev["distances"],
        accepted_negatives=ev["accepted_negatives"],
        info=info,
    )


__all__ = ["SynthResult", "score_on_examples", "synthesize"]
