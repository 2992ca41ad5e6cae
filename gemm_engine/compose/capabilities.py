"""What the global level's parts offer each other (see global_/base.py for the contracts): the
loaders' interfaces and destinations, and what a global level offers its writer. Kept apart from
base.py so that loaders and writers, which base.py composes, need not import it."""
from __future__ import annotations

from .contracts import Capability

# -- loader interfaces and destinations ------------------------------------------------------------
TASK_LOADER = Capability("task loader", "a loader of self-contained task blocks (`tasks`) that the "
                                        "global level may place anywhere")
CHUNK_LOADER = Capability("chunk loader", "a loader of asynchronous 16-byte chunks into a ring slot "
                                          "(declare / issue / commit)")
SWIZZLED_CHUNK_LOADER = Capability("swizzled chunk loader", "a loader of asynchronous 16-byte chunks "
                                                            "into a 128-byte-swizzled ring slot")
TMA_LOADER = Capability("TMA loader", "a loader whose one unit fills a ring slot with bulk tensor copies "
                                      "(TMA) completing on the slot's mbarrier")
UNIT_ROWS_LOADER = Capability("unit-rows loader", "a loader of each unit's own lhs rows into its registers")
K_MAJOR_SMEM = Capability("k-major shared memory", "operands written to shared memory k-major")
GLOBAL_LAYOUT_SMEM = Capability("global-layout shared memory", "operands written to shared memory in "
                                                               "their global layout")
SWIZZLED_SMEM = Capability("swizzled shared memory", "operands written to 128-byte-swizzled shared "
                                                     "memory (wgmma's layout)")
UNIT_REGISTERS = Capability("unit registers", "lhs written to each unit's registers")

# -- what a global level offers its writer ----------------------------------------------------------
SHARED_RING = Capability("shared ring", "a dynamic shared-memory ring that is free once the main loop "
                                        "is done")

STORE_STAGING = Capability("store staging", "a shared-memory buffer of one output tile, free for the writer "
                                            "between tiles, a barrier among the units that store, and one "
                                            "elected unit that issues bulk stores")

# -- what a global level and its batch level offer each other (the Hopper pipeline) -----------------
OWN_TILE_LOOP = Capability("own tile loop", "a global level that runs the batch level's tile loop "
                                            "inside each of its roles (scope.tiles)")
PERSISTENT_TILE_LOOP = Capability("persistent tile loop", "a batch level that hands its global level "
                                                          "the loop over a persistent cube's tiles")
TENSOR_MAPS = Capability("tensor maps", "a batch level that passes each operand's TMA tensor map as a "
                                        "kernel parameter, encoded per call")
OUTPUT_TENSOR_MAP = Capability("output tensor map", "a batch level that passes the output's TMA tensor map "
                                                    "and whether this call's output may use it (out_map, "
                                                    "out_tma)")
