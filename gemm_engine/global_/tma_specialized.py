"""Warp-specialized Hopper global matmul: a TMA producer warpgroup feeds wgmma consumer warpgroups
through a ring of shared-memory slots guarded by mbarriers, over every tile a persistent cube owns.

CUDA sm_90a only. The cube's units are the stage's consumer warpgroups (``UNIT_ID`` below
``consumers``, so the warpgroup stage sees its own units as usual) and one producer warpgroup after
them. Roles, each one branch of a single if/else (what ``setmaxnreg`` needs):

* producer: gives registers back (``setmaxnreg.dec``); one unit loops over the cube's tiles and
  their K slices: wait until slot s is *empty*, raise its *full* barrier's expected bytes, issue the
  TMA copies of both operands into it (`TmaLoader`), move on. It runs up to ``stages`` slices ahead
  of the consumers, across tile boundaries: the next tile's first slices load while the consumers
  store this one's output.
* consumers: take registers (``setmaxnreg.inc``); for each tile, zero the accumulators, then per K
  slice wait until its slot is *full*, issue the stage's wgmma batch on it, wait until at most one
  batch is pending (so the previous slice's batch is done) and release that slice's slot (one
  arrival per warpgroup on its *empty* barrier); after the last slice wait for everything, release
  the last slot, and store through the writer (the fused epilogue included). The level keeps the
  writer's staging tile after the ring where the writer asks for one (`STORE_STAGING`: TmaStoreWriter,
  whose TMA stores run on under the next tile's main loop); the consumer units meet on named
  barrier 1 for it, and unit 0 issues the stores (or every unit copies the rows: the writer's).

Schedules (``schedule``): *cooperative*, the consumer warpgroups are the stage's units and share
each tile; *pingpong*, two copies of a one-warpgroup stage take the cube's tiles in turns (copy g
the g-th, then every second: ``scope.tiles(body, first, step)``), each with its own staging tile
and named barrier, so one copy's epilogue runs while the other's wgmma batches keep the tensor cores
busy. The producer is the same: it loads the tiles in order, so each copy's slices are a run of
``k_steps`` slots in the ring, after the other copy's; each slot has one reader warpgroup. The copies
take their main loops in turns (two *turn* mbarriers: a copy waits for the other to be past its
previous tile's slices, and tells it when it is past its own): a parity wait tells only this phase
from the one before, so no consumer may wait on a slot more than one phase ahead of it, as a copy
skipping the other's ``k_steps`` slices otherwise would (CUTLASS orders its ping-pong the same way).

Clusters (``cluster_m`` = 2): the batch level launches cubes in clusters of two along M (tiles one
above the other, the same rhs column block, as many tiles each: `CubeScope.cluster_m`). Each
cube's producer loads its own lhs tile and half of the rhs tile, multicast into both cubes
(`TmaLoader` ``shared_by``), so each rhs block is read from L2 once per pair. A slot may be filled
again only when both cubes' consumers are done with it: every consumer warpgroup arrives on the
*empty* barrier of both cubes (``consumers * 2`` arrivals a phase), and the producer's wait acquires
at cluster scope. The barriers are initialized before a cluster-wide meeting, and no cube leaves
before its partner is done arriving on its barriers (a second meeting at the end).

Barrier phases: slot ``it % stages`` is in phase ``(it / stages) & 1``; consumers wait for it on
*full*, the producer for the other on *empty* (fresh: complete). No cube-wide barrier after the start.

The tile loop belongs to the batch level (`TmaPersistentBatchMatmul`: `PERSISTENT_TILE_LOOP`): each
role calls ``scope.tiles(body)`` once, and the batch level renders the loop over the cube's tiles.
"""
from __future__ import annotations

from dataclasses import replace

from ..codegen.dialect import Dialect
from ..compose.contracts import Requirement
from ..errors import SetupError
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..tile.wgmma import ATOM_BYTES, WARPGROUP, check_wgmma_device
from .base import GlobalMatmul, StoreStaging
from ..compose.capabilities import (ASYNC_DESCRIPTOR_STAGE, OWN_TILE_LOOP, PERSISTENT_TILE_LOOP, RAGGED_REDUCTION,
                                    STORE_STAGING, TMA_LOADER)
from .pipelined import check_ring_fits, edge_checks
from .simple import operand_tiles
from .split_fixup import split_store
from .promotion import check_promotion
from .tma_specialized_config import BARRIER_BYTES, CONSUMER_REGISTERS, PRODUCER_REGISTERS, TmaSpecializedConfig
from .read.swizzled_loader import SwizzledOperandTile

#: Named barrier of the consumer units around a split tile's partial sums (1: the writer's).
_SPLIT_BARRIER = 2
#: The widest tile whose idle warpgroups skip their wgmma by default (`_skips_rows`).
IDLE_SKIP_MAX_N = 128
#: The first named barrier of one consumer warpgroup each, after a tile it had no rows of (3 to 5).
_IDLE_BARRIER = 3


class TmaSpecializedGlobalMatmul(GlobalMatmul):
    name = "tma_specialized_global"
    knobs = (Knob("stages", 4, "slots of the shared-memory ring"),
             Knob("cluster_m", 1, "cubes of a cluster along M that share each rhs slot, multicast (1 or 2)"),
             Knob("promote_behind", False, "promoting kernels (fp8, block scales): add each slice into the "
                                           "float32 sums under the next slice's wgmma (a third accumulator set)"),
             Knob("schedule", "cooperative", "consumer warpgroups sharing each tile (cooperative) or two "
                                             "one-warpgroup copies taking tiles in turns (pingpong)",
                  choices=("cooperative", "pingpong")),
             Knob("split_tail", 0, "split each tile of the last, partial wave along K into up to this many parts "
                                   "that fill the device, partial sums added across cubes (0, 1: no split)"),
             Knob("idle_warpgroups", "auto", "a consumer warpgroup with no rows of a tile inside the problem (a group's "
                  "last tile, a ragged M): skips its wgmma, only waiting for and releasing the slots (skip), computes "
                  "like the others (compute), or auto: skip in tiles of at most 128 columns that do not promote",
                  choices=("auto", "skip", "compute")),
             Knob("split_fixup", "owner", "who adds a split tile's sums: its first part, waiting for the others "
                  "(owner; a co-resident launch), or the last to finish (last; a plain launch)", choices=("owner", "last")))
    provides = frozenset({OWN_TILE_LOOP, STORE_STAGING, RAGGED_REDUCTION})
    requires = (Requirement.of("stage", ASYNC_DESCRIPTOR_STAGE),
                Requirement.of("lhs_loader", TMA_LOADER, why="its producer unit issues whole-slot TMA copies"),
                Requirement.of("rhs_loader", TMA_LOADER, why="its producer unit issues whole-slot TMA copies"),
                Requirement.of("batch", PERSISTENT_TILE_LOOP,
                               why="each warp role loops over the cube's tiles itself"))
    #: Every unit runs its role once per kernel, over all the cube's tiles; the batch level's loop
    #: is rendered inside each role, never around the body.
    reentrant = False
    occupancy = 1          # one cube per multiprocessor: setmaxnreg needs the register cap at entry
    applies_block_scales = True

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> TmaSpecializedConfig:
        check_wgmma_device(self.name, dialect, cuda_only=True)
        stages, cluster_m = selection.stages, selection.cluster_m
        if cluster_m not in (1, 2):
            raise SetupError(self.name, f"cluster_m={cluster_m!r}: clusters of 1 or 2 cubes along M")
        schedule = selection.schedule
        if schedule not in ("cooperative", "pingpong"):
            raise SetupError(self.name, f"schedule={schedule!r}; expected 'cooperative' or 'pingpong'")
        if stages < 2:
            raise SetupError(self.name, f"stages={stages}: a ring needs at least 2")
        split = selection.split_tail
        if split < 0:
            raise SetupError(self.name, f"split_tail={split!r}: a count of parts (0 or 1: no split)")
        split = split if split > 1 else 0
        if split and (cluster_m != 1 or schedule != "cooperative"):
            raise SetupError(self.name, f"split_tail with cluster_m={cluster_m}, schedule={schedule!r}: a part of a "
                                        "tile is one cube's slices, computed by all its consumers "
                                        "(cluster_m=1, schedule='cooperative')")
        stage = self.setup_stage(problem, selection, dialect)
        consumers = stage.units // WARPGROUP * (2 if schedule == "pingpong" else 1)
        if consumers not in CONSUMER_REGISTERS:
            why = " (ping-pong runs two copies of the stage: one warpgroup each)" if schedule == "pingpong" else ""
            raise SetupError(self.name, f"{consumers} consumer warpgroups{why}; expected 1 to 3")
        promotion = check_promotion(self.name, problem, stage, selection.promote_behind,
                                    CONSUMER_REGISTERS[consumers])
        check_m, check_n, check_k = edge_checks(problem, stage)
        lhs, rhs = operand_tiles(problem, stage, SwizzledOperandTile,
                                 lhs={"swizzle": stage.lhs_layout}, rhs={"swizzle": stage.rhs_layout})
        cfg = TmaSpecializedConfig(stage=stage, lhs_loader=self.lhs_loader.setup(lhs, 1, selection),
                                   rhs_loader=self.rhs_loader.setup(rhs, 1, selection, shared_by=cluster_m),
                                   out=problem.out, check_m=check_m, check_n=check_n, check_k=check_k,
                                   stages=stages, writer=self.writer.setup(problem, selection, dialect),
                                   promotion=promotion, cluster_m=cluster_m, schedule=schedule,
                                   split_tail=split, split_fixup=selection.split_fixup,
                                   skip_idle=(promotion is None and stage.stage_n <= IDLE_SKIP_MAX_N
                                              if selection.idle_warpgroups == "auto"
                                              else selection.idle_warpgroups == "skip"),
                                   epilogue=problem.epilogue)      # the staging tile's size follows it
        cfg = replace(cfg, staging=self.writer.staging_bytes(cfg))
        check_ring_fits(self.name, cfg, dialect)
        return cfg

    def shared_declarations(self, cfg: TmaSpecializedConfig, d: Dialect) -> str:
        st, s = cfg.stage, cfg.stages
        lb = cfg.lhs_loader.smem_bytes
        return "\n".join([
            d.dynamic_shared("gemm_ring"),
            f"const unsigned ring_base = ({d.shared_address('gemm_ring')} + {ATOM_BYTES - 1}u) & ~{ATOM_BYTES - 1}u;",
            "const unsigned lhs_ring = ring_base;",
            f"const unsigned rhs_ring = ring_base + {s * lb}u;",
            *([f"const unsigned stage_out = ring_base + {cfg.ring_bytes}u;",
               f"unsigned char* const stage_out_ptr = gemm_ring + (stage_out - {d.shared_address('gemm_ring')});"]
              if cfg.staging else []),
            # full[i] at bars + 8 i, empty[i] at bars + 8 (stages + i)
            f"const unsigned ring_bars = ring_base + {cfg.ring_bytes + cfg.staging * cfg.groups}u;",
            f"const unsigned long long lhs_desc0 = {st.lhs_layout.descriptor('lhs_ring')};",
            f"const unsigned long long rhs_desc0 = {st.rhs_layout.descriptor('rhs_ring')};",
        ])

    @staticmethod
    def _full(slot: str) -> str:
        return f"(ring_bars + {BARRIER_BYTES}u * ({slot}))"

    def _empty(self, cfg: TmaSpecializedConfig, slot: str) -> str:
        return f"(ring_bars + {BARRIER_BYTES}u * ({cfg.stages}u + ({slot})))"

    def _turn(self, cfg: TmaSpecializedConfig, group: str) -> str:
        return f"(ring_bars + {BARRIER_BYTES}u * ({2 * cfg.stages}u + ({group})))"

    def _packed_full(self, cfg: TmaSpecializedConfig, slot: str) -> str:
        """Converters: the mbarrier on which slot ``slot``'s packed words arrive (bulk copies)."""
        return f"(ring_bars + {BARRIER_BYTES}u * ({2 * cfg.stages + cfg.turn_barriers}u + ({slot})))"

    def _turn_wait(self, cfg: TmaSpecializedConfig, d: Dialect) -> list[str]:
        """Ping-pong, before a copy's main loop: its n-th tile waits until the other copy is past the
        slices of the tile before (turn phase n - 1 + pp_group; the first tile of copy 0 waits for
        nothing)."""
        if cfg.groups == 1:
            return []
        return [f"if (turn + pp_group > 0) {d.mbarrier_wait(self._turn(cfg, 'pp_group'), '(turn + pp_group - 1) & 1')}"]

    def _turn_pass(self, cfg: TmaSpecializedConfig, d: Dialect) -> list[str]:
        """Ping-pong, after a copy's main loop (every unit past its waits): the other copy's turn."""
        if cfg.groups == 1:
            return []
        return [f"if (UNIT_ID % {cfg.stage.units} == 0) {d.mbarrier_arrive(self._turn(cfg, '1 - pp_group'))}",
                "++turn;"]

    @staticmethod
    def _k_bounds(scope) -> tuple[str, str]:
        """The slices of the unit at hand: the split-tail schedule's, or the whole tile's."""
        return scope.split_tail.k_range if scope.split_tail is not None else ("0", "k_steps")

    def _producer(self, cfg: TmaSpecializedConfig, d: Dialect, scope) -> str:
        s, sk, lb = cfg.stages, cfg.stage.stage_k, cfg.lhs_loader.smem_bytes
        lo, hi = self._k_bounds(scope)
        k0 = f"step * {sk}" if scope.k_origin == "0" else f"(int)({scope.k_origin}) + step * {sk}"
        return self._producer_roles(cfg, d, scope, "\n".join([
            *self._tile_steps(cfg, scope),
            f"for (int step = {lo}; step < {hi}; ++step, ++it) {{",
            f"const unsigned slot = it % {s}u;",
            d.mbarrier_wait(self._empty(cfg, "slot"), f"((it / {s}u) & 1u) ^ 1u"),
            d.mbarrier_arrive_expect_tx(self._full("slot"), f"{cfg.slot_bytes}u"),
            f"const int k0 = {k0};",
            self.lhs_loader.issue(cfg.lhs_loader, d, scope.lhs.tensor_map, scope.lhs.batch,
                                  f"lhs_ring + slot * {lb}u", self._full("slot"), f"(int){scope.m0}", "k0"),
            self._rhs_issue(cfg, d, scope), "}"]))

    def _rhs_issue(self, cfg: TmaSpecializedConfig, d: Dialect, scope) -> str:
        return self.rhs_loader.issue(cfg.rhs_loader, d, scope.rhs.tensor_map, scope.rhs.batch,
                                     f"rhs_ring + slot * {cfg.rhs_loader.smem_bytes}u", self._full("slot"), "k0",
                                     f"(int){scope.n0}", rank=scope.cluster_rank)

    def _producer_roles(self, cfg: TmaSpecializedConfig, d: Dialect, scope, issue: str) -> str:
        """The producer warpgroup: its first unit runs ``issue`` over every tile's slices."""
        return "\n".join([d.setmaxnreg(False, PRODUCER_REGISTERS), f"if (UNIT_ID == {cfg.consumer_units}) {{",
                          "unsigned it = 0;", scope.tiles(issue, slices="k_steps", loads=True), "}"])

    @staticmethod
    def _k_steps(cfg, scope) -> str:
        """The declaration of ``k_steps``, the K slices of a tile (of every tile but where the scope
        gives each its own reduction: `_tile_steps`)."""
        return f"const int k_steps = (int)(({scope.k} + {cfg.stage.stage_k - 1}) / {cfg.stage.stage_k});"

    def _tile_steps(self, cfg, scope) -> list[str]:
        """At the start of a role's tile: ``k_steps`` of this tile, where tiles differ in it."""
        return [self._k_steps(cfg, scope)] if scope.k_per_tile else []

    @staticmethod
    def _skips_rows(cfg: TmaSpecializedConfig) -> bool:
        """Whether a consumer warpgroup may find all its rows of a tile past the problem's (a group's
        last tile, a ragged M: cooperative warpgroups stacked along M) and then skips its wgmma
        (the ``idle_warpgroups`` knob). By default only in tiles of at most 128 columns that do not
        promote: grouped bf16 128 x 128 tiles ran 6.5-8% faster skipping on an H200 (64 experts, a
        third of the tiles half idle), 128 x 256 ones 1-6% and promoting fp8 ones 4-10% slower
        (bench/SELECTION_NOTES.md "Idle warpgroups")."""
        return cfg.skip_idle and cfg.check_m and cfg.groups == 1 and getattr(cfg.stage, "warpgroups_m", 1) > 1

    def _tile_rows(self, cfg: TmaSpecializedConfig, scope) -> list[str]:
        """At a consumer's tile's start: ``tile_rows``, its rows inside the problem."""
        return [f"const i64 tile_rows = (i64)({scope.m}) - (i64)({scope.m0});"] if self._skips_rows(cfg) else []

    def _rows_or_idle(self, cfg: TmaSpecializedConfig, d: Dialect, scope, main: list[str]) -> list[str]:
        """``main`` (a consumer's loop over its slices, releasing every slot it reads) where this
        warpgroup has rows of the tile inside the problem; else the same slots only waited for and
        released, no wgmma issued. Two loops, not a condition around each batch: ptxas serializes a
        promoting loop's wgmma when its accumulators may be skipped."""
        if not self._skips_rows(cfg):
            return main
        lo, hi = self._k_bounds(scope)
        # Only the first warp waits for each slot and releases it: another, waiting too, could lag
        # behind those releases past the slot's next fill and read its parity a phase off (a hang).
        # The warpgroup meets after, so no warp starts the next tile before the first warp is done.
        idle = [f"if (UNIT_ID % {WARPGROUP} < 32) {{",
                f"for (int step = {lo}; step < {hi}; ++step, ++it) {{",
                *self._wait_full(cfg, d), self._release(cfg, d, "slot"), "}",
                f"}} else if ({hi} > {lo}) {{\nit += (unsigned)({hi} - {lo});\n}}",
                d.sync_units(f"{_IDLE_BARRIER} + UNIT_ID / {WARPGROUP}", WARPGROUP)]
        return [f"if ({self.stage.first_row(cfg.stage)} < tile_rows) {{", *main, "} else {", *idle, "}"]

    def _wait_full(self, cfg: TmaSpecializedConfig, d: Dialect) -> list[str]:
        """A consumer's wait until slot ``it % stages`` (declared as ``slot``) is full."""
        return [f"const unsigned slot = it % {cfg.stages}u;", d.mbarrier_wait(self._full("slot"), f"(it / {cfg.stages}u) & 1u")]

    def _slot_batch(self, cfg: TmaSpecializedConfig, d: Dialect, listener, fresh: bool = False,
                    acc: str = "") -> list[str]:
        """A consumer's step: wait until slot ``it % stages`` is full, then issue its wgmma batch
        (``fresh``: overwriting accumulator set ``acc`` of the stage's fragments, for promotion)."""
        lb, rb = cfg.lhs_loader.smem_bytes >> 4, cfg.rhs_loader.smem_bytes >> 4
        return [*self._wait_full(cfg, d),
                self.stage.execute(cfg.stage, d, f"(lhs_desc0 + (unsigned long long)(slot * {lb}u))",
                                   f"(rhs_desc0 + (unsigned long long)(slot * {rb}u))", listener, fresh=fresh,
                                   acc=acc)]

    def _release(self, cfg: TmaSpecializedConfig, d: Dialect, slot: str) -> str:
        """Statement: this warpgroup is done reading ``slot`` (one arrival on its *empty* barrier, in
        every cube of the cluster whose producer fills it)."""
        bar = self._empty(cfg, slot)
        arrivals = (d.mbarrier_arrive(bar) if cfg.cluster_m == 1 else
                    "{ " + " ".join(d.mbarrier_arrive_remote(bar, f"{r}u") for r in range(cfg.cluster_m)) + " }")
        return f"if (UNIT_ID % {WARPGROUP} == 0) {arrivals}"

    def _consumer(self, cfg: TmaSpecializedConfig, d: Dialect, scope, listener) -> str:
        if cfg.promotion is not None:
            return self._promoting_consumer(cfg, d, scope, listener)
        st, s = cfg.stage, cfg.stages
        release = self._release(cfg, d, f"(it - 1u) % {s}u")
        lo, hi = self._k_bounds(scope)
        loop = [f"for (int step = {lo}; step < {hi}; ++step, ++it) {{",
                *self._slot_batch(cfg, d, listener),
                # The batch of the slice before this one is done: its slot may be filled again.
                self.stage.wait(st, d, 1),
                f"if (step > {lo}) {{\n{release}\n}}",
                "}"]
        # A tile of no slices (an empty group's reduction) read no slot: none to release.
        last = f"if ({hi} > {lo}) {{\n{release}\n}}" if scope.k_per_tile else release
        if self._skips_rows(cfg):      # cooperative: no turn to pass
            main = [*self._rows_or_idle(cfg, d, scope, [*loop, self.stage.wait(st, d, 0), last]),
                    self.stage.finish(st, d)]
        else:
            main = [*loop, *self._turn_pass(cfg, d), self.stage.finish(st, d), last]
        tile = "\n".join([
            *self._tile_steps(cfg, scope),
            *self._tile_rows(cfg, scope),
            self.stage.init_accumulators(st, d),
            *self._turn_wait(cfg, d),
            *main,
            *self._store(cfg, d, scope, listener),
        ])
        return "\n".join([
            d.setmaxnreg(True, cfg.consumer_registers),
            self.stage.declare(st, d),
            *self._own_tiles(cfg, scope, tile),
            self.writer.after_tiles(self, cfg, d),
        ])

    @staticmethod
    def _own_tiles(cfg: TmaSpecializedConfig, scope, tile: str) -> list[str]:
        """A consumer's loop over its tiles, ``it`` counting its slices: all the cube's tiles, or
        (ping-pong) copy ``pp_group``'s turns, skipping the other copy's slices after each."""
        if cfg.groups == 1:
            return ["unsigned it = 0;", scope.tiles(tile, slices="k_steps")]
        skip = f"it += {cfg.groups - 1}u * (unsigned)k_steps;"
        return [f"const int pp_group = UNIT_ID / {cfg.stage.units};",
                "unsigned it = (unsigned)pp_group * (unsigned)k_steps;",
                "unsigned turn = 0;            // this copy's tiles so far",
                scope.tiles(f"{tile}\n{skip}", first="pp_group", step=cfg.groups)]

    def _promoting_consumer(self, cfg: TmaSpecializedConfig, d: Dialect, scope, listener) -> str:
        """The consumer loop with promotion: each slice's batch overwrites the accumulators, is
        waited for (its slot released at once), and is added into float32 sums times the slice's
        block scales (loaded while the batch runs); the consumer warpgroups overlap one's
        additions with the others' wgmma, and with its own next batch where it promotes behind
        (global_/promotion.py)."""
        st, s = cfg.stage, cfg.stages
        tile = "\n".join([
            *self._tile_rows(cfg, scope),
            self.stage.init_promoted(st, d),
            *self._turn_wait(cfg, d),
            *self._rows_or_idle(cfg, d, scope, cfg.promotion.main_loop(
                self.stage, st, d, scope, lambda acc: ["{", *self._slot_batch(cfg, d, listener, True, acc), "}"],
                lambda i: self._release(cfg, d, f"({i}) % {s}u"), *self._k_bounds(scope))),
            *self._turn_pass(cfg, d),
            self.stage.take_promoted(st, d),
            *self._store(cfg, d, scope, listener),
        ])
        return "\n".join([
            d.setmaxnreg(True, cfg.consumer_registers),
            self.stage.declare(st, d),
            self.stage.declare_promoted(st, d, cfg.promotion.behind),
            *self._own_tiles(cfg, scope, tile),
            self.writer.after_tiles(self, cfg, d),
        ])

    def _store(self, cfg: TmaSpecializedConfig, d: Dialect, scope, listener) -> list[str]:
        """After a unit's last slice: the output tile through the writer; split tail: the parts'
        sums added first (global_/split_fixup.py `split_store`)."""
        write = [*self.before_store(listener), self.write_output(cfg, d, scope)]
        if not cfg.split_tail:
            return write
        rows = f"(int)({scope.m} - {scope.m0})" if cfg.check_m else ""   # only rows inside M move
        return split_store(self.stage, cfg.stage, d, scope.split_tail, d.sync_units(_SPLIT_BARRIER, cfg.stage.units),
                           rows, write, cfg.split_fixup)

    def store_staging(self, cfg: TmaSpecializedConfig, d: Dialect) -> StoreStaging | None:
        """The writer's staging tile after the ring; the consumer units meet on named barrier 1."""
        if not cfg.staging:
            return None
        units = cfg.stage.units
        if cfg.groups == 1:
            return StoreStaging("stage_out", "stage_out_ptr", cfg.staging, d.sync_units(1, units), "UNIT_ID == 0", "UNIT_ID", units)
        # Ping-pong: each copy of the stage its own staging tile, named barrier and elected unit.
        return StoreStaging(f"(stage_out + (unsigned)pp_group * {cfg.staging}u)", f"(stage_out_ptr + pp_group * "
                            f"{cfg.staging})", cfg.staging, d.sync_units("1 + pp_group", units),
                            f"UNIT_ID % {units} == 0", f"(UNIT_ID % {units})", units)

    def body(self, cfg: TmaSpecializedConfig, d: Dialect, scope) -> str:
        if scope.tiles is None:
            raise SetupError(self.name, "the batch level hands no tile loop (it needs one providing "
                                        f"{PERSISTENT_TILE_LOOP})")
        if scope.cluster_m != cfg.cluster_m:
            raise SetupError(self.name, f"cluster_m={cfg.cluster_m}, but the batch level launches clusters of "
                                        f"{scope.cluster_m} along M (the cubes sharing a multicast slot must be "
                                        f"launched together, on tiles of the same rhs block)")
        if (scope.split_tail is not None) != bool(cfg.split_tail):
            raise SetupError(self.name, f"split_tail={cfg.split_tail}, but the batch level "
                                        f"{'splits' if scope.split_tail is not None else 'does not split'} its tail tiles")
        if cfg.split_tail and scope.split_tail.partial_words != self.stage.partial_words(cfg.stage):
            raise SetupError(self.name, f"the batch level's partial slots hold {scope.split_tail.partial_words} words; "
                                        f"the stage's partial sums are {self.stage.partial_words(cfg.stage)}")
        if scope.k_per_tile and not cfg.tile_loop.ragged_reduction:
            raise SetupError(self.name, "tiles of their own reductions (a grouped 'k' layout) run the cooperative "
                                        "schedule without promotion, split tail or converters: ping-pong copies "
                                        "skip each other's slices by one count for every tile")
        s = cfg.stages
        listener = self.chain()
        inits = "\n".join([d.mbarrier_init(self._full(str(i)), 1 + cfg.converters) + "\n"
                           + d.mbarrier_init(self._empty(cfg, str(i)), cfg.slot_readers * cfg.cluster_m) for i in range(s)]
                          + [d.mbarrier_init(self._turn(cfg, str(g)), 1) for g in range(cfg.turn_barriers)]
                          + [d.mbarrier_init(self._packed_full(cfg, str(i)), 1) for i in range(s) if cfg.converters])
        clustered = cfg.cluster_m > 1
        return "\n".join([
            *self.kernel_start(listener),
            f"if (UNIT_ID == 0) {{\n{inits}\n{d.fence_mbarrier_init()}\n}}",
            # With clusters, the partner's producer and consumers use this cube's barriers too.
            d.cluster_sync() if clustered else "SYNC_CUBE();",
            *([] if scope.k_per_tile else [self._k_steps(cfg, scope)]),
            f"if (UNIT_ID >= {cfg.consumer_units}) {{",
            self._producer(cfg, d, scope),
            "} else {",
            self._consumer(cfg, d, scope, listener),
            "}",
            # No cube leaves while its partner may still arrive on its barriers or multicast into it.
            *([d.cluster_sync()] if clustered else []),
        ])

