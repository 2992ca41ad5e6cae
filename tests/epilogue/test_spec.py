"""epilogue/spec.py: an Epilogue rendered alone into a kernel on PoCL -- `params`, `pointers`,
`helpers` and `apply` for each element of an M x N output from given accumulators -- against the
formula in float64 (terms by strides, broadcast c, bias over rows or columns, scales, mul, row
scale); its checks; paired epilogues' shape rules; the parameters each term adds."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.codegen.signature import KernelSignature, array
from gemm_engine.dtypes import FLOAT32, FLOAT64
from gemm_engine.epilogue.activations import Derivative, resolve_activation
from gemm_engine.epilogue.spec import IDENTITY, Epilogue
from helpers import cl_run

M, N = 5, 7


def _run(engine, ep: Epilogue, acc: np.ndarray, values: dict) -> np.ndarray:
    d = dialect_for(engine.device)
    sig = KernelSignature((array("acc", "f64"), array("out", "f64", writable=True), *ep.params()))
    body = "\n    ".join(ep.pointers(d, batch="0"))
    source = d.preamble([FLOAT64, FLOAT32]) + ep.helpers(d) + f"""
__kernel void epi({sig.render(d)}) {{
    {body}
    const int i = get_global_id(0);
    const i64 row = i / {N}, col = i % {N};
    out[i] = {ep.apply(d, "acc[i]", "row", "col")};
}}
"""
    packed = sig.pack({"acc": acc.ravel(), "out": np.zeros(M * N), **values})
    return cl_run(engine, source, "epi", list(packed), M * N, out=1).reshape(M, N)


def test_every_term_against_float64(opencl_engine, rng):
    acc = rng.standard_normal((M, N))
    c = rng.standard_normal(N)                       # broadcast over rows: row stride 0
    bias = rng.standard_normal(M)                    # over rows
    sa, sb = rng.random(M) + 0.5, rng.random(N) + 0.5
    mul = rng.standard_normal((N, M)).T              # a transposed view: strides (1, M)
    rs = rng.random(M)
    ep = Epilogue(scaled=True, c=FLOAT64, bias=FLOAT64, bias_axis=0, activation=resolve_activation("gelu"),
                  compute="f64", lhs_scale="vector", rhs_scale="vector", mul=FLOAT64, row_scale=True)
    values = {"alpha": -0.75, "beta": 2.0, "c_base": c, "c_offset": 0, "c_row_stride": 0, "c_col_stride": 1,
              "c_batch_stride": 0, "bias_base": bias, "bias_offset": 0, "bias_stride": 1,
              "lhs_scale_base": sa.astype(np.float32), "lhs_scale_offset": 0, "lhs_scale_stride": 1,
              "rhs_scale_base": sb.astype(np.float32), "rhs_scale_offset": 0, "rhs_scale_stride": 1,
              "row_scale_base": rs.astype(np.float32), "row_scale_offset": 0, "row_scale_stride": 1,
              "mul_base": np.ascontiguousarray(mul.T), "mul_offset": 0, "mul_row_stride": 1, "mul_col_stride": M,
              "mul_batch_stride": 0}
    got = _run(opencl_engine, ep, acc, values)
    sa32, sb32, rs32 = (x.astype(np.float32).astype(np.float64) for x in (sa, sb, rs))
    x = -0.75 * sa32[:, None] * sb32[None, :] * acc + 2.0 * c[None, :] + bias[:, None]
    want = resolve_activation("gelu").reference(x) * mul * rs32[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_offsets_and_bias_over_columns(opencl_engine, rng):
    acc = rng.standard_normal((M, N))
    bias = rng.standard_normal(N + 3)
    ep = Epilogue(bias=FLOAT64, compute="f64")
    got = _run(opencl_engine, ep, acc, {"bias_base": bias, "bias_offset": 3, "bias_stride": 1})
    np.testing.assert_allclose(got, acc + bias[3:][None, :], rtol=1e-15)


def test_identity_and_checks():
    assert IDENTITY.identity and IDENTITY.apply(None, "v", "r", "c") == "v" and IDENTITY.params() == ()
    assert not Epilogue(scaled=True).identity and Epilogue(lhs_scale="block").block_scales
    with pytest.raises(ValueError, match="bias_axis must be 0"):
        Epilogue(bias_axis=2)
    swiglu = resolve_activation("swiglu")
    with pytest.raises(ValueError, match="c .* is not supported with it"):
        Epilogue(activation=swiglu, c=FLOAT32)
    # a gated grouped epilogue (an MoE up projection): the routing weight's row scale moves per group
    gated = Epilogue(activation=swiglu, row_scale=True, grouped=True, bias=FLOAT32)
    assert gated.paired and gated.grouped_terms == ("bias", "row_scale")
    assert {"row_scale_base", "row_scale_group_stride"} <= {p.name for p in gated.params()}


def test_paired_epilogues_halve_or_keep_the_columns():
    gated = Epilogue(activation=resolve_activation("swiglu"))
    assert gated.paired and gated.pair_outputs == 1 and gated.out_columns(64) == 32
    back = Epilogue(activation=Derivative("swiglu"))
    assert back.pair_outputs == 2 and back.out_columns(64) == 64
    with pytest.raises(ValueError, match="column pair at a time"):
        gated.apply(None, "v", "r", "c")


def test_params_per_term():
    names = [p.name for p in Epilogue(scaled=True, c=FLOAT32, bias=FLOAT32, lhs_scale="vector", grouped=True,
                                      row_scale=True).params()]
    assert names == ["alpha", "c_base", "c_offset", "c_row_stride", "c_col_stride", "c_batch_stride", "beta",
                     "bias_base", "bias_offset", "bias_stride", "lhs_scale_base", "lhs_scale_offset",
                     "lhs_scale_stride", "row_scale_base", "row_scale_offset", "row_scale_stride",
                     "bias_group_stride", "lhs_scale_group_stride", "row_scale_group_stride"]
