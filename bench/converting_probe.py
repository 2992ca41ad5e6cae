"""Probe of ``quantized_specialized_wgmma`` (issue 31, session 16): its checks against float64
(``python3 bench/converting_probe.py edges,int8,...``: the CASES labels) and its times, in its
default tiling and the dense kernel's 128 x 256, beside the engine's default choice and cuBLAS bf16 in CUDA-graph
replay (``python3 bench/converting_probe.py time``; int4 group 128 asymmetric, prepacked, bf16 x). Rows print as JSON and go to $OUT/qs.json.
Run a case a process (a hang is then one timeout, not the rest): bench/SELECTION_NOTES.md,
"Converted in shared memory"."""
import json, os, sys, time, traceback
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np, torch
import gemm_engine
from common import replayed
from gemm_engine.algorithms import REGISTRY
OUT = os.environ.get("OUT", "/tmp")
eng = gemm_engine.Engine("cuda", background_compile=False)
res = {"checks": [], "times": []}
ALG = "quantized_specialized_wgmma"

def rel(y, ref):
    y = y.double()
    if torch.isnan(y).any(): return float("nan")
    return float((y - ref).norm() / ref.norm())

def make(fmt, k, n, group, sym, sdt, seed=0):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    q = gemm_engine.quantize(w, fmt, group, symmetric=sym, scale_dtype=sdt)
    return q.prepack(), torch.from_numpy(q.dequantize()).cuda().double(), q

def check(label, fmt, m, n, k, group, sym, sdt, xdt, knobs=None, bias=False):
    r = dict(label=label, fmt=fmt, m=m, n=n, k=k, group=group, sym=sym, sdt=sdt, xdt=str(xdt), knobs=knobs)
    try:
        qp, deq, _ = make(fmt, k, n, group, sym, sdt)
        x = (torch.randn(m, k, device="cuda") * 0.5).to(xdt)
        b = (torch.randn(n, device="cuda")).to(xdt) if bias else None
        ref = x.double() @ deq + (b.double() if bias else 0)
        alg = REGISTRY[ALG](**(knobs or {}))
        for rep in range(2):
            out = torch.full((m, n), float("nan"), device="cuda", dtype=xdt)
            eng.quantized_matmul(x, qp, out=out, bias=b, algorithm=alg)
            torch.cuda.synchronize()
            r[f"err{rep}"] = rel(out, ref)
    except Exception as e:
        r["failed"] = f"{type(e).__name__}: {e}"[:400]
    res["checks"].append(r); print(json.dumps(r), flush=True)

bf, hf = torch.bfloat16, torch.float16
CASES = {
 "m200": ("int4", 200, 4096, 4096, 128, False, "bfloat16", bf),
 "n4100": ("int4", 256, 4100, 4096, 128, False, "bfloat16", bf),
 "k4104": ("int4", 256, 4096, 4104, 128, False, "bfloat16", bf),
 "n4160": ("int4", 130, 4160, 1024, 64, True, "bfloat16", bf),
 "g32f16": ("int4", 300, 1024, 2048, 32, True, "float16", hf),
 "f16xbf": ("int4", 256, 2048, 2048, 128, False, "bfloat16", hf),
 "perchan": ("int4", 256, 2048, 1024, None, True, "bfloat16", bf),
 "int8": ("int8", 256, 4096, 4096, None, True, "bfloat16", bf),
 "fp8": ("fp8_e4m3", 256, 4096, 4096, None, True, "bfloat16", bf),
 "smallk": ("int4", 512, 1024, 64, 64, False, "bfloat16", bf),
 "nosplit": ("int4", 1024, 4096, 4096, 128, False, "bfloat16", bf, dict(split_tail=0)),
 "edges": ("int4", 200, 4100, 4104, 128, False, "bfloat16", bf),
 "w_edges": ("int4", 300, 4100, 4104, 128, False, "bfloat16", bf, dict(warpgroups_m=2, partition_m=2, tile_n=128,
                                                                       stages=4, tma_store=False, split_tail=0)),
 "w_int8": ("int8", 333, 3000, 1500, 64, True, "float16", hf, dict(warpgroups_m=2, partition_m=2, tile_n=128,
                                                                   stages=3, store_parts=2, split_tail=0)),
}
mode = sys.argv[1]
if mode != "time":
    for label in mode.split(","):
        check(label, *CASES[label])
    sys.exit(0)
# timing: the default tiling and the dense kernel's 128 x 256 refitted
VARIANTS = (("default", {}), ("128x256", dict(warpgroups_m=2, partition_m=1, tile_n=256, stages=3, store_parts=2)))
for fmt, shape, ms in (("int4", "14336x4096", (256, 1024, 4096)), ("int4", "4096x4096", (1024, 4096)),
                       ("int4", "4096x14336", (1024, 4096)), ("int8", "14336x4096", (1024,))):
    n, k = map(int, shape.split("x"))
    qp, deq, q = make(fmt, k, n, 128 if fmt == "int4" else None, fmt != "int4", "bfloat16")
    w_nk = deq.t().contiguous().to(bf)
    for m in ms:
        x = (torch.randn(m, k, device="cuda") * 0.5).to(bf)
        ref = x.double() @ deq
        row = dict(fmt=fmt, shape=shape, m=m)
        row["auto_us"] = replayed(torch, lambda: eng.quantized_matmul(x, qp)) * 1e6
        row["cublas_us"] = replayed(torch, lambda: torch.nn.functional.linear(x, w_nk)) * 1e6
        for label, knobs in VARIANTS:
            try:
                alg = REGISTRY[ALG](**knobs)
                y = eng.quantized_matmul(x, qp, algorithm=alg)
                row[label + "_err"] = rel(y, ref)
                row[label + "_us"] = replayed(torch, lambda: eng.quantized_matmul(x, qp, algorithm=alg)) * 1e6
            except Exception as e:  # noqa: BLE001 -- a refused variant is reported
                row[label] = f"{type(e).__name__}: {e}"[:200]
        res["times"].append(row)
        print(json.dumps(row), flush=True)
        json.dump(res, open(f"{OUT}/qs.json", "w"), indent=1)
