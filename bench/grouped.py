"""Grouped GEMM (mixture-of-experts, issue 30) against torch._grouped_mm and a Python loop of matmuls,
in one run (CUDA, torch), results checked first, then a CUDA-graph capture replayed with new routing.

    python3 bench/grouped.py [--repeat 10] [--rows mixtral_up,...] [--quick] [--json FILE]
                             (refreshes bench/results/<device>/grouped.md)

Rows (bf16 unless said; tokens routed by Dirichlet(1) counts over the experts, seeded, unless said):

* ``mixtral_up`` / ``mixtral_down``: 8 experts, 4096 tokens, 4096 -> 14336 / 14336 -> 4096;
* ``small_64``: 64 experts, 8192 tokens, 2048 -> 2816; ``small_64_balanced`` / ``small_64_skewed``: the
  same with every expert 128 tokens / one expert half the tokens (their ratio is the skew row);
* ``experts_256``: 256 experts, 8192 tokens, 7168 -> 4096 (weights-bound: TB/s of weights streamed);
* ``mixtral_decode``: 8 experts, 64 tokens, 4096 -> 14336 (contiguous), and ``mixtral_decode_masked``:
  the masked layout, (8, 64, 4096) slabs with the same kind of counts;
* ``dsv3_*``: DeepSeek-V3 fp8 e4m3 with DeepGEMM's block scales (1 x 128 activations, 128 x 128
  weights), bf16 out: 256 experts, 8192 and 32768 tokens, N = 4096 / K = 7168 and N = 7168 / K = 2048,
  and 32 experts (one GPU's share at expert parallelism 8) x 32768 tokens (1024 a expert); baseline
  torch._scaled_grouped_mm with rowwise scales (a cheaper scaling) where this torch has it.

The weights are kept as nn.Linear and torch._grouped_mm keep them, (experts, N, K) contiguous, and
passed as the (experts, K, N) view. Every engine result is checked against float32 products per
expert (a sample of experts on the large rows) before anything is timed. Times: CUDA events, the
engine and its baselines sampled in turns (gemm_engine.runtime.timing.device_times); "engine" is a
plain call (host work included where it exceeds the kernel), "graph" the same call captured once in
a CUDA graph and replayed. The graph check captures a call, rewrites the offsets (or counts) in
place with new routings (empty experts, every token on one expert) and replays: each replay is
compared with its reference.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import date

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.runtime.timing import device_times  # noqa: E402
from common import tiling  # noqa: E402
import current_tables  # noqa: E402

BLOCK = 128


@dataclass(frozen=True)
class Row:
    name: str
    experts: int
    tokens: int
    k: int
    n: int
    routing: str = "dirichlet"      # "dirichlet", "balanced", "skewed"
    fp8: bool = False
    masked: int = 0                 # the masked layout's slab rows (0: contiguous)


ROWS = [Row("mixtral_up", 8, 4096, 4096, 14336), Row("mixtral_down", 8, 4096, 14336, 4096),
        Row("small_64", 64, 8192, 2048, 2816), Row("small_64_balanced", 64, 8192, 2048, 2816, "balanced"),
        Row("small_64_skewed", 64, 8192, 2048, 2816, "skewed"), Row("experts_256", 256, 8192, 7168, 4096),
        Row("mixtral_decode", 8, 64, 4096, 14336), Row("mixtral_decode_masked", 8, 64, 4096, 14336, masked=64),
        Row("dsv3_up_8k", 256, 8192, 7168, 4096, fp8=True), Row("dsv3_up_32k", 256, 32768, 7168, 4096, fp8=True),
        Row("dsv3_down_32k", 256, 32768, 2048, 7168, fp8=True), Row("dsv3_ep8_up", 32, 32768, 7168, 4096, fp8=True),
        Row("dsv3_ep8_down", 32, 32768, 2048, 7168, fp8=True)]
QUICK = {"mixtral_up", "small_64", "mixtral_decode", "mixtral_decode_masked", "dsv3_ep8_up"}


def counts_for(rng, row: Row) -> np.ndarray:
    e, t = row.experts, row.tokens
    if row.routing == "balanced":
        return np.diff(np.linspace(0, t, e + 1).round().astype(np.int64))
    if row.routing == "skewed":
        rest = np.diff(np.linspace(0, t - t // 2, e).round().astype(np.int64))
        return np.concatenate([[t // 2], rest])
    counts = rng.multinomial(t, rng.dirichlet(np.ones(e)))
    if row.masked:
        counts = np.minimum(counts, row.masked)
    return counts


class Run:
    def __init__(self, engine, repeat: int):
        import torch
        self.engine, self.torch, self.repeat = engine, torch, repeat
        self.rng = np.random.default_rng(0)
        self.rows, self.checks = [], []

    def choice(self) -> str:
        alg, cfg = self.engine.last_choice
        return f"{alg.name} {tiling(cfg)}"

    # -- operands -------------------------------------------------------------------------------
    def operands(self, row: Row):
        """(x, w as (experts, K, N) view of (experts, N, K), scales or None) on the device."""
        torch = self.torch
        g = torch.Generator(device="cuda").manual_seed(1)
        e, t, k, n = row.experts, row.tokens, row.k, row.n
        xshape = (e, row.masked, k) if row.masked else (t, k)
        if not row.fp8:
            x = torch.randn(xshape, device="cuda", dtype=torch.bfloat16, generator=g)
            w = torch.randn((e, n, k), device="cuda", dtype=torch.bfloat16, generator=g) * k ** -0.5
            return x, w.transpose(1, 2), None
        x = (torch.randn(xshape, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
        w = (torch.randn((e, n, k), device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
        kb, nb = -(-k // BLOCK), -(-n // BLOCK)
        sa = torch.rand((t, kb), device="cuda", generator=g) * 0.01 + 0.005
        sb = torch.rand((e, kb, nb), device="cuda", generator=g) * 0.01 + 0.005
        return x, w.transpose(1, 2), (sa, sb)

    def reference(self, row: Row, x, w, scales, counts, groups) -> dict:
        """{expert: float32 product of its rows} for the experts ``groups``."""
        torch, out, lo = self.torch, {}, np.concatenate([[0], np.cumsum(counts)])
        for g in groups:
            rows = x[g, :counts[g]] if row.masked else x[lo[g]:lo[g + 1]]
            a, b = rows.float(), w[g].float()
            if scales is not None:
                sa, sb = scales
                a = a * sa[lo[g]:lo[g + 1]].repeat_interleave(BLOCK, 1)[:, :row.k]
                b = b * sb[g].repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[:row.k, :row.n]
            out[g] = a @ b
        return out

    def check(self, row: Row, result, ref: dict, counts) -> float:
        torch, lo = self.torch, np.concatenate([[0], np.cumsum(counts)])
        got = torch.cat([(result[g, :counts[g]] if row.masked else result[lo[g]:lo[g + 1]]).float() for g in ref])
        want = torch.cat(list(ref.values()))
        return float(torch.linalg.norm(got - want) / max(float(torch.linalg.norm(want)), 1e-30))

    # -- one row --------------------------------------------------------------------------------
    def run_row(self, row: Row):
        torch, eng = self.torch, self.engine
        counts = counts_for(self.rng, row)
        x, w, scales = self.operands(row)
        offs = torch.tensor(np.cumsum(counts), dtype=torch.int32, device="cuda")
        cnt = torch.tensor(counts, dtype=torch.int32, device="cuda")
        kw = dict(scale_a=scales[0], scale_b=scales[1], out_dtype="bfloat16") if scales else {}

        def engine():
            if row.masked:
                return eng.grouped_matmul(x, w, counts=cnt, **kw)
            return eng.grouped_matmul(x, w, offsets=offs, **kw)

        order = np.argsort(counts)
        sample = sorted({*order[-3:], *order[np.searchsorted(counts[order], 1):][:2],
                         *self.rng.choice(row.experts, min(4, row.experts), replace=False)})
        sample = [g for g in sample if counts[g]] if row.experts > 16 else [g for g in range(row.experts) if counts[g]]
        result = engine()
        rec = {"row": row.name, "experts": row.experts, "tokens": int(counts.sum()), "k": row.k, "n": row.n,
               "dtype": "fp8 e4m3 block-scaled" if row.fp8 else "bf16", "layout": "masked" if row.masked else "contiguous",
               "max_count": int(counts.max()), "empty": int((counts == 0).sum()), "choice": self.choice(),
               "rel_error": self.check(row, result, self.reference(row, x, w, scales, counts, sample), counts)}
        flops = 2 * int(counts.sum()) * row.k * row.n
        weights = int((counts > 0).sum()) * row.k * row.n * (1 if row.fp8 else 2)
        fns = {"engine": engine}
        graph = self.capture(engine)
        if graph is not None:
            fns["graph"] = graph.replay
        fns.update(self.baselines(row, x, w, scales, offs, counts))
        times = device_times(eng.runtime, fns, repeat=self.repeat, warmup=2)
        for name, t in times.items():
            rec[f"{name}_ms"] = t * 1e3
            rec[f"{name}_TF"] = flops / t / 1e12
        rec["weights_TB/s"] = weights / times["engine"] / 1e12
        if "grouped_mm_ms" in rec:
            rec["vs_grouped_mm"] = rec["grouped_mm_ms"] / rec["engine_ms"]
        self.rows.append(rec)
        print(rec, flush=True)

    def capture(self, fn):
        torch = self.torch
        try:
            fn()
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn()
            return graph
        except Exception as exc:  # noqa: BLE001 -- recorded: the graph column stays empty
            print(f"capture failed: {type(exc).__name__}: {exc}", flush=True)
            return None

    def baselines(self, row: Row, x, w, scales, offs, counts) -> dict:
        torch, out = self.torch, {}
        if row.fp8:
            fn = getattr(torch, "_scaled_grouped_mm", None)
            if fn is not None and not row.masked:
                sa = torch.ones(row.tokens, device="cuda")
                sb = torch.ones((row.experts, row.n), device="cuda")
                try:
                    fn(x, w, sa, sb, offs=offs, out_dtype=torch.bfloat16)
                    out["scaled_grouped_mm"] = lambda: fn(x, w, sa, sb, offs=offs, out_dtype=torch.bfloat16)
                except Exception as exc:  # noqa: BLE001
                    print(f"torch._scaled_grouped_mm: {type(exc).__name__}: {exc}", flush=True)
            return out
        if not row.masked:
            try:
                torch._grouped_mm(x, w, offs=offs)
                out["grouped_mm"] = lambda: torch._grouped_mm(x, w, offs=offs)
            except Exception as exc:  # noqa: BLE001
                print(f"torch._grouped_mm: {type(exc).__name__}: {exc}", flush=True)
        lo = np.concatenate([[0], np.cumsum(counts)]).tolist()
        res = torch.empty(x.shape[:-1] + (row.n,), dtype=x.dtype, device="cuda")
        live = [g for g in range(row.experts) if counts[g]]

        def loop():
            for g in live:
                if row.masked:
                    torch.mm(x[g, :counts[g]], w[g], out=res[g, :counts[g]])
                else:
                    torch.mm(x[lo[g]:lo[g + 1]], w[g], out=res[lo[g]:lo[g + 1]])
            return res
        out["loop"] = loop
        return out

    # -- the graph check ------------------------------------------------------------------------
    def graph_check(self):
        """Capture once, rewrite the offsets / counts in place with new routings, replay, compare."""
        torch, eng = self.torch, self.engine
        for masked in (0, 32):
            row = Row("graph", 16, 2048 if not masked else 16 * masked, 1024, 1536, masked=masked)
            x, w, _ = self.operands(row)
            first = counts_for(self.rng, row)
            extents = torch.tensor(first if masked else np.cumsum(first), dtype=torch.int32, device="cuda")
            out = torch.zeros(x.shape[:-1] + (row.n,), dtype=torch.bfloat16, device="cuda")
            key = "counts" if masked else "offsets"
            call = lambda: eng.grouped_matmul(x, w, out=out, **{key: extents})  # noqa: E731
            graph = self.capture(call)
            routings = {"dirichlet": counts_for(self.rng, row), "one expert": np.eye(row.experts, dtype=np.int64)[5] * (masked or row.tokens),
                        "half empty": np.where(np.arange(row.experts) % 2, 0, 2 * (masked or row.tokens // row.experts))}
            for label, counts in routings.items():
                if masked:
                    counts = np.minimum(counts, masked)
                else:
                    counts = counts * row.tokens // max(int(counts.sum()), 1)
                    counts[-1] += row.tokens - counts.sum()
                rec = {"check": f"graph replay, {'masked' if masked else 'contiguous'}, new routing: {label}"}
                if graph is None:
                    rec["failed"] = "capture failed"
                else:
                    extents.copy_(torch.tensor(counts if masked else np.cumsum(counts), dtype=torch.int32))
                    out.zero_()
                    graph.replay()
                    torch.cuda.synchronize()
                    live = [g for g in range(row.experts) if counts[g]]
                    rec["rel_error"] = self.check(row, out, self.reference(row, x, w, None, counts, live), counts)
                    if masked:    # rows past the counts untouched (zero here)
                        rec["untouched_ok"] = all(bool((out[g, counts[g]:] == 0).all()) for g in range(row.experts))
                self.checks.append(rec)
                print(rec, flush=True)


def markdown(rows, checks) -> str:
    lines = ["TF: 2 * routed tokens * K * N / time. weights TB/s: the non-empty experts' weights / engine time. "
             "vs _grouped_mm: torch._grouped_mm's time / the engine's (> 1: faster).", "",
             "| row | experts x tokens, K -> N | dtype, layout | max / empty | choice | engine ms (TF) | graph ms | "
             "_grouped_mm ms (TF) | loop ms (TF) | vs _grouped_mm | weights TB/s | rel err |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['row']} | | | | | FAILED {r['failed'][:100]} | | | | | | |")
            continue

        def t(name):
            ms = r.get(f"{name}_ms")
            return f"{ms:.3f} ({r[f'{name}_TF']:.0f})" if ms is not None else ""
        base = "grouped_mm" if "grouped_mm_ms" in r else "scaled_grouped_mm"
        lines.append(f"| {r['row']} | {r['experts']} x {r['tokens']}, {r['k']} -> {r['n']} | {r['dtype']}, {r['layout']} | "
                     f"{r['max_count']} / {r['empty']} | {r['choice']} | {t('engine')} | "
                     f"{r.get('graph_ms', float('nan')):.3f} | {t(base)}{' (rowwise fp8)' if base != 'grouped_mm' and t(base) else ''} | "
                     f"{t('loop')} | {r.get('vs_grouped_mm', float('nan')):.2f} | {r['weights_TB/s']:.2f} | {r['rel_error']:.1e} |")
    found = {r["row"]: r for r in rows if "engine_ms" in r}
    if "small_64_skewed" in found and "small_64_balanced" in found:
        ratio = found["small_64_skewed"]["engine_ms"] / found["small_64_balanced"]["engine_ms"]
        lines += ["", f"Skewed (one expert half the tokens) / balanced routing, 64 experts: {ratio:.3f} of the time."]
    lines += ["", "| check | result |", "|---|---|"]
    for c in checks:
        result = c.get("failed") or f"rel err {c['rel_error']:.1e}" + (
            f", rows past the counts untouched: {c['untouched_ok']}" if "untouched_ok" in c else "")
        lines.append(f"| {c['check']} | {result} |")
    return "\n".join(lines) + "\n"


FIRST_NOTES = """
## Notes

Issue 30's targets: Mixtral prefill >= 1.15x torch._grouped_mm; 64 small experts >= 1.3x; the
256-expert and decode rows >= 2.8 TB/s of weights streamed; fp8 block-scaled DeepSeek-V3 shapes
>= 1200 TF where tokens per expert >= 128; skewed routing within 10% of balanced (small_64_skewed
against small_64_balanced).

What bounds the weights-bound rows: a grouped GEMM reads every non-empty expert's weights once, so
its time is at least their bytes over the ~3.0 TB/s copy ceiling. fp8 DeepSeek-V3 at 256 experts
holds 7.5 GB (N = 4096, K = 7168) or 3.8 GB (N = 7168, K = 2048) of weights: 2 flops per weight
byte per token of an expert, so 1200 TF at 3.0 TB/s needs 200 tokens an expert. At 8192 tokens
(32 an expert) the ceiling is about 190 TF, at 32768 (128 an expert) about 770 TF, whatever the
kernel; the expert-parallel rows (32 experts, 1024 tokens each) are where 1200 TF can be reached.

## History

- {today}: first run.
"""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--rows", default="", help=f"comma list of {', '.join(r.name for r in ROWS)} (default: all)")
    p.add_argument("--quick", action="store_true", help=f"only {', '.join(sorted(QUICK))}")
    p.add_argument("--no-graph-check", action="store_true")
    p.add_argument("--json", help="write the rows here")
    current_tables.add_arguments(p, "grouped")
    args = p.parse_args(argv)
    command = current_tables.command_line("grouped.py", sys.argv[1:] if argv is None else argv)
    wanted = [r for r in args.rows.split(",") if r] or [r.name for r in ROWS if not args.quick or r.name in QUICK]
    unknown = sorted(set(wanted) - {r.name for r in ROWS})
    if unknown:
        p.error(f"--rows: unknown {unknown}")
    engine = gemm_engine.Engine("cuda", background_compile=False)   # the chosen kernel, not a stand-in
    run = Run(engine, args.repeat)
    if not args.no_graph_check:
        run.graph_check()
    for row in ROWS:
        if row.name not in wanted:
            continue
        try:
            run.run_row(row)
        except Exception as exc:  # noqa: BLE001 -- recorded, the run goes on
            run.rows.append({"row": row.name, "failed": f"{type(exc).__name__}: {str(exc)[:200]}"})
            print(run.rows[-1], flush=True)
        run.torch.cuda.empty_cache()
        engine.runtime.cp.get_default_memory_pool().free_all_blocks()
    device = engine.device.name
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "date": str(date.today()), "rows": run.rows, "checks": run.checks}, f, indent=1)
    text = markdown(run.rows, run.checks)
    if not current_tables.split(current_tables.existing(device, args.table))[1]:
        text += FIRST_NOTES.format(today=date.today())
    current_tables.write(args, device, "grouped GEMM (mixture of experts) against torch._grouped_mm and a loop "
                                       "(bench/grouped.py)", command, text)
    print(text)
    bad = [r for r in run.rows if "failed" in r or r.get("rel_error", 0) > 2e-2]
    bad += [c for c in run.checks if "failed" in c or c.get("rel_error", 0) > 2e-2 or c.get("untouched_ok") is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
