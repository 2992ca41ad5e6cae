"""The configuration of the warp-specialized Hopper global level (global_/tma_specialized.py): its
ring, schedule and roles, and the register split between them."""
from __future__ import annotations

from dataclasses import dataclass

from ..tile.wgmma import ATOM_BYTES, WARPGROUP
from .base import GlobalConfig, TileLoopRequest
from .promotion import Promotion

#: Registers per unit after reallocation: the producer keeps few, the consumers take the rest of
#: the 64 Ki register file (2 consumer warpgroups: 128 x 40 + 256 x 232 = 64512). A request the
#: file cannot meet blocks ``setmaxnreg.inc`` for ever: 3 consumers asking for 160 (128 x 40 +
#: 384 x 160 = 66560) hung on the H100; 152 fits (63488). Multiples of 8, at most 240.
PRODUCER_REGISTERS = 40
REGISTER_FILE = 64 * 1024
CONSUMER_REGISTERS = {1: 240, 2: 232, 3: 152}
#: Bytes of one mbarrier.
BARRIER_BYTES = 8


@dataclass(frozen=True)
class TmaSpecializedConfig(GlobalConfig):
    stages: int = 4
    promotion: Promotion | None = None     # global_/promotion.py
    staging: int = 0                       # bytes of the writer's staging tile (STORE_STAGING)
    cluster_m: int = 1                     # cubes of a cluster along M sharing each rhs slot
    schedule: str = "cooperative"          # or "pingpong": copies of the stage take tiles in turns
    split_tail: int = 0                    # most parts of a last-wave tile along K (batch/split_tail.py)
    split_fixup: str = "owner"             # who adds a split tile's parts: "owner" (part 0) or "last"
    converters: int = 0                    # producer warps converting each rhs slot (global_/tma_converting.py)
    skip_idle: bool = True                 # a consumer warpgroup with no rows of a tile issues no wgmma (_skips_rows)

    @property
    def tile_loop(self) -> TileLoopRequest:
        # Ping-pong copies skip each other's slices by one count for all tiles; promotion's loop
        # and the split tail count them once per kernel too.
        ragged = self.groups == 1 and self.promotion is None and not self.split_tail and not self.converters
        return TileLoopRequest(self.cluster_m, self.split_tail, self.split_fixup == "owner", ragged)

    @property
    def groups(self) -> int:
        """Copies of the stage's consumer warpgroups, each on its own tiles."""
        return 2 if self.schedule == "pingpong" else 1

    @property
    def slot_readers(self) -> int:
        """Warpgroups reading each ring slot (those of one copy of the stage)."""
        return self.stage.units // WARPGROUP

    @property
    def consumers(self) -> int:
        """Consumer warpgroups in all."""
        return self.slot_readers * self.groups

    consumer_units = property(lambda self: self.stage.units * self.groups)
    consumer_registers = property(lambda self: CONSUMER_REGISTERS[self.consumers])

    @property
    def units(self) -> int:
        return self.consumer_units + WARPGROUP

    @property
    def ring_bytes(self) -> int:
        return self.stages * self.shared_memory_bytes

    @property
    def dynamic_shared_bytes(self) -> int:
        # The ring, the writer's staging tile (one per copy of the stage), a full and an empty
        # barrier per slot, and slack to align the ring to 1 KiB.
        bars = (3 if self.converters else 2) * self.stages + self.turn_barriers   # converters: a packed-full each
        return self.ring_bytes + self.staging * self.groups + bars * BARRIER_BYTES + ATOM_BYTES

    @property
    def turn_barriers(self) -> int:
        """Ping-pong: one mbarrier per copy, its turn to run a main loop."""
        return self.groups if self.groups > 1 else 0

    @property
    def slot_bytes(self) -> int:
        return self.lhs_loader.slot_bytes + self.rhs_loader.slot_bytes
