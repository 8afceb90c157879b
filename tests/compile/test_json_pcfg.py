"""`grammars/json.pcfg` (issue 29): its texts (terminals concatenated) are JSON.

References independent of neurosym's compiler and runtime: Python's ``json.loads``, lark's
Earley parser of the same grammar (written in Lark by :mod:`neurosym.compile.export`)
and the ``regex`` package's recursive pattern of it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark.exceptions import LarkError

from neurosym.compile.export import PrefixJudge, lark_parser, to_gbnf, to_lark
from neurosym.compile.pcfg import load_pcfg
from neurosym.compile.pcfg_check import analyze, check_pcfg
from neurosym.compile.pcfg_sample import sample_sentences
from neurosym.dsl.pcfg import read_pcfg

ROOT = Path(__file__).resolve().parents[2]
JSON_PCFG = ROOT / "grammars" / "json.pcfg"
GRAMMAR = read_pcfg(JSON_PCFG)
PARSER = lark_parser(GRAMMAR)
JUDGE = PrefixJudge(GRAMMAR)


def lark_accepts(text: str) -> bool:
    try:
        PARSER.parse(text)
        return True
    except LarkError:
        return False


def loads_ok(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def test_consistent_with_a_modest_expected_length():
    assert check_pcfg(GRAMMAR) == []
    a = analyze(GRAMMAR)
    assert a.radius < 0.9 and 2 < a.expected_length < 6
    rules = load_pcfg(JSON_PCFG)
    assert sorted(rules.lexemes.values()) == sorted(GRAMMAR.lexemes) and len(rules.lexemes) == 3


def test_sampled_texts_are_json():
    texts = ["".join(s) for s in sample_sentences(GRAMMAR, 300, seed=0, max_len=60)]
    assert len(set(texts)) > 150
    for text in texts:
        json.loads(text)  # raises on anything that is not JSON
        assert JUDGE.complete(text)
    for text in texts[:60]:  # lark's Earley parser is slower: a subset
        assert lark_accepts(text), text


def documents() -> list[str]:
    """Real JSON documents: json.dumps of varied Python objects in several layouts, and
    the JSON files of this repository's docs (figures written by the benches)."""
    objects = [
        {}, [], "", 0, -0.0, 1e300, -2.5e-7, 12345678901234567890, True, False, None,
        {"name": "Zoë", "tags": ["a", "b\n", "\t\"quoted\"\\"], "n": [1, 2.5, -3, 4e10], "ok": None},
        [[[[]]], {"": {"": [{}]}}, "\u2603 snow", "\U0001f600 emoji", "\x00\x1f control"],
        {"nested": {"deep": {"deeper": [1, {"x": [True, False, None]}]}}, "unicode": "日本語"},
    ]
    layouts = [{}, {"indent": 2}, {"separators": (",", ":")}, {"ensure_ascii": False}, {"indent": "\t", "ensure_ascii": False}]
    out = [json.dumps(o, **kw) for o in objects for kw in layouts]
    out += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.json"))[:3]]
    return out


def test_real_documents_parse():
    docs = documents()
    for doc in docs:
        assert loads_ok(doc)
        assert JUDGE.complete(doc), doc[:80]
    for doc in docs:
        if len(doc) < 400:  # Earley on the short ones
            assert lark_accepts(doc), doc


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.sampled_from([{}, {"indent": 1}, {"separators": (",", ":")}, {"ensure_ascii": False}]))
def test_dumped_values_parse(value, layout):
    doc = json.dumps(value, **layout)
    assert JUDGE.complete(doc) and lark_accepts(doc)
    for k in range(len(doc)):  # every prefix of a document is viable
        assert JUDGE.viable(doc[:k])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.data())
def test_edited_documents_are_judged_as_json_loads_judges_them(value, data):
    doc = json.dumps(value, ensure_ascii=data.draw(st.booleans()))
    i = data.draw(st.integers(0, len(doc)))
    j = data.draw(st.integers(i, min(len(doc), i + 3)))
    edited = doc[:i] + data.draw(st.text(alphabet='{}[]",:0123456789.eE+-tfnul \\\n\x01', max_size=3)) + doc[j:]
    if any(w in edited for w in ("NaN", "Infinity")):  # json.loads takes these; RFC 8259 does not
        return
    expected = loads_ok(edited)
    assert JUDGE.complete(edited) == expected, edited
    if len(edited) < 200:
        assert lark_accepts(edited) == expected, edited


def test_converters_write_every_rule():
    gbnf, lark = to_gbnf(GRAMMAR), to_lark(GRAMMAR)
    assert gbnf.startswith("root ::= ") and gbnf.count("::=") == len(GRAMMAR.nonterminals) + len(GRAMMAR.lexemes)
    assert lark.count("LEXEME") == 2 * len(GRAMMAR.lexemes) and "%ignore" not in lark
    assert math.isfinite(analyze(GRAMMAR).expected_length)


def test_the_sample_command_prints_json_texts():
    from click.testing import CliRunner

    from neurosym.cli.main import main

    r = CliRunner().invoke(main, ["sample", "-n", "40", "--seed", "1", "--json", str(JSON_PCFG)])
    assert r.exit_code == 0, r.output
    texts = json.loads(r.output)
    assert len(texts) == 40
    for text in texts:  # %separator "": the terminals concatenate, so each sample is a JSON text as written
        json.loads(text)
        assert JUDGE.complete(text)
    assert any(" " not in t and ("," in t or ":" in t) for t in texts)  # no space put between terminals
