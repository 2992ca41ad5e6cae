"""The OpenCL capability probe's walk (runtime/opencl_probe.py) against scripted drivers, and what it
finds on the OpenCL device this machine has (PoCL: a CPU, so no vendor probes and no features).

The scripted runner stands for NVIDIA's driver: it "builds" a probe's source unless the script
says the source fails, and "runs" it by writing the expected words, or other ones where the script
says the result is wrong. What a real driver does is the GPU machine's business
(bench/opencl_tensor_cores.py prints the probe's findings there).
"""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.codegen.device import DeviceInfo, PTX_FEATURES, PTX_SM90_FEATURES
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.codegen.opencl_dialect import ASM_PLAIN, LOCAL_GENERIC, PtxOpenCLDialect
from gemm_engine.codegen.opencl_probe import AMD_PROBES, NVIDIA_PROBES
from gemm_engine.runtime.opencl_probe import PROBE_ENV, _first_line, probe_device, run_probes

NVIDIA = DeviceInfo("opencl", "NVIDIA CUDA: NVIDIA H100", 132, 49152, 1024, 32, (9, 0), vendor="nvidia")


def scripted(build_fails=(), wrong=(), seen=None):
    """A runner: a probe whose name is in ``build_fails`` raises as a failed build would; one in
    ``wrong`` writes zeros; the rest write what they should. ``seen`` collects (name, source)."""
    def run(probe, source):
        if seen is not None:
            seen.append((probe.name, source))
        if probe.name in build_fails:
            raise RuntimeError("clBuildProgram failed: BUILD_PROGRAM_FAILURE\n\nBuild on <device>:\n"
                               f"ptxas application ptx input, line 40; error   : {probe.name} is not supported\n")
        if probe.name in wrong:
            return np.zeros_like(probe.expected())
        return probe.expected()
    return run


def test_a_driver_that_runs_everything_gets_every_feature():
    # Local pointers handed over as shared-window values: the address finding is "no" (zeros).
    features, refusals = run_probes(scripted(wrong={"local addresses are generic"}), NVIDIA_PROBES, NVIDIA)
    assert features == PTX_FEATURES | PTX_SM90_FEATURES
    assert refusals == ()
    d = dialect_for(DeviceInfo(**{**NVIDIA.__dict__, "features": features}))
    assert isinstance(d, PtxOpenCLDialect) and d.shared_address("p") == "((uint)(size_t)(p))"


def test_generic_local_addresses_are_converted_and_then_checked_that_way():
    seen = []
    features, _ = run_probes(scripted(seen=seen), NVIDIA_PROBES, NVIDIA)
    assert LOCAL_GENERIC in features
    ldmatrix = dict(seen)["ldmatrix"]
    assert "cvta.to.shared.u64" in ldmatrix and "ptx_cvta_to_shared((ulong)(&tile[lane * 8]))" in ldmatrix
    d = dialect_for(DeviceInfo(**{**NVIDIA.__dict__, "features": features}))
    assert d.shared_address("p").startswith("ptx_cvta_to_shared((ulong)(p))")


def test_a_refused_instruction_is_named_with_the_compiler_line():
    features, refusals = run_probes(scripted(build_fails={"ldmatrix"}, wrong={"cp.async", "local addresses are generic"}),
                                    NVIDIA_PROBES, NVIDIA)
    reasons = dict(refusals)
    assert "ldmatrix" not in features and "cp_async" not in features and "mma_sync" in features
    assert "line 40; error   : ldmatrix is not supported" in reasons["ldmatrix"]
    assert reasons["cp_async"].startswith("cp.async: ran, but wrote wrong words (")
    assert LOCAL_GENERIC not in reasons      # a finding, not a capability


def test_the_plain_asm_keyword_is_the_fallback_and_every_later_probe_spells_it():
    seen = []
    features, refusals = run_probes(scripted(build_fails={"inline PTX (__asm__)"}, wrong={"local addresses are generic"},
                                             seen=seen), NVIDIA_PROBES, NVIDIA)
    assert {"inline_ptx", ASM_PLAIN, "mma_sync"} <= features and refusals == ()
    later = [src for name, src in seen if name.startswith("mma.sync")]
    assert later and all("asm(" in s and "__asm__" not in s for s in later)


def test_without_inline_ptx_nothing_else_is_tried():
    seen = []
    features, refusals = run_probes(scripted(build_fails={"inline PTX (__asm__)", "inline PTX (asm)"}, seen=seen),
                                    NVIDIA_PROBES, NVIDIA)
    assert features == frozenset() and [n for n, _ in seen] == ["inline PTX (__asm__)", "inline PTX (asm)"]
    reasons = dict(refusals)
    assert "not supported" in reasons["inline_ptx"] and reasons["mma_sync"] == "needs inline_ptx"


def test_first_line_picks_the_compiler_error():
    exc = RuntimeError("clBuildProgram failed: BUILD_PROGRAM_FAILURE - clBuildProgram failed\n\n"
                       "Build on <pyopencl.Device>:\n\n<kernel>:3:1: error: unknown type name 'x'\n")
    assert _first_line(exc) == "RuntimeError: <kernel>:3:1: error: unknown type name 'x'"
    assert _first_line(ValueError("")) == "ValueError: ValueError"


def test_probe_off_gives_no_features(monkeypatch):
    monkeypatch.setenv(PROBE_ENV, "off")
    assert probe_device(None, None, NVIDIA) == (frozenset(), ())


def test_the_cpu_device_here_has_no_vendor_probe(opencl_engine):
    dev = opencl_engine.device
    if dev.vendor != "cpu":
        pytest.skip(f"the OpenCL device here is {dev.name!r}, not a CPU")
    assert dev.features == frozenset() and dev.refusals == ()
    assert type(opencl_engine.runtime.dialect).__name__ == "OpenCLDialect"


def test_amd_probes_grant_what_builds():
    amd = DeviceInfo("opencl", "AMD: gfx90a", 104, 65536, 1024, 64, vendor="amd", isa="gfx90a")
    # A CDNA GPU: the RDNA3 builtin does not build there.
    features, refusals = run_probes(scripted(build_fails={"WMMA f16 16x16x16 (wave32)"}), AMD_PROBES, amd)
    assert features == {"mfma", "mfma_f64"} and "wmma_gfx11" in dict(refusals)
    assert type(dialect_for(DeviceInfo(**{**amd.__dict__, "features": features}))).__name__ == "AmdgcnOpenCLDialect"
