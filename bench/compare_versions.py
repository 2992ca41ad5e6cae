"""Two versions of gemm_engine on the same GPU in one run: device time of the default choice on the
Hopper rows (against torch.matmul in the same process) and host time per call, each version in its
own processes, taken in turns (A, B, A, B...) so the card's drift falls on both alike.

Only public API is used (``Engine().matmul`` on torch tensors), so any two checkouts compare:

    python3 bench/compare_versions.py --old /path/to/old/checkout --rounds 2 --json $OUT/versions.json

The new version is this checkout. Rows are checked against float64 (sampled) in each process before
they are timed. Prints a table: per row, each version's median kernel time and ratio to torch, and
the host microseconds per call.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = __file__.rsplit("/bench/", 1)[0]

#: (label, dtype, batch, m, n, k, b layout, fused)
ROWS = [
    ("bf16 4096^3", "bfloat16", 1, 4096, 4096, 4096, "col", False),
    ("f16 4096^3", "float16", 1, 4096, 4096, 4096, "col", False),
    ("bf16 8192^3", "bfloat16", 1, 8192, 8192, 8192, "col", False),
    ("bf16 8192x12288x4096", "bfloat16", 1, 8192, 12288, 4096, "col", False),
    ("bf16 2048^3", "bfloat16", 1, 2048, 2048, 2048, "col", False),
    ("f16 4093^3", "float16", 1, 4093, 4093, 4093, "row", False),
    ("f16 1000^3", "float16", 1, 1000, 1000, 1000, "row", False),
    ("bf16 128x14336x4096", "bfloat16", 1, 128, 14336, 4096, "col", False),
    ("f16 64x512^3 batched", "float16", 64, 512, 512, 512, "row", False),
    ("bf16 relu(a@b+bias) 8192x8192x64", "bfloat16", 1, 8192, 8192, 64, "row", True),
]

CHILD = r"""
import json, os, sys, time, statistics
sys.path.insert(0, ROOT)
os.environ.setdefault("GEMM_ENGINE_BACKGROUND_COMPILE", "0")   # the chosen kernels, not stand-ins (checkouts that have them)
import torch, gemm_engine
engine = gemm_engine.Engine("cuda")
out = {"version": getattr(gemm_engine, "__version__", "?"), "file": gemm_engine.__file__, "rows": {}, "host": {}}
torch.manual_seed(0)

def operands(dtype, batch, m, n, k, layout):
    dt = getattr(torch, dtype)
    a = torch.randn((batch, m, k) if batch > 1 else (m, k), device="cuda").to(dt)
    b = torch.randn((batch, k, n) if batch > 1 else (k, n), device="cuda").to(dt)
    if layout == "col":
        b = b.transpose(-1, -2).contiguous().transpose(-1, -2)
    return a, b

def timed(fn, repeat):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        samples.append(s.elapsed_time(e))
    return samples

for label, dtype, batch, m, n, k, layout, fused in ROWS:
    a, b = operands(dtype, batch, m, n, k, layout)
    bias = torch.randn(n, device="cuda").to(a.dtype) if fused else None
    mine = (lambda: engine.matmul(a, b, bias=bias, activation="relu")) if fused else (lambda: engine.matmul(a, b))
    theirs = (lambda: torch.relu_(torch.addmm(bias, a, b))) if fused else (lambda: torch.matmul(a, b))
    got = mine().float()
    ref = theirs().float()
    err = float((got - ref).norm() / ref.norm())
    e, t = [], []
    for _ in range(REPEAT):            # in turns
        e += timed(mine, 1)
        t += timed(theirs, 1)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            mine()
        torch.cuda.synchronize()
    ks = [ev for ev in prof.events() if str(ev.device_type).endswith("CUDA") and ev.time_range.end > ev.time_range.start]
    kernel_us = sum(ev.time_range.end - ev.time_range.start for ev in ks) / 10
    out["rows"][label] = {"engine_ms": statistics.median(e), "torch_ms": statistics.median(t), "error": err,
                          "kernel_us": kernel_us, "choice": engine.last_choice[0].name if engine.last_choice else "?"}

for label, fused in (("64^3 f16 plain", False), ("64^3 f16 bias+relu", True)):
    a, b = operands("float16", 1, 64, 64, 64, "row")
    bias = torch.randn(64, device="cuda").half()
    fn = (lambda: engine.matmul(a, b, bias=bias, activation="relu")) if fused else (lambda: engine.matmul(a, b))
    ref = (lambda: torch.relu_(torch.addmm(bias, a, b))) if fused else (lambda: torch.matmul(a, b))
    res = {}
    for name, f in (("engine", fn), ("torch", ref)):
        for _ in range(200):
            f()
        torch.cuda.synchronize()
        per = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(CALLS):
                f()
            per.append((time.perf_counter() - t0) / CALLS * 1e6)
            torch.cuda.synchronize()
        res[name] = statistics.median(per)
    out["host"][label] = res
print("RESULT " + json.dumps(out))
"""


def run_child(root: str, repeat: int, calls: int) -> dict:
    code = (f"ROOT = {root!r}\nREPEAT = {repeat}\nCALLS = {calls}\nROWS = {ROWS!r}\n") + CHILD
    env = {**os.environ, "GEMM_ENGINE_CACHE_DIR": os.environ.get("GEMM_ENGINE_CACHE_DIR", "/tmp/ge_cmp_cache")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"child for {root} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(line[7:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True, help="the other checkout's root (its gemm_engine/ is imported)")
    ap.add_argument("--rounds", type=int, default=2, help="processes per version, taken in turns")
    ap.add_argument("--repeat", type=int, default=20, help="timed calls per row and process")
    ap.add_argument("--calls", type=int, default=2000, help="back-to-back calls per host-time sample")
    ap.add_argument("--json", help="write every sample here")
    args = ap.parse_args()
    versions = {"old": args.old, "new": HERE}
    runs = {"old": [], "new": []}
    for _ in range(args.rounds):
        for name, root in versions.items():
            runs[name].append(run_child(root, args.repeat, args.calls))
    print(f"old: {runs['old'][0]['file']}\nnew: {runs['new'][0]['file']}")
    print("| row | old choice | old ms | old ratio | new choice | new ms | new ratio | new/old time | "
          "kernel us old / new (CUPTI) | max error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, *_ in ROWS:
        cells = []
        for name in ("old", "new"):
            e = statistics.median(r["rows"][label]["engine_ms"] for r in runs[name])
            t = statistics.median(r["rows"][label]["torch_ms"] for r in runs[name])
            cells.append((runs[name][0]["rows"][label]["choice"], e, t / e))
        err = max(r["rows"][label]["error"] for name in runs for r in runs[name])
        ku = [statistics.median(r["rows"][label]["kernel_us"] for r in runs[name]) for name in ("old", "new")]
        (oc, oe, orat), (nc, ne, nrat) = cells
        print(f"| {label} | {oc} | {oe:.4f} | {orat:.3f} | {nc} | {ne:.4f} | {nrat:.3f} | {ne / oe:.3f} | "
              f"{ku[0]:.1f} / {ku[1]:.1f} | {err:.1e} |")
    print("\n| host us per call | old engine | new engine | old torch | new torch |\n|---|---|---|---|---|")
    for label in runs["new"][0]["host"]:
        vals = [statistics.median(r["host"][label][who] for r in runs[name])
                for name, who in (("old", "engine"), ("new", "engine"), ("old", "torch"), ("new", "torch"))]
        print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in vals) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
