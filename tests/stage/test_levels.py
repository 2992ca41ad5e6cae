"""Each level on its own: the tile and stage run in small harness kernels on a real device; the
events a listener sees; setup refusals; the batch level's cube count and dispatch coverage."""
from __future__ import annotations

import re

import numpy as np
import pytest

from gemm_engine.algorithms import SimpleAlgorithm, UnitSelection
from gemm_engine.codegen.dialect import OpenCLDialect, dialect_for
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.dtypes import FLOAT32, FLOAT64
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.events import (Begin, Finish, LhsLoaded, RecordingListener, RhsLoaded,
                                      TileMatmulCompleted)
from gemm_engine.stage.unit_partitioned import UnitPartitionedStage
from gemm_engine.tile.base import SmemTile
from gemm_engine.tile.register import RegisterTile
from helpers import rel_error

OPENCL_CPU = DeviceInfo(backend="opencl", name="test device", compute_units=2, max_shared_memory=65536,
                        max_threads_per_cube=1024, plane_size=1, fp64=False)


def problem(m=64, n=64, k=32, et=FLOAT32):
    return MatmulProblem(1, m, n, k, et, et, et, Layout.ROW, Layout.ROW)


# -- tile level --------------------------------------------------------------------------------
def tile_harness(d, tile, cfg, k_steps: int) -> str:
    """One unit: copy k-major operands into shared memory, run the tile k_steps times, write acc."""
    lhs_n, rhs_n = k_steps * cfg.tile_m, k_steps * cfg.tile_n
    lines = [
        d.preamble([FLOAT32]),
        "KERNEL void tile_harness(const GLOBAL float* lhs, const GLOBAL float* rhs, GLOBAL float* out) {",
        f"LOCAL float lhs_s[{lhs_n}]; LOCAL float rhs_s[{rhs_n}];",
        f"for (int i = 0; i < {lhs_n}; ++i) lhs_s[i] = lhs[i];",
        f"for (int i = 0; i < {rhs_n}; ++i) rhs_s[i] = rhs[i];",
        "SYNC_CUBE();",
        tile.declare_acc(cfg, d, "acc"), tile.declare_lhs(cfg, d, "a"), tile.declare_rhs(cfg, d, "b"),
        tile.init_acc(cfg, d, "acc"),
    ]
    for k in range(k_steps):
        lines += [tile.load_lhs(cfg, d, "a", SmemTile("lhs_s", cfg.tile_m, str(k), "0")),
                  tile.load_rhs(cfg, d, "b", SmemTile("rhs_s", cfg.tile_n, str(k), "0")),
                  tile.execute(cfg, d, "a", "b", "acc")]
    for row, col, value in tile.acc_elements(cfg, "acc"):
        lines.append(f"out[({row}) * {cfg.tile_n} + ({col})] = {value};")
    return "\n".join(lines + ["}"])


@pytest.mark.parametrize("tm,tn", [(1, 1), (4, 4), (8, 2)])
def test_register_tile_alone(opencl_engine, rng, tm, tn):
    rt = opencl_engine.runtime
    tile = RegisterTile()
    cfg = tile.setup(problem(), UnitSelection(tile_m=tm, tile_n=tn), rt.dialect)
    k = 5
    lhs_km = rng.standard_normal((k, tm)).astype(np.float32)   # k-major: lhs tile transposed
    rhs_km = rng.standard_normal((k, tn)).astype(np.float32)
    out = rt.to_device(np.full((tm, tn), np.nan, np.float32))
    fn = rt.kernel(tile_harness(rt.dialect, tile, cfg, k), "tile_harness")
    rt.launch(fn, 1, 1, [rt.to_device(lhs_km).data, rt.to_device(rhs_km).data, out.data])
    assert rel_error(rt.to_host(out), lhs_km.T.astype(np.float64) @ rhs_km) < 1e-6


def test_register_tile_refuses_bad_sizes_and_missing_fp64():
    tile = RegisterTile()
    d = OpenCLDialect(OPENCL_CPU)
    with pytest.raises(SetupError, match="tile_m=9"):
        tile.setup(problem(), UnitSelection(tile_m=9), d)
    with pytest.raises(SetupError, match="float64 is not supported"):
        tile.setup(problem(et=FLOAT64), UnitSelection(), d)


# -- stage level -------------------------------------------------------------------------------
def test_listener_sees_events_in_execution_order():
    stage = UnitPartitionedStage(RegisterTile())
    d = dialect_for(nominal_cuda_device())
    cfg = stage.setup(problem(), UnitSelection(stage_k=3), d)
    listener = RecordingListener()
    stage.execute(cfg, d, "l", "r", listener)
    n = 3
    expected = [Begin()]
    for i in range(n):
        expected += [LhsLoaded(i, n), RhsLoaded(i, n), TileMatmulCompleted(i, n)]
    assert listener.events == expected + [Finish()]


def test_listener_code_is_spliced_after_its_event():
    class Marker(RecordingListener):
        def on_event(self, event):
            super().on_event(event)
            return f"/* after {type(event).__name__} {getattr(event, 'i', '')} */"

    stage = UnitPartitionedStage(RegisterTile())
    d = dialect_for(nominal_cuda_device())
    cfg = stage.setup(problem(), UnitSelection(stage_k=2), d)
    src = stage.execute(cfg, d, "l", "r", Marker())
    order = [src.index(f"/* after {name} */") for name in
             ("Begin ", "LhsLoaded 0", "RhsLoaded 0", "TileMatmulCompleted 0", "LhsLoaded 1",
              "TileMatmulCompleted 1", "Finish ")]
    assert order == sorted(order)
    # The tile execution of step 1 reads k row 1 and lies between the two completion markers.
    assert order[3] < src.index("(1) * 68") < order[5]


def test_stage_refuses_tile_not_dividing_stage():
    stage = UnitPartitionedStage(RegisterTile())
    d = dialect_for(nominal_cuda_device())
    with pytest.raises(SetupError, match="does not divide"):
        stage.setup(problem(), UnitSelection(tile_m=3, stage_m=64), d)
    with pytest.raises(SetupError, match="exceed"):
        stage.setup(problem(), UnitSelection(tile_m=1, tile_n=1, stage_m=64, stage_n=64), d)


def test_stage_alone_on_device(opencl_engine, rng):
    """The unit stage over one 16 x 16 x 8 stage, every unit writing its partition."""
    rt = opencl_engine.runtime
    d = rt.dialect
    stage = UnitPartitionedStage(RegisterTile())
    cfg = stage.setup(problem(), UnitSelection(tile_m=2, tile_n=4, stage_m=16, stage_n=16, stage_k=8), d)
    lhs_n, rhs_n = cfg.lhs_smem_elems, cfg.rhs_smem_elems
    src = "\n".join([
        d.preamble([FLOAT32]),
        f"KERNEL LAUNCH_BOUNDS({cfg.units}) void stage_harness(const GLOBAL float* lhs, "
        "const GLOBAL float* rhs, GLOBAL float* out) {",
        f"LOCAL float lhs_s[{lhs_n}]; LOCAL float rhs_s[{rhs_n}];",
        f"for (int i = UNIT_ID; i < {lhs_n}; i += {cfg.units}) lhs_s[i] = lhs[i];",
        f"for (int i = UNIT_ID; i < {rhs_n}; i += {cfg.units}) rhs_s[i] = rhs[i];",
        "SYNC_CUBE();",
        stage.declare(cfg, d), stage.init_accumulators(cfg, d),
        stage.execute(cfg, d, "lhs_s", "rhs_s", RecordingListener()),
        stage.write(cfg, d, lambda r, c, v: f"out[({r}) * {cfg.stage_n} + ({c})] = {v};"),
        "}",
    ])
    # k-major shared stages with padded leading dimensions, as the stage config says.
    lhs = rng.standard_normal((cfg.stage_k, cfg.lhs_ld)).astype(np.float32)
    rhs = rng.standard_normal((cfg.stage_k, cfg.rhs_ld)).astype(np.float32)
    out = rt.to_device(np.full((cfg.stage_m, cfg.stage_n), np.nan, np.float32))
    rt.launch(rt.kernel(src, "stage_harness"), 1, cfg.units,
              [rt.to_device(lhs).data, rt.to_device(rhs).data, out.data])
    ref = lhs[:, :cfg.stage_m].T.astype(np.float64) @ rhs[:, :cfg.stage_n]
    assert rel_error(rt.to_host(out), ref) < 1e-6


# -- global and batch levels -------------------------------------------------------------------
def test_shared_memory_limit_is_a_setup_error():
    d = OpenCLDialect(OPENCL_CPU)
    alg = SimpleAlgorithm(UnitSelection(tile_m=8, tile_n=8, stage_m=128, stage_n=128, stage_k=64))
    with pytest.raises(SetupError, match="shared memory"):
        alg.setup(problem(), d)


def test_bounds_checks_only_where_needed():
    d = dialect_for(nominal_cuda_device())
    alg = SimpleAlgorithm(UnitSelection())
    exact = alg.render(alg.setup(problem(128, 128, 64), d), d)
    ragged = alg.render(alg.setup(problem(127, 129, 63), d), d)
    def guards(src):  # bounds conditions in loaders (gr/gc) and in the writer (cube_m0 + ...)
        return set(re.findall(r"(?:\bg[rc]|cube_[mn]0 \+ part_[mn]0 \+ \d+) < ([MNK])\b", src))

    assert guards(exact) == set()
    assert guards(ragged) == {"M", "N", "K"}


@pytest.mark.parametrize("batch,m,n", [(1, 64, 64), (3, 65, 130), (2, 1, 200)])
def test_batch_cube_count_covers_every_tile(batch, m, n):
    d = dialect_for(nominal_cuda_device())
    alg = SimpleAlgorithm(UnitSelection())
    p = MatmulProblem(batch, m, n, 16, FLOAT32, FLOAT32, FLOAT32)
    cfg = alg.setup(p, d)
    assert alg.cube_count(cfg, p) == batch * -(-m // 64) * -(-n // 64)
