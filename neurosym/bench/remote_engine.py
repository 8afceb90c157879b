r"""A grammar engine of ``neurosym bench decode --cfg`` driven in another Python process.

Some engines cannot share a process with the rest of the bench: SynCode 0.4.16 pins
``transformers==4.53.2`` while this tree runs a later transformers, so it lives in a
virtual environment of its own. :class:`RemoteEngine` starts that environment's Python
on this module (``python -m neurosym.bench.remote_engine``), has it build the engine
there and drives it one part at a time: the worker runs the very same
:func:`~neurosym.bench.grammar_engine.run_engine` loop the in-process engines run, so its
mask and advance times are taken inside the worker, by the same clock calls, and carry
no inter-process cost. The bench's parts then go per engine (all the documents through
one engine, then the next), as they already do in process.

The protocol is one JSON object per line on the worker's standard input, one answer per
line on a private copy of its standard output (the worker points file descriptor 1 at
standard error first, so whatever the engine prints cannot corrupt the answers):

* ``{"op": "build", "factory": "module:callable", "kwargs": {...}}`` builds the engine
  (``callable(**kwargs)`` returns an :class:`~neurosym.bench.grammar_engine.Engine`);
  answer ``{"ok": true, "name", "compile_seconds", "memory_bytes"}``;
* ``{"op": "run", "sequences": [[token, ...], ...], "eos": id, "time_limit": s | null}``
  drives it; answer ``{"ok": true, "trace": ...}`` (:func:`trace_to_json`);
* end of input: the worker exits.

A failure answers ``{"ok": false, "error": "..."}``; the parent raises it as a
:class:`~neurosym.errors.NeurosymError` with the tail of the worker's standard error.
"""

from __future__ import annotations

import base64
import importlib
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from neurosym.bench.grammar_engine import Engine, Trace, run_engine
from neurosym.errors import NeurosymError

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------- traces on the wire
def trace_to_json(t: Trace) -> dict:
    """A :class:`Trace` as JSON: the steps in order, their packed masks concatenated (all
    of one length) in base64, the end decisions, the refusals and the times."""
    keys = sorted(t.masks)
    blob = b"".join(t.masks[k] for k in keys)
    return {"keys": [list(k) for k in keys], "masks": base64.b64encode(blob).decode("ascii"),
            "ends": [t.ends[k] for k in keys], "refusals": [list(r) for r in t.refusals], "times": t.times}


def trace_from_json(d: dict) -> Trace:
    """The inverse of :func:`trace_to_json`."""
    t = Trace()
    keys = [tuple(k) for k in d["keys"]]
    blob = base64.b64decode(d["masks"])
    size = len(blob) // len(keys) if keys else 0
    for n, k in enumerate(keys):
        t.masks[k] = blob[n * size : (n + 1) * size]
        t.ends[k] = bool(d["ends"][n])
    t.refusals = [tuple(r) for r in d["refusals"]]
    t.times = {what: [float(x) for x in xs] for what, xs in d["times"].items()}
    return t


# ---------------------------------------------------------------------- the parent's side
class RemoteEngine(Engine):
    """An engine built by ``factory(**kwargs)`` in a worker process run by ``python``.

    ``factory`` is ``"module:callable"``, importable by that Python (this checkout is put
    on its ``PYTHONPATH``); ``kwargs`` must be JSON. Drive it with :meth:`run` (a whole
    part in the worker); the per-step ``write_mask``/``advance`` are not offered, since
    timing them across a pipe would time the pipe."""

    def __init__(self, python: str | Path, factory: str, kwargs: dict, name: str | None = None, env: dict | None = None):
        self.name = name or factory.rsplit(":", 1)[-1]
        self._err = tempfile.TemporaryFile()
        child_env = dict(os.environ)
        child_env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [child_env.get("PYTHONPATH")] if p])
        child_env.update(env or {})
        try:
            self.proc = subprocess.Popen([str(python), "-m", "neurosym.bench.remote_engine"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._err, env=child_env, text=True, bufsize=1)
        except OSError as err:
            raise NeurosymError(f"{self.name}: cannot start {python}: {err}") from None
        answer = self._ask({"op": "build", "factory": factory, "kwargs": kwargs})
        self.name = name or answer["name"]
        self.compile_seconds = float(answer["compile_seconds"])
        self.memory_bytes = answer["memory_bytes"]
        self.version = answer.get("version")

    def _stderr_tail(self, n: int = 2000) -> str:
        self._err.seek(0)
        return self._err.read().decode("utf-8", "replace")[-n:].strip()

    def _ask(self, request: dict) -> dict:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            self.proc.wait()
            raise NeurosymError(f"{self.name}: the worker exited (status {self.proc.returncode}): {self._stderr_tail()}")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise NeurosymError(f"{self.name}: {answer.get('error')}")
        return answer

    def _not_here(self, *_args) -> None:
        raise NeurosymError(f"{self.name} runs in another process: drive it with run()")

    start = write_mask = advance = _not_here  # type: ignore[assignment]

    def run(self, sequences: list[list[int]], eos: int, time_limit: float = math.inf) -> Trace:
        """The worker's :func:`run_engine` over ``sequences`` (its own clock)."""
        limit = None if math.isinf(time_limit) else time_limit
        answer = self._ask({"op": "run", "sequences": sequences, "eos": eos, "time_limit": limit})
        return trace_from_json(answer["trace"])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()


# ---------------------------------------------------------------------- the worker's side
def build(factory: str, kwargs: dict) -> Engine:
    """``factory(**kwargs)``, ``factory`` written ``"module:callable"``."""
    module, _, attr = factory.partition(":")
    if not module or not attr:
        raise NeurosymError(f"factory {factory!r}: expected 'module:callable'")
    return getattr(importlib.import_module(module), attr)(**kwargs)


def serve(requests, answers) -> None:
    """Answer the requests (one JSON object per line of ``requests``) on ``answers``."""
    engine: Engine | None = None
    for line in requests:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if req["op"] == "build":
                engine = build(req["factory"], req["kwargs"])
                out = {"name": engine.name, "compile_seconds": engine.compile_seconds, "memory_bytes": engine.memory_bytes,
                       "version": engine.version}
            elif req["op"] == "run":
                if engine is None:
                    raise NeurosymError("run before build")
                limit = math.inf if req.get("time_limit") is None else float(req["time_limit"])
                out = {"trace": trace_to_json(run_engine(engine, req["sequences"], int(req["eos"]), limit))}
            else:
                raise NeurosymError(f"unknown op {req['op']!r}")
            answers.write(json.dumps({"ok": True, **out}) + "\n")
        except Exception as err:  # noqa: BLE001 - every failure goes back to the parent as an answer
            answers.write(json.dumps({"ok": False, "error": f"{type(err).__name__}: {err}"}) + "\n")
        answers.flush()


def main() -> None:
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # what the engine prints goes to standard error, not into the answers
    sys.stdout = sys.stderr
    serve(sys.stdin, answers)


if __name__ == "__main__":
    main()


__all__ = ["RemoteEngine", "build", "serve", "trace_from_json", "trace_to_json"]
