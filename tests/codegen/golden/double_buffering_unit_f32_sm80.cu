/* gemm_engine: double_buffering_unit (gemm_engine.algorithms.double_buffering.DoubleBufferingUnitAlgorithm) */
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
KERNEL LAUNCH_BOUNDS(64) void gemm_engine_kernel(
    const GLOBAL float* RESTRICT lhs_base,
    i64 lhs_offset,
    i64 lhs_ld,
    i64 lhs_batch_stride,
    const GLOBAL float* RESTRICT rhs_base,
    i64 rhs_offset,
    i64 rhs_ld,
    i64 rhs_batch_stride,
    GLOBAL float* RESTRICT out_base,
    i64 out_offset,
    i64 out_ld,
    i64 out_batch_stride,
    i64 M,
    i64 N,
    i64 K,
    i64 batch)
{
    /* == batch: PartitionedBatchMatmul 'partitioned_batch': persistent_cubes=0 | dispatch row_major == */
    LOCAL float lhs_smem[2176] ALIGN16;
    LOCAL float rhs_smem[2176] ALIGN16;
    const i64 cube = CUBE_ID;
    const i64 cubes_m = (M + 63) / 64;
    const i64 cubes_n = (N + 63) / 64;
    const i64 dispatch_per_batch = cubes_m * cubes_n;
    const i64 b = cube / dispatch_per_batch;
    const i64 cube_row = (cube % dispatch_per_batch) / cubes_n;
    const i64 cube_col = (cube % dispatch_per_batch) % cubes_n;
    const GLOBAL float* lhs = lhs_base + lhs_offset + b * lhs_batch_stride;
    const GLOBAL float* rhs = rhs_base + rhs_offset + b * rhs_batch_stride;
    GLOBAL float* out = out_base + out_offset + b * out_batch_stride;
    const i64 cube_m0 = cube_row * 64;
    const i64 cube_n0 = cube_col * 64;
    /* == global: DoubleBufferingGlobalMatmul 'double_buffering_global': check_m=0 check_n=0 check_k=0 | lhs
       VectorLoader rhs VectorLoader writer DirectWriter == */
    /* == stage: UnitPartitionedStage 'unit_partitioned_stage': stage_m=64 stage_n=64 stage_k=16 units=64 lhs_ld=68
       rhs_ld=68 lhs_k_contiguous=0 rhs_k_contiguous=0 units_m=8 units_n=8 partition_m=2 partition_n=2 strided=1 | tile
       RegisterTile: tile_m=4 tile_n=4 tile_k=1 compute=f32 smem= rhs_smem= smem_pad=0 plane=32 == */
    const int part_m0 = (UNIT_ID / 8) * 4;
    const int part_n0 = (UNIT_ID % 8) * 4;
    float acc_0_0[16];
    float acc_0_1[16];
    float acc_1_0[16];
    float acc_1_1[16];
    float lhs_frag0[4];
    float lhs_frag1[4];
    float rhs_frag0[4];
    float rhs_frag1[4];
    #pragma unroll
    for (int i = 0; i < 16; ++i) acc_0_0[i] = 0.0f;
    #pragma unroll
    for (int i = 0; i < 16; ++i) acc_0_1[i] = 0.0f;
    #pragma unroll
    for (int i = 0; i < 16; ++i) acc_1_0[i] = 0.0f;
    #pragma unroll
    for (int i = 0; i < 16; ++i) acc_1_1[i] = 0.0f;
    {
        const int idx = UNIT_ID + 0;
        const int r = idx / 4;
        const int c = (idx % 4) * 4;
        const i64 gr = cube_m0 + r;
        const i64 gc = 0 + c;
        float4 v = (*(const GLOBAL float4*)(lhs + (gr) * lhs_ld + (gc)));
        lhs_smem[(c + 0) * 68 + (r)] = v.x;
        lhs_smem[(c + 1) * 68 + (r)] = v.y;
        lhs_smem[(c + 2) * 68 + (r)] = v.z;
        lhs_smem[(c + 3) * 68 + (r)] = v.w;
    }
    {
        const int idx = UNIT_ID + 64;
        const int r = idx / 4;
        const int c = (idx % 4) * 4;
        const i64 gr = cube_m0 + r;
        const i64 gc = 0 + c;
        float4 v = (*(const GLOBAL float4*)(lhs + (gr) * lhs_ld + (gc)));
        lhs_smem[(c + 0) * 68 + (r)] = v.x;
        lhs_smem[(c + 1) * 68 + (r)] = v.y;
        lhs_smem[(c + 2) * 68 + (r)] = v.z;
        lhs_smem[(c + 3) * 68 + (r)] = v.w;
    }
    {
        const int idx = UNIT_ID + 128;
        const int r = idx / 4;
        const int c = (idx % 4) * 4;
        const i64 gr = cube_m0 + r;
        const i64 gc = 0 + c;
        float4 v = (*(const GLOBAL float4*)(lhs + (gr) * lhs_ld + (gc)));
        lhs_smem[(c + 0) * 68 + (r)] = v.x;
        lhs_smem[(c + 1) * 68 + (r)] = v.y;
        lhs_smem[(c + 2) * 68 + (r)] = v.z;
        lhs_smem[(c + 3) * 68 + (r)] = v.w;
    }
    {
        const int idx = UNIT_ID + 192;
        const int r = idx / 4;
        const int c = (idx % 4) * 4;
        const i64 gr = cube_m0 + r;
        const i64 gc = 0 + c;
        float4 v = (*(const GLOBAL float4*)(lhs + (gr) * lhs_ld + (gc)));
        lhs_smem[(c + 0) * 68 + (r)] = v.x;
        lhs_smem[(c + 1) * 68 + (r)] = v.y;
        lhs_smem[(c + 2) * 68 + (r)] = v.z;
        lhs_smem[(c + 3) * 68 + (r)] = v.w;
    }
    {
        const int idx = UNIT_ID + 0;
        const int r = idx / 16;
        const int c = (idx % 16) * 4;
        const i64 gr = 0 + r;
        const i64 gc = cube_n0 + c;
        float4 v = (*(const GLOBAL float4*)(rhs + (gr) * rhs_ld + (gc)));
        (*(float4*)(rhs_smem + (r) * 68 + (c + 0))) = v;
    }
    {
        const int idx = UNIT_ID + 64;
        const int r = idx / 16;
        const int c = (idx % 16) * 4;
        const i64 gr = 0 + r;
        const i64 gc = cube_n0 + c;
        float4 v = (*(const GLOBAL float4*)(rhs + (gr) * rhs_ld + (gc)));
        (*(float4*)(rhs_smem + (r) * 68 + (c + 0))) = v;
    }
    {
        const int idx = UNIT_ID + 128;
        const int r = idx / 16;
        const int c = (idx % 16) * 4;
        const i64 gr = 0 + r;
        const i64 gc = cube_n0 + c;
        float4 v = (*(const GLOBAL float4*)(rhs + (gr) * rhs_ld + (gc)));
        (*(float4*)(rhs_smem + (r) * 68 + (c + 0))) = v;
    }
    {
        const int idx = UNIT_ID + 192;
        const int r = idx / 16;
        const int c = (idx % 16) * 4;
        const i64 gr = 0 + r;
        const i64 gc = cube_n0 + c;
        float4 v = (*(const GLOBAL float4*)(rhs + (gr) * rhs_ld + (gc)));
        (*(float4*)(rhs_smem + (r) * 68 + (c + 0))) = v;
    }
    SYNC_CUBE();
    int cur = 0;
    for (i64 k0 = 0; k0 < K; k0 += 16) {
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(0) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(0) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(0) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(0) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        if (k0 + 16 < K) {
            {
                const int idx = UNIT_ID + 0;
                const int r = idx / 4;
                const int c = (idx % 4) * 4;
                const i64 gr = cube_m0 + r;
                const i64 gc = (k0 + 16) + c;
                float4 v = (*(const GLOBAL float4*)(lhs + (gr) * lhs_ld + (gc)));
                (lhs_smem + (cur ^ 1) * 1088)[(c + 0) * 68 + (r)] = v.x;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 1) * 68 + (r)] = v.y;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 2) * 68 + (r)] = v.z;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 3) * 68 + (r)] = v.w;
            }
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(1) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(1) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(1) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(1) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        if (k0 + 16 < K) {
            {
                const int idx = UNIT_ID + 64;
                const int r = idx / 4;
                const int c = (idx % 4) * 4;
                const i64 gr = cube_m0 + r;
                const i64 gc = (k0 + 16) + c;
                float4 v = (*(const GLOBAL float4*)(lhs + (gr) * lhs_ld + (gc)));
                (lhs_smem + (cur ^ 1) * 1088)[(c + 0) * 68 + (r)] = v.x;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 1) * 68 + (r)] = v.y;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 2) * 68 + (r)] = v.z;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 3) * 68 + (r)] = v.w;
            }
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(2) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(2) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(2) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(2) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(3) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(3) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(3) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(3) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        if (k0 + 16 < K) {
            {
                const int idx = UNIT_ID + 128;
                const int r = idx / 4;
                const int c = (idx % 4) * 4;
                const i64 gr = cube_m0 + r;
                const i64 gc = (k0 + 16) + c;
                float4 v = (*(const GLOBAL float4*)(lhs + (gr) * lhs_ld + (gc)));
                (lhs_smem + (cur ^ 1) * 1088)[(c + 0) * 68 + (r)] = v.x;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 1) * 68 + (r)] = v.y;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 2) * 68 + (r)] = v.z;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 3) * 68 + (r)] = v.w;
            }
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(4) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(4) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(4) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(4) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(5) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(5) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(5) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(5) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        if (k0 + 16 < K) {
            {
                const int idx = UNIT_ID + 192;
                const int r = idx / 4;
                const int c = (idx % 4) * 4;
                const i64 gr = cube_m0 + r;
                const i64 gc = (k0 + 16) + c;
                float4 v = (*(const GLOBAL float4*)(lhs + (gr) * lhs_ld + (gc)));
                (lhs_smem + (cur ^ 1) * 1088)[(c + 0) * 68 + (r)] = v.x;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 1) * 68 + (r)] = v.y;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 2) * 68 + (r)] = v.z;
                (lhs_smem + (cur ^ 1) * 1088)[(c + 3) * 68 + (r)] = v.w;
            }
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(6) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(6) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(6) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(6) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(7) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(7) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(7) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(7) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        if (k0 + 16 < K) {
            {
                const int idx = UNIT_ID + 0;
                const int r = idx / 16;
                const int c = (idx % 16) * 4;
                const i64 gr = (k0 + 16) + r;
                const i64 gc = cube_n0 + c;
                float4 v = (*(const GLOBAL float4*)(rhs + (gr) * rhs_ld + (gc)));
                (*(float4*)((rhs_smem + (cur ^ 1) * 1088) + (r) * 68 + (c + 0))) = v;
            }
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(8) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(8) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(8) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(8) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(9) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(9) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(9) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(9) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        if (k0 + 16 < K) {
            {
                const int idx = UNIT_ID + 64;
                const int r = idx / 16;
                const int c = (idx % 16) * 4;
                const i64 gr = (k0 + 16) + r;
                const i64 gc = cube_n0 + c;
                float4 v = (*(const GLOBAL float4*)(rhs + (gr) * rhs_ld + (gc)));
                (*(float4*)((rhs_smem + (cur ^ 1) * 1088) + (r) * 68 + (c + 0))) = v;
            }
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(10) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(10) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(10) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(10) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(11) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(11) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(11) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(11) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        if (k0 + 16 < K) {
            {
                const int idx = UNIT_ID + 128;
                const int r = idx / 16;
                const int c = (idx % 16) * 4;
                const i64 gr = (k0 + 16) + r;
                const i64 gc = cube_n0 + c;
                float4 v = (*(const GLOBAL float4*)(rhs + (gr) * rhs_ld + (gc)));
                (*(float4*)((rhs_smem + (cur ^ 1) * 1088) + (r) * 68 + (c + 0))) = v;
            }
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(12) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(12) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(12) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(12) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(13) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(13) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(13) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(13) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        if (k0 + 16 < K) {
            {
                const int idx = UNIT_ID + 192;
                const int r = idx / 16;
                const int c = (idx % 16) * 4;
                const i64 gr = (k0 + 16) + r;
                const i64 gc = cube_n0 + c;
                float4 v = (*(const GLOBAL float4*)(rhs + (gr) * rhs_ld + (gc)));
                (*(float4*)((rhs_smem + (cur ^ 1) * 1088) + (r) * 68 + (c + 0))) = v;
            }
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(14) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(14) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(14) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(14) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag0[i] = (lhs_smem + (cur) * 1088)[(15) * 68 + (part_m0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) lhs_frag1[i] = (lhs_smem + (cur) * 1088)[(15) * 68 + (part_m0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag0[i] = (rhs_smem + (cur) * 1088)[(15) * 68 + (part_n0) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i) rhs_frag1[i] = (rhs_smem + (cur) * 1088)[(15) * 68 + (part_n0 + 32) + i];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_0[i * 4 + j] += lhs_frag0[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_0_1[i * 4 + j] += lhs_frag0[i] * rhs_frag1[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_0[i * 4 + j] += lhs_frag1[i] * rhs_frag0[j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                acc_1_1[i * 4 + j] += lhs_frag1[i] * rhs_frag1[j];
        SYNC_CUBE();
        cur ^= 1;
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            out[(cube_m0 + part_m0 + i) * out_ld + cube_n0 + part_n0 + j] = acc_0_0[4 * i + j];
        }
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            out[(cube_m0 + part_m0 + i) * out_ld + cube_n0 + part_n0 + 32 + j] = acc_0_1[4 * i + j];
        }
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            out[(cube_m0 + part_m0 + 32 + i) * out_ld + cube_n0 + part_n0 + j] = acc_1_0[4 * i + j];
        }
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            out[(cube_m0 + part_m0 + 32 + i) * out_ld + cube_n0 + part_n0 + 32 + j] = acc_1_1[4 * i + j];
        }
    }
}