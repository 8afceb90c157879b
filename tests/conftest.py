"""Shared fixtures."""

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module's tests (``pytestmark = pytest.mark.usefixtures("one_thread")``):
    their tensors are tiny, so intra-op threads only add hand-offs and, on a busy machine,
    OpenMP spin-waits; runs compared within a module also share the thread count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
