"""The README's "Adding an algorithm" example: a user subclass swapping one component, run on every
backend without editing the package."""
from __future__ import annotations

import re

import numpy as np

import gemm_engine
from gemm_engine.algorithms.double_buffering import DoubleBufferingUnitAlgorithm
from gemm_engine.global_.double_buffering import DoubleBufferingGlobalMatmul
from gemm_engine.global_.listeners import DoubleBufferingListener
from gemm_engine.stage.events import TileMatmulCompleted
from helpers import assert_close, random


class CountingListener(DoubleBufferingListener):
    def on_event(self, event):
        code = super().on_event(event)
        if isinstance(event, TileMatmulCompleted):
            code += f"\n/* tile {event.i + 1} of {event.n} done */"
        return code


class CountingGlobal(DoubleBufferingGlobalMatmul):
    listener_class = CountingListener


class CountingDoubleBuffering(DoubleBufferingUnitAlgorithm):
    name = "counting_double_buffering"
    global_ = CountingGlobal


def test_user_algorithm_runs_and_injects_its_code(engine, rng):
    a, b = random(rng, (70, 45), "float32"), random(rng, (45, 33), "float32")
    assert_close(engine.matmul(a, b, algorithm=CountingDoubleBuffering), a, b, "float32")
    alg, cfg = engine.last_choice
    assert isinstance(alg, CountingDoubleBuffering)
    source = alg.render(cfg, engine.dialect)
    n = cfg.batch.global_.stage.stage_k
    marks = [int(i) for i in re.findall(rf"/\* tile (\d+) of {n} done \*/", source)]
    assert marks == list(range(1, n + 1))


def test_user_algorithm_registers_by_name(engine, rng):
    gemm_engine.register(CountingDoubleBuffering)
    try:
        a, b = random(rng, (20, 30), "float32"), random(rng, (30, 10), "float32")
        assert_close(engine.matmul(a, b, algorithm="counting_double_buffering"), a, b, "float32")
    finally:
        gemm_engine.algorithms.REGISTRY.pop("counting_double_buffering")


def test_user_algorithm_does_not_share_cache_with_builtin(engine):
    """Same tiling, different class: distinct configs, so distinct compiled kernels."""
    from gemm_engine.problem import MatmulProblem
    from gemm_engine.dtypes import FLOAT32
    p = MatmulProblem(1, 64, 64, 64, FLOAT32, FLOAT32, FLOAT32)
    ours = CountingDoubleBuffering().setup(p, engine.dialect)
    theirs = DoubleBufferingUnitAlgorithm().setup(p, engine.dialect)
    assert ours != theirs and ours.batch == theirs.batch
    assert np.isscalar(hash(ours))
