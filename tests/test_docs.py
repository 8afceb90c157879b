"""Every example in docs/ is real: ```regex blocks compile, ```python blocks run, and a
walkthrough's blocks run in order: ```LANG file=NAME blocks are written to NAME in an
empty folder, ```sh run blocks run there (as bash -euo pipefail would; a plain `neurosym`
line in this interpreter, through click's test runner, anything else in bash)."""

import os
import re
import shlex
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from click.testing import CliRunner

import neurosym
from neurosym.cli.main import main
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
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def in_process(line: str) -> tuple[list[str], str | None] | None:
    """``(argv, stdout file)`` of a ``neurosym ARGS [> FILE]`` line with no other shell
    syntax (a comment dropped), else None."""
    quote, cut = None, len(line)
    for i, c in enumerate(line):  # the comment: a # outside quotes, at a word's start
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            cut = i
            break
    line = line[:cut]
    bare = QUOTED.sub("", line)
    if re.search(r"[|&;<`$(){}*?~\\#'\"]", bare) or bare.count(">") > 1 or line.count(">") != bare.count(">"):
        return None
    target = None
    if ">" in bare:
        line, _, after = line.rpartition(">")
        target = after.split()
        if len(target) != 1:
            return None
        target = target[0]
    argv = shlex.split(line)
    return (argv[1:], target) if argv and argv[0] == "neurosym" else None


def run_block(block: str, folder: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run a ``sh run`` block in ``folder`` as ``bash -euo pipefail`` would, line by line:
    a plain ``neurosym`` line (see :func:`in_process`) through click's test runner in this
    interpreter (its stdout written to the ``>`` file), any other line in bash. A block
    with a here-document or a continued line runs in bash whole."""
    if "<<" in block or "\\\n" in block:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=folder, env=env, capture_output=True, text=True)
        return done.returncode, done.stdout + done.stderr
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        plain = in_process(line)
        if plain is None:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=folder, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                return done.returncode, f"{line}\n{done.stdout}{done.stderr}"
            continue
        argv, target = plain
        cwd = Path.cwd()
        os.chdir(folder)
        try:
            r = CliRunner().invoke(main, argv, env=env, prog_name="neurosym")
        finally:
            os.chdir(cwd)
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            return 1, f"{line}\n{r.output}" + "".join(traceback.format_exception(r.exception))
        if r.exit_code != 0:
            return r.exit_code, f"{line}\n{r.output}"
        if target is not None:
            (folder / target).write_text(r.stdout, encoding="utf-8")
    return 0, ""


@pytest.mark.parametrize("doc", [pytest.param(d, id=d.name) for d in DOCS if "```sh run" in d.read_text(encoding="utf-8")])
def test_walkthroughs_run(doc, tmp_path, one_thread):
    """The ``neurosym`` commands run in this interpreter, one torch thread (each would
    otherwise start an interpreter and load torch: most of this test's time); everything
    else in bash."""
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
        code, output = run_block(m.group(1), tmp_path, env)
        assert code == 0, f"{doc.name}: this block failed:\n{m.group(1)}\n{output}"


def test_a_walkthrough_line_runs_in_process_only_when_it_is_a_plain_command():
    assert in_process("neurosym eval runs/mine --split valid --json > valid.json") == (["eval", "runs/mine", "--split", "valid", "--json"], "valid.json")
    assert in_process("neurosym train mine.toml                           # runs/mine: a new run (refuses ...)") == (["train", "mine.toml"], None)
    assert in_process("neurosym generate runs/bpe --grammar '(the|a) (cat|dog) \\.' -n 3") == (["generate", "runs/bpe", "--grammar", "(the|a) (cat|dog) \\.", "-n", "3"], None)
    for line in ("grep -q '\"ppl\"' valid.json", "neurosym eval runs/x | head", "neurosym eval $RUN", "neurosym a > b > c", "neurosym x && ls"):
        assert in_process(line) is None, line
