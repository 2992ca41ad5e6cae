"""stage/base.py: StageConfig's shared-memory sizes per orientation, the StoreWriter / stores pair
(rolled loops only where the writer allows), and what every stage inherits: its setup checks
(positive fields, units per cube), K-major as the tile's question, whole-tile writes only."""
from __future__ import annotations

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.codegen.emitter import has_loop
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from gemm_engine.stage.base import Carry, StageConfig, StoreWriter, stores
from gemm_engine.stage.unit_partitioned import UnitPartitionedStage
from gemm_engine.tile.base import TileConfig
from gemm_engine.tile.register import RegisterTile

D = dialect_for(nominal_cuda_device())
TILE = TileConfig(4, 4, 1, "f32")


def test_smem_elements_follow_the_orientation():
    cfg = StageConfig(TILE, stage_m=64, stage_n=32, stage_k=16, units=128, lhs_ld=68, rhs_ld=36)
    assert cfg.lhs_smem_elems == 16 * 68 and cfg.rhs_smem_elems == 16 * 36
    kc = StageConfig(TILE, 64, 32, 16, 128, lhs_ld=20, rhs_ld=24, lhs_k_contiguous=True, rhs_k_contiguous=True)
    assert kc.lhs_smem_elems == 64 * 20 and kc.rhs_smem_elems == 32 * 24


def _statements(n=8):
    return [f"out[{i} * 4 + 1] = acc[{i}];" for i in range(n)]


def test_store_writer_calls_through_and_carries_loops():
    w = StoreWriter(lambda r, c, v: f"S({r},{c},{v});", loops=False)
    assert w("r", "c", "v") == "S(r,c,v);" and w.loops is False
    assert StoreWriter(lambda r, c, v: "").loops is True


def test_stores_rolls_affine_statements_unless_the_writer_says_no():
    rolled = stores(lambda r, c, v: "", _statements())
    assert has_loop(rolled) and rolled.count("acc[") == 1
    plain = stores(StoreWriter(lambda r, c, v: "", loops=False), _statements())
    assert plain == "\n".join(_statements())
    assert has_loop(stores(StoreWriter(lambda r, c, v: ""), _statements()))


def test_carry_is_a_frozen_value():
    c = Carry("wait();", "lhs1", "rhs1", "k < K")
    assert c == Carry("wait();", "lhs1", "rhs1", "k < K")
    with pytest.raises(AttributeError):
        c.more = "0"


def test_check_positive_names_the_first_bad_field():
    stage = UnitPartitionedStage(RegisterTile())
    stage._check_positive(a=1, b=2)
    with pytest.raises(SetupError, match="b=0 must be positive") as info:
        stage._check_positive(a=1, b=0, c=-1)
    assert info.value.component == stage.name


def test_groups_units_refuses_more_than_the_device_allows():
    stage = UnitPartitionedStage(RegisterTile())
    assert stage._groups_units(4, "planes", 32, D) == 128
    with pytest.raises(SetupError, match=r"33 planes \(1056 units\) exceed the device's 1024"):
        stage._groups_units(33, "planes", 32, D)


class _KMajorTile(RegisterTile):
    def requires_k_major(self, problem):
        return True


def test_k_major_is_the_tiles_question():
    problem = MatmulProblem(1, 8, 8, 8, FLOAT32, FLOAT32, FLOAT32)
    assert not UnitPartitionedStage(RegisterTile()).requires_k_major(problem)
    assert UnitPartitionedStage(_KMajorTile()).requires_k_major(problem)


def test_write_columns_is_refused_by_default_and_region_names_the_tile():
    stage = UnitPartitionedStage(RegisterTile())
    with pytest.raises(SetupError, match="whole"):
        super(UnitPartitionedStage, stage).write_columns(None, D, lambda r, c, v: "", range(0, 8))
    cfg = StageConfig(TILE, 64, 32, 16, 128, 68, 36)
    text = stage.region(cfg)
    assert text.startswith("/* == stage: UnitPartitionedStage") and "| tile RegisterTile: tile_m=4" in text
    assert "stage_m=64" in text
