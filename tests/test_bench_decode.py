"""`neurosym bench decode`: the flattened bank patterns mean what the banks mean, the
test strings come from outside neurosym, the index comparison runs (and agrees with
XGrammar's masks where it is installed), neurosym's masks and end decisions equal a
committed record of XGrammar's at every step (no XGrammar needed), outlines-core's
documented refusals hold, and the generation timings are measured."""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import neurosym
from neurosym.bench import decode, decode_fixture
from neurosym.cli.main import main
from neurosym.data import shared_data_dir, shipped_file
from neurosym.dsl.regex import read_regex_bank
from neurosym.errors import NeurosymError

HYP = dict(deadline=None, derandomize=True, database=None, max_examples=200)


@pytest.mark.parametrize("file, name", decode.BANK_PATTERNS)
def test_flat_regex_accepts_what_the_bank_pattern_accepts(file, name):
    bank = neurosym.load(shipped_file(f"grammars/{file}"))
    auto = bank[name]
    flat = decode.flat_regex(read_regex_bank(shipped_file(f"grammars/{file}")), name)
    for s in auto.char_dfa.sample(300, max_len=40, seed=1):
        assert re.fullmatch(flat, s, re.ASCII), s
    flat_auto = neurosym.compile_regex(flat)
    for s in flat_auto.char_dfa.sample(300, max_len=40, seed=2):
        assert auto.char_dfa.accepts(s), s


@settings(**HYP)
@given(st.text(alphabet="ab\\dws[]^.-_ ", max_size=8))
def test_ascii_shorthands_keep_re_ascii_semantics(text):
    pattern = r"[\w.+-]+@\d\s" + re.escape(text)
    flat = decode.ascii_shorthands(pattern)
    for probe in ["a.b@1 " + text, "é@1 " + text, "a@١ " + text, "a@1\u00a0" + text]:
        assert bool(re.fullmatch(pattern, probe, re.ASCII)) == bool(re.fullmatch(flat, probe)), (probe, flat)


def test_negated_shorthands_are_refused():
    with pytest.raises(NeurosymError, match=r"\\W"):
        decode.ascii_shorthands(r"\W+")


def test_generation_timings_are_measured():
    g = decode.bench_generation(batch=2, steps=8, repeats=1)
    for clock in ("wall", "cpu"):
        t = g[clock]
        assert t["forward_cached_ms"] > 0 and t["forward_recomputed_ms"] > 0 and t["processor_chain_ms"] > 0 and t["sampling_ms"] > 0
        assert t["chain_share_of_forward"] == pytest.approx(t["processor_chain_ms"] / t["forward_cached_ms"])
        assert t["kv_speedup"] == pytest.approx(t["forward_recomputed_ms"] / t["forward_cached_ms"])
    assert "GrammarMask" in g["chain"][0]
    assert "processor chain / cached forward" in decode.format_generation(g)


@pytest.mark.skipif(shared_data_dir() is None, reason="needs ../shared/data (WikiText-2, UD English-EWT)")
def test_index_comparison_runs_and_agrees_with_xgrammar(monkeypatch):
    monkeypatch.setattr(decode, "BANK_PATTERNS", decode.BANK_PATTERNS[:1])
    monkeypatch.setattr(decode, "rss_growth", lambda *a, **k: None)  # the child processes are the slow part
    r = decode.run(n_words=50, bpe_size=1000, repeats=1, progress=False)
    assert [row["pattern"] for row in r["patterns"]] == ["numbers:SCIENTIFIC", "50 words"]
    for row in r["patterns"]:
        ours = row["engines"]["neurosym"]
        assert ours["build_seconds"] > 0 and ours["build_cpu_seconds"] > 0 and ours["memory_bytes"] > 0 and ours["strings_refused"] == 0
        for part in ("mask", "advance", "step"):  # per-token times, the step being mask + advance
            assert 0 < ours[f"{part}_median_us"] <= ours[f"{part}_p99_us"]
        assert ours["step_median_us"] >= ours["mask_median_us"]
        assert set(row["batched_step"]) == set(decode.BATCHES) and all(t["numpy_us"] > 0 and t["torch_us"] > 0 for t in row["batched_step"].values())
        xgr = row["engines"]["xgrammar"]
        if importlib.util.find_spec("xgrammar") is None:
            assert "not installed" in xgr["error"]
        else:
            assert xgr["mask_disagreements"] == 0 and xgr["mask_steps_compared"] == row["steps"] and xgr["strings_refused"] == 0
            assert xgr["end_disagreements"] == 0  # the end-of-sequence decision is compared too
            assert xgr["advance_median_us"] > 0 and xgr["step_p99_us"] > 0
    text = decode.format_results(r)
    assert "steps differing from neurosym's (masks, end of sequence)" in text and "batched advance" in text
    if importlib.util.find_spec("xgrammar") is not None:
        g = r["ratios"]["xgrammar"]
        assert set(g) == {f"{part}_{q}_us" for part in ("mask", "advance", "step") for q in ("median", "p99")} and all(x > 0 for x in g.values())
        assert "theirs/ours xgrammar:" in text and "geometric mean" in text


def test_step_ratios_are_geometric_means_of_theirs_over_ours():
    def engine(t: float) -> dict:
        return {f"{part}_{q}_us": t * k for part, k in (("mask", 1), ("advance", 2), ("step", 3)) for q in ("median", "p99")}

    r = {"patterns": [
        {"engines": {"neurosym": engine(1.0), "other": engine(4.0), "broken": {"error": "x"}}},
        {"engines": {"neurosym": engine(2.0), "other": engine(2.0)}},
        {"engines": {"neurosym": {"error": "refused"}, "other": engine(9.0)}},
    ]}
    g = decode.step_ratios(r)
    assert set(g) == {"other"}
    assert all(x == pytest.approx(2.0) for x in g["other"].values())  # sqrt(4 * 1)


def test_cli_runs_the_generation_part():
    r = CliRunner().invoke(main, ["bench", "decode", "--skip-index", "--skip-processors", "--batch", "2", "--repeats", "1", "--json"])
    assert r.exit_code == 0, r.output
    assert '"kv_speedup"' in r.output


# ---------------------------------------------------------------------- strings from outside neurosym
def test_regex_walk_draws_full_matches_without_neurosym():
    pytest.importorskip("regex", reason="the regex package (bench extra; transformers brings it too)")
    from neurosym.bench import regex_walk

    for _, pattern in decode_fixture.fixture_patterns():
        strings = regex_walk.sample_matches(pattern, 15, seed=3, max_len=30)
        assert len(strings) == len(set(strings)) > 0
        assert all(re.fullmatch(pattern, s) and len(s) <= 30 for s in strings)
    assert regex_walk.sample_matches("a(:b)?", 5, seed=0) == regex_walk.sample_matches("a(:b)?", 5, seed=0)  # seeded
    assert set(regex_walk.sample_matches("a(:b)?", 10, seed=0)) == {"a", "a:b"}  # both members reached
    # a pattern neurosym cannot compile (a lookahead): the walk needs only Python's regex engines
    assert all(s.startswith("ab") for s in regex_walk.sample_matches("(?=ab)[a-c]+", 5, seed=0))
    with pytest.raises(NeurosymError, match="does not compile"):
        regex_walk.sample_matches("(", 1)


def test_bench_bank_strings_do_not_come_from_neurosyms_automaton(monkeypatch):
    pytest.importorskip("regex", reason="the regex package (bench extra; transformers brings it too)")

    def refuse(*a, **k):
        raise AssertionError("the bench strings must not be drawn from neurosym's automaton")

    monkeypatch.setattr(decode, "frequent_words", lambda n: ["the", "of"])
    monkeypatch.setattr(decode, "shared_data", lambda *parts: FakeText("the cat of the dog"))
    monkeypatch.setattr(decode, "compile_guide", refuse)
    monkeypatch.setattr(neurosym.compile.automaton.Automaton, "sample", refuse)
    out = decode.bench_patterns(2, n_strings=10)
    for file, name in decode.BANK_PATTERNS:
        pattern, strings = out[f"{file.split('.')[0]}:{name}"]
        assert len(strings) == 10 and all(re.fullmatch(pattern, s) for s in strings)
    assert out["2 words"][1] == ["the", "of", "the"]


class FakeText:
    def __init__(self, text: str):
        self.text = text

    def read_text(self, encoding: str) -> str:
        return self.text


# ---------------------------------------------------------------------- the committed XGrammar record (runs in CI)
FIXTURE = Path(__file__).parent / "data" / "xgrammar_masks.json"


def test_masks_and_end_decisions_equal_the_recorded_xgrammar_ones_at_every_step():
    fx = decode_fixture.load_fixture(FIXTURE)
    bad, steps = decode_fixture.fixture_mismatches(fx)
    assert bad == []
    assert steps == sum(len(s["tokens"]) + 1 for p in fx["patterns"] for s in p["sequences"]) > 2000
    sources = {s["source"] for p in fx["patterns"] for s in p["sequences"]}
    assert sources == {"re", "xgrammar-walk"}
    ends = "".join(s["ends"] for p in fx["patterns"] for s in p["sequences"])
    assert "0" in ends and "1" in ends  # both decisions occur
    vocab = [bytes.fromhex(s) for s in fx["vocab"]]
    assert sum(len(s) > 1 for s in vocab) > 100 and any(len(s.decode("utf-8", "replace")) < len(s) for s in vocab)  # multi-byte tokens
    assert FIXTURE.stat().st_size < 1_000_000


def test_the_recorded_strings_are_what_they_claim():
    fx = decode_fixture.load_fixture(FIXTURE)
    vocab = [bytes.fromhex(s) for s in fx["vocab"]]
    for p in fx["patterns"]:
        for s in p["sequences"]:
            spelled = b"".join(vocab[t] for t in s["tokens"])
            if s["source"] == "re":
                assert spelled.decode() == s["text"] and re.fullmatch(p["pattern"], s["text"])
            if s["ends"][-1] == "1":  # a walk that XGrammar lets end is a full match under Python's re
                assert re.fullmatch(p["pattern"], spelled.decode("utf-8"), re.DOTALL), (p["name"], spelled)


def test_the_fixture_comparison_fails_on_a_tampered_record():
    fx = decode_fixture.load_fixture(FIXTURE)
    p = next(p for p in fx["patterns"] if p["name"] == "email:EMAIL")
    tampered = copy.deepcopy(fx)
    q = next(q for q in tampered["patterns"] if q["name"] == "email:EMAIL")
    q["sequences"] = q["sequences"][:1]
    tampered["patterns"] = [q]
    seq = q["sequences"][0]
    k = len(seq["tokens"])
    seq["ends"] = seq["ends"][:k] + ("0" if seq["ends"][k] == "1" else "1")  # flip the last end decision
    words = bytearray(bytes.fromhex(tampered["mask_table"][seq["masks"][0]]))
    words[0] ^= 1  # flip token 0 in the first mask
    tampered["mask_table"].append(words.hex())
    seq["masks"][0] = len(tampered["mask_table"]) - 1
    bad, _ = decode_fixture.fixture_mismatches(tampered)
    assert len(bad) == 2 and "step 0: masks differ" in bad[0] and "end of sequence" in bad[1]
    assert p["sequences"][0]["ends"] != seq["ends"]  # the original is untouched


# ---------------------------------------------------------------------- outlines-core's two refusals
def recorded(engine: str) -> dict[tuple[str, tuple[str, ...]], dict]:
    fx = decode_fixture.load_fixture(FIXTURE)
    return {(r["pattern"], tuple(r["prefix"])): r for r in fx["outlines_examples"][engine]}


DECIMAL = r"-?[0-9]+(\.[0-9]+)?"


def test_outlines_core_refusals_as_recorded_and_documented():
    oc, xg = recorded("outlines_core"), recorded("xgrammar")
    # a complete match that a token would leave incomplete: refused, though the text stays completable
    assert oc["a(:b)?", ("a",)]["allowed"] == [":b"] and oc["a(:b)?", ("a",)]["end"]
    assert oc[DECIMAL, ("1",)]["allowed"] == ["1", "5"]  # no "." after "1" ...
    assert oc[DECIMAL, ("1", ".")]["allowed"] is None  # ... and it refuses to advance on it: "1.5" cannot be generated
    # leftmost-first alternation: "ab" never allowed by a|ab
    assert oc["a|ab", ()]["allowed"] == ["a"] and oc["a|ab", ("a",)]["allowed"] == []
    # neurosym allows every token that keeps the text completable, as XGrammar does
    for (pattern, prefix), theirs in xg.items():
        allowed, end = decode_fixture.neurosym_allowed(pattern, list(prefix))
        assert (allowed, end) == (theirs["allowed"], theirs["end"]), (pattern, prefix)
        if oc[pattern, prefix]["allowed"] is not None:
            assert set(oc[pattern, prefix]["allowed"]) <= set(allowed) and oc[pattern, prefix]["end"] == end
    assert {":", ":b"} <= set(decode_fixture.neurosym_allowed("a(:b)?", ["a"])[0])
    assert "." in decode_fixture.neurosym_allowed(DECIMAL, ["1"])[0]
    assert "ab" in decode_fixture.neurosym_allowed("a|ab", [])[0]


@pytest.mark.skipif(importlib.util.find_spec("outlines_core") is None, reason="outlines-core not installed (pip install 'neurosym[bench]'); the recorded answers are checked above")
def test_outlines_core_live_matches_the_record_and_the_docs():
    import outlines_core

    assert decode_fixture.outlines_answers() == decode_fixture.load_fixture(FIXTURE)["outlines_examples"]["outlines_core"]
    tokens = ["a", ":", "b", ":b", "1", ".", "5"]
    vocabulary = outlines_core.Vocabulary(len(tokens), {t.encode(): [i] for i, t in enumerate(tokens)})
    guide = outlines_core.Guide(outlines_core.Index("a(:b)?", vocabulary))
    guide.advance(tokens.index("a"), return_tokens=False)
    allowed = guide.get_tokens()
    assert tokens.index(":b") in allowed and tokens.index(":") not in allowed
    guide = outlines_core.Guide(outlines_core.Index(DECIMAL, vocabulary))
    guide.advance(tokens.index("1"), return_tokens=False)
    assert tokens.index(".") not in guide.get_tokens()
    with pytest.raises(Exception):
        guide.advance(tokens.index("."), return_tokens=False)


@pytest.mark.skipif(importlib.util.find_spec("xgrammar") is None, reason="xgrammar not installed (pip install 'neurosym[bench]'); the recorded masks are checked above")
def test_xgrammar_live_matches_the_record():
    fx = decode_fixture.load_fixture(FIXTURE)
    rec = decode_fixture.XGrammarRecorder([bytes.fromhex(s) for s in fx["vocab"]])
    for p in fx["patterns"]:
        for s in p["sequences"]:
            masks, ends = rec.record(p["pattern"], s["tokens"])
            assert [decode_fixture.pack(m) for m in masks] == [fx["mask_table"][i] for i in s["masks"]], p["name"]
            assert "".join("1" if e else "0" for e in ends) == s["ends"], p["name"]
    assert decode_fixture.xgrammar_answers() == fx["outlines_examples"]["xgrammar"]


def test_refusals_are_classed_by_what_the_refused_token_would_do():
    from neurosym.vocab import Vocab

    vocab = Vocab.chars("ab:1.5")
    ids = lambda s: [vocab.id(c) for c in s]  # noqa: E731
    first = decode.classify_refusals([(0, 1)], "a(:b)?", [ids("a:b")], vocab)  # ":" after a complete "a"
    assert first == {"strings_refused": 1, "refused_leaving_a_complete_match_incomplete": 1, "refused_otherwise": 0}
    alt = decode.classify_refusals([(0, 1)], "a|ab", [ids("ab")], vocab)  # "b" completes "ab": leftmost-first
    assert alt == {"strings_refused": 1, "refused_leaving_a_complete_match_incomplete": 0, "refused_otherwise": 1}
    assert decode.classify_refusals([(0, 0)], "a|ab", [ids("ab")], vocab)["refused_otherwise"] == 1


def test_decisions_are_compared_mask_and_end():
    import numpy as np

    def d(masks, ends):
        return decode.Trace({(0, k): np.array(m, dtype=np.uint32).tobytes() for k, m in enumerate(masks)}, {(0, k): e for k, e in enumerate(ends)}, [])

    ours = d([[0b0110], [0b0110], [0b0110], [0b0110], [0b1]], [True, False, True, False, True])
    theirs = d([[0b0110], [0b0100], [0b1110], [0b1001]], [True, True, False, False])  # one step fewer: not compared
    c = decode.compare_decisions(ours, theirs)
    assert c == {"mask_steps_compared": 4, "mask_disagreements": 3, "mask_theirs_narrower": 1, "mask_theirs_wider": 1,
                 "mask_theirs_crossed": 1, "end_disagreements": 2, "end_theirs_refuses": 1, "end_theirs_allows": 1}


NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def test_decode_docs_quote_the_record_as_it_is():
    fx = decode_fixture.load_fixture(FIXTURE)
    doc = (Path(__file__).parents[1] / "docs" / "decode.md").read_text(encoding="utf-8")
    steps = sum(len(s["tokens"]) + 1 for p in fx["patterns"] for s in p["sequences"])
    assert f"{len(fx['vocab'])}-token" in doc and f"{steps:,} steps" in doc and f"all {steps:,}" in doc
    assert f"a BPE of {decode_fixture.FIXTURE_BPE_SIZE}" in doc and f"{NUMBER_WORDS[len(fx['patterns'])]} patterns" in doc
    assert f"{decode_fixture.RE_STRINGS} strings" in doc and f"{decode_fixture.XGRAMMAR_WALKS} walks" in doc
    assert f"the {decode_fixture.WORDS_IN_LIST} most frequent words" in doc
    assert "python -m neurosym.bench.decode_fixture --write tests/data/xgrammar_masks.json" in doc
