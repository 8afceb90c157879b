"""Bad input never gives a traceback: every case is a NeurosymError naming the file
(issue 14.3), and seeded mutants of every shipped file raise nothing else."""

from __future__ import annotations

import json
import random
import signal
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from neurosym import kinds
from neurosym.cli.main import main
from neurosym.compile.regex import Limits
from neurosym.errors import NeurosymError
from tiny_runs import tiny_fusion_config

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "import_folder.regex": ('%import "adir" (A)\nB: A\n', "adir is a folder, not a file"),
    "words_folder.regex": ('A: %words "adir"\n', "adir is a folder, not a file"),
    "nul.regex": ('%import "a\\u0000b.regex" (A)\nB: A\n', "NUL byte"),
    "long_name.regex": ('%import "' + "x" * 300 + '.regex" (A)\nB: A\n', "cannot read"),
    "nested.regex": ("A: " + "(" * 10000 + '"a"' + ")" * 10000 + "\n", "nests too deeply"),
    "set_difference.regex": ("A: /[a--b]/\n", "ambiguous regex"),
    "range.lex": ("%feature polarity range=-1e400..1e400\ngood polarity=1e300\n", "out of the supported range"),
    "value.lex": ("%feature polarity range=-1e30..1e30\ngood polarity=1e300\n", "out of the supported range"),
    "window.lex": ("%feature polarity range=-1..1\n%modifier very booster=0.1 window=99999999999999999999\ngood polarity=0.5\n",
                   "window= expects a whole number from 1 to 1000"),
    "negation.lex": ("%feature polarity range=-1..1\n%modifier never negation=1e308\ngood polarity=0.5\n", "out of the supported range"),
    "nots.lex": ("%class A x\n%feature f = " + "!" * 10000 + "class(A)\n", "nests too deeply"),
    "prevs.lex": ("%class A x\n%feature f = " + "prev(" * 3000 + "class(A)" + ")" * 3000 + "\n", "nests too deeply"),
    "include_nul.lex": ('%include "a\\u0000b.lex"\n', "NUL byte"),
    "huge.fsg": ("%normalize\nS A 'a' 1e308\nS A 'b' 1e308\nA 1.0\n", "out of range"),
}


def test_the_memory_probe_sees_an_allocation():
    memory = PeakMemory()
    before = memory.start()
    block = b"\x01" * (64 * 2**20)  # written byte by byte: resident
    grown = memory.added(before)
    del block
    assert grown >= 60 * 2**20 if memory.exact else grown >= 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_files_are_one_line_errors(tmp_path, name):
    text, message = CASES[name]
    (tmp_path / "adir").mkdir()
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(NeurosymError, match=message) as err:
        kinds.load(path)
    assert name in str(err.value) or "adir" in str(err.value)
    r = CliRunner().invoke(main, ["check", str(path)])
    assert r.exit_code == 2 and "Traceback" not in r.output and message.split()[0] in r.output


def test_huge_weights_under_normalize_are_rescaled(tmp_path):
    path = tmp_path / "n.pcfg"
    path.write_text("%normalize\nS -> 'a' [1e308] | 'b' [1e308]\n")
    rules = kinds.load(path)
    assert abs(float(rules.root_term.exp().sum()) - 1.0) < 1e-6


# ---------------------------------------------------------------------- fuzzing
SHIPPED = sorted(p for p in (ROOT / "grammars").iterdir() if p.suffix in (".regex", ".fsg", ".pcfg")) + [
    ROOT / "lexicons" / "sentiment.lex", ROOT / "lexicons" / "afinn.lex"
]
TOKENS = ["(", ")", "[", "]", "{", "}", "*", "+", "?", "|", "\\", "/", "'", '"', "%", "@", "=", ":", "->",
          "1e308", "-1", "0", "99999999999", "\n", " ", "<eps>", "#", "..", "nan", "inf", "\x00", "!", "prev("]


class _Timeout(Exception):
    pass


MEMORY_BOUND = 768 * 2**20  # bytes a mutant's check may add to the process's resident peak


class PeakMemory:
    """The resident-memory peak one call adds, on Linux: ``VmHWM`` of /proc/self/status,
    reset before each call through /proc/self/clear_refs. Where that reset is refused, the
    peak over the whole run (``ru_maxrss``) stands in, which can only under-report."""

    STATUS = Path("/proc/self/status")

    def __init__(self) -> None:
        self.exact = self._reset()

    @staticmethod
    def _reset() -> bool:
        try:
            Path("/proc/self/clear_refs").write_text("5")
            return True
        except OSError:
            return False

    def _field(self, name: str) -> int:
        for line in self.STATUS.read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
        raise KeyError(name)

    def start(self) -> int:
        if self.exact:
            self._reset()
            return self._field("VmRSS")
        import resource  # lazy: POSIX only

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def added(self, before: int) -> int:
        if self.exact:
            return self._field("VmHWM") - before
        import resource  # lazy: POSIX only

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before


def _mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(text) + 1)
        op = rng.random()
        if op < 0.3 and text:
            text = text[:i] + text[min(len(text), i + rng.randint(1, 8)):]
        elif op < 0.7:
            text = text[:i] + rng.choice(TOKENS) + text[i:]
        elif op < 0.85 and text:
            lines = text.split("\n")
            k = rng.randrange(len(lines))
            lines.insert(k, lines[k])
            text = "\n".join(lines)
        else:
            text = text[:i] + chr(rng.randint(32, 126)) + text[i:]
    return text


def fuzz(tmp_path: Path, per_file: int, seconds: float = 10.0) -> dict[str, int]:
    """Load ``per_file`` seeded mutants of every shipped file; counts by outcome. Anything
    but a NeurosymError (or success) within ``seconds`` and MEMORY_BOUND bytes of added
    resident peak fails the test with the mutant."""
    for folder in ("grammars", "lexicons"):  # mutants keep their relative imports working
        (tmp_path / folder).mkdir()
        for f in (ROOT / folder).iterdir():
            if f.is_file():
                (tmp_path / folder / f.name).write_bytes(f.read_bytes())

    def alarm(*_):
        raise _Timeout

    old = signal.signal(signal.SIGALRM, alarm)
    counts: dict[str, int] = {}
    memory = PeakMemory()
    limits = Limits(max_states=2000, time_limit=seconds / 2, max_elements=2**24)
    try:
        for source in SHIPPED:
            text = source.read_text(encoding="utf-8")
            rng = random.Random(source.name)
            target = tmp_path / source.parent.name / source.name
            for k in range(per_file):
                mutant = _mutate(text, rng)
                target.write_text(mutant, encoding="utf-8", errors="surrogatepass")
                before = memory.start()
                signal.setitimer(signal.ITIMER_REAL, seconds)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("error")  # no raw warning reaches a user either
                        kinds.load(target, None, limits)
                    outcome = "ok"
                except NeurosymError as err:
                    outcome = type(err).__name__
                except _Timeout:
                    pytest.fail(f"{source.name} mutant {k} ran over {seconds} s:\n{mutant[:500]}")
                except Exception as err:  # noqa: BLE001 - the point of the test
                    pytest.fail(f"{source.name} mutant {k}: {type(err).__name__}: {err}\n{mutant[:500]}")
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                grown = memory.added(before)
                if grown > MEMORY_BOUND:
                    pytest.fail(f"{source.name} mutant {k} added {grown / 2**20:.0f} MiB to the memory peak:\n{mutant[:500]}")
                counts[outcome] = counts.get(outcome, 0) + 1
            target.write_bytes(source.read_bytes())
    finally:
        signal.signal(signal.SIGALRM, old)
    return counts


def test_seeded_mutants_of_every_shipped_file_raise_only_neurosym_errors(tmp_path):
    counts = fuzz(tmp_path, per_file=100)  # 3,000 per file under -m slow
    assert sum(counts.values()) == 100 * len(SHIPPED)  # each within the time and memory bounds
    assert counts.get("ok", 0) > 0 and counts.get("SourceError", 0) > 0  # both outcomes are exercised


@pytest.mark.slow
def test_many_seeded_mutants(tmp_path):
    counts = fuzz(tmp_path, per_file=3000)
    assert sum(counts.values()) == 3000 * len(SHIPPED)


# ---------------------------------------------------------------------- no wrong successes
def test_sampling_a_pattern_longer_than_max_len_is_an_error(tmp_path):
    bank = tmp_path / "five.regex"
    bank.write_text("A: /[0-9]{5}/\n")
    r = CliRunner().invoke(main, ["sample", str(bank), "--max-len", "3", "-n", "2"])
    assert r.exit_code == 2 and "no string of at most 3 characters" in r.output


def test_an_unsolved_synthesis_exits_1(tmp_path):
    pos, neg = tmp_path / "pos.txt", tmp_path / "neg.txt"
    pos.write_text("0\n1\n01\n10\n101\n010\n1010\n0101\n10101\n")
    neg.write_text("00\n11\n011\n001\n110\n1001\n101101\n010010\n")
    r = CliRunner().invoke(main, ["synth", "--pos", str(pos), "--neg", str(neg), "--method", "evolve", "--time", "0.3", "--json"])
    assert r.exit_code == 1, r.output
    assert json.loads(r.output.strip().splitlines()[-1])["solved"] is False


def test_a_run_without_training_batches_is_a_config_error(tmp_path):
    from neurosym.errors import ConfigError
    from neurosym.experiments.semantic_fusion import recipe_config
    from neurosym.lm.task import LMTask

    config = recipe_config("baseline", 0, tmp_path, epochs=1, model={"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}, train=0, valid=8)
    with pytest.raises(ConfigError, match="data.train_sentences: expected an integer >= 1, got 0"):  # before any training
        LMTask(config)


def test_an_empty_bank_or_lexicon_is_ok_with_a_warning(tmp_path):
    for name in ("empty.regex", "empty.lex"):
        path = tmp_path / name
        path.write_text("# nothing here\n")
        r = CliRunner().invoke(main, ["check", str(path)])
        assert r.exit_code == 0 and "warning: the file defines nothing" in r.output, r.output
        r = CliRunner().invoke(main, ["check", str(path), "--json"])
        assert json.loads(r.output)[0]["warnings"] == ["the file defines nothing"]


# ---------------------------------------------------------------------- issue 32: no traceback, positions of bad bytes
BAD_UTF8 = {  # name -> (bytes, line, column of the bad byte)
    "bank.regex": (b'A: /ab/\nB: /c\xffd/\n', 2, 6),
    "clause.fsg": (b"S A 'a' 1.0\nA B 'b\xe9' 1.0\nB 1.0\n", 2, 7),
    "g.pcfg": (b"S -> A 1.0\nA -> '\xc3' 1.0\n", 2, 7),
    "lex.lex": (b"%feature f range=0..1\ngood f=1\n\xa0bad f=0\n", 3, 1),
}


@pytest.mark.parametrize("name", sorted(BAD_UTF8))
def test_invalid_utf8_is_reported_at_its_line_and_column(tmp_path, name):
    data, line, col = BAD_UTF8[name]
    path = tmp_path / name
    path.write_bytes(data)
    r = CliRunner().invoke(main, ["check", str(path)])
    assert r.exit_code == 2 and f"{name}:{line}:{col}: the file is not UTF-8" in r.output and "Traceback" not in r.output, r.output


def test_data_readers_report_bad_bytes_and_rows_at_line_and_column(tmp_path):
    from neurosym.data.text import read_tagged
    from neurosym.synth.corpus import read_corpus
    from neurosym.vocab import load_vocab

    cases = [
        ("c.tsv", b"cat\tN\ndo\xffg\tN\n", "c.tsv:2:3: the file is not UTF-8", read_corpus),
        ("r.tsv", b"cat\tN\ndog\tN\tX\n", "r.tsv:2:7: expected 'string<TAB>label', got 3", read_corpus),
        ("e.tsv", b"cat\tN\ndog\t \n", "e.tsv:2:5: empty label", read_corpus),
        ("c.conllu", b"1\tHi\thi\tX\t_\t_\t0\troot\t_\t_\n\n1\tB\xfe\n", "c.conllu:3:4: the file is not UTF-8", read_corpus),
        ("s.conllu", b"1\tHi\thi\tX\t_\t_\t0\troot\t_\n", "s.conllu:1:23: a CoNLL-U word line has 10", read_corpus),
        ("t.tsv", b"Hi\tX\nthere\t\n", "t.tsv:2:7: empty form or tag", read_tagged),
        ("words.txt", b"ab\n\x80cd\n", "words.txt:2:1: the file is not UTF-8", load_vocab),
    ]
    for name, data, message, reader in cases:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(NeurosymError) as err:
            reader(tmp_path / name)
        assert message in str(err.value), (name, str(err.value))


def test_word_list_bad_bytes_are_placed_in_the_word_list(tmp_path):
    (tmp_path / "w.txt").write_bytes(b"jan\nf\xe9b\n")
    (tmp_path / "b.regex").write_text('M: %words "w.txt"\n')
    r = CliRunner().invoke(main, ["check", str(tmp_path / "b.regex")])
    assert r.exit_code == 2 and "w.txt:2:2: the file is not UTF-8" in r.output, r.output


def test_the_listed_tracebacks_are_one_line_errors(tmp_path):
    """issue 32's cases: a folder as the corpus, a binary vocabulary, a run whose metrics are
    not UTF-8, a folder or binary as examples."""
    (tmp_path / "corpus").mkdir()
    binary = tmp_path / "vocab.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(200, 256)) * 4)
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 2.0}\n\xff\xfe{"step": 2}\n')
    cases = [
        (["synth", "--corpus", str(tmp_path / "corpus")], "corpus: is a folder"),
        (["compile", str(ROOT / "grammars/dates.regex"), "--vocab", str(binary), "-o", str(tmp_path / "v.safetensors")],
         "vocab.bin:1:9: the file is not UTF-8"),
        (["plot", str(run)], "metrics.jsonl:2:1: the file is not UTF-8"),
        (["synth", "--pos", str(tmp_path / "corpus")], "corpus: is a folder"),
        (["synth", "--pos", str(binary)], "vocab.bin:1:9: the file is not UTF-8"),
    ]
    for args, message in cases:
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, (args, r.output)
    assert not (tmp_path / "v.safetensors").exists()


def test_a_last_metrics_line_torn_by_a_kill_is_skipped(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.\xe2\x82')
    r = CliRunner().invoke(main, ["plot", str(run)])
    assert r.exit_code == 0 and (run / "curves.png").is_file(), r.output


def test_the_top_level_guard_turns_any_error_into_one_line(monkeypatch):
    """OSError, UnicodeDecodeError and anything unforeseen: a line and exit 2 (--debug: the traceback)."""
    from neurosym import kinds as kinds_module

    def boom(error):
        def sample(*_a, **_k):
            raise error
        return sample

    cases = [
        (PermissionError(13, "Permission denied", "some/file"), "error: some/file: Permission denied"),
        (b"ab\ncd\xff".decode("utf-8", "strict") if False else UnicodeDecodeError("utf-8", b"ab\ncd\xff", 5, 6, "invalid start byte"),
         "error: input:2:3: the file is not UTF-8 (invalid start byte: byte 0xff)"),
        (MemoryError(), "error: out of memory"),
        (IndexError("list index out of range"), "error: internal error (IndexError: list index out of range); this is a bug"),
    ]
    for error, message in cases:
        monkeypatch.setattr(kinds_module, "sample", boom(error))
        r = CliRunner().invoke(main, ["sample", str(ROOT / "grammars/clause.fsg")])
        assert r.exit_code == 2 and r.output.startswith(message) and len(r.output.strip().splitlines()) == 1, r.output
    r = CliRunner().invoke(main, ["--debug", "sample", str(ROOT / "grammars/clause.fsg")])
    assert isinstance(r.exception, IndexError)


def test_errors_start_their_own_line(tmp_path):
    """Progress never shares a line with an error: every stderr line with 'error:' starts with it."""
    pos = tmp_path / "pos.txt"
    pos.write_text("ab\nabab\n")
    runner = CliRunner(mix_stderr=False) if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else CliRunner()
    r = runner.invoke(main, ["synth", "--pos", str(pos), "-o", str(tmp_path / "no" / "x.regex"), "--name", "X"])
    err = r.stderr if hasattr(r, "stderr") and r.stderr is not None else r.output
    assert r.exit_code == 2 and all(line.startswith("error:") for line in err.splitlines() if "error:" in line), err


# ---------------------------------------------------------------------- issue 32: streaming and honest exits
def test_sample_streams_and_keeps_the_samples_of_one_call():
    """-n up to 1,000 draws what one call draws; larger -n goes on in chunks (same first
    1,000); a JSON list is still one list."""
    clause = str(ROOT / "grammars/clause.fsg")
    one = CliRunner().invoke(main, ["sample", clause, "-n", "1000", "--seed", "4"]).output.splitlines()
    assert one == kinds.sample(ROOT / "grammars/clause.fsg", kinds.SampleOptions(n=1000, seed=4))
    more = CliRunner().invoke(main, ["sample", clause, "-n", "2500", "--seed", "4"]).output.splitlines()
    assert len(more) == 2500 and more[:1000] == one and more[1000:] != one[:1500]
    rows = json.loads(CliRunner().invoke(main, ["sample", clause, "-n", "1200", "--json"]).output)
    assert len(rows) == 1200 and all(isinstance(r, str) for r in rows)
    assert json.loads(CliRunner().invoke(main, ["sample", clause, "-n", "0", "--json"]).output) == []


def test_a_huge_sample_count_prints_at_once_and_stops_quietly_when_the_reader_goes():
    import os
    import subprocess
    import sys
    import time

    code = "import sys; from neurosym.cli.main import main; main(sys.argv[1:])"
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", code, "sample", str(ROOT / "grammars/clause.fsg"), "-n", str(10**12)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    first = [p.stdout.readline() for _ in range(5)]
    elapsed = time.monotonic() - t0
    p.stdout.close()  # the reader goes away, as `| head -5` does
    _, err = p.communicate(timeout=120)
    assert all(line.strip() for line in first) and elapsed < 60
    assert p.returncode == 0 and b"Traceback" not in err, err.decode()




def test_generate_says_why_when_every_sample_dead_ends(tmp_path):
    """A character-level pattern on the word-level model: no word token spells a year."""
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(tiny_fusion_config(tmp_path))
    assert CliRunner().invoke(main, ["train", str(cfg)]).exit_code == 0
    r = CliRunner().invoke(main, ["generate", str(tmp_path / "tiny"), "--grammar", f"{ROOT / 'grammars/dates.regex'}:YEAR", "-n", "3"])
    assert r.exit_code == 2 and "every sample dead-ended" in r.output and "vocabulary" in r.output, r.output
    ok = CliRunner().invoke(main, ["generate", str(tmp_path / "tiny"), "--grammar", str(ROOT / "grammars/clause.fsg"), "-n", "2"])
    assert ok.exit_code == 0 and "dead" not in ok.output, ok.output


def test_sampling_an_empty_bank_is_an_error_like_its_check(tmp_path):
    bank = tmp_path / "empty.regex"
    bank.write_text("")
    r = CliRunner().invoke(main, ["sample", str(bank)])
    assert r.exit_code == 2 and "empty.regex: the bank defines no pattern to sample" in r.output, r.output


def test_tokenizer_files_and_configs_report_the_place_of_the_fault(tmp_path):
    cases = [
        ("bad.json", b'{"model": \xff}', "bad.json:1:11: the file is not UTF-8"),
        ("serde.json", b'{"model": {"type": "BPE"}}', "serde.json:1:26: not a tokenizers JSON file"),
    ]
    for name, data, message in cases:
        (tmp_path / name).write_bytes(data)
        r = CliRunner().invoke(main, ["compile", str(ROOT / "grammars/dates.regex"), "--vocab", str(tmp_path / name),
                                      "-o", str(tmp_path / "o.safetensors")])
        assert r.exit_code == 2 and message in r.output, r.output
    (tmp_path / "c.toml").write_bytes(b'[run]\nname = "x\xff"\n')
    r = CliRunner().invoke(main, ["train", str(tmp_path / "c.toml")])
    assert r.exit_code == 2 and "c.toml:2:10: the file is not UTF-8" in r.output, r.output


def test_a_lexicon_of_classes_only_is_not_reported_empty():
    """topics.lex and domains.lex declare word classes for the FSGs that import them."""
    for name in ("lexicons/topics.lex", "lexicons/domains.lex"):
        r = CliRunner().invoke(main, ["check", str(ROOT / name)])
        assert r.exit_code == 0 and "warning" not in r.output, r.output
