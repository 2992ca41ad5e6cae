"""The Triton baseline: a plain blocked matmul kernel, one fixed tiling, no autotuning.

It answers "what does a short Triton kernel reach on this problem", not "what does Triton's best
reach": no split-K, no persistent schedule, and M = 1 rows waste most of a 128-row block. Imported
only where Triton is installed (`baselines.TritonMatmul` checks first).
"""
from __future__ import annotations

import triton
import triton.language as tl

#: Tiling: 128 x 128 outputs per program, K in steps of 32, three stages in flight.
BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 128, 32, 8
NUM_WARPS, NUM_STAGES = 8, 3


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K,
            sab, sam, sak, sbb, sbk, sbn, scb, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr,
            PRECISION: tl.constexpr):
    pid = tl.program_id(0)
    batch = tl.program_id(1)
    # Programs walk GM block rows at a time, so that those running together share rows of A and
    # columns of B in L2.
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GM * tiles_n
    first_m = (pid // per_group) * GM
    rows_here = tl.minimum(tiles_m - first_m, GM)
    pid_m = first_m + (pid % per_group) % rows_here
    pid_n = (pid % per_group) // rows_here

    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + batch * sab + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + batch * sbb + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision=PRECISION)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c_ptrs = c_ptr + batch * scb + rm[:, None] * scm + rn[None, :] * scn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_call(a, b, tf32: bool = False):
    """A callable computing ``a @ b`` (torch CUDA tensors, 2-D or 3-D with one batch axis) with the
    kernel above into a fresh tensor per call. float32 runs exact ("ieee") unless ``tf32``."""
    import torch

    batched = a.dim() == 3
    batch = a.shape[0] if batched else 1
    m, k = a.shape[-2:]
    n = b.shape[-1]
    sa = a.stride() if batched else (0,) + a.stride()
    sb = b.stride() if batched else (0,) + b.stride()
    out_shape = (batch, m, n) if batched else (m, n)
    # input_precision only concerns float32 operands; 16-bit ones take Triton's default ("tf32").
    precision = "ieee" if a.dtype == torch.float32 and not tf32 else "tf32"
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N), batch)

    def run():
        c = torch.empty(out_shape, dtype=a.dtype, device=a.device)
        sc = c.stride() if batched else (0,) + c.stride()
        _matmul[grid](a, b, c, m, n, k, *sa, *sb, *sc, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, GM=GROUP_M,
                      PRECISION=precision, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return c
    return run
