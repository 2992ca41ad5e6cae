"""tile/dmma.py: the f64 tensor-core tile's setup (instruction shapes per architecture, float64
only, refusals naming the reason), its fragment sizes, and its accumulator layout: 32 lanes hold
the m x 8 tile exactly once. (Fragment addressing against the ISA: test_dmma_fragments.py.)"""
from __future__ import annotations

import types

import pytest

from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32, FLOAT64
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from gemm_engine.tile.dmma import SHAPES, DmmaTile
from helpers import acc_coverage

SM90, SM80 = dialect_for(nominal_cuda_device(9, 0)), dialect_for(nominal_cuda_device(8, 0))
F64 = MatmulProblem(1, 64, 64, 64, FLOAT64, FLOAT64, FLOAT64)


def _sel(tm=8, tn=8, tk=0):
    return types.SimpleNamespace(tile_m=tm, tile_n=tn, tile_k=tk)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_sets_up_where_its_architecture_has_it(shape):
    cfg = DmmaTile().setup(F64, _sel(*shape), SM90)
    assert (cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.compute) == (*shape, "f64")
    m, _, k = shape
    assert (cfg.a_doubles, cfg.b_doubles, cfg.c_doubles) == (m * k // 32, k // 4, m // 4)
    if SHAPES[shape] > (8, 0):
        with pytest.raises(SetupError, match="needs sm_90"):
            DmmaTile().setup(F64, _sel(*shape), SM80)
    else:
        assert DmmaTile().setup(F64, _sel(*shape), SM80).tile_m == 8


def test_tile_k_zero_is_four():
    assert DmmaTile().setup(F64, _sel(16, 8, 0), SM90).tile_k == 4


@pytest.mark.parametrize("problem, sel, dialect, needle", [
    (MatmulProblem(1, 8, 8, 8, FLOAT32, FLOAT32, FLOAT32), _sel(), SM90, "multiplies float64 only"),
    (MatmulProblem(1, 8, 8, 8, FLOAT64, FLOAT64, FLOAT32), _sel(), SM90, "out is float32"),
    (F64, _sel(32, 8, 4), SM90, "not an f64 instruction shape"),
    (F64, _sel(), dialect_for(DeviceInfo("opencl", "pocl", 2, 65536, 1024, 32)), "needs f64 mma.sync"),
])
def test_refusals(problem, sel, dialect, needle):
    with pytest.raises(SetupError) as info:
        DmmaTile().setup(problem, sel, dialect)
    assert needle in str(info.value) and info.value.component == DmmaTile.name


@pytest.mark.parametrize("shape", list(SHAPES))
def test_lanes_hold_the_tile_once(shape):
    tile = DmmaTile()
    cfg = tile.setup(F64, _sel(*shape), SM90)
    held = acc_coverage(tile, cfg, 32)
    assert set(held) == {(r, c) for r in range(shape[0]) for c in range(8)}
    assert all(len(v) == 1 for v in held.values())


def test_single_doubles_are_scalars_and_more_are_arrays():
    tile = DmmaTile()
    small, big = tile.setup(F64, _sel(8, 8, 4), SM90), tile.setup(F64, _sel(16, 8, 16), SM90)
    assert tile.declare_lhs(small, SM90, "a") == "double a;"
    assert tile.declare_lhs(big, SM90, "a") == "double a[8];" and tile.declare_rhs(big, SM90, "b") == "double b[4];"
    assert tile.init_acc(small, SM90, "c") == "c[0] = 0.0; c[1] = 0.0;"
