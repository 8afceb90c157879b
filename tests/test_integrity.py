"""Corrupted artifacts and checkpoints are errors naming the file, never silent (issue 14.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

import neurosym
from neurosym.cli.main import main
from neurosym.compile.artifact import checksum, load_artifact, save
from neurosym.errors import NeurosymError
from neurosym.files import digest
from neurosym.lm.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["grammars/dates.regex", "grammars/clause.fsg", "grammars/arith.pcfg"]


def body_offset(data: bytes) -> int:
    return 8 + int.from_bytes(data[:8], "little")


@pytest.mark.parametrize("source", SOURCES)
def test_a_flipped_byte_in_an_artifact_is_caught(tmp_path, source):
    path = save(neurosym.load(ROOT / source), tmp_path / "a.safetensors")
    data = bytearray(path.read_bytes())
    start = body_offset(data)
    for k in range(0, len(data) - start, max(1, (len(data) - start) // 7)):  # several places in the tensor body
        bad = bytearray(data)
        bad[start + k] ^= 0x5A
        path.write_bytes(bytes(bad))
        with pytest.raises(NeurosymError, match=r"a\.safetensors: corrupt artifact"):
            load_artifact(path)
    r = CliRunner().invoke(main, ["inspect", str(path)])
    assert r.exit_code == 2 and "corrupt artifact" in r.output and "Traceback" not in r.output


def _rewrite(path: Path, change) -> None:
    """Edit an artifact's tensors and write it back with a matching checksum (a file made
    by another tool, not a corruption)."""
    data = path.read_bytes()
    tensors = st_load(data)
    header = json.loads(json.loads(data[8 : body_offset(data)])["__metadata__"]["neurosym"])
    change(tensors)
    header["checksum"] = checksum(tensors, header)
    path.write_bytes(st_save(tensors, metadata={"neurosym": json.dumps(header)}))


def _header(path: Path) -> tuple[dict, dict]:
    data = path.read_bytes()
    return st_load(data), json.loads(json.loads(data[8 : body_offset(data)])["__metadata__"]["neurosym"])


@pytest.mark.parametrize("source", SOURCES)
def test_an_edited_header_is_caught(tmp_path, source):
    """The checksum covers the header: a renamed pattern, state or symbol is a corrupt file."""
    path = save(neurosym.load(ROOT / source), tmp_path / "a.safetensors")
    tensors, header = _header(path)
    key = {"regex": "names", "fsg": "name", "pcfg": "start"}[header["kind"]]
    header[key] = ["RENAMED", *header[key][1:]] if isinstance(header[key], list) else "RENAMED"
    path.write_bytes(st_save(tensors, metadata={"neurosym": json.dumps(header)}))
    with pytest.raises(NeurosymError, match=r"a\.safetensors: corrupt artifact: its tensors or header .* recompile"):
        load_artifact(path)
    r = CliRunner().invoke(main, ["inspect", str(path)])
    assert r.exit_code == 2 and "corrupt artifact" in r.output and "Traceback" not in r.output


def test_artifacts_from_before_the_header_checksum_still_load(tmp_path):
    """A file whose checksum covers its tensors alone (written before) loads as it did."""
    path = save(neurosym.load(ROOT / "grammars/dates.regex"), tmp_path / "old.safetensors")
    tensors, header = _header(path)
    del header["checksum_covers"]
    header["checksum"] = digest(tensors)
    path.write_bytes(st_save(tensors, metadata={"neurosym": json.dumps(header)}))
    assert sorted(load_artifact(path).patterns) == sorted(neurosym.load(ROOT / "grammars/dates.regex").patterns)
    header["checksum_covers"] = "something-newer"
    path.write_bytes(st_save(tensors, metadata={"neurosym": json.dumps(header)}))
    with pytest.raises(NeurosymError, match="does not know; recompile it"):
        load_artifact(path)


def test_out_of_range_states_and_bad_probabilities_are_invalid(tmp_path):
    path = save(neurosym.load(ROOT / "grammars/dates.regex"), tmp_path / "r.safetensors")
    _rewrite(path, lambda t: t["0.targets"].__setitem__(0, 10**6))
    with pytest.raises(NeurosymError, match="invalid: 0.targets holds a next state outside"):
        load_artifact(path)
    _rewrite(path, lambda t: t["0.targets"].__setitem__(0, 0) or t["0.tokens"].__setitem__(0, 10**6))
    with pytest.raises(NeurosymError, match="invalid: 0.tokens holds a token outside"):
        load_artifact(path)
    _rewrite(path, lambda t: t["0.tokens"].__setitem__(0, 0) or t["0.indptr"].__setitem__(1, -5))
    with pytest.raises(NeurosymError, match="invalid: 0.indptr is not a valid row index"):
        load_artifact(path)
    path = save(neurosym.load(ROOT / "grammars/clause.fsg"), tmp_path / "f.safetensors")
    _rewrite(path, lambda t: t["log_probs"].__setitem__((0, 0), float("nan")))
    with pytest.raises(NeurosymError, match="invalid: a log-probability is NaN"):
        load_artifact(path)
    path = save(neurosym.load(ROOT / "grammars/clause.fsg"), tmp_path / "g.safetensors")
    _rewrite(path, lambda t: t["final_log_probs"].fill_(0.0))
    with pytest.raises(NeurosymError, match="do not sum to 1"):
        load_artifact(path)
    path = save(neurosym.load(ROOT / "grammars/arith.pcfg"), tmp_path / "p.safetensors")
    _rewrite(path, lambda t: t.__setitem__("root", t["root"][:-1].clone()))
    with pytest.raises(NeurosymError, match="invalid: root has shape"):
        load_artifact(path)


def _state() -> dict:
    return {"config": {"run": {"name": "x"}}, "model": {"w": torch.arange(2000, dtype=torch.float64)},
            "optimizer": {}, "scheduler": {}, "step": 3, "epoch": 0, "position": 3, "total_steps": 9, "rng": {}}


def test_a_flipped_byte_in_a_checkpoint_is_caught(tmp_path):
    last = save_checkpoint(tmp_path, _state())
    assert torch.equal(load_checkpoint(last)["model"]["w"], torch.arange(2000, dtype=torch.float64))
    data = bytearray(last.read_bytes())
    at = bytes(data).index(torch.arange(2000, dtype=torch.float64)[1234:1236].numpy().tobytes())
    data[at + 3] ^= 0x01
    last.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"last\.pt: corrupt checkpoint"):
        load_checkpoint(last)


def test_a_checkpoint_without_its_config_is_an_error(tmp_path):
    state = _state()
    del state["config"]
    last = save_checkpoint(tmp_path, state)
    with pytest.raises(CheckpointError, match=r"last\.pt: not a whole training checkpoint: no config"):
        load_checkpoint(last)
