"""Where the host time of a repeated small ``engine.matmul`` on CUDA device arrays goes:
microseconds per call of the engine (on CuPy arrays and on torch tensors of the same memory),
cupy.matmul and torch.matmul, then of each step of the
per-call path on the same plan, outermost first, then of grouped calls (a small MoE layer's, plain
and fused, dense and int4 experts, fast and general path), then (``--profile``) a cProfile of the
engine's calls (tottime, top 25).

    python3 bench/per_call_overhead.py [--size 64] [--dtype float16] [--calls 20000] [--profile]

The table goes to bench/results/<device>/per_call_steps.md (bench/current_tables.py).

Steps (all public pieces: `Engine.plan_for`, `CallPlan.pack`, `Launcher.run` / `run_packed`,
`CudaRuntime.launch_converted` / `prepare_launch`, `DriverLauncher`): packing a call's arguments by
the plan's signature, the whole launch step, a packed launch, the runtime's launch, the driver
launcher (cuLaunchKernel with a reusable parameter block), the prepared launch of a cached plan
(three addresses written), cuLaunchKernel alone, and CuPy's Function call for comparison. Each row
is host time per call over ``--calls`` back-to-back calls (the GPU runs the kernels meanwhile).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.views import OperandView  # noqa: E402
from gemm_engine.call.arguments import ArrayArgument, CallArguments, output_argument  # noqa: E402
from gemm_engine.call.launch import CallPlan  # noqa: E402
from gemm_engine.problem import Layout  # noqa: E402

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import current_tables  # noqa: E402


def us(fn, calls):
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def steps(eng, a, b, calls):
    """{row name: microseconds per call} of the per-call path's pieces for ``a @ b``."""
    import torch
    rt, launcher, cp = eng.runtime, eng.launcher, eng.runtime.cp
    n = a.shape[0]
    problem = eng.problem_for(a, b)
    plan = eng.plan_for(problem)
    out = cp.empty((n, n), a.dtype)
    view = OperandView(Layout.ROW, n, n * n)
    operand = (("ld", view.ld), ("batch_stride", view.batch_stride))
    arguments = CallArguments(ArrayArgument(a, operand), ArrayArgument(b, operand), output_argument(out, problem),
                              problem.m, problem.n, problem.k, problem.batch)
    values = arguments.values(rt.ptr_arg)
    args = plan.signature.pack(launcher.with_workspace(plan, values))
    call = CallPlan.make(plan, values, arguments.per_call_names(), out.shape, out.dtype, arguments.fused)
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    rows = {
        "engine.matmul": us(lambda: eng.matmul(a, b), calls),
        "engine.matmul (torch tensors)": us(lambda: eng.matmul(ta, tb), calls),
        "cupy.matmul": us(lambda: cp.matmul(a, b), calls),
        "torch.matmul": us(lambda: torch.matmul(ta, tb), calls),
        "CallPlan.pack (addresses only)": us(lambda: call.pack(launcher, a, b, out, None, rt.ptr_arg), calls),
        "KernelSignature.pack (every value)": us(lambda: plan.signature.pack(values), calls),
        "Launcher.run (pack + launch)": us(lambda: launcher.run(plan, values), calls),
        "Launcher.run_packed": us(lambda: launcher.run_packed(plan, args), calls),
    }
    if len(plan.launches) != 1:
        print(f"{plan.algorithm.name} runs {len(plan.launches)} kernels: launch steps of the first only")
    launch = plan.launches[0]
    kernel, cubes, units, shared = launch.kernel, launch.cubes, launch.units, launch.shared_bytes
    co = launch.co_resident      # a split tail's kernel: a cooperative launch on every path below
    rows["runtime.launch_converted"] = us(lambda: rt.launch_converted(kernel, cubes, units, args, shared, co), calls)
    dl = rt.driver_launch
    if dl is not None:
        from gemm_engine.runtime.cuda_launch import ParamBlock
        rows["DriverLauncher call"] = us(lambda: dl(kernel, cubes, units, args, shared, co), calls)
        positions = plan.signature.positions(("lhs_base", "rhs_base", "out_base"))
        prepared = rt.prepare_launch(kernel, cubes, units, args, shared, positions, co)
        rows["prepared launch (3 addresses)"] = us(lambda: prepared(a, b, out), calls)
    if dl is not None and not co and not any(isinstance(x, bytes) for x in args):   # plain, no by-value structure
        nd = cp.ndarray
        slots = [x.data.ptr if type(x) is nd else int(x) for x in args]
        block = ParamBlock(len(args))
        block.slots[:] = slots
        fn, stream = dl.function(kernel), cp.cuda.get_current_stream().ptr
        rows["refill a parameter block"] = us(lambda: block.slots.__setitem__(
            slice(None), [x.data.ptr if type(x) is nd else int(x) for x in args]), calls)
        rows["cuLaunchKernel alone"] = us(lambda: dl.launch_kernel(fn, cubes, 1, 1, units, 1, 1, shared, stream,
                                                                   block.address, 0), calls)
    if dl is None:
        print("CuPy exposes no cuLaunchKernel here: the driver launcher rows are left out")
    if not co:     # CuPy's Function call launches plainly
        rows["CuPy Function call"] = us(lambda: kernel((cubes,), (units,), args, shared_mem=shared), calls)
    rows["cupy.empty"] = us(lambda: cp.empty((n, n), a.dtype), calls)
    rows["get_current_stream().ptr"] = us(lambda: cp.cuda.get_current_stream().ptr, calls)
    rows["runtime.getDevice"] = us(lambda: cp.cuda.runtime.getDevice(), calls)
    cp.cuda.get_current_stream().synchronize()
    return plan, rows


def grouped_rows(eng, calls: int) -> dict:
    """{row: us per call} of repeated grouped calls on torch tensors (a small MoE layer: 8 experts,
    64 tokens, 256 -> 512, bf16; the experts dense or int4 group 128): plain and fused (a
    per-expert bias, the routing weights as ``row_scale``), on the fast path and, for comparison,
    through the general path (the fast path's plans dropped before each call)."""
    import torch
    e, t, k, n = 8, 64, 256, 512
    dev = torch.device("cuda", eng.runtime.device_index)
    x = torch.randn(t, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(e, k, n, device=dev, dtype=torch.bfloat16)
    q = gemm_engine.quantize(w.float().cpu().numpy(), "int4", 128, False)
    offs = torch.tensor(np.cumsum(np.random.default_rng(0).multinomial(t, np.ones(e) / e)), dtype=torch.int32,
                        device=dev)
    bias, scale = torch.randn(e, n, device=dev, dtype=torch.bfloat16), torch.rand(t, device=dev)
    calls = min(calls, 2000)
    cases = {"dense experts": (w, {}), "dense experts, bias + row_scale": (w, dict(bias=bias, row_scale=scale)),
             "int4 experts": (q, {}), "int4 experts, row_scale": (q, dict(row_scale=scale))}
    rows = {}
    for name, (weights, terms) in cases.items():
        def call():
            return eng.grouped_matmul(x, weights, offsets=offs, **terms)
        rows[f"grouped_matmul (torch, {name})"] = us(call, calls)
        rows[f"grouped_matmul (torch, {name}), general path"] = us(lambda: (eng.fast.plans.clear(), call()),
                                                                    max(1, calls // 10))
    torch.cuda.synchronize()
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=64, help="M = N = K")
    ap.add_argument("--dtype", default="float16", help="float16, float32 (bfloat16 needs CuPy's ml_dtypes support)")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--profile", action="store_true", help="then a cProfile of engine.matmul calls")
    current_tables.add_arguments(ap, "per_call_steps")
    args = ap.parse_args(argv)
    command = current_tables.command_line("per_call_overhead.py", sys.argv[1:] if argv is None else argv)
    eng = gemm_engine.Engine("cuda", background_compile=False)   # the chosen kernel, not a stand-in
    cp = eng.runtime.cp
    rng = np.random.default_rng(0)
    a = cp.asarray(rng.random((args.size, args.size)).astype(args.dtype))
    b = cp.asarray(rng.random((args.size, args.size)).astype(args.dtype))
    plan, rows = steps(eng, a, b, args.calls)
    rows.update(grouped_rows(eng, args.calls))
    text = "\n".join([f"Host microseconds per call, {args.size}^3 {args.dtype} ({plan.algorithm.name}, "
                      f"{len(plan.launches)} kernel(s)), {args.calls} back-to-back calls a row.", "",
                      "| step | us |", "|---|---|"] + [f"| {k} | {v:.2f} |" for k, v in rows.items()]) + "\n"
    print(text)
    current_tables.write(args, eng.device.name, "per-call host time, step by step (bench/per_call_overhead.py)",
                         command, text)
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            eng.matmul(a, b)
        prof.disable()
        cp.cuda.get_current_stream().synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
