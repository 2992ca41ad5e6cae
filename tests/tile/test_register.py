"""tile/register.py: the register tile's setup (sizes, shared compute type, fp64 on the device), its
accumulator layout, and the tile alone on PoCL: its rendered declare / init / load / execute /
acc_elements in a one-unit kernel against a float64 product."""
from __future__ import annotations

import types

import numpy as np
import pytest

from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.opencl_dialect import OpenCLDialect
from gemm_engine.dtypes import FLOAT16, FLOAT32, FLOAT64, INT8, INT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from gemm_engine.tile.base import SmemTile
from gemm_engine.tile.register import RegisterTile
from helpers import acc_coverage, cl_run

CL = OpenCLDialect(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))


def _sel(tm, tn):
    return types.SimpleNamespace(tile_m=tm, tile_n=tn)


def _problem(et=FLOAT32, out=None):
    return MatmulProblem(1, 64, 64, 64, et, et, out or et)


@pytest.mark.parametrize("tm, tn", [(0, 4), (4, 9), (9, 1), (-1, 2)])
def test_sizes_outside_1_to_8_are_refused_by_name(tm, tn):
    with pytest.raises(SetupError, match="must be between 1 and 8") as info:
        RegisterTile().setup(_problem(), _sel(tm, tn), CL)
    assert info.value.component == "register"


def test_compute_types():
    tile = RegisterTile()
    assert tile.setup(_problem(FLOAT16), _sel(4, 2), CL).compute == "f32"
    assert tile.setup(_problem(INT8, INT32), _sel(4, 2), CL).compute == "i32"
    cfg = tile.setup(_problem(FLOAT64), _sel(8, 8), CL)
    assert (cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.compute) == (8, 8, 1, "f64")
    mixed = MatmulProblem(1, 8, 8, 8, FLOAT32, FLOAT64, FLOAT64)
    with pytest.raises(SetupError, match="share a compute type"):
        tile.setup(mixed, _sel(4, 4), CL)
    no64 = OpenCLDialect(DeviceInfo("opencl", "tiny", 1, 32768, 256, 32, fp64=False))
    with pytest.raises(SetupError, match="float64 is not supported by device 'tiny'"):
        tile.setup(_problem(FLOAT64), _sel(4, 4), no64)


@pytest.mark.parametrize("tm, tn", [(1, 1), (3, 5), (8, 8)])
def test_one_unit_holds_the_whole_tile_once(tm, tn):
    tile = RegisterTile()
    cfg = tile.setup(_problem(), _sel(tm, tn), CL)
    held = acc_coverage(tile, cfg, 1)
    assert set(held) == {(r, c) for r in range(tm) for c in range(tn)}
    assert all(len(v) == 1 for v in held.values())
    assert len({v[0][1] for v in held.values()}) == tm * tn      # distinct registers


@pytest.mark.parametrize("dtype, et", [(np.float32, FLOAT32), (np.float64, FLOAT64)])
def test_tile_alone_on_pocl(opencl_engine, rng, dtype, et):
    tile = RegisterTile()
    tm, tn, k = 3, 5, 7
    cfg = tile.setup(_problem(et), _sel(tm, tn), CL)
    d = OpenCLDialect(opencl_engine.device)
    ct = d.c_type(cfg.compute)
    ld_a, ld_b = tm + 2, tn + 1                          # padded rows, origin 1: the SmemTile addressing
    lhs, rhs = SmemTile("sa", ld_a, "kk", "1"), SmemTile("sb", ld_b, "kk", "1")
    writes = "\n".join(f"out[({r}) * {tn} + ({c})] = {v};" for r, c, v in tile.acc_elements(cfg, "acc"))
    body = f"""
__kernel void tile_alone(__global const {ct}* a, __global const {ct}* b, __global {ct}* out) {{
    __local {ct} sa[{k * ld_a}];
    __local {ct} sb[{k * ld_b}];
    for (int i = 0; i < {k * ld_a}; ++i) sa[i] = a[i];
    for (int i = 0; i < {k * ld_b}; ++i) sb[i] = b[i];
    {tile.declare_lhs(cfg, d, "fa")}
    {tile.declare_rhs(cfg, d, "fb")}
    {tile.declare_acc(cfg, d, "acc")}
    {tile.init_acc(cfg, d, "acc")}
    for (int kk = 0; kk < {k}; ++kk) {{
        {tile.load_lhs(cfg, d, "fa", lhs)}
        {tile.load_rhs(cfg, d, "fb", rhs)}
        {tile.execute(cfg, d, "fa", "fb", "acc")}
    }}
    {writes}
}}
"""
    a = rng.standard_normal((k, tm)).astype(dtype)      # k-major stage rows, as the stage stores them
    b = rng.standard_normal((k, tn)).astype(dtype)
    sa = np.zeros((k, ld_a), dtype)
    sa[:, 1:1 + tm] = a
    sb = np.zeros((k, ld_b), dtype)
    sb[:, 1:1 + tn] = b
    source = d.preamble([et]) + body
    got = cl_run(opencl_engine, source, "tile_alone", [sa, sb, np.full(tm * tn, np.nan, dtype)], 1, local=1)
    ref = a.T.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got.reshape(tm, tn), ref, rtol=1e-5 if dtype == np.float32 else 1e-12)
