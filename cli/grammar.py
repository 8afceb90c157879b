"""``neurosym check``, ``compile``, ``inspect`` and ``sample``: the commands on grammar
files (and compiled artifacts), each through the registry of file kinds :mod:`neurosym.kinds`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from neurosym.cli.options import examples, force_option, json_option, limits, samples_option, seed_option, with_limits
from neurosym.errors import NeurosymError


@click.command(epilog=examples("neurosym check grammars/dates.regex", "neurosym check --json grammars/clause.fsg grammars/arith.pcfg lexicons/sentiment.lex"))
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@with_limits
@json_option()
def check(files: tuple[Path, ...], max_states: int, time_limit: float, as_json: bool) -> None:
    """Parse and compile FILES; report each one's errors (exit 2 if any)."""
    from neurosym import kinds  # lazy: --help must not load torch and every subsystem
    results, failed = [], False
    for f in files:
        try:
            obj = kinds.load(f, None, limits(max_states, time_limit))
            summary = kinds.summary(obj)
            classes = len(getattr(getattr(obj, "lexicon", None), "classes", ()) or ())  # a lexicon of classes only is not empty
            empty = summary.get("patterns", summary.get("features", 1)) == 0 and not classes
            results.append({"file": str(f), "ok": True, **summary, "warnings": ["the file defines nothing"] if empty else []})
        except NeurosymError as err:
            failed = True
            results.append({"file": str(f), "ok": False, "error": str(err)})
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        for r in results:
            if r["ok"]:
                click.echo(f"{r['file']}: ok ({r['what']})")
                for w in r["warnings"]:
                    click.echo(f"{r['file']}: warning: {w}", err=True)
            else:
                click.echo(r["error"], err=True)
    if failed:
        sys.exit(2)


@click.command(
    name="compile",
    epilog=examples(
        "neurosym compile grammars/dates.regex -o dates.safetensors",
        "neurosym compile grammars/dates.regex --vocab tokenizer.json -o dates-bpe.safetensors",
        "neurosym compile grammars/clause.fsg -o clause.safetensors",
        "python -c \"import neurosym; print(neurosym.load('clause.safetensors'))\"",
    ),
)
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--vocab", "vocab_spec", default=None, help="'bytes', a tokenizers .json file, or a word-per-line file. Default: the bank's characters.")
@click.option("-o", "--output", type=click.Path(), required=True, help="Output .safetensors file.")
@force_option("artifact")
@with_limits
@json_option("Machine-readable summary.")
def compile_cmd(file: Path, vocab_spec: str | None, output: str, force: bool, max_states: int, time_limit: float, as_json: bool) -> None:
    """Compile FILE to a tensor artifact (written atomically); ``neurosym.load(OUTPUT)``
    gives the compiled object back, and ``neurosym inspect OUTPUT`` describes it. An
    existing OUTPUT is replaced only when it is a neurosym artifact of the same kind (or
    with --force), and never when FILE reads it (a word list, an import, a lexicon)."""
    from neurosym import kinds  # lazy: --help must not load torch and every subsystem
    from neurosym.compile.artifact import artifact_kind, kind_of_object, save  # lazy: --help must not load torch and every subsystem
    from neurosym.files import check_not_read, check_output, recording_reads  # lazy: --help must not load torch and every subsystem
    from neurosym.vocab import load_vocab  # lazy: --help must not load torch and every subsystem
    inputs = [file] + ([Path(vocab_spec)] if vocab_spec and vocab_spec != "bytes" else [])
    output = check_output(output, inputs, "artifact", suffixes=(".safetensors",), force=force,
                          ours=lambda p: artifact_kind(p) is not None)
    with recording_reads() as read:
        vocab = load_vocab(vocab_spec) if vocab_spec else None
        obj = kinds.load(file, vocab, limits(max_states, time_limit))
    check_not_read(output, [*inputs, *read], "artifact")
    old, new = artifact_kind(output), kind_of_object(obj)
    if output.exists() and old != new and not force:
        raise NeurosymError(f"{output}: holds {_a(old)} artifact, and this is {_a(new)}; refusing to replace it (use --force to replace it)")
    save(obj, output)
    summary = {"file": str(file), "output": str(output), **kinds.summary(obj)}
    click.echo(json.dumps(summary) if as_json else f"wrote {output}: {summary['what']}")


@click.command(
    epilog=examples(
        "neurosym inspect grammars/dates.regex --pattern DATE -n 3",
        "neurosym inspect grammars/clause.fsg --draw clause.png",
        "neurosym inspect clause.safetensors        # an artifact: what its source shows",
        "neurosym inspect lexicons/sentiment.lex --word good --word awful",
    ),
)
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--pattern", "names", multiple=True, help="Regex banks: only these patterns (repeatable).")
@click.option("--word", "words", multiple=True, help="Lexicons: show these words in the term tables (repeatable).")
@samples_option()
@seed_option("Random seed of the samples (same seed, same samples).")
@click.option("--draw", type=click.Path(path_type=Path), default=None, help="Draw the automaton or FSG to out.png/.svg/.pdf or out.dot.")
@force_option("drawing")
@with_limits
@json_option("Machine-readable report.")
def inspect(file: Path, names: tuple[str, ...], words: tuple[str, ...], n: int, seed: int, draw: Path | None, force: bool,
            max_states: int, time_limit: float, as_json: bool) -> None:
    """Describe FILE: a regex bank (states, classes, samples), an FSG (entropy,
    perplexity floor, cycles, samples), a PCFG (rule counts, consistency, CNF, sample
    trees), a lexicon (features, classes, term tables), or a compiled artifact of any of
    them (.safetensors; an FSG artifact reports what its source does, bar the grammar as
    written)."""
    from neurosym import kinds  # lazy: --help must not load torch and every subsystem
    from neurosym.files import check_output  # lazy: --help must not load torch and every subsystem
    if draw is not None:
        check_output(draw, [file], "drawing", suffixes=(".dot", ".png", ".svg", ".pdf"), force=force)
    options = kinds.InspectOptions(tuple(names), tuple(words), n, seed, draw, limits(max_states, time_limit))
    report, text, drawn = kinds.inspect(file, options)
    click.echo(json.dumps(report, indent=2, ensure_ascii=False) if as_json else text)
    if drawn is not None and not as_json:
        click.echo(f"drew {file} to {drawn}")


@click.command(
    epilog=examples(
        "neurosym sample grammars/clause.fsg -n 3 --seed 1",
        "neurosym sample grammars/arith.pcfg -n 2 --trees",
        "neurosym sample grammars/dates.regex --pattern DATE --json",
    ),
)
@click.argument("file", type=click.Path(path_type=Path))
@samples_option(10)
@seed_option()
@click.option("--max-len", default=60, show_default=True, type=click.IntRange(min=0), help="Longest sample in tokens (longer draws are redrawn).")
@click.option("--trees", is_flag=True, help="PCFGs: print bracketed derivation trees instead of sentences.")
@click.option("--pattern", "pattern", default=None, help="Regex banks: the pattern to sample (default: the first).")
@with_limits
@json_option("A JSON list instead of one sample per line.")
def sample(file: Path, n: int, seed: int, max_len: int, trees: bool, pattern: str | None, max_states: int, time_limit: float, as_json: bool) -> None:
    """Draw samples from FILE (-n of them): sentences of an FSG, its compiled artifact or a
    PCFG (from the grammar's own distribution), or strings of a regex bank's pattern
    (uniform random walks)."""
    from neurosym import kinds  # lazy: --help must not load torch and every subsystem
    options = kinds.SampleOptions(n, seed, max_len, trees, pattern, limits(max_states, time_limit))
    first = True
    if as_json:
        click.echo("[", nl=False)
    for chunk in _sample_chunks(file, options):
        for s in chunk:
            if as_json:
                click.echo(("" if first else ", ") + json.dumps(s, ensure_ascii=False), nl=False)
            else:
                click.echo(s)
            first = False
        sys.stdout.flush()
    if as_json:
        click.echo("]")


SAMPLE_CHUNK = 1000  # samples drawn at once; the first chunk is the whole answer for -n up to this
SAMPLE_CHUNK_MAX = 64_000


def _sample_chunks(file: Path, options):
    """``options.n`` samples of ``file`` in chunks (1,000, then doubling up to 64,000), so
    that a large -n prints at once and never holds every sample in memory. The first chunk
    uses ``options.seed`` itself (so -n <= 1,000 draws exactly what one call draws); chunk
    ``i`` uses a seed derived from (seed, i)."""
    import dataclasses

    import numpy as np  # lazy: with the samplers

    from neurosym import kinds  # lazy: --help must not load torch and every subsystem
    left, size, i = options.n, SAMPLE_CHUNK, 0
    while left > 0 or i == 0:
        take = min(left, size)
        seed = options.seed if i == 0 else int(np.random.SeedSequence([options.seed, i]).generate_state(1)[0])
        yield kinds.sample(file, dataclasses.replace(options, n=take, seed=seed))
        left -= take
        size, i = min(size * 2, SAMPLE_CHUNK_MAX), i + 1


def _a(word: str) -> str:
    """``word`` with its indefinite article ("an automaton", "a regex")."""
    return f"{'an' if word[:1].lower() in 'aeio' else 'a'} {word}"


__all__ = ["check", "compile_cmd", "files_cmd", "inspect", "sample"]


@click.command(name="files", epilog=examples("neurosym files", "neurosym files --json", "neurosym inspect grammars/clause.fsg   # any listed name works from any folder"))
@json_option()
def files_cmd(as_json: bool) -> None:
    """List the grammars, lexicons and configs shipped with neurosym: every command (and
    neurosym.load) takes these names from any folder where no local file has the name."""
    from neurosym.files import shipped_files  # lazy: as above (files.py imports torch)
    from neurosym.kinds import BY_SUFFIX  # lazy: as above

    rows = []
    for name in shipped_files():
        suffix = Path(name).suffix
        kind = BY_SUFFIX[suffix].name if suffix in BY_SUFFIX else "config" if suffix == ".toml" else "data"
        rows.append({"file": name, "kind": kind})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        width = max(len(r["file"]) for r in rows)
        for r in rows:
            click.echo(f"{r['file']:<{width}}  {r['kind']}")


@click.command(
    name="export",
    epilog=examples(
        "neurosym export grammars/json.pcfg --to lark",
        "neurosym export order.schema.json --to gbnf -o order.gbnf",
        "neurosym export grammars/dates.regex:DATE --to ebnf",
        "neurosym export grammars/clause.fsg --to pcfg -o clause.pcfg",
    ),
)
@click.argument("file")
@click.option("--to", "to", required=True, type=click.Choice(["lark", "gbnf", "ebnf", "pcfg"]),
              help="lark: Lark (llguidance, SynCode, lark); gbnf: llama.cpp's GBNF; ebnf: XGrammar's EBNF; pcfg: neurosym's .pcfg, separator written out.")
@click.option("-o", "--output", type=click.Path(), default=None, help="Write here (default: print).")
@force_option("export")
def export_cmd(file: str, to: str, output: str | None, force: bool) -> None:
    """Write the grammar FILE (.pcfg, a JSON Schema .json, .lark, .gbnf, .fsg, a .regex
    pattern as FILE.regex:NAME, a .txt word list, or a regex) in another engine's
    grammar language. Its text is its terminals concatenated: a separator (an .fsg's or a
    .pcfg's spaces) is written into the terminals, an automaton becomes a right-linear
    grammar; probabilities are kept in --to pcfg and dropped elsewhere (the other engines
    only mask). docs/json_schema.md, "Other engines' grammars"."""
    from neurosym.kinds import export_grammar  # lazy: --help must not load torch and every subsystem
    from neurosym.files import OWN_MARK, atomic_write_bytes, check_not_read, check_output, recording_reads  # lazy: as above

    suffix = {"lark": ".lark", "gbnf": ".gbnf", "ebnf": ".ebnf", "pcfg": ".pcfg"}[to]
    target = None
    if output is not None:
        target = check_output(output, [Path(file.rsplit(":", 1)[0]) if ":" in file else Path(file)], "export", suffixes=(suffix,), force=force)
    with recording_reads() as read:
        text = export_grammar(file, to)
    comment = "//" if to == "lark" else "#"
    text = f"{comment} written by {OWN_MARK.decode()} export from {file}\n" + text
    if target is None:
        click.echo(text, nl=False)
        return
    check_not_read(target, list(read), "export")
    atomic_write_bytes(target, text.encode("utf-8"), make_parents=False)
    click.echo(f"wrote {target}")
