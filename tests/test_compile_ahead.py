"""warmup (gemm_engine/compile_ahead.py): problems of shapes, linear layers (forward and backward
products) and models; after it, the first call of each runs no compiler; refusals are reported."""
from __future__ import annotations

import numpy as np

import gemm_engine
from gemm_engine.compile_ahead import LLAMA3_8B, LinearShape, linear_problems, problems_of
from gemm_engine.epilogue.activations import Derivative
from gemm_engine.problem import Layout


def _spy(engine):
    compiled = []
    real = engine.runtime._compile
    engine.runtime._compile = lambda source, name: compiled.append(name) or real(source, name)
    return compiled, lambda: setattr(engine.runtime, "_compile", real)


def test_first_calls_after_warmup_compile_nothing(rng):
    engine = gemm_engine.Engine("opencl")
    report = gemm_engine.warmup([(33, 17, 9), (2, 40, 24, 8)], dtype="float32", engine=engine, workers=2)
    assert (report.problems, report.refused) == (2, []) and report.compiled == report.kernels >= 2
    assert "warmed up 2 problems" in str(report)
    compiled, restore = _spy(engine)
    try:
        engine.matmul(rng.standard_normal((33, 9), np.float32), rng.standard_normal((9, 17), np.float32))
        engine.matmul(rng.standard_normal((2, 40, 8), np.float32), rng.standard_normal((2, 8, 24), np.float32))
    finally:
        restore()
    assert compiled == []
    again = gemm_engine.warmup([(33, 17, 9)], dtype="float32", engine=engine)
    assert again.compiled == 0


def test_linear_layers_forward_and_backward():
    layers = [LinearShape(64, 96, bias=True, activation="gelu"), LinearShape(64, 128, activation="swiglu")]
    forward = linear_problems(layers, tokens=(1, 16), dtype="float32")
    assert len(forward) == 4 and all(p.rhs_layout is Layout.COL for p in forward)
    assert forward[0].epilogue.bias is not None and forward[2].epilogue.activation.name == "swiglu"
    training = linear_problems(layers, tokens=(16,), dtype="float32", training=True)
    assert len(training) == 8
    assert any(isinstance(p.epilogue.activation, Derivative) and p.epilogue.mul is not None for p in training)
    host = linear_problems(layers, tokens=(16,), dtype="float32", training=True, host=True)
    assert all(p.lhs_layout is p.rhs_layout is Layout.ROW for p in host)
    assert len(problems_of(list(LLAMA3_8B), dtype="bfloat16", tokens=(1, 128))) == 8
    # a gated layer in training: the batched product of its halves, then the backward's GEMMs (gx
    # in two, the second adding the first as its c; each half of gW)
    gated = linear_problems([LinearShape(64, 128, gated_products=True)], tokens=(16,), dtype="float32", training=True)
    assert [(p.batch, p.m, p.n, p.k, p.lhs_layout, p.rhs_layout, p.epilogue.c is not None) for p in gated] == [
        (2, 16, 64, 64, Layout.ROW, Layout.COL, False), (1, 16, 64, 64, Layout.ROW, Layout.ROW, False),
        (1, 16, 64, 64, Layout.ROW, Layout.ROW, True), (1, 64, 64, 16, Layout.COL, Layout.ROW, False)]


def test_refusals_are_reported_not_raised(monkeypatch):
    engine = gemm_engine.Engine("opencl")
    good, bad = problems_of([(4, 8, 16), (4, 8, 17)], dtype="float32")
    real = engine.choose

    def choose(problem, algorithm=None, trace=False):
        if problem == bad:
            raise gemm_engine.SetupError("test", "no kernel for K = 17 today")
        return real(problem, algorithm, trace)
    monkeypatch.setattr(engine, "choose", choose)
    report = gemm_engine.warmup([good, bad], engine=engine)
    assert report.problems == 2 and [p for p, _ in report.refused] == [bad]
    assert "refused 1x4x8x17 float32: test: no kernel for K = 17 today" in str(report)
