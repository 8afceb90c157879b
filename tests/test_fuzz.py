"""A fuzz pass over the command line (issue 32, point 6): generated bad inputs of every
file kind, given to every command that reads them with its main options.

Each input is a file derived from a shipped or hand-written valid one by a few mutations
(random bytes, invalid UTF-8, truncation, duplication, huge numbers, deep nesting, NUL
bytes, CRLF, a BOM), or a folder, or nothing, in its own folder next to the other files a
command may read. The invariants, for every call:

* the exit status is 0 or 2 (``synth`` may exit 1: not solved within its budget);
* no traceback and no "internal error" reaches the user;
* no file in the folder changes unless the call named it as its output;
* the resident-memory peak the call adds stays under :data:`MEMORY_BOUND`, and the call
  ends within :data:`CALL_SECONDS`.

The default suite runs a small pass (about 20 s); ``-m slow`` runs at least 2,000 inputs
and prints the counts (``NEUROSYM_FUZZ_REPORT=file.json`` also writes them).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from neurosym.cli.main import main
from test_bad_input import PeakMemory
from tiny_runs import tiny_fusion_config

ROOT = Path(__file__).resolve().parents[1]
MEMORY_BOUND = 1536 * 2**20
CALL_SECONDS = 60

HAND = {  # small valid inputs of the kinds nothing ships
    "tsv": b"cat\tN\ndog\tN\nrun\tV\neat\tV\n2024\tNUM\n",
    "conllu": b"# sent_id = 1\n1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\tNN\t_\t0\troot\t_\t_\n\n",
    "examples": b"ab\nabab\nababab\n",
    "vocab": b"the\ncat\n1999\n-\n",
    "metrics": b'{"step": 1, "loss": 2.0, "lr": 0.001}\n{"step": 2, "loss": 1.5, "lr": 0.001}\n{"kind": "eval", "step": 2, "loss": 1.7}\n',
}
SHIPPED = {
    "regex": ["grammars/dates.regex", "grammars/email.regex", "grammars/numbers.regex", "grammars/tomita.regex"],
    "fsg": ["grammars/clause.fsg", "grammars/drift.fsg"],
    "pcfg": ["grammars/arith.pcfg", "grammars/agreement.pcfg"],
    "lex": ["lexicons/sentiment.lex", "lexicons/topics.lex", "lexicons/domains.lex"],
}
SUFFIX = {"regex": ".regex", "fsg": ".fsg", "pcfg": ".pcfg", "lex": ".lex", "tsv": ".tsv", "conllu": ".conllu",
          "examples": ".txt", "vocab": ".txt", "metrics": ".jsonl", "artifact": ".safetensors"}
KINDS = sorted(SUFFIX)


# ---------------------------------------------------------------------- inputs
MUTATIONS = ["insert", "delete", "duplicate", "truncate", "bad_utf8", "huge_number", "nesting", "nul", "crlf", "bom", "swap_lines"]


@st.composite
def mutated(draw, base: bytes) -> bytes:
    """``base`` after one to three mutations."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(MUTATIONS))
        at = draw(st.integers(0, len(data))) if data else 0
        if kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=12))
        elif kind == "delete" and data:
            data[at : at + draw(st.integers(1, 40))] = b""
        elif kind == "duplicate" and data:
            data[at:at] = data[at : at + draw(st.integers(1, 200))] * draw(st.integers(2, 50))
        elif kind == "truncate":
            del data[at:]
        elif kind == "bad_utf8":
            data[at:at] = draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"]))
        elif kind == "huge_number":
            data[at:at] = draw(st.sampled_from([b"1e400", b"-1e400", b"nan", b"inf", b"99999999999999999999999", b"-0", b"1e-400"]))
        elif kind == "nesting":
            k = draw(st.integers(50, 3000))
            data[at:at] = draw(st.sampled_from([b"(", b"[", b"!", b"prev("])) * k
        elif kind == "nul":
            data[at:at] = b"\x00"
        elif kind == "crlf":
            data = bytearray(bytes(data).replace(b"\n", b"\r\n"))
        elif kind == "bom":
            data[0:0] = b"\xef\xbb\xbf"
        elif kind == "swap_lines":
            lines = bytes(data).split(b"\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def base_bytes(kind: str, choice: int, artifact: bytes) -> bytes:
    if kind == "artifact":
        return artifact
    if kind in SHIPPED:
        names = SHIPPED[kind]
        return (ROOT / names[choice % len(names)]).read_bytes()
    return HAND[kind]


@st.composite
def bad_input(draw, artifact: bytes) -> tuple[str, str, bytes | None]:
    """(kind, form, content): ``form`` is "file" (content written), "folder" or "missing"."""
    kind = draw(st.sampled_from(KINDS))
    form = draw(st.sampled_from(["file"] * 12 + ["folder", "missing", "empty", "random"]))
    if form == "empty":
        return kind, "file", b""
    if form == "random":
        return kind, "file", draw(st.binary(max_size=300))
    if form != "file":
        return kind, form, None
    return kind, "file", draw(mutated(base_bytes(kind, draw(st.integers(0, 9)), artifact)))


# ---------------------------------------------------------------------- commands
def _n(draw) -> str:
    return str(draw(st.sampled_from([0, 1, 3, 17, 50])))


def _common_limits(draw) -> list[str]:
    out = []
    if draw(st.booleans()):
        out += ["--max-states", str(draw(st.sampled_from([1, 5, 200, 10_000])))]
    if draw(st.booleans()):
        out += ["--time-limit", str(draw(st.sampled_from([0.01, 0.5, 5])))]
    return out


@st.composite
def command(draw, kind: str, target: str, run: str | None = None) -> tuple[list[str], list[str]]:
    """(argv, the outputs it names) for a bad input of ``kind`` at ``target``; with ``run``
    (a trained run folder) also ``generate`` under the input as its grammar, and ``eval``."""
    grammar_like = kind in ("regex", "fsg", "pcfg", "lex", "artifact")
    choices = ["check", "compile", "inspect", "sample"] if grammar_like else []
    if run is not None and kind in ("regex", "fsg", "pcfg", "vocab"):
        choices += ["generate", "generate"]
    if run is not None and draw(st.integers(0, 59)) == 37:  # about one call in 60 (hypothesis favours the ends of a range)
        settings_text = draw(st.sampled_from(["soft", "hard,paper", "", "nope", "soft,,soft", "paper"]))
        return ["eval", run, "--settings", settings_text, "-n", "1", "--alpha", str(draw(st.sampled_from([0, 0.3, 1])))], []
    if "generate" in choices and draw(st.booleans()):
        spec = target + draw(st.sampled_from(["", "", ":DATE", ":NOPE", ":"]))
        prompt = draw(st.sampled_from([[], ["--prompt", "Bob"], ["--prompt", ""], ["--prompt", "zzz qqq"], ["--prompt", "\u00e9\x00"]]))
        return ["generate", run, "--grammar", spec, *prompt, "-n", draw(st.sampled_from(["1", "3"])),
                "--temperature", str(draw(st.sampled_from([0.1, 1.0, 50.0]))), "--top-p", str(draw(st.sampled_from([0.01, 0.9, 1.0]))),
                "--max-len", str(draw(st.sampled_from([1, 5, 40]))), "--seed", str(draw(st.sampled_from([0, 5])))], []
    choices += {"tsv": ["synth-corpus"], "conllu": ["synth-corpus"], "examples": ["synth"], "vocab": ["compile-vocab"],
                "metrics": ["plot"]}.get(kind, [])
    which = draw(st.sampled_from(choices or ["check"]))
    json_flag = ["--json"] if draw(st.booleans()) else []
    if which == "check":
        return ["check", target, *draw(st.lists(st.sampled_from(["good.regex", "good.fsg", target]), max_size=2)), *_common_limits(draw), *json_flag], []
    if which in ("compile", "compile-vocab"):
        out = draw(st.sampled_from(["out.safetensors", "foreign.safetensors", "notes.txt", target, "sub", "missing/x.safetensors",
                                    "good.regex", "words.txt", ""]))
        vocab = [] if which == "compile" else ["--vocab", target]
        if which == "compile" and draw(st.booleans()):
            vocab = ["--vocab", draw(st.sampled_from(["bytes", "words.txt", "nothing.json", "sub"]))]
        source = target if which == "compile" else "good.regex"
        force = ["--force"] if draw(st.booleans()) else []
        return ["compile", source, *vocab, "-o", out, *force, *_common_limits(draw), *json_flag], [out]
    if which == "inspect":
        extra: list[str] = []
        if draw(st.booleans()):
            extra += ["--pattern", draw(st.sampled_from(["DATE", "YEAR", "NOPE", "", "a b"]))]
        if draw(st.booleans()):
            extra += ["--word", draw(st.sampled_from(["good", "", "\u00e9t\u00e9", "x" * 300]))]
        draw_to = draw(st.sampled_from([None, None, "d.dot", "d.png", "notes.txt", target, "sub/d.dot"]))
        if draw_to is not None:
            extra += ["--draw", draw_to]
        return ["inspect", target, "-n", _n(draw), "--seed", str(draw(st.sampled_from([0, 7, 2**40]))), *extra,
                *_common_limits(draw), *json_flag], [draw_to] if draw_to else []
    if which == "sample":
        extra = ["--trees"] if draw(st.booleans()) else []
        if draw(st.booleans()):
            extra += ["--pattern", draw(st.sampled_from(["DATE", "NOPE", ""]))]
        return ["sample", target, "-n", _n(draw), "--seed", str(draw(st.sampled_from([0, 3, 2**40]))),
                "--max-len", str(draw(st.sampled_from([0, 1, 5, 60]))), *extra, *_common_limits(draw), *json_flag], []
    if which == "synth":
        neg = draw(st.sampled_from([[], ["--neg", target], ["--neg", "good.regex"], ["--neg", "sub"]]))
        out = draw(st.sampled_from([[], ["-o", "bank.regex", "--name", "X"], ["-o", target, "--name", "X"], ["-o", "bank.txt", "--name", "X"],
                                    ["-o", "bank.regex", "--name", "bad name"]]))
        method = draw(st.sampled_from(["beam", "evolve", "reinforce"]))
        return ["synth", "--pos", target, *neg, "--method", method, "--time-budget", "0.2", *out, *json_flag], out[1:2]
    if which == "synth-corpus":
        out = draw(st.sampled_from([[], ["-o", "bank.regex"], ["-o", "bank.regex", "--append"], ["-o", "good.regex", "--force"], ["-o", target]]))
        label = draw(st.sampled_from([[], ["--label", "UPOS"], ["--label", "XPOS"], ["--label", "NOPE"]])) if kind == "conllu" else []
        classes = draw(st.sampled_from([[], ["--classes", "N,V"], ["--classes", ","], ["--classes", "NOUN"]]))
        return ["synth", "--corpus", target, *label, *classes, "--time-budget", "0.3", *out, *json_flag], out[1:2]
    out = draw(st.sampled_from([None, "c.png", "c.svg", "c.xyz", "run/metrics.jsonl", "notes.txt"]))
    return ["plot", "run", *(["-o", out] if out else [])], [out or "run/curves.png"]


# ---------------------------------------------------------------------- the pass
@dataclass
class Tally:
    """What the pass saw: counts for the report, and the failures to show."""

    inputs: int = 0
    exits: Counter = field(default_factory=Counter)
    commands: Counter = field(default_factory=Counter)
    kinds: Counter = field(default_factory=Counter)
    tracebacks: int = 0
    internal_errors: int = 0
    changed_inputs: int = 0
    peak_added_mib: float = 0.0
    slowest_s: float = 0.0
    failures: list = field(default_factory=list)

    def report(self) -> dict:
        return {"inputs": self.inputs, "exit_codes": dict(sorted(self.exits.items())), "commands": dict(self.commands),
                "kinds": dict(self.kinds), "tracebacks": self.tracebacks, "internal_errors": self.internal_errors,
                "changed_inputs": self.changed_inputs, "peak_added_MiB": round(self.peak_added_mib, 1),
                "slowest_call_s": round(self.slowest_s, 2)}


def _snapshot(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class _Timeout(BaseException):
    """A call over CALL_SECONDS (a BaseException, so the CLI's guard does not report it as
    an internal error of neurosym)."""


def _alarm(*_):
    raise _Timeout


def setup_folder(folder: Path, kind: str, form: str, content: bytes | None, artifact: bytes) -> str:
    """The folder of one call: the bad input as ``bad<suffix>`` plus the files a command
    may name (a good bank and FSG with what they import, a foreign file, a word list, a
    subfolder, a run folder)."""
    folder.mkdir()
    (folder / "good.regex").write_text('A: /a+b/\nM: %words "words.txt"\n')
    (folder / "words.txt").write_text("jan\nfeb\n")
    (folder / "good.fsg").write_text("S A 'a' 1.0\nA 1.0\n")
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "foreign.safetensors").write_bytes(b"not an artifact")
    (folder / "sub").mkdir()
    (folder / "run").mkdir()
    target = "bad" + SUFFIX[kind]
    if kind == "metrics":
        target = "run/metrics.jsonl"
    else:
        (folder / "run" / "metrics.jsonl").write_bytes(HAND["metrics"])
    (folder / "months.txt").write_bytes((ROOT / "grammars" / "months.txt").read_bytes())  # dates.regex's word list
    if form == "file":
        (folder / target).write_bytes(content or b"")
    elif form == "folder":
        (folder / target).mkdir()
    return target


def one_call(tmp: Path, index: int, kind: str, form: str, content: bytes | None, argv: list[str], outputs: list[str],
             artifact: bytes, memory: PeakMemory, tally: Tally) -> None:
    folder = tmp / f"in{index}"
    setup_folder(folder, kind, form, content, artifact)
    before = _snapshot(folder)
    cwd = os.getcwd()
    start = memory.start()
    t0 = time.monotonic()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CALL_SECONDS)
    try:
        os.chdir(folder)
        r = CliRunner().invoke(main, argv)
    except _Timeout:
        tally.failures.append((argv, kind, f"ran over {CALL_SECONDS} s"))
        return
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(cwd)
    seconds = time.monotonic() - t0
    added = memory.added(start)
    after = _snapshot(folder)
    named = {str(Path(o)) for o in outputs if o}
    changed = [k for k in before if k not in named and after.get(k) != before[k]]
    tally.inputs += 1
    tally.exits[r.exit_code] += 1
    tally.commands[argv[0]] += 1
    tally.kinds[kind] += 1
    tally.peak_added_mib = max(tally.peak_added_mib, added / 2**20)
    tally.slowest_s = max(tally.slowest_s, seconds)
    crashed = r.exception is not None and not isinstance(r.exception, SystemExit)
    if crashed or "Traceback" in r.output:
        tally.tracebacks += 1
    if "internal error" in r.output:
        tally.internal_errors += 1
    if changed:
        tally.changed_inputs += 1
    allowed = {0, 2} | ({1} if argv[0] == "synth" else set())
    if crashed or "Traceback" in r.output or "internal error" in r.output or changed or r.exit_code not in allowed or added > MEMORY_BOUND:
        shown = repr(r.exception) if crashed else r.output[-400:]
        tally.failures.append((argv, kind, f"exit {r.exit_code}, changed {changed}, +{added / 2**20:.0f} MiB: {shown}"))


def fuzz_pass(tmp_path: Path, examples: int, budget_s: float, seed: int, run: Path | None = None) -> Tally:
    """``examples`` generated calls (fewer if ``budget_s`` runs out), hypothesis-driven;
    with ``run`` (a trained run folder, which must not change) generate and eval too."""
    from neurosym import load
    from neurosym.compile.artifact import to_bytes

    artifact = to_bytes(load(ROOT / "grammars/clause.fsg"))
    (tmp_path / "lexicons").mkdir()  # what the shipped grammars import as ../lexicons/...
    for f in (ROOT / "lexicons").iterdir():
        if f.is_file():
            (tmp_path / "lexicons" / f.name).write_bytes(f.read_bytes())
    memory = PeakMemory()
    tally = Tally()
    deadline = time.monotonic() + budget_s
    counter = iter(range(10**9))

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(data=st.data())
    def passes(data):
        kind, form, content = data.draw(bad_input(artifact))
        target = "run" if kind == "metrics" else "bad" + SUFFIX[kind]
        argv, outputs = data.draw(command(kind, target, None if run is None else str(run)))
        if time.monotonic() > deadline:  # drawn all the same: hypothesis wants the same draws each time
            return
        one_call(tmp_path, next(counter), kind, form, content, argv, outputs, artifact, memory, tally)

    run_before = _snapshot(run) if run is not None else None
    passes()
    if run is not None and _snapshot(run) != run_before:
        tally.changed_inputs += 1
        tally.failures.append((["generate/eval", str(run)], "run", "the run folder changed"))
    report = os.environ.get("NEUROSYM_FUZZ_REPORT")
    if report:
        Path(report).write_text(json.dumps(tally.report() | {"failures": [str(f)[:600] for f in tally.failures]}, indent=1))
    print("fuzz pass:", json.dumps(tally.report()))
    return tally


def _assert_clean(tally: Tally) -> None:
    shown = "\n".join(f"{' '.join(map(str, argv))} [{kind}]: {why}" for argv, kind, why in tally.failures[:8])
    assert not tally.failures, f"{len(tally.failures)} failing call(s) of {tally.inputs}:\n{shown}"
    assert tally.tracebacks == 0 and tally.changed_inputs == 0 and tally.internal_errors == 0


def test_a_small_fuzz_pass(tmp_path):
    tally = fuzz_pass(tmp_path, examples=300, budget_s=20, seed=0)
    _assert_clean(tally)
    assert tally.inputs >= 50 and tally.exits[2] > 0




@pytest.mark.slow
def test_the_full_fuzz_pass(tmp_path):
    """At least 2,000 calls, generate and eval included (on a tiny trained run)."""
    config = tmp_path / "tiny.toml"
    config.write_text(tiny_fusion_config(tmp_path / "runs"))
    assert CliRunner().invoke(main, ["train", str(config)]).exit_code == 0
    work = tmp_path / "work"
    work.mkdir()
    tally = fuzz_pass(work, examples=2200, budget_s=3600, seed=1, run=tmp_path / "runs" / "tiny")
    _assert_clean(tally)
    assert tally.inputs >= 2000
    assert set(tally.commands) >= {"check", "compile", "inspect", "sample", "synth", "plot", "generate", "eval"}
