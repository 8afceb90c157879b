"""``neurosym synth``: a regex from positive and negative examples (any method of the
registry :mod:`neurosym.synth.methods`), or one regex per class of a labelled corpus."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from neurosym.cli.options import examples, force_option, json_option, output_option, seed_option
from neurosym.errors import NeurosymError


class MethodChoice(click.Choice):
    """``neurosym synth --method``: the methods of the registry :mod:`neurosym.synth.methods`,
    read each time the option is parsed or shown, so a method registered after this
    module was imported is offered too."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        from neurosym.synth.methods import method_names  # lazy: the registry, not the searches (no torch)

        return method_names()

    @choices.setter
    def choices(self, value) -> None:  # click.Choice.__init__ assigns the choices; ours are the registry's
        pass


def _read_examples(path: Path | None) -> list[str]:
    """One example per line (a blank line is the empty string)."""
    if path is None:
        return []
    from neurosym.dsl.source import read_text_file  # lazy: --help must not load lark and the DSLs

    return read_text_file(path, "give a file of examples, one per line").splitlines()


@click.command(
    epilog=examples(
        "neurosym synth --pos pos.txt --neg neg.txt",
        "neurosym synth --pos pos.txt --neg neg.txt --method evolve --time-budget 30 --seed 2",
        "neurosym synth --pos pos.txt --neg neg.txt -o found.regex --name NAME",
        "neurosym synth --corpus en_ewt-ud-train.conllu --label UPOS --classes NUM,PUNCT,SYM -o tokens.regex",
        "neurosym synth --corpus labelled.tsv -o classes.regex --time 120",
    ),
)
@click.option("--pos", "pos_file", type=click.Path(path_type=Path), default=None, help="Positive examples, one per line.")
@click.option("--neg", "neg_file", type=click.Path(path_type=Path), default=None, help="Negative examples, one per line.")
@click.option(
    "--corpus", "corpus_file", type=click.Path(path_type=Path), default=None,
    help="Instead of --pos/--neg: a labelled corpus, CoNLL-U (.conllu) or TSV (string<TAB>label); one regex per class.",
)
@click.option("--label", default=None, help="--corpus CoNLL-U: the label column (UPOS, XPOS, DEPREL, ...; default UPOS).")
@click.option("--classes", default=None, help="--corpus: comma-separated labels to learn (default: every label).")
@click.option(
    "--method", type=MethodChoice(), default="beam", show_default=True,
    help="The search: best-first with pruning (AlphaRegex-style), evolution, or REINFORCE.",
)
@click.option(
    "--time-budget", "time_budget", default=None, type=click.FloatRange(min=0, min_open=True),
    help="Seconds the search may take (default 10; with --corpus 60, for all classes together).",
)
@click.option("--time", "old_time_budget", type=float, default=None, hidden=True, help="Another name of --time-budget (deprecated without --corpus).")
@seed_option("Random seed of evolve, reinforce and beam's local search (same seed, same search).")
@click.option(
    "--lam", default=None, type=click.FloatRange(min=0),
    help="Weight of the regex size in the objective (default 0.02; with --corpus misclassified tokens per unit of size, "
    "default 0.25 on 200,000 tokens or more, proportionally less on smaller corpora).",
)
@output_option("Append the result to this .regex bank (--corpus: write the bank of every class; an existing bank needs --append or --force).")
@click.option("--append", is_flag=True, help="--corpus: add the classes to an existing -o bank (without --corpus, -o always appends).")
@force_option("bank")
@click.option("--name", default=None, help="The pattern's name in the bank (with -o).")
@click.option(
    "--select", type=click.Choice(["first", "posterior"]), default="first", show_default=True,
    help="beam: keep the cheapest solution, or rank several by a size prior and a size-principle likelihood.",
)
@json_option("Machine-readable result.")
def synth(
    pos_file: Path | None, neg_file: Path | None, corpus_file: Path | None, label: str | None, classes: str | None, method: str,
    time_budget: float | None, old_time_budget: float | None, seed: int, lam: float | None, output: Path | None, append: bool,
    force: bool, name: str | None, select: str, as_json: bool,
) -> None:
    """Synthesise a small regex accepting every positive and no negative example (exit status 1
    when the time budget ends without a solution: the best candidate is still printed).
    With --corpus, one regex per class of a labelled corpus, each checked on every example."""
    from neurosym.files import check_output  # lazy: --help must not load torch and every subsystem
    from neurosym.synth import synthesize, write_to_bank  # lazy: --help must not load torch and every subsystem
    from neurosym.synth.bank import check_name  # lazy: as above
    from neurosym.synth.methods import get_method, method_names  # lazy: as above
    if old_time_budget is not None:
        if corpus_file is None:
            click.echo("note: --time is deprecated; use --time-budget", err=True)
        if old_time_budget <= 0:
            raise NeurosymError(f"--time-budget: expected a positive number of seconds, got {old_time_budget:g}")
        time_budget = old_time_budget
    if corpus_file is not None:
        _synth_corpus(corpus_file, label, classes, time_budget or 60.0, output, pos_file, neg_file, name, as_json, lam, append, force)
        return
    if pos_file is None:
        raise NeurosymError("give the positive examples (--pos FILE) or a labelled corpus (--corpus FILE)")
    for flag, value in (("--label", label), ("--classes", classes)):
        if value is not None:
            raise NeurosymError(f"{flag} applies to --corpus only")
    time_budget = time_budget or 10.0
    lam = 0.02 if lam is None else lam
    if (output is None) != (name is None):
        raise NeurosymError("-o/--output and --name go together")
    if output is not None:  # an existing bank is appended to (write_to_bank keeps every pattern it has)
        check_name(name)  # before the search, not after it
        check_output(output, [f for f in (pos_file, neg_file) if f is not None], "bank", suffixes=(".regex",), ours=None)
    pos, neg = _read_examples(pos_file), _read_examples(neg_file)
    with_select = [m for m in method_names() if "select" in get_method(m).options]
    if select != "first" and method not in with_select:
        raise NeurosymError(f"--select applies to --method {' or '.join(with_select)} only")
    options = {"select": select} if method in with_select else {}
    res = synthesize(pos, neg, method=method, time_budget=time_budget, seed=seed, lam=lam, progress=_bar(as_json), **options)
    if output is not None:
        write_to_bank(output, name, res.pattern)
    if as_json:
        click.echo(json.dumps({"pattern": res.pattern, "solved": res.solved, "size": res.size, "score": res.score, "seconds": res.seconds, "method": res.method}))
    else:
        click.echo(f"/{res.pattern}/  solved: {'yes' if res.solved else 'no'}  size {res.size}  score {res.score:.3f}  {res.seconds:.2f} s ({res.method})")
        if output is not None:
            click.echo(f"appended {name} to {output}")
    if not res.solved:  # the best candidate was printed, but it is not a solution
        if not as_json:
            click.echo("not solved within the time budget: the pattern above is the best candidate (exit status 1)", err=True)
        sys.exit(1)


def _bar(as_json: bool) -> bool:
    """A progress bar only on a terminal (a log or a pipe never gets a bar's half lines)."""
    return not as_json and sys.stderr.isatty()


def _synth_corpus(
    corpus_file: Path, label: str | None, classes: str | None, time_budget: float, output: Path | None,
    pos_file: Path | None, neg_file: Path | None, name: str | None, as_json: bool, lam: float | None = None,
    append: bool = False, force: bool = False,
) -> None:
    """``neurosym synth --corpus``: one regex per class, a bank of them with -o (an
    existing bank only with --append, which adds to it, or --force, which replaces it)."""
    from neurosym.files import check_output  # lazy: --help must not load torch and every subsystem
    from neurosym.synth import corpus as synth_corpus  # lazy: --help must not load torch and every subsystem
    from neurosym.dsl.regex import read_regex_bank  # lazy: as above
    from neurosym.synth import write_to_bank  # lazy: as above

    if pos_file is not None or neg_file is not None:
        raise NeurosymError("--corpus replaces --pos/--neg: give one or the other")
    if name is not None:
        raise NeurosymError("--name applies to --pos/--neg; with --corpus each pattern is named after its class")
    if append and force:
        raise NeurosymError("--append adds to the bank and --force replaces it: give one")
    if output is not None:
        check_output(output, [corpus_file], "bank", suffixes=(".regex",), force=True)  # the folder, the name, never the corpus
        if output.exists() and not (append or force):
            raise NeurosymError(f"{output}: the bank exists; --append adds the classes to it, --force replaces it")
    if corpus_file.is_dir():
        raise NeurosymError(f"{corpus_file}: is a folder; give a CoNLL-U (.conllu) or TSV (string<TAB>label) file")
    chosen = [c.strip() for c in classes.split(",") if c.strip()] if classes is not None else None
    if chosen is not None and not chosen:
        raise NeurosymError("--classes: no class given")
    pairs = synth_corpus.read_corpus(corpus_file, label)
    say = None if as_json else (lambda r: click.echo(f"{r.name}: {len(r.rounds)} round(s), {r.seconds:.1f} s", err=True))
    results = synth_corpus.synthesize_corpus(pairs, classes=chosen, time_budget=time_budget, progress=say, lam=lam)
    if output is not None and append and output.exists():
        synth_corpus.check_patterns(results, {f for f, _ in pairs})
        have = set(read_regex_bank(output).patterns)
        clash = [r.name for r in results if r.name in have]
        if clash:
            raise NeurosymError(f"{output}: the bank already has {', '.join(clash)}; nothing was added (--force replaces the bank)")
        for r in results:
            write_to_bank(output, r.name, r.pattern)
    elif output is not None:
        synth_corpus.write_bank(output, results, forms={f for f, _ in pairs})
    if as_json:
        rows = [
            {
                "label": r.label, "name": r.name, "pattern": r.pattern, "accuracy": r.accuracy, "precision": r.precision,
                "recall": r.recall, "f1": r.f1, "tokens": r.tokens, "forms": r.forms, "rounds": len(r.rounds), "seconds": r.seconds,
            }
            for r in results
        ]
        click.echo(json.dumps({"corpus": str(corpus_file), "examples": len(pairs), "classes": rows}))
    else:
        click.echo(f"{corpus_file}: {len(pairs)} examples; each regex checked on all of them (accuracy, P/R/F1 per token)")
        click.echo(synth_corpus.format_results(results))
        if output is not None:
            click.echo(f"wrote {len(results)} pattern(s) to {output}")


__all__ = ["MethodChoice", "synth"]
