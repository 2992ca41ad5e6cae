"""Quantized weights with bf16 activations (issue 31's speed rows): the engine against cuBLAS bf16 of
the same shape (torch, nn.Linear layout) and torch's weight-only kernels, in the same run.

Rows: int4 group 128 (asymmetric: scales and zeros, as GPTQ / AWQ checkpoints) at N x K in
{4096 x 4096, 14336 x 4096, 4096 x 14336, 8192 x 8192} for M in {1, 4, 16, 64, 256, 1024, 4096};
int8 (per channel, symmetric) and fp8 e4m3 (per channel) at M in {1, 4, 16, 256}. Weights are
quantized once (`gemm_engine.quantize`, then `prepack`); torch's int4 weight-only kernel
(`torch._weight_int4pack_mm`, group 128) and int8 one (`torch._weight_int8pack_mm`) get the same
codes and scales, where this torch has them.

Every result is checked before it is timed: the engine's through `quantized_matmul` (its default
choice, or ``--algorithm``) and through the planned launch that is timed, each against a float64
product of x and the dequantized weights (relative Frobenius error < 1e-2), the baselines against
the same reference. "engine us", "cuBLAS us" and torch's weight-only column are device times in
CUDA-graph replay (common.replayed: 20 calls a graph, the median of 9 replays): the public call's
kernels and cuBLAS's, host time removed from both, as a decode loop under CUDA graphs runs them
(back-to-back launches time the host at these sizes: a 4096 x 4096 cuBLAS call's kernel takes 9 us
and its launch 15-25); "call us" is the whole public call repeated, host time included (CUDA-event
medians of back-to-back calls). "TB/s" counts the packed weights, scales and zeros once per call. The table goes to bench/results/<device>/quantized.md (current_tables).

    BENCH_RESULTS=$OUT python3 bench/quantized.py              # every row (about 5 minutes on an H100)
    BENCH_RESULTS=$OUT python3 bench/quantized.py --variants   # and the decode tilings at M = 1, 16
    # the lead's short run (about 2 minutes): decode and prefill of two shapes, the first run's decode beside
    python3 bench/quantized.py --shapes 4096x4096,14336x4096 --byte-ms 1,16,256 --variants
    python3 bench/quantized.py --formats int4 --ms 1,16 --shapes 4096x4096 --json q.json
    # the dequantize-first pass alone (its copy checked bit for bit, then timed; prints, no table written)
    python3 bench/quantized.py --pass-only --shapes 4096x4096,14336x4096 --ms 256 --byte-ms 256
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import numpy as np  # noqa: E402

import current_tables  # noqa: E402
from common import replayed  # noqa: E402

SHAPES = ("4096x4096", "14336x4096", "4096x14336", "8192x8192")    # N x K
INT4_MS = (1, 4, 16, 64, 256, 1024, 4096)
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


def planned(engine, x, q, algorithm=None, only: str | None = None):
    """(plan, launch, output tensor, workspace or None): the engine's call of ``x @ q`` set up step
    by step as the call path does (import, numpy's rules, request, prepare, plan, arguments), and a
    callable that launches its kernels with those arguments (no host work but the launch); with
    ``only`` a kernel name, just that one of the plan's kernels."""
    from gemm_engine.call import numpy_rules
    from gemm_engine.call.arguments import build_arguments
    from gemm_engine.call.arrays import import_call
    from gemm_engine.call.prepare import prepare
    from gemm_engine.call.request import CallOptions, make_request
    from gemm_engine.dtypes import device_dtype
    rt = engine.runtime
    arrays = import_call(rt, x, q)
    request = make_request(arrays, numpy_rules.apply(arrays, plain=True), CallOptions(), plain=True)
    prepared = prepare(rt, arrays, request)
    plan = engine.plan_for(prepared.problem, algorithm)
    args, target_ = build_arguments(rt, arrays, prepared)
    values, kept = args.values(rt.ptr_arg), []
    if plan.workspace is not None:   # held by the launch (with_workspace's own would go back to the pool)
        kept.append(rt.empty((plan.workspace.count,), device_dtype(plan.workspace.element)))
        values["workspace"] = rt.ptr_arg(kept[0])[0]
    packed = plan.signature.pack(engine.launcher.with_workspace(replace(plan, workspace=None), values))
    run = plan
    if only is not None:
        names = [x.name for x in plan.algorithm.launches(plan.config, prepared.problem)]
        if only not in names:
            raise ValueError(f"{plan.algorithm.name} launches {names}, not {only}")
        run = replace(plan, launches=(plan.launches[names.index(only)],))

    def launch(held=kept):           # the workspace lives as long as the launch
        engine.launcher.run_packed(run, packed)
    return plan, launch, target_.returned, (kept[0] if kept else None)


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


#: Decode tilings timed with ``--variants`` (int4, M in ``--variant-ms``), (algorithm, knobs): the
#: first H100 run's choice (split K, one register buffer), split K with the next block in flight,
#: one launch of 64-column cubes (8 planes), of 32-column cubes (16 planes) with and without it
#: (bench/SELECTION_NOTES.md, "Quantized decode").
VARIANTS = (("quantized_decode_split_k", dict(prefetch=0)),
            ("quantized_decode_split_k", dict(prefetch=1)),
            ("quantized_decode", dict(planes=8, prefetch=1)),
            ("quantized_decode", dict(planes=16, column_loads=1, unroll=2, prefetch=1)),
            ("quantized_decode", dict(planes=16, column_loads=1, unroll=2, prefetch=0)))


def variant_rows(engine, torch, cp, row: dict, x, q, ref) -> list[dict]:
    """The ``VARIANTS`` of one decode row, each checked then timed (a refusal is a row saying why)."""
    from gemm_engine.algorithms import REGISTRY
    out = []
    for name, knobs in VARIANTS:
        r = dict(row, variant=f"{name}({', '.join(f'{k}={v}' for k, v in knobs.items())})")
        try:
            algorithm = REGISTRY[name](**knobs)
            poisoned = torch.full(tuple(ref.shape), float("nan"), dtype=x.dtype, device=x.device)   # unwritten: NaN
            engine.quantized_matmul(x, q, algorithm=algorithm, out=poisoned)
            r["planned_err"] = rel(torch, poisoned, ref)
            r["engine_us"] = replayed(torch, lambda: engine.quantized_matmul(x, q, algorithm=algorithm)) * 1e6 \
                if r["planned_err"] < TOL else None
            if r["engine_us"]:
                r["speedup"] = r["cublas_us"] / r["engine_us"]
                r["tbps"] = q.nbytes / (r["engine_us"] * 1e-6) / 1e12
        except Exception as exc:   # noqa: BLE001 -- a refused tiling is reported
            r["engine_us"], r["failed"] = None, f"{type(exc).__name__}: {exc}"[:200]
        out.append(r)
    return out


def weights_for(args, torch, fmt: str, shape: str, cache: dict) -> dict:
    """The row's quantized weight (prepacked unless ``--k-packed``), its float64 dequantized values
    on the GPU, their bf16 (N, K) for cuBLAS and the unpacked original: made once per (format, shape)."""
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
    return cache[key]


def run_row(args, engine, torch, cp, fmt: str, shape: str, m: int, cache: dict) -> dict:
    n, k = map(int, shape.split("x"))
    c = weights_for(args, torch, fmt, shape, cache)
    q, ref_w = c["q"], c["deq64"]
    x = (torch.randn(m, k, device="cuda") * 0.5).to(torch.bfloat16)
    ref = x.double() @ ref_w
    row = dict(format=fmt, shape=shape, m=m, target=target(fmt, m))
    # -- the engine: checked through the public call, then its planned launch checked and timed ------
    y = engine.quantized_matmul(x, q, algorithm=args.algorithm)
    row["err"] = rel(torch, y, ref)
    plan, launch, out, _ = planned(engine, x, q, args.algorithm)
    out.fill_(float("nan"))
    launch()
    torch.cuda.synchronize()
    row["planned_err"] = rel(torch, out, ref)
    row["algorithm"] = plan.algorithm.name
    g = plan.config.batch.global_
    row["tiling"] = f"{g.stage.stage_m}x{g.stage.stage_n}x{g.stage.stage_k}/{plan.config.units}u" + (
        f"/K{plan.config.batch.splits}" if hasattr(plan.config.batch, "splits") else "")
    ok = row["err"] < TOL and row["planned_err"] < TOL
    row["engine_us"] = replayed(torch, lambda: engine.quantized_matmul(x, q, algorithm=args.algorithm)) * 1e6 \
        if ok else None
    # The whole public call, repeated (host time included: its repeats take the fast path).
    row["call_us"] = timed(cp, lambda: engine.quantized_matmul(x, q, algorithm=args.algorithm)) * 1e6 if ok else None
    # -- cuBLAS bf16, nn.Linear layout -------------------------------------------------------------------
    w_nk = c["w_nk"]
    yb = torch.nn.functional.linear(x, w_nk)
    row["cublas_err"] = rel(torch, yb, ref)
    row["cublas_us"] = replayed(torch, lambda: torch.nn.functional.linear(x, w_nk)) * 1e6
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
            row["torch_wo_us"] = replayed(torch, lambda: torch._weight_int4pack_mm(x, wp, 128, sz), 5, 3) * 1e6
        elif fmt == "int8" and hasattr(torch, "_weight_int8pack_mm"):
            base = c["base"]
            if "int8" not in c:
                w8 = torch.from_numpy((base.codes().astype(np.int16) - 128).T.astype(np.int8).copy()).cuda()
                s8 = torch.from_numpy(base.scale_values()[0]).cuda().to(torch.bfloat16)
                c["int8"] = (w8, s8)
            w8, s8 = c["int8"]
            row["torch_wo_err"] = rel(torch, torch._weight_int8pack_mm(x, w8, s8), ref)
            row["torch_wo_us"] = replayed(torch, lambda: torch._weight_int8pack_mm(x, w8, s8), 5, 3) * 1e6
    except Exception as exc:   # noqa: BLE001 -- a baseline this torch lacks is a note, not a failure
        row["torch_wo_note"] = f"{type(exc).__name__}: {str(exc)[:80]}"
    row["weight_bytes"] = q.nbytes
    if row["engine_us"]:
        row["tbps"] = q.nbytes / (row["engine_us"] * 1e-6) / 1e12
        row["speedup"] = row["cublas_us"] / row["engine_us"]
        if row["torch_wo_us"]:
            row["vs_torch"] = row["torch_wo_us"] / row["engine_us"]
    if args.variants and fmt == "int4" and m in args.variant_ms:
        row["variants"] = variant_rows(engine, torch, cp, row, x, q, ref)
    return row


def pass_row(args, engine, torch, cp, fmt: str, shape: str, m: int, cache: dict) -> dict:
    """``--pass-only``: the dequantizing pass (batch/dequantize_first.py) of the plan of ``x @ q``
    alone: its copy (rows of K, ``k_pitch`` long) checked bit for bit against the dequantized
    weights rounded to bf16 (the padding past K zeros) in a poisoned workspace, then timed. "TB/s"
    counts the packed words, scales and zeros read plus the copy written."""
    from gemm_engine.batch.dequantize_first import DEQUANTIZE_KERNEL
    from gemm_engine.batch.k_major import k_pitch
    n, k = map(int, shape.split("x"))
    q = weights_for(args, torch, fmt, shape, cache)["q"]
    x = (torch.randn(m, k, device="cuda") * 0.5).to(torch.bfloat16)
    row = dict(format=fmt, shape=shape, m=m)
    plan, launch, _, ws = planned(engine, x, q, args.algorithm or "dequantized_specialized_wgmma",
                                  only=DEQUANTIZE_KERNEL)
    batch = plan.config.batch
    pitch = k_pitch(k, batch.pitch_align)
    start = m * pitch if batch.lhs_copy else 0
    ws.fill(0xFFFF)                                         # bf16 NaN: an unwritten value shows
    launch()
    copy = cp.asnumpy(ws[start:start + n * pitch]).reshape(n, pitch).astype(np.uint32) << 16
    copy = copy.view(np.float32)
    expect = q.dequantize(rounded_to="bfloat16").T
    row["copy_ok"] = bool(np.array_equal(copy[:, :k], expect) and not copy[:, k:].any())
    row["algorithm"] = plan.algorithm.name
    row["bytes"] = q.nbytes + n * pitch * 2
    row["pass_us"] = timed(cp, launch) * 1e6 if row["copy_ok"] else None
    if row["pass_us"]:
        row["tbps"] = row["bytes"] / (row["pass_us"] * 1e-6) / 1e12
    return row


def pass_table(rows: list[dict]) -> str:
    lines = ["| format | N x K | pass us | MB moved | TB/s | copy | algorithm |", "|" + "---|" * 7]
    for r in rows:
        us = f"{r['pass_us']:.1f}" if r.get("pass_us") else f"FAILED {r.get('failed', 'check')[:80]}"
        lines.append(f"| {r['format']} | {r['shape']} | {us} | {r.get('bytes', 0) / 1e6:.1f} | "
                     f"{r.get('tbps', 0):.2f} | {'exact' if r.get('copy_ok') else 'WRONG'} | {r.get('algorithm', '')} |")
    return "\n".join(lines)


def table(rows: list[dict]) -> str:
    head = ("| format | N x K | M | engine us | call us | algorithm (tiling) | cuBLAS bf16 us | x cuBLAS | target | "
            "torch w-only us | x torch | weights TB/s | err |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        eng = f"{r['engine_us']:.1f}" if r.get("engine_us") else f"FAILED {r.get('failed', 'check')[:60]}"
        met = "" if r.get("speedup") is None or r["target"] is None else \
            (" met" if r["speedup"] >= r["target"] else " not met")
        wo = f"{r['torch_wo_us']:.1f}" if r.get("torch_wo_us") else ("n/a" if r["format"] != "fp8_e4m3" else "-")
        call = f"{r['call_us']:.1f}" if r.get("call_us") else "-"
        lines.append(f"| {r['format']} | {r['shape']} | {r['m']} | {eng} | {call} | {r.get('algorithm', '')} "
                     f"({r.get('tiling', '')}) | {r['cublas_us']:.1f} | {r.get('speedup', 0):.2f} | "
                     f">= {r['target']}{met} | {wo} | {r.get('vs_torch', 0):.2f} | {r.get('tbps', 0):.2f} | "
                     f"{max(r['err'], r['planned_err']):.1e} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--formats", default="int4,int8,fp8_e4m3", help="comma list of int4, int8, fp8_e4m3")
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma list of NxK")
    p.add_argument("--ms", default="", help="comma list of M for int4 (default: the issue's)")
    p.add_argument("--byte-ms", default="", help="comma list of M for int8 and fp8 (default: the issue's)")
    p.add_argument("--algorithm", default=None, help="an algorithm name instead of the default choice")
    p.add_argument("--k-packed", action="store_true", help="time the k_packed (GPTQ) layout instead of prepacked")
    p.add_argument("--variants", action="store_true",
                   help="also time the decode kernel's tilings (VARIANTS) at int4 M in --variant-ms: rows "
                        "marked 'variant', not in the table's headline")
    p.add_argument("--variant-ms", default="1,16", help="comma list of M for --variants")
    p.add_argument("--pass-only", action="store_true",
                   help="time only the dequantize-first pass (gemm_engine_dequantize_rhs) of each row's plan "
                        "(--algorithm, default dequantized_specialized_wgmma): printed, the table kept unless --markdown")
    p.add_argument("--json", help="write every row here too")
    current_tables.add_arguments(p, "quantized")
    args = p.parse_args(argv)
    args.variant_ms = {int(v) for v in args.variant_ms.split(",")}
    import cupy as cp
    import torch
    import gemm_engine
    engine = gemm_engine.Engine("cuda", background_compile=False)   # the chosen kernel, not a stand-in
    rows, cache = [], {}
    for fmt in args.formats.split(","):
        given = args.ms if fmt == "int4" else args.byte_ms
        ms = [int(v) for v in given.split(",")] if given else (INT4_MS if fmt == "int4" else BYTE_MS)
        for shape in args.shapes.split(","):
            for m in ms:
                try:
                    row = (pass_row if args.pass_only else run_row)(args, engine, torch, cp, fmt, shape, m, cache)
                except Exception as exc:  # noqa: BLE001 -- one row's failure is reported, the rest run
                    row = dict(format=fmt, shape=shape, m=m, target=target(fmt, m), err=float("nan"),
                               planned_err=float("nan"), cublas_us=0.0, failed=f"{type(exc).__name__}: {exc}"[:300])
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.pass_only:
        return pass_rows_out(args, argv, torch, rows)
    text = table(rows)
    variants = [v for r in rows for v in r.get("variants", ())]
    if variants:
        text += "\n\nDecode tilings (`--variants`), int4:\n\n| N x K | M | tiling | us | x cuBLAS | TB/s |\n" \
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


def pass_rows_out(args, argv, torch, rows: list[dict]) -> int:
    """``--pass-only``'s table: printed (and written to ``--markdown`` if given), JSON with ``--json``."""
    text = pass_table(rows)
    print(text)
    if args.markdown:
        current_tables.write(args, torch.cuda.get_device_name(), "the dequantize-first pass alone (issue 31)",
                             current_tables.command_line("quantized.py", sys.argv[1:] if argv is None else argv), text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r.get("pass_us") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
