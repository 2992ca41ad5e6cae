"""The arguments step's output target: ``out`` that aliases an input gets numpy's answer (as if the
inputs were copied first), on every backend and array kind; ``out`` that is ``c`` itself accumulates
in place; the CallArguments naming rule matches the signature's parameter names."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.call.arguments import (ArrayArgument, CallArguments, EpilogueInputs, epilogue_values,
                                        per_call_values)
from helpers import assert_close, random, reference, rel_error


def _kinds(engine):
    """(name, to_array, to_host) for every array kind the engine takes in place."""
    rt = engine.runtime
    kinds = [("device", rt.to_device, rt.to_host)]
    try:
        import torch
        if engine.backend == "cuda":
            kinds.append(("torch", lambda x: torch.as_tensor(x, device="cuda"), lambda t: t.cpu().numpy()))
    except ImportError:
        pass
    return kinds


def _aliased_call(engine, rng, case, to_array):
    """One call of ``case`` on fresh inputs: (result as returned, float64 answer)."""
    a, b = random(rng, (48, 48), "float32"), random(rng, (48, 48), "float32")
    c = random(rng, (48, 48), "float32")
    da, db, dc = to_array(a), to_array(b), to_array(c)
    if case == "out=a":
        return engine.matmul(da, db, out=da), reference(a, b)
    if case == "out=b":
        return engine.matmul(da, db, out=db), reference(a, b)
    if case == "c=a,out=a":
        return engine.matmul(da, db, c=da, out=da), reference(a, b) + a
    if case == "out=c":
        return engine.matmul(da, db, c=dc, out=dc), reference(a, b) + c
    # out is a's storage shifted by one row: every tile reads rows another one writes.
    big = random(rng, (49, 48), "float32")
    dbig = to_array(big)
    return engine.matmul(dbig[:48], db, out=dbig[1:]), reference(big[:48], b)


@pytest.mark.parametrize("case", ["out=a", "out=b", "c=a,out=a", "out=c", "out overlaps a"])
def test_out_aliasing_an_input_gives_numpys_answer(engine, rng, case):
    for kind, to_array, to_host in _kinds(engine):
        for call in ("first", "repeated"):      # the repeated one may take the fast path
            got, want = _aliased_call(engine, rng, case, to_array)
            err = rel_error(to_host(got), want)
            assert err < 2e-5, f"{kind} {case} ({call} call): relative error {err:.2e}"


def test_repeated_calls_with_out_aliasing_an_input_stay_right(engine, rng):
    rt = engine.runtime
    a, b = random(rng, (40, 40), "float32"), random(rng, (40, 40), "float32")
    for _ in range(3):
        da, db = rt.to_device(a), rt.to_device(b)
        engine.matmul(da, db, out=da)
        assert_close(rt.to_host(da), a, b, "float32")


def test_numpy_out_aliasing_an_input(opencl_engine, rng):
    a, b = random(rng, (30, 30), "float32"), random(rng, (30, 30), "float32")
    want = reference(a, b)
    got = opencl_engine.matmul(a, b, out=a)
    assert got is a and rel_error(a, want) < 2e-5


def test_values_follow_the_signatures_names():
    args = CallArguments(ArrayArgument("A", (("ld", 7), ("batch_stride", 0))),
                         ArrayArgument("B", (("ld", 6), ("batch_stride", 42))),
                         ArrayArgument("O", (("ld", 6), ("batch_stride", 30))), 5, 6, 7, 1, alpha=2.0, beta=0.5,
                         bias=ArrayArgument("BIAS", (("stride", 1),)), fused=True)
    values = args.values(lambda x: (x + "*", 3))
    assert values == {"M": 5, "N": 6, "K": 7, "batch": 1, "alpha": 2.0, "beta": 0.5,
                      "lhs_base": "A*", "lhs_offset": 3, "lhs_ld": 7, "lhs_batch_stride": 0,
                      "rhs_base": "B*", "rhs_offset": 3, "rhs_ld": 6, "rhs_batch_stride": 42,
                      "out_base": "O*", "out_offset": 3, "out_ld": 6, "out_batch_stride": 30,
                      "bias_base": "BIAS*", "bias_offset": 3, "bias_stride": 1}
    # The per-call values of a repeated call are named by the same rule, number scales in alpha.
    inputs = EpilogueInputs(2.0, 0.5, None, "BIAS", 4.0, None)
    again = per_call_values("A", "B", "O", inputs, lambda x: (x + "*", 3))
    assert {k: values[k] for k in again if k != "alpha"} == {k: v for k, v in again.items() if k != "alpha"}
    assert again["alpha"] == 8.0 and set(again) <= args.per_call_names() | {"beta"}
    assert epilogue_values(inputs._replace(beta=None), lambda x: (x, 0))["beta"] == 1.0
