"""The card's family names, each with its members best-first: ``algorithm="simple"`` (and
``"double_buffering"``, ``"specialized"``, ``"ordered"``) runs the first member whose condition
holds and that sets up on the device; a member whose condition says no is tried after every other
(the caller named the family: it runs whatever member can). Each member stays reachable by its own
registered name. The measurements behind each order: bench/SELECTION_NOTES.md, "Family members".
"""
from __future__ import annotations

from .conditions import wgmma_worth_it
from .rules import Rule

FAMILIES: dict[str, tuple[Rule, ...]] = {
    # One shared-memory stage: load, barrier, compute, barrier.
    "simple": (
        Rule("simple_mma", "mma.sync tensor cores (sm_80+: f16, bf16, int8, tf32 opted in): f16 4096^3 "
                           "1.93 ms against register FMA's 4.09"),
        Rule("simple_dmma", "float64 tensor cores (sm_80+): 1.6-2.1x simple_unit (f64 4096^3 7.94 ms "
                            "against 12.87)"),
        Rule("simple_unit", "register FMA, every backend and dtype"),
    ),
    # The next K slice loaded under the current one: two stages, or the cp.async / wgmma ring.
    "double_buffering": (
        Rule("pipelined_wgmma", "the Hopper ring of wgmma stages: f16 4096^3 0.256 ms against "
                                "pipelined_mma's 0.473 and double_buffering_mma's 1.63", wgmma_worth_it),
        Rule("pipelined_mma", "the cp.async ring of mma.sync stages (sm_80+): f16 1000^3 0.053 ms against "
                              "double_buffering_mma's 0.243"),
        Rule("pipelined_dmma", "the cp.async ring of float64 tensor-core stages (sm_80+): f64 4096^3 4.92 "
                               "ms against register FMA's 12.87"),
        Rule("double_buffering_mma", "two stages of mma.sync tiles (sm_80+): f16 4096^3 1.63 ms against "
                                     "register FMA's 4.07"),
        Rule("double_buffering_unit", "two stages of register FMA, every backend and dtype"),
    ),
    # Load-only units (a producer) beside the compute units.
    "specialized": (
        Rule("specialized_wgmma", "the Hopper TMA producer warpgroup and wgmma consumers (sm_90a): bf16 "
                                  "4096^3 0.231 ms against register FMA's 4 ms and more"),
        Rule("specialized_unit", "load-only units beside register-FMA units, every backend and dtype"),
    ),
    # lhs loaded by each unit straight into its registers: register tiles only, since no
    # tensor-core stage reads lhs from unit registers (the composition is refused).
    "ordered": (
        Rule("ordered_unit", "its one member: register tiles, every backend and dtype"),
    ),
}
