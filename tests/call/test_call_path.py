"""The call is one pass down: a traced call enters each step's module once, in the order of the steps.

The trace records every function entered in gemm_engine/call/ during a general-path call, except
property getters (reads of a step's data object) and comprehensions; engine.py is the spine that
calls each step in turn and is not counted. Consecutive entries in one module are one stay; a stay
in a module already left is a return, and there must be none.
"""
from __future__ import annotations

import inspect
import pathlib
import sys

import numpy as np
import pytest

import gemm_engine
from gemm_engine.call import (arguments, arrays, choose, deliver, doc, fast, launch, numpy_rules, plan, prepare,
                              request)

CALL = pathlib.Path(gemm_engine.__file__).parent / "call"
STEPS = [fast, arrays, numpy_rules, request, prepare, choose, plan, arguments, launch, deliver]


def _property_codes() -> set:
    codes = set()
    for module in STEPS + [doc]:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            for value in vars(cls).values():
                if isinstance(value, property) and value.fget is not None:
                    codes.add(value.fget.__code__)
    return codes


def trace_call(fn) -> list[str]:
    """The stays (module names under gemm_engine/call/) of one call of ``fn``."""
    skip, stays = _property_codes(), []

    def profile(frame, event, arg):
        code = frame.f_code
        if event != "call" or code in skip or code.co_name.startswith("<"):
            return
        path = pathlib.Path(code.co_filename)
        if path.parent == CALL:
            if not stays or stays[-1] != path.stem:
                stays.append(path.stem)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return stays


def returns(stays: list[str]) -> list[str]:
    seen, back = set(), []
    for module in stays:
        if module in seen:
            back.append(module)
        seen.add(module)
    return back


@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])
def test_a_call_runs_each_step_once_in_order(opencl_engine, rng, fused):
    a = rng.standard_normal((33, 17)).astype(np.float32)
    b = rng.standard_normal((17, 9)).astype(np.float32)
    options = dict(bias=rng.standard_normal(9).astype(np.float32), c=rng.standard_normal((33, 9)).astype(np.float32),
                   activation="relu", scale_a=0.5) if fused else {}
    engine = gemm_engine.Engine("opencl", use_tuning_cache=False)
    # A fresh engine: the call below chooses and plans, so both steps are in its trace.
    stays = trace_call(lambda: engine.matmul(a, b, **options))
    assert returns(stays) == [], f"the call returned to modules it had left: {stays}"
    assert stays == [m.__name__.rsplit(".", 1)[1] for m in STEPS], stays


def test_the_trace_sees_a_return(opencl_engine):
    # The check itself: a route that goes back to a module is reported.
    assert returns(["arrays", "request", "arrays"]) == ["arrays"]


@pytest.mark.parametrize("layout", ["contiguous", "masked", "list"])
def test_a_grouped_call_runs_each_step_once_in_order(opencl_engine, rng, layout):
    w = rng.standard_normal((3, 17, 9)).astype(np.float32)
    engine = gemm_engine.Engine("opencl", use_tuning_cache=False)
    if layout == "contiguous":
        x = rng.standard_normal((20, 17)).astype(np.float32)
        call = lambda: engine.grouped_matmul(x, w, offsets=np.array([5, 5, 20], np.int32),  # noqa: E731
                                             bias=rng.standard_normal((3, 9)).astype(np.float32),
                                             row_scale=np.ones(20, np.float32))
    elif layout == "masked":
        x = rng.standard_normal((3, 8, 17)).astype(np.float32)
        call = lambda: engine.grouped_matmul(x, w, counts=np.array([5, 0, 8], np.int32))  # noqa: E731
    else:
        call = lambda: engine.grouped_matmul([np.ones((4, 17), np.float32)] * 3, list(w))  # noqa: E731
    stays = trace_call(call)
    assert returns(stays) == [], f"the call returned to modules it had left: {stays}"
    # A grouped call without out looks for its call plan first (FastPath.grouped), plain or with an
    # epilogue, as matmul does; the list layout goes straight to the general path: each step once.
    steps = [m.__name__.rsplit(".", 1)[1] for m in STEPS if m is not fast or layout != "list"]
    assert stays == steps, stays


def test_a_quantized_call_runs_each_step_once_in_order(opencl_engine, rng):
    # A quantized weight takes the same steps: its arrays imported (one upload), its dtype from the
    # activations' (numpy_rules), a request field, the prepare step's problem and terms, CallArguments.
    q = gemm_engine.quantize(rng.standard_normal((17, 9)), "int4", None, symmetric=False)
    x = rng.standard_normal((33, 17)).astype(np.float32)
    engine = gemm_engine.Engine("opencl", use_tuning_cache=False)
    stays = trace_call(lambda: engine.quantized_matmul(x, q, bias=np.ones(9, np.float32)))
    assert returns(stays) == [], f"the call returned to modules it had left: {stays}"
    # The fast path looks and declines (no call plan for a quantized weight yet), then every step.
    assert stays == [m.__name__.rsplit(".", 1)[1] for m in STEPS], stays
