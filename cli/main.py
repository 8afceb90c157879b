"""The ``neurosym`` command (click). Installed as ``neurosym.cli``.

Every user error is a :class:`~neurosym.errors.NeurosymError`: it is printed as one
line (``path:line:col: message`` where a file is involved) and the exit status is 2.
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from neurosym.errors import NeurosymError


class NeurosymGroup(click.Group):
    """A click group that turns NeurosymError into a one-line message and exit status 2."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except NeurosymError as err:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"error: {err}", err=True)
            ctx.exit(2)


@click.group(cls=NeurosymGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.version_option(package_name="neurosym")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """neurosym: compile symbolic grammars into tensors for neural models."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _limits(max_states: int, time_limit: float):
    from neurosym.compile.regex import Limits

    return Limits(max_states=max_states, time_limit=time_limit)


limit_options = [
    click.option("--max-states", default=10_000, show_default=True, help="Cap on DFA states per pattern."),
    click.option("--time-limit", default=30.0, show_default=True, help="Cap on seconds per pattern."),
]


def with_limits(f):
    for opt in reversed(limit_options):
        f = opt(f)
    return f


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@with_limits
@click.option("--json", "as_json", is_flag=True, help="Machine-readable results.")
def check(files: tuple[Path, ...], max_states: int, time_limit: float, as_json: bool) -> None:
    """Parse and compile FILES; report each one's errors (exit 2 if any)."""
    import neurosym

    results, failed = [], False
    for f in files:
        try:
            obj = neurosym.load(f, max_states=max_states, time_limit=time_limit)
            results.append({"file": str(f), "ok": True, **_summary(obj)})
        except NeurosymError as err:
            failed = True
            results.append({"file": str(f), "ok": False, "error": str(err)})
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        for r in results:
            if r["ok"]:
                click.echo(f"{r['file']}: ok ({r['patterns']} patterns, {r['states']} states)")
            else:
                click.echo(r["error"], err=True)
    if failed:
        sys.exit(2)


def _summary(obj) -> dict:
    from neurosym.compile.regex import RegexBank

    if isinstance(obj, RegexBank):
        return {"patterns": len(obj), "states": int(obj.offsets[-1]), "vocab_size": len(obj.vocab)}
    return {"patterns": 1, "states": obj.num_states, "vocab_size": len(obj.vocab)}


@main.command(name="compile")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--vocab", "vocab_spec", default=None, help="'bytes', a tokenizers .json file, or a word-per-line file. Default: the bank's characters.")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Output .safetensors file.")
@with_limits
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
def compile_cmd(file: Path, vocab_spec: str | None, output: Path, max_states: int, time_limit: float, as_json: bool) -> None:
    """Compile FILE to a tensor artifact (written atomically)."""
    import neurosym
    from neurosym.compile.artifact import save
    from neurosym.vocab import load_vocab

    vocab = load_vocab(vocab_spec) if vocab_spec else None
    obj = neurosym.load(file, vocab, max_states=max_states, time_limit=time_limit)
    save(obj, output)
    summary = {"file": str(file), "output": str(output), **_summary(obj)}
    click.echo(json.dumps(summary) if as_json else f"wrote {output}: {summary['patterns']} patterns, {summary['states']} states, vocab {summary['vocab_size']}")


@main.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--pattern", "names", multiple=True, help="Only these patterns (repeatable).")
@click.option("--samples", default=5, show_default=True, help="Accepted sample strings per pattern.")
@click.option("--draw", type=click.Path(path_type=Path), default=None, help="Draw the automaton to out.png or out.dot (one pattern: the first, or --pattern).")
@with_limits
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
def inspect(file: Path, names: tuple[str, ...], samples: int, draw: Path | None, max_states: int, time_limit: float, as_json: bool) -> None:
    """Show states, finals, character classes and sample strings of FILE (a grammar or an artifact)."""
    from neurosym.inspect import describe_bank, draw_automaton, format_report, load_any

    bank = load_any(file, max_states=max_states, time_limit=time_limit)
    unknown = [n for n in names if n not in bank.patterns]
    if unknown:
        raise NeurosymError(f"{file}: no pattern named {', '.join(unknown)}; the bank has {', '.join(bank.names)}")
    report = describe_bank(bank, list(names) or None, samples)
    click.echo(json.dumps(report, indent=2, ensure_ascii=False) if as_json else format_report(report))
    if draw is not None:
        auto = bank.patterns[names[0] if names else bank.names[0]]
        draw_automaton(auto, draw)
        if not as_json:
            click.echo(f"drew {auto.name} to {draw}")


@main.group()
def bench() -> None:
    """Benchmarks that print ours vs a reference in one run."""


@bench.command(name="compile")
@click.option("--words", "n_words", default=5000, show_default=True, help="Size of the word list.")
@click.option("--bpe-size", default=32000, show_default=True, help="Byte-level BPE vocabulary size.")
@click.option("--reference-timeout", default=900.0, show_default=True, help="Seconds before the interegular reference is abandoned.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable results.")
def bench_compile(n_words: int, bpe_size: int, reference_timeout: float, as_json: bool) -> None:
    """Word list as a trie vs an interegular alternation; token index over a BPE vocabulary."""
    from neurosym.bench.compile import format_results, run

    results = run(n_words=n_words, bpe_size=bpe_size, reference_timeout=reference_timeout, progress=not as_json)
    click.echo(json.dumps(results, indent=2) if as_json else format_results(results))


if __name__ == "__main__":
    main()
