"""global_/ordered.py: lhs in each unit's registers (no lhs shared memory: the config counts only
rhs), the unit-rows loader (one unit, its own rows, the contiguous axis innermost), the lhs loads at
the stage's Begin, and its kernels on PoCL against float64 for both lhs layouts."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.batch.base import CubeScope, OperandRef
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.global_.listeners import OrderedListener
from gemm_engine.global_.ordered import OrderedGlobalMatmul, UnitRowsLoader
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.events import Begin
from helpers import assert_close, random

CL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))
ORDERED = REGISTRY["ordered_unit"]
SCOPE = CubeScope(OperandRef("lhs", "lhs_ld"), OperandRef("rhs", "rhs_ld"), OperandRef("out", "out_ld"))


def _cfg(layout=Layout.ROW):
    return ORDERED().setup(MatmulProblem(1, 100, 64, 40, FLOAT32, FLOAT32, FLOAT32, lhs_layout=layout), CL).batch.global_


def test_only_rhs_uses_shared_memory():
    cfg = _cfg()
    assert cfg.shared_memory_bytes == cfg.rhs_loader.smem_bytes
    text = OrderedGlobalMatmul().shared_declarations(cfg, CL)
    assert "rhs_smem" in text and "lhs_smem" not in text


def test_each_unit_loads_its_own_rows():
    cfg = _cfg()
    lhs = cfg.lhs_loader
    assert lhs.units == 1 and lhs.tasks == 1
    assert lhs.operand.rows == cfg.stage.tile.tile_m and lhs.operand.smem_ld == lhs.operand.rows
    [rows_first] = UnitRowsLoader().tasks(lhs, CL, SCOPE.lhs, "regs", "r0", "k0", "M", "K")
    assert rows_first.index("for (int r") < rows_first.index("for (int c")          # row-major: k innermost
    [cols_first] = UnitRowsLoader().tasks(_cfg(Layout.COL).lhs_loader, CL, SCOPE.lhs, "regs", "r0", "k0", "M", "K")
    assert cols_first.index("for (int c") < cols_first.index("for (int r")          # col-major: m innermost


def test_lhs_loads_answer_begin():
    alg = ORDERED()
    level = alg.build().global_
    cfg = alg.setup(MatmulProblem(1, 64, 64, 32, FLOAT32, FLOAT32, FLOAT32), CL).batch.global_
    listener = level.own_listener(cfg, CL, SCOPE, ["next();"])
    assert isinstance(listener, OrderedListener)
    begin = listener.on_event(Begin())
    assert "lhs_regs[" in begin and "cube_m0 + part_m0" in begin


@pytest.mark.parametrize("lhs_t", [False, True])
@pytest.mark.parametrize("shape", [(67, 21, 45), (128, 64, 64), (3, 5, 2)])
def test_on_pocl(opencl_engine, rng, shape, lhs_t):
    m, k, n = shape
    a = random(rng, (k, m), "float32").T if lhs_t else random(rng, (m, k), "float32")
    b = random(rng, (k, n), "float32")
    assert_close(opencl_engine.matmul(a, b, algorithm="ordered_unit"), a, b, "float32")
