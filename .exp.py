import torch, gemm_engine, ml_dtypes, os, tempfile
os.environ["GEMM_ENGINE_CACHE_DIR"] = tempfile.mkdtemp()
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.timing import device_time
e = gemm_engine.Engine(backend="cuda")
for n in (4096, 8192):
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    ref = a.double() @ b.double() if n == 4096 else None
    for label, alg in [("promoted 128x128 s6", SpecializedWgmmaAlgorithm(tile_n=128, stages=6)),
                       ("promoted 192x128 s5", SpecializedWgmmaAlgorithm(warpgroups_m=3, tile_n=128, stages=5)),
                       ("promoted 192x128 s4", SpecializedWgmmaAlgorithm(warpgroups_m=3, tile_n=128, stages=4)),
                       ("promoted 128x128 s6 again", SpecializedWgmmaAlgorithm(tile_n=128, stages=6))]:
        f = lambda: e.matmul(a, b, algorithm=alg)
        out = f()
        err = float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)) if ref is not None else float("nan")
        t = device_time(e.runtime, f, repeat=20, warmup=3)
        print(f"{n} {label:30s} {t*1e3:.4f} ms {2*n**3/t/1e12:.0f} TFLOP/s err {err:.2e}", flush=True)
