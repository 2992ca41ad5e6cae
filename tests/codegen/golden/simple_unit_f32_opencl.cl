/* gemm_engine: simple_unit (gemm_engine.algorithms.simple.SimpleUnitAlgorithm) */
/* build: OpenCL C 1.2 (clBuildProgram options "-cl-std=CL1.2") */
#define KERNEL __kernel
#define LAUNCH_BOUNDS(n) __attribute__((reqd_work_group_size(n, 1, 1)))
#define LAUNCH_BOUNDS_MIN(n, c) __attribute__((reqd_work_group_size(n, 1, 1)))
#define GLOBAL __global
#define LOCAL __local
#define RESTRICT restrict
#define INLINE static inline
#define UNIT_ID ((int)get_local_id(0))
#define CUBE_ID ((i64)get_group_id(0))
#define CUBE_COUNT ((i64)get_num_groups(0))
#define SYNC_CUBE() barrier(CLK_LOCAL_MEM_FENCE)
#define ALIGN16 __attribute__((aligned(16)))
#define FLOAT_AS_UINT(x) as_uint(x)
#define UINT_AS_FLOAT(x) as_float(x)
typedef long i64;
typedef ulong u64;
KERNEL LAUNCH_BOUNDS(256) void gemm_engine_kernel(
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
    LOCAL float lhs_smem[1088] ALIGN16;
    LOCAL float rhs_smem[1088] ALIGN16;
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
    /* == global: SimpleGlobalMatmul 'simple_global': check_m=1 check_n=1 check_k=1 | lhs VectorLoader rhs VectorLoader
       writer DirectWriter == */
    /* == stage: UnitPartitionedStage 'unit_partitioned_stage': stage_m=64 stage_n=64 stage_k=16 units=256 lhs_ld=68
       rhs_ld=68 lhs_k_contiguous=0 rhs_k_contiguous=0 units_m=16 units_n=16 partition_m=1 partition_n=1 strided=0 |
       tile RegisterTile: tile_m=4 tile_n=4 tile_k=1 compute=f32 smem= rhs_smem= smem_pad=0 plane=32 == */
    const int part_m0 = (UNIT_ID / 16) * 4;
    const int part_n0 = (UNIT_ID % 16) * 4;
    float acc[16];
    float lhs_frag[4];
    float rhs_frag[4];
    #pragma unroll
    for (int i = 0; i < 16; ++i) acc[i] = 0.0f;
    for (i64 k0 = 0; k0 < K; k0 += 16) {
        {
            const int idx = UNIT_ID + 0;
            const int r = idx / 8;
            const int c = (idx % 8) * 2;
            const i64 gr = cube_m0 + r;
            const i64 gc = k0 + c;
            float2 v = (*(const GLOBAL float2*)(lhs + ((gr < M ? gr : M - 1)) * lhs_ld + ((gc < K ? gc : K - 2))));
            const bool inside = gr < M && gc < K;
            v.x = inside ? v.x : (float)0;
            v.y = inside ? v.y : (float)0;
            lhs_smem[(c + 0) * 68 + (r)] = v.x;
            lhs_smem[(c + 1) * 68 + (r)] = v.y;
        }
        {
            const int idx = UNIT_ID + 256;
            const int r = idx / 8;
            const int c = (idx % 8) * 2;
            const i64 gr = cube_m0 + r;
            const i64 gc = k0 + c;
            float2 v = (*(const GLOBAL float2*)(lhs + ((gr < M ? gr : M - 1)) * lhs_ld + ((gc < K ? gc : K - 2))));
            const bool inside = gr < M && gc < K;
            v.x = inside ? v.x : (float)0;
            v.y = inside ? v.y : (float)0;
            lhs_smem[(c + 0) * 68 + (r)] = v.x;
            lhs_smem[(c + 1) * 68 + (r)] = v.y;
        }
        {
            const int idx = UNIT_ID + 0;
            const int r = idx / 32;
            const int c = (idx % 32) * 2;
            const i64 gr = k0 + r;
            const i64 gc = cube_n0 + c;
            float2 v = (*(const GLOBAL float2*)(rhs + ((gr < K ? gr : K - 1)) * rhs_ld + ((gc < N ? gc : N - 2))));
            const bool inside = gr < K && gc < N;
            v.x = inside ? v.x : (float)0;
            v.y = inside ? v.y : (float)0;
            (*(__local float2*)(rhs_smem + (r) * 68 + (c + 0))) = v;
        }
        {
            const int idx = UNIT_ID + 256;
            const int r = idx / 32;
            const int c = (idx % 32) * 2;
            const i64 gr = k0 + r;
            const i64 gc = cube_n0 + c;
            float2 v = (*(const GLOBAL float2*)(rhs + ((gr < K ? gr : K - 1)) * rhs_ld + ((gc < N ? gc : N - 2))));
            const bool inside = gr < K && gc < N;
            v.x = inside ? v.x : (float)0;
            v.y = inside ? v.y : (float)0;
            (*(__local float2*)(rhs_smem + (r) * 68 + (c + 0))) = v;
        }
        SYNC_CUBE();
        #pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            #pragma unroll
            for (int i = 0; i < 4; ++i) lhs_frag[i] = lhs_smem[(kk) * 68 + (part_m0) + i];
            #pragma unroll
            for (int i = 0; i < 4; ++i) rhs_frag[i] = rhs_smem[(kk) * 68 + (part_n0) + i];
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j)
                    acc[i * 4 + j] += lhs_frag[i] * rhs_frag[j];
        }
        SYNC_CUBE();
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (cube_m0 + part_m0 + i < M && cube_n0 + part_n0 + j < N)
                out[(cube_m0 + part_m0 + i) * out_ld + cube_n0 + part_n0 + j] = acc[4 * i + j];
        }
    }
}