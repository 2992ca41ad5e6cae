"""`Engine`: numpy-style matmul on one backend and device, and the module-level `matmul`.

A call goes: check shapes, dtypes and ``out`` (frontend, numpy's rules and messages) -> move or
view the operands on the device without copies where their strides allow -> choose an algorithm and
configure it for the problem (setup; SetupError says why a choice cannot work) -> render and compile
(cached per config) -> launch -> return the result as the caller's array type.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from . import algorithms as _algorithms  # noqa: F401  (registers the built-in algorithms)
from .algorithms.base import Algorithm, KernelConfig, resolve
from .batch.base import KERNEL_NAME
from .dtypes import BFLOAT16, element_type
from .errors import SetupError
from .frontend import (CallShape, OperandView, call_shape, check_out, operand_view, result_dtype,
                       vector_alignment)
from .problem import MatmulProblem

#: Cached per-call plans kept per engine before the cache is emptied and refilled.
_FAST_PLANS_MAX = 4096

#: Environment variable that sets the backend `Engine(backend="auto")` and `matmul` use.
BACKEND_ENV = "GEMM_ENGINE_BACKEND"


def _make_runtime(backend: str, device):
    if backend == "auto":
        backend = os.environ.get(BACKEND_ENV, "auto")
    if backend == "auto":
        from .codegen.cuda_runtime import cuda_available
        backend = "cuda" if cuda_available() else "opencl"
    if backend == "cuda":
        from .codegen.cuda_runtime import CudaRuntime
        return CudaRuntime(device)
    if backend == "opencl":
        from .codegen.opencl_runtime import OpenCLRuntime
        return OpenCLRuntime(device)
    raise ValueError(f"backend: expected 'auto', 'cuda' or 'opencl', got {backend!r}")


@dataclass
class _Operand:
    array: object            # device array read by the kernel
    view: OperandView
    align: int = 1           # widest aligned vector access, in elements
    copied: bool = False     # the kernel reads a copy (converted, contiguous or moved), not the input


@dataclass(frozen=True)
class _FastPlan:
    """Everything a repeated call with the same operand metadata needs: no checks, no setup."""

    alg: Algorithm
    cfg: KernelConfig
    kernel: object
    out_shape: tuple
    dtype: np.dtype
    lhs: OperandView
    rhs: OperandView
    cubes: int
    sizes: tuple             # (out_ld, out_batch_stride, M, N, K)
    shared_bytes: int

    def __post_init__(self):
        # Integer kernel arguments converted once, not on every call.
        i64 = np.int64
        object.__setattr__(self, "lhs_args", (i64(self.lhs.ld), i64(self.lhs.batch_stride)))
        object.__setattr__(self, "rhs_args", (i64(self.rhs.ld), i64(self.rhs.batch_stride)))
        object.__setattr__(self, "size_args", tuple(i64(v) for v in self.sizes))


class Engine:
    """A matmul engine bound to one backend ("auto", "cuda", "opencl") and device."""

    #: The family that picks the fastest composition that sets up (see algorithms/auto.py).
    default_algorithm = "auto"

    def __init__(self, backend: str = "auto", device=None, precision: str = "default"):
        if precision not in MatmulProblem.PRECISIONS:
            raise ValueError(f"precision: expected one of {MatmulProblem.PRECISIONS}, got {precision!r}")
        self.precision = precision
        self.runtime = _make_runtime(backend, device)
        self._plans: dict = {}
        self._fast: dict = {}        # call metadata -> _FastPlan (device arrays only)
        self._resolved: dict = {}    # algorithm name or class -> instance
        self.last_choice: tuple[Algorithm, KernelConfig] | None = None

    @property
    def backend(self) -> str:
        return self.runtime.backend

    @property
    def device(self):
        return self.runtime.device

    @property
    def dialect(self):
        return self.runtime.dialect

    # -- public API --------------------------------------------------------------------------
    def matmul(self, a, b, *, out=None, algorithm=None, precision=None):
        """numpy.matmul(a, b, out=out) computed by a generated kernel on this engine's device.

        ``algorithm``: a registered name, an Algorithm subclass or instance (default "auto").
        ``precision``: "tf32" lets float32 run on tensor cores; default: the engine's setting.
        """
        rt = self.runtime
        precision = self.precision if precision is None else precision
        fast_key = None
        if rt.is_native(a) and rt.is_native(b):
            # Repeated calls on device arrays with the same metadata skip every check and setup:
            # everything the checks depend on is in the key (shapes, strides, dtypes, alignment).
            fast_key = (algorithm, precision, a.shape, a.strides, a.dtype, rt.element_address(a) % 8,
                        b.shape, b.strides, b.dtype, rt.element_address(b) % 8,
                        None if out is None else (type(out), out.shape, out.strides, out.dtype))
            try:
                plan = self._fast.get(fast_key)
            except TypeError:  # an unhashable algorithm argument: the general path reports it
                plan, fast_key = None, None
            if plan is not None:
                result = self._run_fast(plan, a, b, out)
                if result is not None:
                    return result
        if precision not in MatmulProblem.PRECISIONS:
            raise ValueError(f"precision: expected one of {MatmulProblem.PRECISIONS}, got {precision!r}")
        a, a_host = self._as_array(a, "a")
        b, b_host = self._as_array(b, "b")
        host = a_host and b_host
        shape = call_shape(a.shape, b.shape)
        dtype = result_dtype(a.dtype, b.dtype)
        if out is not None:
            if host and not isinstance(out, np.ndarray):
                raise TypeError(f"matmul: out must be a numpy.ndarray for numpy inputs, got {type(out).__name__}")
            if host and not out.flags.writeable:   # else found only after the launch, or never (K = 0)
                raise ValueError("matmul: out is read-only")
            if not host and not rt.is_native(out):
                raise TypeError(f"matmul: out must be a device array of the {rt.backend} backend, "
                                f"got {type(out).__name__}")
            check_out(out.shape, out.dtype, dtype, shape.out_shape)
        alg = self._resolve(algorithm)

        if shape.batch == 0 or shape.m == 0 or shape.n == 0 or shape.k == 0:
            return self._empty_result(shape, dtype, out, host)

        problem_dtype = element_type(dtype)
        lhs = self._operand(a, a_host, dtype, shape, shape.lhs_vector, lhs=True)
        rhs = self._operand(b, b_host, dtype, shape, shape.rhs_vector, lhs=False)
        problem = MatmulProblem(shape.batch, shape.m, shape.n, shape.k, problem_dtype, problem_dtype,
                                problem_dtype, lhs.view.layout, rhs.view.layout, lhs.align, rhs.align,
                                precision)
        alg, cfg, kernel = self._plan(alg, problem)

        # Write straight into `out` when it is a C-contiguous device array of the result dtype that
        # does not overlap an input; else into a fresh buffer copied into `out` afterwards.
        direct = (out is not None and not host and out.dtype == dtype and out.flags.c_contiguous
                  and not any(rt.may_overlap(out, op.array) for op in (lhs, rhs)))
        target = out if direct else rt.empty(shape.out_shape, self._storage_dtype(dtype, host))
        plan = self._launch(alg, cfg, kernel, problem, lhs, rhs, target, shape.out_shape, dtype)
        self.last_choice = (alg, cfg)
        if fast_key is not None and not (lhs.copied or rhs.copied) and (out is None or direct):
            if len(self._fast) >= _FAST_PLANS_MAX:  # bounded: a process with ever new shapes
                self._fast.clear()                  # must not grow without limit
            self._fast[fast_key] = plan
        return self._finish(target, out, direct, host, dtype)

    def _run_fast(self, plan: _FastPlan, a, b, out):
        """Launch a cached plan; None when ``out`` overlaps an input (the general path copes)."""
        rt = self.runtime
        if out is not None and (rt.may_overlap(out, a) or rt.may_overlap(out, b)):
            return None
        target = out if out is not None else rt.empty(plan.out_shape, plan.dtype)
        (pa, oa), (pb, ob), (pt, ot) = rt.ptr_arg(a), rt.ptr_arg(b), rt.ptr_arg(target)
        args = (pa, np.int64(oa), *plan.lhs_args, pb, np.int64(ob), *plan.rhs_args,
                pt, np.int64(ot), *plan.size_args)
        rt.launch_converted(plan.kernel, plan.cubes, plan.cfg.units, args, plan.shared_bytes)
        self.last_choice = (plan.alg, plan.cfg)
        return target

    def _resolve(self, algorithm) -> Algorithm:
        """An Algorithm instance; names and classes resolve once per engine (instances are used as given)."""
        key = self.default_algorithm if algorithm is None else algorithm
        if isinstance(key, Algorithm):
            return key
        try:
            found = self._resolved.get(key)
        except TypeError:
            found = None
        if found is None:
            found = resolve(key)
            self._resolved[key] = found
        return found

    def plan(self, problem: MatmulProblem, algorithm=None) -> tuple[Algorithm, KernelConfig, str]:
        """(algorithm, config, source) the engine would use for ``problem``; nothing is launched."""
        alg, cfg = self._configure(resolve(algorithm or self.default_algorithm), problem)
        return alg, cfg, alg.render(cfg, self.dialect)

    # -- steps -------------------------------------------------------------------------------
    def _as_array(self, x, label):
        if self.runtime.is_native(x):
            return x, False
        if type(x).__module__.split(".")[0] in ("cupy", "pyopencl"):
            raise TypeError(f"matmul: {label} is a {type(x).__module__} array but this engine runs on "
                            f"the {self.backend} backend")
        return np.asarray(x), True

    @staticmethod
    def _storage_dtype(dtype, host):
        # Device libraries may lack bfloat16: move its bits as uint16, the kernel knows the type.
        return np.dtype(np.uint16) if element_type(dtype) is BFLOAT16 and host else dtype

    def _operand(self, x, is_host, dtype, shape: CallShape, vector: bool, lhs: bool) -> _Operand:
        rt = self.runtime
        if is_host:
            x = np.asarray(x, dtype=dtype)
            if element_type(dtype) is BFLOAT16:
                x = x.view(np.uint16)
            x = rt.to_device(x)
        copied = is_host
        if not is_host and x.dtype != dtype:
            x, copied = rt.contiguous(x, dtype), True
        if vector:
            x = x.reshape((1,) + x.shape) if lhs else x.reshape(x.shape + (1,))
        view = operand_view(x.shape, x.strides, x.dtype.itemsize, shape.batch_shape)
        if view is None:
            # Strides that fit no layout (or a broadcast that no single batch stride describes):
            # one contiguous copy, materializing the broadcast batch.
            full = shape.batch_shape + x.shape[-2:]
            if x.shape != full:
                host_copy = rt.to_host(x)
                x = rt.to_device(np.ascontiguousarray(np.broadcast_to(host_copy, full)))
            else:
                x = rt.contiguous(x)
            copied = True
            view = operand_view(x.shape, x.strides, x.dtype.itemsize, shape.batch_shape)
        align = vector_alignment(rt.element_address(x), view, x.dtype.itemsize)
        return _Operand(x, view, align, copied)

    def _configure(self, alg: Algorithm, problem: MatmulProblem):
        return alg, alg.setup(problem, self.dialect)

    def _plan(self, alg: Algorithm, problem: MatmulProblem):
        key = (type(alg), alg.selection, problem)
        hit = self._plans.get(key)
        if hit is None:
            alg, cfg = self._configure(alg, problem)
            alg = alg.chosen(cfg)
            kernel = self.runtime.kernel(alg.render(cfg, self.dialect), KERNEL_NAME)
            hit = self._plans[key] = (alg, cfg, kernel)
        return hit

    def _launch(self, alg, cfg, kernel, problem, lhs: _Operand, rhs: _Operand, target, out_shape,
                dtype) -> _FastPlan:
        rt = self.runtime
        args = []
        for op in (lhs, rhs):
            ptr, offset = rt.ptr_arg(op.array)
            args += [ptr, offset, op.view.ld, op.view.batch_stride]
        ptr, offset = rt.ptr_arg(target)
        sizes = (problem.n, problem.m * problem.n, problem.m, problem.n, problem.k)
        # Global matmuls whose shared memory is sized at launch (e.g. the pipelined ring) say how much.
        shared = getattr(cfg.batch.global_, "dynamic_shared_bytes", 0)
        cubes = alg.cube_count(cfg, problem)
        rt.launch(kernel, cubes, cfg.units, args + [ptr, offset, *sizes], shared_bytes=shared)
        return _FastPlan(alg, cfg, kernel, out_shape, dtype, lhs.view, rhs.view, cubes, sizes, shared)

    def _empty_result(self, shape, dtype, out, host):
        rt = self.runtime
        if out is not None:
            target = out
        elif host:
            target = np.empty(shape.out_shape, dtype)
        else:
            target = rt.empty(shape.out_shape, dtype)
        if shape.k == 0 and target.size:
            if host:
                target[...] = 0
            else:
                rt.fill_zero(target)
        return target

    def _finish(self, target, out, direct, host, dtype):
        rt = self.runtime
        if host:
            result = rt.to_host(target)
            if result.dtype != dtype:
                result = result.view(dtype)
            if out is None:
                # numpy returns a scalar, not a 0-d array, for vector @ vector.
                return result[()] if result.ndim == 0 else result
            out[...] = result
            return out
        if direct or out is None:
            return target if out is None else out
        rt.copy_into(out, target)
        return out


_default_engine: Engine | None = None


def default_engine() -> Engine:
    """The engine `matmul` uses: backend "auto" (or $GEMM_ENGINE_BACKEND), created on first use."""
    global _default_engine
    if _default_engine is None:
        _default_engine = Engine()
    return _default_engine


def matmul(a, b, *, out=None, algorithm=None, precision=None):
    """numpy.matmul semantics on the default engine. See `Engine.matmul`."""
    return default_engine().matmul(a, b, out=out, algorithm=algorithm, precision=precision)
