"""Shared test helpers: random operands, float64 references, relative error, tolerances."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.batch.base import OperandRef
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import bfloat16_dtype
from gemm_engine.problem import Layout

BF16 = bfloat16_dtype()

#: Relative Frobenius-norm error allowed per dtype (the output is rounded to its dtype, so the
#: bound is a few units of that dtype's rounding, not of the float32 accumulation).
TOLERANCE = {"float64": 1e-12, "float32": 2e-5, "float16": 2e-3, "bfloat16": 1.5e-2}

DTYPES = ["float32", "float64", "float16"] + (["bfloat16"] if BF16 is not None else [])


def np_dtype(name: str) -> np.dtype:
    return BF16 if name == "bfloat16" else np.dtype(name)


def random(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Fresh standard-normal data (never zeros or ones alone), rounded to ``dtype``."""
    return rng.standard_normal(shape).astype(np_dtype(dtype) if isinstance(dtype, str) else dtype)


def reference(a, b) -> np.ndarray:
    return np.matmul(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def rel_error(result, ref) -> float:
    result = np.asarray(result, dtype=np.float64)
    assert result.shape == ref.shape, (result.shape, ref.shape)
    assert np.all(np.isfinite(result)), "non-finite values (unwritten poisoned elements?)"
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(result - ref) / (denom if denom else 1.0))


def assert_close(result, a, b, dtype: str):
    err = rel_error(result, reference(a, b))
    assert err <= TOLERANCE[dtype], f"relative error {err:.3e} > {TOLERANCE[dtype]:.1e} for {dtype}"


def lane_env(tile, unit) -> dict:
    """{"UNIT_ID": unit, and each of the tile's lane names (``tile.lanes``)} for evaluating the
    tile's rendered index expressions in Python (they use only parentheses, +, *, /, %, &, >>, <<;
    ``unit`` may be an int or a numpy array of units)."""
    import re
    env = {"UNIT_ID": unit}
    for name, expr in tile.lanes:
        env[name] = eval(re.sub(r"(?<![/*])/(?![/*])", "//", expr), {}, dict(env))
    return env


def cuda_engine_or_skip(min_cc: tuple = (8, 0), needs: str = "sm_80"):
    """(engine, cupy) of a CUDA engine whose device is at least ``min_cc``; pytest.skip saying why
    not otherwise (no CuPy, no GPU, an older device). For the CUDA numerics tests' fixtures."""
    import pytest
    cp = pytest.importorskip("cupy", reason="the CUDA numerics test needs CuPy")
    from gemm_engine import Engine
    from gemm_engine.runtime.cuda import cuda_available
    if not cuda_available():
        pytest.skip("CuPy sees no CUDA GPU")
    engine = Engine("cuda")
    if (engine.device.compute_capability or (0, 0)) < min_cc:
        pytest.skip(f"{engine.device.name} is below {needs}")
    return engine, cp


def device_col_major(cp, host):
    """``host`` on the device as a transposed view of a column-major copy (its last two axes)."""
    return cp.asarray(np.ascontiguousarray(np.swapaxes(host, -1, -2))).swapaxes(-1, -2)


def heuristic_unit(engine) -> str:
    """The register-FMA algorithm ``auto`` takes for a plain float32 product on ``engine``'s device:
    the CPU path on a CPU OpenCL device (selector/cpu.py), simple_unit elsewhere."""
    dev = engine.device
    return "direct_vector" if dev.backend == "opencl" and dev.vendor == "cpu" else "simple_unit"


#: AMD / Intel matrix-core algorithms: no such device runs the tests (built offline:
#: tests/algorithms/test_matrix_cores.py).
MATRIX_CORES = frozenset({"simple_mfma", "double_buffering_mfma", "simple_wmma_gfx11", "simple_dpas",
                          "double_buffering_dpas"})
#: Algorithms that render OpenCL C only (no CUDA source to compile): the CPU path and the AMD / Intel tiles.
OPENCL_ONLY = MATRIX_CORES | {"direct_vector"}


def cl_run(opencl_engine, source: str, kernel: str, args, size: int, local=None, out: int = -1, options=()):
    """Build ``source`` (OpenCL C) in the engine's context and run ``kernel`` over ``size``
    work-items (work-groups of ``local``) with ``args``: numpy arrays go as buffers holding a copy,
    anything else (numpy scalars) as is. Returns the host copy of array argument ``args[out]``
    after the run. For tests of rendered helpers and small kernels on PoCL. ``options``: build
    options beside -cl-std=CL1.2 (-cl-denorms-are-zero: a flush-to-zero compile, as CUDA's)."""
    import pyopencl as cl
    rt = opencl_engine.runtime
    program = cl.Program(rt.context, source).build(options=["-cl-std=CL1.2", *options])
    rw = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    bound = [cl.Buffer(rt.context, rw, hostbuf=np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a
             for a in args]
    getattr(program, kernel)(rt.queue, (size,), None if local is None else (local,), *bound)
    result = np.empty_like(np.ascontiguousarray(args[out]))
    cl.enqueue_copy(rt.queue, result, bound[out])
    rt.queue.finish()
    return result


def call_request(engine, a, b, *, out=None, c=None, bias=None, scale_a=None, scale_b=None, mul=None, alpha=1.0,
                 beta=None, bias_axis=-1, activation=None, out_dtype=None, casting="same_kind", precision="default"):
    """(arrays, request) of a call as the engine's general path makes them (call/arrays.py,
    numpy_rules.py, request.py), for tests of the steps after them (prepare, deliver)."""
    from gemm_engine.call import numpy_rules
    from gemm_engine.call.arrays import import_call
    from gemm_engine.call.request import CallOptions, make_request
    from gemm_engine.epilogue.activations import resolve_activation
    rt = engine.runtime
    plain = (c is None and bias is None and activation is None and out_dtype is None and scale_a is None
             and scale_b is None and beta is None and alpha == 1 and mul is None)
    arrays = import_call(rt, a, b, out=out, c=c, bias=bias, scale_a=scale_a, scale_b=scale_b, mul=mul)
    rules = numpy_rules.apply(arrays, out_dtype, casting, beta, plain, activation=resolve_activation(activation))
    options = CallOptions(alpha, beta, bias_axis, activation, out_dtype, casting, precision)
    return arrays, make_request(arrays, rules, options, plain)


def acc_coverage(tile, cfg, units: int, **acc_kwargs) -> dict:
    """{(row, col): [(unit, register expression), ...]} of every accumulator element that units
    ``0..units-1`` hold by ``tile.acc_elements(cfg, "acc")`` (index expressions evaluated in
    Python through `lane_env`): a tile's layout covers its tile_m x tile_n tile exactly once."""
    import re
    held: dict = {}
    for unit in range(units):
        env = lane_env(tile, unit)
        for row, col, value in tile.acc_elements(cfg, "acc", **acc_kwargs):
            at = tuple(eval(re.sub(r"(?<![/*])/(?![/*])", "//", e), {}, dict(env)) for e in (row, col))
            held.setdefault(at, []).append((unit, value))
    return held


def run_loader(opencl_engine, loader, cfg, src: np.ndarray, corners):
    """Run a task loader alone on PoCL, once per (row0, col0) of ``corners`` (one kernel build):
    every one of ``cfg.units`` units runs ``loader.tasks`` into local memory for the stage tile at
    (row0, col0) of the 2-D host operand ``src`` (laid out as ``cfg.operand.layout`` says), then
    the stage is copied out. Yields (stage as the loader left it, the stage it should hold:
    elements of the tile at ``cfg.operand.smem_index``, zeros outside ``src``, NaN where the loader
    need not write)."""
    op = cfg.operand
    d = dialect_for(opencl_engine.device)
    rows, cols = src.shape
    stored = np.ascontiguousarray(src if op.layout is Layout.ROW else src.T)
    elems = op.k_extent * op.smem_ld
    smem_t, src_t = d.c_type(op.smem_type_word), d.c_type(op.element.storage)
    tasks = "\n".join(loader.tasks(cfg, d, OperandRef("src", str(stored.shape[1])), "smem", "row0", "col0",
                                   str(rows), str(cols)))
    # ALIGN16 as the engine's stages declare it: NVIDIA's OpenCL driver may place a __local array
    # 4 bytes in (its kernels report 4 bytes more local memory than declared), and the vector
    # loader's 16-byte stores there fault (OUT_OF_RESOURCES, the H100 run of 2026-11-26).
    source = d.preamble([op.element]) + f"""
__kernel void load(__global const {src_t}* src, __global {smem_t}* out, const long row0, const long col0) {{
    __local {smem_t} smem[{elems}] ALIGN16;
    for (int i = UNIT_ID; i < {elems}; i += {cfg.units}) smem[i] = out[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    {tasks}
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = UNIT_ID; i < {elems}; i += {cfg.units}) out[i] = smem[i];
}}
"""
    import pyopencl as cl
    rt = opencl_engine.runtime
    kernel = cl.Kernel(cl.Program(rt.context, source).build(options=["-cl-std=CL1.2"]), "load")
    smem_dtype = {"f32": np.float32, "f64": np.float64, "i32": np.int32}[op.smem_type_word] if op.converts \
        else stored.dtype
    rw = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    src_buf = cl.Buffer(rt.context, rw, hostbuf=stored)
    for row0, col0 in corners:
        got = np.full(elems, -12345, smem_dtype)
        out_buf = cl.Buffer(rt.context, rw, hostbuf=got)
        kernel(rt.queue, (cfg.units,), (cfg.units,), src_buf, out_buf, np.int64(row0), np.int64(col0))
        cl.enqueue_copy(rt.queue, got, out_buf)
        rt.queue.finish()
        want = np.full(elems, np.nan)
        for r in range(op.rows):
            for c in range(op.cols):
                gr, gc = row0 + r, col0 + c
                at = eval(op.smem_index(str(r), str(c)))
                want[at] = float(src[gr, gc]) if gr < rows and gc < cols else 0.0
        yield got, want
