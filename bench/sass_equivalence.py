"""Did a change to the templates' layout change the machine code? Registers, spills and SASS of the main
kernels, saved per run and compared between two runs (no GPU needed: nvcc, ptxas and cuobjdump).

    python3 bench/sass_equivalence.py --out /tmp/after                      # this checkout
    PYTHONPATH=/tmp/base python3 bench/sass_equivalence.py --root /tmp/base --out /tmp/before
    python3 bench/sass_equivalence.py --compare /tmp/before /tmp/after

Each kernel is rendered by `gemm_engine.source`, compiled with ``nvcc -cubin -Xptxas -v`` for its
architecture (sm_90a for the sm_90 sources, sm_80 for the sm_80 ones), and disassembled with
``cuobjdump -sass`` (CUOBJDUMP names another copy: without a CUDA toolkit's, ``pip install --target
DIR nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`` and set CUOBJDUMP and NVDISASM_PATH to their bin/). A run
writes ``<name>.cu``, ``<name>.sass`` (instructions without addresses or encodings) and
``summary.json``; ``--compare`` prints one row per kernel: registers, spill bytes, stack, SASS
instruction count before and after, and whether the instruction sequences are identical.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

CUOBJDUMP = os.environ.get("CUOBJDUMP", "cuobjdump")
_ARCH = {"sm_90": "-gencode=arch=compute_90a,code=sm_90a", "sm_80": "-gencode=arch=compute_80,code=sm_80"}

#: name -> (algorithm, source keywords, arch); an algorithm "name(knob=value)" overrides selection knobs
KERNELS = {
    "specialized_wgmma_bf16_split_tail": ("specialized_wgmma(split_tail=2)", dict(dtype="bfloat16"), "sm_90"),
    "specialized_wgmma_bf16": ("specialized_wgmma", dict(dtype="bfloat16"), "sm_90"),
    "specialized_wgmma_f16": ("specialized_wgmma", dict(dtype="float16"), "sm_90"),
    "specialized_wgmma_fp8": ("specialized_wgmma", dict(dtype="float8_e4m3fn"), "sm_90"),
    "pipelined_wgmma_bf16": ("pipelined_wgmma", dict(dtype="bfloat16"), "sm_90"),
    "pipelined_mma_f16_sm80": ("pipelined_mma", dict(dtype="float16"), "sm_80"),
    "pipelined_mma_f16_rowcol_sm80": ("pipelined_mma", dict(dtype="float16", layouts=("row", "col")), "sm_80"),
    "simple_unit_f32": ("simple_unit", dict(dtype="float32"), "sm_90"),
    "double_buffering_unit_f32_sm80": ("double_buffering_unit", dict(dtype="float32", m=256, n=256, k=256), "sm_80"),
    "skinny_split_k_bf16": ("skinny_split_k", dict(dtype="bfloat16", m=1, n=8192, k=8192), "sm_90"),
    "split_k_f32": ("split_k", dict(dtype="float32", m=64, n=64, k=65536), "sm_90"),
    "specialized_f32": ("specialized", dict(dtype="float32"), "sm_90"),
    "ordered_f32": ("ordered", dict(dtype="float32"), "sm_90"),
}


def _functions(sass: str) -> dict[str, list[str]]:
    """Instructions per function of a ``cuobjdump -sass`` listing, without addresses and encodings."""
    out: dict[str, list[str]] = {}
    current = None
    for line in sass.splitlines():
        head = re.match(r"\s*Function : (\S+)", line)
        if head:
            current = out.setdefault(head.group(1), [])
            continue
        ins = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if ins and current is not None:
            current.append(ins.group(1))
    return out


def run(out_dir: str, names) -> None:
    import gemm_engine   # the checkout on sys.path (--root)
    import gemm_engine.algorithms
    os.makedirs(out_dir, exist_ok=True)
    summary = {}
    for name in names:
        algorithm, kwargs, arch = KERNELS[name]
        kwargs = {"m": 4096, "n": 4096, "k": 4096, **kwargs}
        if "(" in algorithm:
            base, knobs = algorithm.rstrip(")").split("(")
            alg = type(gemm_engine.algorithms.resolve(base))(
                **{k: int(v) for k, v in (kv.split("=") for kv in knobs.split(","))})
        else:
            alg = algorithm
        src = gemm_engine.source(alg, arch=arch, **kwargs)
        with open(os.path.join(out_dir, f"{name}.cu"), "w") as f:
            f.write(src)
        with tempfile.TemporaryDirectory() as tmp:
            cu, cubin = os.path.join(tmp, "k.cu"), os.path.join(tmp, "k.cubin")
            with open(cu, "w") as f:
                f.write(src)
            proc = subprocess.run(["nvcc", "-cubin", _ARCH[arch], "-Xptxas", "-v", "-o", cubin, cu],
                                  capture_output=True, text=True)
            if proc.returncode:
                summary[name] = {"error": proc.stderr[-2000:]}
                print(f"{name}: COMPILE FAILED\n{proc.stderr[-2000:]}", flush=True)
                continue
            dump = subprocess.run([CUOBJDUMP, "-sass", cubin], capture_output=True, text=True, check=True).stdout
        log = proc.stderr
        entries = {}
        for fn, body in _functions(dump).items():
            block = log.split(f"Compiling entry function '{fn}'")[-1]
            regs = re.search(r"Used (\d+) registers", block)
            spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", block)
            stack = re.search(r"(\d+) bytes stack frame", block)
            entries[fn] = {"registers": int(regs.group(1)) if regs else None,
                           "spill_stores": int(spill.group(1)) if spill else None,
                           "spill_loads": int(spill.group(2)) if spill else None,
                           "stack": int(stack.group(1)) if stack else None,
                           "instructions": len(body)}
        with open(os.path.join(out_dir, f"{name}.sass"), "w") as f:
            for fn, body in _functions(dump).items():
                f.write(f"Function {fn}\n" + "\n".join(body) + "\n")
        summary[name] = {"lines": src.count("\n"), "entries": entries}
        print(name, json.dumps(entries), flush=True)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


def compare(before: str, after: str) -> None:
    a, b = (json.load(open(os.path.join(d, "summary.json"))) for d in (before, after))
    print("| kernel | function | registers | spill st/ld | stack | SASS instructions | SASS identical |")
    print("|---|---|---|---|---|---|---|")
    for name in a:
        if name not in b or "error" in a[name] or "error" in b[name]:
            print(f"| {name} | (missing or failed) | | | | | |")
            continue
        sa, sb = (open(os.path.join(d, f"{name}.sass")).read() for d in (before, after))
        fa, fb = _split(sa), _split(sb)
        for fn, ea in a[name]["entries"].items():
            eb = b[name]["entries"].get(fn, {})

            def pair(key, ea=ea, eb=eb):
                x, y = ea.get(key), eb.get(key)
                return f"{x}" if x == y else f"{x} -> {y}"
            short = fn.replace("gemm_engine_", "")
            print(f"| {name} | {short} | {pair('registers')} | {pair('spill_stores')}/{pair('spill_loads')} | "
                  f"{pair('stack')} | {pair('instructions')} | {'yes' if fa.get(fn) == fb.get(fn) else 'no'} |")


def _split(text: str) -> dict[str, str]:
    parts = re.split(r"^Function (\S+)\n", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."),
                   help="the checkout whose gemm_engine renders the kernels")
    p.add_argument("--out", help="folder for this run's sources, SASS and summary.json")
    p.add_argument("--kernels", default=",".join(KERNELS))
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = p.parse_args(argv)
    if args.compare:
        compare(*args.compare)
        return
    sys.path.insert(0, os.path.abspath(args.root))
    run(args.out, args.kernels.split(","))


if __name__ == "__main__":
    main()
