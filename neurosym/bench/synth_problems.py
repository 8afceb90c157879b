"""The problem sets of ``neurosym bench synth``, read from the shared data.

* **AlphaRegex** (``shared/data/alpharegex``, 25 problems over {0, 1}): each file is a
  description, ``++`` and the positives, ``--`` and the negatives; ``X`` stands for
  both symbols and is expanded (``1X`` -> ``10``, ``11``); ``reference.tsv`` holds the
  regex the paper reports for each problem.
* **Regel** (``shared/data/regel``: ``so/`` 122 StackOverflow and ``deepregex/`` 200
  problems): examples ``"s",+`` / ``"s",-`` and a ground truth in Regel's DSL. Only
  problems whose ground truth avoids ``and``, ``not`` and ``notcc`` (intersection and
  complement) are used; their ground truth is translated to a Python regex
  (:func:`regel_to_regex`: ``concat or optional star repeat repeatatleast
  repeatrange contain startwith endwith`` and the classes ``<num> <let> <low> <cap>
  <any> <alphanum> <vow> <hex> <num1-9> <spec>``; DeepRegex's constants ``<m0>``,
  ``<m1>``, ... are the quoted strings of the description, in order). The fixed
  development / test halves are :mod:`neurosym.bench.regel_split`.

* **Everyday formats** (:data:`EVERYDAY_FORMATS`, written here, no data set): a US ZIP
  code, an ISO date and a hex colour, each with positives, negatives, fresh valid
  strings and near misses, the test of format induction as a new user would try it.

Each problem is a dict ``name, description, positives, negatives`` (AlphaRegex:
``has_x``; usable Regel problems: ``gt`` and ``regex``, skipped ones a ``reason``).
"""

from __future__ import annotations

import re
import string
import warnings
from collections.abc import Sequence
from pathlib import Path

from neurosym.data import shared_data, shipped_file
from neurosym.errors import NeurosymError
from neurosym.synth import regex_ast as ra
from neurosym.synth.simplify import simplify

# ---------------------------------------------------------------------- AlphaRegex


def expand_x(line: str) -> list[str]:
    """Every string ``line`` stands for, ``X`` being 0 or 1."""
    out = [""]
    for c in line:
        out = [o + x for o in out for x in ("01" if c == "X" else c)]
    return out


def load_alpharegex(folder: str | Path | None = None) -> list[dict]:
    """The AlphaRegex problems: ``name, description, positives, negatives``."""
    folder = Path(folder) if folder is not None else shared_data("alpharegex") / "benchmarks"
    problems = []
    for path in sorted(folder.iterdir(), key=lambda p: (int(re.match(r"no(\d+)", p.name).group(1)), p.name)):
        desc, pos, neg, mode, has_x = [], [], [], None, False
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if line == "++":
                mode = pos
            elif line == "--":
                mode = neg
            elif mode is None:
                desc.append(line)
            elif line:
                mode.extend(expand_x(line))
                has_x = has_x or "X" in line
        problems.append(
            {
                "name": path.name,
                "description": " ".join(desc).strip(),
                "positives": sorted(set(pos)),
                "negatives": sorted(set(neg)),
                "has_x": has_x,
            }
        )
    return problems


def load_alpharegex_reference(path: str | Path | None = None) -> dict[str, str]:
    """The regex the AlphaRegex paper reports for each problem (Python syntax), by
    problem name (``reference.tsv``: name, paper syntax, Python syntax)."""
    path = Path(path) if path is not None else shared_data("alpharegex") / "reference.tsv"
    out = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 3:
            raise NeurosymError(f"{path}:{lineno}: expected 3 tab-separated columns, got {len(cols)}")
        out[cols[0]] = cols[2]
    return out


def binary_strings(max_len: int = 10) -> list[str]:
    """Every string over {0, 1} of length at most ``max_len`` (2^(max_len+1) - 1 strings)."""
    out = [""]
    frontier = [""]
    for _ in range(max_len):
        frontier = [x + c for x in frontier for c in "01"]
        out.extend(frontier)
    return out


ALPHAREGEX_LEAVES = (ra.Chars("0"), ra.Chars("1"))


# ---------------------------------------------------------------------- everyday formats

# name -> (positives, negatives, fresh valid strings, near misses). The near misses are
# format errors; calendar errors such as 2024-13-45 are not among them: six positives
# do not show that months stop at 12 (docs/synth.md says so).
EVERYDAY_FORMATS: dict[str, tuple[list[str], list[str], list[str], list[str]]] = {
    "US ZIP": (
        ["12345", "90210", "02139", "60601", "10001", "12345-6789", "94105-1234", "30301-0042"],
        ["1234", "123456", "12345-678", "1-23", "123", "abcde", "12345-"],
        ["55555", "00000", "98765-4321", "11111-0000"],
        ["5555", "555555", "55555-", "55555-44444", "5555-55555", "a5555", "55555 1234"],
    ),
    "ISO date": (
        ["2024-01-15", "1999-12-31", "2003-07-04", "2020-02-29", "1987-10-09", "2011-11-11"],
        ["2024-1-15", "24-01-15", "2024/01/15", "20240115", "2024-01-5"],
        ["2000-06-30", "1850-03-03", "2099-12-01"],
        ["2000-6-30", "200-06-30", "2000-06-300", "2000.06.30", "2000-06", "2000-06-30-01", "20000630"],
    ),
    "hex colour": (
        ["#a3f", "#FFF", "#09c", "#1a2B3c", "#ffffff", "#00ff7F", "#c0ffee", "#abc"],
        ["#ab", "#abcd", "a3f", "#ggg", "#12345", "#1234567", "##abc"],
        ["#123", "#fAb", "#deadbe", "#A0B1C2"],
        ["#12", "#1234", "#12345", "#1234567", "123456", "#xyz", "#12g", "# 123"],
    ),
}


# ---------------------------------------------------------------------- Tomita

TOMITA_EXAMPLES = 10  # positives and negatives per Tomita problem
_BANK_LINE = re.compile(r"^(?P<name>\w+):\s*/(?P<pattern>.*)/\s*(?:#.*)?$")


def load_tomita(path: str | Path | None = None, per_side: int = TOMITA_EXAMPLES) -> list[dict]:
    """The seven Tomita languages (``grammars/tomita.regex``) as binary synthesis
    problems, a development source that is not AlphaRegex's: the examples are the first
    ``per_side`` members and the first ``per_side`` non-members of {0, 1}* in shortlex
    order (labelled by Python's ``re``, fixed before any search ran); ``regex`` is the
    intended language."""
    from neurosym.tasks.tomita import TOMITA_FILE  # lazy: the tasks package loads torch

    path = Path(path) if path is not None else shipped_file(TOMITA_FILE)
    universe = binary_strings(12)
    problems = []
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _BANK_LINE.match(line)
        if m is None:
            raise NeurosymError(f"{path}:{lineno}:1: expected NAME: /pattern/")
        rx = re.compile(m["pattern"])
        pos = [x for x in universe if rx.fullmatch(x)][:per_side]
        neg = [x for x in universe if not rx.fullmatch(x)][:per_side]
        problems.append({"name": f"tomita/{m['name']}", "description": raw.partition("#")[2].strip(), "positives": pos,
                         "negatives": neg, "regex": m["pattern"], "has_x": False})
    return problems


# ---------------------------------------------------------------------- Regel

REGEL_CLASSES = {
    "num": string.digits,
    "let": string.ascii_letters,
    "low": string.ascii_lowercase,
    "cap": string.ascii_uppercase,
    "alphanum": string.ascii_letters + string.digits,
    "vow": "AEIOUaeiou",
    "hex": string.digits + "abcdefABCDEF",
    "num1-9": "123456789",
    "spec": "-,;.+:!@#_$%&*=^",
}
UNSUPPORTED = ("and", "not", "notcc")


def _parse_regel(text: str):
    """Regel DSL text -> nested tuples ``(fn, args...)``, ``("tok", name)`` or ints."""
    i = 0

    def node():
        nonlocal i
        if text[i] == "<":
            j = text.index(">", i + 2) if text[i + 1] == ">" else text.index(">", i + 1)
            tok = text[i + 1 : j]
            i = j + 1
            return ("tok", tok)
        m = re.compile(r"\d+").match(text, i)
        if m:
            i = m.end()
            return int(m.group())
        m = re.compile(r"[a-z]+").match(text, i)
        if not m or text[m.end()] != "(":
            raise NeurosymError(f"cannot parse Regel ground truth {text!r} at {i}")
        fn = m.group()
        i = m.end() + 1
        args = [node()]
        while text[i] == ",":
            i += 1
            args.append(node())
        if text[i] != ")":
            raise NeurosymError(f"cannot parse Regel ground truth {text!r} at {i}")
        i += 1
        return (fn, *args)

    tree = node()
    if i != len(text):
        raise NeurosymError(f"trailing text in Regel ground truth {text!r}")
    return tree


def regel_to_ast(gt: str, constants: Sequence[str] = ()) -> ra.Node:
    """Translate a Regel ground truth without ``and``/``not``/``notcc`` to an AST."""
    anything = ra.Star(ra.ANY)

    def tr(t) -> ra.Node:
        if isinstance(t, int):
            raise NeurosymError("a number where a regex was expected")
        fn, *args = t
        if fn == "tok":
            name = args[0]
            if name == "any":
                return ra.ANY
            if name in REGEL_CLASSES:
                return ra.Chars(REGEL_CLASSES[name])
            m = re.fullmatch(r"m(\d+)", name)
            if m:
                k = int(m.group(1))
                if k >= len(constants):
                    raise NeurosymError(f"no constant for <{name}>")
                return ra.lit(constants[k])
            if len(name) == 1:
                return ra.Chars(name)
            raise NeurosymError(f"unknown Regel token <{name}>")
        if fn in UNSUPPORTED:
            raise NeurosymError(f"{fn}(...) (intersection/complement) is not translated")
        a = [tr(x) if not isinstance(x, int) else x for x in args]
        if fn == "concat":
            return ra.Cat((a[0], a[1]))
        if fn == "or":
            return ra.Alt((a[0], a[1]))
        if fn == "optional":
            return ra.Opt(a[0])
        if fn == "star":
            return ra.Star(a[0])
        if fn == "repeat":
            return ra.repeat(a[0], a[1], a[1])
        if fn == "repeatatleast":
            return ra.repeat(a[0], a[1], None)
        if fn == "repeatrange":
            return ra.repeat(a[0], a[1], a[2])
        if fn == "contain":
            return ra.Cat((anything, a[0], anything))
        if fn == "startwith":
            return ra.Cat((a[0], anything))
        if fn == "endwith":
            return ra.Cat((anything, a[0]))
        raise NeurosymError(f"unknown Regel function {fn}")

    return simplify(tr(_parse_regel(gt.strip())))


def regel_to_regex(gt: str, constants: Sequence[str] = ()) -> str:
    """A Python regex for a Regel ground truth (see :func:`regel_to_ast`)."""
    return ra.to_pattern(regel_to_ast(gt, constants))


def _unquote(s: str) -> str:
    """Python-style escapes in a Regel constant decoded; an unknown escape (``\\s``) stays
    as written, as Python keeps it (without the DeprecationWarning it would print)."""
    if "\\" not in s:
        return s
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return s.encode("latin-1", "backslashreplace").decode("unicode_escape")


def load_regel(folder: str | Path | None = None, suites: Sequence[str] = ("so", "deepregex")) -> tuple[list[dict], list[dict]]:
    """Regel problems as ``(usable, skipped)``; usable ones carry ``regex``, the
    ground truth as a Python pattern; skipped ones a ``reason``."""
    folder = Path(folder) if folder is not None else shared_data("regel")
    usable, skipped = [], []
    for suite in suites:
        files = sorted((folder / suite).iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0)
        for path in files:
            text = path.read_text(encoding="utf-8", errors="replace")
            sections: dict[str, list[str]] = {}
            cur = None
            for line in text.splitlines():
                m = re.fullmatch(r"//\s*(.*?)\s*", line)
                if m and m.group(1) in ("natural language", "examples", "example", "ex", "gt", "visual format"):
                    cur = m.group(1)
                    sections[cur] = []
                elif cur is not None:
                    sections[cur].append(line)
            desc = " ".join(sections.get("natural language", [])).strip()
            ex_lines = sections.get("examples") or sections.get("example") or sections.get("ex") or []
            pos, neg = [], []
            for line in ex_lines:
                m = re.fullmatch(r'"(.*)",\s*([+-])\s*', line)
                if m:
                    (pos if m.group(2) == "+" else neg).append(_unquote(m.group(1)))
            gt = "".join(sections.get("gt", [])).strip()
            name = f"{suite}/{path.name}"
            item = {"name": name, "description": desc, "positives": list(dict.fromkeys(pos)), "negatives": list(dict.fromkeys(neg)), "gt": gt}
            neg_set = set(item["positives"])
            item["negatives"] = [s for s in item["negatives"] if s not in neg_set]
            constants = list(dict.fromkeys(re.findall(r'"([^"]+)"', desc))) if suite == "deepregex" else []
            try:
                item["regex"] = regel_to_regex(gt, constants)
                rx = re.compile(item["regex"])
                wrong = [s for s in item["positives"] if not rx.fullmatch(s)] + [s for s in item["negatives"] if rx.fullmatch(s)]
                if wrong:
                    raise NeurosymError(f"translated ground truth disagrees with {len(wrong)} example(s)")
                if not item["positives"]:
                    raise NeurosymError("no positive example")
            except (NeurosymError, ValueError, IndexError, re.error) as err:
                item["reason"] = str(err)
                skipped.append(item)
                continue
            usable.append(item)
    return usable, skipped


__all__ = [
    "ALPHAREGEX_LEAVES",
    "EVERYDAY_FORMATS",
    "TOMITA_EXAMPLES",
    "REGEL_CLASSES",
    "UNSUPPORTED",
    "binary_strings",
    "expand_x",
    "load_alpharegex",
    "load_alpharegex_reference",
    "load_regel",
    "load_tomita",
    "regel_to_ast",
    "regel_to_regex",
]
