"""Host time of repeated calls whose arrays come at new addresses, as a model's layers give them.

A benchmark loop that drops each result gets the same output address back from the caching
allocator every call; a model keeps its activations, so every call's output (and often its input)
is new. The TMA kernels carry the operands' addresses in tensor maps, so this is where their
per-call cost differs. For each row (bf16, nn.Linear's layout, torch CUDA tensors): microseconds
per call of ``gemm_engine.matmul`` and of ``torch.matmul`` over back-to-back calls, the results
dropped and kept (CUDA events around the calls: host-bound rows show the host's time), each the
best of ``--rounds`` rounds taken in turns; every result checked against float64 first.

    python3 bench/new_addresses.py [--calls 300] [--rounds 7]

The table goes to bench/results/<device>/new_addresses.md (bench/current_tables.py).
"""
from __future__ import annotations

import argparse
import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402

ROWS = [(8, 4096, 4096), (32, 4096, 4096), (64, 4096, 4096), (96, 4096, 4096), (128, 4096, 4096),
        (16, 14336, 4096), (16, 4096, 14336)]


def per_call_us(torch, fn, calls: int, keep: bool) -> float:
    """Microseconds per call over ``calls`` back-to-back calls (results kept alive or dropped)."""
    kept = []
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        y = fn()
        if keep:
            kept.append(y)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=7)
    current_tables.add_arguments(ap, "new_addresses")
    args = ap.parse_args(argv)
    import torch
    import gemm_engine
    engine = gemm_engine.Engine("cuda", background_compile=False)   # the chosen kernel, not a stand-in
    lines = ["| M x N x K | choice | engine dropped | torch dropped | engine kept | torch kept | kept / dropped (engine) |",
             "|---|---|---|---|---|---|---|"]
    for m, n, k in ROWS:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = (torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5).t()
        got = engine.matmul(a, b)
        want = a.double() @ b.double()
        err = float((got.double() - want).norm() / want.norm())
        if not err < 1e-2:
            raise AssertionError(f"{m}x{n}x{k}: relative error {err:.2e} against float64")
        choice = f"{engine.last_choice[0].name} {engine.last_choice[1].selection.describe()}"
        fns = {"engine": lambda: engine.matmul(a, b), "torch": lambda: torch.matmul(a, b)}
        best = {}
        for _ in range(args.rounds):
            for keep in (False, True):
                for name, fn in fns.items():
                    t = per_call_us(torch, fn, args.calls, keep)
                    best[name, keep] = min(best.get((name, keep), t), t)
        lines.append(f"| {m} x {n} x {k} | {choice} | {best['engine', False]:.1f} | {best['torch', False]:.1f} | "
                     f"{best['engine', True]:.1f} | {best['torch', True]:.1f} | "
                     f"{best['engine', True] / best['engine', False]:.2f} |")
        print(lines[-1], flush=True)
    table = ("Microseconds per call, back-to-back calls, results dropped (the same addresses come back) and "
             f"kept (new ones each call); best of {args.rounds} rounds of {args.calls} calls.\n\n" + "\n".join(lines))
    command = current_tables.command_line("new_addresses.py", sys.argv[1:] if argv is None else argv)
    current_tables.write(args, engine.device.name, "calls at new addresses (bench/new_addresses.py)", command,
                                table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
