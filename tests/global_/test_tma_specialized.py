"""The warp-specialized Hopper global level (global_/tma_specialized.py) reads what its batch level
gives it as declared data: the split tail's K range by the names its `SplitTailScope` carries,
what it asks of the tile loop as its config's `TileLoopRequest`."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest

from cuda_compile import compile_cuda, nvcc_or_skip
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.batch.tma_k_major import TmaKMajorBatchMatmul
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.global_.base import TileLoopRequest
from gemm_engine.problem import Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device(9, 0))
E4M3 = BY_NAME["float8_e4m3fn"]
#: Block-scaled fp8 4096 x 7168 x 16384: a last wave of 44 tiles, split in three (batch/split_tail.py).
SPLIT_PROBLEM = MatmulProblem(1, 4096, 7168, 16384, E4M3, E4M3, BY_NAME["bfloat16"], Layout.ROW, Layout.COL, 16, 16,
                              epilogue=Epilogue(lhs_scale="block", rhs_scale="block"))
SPLIT = dict(warpgroups_m=2, partition_m=1, tile_n=128, stages=6, split_tail=3)


class RenamedSplitBatch(TmaKMajorBatchMatmul):
    """Hands its global level the split range under names of its own."""

    name = "renamed_split_batch"

    def split_tail_scope(self, cfg):
        return replace(super().split_tail_scope(cfg), k_lo="part_first", k_hi="part_end")


class RenamedSplit(SpecializedWgmmaAlgorithm):
    name = "renamed_split"
    batch = RenamedSplitBatch


def _code(src: str) -> list[str]:
    """The source without its comments (which name the algorithm and its components)."""
    return [line for line in src.splitlines() if not line.lstrip().startswith("/*")]


def test_the_split_range_is_read_by_the_names_the_batch_scope_gives():
    usual = SpecializedWgmmaAlgorithm(**SPLIT)
    renamed = RenamedSplit(**SPLIT)
    src = renamed.render(renamed.setup(SPLIT_PROBLEM, SM90), SM90)
    assert not re.search(r"\bk_(lo|hi)\b", src) and "part_first > 0" in src and "part_end < k_steps" in src
    expected = usual.render(usual.setup(SPLIT_PROBLEM, SM90), SM90)
    assert _code(src) == _code(expected.replace("k_lo", "part_first").replace("k_hi", "part_end"))


@pytest.mark.nvcc
def test_the_renamed_split_kernel_compiles():
    nvcc = nvcc_or_skip()
    renamed = RenamedSplit(**SPLIT)
    ok, log = compile_cuda(renamed.render(renamed.setup(SPLIT_PROBLEM, SM90), SM90), nvcc,
                           "-gencode=arch=compute_90a,code=sm_90a")
    assert ok, log[-3000:]


def test_the_tile_loop_request_is_the_configs():
    cfg = SpecializedWgmmaAlgorithm(**SPLIT).setup(SPLIT_PROBLEM, SM90).batch.global_
    assert cfg.tile_loop == TileLoopRequest(cluster_m=1, split_tail=3)


def test_the_last_arriver_fixup_waits_for_nothing_and_launches_plainly():
    """split_fixup="last": the tile loop request says the parts do not wait, the kernel is not
    launched co-resident, and the rendered fixup takes tickets instead of awaiting flags."""
    owner, last = (SpecializedWgmmaAlgorithm(**SPLIT, split_fixup=f) for f in ("owner", "last"))
    cfgs = [alg.setup(SPLIT_PROBLEM, SM90) for alg in (owner, last)]
    assert [c.batch.global_.tile_loop.split_waits for c in cfgs] == [True, False]
    assert [[launch.co_resident for launch in alg.launches(c, SPLIT_PROBLEM)] for alg, c in zip((owner, last), cfgs)] \
        == [[True], [False]]
    src = last.render(cfgs[1], SM90)
    assert "atomicAdd" in src and "split_last" in src and "flag_acquire_clear" not in src


def test_an_unknown_fixup_is_refused_naming_the_knob():
    with pytest.raises(ValueError, match=r"split_fixup: expected one of \('owner', 'last'\)"):
        SpecializedWgmmaAlgorithm(**SPLIT, split_fixup="first")


@pytest.mark.nvcc
def test_the_last_arriver_split_kernel_compiles():
    alg = SpecializedWgmmaAlgorithm(**SPLIT, split_fixup="last")
    ok, log = compile_cuda(alg.render(alg.setup(SPLIT_PROBLEM, SM90), SM90), nvcc_or_skip(),
                           "-gencode=arch=compute_90a,code=sm_90a")
    assert ok, log[-3000:]
