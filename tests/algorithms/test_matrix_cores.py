"""AMD and Intel matrix cores from OpenCL, without the hardware: the tiles' lane maps against the
vendors' ISA tables (written out here from AMD's CDNA / RDNA3 ISA documents and the Khronos
extension's reference implementation), the algorithms' refusals on devices without the instruction
(with the probe's reason), and their sources built offline: clang for gfx90a / gfx942 / gfx1100
(the assembly must hold the v_mfma / v_wmma instructions) and clang's spir64 front end against the
extension's prototypes for Intel. Compiled only: none of it ran on AMD or Intel hardware."""
from __future__ import annotations

import itertools
import re
from dataclasses import replace

import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.codegen.device import nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.selector.rules import unranked_reason
from gemm_engine.tile.matrix_cores import DpasTile, Gfx11WmmaTile, MatrixTileConfig, MfmaTile
from opencl_offline import amdgcn_assembly, compile_amdgcn, compile_intel_spir


def problem(dtype="float16", shape=(1, 256, 256, 256), layouts=("row", "row")):
    et = BY_NAME[dtype]
    return MatmulProblem(*shape, et, et, et, Layout(layouts[0]), Layout(layouts[1]))


def ev(expr: str, lane: int) -> int:
    return eval(re.sub(r"(?<![/*])/(?![/*])", "//", expr), {}, {"lane": lane})


# -- the ISA tables -------------------------------------------------------------------------------
def mfma_isa(k: int, lane: int):
    """v_mfma_*_16x16x{k}: (a: [(row, k)] per register, b: [(k, col)], c: [(row, col)])."""
    e = k // 4
    a = [(lane % 16, e * (lane // 16) + v) for v in range(e)]
    b = [(e * (lane // 16) + v, lane % 16) for v in range(e)]
    c = [(4 * (lane // 16) + v, lane % 16) for v in range(4)]
    return a, b, c


def wmma_gfx11_isa(lane: int):
    """v_wmma_f32_16x16x16_*_w32: each lane all 16 k of row / column lane % 16; c rows 2v + lane / 16."""
    return ([(lane % 16, k) for k in range(16)], [(k, lane % 16) for k in range(16)],
            [(2 * v + lane // 16, lane % 16) for v in range(8)])


def dpas_isa(sg: int, lane: int):
    """intel_sub_group_*_matrix_mad_k16 (the extension's reference implementation): a's component m
    holds row m, k (16 / sg) * lane ..; b's component j holds k 2j, 2j + 1 of column lane."""
    per = 16 // sg
    a = [[(m, per * lane + h) for h in range(per)] for m in range(8)]
    b = [[(2 * j + h, lane) for h in range(2)] for j in range(8)]
    return a, b, [(m, lane) for m in range(8)]


@pytest.mark.parametrize("kind, k", [("f16", 16), ("bf16", 16), ("f32", 4), ("f64", 4)])
def test_mfma_lane_maps_are_the_isa(kind, k):
    t, cfg = MfmaTile(), MatrixTileConfig(16, 16, k, "f32", kind=kind, plane=64)
    for lane in range(64):
        a, b, c = mfma_isa(k, lane)
        assert [(ev(x, lane), ev(kk, lane)) for (kk, x), in t.a_elements(cfg)] == a
        assert [(ev(kk, lane), ev(x, lane)) for (kk, x), in t.b_elements(cfg)] == b
        assert [(ev(r, lane), ev(col, lane)) for r, col in t.c_elements(cfg)] == c


def test_wmma_gfx11_lane_maps_are_the_isa():
    t, cfg = Gfx11WmmaTile(), MatrixTileConfig(16, 16, 16, "f32", kind="f16", plane=32)
    for lane in range(32):
        a, b, c = wmma_gfx11_isa(lane)
        assert [(ev(x, lane), ev(kk, lane)) for (kk, x), in t.a_elements(cfg)] == a
        assert [(ev(kk, lane), ev(x, lane)) for (kk, x), in t.b_elements(cfg)] == b
        assert [(ev(r, lane), ev(col, lane)) for r, col in t.c_elements(cfg)] == c


@pytest.mark.parametrize("sg", [8, 16])
def test_dpas_lane_maps_are_the_extension(sg):
    t, cfg = DpasTile(), MatrixTileConfig(8, sg, 16, "f32", kind="f16", plane=sg)
    for lane in range(sg):
        a, b, c = dpas_isa(sg, lane)
        assert [[(ev(x, lane), ev(kk, lane)) for kk, x in comp] for comp in t.a_elements(cfg)] == a
        assert [[(ev(kk, lane), ev(x, lane)) for kk, x in comp] for comp in t.b_elements(cfg)] == b
        assert [(ev(r, lane), ev(col, lane)) for r, col in t.c_elements(cfg)] == c


def test_every_output_element_is_one_lanes():
    """The c maps cover each tile element exactly once over the plane's lanes."""
    for tile, cfg, lanes in ((MfmaTile(), MatrixTileConfig(16, 16, 16, "f32", kind="f16", plane=64), 64),
                             (Gfx11WmmaTile(), MatrixTileConfig(16, 16, 16, "f32", kind="f16", plane=32), 32),
                             (DpasTile(), MatrixTileConfig(8, 16, 16, "f32", kind="f16", plane=16), 16)):
        seen = [(ev(r, lane), ev(c, lane)) for lane in range(lanes) for r, c in tile.c_elements(cfg)]
        assert sorted(seen) == sorted(itertools.product(range(cfg.tile_m), range(cfg.tile_n)))


# -- setup and refusals ------------------------------------------------------------------------------
CASES = [("simple_mfma", "gfx90a", ("float16", "bfloat16", "float32", "float64")),
         ("double_buffering_mfma", "gfx942", ("float16", "bfloat16", "float32", "float64")),
         ("simple_wmma_gfx11", "gfx1100", ("float16", "bfloat16")),
         ("simple_dpas", "xe-hpg", ("float16", "bfloat16")),
         ("double_buffering_dpas", "xe-hpc", ("float16", "bfloat16"))]


@pytest.mark.parametrize("name, target, dtypes", CASES)
def test_sets_up_on_its_device_and_refuses_elsewhere(name, target, dtypes):
    alg = REGISTRY[name]()
    for dtype in dtypes:
        alg.setup(problem(dtype), dialect_for(nominal_opencl_device(target)))
    with pytest.raises(SetupError, match="multiplies"):
        alg.setup(problem("int8"), dialect_for(nominal_opencl_device(target)))
    for other in ("sm_90", "cpu", "gpu"):
        with pytest.raises(SetupError, match="needs (AMD|Intel)"):
            alg.setup(problem(), dialect_for(nominal_opencl_device(other)))
    dev = nominal_opencl_device(target)
    feature = next(iter(dev.features - {"mfma_f64"}))
    lame = replace(dev, features=frozenset(), refusals=((feature, "the probe wrote wrong words"),))
    with pytest.raises(SetupError, match="wrong words"):
        alg.setup(problem(), dialect_for(lame))


def sources(name, target, dtypes):
    dialect = dialect_for(nominal_opencl_device(target))
    alg = REGISTRY[name]()
    for dtype in dtypes:
        for shape, layouts in (((1, 256, 256, 256), ("row", "row")), ((2, 97, 61, 53), ("col", "col"))):
            yield dtype, alg.render(alg.setup(problem(dtype, shape, layouts), dialect), dialect)


@pytest.mark.parametrize("name, target, dtypes", [c for c in CASES if c[1].startswith("gfx")])
def test_amd_sources_build_offline_into_matrix_instructions(name, target, dtypes):
    mnemonic = "v_wmma_f32_16x16x16" if "wmma" in name else "v_mfma_f"
    mcpu = {"gfx942": "gfx940"}.get(target, target)    # clang 15 knows MI300 as gfx940 only (same ISA)
    for dtype, text in sources(name, target, dtypes):
        ok, log = compile_amdgcn(text, mcpu)
        assert ok, f"{name} {dtype} for {mcpu}:\n{log[-1500:]}"
        assert mnemonic in amdgcn_assembly(text, mcpu), f"{name} {dtype}: no {mnemonic} in the assembly"


@pytest.mark.parametrize("name, target, dtypes", [c for c in CASES if c[1].startswith("xe")])
def test_intel_sources_build_against_the_extension(name, target, dtypes):
    for dtype, text in sources(name, target, dtypes):
        assert "intel_reqd_sub_group_size" in text and "get_sub_group_local_id()" in text
        ok, log = compile_intel_spir(text)
        assert ok, f"{name} {dtype} for {target}:\n{log[-1500:]}"


def test_auto_does_not_take_them_unchecked():
    assert "never run on the hardware" in unranked_reason("simple_mfma")
