"""The probe's kernels (codegen/opencl_probe.py): each builds offline as NVIDIA's OpenCL would build
it (clang nvptx64-nvidia-nvcl + ptxas, tests/opencl_offline.py) in each address form, and the words
each expects are the instruction's documented result. Compiled only: the GPU machine runs them."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gemm_engine.codegen.device import DeviceInfo, nominal_opencl_device
from gemm_engine.codegen.opencl_dialect import LOCAL_GENERIC
from gemm_engine.codegen.opencl_probe import (AMD_PROBES, INTEL_PROBES, NVIDIA_PROBES, POISON, PROBE_UNITS, WORDS,
                                             _ldmatrix_words)
from opencl_offline import compile_amdgcn, compile_intel_spir, compile_nvidia_opencl

NVIDIA = DeviceInfo("opencl", "nominal", 132, 49152, 1024, 32, (9, 0), vendor="nvidia")


@pytest.mark.parametrize("generic", [False, True], ids=["shared-window", "generic"])
def test_probe_kernels_build_offline(generic):
    features = frozenset({"inline_ptx", "f64_mma"} | ({LOCAL_GENERIC} if generic else set()))
    failures = []
    for probe in NVIDIA_PROBES:
        if probe.name == "inline PTX (asm)":
            continue       # clang's OpenCL mode knows only __asm__: that is why it is the fallback
        ok, log = compile_nvidia_opencl(probe.render(replace(NVIDIA, features=features)), "sm_90")
        if not ok:
            failures.append(f"{probe.name}: {log[-800:]}")
    assert not failures, "\n".join(failures)


def test_expected_words():
    by_name = {p.name: p for p in NVIDIA_PROBES}
    lane = np.arange(PROBE_UNITS) & 31
    words = by_name["mma.sync f16"].expected().reshape(PROBE_UNITS, WORDS)
    assert (words == (lane + 32)[:, None]).all()            # c = lane, + 16 products of 1 x 2
    words = by_name["mma.sync f64 m8n8k4"].expected().reshape(PROBE_UNITS, WORDS)
    assert (words[:, :2] == (lane + 8)[:, None]).all() and (words[:, 2:] == POISON).all()
    # ldmatrix: lane 5 of block 2 gets row 1, columns 2 and 3 of that block: elements 138, 139.
    assert _ldmatrix_words(5)[2] == 138 | (139 << 16)
    assert by_name["cvt f16x2"].expected()[0] == 0x40003C00     # 2.0 high, 1.0 low (IEEE half)


def test_amd_and_intel_probe_kernels_build_offline():
    for probe in AMD_PROBES:
        mcpu = "gfx1100" if "WMMA" in probe.name else "gfx90a"
        ok, log = compile_amdgcn(probe.render(nominal_opencl_device(mcpu)), mcpu)
        assert ok, f"{probe.name}: {log[-800:]}"
    for target in ("xe-hpg", "xe-hpc"):
        text = INTEL_PROBES[0].render(nominal_opencl_device(target))
        assert f"intel_reqd_sub_group_size({8 if target == 'xe-hpg' else 16})" in text
        ok, log = compile_intel_spir(text)
        assert ok, f"{target}: {log[-800:]}"
