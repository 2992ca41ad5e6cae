"""One-thread CUDA kernels that raise a 32-bit flag in (another GPU's) memory after their stream's
earlier work, and hold their stream until a flag reaches a value or stop the context with a message
once a timeout passes: distributed/peer.py's signals that a block has landed.

Why kernels and not the stream front end's ``cuStreamWriteValue32`` / ``cuStreamWaitValue32``
(which need no SM): measured on 2 H100s, a flag the front end wrote over NVLink reached the peer
~300 us late (a ping-pong of flags: 604 us a round trip, 31 us with these kernels), and a front-end
wait found unmet looked again only at the channel scheduler's next turn, about a millisecond later.
A thread polling with acquire loads sees the write within a microsecond, and can give up with a
clear message.
"""
from __future__ import annotations

NAME = "gemm_engine_wait_flag"
RAISE_NAME = "gemm_engine_raise_flag"

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

// The stream's earlier writes (a GEMM's, a copy's) are complete when this kernel starts (stream
// order); the release store publishes the flag to every GPU. (The system-scope fence before it is
// the version measured correct on 2 and 4 H100s; the release store alone may suffice.)
extern "C" __global__ void gemm_engine_raise_flag(unsigned long long flag, long long value) {
    asm volatile("fence.sc.sys;" ::: "memory");
    asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(flag), "r"((unsigned int)value) : "memory");
}
"""
