"""batch/tma_k_major.py: TMA addressability (16 bytes), the operands the persistent TMA level
copies (K-major for the tile, or re-pitched where TMA cannot address them), and a Hopper
composition (rendered for the nominal sm_90 device) with and without copies."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.batch.k_major import KMajorBatchConfig
from gemm_engine.batch.tma_k_major import copies_needed, tma_addressable
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32
from gemm_engine.problem import Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device())
ALG = REGISTRY["specialized_wgmma"]


@pytest.mark.parametrize("itemsize, align, ok", [(2, 8, True), (2, 4, False), (4, 4, True), (1, 16, True),
                                                 (1, 8, False), (4, 2, False)])
def test_tma_addressable(itemsize, align, ok):
    assert tma_addressable(itemsize, align) is ok


def _p(et=FLOAT16, lhs=Layout.ROW, rhs=Layout.ROW, la=8, ra=8, precision="default"):
    return MatmulProblem(1, 512, 512, 512, et, et, et if et.name != "int8" else BY_NAME["int32"], lhs, rhs, la, ra,
                         precision=precision)


@pytest.mark.parametrize("problem, k_major, copies", [
    (_p(), False, ()),
    (_p(la=4), False, ("lhs",)),                            # 8-byte aligned: re-pitched
    (_p(rhs=Layout.ROW), True, ("rhs",)),                   # a K-major-only tile: a row-major rhs transposed
    (_p(lhs=Layout.COL, rhs=Layout.COL, ra=2), True, ("lhs", "rhs")),
])
def test_copies_needed(problem, k_major, copies):
    assert copies_needed(problem, k_major) == copies


@pytest.mark.parametrize("problem, copies", [(_p(), ()), (_p(la=4, ra=2), ("lhs", "rhs")),
                                             (_p(FLOAT32, rhs=Layout.ROW, la=4, ra=4, precision="tf32"), ("rhs",))])
def test_the_hopper_composition_copies_what_it_must(problem, copies):
    alg = ALG()
    cfg = alg.setup(problem, SM90)
    got = cfg.batch.copies if isinstance(cfg.batch, KMajorBatchConfig) else ()
    assert got == copies
    names = [l.name for l in alg.launches(cfg, problem)]
    assert names[:len(copies)] == [f"gemm_engine_k_major_{op}" for op in copies]
    assert (alg.workspace(cfg, problem) is not None) == bool(copies)
