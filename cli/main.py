"""The ``neurosym`` command (click). Installed as ``neurosym.cli``.

Every user error is a :class:`~neurosym.errors.NeurosymError`: it is printed as one
line (``path:line:col: message`` where a file is involved) and the exit status is 2.
``--debug`` shows the traceback instead.

The options mean the same in every command: ``--json`` is a flag (machine-readable
output on stdout), ``-o/--output`` names the file written, ``-n/--samples`` counts
samples, ``--seed`` seeds them, ``--time-budget`` is a search's seconds and
``--max-states``/``--time-limit`` cap compilation. Each ``--help`` ends with examples.

This module holds the group and its wiring; the shared options are
:mod:`neurosym.cli.options`, and each command group has its module: ``grammar``
(check, compile, inspect, sample), ``runs`` (train, plot, eval, generate),
``reproduce``, ``synth`` and ``bench``.
"""

from __future__ import annotations

import click

from neurosym.cli.bench import bench
from neurosym.cli.grammar import check, compile_cmd, inspect, sample
from neurosym.cli.options import examples
from neurosym.cli.reproduce import reproduce
from neurosym.cli.runs import eval_cmd, generate_cmd, plot, train
from neurosym.cli.synth import synth
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


@click.group(
    cls=NeurosymGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=examples(
        "neurosym check grammars/dates.regex grammars/clause.fsg",
        "neurosym inspect grammars/clause.fsg",
        "neurosym COMMAND --help",
    ),
)
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.version_option(package_name="neurosym")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """neurosym: compile symbolic grammars into tensors for neural models."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


for command in (check, compile_cmd, inspect, sample, train, plot, eval_cmd, generate_cmd, reproduce, synth, bench):
    main.add_command(command)


if __name__ == "__main__":
    main()
