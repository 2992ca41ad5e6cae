"""GEMV bandwidth probe: y = x @ W, x (1, K), W (K, N) row-major, bf16 in, f32 accumulate, bf16 out (CUDA).

Stand-alone (CuPy RawModule, no gemm_engine import): looks for a kernel design that streams W at
>= 3.0 TB/s on an H100, beside cuBLAS (cupy.matmul, torch.matmul) timed the same way in the same run.

Variants (bf16 is handled as ``unsigned short`` bits; no cuda_bf16.h):

* ``ws2k/<ld>``  (a, b) "colthreads": a thread owns 8 consecutive columns (one 16-byte load per K
  row); a block of T threads covers 8*T columns; grid.y = S splits K into S near-equal chunks (whole
  U-row steps); each thread keeps U independent 16-byte loads in flight (K loop unrolled by U),
  reads the U x values with one vector __ldg, accumulates 8 f32 sums and writes them to a f32
  workspace [S, N]; a second kernel sums the S partials of each column in order s = 0..S-1
  (deterministic) and writes bf16. ``<ld>`` is the load of W: ``ldg`` (__ldg), ``na``
  (ld.global.nc.L1::no_allocate.v4.u32), ``na256`` (the same plus the .L2::256B prefetch hint).
* ``last/<ld>``  (c) the same first kernel, but the reduction is done in it: after writing its
  partials a block fences and bumps an atomic counter per column block; the block that arrives
  last sums the S partials (read through L2, __ldcg) in the fixed order s = 0..S-1 (so the result
  does not depend on which block is last) and resets the counter to 0. One launch per call.
* ``read/<ld>``  (d) read ceiling: a grid-stride stream of 16-byte loads over W, U in flight per
  thread, folded into a register and stored only if it hits a magic value (it never does).
* ``copy``  (d) copy ceiling: cupy.copyto of W into a preallocated array (TB/s counts read+write).

R (registers): R = 0 leaves ptxas its default register target (~32 here, it then issues the U loads
near their uses: few in flight); R = 1 adds __launch_bounds__(256, 1) (48..106 registers, all U loads
issued first). Sweep on K = N = 8192: T in {128, 256}, S in {8, 16, 32, 33, 64, 66} (33 / 66: 132 /
264 blocks at T = 256, whole waves on 132 SMs), U in {4, 8, 16}, R in {0, 1}, x 3 loads x 2 modes
(432 variants); reads: 3 loads x R x {2, 4, 8} blocks per SM x U in {4, 8} (T = 256, 36). Then the
best 3 gemv variants and the baselines on K = 4096, N = 14336. TB/s = bytes of W / time.
Timing: 10 warm-up calls, 50 batches of 20 back-to-back calls between two events, median per call
(a variant slower than 0.12 ms in its first batch gets 5 batches). Each gemv output is poisoned (0xFFFF, a NaN) before a checked call and
compared with a float64 reference from the bf16-rounded inputs: max|y - ref| / max|ref| < 2e-2;
``det`` says whether a later call gave the same bits.

    python3 bench/probe_gemv_bandwidth.py [--json FILE]        # the sweep, then the best 3 on 4096 x 14336:
                                                              # its summary refreshes <device>/gemv_bandwidth.md
    python3 bench/probe_gemv_bandwidth.py --dump-sources DIR   # write the CUDA source only (no GPU, no CuPy)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from string import Template

import numpy as np

import current_tables   # bench/'s own helper (no gemm_engine import)

FLAVORS = ("ldg", "na", "na256")
T_SWEEP, S_SWEEP, U_SWEEP, R_SWEEP = (128, 256), (8, 16, 32, 33, 64, 66), (4, 8, 16), (0, 1)
READ_U, READ_PER_SM, READ_T = (4, 8), (2, 4, 8), 256
SHAPES = ((8192, 8192), (4096, 14336))
TOL = 2e-2

PRELUDE = r"""
#define LO(w) __uint_as_float((w) << 16)
#define HI(w) __uint_as_float((w) & 0xffff0000u)
__device__ __forceinline__ unsigned f2bf(float f) {   // round to nearest even, NaN stays NaN
  const unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
__device__ __forceinline__ uint4 ld_ldg(const uint4* p) { return __ldg(p); }
__device__ __forceinline__ uint4 ld_na(const uint4* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
__device__ __forceinline__ uint4 ld_na256(const uint4* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
extern "C" __global__ void reduce_partials(const float* __restrict__ ws, unsigned short* __restrict__ y,
                                           int S, int N) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= N) return;
  float s = 0.f;
  #pragma unroll 8
  for (int i = 0; i < S; ++i) s += ws[(long long)i * N + c];
  y[c] = (unsigned short)f2bf(s);
}
"""

GEMV = Template(r"""
extern "C" __global__ void $LB $NAME(const unsigned short* __restrict__ x, const uint4* __restrict__ W,
    float* __restrict__ ws, unsigned short* __restrict__ y, unsigned int* __restrict__ counters, int K, int N) {
  __shared__ unsigned int s_last;
  const int n8 = N >> 3;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;       // columns 8c .. 8c+7
  const bool active = c < n8;
  const int steps = K / $U;                                   // U-row steps, split over gridDim.y
  const int k0 = (int)((long long)blockIdx.y * steps / gridDim.y) * $U;
  const int k1 = (int)((long long)(blockIdx.y + 1) * steps / gridDim.y) * $U;
  float acc[8];
  #pragma unroll
  for (int j = 0; j < 8; ++j) acc[j] = 0.f;
  const uint4* p = W + (long long)k0 * n8 + (active ? c : n8 - 1);
  const unsigned short* xp = x + k0;
  #pragma unroll 1
  for (int k = k0; k < k1; k += $U, p += (long long)$U * n8, xp += $U) {
    uint4 q[$U];
    #pragma unroll
    for (int u = 0; u < $U; ++u) q[u] = $LD(p + (long long)u * n8);
    unsigned xw[$U / 2];                                      // x[k + 2i] low half, x[k + 2i + 1] high
    $XLOAD
    #pragma unroll
    for (int u = 0; u < $U; ++u) {
      const float xv = (u & 1) ? HI(xw[u >> 1]) : LO(xw[u >> 1]);
      acc[0] = fmaf(xv, LO(q[u].x), acc[0]); acc[1] = fmaf(xv, HI(q[u].x), acc[1]);
      acc[2] = fmaf(xv, LO(q[u].y), acc[2]); acc[3] = fmaf(xv, HI(q[u].y), acc[3]);
      acc[4] = fmaf(xv, LO(q[u].z), acc[4]); acc[5] = fmaf(xv, HI(q[u].z), acc[5]);
      acc[6] = fmaf(xv, LO(q[u].w), acc[6]); acc[7] = fmaf(xv, HI(q[u].w), acc[7]);
    }
  }
  float4* w4 = reinterpret_cast<float4*>(ws) + (long long)blockIdx.y * (N >> 2) + 2 * c;
  if (active) {
    w4[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    w4[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
  }
  if ($LAST) {                                                // last-block-done reduction
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(counters + blockIdx.x, 1u) == gridDim.y - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (active) {
      float s[8];
      #pragma unroll
      for (int j = 0; j < 8; ++j) s[j] = 0.f;
      const float4* r4 = reinterpret_cast<const float4*>(ws) + 2 * c;
      const long long rs = N >> 2;
      #pragma unroll 4
      for (int i = 0; i < (int)gridDim.y; ++i) {
        const float4 a = __ldcg(r4 + i * rs), b = __ldcg(r4 + i * rs + 1);
        s[0] += a.x; s[1] += a.y; s[2] += a.z; s[3] += a.w;
        s[4] += b.x; s[5] += b.y; s[6] += b.z; s[7] += b.w;
      }
      reinterpret_cast<uint4*>(y)[c] = make_uint4(f2bf(s[0]) | (f2bf(s[1]) << 16), f2bf(s[2]) | (f2bf(s[3]) << 16),
                                                  f2bf(s[4]) | (f2bf(s[5]) << 16), f2bf(s[6]) | (f2bf(s[7]) << 16));
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0;
  }
}
""")

READ = Template(r"""
extern "C" __global__ void $LB $NAME(const uint4* __restrict__ W, unsigned long long n, unsigned* __restrict__ sink) {
  unsigned acc = 0;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  #pragma unroll 1
  for (; i + ($U - 1) * stride < n; i += $U * stride) {
    uint4 q[$U];
    #pragma unroll
    for (int u = 0; u < $U; ++u) q[u] = $LD(W + i + u * stride);
    #pragma unroll
    for (int u = 0; u < $U; ++u) acc += q[u].x ^ q[u].y ^ q[u].z ^ q[u].w;
  }
  for (; i < n; i += stride) { const uint4 q = $LD(W + i); acc += q.x ^ q.y ^ q.z ^ q.w; }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
}
""")


def xload(u: int) -> str:
    """Statements loading x[k .. k+U) (aligned to 2U bytes) into the words xw[0 .. U/2)."""
    if u == 4:
        return "{ const uint2 v = __ldg(reinterpret_cast<const uint2*>(xp)); xw[0] = v.x; xw[1] = v.y; }"
    return " ".join(f"{{ const uint4 v = __ldg(reinterpret_cast<const uint4*>(xp) + {g}); xw[{4 * g}] = v.x; "
                    f"xw[{4 * g + 1}] = v.y; xw[{4 * g + 2}] = v.z; xw[{4 * g + 3}] = v.w; }}" for g in range(u // 8))


def gemv_name(flavor, u, last, r):
    return f"gemv_{'last' if last else 'ws'}_{flavor}_u{u}_r{r}"


def bounds(r: int) -> str:
    """R = 0: ptxas's default register target; R = 1: registers for all U loads up front."""
    return "__launch_bounds__(256, 1)" if r else ""


def build_source() -> str:
    parts = [PRELUDE]
    for flavor in FLAVORS:
        for r in R_SWEEP:
            for u in U_SWEEP:
                for last in (0, 1):
                    parts.append(GEMV.substitute(NAME=gemv_name(flavor, u, last, r), U=u, LD=f"ld_{flavor}",
                                                 XLOAD=xload(u), LAST=last, LB=bounds(r)))
            for u in READ_U:
                parts.append(READ.substitute(NAME=f"read_{flavor}_u{u}_r{r}", U=u, LD=f"ld_{flavor}",
                                             LB=bounds(r)))
    return "\n".join(parts)


# -- host side ---------------------------------------------------------------------------------
def to_bf16_bits(a: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)   # finite inputs only
    return ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)


def bits_to_f32(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b).astype(np.uint32) << 16).view(np.float32)


class Problem:
    """Device buffers and the float64 reference for one (K, N)."""

    def __init__(self, cp, K, N, max_s, sms):
        rng = np.random.default_rng(1234)
        self.K, self.N = K, N
        self.xb = to_bf16_bits(rng.standard_normal(K, dtype=np.float32))
        self.Wb = to_bf16_bits(rng.standard_normal((K, N), dtype=np.float32))
        self.ref = bits_to_f32(self.xb).astype(np.float64) @ bits_to_f32(self.Wb).astype(np.float64)
        self.x, self.W = cp.asarray(self.xb), cp.asarray(self.Wb)
        self.W_copy = cp.empty_like(self.W)
        self.ws = cp.empty(max_s * N, dtype=cp.float32)
        self.y = cp.empty(N, dtype=cp.uint16)
        self.counters = cp.zeros(N // 8 // min(T_SWEEP) + 1, dtype=cp.uint32)
        self.sink = cp.zeros(max(READ_PER_SM) * sms, dtype=cp.uint32)
        self.nbytes = self.Wb.nbytes


def rel_err(bits, ref) -> float:
    y = bits_to_f32(np.asarray(bits).reshape(-1)).astype(np.float64)
    err = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
    return err if np.isfinite(err) else float("inf")


def time_calls(cp, fn, warm=10, reps=50, batch=20, slow_ms=0.12):
    """(median ms per call over ``reps`` batches of ``batch`` back-to-back calls, reps). A variant
    slower than ``slow_ms`` per call in its first batch (< ~1.1 TB/s here) gets 5 batches only."""
    for _ in range(warm):
        fn()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    while len(times) < reps:
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / batch)
        if times[0] > slow_ms:
            reps = 5
    return statistics.median(times), len(times)


def spec_params(spec) -> str:
    mode, flavor, T, S, U, R = spec
    return f"T={T} S={S} U={U} R={R}"


def gemv_fn(mod, P, spec):
    """The call of a gemv variant spec = (mode, flavor, T, S, U, R), or None where it does not apply."""
    mode, flavor, T, S, U, R = spec
    if P.K % U or P.N % 8 or S * U > P.K or S > P.ws.size // P.N:
        return None
    gx = (P.N // 8 + T - 1) // T
    kern = mod.get_function(gemv_name(flavor, U, mode == "last", R))
    args = (P.x, P.W, P.ws, P.y, P.counters, np.int32(P.K), np.int32(P.N))
    if mode == "last":
        return lambda: kern((gx, S), (T,), args)
    red, rargs = mod.get_function("reduce_partials"), (P.ws, P.y, np.int32(S), np.int32(P.N))

    def fn():
        kern((gx, S), (T,), args)
        red(((P.N + 255) // 256,), (256,), rargs)
    return fn


def measure(cp, P, name, params, make, read=None, nbytes=None, kind="gemv", spec=None):
    """One table row; any exception is reported in the row, never raised."""
    row = dict(name=name, params=params, kind=kind, shape=f"{P.K}x{P.N}", ms=None, tbps=None,
               check="n/a", err=None, det=None, reps=0, spec=spec)
    try:
        fn = make()
        if fn is None:
            row["check"] = "skip"
            return row
        if read is not None:
            P.y.fill(0xFFFF)   # NaN bits
            P.counters.fill(0)
            bits = read(fn())
            cp.cuda.runtime.deviceSynchronize()
            row["err"] = rel_err(bits, P.ref)
            row["check"] = "OK" if row["err"] < TOL else "FAIL"
        row["ms"], row["reps"] = time_calls(cp, fn)
        row["tbps"] = (nbytes or P.nbytes) / (row["ms"] * 1e-3) / 1e12
        if read is not None:
            row["det"] = bool(np.array_equal(read(fn()), bits))
    except Exception as e:  # noqa: BLE001 -- one failing variant must not stop the probe
        msg = str(e).strip().splitlines()
        row["check"] = f"ERROR {type(e).__name__}: {msg[0][:100] if msg else ''}"
    return row


def baselines(cp, P, torch):
    """cuBLAS through cupy.matmul (ml_dtypes bf16 arrays) and torch.matmul, on the same bits."""
    def make_cupy():
        import ml_dtypes
        bf = np.dtype(ml_dtypes.bfloat16)
        xa, wa = cp.asarray(P.xb.view(bf).reshape(1, P.K)), cp.asarray(P.Wb.view(bf))
        return lambda: cp.matmul(xa, wa)

    def make_torch():
        tx = torch.from_numpy(P.xb.view(np.int16).reshape(1, P.K)).cuda().view(torch.bfloat16)
        tw = torch.from_numpy(P.Wb.view(np.int16)).cuda().view(torch.bfloat16)
        return lambda: torch.matmul(tx, tw)

    rows = [measure(cp, P, "cupy.matmul", "cuBLAS", make_cupy, kind="baseline",
                    read=lambda r: r.view(cp.uint16).get())]
    if torch is not None:
        rows.append(measure(cp, P, "torch.matmul", f"torch {torch.__version__}", make_torch, kind="baseline",
                            read=lambda r: r.view(torch.int16).cpu().numpy().view(np.uint16)))
    return rows


def fmt(row, ref_ms) -> str:
    ms = f"{row['ms']:8.4f} ms {row['tbps']:6.3f} TB/s x{ref_ms / row['ms']:5.3f}" if row["ms"] else " " * 34
    err = f" err={row['err']:.1e}" if row["err"] is not None else ""
    det = "" if row["det"] is None else (" det" if row["det"] else " NONDET")
    return f"{row['shape']:<10} {row['name']:<11} {row['params']:<22} {ms} {row['check']}{err}{det}"


def report(rows, title, lines=None):
    """Print the rows slowest first (errors on top, best last), and add them to ``lines`` when
    given; set each row's ratio to cuBLAS."""
    ok_base = [r["ms"] for r in rows if r["kind"] == "baseline" and r["ms"] and r["check"] == "OK"]
    ref_ms = ok_base[0] if ok_base else float("nan")   # cupy.matmul if it ran, else torch.matmul
    for r in rows:
        r["ratio_cublas"] = ref_ms / r["ms"] if r["ms"] and ok_base else None
    out = [f"== {title} (ratio: cuBLAS ms / ms, cuBLAS = {ref_ms:.4f} ms)"]
    out += [fmt(r, ref_ms) for r in sorted(rows, key=lambda r: -(r["ms"] or 1e9))]
    print("\n" + "\n".join(out))
    if lines is not None:
        lines += out
    return ref_ms


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump-sources", metavar="DIR", help="write the CUDA source to DIR and exit")
    ap.add_argument("--json", metavar="FILE", help="write every row here")
    current_tables.add_arguments(ap, "gemv_bandwidth")
    args = ap.parse_args(argv)
    command = current_tables.command_line("probe_gemv_bandwidth.py", sys.argv[1:] if argv is None else argv)
    src = build_source()
    if args.dump_sources:
        os.makedirs(args.dump_sources, exist_ok=True)
        path = os.path.join(args.dump_sources, "gemv_bandwidth_kernels.cu")
        with open(path, "w") as f:
            f.write(src)
        print(path)
        return 0
    t0 = time.time()
    import cupy as cp
    try:
        import torch
    except Exception:  # noqa: BLE001
        torch = None
    props = cp.cuda.runtime.getDeviceProperties(0)
    device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    sms = int(props["multiProcessorCount"])
    print(f"device: {device}, {sms} SMs, cupy {cp.__version__}, torch {getattr(torch, '__version__', None)}")
    mod = cp.RawModule(code=src, options=("-std=c++17",))
    max_s = max(S_SWEEP)

    K, N = SHAPES[0]
    P = Problem(cp, K, N, max_s, sms)
    print(f"setup {time.time() - t0:.1f} s")
    rows = baselines(cp, P, torch)
    for mode in ("ws2k", "last"):
        for flavor in FLAVORS:
            for spec in ((mode, flavor, T, S, U, R) for R in R_SWEEP for T in T_SWEEP for S in S_SWEEP
                         for U in U_SWEEP):
                rows.append(measure(cp, P, f"{mode}/{flavor}", spec_params(spec), spec=spec,
                                    make=lambda spec=spec: gemv_fn(mod, P, spec), read=lambda _: P.y.get()))
        print(f"{mode} done at {time.time() - t0:.1f} s", flush=True)
    n16 = np.uint64(P.W.size // 8)
    for flavor in FLAVORS:
        for R in R_SWEEP:
            for per_sm in READ_PER_SM:
                for U in READ_U:
                    def make(flavor=flavor, per_sm=per_sm, U=U, R=R):
                        kern = mod.get_function(f"read_{flavor}_u{U}_r{R}")
                        return lambda: kern((per_sm * sms,), (READ_T,), (P.W, n16, P.sink))
                    rows.append(measure(cp, P, f"read/{flavor}", f"T={READ_T} B={per_sm}*SMs U={U} R={R}",
                                        make, kind="ceiling"))
    rows.append(measure(cp, P, "copy", "cupy.copyto (r+w)", lambda: (lambda: cp.copyto(P.W_copy, P.W)),
                        nbytes=2 * P.nbytes, kind="ceiling"))
    ref_ms = report(rows, f"K={K} N={N} on {device}")

    good = sorted((r for r in rows if r["kind"] == "gemv" and r["ms"] and r["check"] == "OK"),
                  key=lambda r: r["ms"])
    ceilings = sorted((r for r in rows if r["kind"] == "ceiling" and r["ms"]), key=lambda r: r["ms"])
    summary = [f"== K={K} N={N}: best 8 gemv variants, baselines, best 3 ceilings (ratio: cuBLAS ms / ms)"]
    summary += [fmt(r, ref_ms) for r in good[:8] + [r for r in rows if r["kind"] == "baseline"] + ceilings[:3]]
    bad = [r for r in rows if r["check"] not in ("OK", "n/a", "skip")]
    summary.append(f"{len(good)} gemv variants OK, {len(bad)} failed/errored"
                   + (f" (first: {bad[0]['name']} {bad[0]['params']}: {bad[0]['check']})" if bad else ""))
    print("\n" + "\n".join(summary))

    # the best 3 on an LLM projection shape
    best = [r["spec"] for r in good[:3]]
    del P
    cp.get_default_memory_pool().free_all_blocks()
    K, N = SHAPES[1]
    P = Problem(cp, K, N, max_s, sms)
    rows2 = baselines(cp, P, torch)
    for spec in best:
        rows2.append(measure(cp, P, f"{spec[0]}/{spec[1]}", spec_params(spec), spec=spec,
                             make=lambda spec=spec: gemv_fn(mod, P, spec), read=lambda _: P.y.get()))
    summary.append("")
    report(rows2, f"K={K} N={N}: the best 3 beside cuBLAS", summary)
    elapsed = time.time() - t0
    print(f"\nelapsed {elapsed:.1f} s (wall, including compilation and the host reference)")
    current_tables.write(args, device, "the GEMV read bandwidth probe (bench/probe_gemv_bandwidth.py)", command,
                         f"{len(rows) + len(rows2)} designs and ceilings measured; the summary:\n\n```\n"
                         + "\n".join(summary) + "\n```\n")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "sms": sms, "elapsed_s": elapsed, "rows": rows + rows2}, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
