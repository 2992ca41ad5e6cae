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
from .algorithms.base import REGISTRY, Algorithm, KernelConfig, resolve
from .dtypes import BFLOAT16, element_type, numpy_dtype, operand_dtype
from .errors import SetupError
from .frontend import (CallShape, OperandView, call_shape, check_out, operand_view, result_dtype,
                       vector_alignment)
from .fusion import NO_FUSION, CView, FusionRequest, c_view, check_fusion, fused_dtype, make_epilogue
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
    kernels: tuple           # ((compiled kernel, cubes, units, shared bytes), ...) in launch order
    workspace: tuple | None  # (numpy dtype, elements) of the scratch buffer the kernels share
    out_shape: tuple
    dtype: np.dtype
    lhs: OperandView
    rhs: OperandView
    sizes: tuple             # (out_ld, out_batch_stride, M, N, K, batch)
    fused: "_Fused | None" = None
    #: ``direct(a, b, out) -> bool``: the launch with only the three addresses new, where the
    #: runtime offers it (CUDA; prepared by the plan's first fast call, False where it cannot be);
    #: it returns False when it cannot launch now (another current device).
    direct: object = None

    def __post_init__(self):
        # Integer kernel arguments converted once, not on every call.
        i64 = np.int64
        object.__setattr__(self, "lhs_args", (i64(self.lhs.ld), i64(self.lhs.batch_stride)))
        object.__setattr__(self, "rhs_args", (i64(self.rhs.ld), i64(self.rhs.batch_stride)))
        object.__setattr__(self, "size_args", tuple(i64(v) for v in self.sizes))


@dataclass(frozen=True)
class _Fused:
    """How one call's epilogue arguments reach the kernel: ``alpha``, then c's pointer, offset,
    strides and ``beta``, then bias's pointer, offset and stride (see `Epilogue.params`)."""

    scaled: bool
    c: CView | None
    bias_stride: int | None
    scalar: type             # np.float32 / np.float64: the epilogue's compute type

    def args(self, rt, alpha: float, beta: float, c, bias) -> list:
        out = [self.scalar(alpha)] if self.scaled else []
        if self.c is not None:
            ptr, offset = rt.ptr_arg(c)
            v = self.c
            out += [ptr, np.int64(offset), np.int64(v.row_stride), np.int64(v.col_stride),
                    np.int64(v.batch_stride), self.scalar(beta)]
        if self.bias_stride is not None:
            ptr, offset = rt.ptr_arg(bias)
            out += [ptr, np.int64(offset), np.int64(self.bias_stride)]
        return out


@dataclass(frozen=True)
class _Prepared:
    """A checked call: what `Engine._prepare` found (operands and problem only when there is work)."""

    shape: CallShape
    dtype: np.dtype
    fusion: FusionRequest
    host: bool
    lhs: _Operand | None = None
    rhs: _Operand | None = None
    problem: MatmulProblem | None = None


class Engine:
    """A matmul engine bound to one backend ("auto", "cuda", "opencl") and device."""

    #: The family that picks the fastest composition that sets up (see algorithms/auto.py).
    default_algorithm = "auto"

    def __init__(self, backend: str = "auto", device=None, precision: str = "default",
                 use_tuning_cache: bool = True):
        if precision not in MatmulProblem.PRECISIONS:
            raise ValueError(f"precision: expected one of {MatmulProblem.PRECISIONS}, got {precision!r}")
        self.precision = precision
        self.runtime = _make_runtime(backend, device)
        self._plans: dict = {}
        self._fast: dict = {}        # call metadata -> _FastPlan (device arrays only)
        self._resolved: dict = {}    # algorithm name or class -> instance
        #: Default calls take the tuning cache's choice for their problem class when it has one.
        self.use_tuning_cache = use_tuning_cache
        self._tuning_cache = None
        self._tuned: dict = {}       # tuning key -> Algorithm from the cache, or None
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
    def matmul(self, a, b, *, out=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1,
               activation=None, out_dtype=None, algorithm=None, precision=None, tune=False):
        """``act(alpha * (a @ b) + beta * c + bias)`` with numpy.matmul's semantics for ``a @ b``,
        computed by one generated kernel on this engine's device (see fusion.py for the options'
        conventions; with none given it is ``numpy.matmul(a, b, out=out)``).

        ``out_dtype``: the result dtype (default: numpy's promotion of a, b, c and bias).
        ``algorithm``: a registered name, an Algorithm subclass or instance. Default: the tuned
        choice for this problem class when the tuning cache has one, else ``"auto"`` (the heuristic;
        naming "auto" explicitly skips the cache). See `explain`.
        ``precision``: "tf32" lets float32 run on tensor cores; default: the engine's setting.
        ``tune``: with the default algorithm, tune this problem class first when the cache has no
        entry for it (see `tune`); later calls, in any process, use the stored winner.
        """
        rt = self.runtime
        precision = self.precision if precision is None else precision
        plain = (c is None and bias is None and activation is None and out_dtype is None
                 and beta is None and type(alpha) in (float, int) and alpha == 1)
        fast_key = None
        if rt.is_native(a) and rt.is_native(b):
            # Repeated calls on device arrays with the same metadata skip every check and setup:
            # everything the checks depend on is in the key (shapes, strides, dtypes, alignment).
            fast_key = (algorithm, bool(tune), precision, a.shape, a.strides, a.dtype, rt.element_address(a) % 8,
                        b.shape, b.strides, b.dtype, rt.element_address(b) % 8,
                        None if out is None else (type(out), out.shape, out.strides, out.dtype))
            if not plain:
                fast_key = self._fused_key(fast_key, alpha, beta, c, bias, bias_axis, activation, out_dtype)
            try:
                plan = self._fast.get(fast_key) if fast_key is not None else None
            except TypeError:  # an unhashable argument: the general path reports it
                plan, fast_key = None, None
            if plan is not None:
                result = self._run_fast(plan, a, b, out, alpha, beta, c, bias)
                if result is not None:
                    return result
        prep = self._prepare(a, b, out, alpha, beta, c, bias, bias_axis, activation, out_dtype,
                             precision, plain)
        shape, dtype, fusion, host = prep.shape, prep.dtype, prep.fusion, prep.host
        if algorithm is not None:
            self._resolve(algorithm)   # an unknown name fails even when there is nothing to compute
        if prep.problem is None:     # nothing to multiply: no kernel
            if shape.k == 0 and shape.batch and shape.m and shape.n:
                return self._k_zero(shape, dtype, out, host, fusion)
            return self._empty_result(shape, dtype, out, host)
        lhs, rhs, problem, epilogue = prep.lhs, prep.rhs, prep.problem, prep.problem.epilogue
        c_dev, c_v, c_copied = self._c_operand(fusion.c, shape)
        bias_dev, bias_stride, bias_copied = self._bias_operand(fusion.bias)
        alg, cfg, kernels = self._plan_call(algorithm, problem, tune)
        fused = None if epilogue.identity else _Fused(
            epilogue.scaled, c_v if epilogue.c is not None else None,
            bias_stride if epilogue.bias is not None else None,
            np.float64 if epilogue.compute == "f64" else np.float32)

        # Write straight into `out` when it is a C-contiguous device array of the result dtype that
        # overlaps no input (``out`` being ``c`` itself is fine: each element reads its own c first).
        reads = [lhs.array, rhs.array] + [x for x in (c_dev, bias_dev) if x is not None and x is not out]
        direct = (out is not None and not host and out.dtype == dtype and out.flags.c_contiguous
                  and not any(rt.may_overlap(out, x) for x in reads))
        target = out if direct else rt.empty(shape.out_shape, self._storage_dtype(dtype, host))
        plan = self._launch(alg, cfg, kernels, problem, lhs, rhs, target, shape.out_shape, dtype,
                            fused, fusion.alpha, fusion.beta, c_dev, bias_dev)
        self.last_choice = (alg, cfg)
        if (fast_key is not None and not (lhs.copied or rhs.copied or c_copied or bias_copied)
                and (out is None or direct)):
            if len(self._fast) >= _FAST_PLANS_MAX:  # bounded: a process with ever new shapes
                self._fast.clear()                  # must not grow without limit
            self._fast[fast_key] = plan
        return self._finish(target, out, direct, host, dtype)


    def _prepare(self, a, b, out, alpha, beta, c, bias, bias_axis, activation, out_dtype, precision,
                 plain) -> "_Prepared":
        """Every check of a call, then the operands on the device and the problem the kernels are
        configured for (None when there is nothing to multiply: an empty output or K = 0)."""
        rt = self.runtime
        if precision not in MatmulProblem.PRECISIONS:
            raise ValueError(f"precision: expected one of {MatmulProblem.PRECISIONS}, got {precision!r}")
        a, a_host = self._as_array(a, "a")
        b, b_host = self._as_array(b, "b")
        host = a_host and b_host
        shape = call_shape(a.shape, b.shape)
        product = result_dtype(a.dtype, b.dtype)
        in_dtype = operand_dtype(product)   # what the kernel reads: int8 for an int32 product (dtypes.WIDENED)
        fusion = NO_FUSION if plain else check_fusion(
            shape, alpha=alpha, beta=beta, c=c, bias=bias, bias_axis=bias_axis, activation=activation,
            out_dtype=out_dtype)
        dtype = fused_dtype(product, fusion)
        epilogue = make_epilogue(fusion, element_type(in_dtype).compute, element_type(dtype).compute)
        if out is not None:
            if host and not isinstance(out, np.ndarray):
                raise TypeError(f"matmul: out must be a numpy.ndarray for numpy inputs, got {type(out).__name__}")
            if host and not out.flags.writeable:   # else found only after the launch, or never (K = 0)
                raise ValueError("matmul: out is read-only")
            if not host and not rt.is_native(out):
                raise TypeError(f"matmul: out must be a device array of the {rt.backend} backend, "
                                f"got {type(out).__name__}")
            check_out(out.shape, out.dtype, dtype, shape.out_shape)
        for label, x in (("c", fusion.c), ("bias", fusion.bias)):
            if x is not None:
                self._as_array(x, label)  # the array kind check, before anything moves
        if shape.batch == 0 or shape.m == 0 or shape.n == 0 or shape.k == 0:
            return _Prepared(shape, dtype, fusion, host)
        lhs = self._operand(a, a_host, in_dtype, shape, shape.lhs_vector, lhs=True)
        rhs = self._operand(b, b_host, in_dtype, shape, shape.rhs_vector, lhs=False)
        in_et = element_type(in_dtype)
        problem = MatmulProblem(shape.batch, shape.m, shape.n, shape.k, in_et, in_et, element_type(dtype),
                                lhs.view.layout, rhs.view.layout, lhs.align, rhs.align, precision, epilogue)
        return _Prepared(shape, dtype, fusion, host, lhs, rhs, problem)

    def _fused_key(self, key, alpha, beta, c, bias, bias_axis, activation, out_dtype):
        """The fast-path key extended by the epilogue's metadata, or None (general path) when an
        option is not a plain number or a device array of this backend."""
        rt = self.runtime
        if type(alpha) not in (float, int) or type(beta) not in (float, int, type(None)):
            return None
        meta = []
        for x in (c, bias):
            if x is None:
                meta.append(None)
            elif rt.is_native(x):
                meta.append((x.shape, x.strides, x.dtype))
            else:
                return None
        return key + (alpha == 1, None if beta is None else beta == 0, *meta, bias_axis, activation,
                      out_dtype)

    def _run_fast(self, plan: _FastPlan, a, b, out, alpha=1.0, beta=None, c=None, bias=None):
        """Launch a cached plan; None when ``out`` overlaps an input (the general path copes)."""
        rt = self.runtime
        if plan.direct and out is None:
            # A one-kernel plan with no epilogue arguments on CUDA: only the three addresses
            # change between calls (codegen/cuda_launch.py, `PreparedLaunch`).
            target = rt.empty(plan.out_shape, plan.dtype)
            if plan.direct(a, b, target):
                self.last_choice = (plan.alg, plan.cfg)
                return target
        if out is not None and any(rt.may_overlap(out, x) for x in (a, b, c, bias)
                                   if x is not None and x is not out):
            return None
        target = out if out is not None else rt.empty(plan.out_shape, plan.dtype)
        (pa, oa), (pb, ob), (pt, ot) = rt.ptr_arg(a), rt.ptr_arg(b), rt.ptr_arg(target)
        args = (pa, np.int64(oa), *plan.lhs_args, pb, np.int64(ob), *plan.rhs_args,
                pt, np.int64(ot), *plan.size_args)
        if plan.fused is not None:
            args += tuple(plan.fused.args(rt, float(alpha), 1.0 if beta is None else float(beta), c, bias))
        elif plan.direct is None:
            # The plan's first fast call prepares its direct launch (only the first: a plan the
            # runtime cannot prepare keeps False); the general path and the tuner never pay for it.
            direct = False
            if plan.workspace is None and len(plan.kernels) == 1 and hasattr(rt, "prepare_launch"):
                kernel, cubes, units, shared = plan.kernels[0]
                direct = rt.prepare_launch(kernel, cubes, units, args, shared, arrays=(0, 4, 8)) or False
            object.__setattr__(plan, "direct", direct)
        self._run_kernels(plan, args)
        self.last_choice = (plan.alg, plan.cfg)
        return target

    def _run_kernels(self, plan: _FastPlan, args: tuple):
        """Launch a plan's kernels in order, the workspace (fresh per call) as their last argument."""
        rt = self.runtime
        if plan.workspace is not None:
            dtype, count = plan.workspace
            args += (rt.ptr_arg(rt.empty((count,), dtype))[0],)
        for kernel, cubes, units, shared in plan.kernels:
            rt.launch_converted(kernel, cubes, units, args, shared)


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
        """(algorithm, config, source) the engine would use for ``problem``; nothing is launched
        or compiled. The default algorithm is chosen as `matmul` chooses it (tuned, else "auto")."""
        alg, cfg = self._setup_choice(algorithm, problem)
        alg = alg.chosen(cfg)
        return alg, cfg, alg.render(cfg, self.dialect)

    def problem_for(self, a, b, *, precision=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1,
                    activation=None, out_dtype=None) -> MatmulProblem:
        """The `MatmulProblem` ``matmul(a, b, ...)`` configures its kernels for (every check of
        the call runs; host operands are moved to the device as a call would). ValueError when
        the call has nothing to multiply (an empty output or K = 0)."""
        precision = self.precision if precision is None else precision
        prep = self._prepare(a, b, None, alpha, beta, c, bias, bias_axis, activation, out_dtype,
                             precision, plain=False)
        if prep.problem is None:
            raise ValueError(f"matmul of shapes {np.shape(a)} and {np.shape(b)} runs no kernel "
                             f"(empty output or K = 0): there is no problem to explain or tune")
        return prep.problem

    def explain(self, a, b=None, *, algorithm=None, precision=None, **options) -> "Explanation":
        """Why ``matmul(a, b, algorithm=algorithm, ...)`` runs what it runs, without running it:
        the chosen algorithm and its full config, where the choice came from (the caller, the
        tuning cache or the heuristic), and for every other registered algorithm the setup error
        that refuses it or the rule that ranks it lower. ``a`` may also be a `MatmulProblem`
        (``b`` then None). ``str()`` of the result is a readable report."""
        from .explain import explain_problem
        problem = a if isinstance(a, MatmulProblem) else self.problem_for(a, b, precision=precision, **options)
        return explain_problem(self, problem, algorithm)

    def tune(self, a, b=None, *, precision=None, force=False, progress=None, repeat=10, warmup=2,
             exhaustive=False) -> "TuneResult":
        """Time candidate algorithms and tilings for the problem class of ``a @ b`` (or of a
        `MatmulProblem` ``a``) on this device and store the fastest in the tuning cache, which
        later default calls in any process use. Returns the cached result without timing anything
        when the cache already has this class (``force=True`` tunes again).

        ``progress``: True prints a progress bar to stderr, False nothing, None a bar only when
        stderr is a terminal; a callable gets ``(done, total, label)``. ``exhaustive``: time every
        registered algorithm, not only those the heuristic ranks (see tuning/space.py).
        """
        from .tuning import TuneResult, Tuner, problem_key
        problem = a if isinstance(a, MatmulProblem) else self.problem_for(a, b, precision=precision)
        key = problem_key(problem, self.device)
        if not force:
            entry = self.tuning_cache.get(key)
            if entry is not None:
                return TuneResult.cached(key, problem, entry)
        result = Tuner(self, repeat=repeat, warmup=warmup, progress=progress, exhaustive=exhaustive).run(problem)
        self.tuning_cache.put(key, result.entry())
        self._tuned.clear()      # anchored keys: other problems of the class choose again
        self._fast.clear()       # fast plans of default calls hold the heuristic's choice
        return result

    @property
    def tuning_cache(self):
        """The persistent tuning cache (tuning/cache.py), opened on first use."""
        if self._tuning_cache is None:
            from .tuning import TuningCache
            self._tuning_cache = TuningCache()
        return self._tuning_cache

    # -- choice ------------------------------------------------------------------------------
    def _tuned_algorithm(self, problem: MatmulProblem) -> Algorithm | None:
        """The tuning cache's algorithm for ``problem``'s class, or None (no entry, or disabled)."""
        if not self.use_tuning_cache:
            return None
        from .tuning import problem_key
        key = problem_key(problem, self.device)
        if key not in self._tuned:
            entry = self.tuning_cache.get(key)
            alg = None
            if entry is not None and entry.algorithm in REGISTRY:
                try:
                    alg = REGISTRY[entry.algorithm](entry.selection)
                except (TypeError, ValueError):   # a selection this algorithm no longer takes
                    alg = None
            self._tuned[key] = alg
        return self._tuned[key]

    def _default_choices(self, problem: MatmulProblem) -> list[Algorithm]:
        tuned = self._tuned_algorithm(problem)
        heuristic = self._resolve(self.default_algorithm)
        return [heuristic] if tuned is None else [tuned, heuristic]

    def _setup_choice(self, algorithm, problem: MatmulProblem) -> tuple[Algorithm, KernelConfig]:
        """(algorithm, config) for a call: the caller's algorithm, else the tuned one, falling back
        to the heuristic when the tuned selection does not set up for this member of its class."""
        return self._choose(self._configure, algorithm, problem)

    def _plan_call(self, algorithm, problem: MatmulProblem, tune: bool):
        """(algorithm, config, kernels) of a call, compiled (see `_setup_choice`)."""
        if algorithm is None and tune:
            self.tune(problem)
        return self._choose(self._plan, algorithm, problem)

    def _choose(self, step, algorithm, problem: MatmulProblem):
        """``step(alg, problem)`` (setup, or setup and compile) for the caller's algorithm, else
        for the first default choice that sets up."""
        if algorithm is not None:
            return step(self._resolve(algorithm), problem)
        *first, last = self._default_choices(problem)
        for alg in first:
            try:
                return step(alg, problem)
            except SetupError:
                pass
        return step(last, problem)

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

    def _device_copy(self, x):
        """A device array holding ``x`` in its own dtype (bfloat16 moved as its bits)."""
        rt = self.runtime
        if rt.is_native(x):
            return x
        x = np.asarray(x)
        element_type(x.dtype)  # TypeError naming the supported dtypes
        return rt.to_device(x.view(np.uint16) if element_type(x.dtype) is BFLOAT16 else x)

    def _c_operand(self, c, shape: CallShape):
        """(device array, strides view, copied) for the epilogue's ``c``, read in place where its
        strides describe the broadcast to the output; else copied once, broadcast materialized."""
        if c is None:
            return None, None, False
        rt = self.runtime
        copied = not rt.is_native(c)
        dev = self._device_copy(c)
        view = c_view(dev.shape, dev.strides, dev.dtype.itemsize, shape)
        if view is None:
            host = rt.to_host(dev) if not isinstance(c, np.ndarray) else np.asarray(c)
            host = np.ascontiguousarray(np.broadcast_to(host, shape.out_shape))
            dev, copied = self._device_copy(host), True
            view = c_view(dev.shape, dev.strides, dev.dtype.itemsize, shape)
        return dev, view, copied

    def _bias_operand(self, bias):
        """(device array, element stride, copied) for the epilogue's ``bias`` vector."""
        if bias is None:
            return None, None, False
        rt = self.runtime
        copied = not rt.is_native(bias)
        dev = self._device_copy(bias)
        stride, itemsize = dev.strides[0], dev.dtype.itemsize
        if stride % itemsize:
            dev, copied = rt.contiguous(dev), True
            stride = itemsize
        return dev, stride // itemsize, copied

    def _k_zero(self, shape: CallShape, dtype, out, host, fusion: FusionRequest):
        """K = 0: a @ b is zeros, so the result is the epilogue of zeros, computed on the host in
        float64 (nothing to multiply; a kernel would only read c and bias)."""
        if fusion.plain:
            return self._empty_result(shape, dtype, out, host)
        rt = self.runtime
        value = np.zeros(shape.out_shape)
        if fusion.c is not None:
            value = value + fusion.beta * self._host_float64(fusion.c)
        if fusion.bias is not None:
            vec = self._host_float64(fusion.bias)
            if fusion.bias_axis == 1 or shape.lhs_vector:
                value = value + vec                              # over the output's last axis
            else:
                value = value + (vec[:, None] if not shape.rhs_vector else vec)
        if fusion.activation is not None:
            value = fusion.activation.reference(value)
        result = np.asarray(value).astype(dtype)
        if host:
            if out is None:
                return result[()] if result.ndim == 0 else result
            out[...] = result
            return out
        target = rt.to_device(result.view(np.uint16) if element_type(dtype) is BFLOAT16 else result)
        if out is None:
            return target
        rt.copy_into(out, target)
        return out

    def _host_float64(self, x) -> np.ndarray:
        rt = self.runtime
        if rt.is_native(x):
            x = rt.to_host(x)
            if x.dtype == np.uint16:  # a bfloat16 device array comes back as its bits
                x = x.view(numpy_dtype(BFLOAT16))
        return np.asarray(x, dtype=np.float64)

    def _configure(self, alg: Algorithm, problem: MatmulProblem):
        return alg, alg.setup(problem, self.dialect)

    def _plan(self, alg: Algorithm, problem: MatmulProblem):
        key = (type(alg), alg.selection, problem)
        hit = self._plans.get(key)
        if hit is None:
            alg, cfg = self._configure(alg, problem)
            alg = alg.chosen(cfg)
            source = alg.render(cfg, self.dialect)
            # Global matmuls whose shared memory is sized at launch (the pipelined ring) say how much.
            shared = getattr(cfg.batch.global_, "dynamic_shared_bytes", 0)
            kernels = tuple((self.runtime.kernel(source, launch.name), launch.cubes, launch.units,
                             shared if launch.dynamic_shared else 0)
                            for launch in alg.launches(cfg, problem))
            hit = self._plans[key] = (alg, cfg, kernels)
        return hit

    def _launch(self, alg, cfg, kernels, problem, lhs: _Operand, rhs: _Operand, target, out_shape,
                dtype, fused: _Fused | None = None, alpha=1.0, beta=0.0, c=None, bias=None) -> _FastPlan:
        plan, args = self._launch_args(alg, cfg, kernels, problem, lhs, rhs, target, out_shape, dtype,
                                       fused, alpha, beta, c, bias)
        self._run_kernels(plan, args)
        return plan

    def _launch_args(self, alg, cfg, kernels, problem, lhs: _Operand, rhs: _Operand, target, out_shape,
                     dtype, fused: _Fused | None = None, alpha=1.0, beta=0.0, c=None, bias=None):
        """(plan, kernel arguments) of a launch, without launching: ``_run_kernels(plan, args)``
        runs it (the tuner times that)."""
        rt = self.runtime
        args = []
        for op in (lhs, rhs):
            ptr, offset = rt.ptr_arg(op.array)
            args += [ptr, offset, op.view.ld, op.view.batch_stride]
        ptr, offset = rt.ptr_arg(target)
        sizes = (problem.n, problem.m * problem.n, problem.m, problem.n, problem.k, problem.batch)
        workspace = alg.workspace(cfg, problem)
        if workspace is not None:
            workspace = (numpy_dtype(workspace[0]), workspace[1])
        extra = fused.args(rt, alpha, beta, c, bias) if fused is not None else []
        args = tuple(np.int64(a) if isinstance(a, (int, np.integer)) else a
                     for a in args + [ptr, offset, *sizes] + extra)
        plan = _FastPlan(alg, cfg, kernels, workspace, out_shape, dtype, lhs.view, rhs.view, sizes, fused)
        return plan, args

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


def matmul(a, b, *, out=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1, activation=None,
           out_dtype=None, algorithm=None, precision=None, tune=False):
    """numpy.matmul semantics, with an optional fused epilogue, on the default engine.
    See `Engine.matmul`."""
    return default_engine().matmul(a, b, out=out, alpha=alpha, beta=beta, c=c, bias=bias,
                                   bias_axis=bias_axis, activation=activation, out_dtype=out_dtype,
                                   algorithm=algorithm, precision=precision, tune=tune)
