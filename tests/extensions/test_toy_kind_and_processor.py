"""Declared extension points (issue 27, point 5), used from outside the package as a user
would: a toy file kind (``.toy``: comma-separated words, ``;`` comments) registered with
:func:`neurosym.kinds.register`, and a toy decoding processor registered with
:func:`neurosym.decode.register_processor`, each then run through the command line
(``neurosym check / inspect / sample / compile / generate``) and ``neurosym.load``.
Both registrations are removed afterwards, so no other test sees them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import neurosym
from neurosym import kinds
from neurosym.cli.main import main
from neurosym.compile.regex import Limits, to_automaton, words_dfa
from neurosym.decode import LogitsProcessor, ProcessorContext, processor_names, register_processor, unregister_processor
from neurosym.errors import NeurosymError, SourceError
from neurosym.vocab import Vocab
from tiny_runs import tiny_fusion_config

pytestmark = pytest.mark.usefixtures("one_thread")



# ---------------------------------------------------------------------- the toy file kind
def toy_words(path: Path) -> list[str]:
    """A .toy file: words separated by commas, ``;`` starts a comment to the end of the line."""
    words = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for w in line.split(";", 1)[0].split(","):
            if w.strip() and not w.strip().isalpha():
                raise SourceError(f"a toy word is letters only, got {w.strip()!r}", str(path), n, line.index(w.strip()) + 1)
            if w.strip():
                words.append(w.strip())
    return words


def load_toy(path: Path, vocab: Vocab | None, limits: Limits):
    return to_automaton(words_dfa(toy_words(path), limits=limits), vocab, name=path.stem, source=str(path))


def sample_toy(path: Path, options: kinds.SampleOptions) -> list[str]:
    words = toy_words(path)
    g = torch.Generator().manual_seed(options.seed)
    return [words[int(i)] for i in torch.randint(len(words), (options.n,), generator=g)]


TOY = kinds.Kind("toy", ".toy", load_toy, sample=sample_toy, title="a .toy word file", grammar=True)


# ---------------------------------------------------------------------- the toy processor
class NoInitial(LogitsProcessor):
    """Forbid every token whose text starts with ``letter``; counts its calls."""

    calls = 0

    def __init__(self, letter: str, vocab: Vocab):
        self.banned = torch.tensor([t.startswith(letter) for t in vocab.tokens])

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        NoInitial.calls += 1
        return scores.masked_fill_(self.banned.to(scores.device)[None, :], float("-inf"))


def build_no_initial(arg: str | None, ctx: ProcessorContext) -> NoInitial:
    if not arg or len(arg) != 1:
        raise NeurosymError("--processor no-initial: expected no-initial:LETTER")
    return NoInitial(arg, ctx.vocab)


@pytest.fixture
def toy_kind():
    kinds.register(TOY)
    yield TOY
    kinds.unregister("toy")


@pytest.fixture
def toy_processor():
    register_processor("no-initial", build_no_initial, "no-initial:LETTER: forbid tokens starting with LETTER")
    NoInitial.calls = 0
    yield
    unregister_processor("no-initial")


@pytest.fixture
def toy_file(tmp_path) -> Path:
    path = tmp_path / "names.toy"
    path.write_text("; three names of the clause grammar\nAlice, Bob ; a comment\nCarol\n", encoding="utf-8")
    return path


def cli(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


# ---------------------------------------------------------------------- tests
def test_a_toy_kind_runs_through_load_and_every_file_command(toy_kind, toy_file, tmp_path):
    auto = neurosym.load(toy_file)
    assert [w for w in ("Alice", "Bob", "Carol", "Eve", "three") if auto.accepts(w)] == ["Alice", "Bob", "Carol"]
    assert kinds.kind_of(toy_file) is TOY and kinds.load_grammar(str(toy_file)).num_states == auto.num_states

    r = cli("check", "--json", toy_file)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)[0]["ok"] and json.loads(r.output)[0]["states"] == auto.num_states
    r = cli("inspect", toy_file)
    assert r.exit_code == 0 and f"{toy_file}: {auto.num_states} states" in r.output, r.output
    r = cli("sample", toy_file, "-n", "6", "--seed", "1", "--json")
    assert r.exit_code == 0 and set(json.loads(r.output)) <= {"Alice", "Bob", "Carol"} and len(json.loads(r.output)) == 6
    out = tmp_path / "names.safetensors"
    r = cli("compile", toy_file, "-o", out)
    assert r.exit_code == 0, r.output
    back = neurosym.load(out)
    assert torch.equal(back.delta, auto.delta) and torch.equal(back.final, auto.final)

    bad = tmp_path / "bad.toy"
    bad.write_text("Alice, B0b\n")
    r = cli("check", bad)
    assert r.exit_code == 2 and f"{bad}:1:8: a toy word is letters only, got 'B0b'" in r.output


def test_a_registered_kind_is_gone_after_unregister(toy_file):
    with pytest.raises(NeurosymError, match="unknown file kind '.toy'"):
        neurosym.load(toy_file)
    r = cli("check", toy_file)
    assert r.exit_code == 2 and "unknown file kind '.toy'" in r.output
    assert "no-initial" not in processor_names()


def test_registering_twice_is_an_error(toy_kind):
    with pytest.raises(NeurosymError, match="registered already"):
        kinds.register(TOY)
    with pytest.raises(NeurosymError, match="registered already"):
        kinds.register(kinds.Kind("other", ".toy", load_toy))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("toy-run")
    cfg = folder / "tiny.toml"
    cfg.write_text(tiny_fusion_config(folder, kind="baseline"))
    result = CliRunner().invoke(main, ["train", str(cfg)])
    assert result.exit_code == 0, result.output
    return folder / "tiny"


def test_a_toy_kind_and_a_toy_processor_run_through_generate(run_dir, toy_kind, toy_processor, toy_file):
    plain = cli("generate", run_dir, "--grammar", toy_file, "-n", "40", "--json")
    assert plain.exit_code == 0, plain.output
    assert {r["text"] for r in json.loads(plain.output)} == {"Alice", "Bob", "Carol"}  # 40 draws see every name
    assert NoInitial.calls == 0
    steered = cli("generate", run_dir, "--grammar", toy_file, "-n", "40", "--processor", "no-initial:A", "--json")
    assert steered.exit_code == 0, steered.output
    assert {r["text"] for r in json.loads(steered.output)} == {"Bob", "Carol"}
    assert NoInitial.calls > 0
    bad = cli("generate", run_dir, "--grammar", toy_file, "--processor", "no-initial")
    assert bad.exit_code == 2 and "expected no-initial:LETTER" in bad.output
    unknown = cli("generate", run_dir, "--grammar", toy_file, "--processor", "nope:1")
    assert unknown.exit_code == 2 and "no processor named 'nope'" in unknown.output and "no-initial" in unknown.output
