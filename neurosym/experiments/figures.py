"""Figures in Markdown checked against the JSON reports they come from.

Every figure of README.md and docs/*.md that comes from a run names its source, in one
of two ways (HTML comments: they do not show when the page is rendered):

* **A checked sentence.** A comment after the figures,
  ``<!-- figures docs/semantic_fusion_main.json: fusion/ppl fusion/ppl_std - welch_ppl/p -->``,
  lists one JSON path per number written between it and the previous marker, blank
  line, list item or table row, in order (numbers inside backticks and link targets are not counted; ``-``
  skips a number that is not a figure, such as "3 seeds" written as prose). A path
  walks the report with ``/`` (``wikitext-2/kl-T0.1/ppl``, ``fusion/runs/0/ppl``) and may
  end in ``*100`` (a share written as a percentage). A key holding spaces is quoted, as
  in a shell: ``patterns/'5000 words'/1/cpu/ratio_p50`` (the paths are split by
  :func:`shlex.split`; a quote that does not close is reported). A number matches when the value,
  rounded to the digits written, gives it: ``5.36`` stands for anything in
  [5.355, 5.365]; ``577,047`` must be exact; ``3e-9`` is read to its one significant
  digit.
* **A generated block.** ``<!-- figures-begin docs/x.json RENDERER -->`` ...
  ``<!-- figures-end -->``: the lines between are what ``RENDERER`` (a name in
  :data:`RENDERERS`) prints from the JSON, exactly.

File names are relative to the repository root (the folder that holds the page's
``docs/``, or the page's own folder for README.md). ``python -m
neurosym.experiments.figures README.md docs/*.md`` checks the pages (exit status 1 and
``page:line: message`` per stale figure); ``--write`` regenerates the blocks from their
JSON (checked sentences are left for a person to edit). ``tests/test_figures.py`` runs
the check on every page, so a figure that no longer matches its report fails CI.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neurosym.experiments import control, idea_gating, semantic_fusion, semantic_kl

SENTENCE = re.compile(r"<!--\s*figures\s+(?P<file>[^\s:]+):(?P<paths>[^>]*?)-->")
BEGIN = re.compile(r"<!--\s*figures-begin\s+(?P<file>\S+)\s+(?P<renderer>\S+)\s*-->")
END = re.compile(r"<!--\s*figures-end\s*-->")
ANY_MARKER = re.compile(r"<!--\s*figures[\s-].*?-->")
# a number standing alone: not part of a word (T0.1, d128, issue-31), signs and thousands commas allowed
NUMBER = re.compile(r"(?<![\w.\-])[+\-−]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.\-])[+\-−]?\d+(?:\.\d+)?(?:e[+\-]?\d+)?(?![\w.]\d|\w)")
ITEM = re.compile(r"\n[ \t]*(?:[*\-|]|\d+\.)[ \t]")  # a list item or table row starts a new stretch
HIDDEN = re.compile(r"`[^`]*`|\]\([^)]*\)")  # inline code and link targets hold no figures


def _kl_tables(report: dict) -> str:
    return semantic_kl.format_report({**report, "datasets": [k for k, v in report.items() if isinstance(v, dict) and "data" in v]})


RENDERERS: dict[str, Callable[[dict], str]] = {
    "semantic_fusion.format_report": semantic_fusion.format_report,
    "control.format_control": control.format_control,  # a recipe report's own control tables (reproduce --json)
    "control.format_targets": control.format_targets,  # its control targets (issue 30 point 5)
    "semantic_kl.format_report": _kl_tables,
    "idea_gating.format_report": lambda report: idea_gating.format_report(idea_gating.from_json(report)),  # the recipe's JSON (reproduce --json)
}


@dataclass(frozen=True)
class Mismatch:
    """One stale or broken figure: where, and what differs."""

    page: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.message}"


def root_of(page: Path) -> Path:
    """The folder JSON names are read from: the parent of a page's ``docs/`` folder, else the page's folder."""
    page = page.resolve()
    return page.parent.parent if page.parent.name == "docs" else page.parent


def lookup(report: Any, path: str) -> float:
    """The number at ``path`` (``a/b/0/c``, optionally ``*k``) in a JSON report; KeyError
    with the path when it is not there."""
    path, _, scale = path.partition("*")
    node = report
    for part in path.split("/"):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(f"no {path!r} in the report (stopped at {part!r})")
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise KeyError(f"{path!r} is not a number in the report")
    return float(node) * (float(scale) if scale else 1.0)


def written_matches(text: str, value: float) -> bool:
    """Whether the written number ``text`` is ``value`` rounded to the digits written."""
    t = text.replace(",", "").replace("−", "-").lstrip("+")
    written = float(t)
    if not math.isfinite(value):
        return False
    mantissa, _, exponent = t.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    half = 0.5 * 10.0 ** (-decimals) * (10.0 ** int(exponent) if exponent else 1.0)
    return abs(value - written) <= half * (1 + 1e-9) + 1e-12


def numbers_in(text: str) -> list[str]:
    """The numbers written in a stretch of Markdown, in order (inline code and link targets left out)."""
    return NUMBER.findall(HIDDEN.sub(" ", text))


def marker_paths(text: str) -> list[str]:
    """The JSON paths of a checked sentence's marker, split on blanks; a key with blanks
    in it is quoted (``a/'5000 words'/b`` is one path). ValueError on an unclosed quote."""
    return shlex.split(text)


def _load(root: Path, name: str, cache: dict[Path, Any]) -> Any:
    path = (root / name).resolve()
    if path not in cache:
        cache[path] = json.loads(path.read_text(encoding="utf-8"))
    return cache[path]


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def check_sentences(page: Path, text: str, root: Path, cache: dict[Path, Any]) -> list[Mismatch]:
    """The checked sentences of one page."""
    out = []
    for m in SENTENCE.finditer(text):
        line = _line(text, m.start())
        start = max(text.rfind("\n\n", 0, m.start()), *(i.start() for i in ITEM.finditer(text, 0, m.start())), 0)
        before = [x for x in ANY_MARKER.finditer(text, start, m.start())]
        if before:
            start = before[-1].end()
        written = numbers_in(text[start : m.start()])
        try:
            paths = marker_paths(m["paths"])
        except ValueError as err:
            out.append(Mismatch(page, line, f"cannot read the paths of the marker: {err}"))
            continue
        try:
            report = _load(root, m["file"], cache)
        except (OSError, json.JSONDecodeError) as err:
            out.append(Mismatch(page, line, f"cannot read {m['file']}: {err}"))
            continue
        if len(written) != len(paths):
            out.append(Mismatch(page, line, f"{len(written)} numbers written ({', '.join(written) or 'none'}) but {len(paths)} paths named"))
            continue
        for w, p in zip(written, paths):
            if p == "-":
                continue
            try:
                value = lookup(report, p)
            except KeyError as err:
                out.append(Mismatch(page, line, f"{m['file']}: {err.args[0]}"))
                continue
            if not written_matches(w, value):
                out.append(Mismatch(page, line, f"{w} is written but {m['file']} gives {p} = {value:.6g}"))
    return out


def blocks(text: str) -> Iterable[tuple[re.Match, int, int]]:
    """Each generated block: its begin marker and the offsets of its body."""
    for m in BEGIN.finditer(text):
        end = END.search(text, m.end())
        yield m, m.end(), (end.start() if end else -1)


def render(root: Path, file: str, renderer: str, cache: dict[Path, Any]) -> str:
    """What a block should hold: the renderer's text with a blank line either side."""
    return "\n\n" + RENDERERS[renderer](_load(root, file, cache)).strip("\n") + "\n\n"


def check_page(page: str | Path, write: bool = False) -> list[Mismatch]:
    """Every stale figure of one page (with ``write``, blocks are regenerated first)."""
    page = Path(page)
    text = page.read_text(encoding="utf-8")
    root, cache = root_of(page), {}
    out: list[Mismatch] = []
    pieces, last = [], 0
    for m, body, end in blocks(text):
        line = _line(text, m.start())
        if end < 0:
            out.append(Mismatch(page, line, "figures-begin without figures-end"))
            continue
        if m["renderer"] not in RENDERERS:
            out.append(Mismatch(page, line, f"unknown renderer {m['renderer']!r}; expected one of {', '.join(RENDERERS)}"))
            continue
        try:
            want = render(root, m["file"], m["renderer"], cache)
        except (OSError, json.JSONDecodeError, KeyError) as err:
            out.append(Mismatch(page, line, f"cannot render {m['file']} with {m['renderer']}: {err}"))
            continue
        if text[body:end] != want:
            if write:
                pieces += [text[last:body], want]
                last = end
            else:
                got, exp = text[body:end].strip("\n").splitlines(), want.strip("\n").splitlines()
                first = next((i for i, (a, b) in enumerate(zip(got, exp)) if a != b), min(len(got), len(exp)))
                shown = exp[first] if first < len(exp) else "(nothing)"
                out.append(Mismatch(page, line + 2 + first, f"the block generated from {m['file']} by {m['renderer']} differs here; it gives: {shown}"))
    if write and pieces:
        text = "".join(pieces) + text[last:]
        page.write_text(text, encoding="utf-8")
    return out + check_sentences(page, text, root, cache)


def count_markers(text: str) -> int:
    """How many checked sentences and generated blocks a page holds."""
    return len(SENTENCE.findall(text)) + len(BEGIN.findall(text))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m neurosym.experiments.figures [--write] PAGE...``: 0 when every figure matches."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+")
    parser.add_argument("--write", action="store_true", help="regenerate the generated blocks from their JSON")
    args = parser.parse_args(argv)
    bad = [m for p in args.pages for m in check_page(p, write=args.write)]
    for m in bad:
        print(m, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
