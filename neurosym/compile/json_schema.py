"""JSON Schema -> a ``.pcfg`` grammar over strings (regex terminals, terminals concatenated).

A schema (a ``.json`` file holding one, or a dict) compiles to a :class:`~neurosym.dsl.pcfg.Grammar`
whose language is the JSON texts of the instances the schema accepts, so it goes where
any ``.pcfg`` goes: a guide over any tokenizer (:func:`neurosym.compile_guide`),
``neurosym check / inspect / sample / compile / export``, ``neurosym generate --grammar``.
docs/json_schema.md lists what is read, how, and what is refused::

    g = schema_grammar({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})
    print(g)            # the grammar, as .pcfg text

How a document is read:

* whitespace as RFC 8259 allows around every structural character (``W``; ``compact``:
  none); strings are read in the spelling ``json.dumps(..., ensure_ascii=False)`` writes
  where the schema constrains their characters (``pattern``, ``format``, ``enum``,
  ``const``, property names), and with any escape where it does not;
* an object's defined properties in the schema's definition order, the others
  (``patternProperties``, ``additionalProperties``) anywhere between them; a property
  that is not required may be left out;
* integers and numbers with bounds as exact digit automata: every number in the range,
  written without an exponent; numbers without bounds in any JSON spelling;
* ``oneOf`` as ``anyOf`` where the branches are provably exclusive (different types, or
  different constants of a required property), refused otherwise;
* ``format``: ``date``, ``time``, ``date-time``, ``email``, ``uuid``, ``uri``, ``ipv4``,
  ``ipv6`` and ``hostname`` as exact regexes (``email``: dot-atom addresses); any other
  format is an annotation, as the specification reads it (draft 2019-09 and later).

What is not supported is refused with :class:`SchemaError` naming the keyword and its
JSON pointer: a compiled schema never accepts an instance the schema refuses, and never
refuses one it accepts except by the orders above.

Each choice is uniform (every alternative of a nonterminal equally likely; lists and
repeated properties end with probability 1/2 at each step), lowered where needed so the
grammar is consistent; ``neurosym fit`` learns better weights from example documents.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np

from neurosym.compile.dfa import DEFAULT_MAX_STATES, CharDFA, Partition, breadth_first, product
from neurosym.compile.pcfg_check import consistent, generating
from neurosym.compile.regex import pattern_dfa, register_pattern, words_dfa
from neurosym.dsl.ecma_regex import PatternUnsupported, char_class, ecma_syntax, ecma_to_python, json_spelling
from neurosym.dsl.pcfg import NT, Grammar, Lexeme, Lit, Production
from neurosym.errors import NeurosymError, Span
from neurosym.files import read_input

SCHEMA_LIMIT_BYTES = 64 * 2**20
MAX_RULES = 200_000  # productions a schema may compile to
MAX_ITEMS = 1_000  # largest minItems/maxItems/minProperties/maxProperties read exactly (a rule per count)
MAX_LENGTH = 1_000_000  # largest minLength/maxLength read exactly
STRING_BLOCK = 1_000  # characters per block of a string too long for one counter automaton
MAX_MERGE_DEPTH = 40
TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")

# keywords that only annotate (ignored) and those whose assertion is read here
ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$comment", "title", "description", "default", "examples", "example", "readOnly",
    "writeOnly", "deprecated", "$anchor", "$vocabulary", "contentMediaType", "contentEncoding", "contentSchema",
    "definitions", "$defs", "format",
})
READ = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$ref", "minProperties",
    "maxProperties", "uniqueItems", "multipleOf",
})
# assertions with no reading here: refused wherever they constrain
REFUSED = {
    "not": "'not' (the complement of a schema) is not supported",
    "if": "'if'/'then'/'else' are not supported",
    "then": "'if'/'then'/'else' are not supported",
    "else": "'if'/'then'/'else' are not supported",
    "dependencies": "'dependencies' are not supported",
    "dependentRequired": "'dependentRequired' is not supported",
    "dependentSchemas": "'dependentSchemas' is not supported",
    "propertyNames": "'propertyNames' is not supported",
    "contains": "'contains' is not supported",
    "minContains": "'minContains' is not supported",
    "maxContains": "'maxContains' is not supported",
    "unevaluatedProperties": "'unevaluatedProperties' is not supported",
    "unevaluatedItems": "'unevaluatedItems' is not supported",
    "$dynamicRef": "'$dynamicRef' is not supported",
    "$recursiveRef": "'$recursiveRef' is not supported",
}

# one character of a JSON string: any but '"', '\' and the controls, or an escape
ANY_CHAR = r'(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))'
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
INTEGER = r"-?(?:0|[1-9][0-9]*)"
WHITESPACE = r"[ \t\n\r]+"

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_H16 = r"[0-9a-fA-F]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_OCTET}(?:\.{_OCTET}){{3}})"
_IPV6 = "|".join([
    rf"(?:{_H16}:){{6}}{_LS32}", rf"::(?:{_H16}:){{5}}{_LS32}", rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}", rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}", rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}", rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
])
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = (rf"(?:[0-9]{{4}}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
         rf"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP}-02-29)")
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = rf"{_LABEL}(?:\.{_LABEL})*"
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_URI_CHAR = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})"
FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "ipv4": rf"{_OCTET}(?:\.{_OCTET}){{3}}",
    "ipv6": f"(?:{_IPV6})",
    "hostname": _HOSTNAME,
    "email": rf"{_ATOM}(?:\.{_ATOM})*@{_HOSTNAME}",
    "uri": rf"[A-Za-z][A-Za-z0-9+.\-]*:{_URI_CHAR}*",
}


class SchemaError(NeurosymError):
    """A schema this compiler refuses: ``where`` (file and JSON pointer), the keyword, why."""

    def __init__(self, where: str, keyword: str, why: str):
        self.where, self.keyword, self.why = where, keyword, why
        super().__init__(f"{where}: {keyword}: {why}")


@dataclass(frozen=True)
class SchemaOptions:
    """How a schema is read: ``compact`` allows no whitespace between tokens (default: as
    RFC 8259 allows, around every structural character); ``max_states``: the largest
    string automaton built for a length bound (``--max-states``)."""

    compact: bool = False
    max_states: int = DEFAULT_MAX_STATES


# ---------------------------------------------------------------------- integer ranges as digit automata
def _same_length(a: str, b: str) -> str:
    """Regex for the decimal strings of one length ``len(a) == len(b)`` between ``a`` and ``b``."""
    if not a:
        return ""
    if a[0] == b[0]:
        return re.escape(a[0]) + _same_length(a[1:], b[1:])
    rest = len(a) - 1
    if a[1:] == "0" * rest and b[1:] == "9" * rest:
        return f"[{a[0]}-{b[0]}]" + (f"[0-9]{{{rest}}}" if rest else "")
    parts = [a[0] + _same_length(a[1:], "9" * rest)]
    if int(b[0]) - int(a[0]) > 1:
        parts.append(f"[{int(a[0]) + 1}-{int(b[0]) - 1}]" + (f"[0-9]{{{rest}}}" if rest else ""))
    parts.append(b[0] + _same_length("0" * rest, b[1:]))
    return "(?:" + "|".join(parts) + ")"


def natural_range(lo: int, hi: int | None) -> str | None:
    """Regex for the canonical decimals (no leading zeros) of the integers in ``[lo, hi]``
    (``0 <= lo``; ``hi`` None: unbounded); None when the range is empty."""
    if hi is not None and hi < lo:
        return None
    parts = []
    top = len(str(hi)) if hi is not None else len(str(lo))
    for n in range(len(str(lo)), top + 1):
        a = str(lo) if n == len(str(lo)) else "1" + "0" * (n - 1)
        if n == 1 and a == "0" and (hi is None or hi >= 0):
            a = "0"
        b = str(hi) if hi is not None and n == len(str(hi)) else "9" * n
        if int(a) <= int(b):
            parts.append(_same_length(a, b))
    if hi is None:
        parts.append(f"[1-9][0-9]{{{top},}}")
    return "(?:" + "|".join(parts) + ")"


def integer_range(lo: int | None, hi: int | None) -> str | None:
    """Regex for the JSON integers in ``[lo, hi]`` (either bound None: unbounded), each in
    its canonical spelling (no ``-0``, no leading zeros); None when empty."""
    if lo is not None and hi is not None and hi < lo:
        return None
    parts = []
    if hi is None or hi >= 0:
        pos = natural_range(max(lo, 0) if lo is not None else 0, hi)
        if pos:
            parts.append(pos)
    if lo is None or lo < 0:
        neg = natural_range(max(-hi, 1) if hi is not None else 1, None if lo is None else -lo)
        if neg:
            parts.append("-" + neg)
    return "(?:" + "|".join(parts) + ")" if parts else None


def magnitude_range(lo: int, lo_strict: bool, hi: int | None, hi_strict: bool) -> str | None:
    """Regex for decimals ``I(.F)?`` (no sign, no exponent) whose value ``m`` has
    ``lo <(=) m <(=) hi`` (integers ``0 <= lo``; ``hi`` None: unbounded); None when empty."""
    parts = []
    whole = natural_range(lo + 1 if lo_strict else lo, None if hi is None else hi - 1)
    if whole:  # an integer part strictly inside the bounds: any fraction
        parts.append(whole + r"(?:\.[0-9]+)?")
    if lo_strict and (hi is None or lo < hi):  # m = lo + a non-zero fraction
        parts.append(str(lo) + r"\.[0-9]*[1-9][0-9]*")
    if hi is not None and not hi_strict and (hi > lo if lo_strict else hi >= lo):  # m = hi exactly
        parts.append(str(hi) + r"(?:\.0+)?")
    return "(?:" + "|".join(parts) + ")" if parts else None


def number_range(lo: int | None, lo_strict: bool, hi: int | None, hi_strict: bool) -> str | None:
    """Regex for the JSON numbers (no exponent) in the interval, written without an exponent;
    None when empty."""
    parts = []
    if hi is None or hi > 0 or (hi == 0 and not hi_strict):  # the values >= 0
        low, low_strict = (lo, lo_strict) if lo is not None and lo >= 0 else (0, False)
        pos = magnitude_range(low, low_strict, hi, hi_strict)
        if pos:
            parts.append(pos)
    if lo is None or lo < 0:  # the values < 0: magnitudes m > 0 with -hi <(=) m <(=) -lo
        m_lo, m_lo_strict = (-hi, hi_strict) if hi is not None and hi < 0 else (0, True)
        neg = magnitude_range(m_lo, m_lo_strict, None if lo is None else -lo, lo_strict)
        if neg:
            parts.append("-" + neg)
    return "(?:" + "|".join(parts) + ")" if parts else None


# ---------------------------------------------------------------------- strings
_NORMAL_CLASSES = (0, 4, 5, 6, 7, 8)  # characters written as themselves (class ids of string_dfa's partition)


def string_dfa(lo: int, hi: int | None, quotes: bool = True) -> CharDFA:
    """The minimal DFA of JSON string literals (quotes included, any escape) of ``lo`` to
    ``hi`` characters (``hi`` None: no upper bound), an escape counting as one: built as a
    counter, in time linear in the bound (the regex ``"CHAR{lo,hi}"`` determinises in time
    quadratic in it). ``quotes=False``: the string's body alone."""
    groups = ['"', "\\", "".join(map(chr, range(0x20))), "/", "nrt", "bf", "u", "0123456789acdeACDEF"]
    members: list[list[str]] = [[]] + [sorted(g) for g in groups]
    part = Partition({c: k for k, g in enumerate(members) if k for c in g}, members)
    C = lo if hi is None else hi
    K = len(members)
    # states: 0 start, 1 end, then per count i: N, E, U1, U2, U3, U4
    N, E, U1 = (lambda i: 2 + 6 * i), (lambda i: 3 + 6 * i), (lambda i: 4 + 6 * i)
    trans = np.full((2 + 6 * (C + 1), K), -1, dtype=np.int64)
    if quotes:
        trans[0, 1] = N(0)
    for i in range(C + 1):
        more = hi is None or i < hi
        nxt = N(min(i + 1, C)) if hi is None else N(i + 1) if more else -1
        if i >= lo:
            trans[N(i), 1] = 1
        if not more:
            continue
        for k in _NORMAL_CLASSES:
            trans[N(i), k] = nxt
        trans[N(i), 2] = E(i)
        for k in (1, 2, 4, 5, 6):  # \" \\ \/ \n \r \t \b \f
            trans[E(i), k] = nxt
        trans[E(i), 7] = U1(i)
        for d in range(4):  # \u and four hex digits
            for k in (6, 8):
                trans[U1(i) + d, k] = U1(i) + d + 1 if d < 3 else nxt
    final = np.zeros(trans.shape[0], dtype=bool)
    final[1] = True
    if not quotes:  # the body: start at count 0, stop where the closing quote may come
        final = np.zeros(trans.shape[0], dtype=bool)
        final[[N(i) for i in range(lo, C + 1)]] = True
        trans[:, 1] = np.where(trans[:, 1] == 1, -1, trans[:, 1])
        trans[0] = trans[N(0)]
        final[0] = lo == 0
    order = breadth_first(trans, 0)  # minimal once trimmed: each count is its own state (no refinement rounds)
    remap = np.full(trans.shape[0], -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    kept = trans[order]
    return CharDFA(np.where(kept >= 0, remap[np.maximum(kept, 0)], -1), final[order], part)


def _spelled_body(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


# an escape that spells a character no property name here holds ('"', '\\', a control):
# every key holding one differs from the names (a '\\uXXXX' of any other character is not
# read in keys that must differ from the names: it could spell one of them)
KEY_ESCAPE = r'\\["\\bfnrt]|\\u00[01][0-9a-fA-F]'


def not_among(names: list[str]) -> str | None:
    """Regex for JSON string literals (quotes included) whose text is none of ``names``
    (raw characters, and escapes of the characters that must be escaped); None when a
    name holds such a character (the exclusion is then not written)."""
    if any(_spelled_body(n) != n for n in names):
        return None
    trie: dict = {}
    for name in names:
        node = trie
        for c in name:
            node = node.setdefault(c, {})
        node[""] = {}

    def rest(node: dict) -> str:
        chars = [c for c in node if c]
        alts = [] if "" in node else [""]
        other = char_class(frozenset(chars) | frozenset('"\\') | frozenset(chr(c) for c in range(0x20)), negated=True)
        alts.append(f"(?:{other}|{KEY_ESCAPE}){ANY_CHAR}*")
        alts += [re.escape(c) + rest(node[c]) for c in chars]
        return "(?:" + "|".join(alts) + ")"

    return '"' + rest(trie) + '"'


# ---------------------------------------------------------------------- the compiler
@dataclass
class _Rule:
    lhs: str
    rhs: tuple[Any, ...]  # nonterminal names (str) or terminals (Lit / Lexeme)
    weight: float = 1.0


def _pointer_escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


# one character as json.dumps(ensure_ascii=False) writes it, and any string so written
CANONICAL_CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\bfnrt]|\\u00(?:0[0-7]|0b|0e|0f|1[0-9a-f]))'
CANONICAL_STRING = f'"{CANONICAL_CHAR}*"'


class _Compiler:
    def __init__(self, root: Any, path: str | None, options: SchemaOptions):
        self.root = root
        self.path = path or "<schema>"
        self.options = options
        self.rules: list[_Rule] = []
        self.memo: dict[str, str] = {}
        self.names: set[str] = set()
        self.shared: dict[str, str] = {}
        self.anchors = self._anchor_index()
        self.span = Span(path, 1, 1)
        self.root_id = root.get("$id", root.get("id")) if isinstance(root, dict) else None
        self.max_states = options.max_states

    # -- errors and names
    def where(self, ptr: str) -> str:
        return f"{self.path}#{ptr}"

    def fail(self, ptr: str, keyword: str, why: str) -> SchemaError:
        return SchemaError(self.where(ptr), keyword, why)

    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.]", "_", hint).strip("_.") or "S"
        base = base[:60]
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}~{k}"
        self.names.add(name)
        return name

    def add(self, lhs: str, rhs: list | tuple, weight: float = 1.0) -> None:
        self.rules.append(_Rule(lhs, tuple(rhs), weight))
        if len(self.rules) > MAX_RULES:
            raise self.fail("", "schema", f"compiles to more than {MAX_RULES} rules; split it or lower its counts")

    def lit(self, text: str) -> Lit:
        return Lit(text, self.span)

    def lex(self, source: str) -> Lexeme:
        return Lexeme(source, self.span)

    @property
    def ws(self) -> list:
        if self.options.compact:
            return []
        if "W" not in self.shared:
            self.shared["W"] = name = self.fresh("W")
            self.add(name, [self.lex(WHITESPACE)], 0.1)
            self.add(name, [], 0.9)
        return [self.shared["W"]]

    # -- references
    def _anchor_index(self) -> dict[str, tuple[Any, str]]:
        out: dict[str, tuple[Any, str]] = {}

        def walk(node: Any, ptr: str) -> None:
            if isinstance(node, dict):
                for key in ("$anchor",):
                    if isinstance(node.get(key), str):
                        out["#" + node[key]] = (node, ptr)
                for key in ("$id", "id"):
                    v = node.get(key)
                    if isinstance(v, str) and ptr:
                        out[v] = (node, ptr)
                        if "#" in v:
                            out["#" + v.split("#", 1)[1]] = (node, ptr)
                for k, v in node.items():
                    if k not in ("enum", "const", "default", "examples", "example"):
                        walk(v, f"{ptr}/{_pointer_escape(k)}")
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, f"{ptr}/{i}")

        walk(self.root, "")
        return out

    def resolve(self, ref: Any, ptr: str) -> tuple[Any, str]:
        if not isinstance(ref, str):
            raise self.fail(ptr, "$ref", f"expected a string, got {json.dumps(ref)}")
        target = ref
        if self.root_id and isinstance(self.root_id, str) and ref.startswith(self.root_id.split("#")[0]) and self.root_id.split("#")[0]:
            target = ref[len(self.root_id.split("#")[0]):] or "#"
        if target in self.anchors:
            return self.anchors[target]
        if not target.startswith("#"):
            raise self.fail(ptr, "$ref", f"{ref!r} is not in this document (only local references such as #/$defs/x are read)")
        pointer = unquote(target[1:])
        node: Any = self.root
        if pointer and not pointer.startswith("/"):
            raise self.fail(ptr, "$ref", f"{ref!r} names an anchor this document does not define")
        for part in pointer.split("/")[1:] if pointer else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise self.fail(ptr, "$ref", f"{ref!r} points at nothing in this document")
        return node, pointer

    # -- normalising: references followed, allOf merged
    def flat(self, schema: Any, ptr: str, depth: int = 0) -> tuple[Any, str]:
        """``schema`` with ``$ref`` followed and ``allOf`` merged into one schema (a dict, or
        a boolean); the pointer naming it."""
        if depth > MAX_MERGE_DEPTH:
            raise self.fail(ptr, "$ref", "references or allOf nest too deeply (a cycle through allOf?)")
        if isinstance(schema, bool):
            return schema, ptr
        if not isinstance(schema, dict):
            raise self.fail(ptr, "schema", f"expected an object or a boolean, got {json.dumps(schema)[:60]}")
        if "$ref" in schema:
            target, tptr = self.resolve(schema["$ref"], ptr)
            siblings = {k: v for k, v in schema.items() if k != "$ref" and k not in ANNOTATIONS}
            if not siblings:
                return self.flat(target, tptr, depth + 1)
            schema = {"allOf": [target, siblings]}
            ptr = ptr + "/~ref"  # "~" never stands alone in a real pointer (it is written ~0)
        if "allOf" in schema:
            parts = schema["allOf"]
            if not isinstance(parts, list) or not parts:
                raise self.fail(ptr, "allOf", "expected a non-empty list of schemas")
            rest = {k: v for k, v in schema.items() if k != "allOf" and k not in ANNOTATIONS}
            if not rest and len(parts) == 1:
                return self.flat(parts[0], f"{ptr}/allOf/0", depth + 1)
            merged: Any = True  # the parts in order, then the keywords beside allOf (their properties come in that order)
            for i, part in enumerate(parts):
                merged = self.merge(merged, self.flat(part, f"{ptr}/allOf/{i}", depth + 1)[0], f"{ptr}/allOf/{i}")
            if rest:
                merged = self.merge(merged, self.flat(rest, ptr, depth + 1)[0], ptr)
            return merged, ptr + "/~allOf"
        return schema, ptr

    def merge(self, a: Any, b: Any, ptr: str) -> Any:
        """One schema accepting what both ``a`` and ``b`` accept (both flat)."""
        if a is True or (isinstance(a, dict) and not _assertions(a)):
            return b
        if b is True or (isinstance(b, dict) and not _assertions(b)):
            return a
        if a is False or b is False:
            return False
        out = dict(a)
        for key, vb in b.items():
            if key in ANNOTATIONS and key != "format":
                continue
            if key not in out:
                out[key] = vb
                continue
            va = out[key]
            if va == vb:
                continue
            if key == "type":
                ta = [va] if isinstance(va, str) else list(va)
                tb = [vb] if isinstance(vb, str) else list(vb)
                both = [t for t in ta if t in tb or (t == "integer" and "number" in tb)]
                both += [t for t in tb if t == "integer" and "number" in ta and t not in both]
                out[key] = both
            elif key == "required":
                out[key] = list(dict.fromkeys(list(va) + list(vb)))
            elif key == "properties":
                props = dict(va)
                for name, s in vb.items():
                    props[name] = {"allOf": [props[name], s]} if name in props else s
                out[key] = props
            elif key in ("minimum", "minLength", "minItems", "minProperties", "exclusiveMinimum") and _numbers(va, vb):
                out[key] = max(va, vb)
            elif key in ("maximum", "maxLength", "maxItems", "maxProperties", "exclusiveMaximum") and _numbers(va, vb):
                out[key] = min(va, vb)
            elif key in ("items", "additionalProperties", "additionalItems") and not isinstance(va, list) and not isinstance(vb, list):
                out[key] = {"allOf": [va, vb]}
            elif key in ("enum", "const"):
                ea = va if key == "enum" else [va]
                eb = vb if key == "enum" else [vb]
                out.pop("const", None)
                out["enum"] = [v for v in ea if any(_same(v, w) for w in eb)]
            elif key in ("anyOf", "oneOf"):
                raise self.fail(ptr, key, f"two {key} lists in one allOf are not supported")
            else:
                raise self.fail(ptr, key, f"allOf with two different {key!r} values is not supported")
        if ("properties" in a or "properties" in b) and ("additionalProperties" in a or "additionalProperties" in b
                                                          or "patternProperties" in a or "patternProperties" in b):
            if a.get("properties", {}).keys() != b.get("properties", {}).keys() or "patternProperties" in a or "patternProperties" in b:
                out = self._merge_closed_objects(a, b, out, ptr)
        return out

    def _merge_closed_objects(self, a: dict, b: dict, out: dict, ptr: str) -> dict:
        """allOf of objects where one restricts the properties the other adds: each property
        takes every part's schema for it (its own, or that part's additionalProperties)."""
        if "patternProperties" in a or "patternProperties" in b:
            raise self.fail(ptr, "patternProperties", "allOf over objects with patternProperties is not supported")
        names = list(dict.fromkeys(list(a.get("properties", {})) + list(b.get("properties", {}))))
        props = {}
        for name in names:
            parts = [p.get("properties", {}).get(name, p.get("additionalProperties", True)) for p in (a, b)]
            props[name] = {"allOf": parts}
        out["properties"] = props
        extra = [p.get("additionalProperties", True) for p in (a, b)]
        out["additionalProperties"] = {"allOf": extra}
        return out

    # -- values
    def value(self, schema: Any, ptr: str) -> str:
        """The nonterminal of the JSON texts ``schema`` accepts."""
        if ptr in self.memo:
            return self.memo[ptr]
        flat, fptr = self.flat(schema, ptr)
        if "/~" in fptr:  # a schema merged here: known by its content (recursion through allOf meets itself)
            try:
                fptr = "=" + json.dumps(flat, sort_keys=True)
            except (TypeError, ValueError):
                pass
        if fptr in self.memo:
            self.memo[ptr] = self.memo[fptr]
            return self.memo[fptr]
        name = self.fresh(_hint(ptr if fptr.startswith("=") else fptr))
        self.memo[ptr] = self.memo[fptr] = name
        self.build(name, flat, fptr)
        return name

    def any_value(self) -> str:
        if "Any" not in self.shared:
            self.shared["Any"] = name = self.fresh("Any")
            self.type_alternatives(name, {}, "/~any", TYPES)  # its own pointers: none is a real one
        return self.shared["Any"]

    def build(self, name: str, schema: Any, ptr: str) -> None:
        if schema is True:
            self.add(name, [self.any_value()])
            return
        if schema is False:
            return
        for key, why in REFUSED.items():
            if key in schema:
                raise self.fail(f"{ptr}/{key}", key, why)
        if "enum" in schema or "const" in schema:
            self.constants(name, schema, ptr)
            return
        for key in ("anyOf", "oneOf"):
            if key in schema:
                self.branches(name, schema, ptr, key)
                return
        types = schema.get("type", list(TYPES))
        types = [types] if isinstance(types, str) else types
        if not isinstance(types, list) or any(t not in TYPES for t in types):
            raise self.fail(f"{ptr}/type", "type", f"expected one of {', '.join(TYPES)} or a list of them, got {json.dumps(schema.get('type'))}")
        if "integer" in types and "number" in types:
            types = [t for t in types if t != "integer"]
        self.type_alternatives(name, schema, ptr, types)

    def branches(self, name: str, schema: dict, ptr: str, key: str) -> None:
        options = schema[key]
        if not isinstance(options, list) or not options:
            raise self.fail(f"{ptr}/{key}", key, "expected a non-empty list of schemas")
        rest = {k: v for k, v in schema.items() if k != key}
        flats = []
        for i, option in enumerate(options):
            flat, fptr = self.flat(option, f"{ptr}/{key}/{i}")
            if rest and _assertions(rest):  # the branch's own properties first, then those beside the oneOf/anyOf
                flat = self.merge(flat, self.flat(rest, ptr)[0], f"{ptr}/{key}/{i}")
                fptr = f"{ptr}/{key}/{i}/~merged"
            flats.append((flat, fptr))
        if key == "oneOf" and len(flats) > 1 and not self.exclusive([f for f, _ in flats]):
            raise self.fail(f"{ptr}/oneOf", "oneOf", "its branches may overlap (an instance matching two is invalid, "
                            "which a grammar cannot check); neurosym reads oneOf only where the branches differ in type "
                            "or in a constant of a required property")
        for flat, fptr in flats:
            self.add(name, [self.value(flat, fptr)])

    def exclusive(self, flats: list[Any]) -> bool:
        """Whether no instance can match two of these schemas (a sufficient test)."""
        if any(f is False for f in flats):
            flats = [f for f in flats if f is not False]
        if any(not isinstance(f, dict) for f in flats):
            return len(flats) <= 1
        kinds = [_type_set(f) for f in flats]
        if all(not (kinds[i] & kinds[j]) for i in range(len(kinds)) for j in range(i)):
            return True
        if all(_constants(f) is not None for f in flats):
            sets = [_constants(f) for f in flats]
            return all(not any(_same(x, y) for x in sets[i] for y in sets[j]) for i in range(len(sets)) for j in range(i))
        if all(_type_set(f) == {"object"} for f in flats):
            common = set.intersection(*[set(f.get("required", [])) for f in flats])
            for prop in common:
                sets = []
                for f in flats:
                    sub = f.get("properties", {}).get(prop)
                    sub = self.flat(sub, "")[0] if sub is not None else None
                    sets.append(_constants(sub) if isinstance(sub, dict) else None)
                if all(s is not None for s in sets) and all(
                        not any(_same(x, y) for x in sets[i] for y in sets[j]) for i in range(len(sets)) for j in range(i)):
                    return True
        return False

    def constants(self, name: str, schema: dict, ptr: str) -> None:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        if not isinstance(values, list):
            raise self.fail(f"{ptr}/enum", "enum", "expected a list of values")
        if "enum" in schema and "const" in schema:
            values = [v for v in values if _same(v, schema["const"])]
        others = {k for k in _assertions(schema) if k not in ("enum", "const", "type")}
        if others:
            k = sorted(others)[0]
            raise self.fail(f"{ptr}/{k}", k, "enum or const together with other assertions is not supported")
        types = schema.get("type")
        if types is not None:
            types = [types] if isinstance(types, str) else types
            values = [v for v in values if _type_of(v) in types or (_type_of(v) == "integer" and "number" in types)]
        for i, v in enumerate(values):
            self.add(name, self.constant(v, f"{ptr}/enum/{i}"))

    def constant(self, v: Any, ptr: str) -> list:
        """Symbols spelling the JSON value ``v`` (whitespace allowed inside arrays and objects)."""
        if isinstance(v, dict):
            out: list = [self.lit("{")] + self.ws
            for i, (k, x) in enumerate(v.items()):
                if i:
                    out += [self.lit(",")] + self.ws
                out += [self.lit(json.dumps(k, ensure_ascii=False))] + self.ws + [self.lit(":")] + self.ws + self.constant(x, ptr) + self.ws
            return out + [self.lit("}")]
        if isinstance(v, list):
            out = [self.lit("[")] + self.ws
            for i, x in enumerate(v):
                if i:
                    out += [self.lit(",")] + self.ws
                out += self.constant(x, ptr) + self.ws
            return out + [self.lit("]")]
        if isinstance(v, float) and not math.isfinite(v):
            raise self.fail(ptr, "enum", f"{v} is not a JSON value")
        return [self.lit(json.dumps(v, ensure_ascii=False))]

    def type_alternatives(self, name: str, schema: dict, ptr: str, types: list[str] | tuple[str, ...]) -> None:
        for t in types:
            if t == "null":
                self.add(name, [self.lit("null")])
            elif t == "boolean":
                self.add(name, [self.lit("true")])
                self.add(name, [self.lit("false")])
            elif t in ("integer", "number"):
                src = self.number(schema, ptr, t)
                if src is not None:
                    self.add(name, [self.lex(src)])
            elif t == "string":
                long = self.long_string(schema, ptr)
                src = None if long is not None else self.string(schema, ptr)
                if long is not None:
                    self.add(name, [long])
                elif src is not None:
                    self.add(name, [self.lex(src)])
            elif t == "array":
                self.add(name, [self.array(schema, ptr)])
            elif t == "object":
                self.add(name, [self.object(schema, ptr)])

    # -- scalars
    def number(self, schema: dict, ptr: str, t: str) -> str | None:
        if "multipleOf" in schema:
            m = schema["multipleOf"]
            if not (t == "integer" and isinstance(m, (int, float)) and not isinstance(m, bool) and m == 1):
                raise self.fail(f"{ptr}/multipleOf", "multipleOf", "multipleOf is read for integers with multipleOf 1 only")
        lo, lo_strict = self.bound(schema, ptr, t, "minimum", "exclusiveMinimum", max)
        hi, hi_strict = self.bound(schema, ptr, t, "maximum", "exclusiveMaximum", min)
        if t == "integer":
            if lo is None and hi is None:
                return INTEGER
            return integer_range(lo, hi)
        if lo is None and hi is None:
            return NUMBER
        return number_range(lo, lo_strict, hi, hi_strict)

    def bound(self, schema: dict, ptr: str, t: str, inclusive: str, exclusive: str, tighter) -> tuple[int | None, bool]:
        """The tightest of ``inclusive`` and ``exclusive`` (a number, or draft-04's boolean
        flag on ``inclusive``), as ``(bound or None, strict)``; integers: always inclusive."""
        found: list[tuple[float, bool]] = []
        flag = schema.get(exclusive) is True
        for key, strict in ((inclusive, flag), (exclusive, True)):
            v = schema.get(key)
            if v is None or isinstance(v, bool) and key == exclusive:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise self.fail(f"{ptr}/{key}", key, f"expected a finite number, got {json.dumps(v)}")
            found.append((v, strict))
        if not found:
            return None, False
        lower = tighter is max
        if t == "integer":  # the integers past a bound: an inclusive integer bound
            ints = [(math.floor(v) + 1 if strict else math.ceil(v)) if lower else (math.ceil(v) - 1 if strict else math.floor(v))
                    for v, strict in found]
            return tighter(ints), False
        for v, _ in found:
            if float(v) != math.floor(v):
                raise self.fail(f"{ptr}/{inclusive}", inclusive, f"only integer bounds are read exactly for numbers; {v} is not an integer")
        # the tighter bound; at a tie, the strict one
        v, strict = sorted(found, key=lambda f: (f[0] if lower else -f[0], f[1]))[-1]
        return int(v), strict

    def string(self, schema: dict, ptr: str) -> str | None:
        lo, hi = self.count(schema, ptr, "minLength", "maxLength", MAX_LENGTH)
        fmt = schema.get("format")
        fmt = fmt if isinstance(fmt, str) and fmt in FORMATS else None
        pattern = schema.get("pattern")
        if pattern is not None and fmt is not None:
            raise self.fail(f"{ptr}/pattern", "pattern", "pattern together with format is not supported")
        if hi is not None and hi < lo:
            return None
        counted = f'"{ANY_CHAR}{{{lo},{"" if hi is None else hi}}}"'  # the length bounds, as a regex
        if fmt is not None:
            source = f'"{FORMATS[fmt]}"'
        elif pattern is not None:
            if not isinstance(pattern, str):
                raise self.fail(f"{ptr}/pattern", "pattern", f"expected a string, got {json.dumps(pattern)}")
            try:
                source = '"' + json_spelling(ecma_syntax(pattern)) + '"'
            except PatternUnsupported as err:
                raise self.fail(f"{ptr}/pattern", "pattern", f"{pattern!r}: {err}") from None
        elif lo == 0 and hi is None:
            return f'"{ANY_CHAR}*"'
        if 6 * max(lo, hi or 0) > self.max_states:  # the counter's size, known before it is built
            key = "maxLength" if hi is not None else "minLength"
            raise self.fail(f"{ptr}/{key}", key, f"a string automaton of about {6 * max(lo, hi or 0)} states, above the limit of "
                            f"{self.max_states} (a length bound costs about 6 states per character; raise --max-states)")
        if pattern is None and fmt is None:
            return register_pattern(counted, self.sized(string_dfa(lo, hi), ptr, "maxLength" if hi is not None else "minLength"))
        if lo == 0 and hi is None:
            return source
        key = "pattern" if pattern is not None else "format"
        try:  # both: the intersection, said by a lookahead that re reads and built as a product here
            dfa = product(pattern_dfa(source), string_dfa(lo, hi), max_states=self.max_states)
        except NeurosymError as err:
            raise self.fail(f"{ptr}/{key}", key, f"{key} with minLength/maxLength: {err}") from None
        # a JSON string literal ends at its first unescaped quote, so the lookahead reads the same literal as the pattern
        return register_pattern(f"(?={counted}){source}", self.sized(dfa, ptr, key))

    def key_lexeme(self, keys: str, minus_patterns: list[str], minus_names: list[str]) -> str:
        """A lexeme for the keys of regex ``keys`` that match none of ``minus_patterns`` and
        spell none of ``minus_names`` (bodies, canonically spelled): a DFA difference,
        registered under a regex with a negative lookahead that says the same."""
        if not minus_patterns and not minus_names:
            return keys
        if not minus_patterns and keys == CANONICAL_STRING:
            exact = not_among([json.loads(f'"{n}"') for n in minus_names])
            if exact is not None:
                return exact
        dfa = pattern_dfa(keys)
        for src in minus_patterns:
            dfa = product(dfa, pattern_dfa(src), keep="first", max_states=self.max_states)
        if minus_names:
            dfa = product(dfa, words_dfa(['"' + n + '"' for n in minus_names]), keep="first", max_states=self.max_states)
        banned = "(?:" + "|".join(minus_patterns + [re.escape('"' + n + '"') for n in minus_names]) + ")"
        return register_pattern(f"(?!{banned}){keys}", dfa)  # (a literal ends at its first unescaped quote)

    def sized(self, dfa: CharDFA, ptr: str, key: str) -> CharDFA:
        """``dfa`` if it has at most ``max_states`` states, else a SchemaError at ``key``."""
        if dfa.num_states > self.max_states:
            raise self.fail(f"{ptr}/{key}", key, f"the string automaton needs {dfa.num_states} states, above the limit of "
                            f"{self.max_states} (a length bound costs about 6 states per character; raise --max-states)")
        return dfa

    def long_string(self, schema: dict, ptr: str) -> str | None:
        """A string whose length bound is too long for one counter automaton, and no pattern
        or format: ``"`` blocks ``"``, written as a grammar of blocks of exactly
        :data:`STRING_BLOCK` characters and one shorter tail (one split per length: no
        ambiguity); None for every other string."""
        lo, hi = self.count(schema, ptr, "minLength", "maxLength", MAX_LENGTH)
        if 6 * max(lo, hi or 0) <= self.max_states // 2 or schema.get("pattern") is not None or (
                isinstance(schema.get("format"), str) and schema["format"] in FORMATS) or (hi is not None and hi < lo):
            return None
        k = STRING_BLOCK
        block = self.lex(register_pattern(f"{ANY_CHAR}{{{k}}}", string_dfa(k, k, quotes=False)))
        name = self.fresh(_hint(ptr) + ".long")
        last = (lo // k) + 1 if hi is None else hi // k  # blocks: at most this many (hi None: from here on, repeat)
        for j in range(last + 1):
            nt = f"{name}.{j}"
            self.names.add(nt)
            a, b = max(0, lo - j * k), (k - 1) if hi is None else min(k - 1, hi - j * k)
            if a <= b:
                if a == 0:
                    self.add(nt, [])
                if b >= max(1, a):
                    self.add(nt, [self.lex(register_pattern(f"{ANY_CHAR}{{{max(1, a)},{b}}}", string_dfa(max(1, a), b, quotes=False)))])
            if hi is None and j == last:
                self.add(nt, [block, nt])
            elif (j + 1) * k <= (hi if hi is not None else (j + 1) * k):
                self.add(nt, [block, f"{name}.{j + 1}"])
        self.add(name, [self.lit('"'), f"{name}.0", self.lit('"')])
        return name

    def count(self, schema: dict, ptr: str, low: str, high: str, cap: int = MAX_ITEMS) -> tuple[int, int | None]:
        out = []
        for key, default in ((low, 0), (high, None)):
            v = schema.get(key, default)
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or float(v) != math.floor(v):
                    raise self.fail(f"{ptr}/{key}", key, f"expected a non-negative integer, got {json.dumps(v)}")
                v = int(v)
                if v > cap:
                    raise self.fail(f"{ptr}/{key}", key, f"{v} is above the largest count read exactly ({cap})")
            out.append(v)
        return out[0], out[1]

    # -- arrays
    def array(self, schema: dict, ptr: str) -> str:
        if schema.get("uniqueItems") is True:
            lo, hi = self.count(schema, ptr, "minItems", "maxItems")
            if hi is None or hi > 1:
                raise self.fail(f"{ptr}/uniqueItems", "uniqueItems", "uniqueItems is not supported (a grammar cannot compare items)")
        lo, hi = self.count(schema, ptr, "minItems", "maxItems")
        items = schema.get("items", True)
        if "prefixItems" in schema:
            prefix, rest = schema["prefixItems"], items
            where_rest = f"{ptr}/items"
        elif isinstance(items, list):
            prefix, rest = items, schema.get("additionalItems", True)
            where_rest = f"{ptr}/additionalItems"
        else:
            prefix, rest = [], items
            where_rest = f"{ptr}/items"
        if not isinstance(prefix, list):
            raise self.fail(f"{ptr}/prefixItems", "prefixItems", "expected a list of schemas")
        elems = [self.value(s, f"{ptr}/{'prefixItems' if 'prefixItems' in schema else 'items'}/{i}") for i, s in enumerate(prefix)]
        rest_nt = self.value(rest, where_rest) if rest is not False else None
        if rest is False:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        name = self.fresh(_hint(ptr) + ".array")
        cap = max(len(prefix), lo, 1)  # from this index on (unbounded lists) the tail repeats itself
        if hi is not None and hi < lo:
            return name  # no rule: no array is valid
        tails: dict[int, str] = {}

        def tail(j: int) -> str:
            """Elements from index ``j`` on (``j`` emitted); ``W`` after each, ``,`` before all but the first."""
            key = min(j, cap) if hi is None else j
            if key in tails:
                return tails[key]
            nt = tails[key] = self.fresh(f"{name}.{key}")
            elem = elems[j] if j < len(elems) else rest_nt
            sep = [] if j == 0 else [self.lit(",")] + self.ws
            if j >= lo:
                self.add(nt, [])
            if (hi is None or j < hi) and elem is not None:
                nxt = nt if hi is None and j >= cap else tail(j + 1)
                self.add(nt, sep + [elem] + self.ws + [nxt])
            return nt

        self.add(name, [self.lit("[")] + self.ws + [tail(0), self.lit("]")])
        return name

    # -- objects
    def object(self, schema: dict, ptr: str) -> str:
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise self.fail(f"{ptr}/properties", "properties", "expected an object of schemas")
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise self.fail(f"{ptr}/required", "required", "expected a list of property names")
        patterns = schema.get("patternProperties", {})
        extra = schema.get("additionalProperties", True)
        if not isinstance(patterns, dict):
            raise self.fail(f"{ptr}/patternProperties", "patternProperties", "expected an object of schemas")
        order = list(props) + [r for r in dict.fromkeys(required) if r not in props]
        # each pattern: its key regex (spelled canonically), its DFA, its schema; a defined or
        # required name it matches takes that schema too (allOf), as the specification says
        pattern_keys: list[tuple[str, str, Any]] = []
        also: dict[str, list] = {}
        for pat, sub in patterns.items():
            where = f"{ptr}/patternProperties/{_pointer_escape(pat)}"
            try:
                syntax = ecma_syntax(pat)
                search = ecma_regex_search(pat)
            except PatternUnsupported as err:
                raise self.fail(where, "patternProperties", f"{pat!r}: {err}") from None
            for key in order:
                if search.search(key):
                    also.setdefault(key, []).append(sub)
            pattern_keys.append(('"' + json_spelling(syntax) + '"', where, sub))
        live = [(src, where, sub) for src, where, sub in pattern_keys if sub is not False]
        for i in range(len(live)):  # a key two patterns match must meet both schemas: refused unless they cannot meet
            for j in range(i):
                if live[i][2] != live[j][2] and product(pattern_dfa(live[i][0]), pattern_dfa(live[j][0])).final.any():
                    raise self.fail(live[i][1], "patternProperties", f"keys may match two patterns with different schemas "
                                    f"({live[j][1].rsplit('/', 1)[-1]!r} too): not supported")
        lo, hi = self.count(schema, ptr, "minProperties", "maxProperties")
        open_ended = bool(live) or extra is not False
        if lo > len(set(required)) or (hi is not None and (open_ended or hi < len(order))):
            key = "minProperties" if lo > len(set(required)) else "maxProperties"
            raise self.fail(f"{ptr}/{key}", key, f"{key} is read only where the required properties (or the closed set of properties) already meet it")

        name = self.fresh(_hint(ptr) + ".object")
        members = []
        for key in order:
            sub = props[key] if key in props else extra
            if key in also:
                sub = {"allOf": [sub, *also[key]]}
            members.append((self.lit(json.dumps(key, ensure_ascii=False)), self.value(sub, f"{ptr}/properties/{_pointer_escape(key)}"), key in required))
        extras = [(self.key_lexeme(src, [], []), self.value(sub, where)) for src, where, sub in live]
        names = [_spelled_body(n) for n in order]
        if live:  # a pattern key is none of the names
            extras = [(self.key_lexeme(src, [], names), nt) for (src, _, _), (_, nt) in zip(live, extras)]
        if extra is not False:
            others = self.key_lexeme(CANONICAL_STRING, [src for src, _, _ in pattern_keys], names)
            extras.append((others, self.value(extra, f"{ptr}/additionalProperties")))
        colon = self.ws + [self.lit(":")] + self.ws
        first: dict[int, str] = {}
        later: dict[int, str] = {}

        def rest(i: int, started: bool) -> str:
            table = later if started else first
            if i in table:
                return table[i]
            nt = table[i] = self.fresh(f"{name}.{'more' if started else 'first'}{i}")
            sep = [self.lit(",")] + self.ws if started else []
            if i == len(members):
                self.add(nt, [])
                for key_src, val in extras:
                    self.add(nt, sep + [self.lex(key_src)] + colon + [val] + self.ws + [rest(i, True)])
                return nt
            key_lit, val, req = members[i]
            self.add(nt, sep + [key_lit] + colon + [val] + self.ws + [rest(i + 1, True)])
            if not req:  # left out
                self.add(nt, [rest(i + 1, started)])
            # another property before member i (no nonterminal of its own: an other property
            # between left-out ones has one derivation per place, whose probabilities add up)
            for key_src, other in extras:
                self.add(nt, sep + [self.lex(key_src)] + colon + [other] + self.ws + [rest(i, True)])
            return nt

        self.add(name, [self.lit("{")] + self.ws + [rest(0, False), self.lit("}")])
        return name

    # -- the grammar
    def grammar(self) -> Grammar:
        start = self.fresh("Json")
        top = self.value(self.root, "")
        self.add(start, self.ws + [top] + self.ws)
        return consistent(self._grammar(start, self._live(start)))

    def _live(self, start: str) -> list[_Rule]:
        """The rules that derive a document: non-generating and unreachable ones dropped."""
        prods = [Production(r.lhs, tuple(NT(s, self.span) if isinstance(s, str) else s for s in r.rhs), 1.0, None, self.span, self.span)
                 for r in self.rules]
        gen = generating(prods)
        if start not in gen:
            raise self.fail("", "schema", "no JSON value satisfies the schema")
        rules = [r for r in self.rules if all(not isinstance(s, str) or s in gen for s in r.rhs) and r.lhs in gen]
        by_lhs: dict[str, list[_Rule]] = {}
        for r in rules:
            by_lhs.setdefault(r.lhs, []).append(r)
        seen, todo = {start}, [start]
        while todo:
            for r in by_lhs.get(todo.pop(), []):
                for s in r.rhs:
                    if isinstance(s, str) and s not in seen:
                        seen.add(s)
                        todo.append(s)
        return [r for r in rules if r.lhs in seen]

    def _grammar(self, start: str, rules: list[_Rule]) -> Grammar:
        totals: dict[str, float] = {}
        for r in rules:
            totals[r.lhs] = totals.get(r.lhs, 0.0) + r.weight
        ordered = sorted(rules, key=lambda r: r.lhs != start)
        prods = [Production(r.lhs, tuple(NT(s, self.span) if isinstance(s, str) else s for s in r.rhs), r.weight / totals[r.lhs],
                            r.weight, self.span, self.span) for r in ordered]
        return Grammar(self.path, start, self.span, prods, {}, True, "prob", "")


def ecma_regex_search(pattern: str) -> re.Pattern:
    """The pattern as a Python ``re`` searching a string (to test property names)."""
    return re.compile(ecma_to_python(pattern))


def _hint(ptr: str) -> str:
    parts = [p for p in ptr.split("/") if p not in ("", "properties", "items", "$defs", "definitions")]
    return ".".join(parts[-3:]) or "root"


def _numbers(a: Any, b: Any) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))


def _same(a: Any, b: Any) -> bool:
    """JSON equality (1 == 1.0, but True is not 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _type_of(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _assertions(schema: dict) -> set[str]:
    return {k for k in schema if k not in ANNOTATIONS or k == "format"} & (READ | set(REFUSED) | {"format"})


def _constants(schema: Any) -> list | None:
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return schema["enum"]
    return None


def _type_set(schema: dict) -> set[str]:
    consts = _constants(schema)
    if consts is not None:
        return {"number" if t == "integer" else t for t in map(_type_of, consts)}
    t = schema.get("type")
    if t is None:
        return set(TYPES) - {"integer"}
    ts = {t} if isinstance(t, str) else set(t)
    return {"number" if x == "integer" else x for x in ts}


def schema_grammar(schema: Any, path: str | None = None, options: SchemaOptions = SchemaOptions()) -> Grammar:
    """The ``.pcfg`` grammar (over strings, terminals concatenated) of the JSON texts of the
    instances ``schema`` accepts; :class:`SchemaError` for what is not supported."""
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"{path or '<schema>'}#", "schema", f"expected a JSON object or a boolean, got {type(schema).__name__}")
    try:
        return _Compiler(schema, path, options).grammar()
    except RecursionError:
        raise SchemaError(f"{path or '<schema>'}#", "schema", "nests too deeply to compile (definitions hundreds of levels deep)") from None


def read_schema(path: str | Path) -> Any:
    """The JSON value in the file ``path`` (a schema), with a clear error for bad JSON."""
    path = Path(path)
    try:
        data = read_input(path, SCHEMA_LIMIT_BYTES)
    except OSError as err:
        raise NeurosymError(f"{path}: {err.strerror or err}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise NeurosymError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise NeurosymError(f"{path}:{err.lineno}:{err.colno}: not JSON: {err.msg}") from None
    except RecursionError:
        raise NeurosymError(f"{path}: the JSON nests too deeply") from None


def load_schema_grammar(path: str | Path, options: SchemaOptions = SchemaOptions()) -> Grammar:
    """:func:`schema_grammar` of the schema in the file ``path``."""
    return schema_grammar(read_schema(path), str(path), options)


__all__ = [
    "FORMATS", "SchemaError", "SchemaOptions", "integer_range", "load_schema_grammar", "not_among", "number_range",
    "read_schema", "schema_grammar",
]
