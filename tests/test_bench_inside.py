"""``neurosym bench inside --launches`` and the operator count of the inside pass (the
CPU proxy for kernel launches, issue 30)."""

from __future__ import annotations

import pytest
import torch

from neurosym.bench import inside as bench_inside
from neurosym.bench.launches import count_launches
from neurosym.layers.inside import inside

pytestmark = pytest.mark.usefixtures("one_thread")


def test_launches_are_counted_for_both_and_shown():
    r = bench_inside.run(batch=1, lengths=(4,), sizes=(2,), repeats=1, launches=True, threads=1, progress=False)
    assert r["launches"] is True and "CPU proxy" in r["launch_measure"]
    row = r["rows"][0]
    assert row["neurosym"]["status"] == "ok" and row["neurosym"]["launches"] > 0
    if row["torch_struct"]["status"] == "ok":  # the reference is an optional package
        assert row["torch_struct"]["launches"] > 0
        assert row["launch_ratio"] == pytest.approx(row["torch_struct"]["launches"] / row["neurosym"]["launches"])
    text = bench_inside.format_results(r)
    assert "neurosym ops" in text and f"{row['neurosym']['launches']:,}" in text


def test_without_launches_the_json_is_unchanged_and_the_triton_row_is_skipped_off_cuda():
    r = bench_inside.run(batch=1, lengths=(3,), sizes=(2,), repeats=1, threads=1, progress=False)
    assert r["launches"] is False and r["launch_measure"] is None
    assert "launches" not in r["rows"][0]["neurosym"] and "launch_ratio" not in r["rows"][0]
    assert "neurosym ops" not in bench_inside.format_results(r)
    # off CUDA the Triton row is skipped, with the reason
    row = r["rows"][0]
    assert row["neurosym_triton"] == {"status": "skipped", "reason": "the Triton kernels are timed on CUDA only (device cpu)"}
    assert r["triton"] is None and r["triton_skipped"] == row["neurosym_triton"]["reason"]
    assert "triton_ratio" not in row and "triton_speedup" not in row
    assert "Triton kernels: skipped (the Triton kernels are timed on CUDA only (device cpu))" in bench_inside.format_results(r)


def _ops(L: int) -> int:
    g = torch.Generator().manual_seed(0)
    terms, rules, roots = (torch.randn(*s, generator=g).requires_grad_() for s in ((2, L, 3), (2, 3, 6, 6), (2, 3)))
    return count_launches(lambda: inside(terms, rules, roots).sum().backward(), torch.device("cpu"))


def test_operators_grow_linearly_with_the_sentence_length():
    """A width costs a fixed number of operators forward and backward (children are views
    of one chart, their gradients added through the same views), not one per split point:
    the count's growth per width does not grow with the width."""
    c8, c12, c16 = _ops(8), _ops(12), _ops(16)
    per_width = (c16 - c12) / 4
    assert per_width == (c12 - c8) / 4
    assert per_width <= 110  # 101 at this size; before the one-node chart it grew with the width


def test_the_triton_row_runs_under_the_interpreter(monkeypatch):
    """The worker's Triton implementation (on the CPU under Triton's interpreter, the row the
    bench runs on CUDA): the same log Z as the torch path's worker, and its untimed compile pass."""
    pytest.importorskip("triton", reason="triton is not installed (an optional package)")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    fused, torch_path = (bench_inside.measure(impl, 2, 4, 2, 1, "cpu", 60.0, None, 1) for impl in ("neurosym_triton", "neurosym"))
    assert fused["status"] == torch_path["status"] == "ok", (fused, torch_path)
    assert fused["log_z"] == pytest.approx(torch_path["log_z"], rel=1e-5)
