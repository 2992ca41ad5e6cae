"""tile/base.py: SmemTile's element addressing in both orientations, TileConfig's words, and the
defaults a TileMatmul inherits (lanes declared once, no extra loads or headers)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.compose.capabilities import UNIT_SCOPE
from gemm_engine.tile.base import SmemTile, TileConfig, TileMatmul
from gemm_engine.tile.register import RegisterTile

D = dialect_for(nominal_cuda_device())


def _eval(expr: str, **env):
    return eval(expr, {}, env)


@pytest.mark.parametrize("k_contiguous", [False, True])
def test_smem_tile_at_addresses_element_k_x(k_contiguous):
    ld, kk, origin = 24, 3, 5
    stage = np.arange(40 * ld).reshape(40, ld)      # rows: k (k-major) or x (k-contiguous)
    tile = SmemTile("s", ld, "kk", "origin", k_contiguous)
    for k_off, x_off in ((0, 0), (2, 7), (1, 11)):
        got = _eval(tile.at(str(k_off), str(x_off)), s=stage.ravel(), kk=kk, origin=origin)
        k, x = kk + k_off, origin + x_off
        assert got == (stage[x, k] if k_contiguous else stage[k, x])


def test_smem_tile_parenthesizes_compound_expressions():
    tile = SmemTile("s", 8, "a + 1", "b * 2")
    # (a + 1 + 1) * 8 + (b * 2 + 3) with a = 2, b = 1: (4) * 8 + 5 = 37.
    assert _eval(tile.at("1", "3"), s=list(range(100)), a=2, b=1) == 37


def test_tile_config_words_default_to_compute_then_lhs():
    cfg = TileConfig(16, 8, 16, "f32")
    assert cfg.smem_word == "f32" and cfg.rhs_smem_word == "f32" and cfg.acc_regs == 4
    half = TileConfig(16, 8, 16, "f32", smem="bf16_bits")
    assert half.smem_word == "bf16_bits" and half.rhs_smem_word == "bf16_bits"
    mixed = TileConfig(64, 8, 32, "f32", smem="f8e4m3", rhs_smem="f8e5m2")
    assert mixed.smem_word == "f8e4m3" and mixed.rhs_smem_word == "f8e5m2"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.tile_m = 2


class _Lanes(RegisterTile):
    lanes = (("g", "UNIT_ID / 4"), ("t", "UNIT_ID % 4"), ("gt", "g * 4 + t"))


def test_declare_lanes_declares_each_name_once_in_order():
    text = _Lanes().declare_lanes(None, D)
    assert text.splitlines() == ["const int g = UNIT_ID / 4;", "const int t = UNIT_ID % 4;",
                                 "const int gt = g * 4 + t;"]


def test_defaults_of_a_tile():
    tile = RegisterTile()
    assert tile.declare_lanes(None, D) == ""
    assert tile.load_rhs_pair(None, D, "f0", "f1", SmemTile("s", 1, "0", "0")) == ""
    assert tile.write_prologue(None, D, 4) == "" and tile.stage_accumulator(None, D, "acc") == ""
    assert tile.headers == () and not tile.reads_k_contiguous
    assert TileMatmul.provides == frozenset({UNIT_SCOPE})


def test_a_tile_must_implement_the_contract():
    class Partial(TileMatmul):
        def setup(self, problem, selection, dialect):
            return None
    with pytest.raises(TypeError, match="abstract"):
        Partial()
