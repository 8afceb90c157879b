"""Test support for the optional Triton kernel modules (neurosym/lm/idea_kernel.py,
neurosym/layers/inside_kernel.py): importing them under Triton's CPU interpreter when there
is no GPU. The ``interpret`` fixture is in conftest.py."""

from __future__ import annotations

import importlib
import os

import pytest
import torch


def env_var(name: str, value: str | None):
    """Set (or with None remove) an environment variable; returns a function that restores it."""
    before = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value

    def restore():
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before

    return restore


def import_triton_kernels(module: str):
    """``(kernels, device)`` for a test module of an optional Triton kernel module (e.g.
    ``neurosym.lm.idea_kernel``): without a GPU it is imported under Triton's CPU
    interpreter (``TRITON_INTERPRET=1`` while triton's jit decorators run) and the tests use
    CPU tensors; with one, the compiled kernels on CUDA. Skips the calling test module
    (with the reason) when triton is not installed; CI has none."""
    restore = env_var("TRITON_INTERPRET", None if torch.cuda.is_available() else "1")
    try:
        pytest.importorskip("triton", reason="triton is not installed (an optional package; the torch path needs none)")
        kernels = importlib.import_module(module)
    finally:
        restore()
    if not kernels.interpreted() and not torch.cuda.is_available():
        pytest.skip(f"{module} was imported without TRITON_INTERPRET=1 and there is no GPU", allow_module_level=True)
    return kernels, "cpu" if kernels.interpreted() else "cuda"

