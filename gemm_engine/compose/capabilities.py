"""Every capability a component may offer its neighbours, in one place, by the level that offers
it (see each level's base.py for its contract): a tile's scope, what a stage offers its global
level, the loaders' interfaces and destinations, what a global level offers its writer, and what a
global level and its batch level offer each other.

A capability may declare an *interface*: a `Protocol` whose methods every provider must have,
callable the way its requirers call them (`contracts.interface_gaps`), and the fields its config
must have. A component declaring the capability stands in for the built-in one, whatever its class.
Kept apart from the levels' base.py files so that any level may import them without importing
another level.
"""
from __future__ import annotations

from typing import Iterator, Protocol

from .contracts import Capability


# -- tile scopes: who computes one tile matmul (what a stage must partition its cube into) ----------
class WarpgroupTileInterface(Protocol):
    """What a warpgroup stage calls on its tile beyond `TileMatmul`'s methods: the instruction is
    asynchronous and reads shared memory itself (wgmma). Arguments without a default are passed by
    position, the others by keyword."""

    def execute(self, cfg, d, lhs: str, rhs: str, acc: str, overwrite: bool = False) -> str:
        """``acc`` (+)= the tiles whose shared-memory descriptors are ``lhs`` / ``rhs`` (``overwrite``:
        the accumulators' old values unread)."""

    def fence(self, d) -> str:
        """Before the first instruction of a batch: order earlier accesses to the accumulators."""

    def commit(self, d) -> str:
        """Close the batch issued since the fence."""

    def wait(self, d, pending: int) -> str:
        """Until at most ``pending`` committed batches are still running."""

    def pin(self, cfg, d, acc: str) -> str:
        """After a wait: keep the compiler from moving accesses of ``acc`` across it."""

    def acc_registers(self, cfg) -> Iterator[tuple[int, int, int]]:
        """Per accumulator register: (index, row offset added to `acc_row`, first column of its
        8-column group)."""

    def acc_row(self, cfg) -> str:
        """Expression: the tile row of this unit's first accumulator registers."""

    def acc_elements(self, cfg, acc: str, columns: range | None = None):
        """As every tile's; ``columns``: only the elements of those tile columns."""


class WarpgroupTileConfigFields(Protocol):
    """The fields a warpgroup stage reads of its tile's config (besides `TileConfig`'s)."""

    kind: str               # PTX operand type (f16, bf16, tf32, s8, e4m3, e5m2)
    itemsize: int           # bytes per operand element in shared memory
    lhs_mn_major: bool      # lhs read MN-major (the instruction's transpose bit)
    rhs_mn_major: bool
    acc_regs: int           # accumulator registers per unit


UNIT_SCOPE = Capability("unit tile", "a unit-scoped tile (one unit computes it in registers)")
PLANE_SCOPE = Capability("plane tile", "a plane-scoped tile (one plane, a warp, computes it together)")
WARPGROUP_SCOPE = Capability("warpgroup tile", "a warpgroup tile (four planes issue it together, reading "
                                               "shared memory through descriptors: wgmma)",
                             interface=WarpgroupTileInterface, config=WarpgroupTileConfigFields)

# -- what a stage offers its global level ---------------------------------------------------------
SMEM_STAGE = Capability("shared-memory stage", "a stage that reads both operands from shared-memory "
                                               "arrays and is done with them when it returns")
REGISTER_LHS_STAGE = Capability("register-lhs stage", "a stage that reads lhs from each unit's own "
                                                      "registers (rows the global level loads) and rhs "
                                                      "from shared memory")
CARRIED_FRAGMENTS = Capability("carried fragments", "a shared-memory stage that can load the next ring "
                                                   "slot's first fragments during this slot's last tile "
                                                   "matmuls, after a handover the global level gives it")
GLOBAL_OPERAND_STAGE = Capability("global-operand stage", "a stage that reads both operands where they lie in "
                                                         "global memory, through the global level's references "
                                                         "(leading dimensions known at run time): on a CPU the "
                                                         "caches are the stage")
ASYNC_DESCRIPTOR_STAGE = Capability("asynchronous descriptor stage",
                                    "a stage that issues asynchronous wgmma batches on 128-byte-swizzled "
                                    "shared memory, which the global level waits for")

# -- loader interfaces and destinations ------------------------------------------------------------
TASK_LOADER = Capability("task loader", "a loader of self-contained task blocks (`tasks`) that the "
                                        "global level may place anywhere")
CHUNK_LOADER = Capability("chunk loader", "a loader of asynchronous 16-byte chunks into a ring slot "
                                          "(declare / issue / commit)")
SWIZZLED_CHUNK_LOADER = Capability("swizzled chunk loader", "a loader of asynchronous 16-byte chunks "
                                                            "into a 128-byte-swizzled ring slot")
TMA_LOADER = Capability("TMA loader", "a loader whose one unit fills a ring slot with bulk tensor copies "
                                      "(TMA) completing on the slot's mbarrier")
CONVERTING_LOADER = Capability("converting loader", "a loader whose packed rhs slot arrives by bulk copies and "
                                                    "is converted by the producer's other warps into the "
                                                    "swizzled 16-bit slot the stage reads")
UNIT_ROWS_LOADER = Capability("unit-rows loader", "a loader of each unit's own lhs rows into its registers")
K_MAJOR_SMEM = Capability("k-major shared memory", "operands written to shared memory k-major")
GLOBAL_LAYOUT_SMEM = Capability("global-layout shared memory", "operands written to shared memory in "
                                                               "their global layout")
SWIZZLED_SMEM = Capability("swizzled shared memory", "operands written to 128-byte-swizzled shared "
                                                     "memory (wgmma's layout)")
XOR_SWIZZLED_SMEM = Capability("xor-swizzled shared memory", "operands written to shared memory in their "
                                                             "global layout, rows unpadded, 16-byte chunks "
                                                             "XOR-swizzled (tile/swizzle.py)")
UNIT_REGISTERS = Capability("unit registers", "lhs written to each unit's registers")
QUANTIZED_WEIGHTS = Capability("quantized weights", "a loader that reads packed quantized weights with their "
                                                    "scales and zeros (gemm_engine/quant) and writes their values")

# -- what a global level offers its writer ----------------------------------------------------------
SHARED_RING = Capability("shared ring", "a dynamic shared-memory ring that is free once the main loop "
                                        "is done")

STORE_STAGING = Capability("store staging", "a shared-memory buffer of one output tile, free for the writer "
                                            "between tiles, a barrier among the units that store, and one "
                                            "elected unit that issues bulk stores")

# -- what a global level and its batch level offer each other (the Hopper pipeline) -----------------
OWN_TILE_LOOP = Capability("own tile loop", "a global level that runs the batch level's tile loop "
                                            "inside each of its roles (scope.tiles)")
RAGGED_REDUCTION = Capability("ragged reduction", "a global level with its own tile loop that takes each "
                                                  "tile's reduction from the scope per tile (`CubeScope.k_per_tile`, "
                                                  "`k_origin`) and issues its map loads in the loop marked ``loads``")
PERSISTENT_TILE_LOOP = Capability("persistent tile loop", "a batch level that hands its global level "
                                                          "the loop over a persistent cube's tiles")
TENSOR_MAPS = Capability("tensor maps", "a batch level that passes each operand's TMA tensor map as a "
                                        "kernel parameter, encoded per call")
OUTPUT_TENSOR_MAP = Capability("output tensor map", "a batch level that passes the output's TMA tensor map "
                                                    "and whether this call's output may use it (out_map, "
                                                    "out_tma)")
