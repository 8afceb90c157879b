"""The ``neurosym`` command (click). Installed as ``neurosym.cli``.

Every user error is a :class:`~neurosym.errors.NeurosymError`: it is printed as one
line (``path:line:col: message`` where a file is involved) and the exit status is 2.
``--debug`` shows the traceback instead.

The options mean the same in every command: ``--json`` is a flag (machine-readable
output on stdout), ``-o/--output`` names the file written, ``-n/--samples`` counts
samples, ``--seed`` seeds them, ``--time-budget`` is a search's seconds and
``--max-states``/``--time-limit`` cap compilation. Each ``--help`` ends with examples.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from neurosym.errors import NeurosymError


def examples(*lines: str) -> str:
    """A command's epilog: example command lines, kept as written (click's ``\\b``)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


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


def _limits(max_states: int, time_limit: float):
    from neurosym.compile.regex import Limits  # lazy: --help must not load torch and every subsystem
    return Limits(max_states=max_states, time_limit=time_limit)


limit_options = [
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
samples_option = click.option(
    "-n", "--samples", "n", default=5, show_default=True, type=click.IntRange(min=0),
    help="How many samples (strings, sentences or trees).",
)


def with_limits(f):
    for opt in reversed(limit_options):
        f = opt(f)
    return f


@main.command(epilog=examples("neurosym check grammars/dates.regex", "neurosym check --json grammars/*.fsg grammars/*.pcfg lexicons/sentiment.lex"))
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@with_limits
@click.option("--json", "as_json", is_flag=True, help="Machine-readable results.")
def check(files: tuple[Path, ...], max_states: int, time_limit: float, as_json: bool) -> None:
    """Parse and compile FILES; report each one's errors (exit 2 if any)."""
    from neurosym import kinds  # lazy: --help must not load torch and every subsystem
    results, failed = [], False
    for f in files:
        try:
            obj = kinds.load(f, None, _limits(max_states, time_limit))
            summary = kinds.summary(obj)
            empty = summary.get("patterns", summary.get("features", 1)) == 0
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


@main.command(
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
@with_limits
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
def compile_cmd(file: Path, vocab_spec: str | None, output: str, max_states: int, time_limit: float, as_json: bool) -> None:
    """Compile FILE to a tensor artifact (written atomically); ``neurosym.load(OUTPUT)``
    gives the compiled object back, and ``neurosym inspect OUTPUT`` describes it."""
    from neurosym import kinds  # lazy: --help must not load torch and every subsystem
    from neurosym.compile.artifact import save  # lazy: --help must not load torch and every subsystem
    from neurosym.files import check_output  # lazy: --help must not load torch and every subsystem
    from neurosym.vocab import load_vocab  # lazy: --help must not load torch and every subsystem
    output = check_output(output, [file] + ([vocab_spec] if vocab_spec and Path(vocab_spec).exists() else []), "artifact")
    vocab = load_vocab(vocab_spec) if vocab_spec else None
    obj = kinds.load(file, vocab, _limits(max_states, time_limit))
    save(obj, output)
    summary = {"file": str(file), "output": str(output), **kinds.summary(obj)}
    click.echo(json.dumps(summary) if as_json else f"wrote {output}: {summary['what']}")


@main.command(
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
@samples_option
@click.option("--seed", default=0, show_default=True, help="Random seed of the samples (same seed, same samples).")
@click.option("--draw", type=click.Path(path_type=Path), default=None, help="Draw the automaton or FSG to out.png/.svg/.pdf or out.dot.")
@with_limits
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
def inspect(file: Path, names: tuple[str, ...], words: tuple[str, ...], n: int, seed: int, draw: Path | None, max_states: int, time_limit: float, as_json: bool) -> None:
    """Describe FILE: a regex bank (states, classes, samples), an FSG (entropy,
    perplexity floor, cycles, samples), a PCFG (rule counts, consistency, CNF, sample
    trees), a lexicon (features, classes, term tables), or a compiled artifact of any of
    them (.safetensors; an FSG artifact reports what its source does, bar the grammar as
    written)."""
    from neurosym import kinds  # lazy: --help must not load torch and every subsystem
    from neurosym.files import check_output  # lazy: --help must not load torch and every subsystem
    if draw is not None:
        check_output(draw, [file], "drawing")
    options = kinds.InspectOptions(tuple(names), tuple(words), n, seed, draw, _limits(max_states, time_limit))
    report, text, drawn = kinds.inspect(file, options)
    click.echo(json.dumps(report, indent=2, ensure_ascii=False) if as_json else text)
    if drawn is not None and not as_json:
        click.echo(f"drew {file} to {drawn}")


@main.command(
    epilog=examples(
        "neurosym sample grammars/clause.fsg -n 3 --seed 1",
        "neurosym sample grammars/arith.pcfg -n 2 --trees",
        "neurosym sample grammars/dates.regex --pattern DATE --json",
    ),
)
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "-n", "--samples", "n", default=10, show_default=True, type=click.IntRange(min=0),
    help="How many samples (strings, sentences or trees).",
)
@click.option("--seed", default=0, show_default=True, help="Random seed (same seed, same samples).")
@click.option("--max-len", default=60, show_default=True, type=click.IntRange(min=0), help="Longest sample in tokens (longer draws are redrawn).")
@click.option("--trees", is_flag=True, help="PCFGs: print bracketed derivation trees instead of sentences.")
@click.option("--pattern", "pattern", default=None, help="Regex banks: the pattern to sample (default: the first).")
@with_limits
@click.option("--json", "as_json", is_flag=True, help="A JSON list instead of one sample per line.")
def sample(file: Path, n: int, seed: int, max_len: int, trees: bool, pattern: str | None, max_states: int, time_limit: float, as_json: bool) -> None:
    """Draw samples from FILE (-n of them): sentences of an FSG, its compiled artifact or a
    PCFG (from the grammar's own distribution), or strings of a regex bank's pattern
    (uniform random walks)."""
    from neurosym import kinds  # lazy: --help must not load torch and every subsystem
    out = kinds.sample(file, kinds.SampleOptions(n, seed, max_len, trees, pattern, _limits(max_states, time_limit)))
    click.echo(json.dumps(out, ensure_ascii=False) if as_json else "\n".join(out))


@main.command(
    epilog=examples(
        "neurosym train configs/semantic_fusion.toml",
        "neurosym train configs/semantic_fusion.toml --resume      # after a kill or Ctrl-C",
        'torchrun --nproc_per_node=2 "$(which neurosym)" train configs/semantic_fusion.toml   # DDP',
    ),
)
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--resume", is_flag=True, help="Continue the run from its last checkpoint (exactly).")
def train(config: Path, resume: bool) -> None:
    """Train from a TOML CONFIG (its [run] task names what to train). Under torchrun,
    trains with distributed data parallel."""
    from neurosym.lm.train import train_from_file  # lazy: --help must not load torch and every subsystem
    result = train_from_file(config, resume=resume)
    figures = ", ".join(f"{k} {v:.4g}" for k, v in result.eval.items() if isinstance(v, float))
    click.echo(f"{result.run_dir}: {result.steps} steps, final loss {result.loss:.4f}" + (f"; {figures}" if figures else ""))


@main.command(epilog=examples("neurosym plot runs/semantic-fusion", "neurosym plot runs/semantic-fusion -o curves.svg"))
@click.argument("run", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Image file: .png, .svg or .pdf (default RUN/curves.png).")
def plot(run: Path, output: Path | None) -> None:
    """Plot a run's metrics (train loss, learning rate, evaluation metrics)."""
    from neurosym.files import check_output  # lazy: --help must not load torch and every subsystem
    from neurosym.lm.plot import plot_run  # lazy: matplotlib is slow to import and only plots need it

    if output is not None:
        check_output(output, [], "plot")
    click.echo(f"wrote {plot_run(run, output)}")


def check_out_dir(out_dir: Path) -> None:
    """A recipe's --out-dir must be a folder or not exist yet (nor any file on its way)."""
    for part in (out_dir, *out_dir.parents):
        if part.exists():
            if not part.is_dir():
                raise NeurosymError(f"--out-dir {out_dir}: {part} is a file, not a folder")
            break


@main.group(epilog=examples("neurosym reproduce semantic-fusion"))
def reproduce() -> None:
    """Recipes that train and report against the published figures."""


@reproduce.command(
    name="semantic-kl",
    epilog=examples(
        "neurosym reproduce semantic-kl                        # 3 seeds, WikiText-2 and UD English-EWT, ~1 min per model",
        "neurosym reproduce semantic-kl --seeds 1 --datasets ud-english-ewt",
        "neurosym reproduce semantic-kl --resume --json > report.json",
    ),
)
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1), help="Model seeds (the data are fixed).")
@click.option("--datasets", default="wikitext-2,ud-english-ewt", show_default=True, help="Comma-separated: wikitext-2, ud-english-ewt.")
@click.option("--variants", default=None, help="Comma-separated variants (default: baseline, kl-T0.1, kl-T0.2, kl-cos-0.3-to-0.05).")
@click.option("--epochs", default=None, type=click.IntRange(min=1), help="Override the recipe's 1 epoch.")
@click.option("--data", "data_dir", default=None, type=click.Path(path_type=Path), help="A folder with the corpus files (default: the shipped corpora/).")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1), help="Torch threads (results depend on the thread count).")
@click.option("--gpu", is_flag=True, help="The larger configuration of docs/semantic_kl.md, on CUDA.")
@click.option("--out-dir", default="runs/semantic-kl", show_default=True, type=click.Path(path_type=Path), help="Where the runs go.")
@click.option("--resume", is_flag=True, help="Resume interrupted runs (finished ones are reused).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def reproduce_semantic_kl(seeds: int, datasets: str, variants: str | None, epochs: int | None, data_dir: Path | None, threads: int,
                          gpu: bool, out_dir: Path, resume: bool, as_json: bool) -> None:
    """A CE baseline vs semantic-KL LMs (two temperatures and a schedule) at the same size
    and budget on WikiText-2 (trained on valid.txt: the train split is not available here)
    and UD English-EWT: PPL, same-POS miss rate, top-1, ECE, embedding health (mean ± std
    over seeds), Welch's t-test, training curves."""
    from neurosym.experiments import semantic_kl as recipe  # lazy: --help must not load torch and every subsystem
    from neurosym.lm.plot import plot_run  # lazy: matplotlib is slow to import and only plots need it

    check_out_dir(out_dir)
    if data_dir is not None and not data_dir.is_dir():
        raise NeurosymError(f"--data {data_dir}: no such folder")
    chosen = tuple(v.strip() for v in variants.split(",") if v.strip()) if variants is not None else recipe.MAIN
    sets = tuple(d.strip() for d in datasets.split(",") if d.strip())
    say = None if as_json else (lambda line: click.echo(line, err=True))
    data = {"data_dir": str(data_dir)} if data_dir is not None else {}
    optim = {"epochs": epochs} if epochs is not None else {}
    if gpu:
        report = recipe.reproduce(seeds=seeds, out_dir=out_dir, datasets=sets, variants=chosen, progress=say, resume=resume,
                                  model=recipe.GPU_MODEL, data=recipe.GPU_DATA | data, optim=recipe.GPU_OPTIM | optim,
                                  threads=threads, device="cuda")
    else:
        report = recipe.reproduce(seeds=seeds, out_dir=out_dir, datasets=sets, variants=chosen, progress=say, resume=resume,
                                  data=data, optim=optim, threads=threads)
    for d in report["datasets"]:
        for v in report["variants"]:
            for r in report[d][v]["runs"]:
                r["plot"] = str(plot_run(r["run_dir"]))
    report["curves"] = str(recipe.plot_curves(report, out_dir / "curves.png"))
    if as_json:
        click.echo(json.dumps(recipe.json_report(report) | {"curves": report["curves"]}, indent=2, ensure_ascii=False))
    else:
        click.echo(recipe.format_report(report) + f"\n\ntraining curves: {report['curves']}")


@reproduce.command(
    name="semantic-fusion",
    epilog=examples(
        "neurosym reproduce semantic-fusion                      # 5 seeds, about a minute per model",
        "neurosym reproduce semantic-fusion --seeds 1 --epochs 1  # a quick look",
        "neurosym reproduce semantic-fusion --resume --json > report.json",
    ),
)
@click.option("--seeds", default=5, show_default=True, type=click.IntRange(min=1), help="Model seeds (the corpus is fixed).")
@click.option("--ablation", is_flag=True, help="Also train the ablations: baseline without uniformizer, fusion without uniformizer, fusion without aux.")
@click.option("--epochs", default=None, type=click.IntRange(min=1), help="Override the recipe's 6 epochs (for a quick look).")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(min=1), help="Torch threads (results are bit-identical for a given machine, torch version and thread count).")
@click.option("--out-dir", default="runs/semantic-fusion", show_default=True, type=click.Path(path_type=Path), help="Where the runs go.")
@click.option("--variants", default=None, help="Comma-separated variants to train instead (baseline, fusion, fusion-control, fusion-lexical, and the ablations).")
@click.option("--control-samples", default=200, show_default=True, type=click.IntRange(min=0),
              help="Samples per decoding setting and seed for the control tables (0: skip controllable decoding).")
@click.option("--alpha", default=0.3, show_default=True, type=click.FloatRange(min=0, max=1), help="Class-mixture weight of the paper's sampler.")
@click.option("--resume", is_flag=True, help="Resume interrupted runs (finished ones are reused).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def reproduce_semantic_fusion(seeds: int, ablation: bool, epochs: int | None, threads: int, out_dir: Path, variants: str | None,
                              control_samples: int, alpha: float, resume: bool, as_json: bool) -> None:
    """Baseline vs semantic-fusion LMs on the clause.fsg corpus: PPL, seen-only PPL, focus CE,
    semantic MSE (mean ± std over seeds), Welch's t-test and step times, next to the
    paper's figures and the exact floor; then controllable decoding of every run (soft,
    soft + grammar mask, hard, the paper's sampler): control accuracy, grammaticality
    and held-out adjective hit rates."""
    from neurosym.experiments.control import PaperSampler, evaluate_recipe, format_control  # lazy: --help must not load torch and every subsystem
    from neurosym.experiments.semantic_fusion import (  # lazy: as above
        ABLATION as FUSION_ABLATION,
        MAIN as FUSION_MAIN,
        format_report as format_fusion_report,
        reproduce as reproduce_fusion,
    )
    from neurosym.lm.plot import plot_run  # lazy: matplotlib is slow to import and only plots need it

    check_out_dir(out_dir)
    say = None if as_json else (lambda line: click.echo(line, err=True))
    if variants is not None and ablation:
        raise click.UsageError("--variants and --ablation: give one or the other")
    chosen = tuple(v.strip() for v in variants.split(",") if v.strip()) if variants is not None else FUSION_ABLATION if ablation else FUSION_MAIN
    report = reproduce_fusion(seeds=seeds, out_dir=out_dir, epochs=epochs, progress=say, resume=resume, variants=chosen, threads=threads)
    for v in report["variants"]:
        for r in report[v]["runs"]:
            r["plot"] = str(plot_run(r["run_dir"]))
    if control_samples:
        evaluate_recipe(report, samples=control_samples, paper=PaperSampler(alpha=alpha), progress=say, resume=resume)
    if as_json:
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        click.echo(format_fusion_report(report) + ("\n\n" + format_control(report) if control_samples else ""))



@reproduce.command(
    name="idea-gating",
    epilog=examples(
        "neurosym reproduce idea-gating                          # 3 seeds, drift corpus and WikiText-2",
        "neurosym reproduce idea-gating --seeds 1 --datasets drift   # a quick look",
        "neurosym reproduce idea-gating --resume --json > report.json",
    ),
)
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1), help="Model seeds (the corpora are fixed).")
@click.option("--datasets", default="drift,wikitext-2", show_default=True, help="Comma-separated: drift, wikitext-2.")
@click.option("-n", "--samples", "samples", default=400, show_default=True, type=click.IntRange(min=1), help="Generated continuations per model and seed (drift prompts; domain prompts on WikiText-2, as many as the test text has).")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(min=1), help="Torch threads.")
@click.option("--gpu", is_flag=True, help="The larger configuration, on CUDA (docs/idea_gating.md).")
@click.option("--out-dir", default="runs/idea-gating", show_default=True, type=click.Path(path_type=Path), help="Where the runs go.")
@click.option("--resume", is_flag=True, help="Resume interrupted runs (finished ones are reused).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def reproduce_idea_gating(seeds: int, datasets: str, samples: int, threads: int, gpu: bool, out_dir: Path, resume: bool, as_json: bool) -> None:
    """Baseline vs idea-gated LMs at equal size (and the untied head, larger): PPL (gated
    and ungated), the drift rate after bridge words on a grammar-sampled corpus (exact
    topic judgement, 95% intervals), domain-term stickiness, and the gate's x-ray."""
    from neurosym.experiments.idea_gating import format_report as format_idea_report  # lazy: --help must not load torch
    from neurosym.experiments.idea_gating import json_report as idea_json  # lazy: as above
    from neurosym.experiments.idea_gating import reproduce as reproduce_idea  # lazy: as above

    check_out_dir(out_dir)
    chosen = tuple(d.strip() for d in datasets.split(",") if d.strip())
    say = None if as_json else (lambda line: click.echo(line, err=True))
    report = reproduce_idea(seeds=seeds, out_dir=out_dir, datasets=chosen, progress=say, resume=resume, threads=threads, gpu=gpu, samples=samples)
    if as_json:
        click.echo(json.dumps(idea_json(report), indent=2, ensure_ascii=False, default=str))
    else:
        click.echo(format_idea_report(report))

@reproduce.command(
    name="structured-suite",
    epilog=examples(
        "neurosym reproduce structured-suite --quick --jobs 2         # every task, every encoder: 9 min on 2 idle cores",
        "neurosym reproduce structured-suite --tasks tomita3,dyck2 --encoders lstm,regex-hard,regex-soft",
        "neurosym reproduce structured-suite --full --gpu --seeds 3 --resume --json > suite.json",
    ),
)
@click.option("--tasks", default=None, help="Comma-separated task names (default: all; see docs/structured_suite.md).")
@click.option("--encoders", default=None, help="Comma-separated encoder settings (default: all: mean, conv, rnn, lstm, attention, stack, "
              "regex-hard, regex-soft, regex-removed, regex-others, pcfg-hard, pcfg-soft, pcfg-removed, pcfg-prefix-hard, pcfg-prefix-removed).")
@click.option("--quick/--full", default=True, show_default=True, help="Small subsets and budgets (2 CPU cores) or the full sizes (a GPU).")
@click.option("--seeds", default=None, type=click.IntRange(min=1), help="Model seeds (default: 1 quick, 3 full; the data are fixed).")
@click.option("--steps", default=None, type=click.IntRange(min=1), help="Override the training steps of every run.")
@click.option("--data", "data_dir", default=None, type=click.Path(path_type=Path), help="The shared data folder (default: ../shared/data or $NEUROSYM_SHARED_DATA).")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1), help="Torch threads (of the one process when --jobs is 1).")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(min=1), help="Runs in parallel, one process of one thread each (2 on 2 cores).")
@click.option("--gpu", is_flag=True, help="Train on CUDA.")
@click.option("--out-dir", default="runs/structured-suite", show_default=True, type=click.Path(path_type=Path), help="The run folder.")
@click.option("--resume", is_flag=True, help="Resume an interrupted suite (finished runs are reused).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def reproduce_structured_suite(tasks: str | None, encoders: str | None, quick: bool, seeds: int | None, steps: int | None, data_dir: Path | None,
                               threads: int, jobs: int, gpu: bool, out_dir: Path, resume: bool, as_json: bool) -> None:
    """Every task of the structured-LM suite learned by every encoder (the regex and PCFG
    priors hard, soft and removed) at one budget: a task x encoder table of each task's metric, the
    Tomita cold start, length generalisation, sample efficiency (1/10/100%) and compute,
    written to OUT_DIR/report.md, plots and results.json."""
    from neurosym.experiments import structured_suite as suite  # lazy: --help must not load torch and every subsystem

    check_out_dir(out_dir)
    if data_dir is not None and not data_dir.is_dir():
        raise NeurosymError(f"--data {data_dir}: no such folder")
    if gpu:
        import torch  # lazy: as above

        if not torch.cuda.is_available():
            raise NeurosymError("--gpu: CUDA is not available here")
    split = lambda text: [x.strip() for x in text.split(",") if x.strip()]  # noqa: E731
    chosen_tasks = split(tasks) if tasks is not None else None
    chosen_encoders = split(encoders) if encoders is not None else list(suite.ENCODERS)
    if chosen_tasks == [] or chosen_encoders == []:
        raise click.UsageError("--tasks and --encoders need at least one name")
    budget = suite.budget_for(quick, steps=steps)
    say = None if as_json else (lambda line: click.echo(line, err=True))
    report = suite.reproduce(out_dir, chosen_tasks, chosen_encoders, seeds or (1 if quick else 3), budget, resume=resume, data_dir=data_dir,
                             threads=threads, progress=not as_json, say=None, device="cuda" if gpu else "cpu", workers=jobs)
    path = suite.write_report(report, out_dir)
    if say is not None:
        say(f"wrote {path} and {out_dir / 'results.json'}")
    if as_json:
        click.echo(json.dumps(suite.json_report(report), indent=2, ensure_ascii=False))
    else:
        click.echo(suite.format_report(report))


def _read_examples(path: Path | None) -> list[str]:
    """One example per line (a blank line is the empty string)."""
    if path is None:
        return []
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise NeurosymError(f"{path}: no such file") from None
    except UnicodeDecodeError as err:
        raise NeurosymError(f"{path}: not UTF-8 ({err.reason})") from None


@main.command(
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
    "--method", type=click.Choice(["beam", "evolve", "reinforce"]), default="beam", show_default=True,
    help="The search: best-first with pruning (AlphaRegex-style), evolution, or REINFORCE.",
)
@click.option(
    "--time-budget", "time_budget", default=None, type=click.FloatRange(min=0, min_open=True),
    help="Seconds the search may take (default 10; with --corpus 60, for all classes together).",
)
@click.option("--time", "old_time_budget", type=float, default=None, hidden=True, help="Another name of --time-budget (deprecated without --corpus).")
@click.option("--seed", default=0, show_default=True, help="Random seed of evolve, reinforce and beam's local search (same seed, same search).")
@click.option(
    "--lam", default=None, type=click.FloatRange(min=0),
    help="Weight of the regex size in the objective (default 0.02; with --corpus misclassified tokens per unit of size, "
    "default 0.25 on 200,000 tokens or more, proportionally less on smaller corpora).",
)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Append the result to this .regex bank (--corpus: write the bank of every class).")
@click.option("--name", default=None, help="The pattern's name in the bank (with -o).")
@click.option(
    "--select", type=click.Choice(["first", "posterior"]), default="first", show_default=True,
    help="beam: keep the cheapest solution, or rank several by a size prior and a size-principle likelihood.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result.")
def synth(
    pos_file: Path | None, neg_file: Path | None, corpus_file: Path | None, label: str | None, classes: str | None, method: str,
    time_budget: float | None, old_time_budget: float | None, seed: int, lam: float | None, output: Path | None, name: str | None,
    select: str, as_json: bool,
) -> None:
    """Synthesise a small regex accepting every positive and no negative example (exit status 1
    when the time budget ends without a solution: the best candidate is still printed).
    With --corpus, one regex per class of a labelled corpus, each checked on every example."""
    from neurosym.files import check_output  # lazy: --help must not load torch and every subsystem
    from neurosym.synth import synthesize, write_to_bank  # lazy: --help must not load torch and every subsystem
    if old_time_budget is not None:
        if corpus_file is None:
            click.echo("note: --time is deprecated; use --time-budget", err=True)
        if old_time_budget <= 0:
            raise NeurosymError(f"--time-budget: expected a positive number of seconds, got {old_time_budget:g}")
        time_budget = old_time_budget
    if corpus_file is not None:
        _synth_corpus(corpus_file, label, classes, time_budget or 60.0, output, pos_file, neg_file, name, as_json, lam)
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
    if output is not None:
        check_output(output, [f for f in (pos_file, neg_file) if f is not None], "bank")
    pos, neg = _read_examples(pos_file), _read_examples(neg_file)
    if select != "first" and method != "beam":
        raise NeurosymError("--select applies to --method beam only")
    options = {"select": select} if method == "beam" else {}
    res = synthesize(pos, neg, method=method, time_budget=time_budget, seed=seed, lam=lam, progress=not as_json, **options)
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


def _synth_corpus(
    corpus_file: Path, label: str | None, classes: str | None, time_budget: float, output: Path | None,
    pos_file: Path | None, neg_file: Path | None, name: str | None, as_json: bool, lam: float | None = None,
) -> None:
    """``neurosym synth --corpus``: one regex per class, a bank of them with -o."""
    from neurosym.files import check_output  # lazy: --help must not load torch and every subsystem
    from neurosym.synth import corpus as synth_corpus  # lazy: --help must not load torch and every subsystem

    if pos_file is not None or neg_file is not None:
        raise NeurosymError("--corpus replaces --pos/--neg: give one or the other")
    if name is not None:
        raise NeurosymError("--name applies to --pos/--neg; with --corpus each pattern is named after its class")
    if output is not None:
        check_output(output, [corpus_file], "bank")
    chosen = [c.strip() for c in classes.split(",") if c.strip()] if classes is not None else None
    if chosen is not None and not chosen:
        raise NeurosymError("--classes: no class given")
    pairs = synth_corpus.read_corpus(corpus_file, label)
    say = None if as_json else (lambda r: click.echo(f"{r.name}: {len(r.rounds)} round(s), {r.seconds:.1f} s", err=True))
    results = synth_corpus.synthesize_corpus(pairs, classes=chosen, time_budget=time_budget, progress=say, lam=lam)
    if output is not None:
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


@main.group(epilog=examples("neurosym bench wfsa", "neurosym bench inside --sizes 16,32 --json", "neurosym bench synth --suites alpharegex --time-budget 10"))
def bench() -> None:
    """Benchmarks that print ours vs a reference in one run. ``compile`` and ``synth``
    need the shared data sets (../shared/data beside the checkout, or
    $NEUROSYM_SHARED_DATA); ``inside`` and ``wfsa`` need none."""


@bench.command(name="compile", epilog=examples("neurosym bench compile", "neurosym bench compile --words 1000 --bpe-size 8000 --json"))
@click.option("--words", "n_words", default=5000, show_default=True, help="Size of the word list.")
@click.option("--bpe-size", default=32000, show_default=True, help="Byte-level BPE vocabulary size.")
@click.option("--reference-timeout", default=900.0, show_default=True, help="Seconds before the interegular reference is abandoned.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable results.")
def bench_compile(n_words: int, bpe_size: int, reference_timeout: float, as_json: bool) -> None:
    """Word list as a trie vs an interegular alternation; token index over a BPE vocabulary.
    Needs the shared data sets wikitext-2 and ud-english-ewt (../shared/data beside the
    checkout, or $NEUROSYM_SHARED_DATA)."""
    from neurosym.bench import compile as bench_compile_module  # lazy: --help must not load torch and every subsystem
    results = bench_compile_module.run(n_words=n_words, bpe_size=bpe_size, reference_timeout=reference_timeout, progress=not as_json)
    click.echo(json.dumps(results, indent=2) if as_json else bench_compile_module.format_results(results))


@bench.command(name="inside", epilog=examples("neurosym bench inside", "neurosym bench inside --lengths 20 --sizes 16,32 --repeats 5 --json"))
@click.option("--batch", default=8, show_default=True, type=click.IntRange(min=1), help="Sentences per batch.")
@click.option("--lengths", default="20,40", show_default=True, help="Comma-separated sentence lengths.")
@click.option("--sizes", default="16,32,64", show_default=True, help="Comma-separated N = T.")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(min=1), help="Timed runs per configuration (the median is reported).")
@click.option("--device", default="cpu", show_default=True, help='Torch device of both implementations: "cpu", "cuda" or "cuda:N".')
@click.option("--timeout", default=120.0, show_default=True, help="Seconds before a run is abandoned.")
@click.option("--memory-cap-gb", default=20.0, show_default=True, help="Address-space cap per process (at most 75% of available memory).")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Torch threads per process (default: torch's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable results.")
def bench_inside(batch: int, lengths: str, sizes: str, repeats: int, device: str, timeout: float, memory_cap_gb: float, threads: int | None, as_json: bool) -> None:
    """Inside algorithm forward+backward: ours vs pytorch-struct's SentCFG (seconds, ratio, peak memory)."""
    from neurosym.bench import inside as bench_inside_module  # lazy: --help must not load torch and every subsystem
    def ints(text: str, what: str) -> tuple[int, ...]:
        try:
            return tuple(int(x) for x in text.split(","))
        except ValueError:
            raise NeurosymError(f"--{what}: expected comma-separated integers, got {text!r}") from None

    results = bench_inside_module.run(
        batch=batch, lengths=ints(lengths, "lengths"), sizes=ints(sizes, "sizes"), repeats=repeats, device=device,
        timeout=timeout, memory_cap_gb=memory_cap_gb, threads=threads, progress=not as_json,
    )
    click.echo(json.dumps(results, indent=2) if as_json else bench_inside_module.format_results(results))


@bench.command(
    name="synth",
    epilog=examples(
        "neurosym bench synth --suites alpharegex --time-budget 60",
        "neurosym bench synth --suites regel --regel-limit 50 --time-budget 5 -o regel.json",
        "neurosym bench synth --methods beam,beam-posterior --json > results.json",
        "neurosym bench synth --suites corpus",
        "neurosym bench synth --suites regel --regel-split test --methods beam --time-budget 5",
        "neurosym bench synth --suites alpharegex --methods beam,beam-alphaleaves --clock cpu",
    ),
)
@click.option("--methods", default="beam,evolve,reinforce", show_default=True, help="Comma-separated: beam, beam-posterior, beam-enum (no format induction), beam-alphaleaves (AlphaRegex's leaves), evolve, reinforce.")
@click.option("--time-budget", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="Seconds per problem.")
@click.option("--regel-time-budget", default=None, type=click.FloatRange(min=0, min_open=True), help="Seconds per Regel problem (default: --time-budget).")
@click.option("--regel-limit", default=None, type=click.IntRange(min=1), help="Only the first N Regel problems.")
@click.option("--suites", "--suite", "suites", default="alpharegex,regel", show_default=True, help="Comma-separated problem sets: alpharegex, regel, corpus (UD English-EWT token classes).")
@click.option("--regel-split", default="all", show_default=True, type=click.Choice(["all", "dev", "test"]), help="Regel: the development half (for tuning), the test half (to report), or all.")
@click.option("--corpus-time-budget", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="corpus: seconds for all its classes together.")
@click.option("--corpus-test", default="test", show_default=True, type=click.Choice(["dev", "test"]), help="corpus: the EWT split scored (dev for tuning).")
@click.option("--clock", "clock_kind", default="wall", show_default=True, type=click.Choice(["wall", "cpu"]), help="Measure budgets and times in wall-clock or process CPU seconds (cpu: a busy machine buys the same search).")
@click.option("--seed", default=0, show_default=True, help="Random seed of every search (same seed, same results but for timing).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Also write the results as JSON to this file.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of the table.")
def bench_synth(
    methods: str, time_budget: float, regel_time_budget: float | None, regel_limit: int | None, suites: str, regel_split: str,
    corpus_time_budget: float, corpus_test: str, clock_kind: str, seed: int, output: Path | None, as_json: bool,
) -> None:
    """Regex synthesis on the AlphaRegex and Regel problems (solved counts, seconds, F1) and
    on a corpus (UD English-EWT token classes: F1 on test tokens and unseen forms vs
    memorised forms). Needs the shared data sets alpharegex, regel and ud-english-ewt
    (../shared/data beside the checkout, or $NEUROSYM_SHARED_DATA)."""
    from neurosym.bench.synth import bench_synth_command, format_results  # lazy: --help must not load torch and every subsystem
    from neurosym.files import atomic_write_bytes, check_output  # lazy: --help must not load torch and every subsystem

    if output is not None:
        output = check_output(output, [], "results")
    results = bench_synth_command(
        methods, time_budget, regel_time_budget, regel_limit, suites, seed,
        regel_split=regel_split, corpus_time_budget=corpus_time_budget, corpus_test=corpus_test, clock_kind=clock_kind,
    )
    text = json.dumps(results, indent=1, default=str)
    if output is not None:
        atomic_write_bytes(output, text.encode("utf-8") + b"\n", make_parents=False)
    click.echo(text if as_json else format_results(results))


@bench.command(name="wfsa", epilog=examples("neurosym bench wfsa", "neurosym bench wfsa --threads 2 --json"))
@click.option("--threads", default=None, type=click.IntRange(min=1), help="Torch threads (default: torch's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable results.")
def bench_wfsa(threads: int | None, as_json: bool) -> None:
    """RegexLayer over 100 regexes on a 64 x 128 batch: tokens/s forward and forward+backward,
    and the ratio to a dense matmul recurrence with as many weights."""
    from neurosym.bench import wfsa as bench_wfsa_module  # lazy: --help must not load torch and every subsystem
    results = bench_wfsa_module.run(progress=not as_json, threads=threads)
    click.echo(json.dumps(results, indent=2) if as_json else bench_wfsa_module.format_results(results))


@bench.command(
    name="decode",
    epilog=examples("neurosym bench decode", "neurosym bench decode --words 1000 --skip-generation --json", "neurosym bench decode --skip-index --batch 8"),
)
@click.option("--words", "n_words", default=5000, show_default=True, type=click.IntRange(min=1), help="Size of the word-list pattern.")
@click.option("--bpe-size", default=32000, show_default=True, type=click.IntRange(min=300), help="Byte-level BPE vocabulary size.")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(min=1), help="Index builds and generation runs per measurement (the median is reported).")
@click.option("--batch", default=32, show_default=True, type=click.IntRange(min=1), help="Rows decoded together in the generation part.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1), help="Torch threads in the generation part.")
@click.option("--skip-index", is_flag=True, help="Skip the index comparison with outlines-core and XGrammar.")
@click.option("--skip-generation", is_flag=True, help="Skip the generation timings (processor chain, KV cache).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable results.")
def bench_decode(n_words: int, bpe_size: int, repeats: int, batch: int, threads: int, skip_index: bool, skip_generation: bool, as_json: bool) -> None:
    """Constrained decoding: the token index side by side with outlines-core and XGrammar
    (build seconds, index memory, µs per mask over real strings, mask agreement), and per
    generated token the processor chain and the KV cache against the model's forward.
    The index part needs the shared data sets wikitext-2 and ud-english-ewt and the
    `bench` extra (pip install 'neurosym[bench]'); a missing engine is reported, not fatal."""
    from neurosym.bench import decode as bench_decode_module  # lazy: --help must not load torch and every subsystem
    from neurosym.data import shared_data  # lazy: as above

    results: dict = {}
    if not skip_index:
        shared_data("wikitext-2", "valid.txt"), shared_data("ud-english-ewt", "en_ewt-ud-train.conllu")  # a clear error before any work
        results["index"] = bench_decode_module.run(n_words=n_words, bpe_size=bpe_size, repeats=repeats, progress=not as_json)
    if not skip_generation:
        results["generation"] = bench_decode_module.bench_generation(batch=batch, repeats=repeats, threads=threads)
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        parts = [bench_decode_module.format_results(results["index"])] if "index" in results else []
        parts += [bench_decode_module.format_generation(results["generation"])] if "generation" in results else []
        click.echo("\n\n".join(parts))


@bench.command(name="train", epilog=examples("neurosym bench train", "neurosym bench train --repeats 40 --threads 2 --json"))
@click.option("--repeats", default=20, show_default=True, type=click.IntRange(min=1), help="Timed steps per variant (interleaved; best and median reported).")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1), help="Torch threads.")
@click.option("--batch", default=32, show_default=True, type=click.IntRange(min=1), help="Windows per batch.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable results.")
def bench_train(repeats: int, threads: int, batch: int, as_json: bool) -> None:
    """Time per training step of the baseline LM, the semantic-fusion model, semantic KL and
    idea gating at the same size on one batch of WikiText-2 windows, in process CPU time,
    as ratios to the baseline (docs/semantic_kl.md)."""
    from neurosym.bench import train as bench_train_module  # lazy: --help must not load torch and every subsystem

    results = bench_train_module.run(repeats=repeats, threads=threads, batch_size=batch)
    click.echo(json.dumps(results, indent=2) if as_json else bench_train_module.format_results(results))


@main.command(
    name="eval",
    epilog=examples(
        "neurosym eval runs/semantic-fusion/semantic-fusion-fusion-seed0",
        "neurosym eval runs/semantic-fusion/semantic-fusion-baseline-seed0 -n 200 --seed 0 --json > baseline.json",
        "neurosym eval runs/semantic-fusion/semantic-fusion-fusion-seed0 --settings soft,paper --alpha 0",
    ),
)
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--settings", default="soft,soft-mask,hard,paper", show_default=True,
              help="Comma-separated decoding settings: soft (control input only), soft-mask (+ grammar mask), "
              "hard (+ the requested polarity's adjectives and punctuation only), paper (hard + class mixture).")
@click.option("-n", "--samples", "n", default=200, show_default=True, type=click.IntRange(min=1), help="Samples per request and setting.")
@click.option("--seed", default=0, show_default=True, help="Random seed (same seed, same samples; the same draws for any run).")
@click.option("--alpha", default=0.3, show_default=True, type=click.FloatRange(min=0, max=1),
              help="Weight of the uniform class mixture in the paper setting (0: the model's own distribution).")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
def eval_cmd(run: Path, settings: str, n: int, seed: int, alpha: float, as_json: bool) -> None:
    """Decode a trained semantic-fusion RUN (a run folder or a checkpoint) for every request
    (polarity pos/neg x punctuation) under each setting and print polarity and punctuation
    accuracy, grammaticality, distinct-2, the held-out adjective hit rate next to the
    sampler's own share, and the intended-vs-realised confusion matrices."""
    from neurosym.experiments.control import PaperSampler, evaluate_run, format_eval  # lazy: --help must not load torch and every subsystem
    names = tuple(s.strip() for s in settings.split(",") if s.strip())
    report = evaluate_run(run, settings=names, n=n, seed=seed, paper=PaperSampler(alpha=alpha))
    click.echo(json.dumps(report, indent=2, ensure_ascii=False) if as_json else format_eval(report))


@main.command(
    name="generate",
    epilog=examples(
        "neurosym generate runs/semantic-fusion --grammar grammars/clause.fsg -n 3",
        'neurosym generate runs/semantic-fusion/last.pt --grammar grammars/clause.fsg --prompt "Bob cooks" --top-p 0.9 --json',
        "neurosym generate runs/semantic-fusion --grammar grammars/email.regex:LABEL --temperature 0.7 --seed 1",
    ),
)
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--grammar", required=True, help="A .regex bank's pattern (FILE:NAME; FILE if it has one), an .fsg or .pcfg grammar, a .txt word list, an artifact or a regex (neurosym.kinds.load_grammar).")
@click.option("--prompt", default=None, help="Text every sample starts with (it must be in the grammar's language so far).")
@click.option("-n", "--samples", "n", default=5, show_default=True, type=click.IntRange(min=0), help="How many samples.")
@click.option("--temperature", default=1.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="Sampling temperature.")
@click.option("--top-p", default=1.0, show_default=True, type=click.FloatRange(min=0, max=1, min_open=True), help="Nucleus sampling mass (1: off).")
@click.option("--seed", default=0, show_default=True, help="Random seed (same seed, same samples).")
@click.option("--max-len", default=40, show_default=True, type=click.IntRange(min=1), help="Most tokens generated per sample (end included); the model's context may cap it.")
@click.option("--processor", "processors", multiple=True, help="A registered decoding processor, NAME or NAME:ARG, after the grammar (repeatable; neurosym.decode.processor_names()).")
@click.option("--json", "as_json", is_flag=True, help="A JSON list of samples.")
def generate_cmd(run: Path, grammar: str, prompt: str | None, n: int, temperature: float, top_p: float, seed: int, max_len: int, processors: tuple[str, ...], as_json: bool) -> None:
    """Sample from a trained RUN (a run folder or a checkpoint) constrained to a grammar:
    each sample with its grammar log-probability (an FSG's exact log P; n/a for regexes
    and word lists) and the model's log-probability of the generated tokens."""
    from neurosym.decode.run import format_samples, generate_from_run  # lazy: --help must not load torch and every subsystem
    rows = generate_from_run(run, grammar, prompt=prompt, n=n, temperature=temperature, top_p=top_p, seed=seed, max_len=max_len,
                             processors=processors)
    click.echo(json.dumps(rows, indent=2, ensure_ascii=False) if as_json else format_samples(rows))


if __name__ == "__main__":
    main()
