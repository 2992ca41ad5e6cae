"""Shared by the skinny kernel's tests (tests/algorithms/test_skinny.py, tests/global_/test_skinny.py):
the skinny kernel launched directly on raw device buffers in any layout, with padding that leaves
every vector unaligned, into a poisoned output."""
from __future__ import annotations

import numpy as np

from gemm_engine.algorithms.skinny import SkinnyAlgorithm
from gemm_engine.batch.base import KERNEL_NAME
from gemm_engine.dtypes import BY_NAME
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.views import OperandView, vector_alignment

#: NaN bit patterns to poison outputs with (so an unwritten element fails the finiteness check).
_NAN_BITS = {"float16": 0x7E00, "bfloat16": 0x7FC0}


def _raw(x: np.ndarray) -> np.ndarray:
    """Host array of the bits a kernel reads (16-bit types as uint16: device arrays may lack them)."""
    return x.view(np.uint16) if x.dtype.itemsize == 2 else x


def _device_operand(rt, x: np.ndarray, layout: str, pad: int):
    """``x`` (batch, rows, cols) in a flat device buffer in ``layout``, ``pad`` elements before the
    first and after each line (pad = 1 leaves every vector unaligned, and a 1-wide column-major
    vector strided). Returns (array, offset, leading dimension, batch stride)."""
    body = x if layout == "row" else x.transpose(0, 2, 1)
    batch, lines, length = body.shape
    ld = length + pad
    buf = np.zeros((batch, lines, ld), x.dtype)
    buf[:, :, :length] = body
    flat = np.concatenate([np.zeros(pad, x.dtype), buf.ravel()])
    return rt.to_device(_raw(flat)), pad, ld, lines * ld if batch > 1 else 0


def run_raw(engine, a, b, layouts, pad=0, selection=None):
    """``a @ b`` (3-D host operands, a batch of 1 broadcast) by the skinny kernel, launched directly
    on raw device buffers laid out as ``layouts`` with ``pad`` (see `_device_operand`), into an
    output poisoned with NaN. Returns the host result and the kernel config."""
    rt = engine.runtime
    dtype = a.dtype
    et = BY_NAME[dtype.name]
    batch, (m, k), n = max(a.shape[0], b.shape[0]), a.shape[1:], b.shape[2]
    ops = [_device_operand(rt, x, lay, pad) for x, lay in zip((a, b), layouts)]
    aligns = [vector_alignment(off, OperandView(Layout(lay), ld, bs), dtype.itemsize)
              for (_, off, ld, bs), lay in zip(ops, layouts)]
    problem = MatmulProblem(batch, m, n, k, et, et, et, Layout(layouts[0]), Layout(layouts[1]), *aligns)
    alg = SkinnyAlgorithm(selection)
    cfg = alg.setup(problem, engine.dialect)
    kernel = rt.kernel(alg.render(cfg, engine.dialect), KERNEL_NAME)
    poison = np.full((batch, m, n), np.nan, dtype)
    if et.name in _NAN_BITS:
        poison = np.full((batch, m, n), _NAN_BITS[et.name], np.uint16)
    out = rt.to_device(poison)
    args = []
    for array, off, ld, bs in ops:
        ptr, base = rt.ptr_arg(array)
        args += [ptr, base + off, ld, bs]
    ptr, base = rt.ptr_arg(out)
    # The batch level's kernel parameters, as `Engine` passes them.
    rt.launch(kernel, alg.cube_count(cfg, problem), cfg.units,
              args + [ptr, base, n, m * n, m, n, k, batch])
    return rt.to_host(out).view(dtype), cfg.batch.global_
