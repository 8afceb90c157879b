"""Strings of a regex drawn without neurosym: random walks guided by the ``regex``
package's partial matching.

The benchmarks that compare neurosym's token index with other engines need strings of
each pattern that neurosym did not produce, or a check of the form "neurosym refuses
none of them" could not fail. A walk here grows a string one character at a time; a
character may be taken only if ``regex.fullmatch(pattern, text + c, partial=True)``
still matches (the text stays a prefix of some match), and the walk may stop only where
``regex.fullmatch(pattern, text)`` matches in full. Every string returned is checked
once more with Python's own ``re.fullmatch``.

To keep rare but necessary characters (the ``@`` of an e-mail address, the ``T`` of a
time stamp) from drowning among the many letters a class allows, the allowed characters
of a step are grouped (digits, lower-case letters, upper-case letters, and every other
character on its own), a group is drawn uniformly, then a character within it.
"""

from __future__ import annotations

import random
import re
import string

import regex

from neurosym.errors import NeurosymError

# printable ASCII, space included (no other whitespace: none of the benchmarks' patterns asks for it)
ALPHABET = "".join(chr(c) for c in range(32, 127))


def char_group(c: str) -> str:
    """The group a character is drawn in: ``digit``, ``lower``, ``upper``, or itself."""
    if c in string.digits:
        return "digit"
    if c in string.ascii_lowercase:
        return "lower"
    if c in string.ascii_uppercase:
        return "upper"
    return c


def sample_matches(
    pattern: str,
    n: int,
    seed: int = 0,
    max_len: int = 40,
    stop_prob: float = 0.3,
    alphabet: str = ALPHABET,
    attempts: int = 50,
) -> list[str]:
    """Up to ``n`` distinct strings of at most ``max_len`` characters that fully match
    ``pattern`` under Python's ``re``, drawn by partial-match-guided random walks
    (``attempts * n`` walks at most; a walk that outgrows ``max_len`` is dropped).

    Raises ``NeurosymError`` if the pattern does not compile under ``re``, or if no walk
    produced a string."""
    try:
        checker = re.compile(pattern)
        guide = regex.compile(pattern)
    except (re.error, regex.error) as err:
        raise NeurosymError(f"regex walk: {pattern!r} does not compile: {err}") from err
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    for _ in range(attempts * n):
        if len(out) == n:
            break
        s = walk(guide, rng, max_len, stop_prob, alphabet)
        if s is None or s in seen:
            continue
        if not checker.fullmatch(s):  # the regex package and re disagree on this string: not used
            continue
        seen.add(s)
        out.append(s)
    if not out:
        raise NeurosymError(f"regex walk: no string of {pattern!r} within {max_len} characters")
    return out


def walk(guide: regex.Pattern, rng: random.Random, max_len: int, stop_prob: float, alphabet: str) -> str | None:
    """One walk: a full match of ``guide`` of at most ``max_len`` characters, or None."""
    text = ""
    while True:
        complete = guide.fullmatch(text) is not None
        allowed = [c for c in alphabet if guide.fullmatch(text + c, partial=True) is not None]
        if complete and (not allowed or rng.random() < stop_prob):
            return text
        if not allowed or len(text) >= max_len:
            return None
        groups: dict[str, list[str]] = {}
        for c in allowed:
            groups.setdefault(char_group(c), []).append(c)
        text += rng.choice(groups[rng.choice(sorted(groups))])
