"""Small, latency-bound problems on a Hopper GPU: every wgmma tiling of the tuning space plus
persistent and two-slot variants, beside torch (cuBLAS) and cupy, timed with timing.device_time
(back-to-back batches for short calls). Problems: 256 x 128^3 batched f16 / bf16, 1000^3 f16,
64 x 512^3 batched and 512^3 f16 (rows where the engine sat at or below cuBLAS).

    python3 bench/probe_small_problems.py [--json FILE]

Each variant is a whole `WgmmaSelection`: the tuning space's (the tuner's candidates) and, from
the space's first and three small two-slot tilings, copies with 1, 2 and 4 persistent cubes per
multiprocessor. Rows name a variant by the knobs that differ from the defaults.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm, WgmmaSelection  # noqa: E402
from gemm_engine.dtypes import bfloat16_dtype  # noqa: E402
from gemm_engine.runtime.timing import device_time  # noqa: E402
from common import knobs  # noqa: E402

PROBLEMS = [(256, 128, 128, 128, "float16"), (256, 128, 128, 128, "bfloat16"), (1, 1000, 1000, 1000, "float16"),
            (64, 512, 512, 512, "float16"), (1, 512, 512, 512, "float16")]


#: One warpgroup of one 64 x tile_n tile, a two-slot ring of 64 k (16-bit), nothing left pending.
SMALL = dict(warpgroups_m=1, warpgroups_n=1, partition_m=1, stage_k=64, stages=2, wgmma_pending=0)


def variants(engine, problem) -> list[WgmmaSelection]:
    alg = PipelinedWgmmaAlgorithm()
    space = [alg.with_selection(preset).selection for preset in alg.tuning_space(problem, engine.dialect)]
    extra = []
    for base in space[:1] + [WgmmaSelection(**SMALL, tile_n=128, staged_output=True),
                             WgmmaSelection(**SMALL, tile_n=64, staged_output=True),
                             WgmmaSelection(**SMALL, tile_n=64, staged_output=False)]:
        extra += [base] + [base.override(persistent=p) for p in (1, 2, 4)]
    return list(dict.fromkeys(space + extra))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    args = p.parse_args(argv)
    import torch
    engine = gemm_engine.Engine("cuda", background_compile=False)   # the chosen kernel, not a stand-in
    cp, rt = engine.runtime.cp, engine.runtime
    rows = []
    for batch, m, n, k, dt in PROBLEMS:
        rng = np.random.default_rng(0)
        np_dt = bfloat16_dtype() if dt == "bfloat16" else np.dtype(dt)
        shape_a, shape_b = ((batch,) if batch > 1 else ()) + (m, k), ((batch,) if batch > 1 else ()) + (k, n)
        a = cp.asarray(rng.standard_normal(shape_a).astype(np_dt))
        b = cp.asarray(rng.standard_normal(shape_b).astype(np_dt))
        ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
        ref = torch.matmul(ta.float(), tb.float())
        label = f"{batch}x{m}x{n}x{k} {dt}"
        t_torch = device_time(rt, lambda: torch.matmul(ta, tb), repeat=20, warmup=5)
        rows.append({"problem": label, "name": "torch", "ms": t_torch * 1e3})
        if dt != "bfloat16":
            rows.append({"problem": label, "name": "cupy",
                         "ms": device_time(rt, lambda: cp.matmul(a, b), repeat=20, warmup=5) * 1e3})
        t_auto = device_time(rt, lambda: engine.matmul(a, b, algorithm="auto"), repeat=20, warmup=5)
        alg, cfg = engine.last_choice
        rows.append({"problem": label, "name": "auto", "ms": t_auto * 1e3,
                     "choice": f"{alg.name} {knobs(cfg)}"})
        problem = engine.problem_for(a, b)
        for sel in variants(engine, problem):
            alg = PipelinedWgmmaAlgorithm(sel)
            try:
                out = engine.matmul(a, b, algorithm=alg)
                err = float((torch.from_dlpack(out).float() - ref).norm() / ref.norm())
                t = device_time(rt, lambda: engine.matmul(a, b, algorithm=alg), repeat=20, warmup=5)
            except Exception as exc:  # noqa: BLE001
                rows.append({"problem": label, "name": sel.describe(), "failed": f"{type(exc).__name__}: {exc}"[:200]})
                continue
            rows.append({"problem": label, "name": sel.describe(), "ms": t * 1e3, "err": err,
                         "vs_torch": t_torch / t})
        best = min((r for r in rows if r["problem"] == label and "ms" in r and r["name"] not in ("torch", "cupy")),
                   key=lambda r: r["ms"])
        print(f"{label}: torch {t_torch * 1e3:.4f} ms, auto {t_auto * 1e3:.4f} ms, best {best['ms']:.4f} ms "
              f"({t_torch * 1e3 / best['ms']:.2f}x torch) {best['name']}", flush=True)
    for r in rows:
        if "failed" in r:
            print("FAILED", r["problem"], r["name"][:90], r["failed"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
