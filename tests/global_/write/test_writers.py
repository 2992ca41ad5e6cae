"""global_/write/writers.py: which writer config each writer sets up (pairs per output type and
dialect, staging by knob), the paired store's run-time alignment flag, the staged writer's pitch and
fallback, and the direct and paired writers in a unit algorithm on PoCL: aligned and misaligned
device outputs, odd widths, against float64."""
from __future__ import annotations

import types

import numpy as np
import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32, FLOAT64, INT8, INT32
from gemm_engine.global_.write.writers import DirectWriter, PairedWriter, StagedWriter, WriterConfig
from gemm_engine.problem import MatmulProblem
from helpers import reference, rel_error, TOLERANCE

CL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))
SM80 = dialect_for(nominal_cuda_device(8, 0))


def _p(et, out=None):
    return MatmulProblem(1, 64, 64, 64, et, et, out or et)


@pytest.mark.parametrize("problem, dialect, pairs", [
    (_p(FLOAT32), CL, True), (_p(FLOAT64), CL, True), (_p(INT8, INT32), CL, True),
    (_p(FLOAT16), CL, False), (_p(FLOAT16), SM80, True), (_p(BY_NAME["bfloat16"]), SM80, True),
])
def test_pairs_per_output_type_and_dialect(problem, dialect, pairs):
    assert PairedWriter().setup(problem, None, dialect) == WriterConfig(pairs=pairs)
    assert DirectWriter().setup(problem, None, dialect) == WriterConfig()


def test_staged_by_knob_and_pitch_pads_16_bytes():
    sel = types.SimpleNamespace(staged_output=True)
    assert StagedWriter().setup(_p(FLOAT16), sel, SM80) == WriterConfig(pairs=True, staged=True)
    cfg = types.SimpleNamespace(stage=types.SimpleNamespace(stage_n=128), out=FLOAT16)
    assert StagedWriter.pitch(cfg) == 136
    cfg.out = FLOAT32
    assert StagedWriter.pitch(cfg) == 132


def test_pair_values():
    assert PairedWriter.pair_value(SM80, "bf16_bits", "a", "b", "global", "p") == \
        "*(GLOBAL unsigned*)(p) = ptx_cvt_rn_bf16x2(b, a);"
    vec = PairedWriter.pair_value(CL, "f32", "a", "b", "local", "p")
    assert vec == "{ float2 pv; pv.x = a; pv.y = b; (*(__local float2*)(p)) = pv; }"


class _Paired(SimpleUnitAlgorithm):
    name = "paired_unit_test"
    writer = PairedWriter


def test_paired_kernels_check_alignment_at_run_time():
    alg = _Paired()
    cfg = alg.setup(MatmulProblem(1, 64, 64, 64, FLOAT32, FLOAT32, FLOAT32), CL)
    assert cfg.batch.global_.writer.pairs
    assert "const bool out_pairs = " in alg.render(cfg, CL)
    # A plane stage hands out (row, col) and (row, col + 1): one packed store of both.
    mma = type("PairedMma", (REGISTRY["simple_mma"],), {"name": "paired_mma_test", "writer": PairedWriter})()
    source = mma.render(mma.setup(_p(FLOAT16), SM80), SM80)
    assert "const bool out_pairs = " in source and "ptx_cvt_rn_f16x2(" in source


@pytest.mark.parametrize("alg", [SimpleUnitAlgorithm(), _Paired()], ids=["direct", "paired"])
@pytest.mark.parametrize("offset, n", [(0, 64), (1, 64), (0, 37), (1, 37)])
def test_writers_on_pocl(opencl_engine, rng, alg, offset, n):
    cla = pytest.importorskip("pyopencl.array")
    q = opencl_engine.runtime.queue
    m, k = 33, 20
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    base = cla.to_device(q, np.full(offset + m * n + 3, np.nan, np.float32))
    out = base[offset:offset + m * n].reshape(m, n)             # contiguous, misaligned by `offset`
    result = opencl_engine.matmul(cla.to_device(q, a), cla.to_device(q, b), out=out, algorithm=alg)
    assert result is out
    host = base.get()
    assert rel_error(host[offset:offset + m * n].reshape(m, n), reference(a, b)) <= TOLERANCE["float32"]
    assert np.isnan(host[:offset]).all() and np.isnan(host[offset + m * n:]).all()   # nothing outside
