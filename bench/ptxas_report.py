"""Registers, spills and key SASS instruction counts of rendered unit kernels (no GPU needed).

    python3 bench/ptxas_report.py                      # the selected f32 kernels of the square shapes
    python3 bench/ptxas_report.py --sass               # plus the counts of LDS/LDG/FFMA widths

Renders each algorithm's kernel for the problem (alignment as `Engine` would see freshly allocated
contiguous arrays), compiles it with ``nvcc -cubin -gencode=arch=compute_90a,code=sm_90a -Xptxas -v``
and prints one line per kernel: what the compiler's resource report says before any device time.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from gemm_engine.algorithms import resolve  # noqa: E402
from gemm_engine.codegen.device import nominal_cuda_device  # noqa: E402
from gemm_engine.codegen.dialect import dialect_for  # noqa: E402
from gemm_engine.dtypes import BY_NAME  # noqa: E402
from gemm_engine.problem import MatmulProblem  # noqa: E402

ARCH = "-gencode=arch=compute_90a,code=sm_90a"
#: cuobjdump ships with the CUDA toolkit; CUOBJDUMP names another copy (e.g. from the nvidia-cuda-cuobjdump wheel).
CUOBJDUMP = os.environ.get("CUOBJDUMP", "cuobjdump")


def align_of(ld: int, itemsize: int) -> int:
    width = 16 // itemsize
    while width > 1 and ld % width:
        width //= 2
    return width


def report(algorithm: str, m: int, n: int, k: int, dtype: str = "float32", selection=None,
           sass: bool = False) -> str:
    et = BY_NAME[dtype]
    item = {"float32": 4, "float64": 8}.get(dtype, 2)
    problem = MatmulProblem(1, m, n, k, et, et, et, lhs_align=align_of(k, item), rhs_align=align_of(n, item))
    dialect = dialect_for(nominal_cuda_device(9, 0))
    alg = resolve(algorithm) if selection is None else type(resolve(algorithm))(selection)
    cfg = alg.setup(problem, dialect)
    src = alg.render(cfg, dialect)
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = os.path.join(tmp, "k.cu"), os.path.join(tmp, "k.cubin")
        open(cu, "w").write(src)
        proc = subprocess.run(["nvcc", "-cubin", ARCH, "-Xptxas", "-v", "-o", cubin, cu],
                              capture_output=True, text=True)
        if proc.returncode:
            return f"{algorithm} {m}x{n}x{k}: COMPILE FAILED\n{proc.stderr[-3000:]}"
        log = proc.stderr
        regs = re.search(r"Used (\d+) registers", log)
        spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
        stack = re.search(r"(\d+) bytes stack frame", log)
        line = (f"{algorithm:24s} {m}x{n}x{k} {dtype}: regs {regs.group(1) if regs else '?'}, "
                f"stack {stack.group(1) if stack else '?'}, spills {spill.groups() if spill else '?'}")
        if sass:
            dump = subprocess.run([CUOBJDUMP, "--dump-sass", cubin], capture_output=True, text=True).stdout
            ops = Counter(m.group(1) for m in re.finditer(r"\s((?:LDS|LDG|STS|FFMA|DFMA|BAR|LDL|STL)[.\w]*)\s", dump))
            line += "\n    " + ", ".join(f"{op} {c}" for op, c in sorted(ops.items()))
    return line


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithms", default="simple_unit,double_buffering_unit,specialized,ordered")
    p.add_argument("--sizes", default="4096,4093,1000,1024")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--sass", action="store_true")
    args = p.parse_args(argv)
    for size in map(int, args.sizes.split(",")):
        for name in args.algorithms.split(","):
            print(report(name, size, size, size, args.dtype, sass=args.sass), flush=True)


if __name__ == "__main__":
    main()
