"""Pipelined global matmul: a ring of ``stages`` shared-memory slices filled by ``cp.async``.

CUDA sm_80+, and NVIDIA's OpenCL driver where the capability probe found cp.async (the ring then
lives in a local-memory array: 48 KiB at most there). Both operands are moved by `ChunkLoader` (16-byte chunks, shared memory in the
operand's global layout) into a ring of S slots per operand. The loop keeps S - 1 K slices in
flight while the stage computes on the oldest:

    prologue: slices 0 .. S-2 -> slots 0 .. S-2, one cp.async group each
    step i:   wait until at most S-2 groups are pending (slice i has landed, for this unit)
              barrier            (every unit's copies of slice i are visible; every unit is done
                                  computing slice i-1, so its slot (i-1) % S = (i+S-1) % S is free)
              issue slice i+S-1 into slot (i+S-1) % S; commit a group (possibly empty, so the
              group count stays one per step and the wait above stays exact)
              compute slot i % S
              register-path loaders store their staged slice i+S-1 now (after the compute that hid
              their global loads); the next barrier publishes it, long before step i+S-1 reads it

One barrier per K step. With ``carry_fragments`` (a knob; the stage must provide
`CARRIED_FRAGMENTS`), the wait and barrier move into the step, before the stage's last k tile:

    prologue: as above, then wait for slice 0, barrier, the stage loads slot 0's first fragments
    step i:   issue slice i+S-1 into slot (i+S-1) % S (free: every unit read slot (i-1) % S before
              step i-1's barrier); commit a group
              the stage computes slot i % S; before its last k tile it runs the handover (wait
              until slice i+1 has landed, barrier) and loads slot (i+1) % S's first fragments, so
              the last k tile's tile matmuls cover the barrier and those loads

It needs three slots or more: with two, the slice a handover waits for is issued in the same step,
and a register-path loader's slice i+1, stored after step i's compute, would come after the
handover that reads it. The ring lives in dynamic shared memory (``dynamic_shared_bytes``, asked
for at launch): three or four 128 x 256 x 32 half-precision slices need far more than the 48 KiB a
static declaration may take.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..compose.contracts import Requirement
from ..errors import SetupError
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..compose.capabilities import CARRIED_FRAGMENTS, CHUNK_LOADER, SHARED_RING, SMEM_STAGE
from ..stage.base import Carry
from .read.async_loader import ChunkOperandTile
from .base import GlobalConfig, GlobalMatmul, SharedRing
from .simple import operand_tiles

@dataclass(frozen=True)
class PipelinedGlobalConfig(GlobalConfig):
    stages: int = 3
    carry_fragments: bool = False

    @property
    def dynamic_shared_bytes(self) -> int:
        """Shared memory the launch must provide: the whole ring of both operands."""
        return self.stages * self.shared_memory_bytes


class PipelinedGlobalMatmul(GlobalMatmul):
    name = "pipelined_global"
    knobs = (Knob("stages", 3, "slots of the shared-memory ring"),
             Knob("carry_fragments", False, "barrier before the stage's last k tile, the next slot's first "
                                            "fragments loaded under its tile matmuls"))
    provides = frozenset({SHARED_RING})
    requires = (Requirement.of("stage", SMEM_STAGE),
                Requirement.of("lhs_loader", CHUNK_LOADER, why="it keeps a ring of asynchronous copies"),
                Requirement.of("rhs_loader", CHUNK_LOADER, why="it keeps a ring of asynchronous copies"))
    #: The operand tiles its loaders take.
    operand_tile = ChunkOperandTile
    #: Every step commits one cp.async group and the last step waits for the groups of slices
    #: 0 .. k_steps-1, so the groups a run leaves pending are empty; the loader state and the
    #: staged registers are per run. The persistent launch's barrier between runs then orders the
    #: next run's prologue copies after every read of the last slot, as each step's barrier does
    #: inside a run. (The wgmma pipeline also waits for every wgmma batch before writing.)
    reentrant = True

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> PipelinedGlobalConfig:
        if not dialect.supports("cp_async"):
            why = dialect.device.refusal("cp_async")
            raise SetupError(self.name, f"needs cp.async (CUDA sm_80 or newer, or NVIDIA's OpenCL driver where "
                                        f"the probe finds it); device {dialect.device.name!r} ({dialect.backend}) "
                                        f"has none" + (f": {why}" if why else ""))
        stages = selection.stages
        if stages < 2:
            raise SetupError(self.name, f"stages={stages}: a ring needs at least 2")
        stage = self.setup_stage(problem, selection, dialect)
        check_m, check_n, check_k = edge_checks(problem, stage)
        # Swizzled rows (a plane stage's smem_swizzle): the loaders write the chunks where the tile reads them.
        swizzles = {op: {"swizzle": sw} for op in ("lhs", "rhs")
                    if (sw := getattr(stage, f"{op}_swizzle", None)) is not None}
        lhs, rhs = operand_tiles(problem, stage, self.operand_tile, **swizzles)
        carry = bool(selection.carry_fragments)
        if carry:
            self._check_carry(stage, stages)
        cfg = PipelinedGlobalConfig(stage=stage, lhs_loader=self.lhs_loader.setup(lhs, stage.units, selection),
                                    rhs_loader=self.rhs_loader.setup(rhs, stage.units, selection), out=problem.out,
                                    check_m=check_m, check_n=check_n, check_k=check_k, stages=stages,
                                    carry_fragments=carry, writer=self.writer.setup(problem, selection, dialect))
        for loader, elems in ((cfg.lhs_loader, stage.lhs_smem_elems), (cfg.rhs_loader, stage.rhs_smem_elems)):
            assert loader.smem_bytes == elems * loader.size, "loader and stage disagree on the slot size"
        check_ring_fits(self.name, cfg, dialect)
        return cfg

    def _execute(self, st, d: Dialect, lhs_cur: str, rhs_cur: str, listener, extra: dict) -> str:
        """The stage's code for a step; where it carries fragments, SetupError unless it ran the
        handover (the step's only wait and barrier) exactly once: a stage that dropped it would
        race the ring."""
        code = self.stage.execute(st, d, lhs_cur, rhs_cur, listener, **extra)
        carry = extra.get("carry")
        if carry is not None and code.count(carry.handover) != 1:
            raise SetupError(self.name, f"stage {type(self.stage).__name__} ran the carried handover "
                                        f"{code.count(carry.handover)} times (expected once: it is the step's barrier)")
        return code

    def _check_carry(self, stage_cfg, stages: int) -> None:
        """SetupError unless the stage and the ring can carry fragments across slots."""
        stage = type(self.stage).__name__
        if CARRIED_FRAGMENTS not in self.stage.provides:
            raise SetupError(self.name, f"carry_fragments=True needs {CARRIED_FRAGMENTS.name} ({CARRIED_FRAGMENTS.meaning}); stage "
                                        f"{stage} does not offer it")
        refusal = self.stage.carry_refusal(stage_cfg)
        if refusal:
            raise SetupError(self.name, f"carry_fragments=True: stage {stage} refuses: {refusal}")
        if stages < 3:
            raise SetupError(self.name, f"carry_fragments=True needs 3 or more stages (stages={stages}: the "
                                        f"slice a handover waits for would be issued in the same step)")

    def shared_declarations(self, cfg: PipelinedGlobalConfig, d: Dialect) -> str:
        space = d.pointer_space("local")
        ctype = f"{space} {d.c_type(cfg.lhs_loader.operand.smem_type_word)}".strip()
        lhs_ring = cfg.stages * cfg.lhs_loader.smem_bytes
        return "\n".join([d.ring_declaration("gemm_ring", cfg.dynamic_shared_bytes),
                          f"{ctype}* lhs_smem = ({ctype}*)gemm_ring;",
                          f"{ctype}* rhs_smem = ({ctype}*)(gemm_ring + {lhs_ring});"])

    def _issue(self, cfg: PipelinedGlobalConfig, d: Dialect, scope, slot: str, k0: str) -> str:
        lhs, rhs = self.lhs_loader, self.rhs_loader
        return "\n".join([lhs.issue(cfg.lhs_loader, d, scope.lhs, slot, scope.m0, k0, scope.m, scope.k),
                          rhs.issue(cfg.rhs_loader, d, scope.rhs, slot, k0, scope.n0, scope.k, scope.n),
                          lhs.advance(cfg.lhs_loader, scope.lhs, cfg.stage.stage_k),
                          rhs.advance(cfg.rhs_loader, scope.rhs, cfg.stage.stage_k)])

    def _commit(self, cfg: PipelinedGlobalConfig, d: Dialect, slot: str) -> str:
        return "\n".join(c for c in (self.lhs_loader.commit(cfg.lhs_loader, d, slot),
                                     self.rhs_loader.commit(cfg.rhs_loader, d, slot)) if c)

    def shared_ring(self, cfg: PipelinedGlobalConfig, d: Dialect) -> SharedRing:
        """The whole ring, once no copy can land in it (a prefetch past K) and every unit is past
        its last read of it."""
        return SharedRing("gemm_ring", cfg.stages * cfg.shared_memory_bytes,
                          (d.cp_async_wait_all(), "SYNC_CUBE();"))

    def body(self, cfg: PipelinedGlobalConfig, d: Dialect, scope) -> str:
        st = cfg.stage
        return self._ring_body(
            cfg, d, scope, prefetch=cfg.stages - 1,
            loader_declarations=[self.lhs_loader.declare(cfg.lhs_loader, d, scope.lhs, "lhs_smem", scope.m0, "0"),
                                 self.rhs_loader.declare(cfg.rhs_loader, d, scope.rhs, "rhs_smem", "0", scope.n0)],
            lhs_cur=f"(lhs_smem + cur_slot * {st.lhs_smem_elems})",
            rhs_cur=f"(rhs_smem + cur_slot * {st.rhs_smem_elems})",
            carry=(f"(lhs_smem + next_slot * {st.lhs_smem_elems})", f"(rhs_smem + next_slot * {st.rhs_smem_elems})")
            if cfg.carry_fragments else None)

    def _ring_body(self, cfg: PipelinedGlobalConfig, d: Dialect, scope, prefetch: int, loader_declarations: list,
                   lhs_cur: str, rhs_cur: str, before_barrier: tuple = (), after_compute: tuple = (),
                   after_loop: tuple = (), before_loop: tuple = (), fresh: bool = False,
                   carry: tuple[str, str] | None = None) -> str:
        """The ring loop both pipelines run (see the module docstrings): slices are issued
        ``prefetch`` steps ahead through ``_issue`` / ``_commit``; the stage computes on
        ``lhs_cur`` / ``rhs_cur`` (expressions of ``cur_slot``). The subclass hooks: code before the
        loop, before the step's barrier, after the step's compute and register-path commits, and
        after the loop; ``fresh``: each step's compute overwrites the accumulators (promotion);
        ``carry``: (lhs, rhs) of slot ``next_slot``, where the stage carries fragments (the step's
        wait and barrier become its handover, the hooks before the barrier with them)."""
        s, p, sk, st = cfg.stages, prefetch, cfg.stage.stage_k, cfg.stage
        commit_now = self._commit(cfg, d, "pre")
        commit_later = self._commit(cfg, d, "load_slot")
        listener = self.chain()
        start = [
            *self.kernel_start(listener),
            self.stage.declare(st, d),
            self.stage.init_accumulators(st, d),
            *before_loop,
            *loader_declarations,
            f"const int k_steps = (int)(({scope.k} + {sk - 1}) / {sk});",
            f"#pragma unroll\nfor (int pre = 0; pre < {p}; ++pre) {{",
            "if (pre < k_steps) {",
            f"const i64 k0 = (i64)pre * {sk};",
            self._issue(cfg, d, scope, "pre", "k0"),
            commit_now,
            "}",
            d.cp_async_commit(),
            "}",
            f"int cur_slot = 0, load_slot = {p};",
        ]
        barrier = [d.cp_async_wait(p - 1), *before_barrier, "SYNC_CUBE();"]
        if cfg.carry_fragments and carry is None:
            raise SetupError(self.name, f"carry_fragments=True, but {type(self).__name__}'s body runs the ring "
                                        f"without handing its stage the next slot (a subclass's body must pass carry)")
        if carry is None:
            first, step_barrier, extra = [], barrier, {"fresh": True} if fresh else {}
        else:
            assert not (fresh or before_loop or after_compute or after_loop), "hooks a carried ring does not run"
            first = [*barrier, f"if (k_steps > 0) {{\n{self.stage.load_first(st, d, lhs_cur, rhs_cur)}\n}}"]
            step_barrier = [f"const int next_slot = cur_slot + 1 == {s} ? 0 : cur_slot + 1;"]
            extra = {"carry": Carry("\n".join(barrier), *carry, "step + 1 < k_steps")}
        return "\n".join([
            *start,
            *first,
            "for (int step = 0; step < k_steps; ++step) {",
            *step_barrier,
            f"const bool more = step + {p} < k_steps;",
            "if (more) {",
            f"const i64 k0 = (i64)(step + {p}) * {sk};",
            self._issue(cfg, d, scope, "load_slot", "k0"),
            "}",
            d.cp_async_commit(),
            self._execute(st, d, lhs_cur, rhs_cur, listener, extra),
            *([f"if (more) {{\n{commit_later}\n}}"] if commit_later else []),
            *after_compute,
            f"cur_slot = cur_slot + 1 == {s} ? 0 : cur_slot + 1;",
            f"load_slot = load_slot + 1 == {s} ? 0 : load_slot + 1;",
            "}",
            *after_loop,
            *self.before_store(listener),
            self.write_output(cfg, d, scope),
        ])


def edge_checks(problem: MatmulProblem, stage) -> tuple[bool, bool, bool]:
    """(check_m, check_n, check_k): the axes the stage tile does not divide or that are ragged
    (a grouped problem's: bounds-checked)."""
    return problem.checks(stage.stage_m, stage.stage_n, stage.stage_k)


def check_ring_fits(component: str, cfg, dialect: Dialect) -> None:
    """SetupError unless the ring of ``cfg.stages`` slots (``cfg.dynamic_shared_bytes``) fits the
    device's shared memory: every ring-keeping global level asks this."""
    if cfg.dynamic_shared_bytes > dialect.device.max_shared_memory:
        raise SetupError(component, f"{cfg.stages} stages need {cfg.dynamic_shared_bytes} bytes of shared "
                                    f"memory, the device allows {dialect.device.max_shared_memory}")
