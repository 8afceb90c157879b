"""The boolean Earley recogniser (neurosym.layers.earley) against the exact prefix chart.

Random small PCFGs with epsilon rules, unit chains, left and right recursion and
unreachable symbols; along random walks over the terminals the chart allows, the
recogniser's support equals the chart's at every prefix: the terminals of positive
prefix probability, and the end iff the sentence probability is positive.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from neurosym.compile.pcfg import compile_pcfg, load_pcfg
from neurosym.decode.tokenized import PCFGTerminals
from neurosym.dsl.pcfg import parse_pcfg
from neurosym.errors import NeurosymError
from neurosym.layers.earley import EarleyRecognizer
from references import recursive_pcfg

pytestmark = pytest.mark.usefixtures("one_thread")


def compiled(text: str):
    """The grammar's rule tensors, or None where the compiler refuses it (a nonterminal
    with no finite string, an inconsistent grammar)."""
    try:
        return compile_pcfg(parse_pcfg(text))
    except NeurosymError:
        return None


def check_supports(rules, seed: int, walks: int = 4, steps: int = 14) -> int:
    """Walk the chart's viable terminals; assert equal supports at every prefix. Returns
    the number of prefixes compared."""
    rng = random.Random(seed)
    earley, chart = EarleyRecognizer(rules), PCFGTerminals(rules)
    compared = 0
    for _ in range(walks):
        ce, cc = earley.start(), chart.start()
        for _ in range(steps):
            support, end = earley.distribution(ce)
            probs, p_end = chart.distribution(cc)
            assert np.array_equal(support > 0, probs > 0), (cc, support, probs)
            assert (end > 0) == (p_end > 0), (cc, end, p_end)
            assert set(np.unique(support).tolist()) <= {0.0, 1.0} and end in (0.0, 1.0)
            compared += 1
            viable = np.nonzero(probs > 0)[0].tolist()
            if not viable:
                break
            word = rng.choice(viable)
            ce, cc = earley.advance(ce, word), chart.advance(cc, word)
            earley.retain({ce})
            chart.retain({cc})
    return compared


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(seed=st.integers(0, 10**9))
def test_earley_support_equals_the_chart(seed):
    rules = compiled(recursive_pcfg(random.Random(seed)))
    assume(rules is not None)
    assert check_supports(rules, seed) > 0


def test_recursive_grammars_are_covered():
    """The generator's grammars compile often enough, with every feature the docstring names."""
    texts = [recursive_pcfg(random.Random(s)) for s in range(200)]
    ok = [t for t in texts if compiled(t) is not None]
    assert len(ok) > 60
    assert any(re.search(r"(->|\|) \[", t) for t in ok)  # an empty rule
    assert any(re.search(r"(->|\|) (N\d) \[", t) for t in ok)  # a unit rule
    assert any(re.search(r"N(\d) -> (.*\| )?N\1 '", t) for t in ok)  # left recursion
    assert any(re.search(r"N(\d) -> (.*\| )?'.' N\1 \[", t) for t in ok)  # right recursion
    assert any(f"N{i}" not in t.split("\n", 2)[1] and f"N{i} ->" in t for t in ok for i in range(1, 5))  # a symbol N0's rules never name


def test_earley_on_the_left_recursive_sum_and_the_empty_sentence():
    rules = compile_pcfg(parse_pcfg("S -> S '+' N [0.3] | N [0.6] | [0.1]\nN -> '1' [0.5] | '(' S ')' [0.5]\nU -> '2' [1.0]\n"))
    e = EarleyRecognizer(rules)
    ids = {w: rules.vocab.id(w) for w in ["1", "+", "(", ")", "2"]}

    def allowed(col):
        support, end = e.distribution(col)
        return {w for w, i in ids.items() if support[i] > 0}, end

    col = e.start()
    assert allowed(col) == ({"1", "(", "+"}, 1.0)  # the empty sentence, and "+ 1" (S empty); the unreachable U's '2' never
    for w, want in [("(", ({"1", "(", ")", "+"}, 0.0)), ("1", ({"+", ")"}, 0.0)), (")", ({"+"}, 1.0)), ("+", ({"1", "("}, 0.0))]:
        col = e.advance(col, ids[w])
        assert allowed(col) == want, w
    assert e.advance(col, ids["+"]).waiting == {} and e.distribution(e.advance(col, ids["+"]))[0].sum() == 0  # off the language: dead


def test_columns_are_interned_and_right_recursion_collapses():
    rules = compile_pcfg(parse_pcfg("S -> 'a' S [0.5] | 'b' [0.5]\n"))
    e = EarleyRecognizer(rules)
    a, b = rules.vocab.id("a"), rules.vocab.id("b")
    one = e.advance(e.start(), a)
    assert e.advance(e.start(), a) is one  # one prefix, one column
    assert e.advance(one, a) is one  # a^n S: the same future after every 'a', so the same column (the chain of S -> a . S is flattened)
    e.retain(set())  # columns and their caches stay valid: nothing is dropped
    assert e.advance(one, a) is one
    done = e.advance(one, b)
    assert done.sentence and e.distribution(done)[0].sum() == 0 and e.distribution(one)[1] == 0.0


def test_nested_columns_differ_by_depth_only():
    """Balanced brackets: the column after ``(`` * k depends on k (the stack), but a right-
    recursive list at one depth leaves one column per position, however long it grows."""
    rules = compile_pcfg(parse_pcfg("S -> '(' L ')' [0.4] | 'x' [0.6]\nL -> S [0.5] | S L [0.5]\n"))
    e = EarleyRecognizer(rules)
    o, c, x = (rules.vocab.id(t) for t in "()x")
    cols = [e.start()]
    for _ in range(4):
        cols.append(e.advance(cols[-1], o))
    assert len({id(k) for k in cols}) == 5  # one column per depth
    after = e.advance(cols[2], x)  # inside two brackets, one element read
    assert all(e.advance(after, x) is e.advance(e.advance(after, x), x) for _ in range(2))  # more elements: the same column
    closed = e.advance(e.advance(after, c), c)
    assert closed.sentence and e.advance(e.advance(e.advance(cols[2], x), c), c) is closed


def test_json_grammar_supports_along_a_document():
    """The shipped-style JSON grammar (regex lexemes, nullable whitespace, right-recursive
    members): both models agree along random walks."""
    text = """%start Json
%separator ""
Json     -> W Value W                     [1.0]
Value    -> Object [0.15] | Array [0.15] | String [0.3] | /-?(0|[1-9][0-9]*)/ [0.25] | 'true' [0.05] | 'false' [0.05] | 'null' [0.05]
Object   -> '{' W '}' [0.2] | '{' W Members '}' [0.8]
Members  -> Pair W [0.6] | Pair W ',' W Members [0.4]
Pair     -> String W ':' W Value [1.0]
Array    -> '[' W ']' [0.2] | '[' W Elements ']' [0.8]
Elements -> Value W [0.6] | Value W ',' W Elements [0.4]
String   -> /"[a-z]*"/ [1.0]
W        -> /[ ]+/ [0.1] | [0.9]
"""
    rules = compile_pcfg(parse_pcfg(text))
    assert check_supports(rules, 0, walks=40, steps=40) > 150


def test_shipped_pcfgs():
    from neurosym.files import resolve_data_path

    for name in ("grammars/arith.pcfg", "grammars/agreement.pcfg"):
        assert check_supports(load_pcfg(resolve_data_path(name)), 1, walks=6, steps=20) > 20


JSON_PCFG = r"""%start Json
%separator ""
Json     -> W Value W [1.0]
Value    -> Object [0.15] | Array [0.15] | String [0.3] | /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/ [0.25] | 'true' [0.05] | 'false' [0.05] | 'null' [0.05]
Object   -> '{' W '}' [0.2] | '{' W Members '}' [0.8]
Members  -> Pair W [0.6] | Pair W ',' W Members [0.4]
Pair     -> String W ':' W Value [1.0]
Array    -> '[' W ']' [0.2] | '[' W Elements ']' [0.8]
Elements -> Value W [0.6] | Value W ',' W Elements [0.4]
String   -> /"([^"\\\x00-\x1f]|\\(["\\\/bfnrt]|u[0-9a-fA-F]{4}))*"/ [1.0]
W        -> /[ \t\n\r]+/ [0.1] | [0.9]
"""


def test_bench_pass_on_json_documents_over_a_byte_vocabulary():
    """``neurosym.bench.earley``'s pass on a small vocabulary (every byte, and tokens that
    cross terminals): Python's json.dumps documents are read to their end with equal masks."""
    from neurosym.bench.earley import decode_pass, documents
    from neurosym.compile.spelling import spell
    from neurosym.decode.tokenized import StringPrefixModel
    from neurosym.vocab import Vocab

    multi = [b'": ', b'", "', b'{"', b'"}', b"null", b"true", b"false", b", ", b' "', b"]}", b"12", b"\\n"]
    toks = [bytes([i]) for i in range(128)] + multi
    vocab = Vocab(["<eos>"] + [t.hex() for t in toks], [None] + toks, "bytes")
    grammar = spell(compile_pcfg(parse_pcfg(JSON_PCFG)), vocab)

    def longest(text: bytes) -> list[int]:
        out = []
        while text:
            i = max((i for i, t in enumerate(toks) if text.startswith(t)), key=lambda i: len(toks[i]))
            out.append(i + 1)
            text = text[len(toks[i]) :]
        return out

    docs = [longest(d.encode()) for d in documents(2, 3)]
    report = decode_pass(StringPrefixModel(grammar), StringPrefixModel(grammar, support=True), docs)
    assert report["earley"]["advance"]["steps"] == sum(len(d) for d in docs)
    assert report["chart"]["mask"]["steps"] == sum(len(d) + 1 for d in docs)
