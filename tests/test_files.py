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
