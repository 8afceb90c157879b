"""An engine of `neurosym bench decode --cfg` in another process (issue 29: SynCode pins
transformers 4.53.2 and runs in a venv of its own): the worker protocol with a fake
engine, which needs nothing installed, and SynCode itself where its venv exists."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neurosym.bench import decode_cfg
from neurosym.bench.remote_engine import RemoteEngine, serve, trace_from_json, trace_to_json
from neurosym.errors import NeurosymError

HERE = Path(__file__).resolve().parent
WORKER_ENV = {"PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}


class ParityEngine(decode_cfg.Engine):
    """A fake engine over ``n`` tokens: after an even number of tokens it allows the even
    ids, after an odd number the odd ones; the end is allowed after three tokens; it
    prints on standard output, which must not reach the protocol."""

    name = "parity"

    def __init__(self, n: int, fail: bool = False):
        if fail:
            raise ValueError("the fake engine was told to fail")
        print("noise on stdout")
        self.n, self.k = n, 0
        self.compile_seconds, self.memory_bytes, self.version = 0.25, 1234, "9.9"

    def start(self) -> None:
        self.k = 0

    def write_mask(self, out: np.ndarray) -> None:
        bits = np.zeros(out.size * 32, dtype=bool)
        bits[self.k % 2 : self.n : 2] = True
        bits[self.n] = self.k == 3
        out[:] = np.packbits(bits, bitorder="little").view("<i4")

    def advance(self, token: int) -> None:
        if token % 2 != self.k % 2 or token >= self.n:
            raise NeurosymError(f"parity refused {token}")
        self.k += 1


SEQUENCES = [[0, 1, 2], [0, 1, 2, 3, 4], [1], [], [0, 2], list(range(40))]


def test_trace_survives_the_wire():
    t = decode_cfg.run_engine(ParityEngine(37), SEQUENCES, 37)
    back = trace_from_json(json.loads(json.dumps(trace_to_json(t))))
    assert back.masks == t.masks and back.ends == t.ends and back.refusals == t.refusals and back.times == t.times
    empty = trace_from_json(trace_to_json(decode_cfg.Trace()))
    assert empty.masks == {} and empty.refusals == []


def test_the_worker_runs_the_engine_as_this_process_does():
    local = decode_cfg.run_engine(ParityEngine(37), SEQUENCES, 37)
    assert local.refusals == [(2, 0), (4, 1), (5, 37)]  # the fake refuses where its rule says
    e = RemoteEngine(sys.executable, "test_bench_remote_engine:ParityEngine", {"n": 37}, env=WORKER_ENV)
    try:
        assert (e.name, e.compile_seconds, e.memory_bytes, e.version) == ("parity", 0.25, 1234, "9.9")
        remote = e.run(SEQUENCES, 37)
        assert remote.masks == local.masks and remote.ends == local.ends and remote.refusals == local.refusals
        assert {k: len(v) for k, v in remote.times.items()} == {k: len(v) for k, v in local.times.items()}
        assert all(x >= 0 for xs in remote.times.values() for x in xs)
        again = e.run(SEQUENCES[:2], 37, time_limit=60.0)  # a second part on the same worker
        assert again.masks == {k: v for k, v in local.masks.items() if k[0] < 2}
        with pytest.raises(NeurosymError, match="another process"):
            e.write_mask(np.zeros(2, dtype=np.int32))
    finally:
        e.close()
    assert e.proc.returncode == 0


def test_the_worker_reports_failures_clearly():
    with pytest.raises(NeurosymError, match="cannot start"):
        RemoteEngine(HERE / "no-such-python", "x:y", {})
    with pytest.raises(NeurosymError, match="the worker exited"):  # a Python that dies at once
        RemoteEngine(sys.executable, "x:y", {}, env={"PYTHONPATH": "", "PYTHONHOME": str(HERE / "nowhere")})


def test_serve_answers_every_request():
    requests = [json.dumps({"op": "run", "sequences": [], "eos": 3}), json.dumps({"op": "fly"}), "",
                json.dumps({"op": "build", "factory": "nocolon", "kwargs": {}}),
                json.dumps({"op": "build", "factory": "no_such_module_here:Engine", "kwargs": {}}),
                json.dumps({"op": "build", "factory": "test_bench_remote_engine:ParityEngine", "kwargs": {"n": 5, "fail": True}}),
                json.dumps({"op": "build", "factory": "test_bench_remote_engine:ParityEngine", "kwargs": {"n": 5}}),
                json.dumps({"op": "run", "sequences": [[0, 1]], "eos": 5, "time_limit": None})]
    out = io.StringIO()
    serve(requests, out)
    answers = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [a["ok"] for a in answers] == [False, False, False, False, False, True, True]
    assert "run before build" in answers[0]["error"] and "unknown op" in answers[1]["error"] and "module:callable" in answers[2]["error"]
    assert "No module named" in answers[3]["error"] and "ValueError: the fake engine was told to fail" in answers[4]["error"]
    assert len(trace_from_json(answers[6]["trace"]).masks) == 3


def test_syncode_python_is_found_or_refused(tmp_path, monkeypatch):
    with pytest.raises(NeurosymError, match="no such file"):
        decode_cfg.syncode_python(tmp_path / "python")
    fake = tmp_path / "python"
    fake.write_text("")
    assert decode_cfg.syncode_python(fake) == str(fake)
    monkeypatch.setenv("NEUROSYM_SYNCODE_PYTHON", str(fake))
    assert decode_cfg.syncode_python() == str(fake)


def _syncode_python() -> str | None:
    python = decode_cfg.syncode_python()
    if python is None or subprocess.run([python, "-c", "import syncode"], capture_output=True).returncode != 0:
        return None
    return python


@pytest.mark.slow
def test_syncode_against_xgrammar_on_the_json_grammar():
    """SynCode in its venv, on the small BPE: every differing token judged, the counts
    consistent; its masks contain every token of the documents it did not refuse."""
    pytest.importorskip("xgrammar")
    if _syncode_python() is None:
        pytest.skip("SynCode is not installed in a venv of its own (.venv-syncode or $NEUROSYM_SYNCODE_PYTHON; docs/decode.md)")
    r = decode_cfg.run(bpe_size=1000, walks=3, engines=("xgrammar", "syncode"), slow_engine_seconds=20, progress=False)
    e = r["engines"]["syncode"]
    assert r["versions"]["syncode"] == "0.4.16" and e["compile_seconds"] > 0
    for part in ("documents", "walks"):
        a = e[part]["agreement"]
        assert a["steps_compared"] > 0
        assert a["reference_right"] + a["other_right"] == a["tokens_differing"] == a["other_allows"] + a["other_refuses"]
        assert a["end_reference_right"] + a["end_other_right"] == a["end_differences"]
    assert "syncode" in decode_cfg.format_results(r)
