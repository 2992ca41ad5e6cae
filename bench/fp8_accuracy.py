"""Where fp8 products lose precision: relative error against float64 of the same e4m3 data with each
scale kind, through auto's choice and through kernels forced, so that a difference between scale
kinds can be told apart from a difference between kernels (issue 27, item 8).

Each row is one shape and scale kind; columns are algorithms (auto, specialized_wgmma with
promotion every 128 of K, specialized_wgmma with fast accumulation where the kind allows it,
pipelined_wgmma, simple_unit: exact float32 FMA on the dequantized values). Printed as a table and
written as JSON to ``--json``.

    python3 bench/fp8_accuracy.py --json $OUT/fp8_accuracy.json
"""
from __future__ import annotations

import argparse
import json
import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

import numpy as np  # noqa: E402

import gemm_engine  # noqa: E402
from gemm_engine.epilogue.scales import BLOCK  # noqa: E402

SHAPES = [(67, 45, 300), (5, 300, 129), (256, 256, 4096), (1024, 1024, 1024)]
KINDS = ["tensor", "row", "block"]
ALGORITHMS = ["auto", "specialized_wgmma", "pipelined_wgmma", "simple_unit"]


def scales(rng, kind, m, n, k):
    """(scale_a, scale_b, a's factors (m, k), b's (k, n)) of one kind."""
    if kind == "tensor":
        sa, sb = np.float32(rng.random() + 0.5), np.float32(rng.random() + 0.5)
        return sa, sb, np.full((m, k), sa, np.float64), np.full((k, n), sb, np.float64)
    if kind == "row":
        sa, sb = (rng.random(m) + 0.5).astype(np.float32), (rng.random(n) + 0.5).astype(np.float32)
        return sa, sb, np.repeat(sa[:, None], k, 1).astype(np.float64), np.repeat(sb[None, :], k, 0).astype(np.float64)
    kb, nb = -(-k // BLOCK), -(-n // BLOCK)
    sa, sb = (rng.random((m, kb)) + 0.5).astype(np.float32), (rng.random((kb, nb)) + 0.5).astype(np.float32)
    fa = np.repeat(sa, BLOCK, 1)[:, :k].astype(np.float64)
    fb = np.repeat(np.repeat(sb, BLOCK, 0), BLOCK, 1)[:k, :n].astype(np.float64)
    return sa, sb, fa, fb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write the errors here")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import ml_dtypes
    import torch
    engine = gemm_engine.Engine("cuda", background_compile=False)   # the chosen kernel, not a stand-in
    rng = np.random.default_rng(args.seed)
    rows = []
    for m, n, k in SHAPES:
        a = (rng.standard_normal((m, k)) * 3).astype(ml_dtypes.float8_e4m3fn)
        b = np.ascontiguousarray((rng.standard_normal((n, k)) * 3).astype(ml_dtypes.float8_e4m3fn)).T
        ta = torch.from_numpy(a.view(np.uint8)).cuda().view(torch.float8_e4m3fn)
        tb = torch.from_numpy(np.ascontiguousarray(b.T).view(np.uint8)).cuda().view(torch.float8_e4m3fn).t()
        for kind in KINDS:
            sa, sb, fa, fb = scales(rng, kind, m, n, k)
            ref = (a.astype(np.float64) * fa) @ (b.astype(np.float64) * fb)
            row = {"shape": f"{m}x{n}x{k}", "kind": kind}
            ts = [torch.as_tensor(np.asarray(s), device="cuda") for s in (sa, sb)]
            for alg in ALGORITHMS + ["specialized_wgmma fast_accum"]:
                name, _, mode = alg.partition(" ")
                if mode and kind == "block":
                    continue
                try:
                    got = engine.matmul(ta, tb, scale_a=ts[0], scale_b=ts[1], out_dtype=np.float32,
                                        algorithm=None if name == "auto" else name,
                                        precision="fast_accum" if mode else None)
                    torch.cuda.synchronize()
                    chosen = engine.last_choice[0].name
                    err = float(np.linalg.norm(got.cpu().numpy() - ref) / np.linalg.norm(ref))
                    row[alg] = {"error": err, "ran": chosen}
                except gemm_engine.SetupError as exc:
                    row[alg] = {"error": None, "ran": f"refused: {str(exc)[:80]}"}
            rows.append(row)
    cols = ALGORITHMS + ["specialized_wgmma fast_accum"]
    print("| shape | scales | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append("" if v is None else ("refused" if v["error"] is None else f"{v['error']:.2e} ({v['ran']})"))
        print(f"| {r['shape']} | {r['kind']} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
