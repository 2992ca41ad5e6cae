"""The "ordered_unit" algorithm (the ordered family's one member): lhs loaded by each unit from
global memory into registers, rhs double buffered in shared memory.

Numerics (the shared register-tile suite), the shape of the rendered kernel (no lhs shared memory,
one block of lhs register loads per K step before the first tile, lhs fragments read from those
registers, rhs loads spread between tile executions, one barrier per step) and shared-memory setup.
test_cuda_sources compiles its CUDA sources with nvcc.
"""
from __future__ import annotations

import re

import pytest

from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout
from gemm_engine.stage.ordered_partitioned import LHS_REGS
from gemm_engine.tile.base import SmemTile
from renders import OPENCL_DEVICE, flat, problem, render
from unit_algorithm_suite import (test_broadcast_batch, test_column_major_operands,  # noqa: F401
                                  test_float32_shapes, test_many_k_steps, test_other_dtypes)

ALG = "ordered_unit"


@pytest.fixture
def algorithm():
    return ALG


# -- rendered source (no device) --------------------------------------------------------------------
@pytest.mark.parametrize("layout", [Layout.ROW, Layout.COL], ids=["row", "col"])
@pytest.mark.parametrize("device", [nominal_cuda_device(), OPENCL_DEVICE], ids=["cuda", "opencl"])
@pytest.mark.parametrize("shape", [(256, 256, 512), (65, 63, 33)], ids=["big", "odd"])
def test_lhs_from_global_into_registers(device, shape, layout):
    alg, cfg, dialect, src = render(problem(*shape, lhs_layout=layout), device, ALG)
    src = flat(src)
    g, stage = cfg.batch.global_, cfg.batch.global_.stage
    tm, sk = stage.tile.tile_m, stage.stage_k
    assert "lhs_smem" not in src and f"rhs_smem[{2 * stage.rhs_smem_elems}]" in src
    assert g.shared_memory_bytes == g.rhs_loader.smem_bytes
    assert f"{LHS_REGS}[{sk * tm}];" in src
    tile = alg.components.global_.stage.tile
    tile_exec = flat(tile.execute(stage.tile, dialect, "lhs_frag", "rhs_frag", "acc"))
    execs = [m.start() for m in re.finditer(re.escape(tile_exec), src)]
    loop = src.index("for (i64 k0 = 0;")
    assert len(execs) == sk and execs[0] > loop, "expected the stage's k loop unrolled"
    # One block of lhs register loads per K step, before the first tile execution.
    (lhs_read,) = [m.start() for m in re.finditer(r"\blhs\[", src)]
    assert loop < lhs_read < execs[0]
    assert re.search(rf"{LHS_REGS}\[\(c\) \* {tm} \+ \(r\)\] = ", src)
    # Each k of the stage takes its lhs fragment from the registers, at a compile-time index.
    for k in range(sk):
        assert flat(tile.load_lhs(stage.tile, dialect, "lhs_frag", SmemTile(LHS_REGS, tm, str(k), "0"))) in src
    # Walk the contiguous axis innermost: k for a row-major lhs, m for a column-major one.
    inner = ("c", sk) if layout is Layout.ROW else ("r", tm)
    assert f"for (int {inner[0]} = 0; {inner[0]} < {inner[1]}; ++{inner[0]}) {{" in src
    # Rhs as in double buffering: prologue, then the next slice between the tile executions.
    rhs_reads = [m.start() for m in re.finditer(r"\brhs\[", src)]
    assert len([i for i in rhs_reads if i < loop]) == g.rhs_loader.tasks
    assert len([i for i in rhs_reads if execs[0] < i < execs[-1]]) == g.rhs_loader.tasks
    assert src.count("SYNC_CUBE();") == 2   # after the prologue, once per K step


# -- setup ------------------------------------------------------------------------------------------
def test_needs_only_the_rhs_stages_in_shared_memory():
    def device(kib):
        return DeviceInfo(backend="opencl", name=f"{kib} KiB", compute_units=1, max_shared_memory=kib * 1024,
                          max_threads_per_cube=1024, plane_size=1)
    p = problem(64, 64, 64)                 # 64 x 64 x 16 f32 stages: 4.25 KiB each
    with pytest.raises(SetupError, match="shared memory"):
        render(p, device(12), "double_buffering_unit")   # lhs and rhs, two buffers each: 17 KiB
    render(p, device(12), ALG)             # rhs only: 8.5 KiB
    with pytest.raises(SetupError, match="shared memory"):
        render(p, device(8), ALG)
