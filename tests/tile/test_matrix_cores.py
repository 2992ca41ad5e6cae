"""tile/matrix_cores.py (render only): the AMD / Intel matrix-core tiles' setup (the instruction's shape
per kind and plane, refusals naming the reason), their fragment types and loads (elements packed
into the builtin's vector type), the dialect's builtin for execute, and one accumulator component
per output element. The lane maps against the ISA tables: tests/algorithms/test_matrix_cores.py."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from gemm_engine.codegen.device import nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.tile.base import SmemTile
from gemm_engine.tile.matrix_cores import DpasTile, Gfx11WmmaTile, MfmaTile

GFX90A, GFX1100 = dialect_for(nominal_opencl_device("gfx90a")), dialect_for(nominal_opencl_device("gfx1100"))
XE_HPG, XE_HPC = dialect_for(nominal_opencl_device("xe-hpg")), dialect_for(nominal_opencl_device("xe-hpc"))
ANY = SimpleNamespace(tile_m=0, tile_n=0, tile_k=0)
SRC = SmemTile("s", 40, "kk", "0")


def problem(lhs="float16", rhs=None):
    return MatmulProblem(1, 64, 64, 64, BY_NAME[lhs], BY_NAME[rhs or lhs], BY_NAME["float32"], Layout.ROW, Layout.ROW)


@pytest.mark.parametrize("tile, d, dtype, shape, compute, pad", [
    (MfmaTile(), GFX90A, "float16", (16, 16, 16), "f32", 0),
    (MfmaTile(), GFX90A, "bfloat16", (16, 16, 16), "f32", 0),
    (MfmaTile(), GFX90A, "float32", (16, 16, 4), "f32", 4),
    (MfmaTile(), GFX90A, "float64", (16, 16, 4), "f64", 4),
    (Gfx11WmmaTile(), GFX1100, "float16", (16, 16, 16), "f32", 0),
    (DpasTile(), XE_HPG, "float16", (8, 8, 16), "f32", 0),
    (DpasTile(), XE_HPC, "bfloat16", (8, 16, 16), "f32", 0),
])
def test_setup_takes_the_instructions_shape(tile, d, dtype, shape, compute, pad):
    cfg = tile.setup(problem(dtype), ANY, d)
    assert (cfg.tile_m, cfg.tile_n, cfg.tile_k) == shape
    assert (cfg.compute, cfg.smem_pad, cfg.smem) == (compute, pad, BY_NAME[dtype].storage)
    assert cfg.plane == (tile.plane or d.device.plane_size)


@pytest.mark.parametrize("tile, d, p, sel, words", [
    (MfmaTile(), GFX1100, problem(), ANY, "needs AMD MFMA"),
    (Gfx11WmmaTile(), GFX90A, problem(), ANY, "needs AMD WMMA"),
    (DpasTile(), GFX90A, problem(), ANY, "needs Intel DPAS"),
    (MfmaTile(), GFX90A, problem("float16", "bfloat16"), ANY, "must share a dtype"),
    (Gfx11WmmaTile(), GFX1100, problem("float32"), ANY, "multiplies f16, bf16"),
    (MfmaTile(), GFX90A, problem("int8"), ANY, "multiplies"),
    (MfmaTile(), GFX90A, problem(), SimpleNamespace(tile_m=32, tile_n=0, tile_k=0), "not the instruction's 16x16x16"),
])
def test_refusals(tile, d, p, sel, words):
    with pytest.raises(SetupError, match=words):
        tile.setup(p, sel, d)


def test_execute_and_declarations_use_the_dialects_builtins():
    cfg = MfmaTile().setup(problem(), ANY, GFX90A)
    t = MfmaTile()
    assert t.execute(cfg, GFX90A, "a", "b", "c") == GFX90A.mfma("f16", "c", "a", "b")
    assert (t.declare_lhs(cfg, GFX90A, "a"), t.declare_acc(cfg, GFX90A, "c")) == ("half4 a;", "float4 c;")
    assert t.init_acc(cfg, GFX90A, "c").startswith("c = (float4)(")
    cfg = DpasTile().setup(problem(), ANY, XE_HPG)
    assert DpasTile().execute(cfg, XE_HPG, "a", "b", "c") == XE_HPG.dpas("f16", "c", "a", "b")
    assert DpasTile().types(cfg) == ("int8", "int8", "float8")
    assert DpasTile().types(DpasTile().setup(problem(), ANY, XE_HPC))[0] == "short8"
    assert DpasTile().declare_lanes(cfg, XE_HPG) == "const int lane = (int)get_sub_group_local_id();"
    assert MfmaTile().declare_lanes(cfg, GFX90A) == f"const int lane = UNIT_ID % {cfg.plane};"


def test_loads_pack_into_the_operand_type():
    t = MfmaTile()
    half = t.load_lhs(t.setup(problem(), ANY, GFX90A), GFX90A, "a", SRC)
    assert half.startswith("a = as_half4((ushort4)(") and half.count("(ushort)") == 4
    one = t.load_rhs(t.setup(problem("float32"), ANY, GFX90A), GFX90A, "b", SRC)
    assert one.startswith("b = ") and one.count(";") == 1 and "as_" not in one and "(ushort)" not in one   # one float
    packed = DpasTile().load_lhs(DpasTile().setup(problem(), ANY, XE_HPG), XE_HPG, "a", SRC)
    assert packed.startswith("a = as_int8((uint8)(") and packed.count("<< 16") == 8


@pytest.mark.parametrize("tile, d, count", [(MfmaTile(), GFX90A, 4), (Gfx11WmmaTile(), GFX1100, 8),
                                            (DpasTile(), XE_HPC, 8)])
def test_one_component_per_accumulator_element(tile, d, count):
    cfg = tile.setup(problem(), ANY, d)
    els = list(tile.acc_elements(cfg, "c"))
    assert len(els) == count and len({e for _, _, e in els}) == count
    assert len({(r, c) for r, c, _ in els}) == count
