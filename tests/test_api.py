"""api.py: the module-level functions on the default engine -- made once, whatever the threads, and
registered as handle 0 -- passing every option through (checked against an explicit engine and
float64), with the same documentation text as Engine's."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import gemm_engine
from gemm_engine import api, handles
from helpers import reference, rel_error


@pytest.fixture
def fresh_default(monkeypatch):
    monkeypatch.setattr(api, "_default_engine", None)
    made = []

    class Counting(gemm_engine.Engine):
        def __init__(self):
            made.append(1)
            super().__init__("opencl")
    monkeypatch.setattr(api, "Engine", Counting)
    return made


def test_made_once_whatever_the_threads(fresh_default):
    got = []
    threads = [threading.Thread(target=lambda: got.append(api.default_engine())) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fresh_default) == 1 and len({id(e) for e in got}) == 1
    assert handles.engine_of(0) is got[0]


def test_functions_pass_their_options(opencl_engine, monkeypatch, rng):
    monkeypatch.setattr(api, "_default_engine", opencl_engine)
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))
    c, bias = rng.standard_normal((6, 4)), rng.standard_normal(4)
    got = gemm_engine.matmul(a, b, alpha=2.0, beta=-1.0, c=c, bias=bias, activation="relu", out_dtype="float32",
                             algorithm="simple_unit")
    assert got.dtype == np.float32
    assert rel_error(got, np.maximum(2.0 * reference(a, b) - c + bias, 0)) < 1e-6
    assert opencl_engine.last_choice[0].name == "simple_unit"
    xs = rng.standard_normal((9, 5)).astype(np.float32)
    ws = rng.standard_normal((2, 5, 3)).astype(np.float32)
    grouped = gemm_engine.grouped_matmul(xs, ws, counts=None, offsets=np.array([4, 9], np.int32))
    want = np.concatenate([reference(xs[:4], ws[0]), reference(xs[4:], ws[1])])
    assert rel_error(grouped, want) < 1e-5
    qw = gemm_engine.quantize(rng.standard_normal((64, 8)).astype(np.float32), "int8", group_size=None)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    assert rel_error(gemm_engine.quantized_matmul(x, qw), reference(x, qw.dequantize())) < 1e-5


def test_docs_are_engines_text():
    assert api.matmul.__doc__.split(",", 1)[0] == gemm_engine.Engine.matmul.__doc__.split(",", 1)[0]
    assert "default engine" in api.matmul.__doc__ and "default engine" in api.grouped_matmul.__doc__
