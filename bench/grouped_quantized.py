"""Quantized experts (issue 31 x 30): grouped_matmul of bf16 tokens with int4 / int8 experts against the
same layer's bf16 experts (the engine's grouped GEMM and torch._grouped_mm), in one run (CUDA, torch).

    python3 bench/grouped_quantized.py [--repeat 10] [--json FILE]
                                       (refreshes bench/results/<device>/grouped_quantized.md)

Rows: Mixtral's up-projection (8 experts, 4096 -> 14336) at decode (64 tokens, contiguous; and the
masked layout's (8, 64) slabs) and at prefill (4096 tokens), tokens routed by Dirichlet(1) counts
(seeded); experts quantized by gemm_engine.quantize (int4 group 128 asymmetric, int8 per channel),
prepacked. Every result is checked against float32 products of the dequantized experts first.
Times: CUDA events, every method sampled in turns (gemm_engine.runtime.timing.device_times), the
default choice; "weights TB/s": the non-empty experts' bytes as stored (packed codes, scales and
zeros; bf16: 2 bytes a weight) over the time.
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
from gemm_engine.runtime.timing import device_times  # noqa: E402
import current_tables  # noqa: E402

#: (name, experts, tokens, K, N, masked slab rows or 0)
ROWS = [("mixtral_up_decode", 8, 64, 4096, 14336, 0), ("mixtral_up_decode_masked", 8, 64, 4096, 14336, 64),
        ("mixtral_up_prefill", 8, 4096, 4096, 14336, 0)]
FORMATS = (("int4", 128, False), ("int8", None, True))


def experts_for(torch, cache: dict, fmt: str, group, symmetric: bool, e: int, k: int, n: int):
    """(the bf16 experts (E, K, N), their quantized prepacked form, its dequantized bf16 values):
    made once per format (quantizing on the host takes most of the run)."""
    key = (fmt, e, k, n)
    if key not in cache:
        g = torch.Generator(device="cuda").manual_seed(1)
        w = (torch.randn((e, n, k), device="cuda", dtype=torch.bfloat16, generator=g) * k ** -0.5).transpose(1, 2)
        q = gemm_engine.quantize(w.float().cpu().numpy(), fmt, group, symmetric)
        q = gemm_engine.QuantizedExperts([q[i].prepack() for i in range(e)])
        dense = torch.from_numpy(q.dequantize(rounded_to="bfloat16")).to("cuda", torch.bfloat16)
        cache[key] = (w, q, dense)
    return cache[key]


def run_row(engine, torch, rng, cache, name, e, t, k, n, masked, repeat) -> list[dict]:
    counts = rng.multinomial(t, rng.dirichlet(np.ones(e)))
    if masked:
        counts = np.minimum(counts, masked)
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn((e, masked, k) if masked else (t, k), device="cuda", dtype=torch.bfloat16, generator=g)
    extents = torch.tensor(counts if masked else np.cumsum(counts), dtype=torch.int32, device="cuda")
    key = "counts" if masked else "offsets"
    live = [i for i in range(e) if counts[i]]
    lo = np.concatenate([[0], np.cumsum(counts)])
    rows = []
    for fmt, group, symmetric in FORMATS:
        _, q, dense = experts_for(torch, cache, fmt, group, symmetric, e, k, n)     # dense: (E, K, N)
        y = engine.grouped_matmul(x, q, **{key: extents})
        choice = engine.last_choice[0].name
        got = torch.cat([(y[i, :counts[i]] if masked else y[lo[i]:lo[i + 1]]).float() for i in live])
        rows_of = [x[i, :counts[i]] if masked else x[lo[i]:lo[i + 1]] for i in live]
        want = torch.cat([a.float() @ dense[i].float() for a, i in zip(rows_of, live)])
        err = float(torch.linalg.norm(got - want) / torch.linalg.norm(want))
        fns = {"quantized": lambda: engine.grouped_matmul(x, q, **{key: extents}),
               "bf16": lambda: engine.grouped_matmul(x, dense, **{key: extents})}
        if not masked:
            fns["grouped_mm"] = lambda: torch._grouped_mm(x, dense, offs=extents)
        times = device_times(engine.runtime, fns, repeat=repeat, warmup=2)
        stored = len(live) * q.nbytes // e
        rows.append(dict(row=name, format=f"{fmt} {'g' + str(group) if group else 'per-channel'}", experts=e,
                         tokens=int(counts.sum()), k=k, n=n, layout="masked" if masked else "contiguous",
                         choice=choice, rel_error=err, **{f"{m}_ms": v * 1e3 for m, v in times.items()},
                         weights_tbs=stored / times["quantized"] / 1e12,
                         bf16_tbs=len(live) * k * n * 2 / times["bf16"] / 1e12))
        print(rows[-1], flush=True)
    return rows


def markdown(rows) -> str:
    lines = ["vs bf16: the engine's bf16 grouped GEMM's time over the quantized one's (> 1: faster); vs "
             "_grouped_mm: torch._grouped_mm's (bf16) over it.", "",
             "| row | experts x tokens, K -> N | layout | format | choice | quantized ms | weights TB/s | bf16 ms "
             "(TB/s) | _grouped_mm ms | vs bf16 | vs _grouped_mm | rel err |", "|---" * 12 + "|"]
    for r in rows:
        gm, qms = r.get("grouped_mm_ms"), r["quantized_ms"]
        gm_ms, gm_ratio = ("", "") if gm is None else (f"{gm:.3f}", f"{gm / qms:.2f}")
        lines.append(f"| {r['row']} | {r['experts']} x {r['tokens']}, {r['k']} -> {r['n']} | {r['layout']} | "
                     f"{r['format']} | {r['choice']} | {qms:.3f} | {r['weights_tbs']:.2f} | {r['bf16_ms']:.3f} "
                     f"({r['bf16_tbs']:.2f}) | {gm_ms} | {r['bf16_ms'] / qms:.2f} | {gm_ratio} | "
                     f"{r['rel_error']:.1e} |")
    return "\n".join(lines) + "\n"


NOTES = """
## Notes

Quantized experts are the quantized compositions under the portable grouped batch level
(batch/grouped.py moves the packed words, scales and zeros to each group's expert); the grouped
family picks grouped_quantized_decode where a group's rows (the typical group's) fit the decode
kernel, grouped_quantized_wgmma from 48 to 512 on Hopper, the mma.sync loader path otherwise. No
speed target of issue 31 names these rows; they say what a quantized MoE layer costs today.

## History

- {today}: first run.
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--json", help="write the rows here")
    current_tables.add_arguments(p, "grouped_quantized")
    args = p.parse_args(argv)
    command = current_tables.command_line("grouped_quantized.py", sys.argv[1:] if argv is None else argv)
    import torch
    engine = gemm_engine.Engine("cuda", background_compile=False)
    rng = np.random.default_rng(0)
    rows, cache = [], {}
    for row in ROWS:
        try:
            rows += run_row(engine, torch, rng, cache, *row, args.repeat)
        except Exception as exc:  # noqa: BLE001 -- recorded, the run goes on
            print({"row": row[0], "failed": f"{type(exc).__name__}: {str(exc)[:300]}"}, flush=True)
            rows.append({"row": row[0], "failed": f"{type(exc).__name__}: {str(exc)[:300]}"})
    device = engine.device.name
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "date": str(date.today()), "rows": rows}, f, indent=1)
    good = [r for r in rows if "failed" not in r]
    text = markdown(good) + "".join(f"\nFAILED {r['row']}: {r['failed']}\n" for r in rows if "failed" in r)
    if not current_tables.split(current_tables.existing(device, args.table))[1]:
        text += NOTES.format(today=date.today())
    current_tables.write(args, device, "quantized experts (int4 / int8) in grouped_matmul against bf16 experts "
                                       "(bench/grouped_quantized.py)", command, text)
    print(text)
    return 1 if len(good) < len(rows) or any(r["rel_error"] > 2e-2 for r in good) else 0


if __name__ == "__main__":
    sys.exit(main())
