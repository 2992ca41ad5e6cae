"""Specialized global matmul: the cube's units split into compute units and load-only units.

The stage's units (``UNIT_ID < C``, C = the stage's unit count) only compute; ``L`` load-only units
appended after them (``UNIT_ID >= C``) only move global memory into shared memory. Two shared-memory
stages per operand, as in double buffering: in step ``s`` the loaders fill buffer ``(s + 1) % 2``
with K slice ``s + 1`` while the compute units run the stage on buffer ``s % 2``. The loop starts at
step -1 (loaders fill slice 0, compute units wait), so the role branch is written once, inside the
loop, with the one barrier per step before it where every unit reaches it.

On CUDA the split falls on a plane (warp) boundary, so every warp takes one side of the branch and
none diverges; setup refuses a stage whose unit count is not a multiple of the plane size. The
launch has ``C + L`` units (`SpecializedGlobalConfig.units`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import SetupError
from ..compose.selection import Knob
from ..stage.events import StageEventListener
from .base import GlobalConfig
from .double_buffering import DoubleBufferingGlobalMatmul


#: Most unrolled load tasks one loader may run per operand and K slice.
MAX_LOAD_TASKS = 64


@dataclass(frozen=True)
class SpecializedGlobalConfig(GlobalConfig):
    """Both loaders are set up with the load-only units, so their count is the loaders'."""

    @property
    def compute_units(self) -> int:
        return self.stage.units

    @property
    def load_units(self) -> int:
        return self.lhs_loader.units

    @property
    def units(self) -> int:
        return self.compute_units + self.load_units


def default_load_units(compute_units: int, plane_size: int) -> int:
    """Half as many loaders as compute units, rounded up to whole planes (no partial warp).

    Why half: each loader runs ``(stage_m + stage_n) * stage_k / L`` unrolled one-element tasks per
    step. With a quarter (64 loaders for 256 compute units) ptxas spills 200 to 760 bytes on the
    test configs (the loader path's hoisted loads and 64-bit addresses); with half, at most 136
    bytes (the 128 x 128 x 8 half-precision stage), under the 168-register cap of 384 threads."""
    half = -(-compute_units // 2)
    return -(-half // plane_size) * plane_size


class SpecializedGlobalMatmul(DoubleBufferingGlobalMatmul):
    name = "specialized_global"
    knobs = (Knob("load_units", 0, "load-only units appended to the compute units (0: half as many, "
                                   "in whole planes)"),)

    #: Loads run on other units, so the stage has nothing to interleave: the base listener.
    listener_class = StageEventListener
    config_class = SpecializedGlobalConfig

    def loading_units(self, stage_cfg, selection, dialect) -> int:
        """The load-only units: ``selection.load_units``, or `default_load_units` when it is 0.
        Refuses a role split off a plane boundary."""
        compute, plane = stage_cfg.units, dialect.device.plane_size
        if compute % plane:
            raise SetupError(self.name, f"the role split after {compute} compute units is not on a "
                                        f"plane boundary (plane size {plane})")
        load = selection.load_units or default_load_units(compute, plane)
        if load < 1:
            raise SetupError(self.name, f"load_units={load} must be positive")
        if compute + load > dialect.device.max_threads_per_cube:
            raise SetupError(self.name, f"{compute} compute + {load} load units exceed the device's "
                                        f"{dialect.device.max_threads_per_cube} per cube")
        # The loaders' tasks are unrolled: one loader for a 64 x 16 slice is 1024 blocks per
        # operand, which nvcc's front end takes minutes over (and ptxas spills anyway).
        elements = max(stage_cfg.stage_m, stage_cfg.stage_n) * stage_cfg.stage_k
        if -(-elements // load) > MAX_LOAD_TASKS:
            raise SetupError(self.name, f"{load} load units would unroll {-(-elements // load)} load "
                                        f"tasks each per operand (at most {MAX_LOAD_TASKS})")
        return load

    def body(self, cfg: SpecializedGlobalConfig, d, scope):
        sk, compute = cfg.stage.stage_k, cfg.compute_units
        lhs_cur, rhs_cur = self._buffer(cfg, "cur")
        lhs_next, rhs_next = self._buffer(cfg, "cur ^ 1")
        loads = self.load_tasks(cfg, d, scope, lhs_next, rhs_next, f"(k0 + {sk})", unit="load_unit")
        listener = self.chain()
        return "\n".join([
            *self.kernel_start(listener),
            # Declared by every unit (the branch below must not hide declarations), used by compute units.
            self.stage.declare(cfg.stage, d),
            self.stage.init_accumulators(cfg.stage, d),
            "int cur = 1;   /* step -1 loads slice 0 into buffer cur ^ 1 = 0 */",
            f"for (i64 k0 = -{sk}; k0 < {scope.k}; k0 += {sk}) {{",
            # Why one barrier per step, at its start, is enough (step s reads buffer s % 2, writes
            # (s + 1) % 2): (a) slice s, written in step s - 1, is read in step s, after this
            # barrier; (b) buffer (s + 1) % 2 was last read in step s - 1, before this barrier;
            # (c) within a step the two roles touch different buffers. k0 is uniform, so every unit
            # reaches every barrier. At the step's start, not its end: a barrier right after the
            # role branch (both arms ending in a conditional) aborted PoCL 5.0's kernel compiler
            # (issue 35: `region_entry_barrier != NULL`, its bug #1435, fixed in 6.0).
            "SYNC_CUBE();",
            f"if (UNIT_ID >= {compute}) {{",
            # Loaders index themselves from 0 (the loader tasks' unit index).
            f"const int load_unit = UNIT_ID - {compute};",
            f"if (k0 + {sk} < {scope.k}) {{", *loads, "}",
            "} else {",
            "if (k0 >= 0) {",
            self.stage.execute(cfg.stage, d, lhs_cur, rhs_cur, listener),
            "}",
            # The last step: accumulators are final; stores go to global memory, no barrier needed
            # (only the compute units get here: a writer that needs the whole cube is refused).
            f"if (k0 + {sk} >= {scope.k}) {{", *self.before_store(listener), self.write_output(cfg, d, scope), "}",
            "}",
            "cur ^= 1;",
            "}",
        ])
