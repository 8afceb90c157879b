"""Parsers for neurosym's text formats (lark LALR grammars) into plain IR dataclasses, and
of Python-syntax regex patterns into a plain syntax tree (:mod:`.regex_syntax`, the one
reader of interegular's)."""

from neurosym.dsl import regex_ir
from neurosym.dsl.pattern_check import check_pattern
from neurosym.dsl.regex import read_regex_bank, parse_regex_bank

__all__ = ["check_pattern", "regex_ir", "read_regex_bank", "parse_regex_bank"]
