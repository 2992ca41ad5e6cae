"""Benchmark: gemm_engine's algorithms beside the native library on the same device.

CUDA: every registered algorithm that sets up for the problem vs cupy.matmul (cuBLAS), timed with
CUDA events. OpenCL: the algorithms vs numpy (OpenBLAS, host) and CLBlast through pyclblast when
installed, timed on the host around queue.finish(). Median of ``--repeat`` runs after a warm-up,
fresh random inputs, and every engine result checked against the native one first.

    python3 bench/matmul_bench.py --backend opencl --sizes 256,512,1024
    python3 bench/matmul_bench.py --backend cuda --sizes 1x8192x8192 --dtypes bfloat16 --algorithms skinny,auto
    python3 bench/matmul_bench.py --backend cuda --suite square --dtypes float32    (<device>/square_float32.md)

Each run refreshes its current table, bench/results/<device>/<suite or "sizes">_<dtypes>.md
(`--table NAME` for another; bench/current_tables.py).
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
from datetime import date

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])  # run from a checkout without installing
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms import REGISTRY  # noqa: E402
from gemm_engine.dtypes import bfloat16_dtype  # noqa: E402
from gemm_engine.errors import SetupError  # noqa: E402
from common import Timer  # noqa: E402
import current_tables  # noqa: E402

SUITES = {
    "quick": [(1, 256, 256, 256), (1, 512, 512, 512), (1, 1024, 1024, 1024)],
    # Square problems, aligned and not: the sizes the tensor-core and f32 tables report.
    "square": [(1, 4096, 4096, 4096), (1, 1000, 1000, 1000), (1, 4093, 4093, 4093),
               (1, 1024, 1024, 1024), (1, 2048, 2048, 2048)],
}


def np_dtype(name):
    """numpy dtype of a bench dtype name; "tf32" is float32 data run with precision="tf32"."""
    return bfloat16_dtype() if name == "bfloat16" else np.dtype("float32" if name == "tf32" else name)


def native_baselines(engine, a_host, b_host, da, db, dtype):
    """{name: callable} of the native libraries to compare with on this backend."""
    out = {}
    if engine.backend == "cuda":
        cp = engine.runtime.cp
        if dtype != "tf32":
            out["cuBLAS (cupy.matmul)"] = lambda: cp.matmul(da, db)
        try:  # cuBLAS through torch too; for tf32 rows it is the only tf32 baseline
            import torch
            ta, tb = torch.from_dlpack(da), torch.from_dlpack(db)

            def torch_matmul(tf32=dtype == "tf32"):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                return torch.matmul(ta, tb)
            out["cuBLAS tf32 (torch.matmul)" if dtype == "tf32" else "cuBLAS (torch.matmul)"] = torch_matmul
        except Exception:
            pass
    else:
        out["numpy (host)"] = lambda: np.matmul(a_host, b_host)
        try:
            import pyclblast
        except ImportError:
            pyclblast = None
        if pyclblast is not None and a_host.ndim == 2 and a_host.dtype in (np.float32, np.float64):
            c = engine.runtime.empty((a_host.shape[0], b_host.shape[1]), a_host.dtype)
            out["CLBlast"] = lambda: pyclblast.gemm(engine.runtime.queue, a_host.shape[0], b_host.shape[1],
                                                     a_host.shape[1], da, db, c)
    return out


def bench_problem(engine, timer, shape, dtype, algorithms, precision=None):
    batch, m, n, k = shape
    rng = np.random.default_rng(0)
    lead = (batch,) if batch > 1 else ()
    a = rng.standard_normal(lead + (m, k)).astype(np_dtype(dtype))
    b = rng.standard_normal(lead + (k, n)).astype(np_dtype(dtype))
    rt = engine.runtime
    try:
        da, db = rt.to_device(a), rt.to_device(b)
    except Exception as exc:  # e.g. bfloat16 where the device array library lacks it
        return [{"shape": shape, "dtype": dtype, "name": "-", "skipped": f"no device arrays: {exc}"}]
    flops = 2.0 * batch * m * n * k
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64)) if m * n * k <= 2048 ** 3 else None
    rows = []
    for name, fn in native_baselines(engine, a, b, da, db, dtype).items():
        t = timer(fn)
        rows.append({"shape": shape, "dtype": dtype, "name": name, "ms": t * 1e3, "tflops": flops / t / 1e12})
    precision = "tf32" if dtype == "tf32" else "default"
    for alg_name in algorithms:
        alg = REGISTRY[alg_name]()
        try:
            result = engine.matmul(da, db, algorithm=alg, precision=precision)
        except SetupError as exc:
            rows.append({"shape": shape, "dtype": dtype, "name": alg_name, "skipped": str(exc)})
            continue
        except Exception as exc:  # a compile or launch failure is a result too: record, go on
            rows.append({"shape": shape, "dtype": dtype, "name": alg_name,
                         "skipped": f"FAILED {type(exc).__name__}: {str(exc)[:200]}"})
            continue
        err = None
        if ref is not None:
            res = rt.to_host(result).astype(np.float64)
            err = float(np.linalg.norm(res - ref) / np.linalg.norm(ref))
        t = timer(lambda: engine.matmul(da, db, algorithm=alg, precision=precision))
        _, cfg = engine.last_choice
        st = cfg.batch.global_.stage
        rows.append({"shape": shape, "dtype": dtype, "name": alg_name, "ms": t * 1e3,
                     "tflops": flops / t / 1e12, "rel_error": err,
                     "tiling": f"{st.stage_m}x{st.stage_n}x{st.stage_k}/{cfg.units}u"})
    return rows


def markdown(rows, device, backend) -> str:
    lines = [f"Backend: {backend}. vs native: TFLOP/s over the faster native library's.", "",
             "| shape (b x m x n x k) | dtype | implementation | tiling | ms | TFLOP/s | vs native | rel err |",
             "|---|---|---|---|---|---|---|---|"]
    best_native = {}
    for r in rows:
        if "tflops" in r and not r["name"] in REGISTRY:
            key = (tuple(r["shape"]), r["dtype"])
            best_native[key] = max(best_native.get(key, 0), r["tflops"])
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        if "skipped" in r:
            lines.append(f"| {shape} | {r['dtype']} | {r['name']} | | | | | skipped: {r['skipped'][:80]} |")
            continue
        native = best_native.get((tuple(r["shape"]), r["dtype"]))
        ratio = f"{r['tflops'] / native:.2f}" if native and r["name"] in REGISTRY else ""
        err = f"{r['rel_error']:.1e}" if r.get("rel_error") is not None else ""
        lines.append(f"| {shape} | {r['dtype']} | {r['name']} | {r.get('tiling', '')} | {r['ms']:.3f} | "
                     f"{r['tflops']:.3f} | {ratio} | {err} |")
    return "\n".join(lines) + "\n"


def parse_size(text: str) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a --sizes entry: "S" is S x S x S, "MxNxK" (e.g. 1x8192x8192: a 1 x 8192
    row times an 8192 x 8192 matrix) and "BxMxNxK" name each extent."""
    dims = tuple(int(d) for d in text.lower().split("x"))
    if len(dims) == 1:
        return (1,) + dims * 3
    if len(dims) == 3:
        return (1,) + dims
    if len(dims) == 4:
        return dims
    raise ValueError(f"--sizes: {text!r} is not S, MxNxK or BxMxNxK")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="auto")
    p.add_argument("--suite", choices=sorted(SUITES), default="quick")
    p.add_argument("--sizes", help="comma list of sizes (overrides --suite): S (S^3), MxNxK or BxMxNxK")
    p.add_argument("--dtypes", default="float32")
    p.add_argument("--algorithms", default=",".join(sorted(REGISTRY)))
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--json", help="write the rows and device facts to this JSON file")
    current_tables.add_arguments(p, None, "<suite, or sizes with --sizes>_<dtypes>, e.g. square_float32")
    args = p.parse_args(argv)
    if args.table is None:
        args.table = f"{'sizes' if args.sizes else args.suite}_{args.dtypes.replace(',', '_')}"
    command = current_tables.command_line("matmul_bench.py", sys.argv[1:] if argv is None else argv)
    engine = gemm_engine.Engine(args.backend, background_compile=False)   # the chosen kernel, not a stand-in
    timer = Timer(engine, args.repeat)
    shapes = [parse_size(s) for s in args.sizes.split(",")] if args.sizes else SUITES[args.suite]
    rows = []

    def save(quiet=True):  # after every problem, so a run stopped by a time limit keeps what it measured
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"device": engine.device.name, "backend": engine.backend, "date": str(date.today()),
                           "host": platform.node(), "repeat": args.repeat, "rows": rows}, f, indent=1)
        current_tables.write(args, engine.device.name, "the algorithms beside the native library "
                             "(bench/matmul_bench.py)", command, markdown(rows, engine.device.name, engine.backend),
                             quiet=quiet)

    for dtype in args.dtypes.split(","):
        for shape in shapes:
            rows += bench_problem(engine, timer, shape, dtype, args.algorithms.split(","))
            save()
    save(quiet=False)
    print(markdown(rows, engine.device.name, engine.backend))


if __name__ == "__main__":
    main()
