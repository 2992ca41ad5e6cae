"""Host time the torch layer adds to a call under ``torch.compile``, on CPU tensors (PoCL) or CUDA.

    python3 bench/torch_compile_host.py [--device cpu|cuda] [--backend inductor] [--profile] [--calls N]

Two measurements, each compiled (``fullgraph=True``) against eager, torch.matmul's beside them:

* stub: the engine's call (`Engine.run_call`) replaced by one returning a ready tensor, so what is
  left is the torch layer alone (routing, the registered op, the dispatcher, torch.compile's
  wrappers): on CPU the PoCL call costs hundreds of microseconds and moves by tens, which would
  hide a few microseconds of layer;
* real: the whole call (8 x 8 float32 on the CPU through PoCL, 64^3 float16 on CUDA).

``--profile``: cProfile (cumulative) of 200 compiled calls of each: the Python frames between the
compiled graph and the engine (stub), and the engine's own (real). Host microseconds per call:
the fastest of 7 runs of ``--calls`` calls (the machine's other work only adds).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])


def host_us(torch, fn, calls, device):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(200):
        fn()
    sync()
    runs = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - start) / calls * 1e6)
        sync()
    return min(runs)


def measure(torch, ge, engine, a, b, args, label):
    ours = torch.compile(lambda a, b: ge.matmul(a, b), fullgraph=True, backend=args.backend)
    theirs = torch.compile(lambda a, b: torch.matmul(a, b), fullgraph=True, backend=args.backend)
    ours(a, b), theirs(a, b)
    eager = host_us(torch, lambda: ge.matmul(a, b), args.calls, args.device)
    compiled = host_us(torch, lambda: ours(a, b), args.calls, args.device)
    torch_eager = host_us(torch, lambda: torch.matmul(a, b), args.calls, args.device)
    torch_compiled = host_us(torch, lambda: theirs(a, b), args.calls, args.device)
    print(f"{label}: engine eager {eager:.2f} us, compiled {compiled:.2f} us (adds {compiled - eager:+.2f}); "
          f"torch.matmul eager {torch_eager:.2f}, compiled {torch_compiled:.2f} (adds {torch_compiled - torch_eager:+.2f}); "
          f"the op beyond torch.compile's own: {(compiled - eager) - (torch_compiled - torch_eager):+.2f} us")
    return ours


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    import torch
    import gemm_engine as ge
    import gemm_engine.torch  # noqa: F401
    from gemm_engine import api
    engine = ge.Engine("opencl" if args.device == "cpu" else "cuda")
    api._default_engine = engine
    shape, dtype = ((8, 8), torch.float32) if args.device == "cpu" else ((64, 64), torch.float16)
    a, b = (torch.randn(*shape, device=args.device, dtype=dtype) for _ in range(2))
    assert torch.allclose(ge.matmul(a, b).float(), (a.double() @ b.double()).float(), rtol=1e-2, atol=1e-2)
    print(f"torch {torch.__version__}, {args.device}, {args.backend}")
    ready = a @ b
    engine.run_call = lambda *call: ready      # the engine's part gone: the layer alone (an instance attribute)
    profile(measure(torch, ge, engine, a, b, args, "stub"), a, b, args)
    del engine.run_call
    torch._dynamo.reset()
    profile(measure(torch, ge, engine, a, b, args, "real"), a, b, args)


def profile(compiled, a, b, args):
    """cProfile (cumulative) of 200 compiled calls, printed (``--profile``)."""
    if not args.profile:
        return
    found = cProfile.Profile()
    found.enable()
    for _ in range(200):
        compiled(a, b)
    found.disable()
    text = io.StringIO()
    pstats.Stats(found, stream=text).sort_stats("cumulative").print_stats(30)
    print(text.getvalue())


if __name__ == "__main__":
    main()
