"""global_/write/pairs.py: the stage's elements taken in column pairs (every element once, each
pair (row, 2j), (row, 2j + 1)), the refusals of stages and compositions that cannot pair (naming
the component), and column expressions split into symbols and offsets.
(Gated numerics on every OpenCL algorithm: tests/global_/test_pairs.py.)"""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.epilogue.activations import resolve_activation
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.global_.write.pairs import column_pairs, split_offset
from gemm_engine.problem import MatmulProblem

CL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))
PROBLEM = MatmulProblem(1, 64, 64, 64, FLOAT32, FLOAT32, FLOAT32)


def _stage(tile_n):
    alg = SimpleUnitAlgorithm(tile_n=tile_n)
    return alg.build().global_.stage, alg.setup(PROBLEM, CL).batch.global_.stage


@pytest.mark.parametrize("tile_n", [2, 4, 8])
def test_every_element_once_in_column_pairs(tile_n):
    stage, cfg = _stage(tile_n)
    pairs = []
    column_pairs(stage, cfg, CL, lambda row, col, first, second: pairs.append((row, col, first, second)) or "")
    assert len(pairs) == cfg.tile.tile_m * tile_n // 2
    regs = [p[2] for p in pairs] + [p[3] for p in pairs]
    assert len(set(regs)) == len(regs) == cfg.tile.tile_m * tile_n
    for row, col, first, second in pairs:
        _, offset = split_offset(col)
        assert offset is not None and offset % 2 == 0


def test_an_odd_tile_width_is_refused_naming_the_stage():
    alg = SimpleUnitAlgorithm(tile_n=3, stage_n=48)
    with pytest.raises(SetupError, match="even tile width") as info:
        alg.setup(dataclasses.replace(PROBLEM, epilogue=Epilogue(activation=resolve_activation("swiglu"))), CL)
    assert "stage" in info.value.component


def test_a_stage_that_breaks_pairs_is_refused():
    stage, cfg = _stage(4)

    class Shuffled(type(stage)):
        def write(self, cfg, d, writer):
            return "\n".join(writer(r, c, v) for r, c, v in [("0", "1", "a"), ("0", "0", "b")])
    with pytest.raises(SetupError, match=r"hands out \(0, 1\) and then \(0, 0\)"):
        column_pairs(Shuffled(stage.tile), cfg, CL, lambda *a: "")

    class Lonely(type(stage)):
        def write(self, cfg, d, writer):
            return writer("0", "0", "a")
    with pytest.raises(SetupError, match=r"partner of \(0, 0\) never follows"):
        column_pairs(Lonely(stage.tile), cfg, CL, lambda *a: "")


@pytest.mark.parametrize("expr, expected", [
    ("a + 2 + b", (("a", "b"), 2)),
    ("(a + 2) + 4", (("a",), 6)),
    ("7", ((), 7)),
    ("(x - y) + 1", (("(x - y)",), 1)),
    ("b + a", (("a", "b"), 0)),
])
def test_split_offset(expr, expected):
    assert split_offset(expr) == expected
