"""dsl/regex_syntax: Python-syntax patterns -> our own syntax tree (the interegular adapter)."""

import pytest

from neurosym.dsl.regex_syntax import ANY_CHAR, Alternation, CharClass, Concatenation, Repetition, UnsupportedConstruct, convert, parse_pattern
from neurosym.errors import SourceError, Span


def one(chars: str, negated: bool = False) -> CharClass:
    return CharClass(frozenset(chars), negated)


def test_the_tree_is_ours_and_plain():
    assert parse_pattern("ab*") == Alternation((Concatenation((one("a"), Repetition(one("b"), 0, None))),))
    assert parse_pattern("x|.") == Alternation((Concatenation((one("x"),)), Concatenation((ANY_CHAR,))))
    assert parse_pattern("[^0-9]{2,3}") == Alternation((Concatenation((Repetition(one("0123456789", True), 2, 3),)),))
    tree = parse_pattern("(a|b)+c?")
    every = [tree]
    for node in every:  # no interegular object anywhere in the tree
        assert type(node).__module__ == "neurosym.dsl.regex_syntax", node
        every.extend(getattr(node, "options", ()) + getattr(node, "parts", ()) + ((node.base,) if isinstance(node, Repetition) else ()))
    assert hash(tree) == hash(parse_pattern("(a|b)+c?"))  # frozen: usable as a cache key


def test_scoped_flags_survive_even_as_the_whole_pattern():
    [inner] = parse_pattern("(?i:a)").options[0].parts
    assert inner.flags_on == frozenset("i") and inner.flags_off == frozenset()
    # interegular's simplify() would drop the removed flag of a one-option group
    [inner] = parse_pattern("(?-i:a)", ignore_case=True).options[0].parts
    assert inner.flags_off == frozenset("i")
    assert parse_pattern("(?s:.)").options[0].parts[0].flags_on == frozenset("s")


def test_empty_options_and_groups_are_empty_concatenations():
    assert parse_pattern("a|").options[1] == Concatenation(())
    assert parse_pattern("x()").options[0].parts[1] == Alternation((Concatenation(()),))
    assert parse_pattern("a{0}").options[0].parts[0] == Repetition(one("a"), 0, 0)


def test_errors_carry_the_pattern_position():
    with pytest.raises(SourceError, match=r"x\.regex:3:8: lookahead"):
        parse_pattern("a(?=b)", Span("x.regex", 3, 7))
    with pytest.raises(SourceError, match=r"<string>:1:2: invalid regex: missing \)"):
        parse_pattern("a(b")


def test_a_node_of_no_regular_reading_is_refused():
    with pytest.raises(UnsupportedConstruct, match="object"):
        convert(object())
