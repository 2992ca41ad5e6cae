"""Candidate tilings of the grouped pipeline on bench/grouped.py's rows (issue 30): which tile, ring,
schedule and persistent grid each row's default should have, all timed in one run.

    python3 bench/grouped_probe.py [--rows small_64,...] [--candidates row_major,...] [--repeat 10]
                                   (refreshes bench/results/<device>/grouped_probe.md)

Every candidate is ``grouped_specialized_wgmma`` with the knobs named in its label (the rest the
default's), checked against float32 products of a sample of experts before it is timed. Each call is
captured once in a CUDA graph and replayed, so host time does not enter (the default's plain calls
equal their replays: grouped.md), and torch._grouped_mm (bf16 rows) is timed the same way in the same
turns. A candidate that refuses to set up or fails its check is listed with the reason.
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
from gemm_engine.algorithms import REGISTRY  # noqa: E402
from gemm_engine.runtime.timing import device_times  # noqa: E402
import current_tables  # noqa: E402
import grouped  # noqa: E402

#: label -> knobs of grouped_specialized_wgmma, 16-bit rows.
WIDE = {
    "64x128 S6": dict(warpgroups_m=1, tile_n=128, stages=6),
    "64x128 S8": dict(warpgroups_m=1, tile_n=128, stages=8),
    "64x256 S4": dict(warpgroups_m=1, tile_n=256, stages=4, store_parts=2),
    "128x128 S6": dict(warpgroups_m=2, tile_n=128, stages=6),
    "128x256 S4": dict(warpgroups_m=2, tile_n=256, stages=4, store_parts=2),
    "192x128 S5": dict(warpgroups_m=3, tile_n=128, stages=5, store_parts=2),
    "64x128 pingpong": dict(warpgroups_m=1, tile_n=128, stages=6, schedule="pingpong"),
    "128x128 pingpong": dict(warpgroups_m=1, partition_m=2, tile_n=128, stages=4, store_parts=2,
                             schedule="pingpong"),
    "64x128 S9 direct": dict(warpgroups_m=1, tile_n=128, stages=9, tma_store=False),
}
#: knobs tried on top of the default's tiling.
AROUND = {"persistent=1": dict(persistent=1), "persistent=3": dict(persistent=3),
          "row_major": dict(dispatch="row_major"), "grouped8": dict(dispatch="grouped", dispatch_width=8)}
#: fp8 block-scaled rows.
PROMOTED = {
    "128x128 behind": dict(warpgroups_m=2, tile_n=128, stages=6, promote_behind=True),
    "192x128 S3": dict(warpgroups_m=3, tile_n=128, stages=3),
    "192x128 behind": dict(warpgroups_m=3, tile_n=128, stages=3, promote_behind=True),
    "128x256 behind": dict(warpgroups_m=2, tile_n=256, stages=3, promote_behind=True, store_parts=2),
    "128x128 pingpong": dict(warpgroups_m=1, partition_m=2, tile_n=128, stages=4, schedule="pingpong",
                             promote_behind=True),
}


def probe_row(run: grouped.Run, row: grouped.Row, repeat: int, only: set | None = None) -> dict:
    torch, eng = run.torch, run.engine
    counts = grouped.counts_for(run.rng, row)
    x, w, scales = run.operands(row)
    offs = torch.tensor(np.cumsum(counts), dtype=torch.int32, device="cuda")
    cnt = torch.tensor(counts, dtype=torch.int32, device="cuda")
    kw = dict(scale_a=scales[0], scale_b=scales[1], out_dtype="bfloat16") if scales else {}
    extents = dict(counts=cnt) if row.masked else dict(offsets=offs)
    live = [g for g in range(row.experts) if counts[g]]
    sample = live if len(live) <= 16 else sorted({*np.argsort(counts)[-3:].tolist(), *live[:3]})
    ref = run.reference(row, x, w, scales, counts, sample)
    rec = {"row": row.name, "max_count": int(counts.max()), "empty": int((counts == 0).sum()), "candidates": {}}

    def call(alg=None):
        return lambda: eng.grouped_matmul(x, w, algorithm=alg, **extents, **kw)

    eng.grouped_matmul(x, w, **extents, **kw)
    rec["default"] = run.choice()
    fns = {"default": run.capture(call()).replay}
    knobs = {**(PROMOTED if row.fp8 else WIDE), **AROUND}
    knobs = {label: k for label, k in knobs.items() if only is None or label in only}
    for label, k in knobs.items():
        try:
            alg = REGISTRY["grouped_specialized_wgmma"](**k)
            result = call(alg)()
            err = run.check(row, result, ref, counts)
            if not err < 2e-2:
                rec["candidates"][label] = {"error": f"rel err {err:.1e}"}
                continue
            graph = run.capture(call(alg))
            if graph is None:
                rec["candidates"][label] = {"error": "capture failed"}
                continue
            fns[label] = graph.replay
            rec["candidates"][label] = {"choice": run.choice(), "rel_error": err}
        except Exception as exc:  # noqa: BLE001 -- a refusal is a result
            rec["candidates"][label] = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    if not row.fp8 and not row.masked:
        g = run.capture(lambda: torch._grouped_mm(x, w, offs=offs))
        if g is not None:
            fns["_grouped_mm"] = g.replay
    times = device_times(eng.runtime, fns, repeat=repeat, warmup=2)
    rec["ms"] = {name: t * 1e3 for name, t in times.items()}
    print(json.dumps(rec), flush=True)
    return rec


def markdown(recs) -> str:
    lines = ["Milliseconds of a replayed CUDA graph per call; ratio: the default's time / the candidate's "
             "(> 1: the candidate is faster).", ""]
    for r in recs:
        ms = r.get("ms", {})
        base = ms.get("_grouped_mm")
        lines += [f"### {r['row']} (max {r.get('max_count')}, empty {r.get('empty')}; default "
                  f"{r.get('default')}{f'; _grouped_mm {base:.4f} ms' if base else ''})", "",
                  "| candidate | ms | vs default | vs _grouped_mm | note |", "|---|---|---|---|---|"]
        rows = [("default", {"choice": r.get("default")})] + list(r.get("candidates", {}).items())
        rows.sort(key=lambda kv: ms.get(kv[0], float("inf")))
        for label, c in rows:
            t = ms.get(label)
            if t is None:
                lines.append(f"| {label} | | | | {c.get('error', '')} |")
                continue
            vs = f"{base / t:.3f}" if base else ""
            lines.append(f"| {label} | {t:.4f} | {ms['default'] / t:.3f} | {vs} | {c.get('choice', '')} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--rows", default="small_64,small_64_balanced,small_64_skewed,experts_256,mixtral_up")
    p.add_argument("--candidates", help="comma-separated labels to try (default: every one)")
    p.add_argument("--json")
    current_tables.add_arguments(p, "grouped_probe")
    args = p.parse_args(argv)
    command = current_tables.command_line("grouped_probe.py", sys.argv[1:] if argv is None else argv)
    by_name = {r.name: r for r in grouped.ROWS}
    unknown = sorted(set(args.rows.split(",")) - set(by_name))
    if unknown:
        p.error(f"--rows: unknown {unknown}")
    engine = gemm_engine.Engine("cuda", background_compile=False)   # the chosen kernel, not a stand-in
    run = grouped.Run(engine, args.repeat)
    recs = []
    for name in args.rows.split(","):
        try:
            only = set(args.candidates.split(",")) if args.candidates else None
            recs.append(probe_row(run, by_name[name], args.repeat, only))
        except Exception as exc:  # noqa: BLE001 -- recorded, the run goes on
            recs.append({"row": name, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            print(recs[-1], flush=True)
        run.torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": engine.device.name, "date": str(date.today()), "rows": recs}, f, indent=1)
    text = markdown(recs)
    current_tables.write(args, engine.device.name, "grouped tilings against the default (bench/grouped_probe.py)",
                         command, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
