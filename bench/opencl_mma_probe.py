"""pipelined_mma tilings on NVIDIA's OpenCL driver and on CUDA, against cuBLAS in the same run: what
the 48 KiB of local memory costs and which ring fills it best (issue 34, f16 / bf16 >= 0.6x cuBLAS).

Each variant is a selection of ``pipelined_mma`` (padded rows in 2 slots, as before; swizzled rows
in 3; 4 and 6 slots at stage_k 16; 256 units; 128 x 256 stages; carried fragments) plus the engine's
own choice ("auto"). For each backend, dtype and variant, in order:

1. set up (a variant the device refuses is a row saying why) and built (a build failure is a row too:
   the run goes on);
2. checked against a float64 reference on odd shapes (1000^3 and 257 x 131 x 77: edges on every
   axis, unaligned operands on the second: the loaders' register path), outputs poisoned first;
3. timed at 4096^3 (median of --repeat, `gemm_engine.runtime.timing`).

cuBLAS (torch.matmul) is timed once per dtype. A deadline (--budget seconds) skips what is left,
recorded as skipped. The JSON (--json, after every variant) and the markdown table
(bench/results/<device>/opencl_mma_probe.md; $BENCH_RESULTS when set) say what ran.

    # on the GPU machine, .whl/ carrying PyOpenCL (../shared/tools/gpu_machine_wheels.sh):
    STAGES=oclmma bash bench/gpu.sh                       # this and bench/mma_sync_peak.py, ~4 min
    python3 bench/opencl_mma_probe.py --budget 200 --backends opencl --dtypes float16
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
import gemm_engine  # noqa: E402
from common import planned_launch, tiling  # noqa: E402
from gemm_engine.algorithms import REGISTRY  # noqa: E402
from gemm_engine.call.prepare import dense_problem  # noqa: E402
from gemm_engine.dtypes import bfloat16_dtype  # noqa: E402
from gemm_engine.runtime.timing import device_time  # noqa: E402
from opencl_tensor_cores import TOL, Context, cuda_torch, opencl_engine  # noqa: E402

# Every knob the selector may set is named: a variant overrides the selector's choice, never merges with it.
_BASE = dict(planes_m=2, planes_n=2, partition_m=4, partition_n=8, stage_k=32, stages=2, fragment_buffering=True,
             smem_swizzle=False, carry_fragments=False)
_SW = dict(smem_swizzle=True)
#: (label, selection of pipelined_mma; None: the engine's own choice), in the order they are run.
VARIANTS = [
    ("auto", None),
    ("padded S2 128x128x32 128u", _BASE),
    ("swizzled S3 128x128x32 128u", {**_BASE, **_SW, "stages": 3}),
    ("swizzled S4 128x128x16 128u", {**_BASE, **_SW, "stage_k": 16, "stages": 4}),
    ("swizzled S6 128x128x16 128u", {**_BASE, **_SW, "stage_k": 16, "stages": 6}),
    ("swizzled S3 128x128x32 256u (2x4 of 64x32)", {**_BASE, **_SW, "stages": 3, "planes_n": 4, "partition_n": 4}),
    ("swizzled S3 128x128x32 128u carry", {**_BASE, **_SW, "stages": 3, "carry_fragments": True}),
    ("swizzled S2 128x128x32 128u", {**_BASE, **_SW}),
    ("padded S4 128x128x16 128u", {**_BASE, "stage_k": 16, "stages": 4}),
    ("swizzled S3 128x128x32 256u (4x2 of 32x64)", {**_BASE, **_SW, "stages": 3, "planes_m": 4, "partition_m": 2}),
    ("swizzled S4 128x256x16 256u", {**_BASE, **_SW, "planes_n": 4, "stage_k": 16, "stages": 4}),
    ("swizzled S2 128x256x32 256u", {**_BASE, **_SW, "planes_n": 4}),
    ("padded S3 128x256x64 256u (CUDA's preset)", {**_BASE, "planes_n": 4, "stage_k": 64, "stages": 3}),
    # Rings of at most 24 KiB: two cubes per SM where the driver keeps 48 KiB of shared memory (the
    # carveout experiment in bench/results/h100/opencl_tensor_cores.md).
    ("swizzled S3 128x128x16 128u (24 KiB)", {**_BASE, **_SW, "stage_k": 16, "stages": 3}),
    ("swizzled S2 128x128x16 128u (16 KiB)", {**_BASE, **_SW, "stage_k": 16}),
    ("swizzled S3 64x128x32 64u (24 KiB)", {**_BASE, **_SW, "planes_m": 1, "stages": 3}),
]
#: The variants CUDA runs unless --variants names others (its auto is the 128 x 256 x 64 preset):
#: whether the 48 KiB rings are slower than that there too.
CUDA_VARIANTS = ("auto", "padded S2 128x128x32 128u", "swizzled S3 128x128x32 128u", "swizzled S6 128x128x16 128u",
                 "swizzled S3 128x128x32 256u (2x4 of 64x32)", "swizzled S3 128x128x32 128u carry")
#: (batch, m, n, k) of the checks before timing.
CHECKS = [(1, 1000, 1000, 1000), (1, 257, 131, 77)]
SIZE = 4096


def variant_algorithm(engine, problem, selection):
    """The pipelined_mma instance of a variant (the engine's choice for None)."""
    if selection is None:
        return engine.choose(problem).algorithm
    return REGISTRY["pipelined_mma"](**selection)


def run_variant(ctx: Context, label: str, selection, dtype: str, repeat: int, size: int = SIZE) -> dict:
    """Set up, build, check and time one variant on one backend and dtype (never raises)."""
    np_dtype = ctx.bf16 if dtype == "bfloat16" else np.dtype(dtype)
    entry = {"variant": label, "dtype": dtype, "checks": []}
    stage = "setup"
    try:
        for shape in CHECKS + [(1, size, size, size)]:
            _, m, n, k = shape
            stage = f"setup {m}x{n}x{k}"
            problem = dense_problem(1, m, n, k, np_dtype)
            alg = variant_algorithm(ctx.engine, problem, selection)
            alg.setup(problem, ctx.engine.dialect)          # a refusal says so before any build
            a, b = ctx.host((m, k), dtype), ctx.host((k, n), dtype)
            da, db = ctx.rt.to_device(a), ctx.rt.to_device(b)
            dout = ctx.rt.empty((m, n), np_dtype)
            stage = f"build {m}x{n}x{k}"
            t0 = time.perf_counter()
            plan, launch = planned_launch(ctx.engine, alg, problem, da, db, dout)
            launch()
            ctx.rt.synchronize()
            build_s = time.perf_counter() - t0
            stage = f"check {m}x{n}x{k}"
            dout.set(np.full((m, n), np.nan).astype(np_dtype))        # poisoned
            launch()
            err = ctx.error(ctx.rt.to_host(dout), ctx.reference(a, b))
            ok = bool(err <= TOL[dtype])
            cfg = getattr(plan, "config", None)
            check = {"shape": shape, "error": err, "ok": ok, "build_s": build_s,
                     "tiling": tiling(cfg) if cfg is not None else type(alg).__name__}
            if shape in CHECKS:
                entry["checks"].append(check)
                if not ok:
                    entry["failure"] = f"wrong result at {m}x{n}x{k}: relative error {err:.2e}"
                    return entry
                continue
            g = cfg.batch.global_ if cfg is not None else None
            entry.update(check, swizzled=getattr(getattr(g, "stage", None), "smem_swizzle", False),
                         ring_bytes=getattr(g, "dynamic_shared_bytes", 0))
            if not ok:
                entry["failure"] = f"wrong result at {size}^3: relative error {err:.2e}"
                return entry
            stage = "time"
            entry["seconds"] = device_time(ctx.rt, launch, repeat=repeat)
            entry["tflops"] = 2.0 * size ** 3 / entry["seconds"] / 1e12
    except Exception as exc:   # noqa: BLE001 -- a variant that fails is a row, the run goes on
        entry["failure"] = f"{stage}: {type(exc).__name__}: {exc}"[:500]
    return entry


def chosen_variants(wanted: list[str], backend: str) -> list:
    """The variants to run: those whose label starts with one of ``wanted``, else all (CUDA: its subset)."""
    if wanted:
        return [(label, sel) for label, sel in VARIANTS if any(label.startswith(w) for w in wanted)]
    return [(label, sel) for label, sel in VARIANTS if backend != "cuda" or label in CUDA_VARIANTS]


def markdown(result: dict) -> str:
    size = result["size"]
    lines = [f"Variants of pipelined_mma at {size}^3 (row-major operands), each checked first against float64 on "
             f"{' and '.join('x'.join(map(str, c[1:])) for c in CHECKS)}; cuBLAS (torch.matmul) in the same run.", ""]
    for backend, note in result["backends"].items():
        lines.append(f"- {backend}: {note}")
    lines += ["", "| backend | dtype | variant | tiling | ring bytes | TFLOP/s | x cuBLAS | checks |",
              "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        cub = result["cublas_s"].get(r["dtype"])
        checks = "ok" if r["checks"] and all(c["ok"] for c in r["checks"]) else "-"
        if "seconds" in r:
            ratio = f"{cub / r['seconds']:.2f}" if cub else "-"
            lines.append(f"| {r['backend']} | {r['dtype']} | {r['variant']} | {r.get('tiling', '')} | "
                         f"{r.get('ring_bytes', '')} | {r['tflops']:.1f} | {ratio} | {checks} |")
        else:
            why = r.get("failure", "skipped").replace("|", "/").replace("\n", " ")[:140]
            lines.append(f"| {r['backend']} | {r['dtype']} | {r['variant']} | {r.get('tiling', '')} | | - | - | {why} |")
    if result["cublas_s"]:
        lines += ["", "cuBLAS: " + ", ".join(f"{d} {2.0 * size ** 3 / s / 1e12:.1f} TFLOP/s"
                                               for d, s in result["cublas_s"].items())]
    return "\n".join(lines)


def save(path, result) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1, default=str)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="opencl,cuda")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--variants", default="", help="comma list of variant label prefixes (default: all)")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--budget", type=float, default=200.0, help="seconds after which variants are skipped")
    ap.add_argument("--size", type=int, default=SIZE, help="the timed square's size (a dry run elsewhere: small)")
    ap.add_argument("--device", default="NVIDIA", help="the OpenCL device ($GEMM_ENGINE_OPENCL_DEVICE's form)")
    ap.add_argument("--host-clock", action="store_true",
                    help="time OpenCL by the host clock up to a finish (default: its profiling times)")
    ap.add_argument("--json")
    current_tables.add_arguments(ap, "opencl_mma_probe")
    args = ap.parse_args(argv)
    deadline = time.perf_counter() + args.budget
    wanted = [w.strip() for w in args.variants.split(",") if w.strip()]
    dtypes = [d for d in args.dtypes.split(",") if d]

    torch = cuda_torch()
    result = {"command": current_tables.command_line("opencl_mma_probe.py", sys.argv[1:] if argv is None else argv),
              "device": torch.cuda.get_device_name() if torch else "", "size": args.size, "backends": {}, "rows": [], "cublas_s": {}}
    rng = np.random.default_rng(0)
    for backend in [b for b in args.backends.split(",") if b]:
        try:
            engine = (opencl_engine(args.device, profiled=not args.host_clock) if backend == "opencl"
                      else gemm_engine.Engine(backend="cuda"))
        except Exception as exc:   # noqa: BLE001 -- a backend that does not start is reported
            result["backends"][backend] = f"unavailable: {type(exc).__name__}: {exc}"[:300]
            print(f"{backend}: {result['backends'][backend]}")
            continue
        dev = engine.device
        result["backends"][backend] = (f"{dev.name}, {dev.max_shared_memory} B shared/local memory per cube"
                                       + (f", probe: {', '.join(sorted(dev.features))}" if backend == "opencl" else ""))
        result["device"] = result["device"] or dev.name
        print(f"{backend}: {result['backends'][backend]}", flush=True)
        ctx = Context(engine, torch, bfloat16_dtype(), rng)
        for dtype in dtypes:
            if torch is not None and dtype not in result["cublas_s"]:
                result["cublas_s"][dtype] = ctx.cublas(ctx.host((args.size,) * 2, dtype), ctx.host((args.size,) * 2, dtype),
                                                       dtype, "default", args.repeat)
        # Variants outer, dtypes inner: a run cut by --budget loses the last variants of both dtypes.
        for label, sel in chosen_variants(wanted, backend):
            for dtype in dtypes:
                if time.perf_counter() > deadline:
                    entry = {"variant": label, "dtype": dtype, "checks": [], "failure": "skipped: past --budget"}
                else:
                    entry = run_variant(ctx, label, sel, dtype, args.repeat, args.size)
                entry["backend"] = backend
                result["rows"].append(entry)
                cub = result["cublas_s"].get(dtype)
                speed = (f"{entry['tflops']:.1f} TFLOP/s" + (f" ({cub / entry['seconds']:.2f}x cuBLAS)" if cub else "")
                         if "seconds" in entry else entry.get("failure", ""))
                print(f"  {backend} {dtype} {label} [{entry.get('tiling', '')}]: {speed}", flush=True)
                save(args.json, result)
    result["seconds"] = args.budget - (deadline - time.perf_counter())
    save(args.json, result)
    table = markdown(result)
    print(table)
    if result["device"]:
        current_tables.write(args, result["device"], "pipelined_mma tilings on NVIDIA's OpenCL and CUDA",
                                    result["command"], table)
    # Refusals, build failures and skips are rows; only a wrong result fails the run.
    return 1 if any(r.get("failure", "").startswith("wrong result") for r in result["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
