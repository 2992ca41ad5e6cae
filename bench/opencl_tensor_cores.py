"""Tensor cores through NVIDIA's OpenCL driver, against cuBLAS on the same GPU in the same run.

On the GPU machine (PyOpenCL carried in .whl/, NVIDIA's ICD named by OCL_ICD_VENDORS, torch for
cuBLAS and the float64 references), in one process:

1. the capability probe (runtime/opencl_probe.py) runs on the NVIDIA OpenCL device: its findings
   (features, and why each other one was refused) head the table;
2. correctness first: the engine's default choice on NVIDIA's OpenCL against a float64 reference
   (relative Frobenius error; int8 exact) over boundary shapes, both layouts of each operand, a
   batch, an epilogue, for f16, bf16, tf32, f32, f64 and int8;
3. the rows: f16 / bf16 4096^3, f32 4096^3 (and tf32), f64 2048^3: the default choice and a few
   tilings of its tuning space, each compiled (the time it took is reported), run once into a
   poisoned output and checked against float64, then timed (median of --repeat, host clock around
   batches of calls: `gemm_engine.runtime.timing`); cuBLAS through torch.matmul timed by CUDA
   events (f32 with TF32 off; the tf32 row with it on);
4. the table goes to bench/results/<device>/opencl_tensor_cores.md (`current_tables`), everything
   to --json. A deadline (--budget seconds) skips the remaining alternatives, never the rows.

    bash ../shared/tools/gpu_machine_wheels.sh           # here: PyOpenCL's wheels into .whl/
    STAGES=opencl bash bench/gpu.sh                      # there, carrying .whl (about 4 minutes)
    STAGES=opencl REPEAT=10 OPENCL_ARGS="--check-budget 60 --budget 110" bash bench/gpu.sh   # under 200 s
"""
from __future__ import annotations

import argparse
import json
import sys
import time

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import numpy as np  # noqa: E402

import current_tables  # noqa: E402
from common import planned_launch, tiling  # noqa: E402

#: (label, dtype, precision, m, n, k, alternatives timed besides the default)
ROWS = [("f16 4096^3", "float16", "default", 4096, 4096, 4096, 3),
        ("bf16 4096^3", "bfloat16", "default", 4096, 4096, 4096, 1),
        ("f32 4096^3", "float32", "default", 4096, 4096, 4096, 3),
        ("tf32 4096^3", "float32", "tf32", 4096, 4096, 4096, 1),
        ("f64 2048^3", "float64", "default", 2048, 2048, 2048, 3)]
#: (batch, m, n, k) of the correctness sweep, and the layouts each runs in.
CHECK_SHAPES = [(1, 1000, 1003, 997), (3, 129, 67, 200), (1, 1, 300, 64), (1, 256, 256, 256), (1, 64, 64, 8192)]
LAYOUTS = [("row", "row"), ("col", "col"), ("row", "col"), ("col", "row")]
CHECK_KINDS = [("float16", "default"), ("bfloat16", "default"), ("float32", "tf32"), ("float32", "default"),
               ("float64", "default"), ("int8", "default")]
TOL = {"float16": 1e-2, "bfloat16": 2e-2, "tf32": 5e-3, "float32": 1e-5, "float64": 1e-12, "int8": 0.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--budget", type=float, default=420.0, help="seconds after which alternatives are skipped")
    ap.add_argument("--check-budget", type=float, default=240.0, help="seconds after which checks are left out")
    ap.add_argument("--rows", default="", help="comma list of row labels' first words (f16,bf16,f32,tf32,f64)")
    ap.add_argument("--no-checks", action="store_true")
    ap.add_argument("--host-clock", action="store_true",
                    help="time by the host clock up to a finish (default: the kernels' OpenCL profiling times)")
    ap.add_argument("--size", type=int, default=0, help="every row at SIZE^3 instead (a dry run on another device)")
    ap.add_argument("--device", default="NVIDIA", help="the OpenCL device ($GEMM_ENGINE_OPENCL_DEVICE's form)")
    ap.add_argument("--json")
    current_tables.add_arguments(ap, "opencl_tensor_cores")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    torch = cuda_torch()
    import gemm_engine
    from gemm_engine.dtypes import bfloat16_dtype
    t0 = time.perf_counter()
    engine = opencl_engine(args.device, profiled=not args.host_clock)
    probe_s = time.perf_counter() - t0
    dev = engine.device
    result = {"device": torch.cuda.get_device_name() if torch else dev.name, "opencl_device": dev.name,
              "baseline": "cuBLAS (torch.matmul)" if torch else "numpy (host BLAS)",
              "command": current_tables.command_line("opencl_tensor_cores.py", sys.argv[1:] if argv is None else argv),
              "timing": "host clock" if args.host_clock else "OpenCL profiling times",
              "features": sorted(dev.features), "refusals": dict(dev.refusals),
              "compute_capability": dev.compute_capability, "engine_start_s": probe_s, "checks": [], "rows": []}
    print(f"OpenCL device {dev.name} (cc {dev.compute_capability}, {dev.max_shared_memory} B local memory), "
          f"dialect {type(engine.dialect).__name__}; engine start with the probe {probe_s:.2f} s")
    print(f"features: {', '.join(sorted(dev.features)) or 'none'}")
    for f, why in dev.refusals:
        print(f"refused {f}: {why}")
    ctx = Context(engine, torch, bfloat16_dtype(), np.random.default_rng(0))

    if not args.no_checks:
        cases = [(shape, dtype, precision, layouts) for dtype, precision in CHECK_KINDS for shape in CHECK_SHAPES
                 for layouts in check_layouts(dtype, shape)]
        cases.append(((1, 300, 200, 100), "float16", "default", ("row", "row")))
        for i, (shape, dtype, precision, layouts) in enumerate(cases):
            if time.perf_counter() - t_start > args.check_budget:
                result["checks_skipped"] = len(cases) - i
                print(f"checks: {len(cases) - i} left out (past --check-budget {args.check_budget:.0f} s)")
                break
            result["checks"].append(ctx.check(shape, dtype, precision, layouts, epilogue=i == len(cases) - 1))
        bad = [c for c in result["checks"] if not c["ok"]]
        print(f"checks: {len(result['checks']) - len(bad)} ok, {len(bad)} failed")
        save(args.json, result)
        for c in bad:
            print(f"  FAILED {c}")

    wanted = {w.strip() for w in args.rows.split(",") if w.strip()}
    for label, dtype, precision, m, n, k, alternatives in ROWS:
        if wanted and label.split()[0] not in wanted:
            continue
        late = time.perf_counter() - t_start > args.budget
        if args.size:
            label, m, n, k = f"{label.split()[0]} {args.size}^3", args.size, args.size, args.size
        row = ctx.row(label, dtype, precision, m, n, k, 0 if late else alternatives, args.repeat,
                      deadline=t_start + args.budget)
        result["rows"].append(row)
        print(row_line(row))
        save(args.json, result)
    result["seconds"] = time.perf_counter() - t_start
    save(args.json, result)
    table = markdown(result)
    current_tables.write(args, result["device"], "tensor cores through NVIDIA's OpenCL driver", result["command"], table)
    print(table)
    return 0 if all(c["ok"] for c in result["checks"]) and all(r.get("ok", True) for r in result["rows"]) else 1


def save(path, result) -> None:
    """The JSON so far (after the checks and after every row): a run killed by its time limit still
    leaves what it measured."""
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1, default=str)


def opencl_engine(device, profiled: bool = True):
    """The OpenCL engine on ``device``; ``profiled``: on a queue that keeps profiling times, so rows
    are timed by the kernels' own start and end (the device's clock, as cuBLAS's CUDA events are)
    rather than the host's clock up to a finish, which adds each launch's host time."""
    import gemm_engine
    engine = gemm_engine.Engine(backend="opencl", device=device)
    if not profiled:
        return engine
    cl, rt = engine.runtime.cl, engine.runtime
    queue = cl.CommandQueue(rt.context, rt.cl_device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    return gemm_engine.Engine(backend="opencl", queue=queue)


def check_layouts(dtype: str, shape) -> list:
    """Every layout pair where the kernels differ most (f16: ldmatrix with and without .trans; f64:
    DMMA's scalar reads) on the odd and the batched shapes; row/row and col/col of the odd shape for
    the other kinds; row/row elsewhere."""
    if shape[1] == 1000 or shape[0] > 1:
        return LAYOUTS if dtype in ("float16", "float64") else (LAYOUTS[:2] if shape[1] == 1000 else LAYOUTS[:1])
    return LAYOUTS[:1]


def cuda_torch():
    """torch when it has a CUDA device (cuBLAS and the float64 references), else None (numpy's)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


class Context:
    """The engine, torch (cuBLAS and float64 references; numpy without CUDA) and the host data of
    one run."""

    def __init__(self, engine, torch, bf16, rng):
        self.engine, self.torch, self.bf16, self.rng = engine, torch, bf16, rng
        self.rt = engine.runtime

    # -- data ----------------------------------------------------------------------------------------
    def host(self, shape, dtype):
        if dtype == "int8":
            return self.rng.integers(-8, 8, size=shape, dtype=np.int8)
        x = self.rng.uniform(-1, 1, size=shape).astype(np.float32)
        return x.astype(self.bf16 if dtype == "bfloat16" else dtype)

    def reference(self, a, b) -> np.ndarray:
        """float64 a @ b on the GPU (cuBLAS DGEMM), back on the host (numpy without CUDA)."""
        t = self.torch
        if t is None:
            return a.astype(np.float64) @ b.astype(np.float64)
        ta = t.from_numpy(np.ascontiguousarray(a.astype(np.float64))).cuda()
        tb = t.from_numpy(np.ascontiguousarray(b.astype(np.float64))).cuda()
        return (ta @ tb).cpu().numpy()

    @staticmethod
    def error(got, ref) -> float:
        got = got.astype(np.float64)
        if not np.all(np.isfinite(got)):
            return float("inf")
        return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))

    # -- correctness through the frontend (auto), boundary shapes and layouts -------------------------
    def check(self, shape, dtype, precision, layouts, epilogue=False) -> dict:
        batch, m, n, k = shape
        a = self.host((batch, m, k) if layouts[0] == "row" else (batch, k, m), dtype)
        b = self.host((batch, k, n) if layouts[1] == "row" else (batch, n, k), dtype)
        av = a if layouts[0] == "row" else np.swapaxes(a, -1, -2)
        bv = b if layouts[1] == "row" else np.swapaxes(b, -1, -2)
        if batch == 1:
            av, bv = av[0], bv[0]
        opts = {"precision": precision} if precision != "default" else {}
        bias = None
        if epilogue:
            bias = self.host((n,), "float32").astype(dtype)
            opts.update(alpha=0.5, bias=bias, activation="relu")
        entry = {"shape": shape, "dtype": dtype, "precision": precision, "layouts": layouts, "epilogue": epilogue}
        try:
            chosen = self.engine.explain(av, bv, **opts).chosen
            got = np.asarray(self.engine.matmul(av, bv, **opts))
        except Exception as exc:   # noqa: BLE001 -- a failure is a row of the report
            return {**entry, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:400]}
        ref = np.stack([self.reference(av.reshape(-1, m, k)[i], bv.reshape(-1, k, n)[i])
                        for i in range(batch)]).reshape(got.shape)
        if epilogue:
            ref = np.maximum(0.5 * ref + bias.astype(np.float64), 0)
        err = self.error(got, ref)
        tol = TOL["tf32" if precision == "tf32" else dtype]
        ok = err == 0.0 if dtype == "int8" else err <= tol
        return {**entry, "algorithm": chosen, "error": err, "ok": bool(ok)}

    # -- a benchmark row -----------------------------------------------------------------------------
    def candidates(self, problem, alternatives: int):
        """(name, algorithm instance) of the default choice and up to ``alternatives`` other tilings
        of its tuning space (the first ones: the rule's own candidates)."""
        choice = self.engine.choose(problem)
        alg = choice.algorithm
        found = [(f"{alg.name} (auto)", alg)]
        if alternatives:
            base = type(alg)()
            for preset in base.tuning_space(problem, self.engine.dialect)[1:]:
                if len(found) > alternatives:
                    break
                try:
                    other = base.with_selection(preset)
                    other.setup(problem, self.engine.dialect)
                except Exception:   # noqa: BLE001 -- a tiling that does not set up is not timed
                    continue
                found.append((alg.name, other))
        return found

    def row(self, label, dtype, precision, m, n, k, alternatives, repeat, deadline) -> dict:
        from gemm_engine.call.prepare import dense_problem
        from gemm_engine.runtime.timing import device_time
        np_dtype = self.bf16 if dtype == "bfloat16" else np.dtype(dtype)
        problem = dense_problem(1, m, n, k, np_dtype, precision=precision)
        a, b = self.host((m, k), dtype), self.host((k, n), dtype)
        ref = self.reference(a, b)
        da, db = self.rt.to_device(a), self.rt.to_device(b)
        dout = self.rt.empty((m, n), np_dtype)
        flop = 2.0 * m * n * k
        runs = []
        for name, alg in self.candidates(problem, alternatives):
            if runs and time.perf_counter() > deadline:
                break
            entry = {"algorithm": name}
            try:
                t0 = time.perf_counter()
                plan, launch = planned_launch(self.engine, alg, problem, da, db, dout)
                launch()
                self.rt.synchronize()
                entry["compile_s"] = time.perf_counter() - t0
                entry["tiling"] = tiling(plan.config) if hasattr(plan, "config") else ""
                dout.set(np.full((m, n), np.nan if dtype != "int8" else -1).astype(np_dtype))  # poisoned
                launch()
                err = self.error(self.rt.to_host(dout), ref)
                entry.update(error=err, ok=bool(err <= TOL["tf32" if precision == "tf32" else dtype]))
                entry["seconds"] = device_time(self.rt, launch, repeat=repeat)
                entry["tflops"] = flop / entry["seconds"] / 1e12
            except Exception as exc:   # noqa: BLE001 -- reported in the table
                entry.update(ok=False, failure=f"{type(exc).__name__}: {exc}"[:400])
            runs.append(entry)
        cublas = self.cublas(a, b, dtype, precision, repeat) if self.torch else self.host_blas(a, b, repeat)
        timed = [r for r in runs if r.get("ok")]
        best = min(timed, key=lambda r: r["seconds"]) if timed else None
        return {"label": label, "runs": runs, "cublas_s": cublas, "cublas_tflops": flop / cublas / 1e12,
                "best": best, "auto": runs[0] if runs else None, "ok": all(r.get("ok") for r in runs)}

    @staticmethod
    def host_blas(a, b, repeat) -> float:
        """Median seconds of numpy's a @ b in float32 (float64 stays float64): the baseline of a dry
        run without CUDA."""
        a, b = (a, b) if a.dtype == np.float64 else (a.astype(np.float32), b.astype(np.float32))
        samples = []
        for _ in range(max(3, repeat // 4)):
            t0 = time.perf_counter()
            a @ b
            samples.append(time.perf_counter() - t0)
        return float(np.median(samples))

    def cublas(self, a, b, dtype, precision, repeat) -> float:
        """Median seconds of torch.matmul (cuBLAS) on the GPU, CUDA events around batches of calls."""
        t = self.torch
        conv = {"bfloat16": t.bfloat16}
        ta = t.from_numpy(a.astype(np.float32) if dtype == "bfloat16" else a).cuda()
        tb = t.from_numpy(b.astype(np.float32) if dtype == "bfloat16" else b).cuda()
        if dtype in conv:
            ta, tb = ta.to(conv[dtype]), tb.to(conv[dtype])
        old = t.backends.cuda.matmul.allow_tf32
        t.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        try:
            for _ in range(3):
                ta @ tb
            t.cuda.synchronize()
            samples = []
            for _ in range(repeat):
                start, stop = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(5):
                    ta @ tb
                stop.record()
                stop.synchronize()
                samples.append(start.elapsed_time(stop) / 1e3 / 5)
        finally:
            t.backends.cuda.matmul.allow_tf32 = old
        return float(np.median(samples))


def row_line(row) -> str:
    parts = [f"{row['label']}: baseline {row['cublas_tflops']:.3f} TFLOP/s"]
    for r in row["runs"]:
        if "seconds" in r:
            parts.append(f"{r['algorithm']} {r.get('tiling', '')} {r['tflops']:.3f} TFLOP/s "
                         f"({row['cublas_s'] / r['seconds']:.2f}x, err {r['error']:.1e}, compile {r['compile_s']:.1f} s)")
        else:
            parts.append(f"{r['algorithm']} FAILED {r.get('failure', r.get('error'))}")
    return "\n  ".join(parts)


def markdown(result) -> str:
    feats = ", ".join(result["features"]) or "none"
    lines = [f"OpenCL device: {result['opencl_device']} (compute capability {result['compute_capability']}). "
             f"Probe: {feats}.",
             *(f"Refused {f}: {why}." for f, why in result["refusals"].items()), ""]
    checks = result["checks"]
    if checks:
        bad = [c for c in checks if not c["ok"]]
        skipped = result.get("checks_skipped", 0)
        lines.append(f"Checks first: {len(checks) - len(bad)} ok, {len(bad)} failed (default choice against float64, "
                     f"boundary shapes, layouts, a batch, a long K, an epilogue)"
                     + (f"; {skipped} left out past the time budget." if skipped else "."))
        lines += [f"- FAILED {c['dtype']} {c['precision']} {c['shape']} {c['layouts']}: {c.get('error')}" for c in bad]
        lines.append("")
    base = "cuBLAS" if result["baseline"].startswith("cuBLAS") else "numpy"
    timing = result.get("timing", "host clock")
    lines += [f"Baseline: {result['baseline']}, same run. OpenCL timed by {timing}"
              + (" (each batch's first kernel start to last kernel end)." if timing.startswith("OpenCL") else "."), "",
              f"| row | default (OpenCL) | TFLOP/s | x {base} | best tiling timed | TFLOP/s | x {base} | {base} TFLOP/s |",
              "|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        auto, best, cub = row["auto"] or {}, row["best"] or {}, row["cublas_s"]

        def cell(r):
            if "seconds" not in r:
                return f"{r.get('algorithm', '-')}: {r.get('failure', 'failed')}"[:120], "-", "-"
            return (f"{r['algorithm']} {r.get('tiling', '')}", f"{r['tflops']:.1f}", f"{cub / r['seconds']:.2f}")
        a, b = cell(auto), cell(best) if best else ("-", "-", "-")
        lines.append(f"| {row['label']} | {a[0]} | {a[1]} | {a[2]} | {b[0]} | {b[1]} | {b[2]} | {row['cublas_tflops']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
