"""The special cases against their baselines, in one run: fused epilogue, skinny (vector-matrix and
matrix-vector), small batched and split-K problems (CUDA).

    python3 bench/special_cases.py [--repeat 20] [--groups fused,skinny,batched,split_k]
                                   [--json FILE]   (refreshes bench/results/<device>/special_cases.md)

Groups (torch is used for the baselines where CuPy has no equivalent):
* ``fused``: ``relu(a @ b + bias)``, bf16, 8192 x 8192 x 64: the engine's one kernel against the
  unfused torch sequence (``relu(a @ b + bias)``: matmul, add, relu), ``relu(addmm(bias, a, b))``
  and torch's ``a @ b`` alone;
* ``skinny``: vector-matrix bf16 1 x 8192 x 8192 and 1 x 14336 x 4096, matrix-vector 8192 x 1 x 8192,
  against cupy / torch matmul and a device copy of the matrix, with the bandwidth reached; the
  one-launch ``skinny`` kernel and ``skinny_split_k`` at 16 / 32 / 64 splits beside ``auto``;
* ``batched``: 256 batches of 128 x 128 x 128 f16 against cuBLAS batched (cupy.matmul, torch.bmm);
* ``split_k``: 64 x 64 x 65536 f32: the engine's default (split-K) against the same engine without
  split-K (``simple_unit``) and cuBLAS.
Every engine result is checked against a float32 (float64 for split-K) reference. Times: median of
CUDA-event-timed runs after warm-up (bench/common.events_time), 10 calls per event pair so that
sub-10-microsecond kernels are not dominated by event resolution. The markdown's ratio is the
group's fastest baseline time over the row's time (> 1: faster than the baseline).
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
from gemm_engine.algorithms.skinny import SkinnySplitKAlgorithm  # noqa: E402
from gemm_engine.selector.skinny import select_split_skinny  # noqa: E402
from gemm_engine.dtypes import bfloat16_dtype  # noqa: E402
from common import events_time, tiling  # noqa: E402
import current_tables  # noqa: E402

def _rel(cp, result, ref) -> float:
    r = cp.asnumpy(cp.asarray(result).astype(cp.float32)).astype(np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.linalg.norm(r - ref) / np.linalg.norm(ref))


class Run:
    """The rows of one run: the engine, CuPy, torch, the random source and the timing rule."""

    def __init__(self, engine, repeat):
        import torch
        self.engine, self.cp, self.torch, self.repeat = engine, engine.runtime.cp, torch, repeat
        self.rng = np.random.default_rng(0)
        self.rows = []

    def dev(self, shape, dtype):
        return self.cp.asarray(self.rng.standard_normal(shape).astype(dtype))

    def choice(self) -> str:
        alg, cfg = self.engine.last_choice
        return f"{alg.name} {tiling(cfg)}"

    def add(self, group, name, fn, bytes_moved=None, flops=None, ref=None, baseline=False, engine=False):
        """Time ``fn`` (check its result against ``ref`` first, and record the engine's choice when
        ``engine``); a failure is a row too."""
        try:
            row = {"group": group, "name": name, "baseline": baseline}
            if ref is not None:
                row["rel_error"] = _rel(self.cp, fn(), ref)
            if engine:
                fn()
                row["choice"] = self.choice()
            t = events_time(self.cp, fn, repeat=self.repeat, inner=10)
        except Exception as exc:  # noqa: BLE001 -- record it, go on
            self.rows.append({"group": group, "name": name, "failed": f"{type(exc).__name__}: {str(exc)[:160]}"})
            print(self.rows[-1], flush=True)
            return
        row["ms"] = t * 1e3
        if bytes_moved:
            row["GB/s"] = bytes_moved / t / 1e9
        if flops:
            row["TFLOP/s"] = flops / t / 1e12
        self.rows.append(row)
        print(row, flush=True)


def fused(run: Run):
    eng, torch = run.engine, run.torch
    m, n, k = 8192, 8192, 64
    bf16 = bfloat16_dtype()
    a, b, bias = run.dev((m, k), bf16), run.dev((k, n), bf16), run.dev((n,), bf16)
    ta, tb, tbias = (torch.from_dlpack(x) for x in (a, b, bias))
    g = "fused relu(a@b+bias) bf16 8192x8192x64"
    ref = torch.relu(ta.float() @ tb.float() + tbias.float()).cpu().numpy()
    run.add(g, "gemm_engine fused", lambda: eng.matmul(a, b, bias=bias, activation="relu"), ref=ref, engine=True)
    run.add(g, "torch relu(a@b + bias) (unfused)", lambda: torch.relu(ta @ tb + tbias), baseline=True)
    run.add(g, "torch relu(addmm(bias, a, b)) (unfused)", lambda: torch.relu(torch.addmm(tbias, ta, tb)))
    run.add(g, "torch a@b alone (no epilogue)", lambda: ta @ tb)


def skinny(run: Run):
    eng, cp, torch = run.engine, run.cp, run.torch
    bf16 = bfloat16_dtype()
    for label, (m, n, k) in (("vector-matrix 1x8192x8192", (1, 8192, 8192)),
                             ("vector-matrix 1x14336x4096", (1, 14336, 4096)),
                             ("matrix-vector 8192x1x8192", (8192, 1, 8192))):
        a, b = run.dev((m, k), bf16), run.dev((k, n), bf16)
        moved = (m * k + k * n + m * n) * 2
        g = f"{label} bf16"
        ref = (a.astype(cp.float32) @ b.astype(cp.float32)).get()
        run.add(g, "gemm_engine auto", lambda: eng.matmul(a, b), bytes_moved=moved, ref=ref, engine=True)
        run.add(g, "cuBLAS (cupy.matmul)", lambda: cp.matmul(a, b), bytes_moved=moved, baseline=True)
        ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
        run.add(g, "cuBLAS (torch.matmul)", lambda: torch.matmul(ta, tb), bytes_moved=moved, baseline=True)
        big = b if n > 1 else a
        run.add(g, "device copy of the matrix (cupy)", lambda: big.copy(), bytes_moved=2 * 2 * k * max(m, n))
        # The members auto chooses between, and split counts around the split kernel's own.
        run.add(g, "gemm_engine skinny (one launch)", lambda: eng.matmul(a, b, algorithm="skinny"),
                bytes_moved=moved, ref=ref, engine=True)
        if m == 1:
            problem = eng.problem_for(a, b)
            for s in (16, 32, 64):
                alg = SkinnySplitKAlgorithm(**select_split_skinny(problem, eng.dialect, s))
                run.add(g, f"gemm_engine skinny_split_k S~{s}", lambda alg=alg: eng.matmul(a, b, algorithm=alg),
                        bytes_moved=moved, ref=ref, engine=True)


def batched(run: Run):
    eng, cp, torch = run.engine, run.cp, run.torch
    a, b = run.dev((256, 128, 128), np.float16), run.dev((256, 128, 128), np.float16)
    flops = 2 * 256 * 128 ** 3
    g = "batched 256x128x128x128 f16"
    ref = (a.astype(cp.float32) @ b.astype(cp.float32)).get()
    run.add(g, "gemm_engine auto", lambda: eng.matmul(a, b), flops=flops, ref=ref, engine=True)
    run.add(g, "cuBLAS batched (cupy.matmul)", lambda: cp.matmul(a, b), flops=flops, baseline=True)
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    run.add(g, "cuBLAS batched (torch.bmm)", lambda: torch.bmm(ta, tb), flops=flops, baseline=True)


def split_k(run: Run):
    eng, cp = run.engine, run.cp
    a, b = run.dev((64, 65536), np.float32), run.dev((65536, 64), np.float32)
    flops = 2 * 64 * 64 * 65536
    g = "64x64x65536 f32 split-K"
    ref = a.get().astype(np.float64) @ b.get().astype(np.float64)
    run.add(g, "gemm_engine auto (split-K)", lambda: eng.matmul(a, b), flops=flops, ref=ref, engine=True)
    run.add(g, "gemm_engine simple_unit (no split)", lambda: eng.matmul(a, b, algorithm="simple_unit"),
            flops=flops, ref=ref, baseline=True, engine=True)
    run.add(g, "cuBLAS (cupy.matmul)", lambda: cp.matmul(a, b), flops=flops)


GROUPS = {"fused": fused, "skinny": skinny, "batched": batched, "split_k": split_k}


def markdown(rows, device) -> str:
    lines = ["Ratio: the baseline row's time / this row's time (> 1: faster than the baseline). "
             "Baseline of each group: the fastest row marked baseline.", "",
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
    p.add_argument("--groups", default=",".join(GROUPS), help=f"comma list of {', '.join(GROUPS)}")
    p.add_argument("--json", help="write the rows here")
    current_tables.add_arguments(p, "special_cases")
    args = p.parse_args(argv)
    command = current_tables.command_line("special_cases.py", sys.argv[1:] if argv is None else argv)
    groups = [g for g in args.groups.split(",") if g]
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        p.error(f"--groups: unknown {unknown}")
    engine = gemm_engine.Engine("cuda", background_compile=False)   # the chosen kernel, not a stand-in
    run = Run(engine, args.repeat)
    for g in groups:
        GROUPS[g](run)
        run.cp.get_default_memory_pool().free_all_blocks()
    device = engine.device.name
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "date": str(date.today()), "rows": run.rows}, f, indent=1)
    text = markdown(run.rows, device)
    current_tables.write(args, device, "the special cases against their baselines (bench/special_cases.py)",
                         command, text)
    print(text)
    failed = [r for r in run.rows if "failed" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
