"""``neurosym reproduce ...``: the recipes that train and report against the published
figures (semantic fusion, semantic KL, idea gating, the structured-LM suite)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from neurosym.cli.options import (
    check_out_dir,
    examples,
    gpu_option,
    jobs_option,
    json_option,
    out_dir_option,
    resume_option,
    samples_option,
    seeds_option,
    threads_option,
)
from neurosym.errors import NeurosymError


@click.group(epilog=examples("neurosym reproduce semantic-fusion"))
def reproduce() -> None:
    """Recipes that train and report against the published figures."""


@reproduce.command(
    name="semantic-kl",
    epilog=examples(
        "neurosym reproduce semantic-kl                        # 3 seeds, WikiText-2 and UD English-EWT",
        "neurosym reproduce semantic-kl --seeds 1 --datasets ud-english-ewt   # ~1 min per model",
        "neurosym reproduce semantic-kl --budget cpu --datasets wikitext-2    # one epoch of train.txt (20+ CPU min per model)",
        "neurosym reproduce semantic-kl --resume --json > report.json",
    ),
)
@seeds_option(3, "Model seeds (the data are fixed).")
@click.option("--datasets", default="wikitext-2,ud-english-ewt", show_default=True, help="Comma-separated: wikitext-2, ud-english-ewt.")
@click.option("--variants", default=None, help="Comma-separated variants (default: baseline, kl-T0.1, kl-T0.2, kl-cos-0.3-to-0.05).")
@click.option("--epochs", default=None, type=click.IntRange(min=1), help="Override the budget's epochs (1).")
@click.option("--budget", default="quick", show_default=True, type=click.Choice(["quick", "cpu"]),
              help="quick: the published 1-epoch model; cpu: d 64, one epoch of WikiText-2 train.txt (aimed at 10 min on one core; 20+ CPU min measured at the standard vocabulary, docs/semantic_kl.md).")
@click.option("--data", "data_dir", default=None, type=click.Path(path_type=Path),
              help="A folder with the corpus files (default: WikiText-2 from the shared data folder when it has train.txt, else the shipped corpora/).")
@threads_option(1, "Torch threads (results depend on the thread count).")
@jobs_option()
@gpu_option("The larger configuration of docs/semantic_kl.md, on CUDA.")
@out_dir_option("runs/semantic-kl")
@resume_option()
@json_option("Print the report as JSON.")
def reproduce_semantic_kl(seeds: int, datasets: str, variants: str | None, epochs: int | None, budget: str, data_dir: Path | None,
                          threads: int, jobs: int, gpu: bool, out_dir: Path, resume: bool, as_json: bool) -> None:
    """A CE baseline vs semantic-KL LMs (two temperatures and a schedule) at the same size
    and budget, each a config of the built-in lm task, on WikiText-2 (the standard
    protocol: train on train.txt, choose on valid.txt, report on test.txt; trained on
    valid.txt, labelled as the fallback, when train.txt is absent) and UD English-EWT: PPL,
    same-POS miss rate, top-1, ECE, embedding health (mean ± std over seeds), Welch's
    t-test, training curves."""
    from neurosym.experiments import semantic_kl as recipe  # lazy: --help must not load torch and every subsystem
    from neurosym.lm.plot import plot_run  # lazy: matplotlib is slow to import and only plots need it

    check_out_dir(out_dir)
    if data_dir is not None and not data_dir.is_dir():
        raise NeurosymError(f"--data {data_dir}: no such folder")
    chosen = tuple(v.strip() for v in variants.split(",") if v.strip()) if variants is not None else recipe.MAIN
    sets = tuple(d.strip() for d in datasets.split(",") if d.strip())
    say = None if as_json else (lambda line: click.echo(line, err=True))
    optim = {"epochs": epochs} if epochs is not None else {}
    if gpu:
        report = recipe.reproduce(seeds=seeds, out_dir=out_dir, datasets=sets, variants=chosen, progress=say, resume=resume,
                                  model=recipe.GPU_MODEL, data=recipe.GPU_DATA, optim=recipe.GPU_OPTIM | optim,
                                  threads=threads, device="cuda", data_dir=data_dir, jobs=jobs)
    else:
        report = recipe.reproduce(seeds=seeds, out_dir=out_dir, datasets=sets, variants=chosen, progress=say, resume=resume,
                                  optim=optim, threads=threads, data_dir=data_dir, budget=budget, jobs=jobs)
    for d in report["datasets"]:
        for v in report["variants"]:
            for r in report[d][v]["runs"]:
                r["plot"] = str(plot_run(r["run_dir"]))
    report["curves"] = str(recipe.plot_curves(report, out_dir / "curves.png"))
    report["reliability_plot"] = str(recipe.plot_reliability(report, out_dir / "reliability.png"))
    if as_json:
        click.echo(json.dumps(recipe.json_report(report) | {k: report[k] for k in ("curves", "reliability_plot")}, indent=2, ensure_ascii=False))
    else:
        click.echo(recipe.format_report(report) + f"\n\ntraining curves: {report['curves']}\nreliability diagrams: {report['reliability_plot']}")


@reproduce.command(
    name="semantic-fusion",
    epilog=examples(
        "neurosym reproduce semantic-fusion                      # quick: baseline and fusion, one seed, then a few samples",
        "neurosym reproduce semantic-fusion --seeds 5            # the same two models over 5 seeds, with Welch's t-test",
        "neurosym reproduce semantic-fusion --full               # 5 seeds x 4 models, then controllable decoding",
        "neurosym reproduce semantic-fusion --full --resume --json > report.json",
    ),
)
@click.option("--quick/--full", default=True, show_default=True,
              help="Quick: the baseline and the fusion model, one seed, one thread, no controllable decoding (a few minutes on 2 cores). "
              "Full: 5 seeds of baseline, fusion, fusion-control and fusion-lexical on 2 threads, then controllable decoding. "
              "--seeds, --variants, --threads and --control-samples override either.")
@seeds_option(None, "Model seeds (the corpus is fixed) [default: 1 quick, 5 full].")
@click.option("--ablation", is_flag=True, help="Also train the ablations: baseline without uniformizer, fusion without uniformizer, fusion without aux.")
@click.option("--epochs", default=None, type=click.IntRange(min=1), help="Override the recipe's 6 epochs.")
@click.option("--train-sentences", default=None, type=click.IntRange(min=1),
              help="Override the recipe's 8,000 training sentences (a smaller, different corpus: for a smoke test).")
@threads_option(None, "Torch threads (results are bit-identical for a given machine, torch version and thread count) [default: 1 quick, 2 full].")
@out_dir_option("runs/semantic-fusion")
@click.option("--variants", default=None, help="Comma-separated variants to train instead (baseline, fusion, fusion-control, fusion-lexical, and the ablations).")
@click.option("--control-samples", default=None, type=click.IntRange(min=0),
              help="Samples per decoding setting and seed for the control tables (0: skip controllable decoding) [default: 0 quick, 200 full].")
@click.option("--alpha", default=0.3, show_default=True, type=click.FloatRange(min=0, max=1), help="Class-mixture weight of the paper's sampler.")
@samples_option(3, "Grammar-constrained samples shown from each model's first run at the end (0: none).")
@resume_option()
@json_option("Print the report as JSON.")
def reproduce_semantic_fusion(quick: bool, seeds: int | None, ablation: bool, epochs: int | None, train_sentences: int | None, threads: int | None,
                              out_dir: Path, variants: str | None, control_samples: int | None, alpha: float, n: int, resume: bool,
                              as_json: bool) -> None:
    """Baseline vs semantic-fusion LMs on the clause.fsg corpus: PPL, seen-only PPL, focus CE,
    semantic MSE (mean ± std over seeds), Welch's t-test and step times, next to the
    paper's figures and the exact floor; then controllable decoding of every run (soft,
    soft + grammar mask, hard, the paper's sampler): control accuracy, grammaticality
    and held-out adjective hit rates; and a few samples of each model under the grammar.
    By default a quick run (--quick); --full is the published grid."""
    from neurosym.experiments.control import (  # lazy: --help must not load torch and every subsystem
        PaperSampler, control_targets, evaluate_recipe, format_control, format_targets,
    )
    from neurosym.experiments import semantic_fusion as recipe  # lazy: as above
    from neurosym.lm.plot import plot_run  # lazy: matplotlib is slow to import and only plots need it
    import torch  # lazy: as above

    check_out_dir(out_dir)
    say = None if as_json else (lambda line: click.echo(line, err=True))
    if variants is not None and ablation:
        raise click.UsageError("--variants and --ablation: give one or the other")
    budget = recipe.QUICK if quick else recipe.FULL
    chosen = tuple(v.strip() for v in variants.split(",") if v.strip()) if variants is not None else recipe.ABLATION if ablation else budget.variants
    seeds = seeds if seeds is not None else budget.seeds
    control_samples = control_samples if control_samples is not None else budget.control_samples
    threads = threads if threads is not None else budget.threads
    data = {"train": train_sentences} if train_sentences is not None else {}
    before = torch.get_num_threads()
    torch.set_num_threads(threads)  # the whole command, not only training: sampling the corpus, decoding (the same draws on any count)
    try:
        report = recipe.reproduce(seeds=seeds, out_dir=out_dir, epochs=epochs, progress=say, resume=resume, variants=chosen, threads=threads,
                                  **data)
        for v in report["variants"]:
            for r in report[v]["runs"]:
                r["plot"] = str(plot_run(r["run_dir"]))
        if control_samples:
            evaluate_recipe(report, samples=control_samples, paper=PaperSampler(alpha=alpha), progress=say, resume=resume)
            baselines = [v for v in report["variants"] if recipe.VARIANTS[v]["kind"] == "baseline"]
            control_targets(report, reference=baselines[0] if baselines else None)  # issue 30 point 5, against the first baseline
        if n:
            recipe.grammar_samples(report, n=n)
    finally:
        torch.set_num_threads(before)
    if as_json:
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    parts = [recipe.format_report(report)]
    if control_samples:
        parts += [format_control(report), format_targets(report)]
    if n:
        parts.append(recipe.format_samples(report))
    if quick and seeds == 1 and variants is None and not ablation:
        parts.append("That was the quick run. --seeds 5 trains these two models over 5 seeds and tests the difference "
                     "(Welch's t); --full is the published grid (5 seeds x 4 models, then controllable decoding); "
                     "docs/semantic_fusion.md reads the numbers.")
    click.echo("\n\n".join(parts))


@reproduce.command(
    name="idea-gating",
    epilog=examples(
        "neurosym reproduce idea-gating                          # 3 seeds, drift corpus and WikiText-2",
        "neurosym reproduce idea-gating --seeds 1 --datasets drift   # a quick look",
        "neurosym reproduce idea-gating --budget cpu --datasets wikitext-2 --threads 1   # WikiText-2 train.txt, one epoch",
        "neurosym reproduce idea-gating --resume --json > report.json",
    ),
)
@seeds_option(3, "Model seeds (the corpora are fixed).")
@click.option("--datasets", default="drift,wikitext-2", show_default=True, help="Comma-separated: drift, wikitext-2.")
@click.option("--variants", default=None, help="Comma-separated variants (default: baseline, idea, idea-untied).")
@samples_option(
    400, "Generated continuations per model and seed (drift prompts; domain prompts on WikiText-2, as many as the test text has).",
    least=1, dest="samples",
)
@threads_option(2)
@click.option("--budget", default="quick", show_default=True, type=click.Choice(["quick", "cpu"]),
              help="quick: the published models; cpu: WikiText-2, one epoch of train.txt (aimed at 10 min per model on one core; 20+ CPU min measured, docs/semantic_kl.md).")
@click.option("--data", "data_dir", default=None, type=click.Path(path_type=Path),
              help="A folder with WikiText-2 (default: the shared data folder when it has train.txt, else the shipped corpora/).")
@jobs_option()
@gpu_option("The larger configuration, on CUDA (docs/idea_gating.md).")
@out_dir_option("runs/idea-gating")
@resume_option()
@json_option("Print the report as JSON.")
def reproduce_idea_gating(seeds: int, datasets: str, variants: str | None, samples: int, threads: int, budget: str, data_dir: Path | None, jobs: int, gpu: bool,
                          out_dir: Path, resume: bool, as_json: bool) -> None:
    """Baseline vs idea-gated LMs at equal size (and the untied head, larger), each a
    config of the built-in lm task: PPL (gated and ungated), the drift rate after bridge
    words on a grammar-sampled corpus (exact topic judgement, 95% intervals), domain-term
    stickiness on WikiText-2 (train.txt by the standard protocol, or the labelled valid.txt
    fallback), and the gate's x-ray."""
    from neurosym.experiments.idea_gating import format_report as format_idea_report  # lazy: --help must not load torch
    from neurosym.experiments.idea_gating import json_report as idea_json  # lazy: as above
    from neurosym.experiments.idea_gating import reproduce as reproduce_idea  # lazy: as above

    check_out_dir(out_dir)
    chosen = tuple(d.strip() for d in datasets.split(",") if d.strip())
    say = None if as_json else (lambda line: click.echo(line, err=True))
    if data_dir is not None and not data_dir.is_dir():
        raise NeurosymError(f"--data {data_dir}: no such folder")
    extra = {"variants": tuple(v.strip() for v in variants.split(",") if v.strip())} if variants is not None else {}
    report = reproduce_idea(seeds=seeds, out_dir=out_dir, datasets=chosen, progress=say, **extra, resume=resume, threads=threads, gpu=gpu,
                            samples=samples, data_dir=data_dir, budget=budget, jobs=jobs)
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
@seeds_option(None, "Model seeds (default: 1 quick, 3 full; the data are fixed).")
@click.option("--steps", default=None, type=click.IntRange(min=1), help="Override the training steps of every run.")
@click.option("--data", "data_dir", default=None, type=click.Path(path_type=Path), help="The shared data folder (default: ../shared/data or $NEUROSYM_SHARED_DATA).")
@threads_option(1, "Torch threads (of the one process when --jobs is 1).")
@jobs_option("Runs in parallel, one process of one thread each (2 on 2 cores).")
@gpu_option("Train on CUDA.")
@out_dir_option("runs/structured-suite", "The run folder.")
@resume_option("Resume an interrupted suite (finished runs are reused).")
@json_option("Print the report as JSON.")
def reproduce_structured_suite(tasks: str | None, encoders: str | None, quick: bool, seeds: int | None, steps: int | None, data_dir: Path | None,
                               threads: int, jobs: int, gpu: bool, out_dir: Path, resume: bool, as_json: bool) -> None:
    """Every task of the structured-LM suite learned by every encoder (the regex and PCFG
    priors hard, soft and removed) at one budget: a task x encoder table of each task's metric, the
    Tomita cold start, length generalisation, sample efficiency (1/10/100%) and compute,
    written to OUT_DIR/report.md, plots and results.json."""
    from neurosym.experiments import structured_suite as suite  # lazy: --help must not load torch and every subsystem
    from neurosym.experiments import suite_report  # lazy: as above

    check_out_dir(out_dir)
    if data_dir is not None and not data_dir.is_dir():
        raise NeurosymError(f"--data {data_dir}: no such folder")
    if gpu:
        import torch  # lazy: as above

        if not torch.cuda.is_available():
            raise NeurosymError("--gpu: CUDA is not available here")
    split = lambda text: [x.strip() for x in text.split(",") if x.strip()]  # noqa: E731
    chosen_tasks = split(tasks) if tasks is not None else None
    chosen_encoders = split(encoders) if encoders is not None else list(suite.SETTINGS)
    if chosen_tasks == [] or chosen_encoders == []:
        raise click.UsageError("--tasks and --encoders need at least one name")
    budget = suite.budget_for(quick, steps=steps)
    say = None if as_json else (lambda line: click.echo(line, err=True))
    report = suite.reproduce(out_dir, chosen_tasks, chosen_encoders, seeds or (1 if quick else 3), budget, resume=resume, data_dir=data_dir,
                             threads=threads, progress=not as_json, say=None, device="cuda" if gpu else "cpu", workers=jobs)
    path = suite_report.write_report(report, out_dir)
    if say is not None:
        say(f"wrote {path} and {out_dir / 'results.json'}")
    if as_json:
        click.echo(json.dumps(suite_report.json_report(report), indent=2, ensure_ascii=False))
    else:
        click.echo(suite_report.format_report(report))


__all__ = ["reproduce", "reproduce_idea_gating", "reproduce_semantic_fusion", "reproduce_semantic_kl", "reproduce_structured_suite"]
