"""The batch / fusion / skinny / split-K targets (issue 4), each beside its baseline in the same run.

    python3 bench/issue4_bench.py [--repeat 20] [--json FILE] [--markdown FILE]

Rows (CUDA; torch is used for the baselines where CuPy has no equivalent):
* fused ``relu(a @ b + bias)``, bf16, 8192 x 8192 x 64: the engine's one kernel against the unfused
  torch sequence (``relu(a @ b + bias)``: matmul, add, relu) and ``relu(addmm(bias, a, b))``;
* vector-matrix bf16 1 x 8192 x 8192 (and matrix-vector 8192 x 1 x 8192) against cupy / torch matmul,
  with the bandwidth reached;
* 256 batches of 128 x 128 x 128 f16 against cuBLAS batched (cupy.matmul, torch.bmm);
* 64 x 64 x 65536 f32: the engine's default (split-K) against the same engine without split-K
  (``simple_unit``) and cuBLAS.
Times: median of CUDA-event-timed runs after warm-up (bench/common.events_time), 10 calls per event
pair so that sub-10-microsecond kernels are not dominated by event resolution.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import date

import numpy as np

from common import events_time

import gemm_engine
from gemm_engine.algorithms.skinny import SkinnySplitKAlgorithm, select_split_skinny
from gemm_engine.dtypes import bfloat16_dtype


def _dev(cp, rng, shape, dtype):
    return cp.asarray(rng.standard_normal(shape).astype(dtype))


def _rel(cp, result, ref) -> float:
    r = cp.asnumpy(cp.asarray(result).astype(cp.float32)).astype(np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.linalg.norm(r - ref) / np.linalg.norm(ref))


def rows_for(engine, repeat):
    import torch
    cp = engine.runtime.cp
    rng = np.random.default_rng(0)
    bf16 = bfloat16_dtype()
    timed = lambda fn: events_time(cp, fn, repeat=repeat, inner=10)  # noqa: E731
    out = []

    def add(group, name, fn, bytes_moved=None, flops=None, err=None, baseline=False, choice=None):
        try:
            t = timed(fn)
        except Exception as exc:  # a failure is a result too: record it, go on
            out.append({"group": group, "name": name, "failed": f"{type(exc).__name__}: {str(exc)[:160]}"})
            return
        row = {"group": group, "name": name, "ms": t * 1e3, "baseline": baseline}
        if bytes_moved:
            row["GB/s"] = bytes_moved / t / 1e9
        if flops:
            row["TFLOP/s"] = flops / t / 1e12
        if err is not None:
            row["rel_error"] = err
        if choice:
            row["choice"] = choice
        out.append(row)
        print(row, flush=True)

    def choice():
        alg, cfg = engine.last_choice
        st = cfg.batch.global_.stage
        splits = getattr(cfg.batch, "splits", None)
        return f"{alg.name} {st.stage_m}x{st.stage_n}x{st.stage_k}/{cfg.units}u" + (f"/S{splits}" if splits else "")

    # 1. fused bias + relu, bf16 8192 x 8192 x 64
    m, n, k = 8192, 8192, 64
    a, b, bias = _dev(cp, rng, (m, k), bf16), _dev(cp, rng, (k, n), bf16), _dev(cp, rng, (n,), bf16)
    ta, tb, tbias = (torch.from_dlpack(x) for x in (a, b, bias))
    g = "fused relu(a@b+bias) bf16 8192x8192x64"
    ref = torch.relu(ta.float() @ tb.float() + tbias.float()).cpu().numpy()
    res = engine.matmul(a, b, bias=bias, activation="relu")
    add(g, "gemm_engine fused", lambda: engine.matmul(a, b, bias=bias, activation="relu"),
        err=_rel(cp, res, ref), choice=choice())
    add(g, "torch relu(a@b + bias) (unfused)", lambda: torch.relu(ta @ tb + tbias), baseline=True)
    add(g, "torch relu(addmm(bias, a, b)) (unfused)", lambda: torch.relu(torch.addmm(tbias, ta, tb)))
    add(g, "torch a@b alone (no epilogue)", lambda: ta @ tb)
    del a, b, bias, ta, tb, tbias, ref, res

    # 2. skinny: vector-matrix and matrix-vector, bf16
    for label, (m, n, k) in (("vector-matrix 1x8192x8192", (1, 8192, 8192)),
                             ("vector-matrix 1x14336x4096", (1, 14336, 4096)),
                             ("matrix-vector 8192x1x8192", (8192, 1, 8192))):
        a, b = _dev(cp, rng, (m, k), bf16), _dev(cp, rng, (k, n), bf16)
        moved = (m * k + k * n + m * n) * 2
        g = f"{label} bf16"
        ref = (a.astype(cp.float32) @ b.astype(cp.float32)).get()
        res = engine.matmul(a, b)
        add(g, "gemm_engine auto", lambda: engine.matmul(a, b), bytes_moved=moved, err=_rel(cp, res, ref),
            choice=choice())
        add(g, "cuBLAS (cupy.matmul)", lambda: cp.matmul(a, b), bytes_moved=moved, baseline=True)
        ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
        add(g, "cuBLAS (torch.matmul)", lambda: torch.matmul(ta, tb), bytes_moved=moved, baseline=True)
        add(g, "device copy of the matrix (cupy)", lambda: (b if n > 1 else a).copy(),
            bytes_moved=2 * 2 * k * max(m, n))
        # The members auto chooses between, and the split counts around the split kernel's own.
        res = engine.matmul(a, b, algorithm="skinny")
        add(g, "gemm_engine skinny (one launch)", lambda: engine.matmul(a, b, algorithm="skinny"),
            bytes_moved=moved, err=_rel(cp, res, ref), choice=choice())
        if m == 1:
            problem = engine.problem_for(a, b)
            for s in (16, 32, 64):
                alg = SkinnySplitKAlgorithm(select_split_skinny(problem, engine.dialect, s))
                res = engine.matmul(a, b, algorithm=alg)
                add(g, f"gemm_engine skinny_split_k S~{s}", lambda alg=alg: engine.matmul(a, b, algorithm=alg),
                    bytes_moved=moved, err=_rel(cp, res, ref), choice=choice())

    # 3. batched small: 256 x 128^3 f16
    a, b = _dev(cp, rng, (256, 128, 128), np.float16), _dev(cp, rng, (256, 128, 128), np.float16)
    flops = 2 * 256 * 128 ** 3
    g = "batched 256x128x128x128 f16"
    ref = (a.astype(cp.float32) @ b.astype(cp.float32)).get()
    res = engine.matmul(a, b)
    add(g, "gemm_engine auto", lambda: engine.matmul(a, b), flops=flops, err=_rel(cp, res, ref), choice=choice())
    add(g, "cuBLAS batched (cupy.matmul)", lambda: cp.matmul(a, b), flops=flops, baseline=True)
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    add(g, "cuBLAS batched (torch.bmm)", lambda: torch.bmm(ta, tb), flops=flops, baseline=True)

    # 4. split-K: 64 x 64 x 65536 f32
    a, b = _dev(cp, rng, (64, 65536), np.float32), _dev(cp, rng, (65536, 64), np.float32)
    flops = 2 * 64 * 64 * 65536
    g = "64x64x65536 f32 split-K"
    ref = a.get().astype(np.float64) @ b.get().astype(np.float64)
    res = engine.matmul(a, b)
    add(g, "gemm_engine auto (split-K)", lambda: engine.matmul(a, b), flops=flops, err=_rel(cp, res, ref),
        choice=choice())
    res = engine.matmul(a, b, algorithm="simple_unit")
    add(g, "gemm_engine simple_unit (no split)", lambda: engine.matmul(a, b, algorithm="simple_unit"),
        flops=flops, err=_rel(cp, res, ref), baseline=True, choice=choice())
    add(g, "cuBLAS (cupy.matmul)", lambda: cp.matmul(a, b), flops=flops)
    return out


def markdown(rows, device) -> str:
    lines = [f"# Issue 4 targets on {device}, {date.today()}", "",
             "Ratio: the baseline row's time / this row's time (> 1: faster than the baseline). "
             "Baseline of each group: the first row marked baseline (the fastest such row).", "",
             "| group | implementation | choice | ms | GB/s | TFLOP/s | speed-up vs baseline | rel err |",
             "|---|---|---|---|---|---|---|---|"]
    base = {}
    for r in rows:
        if r.get("baseline") and "ms" in r:
            base[r["group"]] = min(base.get(r["group"], 1e30), r["ms"])
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['group']} | {r['name']} | | | | | | FAILED {r['failed'][:80]} |")
            continue
        ratio = f"{base[r['group']] / r['ms']:.2f}" if r["group"] in base else ""
        fmt = lambda key, spec: format(r[key], spec) if key in r else ""  # noqa: E731
        lines.append(f"| {r['group']} | {r['name']} | {r.get('choice', '')} | {r['ms']:.4f} | {fmt('GB/s', '.0f')} | "
                     f"{fmt('TFLOP/s', '.2f')} | {ratio} | {fmt('rel_error', '.1e')} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--json")
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    engine = gemm_engine.Engine("cuda")
    rows = rows_for(engine, args.repeat)
    device = engine.device.name
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "date": str(date.today()), "rows": rows}, f, indent=1)
    text = markdown(rows, device)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
