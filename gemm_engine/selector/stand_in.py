"""Stand-ins: what a call of the engine's own choice runs while the chosen kernel builds in the
background (call/plan.py `Planner.stand_in`, runtime/background.py).

A stand-in is picked for its compile time, not its speed: it runs one call (the first of a problem
class, whose caller waits for the stand-in's compile instead of the chosen kernel's). Small tiles keep the
unrolled code, and with it NVRTC's time, small: ``simple_mma`` with 2 x 2 tiles a plane compiles in
0.15-0.35 s with a fused epilogue where the chosen Hopper kernel takes 4-11 s; ``simple_unit`` with
2 x 2 tiles in 32 x 32 stages in about 0.12 s. The measurements: bench/SELECTION_NOTES.md,
"Stand-in kernels".
"""
from __future__ import annotations

#: (algorithm, knobs), the first that sets up for a problem stands in (call/plan.py `stand_in`); the
#: chosen algorithm gets none where it is of one of these kinds (its compile is as short).
STAND_INS = (
    ("simple_mma", dict(partition_m=2, partition_n=2)),
    ("simple_unit", dict(tile_m=2, tile_n=2, stage_m=32, stage_n=32, stage_k=8, vector_width=1)),
)
