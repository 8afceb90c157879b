"""Every example in docs/ is real: ```regex blocks compile, ```python blocks run."""

import re
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
