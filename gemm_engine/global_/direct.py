"""Direct global matmul: no loaders, no shared memory; the stage reads the operands in place.

The CPU path's global level (algorithms/direct.py). A cube walks its whole K with two pointers, one
per operand, at its tile's origin and the current k; the stage (a `GLOBAL_OPERAND_STAGE`, stage/
direct.py) reads fragments through them, ``stage_k`` k steps unrolled per iteration and the rest
one at a time. No barrier: a cube's units share nothing.

Edges without a bounds check on any load: a cube whose tile would cross the problem's last row
(column) is moved back to end there, overlapping its neighbour, and stores only the rows (columns)
that are its own. Every read then lies inside the operands, and every output is written exactly
once. It needs M >= stage_m and N >= stage_n (setup refuses smaller problems).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..codegen.dialect import Dialect
from ..compose.capabilities import GLOBAL_OPERAND_STAGE
from ..compose.contracts import Requirement
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from .base import GlobalConfig, GlobalMatmul
from .read.loaders import LoaderConfig, OperandTile


@dataclass(frozen=True)
class _Ref:
    """What the direct stage reads an operand through: a pointer and a leading dimension."""

    ptr: str
    ld: str


class DirectGlobalMatmul(GlobalMatmul):
    name = "direct_global"
    uses = ("stage", "writer")
    requires = (Requirement.of("stage", GLOBAL_OPERAND_STAGE, why="nothing is copied: the stage reads "
                                                                  "global memory itself"),)

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> GlobalConfig:
        lhs_layout, rhs_layout = Layout(problem.lhs_layout), Layout(problem.rhs_layout)
        stage = self.setup_stage(problem, selection, dialect, lhs_k_contiguous=lhs_layout is Layout.ROW,
                                 rhs_k_contiguous=rhs_layout is Layout.COL)
        if problem.m < stage.stage_m or problem.n < stage.stage_n:
            raise SetupError(self.name, f"M x N = {problem.m} x {problem.n} is smaller than the stage "
                                        f"{stage.stage_m} x {stage.stage_n}: its edge tiles move back inside "
                                        f"the problem, which needs a whole tile of room")

        def operand(ident, et, layout, rows, cols):   # described for the contracts; nothing is staged
            return LoaderConfig(OperandTile(ident, et, layout, rows, cols, False, False, 0,
                                            k_along_rows=ident == "rhs"), units=stage.units, tasks=0)

        return GlobalConfig(stage=stage, lhs_loader=operand("lhs", problem.lhs, lhs_layout, stage.stage_m, stage.stage_k),
                            rhs_loader=operand("rhs", problem.rhs, rhs_layout, stage.stage_k, stage.stage_n),
                            out=problem.out, check_m=problem.m % stage.stage_m != 0,
                            check_n=problem.n % stage.stage_n != 0, check_k=problem.k % stage.stage_k != 0,
                            writer=self.writer.setup(problem, selection, dialect))

    def shared_declarations(self, cfg: GlobalConfig, d: Dialect) -> str:
        return ""

    def bounds(self, cfg: GlobalConfig, scope, row: str, col: str) -> list[str]:
        """An edge cube, moved back inside the problem, stores only the rows and columns past the
        ones its neighbour owns (``dir_skip_m`` / ``dir_skip_n``: 0 for every other cube)."""
        return (([f"({row}) >= dir_skip_m"] if cfg.check_m else [])
                + ([f"({col}) >= dir_skip_n"] if cfg.check_n else []))

    def body(self, cfg: GlobalConfig, d: Dialect, scope) -> str:
        st, sk = cfg.stage, cfg.stage.stage_k
        lhs_row = Layout(cfg.lhs_loader.operand.layout) is Layout.ROW
        lhs_t = d.storage_type(cfg.lhs_loader.operand.element)
        rhs_t = d.storage_type(cfg.rhs_loader.operand.element)
        lhs, rhs = scope.lhs, scope.rhs
        lhs_step = "1" if lhs_row else lhs.ld      # one k step along the lhs / the rhs
        listener = self.chain()

        def iteration(stage_cfg, steps: str) -> list[str]:
            refs = (_Ref("dir_lhs", lhs.ld), _Ref("dir_rhs", rhs.ld))
            return [self.stage.execute(stage_cfg, d, *refs, listener),
                    f"dir_lhs += ({steps}) * {lhs_step};", f"dir_rhs += ({steps}) * {rhs.ld};"]

        shift = [f"const i64 dir_m0 = {scope.m0} + {st.stage_m} <= {scope.m} ? {scope.m0} : {scope.m} - {st.stage_m};",
                 f"const i64 dir_n0 = {scope.n0} + {st.stage_n} <= {scope.n} ? {scope.n0} : {scope.n} - {st.stage_n};",
                 f"const int dir_skip_m = (int)({scope.m0} - dir_m0);",
                 f"const int dir_skip_n = (int)({scope.n0} - dir_n0);"]
        lines = [
            *self.kernel_start(listener),
            *shift,
            f"const GLOBAL {lhs_t}* dir_lhs = {lhs.ptr} + dir_m0{'' if not lhs_row else f' * {lhs.ld}'};",
            f"const GLOBAL {rhs_t}* dir_rhs = {rhs.ptr} + dir_n0;",
            self.stage.declare(st, d),
            self.stage.init_accumulators(st, d),
            "i64 dir_k = 0;",
            f"for (; dir_k + {sk} <= {scope.k}; dir_k += {sk}) {{", *iteration(st, str(sk)), "}",
        ]
        if sk > 1:
            lines += [f"for (; dir_k < {scope.k}; ++dir_k) {{", *iteration(replace(st, stage_k=1), "1"), "}"]
        moved = replace(scope, m0="dir_m0", n0="dir_n0")
        lines += [*self.before_store(listener), self.write_output(cfg, d, moved)]
        return "\n".join(lines)
