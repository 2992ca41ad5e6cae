"""A one-thread CUDA kernel that holds its stream until a 32-bit flag in device memory reaches a
value, or stops the context with a message once a timeout passes (distributed/peer.py's waits for a
peer's block).

Why a kernel and not the stream front end's ``cuStreamWaitValue32``: a flag another GPU writes over
NVLink does not wake a front end that found it unset, which then looks again only at the channel
scheduler's next turn, about a millisecond later (measured on 2 H100s: every peer call whose block
was not yet there cost ~1 ms, bench/results/h100/distributed_2gpu.md). A thread polling with
acquire loads sees the write within a microsecond, and can give up with a clear message.
"""
from __future__ import annotations

NAME = "gemm_engine_wait_flag"

#: Parameters are 64-bit (the runtime passes Python ints as int64): the flag's address, the value
#: waited for (cyclic comparison, as the driver's), the timeout in ns and the rank named on timeout.
SOURCE = r"""
#if !defined(__CUDACC_RTC__)
#include <cstdio>          // NVRTC declares printf itself
#endif

extern "C" __global__ void gemm_engine_wait_flag(unsigned long long flag, long long target, long long timeout_ns,
                                                 long long source) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (;;) {
        unsigned int value;
        asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
        if ((int)(value - (unsigned int)target) >= 0) return;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if ((long long)(now - start) > timeout_ns) {
            printf("gemm_engine.distributed: the block of group rank %lld did not arrive within %.1f s "
                   "(a rank late or gone?); stopping this CUDA context\n", source, timeout_ns * 1e-9);
            __trap();
        }
        __nanosleep(64);
    }
}
"""
