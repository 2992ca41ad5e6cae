"""tf32 by operand layout: wgmma tf32 (with the K-major transposing pass where an operand needs it)
against mma.sync tf32 and cuBLAS's tf32 (torch with allow_tf32), in the same run (CUDA).

    python3 bench/tf32_layouts.py [--repeat 20] [--json FILE] [--quick]   (refreshes <device>/tf32_layouts.md)

Rows: 4096^3 and 8192^3 with a row-major b (one transposing pass) and a column-major b (a
transposed view: no pass), 1000^3 / 512^3 / 2048^3 (where auto's transposition gate sits), and a
few wgmma tilings at 4096^3 (each a whole selection: warpgroups, tile, 32 k per slot, ring; names
read ``<stage m>x<stage n> wg<warpgroups m>x<n>``), with the cost of the transposing copy alone.
Every result is checked against float64 (relative Frobenius error). Times: median of
CUDA-event-timed runs after warm-up (bench/common.events_time).
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import date

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm, WgmmaSelection  # noqa: E402
from common import events_time  # noqa: E402
import current_tables  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 2048, 2048), (1000, 1000, 1000), (512, 512, 512)]
#: 32 k per slot: one 128-byte row of tf32. Base: two warpgroups along M of one 64 x 256 tile each.
BASE = dict(warpgroups_m=2, warpgroups_n=1, partition_m=1, tile_n=256, stage_k=32, stages=4, wgmma_pending=1,
            staged_output=False, dispatch="row_major")
TILINGS = {
    "128x256 wg2x1 s4": WgmmaSelection(**BASE),
    "128x256 wg2x1 s4 swz": WgmmaSelection(**{**BASE, "dispatch": "swizzled"}),
    "128x256 wg1x2 s4": WgmmaSelection(**{**BASE, "warpgroups_m": 1, "partition_m": 2, "tile_n": 128,
                                          "warpgroups_n": 2}),
    "128x128 wg2x1 s4": WgmmaSelection(**{**BASE, "tile_n": 128}),
    "256x128 wg2x1 s4": WgmmaSelection(**{**BASE, "partition_m": 2, "tile_n": 128}),
    "128x256 wg2x1 k64 s2": WgmmaSelection(**{**BASE, "stage_k": 64, "stages": 2, "wgmma_pending": 0}),
    "128x128 wg2x1 k64 s3": WgmmaSelection(**{**BASE, "tile_n": 128, "stage_k": 64, "stages": 3}),
    "128x256 wg2x1 s4 staged": WgmmaSelection(**{**BASE, "staged_output": True}),
}


def _rel(cp, result, ref) -> float:
    r = cp.asnumpy(result).astype(np.float64)
    return float(np.linalg.norm(r - ref) / np.linalg.norm(ref))


def shape_rows(engine, torch, rng, shape, repeat):
    """The rows of one shape (each engine row checked, then timed; a failure is a row too)."""
    cp = engine.runtime.cp
    m, n, k = shape
    flops = 2 * m * n * k
    a64, b64 = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    ref = a64 @ b64
    a = cp.asarray(a64.astype(np.float32))
    b_row = cp.asarray(b64.astype(np.float32))
    b_col = cp.asfortranarray(b_row)              # column-major: already K-major
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b_row, device="cuda")
    label = f"{m}x{n}x{k}"
    rows = []

    def add(name, fn, check=True, baseline=False):
        try:
            err = _rel(cp, cp.asarray(fn()), ref) if check else None
            t = events_time(cp, fn, repeat=repeat, inner=1 if m >= 2048 else 10)
        except Exception as exc:  # noqa: BLE001 -- a failure is a result too
            rows.append({"shape": label, "name": name, "failed": f"{type(exc).__name__}: {str(exc)[:200]}"})
            return
        rows.append({"shape": label, "name": name, "ms": t * 1e3, "TFLOP/s": flops / t / 1e12,
                     "rel_err": err, "baseline": baseline})

    add("torch tf32 (cuBLAS)", lambda: torch.matmul(ta, tb), baseline=True)
    for bname, bb in (("b row", b_row), ("b col", b_col)):
        add(f"auto {bname}", lambda bb=bb: engine.matmul(a, bb, precision="tf32", algorithm="auto"))
        choice = engine.last_choice
        if choice is not None and "failed" not in rows[-1]:
            st = choice[1].batch.global_.stage
            rows[-1]["choice"] = f"{choice[0].name} {st.stage_m}x{st.stage_n}"
        add(f"pipelined_mma {bname}", lambda bb=bb: engine.matmul(a, bb, precision="tf32", algorithm="pipelined_mma"))
        add(f"pipelined_wgmma {bname}",
            lambda bb=bb: engine.matmul(a, bb, precision="tf32", algorithm="pipelined_wgmma"))
    if shape == (4096, 4096, 4096):
        for tname, sel in TILINGS.items():
            alg = PipelinedWgmmaAlgorithm(sel)
            for bname, bb in (("b row", b_row), ("b col", b_col)):
                add(f"wgmma {tname} {bname}", lambda bb=bb, alg=alg: engine.matmul(a, bb, precision="tf32", algorithm=alg))
        # the transposing pass alone (the copy of b): its cost inside the "b row" rows
        bt = cp.empty_like(b_row)
        add("cupy transpose copy of b", lambda: cp.copyto(bt, b_row.T), check=False)
    return rows


def markdown(rows, device) -> str:
    lines = ["| shape | kernel | ms | TFLOP/s | x cuBLAS tf32 | rel err | note |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['shape']} | {r['name']} | - | - | - | - | FAILED {r['failed']} |")
            continue
        err = "-" if r["rel_err"] is None else f"{r['rel_err']:.1e}"
        lines.append(f"| {r['shape']} | {r['name']} | {r['ms']:.4f} | {r['TFLOP/s']:.1f} | "
                     f"{r.get('vs_cublas', 0):.2f} | {err} | {r.get('choice', '')} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--json", help="write the rows here")
    current_tables.add_arguments(ap, "tf32_layouts")
    ap.add_argument("--quick", action="store_true", help="4096^3 only")
    args = ap.parse_args(argv)
    command = current_tables.command_line("tf32_layouts.py", sys.argv[1:] if argv is None else argv)
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    engine = gemm_engine.Engine("cuda", background_compile=False)   # the chosen kernel, not a stand-in
    cp = engine.runtime.cp
    rng = np.random.default_rng(0)
    rows = []
    for shape in SHAPES[:1] if args.quick else SHAPES:
        rows += shape_rows(engine, torch, rng, shape, args.repeat)
        cp.get_default_memory_pool().free_all_blocks()

    base = {r["shape"]: r["ms"] for r in rows if r.get("baseline") and "ms" in r}
    for r in rows:
        if "ms" in r and r["shape"] in base:
            r["vs_cublas"] = base[r["shape"]] / r["ms"]
    device = engine.device.name
    text = markdown(rows, device)
    print(text)
    current_tables.write(args, device, "tf32 by operand layout (bench/tf32_layouts.py)", command, text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "date": str(date.today()), "rows": rows}, f, indent=1)
    bad = [r for r in rows if r.get("rel_err") is not None and r["rel_err"] > 5e-3]
    if bad:
        print("CHECK FAILED:", [(r["shape"], r["name"], r["rel_err"]) for r in bad], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
