/* gemm_engine: pipelined_wgmma (gemm_engine.algorithms.wgmma.PipelinedWgmmaAlgorithm) */
/* build: nvcc -cubin -gencode=arch=compute_90a,code=sm_90a kernel.cu (wgmma / setmaxnreg: the arch-specific target;
   plain -arch=sm_90 rejects them); NVRTC: --gpu-architecture=sm_90a --std=c++17 */
#define KERNEL extern "C" __global__
#define LAUNCH_BOUNDS(n) __launch_bounds__(n)
#define LAUNCH_BOUNDS_MIN(n, c) __launch_bounds__(n, c)
#define GLOBAL
#define LOCAL __shared__
#define RESTRICT __restrict__
#define INLINE static __device__ __forceinline__
#define UNIT_ID ((int)threadIdx.x)
#define CUBE_ID ((i64)blockIdx.x)
#define CUBE_COUNT ((i64)gridDim.x)
#define SYNC_CUBE() __syncthreads()
#define SYNC_PLANE() __syncwarp()
#define ALIGN16 __attribute__((aligned(16)))
#define FLOAT_AS_UINT(x) __float_as_uint(x)
#define UINT_AS_FLOAT(x) __uint_as_float(x)
typedef long long i64;
typedef unsigned long long u64;
INLINE float bf16_to_f32(unsigned short bits) { return UINT_AS_FLOAT(((unsigned int)bits) << 16); }
INLINE unsigned short f32_to_bf16(float value) {
    unsigned int u = FLOAT_AS_UINT(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest, ties to even */
    return (unsigned short)(u >> 16);
}
INLINE void ptx_wgmma_wait_1() {
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}
INLINE void ptx_wgmma_wait_0() {
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
INLINE void ptx_pin_f32_64(float* r) {
    #pragma unroll
    for (int i = 0; i < 64; ++i)
        asm volatile("" : "+f"(r[i]) :: "memory");
}
INLINE void ptx_fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
INLINE void ptx_cp_async_cg_16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}
INLINE void ptx_cp_async_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}
INLINE void ptx_cp_async_wait_1() {
    asm volatile("cp.async.wait_group 1;" ::: "memory");
}
INLINE void ptx_wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
INLINE void ptx_wgmma_m64n128k16_f32_bf16_t01(float* acc, unsigned long long desc_a, unsigned long long desc_b) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
        "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "
        "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "
        "%59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 1;\n"
        "}\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]),
          "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]),
          "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]),
          "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]),
          "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]),
          "+f"(acc[30]), "+f"(acc[31]), "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]),
          "+f"(acc[36]), "+f"(acc[37]), "+f"(acc[38]), "+f"(acc[39]), "+f"(acc[40]), "+f"(acc[41]),
          "+f"(acc[42]), "+f"(acc[43]), "+f"(acc[44]), "+f"(acc[45]), "+f"(acc[46]), "+f"(acc[47]),
          "+f"(acc[48]), "+f"(acc[49]), "+f"(acc[50]), "+f"(acc[51]), "+f"(acc[52]), "+f"(acc[53]),
          "+f"(acc[54]), "+f"(acc[55]), "+f"(acc[56]), "+f"(acc[57]), "+f"(acc[58]), "+f"(acc[59]),
          "+f"(acc[60]), "+f"(acc[61]), "+f"(acc[62]), "+f"(acc[63])
        : "l"(desc_a), "l"(desc_b), "r"(1));
}
INLINE void ptx_wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
INLINE unsigned ptx_cvt_rn_bf16x2(float hi, float lo) {
    unsigned p;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(hi), "f"(lo));
    return p;
}
KERNEL LAUNCH_BOUNDS(256) void gemm_engine_kernel(
    const GLOBAL unsigned short* RESTRICT lhs_base,
    i64 lhs_offset,
    i64 lhs_ld,
    i64 lhs_batch_stride,
    const GLOBAL unsigned short* RESTRICT rhs_base,
    i64 rhs_offset,
    i64 rhs_ld,
    i64 rhs_batch_stride,
    GLOBAL unsigned short* RESTRICT out_base,
    i64 out_offset,
    i64 out_ld,
    i64 out_batch_stride,
    i64 M,
    i64 N,
    i64 K,
    i64 batch)
{
    /* == batch: KMajorBatchMatmul 'k_major_batch': persistent_cubes=0 | dispatch row_major == */
    extern __shared__ __align__(16) unsigned char gemm_ring[];
    const unsigned ring_base = (((unsigned)__cvta_generic_to_shared(gemm_ring)) + 1023u) & ~1023u;
    const unsigned lhs_ring = ring_base;
    const unsigned rhs_ring = ring_base + 131072u;
    const u64 lhs_desc0 = ((u64)1073741888u << 32 | 65536u) | (u64)(((lhs_ring) >> 4) & 0x3FFFu);
    const u64 rhs_desc0 = ((u64)1073741888u << 32 | 33554432u) | (u64)(((rhs_ring) >> 4) & 0x3FFFu);
    const i64 cube = CUBE_ID;
    const i64 cubes_m = (M + 255) / 256;
    const i64 cubes_n = (N + 127) / 128;
    const i64 dispatch_per_batch = cubes_m * cubes_n;
    const i64 b = cube / dispatch_per_batch;
    const i64 cube_row = (cube % dispatch_per_batch) / cubes_n;
    const i64 cube_col = (cube % dispatch_per_batch) % cubes_n;
    const GLOBAL unsigned short* lhs = lhs_base + lhs_offset + b * lhs_batch_stride;
    const GLOBAL unsigned short* rhs = rhs_base + rhs_offset + b * rhs_batch_stride;
    GLOBAL unsigned short* out = out_base + out_offset + b * out_batch_stride;
    const i64 cube_m0 = cube_row * 256;
    const i64 cube_n0 = cube_col * 128;
    /* == global: WgmmaPipelinedGlobalMatmul 'wgmma_pipelined_global': check_m=0 check_n=0 check_k=0 stages=4
       carry_fragments=0 pending=1 align_slack=1024 | lhs SwizzledChunkLoader rhs SwizzledChunkLoader writer
       StagedWriter == */
    /* == stage: WarpgroupPartitionedStage 'warpgroup_partitioned_stage': stage_m=256 stage_n=128 stage_k=64 units=256
       lhs_ld=64 rhs_ld=64 lhs_k_contiguous=1 rhs_k_contiguous=0 warpgroups_m=2 warpgroups_n=1 partition_m=2 | tile
       WgmmaTile: tile_m=64 tile_n=128 tile_k=16 compute=f32 smem=bf16_bits rhs_smem= smem_pad=0 plane=32 kind=bf16
       rhs_kind= lhs_mn_major=0 rhs_mn_major=1 == */
    const int lane = UNIT_ID & 31;
    const int wg_warp = (UNIT_ID >> 5) & 3;
    const int wg_index = __shfl_sync(0xffffffffu, ((UNIT_ID % 256) / 128), 0);
    const int wg_m0 = (wg_index / 1) * 128;
    const int wg_n0 = (wg_index % 1) * 128;
    const u64 wg_lhs_desc = (u64)(((wg_m0) * 128 + 0) >> 4);
    const u64 wg_rhs_desc = (u64)((((wg_n0) / 64) * 8192 + 0) >> 4);
    float acc_0[64];
    float acc_1[64];
    #pragma unroll
    for (int r = 0; r < 64; ++r) acc_0[r] = 0.0f;
    #pragma unroll
    for (int r = 0; r < 64; ++r) acc_1[r] = 0.0f;
    const int lhs_sw_line0 = UNIT_ID / 8;
    const int lhs_sw_cc = UNIT_ID % 8;
    const GLOBAL unsigned short* lhs_sw_src = lhs + (cube_m0 + lhs_sw_line0) * lhs_ld + (0 + lhs_sw_cc * 8);
    const unsigned lhs_sw_dst = (unsigned)((lhs_sw_cc >> 3) * 32768 + (lhs_sw_line0) * 128
            + ((((lhs_sw_cc) & 7) ^ ((lhs_sw_line0) & 7)) << 4));
    const int rhs_sw_line0 = UNIT_ID / 16;
    const int rhs_sw_cc = UNIT_ID % 16;
    const GLOBAL unsigned short* rhs_sw_src = rhs + (0 + rhs_sw_line0) * rhs_ld + (cube_n0 + rhs_sw_cc * 8);
    const unsigned rhs_sw_dst = (unsigned)((rhs_sw_cc >> 3) * 8192 + (rhs_sw_line0) * 128
            + ((((rhs_sw_cc) & 7) ^ ((rhs_sw_line0) & 7)) << 4));
    const int k_steps = (int)((K + 63) / 64);
    #pragma unroll
    for (int pre = 0; pre < 2; ++pre) {
        if (pre < k_steps) {
            const i64 k0 = (i64)pre * 64;
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 0 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (pre) * 32768u) + lhs_sw_dst + 0 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 32 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (pre) * 32768u) + lhs_sw_dst + 4096 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 64 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (pre) * 32768u) + lhs_sw_dst + 8192 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 96 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (pre) * 32768u) + lhs_sw_dst + 12288 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 128 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (pre) * 32768u) + lhs_sw_dst + 16384 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 160 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (pre) * 32768u) + lhs_sw_dst + 20480 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 192 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (pre) * 32768u) + lhs_sw_dst + 24576 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 224 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (pre) * 32768u) + lhs_sw_dst + 28672 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(rhs_sw_src + 0 * rhs_ld);
                ptx_cp_async_cg_16((rhs_ring + (pre) * 16384u) + rhs_sw_dst + 0 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(rhs_sw_src + 16 * rhs_ld);
                ptx_cp_async_cg_16((rhs_ring + (pre) * 16384u) + rhs_sw_dst + 2048 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(rhs_sw_src + 32 * rhs_ld);
                ptx_cp_async_cg_16((rhs_ring + (pre) * 16384u) + rhs_sw_dst + 4096 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(rhs_sw_src + 48 * rhs_ld);
                ptx_cp_async_cg_16((rhs_ring + (pre) * 16384u) + rhs_sw_dst + 6144 + 0, gsrc + 0);
            }
            lhs_sw_src += 64;
            rhs_sw_src += 64 * rhs_ld;
        }
        ptx_cp_async_commit();
    }
    int cur_slot = 0, load_slot = 2;
    for (int step = 0; step < k_steps; ++step) {
        ptx_cp_async_wait_1();
        ptx_fence_proxy_async();
        SYNC_CUBE();
        const bool more = step + 2 < k_steps;
        if (more) {
            const i64 k0 = (i64)(step + 2) * 64;
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 0 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (load_slot) * 32768u) + lhs_sw_dst + 0 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 32 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (load_slot) * 32768u) + lhs_sw_dst + 4096 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 64 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (load_slot) * 32768u) + lhs_sw_dst + 8192 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 96 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (load_slot) * 32768u) + lhs_sw_dst + 12288 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 128 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (load_slot) * 32768u) + lhs_sw_dst + 16384 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 160 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (load_slot) * 32768u) + lhs_sw_dst + 20480 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 192 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (load_slot) * 32768u) + lhs_sw_dst + 24576 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(lhs_sw_src + 224 * lhs_ld);
                ptx_cp_async_cg_16((lhs_ring + (load_slot) * 32768u) + lhs_sw_dst + 28672 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(rhs_sw_src + 0 * rhs_ld);
                ptx_cp_async_cg_16((rhs_ring + (load_slot) * 16384u) + rhs_sw_dst + 0 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(rhs_sw_src + 16 * rhs_ld);
                ptx_cp_async_cg_16((rhs_ring + (load_slot) * 16384u) + rhs_sw_dst + 2048 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(rhs_sw_src + 32 * rhs_ld);
                ptx_cp_async_cg_16((rhs_ring + (load_slot) * 16384u) + rhs_sw_dst + 4096 + 0, gsrc + 0);
            }
            {
                const GLOBAL char* gsrc = (const GLOBAL char*)(rhs_sw_src + 48 * rhs_ld);
                ptx_cp_async_cg_16((rhs_ring + (load_slot) * 16384u) + rhs_sw_dst + 6144 + 0, gsrc + 0);
            }
            lhs_sw_src += 64;
            rhs_sw_src += 64 * rhs_ld;
        }
        ptx_cp_async_commit();
        ptx_wgmma_fence();
        ptx_wgmma_m64n128k16_f32_bf16_t01(acc_0, ((lhs_desc0 + (u64)(cur_slot * 2048)) + wg_lhs_desc + 0),
                ((rhs_desc0 + (u64)(cur_slot * 1024)) + wg_rhs_desc + 0));
        ptx_wgmma_m64n128k16_f32_bf16_t01(acc_1, ((lhs_desc0 + (u64)(cur_slot * 2048)) + wg_lhs_desc + 512),
                ((rhs_desc0 + (u64)(cur_slot * 1024)) + wg_rhs_desc + 0));
        ptx_wgmma_m64n128k16_f32_bf16_t01(acc_0, ((lhs_desc0 + (u64)(cur_slot * 2048)) + wg_lhs_desc + 2),
                ((rhs_desc0 + (u64)(cur_slot * 1024)) + wg_rhs_desc + 128));
        ptx_wgmma_m64n128k16_f32_bf16_t01(acc_1, ((lhs_desc0 + (u64)(cur_slot * 2048)) + wg_lhs_desc + 514),
                ((rhs_desc0 + (u64)(cur_slot * 1024)) + wg_rhs_desc + 128));
        ptx_wgmma_m64n128k16_f32_bf16_t01(acc_0, ((lhs_desc0 + (u64)(cur_slot * 2048)) + wg_lhs_desc + 4),
                ((rhs_desc0 + (u64)(cur_slot * 1024)) + wg_rhs_desc + 256));
        ptx_wgmma_m64n128k16_f32_bf16_t01(acc_1, ((lhs_desc0 + (u64)(cur_slot * 2048)) + wg_lhs_desc + 516),
                ((rhs_desc0 + (u64)(cur_slot * 1024)) + wg_rhs_desc + 256));
        ptx_wgmma_m64n128k16_f32_bf16_t01(acc_0, ((lhs_desc0 + (u64)(cur_slot * 2048)) + wg_lhs_desc + 6),
                ((rhs_desc0 + (u64)(cur_slot * 1024)) + wg_rhs_desc + 384));
        ptx_wgmma_m64n128k16_f32_bf16_t01(acc_1, ((lhs_desc0 + (u64)(cur_slot * 2048)) + wg_lhs_desc + 518),
                ((rhs_desc0 + (u64)(cur_slot * 1024)) + wg_rhs_desc + 384));
        ptx_wgmma_commit();
        ptx_wgmma_wait_1();
        cur_slot = cur_slot + 1 == 4 ? 0 : cur_slot + 1;
        load_slot = load_slot + 1 == 4 ? 0 : load_slot + 1;
    }
    ptx_wgmma_wait_0();
    ptx_pin_f32_64(acc_0);
    ptx_pin_f32_64(acc_1);
    const bool out_pairs = ((((u64)out) | (u64)(out_ld * 2)) & 3) == 0;
    if (out_pairs) {
        #pragma unroll
        for (int i = 0; i < 16; ++i) {
            *(GLOBAL unsigned*)(out + (cube_m0 + wg_m0 + 0 + (wg_warp * 16 + (lane >> 2))) * out_ld + cube_n0 + wg_n0
                    + 8 * i + ((lane & 3) << 1)) = ptx_cvt_rn_bf16x2(acc_0[4 * i + 1], acc_0[4 * i]);
            *(GLOBAL unsigned*)(out + (cube_m0 + wg_m0 + 0 + (wg_warp * 16 + (lane >> 2)) + 8) * out_ld + cube_n0
                    + wg_n0 + 8 * i + ((lane & 3) << 1)) = ptx_cvt_rn_bf16x2(acc_0[4 * i + 3], acc_0[4 * i + 2]);
        }
        #pragma unroll
        for (int i = 0; i < 16; ++i) {
            *(GLOBAL unsigned*)(out + (cube_m0 + wg_m0 + 64 + (wg_warp * 16 + (lane >> 2))) * out_ld + cube_n0 + wg_n0
                    + 8 * i + ((lane & 3) << 1)) = ptx_cvt_rn_bf16x2(acc_1[4 * i + 1], acc_1[4 * i]);
            *(GLOBAL unsigned*)(out + (cube_m0 + wg_m0 + 64 + (wg_warp * 16 + (lane >> 2)) + 8) * out_ld + cube_n0
                    + wg_n0 + 8 * i + ((lane & 3) << 1)) = ptx_cvt_rn_bf16x2(acc_1[4 * i + 3], acc_1[4 * i + 2]);
        }
    } else {
        #pragma unroll
        for (int i = 0; i < 16; ++i) {
            out[(cube_m0 + wg_m0 + 0 + (wg_warp * 16 + (lane >> 2))) * out_ld + cube_n0 + wg_n0 + 8 * i
                    + ((lane & 3) << 1)] = f32_to_bf16(acc_0[4 * i]);
            out[(cube_m0 + wg_m0 + 0 + (wg_warp * 16 + (lane >> 2))) * out_ld + cube_n0 + wg_n0 + 8 * i
                    + ((lane & 3) << 1) + 1] = f32_to_bf16(acc_0[4 * i + 1]);
            out[(cube_m0 + wg_m0 + 0 + (wg_warp * 16 + (lane >> 2)) + 8) * out_ld + cube_n0 + wg_n0 + 8 * i
                    + ((lane & 3) << 1)] = f32_to_bf16(acc_0[4 * i + 2]);
            out[(cube_m0 + wg_m0 + 0 + (wg_warp * 16 + (lane >> 2)) + 8) * out_ld + cube_n0 + wg_n0 + 8 * i
                    + ((lane & 3) << 1) + 1] = f32_to_bf16(acc_0[4 * i + 3]);
        }
        #pragma unroll
        for (int i = 0; i < 16; ++i) {
            out[(cube_m0 + wg_m0 + 64 + (wg_warp * 16 + (lane >> 2))) * out_ld + cube_n0 + wg_n0 + 8 * i
                    + ((lane & 3) << 1)] = f32_to_bf16(acc_1[4 * i]);
            out[(cube_m0 + wg_m0 + 64 + (wg_warp * 16 + (lane >> 2))) * out_ld + cube_n0 + wg_n0 + 8 * i
                    + ((lane & 3) << 1) + 1] = f32_to_bf16(acc_1[4 * i + 1]);
            out[(cube_m0 + wg_m0 + 64 + (wg_warp * 16 + (lane >> 2)) + 8) * out_ld + cube_n0 + wg_n0 + 8 * i
                    + ((lane & 3) << 1)] = f32_to_bf16(acc_1[4 * i + 2]);
            out[(cube_m0 + wg_m0 + 64 + (wg_warp * 16 + (lane >> 2)) + 8) * out_ld + cube_n0 + wg_n0 + 8 * i
                    + ((lane & 3) << 1) + 1] = f32_to_bf16(acc_1[4 * i + 3]);
        }
    }
}