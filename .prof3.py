import cProfile, pstats, torch, gemm_engine, ml_dtypes, os, tempfile, time
os.environ["GEMM_ENGINE_CACHE_DIR"] = tempfile.mkdtemp()
e = gemm_engine.Engine(backend="cuda")
a = torch.randn(4096, 4096, device="cuda").to(torch.float8_e4m3fn)
b = torch.randn(4096, 4096, device="cuda").to(torch.float8_e4m3fn).t()
sa = torch.rand((), device="cuda"); sb = torch.rand((), device="cuda")
for name, kw in {"plain": {}, "scaled bf16": dict(scale_a=sa, scale_b=sb, out_dtype=ml_dtypes.bfloat16),
                 "alpha": dict(alpha=0.5)}.items():
    for _ in range(3): e.matmul(a, b, **kw)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(50): e.matmul(a, b, **kw)
    host = (time.perf_counter() - t) / 50 * 1e6
    torch.cuda.synchronize()
    print(name, "host us/call", round(host), "cached calls", len(e._calls))
    if name == "scaled bf16":
        pr = cProfile.Profile(); pr.enable()
        for _ in range(50): e.matmul(a, b, **kw)
        pr.disable(); torch.cuda.synchronize()
        pstats.Stats(pr).sort_stats("tottime").print_stats(14)
