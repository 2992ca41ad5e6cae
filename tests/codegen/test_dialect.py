"""Backend words live only in the dialect module; dialects render what both compilers accept."""
from __future__ import annotations

import pathlib
import re

import pytest

from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import CudaDialect, OpenCLDialect, dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT64

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "gemm_engine"
CODEGEN = PACKAGE / "codegen"
#: The modules that may spell backend words: the dialects and the PTX intrinsics they render, and
#: the CUDA-only flag kernels of the peer strategy (codegen/flag_wait.py: symmetric memory is CUDA's).
DIALECT_MODULES = {CODEGEN / n for n in ("dialect.py", "dialect_base.py", "cuda_dialect.py", "opencl_dialect.py", "ptx.py",
                                         "ptx_intrinsics.py", "opencl_probe.py", "flag_wait.py")}
BACKEND_WORDS = [
    "__syncthreads", "__shared__", "__global__", "threadIdx", "blockIdx", "blockDim", "gridDim",
    "__launch_bounds__", "__restrict__", "__kernel", "__local", "get_local_id", "get_group_id",
    "get_global_id", "get_num_groups", "barrier(", "CLK_LOCAL_MEM_FENCE", "vload_half", "vstore_half",
    "nvcuda", "__cvta_generic_to_shared", "__syncwarp",
]


def test_backend_words_only_in_dialect():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        # runtime/ drives the backends' host APIs (PyOpenCL's enqueue_barrier, CuPy), distributed/
        # torch.distributed's (dist.barrier): no kernel text.
        if path in DIALECT_MODULES or PACKAGE / "runtime" in path.parents or PACKAGE / "distributed" in path.parents:
            continue
        text = path.read_text()
        for word in BACKEND_WORDS:
            if word in text:
                offenders.append(f"{path.relative_to(PACKAGE)}: {word}")
    assert not offenders, "backend words outside the dialect modules:\n" + "\n".join(offenders)


def test_inline_assembly_only_in_codegen():
    """PTX is the CUDA dialect's business: components call its named intrinsics (codegen/ptx.py)."""
    asm = re.compile(r"\basm\s*(volatile\s*)?\(")
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if CODEGEN not in p.parents and asm.search(p.read_text())]
    assert not offenders, f"inline assembly outside codegen/: {offenders}"


def test_intrinsics_defined_only_where_called():
    d = dialect_for(nominal_cuda_device())
    call = d.cp_async("cg", 16, "dst", "src")
    assert call.startswith("ptx_cp_async_cg_16(")
    assert "cp.async.cg.shared.global" in d.helpers_for("{ " + call + " }")
    assert "cp.async" not in d.helpers_for("{ nothing_here(); }")
    # A name that merely contains another's is not a call of it.
    assert "cp.async" not in d.helpers_for("{ my_ptx_cp_async_cg_16(x); }")


def test_every_neutral_word_is_defined_by_both_preambles():
    cuda = CudaDialect(nominal_cuda_device())
    ocl = OpenCLDialect(DeviceInfo("opencl", "x", 1, 65536, 256, 1))
    words = ["KERNEL", "LAUNCH_BOUNDS", "GLOBAL", "LOCAL", "RESTRICT", "INLINE", "UNIT_ID", "CUBE_ID",
             "CUBE_COUNT", "SYNC_CUBE", "FLOAT_AS_UINT", "UINT_AS_FLOAT"]
    for d in (cuda, ocl):
        pre = d.preamble([FLOAT32])
        for word in words:
            assert re.search(rf"#define {word}\b", pre), (d.backend, word)
        assert "typedef" in pre and "i64" in pre


def test_half_and_bf16_helpers_only_when_needed():
    d = dialect_for(nominal_cuda_device())
    assert "f16_to_f32" not in d.preamble([FLOAT32])
    assert "f16_to_f32" in d.preamble([FLOAT16])
    assert "bf16_to_f32" in d.preamble([BFLOAT16])
    ocl = OpenCLDialect(DeviceInfo("opencl", "x", 1, 65536, 256, 1))
    assert "cl_khr_fp64" in ocl.preamble([FLOAT64])


@pytest.mark.parametrize("cc,expect", [((7, 5), False), ((8, 0), True), ((9, 0), True)])
def test_capabilities(cc, expect):
    d = CudaDialect(nominal_cuda_device(*cc))
    assert d.supports("mma_sync") is expect
    assert OpenCLDialect(DeviceInfo("opencl", "x", 1, 65536, 256, 1)).supports("mma_sync") is False


def test_dialect_device_mismatch():
    with pytest.raises(ValueError, match="cuda device"):
        CudaDialect(DeviceInfo("opencl", "x", 1, 65536, 256, 1))


def test_sources_that_need_sm90_are_recognized():
    """float64's m16n8 shapes and the sm_90a instructions need an sm_90 target; m8n8k4 f64 and the
    16-bit m16n8k16 shape do not (tests/codegen/test_cuda_sources.py compiles by this)."""
    from gemm_engine.codegen.cuda_dialect import source_needs_sm90
    for k in (4, 8, 16):
        assert source_needs_sm90(f'asm("mma.sync.aligned.m16n8k{k}.row.col.f64.f64.f64.f64 {{%0}}")')
    assert source_needs_sm90('asm volatile("wgmma.fence.sync.aligned;")')
    assert not source_needs_sm90('asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}")')
    assert not source_needs_sm90('asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0}")')
