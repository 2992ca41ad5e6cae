"""``out += a @ b`` (``c=out, beta=1``: gradient accumulation, an in-place residual add) against
``torch.Tensor.addmm_`` (cuBLAS with beta 1), with the product alone and ``c`` elsewhere beside it,
in the same run (CUDA, torch tensors).

    python3 bench/accumulate.py [--repeat 10] [--dtypes bfloat16,float16]  (refreshes <device>/accumulate.md)

Rows per shape and dtype: the engine's plain product into ``out``; its ``out += a @ b`` (the TMA
writer adds each tile into ``out``, c never read: epilogue/spec.py ``accumulate``); its
``out = a @ b + c`` with c another array (read in the epilogue); ``out.addmm_(a, b)``; torch's
``addmm(c, a, b, out=out)``. Times: median of device-timed runs after warm-up, in turns
(gemm_engine.runtime.timing.device_times). Each engine row is checked against float64 first.
"""
from __future__ import annotations

import argparse
import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.runtime.timing import device_times  # noqa: E402
import current_tables  # noqa: E402

SHAPES = [(8192, 7168, 4096), (4096, 4096, 4096), (8192, 4096, 8192), (4096, 14336, 4096), (2048, 2048, 2048),
          (3000, 3000, 3000)]


def rows_for(engine, torch, shape, dtype, repeat) -> list[str]:
    m, n, k = shape
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a, b, c, start = (torch.randn(s, generator=gen, device="cuda").to(dt) for s in ((m, k), (k, n), (m, n), (m, n)))
    out = start.clone()
    engine.matmul(a, b, out=out, c=out, beta=1.0)
    want = start.double() + a.double() @ b.double()
    err = float(((out.double() - want).norm() / want.norm()).item())
    accumulating = engine.last_choice[1].batch.global_.epilogue.accumulate
    fns = {"plain": lambda: engine.matmul(a, b, out=out),
           "accumulate": lambda: engine.matmul(a, b, out=out, c=out, beta=1.0),
           "c elsewhere": lambda: engine.matmul(a, b, out=out, c=c, beta=1.0),
           "addmm_": lambda: out.addmm_(a, b), "addmm": lambda: torch.addmm(c, a, b, out=out)}
    t = {name: v * 1e3 for name, v in device_times(engine.runtime, fns, repeat=repeat).items()}
    return [f"| {dtype} {m}x{n}x{k} | {t['plain']:.4f} | {t['accumulate']:.4f} | {t['accumulate'] / t['plain']:.3f} | "
            f"{t['c elsewhere']:.4f} | {t['addmm_']:.4f} | {t['addmm_'] / t['accumulate']:.2f} | {t['addmm']:.4f} | "
            f"{'yes' if accumulating else 'no'} | {err:.1e} |"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--dtypes", default="bfloat16,float16")
    current_tables.add_arguments(p, "accumulate")
    args = p.parse_args(argv)
    command = current_tables.command_line("accumulate.py", sys.argv[1:] if argv is None else argv)
    import torch
    engine = gemm_engine.Engine("cuda", background_compile=False)
    lines = ["ms a call; `+=` / plain: the accumulating call's time over the plain product's; addmm_ / `+=`: "
             "torch's in-place accumulate over the engine's (> 1: the engine is faster); adds: whether the "
             "call's kernel added its tiles into out (TMA reducing stores); err: the accumulating call against "
             "float64.", "",
             "| shape | plain | out += a @ b | += / plain | c elsewhere | addmm_ | addmm_ / += | addmm(c) | adds | err |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for dtype in args.dtypes.split(","):
        for shape in SHAPES:
            lines += rows_for(engine, torch, shape, dtype, args.repeat)
            print(lines[-1], flush=True)
    current_tables.write(args, engine.device.name, "out += a @ b against addmm_ (bench/accumulate.py)", command,
                         "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
