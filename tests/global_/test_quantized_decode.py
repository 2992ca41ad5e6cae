"""global_/quantized_decode.py: the decode level's setup (16-bit activations, a plane product on the
device, M up to the tiles it holds, group sizes in whole steps, planes, loads and shared memory
checked by name) and the tiling it picks. (Its kernels' numerics on PoCL, whose emulated plane product
takes about 20 s of compile a kernel here: tests/algorithms/test_quantized_decode.py.)"""
from __future__ import annotations

import dataclasses
import types

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16, FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.global_.quantized_decode import QuantizedDecodeGlobalMatmul
from gemm_engine.problem import MatmulProblem
from gemm_engine.quant.format import WeightFormat

SM90 = dialect_for(nominal_cuda_device())
INT4 = WeightFormat("int4", group_size=128, scale="f16_bits")


def _p(m=4, et=FLOAT16, weights=INT4, k=1024, n=512):
    return MatmulProblem(1, m, n, k, et, et, et, weights=weights)


def _sel(**kw):
    return types.SimpleNamespace(**{"planes": 4, "column_loads": 0, "unroll": 0, "planes_along": "k", "prefetch": -1, "row_tiles": 0, **kw})


def test_setup_picks_the_tiling():
    cfg = QuantizedDecodeGlobalMatmul().setup(_p(m=4), _sel(prefetch=0), SM90)
    assert cfg.stage.stage_m == 8 and cfg.m_tiles == 1 and (cfg.loads, cfg.unroll) == (2, 4) and not cfg.prefetch
    # One register buffer by default (measured faster); the knob keeps two, of half a block each.
    default = QuantizedDecodeGlobalMatmul().setup(_p(m=4), _sel(), SM90)
    assert not default.prefetch and (default.loads, default.unroll) == (2, 4)
    ahead = QuantizedDecodeGlobalMatmul().setup(_p(m=4), _sel(prefetch=1), SM90)
    assert ahead.prefetch and (ahead.loads, ahead.unroll) == (2, 2)
    # int4 at 9-16 rows: 2 steps a block; 8-bit codes by pairs: 4 (64 rows of K either way)
    assert QuantizedDecodeGlobalMatmul().setup(_p(m=16), _sel(), SM90).unroll == 2
    int8 = WeightFormat("int8", group_size=0, scale="f16_bits")
    assert QuantizedDecodeGlobalMatmul().setup(_p(m=16, weights=int8), _sel(), SM90).unroll == 4
    assert cfg.stage.stage_n == 64 and cfg.stage.units == 4 * 32 and cfg.kind == "f16"
    assert cfg.fast_pairs and cfg.scratch == 0
    wide = QuantizedDecodeGlobalMatmul().setup(_p(m=40), _sel(planes_along="n"), SM90)
    assert wide.m_tiles == 5 and (wide.loads, wide.unroll) == (1, 1) and wide.along_n
    assert wide.stage.stage_n == 32 * 1 * 4


@pytest.mark.parametrize("problem, sel, needle", [
    (dataclasses.replace(_p(), weights=None), _sel(), "this problem's rhs is dense"),
    (_p(et=FLOAT32), _sel(), "float32 activations"),
    (_p(m=65), _sel(), "M = 65"),
    (_p(weights=WeightFormat("int4", group_size=16)), _sel(), "group_size=16 is not a multiple"),
    (_p(), _sel(planes_along="m"), "planes_along='m'"),
    (_p(), _sel(planes=0), "planes=0 must be a positive int"),
    (_p(), _sel(column_loads=3), "column_loads=3: at most 2"),
    (_p(), _sel(planes=64), "64 planes exceed"),
])
def test_refusals(problem, sel, needle):
    with pytest.raises(SetupError) as info:
        QuantizedDecodeGlobalMatmul().setup(problem, sel, SM90)
    assert needle in str(info.value)


def test_devices_without_a_plane_product_are_refused():
    with pytest.raises(SetupError, match="no m16n8k16 plane product"):
        QuantizedDecodeGlobalMatmul().setup(_p(), _sel(), dialect_for(nominal_cuda_device(7, 5)))
