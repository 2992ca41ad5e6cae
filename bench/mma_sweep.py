"""Sweep tilings of the pipelined tensor-core algorithm against cuBLAS on one GPU (CUDA only).

For every shape and dtype: cuBLAS (cupy.matmul, on float16 data for both dtypes) and each
selection, each checked against a float32 cuBLAS product of the same inputs (relative error, output
poisoned first) and timed with CUDA events around launches of the planned kernel (no frontend):
``1 launch`` is the median of single launches, ``50 launches`` the median over back-to-back
batches of 50 (the GPU time once the host keeps up).

    python3 bench/mma_sweep.py --json out.json     (prints a table last)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms import REGISTRY  # noqa: E402
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm, PipelinedSelection  # noqa: E402
from gemm_engine.dtypes import BFLOAT16, FLOAT16, bfloat16_dtype  # noqa: E402
from gemm_engine.errors import SetupError  # noqa: E402
from gemm_engine.frontend import vector_alignment  # noqa: E402
from gemm_engine.problem import Layout, MatmulProblem  # noqa: E402

SEL = {  # name -> selection (None: the algorithm's own rule)
    "auto": None,
    "128x256s3": PipelinedSelection(),
    "128x256s4": PipelinedSelection(stages=4),
    "128x256nofb": PipelinedSelection(fragment_buffering=False),
    "128x256k64s3": PipelinedSelection(stage_k=64, stages=3),
    "128x128s4": PipelinedSelection(planes_n=2, stages=4),
    "128x128k64s3": PipelinedSelection(planes_n=2, stage_k=64, stages=3),
    "256x128s3": PipelinedSelection(planes_m=4, planes_n=2, stages=3),
    "64x128s4": PipelinedSelection(planes_n=2, partition_m=2, stages=4),
    "64x64s4": PipelinedSelection(planes_n=2, partition_m=2, partition_n=4, stages=4),
}
SHAPES = {"4096": (4096, 4096, 4096), "4093": (4093, 4093, 4093), "1000": (1000, 1000, 1000),
          "2048": (2048, 2048, 2048), "1024": (1024, 1024, 1024)}


def events_time(cp, fn, repeat=20, inner=1):
    for _ in range(3):
        fn()
    cp.cuda.get_current_stream().synchronize()
    times = []
    for _ in range(repeat):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b) / 1e3 / inner)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096,4093,1000,2048,1024")
    ap.add_argument("--dtypes", default="float16")
    ap.add_argument("--sels", default=",".join(SEL))
    ap.add_argument("--json", default=None)
    ap.add_argument("--extra", default="", help="registered algorithm names to time too")
    args = ap.parse_args()
    eng = gemm_engine.Engine("cuda")
    rt, cp = eng.runtime, eng.runtime.cp
    rows = []
    for dt in args.dtypes.split(","):
        et = BFLOAT16 if dt == "bfloat16" else FLOAT16
        for sname in args.shapes.split(","):
            m, n, k = SHAPES[sname]
            rng = np.random.default_rng(0)
            # Raw 16-bit patterns on the device; the kernel reads them as et.
            npdt = bfloat16_dtype() if dt == "bfloat16" else np.float16
            a = cp.asarray(rng.standard_normal((m, k)).astype(npdt).view(np.uint16))
            b = cp.asarray(rng.standard_normal((k, n)).astype(npdt).view(np.uint16))
            fa, fb = _as_f32(cp, a, dt), _as_f32(cp, b, dt)
            ref = cp.matmul(fa, fb)
            flops = 2.0 * m * n * k
            ha, hb = a.view(cp.float16), b.view(cp.float16)   # cuBLAS times f16 for both dtypes
            t = events_time(cp, lambda: cp.matmul(ha, hb))
            tk = events_time(cp, lambda: cp.matmul(ha, hb), repeat=5, inner=50)
            rows.append(dict(shape=sname, dtype=dt, name="cuBLAS", call=flops / t / 1e12, kern=flops / tk / 1e12))
            algs = [(s, PipelinedMmaAlgorithm(SEL[s])) for s in args.sels.split(",") if s]
            algs += [(x, REGISTRY[x]()) for x in args.extra.split(",") if x]
            align = vector_alignment(a.data.ptr // 2, _View(k), 2), vector_alignment(b.data.ptr // 2, _View(n), 2)
            problem = MatmulProblem(1, m, n, k, et, et, et, Layout.ROW, Layout.ROW, *align)
            for name, alg in algs:
                out = cp.empty((m, n), cp.uint16)
                try:
                    alg, cfg, kernel = eng._plan(alg, problem)
                    shared = getattr(cfg.batch.global_, "dynamic_shared_bytes", 0)
                    argv = [a, 0, k, 0, b, 0, n, 0, out, 0, n, m * n, m, n, k]
                    launch = lambda: rt.launch(kernel, alg.cube_count(cfg, problem), cfg.units, argv,
                                               shared_bytes=shared)
                    out.fill(0x7e00)   # NaN in both f16 and (as 0x7e00) a large bf16: poisoned
                    launch()
                    cp.cuda.get_current_stream().synchronize()
                except SetupError as exc:
                    rows.append(dict(shape=sname, dtype=dt, name=name, skipped=str(exc)[:90]))
                    continue
                except Exception as exc:  # a compile or launch failure: report, go on
                    rows.append(dict(shape=sname, dtype=dt, name=name, skipped=f"{type(exc).__name__}: {exc}"[:300]))
                    continue
                fo = _as_f32(cp, out, dt)
                err = float(cp.linalg.norm(fo - ref) / cp.linalg.norm(ref))
                tk = events_time(cp, launch, repeat=5, inner=50)
                t = events_time(cp, launch)
                st = cfg.batch.global_.stage
                rows.append(dict(shape=sname, dtype=dt, name=name, call=flops / t / 1e12, kern=flops / tk / 1e12,
                                 err=err, tiling=f"{st.stage_m}x{st.stage_n}x{st.stage_k}/{cfg.units}u"
                                 f"/S{getattr(cfg.batch.global_, 'stages', '-')}"))
                print(rows[-1], flush=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    print("| shape | dtype | impl | tiling | TFLOP/s 1 launch | TFLOP/s 50 launches | err vs f32 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['shape']} | {r['dtype']} | {r['name']} | skipped: {r['skipped']} | | | |")
        else:
            err = f"{r['err']:.1e}" if r.get("err") is not None else ""
            print(f"| {r['shape']} | {r['dtype']} | {r['name']} | {r.get('tiling', '')} | {r['call']:.0f} | "
                  f"{r['kern']:.0f} | {err} |")


class _View:
    def __init__(self, ld):
        self.ld, self.batch_stride = ld, 0


def _as_f32(cp, raw, dt):
    if dt == "bfloat16":
        return (raw.astype(cp.uint32) << 16).view(cp.float32)
    return raw.view(cp.float16).astype(cp.float32)


if __name__ == "__main__":
    main()
