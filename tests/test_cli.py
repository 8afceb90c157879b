"""The `neurosym` command: check, compile, inspect; errors as one line and exit status 2."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from neurosym.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
GOOD = 'YEAR: /(19|20)[0-9]{2}/\nDATE: YEAR "-" /0[1-9]|1[0-2]/\n'


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def good(tmp_path):
    p = tmp_path / "good.regex"
    p.write_text(GOOD)
    return p


def test_check_ok_and_json(runner, good):
    r = runner.invoke(main, ["check", str(good)])
    assert r.exit_code == 0, r.output
    assert "ok (2 patterns" in r.output
    r = runner.invoke(main, ["check", "--json", str(good)])
    data = json.loads(r.output)
    assert data[0]["ok"] and data[0]["patterns"] == 2


def test_errors_are_one_line_with_position_and_exit_2(runner, tmp_path):
    bad = tmp_path / "bad.regex"
    bad.write_text("A: /ab/\nB: /(x)\\1/\n")
    r = runner.invoke(main, ["check", str(bad)])
    assert r.exit_code == 2
    assert f"{bad}:2:" in r.output and "backreference" in r.output.lower()
    assert "Traceback" not in r.output
    r = runner.invoke(main, ["inspect", str(tmp_path / "missing.regex")])
    assert r.exit_code == 2 and "no such file" in r.output


def test_state_cap_error_names_the_cap(runner, tmp_path):
    p = tmp_path / "big.regex"
    p.write_text("BIG: /(a|b)*a(a|b){30}/\n")
    r = runner.invoke(main, ["check", str(p)])
    assert r.exit_code == 2 and "state cap" in r.output and "10,000" in r.output


def test_compile_writes_artifact(runner, good, tmp_path):
    out = tmp_path / "o" / "bank.safetensors"
    r = runner.invoke(main, ["compile", str(good), "-o", str(out), "--vocab", "bytes", "--json"])
    assert r.exit_code == 2 and "does not exist" in r.output  # no folder is created silently
    out.parent.mkdir()
    r = runner.invoke(main, ["compile", str(good), "-o", str(out), "--vocab", "bytes", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["vocab_size"] == 256 and out.is_file()
    r = runner.invoke(main, ["inspect", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert [p["name"] for p in json.loads(r.output)["patterns"]] == ["YEAR", "DATE"]


def test_inspect_report_and_drawings(runner, good, tmp_path):
    r = runner.invoke(main, ["inspect", str(good), "--pattern", "DATE", "--samples", "3"])
    assert r.exit_code == 0, r.output
    assert "DATE" in r.output and "states:" in r.output and "class" in r.output and "samples:" in r.output
    report = json.loads(runner.invoke(main, ["inspect", str(good), "--json", "--samples", "4"]).output)
    import re

    for p in report["patterns"]:
        pattern = {"YEAR": r"(19|20)[0-9]{2}", "DATE": r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])"}[p["name"]]
        assert len(p["samples"]) == 4 and all(re.fullmatch(pattern, s) for s in p["samples"])
    dot = tmp_path / "d.dot"
    assert runner.invoke(main, ["inspect", str(good), "--draw", str(dot)]).exit_code == 0
    assert dot.read_text().startswith('digraph "YEAR"') and "doublecircle" in dot.read_text()
    png = tmp_path / "d.png"
    assert runner.invoke(main, ["inspect", str(good), "--pattern", "DATE", "--draw", str(png)]).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = runner.invoke(main, ["inspect", str(good), "--pattern", "NOPE"])
    assert r.exit_code == 2 and "no pattern named NOPE" in r.output


def test_installed_console_script_runs():
    exe = Path(sys.executable).with_name("neurosym")
    if not exe.exists():
        pytest.skip("the neurosym console script is not installed in this environment (pip install -e .)")
    r = subprocess.run([str(exe), "check", str(ROOT / "grammars" / "dates.regex")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
    assert "inspect" in r.stdout and "compile" in r.stdout


def test_cli_is_not_installed_as_a_top_level_module():
    r = subprocess.run([sys.executable, "-c", "import cli"], capture_output=True, text=True, cwd="/")
    assert r.returncode != 0


def test_debug_shows_the_traceback(runner, tmp_path):
    bad = tmp_path / "bad.regex"
    bad.write_text("A: /(?=x)/\n")
    r = runner.invoke(main, ["--debug", "check", str(bad)])
    assert r.exit_code == 2  # check reports per file; --debug matters where an error escapes a command
    r = runner.invoke(main, ["--debug", "inspect", str(bad)])
    assert r.exception is not None and "lookahead" in str(r.exception)


def test_help_and_the_package_import_do_not_load_torch():
    """`neurosym --help` starts fast: the CLI and `import neurosym` load subsystems (and
    torch) only when a command or a name needs them (PEP 562 in neurosym/__init__.py)."""
    code = (
        "import sys\n"
        "import neurosym\n"
        "from neurosym.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('torch', 'neurosym.kinds', 'neurosym.lm', 'scipy', 'matplotlib') if m in sys.modules))\n"
        "neurosym.compile_regex\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-2] == "[]" and out[-1] == "True"  # nothing heavy for --help; names still load on use


def _all_commands(group, prefix=()):
    import click

    for name, cmd in sorted(group.commands.items()):
        yield (*prefix, name)
        if isinstance(cmd, click.Group):
            yield from _all_commands(cmd, (*prefix, name))


def test_every_help_is_fast_and_loads_no_heavy_subsystem():
    """Issue 14.5: every `--help` (each command and subcommand) runs without torch, numpy or
    any neurosym subsystem (bar the registry of synthesis methods, which `synth --method`
    lists and which imports nothing heavy), and in a fresh process well under a second (measured 0.08-0.12 s
    per command on 2 busy cores; the bound is generous for loaded machines)."""
    commands = [" ".join(c) for c in _all_commands(main)]
    assert {"check", "compile", "inspect", "sample", "train", "plot", "synth", "reproduce semantic-fusion", "bench synth"} <= set(commands)
    code = (
        "import sys\n"
        "from neurosym.cli.main import main\n"
        f"for c in {commands!r}:\n"
        "    try:\n"
        "        main(c.split() + ['--help'])\n"
        "    except SystemExit as e:\n"
        "        assert e.code in (0, None), c\n"
        "heavy = ('torch', 'numpy', 'scipy', 'matplotlib', 'tqdm', 'safetensors', 'lark', 'networkx')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith('neurosym.') and m not in\n"
        "             ('neurosym.errors', 'neurosym.version', 'neurosym.synth', 'neurosym.synth.methods')\n"
        "             and not m.startswith('neurosym.cli')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-1] == "[]"
    exe = Path(sys.executable).parent / "neurosym"
    for c in ["", *commands]:
        started = time.perf_counter()
        subprocess.run([str(exe), *c.split(), "--help"], capture_output=True, check=True)
        assert time.perf_counter() - started < 2.0, c


def test_check_of_a_regex_bank_loads_only_the_regex_compiler():
    """Issue 14.5: `neurosym check x.regex` imports neither the FSG, PCFG and lexicon
    compilers, the reports, the artifact codecs (safetensors), nor layers, models, data,
    synthesis, benchmarks, scipy or matplotlib. (torch is needed: automata hold tensors.)"""
    code = (
        "import sys\n"
        "from neurosym.cli.main import main\n"
        "try:\n"
        f"    main(['check', {str(ROOT / 'grammars' / 'dates.regex')!r}])\n"
        "except SystemExit as e:\n"
        "    assert e.code in (0, None)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'matplotlib', 'safetensors')\n"
        "             or m.startswith(('neurosym.lm', 'neurosym.layers', 'neurosym.data', 'neurosym.synth', 'neurosym.bench',\n"
        "                              'neurosym.experiments', 'neurosym.decode', 'neurosym.report', 'neurosym.compile.fsg',\n"
        "                              'neurosym.compile.pcfg', 'neurosym.compile.lexicon', 'neurosym.compile.artifact',\n"
        "                              'neurosym.compile.weighted', 'neurosym.dsl.fsg', 'neurosym.dsl.pcfg', 'neurosym.dsl.lexicon'))))\n"
        "print('neurosym.compile.regex' in sys.modules, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-2:] == ["[]", "True True"]
