"""`Engine`: numpy-style matmul on one backend and device, and the module-level `matmul`.

A call is a pipeline of four steps, each in its own module:

1. *prepare* (operands.py): numpy's rules on shapes, dtypes, ``out`` and the epilogue options (every
   check before anything runs), then the operands on the device, viewed without copies where their
   strides allow, and the `MatmulProblem`;
2. *choose* (choice.py): the caller's algorithm, else the tuning cache's, else ``auto``'s rules;
3. *plan* (planner.py): set up, render and compile, cached per (algorithm, problem);
4. *launch* (launcher.py): the plan's kernels with the call's arguments, packed by its signature.

Repeated calls on device arrays with the same metadata skip steps 1-3 (a `CallPlan` per call
shape), and the result comes back as the caller's array type.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from . import algorithms as _algorithms  # noqa: F401  (registers the built-in algorithms)
from .algorithms.base import REGISTRY, Algorithm, KernelConfig, resolve
from .call.choose import Choice, ChoicePolicy
from .errors import SetupError
from .call.arrays import torch_stream
from .runtime.backends import BACKEND_ENV, make_runtime  # noqa: F401  (BACKEND_ENV: public here too)
from .call.launch import (CallPlan, Launcher, epilogue_arguments, epilogue_values, operand_values, output_values,
                       size_values)
from .call.prepare import Preparer
from .call.plan import Plan, Planner
from .problem import MatmulProblem

#: Call plans (the fast path's) kept per engine, least recently used first out.
CALL_PLANS_MAX = 1024

class Engine:
    """A matmul engine bound to one backend ("auto", "cuda", "opencl") and device."""

    #: The family that picks the fastest composition that sets up (see algorithms/auto.py).
    default_algorithm = "auto"

    def __init__(self, backend: str = "auto", device=None, precision: str = "default",
                 use_tuning_cache: bool = True, *, context=None, queue=None):
        """``backend``: "auto" (CUDA when CuPy sees a GPU, else OpenCL; $GEMM_ENGINE_BACKEND),
        "cuda" or "opencl". ``device``: a CUDA device index; on OpenCL an index, a name substring
        (optionally ":index") or a pyopencl.Device. ``context`` / ``queue`` (OpenCL): run in the
        caller's pyopencl context, or on its queue (so the engine's work is ordered with the
        caller's). ``precision``: "tf32" lets float32 run on tensor cores by default.
        ``use_tuning_cache``: default calls take the tuning cache's choice."""
        if precision not in MatmulProblem.PRECISIONS:
            raise ValueError(f"precision: expected one of {MatmulProblem.PRECISIONS}, got {precision!r}")
        self.precision = precision
        self.runtime = make_runtime(backend, device, context, queue)
        self.preparer = Preparer(self.runtime)
        self.planner = Planner(self.runtime)
        self.launcher = Launcher(self.runtime)
        self.policy = ChoicePolicy(self.runtime.dialect, self.tuned_algorithm, self.resolve)
        self._calls: OrderedDict = OrderedDict()   # call metadata -> CallPlan (device arrays only)
        self._chosen: dict = {}                    # (algorithm spec, problem) -> Plan
        self._resolved: dict = {}                  # algorithm name or class -> instance
        #: Default calls take the tuning cache's choice for their problem class when it has one.
        self.use_tuning_cache = use_tuning_cache
        self._tuning_cache = None
        self._tuned: dict = {}                     # tuning key -> Algorithm from the cache, or None
        self._lock = threading.Lock()
        #: torch's tensor type, once a call has seen one (the torch fast path's test; no import).
        self._torch_type = None
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
               activation=None, out_dtype=None, casting="same_kind", algorithm=None, precision=None, tune=False,
               scale_a=None, scale_b=None):
        # The docstring is gemm_engine.matmul's, set below: one text documents both.
        rt = self.runtime
        precision = self.precision if precision is None else precision
        plain = (c is None and bias is None and activation is None and out_dtype is None and scale_a is None
                 and scale_b is None and beta is None and type(alpha) in (float, int) and alpha == 1
                 and casting == "same_kind")
        call_key = None
        tensor = self._torch_type
        extras = (alpha, beta, c, bias, scale_a, scale_b)
        if tensor is not None and type(a) is tensor and type(b) is tensor and out is None:
            # Repeated calls on torch tensors: the metadata is the key, the addresses go straight in.
            pa, pb = a.data_ptr(), b.data_ptr()
            call_key = ("torch", algorithm, bool(tune), precision, a.shape, a.stride(), a.dtype, a.get_device(),
                        pa % 16, b.shape, b.stride(), b.dtype, b.get_device(), pb % 16)
            if not plain:
                call_key = self._fused_key(call_key, _torch_meta(tensor), extras, bias_axis, activation,
                                           out_dtype, casting)
            call = self._cached(call_key)
            if call is not None:
                return self._run_torch_call(call, a, pa, pb, extras)
        elif rt.is_native(a) and rt.is_native(b):
            # Repeated calls on device arrays with the same metadata skip every check and setup:
            # everything the checks depend on is in the key (shapes, strides, dtypes, alignment).
            call_key = (algorithm, bool(tune), precision, a.shape, a.strides, a.dtype, rt.element_address(a) % 8,
                        b.shape, b.strides, b.dtype, rt.element_address(b) % 8,
                        None if out is None else (type(out), out.shape, out.strides, out.dtype))
            if not plain:
                meta = (lambda x: (x.shape, x.strides, x.dtype) if rt.is_native(x) else None)
                call_key = self._fused_key(call_key, meta, extras, bias_axis, activation, out_dtype, casting)
            call = self._cached(call_key)
            if call is not None:
                result = self._run_call(call, a, b, out, extras)
                if result is not None:
                    return result
        prep = self.preparer.call(a, b, out, alpha, beta, c, bias, bias_axis, activation, out_dtype,
                                  precision, plain, casting, (scale_a, scale_b))
        if algorithm is not None:
            self.resolve(algorithm)   # an unknown name fails even when there is nothing to compute
        with self.runtime.on_stream(prep.stream):
            try:
                return self._run(prep, algorithm, tune, call_key)
            except SetupError as exc:
                if prep.problem is None or not prep.problem.epilogue.block_scales:
                    raise
                refused = exc
        # No kernel applies these block scales: the operands are dequantized first (scales.py).
        prep = self.preparer.call(a, b, out, alpha, beta, c, bias, bias_axis, activation, out_dtype,
                                  precision, plain, casting, (scale_a, scale_b), dequantize=True)
        with self.runtime.on_stream(prep.stream):
            try:
                return self._run(prep, algorithm, tune, None)
            except SetupError:
                raise refused from None   # the reason the named algorithm gave for the scaled problem

    def _run(self, prep, algorithm, tune: bool, call_key):
        """Steps 2-4 of a prepared call (on the stream its inputs' library works on)."""
        rt = self.runtime
        shape, dtype, fusion, host = prep.shape, prep.dtype, prep.fusion, prep.host
        if prep.problem is None:     # nothing to multiply: no kernel
            if shape.k == 0 and shape.batch and shape.m and shape.n:
                return self.preparer.k_zero(prep)
            return self.preparer.empty_result(prep)
        lhs, rhs, problem, epilogue = prep.lhs, prep.rhs, prep.problem, prep.problem.epilogue
        c_dev, c_v, c_copied = self.preparer.c_operand(fusion.c, shape)
        bias_dev, bias_stride, bias_copied = self.preparer.bias_operand(fusion.bias)
        scales = {name: self.preparer.scale_operand(getattr(fusion, name)) for name in ("lhs_scale", "rhs_scale")}
        if algorithm is None and tune:
            self.tune(problem)
        plan = self.plan_for(problem, algorithm)

        # Write straight into `out` when it is a C-contiguous device array of the result dtype that
        # overlaps no input (``out`` being ``c`` itself is fine: each element reads its own c first).
        out = prep.out
        reads = [lhs.array, rhs.array] + [x for x in (c_dev, bias_dev) if x is not None and x is not out]
        reads += [dev for dev, _, _ in scales.values() if dev is not None]
        direct = (out is not None and not host and out.dtype == dtype and out.array.flags.c_contiguous
                  and not any(rt.may_overlap(out.array, x) for x in reads if x is not out.array))
        if direct:
            target = returned = out.array
        else:
            target, returned = self.preparer.result_target(prep)
        values = {**operand_values(rt, "lhs", lhs.array, lhs.view), **operand_values(rt, "rhs", rhs.array, rhs.view),
                  **output_values(rt, target, problem), **size_values(problem)}
        if not epilogue.identity:
            values.update(epilogue_values(rt, fusion.alpha, fusion.beta, c_dev, c_v, bias_dev, bias_stride,
                                          {name: (dev, stride) for name, (dev, stride, _) in scales.items()}))
        self.launcher.run(plan, values)
        rt.record(target)
        self.last_choice = (plan.algorithm, plan.config)
        if (call_key is not None and prep.cacheable and not (lhs.copied or rhs.copied or c_copied or bias_copied)
                and not any(copied for _, _, copied in scales.values())
                and (out is None or direct) and (prep.like is None) == (call_key[0] != "torch")):
            self._remember(call_key, CallPlan.make(plan, values, shape.out_shape, dtype, not epilogue.identity))
        if prep.like is not None and self._torch_type is None:
            self._torch_type = type(prep.like.original) if not isinstance(prep.like.original, type) else None
        return self.preparer.finish(prep, target, returned, direct)

    def _run_torch_call(self, call: CallPlan, a, pa: int, pb: int, extras=None):
        """A repeated call on torch CUDA tensors (``pa``, ``pb``: their addresses): a result tensor
        of torch's, the addresses (the epilogue's arrays' too, ``extras``), torch's current stream."""
        import torch
        plan = call.plan
        device = a.get_device()
        # A CUDA tensor's device as its index: torch reads an int as that CUDA device, without the
        # torch.device object ``a.device`` builds on every call.
        target = torch.empty(call.out_shape, dtype=call.torch_dtype(), device=device)
        stream = torch_stream(torch, device)
        pt = target.data_ptr()
        more = call.fused_values(extras, _torch_address) if call.fused else ()
        if call.direct and call.direct(pa, pb, pt, *more, stream=stream):
            self.last_choice = (plan.algorithm, plan.config)
            return target
        with self.runtime.on_stream(stream):
            values = {"lhs_base": pa, "lhs_offset": 0, "rhs_base": pb, "rhs_offset": 0, "out_base": pt, "out_offset": 0}
            if call.fused:
                values.update(epilogue_arguments(extras, _torch_address))
            args = call.packer.pack(self.launcher.with_workspace(plan, values, call.packer.fixed))
            if call.direct is None:
                call.direct = self.launcher.prepare_direct(plan, args, call.packer.fixed, call.fused_names)
            self.launcher.run_packed(plan, args)
        self.last_choice = (plan.algorithm, plan.config)
        return target

    def _cached(self, key):
        try:
            return self._calls.get(key) if key is not None else None
        except TypeError:  # an unhashable argument: the general path reports it
            return None

    def _remember(self, key, call: CallPlan) -> None:
        with self._lock:
            self._calls[key] = call
            if len(self._calls) > CALL_PLANS_MAX:   # bounded: a process with ever new shapes
                self._calls.popitem(last=False)

    @staticmethod
    def _fused_key(key, array_meta, extras, bias_axis, activation, out_dtype, casting):
        """The call key extended by the epilogue's metadata (``array_meta(x)``: an array argument's,
        None where the fast path cannot take it), or None (general path) when an option is not a
        plain number or such an array. Number scales fold into alpha (`epilogue_arguments`)."""
        alpha, beta, *arrays = extras
        if type(alpha) not in (float, int) or type(beta) not in (float, int, type(None)):
            return None
        meta, factor = [], 1.0
        for i, x in enumerate(arrays):
            if x is None:
                meta.append(None)
            elif i >= 2 and type(x) in (float, int):      # scale_a / scale_b given as a number
                meta.append("number")
                factor *= x
            else:
                meta.append(array_meta(x))
                if meta[-1] is None:
                    return None
        return key + (alpha * factor == 1, None if beta is None else beta == 0, *meta, bias_axis, activation,
                      out_dtype, casting)

    def _run_call(self, call: CallPlan, a, b, out, extras):
        """Launch a call plan; None when ``out`` overlaps an input (the general path copes)."""
        rt = self.runtime
        plan = call.plan
        if call.direct and out is None:
            # A one-kernel plan on CUDA: only the three addresses (and a fused call's epilogue
            # values) change between calls (codegen/cuda_launch.py, `PreparedLaunch`).
            target = rt.empty(call.out_shape, call.dtype)
            if call.direct(a, b, target, *(call.fused_values(extras, rt.ptr_arg) if call.fused else ())):
                self.last_choice = (plan.algorithm, plan.config)
                return target
        arrays = {name: x for name, x in zip(("c", "bias", "scale_a", "scale_b"), extras[2:])
                  if x is not None and type(x) not in (float, int)}
        if out is not None and any(rt.may_overlap(out, x) for x in (a, b, *arrays.values()) if x is not out):
            return None
        rt.order_after(a=a, b=b, out=out, **arrays)   # the key holds shapes, not queues
        target = out if out is not None else rt.empty(call.out_shape, call.dtype)
        args = call.pack(rt, self.launcher, a, b, target, extras)
        if call.direct is None:
            # The plan's first fast call prepares its direct launch (only the first: a plan the
            # runtime cannot prepare keeps False); the general path and the tuner never pay for it.
            call.direct = self.launcher.prepare_direct(plan, args, call.packer.fixed, call.fused_names)
        self.launcher.run_packed(plan, args)
        rt.record(target)
        self.last_choice = (plan.algorithm, plan.config)
        return target

    # -- choice and plans ----------------------------------------------------------------------
    def resolve(self, algorithm) -> Algorithm:
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

    def choose(self, problem: MatmulProblem, algorithm=None, trace: bool = False) -> Choice:
        """The `Choice` a call of ``problem`` makes (see choice.py); ``trace``: every alternative's verdict."""
        return self.policy.choose(problem, algorithm, trace=trace)

    def plan_for(self, problem: MatmulProblem, algorithm=None) -> Plan:
        """The compiled `Plan` a call of ``problem`` runs (chosen as `choose` chooses)."""
        key = (algorithm, problem)
        try:
            found = self._chosen.get(key)
        except TypeError:
            found, key = None, None
        if found is None:
            choice = self.choose(problem, algorithm)
            found = self.planner.plan(choice.algorithm, problem, choice.config)
            if key is not None:
                with self._lock:
                    self._chosen[key] = found
                    if len(self._chosen) > CALL_PLANS_MAX:
                        self._chosen.pop(next(iter(self._chosen)))
        return found

    def plan(self, problem: MatmulProblem, algorithm=None) -> tuple[Algorithm, KernelConfig, str]:
        """(algorithm, config, source) the engine would use for ``problem``; nothing is launched
        or compiled. The default algorithm is chosen as `matmul` chooses it (tuned, else "auto")."""
        from .call.plan import render
        choice = self.choose(problem, algorithm)
        return choice.algorithm, choice.config, render(choice.algorithm, choice.config, self.dialect)

    def problem_for(self, a, b, *, precision=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1,
                    activation=None, out_dtype=None) -> MatmulProblem:
        """The `MatmulProblem` ``matmul(a, b, ...)`` configures its kernels for (every check of
        the call runs; host operands are moved to the device as a call would). ValueError when
        the call has nothing to multiply (an empty output or K = 0)."""
        precision = self.precision if precision is None else precision
        prep = self.preparer.call(a, b, None, alpha, beta, c, bias, bias_axis, activation, out_dtype,
                                  precision, plain=False)
        if prep.problem is None:
            raise ValueError(f"matmul of shapes {np.shape(a)} and {np.shape(b)} runs no kernel "
                             f"(empty output or K = 0): there is no problem to explain or tune")
        return prep.problem

    def explain(self, a, b=None, *, algorithm=None, precision=None, **options):
        """Why ``matmul(a, b, algorithm=algorithm, ...)`` runs what it runs, without running it:
        the chosen algorithm and its full config, where the choice came from (the caller, the
        tuning cache or the heuristic), and for every other registered algorithm the setup error
        that refuses it or the rule that ranks it lower. ``a`` may also be a `MatmulProblem`
        (``b`` then None). ``str()`` of the result is a readable report."""
        from .explain import explain_problem
        problem = a if isinstance(a, MatmulProblem) else self.problem_for(a, b, precision=precision, **options)
        return explain_problem(self, problem, algorithm)

    def tune(self, a, b=None, *, precision=None, force=False, progress=None, repeat=10, warmup=2,
             exhaustive=False):
        """Time candidate algorithms and tilings for the problem class of ``a @ b`` (or of a
        `MatmulProblem` ``a``) on this device and store the fastest in the tuning cache, which
        later default calls in any process use. Returns the cached result without timing anything
        when the cache already has this class (``force=True`` tunes again).

        ``progress``: True prints a progress bar to stderr, False nothing, None a bar only when
        stderr is a terminal; a callable gets ``(done, total, label)``. ``exhaustive``: time every
        registered algorithm, not only those the rules name (see tuning/space.py).
        """
        from .tuning import TuneResult, Tuner, problem_key
        problem = a if isinstance(a, MatmulProblem) else self.problem_for(a, b, precision=precision)
        key = problem_key(problem, self.device)
        if not force:
            entry = self.tuning_cache.get(key)
            if entry is not None:
                return TuneResult.cached(key, problem, entry)
        result = Tuner(self.planner, self.launcher, self.choose, repeat=repeat, warmup=warmup,
                       progress=progress, exhaustive=exhaustive).run(problem)
        self.tuning_cache.put(key, result.entry())
        with self._lock:
            self._tuned.clear()      # anchored keys: other problems of the class choose again
            self._calls.clear()      # call plans of default calls hold the heuristic's choice
            self._chosen.clear()
        return result

    @property
    def tuning_cache(self):
        """The persistent tuning cache (tuning/cache.py), opened on first use."""
        if self._tuning_cache is None:
            from .tuning import TuningCache
            self._tuning_cache = TuningCache()
        return self._tuning_cache

    def tuned_algorithm(self, problem: MatmulProblem) -> Algorithm | None:
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
                except Exception:  # noqa: BLE001 -- a cache entry must never break a call
                    alg = None
            self._tuned[key] = alg
        return self._tuned[key]


def _torch_address(x) -> tuple[int, int]:
    """A torch tensor's (pointer, element offset): its data pointer already includes the offset."""
    return x.data_ptr(), 0


def _torch_meta(tensor_type):
    """The fast-path metadata of an epilogue array that is a torch tensor (else None)."""
    def meta(x):
        return (x.shape, x.stride(), x.dtype, x.get_device()) if type(x) is tensor_type else None
    return meta
