"""Plain functions behind ``neurosym synth`` and ``neurosym bench synth`` (the click
commands only parse options and print what these return).

Suggested wiring::

    @main.command()
    @click.argument("examples", type=click.Path(exists=True))
    @click.option("--method", type=click.Choice(["beam", "evolve", "reinforce"]), default="beam")
    @click.option("--time-budget", type=float, default=10.0)
    @click.option("--seed", type=int, default=0)
    @click.option("--lam", type=float, default=0.02)
    @click.option("--expand-x", is_flag=True, help="AlphaRegex files: X stands for 0 and 1")
    @click.option("--bank", type=click.Path(), default=None, help="append the result to this .regex bank")
    @click.option("--name", default=None, help="pattern name in the bank")
    @click.option("--progress/--no-progress", default=True)
    def synth(examples, method, time_budget, seed, lam, expand_x, bank, name, progress):
        click.echo(synth_command(examples, method, time_budget, seed, lam, expand_x, bank, name, progress))

    @bench.command("synth")
    @click.option("--methods", default="beam,evolve,reinforce")
    @click.option("--time-budget", type=float, default=60.0)
    @click.option("--regel-time-budget", type=float, default=None)
    @click.option("--regel-limit", type=int, default=None)
    @click.option("--suites", default="alpharegex,regel")
    @click.option("--seed", type=int, default=0)
    @click.option("--json", "json_path", type=click.Path(), default=None)
    def bench_synth(methods, time_budget, regel_time_budget, regel_limit, suites, seed, json_path):
        click.echo(bench_synth_command(methods, time_budget, regel_time_budget, regel_limit, suites, seed, json_path))

Both raise :class:`~neurosym.errors.NeurosymError` on bad input (the CLI's usual exit 2).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from neurosym.errors import NeurosymError


def load_examples(path: str | Path, expand_x: bool = False) -> tuple[list[str], list[str]]:
    """Positive and negative examples from a file in one of three formats:

    * AlphaRegex: a description, a line ``++``, positives one per line, ``--``, negatives
      (with ``expand_x``, ``X`` stands for both 0 and 1);
    * Regel: lines ``"text",+`` and ``"text",-`` (other lines ignored);
    * plain: lines ``+ text`` and ``- text`` (``+`` alone is the empty string).
    """
    path = Path(path)
    if not path.is_file():
        raise NeurosymError(f"{path}: no such file")
    lines = path.read_text(encoding="utf-8").splitlines()
    pos: list[str] = []
    neg: list[str] = []
    if any(line.strip() == "++" for line in lines):
        from neurosym.bench.synth import expand_x as expand

        mode = None
        for line in lines:
            s = line.strip()
            if s in ("++", "--"):
                mode = pos if s == "++" else neg
            elif mode is not None and s:
                mode.extend(expand(s) if expand_x else [s])
    elif any(re.fullmatch(r'".*",\s*[+-]\s*', line) for line in lines):
        for line in lines:
            m = re.fullmatch(r'"(.*)",\s*([+-])\s*', line)
            if m:
                (pos if m.group(2) == "+" else neg).append(m.group(1))
    else:
        for n, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[:1] not in "+-" or (len(line) > 1 and line[1] != " "):
                raise NeurosymError(f"{path}:{n}:1: expected '+ text' or '- text' (or the AlphaRegex / Regel formats)")
            (pos if line[0] == "+" else neg).append(line[2:])
    if not pos:
        raise NeurosymError(f"{path}: no positive examples found")
    return pos, neg


def synth_command(
    examples: str | Path,
    method: str = "beam",
    time_budget: float = 10.0,
    seed: int = 0,
    lam: float = 0.02,
    expand_x: bool = False,
    bank: str | Path | None = None,
    name: str | None = None,
    progress: bool = False,
) -> str:
    """``neurosym synth EXAMPLES``: synthesise, optionally append to a bank; returns the report."""
    from neurosym.synth import synthesize, write_to_bank

    if (bank is None) != (name is None):
        raise NeurosymError("--bank and --name go together")
    pos, neg = load_examples(examples, expand_x)
    res = synthesize(pos, neg, method=method, time_budget=time_budget, seed=seed, lam=lam, progress=progress)
    lines = [
        f"pattern: /{res.pattern}/",
        f"solved: {'yes' if res.solved else 'no'} ({len(pos)} positives, {len(neg)} negatives)",
        f"size: {res.size}  score: {res.score:.3f}  time: {res.seconds:.2f} s  method: {res.method}",
    ]
    if not res.solved:
        missed = [s for s, d in zip(pos, res.distances) if d > 0]
        lines.append(f"rejected positives: {missed[:10]!r}" + (" ..." if len(missed) > 10 else ""))
        lines.append(f"accepted negatives: {res.accepted_negatives[:10]!r}")
    if bank is not None:
        write_to_bank(bank, name, res.pattern)
        lines.append(f"written to {bank} as {name}")
    return "\n".join(lines)


def bench_synth_command(
    methods: str = "beam,evolve,reinforce",
    time_budget: float = 60.0,
    regel_time_budget: float | None = None,
    regel_limit: int | None = None,
    suites: str = "alpharegex,regel",
    seed: int = 0,
    json_path: str | Path | None = None,
    log=None,
) -> str:
    """``neurosym bench synth``: run the benchmarks, optionally save JSON; returns the table."""
    from neurosym.bench.synth import BENCH_METHODS, format_results, run

    ms = tuple(m.strip() for m in methods.split(",") if m.strip())
    bad = [m for m in ms if m not in BENCH_METHODS]
    if bad:
        raise NeurosymError(f"unknown method(s) {', '.join(bad)}")
    res = run(
        methods=ms,
        time_budget=time_budget,
        regel_time_budget=regel_time_budget,
        seed=seed,
        suites=tuple(s.strip() for s in suites.split(",")),
        regel_limit=regel_limit,
        log=log,
    )
    if json_path is not None:
        Path(json_path).write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
    return format_results(res)


__all__ = ["bench_synth_command", "load_examples", "synth_command"]
