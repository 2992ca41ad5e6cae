"""stage/ordered_partitioned.py: the unit stage whose lhs comes from each unit's register array --
the array declared at stage_k x tile_m, its rows (`unit_rows`), the refusal of more than one tile
along m, lhs read from registers at compile-time indices, and what it declares it needs."""
from __future__ import annotations

import re

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.compose.capabilities import K_MAJOR_SMEM, REGISTER_LHS_STAGE, UNIT_REGISTERS
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from gemm_engine.stage.events import RecordingListener
from gemm_engine.stage.ordered_partitioned import LHS_REGS, OrderedPartitionedStage

CL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))
PROBLEM = MatmulProblem(1, 128, 128, 64, FLOAT32, FLOAT32, FLOAT32)


def _setup(**sel):
    alg = REGISTRY["ordered_unit"](**sel)
    stage = alg.build().global_.stage
    return stage, alg.setup(PROBLEM, CL).batch.global_.stage


def test_declares_the_register_array():
    stage, cfg = _setup()
    assert isinstance(stage, OrderedPartitionedStage)
    assert f"float {LHS_REGS}[{cfg.stage_k * cfg.tile.tile_m}];" in stage.declare(cfg, CL)
    assert stage.unit_rows(cfg) == ("part_m0", cfg.tile.tile_m)


def test_more_than_one_tile_along_m_is_refused():
    with pytest.raises(SetupError, match="partition_m=2"):
        _setup(partition_m=2)


def test_lhs_is_read_from_registers_and_rhs_from_shared_memory():
    stage, cfg = _setup()
    text = stage.execute(cfg, CL, LHS_REGS, "rhs_smem", RecordingListener())
    assert LHS_REGS in text and "rhs_smem" in text and "lhs_smem" not in text
    # Every index into the register array is a compile-time expression of literals and loop counters.
    for index in re.findall(rf"{LHS_REGS}\[([^\]]*)\]", text):
        assert "UNIT_ID" not in index and "part_" not in index


def test_declared_contract():
    assert OrderedPartitionedStage.provides == frozenset({REGISTER_LHS_STAGE})
    needs = {(r.slot, cap) for r in OrderedPartitionedStage.requires for cap in r.any_of}
    assert ("lhs_loader", UNIT_REGISTERS) in needs and ("rhs_loader", K_MAJOR_SMEM) in needs
