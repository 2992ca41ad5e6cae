"""The plane stage asks every tile for its paired rhs load (`TileMatmul.load_rhs_pair`, "" where it
has none: the base's answer) instead of probing for the method."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest

from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm
from gemm_engine.algorithms.wmma import SimpleWmmaAlgorithm
from gemm_engine.errors import SetupError
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.events import StageEventListener
from gemm_engine.tile.base import TileMatmul
from gemm_engine.tile.mma import MmaTile

D = dialect_for(nominal_cuda_device(9, 0))
F16 = BY_NAME["float16"]
PROBLEM = MatmulProblem(1, 512, 512, 512, F16, F16, F16, Layout.ROW, Layout.COL, 8, 8)


class UnpairedMma(MmaTile):
    """An mma tile without a paired rhs load of its own."""

    load_rhs_pair = TileMatmul.load_rhs_pair


class UnpairedPipelined(PipelinedMmaAlgorithm):
    name = "unpaired_pipelined"
    tile = UnpairedMma


def _rhs_loads(alg_class) -> list[set[str]]:
    alg = alg_class(fragment_buffering=True, partition_n=4)
    stage, cfg = alg.components.global_.stage, alg.setup(PROBLEM, D).batch.global_.stage
    code = stage.execute(cfg, D, "lhs_smem", "rhs_smem", StageEventListener())
    return [set(re.findall(r"rhs_frag_\d_\d", line)) for line in code.splitlines()
            if "rhs_frag" in line and "ptx_mma" not in line]


def test_a_tile_without_a_paired_load_gets_one_load_per_fragment():
    assert TileMatmul.load_rhs_pair(MmaTile(), None, D, "x", "y", None) == ""
    assert any(len(names) == 2 for names in _rhs_loads(PipelinedMmaAlgorithm))
    unpaired = _rhs_loads(UnpairedPipelined)
    assert unpaired and all(len(names) == 1 for names in unpaired)


# -- swizzled rows (smem_swizzle): what each lane's ldmatrix reads, and that it reads it without conflicts
class _Addresses:
    """Stands in for the dialect where the mma tile renders ldmatrix: the statement is the address."""

    @staticmethod
    def shared_address(pointer: str) -> str:
        return pointer

    @staticmethod
    def ldmatrix(regs, addr: str, trans: bool) -> str:
        return addr


SWIZZLED = dict(planes_m=2, planes_n=2, partition_m=4, partition_n=8, stage_k=32, stages=3,
                fragment_buffering=True, smem_swizzle=True)
LAYOUTS = [(Layout.ROW, Layout.ROW), (Layout.COL, Layout.COL), (Layout.ROW, Layout.COL), (Layout.COL, Layout.ROW)]


def _stage_cfg(layouts, **sel):
    problem = MatmulProblem(1, 512, 512, 512, F16, F16, F16, *layouts, 8, 8)
    return PipelinedMmaAlgorithm(**sel).setup(problem, D).batch.global_.stage


def _lane_elements(code: str, env: dict) -> list[int]:
    """The element index each of the 32 lanes addresses in an ldmatrix rendered by `_Addresses`."""
    index = re.fullmatch(r"&\w+\[(.*)\]", code, re.S).group(1)
    return [eval(index, {}, {**env, "lane": lane}) for lane in range(32)]


def _reads(cfg):
    """(operand, lane element indices, the same reads in an unswizzled layout of the same rows) of
    every lhs, rhs and paired-rhs ldmatrix of every k tile and plane."""
    tile, tc = MmaTile(), cfg.tile
    plain = replace(cfg, smem_swizzle=False)
    for kt in range(cfg.k_tiles):
        for p in range(cfg.planes_m * cfg.planes_n):
            env = {"plane_m0": (p // cfg.planes_n) * cfg.partition_m * 16, "plane_n0": (p % cfg.planes_n) * cfg.partition_n * 8}
            for i in range(cfg.partition_m):
                args = ("A", str(kt * 16), f"plane_m0 + {i * 16}")
                got = tile.load_lhs(tc, _Addresses, "f", cfg.lhs_tile(*args))
                want = tile.load_lhs(tc, _Addresses, "f", plain.lhs_tile(*args))
                yield "lhs", _lane_elements(got, env), _lane_elements(want, env)
            for j in range(0, cfg.partition_n, 2):
                args = ("B", str(kt * 16), f"plane_n0 + {j * 8}")
                for load in (lambda s: tile.load_rhs(tc, _Addresses, "f", s),
                             lambda s: tile.load_rhs_pair(tc, _Addresses, "f", "g", s)):
                    yield "rhs", _lane_elements(load(cfg.rhs_tile(*args)), env), \
                        _lane_elements(load(plain.rhs_tile(*args)), env)


@pytest.mark.parametrize("layouts", LAYOUTS)
def test_swizzled_reads_find_what_the_loaders_put_there(layouts):
    """Each lane's ldmatrix row is the chunk the loaders stored for the element it reads in the
    plain layout: the swizzle's place for (line, element) of that read."""
    cfg = _stage_cfg(layouts, **SWIZZLED)
    assert cfg.smem_swizzle and cfg.lhs_ld in (cfg.stage_k, cfg.stage_m) and cfg.rhs_ld in (cfg.stage_k, cfg.stage_n)
    checked = 0
    for op, got, plain in _reads(cfg):
        sw, ld = (cfg.lhs_swizzle, cfg.lhs_ld) if op == "lhs" else (cfg.rhs_swizzle, cfg.rhs_ld)
        want = [sw.byte_of(*divmod(e, ld)) // 2 for e in plain]
        assert got == want
        checked += 1
    assert checked


@pytest.mark.parametrize("layouts", LAYOUTS)
@pytest.mark.parametrize("swizzle", [True, False])
def test_every_ldmatrix_phase_is_free_of_bank_conflicts(layouts, swizzle):
    """8 lanes a phase, each reading 16 bytes: 8 distinct 16-byte bank groups, swizzled or padded."""
    cfg = _stage_cfg(layouts, **{**SWIZZLED, "smem_swizzle": swizzle, "stages": 3 if swizzle else 2})
    for _, got, _ in _reads(cfg):
        for phase in range(4):
            groups = {(e * 2 // 16) % 8 for e in got[8 * phase:8 * phase + 8]}
            assert len(groups) == 8


def test_unswizzled_unpadded_rows_would_conflict():
    """Why the swizzle (or the padding) is there: the same reads over plain unpadded rows conflict."""
    cfg = _stage_cfg((Layout.ROW, Layout.ROW), **SWIZZLED)
    worst = 0
    for _, _, plain in _reads(cfg):
        for phase in range(4):
            worst = max(worst, 8 - len({(e * 2 // 16) % 8 for e in plain[8 * phase:8 * phase + 8]}))
    assert worst > 0


def test_swizzle_refusals():
    problem = MatmulProblem(1, 512, 512, 512, F16, F16, F16, Layout.ROW, Layout.ROW, 8, 8)
    with pytest.raises(SetupError, match="does not read swizzled rows"):
        SimpleWmmaAlgorithm(smem_swizzle=True).setup(problem, D)
    # a 64 x 48 stage: rows of 96 bytes cannot be swizzled
    with pytest.raises(SetupError, match="rhs stage has lines of 96 bytes"):
        PipelinedMmaAlgorithm(**{**SWIZZLED, "partition_n": 3, "planes_n": 2}).setup(problem, D)
