"""Only regular files are read (issue 44, point 3): a grammar, bank, lexicon, word list,
corpus, config, vocabulary, tokenizer or artifact that is — or imports — a device
(``/dev/zero``, ``/dev/urandom``), a FIFO or a link to one is refused before anything is
read, in well under a second, with one line naming the file (and, for an import or an
include, the line and column where it is named). The cases of one kind of special file
run in one child process under a wall-clock limit, so a regression hangs the child, not
the suite; each case is timed in the child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not (Path("/dev/zero").exists() and hasattr(os, "mkfifo")), reason="needs /dev/zero and FIFOs (POSIX)")

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent('''
    import json, sys, time
    import neurosym
    from neurosym.data.text import read_text
    from neurosym.errors import NeurosymError
    from neurosym.lm.config import load_config
    from neurosym.vocab import Vocab, load_vocab

    out = {}
    for name, code in json.loads(sys.argv[1]).items():
        t0 = time.perf_counter()
        try:
            exec(code)
            out[name] = ["no error", time.perf_counter() - t0]
        except NeurosymError as err:
            out[name] = [str(err), time.perf_counter() - t0]
    print(json.dumps(out))
''')


def special(tmp_path: Path, which: str, name: str) -> Path:
    """``tmp_path/name``: a link to /dev/zero or /dev/urandom, or a FIFO with no writer."""
    path = tmp_path / name
    if which == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(f"/dev/{which}")
    return path


@pytest.mark.parametrize("which", ["zero", "urandom", "fifo"])
def test_every_input_that_is_or_imports_a_special_file_is_refused_at_once(tmp_path, which):
    files = {name: special(tmp_path, which, name) for name in (
        "words.txt", "g.regex", "g.fsg", "g.pcfg", "g.lex", "w.txt", "other.regex", "other.lex",
        "c.toml", "v.txt", "t.json", "corpus.txt", "a.safetensors")}
    bank = tmp_path / "b.regex"
    bank.write_text('X: %words "w.txt"\n', encoding="utf-8")
    pcfg = tmp_path / "main.pcfg"
    pcfg.write_text('%import "other.regex" (X)\nS -> X [1.0]\n', encoding="utf-8")
    lex = tmp_path / "main.lex"
    lex.write_text('%include "other.lex"\n', encoding="utf-8")
    cases = {name: f"neurosym.load({str(files[name])!r})" for name in ("words.txt", "g.regex", "g.fsg", "g.pcfg", "g.lex", "a.safetensors")}
    cases |= {
        "bank importing a word list": f"neurosym.load({str(bank)!r})",
        "pcfg importing a bank": f"neurosym.load({str(pcfg)!r})",
        "lexicon including a lexicon": f"neurosym.load({str(lex)!r})",
        "c.toml": f"load_config({str(files['c.toml'])!r})",
        "v.txt": f"load_vocab({str(files['v.txt'])!r})",
        "t.json": f"Vocab.from_tokenizer({str(files['t.json'])!r})",
        "corpus.txt": f"read_text({str(files['corpus.txt'])!r})",
    }
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cases)], capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for name, (msg, seconds) in got.items():
        assert seconds < 1.0, (name, seconds)
        assert msg != "no error" and "Traceback" not in msg and "\n" not in msg, (name, msg)
        assert "not a regular file" in msg or "is not a file" in msg, (name, msg)
    for name, named in (("bank importing a word list", bank), ("pcfg importing a bank", pcfg), ("lexicon including a lexicon", lex)):
        assert got[name][0].startswith(f"{named}:1:"), got[name]  # at the line and column of the import
    for name in ("words.txt", "g.pcfg", "c.toml", "v.txt", "t.json", "corpus.txt", "a.safetensors"):
        assert name in got[name][0], got[name]


def test_a_folder_is_still_a_folder(tmp_path):
    from neurosym.files import read_input

    with pytest.raises(IsADirectoryError):
        read_input(tmp_path)


def test_the_size_limit_holds_for_a_file_that_grows_past_it(tmp_path):
    from neurosym.files import InputTooLarge, read_input

    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 2000)
    assert read_input(path, 2000) == b"x" * 2000
    with pytest.raises(InputTooLarge, match="limit"):
        read_input(path, 1999)
