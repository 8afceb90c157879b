"""The byte-level DFA reads exactly well-formed UTF-8: checked against Python's own strict
decoder on every two-byte start of a multi-byte character, and on random byte strings
(acceptance and viability of prefixes)."""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.compile.dfa import CharDFA, Partition
from neurosym.compile.regex import compile_regex

HYP = dict(deadline=None, derandomize=True, database=None, max_examples=300)

# characters at the edges of every UTF-8 length and of the surrogate gap, listed
# explicitly in a partition so that both the generic and the explicit decoder nodes are met
EDGES = ["\x7f", "\x80", "\u07ff", "\u0800", "\u0fff", "\u1000", "\ud7ff", "\ue000", "\uffff",
         "\U00010000", "\U0003ffff", "\U00040000", "\U000fffff", "\U00100000", "\U0010ffff", "é", "中", "😀"]


def universal(explicit: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The byte table of the language of all strings, with ``explicit`` characters in
    classes of their own (so the decoder builds nodes for their prefixes)."""
    members = [[]] + [[c] for c in explicit]
    part = Partition({c: k + 1 for k, c in enumerate(explicit)}, members)
    dfa = CharDFA(np.zeros((1, len(members)), dtype=np.int64), np.array([True]), part)
    return dfa.byte_dfa()


TABLES = {"generic": universal([]), "explicit": universal(EDGES)}


def run(table: tuple[np.ndarray, np.ndarray], data: bytes) -> tuple[bool, bool]:
    """(every prefix viable, whole string accepted) under a byte table."""
    trans, final = table
    q = 0
    for b in data:
        q = int(trans[q, b])
        if q < 0:
            return False, False
    return True, bool(final[q])


def decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@lru_cache(maxsize=1)
def char_prefixes() -> frozenset[bytes]:
    """Every proper non-empty prefix of the encoding of some character (surrogates have none)."""
    out = set()
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        enc = chr(cp).encode("utf-8")
        out.update(enc[:i] for i in range(1, len(enc)))
    return frozenset(out)


def viable(data: bytes) -> bool:
    """Some completion of ``data`` decodes: the whole decodes, or all but a tail of at
    most three bytes does and the tail begins a character."""
    return decodes(data) or any(decodes(data[:-k]) and data[-k:] in char_prefixes() for k in (1, 2, 3) if k <= len(data))


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_lead_byte_with_every_first_continuation_byte(kind):
    """Exhaustive over lead bytes C0-FF and second bytes 00-FF: the two bytes are a viable
    prefix exactly when some completion decodes, and every completion with continuation
    bytes 80, BF (the ends of the range) is accepted exactly when Python decodes it."""
    table = TABLES[kind]
    for lead in range(0xC0, 0x100):
        for second in range(0x100):
            pair = bytes([lead, second])
            assert run(table, pair)[0] == viable(pair), pair.hex()
            for tail in [b"", b"\x80", b"\xbf", b"\x80\x80", b"\xbf\xbf", b"\x80\xbf", b"\xbf\x80", b"a", b"\x80a"]:
                data = pair + tail
                assert run(table, data)[1] == decodes(data), data.hex()


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_the_defects_of_the_old_decoder_are_rejected(kind):
    """Overlong, surrogate and out-of-range sequences (each accepted before the fix)."""
    table = TABLES[kind]
    for bad in [b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf4\xbf\xbf\xbf"]:
        assert not decodes(bad)
        assert run(table, bad) == (False, False), bad.hex()
        assert not run(table, bad[:2])[0], bad[:2].hex()
    for good in [c.encode() for c in EDGES]:
        assert run(table, good) == (True, True), good.hex()


@pytest.mark.parametrize("kind", sorted(TABLES))
@settings(**HYP)
@given(data=st.binary(max_size=12) | st.lists(st.sampled_from([b"\xe0", b"\xed", b"\xf0", b"\xf4", b"\xc2", b"\x80", b"\x8f", b"\x90", b"\x9f", b"\xa0", b"\xbf", b"a", "😀".encode(), "中".encode()]), max_size=8).map(b"".join))
def test_random_byte_strings_agree_with_python(kind, data):
    table = TABLES[kind]
    ok, accepted = run(table, data)
    assert accepted == decodes(data)
    assert ok == viable(data)


@settings(**HYP)
@given(text=st.text(alphabet="aé中😀\U0010ffff\ue000\ud7ff", max_size=6), cut=st.integers(0, 30), junk=st.binary(max_size=3))
def test_a_pattern_over_bytes_accepts_the_encodings_of_its_strings_only(text, cut, junk):
    """With a real pattern: bytes are accepted iff they decode to a string the regex matches."""
    pattern = "[a\u00e9\u4e2d\U0001f600\ue000]*"
    auto = compile_regex(pattern)
    table = auto.char_dfa.byte_dfa()
    data = text.encode("utf-8")
    data = data[:cut] + junk + data[cut:]
    expected = decodes(data) and re.fullmatch(pattern, data.decode("utf-8")) is not None
    assert run(table, data)[1] == expected
