"""JSON Schema -> grammar (issue 42): the compiled grammar's texts are the schema's instances.

References outside the compiler and the decoding runtime: the ``jsonschema`` package (is
a value an instance?), the ``regex`` package's backtracking match of the compiled grammar
written as one recursive pattern (is a text in the grammar's language?), Python's ``re``
(integer and number ranges, patterns) and ``json``."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark.exceptions import LarkError

from neurosym.compile.export import PrefixJudge
from neurosym.compile.json_schema import SchemaError, SchemaOptions, integer_range, not_among, number_range, schema_grammar
from neurosym.compile.pcfg_check import check_pcfg
from neurosym.compile.pcfg_sample import sample_sentences
from neurosym.dsl.ecma_regex import PatternUnsupported, ecma_syntax, ecma_to_python, json_spelling

# schemas covering what the compiler reads; each with instances the schema accepts and ones it refuses
CASES = [
    ({"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}, "required": ["id"],
      "additionalProperties": False},
     [{"id": 1}, {"id": -7, "name": "x"}, {"id": 0, "name": ""}],
     [{}, {"name": "x"}, {"id": 1.5}, {"id": 1, "extra": 2}, {"id": "1"}, []]),
    ({"type": "object", "properties": {"a": {"type": "boolean"}}},  # other properties allowed, any value
     [{}, {"a": True}, {"a": False, "b": [1, {"c": None}]}, {"zz": "a"}],
     [{"a": 1}, {"a": "true"}, "x", 3]),
    ({"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 3},
     [[1, 2], [0.5, -2e-3, 1e10]],
     [[], [1], [1, 2, 3, 4], [1, "2"]]),
    ({"type": "array", "prefixItems": [{"const": "x"}, {"type": "integer"}], "items": False},
     [["x"], ["x", 3], []],
     [["y"], ["x", 3, 4], ["x", "3"]]),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "array", "items": [{"type": "string"}],
      "additionalItems": {"type": "null"}},  # draft-04 tuples
     [[], ["a"], ["a", None, None]],
     [[1], ["a", "b"]]),
    ({"type": "string", "minLength": 2, "maxLength": 4},
     ["ab", "abcd", "é\n\"", "\u2603\u2603"],
     ["a", "abcde", 5]),
    ({"type": "string", "pattern": "^[a-z]+-\\d{2}$"},
     ["abc-12", "z-00"],
     ["abc-1", "ABC-12", "abc-123", "-12"]),
    ({"type": "string", "pattern": "b\"c"},  # unanchored: anywhere in the string; a quote inside
     ['b"c', 'xxb"cyy', 'b"c\n'],
     ["bc", 'b"'],),
    ({"type": "integer", "minimum": -5, "exclusiveMaximum": 100},
     [-5, 0, 99, 42],
     [-6, 100, 1000, 3.5, "3"]),
    ({"type": "number", "minimum": 0, "maximum": 1},
     [0, 1, 0.5, 0.999, 1.0],
     [-0.001, 1.001, 2, -1]),
    ({"type": "number", "exclusiveMinimum": 0},
     [0.001, 1, 1000.5],
     [0, -1, -0.5]),
    ({"enum": ["red", "green", 3, None, [1, 2], {"k": "v"}]},
     ["red", 3, None, [1, 2], {"k": "v"}],
     ["blue", 4, [2, 1], {"k": "w"}, False]),
    ({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer", "minimum": 10}]},
     ["", "a", 10, 11],
     ["ab", 9, None]),
    ({"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"],
                 "additionalProperties": False},
                {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"],
                 "additionalProperties": False}]},
     [{"kind": "a"}, {"kind": "a", "x": 1}, {"kind": "b", "y": "s"}],
     [{"kind": "c"}, {"kind": "a", "y": "s"}, {}]),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     [{"a": 1, "b": "x"}, {"a": 1, "b": "x", "c": 0}],
     [{"a": 1}, {"b": "x"}, {"a": "1", "b": "x"}]),
    ({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                         "required": ["v"], "additionalProperties": False}},
      "$ref": "#/$defs/node"},
     [{"v": 1}, {"v": 1, "kids": []}, {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}],
     [{"v": 1, "kids": [{}]}, {"kids": []}, {"v": 1, "kids": [{"v": "2"}]}]),
    ({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False},
     [{}, {"x-a": 1, "x-b": 2}],
     [{"y": 1}, {"x-a": "1"}]),
    ({"type": "string", "format": "date"},
     ["2024-02-29", "1999-12-31", "2000-02-29"],
     ["2023-02-29", "1900-02-29", "2024-13-01", "2024-04-31", "24-01-01"]),
    ({"type": "string", "format": "ipv4"},
     ["0.0.0.0", "255.255.255.255", "10.1.2.3"],
     ["256.1.1.1", "1.2.3", "01.2.3.4"]),
    ({"type": "string", "format": "uuid"},
     ["123e4567-e89b-12d3-a456-426614174000"],
     ["123e4567e89b12d3a456426614174000", "xyz"]),
    ({"type": ["string", "null"], "maxLength": 1},
     [None, "", "a"],
     ["ab", 0]),
    (True, [1, "x", {"a": [None]}], []),
    ({"type": "object", "patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
     [{}, {"ab": 1, "x": "s"}, {"a": 2}, {"b": "", "ba": "t"}],
     [{"ab": "s"}, {"x": 1}, {"a": None}]),
    ({"type": "object", "properties": {"ab": {"type": "integer"}}, "patternProperties": {"^a": {"minimum": 0}},
      "additionalProperties": False},
     [{"ab": 1}, {"ab": 0, "ac": 5}, {"ac": "x"}],
     [{"ab": -1}, {"b": 1}, {"ac": -2}]),
    ({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3},
     ["abc", "a", "zz"],
     ["abcd", "", "A"]),
    ({"type": "string", "format": "date", "maxLength": 10, "minLength": 10},
     ["2024-01-31"],
     ["2024-1-31", "2024-01-32"]),
    ({"type": "string", "minLength": 3, "maxLength": 1024},
     ["x" * 1024, "abc", "\n\t\u2603"],
     ["x" * 1025, "ab", ""]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b"]},  # b: required, any value
     [{"a": 1, "b": None}, {"a": 1, "b": {"c": 1}}],
     [{"a": 1}, {"b": 1}]),
]

class Parser:
    """Whether a text is in the grammar's language (the regex package's full match)."""

    def __init__(self, grammar):
        self.judge = PrefixJudge(grammar)

    def parse(self, text: str) -> None:
        if not self.judge.complete(text):
            raise LarkError(f"not in the language: {text!r}")


def parser_of(grammar) -> Parser:
    return Parser(grammar)


def instance_of(schema, value) -> bool:
    """jsonschema's verdict under the schema's own draft (2020-12 by default), formats checked."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value)


def in_language(parser, value) -> bool:
    try:
        parser.parse(json.dumps(value, ensure_ascii=False))
        return True
    except LarkError:
        return False


@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_grammar_accepts_the_valid_instances_and_refuses_the_others(case):
    schema, valid, invalid = CASES[case]
    g = schema_grammar(schema)
    assert check_pcfg(g, strict=True) is not None  # consistent, every rule generating
    parser = parser_of(g)
    for v in valid:
        assert instance_of(schema, v), v  # the case itself is right
        assert in_language(parser, v), v
    for v in invalid:
        assert not instance_of(schema, v), v
        assert not in_language(parser, v), v


@pytest.mark.parametrize("case", range(len(CASES)))
def test_sampled_documents_are_instances(case):
    schema = CASES[case][0]
    g = schema_grammar(schema)
    docs = ["".join(s) for s in sample_sentences(g, 40, seed=case, max_len=200)]
    assert docs
    for d in docs:
        assert instance_of(schema, json.loads(d)), d


def test_whitespace_as_rfc_8259_allows_or_none():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    loose, tight = parser_of(schema_grammar(schema)), parser_of(schema_grammar(schema, options=SchemaOptions(compact=True)))
    text = ' {\n\t"a" : [ 1 ,2\r\n] } '
    loose.parse(text)
    with pytest.raises(LarkError):
        tight.parse(text)
    tight.parse('{"a":[1,2]}')


def test_properties_come_in_definition_order():
    parser = parser_of(schema_grammar({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}))
    parser.parse('{"a": 1, "b": 2}')
    with pytest.raises(LarkError):  # documented: defined properties in their order, the others after
        parser.parse('{"b": 2, "a": 1}')


@pytest.mark.parametrize("schema, keyword, pointer", [
    ({"not": {"type": "string"}}, "not", "#/not"),
    ({"properties": {"a": {"type": "array", "uniqueItems": True}}}, "uniqueItems", "#/properties/a/uniqueItems"),
    ({"properties": {"a": {"type": "string", "pattern": "(a)\\1"}}}, "pattern", "#/properties/a/pattern"),
    ({"properties": {"a": {"type": "string", "pattern": "(?=a)b"}}}, "pattern", "#/properties/a/pattern"),
    ({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}]}, "oneOf", "#/oneOf"),
    ({"$ref": "https://example.com/s.json"}, "$ref", "#"),
    ({"$ref": "#/definitions/missing"}, "$ref", "#"),
    ({"type": "numbr"}, "type", "#/type"),
    ({"type": "number", "minimum": 0.5}, "minimum", "#/minimum"),
    ({"type": "string", "maxLength": 10**7}, "maxLength", "#/maxLength"),
    ({"type": "object", "patternProperties": {"^a": {"type": "string"}, "b$": {"type": "integer"}}}, "patternProperties",
     "#/patternProperties/b$"),
])
def test_what_is_not_supported_is_refused_with_keyword_and_pointer(schema, keyword, pointer):
    with pytest.raises(SchemaError) as err:
        schema_grammar(schema, "s.json")
    assert err.value.keyword == keyword
    assert err.value.where == "s.json" + pointer
    assert "\n" not in str(err.value) and str(err.value).startswith(f"s.json{pointer}: {keyword}: ")


def test_a_schema_no_value_satisfies_is_refused():
    with pytest.raises(SchemaError, match="no JSON value"):
        schema_grammar({"type": "integer", "minimum": 5, "maximum": 4})
    with pytest.raises(SchemaError, match="no JSON value"):
        schema_grammar(False)


def test_integer_ranges_against_python():
    for lo in (None, -120, -5, -1, 0, 1, 9, 10, 99, 101):
        for hi in (None, -100, -3, 0, 9, 10, 11, 150, 1234):
            src = integer_range(lo, hi)
            r = re.compile(src) if src else None
            for x in range(-1300, 1300):
                want = (lo is None or x >= lo) and (hi is None or x <= hi)
                assert bool(r and r.fullmatch(str(x))) == want, (lo, hi, x)
            assert not (r and (r.fullmatch("-0") or r.fullmatch("01")))


@given(lo=st.one_of(st.none(), st.integers(-30, 30)), hi=st.one_of(st.none(), st.integers(-30, 30)),
       lo_strict=st.booleans(), hi_strict=st.booleans(),
       x=st.decimals(min_value=-40, max_value=40, places=3, allow_nan=False))
@settings(max_examples=400, deadline=None)
def test_number_ranges_against_exact_arithmetic(lo, hi, lo_strict, hi_strict, x):
    src = number_range(lo, lo_strict, hi, hi_strict)
    text = format(x, "f")
    if Fraction(text) == 0 and text.startswith("-"):
        return  # -0 is never written by json.dumps; the grammar reads 0
    v = Fraction(text)
    want = (lo is None or (v > lo if lo_strict else v >= lo)) and (hi is None or (v < hi if hi_strict else v <= hi))
    assert bool(src and re.fullmatch(src, text)) == want


def test_keys_other_than_the_names():
    r = re.compile(not_among(["active", "id", "a"]))
    for key in ("active", "id", "a"):
        assert not r.fullmatch(json.dumps(key))
    assert not r.fullmatch('"\\u0061"')  # an escape spelling "a" is not read as another key
    for key in ("", "activ", "actives", "b", "i", "idx", "tab\there", 'q"'):
        assert r.fullmatch(json.dumps(key, ensure_ascii=False)), key


PATTERNS = ["^[a-z]+$", "^\\d{3}-\\d{4}$", "ab", "^a|b$", "^(\\+|-)?\\d+(\\.\\d+)?$", "[.]x$", "^[^\"]*$", "^\\w+@\\w+\\.com$",
            "^.{2,3}$", "\\s", "^[\\-a]$", "^a{2}$", "^(?:ab)*c?$", "^[\\]a]$", "x\\/y"]


@pytest.mark.parametrize("pattern", PATTERNS)
@given(text=st.lists(st.sampled_from(list('ab019-+.x/y@c"\\ \n\té]') + ["com"]), max_size=8).map("".join))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_patterns_search_as_ecmascript_does(pattern, text):
    """Python's ``re.search`` reads these patterns as ECMAScript does on these texts (ASCII
    \\d and \\w, ``.`` stopping at line ends); the spelled regex fully matches the JSON body."""
    spelled = re.compile(json_spelling(ecma_syntax(pattern)))
    python = pattern[:-1] + "\\Z" if pattern.endswith("$") else pattern  # ECMAScript's $ is the very end
    want = re.search(python.replace("|b$", "|b\\Z"), text, flags=re.ASCII) is not None
    assert bool(spelled.fullmatch(json.dumps(text, ensure_ascii=False)[1:-1])) == want


@pytest.mark.parametrize("pattern, why", [("(?=a)", "lookaround"), ("a\\1", "backreference"), ("\\bword", "word boundar"),
                                          ("a(^b)", "anchor"), ("\\p{L}", "Unicode propert"), ("\\u{1F600}", "u flag")])
def test_patterns_without_a_regular_reading_are_refused(pattern, why):
    with pytest.raises(PatternUnsupported, match=why):
        ecma_syntax(pattern)
    assert "[\\s\\S]*" in ecma_to_python("abc")  # unanchored ends read any text


def test_random_values_the_grammar_accepts_are_instances():
    """Soundness on values drawn without the grammar: whatever the grammar accepts, the
    schema accepts (over every case's schema)."""
    rng = np.random.default_rng(0)
    pool = [None, True, False, 0, 1, -5, 99, 100, 0.5, 1.001, -0.001, "", "a", "ab", "abc-12", "x-a", "red", "2024-02-29",
            "10.1.2.3", [], [1, 2], ["x", 3], ["a", None], {}, {"id": 1}, {"id": 1, "name": "x"}, {"a": True}, {"kind": "a"},
            {"v": 1, "kids": []}, {"x-a": 1}, {"a": 1, "b": "x"}, {"a": 1, "b": None}]
    for schema, _, _ in CASES:
        parser = parser_of(schema_grammar(schema))
        for v in pool + [pool[i] for i in rng.integers(0, len(pool), 10)]:
            if in_language(parser, v):
                assert instance_of(schema, v), (schema, v)


@given(lo=st.integers(0, 6), span=st.one_of(st.none(), st.integers(0, 6)),
       parts=st.lists(st.sampled_from(["a", "é", "\\n", "\\u00e9", "\\uD83D", "\\\\", '\\"', "\\x", "\\u12", '"', "\x01", "b", "f"]),
                      max_size=9))
@settings(max_examples=300, deadline=None)
def test_counted_string_automata_match_their_regex(lo, span, parts):
    """The counter automaton of a length-bounded string says what its registered regex says."""
    from neurosym.compile.json_schema import ANY_CHAR, string_dfa

    hi = None if span is None else lo + span
    text = '"' + "".join(parts) + '"'
    regex = f'"{ANY_CHAR}{{{lo},{"" if hi is None else hi}}}"'
    assert string_dfa(lo, hi).accepts(text) == bool(re.fullmatch(regex, text))


def test_lexemes_built_as_products_read_as_their_regex_says():
    """Registered lexemes (intersections and differences built as automata) against
    Python's re reading the lookahead regex they are registered under."""
    from neurosym.compile.regex import pattern_dfa

    g = schema_grammar({"type": "object", "patternProperties": {"^a": {"type": "string", "pattern": "^[a-c]+$", "maxLength": 2}},
                        "properties": {"ab": {"type": "integer"}}, "additionalProperties": {"type": "null"}})
    texts = ['"a"', '"ab"', '"abc"', '"ac"', '"b"', '"x"', '""', '"\\u0061b"', '"a\\n"', '"ca"', '"ad"']
    lexemes = [src for src in g.lexemes if src.startswith("(?")]
    assert len(lexemes) >= 2
    for src in lexemes:
        dfa = pattern_dfa(src)
        for t in texts:
            assert dfa.accepts(t) == bool(re.fullmatch(src, t)), (src, t)


def test_a_pointer_inside_the_any_value_never_meets_a_real_one():
    """Regression (MaskBench): the any-value's own object once registered its additional
    properties under the real pointer #/additionalProperties, so a schema's own
    additionalProperties there was read as 'anything' (an invalid instance accepted)."""
    schema = {"type": "object", "properties": {"Data": {"type": "object"}}, "additionalProperties": {"type": "string"}}
    parser = parser_of(schema_grammar(schema))
    assert in_language(parser, {"Data": {"x": [1]}, "other": "s"})
    assert not in_language(parser, {"Data": {}, "other": [1, 2, 3]})


def test_other_properties_anywhere_between_the_defined_ones():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["b"],
              "additionalProperties": {"type": "string"}}
    parser = parser_of(schema_grammar(schema))
    for ok in ({"x": "1", "a": 1, "y": "2", "b": 2, "z": "3"}, {"b": 2}, {"x": "", "b": 2}, {"a": 1, "b": 2}):
        assert in_language(parser, ok), ok
    for bad in ({"b": 2, "a": 1}, {"x": 1, "b": 2}, {"a": 1}):
        assert not in_language(parser, bad), bad


def test_a_schema_nested_too_deeply_is_a_clear_error():
    schema: dict = {"type": "integer"}
    for _ in range(3000):
        schema = {"type": "array", "items": schema}
    with pytest.raises(SchemaError, match="nests too deeply"):
        schema_grammar(schema)
