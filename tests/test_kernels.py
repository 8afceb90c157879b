"""neurosym.kernels.choose_kernel: the one rule behind every ``kernel=`` switch, with fake
kernel modules (no triton needed)."""

from __future__ import annotations

import types

import pytest

from neurosym.errors import NeurosymError
from neurosym.kernels import KERNELS, choose_kernel


def fake(interpreted: bool):
    return lambda: types.SimpleNamespace(interpreted=lambda: interpreted)


def missing():
    return None


def test_torch_is_always_torch_and_auto_needs_cuda_triton_and_a_supported_call():
    for device in ("cpu", "cuda"):
        assert choose_kernel("torch", device, fake(False), "f") == "torch"
    assert choose_kernel("auto", "cpu", fake(True), "f") == "torch"  # the CPU never picks the interpreter by itself
    assert choose_kernel("auto", "cuda", fake(False), "f") == "triton"
    assert choose_kernel("auto", "cuda", missing, "f") == "torch"
    assert choose_kernel("auto", "cuda", fake(False), "f", unsupported="computes log Z only") == "torch"
    assert KERNELS == ("auto", "torch", "triton", "compile")


def test_compile_only_where_the_front_door_offers_it_and_auto_never_picks_it():
    for device in ("cpu", "cuda"):
        assert choose_kernel("compile", device, missing, "f", compiled=True) == "compile"  # no triton needed (inductor brings its own)
        assert choose_kernel("auto", device, missing, "f", compiled=True) == "torch"
        with pytest.raises(NeurosymError, match=r"^inside: kernel='compile' is not offered here; use 'torch', 'triton' or 'auto'$"):
            choose_kernel("compile", device, fake(False), "inside")


def test_triton_runs_where_it_can_and_says_why_where_it_cannot():
    assert choose_kernel("triton", "cuda", fake(False), "f") == "triton"
    assert choose_kernel("triton", "cpu", fake(True), "f") == "triton"  # under the interpreter
    with pytest.raises(NeurosymError, match=r"^f: kernel='triton' needs the triton package"):
        choose_kernel("triton", "cuda", missing, "f")
    with pytest.raises(NeurosymError, match=r"f: kernel='triton' runs on CUDA tensors \(these are on cpu\)"):
        choose_kernel("triton", "cpu", fake(False), "f")
    with pytest.raises(NeurosymError, match=r"f: kernel='triton' computes log Z only; use kernel='torch' or 'auto'"):
        choose_kernel("triton", "cuda", fake(False), "f", unsupported="computes log Z only")
    with pytest.raises(NeurosymError, match=r"f: kernel must be one of auto, torch, triton, compile, got 'cuda'"):
        choose_kernel("cuda", "cuda", fake(False), "f")


def test_a_benchmark_times_triton_kernels_on_cuda_only_and_otherwise_says_why():
    from neurosym.kernels import timing_skip_reason

    assert timing_skip_reason("cpu", lambda k, d: "triton") == "the Triton kernels are timed on CUDA only (device cpu)"
    assert timing_skip_reason("cuda:0", lambda k, d: "triton") is None

    def refuse(kernel, device):
        return choose_kernel(kernel, device, missing, "inside")

    assert timing_skip_reason("cuda", refuse).startswith("inside: kernel='triton' needs the triton package")


def test_the_front_doors_say_which_kernels_they_offer():
    from neurosym.layers.inside import resolve_kernel as inside_kernel
    from neurosym.lm.idea import resolve_kernel as idea_kernel

    assert idea_kernel("compile", "cpu") == "compile" and idea_kernel("auto", "cpu") == "torch"
    with pytest.raises(NeurosymError, match=r"^inside: kernel='compile' is not offered here"):
        inside_kernel("compile", "cpu")
