/* gemm_engine: pipelined_mma (gemm_engine.algorithms.pipelined.PipelinedMmaAlgorithm) */
/* build: nvcc -cubin -gencode=arch=compute_80,code=sm_80 kernel.cu; NVRTC: --gpu-architecture=sm_80 --std=c++17 */
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
INLINE float f16_to_f32(unsigned short bits) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits)); return f;
}
INLINE unsigned short f32_to_f16(float value) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(value)); return h;
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
INLINE void ptx_ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned addr) {
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
        : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
        : "r"(addr));
}
INLINE void ptx_mma_m16n8k16_f32_f16(float* c, const unsigned* a, const unsigned* b) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
INLINE unsigned ptx_cvt_rn_f16x2(float hi, float lo) {
    unsigned p;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(hi), "f"(lo));
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
    /* == batch: PartitionedBatchMatmul 'partitioned_batch': persistent_cubes=0 | dispatch row_major == */
    extern __shared__ __align__(16) unsigned char gemm_ring[];
    unsigned short* lhs_smem = (unsigned short*)gemm_ring;
    unsigned short* rhs_smem = (unsigned short*)(gemm_ring + 55296);
    const i64 cube = CUBE_ID;
    const i64 cubes_m = (M + 127) / 128;
    const i64 cubes_n = (N + 255) / 256;
    const i64 dispatch_per_batch = cubes_m * cubes_n;
    const i64 b = cube / dispatch_per_batch;
    const i64 cube_row = (cube % dispatch_per_batch) / cubes_n;
    const i64 cube_col = (cube % dispatch_per_batch) % cubes_n;
    const GLOBAL unsigned short* lhs = lhs_base + lhs_offset + b * lhs_batch_stride;
    const GLOBAL unsigned short* rhs = rhs_base + rhs_offset + b * rhs_batch_stride;
    GLOBAL unsigned short* out = out_base + out_offset + b * out_batch_stride;
    const i64 cube_m0 = cube_row * 128;
    const i64 cube_n0 = cube_col * 256;
    /* == global: PipelinedGlobalMatmul 'pipelined_global': check_m=0 check_n=0 check_k=0 stages=3 carry_fragments=0 |
       lhs ChunkLoader rhs ChunkLoader writer PairedWriter == */
    /* == stage: PlanePartitionedStage 'plane_partitioned_stage': stage_m=128 stage_n=256 stage_k=64 units=256 lhs_ld=72
       rhs_ld=72 lhs_k_contiguous=1 rhs_k_contiguous=1 planes_m=2 planes_n=4 partition_m=4 partition_n=8 frag... | tile
       MmaTile: tile_m=16 tile_n=8 tile_k=16 compute=f32 smem=f16_bits rhs_smem= smem_pad=0 plane=32 kind=f16 ldmatrix=1
       == */
    const int lane = UNIT_ID & 31;
    const int plane_m0 = ((UNIT_ID / 32) / 4) * 64;
    const int plane_n0 = ((UNIT_ID / 32) % 4) * 64;
    float acc_0_0[4];
    float acc_0_1[4];
    float acc_0_2[4];
    float acc_0_3[4];
    float acc_0_4[4];
    float acc_0_5[4];
    float acc_0_6[4];
    float acc_0_7[4];
    float acc_1_0[4];
    float acc_1_1[4];
    float acc_1_2[4];
    float acc_1_3[4];
    float acc_1_4[4];
    float acc_1_5[4];
    float acc_1_6[4];
    float acc_1_7[4];
    float acc_2_0[4];
    float acc_2_1[4];
    float acc_2_2[4];
    float acc_2_3[4];
    float acc_2_4[4];
    float acc_2_5[4];
    float acc_2_6[4];
    float acc_2_7[4];
    float acc_3_0[4];
    float acc_3_1[4];
    float acc_3_2[4];
    float acc_3_3[4];
    float acc_3_4[4];
    float acc_3_5[4];
    float acc_3_6[4];
    float acc_3_7[4];
    unsigned lhs_frag_0_0[4];
    unsigned lhs_frag_0_1[4];
    unsigned lhs_frag_0_2[4];
    unsigned lhs_frag_0_3[4];
    unsigned lhs_frag_1_0[4];
    unsigned lhs_frag_1_1[4];
    unsigned lhs_frag_1_2[4];
    unsigned lhs_frag_1_3[4];
    unsigned rhs_frag_0_0[2];
    unsigned rhs_frag_0_1[2];
    unsigned rhs_frag_0_2[2];
    unsigned rhs_frag_0_3[2];
    unsigned rhs_frag_0_4[2];
    unsigned rhs_frag_0_5[2];
    unsigned rhs_frag_0_6[2];
    unsigned rhs_frag_0_7[2];
    unsigned rhs_frag_1_0[2];
    unsigned rhs_frag_1_1[2];
    unsigned rhs_frag_1_2[2];
    unsigned rhs_frag_1_3[2];
    unsigned rhs_frag_1_4[2];
    unsigned rhs_frag_1_5[2];
    unsigned rhs_frag_1_6[2];
    unsigned rhs_frag_1_7[2];
    acc_0_0[0] = 0.0f; acc_0_0[1] = 0.0f; acc_0_0[2] = 0.0f; acc_0_0[3] = 0.0f;
    acc_0_1[0] = 0.0f; acc_0_1[1] = 0.0f; acc_0_1[2] = 0.0f; acc_0_1[3] = 0.0f;
    acc_0_2[0] = 0.0f; acc_0_2[1] = 0.0f; acc_0_2[2] = 0.0f; acc_0_2[3] = 0.0f;
    acc_0_3[0] = 0.0f; acc_0_3[1] = 0.0f; acc_0_3[2] = 0.0f; acc_0_3[3] = 0.0f;
    acc_0_4[0] = 0.0f; acc_0_4[1] = 0.0f; acc_0_4[2] = 0.0f; acc_0_4[3] = 0.0f;
    acc_0_5[0] = 0.0f; acc_0_5[1] = 0.0f; acc_0_5[2] = 0.0f; acc_0_5[3] = 0.0f;
    acc_0_6[0] = 0.0f; acc_0_6[1] = 0.0f; acc_0_6[2] = 0.0f; acc_0_6[3] = 0.0f;
    acc_0_7[0] = 0.0f; acc_0_7[1] = 0.0f; acc_0_7[2] = 0.0f; acc_0_7[3] = 0.0f;
    acc_1_0[0] = 0.0f; acc_1_0[1] = 0.0f; acc_1_0[2] = 0.0f; acc_1_0[3] = 0.0f;
    acc_1_1[0] = 0.0f; acc_1_1[1] = 0.0f; acc_1_1[2] = 0.0f; acc_1_1[3] = 0.0f;
    acc_1_2[0] = 0.0f; acc_1_2[1] = 0.0f; acc_1_2[2] = 0.0f; acc_1_2[3] = 0.0f;
    acc_1_3[0] = 0.0f; acc_1_3[1] = 0.0f; acc_1_3[2] = 0.0f; acc_1_3[3] = 0.0f;
    acc_1_4[0] = 0.0f; acc_1_4[1] = 0.0f; acc_1_4[2] = 0.0f; acc_1_4[3] = 0.0f;
    acc_1_5[0] = 0.0f; acc_1_5[1] = 0.0f; acc_1_5[2] = 0.0f; acc_1_5[3] = 0.0f;
    acc_1_6[0] = 0.0f; acc_1_6[1] = 0.0f; acc_1_6[2] = 0.0f; acc_1_6[3] = 0.0f;
    acc_1_7[0] = 0.0f; acc_1_7[1] = 0.0f; acc_1_7[2] = 0.0f; acc_1_7[3] = 0.0f;
    acc_2_0[0] = 0.0f; acc_2_0[1] = 0.0f; acc_2_0[2] = 0.0f; acc_2_0[3] = 0.0f;
    acc_2_1[0] = 0.0f; acc_2_1[1] = 0.0f; acc_2_1[2] = 0.0f; acc_2_1[3] = 0.0f;
    acc_2_2[0] = 0.0f; acc_2_2[1] = 0.0f; acc_2_2[2] = 0.0f; acc_2_2[3] = 0.0f;
    acc_2_3[0] = 0.0f; acc_2_3[1] = 0.0f; acc_2_3[2] = 0.0f; acc_2_3[3] = 0.0f;
    acc_2_4[0] = 0.0f; acc_2_4[1] = 0.0f; acc_2_4[2] = 0.0f; acc_2_4[3] = 0.0f;
    acc_2_5[0] = 0.0f; acc_2_5[1] = 0.0f; acc_2_5[2] = 0.0f; acc_2_5[3] = 0.0f;
    acc_2_6[0] = 0.0f; acc_2_6[1] = 0.0f; acc_2_6[2] = 0.0f; acc_2_6[3] = 0.0f;
    acc_2_7[0] = 0.0f; acc_2_7[1] = 0.0f; acc_2_7[2] = 0.0f; acc_2_7[3] = 0.0f;
    acc_3_0[0] = 0.0f; acc_3_0[1] = 0.0f; acc_3_0[2] = 0.0f; acc_3_0[3] = 0.0f;
    acc_3_1[0] = 0.0f; acc_3_1[1] = 0.0f; acc_3_1[2] = 0.0f; acc_3_1[3] = 0.0f;
    acc_3_2[0] = 0.0f; acc_3_2[1] = 0.0f; acc_3_2[2] = 0.0f; acc_3_2[3] = 0.0f;
    acc_3_3[0] = 0.0f; acc_3_3[1] = 0.0f; acc_3_3[2] = 0.0f; acc_3_3[3] = 0.0f;
    acc_3_4[0] = 0.0f; acc_3_4[1] = 0.0f; acc_3_4[2] = 0.0f; acc_3_4[3] = 0.0f;
    acc_3_5[0] = 0.0f; acc_3_5[1] = 0.0f; acc_3_5[2] = 0.0f; acc_3_5[3] = 0.0f;
    acc_3_6[0] = 0.0f; acc_3_6[1] = 0.0f; acc_3_6[2] = 0.0f; acc_3_6[3] = 0.0f;
    acc_3_7[0] = 0.0f; acc_3_7[1] = 0.0f; acc_3_7[2] = 0.0f; acc_3_7[3] = 0.0f;
    const int lhs_ld8_line0 = (UNIT_ID) / 8;
    const int lhs_ld8_off0 = ((UNIT_ID) % 8) * 8;
    const GLOBAL unsigned short* lhs_ld8_src = lhs + (cube_m0 + lhs_ld8_line0) * lhs_ld + (0 + lhs_ld8_off0);
    const unsigned lhs_ld8_dst = ((unsigned)__cvta_generic_to_shared(&lhs_smem[(lhs_ld8_line0) * 72 + (lhs_ld8_off0)]));
    const int rhs_ld8_line0 = (UNIT_ID) / 8;
    const int rhs_ld8_off0 = ((UNIT_ID) % 8) * 8;
    const GLOBAL unsigned short* rhs_ld8_src = rhs + (cube_n0 + rhs_ld8_line0) * rhs_ld + (0 + rhs_ld8_off0);
    const unsigned rhs_ld8_dst = ((unsigned)__cvta_generic_to_shared(&rhs_smem[(rhs_ld8_line0) * 72 + (rhs_ld8_off0)]));
    const int k_steps = (int)((K + 63) / 64);
    #pragma unroll
    for (int pre = 0; pre < 2; ++pre) {
        if (pre < k_steps) {
            const i64 k0 = (i64)pre * 64;
            {
                const GLOBAL void* gsrc = lhs_ld8_src + 0 * lhs_ld;
                ptx_cp_async_cg_16(lhs_ld8_dst + (pre) * 18432 + 0 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = lhs_ld8_src + 32 * lhs_ld;
                ptx_cp_async_cg_16(lhs_ld8_dst + (pre) * 18432 + 4608 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = lhs_ld8_src + 64 * lhs_ld;
                ptx_cp_async_cg_16(lhs_ld8_dst + (pre) * 18432 + 9216 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = lhs_ld8_src + 96 * lhs_ld;
                ptx_cp_async_cg_16(lhs_ld8_dst + (pre) * 18432 + 13824 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 0 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (pre) * 36864 + 0 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 32 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (pre) * 36864 + 4608 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 64 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (pre) * 36864 + 9216 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 96 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (pre) * 36864 + 13824 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 128 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (pre) * 36864 + 18432 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 160 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (pre) * 36864 + 23040 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 192 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (pre) * 36864 + 27648 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 224 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (pre) * 36864 + 32256 + 0, (const GLOBAL char*)gsrc + 0);
            }
            lhs_ld8_src += 64;
            rhs_ld8_src += 64;
        }
        ptx_cp_async_commit();
    }
    int cur_slot = 0, load_slot = 2;
    for (int step = 0; step < k_steps; ++step) {
        ptx_cp_async_wait_1();
        SYNC_CUBE();
        const bool more = step + 2 < k_steps;
        if (more) {
            const i64 k0 = (i64)(step + 2) * 64;
            {
                const GLOBAL void* gsrc = lhs_ld8_src + 0 * lhs_ld;
                ptx_cp_async_cg_16(lhs_ld8_dst + (load_slot) * 18432 + 0 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = lhs_ld8_src + 32 * lhs_ld;
                ptx_cp_async_cg_16(lhs_ld8_dst + (load_slot) * 18432 + 4608 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = lhs_ld8_src + 64 * lhs_ld;
                ptx_cp_async_cg_16(lhs_ld8_dst + (load_slot) * 18432 + 9216 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = lhs_ld8_src + 96 * lhs_ld;
                ptx_cp_async_cg_16(lhs_ld8_dst + (load_slot) * 18432 + 13824 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 0 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (load_slot) * 36864 + 0 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 32 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (load_slot) * 36864 + 4608 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 64 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (load_slot) * 36864 + 9216 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 96 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (load_slot) * 36864 + 13824 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 128 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (load_slot) * 36864 + 18432 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 160 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (load_slot) * 36864 + 23040 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 192 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (load_slot) * 36864 + 27648 + 0, (const GLOBAL char*)gsrc + 0);
            }
            {
                const GLOBAL void* gsrc = rhs_ld8_src + 224 * rhs_ld;
                ptx_cp_async_cg_16(rhs_ld8_dst + (load_slot) * 36864 + 32256 + 0, (const GLOBAL char*)gsrc + 0);
            }
            lhs_ld8_src += 64;
            rhs_ld8_src += 64;
        }
        ptx_cp_async_commit();
        ptx_ldmatrix_x4(lhs_frag_0_0[0], lhs_frag_0_0[1], lhs_frag_0_0[2], lhs_frag_0_0[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 0)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (0) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_0_1[0], lhs_frag_0_1[1], lhs_frag_0_1[2], lhs_frag_0_1[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 16)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (0) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_0_2[0], lhs_frag_0_2[1], lhs_frag_0_2[2], lhs_frag_0_2[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 32)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (0) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_0_3[0], lhs_frag_0_3[1], lhs_frag_0_3[2], lhs_frag_0_3[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 48)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (0) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_0_0[0], rhs_frag_0_0[1], rhs_frag_0_1[0], rhs_frag_0_1[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 0) + ((lane >> 4) << 3)
                        + (lane & 7)) * 72 + (0) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_0_2[0], rhs_frag_0_2[1], rhs_frag_0_3[0], rhs_frag_0_3[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 16)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (0) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_0_4[0], rhs_frag_0_4[1], rhs_frag_0_5[0], rhs_frag_0_5[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 32)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (0) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_0_6[0], rhs_frag_0_6[1], rhs_frag_0_7[0], rhs_frag_0_7[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 48)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (0) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_1_0[0], lhs_frag_1_0[1], lhs_frag_1_0[2], lhs_frag_1_0[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 0)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (16) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_1_1[0], lhs_frag_1_1[1], lhs_frag_1_1[2], lhs_frag_1_1[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 16)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (16) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_1_2[0], lhs_frag_1_2[1], lhs_frag_1_2[2], lhs_frag_1_2[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 32)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (16) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_1_3[0], lhs_frag_1_3[1], lhs_frag_1_3[2], lhs_frag_1_3[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 48)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (16) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_1_0[0], rhs_frag_1_0[1], rhs_frag_1_1[0], rhs_frag_1_1[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 0) + ((lane >> 4) << 3)
                        + (lane & 7)) * 72 + (16) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_1_2[0], rhs_frag_1_2[1], rhs_frag_1_3[0], rhs_frag_1_3[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 16)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (16) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_1_4[0], rhs_frag_1_4[1], rhs_frag_1_5[0], rhs_frag_1_5[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 32)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (16) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_1_6[0], rhs_frag_1_6[1], rhs_frag_1_7[0], rhs_frag_1_7[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 48)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (16) + (((lane >> 3) & 1) << 3)])));
        ptx_mma_m16n8k16_f32_f16(acc_0_0, lhs_frag_0_0, rhs_frag_0_0);
        ptx_mma_m16n8k16_f32_f16(acc_1_0, lhs_frag_0_1, rhs_frag_0_0);
        ptx_mma_m16n8k16_f32_f16(acc_2_0, lhs_frag_0_2, rhs_frag_0_0);
        ptx_mma_m16n8k16_f32_f16(acc_3_0, lhs_frag_0_3, rhs_frag_0_0);
        ptx_mma_m16n8k16_f32_f16(acc_0_1, lhs_frag_0_0, rhs_frag_0_1);
        ptx_mma_m16n8k16_f32_f16(acc_1_1, lhs_frag_0_1, rhs_frag_0_1);
        ptx_mma_m16n8k16_f32_f16(acc_2_1, lhs_frag_0_2, rhs_frag_0_1);
        ptx_mma_m16n8k16_f32_f16(acc_3_1, lhs_frag_0_3, rhs_frag_0_1);
        ptx_mma_m16n8k16_f32_f16(acc_0_2, lhs_frag_0_0, rhs_frag_0_2);
        ptx_mma_m16n8k16_f32_f16(acc_1_2, lhs_frag_0_1, rhs_frag_0_2);
        ptx_mma_m16n8k16_f32_f16(acc_2_2, lhs_frag_0_2, rhs_frag_0_2);
        ptx_mma_m16n8k16_f32_f16(acc_3_2, lhs_frag_0_3, rhs_frag_0_2);
        ptx_mma_m16n8k16_f32_f16(acc_0_3, lhs_frag_0_0, rhs_frag_0_3);
        ptx_mma_m16n8k16_f32_f16(acc_1_3, lhs_frag_0_1, rhs_frag_0_3);
        ptx_mma_m16n8k16_f32_f16(acc_2_3, lhs_frag_0_2, rhs_frag_0_3);
        ptx_mma_m16n8k16_f32_f16(acc_3_3, lhs_frag_0_3, rhs_frag_0_3);
        ptx_mma_m16n8k16_f32_f16(acc_0_4, lhs_frag_0_0, rhs_frag_0_4);
        ptx_mma_m16n8k16_f32_f16(acc_1_4, lhs_frag_0_1, rhs_frag_0_4);
        ptx_mma_m16n8k16_f32_f16(acc_2_4, lhs_frag_0_2, rhs_frag_0_4);
        ptx_mma_m16n8k16_f32_f16(acc_3_4, lhs_frag_0_3, rhs_frag_0_4);
        ptx_mma_m16n8k16_f32_f16(acc_0_5, lhs_frag_0_0, rhs_frag_0_5);
        ptx_mma_m16n8k16_f32_f16(acc_1_5, lhs_frag_0_1, rhs_frag_0_5);
        ptx_mma_m16n8k16_f32_f16(acc_2_5, lhs_frag_0_2, rhs_frag_0_5);
        ptx_mma_m16n8k16_f32_f16(acc_3_5, lhs_frag_0_3, rhs_frag_0_5);
        ptx_mma_m16n8k16_f32_f16(acc_0_6, lhs_frag_0_0, rhs_frag_0_6);
        ptx_mma_m16n8k16_f32_f16(acc_1_6, lhs_frag_0_1, rhs_frag_0_6);
        ptx_mma_m16n8k16_f32_f16(acc_2_6, lhs_frag_0_2, rhs_frag_0_6);
        ptx_mma_m16n8k16_f32_f16(acc_3_6, lhs_frag_0_3, rhs_frag_0_6);
        ptx_mma_m16n8k16_f32_f16(acc_0_7, lhs_frag_0_0, rhs_frag_0_7);
        ptx_mma_m16n8k16_f32_f16(acc_1_7, lhs_frag_0_1, rhs_frag_0_7);
        ptx_mma_m16n8k16_f32_f16(acc_2_7, lhs_frag_0_2, rhs_frag_0_7);
        ptx_mma_m16n8k16_f32_f16(acc_3_7, lhs_frag_0_3, rhs_frag_0_7);
        ptx_ldmatrix_x4(lhs_frag_0_0[0], lhs_frag_0_0[1], lhs_frag_0_0[2], lhs_frag_0_0[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 0)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (32) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_0_1[0], lhs_frag_0_1[1], lhs_frag_0_1[2], lhs_frag_0_1[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 16)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (32) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_0_2[0], lhs_frag_0_2[1], lhs_frag_0_2[2], lhs_frag_0_2[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 32)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (32) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_0_3[0], lhs_frag_0_3[1], lhs_frag_0_3[2], lhs_frag_0_3[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 48)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (32) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_0_0[0], rhs_frag_0_0[1], rhs_frag_0_1[0], rhs_frag_0_1[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 0) + ((lane >> 4) << 3)
                        + (lane & 7)) * 72 + (32) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_0_2[0], rhs_frag_0_2[1], rhs_frag_0_3[0], rhs_frag_0_3[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 16)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (32) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_0_4[0], rhs_frag_0_4[1], rhs_frag_0_5[0], rhs_frag_0_5[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 32)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (32) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_0_6[0], rhs_frag_0_6[1], rhs_frag_0_7[0], rhs_frag_0_7[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 48)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (32) + (((lane >> 3) & 1) << 3)])));
        ptx_mma_m16n8k16_f32_f16(acc_0_0, lhs_frag_1_0, rhs_frag_1_0);
        ptx_mma_m16n8k16_f32_f16(acc_1_0, lhs_frag_1_1, rhs_frag_1_0);
        ptx_mma_m16n8k16_f32_f16(acc_2_0, lhs_frag_1_2, rhs_frag_1_0);
        ptx_mma_m16n8k16_f32_f16(acc_3_0, lhs_frag_1_3, rhs_frag_1_0);
        ptx_mma_m16n8k16_f32_f16(acc_0_1, lhs_frag_1_0, rhs_frag_1_1);
        ptx_mma_m16n8k16_f32_f16(acc_1_1, lhs_frag_1_1, rhs_frag_1_1);
        ptx_mma_m16n8k16_f32_f16(acc_2_1, lhs_frag_1_2, rhs_frag_1_1);
        ptx_mma_m16n8k16_f32_f16(acc_3_1, lhs_frag_1_3, rhs_frag_1_1);
        ptx_mma_m16n8k16_f32_f16(acc_0_2, lhs_frag_1_0, rhs_frag_1_2);
        ptx_mma_m16n8k16_f32_f16(acc_1_2, lhs_frag_1_1, rhs_frag_1_2);
        ptx_mma_m16n8k16_f32_f16(acc_2_2, lhs_frag_1_2, rhs_frag_1_2);
        ptx_mma_m16n8k16_f32_f16(acc_3_2, lhs_frag_1_3, rhs_frag_1_2);
        ptx_mma_m16n8k16_f32_f16(acc_0_3, lhs_frag_1_0, rhs_frag_1_3);
        ptx_mma_m16n8k16_f32_f16(acc_1_3, lhs_frag_1_1, rhs_frag_1_3);
        ptx_mma_m16n8k16_f32_f16(acc_2_3, lhs_frag_1_2, rhs_frag_1_3);
        ptx_mma_m16n8k16_f32_f16(acc_3_3, lhs_frag_1_3, rhs_frag_1_3);
        ptx_mma_m16n8k16_f32_f16(acc_0_4, lhs_frag_1_0, rhs_frag_1_4);
        ptx_mma_m16n8k16_f32_f16(acc_1_4, lhs_frag_1_1, rhs_frag_1_4);
        ptx_mma_m16n8k16_f32_f16(acc_2_4, lhs_frag_1_2, rhs_frag_1_4);
        ptx_mma_m16n8k16_f32_f16(acc_3_4, lhs_frag_1_3, rhs_frag_1_4);
        ptx_mma_m16n8k16_f32_f16(acc_0_5, lhs_frag_1_0, rhs_frag_1_5);
        ptx_mma_m16n8k16_f32_f16(acc_1_5, lhs_frag_1_1, rhs_frag_1_5);
        ptx_mma_m16n8k16_f32_f16(acc_2_5, lhs_frag_1_2, rhs_frag_1_5);
        ptx_mma_m16n8k16_f32_f16(acc_3_5, lhs_frag_1_3, rhs_frag_1_5);
        ptx_mma_m16n8k16_f32_f16(acc_0_6, lhs_frag_1_0, rhs_frag_1_6);
        ptx_mma_m16n8k16_f32_f16(acc_1_6, lhs_frag_1_1, rhs_frag_1_6);
        ptx_mma_m16n8k16_f32_f16(acc_2_6, lhs_frag_1_2, rhs_frag_1_6);
        ptx_mma_m16n8k16_f32_f16(acc_3_6, lhs_frag_1_3, rhs_frag_1_6);
        ptx_mma_m16n8k16_f32_f16(acc_0_7, lhs_frag_1_0, rhs_frag_1_7);
        ptx_mma_m16n8k16_f32_f16(acc_1_7, lhs_frag_1_1, rhs_frag_1_7);
        ptx_mma_m16n8k16_f32_f16(acc_2_7, lhs_frag_1_2, rhs_frag_1_7);
        ptx_mma_m16n8k16_f32_f16(acc_3_7, lhs_frag_1_3, rhs_frag_1_7);
        ptx_ldmatrix_x4(lhs_frag_1_0[0], lhs_frag_1_0[1], lhs_frag_1_0[2], lhs_frag_1_0[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 0)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (48) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_1_1[0], lhs_frag_1_1[1], lhs_frag_1_1[2], lhs_frag_1_1[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 16)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (48) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_1_2[0], lhs_frag_1_2[1], lhs_frag_1_2[2], lhs_frag_1_2[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 32)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (48) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(lhs_frag_1_3[0], lhs_frag_1_3[1], lhs_frag_1_3[2], lhs_frag_1_3[3],
                ((unsigned)__cvta_generic_to_shared(&(lhs_smem + cur_slot * 9216)[((plane_m0 + 48)
                        + (((lane >> 3) & 1) << 3) + (lane & 7)) * 72 + (48) + ((lane >> 4) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_1_0[0], rhs_frag_1_0[1], rhs_frag_1_1[0], rhs_frag_1_1[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 0) + ((lane >> 4) << 3)
                        + (lane & 7)) * 72 + (48) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_1_2[0], rhs_frag_1_2[1], rhs_frag_1_3[0], rhs_frag_1_3[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 16)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (48) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_1_4[0], rhs_frag_1_4[1], rhs_frag_1_5[0], rhs_frag_1_5[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 32)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (48) + (((lane >> 3) & 1) << 3)])));
        ptx_ldmatrix_x4(rhs_frag_1_6[0], rhs_frag_1_6[1], rhs_frag_1_7[0], rhs_frag_1_7[1],
                ((unsigned)__cvta_generic_to_shared(&(rhs_smem + cur_slot * 18432)[((plane_n0 + 48)
                        + ((lane >> 4) << 3) + (lane & 7)) * 72 + (48) + (((lane >> 3) & 1) << 3)])));
        ptx_mma_m16n8k16_f32_f16(acc_0_0, lhs_frag_0_0, rhs_frag_0_0);
        ptx_mma_m16n8k16_f32_f16(acc_1_0, lhs_frag_0_1, rhs_frag_0_0);
        ptx_mma_m16n8k16_f32_f16(acc_2_0, lhs_frag_0_2, rhs_frag_0_0);
        ptx_mma_m16n8k16_f32_f16(acc_3_0, lhs_frag_0_3, rhs_frag_0_0);
        ptx_mma_m16n8k16_f32_f16(acc_0_1, lhs_frag_0_0, rhs_frag_0_1);
        ptx_mma_m16n8k16_f32_f16(acc_1_1, lhs_frag_0_1, rhs_frag_0_1);
        ptx_mma_m16n8k16_f32_f16(acc_2_1, lhs_frag_0_2, rhs_frag_0_1);
        ptx_mma_m16n8k16_f32_f16(acc_3_1, lhs_frag_0_3, rhs_frag_0_1);
        ptx_mma_m16n8k16_f32_f16(acc_0_2, lhs_frag_0_0, rhs_frag_0_2);
        ptx_mma_m16n8k16_f32_f16(acc_1_2, lhs_frag_0_1, rhs_frag_0_2);
        ptx_mma_m16n8k16_f32_f16(acc_2_2, lhs_frag_0_2, rhs_frag_0_2);
        ptx_mma_m16n8k16_f32_f16(acc_3_2, lhs_frag_0_3, rhs_frag_0_2);
        ptx_mma_m16n8k16_f32_f16(acc_0_3, lhs_frag_0_0, rhs_frag_0_3);
        ptx_mma_m16n8k16_f32_f16(acc_1_3, lhs_frag_0_1, rhs_frag_0_3);
        ptx_mma_m16n8k16_f32_f16(acc_2_3, lhs_frag_0_2, rhs_frag_0_3);
        ptx_mma_m16n8k16_f32_f16(acc_3_3, lhs_frag_0_3, rhs_frag_0_3);
        ptx_mma_m16n8k16_f32_f16(acc_0_4, lhs_frag_0_0, rhs_frag_0_4);
        ptx_mma_m16n8k16_f32_f16(acc_1_4, lhs_frag_0_1, rhs_frag_0_4);
        ptx_mma_m16n8k16_f32_f16(acc_2_4, lhs_frag_0_2, rhs_frag_0_4);
        ptx_mma_m16n8k16_f32_f16(acc_3_4, lhs_frag_0_3, rhs_frag_0_4);
        ptx_mma_m16n8k16_f32_f16(acc_0_5, lhs_frag_0_0, rhs_frag_0_5);
        ptx_mma_m16n8k16_f32_f16(acc_1_5, lhs_frag_0_1, rhs_frag_0_5);
        ptx_mma_m16n8k16_f32_f16(acc_2_5, lhs_frag_0_2, rhs_frag_0_5);
        ptx_mma_m16n8k16_f32_f16(acc_3_5, lhs_frag_0_3, rhs_frag_0_5);
        ptx_mma_m16n8k16_f32_f16(acc_0_6, lhs_frag_0_0, rhs_frag_0_6);
        ptx_mma_m16n8k16_f32_f16(acc_1_6, lhs_frag_0_1, rhs_frag_0_6);
        ptx_mma_m16n8k16_f32_f16(acc_2_6, lhs_frag_0_2, rhs_frag_0_6);
        ptx_mma_m16n8k16_f32_f16(acc_3_6, lhs_frag_0_3, rhs_frag_0_6);
        ptx_mma_m16n8k16_f32_f16(acc_0_7, lhs_frag_0_0, rhs_frag_0_7);
        ptx_mma_m16n8k16_f32_f16(acc_1_7, lhs_frag_0_1, rhs_frag_0_7);
        ptx_mma_m16n8k16_f32_f16(acc_2_7, lhs_frag_0_2, rhs_frag_0_7);
        ptx_mma_m16n8k16_f32_f16(acc_3_7, lhs_frag_0_3, rhs_frag_0_7);
        ptx_mma_m16n8k16_f32_f16(acc_0_0, lhs_frag_1_0, rhs_frag_1_0);
        ptx_mma_m16n8k16_f32_f16(acc_1_0, lhs_frag_1_1, rhs_frag_1_0);
        ptx_mma_m16n8k16_f32_f16(acc_2_0, lhs_frag_1_2, rhs_frag_1_0);
        ptx_mma_m16n8k16_f32_f16(acc_3_0, lhs_frag_1_3, rhs_frag_1_0);
        ptx_mma_m16n8k16_f32_f16(acc_0_1, lhs_frag_1_0, rhs_frag_1_1);
        ptx_mma_m16n8k16_f32_f16(acc_1_1, lhs_frag_1_1, rhs_frag_1_1);
        ptx_mma_m16n8k16_f32_f16(acc_2_1, lhs_frag_1_2, rhs_frag_1_1);
        ptx_mma_m16n8k16_f32_f16(acc_3_1, lhs_frag_1_3, rhs_frag_1_1);
        ptx_mma_m16n8k16_f32_f16(acc_0_2, lhs_frag_1_0, rhs_frag_1_2);
        ptx_mma_m16n8k16_f32_f16(acc_1_2, lhs_frag_1_1, rhs_frag_1_2);
        ptx_mma_m16n8k16_f32_f16(acc_2_2, lhs_frag_1_2, rhs_frag_1_2);
        ptx_mma_m16n8k16_f32_f16(acc_3_2, lhs_frag_1_3, rhs_frag_1_2);
        ptx_mma_m16n8k16_f32_f16(acc_0_3, lhs_frag_1_0, rhs_frag_1_3);
        ptx_mma_m16n8k16_f32_f16(acc_1_3, lhs_frag_1_1, rhs_frag_1_3);
        ptx_mma_m16n8k16_f32_f16(acc_2_3, lhs_frag_1_2, rhs_frag_1_3);
        ptx_mma_m16n8k16_f32_f16(acc_3_3, lhs_frag_1_3, rhs_frag_1_3);
        ptx_mma_m16n8k16_f32_f16(acc_0_4, lhs_frag_1_0, rhs_frag_1_4);
        ptx_mma_m16n8k16_f32_f16(acc_1_4, lhs_frag_1_1, rhs_frag_1_4);
        ptx_mma_m16n8k16_f32_f16(acc_2_4, lhs_frag_1_2, rhs_frag_1_4);
        ptx_mma_m16n8k16_f32_f16(acc_3_4, lhs_frag_1_3, rhs_frag_1_4);
        ptx_mma_m16n8k16_f32_f16(acc_0_5, lhs_frag_1_0, rhs_frag_1_5);
        ptx_mma_m16n8k16_f32_f16(acc_1_5, lhs_frag_1_1, rhs_frag_1_5);
        ptx_mma_m16n8k16_f32_f16(acc_2_5, lhs_frag_1_2, rhs_frag_1_5);
        ptx_mma_m16n8k16_f32_f16(acc_3_5, lhs_frag_1_3, rhs_frag_1_5);
        ptx_mma_m16n8k16_f32_f16(acc_0_6, lhs_frag_1_0, rhs_frag_1_6);
        ptx_mma_m16n8k16_f32_f16(acc_1_6, lhs_frag_1_1, rhs_frag_1_6);
        ptx_mma_m16n8k16_f32_f16(acc_2_6, lhs_frag_1_2, rhs_frag_1_6);
        ptx_mma_m16n8k16_f32_f16(acc_3_6, lhs_frag_1_3, rhs_frag_1_6);
        ptx_mma_m16n8k16_f32_f16(acc_0_7, lhs_frag_1_0, rhs_frag_1_7);
        ptx_mma_m16n8k16_f32_f16(acc_1_7, lhs_frag_1_1, rhs_frag_1_7);
        ptx_mma_m16n8k16_f32_f16(acc_2_7, lhs_frag_1_2, rhs_frag_1_7);
        ptx_mma_m16n8k16_f32_f16(acc_3_7, lhs_frag_1_3, rhs_frag_1_7);
        cur_slot = cur_slot + 1 == 3 ? 0 : cur_slot + 1;
        load_slot = load_slot + 1 == 3 ? 0 : load_slot + 1;
    }
    const bool out_pairs = ((((u64)out) | (u64)(out_ld * 2)) & 3) == 0;
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_0[1], acc_0_0[0]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_0[0]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_0[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 0 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_0[3], acc_0_0[2]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_0[2]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_0[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_1[1], acc_0_1[0]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_1[0]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_1[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 8 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_1[3], acc_0_1[2]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_1[2]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_1[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_2[1], acc_0_2[0]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_2[0]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_2[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 16 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_2[3], acc_0_2[2]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_2[2]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_2[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_3[1], acc_0_3[0]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_3[0]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_3[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 24 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_3[3], acc_0_3[2]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_3[2]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_3[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_4[1], acc_0_4[0]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_4[0]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_4[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 32 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_4[3], acc_0_4[2]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_4[2]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_4[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_5[1], acc_0_5[0]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_5[0]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_5[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 40 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_5[3], acc_0_5[2]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_5[2]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_5[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_6[1], acc_0_6[0]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_6[0]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_6[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 48 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_6[3], acc_0_6[2]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_6[2]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_6[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_7[1], acc_0_7[0]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_7[0]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_7[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 56 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_0_7[3], acc_0_7[2]);
    else {
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1)] =
                f32_to_f16(acc_0_7[2]);
        out[(cube_m0 + plane_m0 + 0 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_0_7[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_0[1], acc_1_0[0]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_0[0]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_0[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 0 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_0[3], acc_1_0[2]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_0[2]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_0[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_1[1], acc_1_1[0]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_1[0]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_1[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 8 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_1[3], acc_1_1[2]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_1[2]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_1[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_2[1], acc_1_2[0]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_2[0]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_2[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 16 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_2[3], acc_1_2[2]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_2[2]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_2[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_3[1], acc_1_3[0]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_3[0]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_3[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 24 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_3[3], acc_1_3[2]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_3[2]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_3[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_4[1], acc_1_4[0]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_4[0]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_4[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 32 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_4[3], acc_1_4[2]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_4[2]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_4[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_5[1], acc_1_5[0]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_5[0]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_5[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 40 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_5[3], acc_1_5[2]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_5[2]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_5[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_6[1], acc_1_6[0]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_6[0]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_6[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 48 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_6[3], acc_1_6[2]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_6[2]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_6[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_7[1], acc_1_7[0]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_7[0]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_7[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 56 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_1_7[3], acc_1_7[2]);
    else {
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1)] =
                f32_to_f16(acc_1_7[2]);
        out[(cube_m0 + plane_m0 + 16 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_1_7[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_0[1], acc_2_0[0]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_0[0]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_0[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 0 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_0[3], acc_2_0[2]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_0[2]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_0[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_1[1], acc_2_1[0]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_1[0]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_1[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 8 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_1[3], acc_2_1[2]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_1[2]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_1[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_2[1], acc_2_2[0]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_2[0]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_2[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 16 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_2[3], acc_2_2[2]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_2[2]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_2[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_3[1], acc_2_3[0]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_3[0]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_3[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 24 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_3[3], acc_2_3[2]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_3[2]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_3[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_4[1], acc_2_4[0]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_4[0]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_4[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 32 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_4[3], acc_2_4[2]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_4[2]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_4[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_5[1], acc_2_5[0]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_5[0]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_5[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 40 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_5[3], acc_2_5[2]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_5[2]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_5[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_6[1], acc_2_6[0]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_6[0]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_6[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 48 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_6[3], acc_2_6[2]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_6[2]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_6[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_7[1], acc_2_7[0]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_7[0]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_7[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 56 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_2_7[3], acc_2_7[2]);
    else {
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1)] =
                f32_to_f16(acc_2_7[2]);
        out[(cube_m0 + plane_m0 + 32 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_2_7[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_0[1], acc_3_0[0]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_0[0]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_0[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 0 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_0[3], acc_3_0[2]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_0[2]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 0 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_0[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_1[1], acc_3_1[0]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_1[0]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_1[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 8 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_1[3], acc_3_1[2]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_1[2]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 8 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_1[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_2[1], acc_3_2[0]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_2[0]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_2[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 16 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_2[3], acc_3_2[2]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_2[2]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 16 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_2[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_3[1], acc_3_3[0]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_3[0]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_3[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 24 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_3[3], acc_3_3[2]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_3[2]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 24 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_3[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_4[1], acc_3_4[0]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_4[0]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_4[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 32 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_4[3], acc_3_4[2]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_4[2]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 32 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_4[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_5[1], acc_3_5[0]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_5[0]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_5[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 40 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_5[3], acc_3_5[2]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_5[2]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 40 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_5[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_6[1], acc_3_6[0]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_6[0]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_6[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 48 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_6[3], acc_3_6[2]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_6[2]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 48 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_6[3]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56
            + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_7[1], acc_3_7[0]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_7[0]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2)) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_7[1]);
    }
    if (out_pairs) *(GLOBAL unsigned*)(out + (cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0
            + 56 + ((lane & 3) << 1)) = ptx_cvt_rn_f16x2(acc_3_7[3], acc_3_7[2]);
    else {
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1)] =
                f32_to_f16(acc_3_7[2]);
        out[(cube_m0 + plane_m0 + 48 + (lane >> 2) + 8) * out_ld + cube_n0 + plane_n0 + 56 + ((lane & 3) << 1) + 1] =
                f32_to_f16(acc_3_7[3]);
    }
}