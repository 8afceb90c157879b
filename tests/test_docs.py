"""Every example in docs/ is real: ```regex blocks compile, ```python blocks run, and a
walkthrough's blocks run in order: ```LANG file=NAME blocks are written to NAME in an
empty folder, ```sh run blocks run there (bash -e, the installed `neurosym` on PATH)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import neurosym
from neurosym.compile.regex import compile_bank
from neurosym.dsl import parse_regex_bank

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))


def blocks(lang: str):
    for doc in DOCS:
        for i, m in enumerate(re.finditer(rf"```{lang}\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)):
            yield pytest.param(doc, m.group(1), id=f"{doc.name}-{i}")


@pytest.mark.parametrize("doc, text", list(blocks("regex")))
def test_regex_examples_compile(doc, text):
    bank = compile_bank(parse_regex_bank(text, path=doc.with_suffix(".regex")))
    assert len(bank) >= 1
    for name, auto in bank.patterns.items():
        assert auto.char_dfa.sample(3, seed=0), name


@pytest.mark.parametrize("doc, text", list(blocks("python")))
def test_python_examples_run(doc, text):
    exec(compile(text, str(doc), "exec"), {"neurosym": neurosym})


def test_docs_exist_for_every_format_and_subsystem():
    names = {d.name for d in DOCS}
    assert {"regex.md", "automata.md", "fsg.md", "pcfg.md", "lexicon.md", "fuzzy.md"} <= names


FILE_BLOCK = re.compile(r"```\w+ file=(\S+)\n(.*?)```", re.S)
RUN_BLOCK = re.compile(r"```sh run\n(.*?)```", re.S)


@pytest.mark.parametrize("doc", [pytest.param(d, id=d.name) for d in DOCS if "```sh run" in d.read_text(encoding="utf-8")])
def test_walkthroughs_run(doc, tmp_path):
    text = doc.read_text(encoding="utf-8")
    steps = sorted([(m.start(), m) for m in FILE_BLOCK.finditer(text)] + [(m.start(), m) for m in RUN_BLOCK.finditer(text)],
                   key=lambda s: s[0])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1"}
    for _, m in steps:
        if m.re is FILE_BLOCK:
            target = tmp_path / m.group(1)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(m.group(2), encoding="utf-8")
            continue
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", m.group(1)], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{doc.name}: this block failed:\n{m.group(1)}\n{done.stdout}\n{done.stderr}"
