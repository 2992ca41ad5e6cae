"""Time ``pipelined_wgmma`` tilings against ``pipelined_mma`` and cuBLAS on one Hopper GPU (CUDA only).

Same method as bench/mma_sweep.py (whose helpers it uses): raw 16-bit row-major operands on the
device, every kernel checked against a float32 cuBLAS product of the same inputs (output poisoned
first), timed with CUDA events around launches of the planned kernel: ``1 launch`` is the median of
single launches, ``50 launches`` the median over back-to-back batches of 50.

    python3 bench/wgmma_sweep.py --json out.json     (prints a table last)
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm  # noqa: E402
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm, WgmmaSelection  # noqa: E402
from gemm_engine.dtypes import BFLOAT16, FLOAT16, bfloat16_dtype  # noqa: E402
from gemm_engine.errors import SetupError  # noqa: E402
from gemm_engine.frontend import vector_alignment  # noqa: E402
from gemm_engine.problem import Layout, MatmulProblem  # noqa: E402
from mma_sweep import _as_f32, _View, events_time  # noqa: E402

ALGS = {
    "mma auto": lambda: PipelinedMmaAlgorithm(),
    "wg auto": lambda: PipelinedWgmmaAlgorithm(),
    "wg 128x256 S4 p1": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection()),
    "wg 128x256 S4 p0": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection(wgmma_pending=0)),
    "wg 128x256 S3 p0": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection(stages=3, wgmma_pending=0)),
    "wg 128x128 S4 p1": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection(tile_n=128)),
    "wg 128x128 S6 p1": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection(tile_n=128, stages=6)),
    "wg 256x128 S4 p1": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection(partition_m=2, tile_n=128)),
}
SHAPES = {"4096": (4096, 4096, 4096), "8192": (8192, 8192, 8192), "2048": (2048, 2048, 2048),
          "1024": (1024, 1024, 1024), "1000": (1000, 1000, 1000), "4093": (4093, 4093, 4093),
          "8192x8192x64": (8192, 8192, 64)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096,8192,2048,1000,4093")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--algs", default=",".join(ALGS))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    eng = gemm_engine.Engine("cuda")
    rt, cp = eng.runtime, eng.runtime.cp
    rows = []
    for dt in args.dtypes.split(","):
        et = BFLOAT16 if dt == "bfloat16" else FLOAT16
        npdt = bfloat16_dtype() if dt == "bfloat16" else np.float16
        for sname in args.shapes.split(","):
            m, n, k = SHAPES[sname]
            rng = np.random.default_rng(0)
            a = cp.asarray(rng.standard_normal((m, k)).astype(npdt).view(np.uint16))
            b = cp.asarray(rng.standard_normal((k, n)).astype(npdt).view(np.uint16))
            ref = cp.matmul(_as_f32(cp, a, dt), _as_f32(cp, b, dt))
            flops = 2.0 * m * n * k
            ha, hb = a.view(cp.float16), b.view(cp.float16)   # cuBLAS times f16 for both dtypes
            t = events_time(cp, lambda: cp.matmul(ha, hb))
            tk = events_time(cp, lambda: cp.matmul(ha, hb), repeat=5, inner=50)
            rows.append(dict(shape=sname, dtype=dt, name="cuBLAS", call=flops / t / 1e12, kern=flops / tk / 1e12))
            align = vector_alignment(a.data.ptr // 2, _View(k), 2), vector_alignment(b.data.ptr // 2, _View(n), 2)
            problem = MatmulProblem(1, m, n, k, et, et, et, Layout.ROW, Layout.ROW, *align)
            for name in args.algs.split(","):
                out = cp.empty((m, n), cp.uint16)
                try:
                    alg, cfg, kernel = eng._plan(ALGS[name](), problem)
                    shared = getattr(cfg.batch.global_, "dynamic_shared_bytes", 0)
                    argv = [a, 0, k, 0, b, 0, n, 0, out, 0, n, m * n, m, n, k]
                    launch = lambda: rt.launch(kernel, alg.cube_count(cfg, problem), cfg.units, argv,
                                               shared_bytes=shared)
                    out.fill(0x7e00)   # NaN in f16, a large value in bf16: poisoned
                    launch()
                    cp.cuda.get_current_stream().synchronize()
                except SetupError as exc:
                    rows.append(dict(shape=sname, dtype=dt, name=name, skipped=str(exc)[:90]))
                    continue
                except Exception as exc:  # a compile or launch failure: report, go on
                    rows.append(dict(shape=sname, dtype=dt, name=name, skipped=f"{type(exc).__name__}: {exc}"[:300]))
                    print(rows[-1], flush=True)
                    continue
                err = float(cp.linalg.norm(_as_f32(cp, out, dt) - ref) / cp.linalg.norm(ref))
                tk = events_time(cp, launch, repeat=5, inner=50)
                t = events_time(cp, launch)
                st = cfg.batch.global_.stage
                rows.append(dict(shape=sname, dtype=dt, name=name, call=flops / t / 1e12, kern=flops / tk / 1e12,
                                 err=err, tiling=f"{st.stage_m}x{st.stage_n}x{st.stage_k}/{cfg.units}u"
                                 f"/S{getattr(cfg.batch.global_, 'stages', '-')}"))
                print(rows[-1], flush=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    cublas = {(r["shape"], r["dtype"]): r["kern"] for r in rows if r["name"] == "cuBLAS"}
    print("| shape | dtype | impl | tiling | TFLOP/s 1 launch | TFLOP/s 50 launches | vs cuBLAS | err vs f32 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['shape']} | {r['dtype']} | {r['name']} | skipped: {r['skipped'][:120]} | | | | |")
            continue
        err = f"{r['err']:.1e}" if r.get("err") is not None else ""
        print(f"| {r['shape']} | {r['dtype']} | {r['name']} | {r.get('tiling', '')} | {r['call']:.0f} | "
              f"{r['kern']:.0f} | {r['kern'] / cublas[(r['shape'], r['dtype'])]:.2f} | {err} |")


if __name__ == "__main__":
    main()
