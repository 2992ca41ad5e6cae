"""How the timing rule itself moves a measurement: for a few engine calls and their baselines, the
host time per call (calls issued back to back, no sync), the wall time per call of such a loop, and
the median time per call of batches of 1 .. 64 calls timed by CUDA events, each batch starting on
an idle device ("idle") or behind one untimed call ("busy", `gemm_engine.runtime.timing.time_batch`).

    python3 bench/timing_batches.py         (refreshes bench/results/<device>/timing_batches.md)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402

BATCHES = (1, 2, 8, 64)


def idle(rt, cp, fn, count: int) -> float:
    """`time_batch` from an idle device (the rule before the lead call)."""
    from gemm_engine.runtime.timing import time_batch
    rt.synchronize()
    return time_batch(rt, fn, count, cp, lead=False)


def measure(rt, cp, fn, samples: int) -> dict:
    from gemm_engine.runtime.timing import time_batch
    for _ in range(5):
        fn()
    rt.synchronize()
    t0 = time.perf_counter()
    for _ in range(100):
        fn()
    host = (time.perf_counter() - t0) / 100
    rt.synchronize()
    wall = (time.perf_counter() - t0) / 100
    out = {"host_us": host * 1e6, "wall_us": wall * 1e6}
    for count in BATCHES:
        out[f"idle_b{count}_us"] = statistics.median(idle(rt, cp, fn, count) for _ in range(samples)) * 1e6
        out[f"busy_b{count}_us"] = statistics.median(time_batch(rt, fn, count, cp) for _ in range(samples)) * 1e6
    return out


def calls(engine, torch):
    """(label, function) pairs: engine calls beside the baseline each is compared with."""
    import ml_dtypes
    from low_precision import operand, scales
    gen = torch.Generator(device="cuda").manual_seed(0)
    bf = lambda *s: torch.randn(*s, generator=gen, device="cuda").bfloat16()  # noqa: E731
    a, b = bf(2048, 2048), bf(2048, 2048)
    yield "bf16 2048^3 engine", lambda: engine.matmul(a, b)
    yield "bf16 2048^3 torch.matmul", lambda: torch.matmul(a, b)
    a2, b2 = bf(8192, 8192), bf(8192, 8192)
    yield "bf16 8192^3 engine", lambda: engine.matmul(a2, b2)
    yield "bf16 8192^3 torch.matmul", lambda: torch.matmul(a2, b2)
    m, n, k = 4096, 7168, 16384
    a8 = operand(torch, m, k, "row", 1, "float8_e4m3fn", gen)[0]
    b8 = operand(torch, k, n, "col", 1, "float8_e4m3fn", gen)[0]
    sa, sb = scales(torch, "tensor", m, n, k, gen)
    kw = dict(scale_a=sa, scale_b=sb, out_dtype=ml_dtypes.bfloat16)
    yield f"fp8 tensor {m}x{n}x{k} engine", lambda: engine.matmul(a8, b8, **kw)
    yield f"fp8 tensor {m}x{n}x{k} torch._scaled_mm", lambda: torch._scaled_mm(a8, b8, sa, sb, out_dtype=torch.bfloat16)
    ba, bb = scales(torch, "block", m, n, k, gen)
    yield f"fp8 block {m}x{n}x{k} engine", lambda: engine.matmul(a8, b8, scale_a=ba, scale_b=bb,
                                                                 out_dtype=ml_dtypes.bfloat16)


def markdown(calls: dict) -> str:
    """The table of a run's ``calls`` (label -> `measure`'s microseconds)."""
    head = ["call", "host us", "wall us"] + [f"b{c} {s}" for c in BATCHES for s in ("idle", "busy")]
    lines = ["Microseconds per call: host time and wall time of back-to-back calls; CUDA-event time of "
             "batches of N calls from an idle device or behind one untimed call (busy, the rule).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, r in calls.items():
        cells = [label, f"{r['host_us']:.1f}", f"{r['wall_us']:.1f}"]
        cells += [f"{r[f'{s}_b{c}_us']:.1f}" for c in BATCHES for s in ("idle", "busy")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=9)
    ap.add_argument("--json")
    current_tables.add_arguments(ap, "timing_batches")
    args = ap.parse_args()
    import cupy as cp
    import torch
    import gemm_engine
    engine = gemm_engine.Engine(backend="cuda", background_compile=False)   # the chosen kernel, not a stand-in
    result = {"device": torch.cuda.get_device_name(),
              "command": current_tables.command_line("timing_batches.py", sys.argv[1:]), "calls": {}}
    for label, fn in calls(engine, torch):
        r = result["calls"][label] = measure(engine.runtime, cp, fn, args.samples)
        print(f"{label:40s} host {r['host_us']:6.1f} wall {r['wall_us']:7.1f} | "
              + " ".join(f"b{c} idle {r[f'idle_b{c}_us']:7.1f} busy {r[f'busy_b{c}_us']:7.1f}" for c in BATCHES), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    current_tables.write(args, result["device"], "what the timing rule changes (bench/timing_batches.py)",
                         result["command"], markdown(result["calls"]))


if __name__ == "__main__":
    main()
