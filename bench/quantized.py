"""Quantized weights with bf16 activations (issue 31's speed rows): the engine against cuBLAS bf16 of
the same shape (torch, nn.Linear layout) and torch's weight-only kernels, in the same run.

Rows: int4 group 128 (asymmetric: scales and zeros, as GPTQ / AWQ checkpoints) at N x K in
{4096 x 4096, 14336 x 4096, 4096 x 14336, 8192 x 8192} for M in {1, 4, 16, 64, 256, 4096}; int8
(per channel, symmetric) and fp8 e4m3 (per channel) at M in {1, 4, 16, 256}. Weights are
quantized once (`gemm_engine.quantize`, then `prepack`); torch's int4 weight-only kernel
(`torch._weight_int4pack_mm`, group 128) and int8 one (`torch._weight_int8pack_mm`) get the same
codes and scales, where this torch has them.

Every result is checked before it is timed: the engine's through `quantized_matmul` (its default
choice, or ``--algorithm``) and through the planned launch that is timed, each against a float64
product of x and the dequantized weights (relative Frobenius error < 1e-2), the baselines against
the same reference. Times are CUDA-event medians of back-to-back launches (the engine's kernels
launched as planned, without the call path's host time); "TB/s" counts the packed weights, scales
and zeros once per call. The table goes to bench/results/<device>/quantized.md (current_tables).

    BENCH_RESULTS=$OUT python3 bench/quantized.py              # every row (about 5 minutes on an H100)
    BENCH_RESULTS=$OUT python3 bench/quantized.py --variants   # and the decode tilings at M <= 64
    python3 bench/quantized.py --formats int4 --ms 1,16 --shapes 4096x4096 --json q.json
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

SHAPES = ("4096x4096", "14336x4096", "4096x14336", "8192x8192")    # N x K
INT4_MS = (1, 4, 16, 64, 256, 4096)
BYTE_MS = (1, 4, 16, 256)
TOL = 1e-2
#: The issue's targets: speed-up over cuBLAS bf16 by format and M (the largest M bound that applies).
TARGETS = {"int4": ((16, 3.0), (64, 2.0), (256, 1.0), (4096, 0.9)), "int8": ((16, 1.8), (256, 1.0)),
           "fp8_e4m3": ((16, 1.8), (256, 1.0))}


def target(fmt: str, m: int) -> float | None:
    return next((t for bound, t in TARGETS[fmt] if m <= bound), None)


def timed(cp, fn, budget: float = 0.05) -> float:
    """Median seconds per ``fn()``: CUDA events around batches sized so that a batch takes about
    a millisecond (fewer batches for slow calls: every row fits the run's few minutes)."""
    from common import events_time
    fn()
    cp.cuda.get_current_stream().synchronize()
    t0 = time.perf_counter()
    fn()
    cp.cuda.get_current_stream().synchronize()
    first = time.perf_counter() - t0
    inner = max(1, min(50, int(1e-3 / max(first, 1e-7))))
    repeat = max(3, min(15, int(budget / max(first * inner, 1e-7))))
    return events_time(cp, fn, repeat=repeat, inner=inner, warmup=2)


def rel(torch, y, ref) -> float:
    y = y.double()
    return float(torch.linalg.norm(y - ref) / torch.linalg.norm(ref))


def planned(engine, x, q, algorithm=None):
    """(plan, launch, output tensor): the engine's call of ``x @ q`` set up step by step as the call
    path does (import, numpy's rules, request, prepare, plan, arguments), and a callable that
    launches its kernels with those arguments (no host work but the launch)."""
    from gemm_engine.call import numpy_rules
    from gemm_engine.call.arguments import build_arguments
    from gemm_engine.call.arrays import import_call
    from gemm_engine.call.prepare import prepare
    from gemm_engine.call.request import CallOptions, make_request
    rt = engine.runtime
    arrays = import_call(rt, x, q)
    request = make_request(arrays, numpy_rules.apply(arrays, plain=True), CallOptions(), plain=True)
    prepared = prepare(rt, arrays, request)
    plan = engine.plan_for(prepared.problem, algorithm)
    args, target_ = build_arguments(rt, arrays, prepared)
    packed = plan.signature.pack(engine.launcher.with_workspace(plan, args.values(rt.ptr_arg)))
    return plan, (lambda: engine.launcher.run_packed(plan, packed)), target_.returned


def torch_int4(torch, codes_nk, scales_gn, zeros_gn, group: int):
    """torch's tinygemm int4 weights for codes (N, K) in [0, 15] with scales and zero points (groups,
    N): its dequantization is ``(q - 8) * scale + zero'``, so ``zero' = (8 - zero) * scale``. The
    nibble order of its (N, K / 2) bytes differs between versions: both are tried by the caller."""
    packs = []
    for hi_first in (True, False):
        a, b = (codes_nk[:, ::2], codes_nk[:, 1::2]) if hi_first else (codes_nk[:, 1::2], codes_nk[:, ::2])
        packs.append(((a << 4) | b).to(torch.uint8))
    sz = torch.stack([scales_gn, (8.0 - zeros_gn) * scales_gn], dim=2).to(torch.bfloat16).contiguous()
    return packs, sz


#: Decode tilings timed with ``--variants`` (int4, M <= 64): no split over cubes with longer blocks
#: per plane, a split with shorter ones, planes along N (x read once per cube); (algorithm, knobs).
VARIANTS = (("quantized_decode", dict(column_loads=1, unroll=8, planes=8)),
            ("quantized_decode", dict(column_loads=2, unroll=4, planes=8)),
            ("quantized_decode_split_k", dict(column_loads=2, unroll=2)),
            ("quantized_decode_split_k", dict(column_loads=1, unroll=4)),
            ("quantized_decode_split_k", dict(planes_along="n", planes=4)),
            ("quantized_decode", dict(planes_along="n", planes=4)))


def variant_rows(engine, torch, cp, row: dict, x, q, ref) -> list[dict]:
    """The ``VARIANTS`` of one decode row, each checked then timed (a refusal is a row saying why)."""
    from gemm_engine.algorithms import REGISTRY
    out = []
    for name, knobs in VARIANTS:
        r = dict(row, variant=f"{name}({', '.join(f'{k}={v}' for k, v in knobs.items())})")
        try:
            plan, launch, target_ = planned(engine, x, q, REGISTRY[name](**knobs))
            target_.fill_(float("nan"))
            launch()
            torch.cuda.synchronize()
            r["planned_err"] = rel(torch, target_, ref)
            r["engine_us"] = timed(cp, launch) * 1e6 if r["planned_err"] < TOL else None
            if r["engine_us"]:
                r["speedup"] = r["cublas_us"] / r["engine_us"]
                r["tbps"] = q.nbytes / (r["engine_us"] * 1e-6) / 1e12
        except Exception as exc:   # noqa: BLE001 -- a refused tiling is reported
            r["engine_us"], r["failed"] = None, f"{type(exc).__name__}: {exc}"[:200]
        out.append(r)
    return out


def run_row(args, engine, torch, cp, fmt: str, shape: str, m: int, cache: dict) -> dict:
    import gemm_engine
    n, k = map(int, shape.split("x"))
    key = (fmt, shape)
    if key not in cache:
        rng = np.random.default_rng(0)
        w = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
        group = 128 if fmt == "int4" else None
        q = gemm_engine.quantize(w, fmt, group, symmetric=fmt != "int4", scale_dtype="bfloat16")
        qp = q.prepack() if not args.k_packed else q
        deq = torch.from_numpy(q.dequantize()).cuda()                       # (K, N) float32
        cache.clear()
        cache[key] = dict(q=qp, deq64=deq.double(), w_nk=deq.t().contiguous().to(torch.bfloat16), base=q)
    c = cache[key]
    q, ref_w = c["q"], c["deq64"]
    x = (torch.randn(m, k, device="cuda") * 0.5).to(torch.bfloat16)
    ref = x.double() @ ref_w
    row = dict(format=fmt, shape=shape, m=m, target=target(fmt, m))
    # -- the engine: checked through the public call, then its planned launch checked and timed ------
    y = engine.quantized_matmul(x, q, algorithm=args.algorithm)
    row["err"] = rel(torch, y, ref)
    plan, launch, out = planned(engine, x, q, args.algorithm)
    out.fill_(float("nan"))
    launch()
    torch.cuda.synchronize()
    row["planned_err"] = rel(torch, out, ref)
    row["algorithm"] = plan.algorithm.name
    g = plan.config.batch.global_
    row["tiling"] = f"{g.stage.stage_m}x{g.stage.stage_n}x{g.stage.stage_k}/{plan.config.units}u" + (
        f"/K{plan.config.batch.splits}" if hasattr(plan.config.batch, "splits") else "")
    ok = row["err"] < TOL and row["planned_err"] < TOL
    row["engine_us"] = timed(cp, launch) * 1e6 if ok else None
    # -- cuBLAS bf16, nn.Linear layout -------------------------------------------------------------------
    w_nk = c["w_nk"]
    yb = torch.nn.functional.linear(x, w_nk)
    row["cublas_err"] = rel(torch, yb, ref)
    row["cublas_us"] = timed(cp, lambda: torch.nn.functional.linear(x, w_nk)) * 1e6
    # -- torch's weight-only kernels -------------------------------------------------------------------
    row["torch_wo_us"], row["torch_wo_err"] = None, None
    try:
        if fmt == "int4" and hasattr(torch, "_weight_int4pack_mm"):
            base = c["base"]
            if "int4" not in c:
                codes = torch.from_numpy(base.codes().T.astype(np.int32).copy()).cuda()     # (N, K)
                scales = torch.from_numpy(base.scale_values()).cuda().float()
                zeros = torch.from_numpy(base.zero_values()).cuda().float()
                packs, sz = torch_int4(torch, codes, scales, zeros, 128)
                weights = [torch._convert_weight_to_int4pack(pack, 8) for pack in packs]
                # The nibble order whose product checks (else the first: timed, its error reported).
                good = [wp for wp in weights if rel(torch, torch._weight_int4pack_mm(x, wp, 128, sz), ref) < 2e-2]
                c["int4"] = ((good or weights)[0], sz)
            wp, sz = c["int4"]
            row["torch_wo_err"] = rel(torch, torch._weight_int4pack_mm(x, wp, 128, sz), ref)
            row["torch_wo_us"] = timed(cp, lambda: torch._weight_int4pack_mm(x, wp, 128, sz), 0.02) * 1e6
        elif fmt == "int8" and hasattr(torch, "_weight_int8pack_mm"):
            base = c["base"]
            if "int8" not in c:
                w8 = torch.from_numpy((base.codes().astype(np.int16) - 128).T.astype(np.int8).copy()).cuda()
                s8 = torch.from_numpy(base.scale_values()[0]).cuda().to(torch.bfloat16)
                c["int8"] = (w8, s8)
            w8, s8 = c["int8"]
            row["torch_wo_err"] = rel(torch, torch._weight_int8pack_mm(x, w8, s8), ref)
            row["torch_wo_us"] = timed(cp, lambda: torch._weight_int8pack_mm(x, w8, s8), 0.02) * 1e6
    except Exception as exc:   # noqa: BLE001 -- a baseline this torch lacks is a note, not a failure
        row["torch_wo_note"] = f"{type(exc).__name__}: {str(exc)[:80]}"
    row["weight_bytes"] = q.nbytes
    if row["engine_us"]:
        row["tbps"] = q.nbytes / (row["engine_us"] * 1e-6) / 1e12
        row["speedup"] = row["cublas_us"] / row["engine_us"]
        if row["torch_wo_us"]:
            row["vs_torch"] = row["torch_wo_us"] / row["engine_us"]
    if args.variants and fmt == "int4" and m <= 64:
        row["variants"] = variant_rows(engine, torch, cp, row, x, q, ref)
    return row


def table(rows: list[dict]) -> str:
    head = ("| format | N x K | M | engine us | algorithm (tiling) | cuBLAS bf16 us | x cuBLAS | target | "
            "torch w-only us | x torch | weights TB/s | err |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        eng = f"{r['engine_us']:.1f}" if r.get("engine_us") else f"FAILED {r.get('failed', 'check')[:60]}"
        met = "" if r.get("speedup") is None or r["target"] is None else \
            (" met" if r["speedup"] >= r["target"] else " not met")
        wo = f"{r['torch_wo_us']:.1f}" if r.get("torch_wo_us") else ("n/a" if r["format"] != "fp8_e4m3" else "-")
        lines.append(f"| {r['format']} | {r['shape']} | {r['m']} | {eng} | {r.get('algorithm', '')} "
                     f"({r.get('tiling', '')}) | {r['cublas_us']:.1f} | {r.get('speedup', 0):.2f} | "
                     f">= {r['target']}{met} | {wo} | {r.get('vs_torch', 0):.2f} | {r.get('tbps', 0):.2f} | "
                     f"{max(r['err'], r['planned_err']):.1e} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--formats", default="int4,int8,fp8_e4m3", help="comma list of int4, int8, fp8_e4m3")
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma list of NxK")
    p.add_argument("--ms", default="", help="comma list of M (default: the issue's per format)")
    p.add_argument("--algorithm", default=None, help="an algorithm name instead of the default choice")
    p.add_argument("--k-packed", action="store_true", help="time the k_packed (GPTQ) layout instead of prepacked")
    p.add_argument("--variants", action="store_true",
                   help="also time the decode kernel's other tilings at M <= 64 (int4): rows marked 'variant', "
                        "not in the table's headline")
    p.add_argument("--json", help="write every row here too")
    current_tables.add_arguments(p, "quantized")
    args = p.parse_args(argv)
    import cupy as cp
    import torch
    import gemm_engine
    engine = gemm_engine.Engine("cuda")
    rows, cache = [], {}
    for fmt in args.formats.split(","):
        ms = [int(v) for v in args.ms.split(",")] if args.ms else (INT4_MS if fmt == "int4" else BYTE_MS)
        for shape in args.shapes.split(","):
            for m in ms:
                try:
                    row = run_row(args, engine, torch, cp, fmt, shape, m, cache)
                except Exception as exc:  # noqa: BLE001 -- one row's failure is reported, the rest run
                    row = dict(format=fmt, shape=shape, m=m, target=target(fmt, m), err=float("nan"),
                               planned_err=float("nan"), cublas_us=0.0, failed=f"{type(exc).__name__}: {exc}"[:300])
                rows.append(row)
                print(json.dumps(row), flush=True)
    text = table(rows)
    variants = [v for r in rows for v in r.get("variants", ())]
    if variants:
        text += "\n\nDecode tilings (`--variants`), int4 M <= 64:\n\n| N x K | M | tiling | us | x cuBLAS | TB/s |\n" \
                "|---|---|---|---|---|---|\n" + "\n".join(
                    f"| {v['shape']} | {v['m']} | {v['variant']} | "
                    + (f"{v['engine_us']:.1f} | {v['speedup']:.2f} | {v['tbps']:.2f} |" if v.get("engine_us")
                       else f"{v.get('failed', 'FAILED check')} | | |") for v in variants)
    print(text)
    device = torch.cuda.get_device_name()
    current_tables.write(args, device, "quantized weights with bf16 activations (issue 31)",
                         current_tables.command_line("quantized.py", sys.argv[1:] if argv is None else argv), text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r.get("engine_us") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
