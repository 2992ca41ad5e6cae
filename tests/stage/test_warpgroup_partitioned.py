"""The warpgroup stage (stage/warpgroup_partitioned.py) takes any tile that declares
`WARPGROUP_SCOPE` and has its interface (`WarpgroupTileInterface`, config fields
`WarpgroupTileConfigFields`: compose/capabilities.py), not only `WgmmaTile`; one that declares it
without the interface, or lacks it, is refused with a SetupError naming the stage and the tile."""
from __future__ import annotations

import re

from dataclasses import dataclass

import pytest

from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.compose.capabilities import WARPGROUP_SCOPE
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.warpgroup_partitioned import WarpgroupPartitionedStage
from gemm_engine.tile.base import TileConfig, TileMatmul
from gemm_engine.tile.mma import MmaTile
from gemm_engine.tile.wgmma import WgmmaTile

SM90 = dialect_for(nominal_cuda_device(9, 0))
BF16 = BY_NAME["bfloat16"]
PROBLEM = MatmulProblem(1, 1024, 1024, 1024, BF16, BF16, BF16, Layout.ROW, Layout.ROW, 8, 8)


class BasicWarpgroupTile(TileMatmul):
    """Declares the warpgroup scope and has every `TileMatmul` method (handed to a wgmma tile), but
    none of the capability's own: not enough for the stage."""

    name = "basic_warpgroup"
    scope = "warpgroup"
    provides = frozenset({WARPGROUP_SCOPE})
    knobs = WgmmaTile.knobs
    lanes = WgmmaTile.lanes

    def __init__(self):
        self.inner = WgmmaTile()

    def setup(self, problem, selection, dialect):
        return self.inner.setup(problem, selection, dialect)

    def requires_k_major(self, problem):
        return self.inner.requires_k_major(problem)

    def declare_lhs(self, cfg, d, frag):
        return self.inner.declare_lhs(cfg, d, frag)

    def declare_rhs(self, cfg, d, frag):
        return self.inner.declare_rhs(cfg, d, frag)

    def declare_acc(self, cfg, d, acc):
        return self.inner.declare_acc(cfg, d, acc)

    def init_acc(self, cfg, d, acc):
        return self.inner.init_acc(cfg, d, acc)

    def load_lhs(self, cfg, d, frag, src):
        return self.inner.load_lhs(cfg, d, frag, src)

    def load_rhs(self, cfg, d, frag, src):
        return self.inner.load_rhs(cfg, d, frag, src)

    def execute(self, cfg, d, lhs, rhs, acc):
        return self.inner.execute(cfg, d, lhs, rhs, acc)

    def acc_elements(self, cfg, acc):
        return self.inner.acc_elements(cfg, acc)


class UserWarpgroupTile(BasicWarpgroupTile):
    """A user's warpgroup tile: not a `WgmmaTile`, but with the whole interface."""

    name = "user_warpgroup"

    def execute(self, cfg, d, lhs, rhs, acc, overwrite=False):
        return self.inner.execute(cfg, d, lhs, rhs, acc, overwrite)

    def acc_elements(self, cfg, acc, columns=None):
        return self.inner.acc_elements(cfg, acc, columns)

    def fence(self, d):
        return self.inner.fence(d)

    def commit(self, d):
        return self.inner.commit(d)

    def wait(self, d, pending):
        return self.inner.wait(d, pending)

    def pin(self, cfg, d, acc):
        return self.inner.pin(cfg, d, acc)

    def acc_registers(self, cfg):
        return self.inner.acc_registers(cfg)

    def acc_row(self, cfg):
        return self.inner.acc_row(cfg)


class UserWgmma(SpecializedWgmmaAlgorithm):
    name = "user_wgmma"
    tile = UserWarpgroupTile


class BasicWgmma(SpecializedWgmmaAlgorithm):
    name = "basic_wgmma"
    tile = BasicWarpgroupTile


def _code(src: str) -> list[str]:
    """The source without its comments (which name the algorithm and its components)."""
    return [line for line in re.sub(r"/\*.*?\*/", "", src, flags=re.S).splitlines() if line.strip()]


def test_a_users_warpgroup_tile_stands_in_for_wgmma():
    selection = SpecializedWgmmaAlgorithm.selection_class()
    orientation = (True, False)      # a row-major lhs is k-contiguous, a row-major rhs is not
    cfg = WarpgroupPartitionedStage(UserWarpgroupTile()).setup(PROBLEM, selection, SM90, *orientation)
    assert cfg == WarpgroupPartitionedStage(WgmmaTile()).setup(PROBLEM, selection, SM90, *orientation)
    user, built_in = UserWgmma(), SpecializedWgmmaAlgorithm()
    src = user.render(user.setup(PROBLEM, SM90), SM90)
    assert _code(src) == _code(built_in.render(built_in.setup(PROBLEM, SM90), SM90))


def test_a_tile_declaring_the_capability_without_its_interface_is_refused_naming_both():
    with pytest.raises(SetupError) as info:
        WarpgroupPartitionedStage(BasicWarpgroupTile()).setup(PROBLEM, SpecializedWgmmaAlgorithm.selection_class(), SM90)
    err = info.value
    assert err.component == "warpgroup_partitioned_stage" and "BasicWarpgroupTile" in err.reason
    assert "WarpgroupTileInterface" in err.reason and "no method fence" in err.reason
    assert "execute(cfg, d, lhs, rhs, acc) cannot be called as execute(cfg, d, lhs, rhs, acc, overwrite=False)" \
        in err.reason
    # Composed in an algorithm: refused before setup, by the composition check, naming both.
    with pytest.raises(SetupError, match=r"WarpgroupPartitionedStage.*\(stage\) needs a warpgroup tile.*"
                                         r"BasicWarpgroupTile \('basic_warpgroup'\) declares it but lacks"):
        BasicWgmma().setup(PROBLEM, SM90)


def test_a_tile_without_the_capability_is_refused_naming_both():
    with pytest.raises(SetupError) as info:
        WarpgroupPartitionedStage(MmaTile()).setup(PROBLEM, SpecializedWgmmaAlgorithm.selection_class(), SM90)
    assert info.value.component == "warpgroup_partitioned_stage" and "MmaTile" in info.value.reason


@dataclass(frozen=True)
class BareConfig(TileConfig):
    """A tile config without the fields the warpgroup stage reads."""


class BareConfigTile(UserWarpgroupTile):
    name = "bare_config"

    def setup(self, problem, selection, dialect):
        return BareConfig(tile_m=64, tile_n=128, tile_k=16, compute="f32")


def test_a_tile_whose_config_lacks_the_declared_fields_is_refused_naming_both():
    with pytest.raises(SetupError, match=r"reads kind, itemsize, lhs_mn_major, rhs_mn_major of its tile's config "
                                         r"\(WarpgroupTileConfigFields\); BareConfigTile .*BareConfig has none") as info:
        WarpgroupPartitionedStage(BareConfigTile()).setup(PROBLEM, SpecializedWgmmaAlgorithm.selection_class(), SM90)
    assert info.value.component == "warpgroup_partitioned_stage"
