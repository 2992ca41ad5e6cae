"""The ceiling of mma.sync: m16n8k16 f16 / bf16 (f32 accumulators) with register-only operands on
every multiprocessor, through CUDA (CuPy) and NVIDIA's OpenCL driver (PyOpenCL), same PTX.

No shared memory, no global loads in the loop: each warp holds one A and one B fragment and runs
``chains`` independent accumulators (4 f32 registers each) through ``iters`` rounds of mma.sync, so
the only limit is the tensor cores' issue rate for this instruction (and the chains' latency, which
the sweep over chains, warps per cube and cubes per multiprocessor hides). The kernel is written
once against the engine's dialects (KERNEL, UNIT_ID, ``Dialect.mma_sync``: the very helper the
engine's OpenCL and CUDA kernels call), so both backends run the same inline PTX.

What it answers: whether 0.6x cuBLAS f16 (about 450 TFLOP/s on the H100) is reachable with
mma.sync at all; the pipelined kernels can at best approach this number.

    python3 bench/mma_sync_peak.py                      # both backends where they exist (~1 min)
    python3 bench/mma_sync_peak.py --backends cuda --quick

Prints one line per (backend, kind, config) and the best per backend and kind; writes
``$BENCH_RESULTS/mma_sync_peak.json`` when BENCH_RESULTS is set (or --json) and the current table
bench/results/<device>/mma_sync_peak.md.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402

from gemm_engine.dtypes import BFLOAT16, FLOAT16  # noqa: E402

#: kind -> (PTX operand type, element type for the preamble)
KINDS = {"f16": ("f16", FLOAT16), "bf16": ("bf16", BFLOAT16)}
#: Flops of one m16n8k16 per warp.
MMA_FLOPS = 2 * 16 * 8 * 16
#: (threads per cube, cubes per multiprocessor, independent accumulator chains per warp)
CONFIGS = [(t, c, ch) for t in (128, 256) for c in (1, 2, 4) for ch in (4, 8, 16)]
QUICK = [(128, 2, 8), (256, 2, 8), (128, 4, 8), (256, 1, 16)]


def render(dialect, kind: str, chains: int, threads: int) -> str:
    """The kernel ``gemm_engine_mma_peak(GLOBAL float* out, int iters)`` for ``dialect`` (CUDA or NVIDIA OpenCL)."""
    ptx_type, et = KINDS[kind]
    calls = [dialect.mma_sync((16, 8, 16), ptx_type, "f32", "f32", f"acc{c}", "a", "b", 4, 2) for c in range(chains)]
    body = "\n".join([
        f"KERNEL LAUNCH_BOUNDS({threads}) void gemm_engine_mma_peak(GLOBAL float* out, int iters) {{",
        "    const unsigned u = (unsigned)UNIT_ID;",
        # Small normal values (about 2^-8), different per lane, so nothing folds and nothing overflows.
        "    unsigned a[4], b[2];",
        *(f"    a[{i}] = {'0x1c001c00u' if kind == 'f16' else '0x3b803b80u'} ^ ((u + {i}u) & 7u);" for i in range(4)),
        *(f"    b[{i}] = {'0x1c001c00u' if kind == 'f16' else '0x3b803b80u'} ^ ((u * 3u + {i}u) & 7u);" for i in range(2)),
        *(f"    float acc{c}[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};" for c in range(chains)),
        "    for (int it = 0; it < iters; ++it) {",
        *(f"        {call}" for call in calls),
        "    }",
        "    float s = 0.0f;",
        *(f"    s += acc{c}[0] + acc{c}[1] + acc{c}[2] + acc{c}[3];" for c in range(chains)),
        f"    out[CUBE_ID * {threads} + UNIT_ID] = s;",
        "}",
    ])
    return dialect.preamble([et]) + dialect.helpers_for(body) + body + "\n"


class CudaBackend:
    name = "cuda"

    def __init__(self):
        import cupy as cp
        import gemm_engine
        self.cp = cp
        engine = gemm_engine.Engine(backend="cuda")
        self.dialect, self.device = engine.dialect, engine.device
        self.sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        self.label = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()

    def build(self, source: str):
        return self.cp.RawModule(code=source, options=("-std=c++17",)).get_function("gemm_engine_mma_peak")

    def run(self, fn, cubes: int, threads: int, iters: int) -> float:
        cp = self.cp
        out = cp.empty(cubes * threads, dtype=cp.float32)
        args = (out, cp.int32(iters))
        fn((cubes,), (threads,), args)
        cp.cuda.Device().synchronize()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        samples = []
        for _ in range(5):
            start.record()
            fn((cubes,), (threads,), args)
            stop.record()
            stop.synchronize()
            samples.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
        if not bool(cp.isfinite(out).all()):
            raise RuntimeError("non-finite accumulators")
        return sorted(samples)[len(samples) // 2]


class OpenCLBackend:
    name = "opencl"

    def __init__(self, device: str):
        import gemm_engine
        import numpy as np
        import pyopencl as cl
        self.cl, self.np = cl, np
        engine = gemm_engine.Engine(backend="opencl", device=device)
        self.dialect, self.device = engine.dialect, engine.device
        rt = engine.runtime
        self.ctx, dev = rt.context, rt.cl_device
        self.queue = cl.CommandQueue(self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.sms, self.label = dev.max_compute_units, dev.name
        if not self.dialect.supports("mma_sync"):
            raise RuntimeError(f"the probe found no mma.sync on {dev.name}: {dict(self.device.refusals)}")

    def build(self, source: str):
        return self.cl.Program(self.ctx, source).build(options=["-cl-std=CL1.2"]).gemm_engine_mma_peak

    def run(self, kernel, cubes: int, threads: int, iters: int) -> float:
        cl, np = self.cl, self.np
        out = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, cubes * threads * 4)
        args = (out, np.int32(iters))
        kernel(self.queue, (cubes * threads,), (threads,), *args).wait()
        samples = []
        for _ in range(5):
            ev = kernel(self.queue, (cubes * threads,), (threads,), *args)
            ev.wait()
            samples.append((ev.profile.end - ev.profile.start) * 1e-9)
        host = np.empty(cubes * threads, np.float32)
        cl.enqueue_copy(self.queue, host, out).wait()
        if not np.isfinite(host).all():
            raise RuntimeError("non-finite accumulators")
        return sorted(samples)[len(samples) // 2]


def sweep(backend, kinds, configs, target_s: float, deadline: float) -> list[dict]:
    """One entry per (kind, config): TFLOP/s, or the error that stopped it."""
    rows = []
    for kind in kinds:
        for threads, per_sm, chains in configs:
            if time.perf_counter() > deadline:
                rows.append({"backend": backend.name, "kind": kind, "threads": threads, "cubes_per_sm": per_sm,
                             "chains": chains, "error": "skipped: past --budget"})
                continue
            entry = {"backend": backend.name, "kind": kind, "threads": threads, "cubes_per_sm": per_sm,
                     "chains": chains}
            try:
                fn = backend.build(render(backend.dialect, kind, chains, threads))
                cubes = backend.sms * per_sm
                per_iter = cubes * (threads // 32) * chains * MMA_FLOPS
                iters = 256
                seconds = backend.run(fn, cubes, threads, iters)
                # Long enough to time (target_s per launch), from the first estimate.
                iters = max(256, int(iters * target_s / max(seconds, 1e-7)))
                seconds = backend.run(fn, cubes, threads, iters)
                entry.update(iters=iters, seconds=seconds, tflops=per_iter * iters / seconds / 1e12)
            except Exception as exc:   # noqa: BLE001 -- one failed config is a row, not the end
                entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(entry)
            print(line(entry), flush=True)
    return rows


def line(e: dict) -> str:
    head = f"{e['backend']:6} {e['kind']:4} {e['threads']:3}u x{e['cubes_per_sm']}/SM {e['chains']:2} chains"
    return f"{head}: {e['tflops']:7.1f} TFLOP/s" if "tflops" in e else f"{head}: {e['error']}"


def markdown(result: dict) -> str:
    lines = ["mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32, operands in registers, every SM; "
             "median of 5 launches (CUDA events / OpenCL profiling). Best config per backend and kind:", "",
             "| backend | kind | TFLOP/s | threads | cubes/SM | chains | x dense peak 989 |", "|---|---|---|---|---|---|---|"]
    for (backend, kind), best in sorted(result["best"].items()):
        lines.append(f"| {backend} | {kind} | {best['tflops']:.1f} | {best['threads']} | {best['cubes_per_sm']} | "
                     f"{best['chains']} | {best['tflops'] / 989:.2f} |")
    failed = [r for r in result["rows"] if "error" in r]
    if failed:
        lines += ["", f"{len(failed)} configs failed or skipped; first: {line(failed[0])}"]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="cuda,opencl")
    ap.add_argument("--kinds", default="f16,bf16")
    ap.add_argument("--quick", action="store_true", help="4 configs instead of 18")
    ap.add_argument("--target-ms", type=float, default=20.0, help="length of a timed launch")
    ap.add_argument("--budget", type=float, default=150.0, help="seconds after which configs are skipped")
    ap.add_argument("--device", default="NVIDIA", help="the OpenCL device ($GEMM_ENGINE_OPENCL_DEVICE's form)")
    ap.add_argument("--json")
    current_tables.add_arguments(ap, "mma_sync_peak")
    args = ap.parse_args(argv)
    deadline = time.perf_counter() + args.budget
    kinds = [k for k in args.kinds.split(",") if k]
    configs = QUICK if args.quick else CONFIGS
    result = {"command": current_tables.command_line("mma_sync_peak.py", sys.argv[1:] if argv is None else argv),
              "rows": [], "backends": {}, "best": {}}
    device = ""
    for name in [b for b in args.backends.split(",") if b]:
        try:
            backend = CudaBackend() if name == "cuda" else OpenCLBackend(args.device)
        except Exception as exc:   # noqa: BLE001 -- a missing backend is reported, the other still runs
            result["backends"][name] = f"unavailable: {type(exc).__name__}: {exc}"[:300]
            print(f"{name}: {result['backends'][name]}")
            continue
        result["backends"][name] = f"{backend.label}, {backend.sms} SMs"
        device = device or backend.label
        print(f"{name}: {result['backends'][name]}")
        result["rows"] += sweep(backend, kinds, configs, args.target_ms / 1e3, deadline)
    for r in result["rows"]:
        key = f"{r['backend']}/{r['kind']}"
        if "tflops" in r and r["tflops"] > result["best"].get(key, {}).get("tflops", 0):
            result["best"][key] = r
    result["best"] = {tuple(k.split("/")): v for k, v in result["best"].items()}
    print("best:")
    for (backend, kind), r in sorted(result["best"].items()):
        print(f"  {backend} {kind}: {r['tflops']:.1f} TFLOP/s ({r['threads']}u, {r['cubes_per_sm']}/SM, {r['chains']} chains)")
    out = args.json or (os.path.join(os.environ["BENCH_RESULTS"], "mma_sync_peak.json") if os.environ.get("BENCH_RESULTS") else None)
    if out:
        with open(out, "w") as f:
            json.dump({**result, "best": {"/".join(k): v for k, v in result["best"].items()}}, f, indent=1)
    if device and result["best"]:
        current_tables.write(args, device, "mma.sync peak, operands in registers", result["command"],
                                    markdown(result))
    return 0 if result["best"] else 1


if __name__ == "__main__":
    sys.exit(main())
