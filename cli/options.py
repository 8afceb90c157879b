"""What the commands of ``neurosym`` share: the options that mean the same everywhere,
declared once, and the helpers of their help texts and checks.

Each ``*_option`` returns a click decorator; where commands differ in a default or a
help text, the difference is an argument, so a name keeps one meaning (``--json`` is a
flag, ``-o`` is ``--output``, ``-n`` is ``--samples``, ``--threads`` counts torch
threads, ``--resume`` reuses finished runs). Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from neurosym.errors import NeurosymError

F = TypeVar("F", bound=Callable[..., Any])


def examples(*lines: str) -> str:
    """A command's epilog: example command lines, kept as written (click's ``\\b``)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def json_option(help: str = "Machine-readable results.") -> Callable[[F], F]:
    """``--json``: a flag (machine-readable output on stdout), passed as ``as_json``."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def threads_option(default: int | None, help: str = "Torch threads.") -> Callable[[F], F]:
    """``--threads N`` (at least 1); ``default=None`` leaves torch's own count."""
    return click.option("--threads", default=default, show_default=default is not None, type=click.IntRange(min=1), help=help)


def resume_option(help: str = "Resume interrupted runs (finished ones are reused).") -> Callable[[F], F]:
    """``--resume``: a flag."""
    return click.option("--resume", is_flag=True, help=help)


def jobs_option(help: str = "Runs trained in parallel, one process each with --threads threads (2 on 2 cores with --threads 1).") -> Callable[[F], F]:
    """``--jobs N`` (at least 1, default 1)."""
    return click.option("--jobs", default=1, show_default=True, type=click.IntRange(min=1), help=help)


def out_dir_option(default: str, help: str = "Where the runs go.") -> Callable[[F], F]:
    """A recipe's ``--out-dir`` (check it with :func:`check_out_dir`)."""
    return click.option("--out-dir", default=default, show_default=True, type=click.Path(path_type=Path), help=help)


def output_option(help: str) -> Callable[[F], F]:
    """``-o/--output FILE``, optional, as a :class:`~pathlib.Path`."""
    return click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help=help)


def force_option(what: str) -> Callable[[F], F]:
    """``--force``: replace an existing file that is not neurosym's own ``what`` (never an
    input, nor a file an input reads)."""
    return click.option("--force", is_flag=True, help=f"Replace an existing file that is not a neurosym {what} "
                        "(inputs and the files they read are never replaced).")


def seed_option(help: str = "Random seed (same seed, same samples).") -> Callable[[F], F]:
    """``--seed`` (default 0)."""
    return click.option("--seed", default=0, show_default=True, help=help)


def seeds_option(default: int | None, help: str) -> Callable[[F], F]:
    """A recipe's ``--seeds`` (how many model seeds, at least 1)."""
    return click.option("--seeds", default=default, show_default=default is not None, type=click.IntRange(min=1), help=help)


def samples_option(default: int = 5, help: str = "How many samples (strings, sentences or trees).", least: int = 0,
                   dest: str = "n") -> Callable[[F], F]:
    """``-n/--samples`` (at least ``least``), passed as ``dest``."""
    return click.option("-n", "--samples", dest, default=default, show_default=True, type=click.IntRange(min=least), help=help)


def gpu_option(help: str) -> Callable[[F], F]:
    """``--gpu``: a flag."""
    return click.option("--gpu", is_flag=True, help=help)


LIMIT_OPTIONS = [
    click.option(
        "--max-states", default=10_000, show_default=True, type=click.IntRange(min=1),
        help="Cap on automaton states: per pattern of a regex bank, per regex terminal of an FSG or PCFG, "
        "and for an FSG's whole determinised automaton. Lexicons ignore it.",
    ),
    click.option(
        "--time-limit", default=30.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
        help="Cap on seconds, counted like --max-states. Lexicons ignore it.",
    ),
]


def with_limits(f: F) -> F:
    """``--max-states`` and ``--time-limit``: the caps on compiling automata (see :func:`limits`)."""
    for opt in reversed(LIMIT_OPTIONS):
        f = opt(f)
    return f


def limits(max_states: int, time_limit: float):
    """The :class:`~neurosym.compile.regex.Limits` of :func:`with_limits`'s options."""
    from neurosym.compile.regex import Limits  # lazy: --help must not load torch and every subsystem
    return Limits(max_states=max_states, time_limit=time_limit)


def check_out_dir(out_dir: Path) -> None:
    """A recipe's --out-dir must be a folder or not exist yet (nor any file on its way)."""
    for part in (out_dir, *out_dir.parents):
        if part.exists():
            if not part.is_dir():
                raise NeurosymError(f"--out-dir {out_dir}: {part} is a file, not a folder")
            break


__all__ = [
    "LIMIT_OPTIONS",
    "check_out_dir",
    "examples",
    "force_option",
    "gpu_option",
    "jobs_option",
    "json_option",
    "limits",
    "out_dir_option",
    "output_option",
    "resume_option",
    "samples_option",
    "seed_option",
    "seeds_option",
    "threads_option",
    "with_limits",
]
