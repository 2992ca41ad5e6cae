"""tile/mma.py: the mma.sync tile's setup (the instruction kind per dtype and precision, the shape,
refusals naming the reason) and its accumulator layout: 32 lanes hold the 16 x 8 tile exactly
once, four registers each. (Fragment addressing against the ISA: tests/tile/test_mma_fragments.py.)"""
from __future__ import annotations

import dataclasses
import types

import pytest

from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32, FLOAT64, INT8, INT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from gemm_engine.tile.base import SmemTile
from gemm_engine.tile.mma import MmaTile
from helpers import acc_coverage

SM90 = dialect_for(nominal_cuda_device(9, 0))


def _sel(**kw):
    return types.SimpleNamespace(**{"tile_m": 16, "tile_n": 8, "tile_k": 0, "precision": "default", **kw})


def _p(lhs, out=None, **kw):
    return MatmulProblem(1, 64, 64, 64, lhs, lhs, out or lhs, **kw)


@pytest.mark.parametrize("et, out, kw, kind, k, compute, smem, pad", [
    (FLOAT16, None, {}, "f16", 16, "f32", "f16_bits", 0),
    (BY_NAME["bfloat16"], None, {}, "bf16", 16, "f32", "bf16_bits", 0),
    (FLOAT32, None, {"precision": "tf32"}, "tf32", 8, "f32", "f32", 0),
    (INT8, INT32, {}, "s8", 32, "i32", "i8", 16),
])
def test_kind_shape_and_words_per_dtype(et, out, kw, kind, k, compute, smem, pad):
    cfg = MmaTile().setup(_p(et, out, **kw), _sel(), SM90)
    assert (cfg.kind, cfg.tile_m, cfg.tile_n, cfg.tile_k) == (kind, 16, 8, k)
    assert (cfg.compute, cfg.smem, cfg.smem_pad) == (compute, smem, pad)


def test_tf32_by_the_selection_too():
    assert MmaTile().setup(_p(FLOAT32), _sel(precision="tf32"), SM90).kind == "tf32"


@pytest.mark.parametrize("problem, sel, dialect, needle", [
    (_p(FLOAT32), _sel(), SM90, "opt in with precision='tf32'"),
    (_p(FLOAT64), _sel(), SM90, "no mma.sync for storage type 'f64'"),
    (_p(FLOAT16), _sel(tile_k=8), SM90, "not the f16 instruction shape 16x8x16"),
    (_p(FLOAT16), _sel(tile_n=16), SM90, "16x16x16"),
    (_p(FLOAT16), _sel(), dialect_for(nominal_cuda_device(7, 5)), "needs mma.sync"),
    (_p(FLOAT16), _sel(), dialect_for(DeviceInfo("opencl", "pocl", 2, 65536, 1024, 32)), "not an NVIDIA GPU"),
    (_p(FLOAT16), _sel(), dialect_for(dataclasses.replace(nominal_cuda_device(), plane_size=64)), "32-wide"),
    (MatmulProblem(1, 8, 8, 8, FLOAT16, BY_NAME["bfloat16"], FLOAT32), _sel(), SM90, "must share a dtype"),
])
def test_refusals_name_the_reason(problem, sel, dialect, needle):
    with pytest.raises(SetupError) as info:
        MmaTile().setup(problem, sel, dialect)
    assert needle in str(info.value) and info.value.component == "mma"


@pytest.mark.parametrize("et, kw", [(FLOAT16, {}), (INT8, {"out": INT32})])
def test_lanes_hold_the_tile_once(et, kw):
    tile = MmaTile()
    cfg = tile.setup(_p(et, kw.get("out")), _sel(), SM90)
    held = acc_coverage(tile, cfg, 32)
    assert set(held) == {(r, c) for r in range(16) for c in range(8)}
    assert all(len(v) == 1 for v in held.values())
    assert sorted(len([1 for v in held.values() if v[0][0] == lane]) for lane in range(32)) == [4] * 32


def test_scalar_kinds_have_no_paired_rhs_load():
    tile = MmaTile()
    src = SmemTile("s", 72, "0", "0")
    tf32 = tile.setup(_p(FLOAT32, precision="tf32"), _sel(), SM90)
    f16 = tile.setup(_p(FLOAT16), _sel(), SM90)
    assert tile.load_rhs_pair(tf32, SM90, "a", "b", src) == ""
    assert "ldmatrix_x4" in tile.load_rhs_pair(f16, SM90, "a", "b", src)
