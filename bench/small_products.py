"""Small 16-bit products (under 2^32 operations) on the default choice against the rule before it and
torch.matmul: the one-wave 64 x 128 rule of selector/small_wave.py, kernels and whole calls.

For each row (torch CUDA tensors, a column-major operand a transposed view): the default call checked
against float64 (relative Frobenius error under 1e-2); then in turns, after a warm-up, the kernels
by CUDA-graph replay (`common.replayed`: what a captured model sees) and the whole calls back to
back (`gemm_engine.runtime.timing.device_times`: host-bound at these sizes, so they show the host's
time as much as the kernel's) of the default, of ``pipelined_wgmma`` (the rule before: these rows
ran it) and of torch.matmul. "train" rows set the rule, "held out" rows did not.

    python3 bench/small_products.py [--repeat 15]

The table goes to bench/results/<device>/small_products.md (bench/current_tables.py).
"""
from __future__ import annotations

import argparse
import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402
from common import replayed  # noqa: E402

TRAIN = [("float16", 1000, 1000, 1000, "row"), ("bfloat16", 1000, 1000, 1000, "row"), ("float16", 1024, 1024, 1024, "row"),
         ("bfloat16", 768, 768, 768, "row"), ("float16", 1000, 1000, 2000, "row"), ("bfloat16", 512, 2048, 1024, "col"),
         ("bfloat16", 700, 1304, 904, "row"), ("float16", 1024, 1024, 512, "col"), ("bfloat16", 256, 4096, 1024, "col")]
HELD_OUT = [("bfloat16", 900, 900, 900, "row"), ("float16", 1100, 800, 1200, "row"), ("bfloat16", 640, 1536, 768, "col"),
            ("float16", 896, 1152, 1024, "row"), ("bfloat16", 1000, 600, 3000, "row"), ("bfloat16", 384, 2816, 512, "col"),
            ("float16", 1280, 768, 1280, "row"), ("bfloat16", 1024, 768, 640, "row"), ("bfloat16", 1000, 1000, 1000, "col"),
            ("float16", 512, 512, 512, "row")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    current_tables.add_arguments(ap, "small_products")
    args = ap.parse_args(argv)
    import torch
    import gemm_engine
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.runtime.timing import device_times
    engine = gemm_engine.Engine("cuda", background_compile=False)   # the chosen kernel, not a stand-in
    before = REGISTRY["pipelined_wgmma"]()
    lines = ["| set | dtype, M x N x K, b | choice | kernel: default | rule before | torch | torch / default | "
             "call: default | rule before | torch |", "|---|---|---|---|---|---|---|---|---|---|"]
    for label, rows in (("train", TRAIN), ("held out", HELD_OUT)):
        for dtype, m, n, k, b_layout in rows:
            dt = getattr(torch, dtype)
            a = torch.randn(m, k, device="cuda").to(dt)
            b = (torch.randn(n, k, device="cuda").to(dt).t() if b_layout == "col"
                 else torch.randn(k, n, device="cuda").to(dt))
            want = a.double() @ b.double()
            for alg in (None, before):
                err = float((engine.matmul(a, b, algorithm=alg).double() - want).norm() / want.norm())
                if not err < 1e-2:
                    raise AssertionError(f"{dtype} {m}x{n}x{k}: relative error {err:.2e} against float64 ({alg})")
            engine.matmul(a, b)
            choice = f"{engine.last_choice[0].name} {engine.last_choice[1].selection.describe()}"
            fns = {"default": lambda: engine.matmul(a, b), "before": lambda: engine.matmul(a, b, algorithm=before),
                   "torch": lambda: torch.matmul(a, b)}
            kernel = {name: replayed(torch, fn) * 1e6 for name, fn in fns.items()}
            call = {name: t * 1e6 for name, t in device_times(engine.runtime, fns, repeat=args.repeat, warmup=3).items()}
            lines.append(f"| {label} | {dtype} {m} x {n} x {k}, {b_layout} | {choice} | {kernel['default']:.1f} | "
                         f"{kernel['before']:.1f} | {kernel['torch']:.1f} | {kernel['torch'] / kernel['default']:.2f} | "
                         f"{call['default']:.1f} | {call['before']:.1f} | {call['torch']:.1f} |")
            print(lines[-1], flush=True)
    table = ("Microseconds: kernels by CUDA-graph replay (median), whole calls back to back (median of "
             f"{args.repeat} batches in turns); every result checked against float64 first.\n\n" + "\n".join(lines))
    command = current_tables.command_line("small_products.py", sys.argv[1:] if argv is None else argv)
    current_tables.write(args, engine.device.name, "small 16-bit products (bench/small_products.py)",
                                command, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
