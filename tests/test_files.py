"""Writing files: atomically, with the usual permissions, never over an input (issue 14.1)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from neurosym.cli.main import main
from neurosym.errors import NeurosymError
from neurosym.files import atomic_write_bytes, check_output

ROOT = Path(__file__).resolve().parents[1]


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_new_files_follow_the_umask(tmp_path, umask):
    assert mode(atomic_write_bytes(tmp_path / "a", b"x")) == 0o644
    os.umask(0o077)
    assert mode(atomic_write_bytes(tmp_path / "b", b"x")) == 0o600


def test_a_replaced_file_keeps_its_mode(tmp_path, umask):
    target = tmp_path / "bank.regex"
    target.write_text("A: /a/\n")
    os.chmod(target, 0o640)
    atomic_write_bytes(target, b"A: /b/\n")
    assert mode(target) == 0o640 and target.read_text() == "A: /b/\n"
    assert [p.name for p in tmp_path.iterdir()] == ["bank.regex"]


def test_check_output_refuses_bad_paths(tmp_path):
    src = tmp_path / "ids.regex"
    src.write_text("A: /a/\n")
    with pytest.raises(NeurosymError, match="over the input"):
        check_output(src, [src])
    (tmp_path / "sub").mkdir()
    with pytest.raises(NeurosymError, match="over the input"):
        check_output(tmp_path / "sub" / ".." / "ids.regex", [src])  # another spelling of the same file
    with pytest.raises(NeurosymError, match="is a folder"):
        check_output(tmp_path, [src])
    with pytest.raises(NeurosymError, match="empty"):
        check_output("", [src])
    with pytest.raises(NeurosymError, match="does not exist"):
        check_output(tmp_path / "nowhere" / "x.safetensors", [src])
    assert check_output(tmp_path / "ok.safetensors", [src]) == tmp_path / "ok.safetensors"


def test_compile_refuses_to_overwrite_its_source_and_bad_outputs(tmp_path, umask):
    src = tmp_path / "ids.regex"
    text = "ID: /[a-z]+[0-9]*/\n"
    src.write_text(text)
    runner = CliRunner()
    for out, message in [(str(src), "over the input"), (str(tmp_path), "is a folder"), ("", "empty"),
                         (str(tmp_path / "no" / "x.safetensors"), "does not exist")]:
        r = runner.invoke(main, ["compile", str(src), "-o", out])
        assert r.exit_code == 2 and message in r.output, (out, r.output)
        assert "Traceback" not in r.output
    assert src.read_text() == text and not (tmp_path / "no").exists()
    r = runner.invoke(main, ["compile", str(src), "-o", str(tmp_path / "ids.safetensors")])
    assert r.exit_code == 0, r.output
    assert mode(tmp_path / "ids.safetensors") == 0o644


def test_synth_keeps_the_bank_mode(tmp_path, umask):
    bank = tmp_path / "b.regex"
    bank.write_text("A: /a/\n")
    os.chmod(bank, 0o644)
    pos = tmp_path / "pos.txt"
    pos.write_text("0\n00\n01\n")
    neg = tmp_path / "neg.txt"
    neg.write_text("1\n10\n")
    r = CliRunner().invoke(main, ["synth", "--pos", str(pos), "--neg", str(neg), "-o", str(bank), "--name", "Z", "--json", "--time", "5"])
    assert r.exit_code == 0, r.output
    assert mode(bank) == 0o644 and "Z:" in bank.read_text()
    r = CliRunner().invoke(main, ["synth", "--pos", str(pos), "-o", str(pos), "--name", "Z", "--json"])
    assert r.exit_code == 2 and "over the input" in r.output


def test_runs_are_ignored_by_git():
    assert "runs/" in (ROOT / ".gitignore").read_text().split()


# ---------------------------------------------------------------------- issue 32: nothing a user owns is lost
ROOT = Path(__file__).resolve().parents[1]


def _copy_grammars(tmp_path: Path) -> tuple[Path, Path]:
    """grammars/ and lexicons/ copied under tmp_path (imports and word lists stay relative)."""
    for folder in ("grammars", "lexicons"):
        (tmp_path / folder).mkdir()
        for f in (ROOT / folder).iterdir():
            if f.is_file():
                (tmp_path / folder / f.name).write_bytes(f.read_bytes())
    return tmp_path / "grammars", tmp_path / "lexicons"


def _invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_compile_never_writes_over_a_file_an_input_reads(tmp_path):
    """A word list, an imported lexicon, a vocabulary: refused even with --force and even
    when the name has the artifact's extension (here: links named .safetensors)."""
    grammars, lexicons = _copy_grammars(tmp_path)
    cases = [(grammars / "dates.regex", grammars / "months.txt"), (grammars / "clause.fsg", lexicons / "sentiment.lex")]
    for source, read in cases:
        before = read.read_bytes()
        r = _invoke("compile", source, "-o", read, "--force")
        assert r.exit_code == 2 and "is a .safetensors file" in r.output, r.output
        link = tmp_path / f"{read.stem}.safetensors"
        link.symlink_to(read)
        r = _invoke("compile", source, "-o", link, "--force")
        assert r.exit_code == 2 and "refusing to write the artifact over the input" in r.output, r.output
        assert "--force does not change that" in r.output and read.read_bytes() == before
    words = tmp_path / "words.txt"
    words.write_text("ab\ncd\n")
    link = tmp_path / "vocab.safetensors"
    link.symlink_to(words)
    r = _invoke("compile", grammars / "dates.regex", "--vocab", words, "-o", link, "--force")
    assert r.exit_code == 2 and "over the input" in r.output and words.read_text() == "ab\ncd\n"


def test_compile_replaces_only_its_own_artifacts_of_the_same_kind(tmp_path):
    grammars, _ = _copy_grammars(tmp_path)
    out = tmp_path / "a.safetensors"
    out.write_bytes(b"not an artifact")
    r = _invoke("compile", grammars / "dates.regex", "-o", out)
    assert r.exit_code == 2 and "exists and is not a neurosym artifact" in r.output and "--force" in r.output
    assert out.read_bytes() == b"not an artifact"
    assert _invoke("compile", grammars / "dates.regex", "-o", out, "--force").exit_code == 0
    assert _invoke("compile", grammars / "dates.regex", "-o", out).exit_code == 0  # its own bank artifact: replaced
    before = out.read_bytes()
    r = _invoke("compile", grammars / "clause.fsg", "-o", out)
    assert r.exit_code == 2 and "holds a regex artifact, and this is a fsg" in r.output and out.read_bytes() == before
    for name in ("other.regex", "notes.txt", "noext"):
        r = _invoke("compile", grammars / "dates.regex", "-o", tmp_path / name)
        assert r.exit_code == 2 and "is a .safetensors file" in r.output and not (tmp_path / name).exists()


def _fake_run(folder: Path) -> Path:
    folder.mkdir()
    (folder / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n')
    (folder / "config.json").write_text('{"a": 1}\n')
    return folder


def test_plot_writes_images_only_and_never_over_run_files(tmp_path):
    run = _fake_run(tmp_path / "run")
    for name in ("config.json", "metrics.jsonl", "bank.regex", "out.xyz"):
        before = (run / name).read_bytes() if (run / name).exists() else None
        r = _invoke("plot", run, "-o", run / name, "--force")
        assert r.exit_code == 2 and ("is a .png or .svg or .pdf file" in r.output or "over the input" in r.output), r.output
        assert ((run / name).read_bytes() if (run / name).exists() else None) == before
    for suffix, magic in ((".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")):
        out = tmp_path / f"c{suffix}"
        r = _invoke("plot", run, "-o", out)
        assert r.exit_code == 0 and out.read_bytes().startswith(magic), r.output  # the format the name asks for
        assert _invoke("plot", run, "-o", out).exit_code == 0  # its own plot: replaced
    foreign = tmp_path / "photo.png"
    foreign.write_bytes(b"\x89PNG a holiday photo")
    r = _invoke("plot", run, "-o", foreign)
    assert r.exit_code == 2 and "not a neurosym plot" in r.output and foreign.read_bytes() == b"\x89PNG a holiday photo"
    assert _invoke("plot", run).exit_code == 0 and _invoke("plot", run).exit_code == 0  # RUN/curves.png, twice
    assert (run / "config.json").read_text() == '{"a": 1}\n'


def test_inspect_draws_only_drawings_and_replaces_only_its_own(tmp_path):
    grammars, _ = _copy_grammars(tmp_path)
    notes = tmp_path / "notes.dot"
    notes.write_text("digraph mine {}\n")
    r = _invoke("inspect", grammars / "clause.fsg", "--draw", notes)
    assert r.exit_code == 2 and "not a neurosym drawing" in r.output and notes.read_text() == "digraph mine {}\n"
    out = tmp_path / "clause.dot"
    assert _invoke("inspect", grammars / "clause.fsg", "--draw", out).exit_code == 0
    assert _invoke("inspect", grammars / "clause.fsg", "--draw", out).exit_code == 0
    r = _invoke("inspect", grammars / "clause.fsg", "--draw", tmp_path / "clause.txt")
    assert r.exit_code == 2 and ".dot or .png or .svg or .pdf" in r.output


def test_synth_corpus_onto_an_existing_bank_needs_append_or_force(tmp_path):
    corpus = tmp_path / "c.tsv"
    corpus.write_text("cat\tN\ndog\tN\nrun\tV\neat\tV\n")
    bank = tmp_path / "bank.regex"
    bank.write_text("OLD: /x/\n")
    base = ["synth", "--corpus", corpus, "-o", bank, "--time-budget", "2", "--json"]
    r = _invoke(*base)
    assert r.exit_code == 2 and "--append adds the classes to it, --force replaces it" in r.output
    assert bank.read_text() == "OLD: /x/\n"
    assert _invoke(*base, "--append").exit_code == 0
    names = [line.split(":")[0] for line in bank.read_text().splitlines()]
    assert names == ["OLD", "N", "V"]
    r = _invoke(*base, "--append")
    assert r.exit_code == 2 and "already has N, V; nothing was added" in r.output
    assert _invoke(*base, "--force").exit_code == 0
    assert [line.split(":")[0] for line in bank.read_text().splitlines()] == ["N", "V"]
    r = _invoke("synth", "--corpus", corpus, "-o", tmp_path / "bank.txt")
    assert r.exit_code == 2 and "is a .regex file" in r.output
    r = _invoke("synth", "--corpus", corpus, "-o", corpus, "--force")
    assert r.exit_code == 2 and "over the input" in r.output


def test_a_killed_writer_s_temp_file_is_removed_by_the_next_write(tmp_path):
    """A temp file named after a PID that no longer runs goes; a live writer's stays."""
    import subprocess
    import sys

    target = tmp_path / "a.safetensors"
    script = ("import os, signal, sys\nfrom neurosym.files import atomic_write\n"
              "def w(f):\n    f.write(b'x' * 100000); f.flush(); os.kill(os.getpid(), signal.SIGKILL)\n"
              f"atomic_write({str(target)!r}, w)\n")
    assert subprocess.run([sys.executable, "-c", script]).returncode == -9
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".a.safetensors.neurosym-") and left[0].endswith(".tmp")
    live = tmp_path / f".a.safetensors.neurosym-{os.getpid()}-abc.tmp"  # this process: alive
    live.write_bytes(b"")
    atomic_write_bytes(target, b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.safetensors", live.name])


def _read_only_invokes(folder: Path, commands: list[list[str]]) -> list[tuple[int, str]]:
    """Run each CLI command where ``folder`` cannot be written: chmod 555, and for root (who
    writes anyway) one child without the capabilities that override permissions, running
    the commands one after another through click's test runner (one interpreter start for
    all of them); each command's (exit code, output)."""
    import json
    import shutil
    import subprocess
    import sys

    folder.chmod(0o555)
    try:
        if os.geteuid() != 0:
            results = [CliRunner().invoke(main, list(args)) for args in commands]
            return [(r.exit_code, r.output) for r in results]
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: a read-only folder cannot be made")
        code = ("import json, sys\n"
                "from click.testing import CliRunner\n"
                "from neurosym.cli.main import main\n"
                "results = [CliRunner().invoke(main, args) for args in json.loads(sys.argv[1])]\n"
                "print(json.dumps([(r.exit_code, r.output) for r in results]))\n")
        p = subprocess.run(["setpriv", "--bounding-set=-all", "--inh-caps=-all", sys.executable, "-c", code, json.dumps(commands)],
                           capture_output=True, text=True, timeout=240)
        assert p.returncode == 0, p.stderr[-3000:]
        return [tuple(r) for r in json.loads(p.stdout.splitlines()[-1])]
    finally:
        folder.chmod(0o755)


def test_a_read_only_output_folder_is_an_error_before_any_work(tmp_path):
    grammars, _ = _copy_grammars(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    run = _fake_run(tmp_path / "run")
    pos = tmp_path / "pos.txt"
    pos.write_text("ab\nabab\n")
    cases = [
        ("artifact", ["compile", str(grammars / "dates.regex"), "-o", str(ro / "x.safetensors")]),
        ("plot", ["plot", str(run), "-o", str(ro / "c.png")]),
        ("drawing", ["inspect", str(grammars / "clause.fsg"), "--draw", str(ro / "c.png")]),
        ("bank", ["synth", "--pos", str(pos), "-o", str(ro / "x.regex"), "--name", "X", "--time-budget", "600"]),
    ]
    results = _read_only_invokes(ro, [args for _, args in cases])
    assert len(results) == len(cases)
    for (what, _), (code, out) in zip(cases, results):
        assert code == 2 and f"cannot write the {what} here (permission denied)" in out and "Traceback" not in out, out
    assert list(ro.iterdir()) == []


def test_two_writers_racing_on_one_output_the_loser_says_so(tmp_path):
    """Issue 44, point 2: an output checked by check_output (compile -o, synth -o) that
    another process writes before this one's result is ready is not replaced: the later
    writer refuses, naming the file; a fresh check claims it again."""
    from neurosym.errors import NeurosymError
    from neurosym.files import atomic_write_bytes, check_output

    out = tmp_path / "out.safetensors"
    check_output(out, ours=None)
    out.write_bytes(b"the other process's result")  # the winner, between our check and our write
    with pytest.raises(NeurosymError, match="another process wrote it while this one ran"):
        atomic_write_bytes(out, b"ours", make_parents=False)
    assert out.read_bytes() == b"the other process's result"
    check_output(out, ours=None)
    atomic_write_bytes(out, b"ours", make_parents=False)
    assert out.read_bytes() == b"ours"
    atomic_write_bytes(out, b"again", make_parents=False)  # unclaimed writes (run folders, caches) are not checked
    assert out.read_bytes() == b"again"
