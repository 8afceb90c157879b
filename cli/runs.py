"""``neurosym train``, ``plot``, ``eval`` and ``generate``: the commands that make a trained
run and read one back (a run folder or a checkpoint)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from neurosym.cli.options import examples, force_option, json_option, output_option, resume_option, samples_option, seed_option
from neurosym.errors import NeurosymError


@click.command(
    epilog=examples(
        'neurosym train mine.toml                                   # [run] task = "lm": your own text (docs/training.md)',
        "neurosym train configs/semantic_fusion.toml",
        "neurosym train configs/semantic_fusion.toml --resume      # after a kill or Ctrl-C",
        'torchrun --nproc_per_node=2 "$(which neurosym)" train configs/semantic_fusion.toml   # DDP',
    ),
)
@click.argument("config", type=click.Path(path_type=Path))
@resume_option("Continue the run from its last checkpoint (exactly).")
@click.option("--force", is_flag=True, help="A new run may write its files into a folder that holds files it did not write "
              "(replacing those of the same names; an input is never replaced).")
def train(config: Path, resume: bool, force: bool) -> None:
    """Train from a TOML CONFIG. Its [run] task names what to train: "lm", the built-in
    language-model task on your own text files, lexicon and objectives (the default when
    [data] names train files or a grammar), or "package.module:factory". Under torchrun,
    trains with distributed data parallel."""
    from neurosym.lm.train import train_from_file  # lazy: --help must not load torch and every subsystem
    result = train_from_file(config, resume=resume, force=force)
    figures = ", ".join(f"{k} {v:.4g}" for k, v in result.eval.items() if isinstance(v, float))
    click.echo(f"{result.run_dir}: {result.steps} steps, final loss {result.loss:.4f}" + (f"; {figures}" if figures else ""))


@click.command(epilog=examples("neurosym plot runs/semantic-fusion", "neurosym plot runs/semantic-fusion -o curves.svg"))
@click.argument("run", type=click.Path(path_type=Path))
@output_option("Image file: .png, .svg or .pdf (default RUN/curves.png).")
@force_option("plot")
def plot(run: Path, output: Path | None, force: bool) -> None:
    """Plot a run's metrics (train loss, learning rate, evaluation metrics). An existing
    OUTPUT is replaced only when neurosym drew it (or with --force)."""
    from neurosym.files import IMAGE_SUFFIXES, check_output  # lazy: --help must not load torch and every subsystem
    from neurosym.lm.plot import METRICS, plot_run  # lazy: matplotlib is slow to import and only plots need it

    inputs = [run / METRICS] if run.is_dir() else []
    if output is not None:
        check_output(output, inputs, "plot", suffixes=IMAGE_SUFFIXES, force=force)
    elif run.is_dir():
        check_output(run / "curves.png", inputs, "plot", ours=None)  # the run's own plot: a writable folder is all it needs
    click.echo(f"wrote {plot_run(run, output)}")



@click.command(
    name="eval",
    epilog=examples(
        "neurosym eval runs/mine --split test --json              # a run of the built-in lm task",
        "neurosym eval runs/mine --grammar g.regex -n 100          # + how many of 100 free samples the grammar accepts",
        "neurosym eval runs/semantic-fusion/semantic-fusion-fusion-seed0 --split test   # a recipe run: its test perplexities",
        "neurosym eval runs/semantic-fusion/semantic-fusion-baseline-seed0 --settings soft,soft-mask,hard,paper -n 200 --seed 0 --json > baseline.json",
        "neurosym eval runs/semantic-fusion/semantic-fusion-fusion-seed0 --settings soft,paper --alpha 0",
    ),
)
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--settings", default="soft,soft-mask,hard,paper", show_default=True,
              help="Comma-separated decoding settings: soft (control input only), soft-mask (+ grammar mask), "
              "hard (+ the requested polarity's adjectives and punctuation only), paper (hard + class mixture).")
@samples_option(200, "Samples per request and setting (a semantic-fusion run), or samples drawn for --grammar.", least=1)
@seed_option("Random seed (same seed, same samples; the same draws for any run).")
@click.option("--alpha", default=0.3, show_default=True, type=click.FloatRange(min=0, max=1),
              help="Weight of the uniform class mixture in the paper setting (0: the model's own distribution).")
@click.option("--split", type=click.Choice(["valid", "test"]), default="valid", show_default=True,
              help='A run of the built-in "lm" task: the [data] files to evaluate on.')
@click.option("--pos", type=click.Path(path_type=Path), default=None,
              help='A run of the built-in "lm" task with a word vocabulary: also the same-POS miss rate over this .conllu file.')
@click.option("--grammar", default=None,
              help='A run of the built-in "lm" task: also the grammaticality of N unconstrained samples under this grammar '
              "(a .regex pattern, .fsg, .pcfg, .txt word list or a regex, as for generate).")
@click.option("--max-len", default=40, show_default=True, type=click.IntRange(min=1),
              help="With --grammar: most tokens per sample (end included); the model's context may cap it.")
@json_option("The report as JSON.")
def eval_cmd(run: Path, settings: str, n: int, seed: int, alpha: float, split: str, pos: Path | None, grammar: str | None,
             max_len: int, as_json: bool) -> None:
    """Evaluate a trained RUN (a run folder or a checkpoint). A run of the built-in "lm"
    task: perplexity, top-1 accuracy and calibration error (ECE) on its valid or test
    files (and the same-POS miss rate with --pos; with --grammar, the share of N
    unconstrained samples that are sentences of the grammar, and of the samples cut off
    at --max-len, the share still viable prefixes of one). A semantic-fusion run (an "lm"
    run too: its perplexities on the split, as above) with --settings: decode it for every request (polarity pos/neg x
    punctuation) under each setting and print polarity and punctuation accuracy,
    grammaticality, distinct-2, the held-out adjective hit rate next to the sampler's own
    share, and the intended-vs-realised confusion matrices."""
    from neurosym.lm.task import evaluate_run, format_evaluation, is_lm_run  # lazy: --help must not load torch and every subsystem
    decode = click.get_current_context().get_parameter_source("settings") != click.core.ParameterSource.DEFAULT
    if is_lm_run(run) and not decode:  # a semantic-fusion run is an "lm" run too: --settings asks for controllable decoding
        result = evaluate_run(run, split, pos)
        lines = [format_evaluation(result)]
        if grammar is not None:
            from neurosym.decode.run import format_grammaticality, grammaticality  # lazy: as above
            result["grammaticality"] = grammaticality(run, grammar, n=n, seed=seed, max_len=max_len)
            lines.append(format_grammaticality(result["grammaticality"]))
        click.echo(json.dumps(result, indent=2, ensure_ascii=False) if as_json else "\n".join(lines))
        return
    if grammar is not None:
        raise NeurosymError(f"--grammar: {run} is not a run of the built-in lm task; a semantic-fusion run's eval reports its "
                            "grammaticality under every setting already")
    from neurosym.experiments.control import PaperSampler, evaluate_run, format_eval  # lazy: --help must not load torch and every subsystem
    names = tuple(s.strip() for s in settings.split(",") if s.strip())
    report = evaluate_run(run, settings=names, n=n, seed=seed, paper=PaperSampler(alpha=alpha))
    click.echo(json.dumps(report, indent=2, ensure_ascii=False) if as_json else format_eval(report))


@click.command(
    name="generate",
    epilog=examples(
        "neurosym generate runs/semantic-fusion/semantic-fusion-fusion-seed0 --grammar grammars/clause.fsg -n 3   # a run of `reproduce semantic-fusion`",
        'neurosym generate runs/semantic-fusion/semantic-fusion-fusion-seed0/last.pt --grammar grammars/clause.fsg --prompt "Bob cooks" --top-p 0.9 --json',
        "neurosym generate runs/semantic-fusion --grammar grammars/email.regex:LABEL --temperature 0.7 --seed 1   # a run of `train configs/semantic_fusion.toml`",
        "neurosym generate runs/mine -n 3                          # a run of the lm task (native or hf = DIR), free sampling",
    ),
)
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--grammar", default=None, help="A .regex bank's pattern (FILE:NAME; FILE if it has one), an .fsg or .pcfg grammar, a .txt word list, an artifact or a regex (neurosym.kinds.load_grammar); omitted: free sampling.")
@click.option("--prompt", default=None, help="Text every sample starts with (it must be in the grammar's language so far).")
@samples_option(5, "How many samples.")
@click.option("--temperature", default=1.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="Sampling temperature.")
@click.option("--top-p", default=1.0, show_default=True, type=click.FloatRange(min=0, max=1, min_open=True), help="Nucleus sampling mass (1: off).")
@seed_option()
@click.option("--max-len", default=40, show_default=True, type=click.IntRange(min=1), help="Most tokens generated per sample (end included); the model's context may cap it.")
@click.option("--processor", "processors", multiple=True, help="A registered decoding processor, NAME or NAME:ARG, after the grammar (repeatable; neurosym.decode.processor_names()).")
@json_option("A JSON list of samples.")
def generate_cmd(run: Path, grammar: str | None, prompt: str | None, n: int, temperature: float, top_p: float, seed: int, max_len: int,
                 processors: tuple[str, ...], as_json: bool) -> None:
    """Sample from a trained RUN (a run folder or a checkpoint; native or Hugging Face)
    constrained to a grammar (or freely, without --grammar): each sample with its grammar
    log-probability (an FSG's or PCFG's exact log P; n/a for regexes and word lists) and
    the model's log-probability of the generated tokens."""
    from neurosym.decode.run import format_samples, generate_from_run  # lazy: --help must not load torch and every subsystem
    rows = generate_from_run(run, grammar, prompt=prompt, n=n, temperature=temperature, top_p=top_p, seed=seed, max_len=max_len,
                             processors=processors)
    dead = sum(r["status"] == "dead_end" for r in rows)
    if rows and dead == len(rows):
        raise NeurosymError(
            f"{grammar}: every sample dead-ended: after {'the prompt' if prompt else 'the start'} the grammar allows no token of "
            f"the run's vocabulary (is the grammar written for another tokenisation, e.g. characters on a word-level model?)"
        )
    click.echo(json.dumps(rows, indent=2, ensure_ascii=False) if as_json else format_samples(rows))
    if dead:
        click.echo(f"warning: {dead} of {len(rows)} samples dead-ended (the grammar left no token of the run's vocabulary)", err=True)


__all__ = ["eval_cmd", "generate_cmd", "plot", "train"]
