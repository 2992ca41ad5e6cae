"""Low-precision and float64 rows: int8, fp8 (with scales) and float64 on the tensor cores, against
the named torch op or cuBLAS in the same run.

For each row, on torch CUDA tensors (the engine takes them zero-copy and runs on torch's stream):

1. checks the engine against a float64 reference first (int8: exact equality; floats: relative
   Frobenius error under the dtype's tolerance; output poisoned first), over edge shapes, both
   layouts of each operand, batches and every algorithm that sets up;
2. times, by CUDA events after a warm-up (median, `gemm_engine.runtime.timing.device_times`: samples in turns), the engine's
   default choice (``auto``, empty tuning cache) and the baseline: ``torch._int_mm`` for int8,
   ``torch._scaled_mm`` for fp8, the faster of ``torch.matmul`` and ``cupy.matmul`` for float64;
3. prints a table (TFLOP/s or TOPS, ratio baseline time / engine time) and writes it to its current
   table, bench/results/<device>/low_precision.md (``--table float64`` for the float64 rows'
   table; ``--json`` for everything).

    python3 bench/low_precision.py --repeat 20 --checks fp8                (h100/low_precision.md)
    python3 bench/low_precision.py --repeat 30 --checks float64 --rows f64 --table float64
"""
from __future__ import annotations

import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

from common import row_tool_parser, row_tool_session, write_row_tool_outputs  # noqa: E402

#: (label, kind, batch, m, n, k, b layout); fp8 rows: kind "fp8:<scales>:<out dtype>"
ROWS = [
    ("fp8 e4m3 4096^3 per-tensor bf16", "fp8:tensor:bfloat16", 1, 4096, 4096, 4096, "col"),
    ("fp8 e4m3 8192^3 per-tensor bf16", "fp8:tensor:bfloat16", 1, 8192, 8192, 8192, "col"),
    ("fp8 e4m3 4096^3 per-tensor f32", "fp8:tensor:float32", 1, 4096, 4096, 4096, "col"),
    ("fp8 e4m3 4096^3 unscaled f32", "fp8:none:float32", 1, 4096, 4096, 4096, "col"),
    ("fp8 e4m3 8192^3 unscaled f32", "fp8:none:float32", 1, 8192, 8192, 8192, "col"),
    ("fp8 e4m3 4096^3 rowwise bf16", "fp8:row:bfloat16", 1, 4096, 4096, 4096, "col"),
    ("fp8 e4m3 8192^3 rowwise bf16", "fp8:row:bfloat16", 1, 8192, 8192, 8192, "col"),
    ("fp8 e4m3 4096^3 per-tensor bf16 fast_accum", "fp8:tensor:bfloat16:fast", 1, 4096, 4096, 4096, "col"),
    ("fp8 e4m3 8192^3 per-tensor bf16 fast_accum", "fp8:tensor:bfloat16:fast", 1, 8192, 8192, 8192, "col"),
    ("fp8 e4m3 8192^3 rowwise bf16 fast_accum", "fp8:row:bfloat16:fast", 1, 8192, 8192, 8192, "col"),
    ("fp8 e4m3 4096^3 per-tensor bf16 (b row-major)", "fp8:tensor:bfloat16", 1, 4096, 4096, 4096, "row"),
    ("fp8 e4m3 4096x7168x16384 block bf16", "fp8:block:bfloat16", 1, 4096, 7168, 16384, "col"),
    ("fp8 e4m3 8192^3 block bf16", "fp8:block:bfloat16", 1, 8192, 8192, 8192, "col"),
    ("int8 4096^3", "int8", 1, 4096, 4096, 4096, "row"),
    ("int8 4096^3 (b column-major)", "int8", 1, 4096, 4096, 4096, "col"),
    ("int8 8192^3 (b column-major)", "int8", 1, 8192, 8192, 8192, "col"),
    ("f64 2048^3", "float64", 1, 2048, 2048, 2048, "row"),
    ("f64 4096^3", "float64", 1, 4096, 4096, 4096, "row"),
]

#: (batch, m, n, k) of the correctness sweep; every one in each layout pair.
CHECKS = [(1, 1, 1, 1), (1, 1, 17, 33), (1, 64, 128, 128), (1, 65, 129, 129), (1, 127, 255, 127),
          (1, 300, 200, 1000), (3, 67, 300, 200), (2, 128, 256, 4160), (1, 1031, 1029, 1033),
          # two waves of 192 x 128 tiles or more (the promoting kernels' large tiling), odd M and N
          (1, 3001, 2999, 384), (1, 2999, 3001, 512), (1, 3000, 3000, 640)]
LAYOUTS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")]
TOL = {"float64": 1e-12, "float32": 5e-3, "bfloat16": 2e-2}
FP8_PAIRS = [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2"), ("float8_e4m3fn", "float8_e5m2")]
SCALE_KINDS = ["none", "tensor", "row", "block"]


def scales(torch, kind, m, n, k, gen):
    """(scale_a, scale_b) float32 CUDA tensors of a scale kind (gemm_engine/epilogue/scales.py), or (None, None)."""
    def r(*shape):
        return torch.rand(*shape, generator=gen, device="cuda") + 0.5
    if kind == "tensor":
        return r(()), r(())
    if kind == "row":
        return r(m, 1), r(1, n)
    if kind == "block":
        return r(m, -(-k // 128)), r(-(-k // 128), -(-n // 128))
    return None, None


def dequantized_ref(torch, a, b, sa, sb, kind):
    """float64 (a * sa) @ (b * sb), scales expanded to the operands' shapes."""
    a, b = a.double(), b.double()
    if kind == "tensor":
        a, b = a * sa.double(), b * sb.double()
    elif kind == "row":
        a, b = a * sa.double(), b * sb.double()
    elif kind == "block":
        k, n = a.shape[-1], b.shape[-1]
        a = a * sa.double().repeat_interleave(128, 1)[:, :k]
        b = b * sb.double().repeat_interleave(128, 0).repeat_interleave(128, 1)[:k, :n]
    return a @ b


def check_fp8(engine, torch, algorithms) -> list:
    import ml_dtypes
    import numpy as np
    from gemm_engine.errors import SetupError
    gen = torch.Generator(device="cuda").manual_seed(2)
    results = []
    for i, (b, m, n, k) in enumerate(CHECKS):
        ka, kb = FP8_PAIRS[i % len(FP8_PAIRS)]
        skind = SCALE_KINDS[i % len(SCALE_KINDS)]
        for la, lb in LAYOUTS:
            a, bb = operand(torch, m, k, la, b, ka, gen), operand(torch, k, n, lb, b, kb, gen)
            sa, sb = scales(torch, skind, m, n, k, gen)
            out_np = np.float32 if i % 2 else ml_dtypes.bfloat16
            ref = dequantized_ref(torch, a, bb, sa, sb, skind)
            for alg in algorithms:
                try:
                    out = engine.matmul(a, bb, scale_a=sa, scale_b=sb, out_dtype=out_np, algorithm=alg)
                except SetupError as exc:
                    results.append({"kind": f"{ka}x{kb}", "shape": [b, m, n, k], "layouts": [la, lb],
                                    "algorithm": alg, "scales": skind, "refused": str(exc)[:200], "ok": True})
                    continue
                err = error(torch, out, ref, "float")
                good = err < TOL[np.dtype(out_np).name]
                results.append({"kind": f"{ka}x{kb}", "shape": [b, m, n, k], "layouts": [la, lb], "scales": skind,
                                "out": np.dtype(out_np).name, "algorithm": alg or "auto", "err": err, "ok": good})
                if not good or i >= len(CHECKS) - 3:
                    print(f"check {ka}x{kb} {skind} -> {np.dtype(out_np).name} {b}x{m}x{n}x{k} {la}/{lb} "
                          f"{alg or 'auto'}: {err:.3g} {'OK' if good else 'FAIL'}", flush=True)
    return results


def operand(torch, rows, cols, layout, batch, kind, gen):
    shape = (batch, rows, cols) if layout == "row" else (batch, cols, rows)
    if kind in ("float8_e4m3fn", "float8_e5m2"):
        x = (torch.randn(shape, generator=gen, device="cuda") * 2).to(getattr(torch, kind))
    elif kind == "int8":
        x = torch.randint(-128, 128, shape, generator=gen, device="cuda", dtype=torch.int8)
    else:
        x = torch.randn(shape, generator=gen, device="cuda", dtype=torch.float64).to(getattr(torch, kind))
    return x if layout == "row" else x.transpose(1, 2)


def error(torch, out, ref, kind) -> float:
    """int8: the count of wrong elements; floats: relative Frobenius error."""
    if kind == "int8":
        return float((out.long() != ref.long()).sum().item())
    return float(torch.linalg.norm((out.double() - ref).flatten()) / max(torch.linalg.norm(ref.flatten()), 1e-300))


def ok(err, kind) -> bool:
    return err == 0 if kind == "int8" else err < TOL[kind]


def check(engine, torch, kinds, algorithms) -> list:
    from gemm_engine.errors import SetupError
    gen = torch.Generator(device="cuda").manual_seed(0)
    results = []
    for kind in kinds:
        for b, m, n, k in CHECKS:
            for la, lb in LAYOUTS:
                a, bb = operand(torch, m, k, la, b, kind, gen), operand(torch, k, n, lb, b, kind, gen)
                ref = a.double() @ bb.double()   # exact for int8 too (|sums| far below 2^53)
                for alg in algorithms:
                    out_dt = torch.int32 if kind == "int8" else getattr(torch, kind)
                    out = torch.full((b, m, n), -7, dtype=out_dt, device="cuda")
                    try:
                        engine.matmul(a, bb, out=out, algorithm=alg)
                    except SetupError as exc:
                        results.append({"kind": kind, "shape": [b, m, n, k], "layouts": [la, lb],
                                        "algorithm": alg, "refused": str(exc)[:200], "ok": True})
                        continue
                    err = error(torch, out, ref, kind)
                    good = ok(err, kind)
                    results.append({"kind": kind, "shape": [b, m, n, k], "layouts": [la, lb],
                                    "algorithm": alg or "auto", "err": err, "ok": good})
                    if not good or (b, m, n, k) == CHECKS[-1]:
                        print(f"check {kind} {b}x{m}x{n}x{k} {la}/{lb} {alg or 'auto'}: {err:.3g} "
                              f"{'OK' if good else 'FAIL'}", flush=True)
    return results


def time_rows(engine, torch, cp, rows, repeat) -> list:
    from gemm_engine.runtime.timing import device_times
    rt = engine.runtime
    gen = torch.Generator(device="cuda").manual_seed(1)
    table = []
    for label, kind, b, m, n, k, lb in rows:
        if kind.startswith("fp8"):
            table.append(time_fp8_row(engine, torch, label, kind, m, n, k, lb, repeat, gen))
            continue
        a = operand(torch, m, k, "row", b, kind, gen)[0]
        bb = operand(torch, k, n, lb, b, kind, gen)[0]
        flops = 2 * b * m * n * k
        row = {"row": label, "kind": kind, "shape": [b, m, n, k], "b_layout": lb, "flops": flops}
        ref = a.double() @ bb.double()
        out = engine.matmul(a, bb)
        row["algorithm"] = engine.last_choice[0].name if engine.last_choice else "?"
        row["err"] = error(torch, out, ref, kind)
        row["ok"] = ok(row["err"], kind)
        if kind == "int8":
            base = {"torch._int_mm": lambda: torch._int_mm(a, bb)}
        else:
            ca, cb = cp.from_dlpack(a), cp.from_dlpack(bb)
            base = {"torch.matmul": lambda: torch.matmul(a, bb), "cupy.matmul": lambda: cp.matmul(ca, cb)}
        for name, fn in list(base.items()):
            try:
                fn()
            except RuntimeError as exc:    # torch._int_mm's layout rules
                row[name] = None
                row[f"{name} error"] = str(exc)[:200]
                del base[name]
        # The engine and its baselines in turns (timing.device_times): the same clocks for all.
        timed = device_times(rt, {"engine": lambda: engine.matmul(a, bb), **base}, repeat=repeat, warmup=3)
        row["ms"] = timed.pop("engine") * 1e3
        row.update({name: seconds * 1e3 for name, seconds in timed.items()})
        times = [row[x] for x in base if row[x]]
        row["baseline_ms"] = min(times) if times else None
        row["tops"] = flops / row["ms"] / 1e9
        row["ratio"] = row["baseline_ms"] / row["ms"] if row["baseline_ms"] else None
        table.append(row)
        print(f"{label:30s} {row['algorithm']:18s} {row['ms']:.4f} ms {row['tops']:.0f} T/s "
              f"x{row['ratio'] or float('nan'):.3f} base {row['baseline_ms']} ok={row['ok']}", flush=True)
    return table


def time_fp8_row(engine, torch, label, kind, m, n, k, b_layout, repeat, gen) -> dict:
    """An fp8 e4m3 row: the engine's default against torch._scaled_mm at the same scales, output
    dtype and accumulation (``fast``: precision="fast_accum" against use_fast_accum=True). cuBLASLt
    takes b column-major only: a row-major b row times torch on a column-major copy (the copy not
    timed). Block scales against nothing (reported as engine TFLOP/s)."""
    import ml_dtypes
    import numpy as np
    from gemm_engine.runtime.timing import device_times
    _, skind, out_name, *fast = kind.split(":")
    a = operand(torch, m, k, "row", 1, "float8_e4m3fn", gen)[0]
    bb = operand(torch, k, n, b_layout, 1, "float8_e4m3fn", gen)[0]
    sa, sb = scales(torch, skind, m, n, k, gen)
    out_np = ml_dtypes.bfloat16 if out_name == "bfloat16" else np.float32
    kw = {} if skind == "none" else dict(scale_a=sa, scale_b=sb)
    if out_name != "float32":
        kw["out_dtype"] = out_np
    if fast:
        kw["precision"] = "fast_accum"
    flops = 2 * m * n * k
    row = {"row": label, "kind": kind, "shape": [1, m, n, k], "b_layout": b_layout, "flops": flops}
    ref = dequantized_ref(torch, a, bb, sa, sb, skind)
    out = engine.matmul(a, bb, **kw)
    row["algorithm"] = engine.last_choice[0].name if engine.last_choice else "?"
    row["err"] = error(torch, out, ref, "float")
    row["ok"] = row["err"] < TOL[out_name]
    row["baseline_ms"] = None
    fns = {"engine": lambda: engine.matmul(a, bb, **kw)}
    if skind != "block":
        one = torch.ones((), device="cuda")
        tsa, tsb = (one, one) if skind == "none" else (sa, sb)
        tdt = getattr(torch, out_name)

        # cuBLASLt wants b column-major: a row-major b is its transpose's view (what torch users pass).
        tb = bb if b_layout == "col" else bb.t().contiguous().t()

        def base():
            return torch._scaled_mm(a, tb, tsa, tsb, out_dtype=tdt, use_fast_accum=bool(fast))
        try:
            row["torch_err"] = error(torch, base(), ref, "float")
            fns["base"] = base
        except RuntimeError as exc:
            row["torch._scaled_mm error"] = str(exc)[:300]
    # The engine and torch in turns (timing.device_times): the same clocks for both.
    timed = device_times(engine.runtime, fns, repeat=repeat, warmup=3)
    row["ms"] = timed["engine"] * 1e3
    if "base" in timed:
        row["baseline_ms"] = timed["base"] * 1e3
    row["tops"] = flops / row["ms"] / 1e9
    row["ratio"] = row["baseline_ms"] / row["ms"] if row["baseline_ms"] else None
    print(f"{label:36s} {row['algorithm']:18s} {row['ms']:.4f} ms {row['tops']:.0f} T/s "
          f"x{row['ratio'] or float('nan'):.3f} base {row['baseline_ms']} err {row['err']:.2e} "
          f"torch err {row.get('torch_err', float('nan')):.2e}", flush=True)
    return row


def markdown(table, device) -> str:
    lines = ["Ratio = baseline time / engine time (> 1: the engine is faster); "
             "baseline: torch._int_mm (int8), torch._scaled_mm (fp8), faster of torch.matmul / cupy.matmul "
             "(float64). Tera-operations per second.", "",
             "| row | default choice | ms | T/s | baseline | baseline ms | ratio | correct |",
             "|---|---|---|---|---|---|---|---|"]
    for r in table:
        base = {"int8": "torch._int_mm", "float64": "torch/cupy matmul"}.get(r["kind"], "torch._scaled_mm")
        bms = f"{r['baseline_ms']:.4f}" if r["baseline_ms"] else "n/a"
        ratio = f"{r['ratio']:.3f}" if r["ratio"] else "n/a"
        err = f" ({r['err']:.1e})" if r["kind"].startswith("fp8") else ""
        lines.append(f"| {r['row']} | {r['algorithm']} | {r['ms']:.4f} | {r['tops']:.0f} | {base} | {bms} | "
                     f"{ratio} | {'yes' if r['ok'] else 'NO'}{err} |")
    return "\n".join(lines) + "\n"


def main():
    ap = row_tool_parser(__doc__, "comma-separated row label prefixes (default: all)", "low_precision")
    ap.add_argument("--checks", default="int8,float64,fp8", help="comma-separated kinds to check first")
    args = ap.parse_args()
    engine, torch, cp, result = row_tool_session("low_precision.py", sys.argv[1:])
    kinds = args.checks.split(",")
    result["checks"] = []
    if "int8" in kinds:
        result["checks"] += check(engine, torch, ("int8",), (None, "pipelined_wgmma", "specialized_wgmma",
                                                             "pipelined_mma"))
    if "float64" in kinds:
        result["checks"] += check(engine, torch, ("float64",), (None,))
    if "fp8" in kinds:
        result["checks"] += check_fp8(engine, torch, (None, "pipelined_wgmma", "specialized_wgmma"))
    failed = [c for c in result["checks"] if not c["ok"]]
    if not args.check_only:
        rows = [r for r in ROWS if not args.rows or any(r[0].startswith(p) for p in args.rows.split(","))]
        result["rows"] = time_rows(engine, torch, cp, rows, args.repeat)
    write_row_tool_outputs(args, result, markdown, "int8, fp8 and float64 rows (bench/low_precision.py)")
    ran = [c for c in result["checks"] if "refused" not in c]
    print(f"checks: {len(ran) - len(failed)} ok, {len(failed)} failed, "
          f"{len(result['checks']) - len(ran)} refused")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
