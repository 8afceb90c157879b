"""``neurosym bench ...``: the benchmarks that print ours against a reference in one run
(compile, guide, inside, synth, wfsa, decode, train)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from neurosym.cli.options import examples, json_option, output_option, seed_option, threads_option
from neurosym.errors import NeurosymError


@click.group(epilog=examples("neurosym bench wfsa", "neurosym bench inside --sizes 16,32 --json", "neurosym bench synth --suites alpharegex --time-budget 10"))
def bench() -> None:
    """Benchmarks that print ours vs a reference in one run. ``compile`` and ``synth``
    need the shared data sets (../shared/data beside the checkout, or
    $NEUROSYM_SHARED_DATA); ``inside`` and ``wfsa`` need none."""


@bench.command(name="compile", epilog=examples("neurosym bench compile", "neurosym bench compile --words 1000 --bpe-size 8000 --json"))
@click.option("--words", "n_words", default=5000, show_default=True, help="Size of the word list.")
@click.option("--bpe-size", default=32000, show_default=True, help="Byte-level BPE vocabulary size.")
@click.option("--reference-timeout", default=900.0, show_default=True, help="Seconds before the interegular reference is abandoned.")
@json_option()
def bench_compile(n_words: int, bpe_size: int, reference_timeout: float, as_json: bool) -> None:
    """Word list as a trie vs an interegular alternation; token index over a BPE vocabulary.
    Needs the shared data sets wikitext-2 and ud-english-ewt (../shared/data beside the
    checkout, or $NEUROSYM_SHARED_DATA)."""
    from neurosym.bench import compile as bench_compile_module  # lazy: --help must not load torch and every subsystem
    results = bench_compile_module.run(n_words=n_words, bpe_size=bpe_size, reference_timeout=reference_timeout, progress=not as_json)
    click.echo(json.dumps(results, indent=2) if as_json else bench_compile_module.format_results(results))


@bench.command(name="guide", epilog=examples("neurosym bench guide", "neurosym bench guide --bpe-size 8000 --repeats 3 --json"))
@click.option("--bpe-size", default=32000, show_default=True, help="Byte-level BPE vocabulary size.")
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(min=1), help="Fresh compiles per grammar (the median is reported).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write the JSON results here.")
@json_option()
def bench_guide(bpe_size: int, repeats: int, output: Path | None, as_json: bool) -> None:
    """Compiled guides through the public API (neurosym.compile_guide, Matcher) against
    XGrammar's own best configuration: vocabulary build, compile and first mask per
    grammar, cached compiles, and the JSON step (fill_mask + accept) along real documents
    interleaved per token with XGrammar's builtin JSON grammar. Needs the shared data sets
    wikitext-2 and ud-english-ewt (the BPE is trained on them) and, for the reference, the
    `bench` extra (pip install 'neurosym[bench]')."""
    from neurosym.bench import guide as bench_guide_module  # lazy: --help must not load torch and every subsystem
    from neurosym.files import atomic_write_bytes  # lazy: as above

    results = bench_guide_module.run(bpe_size=bpe_size, repeats=repeats)
    text = json.dumps(results, indent=1)
    if output is not None:
        atomic_write_bytes(output, text.encode("utf-8") + b"\n", make_parents=False)
    click.echo(text if as_json else bench_guide_module.format_results(results))


@bench.command(name="maskbench", epilog=examples("neurosym bench maskbench", "neurosym bench maskbench --engines neurosym --limit 50",
                                                 "neurosym bench maskbench ../shared/data/maskbench/schemas --output mb.json"))
@click.argument("folder", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--engines", default="neurosym,llguidance,xgrammar", show_default=True, help="Comma-separated: neurosym, llguidance, xgrammar.")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Only the first N schemas (by file name).")
@click.option("--bpe-size", default=32000, show_default=True, type=click.IntRange(min=300), help="Byte-level BPE vocabulary size.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write the JSON results here.")
@json_option()
def bench_maskbench(folder: Path | None, engines: str, limit: int | None, bpe_size: int, output: Path | None, as_json: bool) -> None:
    """JSON Schemas by MaskBench's protocol (JSONSchemaBench, Geng et al. 2025): per schema
    the time to first mask, then every token of each valid and invalid test instance
    checked against the mask before it is accepted, and the end after it; passing
    schemas, compile errors (each with its reason), valid instances refused and invalid
    ones accepted, mask times. FOLDER: MaskBench .json files (default: the shared
    sample, ../shared/data/maskbench/schemas). llguidance and XGrammar come with the
    `bench` extra (pip install 'neurosym[bench]'); the BPE needs the shared wikitext-2 and
    ud-english-ewt."""
    from neurosym.bench import maskbench as bench_maskbench_module  # lazy: --help must not load torch and every subsystem
    from neurosym.files import atomic_write_bytes  # lazy: as above

    names = tuple(e.strip() for e in engines.split(",") if e.strip())
    results = bench_maskbench_module.run(folder, names, limit=limit, bpe_size=bpe_size)
    text = json.dumps(results, indent=1)
    if output is not None:
        atomic_write_bytes(output, text.encode("utf-8") + b"\n", make_parents=False)
    click.echo(text if as_json else bench_maskbench_module.format_results(results))


@bench.command(name="inside", epilog=examples("neurosym bench inside", "neurosym bench inside --lengths 20 --sizes 16,32 --repeats 5 --json", "neurosym bench inside --lengths 20 --sizes 32 --launches --threads 1"))
@click.option("--batch", default=8, show_default=True, type=click.IntRange(min=1), help="Sentences per batch.")
@click.option("--lengths", default="20,40", show_default=True, help="Comma-separated sentence lengths.")
@click.option("--sizes", default="16,32,64", show_default=True, help="Comma-separated N = T.")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(min=1), help="Timed runs per configuration (the median is reported).")
@click.option("--device", default="cpu", show_default=True, help='Torch device of every implementation: "cpu", "cuda" or "cuda:N".')
@click.option("--timeout", default=120.0, show_default=True, help="Seconds before a run is abandoned.")
@click.option("--memory-cap-gb", default=20.0, show_default=True, help="Address-space cap per process (at most 75% of available memory).")
@click.option("--launches", is_flag=True, help="Also count the operators (CPU: the launch proxy) or CUDA kernels of one forward+backward, with torch.profiler.")
@threads_option(None, "Torch threads per process (default: torch's).")
@json_option()
def bench_inside(batch: int, lengths: str, sizes: str, repeats: int, device: str, timeout: float, memory_cap_gb: float, launches: bool, threads: int | None, as_json: bool) -> None:
    """Inside algorithm forward+backward: ours (the torch path; on CUDA with triton also the Triton kernels) vs pytorch-struct's SentCFG (seconds, ratio, peak memory; with --launches, operators per pass)."""
    from neurosym.bench import inside as bench_inside_module  # lazy: --help must not load torch and every subsystem
    def ints(text: str, what: str) -> tuple[int, ...]:
        try:
            return tuple(int(x) for x in text.split(","))
        except ValueError:
            raise NeurosymError(f"--{what}: expected comma-separated integers, got {text!r}") from None

    results = bench_inside_module.run(
        batch=batch, lengths=ints(lengths, "lengths"), sizes=ints(sizes, "sizes"), repeats=repeats, device=device,
        timeout=timeout, memory_cap_gb=memory_cap_gb, threads=threads, progress=not as_json, launches=launches,
    )
    click.echo(json.dumps(results, indent=2) if as_json else bench_inside_module.format_results(results))


@bench.command(
    name="synth",
    epilog=examples(
        "neurosym bench synth --suites alpharegex --time-budget 60",
        "neurosym bench synth --suites regel --regel-limit 50 --time-budget 5 -o regel.json",
        "neurosym bench synth --methods beam,beam-posterior --json > results.json",
        "neurosym bench synth --suites corpus",
        "neurosym bench synth --suites formats --clock cpu -o formats.json",
        "neurosym bench synth --suites regel --regel-split test --methods beam --time-budget 5",
        "neurosym bench synth --suites alpharegex --methods beam,beam-alphaleaves --clock cpu",
    ),
)
@click.option("--methods", default="beam,evolve,reinforce", show_default=True, help="Comma-separated: beam, beam-posterior, beam-enum (no format induction), beam-alphaleaves (AlphaRegex's leaves), evolve, reinforce.")
@click.option("--time-budget", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="Seconds per problem.")
@click.option("--regel-time-budget", default=None, type=click.FloatRange(min=0, min_open=True), help="Seconds per Regel problem (default: --time-budget).")
@click.option("--regel-limit", default=None, type=click.IntRange(min=1), help="Only the first N Regel problems.")
@click.option("--suites", "--suite", "suites", default="alpharegex,regel", show_default=True, help="Comma-separated problem sets: alpharegex, regel, corpus (UD English-EWT token classes), formats (ZIP code, ISO date, hex colour).")
@click.option("--regel-split", default="all", show_default=True, type=click.Choice(["all", "dev", "test"]), help="Regel: the development half (for tuning), the test half (to report), or all.")
@click.option("--corpus-time-budget", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="corpus: seconds for all its classes together.")
@click.option("--corpus-test", default="test", show_default=True, type=click.Choice(["dev", "test"]), help="corpus: the EWT split scored (dev for tuning).")
@click.option("--clock", "clock_kind", default="wall", show_default=True, type=click.Choice(["wall", "cpu"]), help="Measure budgets and times in wall-clock or process CPU seconds (cpu: a busy machine buys the same search).")
@seed_option("Random seed of every search (same seed, same results but for timing).")
@output_option("Also write the results as JSON to this file.")
@json_option("Print the results as JSON instead of the table.")
def bench_synth(
    methods: str, time_budget: float, regel_time_budget: float | None, regel_limit: int | None, suites: str, regel_split: str,
    corpus_time_budget: float, corpus_test: str, clock_kind: str, seed: int, output: Path | None, as_json: bool,
) -> None:
    """Regex synthesis on the AlphaRegex and Regel problems (solved counts, seconds, F1) and
    on a corpus (UD English-EWT token classes: F1 on test tokens and unseen forms vs
    memorised forms). Needs the shared data sets alpharegex, regel and ud-english-ewt
    (../shared/data beside the checkout, or $NEUROSYM_SHARED_DATA)."""
    from neurosym.bench.synth import bench_synth_command  # lazy: --help must not load torch and every subsystem
    from neurosym.bench.synth_report import format_results  # lazy: as above
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


@bench.command(
    name="synth-tune",
    epilog=examples("neurosym bench synth-tune --jobs 2 -o docs/synth_tune.json", "neurosym bench synth-tune --limit 3 --time-budget 1 --binary-time-budget 1"),
)
@click.option("--time-budget", default=5.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="Seconds per Regel development problem.")
@click.option("--binary-time-budget", default=30.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="Seconds per Tomita problem.")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Only the first N problems of each development set (a smoke run).")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(min=1), help="Searches run in parallel, one process each.")
@click.option("--choose-from", default=None, type=click.Path(path_type=Path), help="Redo only the choice (no search) from a report this command wrote.")
@click.option("--clock", "clock_kind", default="cpu", show_default=True, type=click.Choice(["wall", "cpu"]), help="Budgets in process CPU seconds (cpu) or wall-clock seconds.")
@seed_option("Random seed of every search.")
@output_option("Also write the report as JSON to this file.")
@json_option("Print the report as JSON instead of the tables.")
def bench_synth_tune(time_budget: float, binary_time_budget: float, limit: int | None, jobs: int, choose_from: Path | None, clock_kind: str, seed: int,
                     output: Path | None, as_json: bool) -> None:
    """Re-derive the ``beam`` method's search choices (hole cost, leaf costs, the vowel
    class, the small-alphabet leaves, the finishing step of text regexes) on development
    data only: Regel's development half and the Tomita languages, never Regel's test
    half or AlphaRegex's problems. Prints every candidate's development score and the
    choice. Needs the shared data set regel (../shared/data beside the checkout, or
    $NEUROSYM_SHARED_DATA)."""
    from neurosym.bench.synth_tune import choose, format_report, tune  # lazy: --help must not load torch and every subsystem
    from neurosym.data import shared_data  # lazy: as above
    from neurosym.files import atomic_write_bytes, check_output  # lazy: as above

    if output is not None:
        output = check_output(output, [], "results")
    if choose_from is not None:
        try:
            report = choose(json.loads(choose_from.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, StopIteration) as err:
            raise NeurosymError(f"--choose-from {choose_from}: not a report of neurosym bench synth-tune ({type(err).__name__}: {err})") from None
    else:
        try:
            shared_data("regel", "deepregex")
        except NeurosymError as err:
            raise NeurosymError(f"neurosym bench synth-tune needs the shared data set regel (../shared/data beside the checkout, or $NEUROSYM_SHARED_DATA): {err}") from None
        log = None if as_json else (lambda line: click.echo(line, err=True))
        report = tune(time_budget=time_budget, binary_time_budget=binary_time_budget, seed=seed, jobs=jobs, limit=limit, clock_kind=clock_kind, log=log)
    text = json.dumps(report, indent=1, default=str)
    if output is not None:
        atomic_write_bytes(output, text.encode("utf-8") + b"\n", make_parents=False)
    click.echo(text if as_json else format_report(report))


@bench.command(name="wfsa", epilog=examples("neurosym bench wfsa", "neurosym bench wfsa --threads 2 --json"))
@threads_option(None, "Torch threads (default: torch's).")
@json_option()
def bench_wfsa(threads: int | None, as_json: bool) -> None:
    """RegexLayer over 100 regexes on a 64 x 128 batch: tokens/s forward and forward+backward,
    and the ratio to a dense matmul recurrence with as many weights."""
    from neurosym.bench import wfsa as bench_wfsa_module  # lazy: --help must not load torch and every subsystem
    results = bench_wfsa_module.run(progress=not as_json, threads=threads)
    click.echo(json.dumps(results, indent=2) if as_json else bench_wfsa_module.format_results(results))


@bench.command(
    name="decode",
    epilog=examples("neurosym bench decode", "neurosym bench decode --words 1000 --skip-generation --json", "neurosym bench decode --skip-index --batch 8",
                    "neurosym bench decode --skip-index --skip-generation"),
)
@click.option("--words", "n_words", default=5000, show_default=True, type=click.IntRange(min=1), help="Size of the word-list pattern.")
@click.option("--bpe-size", default=32000, show_default=True, type=click.IntRange(min=300), help="Byte-level BPE vocabulary size.")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(min=1), help="Index builds and generation runs per measurement (the median is reported).")
@click.option("--batch", default=32, show_default=True, type=click.IntRange(min=1), help="Rows decoded together in the generation part.")
@threads_option(1, "Torch threads in the generation and processor parts, and of the torch-based engines of --cfg.")
@click.option("--device", default="cpu", show_default=True, help='Torch device of the generation part: "cpu", "cuda" or "cuda:N".')
@click.option("--skip-index", is_flag=True, help="Skip the index comparison with outlines-core and XGrammar.")
@click.option("--skip-generation", is_flag=True, help="Skip the generation timings (processor chain, KV cache).")
@click.option("--skip-processors", is_flag=True, help="Skip GrammarMask's per-token cost, NumPy against the tensor backend.")
@click.option("--cfg", "cfg", default=None, is_flag=False, flag_value="grammars/json.pcfg", metavar="[FILE.pcfg]",
              help="Instead: a .pcfg with regex terminals (default grammars/json.pcfg) against XGrammar, llguidance, transformers-cfg and SynCode "
                   "over the BPE: compile, mask and advance times, masks compared at every step and judged (docs/decode.md).")
@click.option("--walks", default=60, show_default=True, type=click.IntRange(min=0), help="With --cfg: random walks whose tokens XGrammar chooses.")
@click.option("--slow-seconds", default=150.0, show_default=True, type=click.FloatRange(min=1), help="With --cfg: seconds per part for the slow engines (neurosym, transformers-cfg, SynCode).")
@click.option("--syncode-python", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --cfg: the Python of SynCode's own venv (SynCode pins transformers 4.53.2; default $NEUROSYM_SYNCODE_PYTHON, "
                   "else .venv-syncode in the checkout; docs/decode.md).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="With --cfg: also write the JSON results here.")
@json_option()
def bench_decode(n_words: int, bpe_size: int, repeats: int, batch: int, threads: int, device: str, skip_index: bool, skip_generation: bool,
                 skip_processors: bool, cfg: str | None, walks: int, slow_seconds: float, syncode_python: Path | None, output: Path | None,
                 as_json: bool) -> None:
    """Constrained decoding: the token index side by side with outlines-core and XGrammar
    (build seconds, index memory, µs per token to write the mask, to advance and both, at
    p50 and p99 and as theirs/ours, over real strings; mask agreement), per
    generated token the processor chain and the KV cache against the model's forward,
    and GrammarMask's call and advance at batches 1 and 32 through NumPy against the
    tensor backend.
    The index and processor parts need the shared data sets wikitext-2 and
    ud-english-ewt, the index part also the `bench` extra (pip install 'neurosym[bench]'); a missing engine is reported, not fatal."""
    from neurosym.bench import decode as bench_decode_module  # lazy: --help must not load torch and every subsystem
    from neurosym.bench.inside import check_device  # lazy: as above
    from neurosym.data import shared_data  # lazy: as above

    check_device(device)
    if cfg is not None:  # the grammar comparison alone (issue 29)
        from neurosym.bench import decode_cfg  # lazy: as above
        from neurosym.files import atomic_write_bytes, shipped_file  # lazy: as above

        path = Path(cfg)  # the user's own input first: a bad --cfg is named before any shared-data check
        if not path.is_file():
            try:
                path = shipped_file(cfg)
            except NeurosymError:
                raise NeurosymError(f"--cfg {cfg}: no such file (a .pcfg file, or a shipped one such as grammars/json.pcfg)") from None
        if path.suffix != ".pcfg":
            raise NeurosymError(f"--cfg {cfg}: expected a .pcfg grammar")
        shared_data("wikitext-2", "valid.txt"), shared_data("ud-english-ewt", "en_ewt-ud-train.conllu")
        r = decode_cfg.run(path, bpe_size=bpe_size, walks=walks, slow_engine_seconds=slow_seconds, progress=not as_json,
                           syncode=syncode_python, threads=threads)
        text = json.dumps(r, indent=1)
        if output is not None:
            atomic_write_bytes(output, text.encode("utf-8") + b"\n", make_parents=False)
        click.echo(text if as_json else decode_cfg.format_results(r))
        return
    results: dict = {}
    if not (skip_index and skip_processors):  # both train the BPE on these: a clear error before any work
        shared_data("wikitext-2", "valid.txt"), shared_data("ud-english-ewt", "en_ewt-ud-train.conllu")
    if not skip_index:
        results["index"] = bench_decode_module.run(n_words=n_words, bpe_size=bpe_size, repeats=repeats, progress=not as_json)
    if not skip_generation:
        results["generation"] = bench_decode_module.bench_generation(batch=batch, repeats=repeats, threads=threads, device=device)
    if not skip_processors:  # GrammarMask per token over the same BPE, NumPy vs tensor backend (issue 29)
        from neurosym.bench import processors as bench_processors  # lazy: as above

        results["processors"] = bench_processors.run(n_words=n_words, bpe_size=bpe_size, repeats=repeats, threads=threads, progress=not as_json)
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        parts = [bench_decode_module.format_results(results["index"])] if "index" in results else []
        parts += [bench_decode_module.format_generation(results["generation"])] if "generation" in results else []
        parts += [bench_processors.format_results(results["processors"])] if "processors" in results else []
        click.echo("\n\n".join(parts))


@bench.command(name="dyck", epilog=examples("neurosym bench dyck", "neurosym bench dyck --threads 1 --json > docs/encoders_dyck2.json"))
@click.option("--seeds", default=2, show_default=True, type=click.IntRange(min=1), help="Initialisation and batch-order seeds per encoder (0, 1, ...).")
@threads_option(1)
@json_option()
def bench_dyck(seeds: int, threads: int, as_json: bool) -> None:
    """A stack RNN against an LSTM of the same hidden size on Dyck-2 recognition: trained
    on lengths up to 40, tested on lengths 42-80 that nest deeper (docs/encoders.md);
    accuracy per seed, parameters, CPU seconds."""
    from neurosym.bench import dyck as bench_dyck_module  # lazy: --help must not load torch and every subsystem

    results = bench_dyck_module.run(seeds=tuple(range(seeds)), threads=threads)
    click.echo(json.dumps(results, indent=2) if as_json else bench_dyck_module.format_results(results))


@bench.command(name="train", epilog=examples("neurosym bench train", "neurosym bench train --repeats 40 --threads 2 --json",
                                             "neurosym bench train --device cuda --gpu-shape --launches"))
@click.option("--repeats", default=20, show_default=True, type=click.IntRange(min=1), help="Timed steps per variant (interleaved; best and median reported).")
@threads_option(1)
@click.option("--batch", default=32, show_default=True, type=click.IntRange(min=1), help="Windows per batch.")
@click.option("--device", default="cpu", show_default=True, help='Torch device: "cpu", "cuda" or "cuda:N" (CUDA: wall time between synchronisations).')
@click.option("--gpu-shape", is_flag=True, help="The semantic-KL recipe's --gpu shape (d_model 512, 6 layers, windows of 256) instead of its CPU shape.")
@click.option("--launches", is_flag=True, help="Also count one step's kernel launches with torch.profiler (on the CPU: leaf operators, a proxy; docs/gpu.md).")
@click.option("--split", default="valid", show_default=True, type=click.Choice(["valid", "train"]),
              help="The WikiText-2 file of the vocabulary and the batch: valid (shipped) or train (the standard train.txt of the shared data: the recipes' vocabulary).")
@click.option("--variants", default=None, help="Comma-separated variants to time (default: all; the baseline is always timed): "
              "baseline, fusion, semantic-kl, semantic-kl-logits, idea-gating, idea-gating-triton, idea-gating-compile.")
@click.option("--warmup", default=3, show_default=True, type=click.IntRange(min=0), help="Untimed steps per variant first.")
@json_option()
def bench_train(repeats: int, threads: int, batch: int, device: str, gpu_shape: bool, launches: bool, split: str, variants: str | None,
                warmup: int, as_json: bool) -> None:
    """Time per training step of the baseline LM, the semantic-fusion model, semantic KL and
    idea gating at the same size on one batch of WikiText-2 windows, in process CPU time
    (on CUDA in synchronised wall time), as ratios to the baseline (docs/semantic_kl.md,
    docs/gpu.md). Semantic KL by both its paths (the hidden-state fast path and the logits
    path); on CUDA, idea gating also with its objective in the Triton kernel (with triton)
    and through torch.compile, each checked against the torch blocks on the device."""
    from neurosym.bench import train as bench_train_module  # lazy: --help must not load torch and every subsystem

    chosen = {} if variants is None else {"variants": tuple(v.strip() for v in variants.split(",") if v.strip())}
    results = bench_train_module.run(repeats=repeats, warmup=warmup, threads=threads, batch_size=batch, device=device, gpu_shape=gpu_shape,
                                     launches=launches, split=split, **chosen)
    click.echo(json.dumps(results, indent=2) if as_json else bench_train_module.format_results(results))


__all__ = ["bench", "bench_compile", "bench_decode", "bench_dyck", "bench_inside", "bench_synth", "bench_train", "bench_wfsa"]
