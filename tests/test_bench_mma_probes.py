"""bench/mma_sync_peak.py and bench/opencl_mma_probe.py without the GPU: the peak kernel builds for
CUDA (nvcc, sm_80 / sm_90a) and NVIDIA's OpenCL (offline) with every chain's mma.sync in its loop;
the probe's variants set up on the nominal NVIDIA OpenCL device (48 KiB) where they should, so GPU
time goes to timing, and its table renders recorded rows."""
from __future__ import annotations

import pathlib
import re
import sys

import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.call.prepare import dense_problem
from gemm_engine.codegen.device import nominal_cuda_device, nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import bfloat16_dtype
from gemm_engine.errors import SetupError
from cuda_compile import ARCHS, compile_jobs, failures_of, nvcc_or_skip, prefetched
from opencl_offline import compile_nvidia_opencl

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))

import mma_sync_peak  # noqa: E402
import opencl_mma_probe  # noqa: E402

OPENCL = dialect_for(nominal_opencl_device("sm_90"))


def peak_jobs() -> list:
    return [(f"peak {kind} {arch}", mma_sync_peak.render(dialect_for(nominal_cuda_device(*cc)), kind, 8, 128), arch)
            for kind in mma_sync_peak.KINDS for cc, arch in (((8, 0), ARCHS[0]), ((9, 0), ARCHS[1]))]


@pytest.mark.nvcc
@prefetched(peak_jobs)
def test_peak_kernel_builds_with_nvcc():
    failures = failures_of(compile_jobs(peak_jobs(), nvcc_or_skip()))
    assert not failures, "\n".join(v[-2000:] for v in failures.values())


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_peak_kernel_builds_for_nvidia_opencl(kind):
    text = mma_sync_peak.render(OPENCL, kind, 8, 256)
    loop = text[text.index("for (int it"):text.index("float s =")]
    assert len(re.findall(rf"ptx_mma_m16n8k16_f32_{kind}\(acc\d, a, b\);", loop)) == 8
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32" in text and "__asm__" in text
    ok, log = compile_nvidia_opencl(text, "sm_90")
    assert ok, log[-2000:]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_probe_variants_set_up_on_the_48_kib_driver(dtype):
    """Every variant but CUDA's 128 x 256 x 64 preset fits NVIDIA's OpenCL at 4096^3 and on the
    check shapes; the preset is refused there (its ring) and sets up on CUDA."""
    refused = []
    for label, sel in opencl_mma_probe.VARIANTS:
        if sel is None:
            continue
        for _, m, n, k in opencl_mma_probe.CHECKS + [(1, 4096, 4096, 4096)]:
            try:
                cfg = REGISTRY["pipelined_mma"](**sel).setup(dense_problem(1, m, n, k, dtype_of(dtype)), OPENCL)
            except SetupError as exc:
                refused.append((label, str(exc)))
                continue
            assert cfg.batch.global_.dynamic_shared_bytes <= 48 * 1024
            assert cfg.batch.global_.stage.smem_swizzle == ("swizzled" in label)
    assert {label for label, _ in refused} == {"padded S3 128x256x64 256u (CUDA's preset)"}
    assert all("shared memory" in why for _, why in refused)
    preset = dict(opencl_mma_probe.VARIANTS)["padded S3 128x256x64 256u (CUDA's preset)"]
    REGISTRY["pipelined_mma"](**preset).setup(dense_problem(1, 4096, 4096, 4096, dtype_of(dtype)),
                                              dialect_for(nominal_cuda_device(9, 0)))


def test_probe_variant_lists():
    labels = [label for label, _ in opencl_mma_probe.VARIANTS]
    assert len(set(labels)) == len(labels) and set(opencl_mma_probe.CUDA_VARIANTS) <= set(labels)
    assert [v for v, _ in opencl_mma_probe.chosen_variants([], "cuda")] == [
        label for label in labels if label in opencl_mma_probe.CUDA_VARIANTS]
    assert [v for v, _ in opencl_mma_probe.chosen_variants(["padded"], "cuda")] == [
        label for label in labels if label.startswith("padded")]


def test_probe_table_renders_recorded_rows():
    result = {"size": 4096, "backends": {"opencl": "NVIDIA H100, 49152 B"}, "cublas_s": {"float16": 2e-4},
              "rows": [{"backend": "opencl", "dtype": "float16", "variant": "swizzled S3 128x128x32 128u",
                        "tiling": "128x128x32/128u/S3", "ring_bytes": 49152, "seconds": 4e-4, "tflops": 343.6,
                        "checks": [{"ok": True}, {"ok": True}]},
                       {"backend": "opencl", "dtype": "float16", "variant": "padded S3 128x256x64 256u (CUDA's preset)",
                        "checks": [], "failure": "setup 1000x1000x1000: SetupError: 3 stages | need"}]}
    table = opencl_mma_probe.markdown(result)
    assert "| opencl | float16 | swizzled S3 128x128x32 128u | 128x128x32/128u/S3 | 49152 | 343.6 | 0.50 | ok |" in table
    assert "3 stages / need" in table


def dtype_of(name: str):
    return bfloat16_dtype() if name == "bfloat16" else name
