"""Corpus mode (issue 19): readers, the counter-example loop, written banks, format induction."""

import json
import os
import re
import time
from collections import Counter

import pytest
from click.testing import CliRunner

import neurosym
from neurosym.bench import synth as bench
from neurosym.bench import synth_corpus as corpus_bench
from neurosym.bench import synth_problems as problems
from neurosym.bench import synth_report as report
from neurosym.cli.main import main
from neurosym.compile.regex import pattern_dfa
from neurosym.data import shared_data_dir
from neurosym.errors import NeurosymError
from neurosym.synth import clock, synthesize
from neurosym.synth import corpus as sc
from neurosym.synth import generalise as gen
from neurosym.synth.bestfirst import BestFirst
from neurosym.bench.regel_split import DEV, TEST, make_split

SHARED = shared_data_dir()
EWT = SHARED / "ud-english-ewt" if SHARED is not None else None
HAVE_EWT = EWT is not None and (EWT / "en_ewt-ud-dev.conllu").is_file()
HAVE_REGEL = SHARED is not None and (SHARED / "regel" / "so").is_dir()
needs_ewt = pytest.mark.skipif(not HAVE_EWT, reason="needs the shared data set ud-english-ewt (../shared/data)")


# ---------------------------------------------------------------------- readers


@needs_ewt
def test_conllu_reader_agrees_with_the_treebank_statistics():
    """Words and UPOS counts of train + dev + test equal stats.xml's (254,818 words)."""
    pairs = []
    for split in ("train", "dev", "test"):
        pairs += sc.read_conllu(EWT / f"en_ewt-ud-{split}.conllu", "UPOS")
    stats = (EWT / "stats.xml").read_text(encoding="utf-8")
    words = int(re.search(r"<words>(\d+)</words>", stats).group(1))
    tags = {m.group(1): int(m.group(2)) for m in re.finditer(r'<tag name="([A-Z]+)">(\d+)</tag>', stats)}
    assert len(pairs) == words == sum(tags.values())
    assert Counter(label for _, label in pairs) == tags


@needs_ewt
def test_conllu_reader_agrees_with_a_raw_line_count():
    path = EWT / "en_ewt-ud-dev.conllu"
    raw = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
    words = [cols for cols in raw if len(cols) == 10 and cols[0].isdigit()]
    pairs = sc.read_conllu(path, "xpos")
    assert pairs == [(cols[1], cols[4]) for cols in words]


def test_tsv_reader_and_its_errors(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("12345\tZIP\n\tEMPTY\n\n#fff\tCOLOR\n")
    assert sc.read_corpus(path) == [("12345", "ZIP"), ("", "EMPTY"), ("#fff", "COLOR")]
    path.write_text("12345\tZIP\nno tab here\n")
    with pytest.raises(NeurosymError, match=r"x\.tsv:2:12: expected 'string<TAB>label'"):
        sc.read_corpus(path)
    path.write_text("a\t \n")
    with pytest.raises(NeurosymError, match=r"x\.tsv:1:3: empty label"):
        sc.read_corpus(path)
    with pytest.raises(NeurosymError, match="--label names a CoNLL-U column"):
        sc.read_corpus(path, label="UPOS")
    with pytest.raises(NeurosymError, match="no such file"):
        sc.read_corpus(tmp_path / "absent.tsv")
    (tmp_path / "bin.tsv").write_bytes(b"\xff\xfe\tX\n")
    with pytest.raises(NeurosymError, match="not UTF-8"):
        sc.read_corpus(tmp_path / "bin.tsv")


def test_conllu_reader_errors(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text("# sent_id = 1\n1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n\n2\tbad line\n")
    with pytest.raises(NeurosymError, match=r"x\.conllu:5:11: a CoNLL-U word line has 10 tab-separated columns, this one has 2"):
        sc.read_corpus(path)
    with pytest.raises(NeurosymError, match="unknown CoNLL-U column 'TAG'"):
        sc.read_corpus(path, label="TAG")


def test_sanitised_names():
    assert sc.sanitise_names(["NUM", "b-loc", "1x", "B_LOC"]) == {"NUM": "NUM", "b-loc": "B_LOC", "1x": "_1X", "B_LOC": "B_LOC_2"}


# ---------------------------------------------------------------------- the loop and the bank

FORMATS = [
    ("ZIP", ["12345", "90210", "02139", "60601", "10001", "12345-6789", "94105-1234", "30301-0042"]),
    ("DATE", ["2024-01-15", "1999-12-31", "2003-07-04", "2020-02-29", "1987-10-09", "2011-11-11"]),
    ("COLOR", ["#a3f", "#FFF", "#09c", "#1a2B3c", "#ffffff", "#00ff7F", "#c0ffee", "#abc"]),
    ("WORD", ["hello", "world", "regex", "bank", "token", "class", "the", "synthesis"]),
]


def _pairs():
    return [(s, lab) for lab, xs in FORMATS for s in xs] + [("12345", "ZIP")] * 3 + [("the", "WORD")] * 5


def test_synthesize_corpus_writes_a_bank_that_compiles_and_agrees_with_re(tmp_path):
    pairs = _pairs()
    results = sc.synthesize_corpus(pairs, time_budget=10)
    assert [r.label for r in results] == ["WORD", "ZIP", "COLOR", "DATE"]  # most tokens first
    by = {r.label: r for r in results}
    for r in results:
        assert r.accuracy == 1.0 and r.f1 == 1.0, r
        assert 1 <= len(r.rounds) <= sc.ROUNDS
    assert re.fullmatch(by["ZIP"].pattern, "55555-0000") and not re.fullmatch(by["ZIP"].pattern, "5555")
    bank = tmp_path / "formats.regex"
    forms = {f for f, _ in pairs} | {"", "1234", "12345-", "#ab", "2024-1-1", "hello world"}
    sc.write_bank(bank, results, forms=forms)
    text = bank.read_text()
    assert text.splitlines() == [f"{r.name}: /{r.pattern}/" for r in results]
    loaded = neurosym.load(bank)
    for r in results:
        dfa = loaded.patterns[r.name].char_dfa
        rx = re.compile(r.pattern)
        for f in forms:
            assert dfa.accepts(f) == bool(rx.fullmatch(f)), (r.name, f)


def test_the_counter_example_loop_terminates_and_keeps_the_best_on_the_full_set():
    """A sample of 4 positives and 4 negatives misses most shapes; each round adds the
    forms the candidate gets wrong, and the returned regex is the best on the full set."""
    numbers = [str(n) for n in range(0, 400, 7)] + [f"{n},000" for n in range(1, 60, 3)] + [f"{n}.5" for n in range(30)]
    words = ["one", "two", "x1", "a-b", "#1", "1st", "2nd", "3rd", "4th", "12th", "v1.2", "1990s", "1-2"] + [f"w{k}x" for k in range(40)]
    pairs = [(s, "NUM") for s in numbers] + [(s, "OTHER") for s in words]
    table = sc.Table(pairs)
    pattern, rounds = sc.learn_class(table, "NUM", time_budget=30, sample_positives=4, sample_negatives=4, counter_examples=5, rounds=6)
    assert 1 <= len(rounds) <= 6
    assert len(rounds) > 1  # the first sample was not enough
    fulls = [r.full_errors for r in rounds]
    rx = re.compile(pattern)
    pos, neg = table.weights("NUM")
    final = sum(w for f, w in pos.items() if not rx.fullmatch(f)) + sum(w for f, w in neg.items() if rx.fullmatch(f))
    assert final == min(fulls) <= fulls[0]  # never worse on the full set than the first (sample-only) round
    assert all(r.sample_positives >= 4 for r in rounds)
    assert [r.sample_positives + r.sample_negatives for r in rounds] == sorted(r.sample_positives + r.sample_negatives for r in rounds)
    assert final == 0


def test_stratified_sample_covers_every_shape_first():
    weights = {"1": 50.0, "2": 40.0, "3": 30.0, "1,000": 1.0, "3.5": 1.0, "one": 2.0}
    sample = sc.stratified_sample(weights, 4)
    assert {gen.shape(s) for s in sample} == {"D", "D,D", "D.D", "L"}


def test_corpus_errors():
    with pytest.raises(NeurosymError, match="no example"):
        sc.synthesize_corpus([], classes=None)
    with pytest.raises(NeurosymError, match=r"class\(es\) 'FOO' have no example"):
        sc.synthesize_corpus([("1", "NUM")], classes=["FOO"])
    with pytest.raises(NeurosymError, match="no form it labels more often"):
        sc.synthesize_corpus([("a", "A"), ("a", "B"), ("a", "B")], classes=["A"])
    with pytest.raises(NeurosymError, match="example 1: expected a"):
        sc.synthesize_corpus([("a", "A"), ("b",)])


# ---------------------------------------------------------------------- everyday formats


HELD_OUT = problems.EVERYDAY_FORMATS  # the examples live beside the other problem sets; `bench synth --suites formats` runs them


@pytest.mark.parametrize("name", list(HELD_OUT))
def test_everyday_formats_generalise(name):
    pos, neg, fresh, near = HELD_OUT[name]
    t0 = time.monotonic()
    res = synthesize(pos, neg, time_budget=60)
    assert res.solved and time.monotonic() - t0 < 60
    rx = re.compile(res.pattern)
    assert all(rx.fullmatch(s) for s in fresh), res.pattern
    assert not any(rx.fullmatch(s) for s in near), res.pattern
    assert res.info["phase"] == "format"


def test_the_formats_suite_reports_what_the_test_checks():
    """`neurosym bench synth --suites formats` (docs/synth.md's table) counts what the
    test above asserts, here on one format and on a made-up one it cannot fit."""
    one = {"ISO date": HELD_OUT["ISO date"], "two words": (["ab", "cd"], ["a", "abc"], ["ef", "x"], ["e", "efg"])}
    got = bench.run_formats(time_budget=5, formats=one)
    date = got["ISO date"]
    assert (date["positives"], date["negatives"], date["fresh"], date["near_misses"]) == (6, 5, 3, 7)
    assert date["fresh_accepted"] == 3 and date["near_misses_rejected"] == 7 and date["phase"] == "format" and date["solved"]
    assert 0 < date["cpu_seconds"] and 0 < date["wall_seconds"] < 5
    rx = re.compile(got["two words"]["pattern"])
    assert got["two words"]["fresh_accepted"] == sum(bool(rx.fullmatch(s)) for s in ["ef", "x"])
    assert got["two words"]["near_misses_rejected"] == sum(not rx.fullmatch(s) for s in ["e", "efg"])
    assert "ISO date" in report.format_formats(got) and "3/3  7/7" in report.format_formats(got)


def test_counts_are_learnt_from_the_data():
    assert gen.induce(["1999", "2024", "1066"]).pattern == "[0-9]{4}"
    c = gen.induce(["7", "42", "1999", "123456", "31", "8"])
    assert c.pattern == "[0-9]+"
    assert gen.induce(["v1.2.3", "v10.0.1", "v2.14.17"]).pattern == "v[0-9]+\\.[0-9]+\\.[0-9]+"


def test_format_induction_stays_out_of_small_alphabets_and_weak_evidence():
    """AlphaRegex-style problems ({0, 1}) never use it, and Regel-like broad rules whose
    template does not compress the examples go to the enumerator."""
    res = synthesize(["0", "10", "110", "1010"], ["", "1", "01", "011"], time_budget=5)
    assert res.pattern == "[01]*0" and res.info["phase"] != "format"
    res = synthesize(["Alice", "Bob", "Zoe 2"], ["alice", "9Bob", "", " bob"], time_budget=5)
    assert res.info["phase"] != "format"


# ---------------------------------------------------------------------- bounded best-first


HEX_POS = ["#a3f", "#FFF", "#09c", "#1a2B3c", "#ffffff", "#00ff7F", "#c0ffee", "#abc"]
HEX_NEG = ["#ab", "#abcd", "a3f", "#ggg", "#12345", "#1234567", "##abc", "#ab-cd"]


def _expand_until(bf: BestFirst, expansions: int) -> None:
    """Run ``bf``'s search for exactly ``expansions`` expansions (not a time budget)."""
    orig = bf._expand

    class Enough(Exception):
        pass

    def expand(p, ctx):
        if bf.expanded >= expansions:
            raise Enough
        return orig(p, ctx)

    bf._expand = expand
    try:
        for _ in bf.solutions(600.0):
            pass
    except Enough:
        pass


def test_best_first_tables_never_exceed_their_bounds():
    """The frontier, the seen table, the class table and the memos stay within the sizes
    fixed before the search (the test counts entries, not the process's memory)."""
    bf = BestFirst(HEX_POS, HEX_NEG, max_frontier=500, max_memo=300, max_classes=400)
    assert bf.bound.frontier == 500 and bf.bound.seen == 1000 and bf.bound.classes == 400
    evals, made = [], []
    orig = bf._eval

    def spy(p):
        r = orig(p)
        evals.append(len(bf._eval_memo))
        made.append(len(bf._made))
        return r

    bf._eval = spy
    _expand_until(bf, 1200)
    assert bf.expanded == 1200
    assert bf.pruned > 0 and bf.class_drops > 0  # every bound was reached ...
    assert 0 < bf.peak_frontier <= 500 and len(bf._heap) <= 500  # ... and none exceeded
    assert bf.peak_seen <= 1000
    assert len(bf.vecs) <= 400 + len(bf.leaf_ids)
    assert max(evals) <= 300 and max(made) <= 300


def test_eviction_keeps_the_cheapest_states():
    bf = BestFirst(HEX_POS, HEX_NEG, max_frontier=10)
    heap = [(c, h, i, ("H", i)) for i, (c, h) in enumerate([(9, 1), (3, 2), (7, 1), (3, 1), (5, 5), (1, 9), (8, 0), (2, 2), (6, 1), (4, 4), (10, 1)])]
    dropped_before = bf.pruned
    keep = bf._evict(heap)
    assert keep == sorted(heap)[:5]  # the cheaper half, ties broken by fewer holes
    assert bf.pruned - dropped_before == len(heap) - 5
    assert max(k[0] for k in keep) <= min(d[0] for d in heap if d not in keep)


def test_memory_bound_is_derived_from_the_budget_before_the_search():
    from neurosym.synth.bestfirst import MAX_SEARCH_MB, MemoryBound

    for n in (20, 151, 2000):
        for mb in (64, MAX_SEARCH_MB, 2048):
            b = MemoryBound.from_budget(mb, n)
            assert b.estimated_mb(n) <= mb * 1.001
            assert b.seen == 2 * b.frontier
        assert MemoryBound.from_budget(1024, n).frontier > MemoryBound.from_budget(256, n).frontier
    # longer vectors (more infixes) leave room for fewer classes and memo entries
    assert MemoryBound.from_budget(512, 2000).classes < MemoryBound.from_budget(512, 20).classes
    # redundancy data costs classes
    assert MemoryBound.from_budget(512, 151, redundancy=True).classes < MemoryBound.from_budget(512, 151).classes
    bf = BestFirst(HEX_POS, HEX_NEG, max_search_mb=8)
    assert bf.bound == MemoryBound.from_budget(8, bf.space.n)


def test_a_bounded_search_still_finds_easy_solutions():
    bf = BestFirst(["0", "00", "000"], ["1", "01"], max_frontier=50, max_classes=64)
    assert bf.search(5.0) is not None
    bf = BestFirst(HEX_POS[:3], ["#ab", "a3f"], max_search_mb=4)
    assert bf.search(20.0) is not None


# ---------------------------------------------------------------------- the Regel split


def test_regel_split_is_fixed_and_disjoint():
    assert len(DEV) == len(TEST) == 161 and not set(DEV) & set(TEST)
    assert sum(n.startswith("so/") for n in DEV) == 61


@pytest.mark.skipif(not HAVE_REGEL, reason="needs the shared data set regel (../shared/data)")
def test_regel_split_is_reproduced_from_the_data():
    folder = SHARED / "regel"
    dev, test = make_split({s: os.listdir(folder / s) for s in ("so", "deepregex")})
    assert tuple(dev) == DEV and tuple(test) == TEST


# ---------------------------------------------------------------------- the command line


def test_cli_synth_corpus(tmp_path):
    corpus = tmp_path / "formats.tsv"
    corpus.write_text("".join(f"{s}\t{lab}\n" for s, lab in _pairs()))
    bank = tmp_path / "out.regex"
    r = CliRunner().invoke(main, ["synth", "--corpus", str(corpus), "-o", str(bank), "--classes", "ZIP,COLOR", "--time", "10", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output.strip().splitlines()[-1])
    assert [c["name"] for c in res["classes"]] == ["ZIP", "COLOR"] and res["examples"] == len(_pairs())
    assert all(c["accuracy"] == 1.0 for c in res["classes"])
    assert neurosym.load(bank).patterns["ZIP"].accepts("12345-6789")
    r = CliRunner().invoke(main, ["synth", "--corpus", str(corpus), "-o", str(bank)])  # an existing bank: --append or --force
    assert r.exit_code == 2 and "--append adds the classes to it, --force replaces it" in r.output, r.output
    r = CliRunner().invoke(main, ["synth", "--corpus", str(corpus), "-o", str(bank), "--force"])  # replaces the bank whole
    assert r.exit_code == 0 and "wrote 4 pattern(s)" in r.output, r.output
    assert [line.split(":")[0] for line in bank.read_text().splitlines()] == ["WORD", "ZIP", "COLOR", "DATE"]
    for args, msg in [
        (["--corpus", str(corpus), "--pos", str(corpus)], "--corpus replaces --pos/--neg"),
        (["--corpus", str(corpus), "--name", "X"], "--name applies to --pos/--neg"),
        (["--corpus", str(corpus), "--classes", "NOPE"], "'NOPE' have no example"),
        (["--corpus", str(tmp_path / "nope.tsv")], "no such file"),
        (["--corpus", str(corpus), "-o", str(corpus)], "refusing to write the bank over the input"),
        (["--pos", str(corpus), "--classes", "ZIP"], "--classes applies to --corpus only"),
        ([], "give the positive examples (--pos FILE) or a labelled corpus (--corpus FILE)"),
    ]:
        r = CliRunner().invoke(main, ["synth", *args])
        assert r.exit_code == 2 and msg in r.output, (args, r.output)


# ---------------------------------------------------------------------- UD English-EWT (slow)


@pytest.mark.slow
@needs_ewt
def test_ud_ewt_regexes_beat_memorised_forms_on_unseen_forms():
    res = corpus_bench.run_corpus(classes=("NUM", "PUNCT", "SYM"), time_budget=60, test_split="test")
    for label in ("NUM", "PUNCT", "SYM"):
        unseen = res["classes"][label]["unseen"]
        assert unseen["regex"]["f1"] > unseen["memorised"]["f1"], (label, unseen)
        assert {"memorised", "shape"} <= set(unseen) and 0.0 <= unseen["shape"]["f1"] <= 1.0
        pattern = res["classes"][label]["pattern"]
        dfa, rx = pattern_dfa(pattern), re.compile(pattern)
        for form in {f for f, _ in sc.read_conllu(EWT / "en_ewt-ud-test.conllu")}:
            assert dfa.accepts(form) == bool(rx.fullmatch(form)), (label, form)


# ---------------------------------------------------------------------- benchmark pieces


def test_memorised_baseline():
    predict, majority = corpus_bench.memorised([("a", "X"), ("a", "Y"), ("a", "Y"), ("b", "X"), ("c", "X")])
    assert majority == "X" and predict("a") == "Y" and predict("b") == "X" and predict("zzz") == "X"


def test_word_shape_baseline():
    assert corpus_bench.word_shape("Varsha") == "Xxxxx" and corpus_bench.word_shape("12.50") == "dd.dd"
    assert corpus_bench.word_shape("2024-01-15") == "dddd-dd-dd" and corpus_bench.word_shape("123456") == "dddd"
    assert corpus_bench.word_shape("É!") == "X!" and corpus_bench.word_shape("") == ""
    train = [("12", "NUM"), ("345", "NUM"), ("1st", "ADJ"), ("Bob", "PROPN"), ("bob", "VERB"), ("the", "DET"), ("the", "DET"), ("a", "DET"), ("x", "NOUN")]
    predict = corpus_bench.shaped(train)
    assert predict("bob") == "VERB"  # a training form keeps its own majority label
    assert predict("77") == "NUM" and predict("678") == "NUM"  # unseen forms: the label of their shape
    assert predict("Zoe") == "PROPN" and predict("2nd") == "ADJ"
    assert predict("@@") == "DET"  # an unseen shape: the majority class


def test_binary_strings_and_the_alpharegex_reference_reader(tmp_path):
    xs = problems.binary_strings(3)
    assert len(xs) == 15 and len(set(xs)) == 15 and "" in xs and "101" in xs
    ref = tmp_path / "reference.tsv"
    ref.write_text("# header\nno1_a\t0(0+1)*\t0(0|1)*\n")
    assert problems.load_alpharegex_reference(ref) == {"no1_a": "0(0|1)*"}
    ref.write_text("no1_a\t0(0+1)*\n")
    with pytest.raises(NeurosymError, match=r"reference\.tsv:1: expected 3 tab-separated columns"):
        problems.load_alpharegex_reference(ref)


def test_alpharegex_rows_carry_equivalence_and_f1(tmp_path, monkeypatch):
    ref = tmp_path / "reference.tsv"
    ref.write_text("no1_start_with_0\t0(0+1)*\t0(0|1)*\n")
    read = problems.load_alpharegex_reference
    monkeypatch.setattr(bench, "load_alpharegex_reference", lambda: read(ref))
    problem = {"name": "no1_start_with_0", "positives": ["0", "00", "01", "010"], "negatives": ["", "1", "10", "11"], "has_x": True}
    out = bench.run_alpharegex(("beam", "beam-alphaleaves"), time_budget=5, problems=[problem])
    for method in ("beam", "beam-alphaleaves"):
        row = out[method]["rows"][0]
        assert row["solved"] and row["equivalent"] and row["f1"] == 1.0, row
        assert out[method]["equivalent"] == 1 and out[method]["mean_f1"] == 1.0


def test_bench_synth_option_checks():
    with pytest.raises(NeurosymError, match="--regel-split: unknown split 'train'"):
        bench.bench_synth_command("beam", suites="regel", regel_split="train")
    with pytest.raises(NeurosymError, match="--corpus-test: unknown split 'train'"):
        bench.bench_synth_command("beam", suites="corpus", corpus_test="train")
    with pytest.raises(NeurosymError, match="--clock: unknown clock 'sundial'"):
        bench.bench_synth_command("beam", suites="alpharegex", clock_kind="sundial")


def test_cpu_clock_measures_budgets_in_cpu_seconds():
    assert clock.clock_name() == "wall"
    with clock.cpu_clock():
        assert clock.clock_name() == "cpu"
        t0, c0 = time.monotonic(), clock.now()
        time.sleep(0.2)  # sleeping costs wall time, not CPU time
        assert time.monotonic() - t0 >= 0.2 and clock.now() - c0 < 0.1
        res = synthesize(["0", "10", "110"], ["", "1", "01"], time_budget=5)
        assert res.solved and res.seconds < 5
    assert clock.clock_name() == "wall"


@pytest.mark.skipif(SHARED is None or not (SHARED / "alpharegex").is_dir(), reason="needs the shared data set alpharegex (../shared/data)")
def test_bench_synth_reports_its_clock():
    res = bench.run(("beam",), time_budget=5, suites=(), clock_kind="cpu")
    assert res["clock"] == "cpu" and "CPU seconds" in report.format_results(res)
    assert "wall-clock" in report.format_results(bench.run(("beam",), time_budget=5, suites=()))


def test_bench_synth_corpus_needs_the_treebank(monkeypatch, tmp_path):
    import neurosym.data

    monkeypatch.setattr(neurosym.data, "CHECKOUT_SHARED_DATA", tmp_path / "absent")
    monkeypatch.setenv("NEUROSYM_SHARED_DATA", str(tmp_path / "absent-too"))
    r = CliRunner().invoke(main, ["bench", "synth", "--suites", "corpus"])
    assert r.exit_code == 2 and "--suites corpus needs the shared data set ud-english-ewt" in r.output, r.output


@pytest.mark.skipif(not HAVE_REGEL, reason="needs the shared data set regel (../shared/data)")
def test_run_regel_keeps_one_half(monkeypatch):
    seen = []
    monkeypatch.setattr(bench, "synthesize_problem", lambda p, *a: seen.append(p["name"]) or synthesize(p["positives"], p["negatives"], time_budget=1))
    out = bench.run_regel(("beam",), time_budget=1, limit=3, split="test")
    assert out["split"] == "test" and len(seen) == 3 and all(n in TEST for n in seen)


# ---------------------------------------------------------------------- format induction pieces


def test_tokens_at_each_granularity():
    assert gen.tokens("Ab12-x", "fine") == [("U", "A"), ("L", "b"), ("D", "12"), ("-", "-"), ("L", "x")]
    assert gen.tokens("Ab12-x", "word") == [("A", "Ab"), ("D", "12"), ("P", "-"), ("A", "x")]
    assert gen.tokens("Ab12-x", "alnum") == [("W", "Ab12"), ("P", "-"), ("W", "x")]
    assert gen.shape("2024-01-05") == "D-D-D"


@pytest.mark.parametrize(
    "positives, expected",
    [
        (["1.2.3", "10.0.1", "2.14.17", "0.9.12"], "[0-9]+(\\.[0-9]+){2}"),  # a loop with a learnt count
        # a loop of any length (one separator is not folded: K p K stays a plain group)
        (["1,234,567", "12,000,001", "3,500,000,999", "7,654,321,000", "45,100,200", "9,876,543,210,123"], "[0-9]+(,[0-9]{3}){2,}"),
    ],
)
def test_loops_and_counts(positives, expected):
    c = gen.induce(positives)
    rx = re.compile(c.pattern)
    assert all(rx.fullmatch(s) for s in positives)
    assert pattern_dfa(c.pattern).accepts(positives[0])
    from neurosym.bench.synth_score import equivalent

    assert equivalent(pattern_dfa(c.pattern), pattern_dfa(expected)), c.pattern


def test_induce_weighted_keeps_literals_when_the_template_overreaches():
    pos = {"one": 50.0, "two": 40.0, "12": 30.0, "345": 20.0, "7": 10.0}
    neg = {"the": 500.0, "cat": 100.0, "x1": 5.0}
    rx = re.compile(ra_pattern := gen.ra.to_pattern(gen.induce_weighted(pos, neg)))
    assert all(rx.fullmatch(s) for s in pos) and not any(rx.fullmatch(s) for s in neg), ra_pattern
    assert rx.fullmatch("2024")  # the digits generalise; the words stay literal
    assert not rx.fullmatch("six")
