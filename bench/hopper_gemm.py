"""The Hopper GEMM rows: gemm_engine's default choice and its Hopper kernels against cuBLAS.

For each row (the shapes people run most: square, LLM projections, unaligned, small, skinny,
batched, fused), on torch CUDA tensors (torch has bfloat16; the engine takes them zero-copy and
runs on torch's stream):

1. checks every timed engine variant against a float64 reference (relative Frobenius error under
   the dtype's tolerance, output poisoned with NaN first);
2. times, by CUDA events after a warm-up (median, `gemm_engine.runtime.timing.device_times`: samples in turns): the engine's
   default choice (``auto``, empty tuning cache), ``specialized_wgmma`` and ``pipelined_wgmma``
   forced, ``torch.matmul`` and ``cupy.matmul`` (float16 only: CuPy has no bfloat16);
3. prints a table (TFLOP/s, percent of the 989 TFLOP/s dense peak, ratio of the default to the
   faster cuBLAS call) and writes it to its current table, bench/results/<device>/hopper_rows.md
   (bench/current_tables.py; ``--json`` for everything).

A correctness sweep of ``specialized_wgmma`` over edge shapes, layouts, batches and strided
(aligned leading dimension, odd extent) views runs first (``--check-only`` stops there).

    python3 bench/hopper_gemm.py --repeat 30          (refreshes bench/results/h100/hopper_rows.md)
"""
from __future__ import annotations

import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

from common import row_tool_parser, row_tool_session, write_row_tool_outputs  # noqa: E402

PEAK = 989e12
TOL = {"bfloat16": 2e-2, "float16": 5e-3}

#: (label, dtype, batch, m, n, k, fused)
ROWS = [
    ("bf16 4096^3", "bfloat16", 1, 4096, 4096, 4096, False),
    ("f16 4096^3", "float16", 1, 4096, 4096, 4096, False),
    ("bf16 8192^3", "bfloat16", 1, 8192, 8192, 8192, False),
    ("f16 8192^3", "float16", 1, 8192, 8192, 8192, False),
    ("bf16 8192x12288x4096", "bfloat16", 1, 8192, 12288, 4096, False),
    ("f16 8192x4096x11008", "float16", 1, 8192, 4096, 11008, False),
    ("bf16 2048^3", "bfloat16", 1, 2048, 2048, 2048, False),
    ("bf16 4093^3", "bfloat16", 1, 4093, 4093, 4093, False),
    ("f16 4093^3", "float16", 1, 4093, 4093, 4093, False),
    ("f16 1000^3", "float16", 1, 1000, 1000, 1000, False),
    ("bf16 128x14336x4096", "bfloat16", 1, 128, 14336, 4096, False),
    ("f16 64x512^3 batched", "float16", 64, 512, 512, 512, False),
    ("bf16 relu(a@b+bias) 8192x8192x64", "bfloat16", 1, 8192, 8192, 64, True),
]

#: (batch, m, n, k, a layout, b layout, broadcast b, padded leading dimensions)
CHECKS = [
    (1, 1, 8, 8, "row", "row", False, False), (1, 2, 3, 5, "row", "row", False, True),
    (1, 128, 256, 64, "row", "row", False, False), (1, 129, 257, 65, "row", "row", False, True),
    (1, 127, 255, 63, "col", "col", False, True), (1, 300, 200, 1000, "row", "col", False, True),
    (1, 1000, 1000, 1000, "col", "row", False, False), (3, 67, 300, 200, "row", "row", False, True),
    (4, 256, 512, 128, "row", "row", True, False), (2, 384, 640, 4160, "col", "col", True, True),
    (1, 2048, 2048, 2048, "row", "row", False, False), (1, 4093, 4093, 4093, "row", "row", False, True),
]


def operand(torch, rows, cols, layout, batch, dtype, pad, gen):
    """A (batch, rows, cols) tensor in ``layout`` (col: a transposed view), its leading dimension
    padded to a multiple of 8 elements past the extent when ``pad`` (an odd extent stays legal
    for TMA: the stride is what must be 16-byte aligned)."""
    inner, outer = (cols, rows) if layout == "row" else (rows, cols)
    ld = (inner + 8 + 7) // 8 * 8 if pad else inner
    buf = torch.randn(batch, outer, ld, generator=gen, device="cuda").to(dtype)
    x = buf[:, :, :inner]
    return x if layout == "row" else x.transpose(1, 2)


def rel_err(torch, out, ref) -> float:
    return float(torch.linalg.norm((out.double() - ref).flatten()) / max(torch.linalg.norm(ref.flatten()), 1e-300))


def check(engine, torch, dtypes) -> list:
    from gemm_engine.errors import SetupError
    gen = torch.Generator(device="cuda").manual_seed(0)
    results = []
    for dt in dtypes:
        tdt = getattr(torch, dt)
        for b, m, n, k, la, lb, bcast, pad in CHECKS:
            a = operand(torch, m, k, la, b, tdt, pad, gen)
            bb = operand(torch, k, n, lb, 1 if bcast else b, tdt, pad, gen)
            if bcast:
                bb = bb[0]
            out = torch.full((b, m, n), float("nan"), dtype=tdt, device="cuda")
            try:
                engine.matmul(a, bb, out=out, algorithm="specialized_wgmma")
            except SetupError as exc:
                results.append({"dtype": dt, "shape": [b, m, n, k], "refused": str(exc), "ok": False})
                print(f"check {dt} {b}x{m}x{n}x{k} {la}/{lb}: refused: {exc}")
                continue
            ref = a.double() @ bb.double()
            err = rel_err(torch, out, ref)
            ok = err < TOL[dt]
            results.append({"dtype": dt, "shape": [b, m, n, k], "layouts": [la, lb], "broadcast_b": bcast,
                            "padded": pad, "rel_err": err, "ok": ok})
            print(f"check {dt:8s} {b}x{m}x{n}x{k} {la}/{lb}{' bcast' if bcast else ''}{' pad' if pad else ''}: "
                  f"{err:.2e} {'OK' if ok else 'FAIL'}", flush=True)
    # Fused epilogue on the Hopper kernel: alpha, beta * c, bias, activation.
    for dt in dtypes:
        tdt = getattr(torch, dt)
        a = operand(torch, 333, 256, "row", 1, tdt, True, gen)[0]
        bb = operand(torch, 256, 520, "col", 1, tdt, True, gen)[0]
        c = torch.randn(333, 520, device="cuda").to(tdt)
        bias = torch.randn(520, device="cuda").to(tdt)
        out = engine.matmul(a, bb, c=c, bias=bias, alpha=0.5, beta=2.0, activation="relu",
                            algorithm="specialized_wgmma")
        ref = torch.relu(0.5 * (a.double() @ bb.double()) + 2.0 * c.double() + bias.double())
        err = rel_err(torch, out, ref)
        results.append({"dtype": dt, "shape": [1, 333, 520, 256], "fused": True, "rel_err": err, "ok": err < TOL[dt]})
        print(f"check {dt:8s} fused relu(0.5 a@b + 2c + bias) 333x520x256: {err:.2e} {'OK' if err < TOL[dt] else 'FAIL'}")
    return results


def time_rows(engine, torch, cp, rows, repeat) -> list:
    from gemm_engine.errors import SetupError
    from gemm_engine.runtime.timing import device_times
    rt = engine.runtime
    gen = torch.Generator(device="cuda").manual_seed(1)
    table = []
    for label, dt, b, m, n, k, fused in rows:
        tdt = getattr(torch, dt)
        shape_a, shape_b = ((b, m, k), (b, k, n)) if b > 1 else ((m, k), (k, n))
        a = torch.randn(*shape_a, generator=gen, device="cuda").to(tdt)
        bb = torch.randn(*shape_b, generator=gen, device="cuda").to(tdt)
        bias = torch.randn(n, generator=gen, device="cuda").to(tdt) if fused else None
        kw = dict(bias=bias, activation="relu") if fused else {}
        ref = (torch.relu(a.double() @ bb.double() + bias.double()) if fused else a.double() @ bb.double())
        flops = 2 * b * m * n * k
        row = {"row": label, "dtype": dt, "shape": [b, m, n, k], "fused": fused, "flops": flops}

        def engine_call(alg):
            return lambda: engine.matmul(a, bb, algorithm=alg, **kw)
        variants = {"default": engine_call(None), "specialized_wgmma": engine_call("specialized_wgmma"),
                    "pipelined_wgmma": engine_call("pipelined_wgmma")}
        timed = {}
        for name, fn in variants.items():
            try:
                out = fn()
            except SetupError as exc:
                row[name] = {"refused": str(exc)}
                continue
            err = rel_err(torch, out, ref)
            row[name] = {"rel_err": err, "ok": err < TOL[dt]}
            if row[name]["ok"]:
                timed[name] = fn
        engine.matmul(a, bb, **kw)   # the default call last, so last_choice names its algorithm
        row["default"]["algorithm"] = engine.last_choice[0].name if engine.last_choice else "?"
        if fused:
            base = {"torch relu_(addmm)": lambda: torch.relu_(torch.addmm(bias, a, bb))}
        else:
            base = {"torch.matmul": lambda: torch.matmul(a, bb)}
            if dt == "float16":
                ca, cb = cp.from_dlpack(a), cp.from_dlpack(bb)
                base["cupy.matmul"] = lambda: cp.matmul(ca, cb)
        # Engine variants and baselines in turns (timing.device_times): the same clocks for all.
        for name, seconds in device_times(rt, {**timed, **base}, repeat=repeat, warmup=3).items():
            row.setdefault(name, {})["ms"] = seconds * 1e3
        best = min(row[x]["ms"] for x in base)
        row["baseline_ms"] = best
        for name in variants:
            if "ms" in row[name]:
                row[name]["tflops"] = flops / row[name]["ms"] / 1e9
                row[name]["ratio"] = best / row[name]["ms"]
        table.append(row)
        d, s = row["default"], row["specialized_wgmma"]
        print(f"{label:34s} default {d.get('algorithm', '?'):18s} {d.get('ms', float('nan')):.4f} ms "
              f"x{d.get('ratio', float('nan')):.3f} | spec {s.get('ms', float('nan')):.4f} ms "
              f"x{s.get('ratio', float('nan')):.3f} | base {best:.4f} ms", flush=True)
    return table


def kernel_times(engine, cp, sizes, selections, repeat) -> list:
    """float16 kernel time of ``specialized_wgmma`` selections without the frontend (arguments and
    tensor maps packed once: bench/common.py `planned_launch`), against cupy.matmul, and the
    frontend's per-call host time (calls issued back to back, host clock, no sync between them)."""
    import time
    from common import Timer, planned_launch, tiling
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.errors import SetupError
    from gemm_engine.call.prepare import dense_problem
    timer = Timer(engine, repeat)
    out = []
    for m, n, k in sizes:
        a = cp.random.standard_normal((m, k), dtype=cp.float32).astype(cp.float16)
        b = cp.random.standard_normal((k, n), dtype=cp.float32).astype(cp.float16)
        c = cp.empty((m, n), cp.float16)
        problem = dense_problem(1, m, n, k, "float16")
        base = timer(lambda: cp.matmul(a, b))
        for sel in selections:
            alg = REGISTRY["specialized_wgmma"](**sel)
            try:
                plan, run = planned_launch(engine, alg, problem, a, b, c)
            except SetupError as exc:
                out.append({"shape": [m, n, k], "selection": sel, "refused": str(exc)})
                continue
            t = timer(run)
            out.append({"shape": [m, n, k], "selection": sel, "tiling": tiling(plan.config), "ms": t * 1e3,
                        "tflops": 2 * m * n * k / t / 1e12, "cupy_ms": base * 1e3})
            print(f"kernel {m}x{n}x{k} {sel} {tiling(plan.config)}: {t * 1e3:.4f} ms "
                  f"({2 * m * n * k / t / 1e12:.0f} TFLOP/s), cupy {base * 1e3:.4f}", flush=True)
        engine.matmul(a, b, algorithm="specialized_wgmma")
        cp.cuda.runtime.deviceSynchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            engine.matmul(a, b, algorithm="specialized_wgmma")
        host = (time.perf_counter() - t0) / 50
        cp.cuda.runtime.deviceSynchronize()
        out.append({"shape": [m, n, k], "host_us_per_call": host * 1e6})
        print(f"host {m}x{n}x{k}: {host * 1e6:.1f} us per call", flush=True)
    return out


def markdown(table, device) -> str:
    lines = ["Ratio = faster of torch.matmul / cupy.matmul (fused: torch.relu_(torch.addmm)) "
             "time over the engine's time (> 1: the engine is faster). % peak of 989 TFLOP/s.", "",
             "| row | default choice | default ms | TFLOP/s | % peak | ratio | specialized_wgmma ms | ratio "
             "| pipelined_wgmma ms | ratio | baseline ms |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        d, s, p = r["default"], r["specialized_wgmma"], r["pipelined_wgmma"]

        def f(e, key, fmt):
            return format(e[key], fmt) if key in e else ("refused" if "refused" in e else "-")
        lines.append(f"| {r['row']} | {d.get('algorithm', '?')} | {f(d, 'ms', '.4f')} | {f(d, 'tflops', '.0f')} | "
                     f"{d['tflops'] / 9.89:.0f} | {f(d, 'ratio', '.3f')} | {f(s, 'ms', '.4f')} | {f(s, 'ratio', '.3f')} | "
                     f"{f(p, 'ms', '.4f')} | {f(p, 'ratio', '.3f')} | {r['baseline_ms']:.4f} |"
                     if "tflops" in d else f"| {r['row']} | {d} |")
    return "\n".join(lines) + "\n"


def main():
    ap = row_tool_parser(__doc__, "comma-separated row labels (default: all)", "hopper_rows")
    ap.add_argument("--kernels", action="store_true", help="also time kernel selections without the frontend")
    args = ap.parse_args()
    engine, torch, cp, result = row_tool_session("hopper_gemm.py", sys.argv[1:])
    result["checks"] = check(engine, torch, ("bfloat16", "float16"))
    failed = [c for c in result["checks"] if not c["ok"]]
    if args.kernels:
        sels = [{}, {"dispatch": "row_major"}, {"warpgroups_m": 2, "partition_m": 2, "tile_n": 128},
                {"stages": 3}, {"tile_n": 128, "stages": 6}]
        result["kernels"] = kernel_times(engine, cp, [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 12288, 4096),
                                                      (2048, 2048, 2048)], sels, args.repeat)
    if not args.check_only:
        rows = [r for r in ROWS if not args.rows or r[0] in args.rows.split(",")]
        result["rows"] = time_rows(engine, torch, cp, rows, args.repeat)
    write_row_tool_outputs(args, result, markdown, "the Hopper rows (bench/hopper_gemm.py)")
    print(f"checks: {len(result['checks']) - len(failed)} ok, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
