"""The ``neurosym`` command (click). Installed as ``neurosym.cli``.

Every user error is a :class:`~neurosym.errors.NeurosymError`: it is printed as one
line (``path:line:col: message`` where a file is involved) and the exit status is 2.
Errors the commands do not catch themselves are turned into such a line too (an
unreadable file, text that is not UTF-8, memory running out; anything else is reported
as an internal error, a bug), so no input ends in a traceback. ``--debug`` shows the
traceback instead.

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

import os
import sys

import click

from neurosym.cli.bench import bench
from neurosym.cli.grammar import check, compile_cmd, export_cmd, files_cmd, inspect, sample
from neurosym.cli.options import examples
from neurosym.cli.reproduce import reproduce
from neurosym.cli.runs import eval_cmd, generate_cmd, plot, train
from neurosym.cli.synth import synth
from neurosym.errors import NeurosymError, SourceError



def _torch_out_of_memory(err: BaseException) -> bool:
    """torch's allocation failures (a CPU RuntimeError from its allocator, CUDA's
    OutOfMemoryError), read as the out-of-memory they are; torch is not imported here."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(err, getattr(torch, "OutOfMemoryError", ())):
        return True
    return isinstance(err, RuntimeError) and ("can't allocate memory" in str(err) or "not enough memory" in str(err))


def error_line(err: BaseException) -> str:
    """The one line an error is reported as: ``path[:line:col]: message``."""
    if isinstance(err, NeurosymError):
        return str(err)
    if isinstance(err, UnicodeDecodeError):
        return str(SourceError.not_utf8(err, None)).replace("<string>", "input", 1)
    if isinstance(err, OSError):
        where = err.filename if err.filename is not None else "input"
        return f"{where}: {err.strerror or err}"
    if isinstance(err, MemoryError) or _torch_out_of_memory(err):
        return "out of memory: the input is too large for this machine (lower -n, --max-states or the input's size)"
    if isinstance(err, RecursionError):
        return "the input nests too deeply to process"
    return f"internal error ({type(err).__name__}: {err}); this is a bug in neurosym; --debug shows the traceback"


class NeurosymGroup(click.Group):
    """A click group that turns any error of a command into a one-line message (see
    :func:`error_line`) and exit status 2."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, KeyboardInterrupt, SystemExit):
            raise
        except BrokenPipeError:  # the reader went away (`neurosym sample ... | head`): stop quietly
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stays open until exit, so the final flush has a target
            ctx.exit(0)
        except Exception as err:  # noqa: BLE001 - the top-level guard: a line, never a traceback
            if ctx.obj and ctx.obj.get("debug"):
                raise
            clear = "\r\x1b[K" if sys.stderr.isatty() else ""  # a progress bar's half line goes first
            click.echo(f"{clear}error: {error_line(err)}", err=True)
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


for command in (check, compile_cmd, inspect, sample, export_cmd, files_cmd, train, plot, eval_cmd, generate_cmd, reproduce, synth, bench):
    main.add_command(command)


if __name__ == "__main__":
    main()
