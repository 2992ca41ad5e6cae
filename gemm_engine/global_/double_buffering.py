"""Double-buffering global matmul: load the next K slice while the stage computes on this one.

Two shared-memory stages per operand (``lhs_smem[2 * elems]``, ``rhs_smem[2 * elems]``); the
stage matmul reads buffer ``cur`` while the loader's tasks for the next slice, spread over the
stage's tile executions by a `DoubleBufferingListener`, fill buffer ``cur ^ 1``. One barrier per
K step instead of the simple pipeline's two. The loaders are the simple matmul's, unchanged: they
zero-fill outside the problem, so the stage still needs no bounds checks.
"""
from __future__ import annotations

from .base import GlobalConfig
from .listeners import DoubleBufferingListener
from .simple import SimpleGlobalMatmul


class DoubleBufferingGlobalMatmul(SimpleGlobalMatmul):
    name = "double_buffering_global"

    #: Built with the next slice's task blocks; spreads them over the stage's events.
    listener_class = DoubleBufferingListener
    #: Two shared-memory stages per operand (declared and checked by the simple matmul's code).
    buffers = 2

    @staticmethod
    def _buffer(cfg: GlobalConfig, which: str) -> tuple[str, str]:
        """Array expressions of stage buffer ``which`` (a C int expression) of lhs and rhs.
        Parenthesized so that ``expr[index]`` indexes the offset pointer."""
        return (f"(lhs_smem + ({which}) * {cfg.stage.lhs_smem_elems})",
                f"(rhs_smem + ({which}) * {cfg.stage.rhs_smem_elems})")

    def own_listener(self, cfg: GlobalConfig, d, scope, next_tasks: list[str]):
        """This level's listener of one render, given the next slice's guarded load tasks to spread."""
        return self.listener_class(next_tasks)

    def body(self, cfg, d, scope):
        sk = cfg.stage.stage_k
        lhs_cur, rhs_cur = self._buffer(cfg, "cur")
        lhs_next, rhs_next = self._buffer(cfg, "cur ^ 1")
        # Only load when a next slice exists. The condition is the same for every unit of the cube,
        # so no unit skips a barrier (all barriers stay outside the guards).
        next_tasks = [f"if (k0 + {sk} < {scope.k}) {{\n{task}\n}}"
                      for task in self.load_tasks(cfg, d, scope, lhs_next, rhs_next, f"(k0 + {sk})")]
        listener = self.chain(self.own_listener(cfg, d, scope, next_tasks))
        return "\n".join([
            *self.kernel_start(listener),
            self.stage.declare(cfg.stage, d),
            self.stage.init_accumulators(cfg.stage, d),
            # Prologue: slice 0 into buffer 0, visible to every unit before the first compute.
            *self.load_tasks(cfg, d, scope, "lhs_smem", "rhs_smem", "0"),
            "SYNC_CUBE();",
            "int cur = 0;",
            f"for (i64 k0 = 0; k0 < {scope.k}; k0 += {sk}) {{",
            self.stage.execute(cfg.stage, d, lhs_cur, rhs_cur, listener),
            # Why one barrier per step is enough. In step s the cube reads buffer cur = s % 2 and
            # writes buffer cur ^ 1. (a) Write-after-read: buffer cur ^ 1 was last read in step
            # s - 1 and every unit passed this barrier at the end of step s - 1 before any unit
            # writes it in step s. (b) Read-after-write: the slice written in step s is read in
            # step s + 1, after this barrier. (c) Buffer cur is next written in step s + 1, again
            # after this barrier, so no unit overwrites data another unit is still reading.
            "SYNC_CUBE();",
            "cur ^= 1;",
            "}",
            *self.before_store(listener),
            self.write_output(cfg, d, scope),
        ])
