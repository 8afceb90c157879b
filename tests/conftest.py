"""Shared fixtures, and the hypothesis profiles.

Property tests are reproducible by default: the ``ci`` profile derandomizes hypothesis
(examples follow from each test's source) and keeps no example database, so two runs of
the suite draw the same strings. ``HYPOTHESIS_PROFILE=dev`` draws fresh random examples
(and remembers failures in .hypothesis/) for digging locally.
"""

import os

import pytest
import torch
from hypothesis import settings

from triton_kernels import env_var

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("dev", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module's tests (``pytestmark = pytest.mark.usefixtures("one_thread")``):
    their tensors are tiny, so intra-op threads only add hand-offs and, on a busy machine,
    OpenMP spin-waits; runs compared within a module also share the thread count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def interpret():
    """TRITON_INTERPRET=1 while a Triton kernel module's tests run on the CPU (the
    interpreter's launch reads it too); nothing with a GPU."""
    if torch.cuda.is_available():
        yield
        return
    restore = env_var("TRITON_INTERPRET", "1")
    yield
    restore()
