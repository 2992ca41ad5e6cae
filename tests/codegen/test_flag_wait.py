"""codegen/flag_wait.py: the peer strategy's wait kernel compiles for the GPUs it runs on (its
behaviour runs in tests/distributed/test_peer_nccl.py on two GPUs)."""
from __future__ import annotations

import pytest

from cuda_compile import compile_cuda, nvcc_or_skip
from gemm_engine.codegen import flag_wait


def test_source_names_its_kernel_and_bounds_the_wait():
    assert f"void {flag_wait.NAME}(" in flag_wait.SOURCE and f"void {flag_wait.RAISE_NAME}(" in flag_wait.SOURCE
    assert "globaltimer" in flag_wait.SOURCE and "__trap()" in flag_wait.SOURCE
    assert "ld.acquire.sys" in flag_wait.SOURCE       # sees another GPU's write, not a cached copy
    assert "st.release.sys" in flag_wait.SOURCE       # published to every GPU


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compiles(arch):
    ok, out = compile_cuda(flag_wait.SOURCE, nvcc_or_skip(), f"-arch={arch}")
    assert ok, out
