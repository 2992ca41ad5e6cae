"""`Engine`: numpy-style matmul on one backend and device.

A call is one pass down the steps of call/, each in its own module:

1. *arrays* (call/arrays.py): every array argument imported from its library;
2. *numpy's rules* (call/numpy_rules.py): shapes and the one dtype rule;
3. *request* (call/request.py): every option checked once, the epilogue the kernels apply;
4. *prepare* (call/prepare.py): the arrays on the device, viewed in place, and the `MatmulProblem`;
5. *choose* (call/choose.py): the caller's algorithm, else the tuning cache's, else ``auto``'s rules;
6. *plan* (call/plan.py): set up, render and compile, cached per (algorithm, problem), or a
   stand-in while the engine's choice builds in the background;
7. *arguments* and *launch* (call/arguments.py, call/launch.py): one typed `CallArguments`, the
   kernels launched with it;
8. *deliver* (call/deliver.py): the result in the caller's library, or in ``out``.

Repeated calls on device arrays with the same metadata skip steps 1-6 (a `CallPlan` per call
shape): the arguments step's per-call values go straight into the prepared launch.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from .algorithms.base import REGISTRY, Algorithm, KernelConfig, resolve
from .call.arguments import EpilogueInputs, build_arguments
from .call.arrays import import_call, import_list
from .call.choose import Choice, ChoicePolicy
from .call.deliver import finish, finish_list, without_kernel
from .call.doc import grouped_doc, matmul_doc
from .call.fast import FastPath
from .call.launch import Launcher, remember
from .call.plan import Plan, Planner, render
from .call.prepare import prepare, prepare_list
from .call.scaled import dequantized
from .call import numpy_rules
from .call.request import CallOptions, make_list_request, make_request
from .compose.registry import generation
from .errors import SetupError
from .epilogue.activations import resolve_activation
from .explain import explain_problem, problem_of_call
from .problem import MatmulProblem
from .quant.weight import QuantizedWeight
from .handles import register as register_handle
from .tensors import torch_op_wanted
from .runtime.backends import BACKEND_ENV, make_runtime  # noqa: F401  (BACKEND_ENV: public here too)
from .tuning import TuneResult, Tuner, TuningCache, problem_key

#: Plans chosen per (algorithm, problem) kept per engine, least recently used first out.
CHOSEN_MAX = 1024

class Engine:
    """A matmul engine bound to one backend ("auto", "cuda", "opencl") and device."""

    #: The family that picks the fastest composition that sets up (see algorithms/auto.py).
    default_algorithm = "auto"

    def __init__(self, backend: str = "auto", device=None, precision: str = "default",
                 use_tuning_cache: bool = True, *, context=None, queue=None, max_compute_units: int | None = None,
                 background_compile: bool | None = None):
        """``backend``: "auto" (CUDA when CuPy sees a GPU, else OpenCL; $GEMM_ENGINE_BACKEND),
        "cuda" or "opencl". ``device``: a CUDA device index; on OpenCL an index, a name substring
        (optionally ":index") or a pyopencl.Device. ``context`` / ``queue`` (OpenCL): run in the
        caller's pyopencl context, or on its queue (so the engine's work is ordered with the
        caller's). ``precision``: "tf32" lets float32 run on tensor cores by default.
        ``use_tuning_cache``: default calls take the tuning cache's choice. ``max_compute_units``:
        at most this many SMs (compute units) per kernel, so that kernels running beside the
        engine's (communication) keep the rest: persistent grids take that many cubes, and one-cube-
        per-tile grids of a reentrant global level turn persistent with that many; split-K and a
        global level that runs once per cube keep one cube per tile (`explain` shows the grid).
        ``background_compile``: the engine's own choice builds on a worker thread while calls run a
        quick stand-in (call/plan.py `Planner.stand_in`; not under torch's deterministic mode).
        Default: on for CUDA ($GEMM_ENGINE_BACKGROUND_COMPILE=0/1); `wait_for_compiles`."""
        if precision not in MatmulProblem.PRECISIONS:
            raise ValueError(f"precision: expected one of {MatmulProblem.PRECISIONS}, got {precision!r}")
        self.precision = precision
        self.runtime = make_runtime(backend, device, context, queue)
        self.runtime.limit_compute_units(max_compute_units)
        self.planner = Planner(self.runtime, background=background_compile)
        self.launcher = Launcher(self.runtime)
        self.policy = ChoicePolicy(self.runtime.dialect, self.tuned_algorithm, self.resolve)
        #: Repeated calls on device arrays: call metadata -> `CallPlan` (call/fast.py).
        self._calls: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.fast = FastPath(self.runtime, self.launcher, self._calls, self._lock)
        self._chosen: dict = {}                    # (algorithm spec, problem) -> Plan
        self._resolved: dict = {}                  # algorithm name or class -> instance
        #: Default calls take the tuning cache's choice for their problem class when it has one.
        self.use_tuning_cache = use_tuning_cache
        self._tuning_cache = None
        self._tuned: dict = {}                     # tuning key -> Algorithm from the cache, or None
        #: The registries' generation the caches above were filled under (compose/registry.py).
        self._generation = generation()
        self.last_choice: tuple[Algorithm, KernelConfig] | None = None
        #: A number naming this engine in the torch ops' calls (gemm_engine/torch/ops.py).
        self.handle = register_handle(self)

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
    @matmul_doc("on this engine's device, by one generated kernel")
    def matmul(self, a, b, *, out=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1,
               activation=None, out_dtype=None, casting="same_kind", algorithm=None, precision=None, tune=False,
               scale_a=None, scale_b=None, mul=None):
        if torch_op_wanted(a, b, (c, bias, mul, scale_a, scale_b)):
            # Autograd, torch.compile's tracing, autocast: through the registered ops (gemm_engine/torch).
            from .torch.route import routed   # the optional torch layer (it needs torch)
            return routed(self, a, b, out=out, alpha=alpha, beta=beta, c=c, bias=bias, bias_axis=bias_axis,
                          activation=activation, out_dtype=out_dtype, casting=casting, algorithm=algorithm,
                          precision=precision, tune=tune, scale_a=scale_a, scale_b=scale_b, mul=mul)
        return self.run_call(a, b, out, alpha, beta, c, bias, bias_axis, activation, out_dtype, casting, algorithm,
                         precision, tune, scale_a, scale_b, mul)

    def compute(self, a, b, *, out=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1, activation=None,
                out_dtype=None, casting="same_kind", algorithm=None, precision=None, tune=False, scale_a=None,
                scale_b=None, mul=None):
        """`matmul` on the engine directly, whatever the arguments (torch tensors are read as arrays:
        no autograd, no tracing): what the registered torch ops run."""
        return self.run_call(a, b, out, alpha, beta, c, bias, bias_axis, activation, out_dtype, casting, algorithm,
                         precision, tune, scale_a, scale_b, mul)

    def run_call(self, a, b, out, alpha, beta, c, bias, bias_axis, activation, out_dtype, casting, algorithm,
                 precision, tune, scale_a, scale_b, mul):
        """`compute` with its arguments in order, none left out (what the module-level `matmul` and
        the torch ops call: keywords cost a 64^3 call's host time): the fast path where its key has
        a call plan, else the general path (`_call`)."""
        if self._generation != generation():
            self._forget_plans()
        precision = self.precision if precision is None else precision
        plain = (c is None and bias is None and activation is None and out_dtype is None and scale_a is None
                 and scale_b is None and beta is None and type(alpha) in (float, int) and alpha == 1
                 and casting == "same_kind" and mul is None)
        inputs = None if plain else EpilogueInputs(alpha, beta, c, bias, scale_a, scale_b, mul)
        call_key, found = self.fast.call(a, b, out, inputs, (algorithm, bool(tune), precision, bias_axis, activation,
                                                            out_dtype, casting))
        if found is not None:
            result, plan = found
            self.last_choice = (plan.algorithm, plan.config)
            return result
        options = CallOptions(alpha, beta, bias_axis, activation, out_dtype, casting, precision)
        return self._call(a, b, out, c, bias, scale_a, scale_b, mul, options, plain, algorithm, tune, call_key)

    def quantized_matmul(self, x, qweight, *, out=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1,
                         activation=None, out_dtype=None, casting="same_kind", algorithm=None):
        """``x @ qweight.dequantize()`` with ``matmul``'s epilogue (``act(alpha * (x @ W) + beta * c +
        bias)``), without materializing the weight: the kernels read its packed codes, scales and
        zeros. ``x``: float16, bfloat16 or float32 activations (..., M, K) of any library (numpy's
        rules: a batch of x multiplies the one weight); ``qweight``: a `QuantizedWeight` (K, N)
        (`gemm_engine.quantize`, `from_gptq`, `from_awq`). The result has x's dtype unless
        ``out_dtype`` says otherwise. The weights reach tensor-core kernels rounded once to x's
        16-bit type (register-FMA kernels use them exactly); the sums are float32."""
        if not isinstance(qweight, QuantizedWeight):
            raise TypeError(f"quantized_matmul: qweight must be a QuantizedWeight (gemm_engine.quantize), got "
                            f"{type(qweight).__name__}")
        return self.matmul(x, qweight, out=out, alpha=alpha, beta=beta, c=c, bias=bias, bias_axis=bias_axis,
                           activation=activation, out_dtype=out_dtype, casting=casting, algorithm=algorithm)

    def _call(self, a, b, out, c, bias, scale_a, scale_b, mul, options: CallOptions, plain: bool, algorithm,
              tune: bool, call_key):
        """The general path: every step of the module docstring, in order."""
        rt = self.runtime
        arrays = import_call(rt, a, b, out=out, c=c, bias=bias, scale_a=scale_a, scale_b=scale_b, mul=mul)
        rules = numpy_rules.apply(arrays, options.out_dtype, options.casting, options.beta, plain,
                                  activation=resolve_activation(options.activation))
        request = make_request(arrays, rules, options, plain)
        if tune and arrays.quantized:
            raise ValueError("matmul: tune=True does not time quantized weights yet (name an algorithm, or let "
                             "auto choose)")
        if algorithm is not None:
            self.resolve(algorithm)   # an unknown name fails even when there is nothing to compute
        if request.shape.empty:
            return without_kernel(rt, arrays, request)
        with rt.on_stream(arrays.stream):
            prepared = prepare(rt, arrays, request)
            if algorithm is None and tune:
                self.tune(prepared.problem)
            try:
                plan = self.plan_for(prepared.problem, algorithm)
            except SetupError as refused:
                if not request.epilogue.block_scales:
                    raise
                # No kernel applies these block scales: the operands are dequantized first.
                arrays, request = dequantized(rt, arrays, request)
                prepared, call_key = prepare(rt, arrays, request), None
                try:
                    plan = self.plan_for(prepared.problem, algorithm)
                except SetupError:
                    raise refused from None   # the reason the named algorithm gave for the scaled problem
            args, target = build_arguments(rt, arrays, prepared)
            values = args.values(rt.ptr_arg)
            self.launcher.run(plan, values)
            rt.after_launch(target.array, arrays.device_arrays)
            self.last_choice = (plan.algorithm, plan.config)
            remember(self.fast, call_key, plan, args, values, arrays, prepared, target)
            return finish(rt, arrays, request, target)

    @grouped_doc("on this engine's device, by one generated kernel")
    def grouped_matmul(self, a, b, *, offsets=None, counts=None, out=None, alpha=1.0, beta=None, c=None, bias=None,
                       bias_axis=-1, activation=None, row_scale=None, out_dtype=None, casting="same_kind",
                       algorithm=None, precision=None, scale_a=None, scale_b=None):
        args = (out, alpha, beta, c, bias, bias_axis, activation, row_scale, out_dtype, casting, scale_a, scale_b)
        if torch_op_wanted(a, b, (offsets, counts, c, bias, row_scale)):   # autograd, torch.compile, autocast
            from .torch.quantized_route import routed_any_grouped
            return routed_any_grouped(self, a, b, offsets, counts, algorithm, precision, *args)
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and any(map(torch_op_wanted, a, b)):
            from .torch.grouped import routed_list      # one product per pair, each with its gradient
            return routed_list(self, a, b, offsets, counts, precision, *args)
        return self.run_grouped(a, b, offsets, counts, algorithm, precision, *args)

    def run_grouped(self, a, b, offsets, counts, algorithm, precision, out, alpha, beta, c, bias, bias_axis,
                    activation, row_scale, out_dtype, casting, scale_a, scale_b):
        """`grouped_matmul` with its arguments in order, without the torch routing (what its op runs)."""
        if self._generation != generation():
            self._forget_plans()
        precision = self.precision if precision is None else precision
        algorithm = "grouped" if algorithm is None else algorithm
        if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
            named = dict(offsets=offsets, counts=counts, c=c, bias=bias, row_scale=row_scale, scale_a=scale_a,
                         scale_b=scale_b, beta=beta)
            given = tuple(name for name, value in named.items() if value is not None)
            options = CallOptions(alpha, None, bias_axis, activation, out_dtype, casting, precision)
            return self._grouped_list(a, b, out, options, algorithm, given)
        if (offsets is None) == (counts is None):
            raise ValueError("grouped_matmul: pass offsets (each group's end: contiguous rows, or the reduction "
                             "with a 2-D b) or counts (masked rows per group), not both or neither")
        extents = ("offsets", offsets, "offsets") if counts is None else ("counts", counts, "masked")
        plain = (c is None and bias is None and activation is None and out_dtype is None and scale_a is None
                 and scale_b is None and beta is None and row_scale is None and type(alpha) in (float, int)
                 and alpha == 1 and casting == "same_kind")
        call_key, found = None, None
        if out is None:   # the fast path: a plain call's key, or a fused one's with every epilogue option
            call_key, found = self.fast.grouped(a, b, extents[1], (extents[2], algorithm, precision) if plain else (
                extents[2], algorithm, precision, bias_axis, activation, out_dtype, casting), None if plain else
                EpilogueInputs(alpha, beta, c, bias, scale_a, scale_b, None, row_scale))
        if found is not None:
            self.last_choice = (found[1].algorithm, found[1].config)
            return found[0]
        options = CallOptions(alpha, beta, bias_axis, activation, out_dtype, casting, precision)
        arrays = import_call(self.runtime, a, b, out=out, c=c, bias=bias, scale_a=scale_a, scale_b=scale_b,
                             groups=extents[:2], row_scale=row_scale)
        rules = numpy_rules.apply(arrays, options.out_dtype, options.casting, options.beta, plain, extents[2], activation)
        request = make_request(arrays, rules, options, plain)
        self.resolve(algorithm)
        if 0 in request.shape.out_shape:
            return without_kernel(self.runtime, arrays, request)
        return self._launch(arrays, request, algorithm, call_key)

    def _grouped_list(self, a, b, out, options: CallOptions, algorithm, given: tuple):
        """A list-layout grouped call: the steps of `grouped_matmul`, each group its own sizes."""
        rt = self.runtime
        arrays = import_list(rt, a, b, out)
        sizes, types = numpy_rules.list_rules(arrays, options.out_dtype, options.casting, options.activation)
        request = make_list_request(arrays, sizes, types, options, given)
        self.resolve(algorithm)
        with rt.on_stream(arrays.stream):
            prepared = prepare_list(rt, arrays, request)
            plan = self.plan_for(prepared.problem, algorithm)
            args, target = build_arguments(rt, arrays, prepared)
            self.launcher.run(plan, args.values(rt.ptr_arg))
            rt.after_launch(target.array, arrays.device_arrays)
            self.last_choice = (plan.algorithm, plan.config)
            return finish_list(rt, arrays, request, target)

    def _launch(self, arrays, request, algorithm, call_key=None):
        """Steps 4-8 of a grouped call (prepare, choose, plan, arguments and launch, deliver);
        ``call_key``: where its call plan goes for the fast path (`FastPath.grouped`), or None."""
        rt = self.runtime
        with rt.on_stream(arrays.stream):
            prepared = prepare(rt, arrays, request)
            try:
                plan = self.plan_for(prepared.problem, algorithm)
            except SetupError as refused:
                if not request.epilogue.block_scales:
                    raise
                arrays, request = dequantized(rt, arrays, request)     # as matmul: no kernel applies them
                prepared, call_key = prepare(rt, arrays, request), None
                try:
                    plan = self.plan_for(prepared.problem, algorithm)
                except SetupError:
                    raise refused from None
            args, target = build_arguments(rt, arrays, prepared)
            values = args.values(rt.ptr_arg)
            self.launcher.run(plan, values)
            rt.after_launch(target.array, arrays.device_arrays)
            self.last_choice = (plan.algorithm, plan.config)
            remember(self.fast, call_key, plan, args, values, arrays, prepared, target)
            return finish(rt, arrays, request, target)

    def _forget_plans(self) -> None:
        """Drop what was cached under the registries' old meaning (a name re-registered: compose/registry.py)."""
        with self._lock:
            self._generation = generation()
            self._calls.clear()
            self._chosen.clear()
            self._resolved.clear()
            self._tuned.clear()
            self.planner.clear()

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
        """The `Choice` a call of ``problem`` makes (see call/choose.py); ``trace``: every alternative's verdict."""
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
            if self.planner.may_stand_in(choice.source):
                standing = self.planner.stand_in(choice.algorithm, problem, choice.config)
                if standing is not None:
                    return standing            # not kept: the call after the build plans again
            found = self.planner.plan(choice.algorithm, problem, choice.config)
            if key is not None:
                with self._lock:
                    self._chosen[key] = found
                    if len(self._chosen) > CHOSEN_MAX:
                        self._chosen.pop(next(iter(self._chosen)))
        return found

    def wait_for_compiles(self, timeout: float | None = None) -> bool:
        """Wait for the background builds (``background_compile``): whether all ended in ``timeout`` s."""
        return self.planner.builds.wait(timeout)

    def plan(self, problem: MatmulProblem, algorithm=None) -> tuple[Algorithm, KernelConfig, str]:
        """(algorithm, config, source) the engine would use for ``problem``; nothing is launched
        or compiled. The default algorithm is chosen as `matmul` chooses it (tuned, else "auto")."""
        choice = self.choose(problem, algorithm)
        return choice.algorithm, choice.config, render(choice.algorithm, choice.config, self.dialect)

    def problem_for(self, a, b, *, precision=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1,
                    activation=None, out_dtype=None) -> MatmulProblem:
        """The `MatmulProblem` ``matmul(a, b, ...)`` configures its kernels for (every check of the call
        runs; host operands move to the device as a call's do); ValueError: nothing to multiply (K = 0...)."""
        precision = self.precision if precision is None else precision
        return problem_of_call(self.runtime, a, b, precision, alpha, beta, c, bias, bias_axis, activation, out_dtype)

    def explain(self, a, b=None, *, algorithm=None, precision=None, **options):
        """Why ``matmul(a, b, algorithm=algorithm, ...)`` runs what it runs, without running it:
        the chosen algorithm and its full config, where the choice came from (the caller, the
        tuning cache or the heuristic), and for every other registered algorithm the setup error
        that refuses it or the rule that ranks it lower. ``a`` may also be a `MatmulProblem`
        (``b`` then None). ``str()`` of the result is a readable report."""
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
            self._tuning_cache = TuningCache()
        return self._tuning_cache

    def tuned_algorithm(self, problem: MatmulProblem) -> Algorithm | None:
        """The tuning cache's algorithm for ``problem``'s class, or None (no entry, or disabled)."""
        if not self.use_tuning_cache:
            return None
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
