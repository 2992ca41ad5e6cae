"""Problem shapes the tests run, derived from the default tiling (64 x 64 x 16 stages on OpenCL):
exact multiples, +-1, primes, 1 x N, M x 1, K = 1, K not a multiple of two stages, batches."""

STAGE = 64
STAGE_K = 16

SHAPES = [  # (batch, m, n, k)
    (1, STAGE, STAGE, 2 * STAGE_K),                 # exact multiples
    (1, STAGE - 1, STAGE + 1, STAGE_K + 1),         # tiling +- 1
    (1, 2 * STAGE + 1, STAGE - 1, 3 * STAGE_K - 1), # several cubes, K not a multiple of 2 stages
    (1, 97, 61, 53),                                # primes
    (1, 1, 70, 40),                                 # 1 x N
    (1, 70, 1, 40),                                 # M x 1
    (1, 50, 60, 1),                                 # K = 1
    (3, 33, 47, 29),                                # batch
]

#: Fewer shapes for the layout sweep (each layout pair is its own kernel).
LAYOUT_SHAPES = [SHAPES[1], SHAPES[3], SHAPES[7]]
LAYOUTS = [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col")]
