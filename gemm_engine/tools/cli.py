"""Command line: ``gemm-engine`` (or ``python -m gemm_engine``) with sub-commands

  info     backends, devices, capabilities, cache locations
  run      one matmul checked against numpy, with the choice, error, time and TFLOP/s
  explain  which algorithm a problem gets and why the others do not
  source   the generated kernel source for a problem and algorithm (CUDA or OpenCL)
  bench    the benchmark suite (gemm_engine/benchsuite), a table, JSON, markdown, a PNG plot
  tune     tune problems into the persistent tuning cache, with a progress bar
  warmup   compile ahead the kernels of shapes or of a model's layers, in parallel

Every sub-command has ``--help``. With no sub-command, ``run`` runs with its defaults.

Exit status: 0 done; 1 a result failed its check (or a tuned problem failed); 2 a usage or set-up
error, told in one line (bad option, unknown algorithm, a refused composition, a backend that
cannot run here); 130 interrupted. ``GEMM_ENGINE_TRACEBACK=1`` shows the traceback behind a one-line
error.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ..dtypes import FP8_NAMES
from .cli_types import (DTYPE_ALIASES, DTYPE_NAMES, arch, count, counts, dtype_and_precision, dtype_name,
                        dtype_names, layout_pair, numpy_dtype, shapes)
from ..errors import GemmEngineError, SetupError
from .cli_info import info

TOLERANCE = {"float64": 1e-12, "float32": 2e-5, "float16": 2e-3, "bfloat16": 1.5e-2,
             "int8": 0.0}   # int8 @ int8 -> int32 is exact
# fp8 @ fp8 -> float32 from the exact fp8 values, accumulated in float32.
TOLERANCE.update({name: 2e-5 for name in FP8_NAMES})
TF32_TOLERANCE = 5e-3
BACKENDS = ("auto", "cuda", "opencl")


# -- problem options shared by run, explain, source and tune ----------------------------------------
def _add_problem(p, m=1024, n=1024, k=1024):
    p.add_argument("--m", type=count, default=m, help=f"rows of a and of the result (default {m})")
    p.add_argument("--n", type=count, default=n, help=f"columns of b and of the result (default {n})")
    p.add_argument("--k", type=count, default=k, help=f"the reduced dimension (default {k})")
    p.add_argument("--batch", type=count, default=1, help="batch count (default 1: a 2-D product)")
    p.add_argument("--dtype", type=dtype_name, default="float32", metavar="DTYPE",
                   help=f"{', '.join(DTYPE_NAMES)} (tf32: float32 with --precision tf32), or a short "
                        f"name ({', '.join(DTYPE_ALIASES)}); default float32")
    p.add_argument("--precision", choices=("default", "tf32"), default="default",
                   help="tf32 lets float32 run on tensor cores (CUDA sm_80+)")
    p.add_argument("--layouts", type=layout_pair, default="row,row", metavar="LHS,RHS",
                   help="memory layout of a and b: row or col each (default row,row)")


def _layouts(args):
    return args.layouts


def _layouts_text(args) -> str:
    return ",".join(layout.value for layout in args.layouts)


def _problem(args, m=None, n=None, k=None, batch=None, dtype=None):
    from ..call.prepare import dense_problem
    lhs, rhs = _layouts(args)
    name, precision = dtype_and_precision(dtype or args.dtype, args.precision)
    return dense_problem(batch or args.batch, m or args.m, n or args.n, k or args.k,
                         numpy_dtype(name), precision=precision, lhs_layout=lhs, rhs_layout=rhs)


def _operands(args, rng):
    """Random host operands in the layouts asked for (a column-major operand is a transposed view)."""
    from ..problem import Layout
    dtype = numpy_dtype(args.dtype)
    lead = (args.batch,) if args.batch > 1 else ()
    out = []
    for layout, rows, cols in zip(_layouts(args), (args.m, args.k), (args.k, args.n)):
        shape = lead + ((rows, cols) if layout is Layout.ROW else (cols, rows))
        x = (rng.integers(-128, 128, shape, dtype=dtype) if dtype.kind == "i"
             else rng.standard_normal(shape).astype(dtype))
        out.append(x if layout is Layout.ROW else np.swapaxes(x, -1, -2))
    return out


# -- run --------------------------------------------------------------------------------------------
def run(args) -> int:
    from ..engine import Engine

    # No stand-in: the checked and reported kernel must be the one timed (call/plan.py `stand_in`).
    engine = Engine(args.backend, background_compile=False)
    a, b = _operands(args, np.random.default_rng(args.seed))
    algorithm = args.algorithm
    kw = {"algorithm": algorithm, "precision": args.precision, "tune": args.tune}
    result = engine.matmul(a, b, **kw)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    err = float(np.linalg.norm(result.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-300))
    alg, cfg = engine.last_choice
    source = "caller" if algorithm else engine.explain(engine.problem_for(a, b, precision=args.precision)).source

    # Time on device arrays (same layouts) so host transfers stay out of the number.
    from ..runtime.timing import device_time
    rt = engine.runtime
    try:
        da, db = (_on_device(rt, x) for x in (a, b))
    except Exception:   # noqa: BLE001 -- a dtype the device library lacks: time the host call
        da, db = a, b
    seconds = device_time(rt, lambda: engine.matmul(da, db, **kw), repeat=args.repeat, warmup=2)
    flops = 2.0 * max(args.batch, 1) * args.m * args.n * args.k
    tol = TF32_TOLERANCE if args.precision == "tf32" else TOLERANCE[args.dtype]
    ok = err <= tol
    print(f"backend    {engine.backend}")
    print(f"device     {engine.device.name}")
    print(f"algorithm  {alg.name}  (from the {source}; {_config_line(cfg)})")
    print(f"problem    batch={max(args.batch, 1)} m={args.m} n={args.n} k={args.k} dtype={args.dtype}"
          f" precision={args.precision} layouts={_layouts_text(args)}")
    if args.precision == "tf32" and not _runs_tf32(cfg):
        # precision="tf32" allows tensor cores; without them (OpenCL, pre-sm_80) float32 stays exact.
        print(f"note       precision=tf32 allows tf32 tensor cores, which {alg.name} on {engine.backend} "
              "does not use: this ran exact float32")
    print(f"rel error  {err:.3e}  (tolerance {tol:.1e}: {'OK' if ok else 'FAILED'})")
    print(f"time       {seconds * 1e3:.4f} ms (median of {args.repeat})")
    print(f"TFLOP/s    {flops / seconds / 1e12:.3f}")
    return 0 if ok else 1


def _runs_tf32(cfg) -> bool:
    """Whether a kernel config multiplies on tf32 tensor cores (a tile of kind "tf32" anywhere in it)."""
    if getattr(cfg, "kind", None) == "tf32":
        return True
    fields = getattr(cfg, "__dataclass_fields__", {})
    return any(_runs_tf32(getattr(cfg, f)) for f in fields if hasattr(getattr(cfg, f), "__dataclass_fields__"))


def _on_device(rt, x):
    """``x`` on the device with the same layout: a column-major view moves as its row-major base
    and is transposed there (a view, not a copy)."""
    if x.flags.c_contiguous:
        return rt.to_device(x)
    base = rt.to_device(np.ascontiguousarray(np.swapaxes(x, -1, -2)))
    axes = list(range(x.ndim))
    axes[-2:] = axes[-1], axes[-2]
    return base.transpose(axes)     # (CuPy and PyOpenCL arrays both have transpose(axes))


def _config_line(cfg) -> str:
    from ..explain import summary
    return summary(cfg)


# -- explain / source -----------------------------------------------------------------------------
def explain(args) -> int:
    from ..engine import Engine
    engine = Engine(args.backend)
    print(engine.explain(_problem(args), algorithm=args.algorithm))
    return 0


def source(args) -> int:
    """Render without a GPU when asked for a CUDA arch (--arch): a nominal device of that arch."""
    if args.arch:
        from ..codegen.dialect import dialect_for
        from .source import nominal_device
        from .source import source as render_source
        problem = _problem(args)
        text = render_source(args.algorithm or "auto", problem, arch=args.arch)
        from ..call.choose import ChoicePolicy
        choice = ChoicePolicy(dialect_for(nominal_device("cuda", args.arch)), lambda p: None).choose(
            problem, args.algorithm or "auto")
        alg, cfg = choice.algorithm, choice.config
    else:
        from ..engine import Engine
        engine = Engine(args.backend)
        alg, cfg, text = engine.plan(_problem(args), args.algorithm)
    print(f"// {alg.name}: {_config_line(cfg)}", file=sys.stderr)
    sys.stdout.write(text)
    return 0


def _tune_sizes(args, engine) -> tuple[int, int, int]:
    """--m/--n/--k, each defaulting to a size worth tuning on the device: 4096 on a GPU, 512 on a
    CPU OpenCL device (where 4096^3 takes minutes a call)."""
    default = 512 if engine.runtime.is_cpu else 4096
    return tuple(default if v is None else v for v in (args.m, args.n, args.k))


# -- tune -----------------------------------------------------------------------------------------
def tune(args) -> int:
    from ..engine import Engine
    from ..tuning import TuningCache

    if args.clear:
        TuningCache().clear()
        print(f"cleared {TuningCache().path}")
        return 0
    engine = Engine(args.backend)
    if args.list:
        cache = engine.tuning_cache
        for key in cache.keys():
            e = cache.get(key)
            print(f"{key}\n    {e.algorithm if e else '(stale entry)'}  "
                  f"{'' if e is None else f'{e.seconds * 1e3:.4f} ms  {e.selection!r}'}")
        count = len(cache.keys())
        print(f"{count} {'entry' if count == 1 else 'entries'} in {cache.path} ({cache.status})")
        return 0
    problems = []
    if args.suite:
        from .benchsuite import rows_for
        for row in rows_for(args.suite, args.dtypes):
            args.precision = row.precision
            problems.append((f"{row.name} {row.label}", _problem(args, row.m, row.n, row.k, row.batch, row.dtype)))
    else:
        dtypes = args.dtypes or [args.dtype]
        sizes = args.shapes or [(args.batch, *_tune_sizes(args, engine))]
        for dt in dtypes:
            for batch, m, n, k in sizes:
                problems.append((f"{batch}x{m}x{n}x{k} {dt}", _problem(args, m, n, k, batch, dt)))
    status = 0
    for i, (label, problem) in enumerate(problems, 1):
        print(f"[{i}/{len(problems)}] {label}", flush=True)
        try:
            # The bar only on a terminal (None: the tuner asks stderr), never into a log.
            result = engine.tune(problem, force=args.force, progress=False if args.quiet else None,
                                 repeat=args.repeat, exhaustive=args.exhaustive)
        except Exception as exc:   # noqa: BLE001 -- one problem's failure is reported, the rest go on
            print(f"    failed: {type(exc).__name__}: {exc}")
            status = 1
            continue
        print(str(result) if args.verbose else f"    best {result.best}"
              + ("  (already in the cache)" if result.from_cache else ""))
    print(f"tuning cache: {engine.tuning_cache.path}")
    return status


# -- warmup ---------------------------------------------------------------------------------------
#: Models whose decoder-layer shapes `warmup --model` knows (compile_ahead.py).
MODELS = ("llama3-8b",)


def warmup(args) -> int:
    from ..compile_ahead import LLAMA3_8B, warmup as compile_ahead
    from ..engine import Engine

    if bool(args.shapes) == bool(args.model):
        raise ValueError("warmup: give --shapes or --model (one of them)")
    if args.model and "tf32" in args.dtypes:
        raise ValueError("warmup --model: a model's layers run in their weights' dtype; tf32 is a precision, "
                         "give --shapes for it")
    engine, status = Engine(args.backend), 0
    for dtype in args.dtypes:
        what = list(LLAMA3_8B) if args.model else [_problem(args, m, n, k, b, dtype) for b, m, n, k in args.shapes]
        report = compile_ahead(what, dtype=dtype, tokens=args.tokens, training=args.training, engine=engine,
                               workers=args.workers)
        print(f"{dtype}: {report}")
        status = status or (1 if report.refused else 0)
    return status


# -- info -----------------------------------------------------------------------------------------
# -- parser ---------------------------------------------------------------------------------------
def _add_import(p):
    p.add_argument("--import", dest="imports", action="append", metavar="MODULE",
                   help="import MODULE first (e.g. one that registers your own algorithm); repeatable")


class _Parser(argparse.ArgumentParser):
    """argparse's parser with its mistakes told in one line, as the engine's own errors are (argparse
    prints its whole usage block first): ``gemm-engine run: error: argument --m: ... (--help ...)``.
    Sub-command parsers are made of this class too (add_subparsers takes the parent's)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog="gemm-engine", description=__doc__.split("\n\n")[0],
                  formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    sub = top.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("info", help="backends, devices, capabilities, cache locations")
    p.set_defaults(func=info)

    p = sub.add_parser("run", help="one matmul checked against numpy, with its speed")
    _add_problem(p)
    p.add_argument("--algorithm", default=None, help="registered algorithm name (default: the engine's choice)")
    _add_import(p)
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    p.add_argument("--tune", action="store_true", help="tune the problem first when the cache has no entry")
    p.add_argument("--repeat", type=count, default=10, help="timed calls (median)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)

    p = sub.add_parser("explain", help="which algorithm a problem gets, and why not the others")
    _add_problem(p)
    p.add_argument("--algorithm", default=None)
    _add_import(p)
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    p.set_defaults(func=explain)

    p = sub.add_parser("source", help="print the generated kernel source for a problem")
    _add_problem(p)
    p.add_argument("--algorithm", default=None, help="registered algorithm name (default: the engine's choice)")
    p.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="the device whose dialect renders it (ignored with --arch)")
    p.add_argument("--arch", type=arch, default=None,
                   help="render CUDA for this architecture without a GPU, e.g. sm_80 or sm_90")
    _add_import(p)
    p.set_defaults(func=source)

    p = sub.add_parser("bench", help="the benchmark suite: table, --json, --md, --plot")
    from .benchsuite import add_arguments
    add_arguments(p)
    p.set_defaults(func=_bench)

    p = sub.add_parser("tune", help="tune problems into the persistent tuning cache")
    _add_problem(p, None, None, None)
    p.add_argument("--shapes", type=shapes, help="comma list of MxNxK or BxMxNxK (default: --batch/--m/--n/--k)")
    p.add_argument("--dtypes", type=dtype_names, metavar="DTYPES",
                   help="comma list of dtypes, named as --dtype (default: --dtype)")
    p.add_argument("--suite", choices=("smoke", "quick", "full"), help="tune the benchmark suite's rows instead")
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    p.add_argument("--force", action="store_true", help="tune again problems the cache already has")
    p.add_argument("--exhaustive", action="store_true", help="time every registered algorithm")
    _add_import(p)
    p.add_argument("--repeat", type=count, default=10, help="timed calls per candidate (median)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (it is drawn only on a terminal anyway)")
    p.add_argument("--verbose", action="store_true", help="print every candidate's time")
    p.add_argument("--list", action="store_true", help="list the cache's entries and stop")
    p.add_argument("--clear", action="store_true", help="delete the tuning cache file and stop")
    p.set_defaults(func=tune)

    p = sub.add_parser("warmup", help="compile ahead the kernels of shapes or a model's layers (in parallel; the "
                                      "binaries stay on disk for later processes)")
    _add_problem(p, None, None, None)
    p.add_argument("--shapes", type=shapes, help="comma list of MxNxK or BxMxNxK")
    p.add_argument("--model", choices=MODELS, help="one decoder layer's linear layers (forward: x @ W.T, "
                                                   "bias and activation fused), at each of --tokens")
    p.add_argument("--tokens", type=counts, default=(1, 16, 128, 2048), metavar="M,M,...",
                   help="token counts (M) of --model's layers (default 1,16,128,2048)")
    p.add_argument("--training", action="store_true", help="the backward products of --model's layers too")
    p.add_argument("--dtypes", type=dtype_names, default=["bfloat16"], metavar="DTYPES",
                   help="comma list of dtypes, named as --dtype (default bfloat16)")
    p.add_argument("--workers", type=count, default=None, help="compiler threads (default: one per CPU)")
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    _add_import(p)
    p.set_defaults(func=warmup)
    return top


def _bench(args) -> int:
    from .benchsuite import run_from_args
    return run_from_args(args)


def _imports(args) -> None:
    """``--import MODULE``: modules that register user algorithms (``gemm_engine.register``)."""
    import importlib
    for name in getattr(args, "imports", None) or ():
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())    # a module beside the caller, as `python -m` finds it
        try:
            importlib.import_module(name)
        except Exception as exc:    # noqa: BLE001 -- whatever the user's module raised, in one line
            raise ImportError(f"--import {name}: {type(exc).__name__}: {exc}") from exc


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv or ["run"])
    if args.command is None:
        parser().print_help()
        return 2
    if getattr(args, "dtype", None):    # "tf32" names float32 data with precision="tf32"
        args.dtype, args.precision = dtype_and_precision(args.dtype, args.precision)
    try:
        _imports(args)
        return args.func(args)
    except KeyboardInterrupt:
        print(f"\ngemm-engine {args.command}: interrupted", file=sys.stderr)
        return 130
    except _ONE_LINE as exc:
        if os.environ.get("GEMM_ENGINE_TRACEBACK"):
            raise
        print(f"gemm-engine {args.command}: {_one_line(exc)}", file=sys.stderr)
        return 2


#: What a command reports in one line (exit 2) rather than a traceback: the engine's own errors
#: (a refused composition, a backend that cannot run here), argument errors the engine raises before
#: any launch (an unknown algorithm name), an --import that fails, a file that cannot be written.
_ONE_LINE = (GemmEngineError, ValueError, TypeError, ImportError, OSError)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, SetupError) and exc.internal:
        return f"{text} (a component raised instead of refusing: a bug; GEMM_ENGINE_TRACEBACK=1 shows where)"
    return text
