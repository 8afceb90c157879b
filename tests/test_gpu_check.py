"""scripts/gpu-check in its tiny CPU mode: the same code path as on a GPU, every part run,
one JSON with the machine and each part's figures and wall seconds (issue 30). By default
the parts run in this process and the script itself runs one part in its child process;
the whole script, six children, runs under -m slow."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check"


def numbers(x):
    """Every number in a JSON value."""
    if isinstance(x, bool):
        return
    if isinstance(x, (int, float)):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from numbers(v)
    elif isinstance(x, list):
        for v in x:
            yield from numbers(v)


def load_script():
    """scripts/gpu-check as a module (it has no .py suffix), to run its parts in this process."""
    loader = importlib.machinery.SourceFileLoader("gpu_check_script", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def check_parts(parts: dict) -> None:
    """The figures every part of the tiny CPU mode reports, as the parent collects them."""
    for name, part in parts.items():
        assert part["ok"] and part["wall_s"] > 0 and part["result"]["gpu_command"].startswith("neurosym "), name
    skl = parts["semantic-kl"]["result"]["report"]["wikitext-2"]
    assert skl["baseline"]["ppl"] > 1 and skl["kl-T0.1"]["ppl"] > 1 and 0 <= skl["kl-T0.1"]["ece"] <= 1
    idea = parts["idea-gating"]["result"]["report"]["datasets"]["wikitext-2"]
    assert idea["baseline"]["ppl"] > 1 and idea["variant"]["ppl"] > 1
    train = parts["bench-train"]["result"]["result"]
    assert set(train) >= {"setup", "baseline", "fusion", "semantic-kl", "idea-gating"} and "CPU proxy" in train["setup"]["launches"]
    assert train["idea-gating"]["ratio_median"] > 0 and train["idea-gating"]["launch_ratio"] > 1
    assert "CUDA only" in train["idea-gating-triton"]["skipped"]  # the Triton kernel is timed on a GPU
    assert "CUDA only" in train["idea-gating-compile"]["skipped"]  # and so is the compiled objective
    inside = parts["bench-inside"]["result"]["result"]["rows"][0]
    assert inside["neurosym"]["status"] == "ok" and inside["neurosym"]["median_seconds"] > 0
    assert inside["neurosym"]["launches"] > 0  # the kernels (on the CPU: operators) of one forward + backward
    if inside["torch_struct"]["status"] == "ok":  # the reference is an optional package
        assert inside["ratio"] > 0 and inside["torch_struct"]["log_z"] == pytest.approx(inside["neurosym"]["log_z"], rel=1e-4)
    decode = parts["decode"]["result"]["batches"]
    assert set(decode) == {"1", "32"} and decode["32"]["batch"] == 32 and decode["1"]["wall"]["forward_cached_ms"] > 0


def test_every_part_of_the_tiny_cpu_mode_in_this_process(tmp_path):
    """Each part's child-process function (run_part: the part at tiny size, its result as
    JSON), called here: the parts' code without six interpreter starts. The script as a
    whole, a child per part, is the next test (one part) and the slow one (all six)."""
    script = load_script()
    assert script.PARTS == ("bench-train", "bench-inside", "semantic-kl", "idea-gating", "decode", "structured-suite")
    parts = {}
    for name in script.PARTS:
        out = tmp_path / f"{name}.json"
        t0 = time.perf_counter()
        script.run_part(name, "cpu", True, script.data_dir(None), out)
        parts[name] = {"ok": True, "result": json.loads(out.read_text()), "wall_s": time.perf_counter() - t0}
    check_parts(parts)
    # json.loads accepts NaN / Infinity: none may be there once the parent's writer has seen them
    assert all(math.isfinite(x) for x in numbers(json.loads(json.dumps(script.finite(parts)))))


def test_gpu_check_tiny_cpu_mode_runs_a_part_in_a_child_and_writes_the_json(tmp_path):
    out = tmp_path / "gpu-check.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out), "--cpu", "--tiny", "--parts", "decode"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["mode"] == "cpu tiny" and r["device"] == "cpu" and r["torch"] and r["wall_s"] > 0
    assert list(r["parts"]) == ["decode"] and not out.with_name(out.name + ".tmp").exists()
    part = r["parts"]["decode"]
    assert part["ok"] and part["wall_s"] > 0 and part["result"]["gpu_command"].startswith("neurosym ")
    assert set(part["result"]["batches"]) == {"1", "32"}
    assert all(math.isfinite(x) for x in numbers(r))
    assert "gpu-check: decode ok in" in proc.stderr


@pytest.mark.slow
def test_gpu_check_tiny_cpu_mode_writes_one_json_with_every_part(tmp_path):
    out = tmp_path / "gpu-check.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out), "--cpu", "--tiny"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["mode"] == "cpu tiny" and r["device"] == "cpu" and r["torch"] and r["wall_s"] > 0
    assert list(r["parts"]) == ["bench-train", "bench-inside", "semantic-kl", "idea-gating", "decode", "structured-suite"]
    # json.loads accepts NaN / Infinity: none may be there (the script writes them as strings)
    assert all(math.isfinite(x) for x in numbers(r))
    check_parts(r["parts"])


def test_gpu_check_refuses_bad_input(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120, cwd=ROOT,
                              env={"PATH": "/usr/bin:/bin"})

    bad = run(str(tmp_path / "x.json"), "--cpu", "--tiny", "--parts", "semantic-kl,warp-drive")
    assert bad.returncode == 2 and "--parts: unknown warp-drive" in bad.stderr and "Traceback" not in bad.stderr
    missing = run(str(tmp_path / "x.json"), "--cpu", "--tiny", "--data", str(tmp_path / "nowhere"))
    assert missing.returncode != 0 and "--data" in missing.stderr and "no such folder" in missing.stderr and "Traceback" not in missing.stderr
    no_out = run("--cpu", "--tiny")
    assert no_out.returncode == 2 and "$OUT" in no_out.stderr
    for limit in ("warp-drive=3", "decode=0", "decode=soon", "decode"):
        bad_limit = run(str(tmp_path / "x.json"), "--cpu", "--tiny", "--limit", limit)
        assert bad_limit.returncode == 2 and f"--limit {limit}: expected PART=SECONDS" in bad_limit.stderr, limit
    bad_deadline = run(str(tmp_path / "x.json"), "--cpu", "--tiny", "--deadline", "-5")
    assert bad_deadline.returncode == 2 and "--deadline: expected a positive number" in bad_deadline.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.slow
def test_gpu_check_grids_report_each_seed_and_keep_partial_results_at_the_deadline(tmp_path):
    """The 3-seed grids (tiny: 2 seeds) write a report per finished seed; a part stopped by
    --deadline keeps the seeds it finished, and a part with no time left is recorded, not run."""
    out = tmp_path / "grid.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out), "--cpu", "--tiny", "--parts", "kl-grid,idea-grid"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    parts = json.loads(out.read_text())["parts"]
    kl = parts["kl-grid"]["result"]
    assert kl["seeds_done"] == 2 and [r["seed"] for r in kl["report"]["wikitext-2"]["baseline"]["runs"]] == [0, 1]
    assert kl["report"]["wikitext-2"]["welch"]["kl-T0.1"]["ppl"]["p"] >= 0
    idea = parts["idea-grid"]["result"]
    assert idea["seeds_done"] == 2 and idea["report"]["datasets"]["wikitext-2"]["variant"]["ppl"] > 1
    # a deadline that stops the first grid after its first seed and leaves nothing for the second
    first_seed = 1.5 * parts["kl-grid"]["wall_s"] / 2
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out), "--cpu", "--tiny", "--parts", "kl-grid,idea-grid",
                           "--deadline", f"{first_seed:.1f}"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 1
    parts = json.loads(out.read_text())["parts"]
    assert not parts["kl-grid"]["ok"] and "timed out" in parts["kl-grid"]["error"]
    assert parts["kl-grid"].get("partial", {}).get("seeds_done") in (1, None)  # None only if seed 0 itself ran past the limit
    assert parts["idea-grid"] == {"ok": False, "error": parts["idea-grid"]["error"], "wall_s": 0.0}
    assert "--deadline" in parts["idea-grid"]["error"]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_gpu_check_without_cuda_says_so(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "x.json")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and "CUDA is not available" in proc.stderr and "--cpu --tiny" in proc.stderr


def test_bench_inside_has_no_address_space_cap_on_cuda():
    """CUDA reserves more virtual memory than any RLIMIT_AS cap at its start: the cap is for the CPU only."""
    from neurosym.bench import inside

    r = inside.run(batch=1, lengths=(3,), sizes=(2,), repeats=1, progress=False)
    assert r["memory_cap_bytes"] > 0 and "capped at" in inside.format_results(r)
    shown = inside.format_results(r | {"device": "cuda", "memory_cap_bytes": None})
    assert "no address-space cap (CUDA)" in shown
