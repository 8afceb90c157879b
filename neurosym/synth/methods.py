"""The registry of synthesis methods: one record per search, one place to add one.

A method is a name, a search function with the signature of :class:`Search`, a
one-line summary and the names of the extra keyword options its search accepts.
:func:`neurosym.synth.synthesize`, ``neurosym synth --method`` and ``neurosym bench
synth --methods`` all read this table, so a new method is one call::

    from neurosym.synth.methods import register_method

    def search(positives, negatives=(), time_budget=10.0, seed=0, lam=0.02,
               progress=False, leaves=None, width=4):
        ...                                  # -> (regex AST, statistics dict)

    register_method("mine", search, summary="my search", options=("width",))

The built-in methods name their search as ``"module:function"``, imported on first
use, so reading the table (``neurosym synth --help``) loads neither numpy nor torch.
This module imports nothing heavy for the same reason.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from neurosym.errors import NeurosymError

if TYPE_CHECKING:  # the AST module is only named in annotations
    from neurosym.synth.regex_ast import Node

# The keyword arguments every search receives from :func:`neurosym.synth.synthesize`.
COMMON = ("time_budget", "seed", "lam", "progress", "leaves")


class Search(Protocol):
    """A method's search: find a regex accepting every positive and no negative example.

    Args:
        positives, negatives: the examples (deduplicated, disjoint, at least one positive).
        time_budget: seconds on the synthesis clock (:mod:`neurosym.synth.clock`); stop
            when it ends or as soon as every example is satisfied.
        seed: makes the search reproducible.
        lam: weight of the regex size in the objective (:func:`neurosym.synth.distance.objective`).
        progress: show a progress bar.
        leaves: the leaf alphabet, or None for the method's default.

    Method-specific options come as further keyword arguments with defaults, named in
    :attr:`Method.options`. Returns ``(best regex AST, statistics)``; the caller compiles
    and scores the AST itself, so a search need not check its own answer."""

    def __call__(
        self,
        positives: Sequence[str],
        negatives: Sequence[str] = (),
        time_budget: float = 10.0,
        seed: int = 0,
        lam: float = 0.02,
        progress: bool = False,
        leaves: Sequence[Node] | None = None,
    ) -> tuple[Node, dict]: ...


@dataclass(frozen=True)
class Method:
    """One synthesis method.

    Attributes:
        name: what ``method=`` and ``--method`` call it.
        search: the search function, or ``"package.module:function"`` imported on first use.
        summary: one line for listings.
        options: the keyword options the search accepts beyond :data:`COMMON`.
    """

    name: str
    search: Search | str
    summary: str = ""
    options: tuple[str, ...] = ()

    def resolve(self) -> Search:
        """The search function (importing its module if it was named by a string)."""
        if not isinstance(self.search, str):
            return self.search
        module, _, attr = self.search.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as err:
            raise NeurosymError(f"synthesis method {self.name!r}: cannot load {self.search!r} ({err})") from None


_METHODS: dict[str, Method] = {}


def _options_of(search: Search) -> tuple[str, ...]:
    """The keyword parameters of ``search`` beyond the examples and :data:`COMMON`."""
    params = list(inspect.signature(search).parameters.values())[2:]
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in params if p.kind in kinds and p.name not in COMMON)


def register_method(
    name: str,
    search: Search | str,
    summary: str = "",
    options: Sequence[str] | None = None,
    replace: bool = False,
) -> Method:
    """Add a method to the table and return its record.

    ``options`` defaults to the search function's own keyword parameters beyond the
    common ones (a search named by a string must declare them). A name already taken
    is an error unless ``replace``."""
    if not name or not isinstance(name, str) or any(c.isspace() or c == "," for c in name):
        raise NeurosymError(f"bad synthesis method name {name!r}: a non-empty word without spaces or commas")
    if name in _METHODS and not replace:
        raise NeurosymError(f"synthesis method {name!r} is already registered")
    if options is None:
        if isinstance(search, str):
            raise NeurosymError(f"synthesis method {name!r}: a search named by a string must declare its options")
        options = _options_of(search)
    method = Method(name, search, summary, tuple(options))
    _METHODS[name] = method
    return method


def unregister_method(name: str) -> None:
    """Remove a method from the table (a test's clean-up)."""
    if _METHODS.pop(name, None) is None:
        raise NeurosymError(f"unknown synthesis method {name!r}")


def get_method(name: str) -> Method:
    """The record of ``name``, or a :class:`NeurosymError` listing the known methods."""
    try:
        return _METHODS[name]
    except KeyError:
        raise NeurosymError(f"unknown synthesis method {name!r}; expected one of {', '.join(_METHODS)}") from None


def method_names() -> tuple[str, ...]:
    """The registered methods' names, in registration order (the built-ins first)."""
    return tuple(_METHODS)


register_method(
    "beam",
    "neurosym.synth.beam:search",
    "format induction, best-first enumeration with pruning (AlphaRegex-style), then a local beam search",
    ("beam_width", "enum_fraction", "costs", "open_ends", "select", "window", "max_candidates", "beta", "formats", "leaf_choices", "finish"),
)
register_method(
    "evolve",
    "neurosym.synth.evolve:search",
    "a genetic algorithm over regex ASTs",
    ("population", "elite", "tournament", "p_crossover", "max_size", "max_generations"),
)
register_method(
    "reinforce",
    "neurosym.synth.reinforce:search",
    "a GRU policy writing regexes token by token, trained by REINFORCE",
    ("batch", "max_tokens", "lr", "entropy", "baseline_decay"),
)


__all__ = ["COMMON", "Method", "Search", "get_method", "method_names", "register_method", "unregister_method"]
