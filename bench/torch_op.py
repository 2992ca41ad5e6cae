"""The torch op's rows (issue 29) on one CUDA GPU, every result checked against float64 first.

    python3 bench/torch_op.py [--rows eager,compile,first_call,warmup,swiglu,block] [--quick]

Rows, each against its target, in one run (torch's numbers from the same run):

* eager: host microseconds per back-to-back call of ``gemm_engine.matmul`` on torch CUDA tensors
  (64^3 float16) against ``torch.matmul`` (target: at most torch's);
* compile: the same call inside ``torch.compile(fullgraph=True)`` (inductor): what the registered
  op adds over the eager call beyond what torch.compile adds to torch.matmul's (compiled minus
  eager, each: the compiled function's own wrappers, paid once per compiled model, are not the
  op's; target: at most 5 us); the cProfile of the compiled calls must show the op's kernel
  (``matmul_impl``) entered once per call, so the row times the op and not a cached result;
* first_call: the first call of a new shape class (bf16 x @ W.T + bias, gelu, 1536 x 4096 x 4096) in
  a fresh process, the engine already made: with empty caches (CuPy's, the driver's, the source
  cache: target 0.5 s; a stand-in runs it while the chosen kernel builds in the background, and the
  second call's time, which waits for that build, is reported beside it), then again in another
  fresh process with those caches warm (target 20 ms);
* warmup: ``gemm_engine.warmup`` of one Llama-3-8B layer's linear layers at M = 1, 16, 128, 2048,
  bf16, forward, in a fresh process with empty caches (target 30 s), and with the backward products;
* swiglu: the fused SwiGLU up-projection, 8192 tokens, 4096 -> 2 x 14336 bf16, against torch's
  ``mm`` + ``silu`` + ``mul`` on the concatenated weight (target 1.3x);
* block: forward + backward of a transformer block (dim 4096, 32 heads, SwiGLU 14336; 2 x 2048
  tokens, bf16) with the engine's modules against torch's, same parameters and data (target 1.0x).
  With $BENCH_RESULTS set (or ``--block-profile PATH``) it also writes block_profile.md there:
  torch.profiler's CUDA kernels and matmul ops (with shapes) of a few steps of each block, and the
  engine's plan of every product of a step (bench/torch_block_profile.py).

The table goes to bench/results/<device>/torch_op.md (bench/current_tables.py), ``--json PATH`` the
numbers. ``--quick``: smaller sizes, for trying the script (its table is no measurement).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = __file__.rsplit("/bench/", 1)[0]
sys.path.insert(0, ROOT)
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402

ROWS = ("eager", "compile", "first_call", "warmup", "swiglu", "block")
#: Where the compile and block rows run ("cpu": a check of their code on PoCL, no measurement).
DEVICE = "cuda"


# -- timing ---------------------------------------------------------------------------------------
def cuda_ms(torch, fn, repeat=20, warmup=3):
    """Median milliseconds of ``fn()`` on the current stream (CUDA events around each call)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def host_us(torch, fns: dict, calls, rounds=7) -> dict:
    """Host microseconds per call of each of ``fns`` (name -> function) over ``calls`` back-to-back
    calls: the median of ``rounds`` rounds, the functions taken in turns within each round (the
    host's speed drifts within a run; in turns, every function sees the same drift)."""
    for fn in fns.values():
        for _ in range(100):
            fn()
    torch.cuda.synchronize()
    runs = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            runs[name].append((time.perf_counter() - start) / calls * 1e6)
            torch.cuda.synchronize()
    return {name: statistics.median(r) for name, r in runs.items()}


def rel_error(torch, got, want) -> float:
    return float((got.double() - want).norm() / want.norm().clamp_min(1e-30))


def check(torch, got, want, tol, what):
    err = rel_error(torch, got, want)
    if not err <= tol:
        raise AssertionError(f"{what}: relative error {err:.2e} > {tol:.0e} against float64")
    return err


def profile_calls(torch, fn, name, calls=200):
    """Where the host time of ``calls`` calls goes (cProfile, by own time) into $BENCH_RESULTS/``name``:
    what the compiled call spends beside the eager one is read from it, not guessed. The Stats."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        fn()
    profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(40)
    folder = os.environ.get("BENCH_RESULTS")
    if folder:
        with open(os.path.join(folder, name), "w") as f:
            f.write(text.getvalue())
    return pstats.Stats(profile)


def entered(stats, function: str) -> int:
    """How many times the profiled calls entered a function of this name."""
    return sum(v[1] for (_, _, name), v in stats.stats.items() if name == function)


# -- rows -----------------------------------------------------------------------------------------
def row_eager(torch, ge, args):
    a, b = (torch.randn(64, 64, device="cuda", dtype=torch.float16) for _ in range(2))
    check(torch, ge.matmul(a, b), a.double() @ b.double(), 2e-3, "eager 64^3")
    times = host_us(torch, {"ours": lambda: ge.matmul(a, b), "theirs": lambda: torch.matmul(a, b)}, args.calls)
    ours, theirs = times["ours"], times["theirs"]
    return dict(engine_us=ours, torch_us=theirs, value=f"{ours:.2f} us / {theirs:.2f} us", met=ours <= theirs,
                target="<= torch.matmul's host time")


def row_compile(torch, ge, args):
    dtype = torch.float16 if DEVICE == "cuda" else torch.float32
    a, b = (torch.randn(64, 64, device=DEVICE, dtype=dtype) for _ in range(2))
    ours = torch.compile(lambda a, b: ge.matmul(a, b), fullgraph=True)
    theirs = torch.compile(lambda a, b: torch.matmul(a, b), fullgraph=True)
    check(torch, ours(a, b), a.double() @ b.double(), 2e-3, "compiled 64^3")
    times = host_us(torch, {"compiled": lambda: ours(a, b), "eager": lambda: ge.matmul(a, b),
                            "reference": lambda: theirs(a, b), "torch_eager": lambda: torch.matmul(a, b)}, args.calls)
    compiled, eager, reference, torch_eager = (times[k] for k in ("compiled", "eager", "reference", "torch_eager"))
    added = compiled - eager
    beyond = added - (reference - torch_eager)
    stats = profile_calls(torch, lambda: ours(a, b), "torch_compile_profile.txt", calls=200)
    if entered(stats, "matmul_impl") != 200:
        raise AssertionError(f"compile: the op's kernel ran {entered(stats, 'matmul_impl')} times in 200 compiled calls")
    return dict(compiled_us=compiled, eager_us=eager, torch_compiled_us=reference, torch_eager_us=torch_eager,
                added_us=added, beyond_us=beyond,
                value=f"{beyond:+.2f} us beyond torch.compile's own ({compiled:.2f} compiled - {eager:.2f} eager = "
                      f"{added:+.2f}; torch.matmul {reference:.2f} - {torch_eager:.2f} = {reference - torch_eager:+.2f})",
                met=beyond <= 5, target="op adds <= 5 us (beyond torch.compile's own)")


FIRST_CALL_CHILD = """
import json, sys, time, torch
sys.path.insert(0, {root!r})
import gemm_engine as ge
engine = ge.default_engine()
x0 = torch.randn(32, 32, device="cuda")
ge.matmul(x0, x0); ge.matmul(x0, x0); torch.cuda.synchronize()    # the context and the runtime made, not timed
engine.wait_for_compiles()
x = torch.randn({m}, {k}, device="cuda", dtype=torch.bfloat16)
w = torch.randn({n}, {k}, device="cuda", dtype=torch.bfloat16) / {k} ** 0.5
bias = torch.randn({n}, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
import cProfile, io, os, pstats
profile = cProfile.Profile()
start = time.perf_counter()
profile.enable()
y = ge.matmul(x, w.mT, bias=bias, activation="gelu")
torch.cuda.synchronize()
profile.disable()
seconds = time.perf_counter() - start
first = engine.last_choice[0].name
start = time.perf_counter()
y2 = ge.matmul(x, w.mT, bias=bias, activation="gelu")   # the chosen kernel: waits for its build
torch.cuda.synchronize()
second = time.perf_counter() - start
if os.environ.get("BENCH_RESULTS"):   # where the first call's time goes, cold then warm
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumtime").print_stats(45)
    with open(os.path.join(os.environ["BENCH_RESULTS"], "first_call_profile.txt"), "a") as f:
        f.write(f"=== first call: {{seconds * 1e3:.1f}} ms ===\\n" + text.getvalue())
want = torch.nn.functional.gelu(x.double() @ w.double().T + bias.double())
err = max(float((r.double() - want).norm() / want.norm()) for r in (y, y2))
print(json.dumps(dict(seconds=seconds, error=err, algorithm=first, second_s=second,
                      second_algorithm=engine.last_choice[0].name)))
"""

WARMUP_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
import gemm_engine as ge
engine = ge.default_engine()
report = ge.warmup(list(ge.compile_ahead.LLAMA3_8B), tokens={tokens!r}, dtype="bfloat16", training={training!r})
print(json.dumps(dict(seconds=report.seconds, kernels=report.kernels, compiled=report.compiled,
                      problems=report.problems, refused=len(report.refused))))
"""


def _child(code: str, cache: str) -> dict:
    """Run ``code`` in a fresh Python with every kernel cache under ``cache``; its JSON line."""
    env = dict(os.environ, CUPY_CACHE_DIR=os.path.join(cache, "cupy"), CUDA_CACHE_PATH=os.path.join(cache, "nv"),
               GEMM_ENGINE_CACHE_DIR=os.path.join(cache, "gemm_engine"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(f"child failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def row_first_call(torch, ge, args):
    m, n, k = (256, 1024, 1024) if args.quick else (1536, 4096, 4096)
    code = FIRST_CALL_CHILD.format(root=ROOT, m=m, n=n, k=k)
    with tempfile.TemporaryDirectory() as cache:
        cold, warm = _child(code, cache), _child(code, cache)
    for run in (cold, warm):
        if not run["error"] <= 2e-2:
            raise AssertionError(f"first call: relative error {run['error']:.2e} against float64")
    return dict(cold_s=cold["seconds"], warm_s=warm["seconds"], algorithm=cold["algorithm"],
                second_s=cold["second_s"], second_algorithm=cold["second_algorithm"],
                warm_algorithm=warm["algorithm"],
                value=f"{cold['seconds'] * 1e3:.0f} ms empty caches ({cold['algorithm']} standing in; the second "
                      f"call {cold['second_s']:.2f} s, {cold['second_algorithm']}), {warm['seconds'] * 1e3:.1f} ms "
                      f"warm ({warm['algorithm']}), {m}x{n}x{k}",
                met=cold["seconds"] <= 0.5 and warm["seconds"] <= 0.02, target="<= 0.5 s cold, <= 20 ms warm")


def row_warmup(torch, ge, args):
    tokens = (1, 16) if args.quick else (1, 16, 128, 2048)
    out = {}
    for training in (False, True):
        with tempfile.TemporaryDirectory() as cache:
            out[training] = _child(WARMUP_CHILD.format(root=ROOT, tokens=tokens, training=training), cache)
    fwd, both = out[False], out[True]
    return dict(forward=fwd, training=both,
                value=(f"{fwd['seconds']:.1f} s for {fwd['kernels']} kernels of {fwd['problems']} problems "
                       f"(with backward: {both['seconds']:.1f} s, {both['kernels']} kernels); refused "
                       f"{fwd['refused'] + both['refused']}"),
                met=fwd["seconds"] <= 30 and not fwd["refused"], target="forward <= 30 s")


def row_swiglu(torch, ge, args):
    import torch.nn.functional as F
    m, k, h = (1024, 1024, 2048) if args.quick else (8192, 4096, 14336)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    gate, up = (torch.randn(h, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5 for _ in range(2))
    interleaved = torch.stack((gate, up), dim=1).reshape(2 * h, k)
    concatenated = torch.cat((gate, up))

    def ours():
        return ge.matmul(x, interleaved.mT, activation="swiglu")

    def theirs():
        g, u = (x @ concatenated.T).chunk(2, dim=-1)
        return F.silu(g) * u

    rows = slice(0, 256)
    xs = x[rows].double()
    want = F.silu(xs @ gate.double().T) * (xs @ up.double().T)
    check(torch, ours()[rows], want, 2e-2, "fused SwiGLU")
    check(torch, theirs()[rows], want, 2e-2, "torch SwiGLU")
    ms, torch_ms = cuda_ms(torch, ours), cuda_ms(torch, theirs)
    algorithm = ge.default_engine().last_choice[0].name
    return dict(engine_ms=ms, torch_ms=torch_ms, speedup=torch_ms / ms, algorithm=algorithm,
                value=f"{torch_ms / ms:.2f}x ({ms:.3f} ms, {algorithm}; torch {torch_ms:.3f} ms)",
                met=torch_ms / ms >= 1.3, target=">= 1.3x torch mm + silu + mul")


def row_block(torch, ge, args):
    from gemm_engine.torch.block import Block, engine_block
    import torch.nn.functional as F
    dim, heads, hidden, batch, tokens = (512, 8, 1536, 2, 256) if args.quick else (4096, 32, 14336, 2, 2048)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float32
    reference = Block(dim, heads, hidden, device=DEVICE, dtype=dtype)
    ours = engine_block(reference)
    x = torch.randn(batch, tokens, dim, device=DEVICE, dtype=dtype)
    y = torch.randn(batch, tokens, dim, device=DEVICE, dtype=dtype)
    report = ge.warmup(ours, tokens=(batch * tokens,), training=True)

    def step(block):
        def run():
            block.zero_grad(set_to_none=True)
            loss = F.mse_loss(block(x).float(), y.float())
            loss.backward()
            return loss
        return run

    losses = [float(step(b)().detach()) for b in (reference, ours)]
    grads = [torch.cat([p.grad.double().flatten() for n, p in b.named_parameters() if "norm" in n]) for b in
             (reference, ours)]
    if abs(losses[1] - losses[0]) > 2e-2 * abs(losses[0]):
        raise AssertionError(f"block: losses part: {losses[1]} against torch's {losses[0]}")
    err = rel_error(torch, grads[1], grads[0])
    if not err <= 5e-2:
        raise AssertionError(f"block: norm weights' gradients part: relative difference {err:.2e}")
    ms, torch_ms = cuda_ms(torch, step(ours), repeat=10), cuda_ms(torch, step(reference), repeat=10)
    path = args.block_profile or (os.environ.get("BENCH_RESULTS") and
                                  os.path.join(os.environ["BENCH_RESULTS"], "block_profile.md"))
    if path:
        write_block_profile(torch, ge, path, {"engine": ours, "torch": reference}, step, args)
    return dict(engine_ms=ms, torch_ms=torch_ms, speedup=torch_ms / ms, warmup=str(report),
                value=f"{torch_ms / ms:.2f}x ({ms:.2f} ms against torch {torch_ms:.2f} ms; loss {losses[1]:.4f} / "
                      f"{losses[0]:.4f})", met=torch_ms / ms >= 1.0, target=">= 1.0x torch's step")


def write_block_profile(torch, ge, path, blocks, step, args):
    """The block's kernels and matmul ops per block, and the plans of the engine's products
    (bench/torch_block_profile.py), into ``path``."""
    import torch_block_profile as bp
    cuda = DEVICE == "cuda"
    engine = ge.default_engine()
    text = [f"# Block training step: where the time goes ({engine.device.name}, torch {torch.__version__})", "",
            f"Command: `python3 bench/torch_op.py --rows block{' --quick' if args.quick else ''}`", "",
            bp.kernel_tables(torch, blocks, step, steps=3, cuda=cuda), "## The engine's products", "",
            bp.product_plans(engine, bp.record_products(engine, step(blocks["engine"])),
                             nominal_dtype=None if cuda else "bfloat16")]
    with open(path, "w") as f:
        f.write("\n".join(text))


# -- main -----------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma list of {', '.join(ROWS)}")
    ap.add_argument("--calls", type=int, default=2000, help="back-to-back calls of the host-time rows")
    ap.add_argument("--quick", action="store_true", help="small sizes (trying the script, not measuring)")
    ap.add_argument("--json", metavar="PATH", help="write the numbers here too")
    ap.add_argument("--block-profile", metavar="PATH", help="the block row's profile here (default with "
                    "$BENCH_RESULTS: $BENCH_RESULTS/block_profile.md)")
    current_tables.add_arguments(ap, "torch_op")
    args = ap.parse_args(argv)
    command = current_tables.command_line("torch_op.py", sys.argv[1:] if argv is None else argv)
    import torch
    import gemm_engine as ge
    import gemm_engine.torch  # noqa: F401
    if not torch.cuda.is_available():
        raise SystemExit("bench/torch_op.py needs torch with a CUDA GPU")
    engine = ge.default_engine()
    results = {}
    for name in args.rows.split(","):
        fn = globals()[f"row_{name.strip()}"]
        try:
            results[name] = fn(torch, ge, args)
        except Exception as exc:  # noqa: BLE001 -- one row's failure is reported, the rest run
            results[name] = dict(value=f"failed: {type(exc).__name__}: {str(exc)[:300]}", met=False, target="")
        print(f"{name}: {results[name]['value']}", flush=True)
    lines = [f"torch {torch.__version__}, {engine.device.name}{' (--quick: not a measurement)' if args.quick else ''}.",
             "", "| row | result | target | met |", "|---|---|---|---|"]
    lines += [f"| {name} | {r['value']} | {r['target']} | {'yes' if r['met'] else 'no'} |" for name, r in results.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    path = current_tables.write(args, engine.device.name, "the torch op (bench/torch_op.py)", command, text)
    if "## History" not in path.read_text():      # a first run: the sections people keep, started
        with open(path, "a") as f:
            f.write(f"\n## Notes\n\nRows and targets: issue 29; bench/torch_op.py's docstring says what each measures.\n"
                    f"\n## History\n\n- {time.strftime('%Y-%m-%d')}: first run (issue 29).\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
