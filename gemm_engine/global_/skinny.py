"""Skinny global matmul: M or N short (a vector-matrix product, a decode batch of a few rows times a
weight, a weight times a few vectors), built for bandwidth.

Such a product reads every element of its big operand once and does ``rows`` multiply-adds with
it (``rows``: the short extent, at most `selector.skinny.MAX_ROWS`): the time is the time to stream
that operand. There is no shared-memory stage and no tile matmul; a cube owns ``outputs``
consecutive output columns along the long axis (N where M is short, M where N is) for every row and
computes each over the whole of K, so the batch level's tile is ``rows x outputs`` (or ``outputs x
rows``).

The small operand (``rows`` vectors of length K) is staged in shared memory in the compute type,
``chunk`` elements of each row at a time (row r at ``r * chunk``), so every unit reads it from there
whatever its strides (a matrix-vector product's 1-D rhs arrives as a K x 1 matrix with an unknown
leading dimension). The big operand is read straight from global memory, once, in one of two shapes
chosen from its layout:

* **dot** (contiguous along K: a short N with a row-major lhs, a short M with a column-major rhs, as
  nn.Linear stores its weight): each output is a dot product along contiguous memory. ``lanes``
  consecutive units share ``unit_outputs`` outputs; they read consecutive vectors along K of each of
  those weight rows (the group's reads are contiguous runs), and each staged vector read from shared
  memory serves all of them (one output per unit would read 16 bytes of shared memory per byte of
  weight at 8 rows, more than a multiprocessor serves at HBM speed).
* **split-K** (contiguous along the outputs: a short M with a row-major rhs, a short N with a
  column-major lhs): each unit owns a vector of ``per_unit`` consecutive outputs (16 bytes of them);
  ``lanes`` consecutive units (a group) cover the cube's outputs, one contiguous run per K row, and
  the cube's ``slices`` groups split K, row ``k`` going to slice ``k % slices``.

Either way every unit keeps about ``unroll`` global loads in flight (the K loop is unrolled that
far, all loads issued before the first multiply-add) and a sum per row for each of its outputs; the
partial sums of one output are reduced through shared memory, a row at a time, by one unit in a
fixed order: the result is deterministic (no atomics). With a single slice (split-K over cubes
instead: ``skinny_split_k``) each unit stores its own sums. Global loads are vectors (``float4``,
``double2``; 16-bit elements read as ``float4`` bits: global_/skinny_reads.py) where the operand's
alignment and the extent along its contiguous axis allow (``width``), scalar otherwise. Partial
cubes read no branch-guarded memory: a unit whose output lies past the problem reads the last valid
row or vector instead, and its result is never stored (`GlobalMatmul.store` checks bounds).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..compose.selection import Knob
from ..dtypes import WORD_BYTES
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from ..selector.skinny import (MAX_ACCUMULATORS, MAX_ROWS, STORAGES, load_width, resolve_tiling, skinny_axis,
                               skinny_rows)
from .base import GlobalConfig, GlobalMatmul
from .read.loaders import OperandTile
from .simple import SimpleGlobalMatmul
from .skinny_reads import COMPONENTS, clamped, read_global


@dataclass(frozen=True)
class SkinnyTiling:
    """A cube's share of the output in the names the batch level and the benchmarks read from a
    stage config (``stage_m``, ``stage_n``, ``stage_k``, ``units``): one of ``stage_m`` /
    ``stage_n`` is the rows, the other the cube's outputs; ``stage_k`` is the staged chunk of a row."""

    stage_m: int
    stage_n: int
    stage_k: int
    units: int


@dataclass(frozen=True)
class SkinnyRead:
    """How one operand is read: ``operand`` names it and its layout (``operand.element`` is what
    the batch level declares the kernel argument with), ``width`` elements per global load."""

    operand: OperandTile
    width: int

    smem_bytes = 0   # nothing of it is staged the way a loader stages a tile


@dataclass(frozen=True, kw_only=True)
class SkinnyConfig(GlobalConfig):
    along_n: bool     # outputs run along N (M short, rhs is the big operand) or along M (N short, lhs)
    dot: bool         # the big operand is contiguous along K (dot) or along the outputs (split-K)
    outputs: int      # output columns per cube (each for every row)
    lanes: int        # dot: units per group of outputs; split-K: units along the outputs (groups)
    per_unit: int     # split-K: consecutive outputs per unit (16 bytes of elements); dot: 1
    unroll: int       # global loads in flight per unit
    chunk: int        # elements of each staged row in shared memory at a time
    rows: int = 1     # rows of the staged operand (the short extent)
    unit_outputs: int = 1   # dot: outputs (weight rows) per unit

    @property
    def big(self) -> SkinnyRead:
        return self.rhs_loader if self.along_n else self.lhs_loader

    @property
    def small(self) -> SkinnyRead:
        return self.lhs_loader if self.along_n else self.rhs_loader

    @property
    def compute(self) -> str:
        return self.lhs_loader.operand.element.compute

    @property
    def loads(self) -> int:
        """Global loads of one K step: one per output (dot), or ``per_unit / width`` of them (split-K:
        scalar reads of 16 bytes of outputs take several)."""
        return self.unit_outputs if self.dot else self.per_unit // self.big.width

    @property
    def steps(self) -> int:
        """K steps per unrolled iteration: about ``unroll`` loads."""
        return max(1, self.unroll // self.loads)

    @property
    def slices(self) -> int:
        """Split-K: the groups of units that split K (dot: the cube's groups of outputs)."""
        return self.stage.units // self.lanes

    @property
    def sums(self) -> int:
        """A unit's sums per row: its outputs (dot) or its vector of outputs (split-K)."""
        return self.unit_outputs if self.dot else self.per_unit

    @property
    def smem_elems(self) -> int:
        """One array serves the staged rows, then (after a barrier) one row's partial sums at a time."""
        if not self.dot and self.slices == 1:
            return self.rows * self.chunk   # each unit stores its own sums: no partials
        return max(self.rows * self.chunk, self.stage.units * self.sums)

    @property
    def shared_memory_bytes(self) -> int:
        return self.smem_elems * WORD_BYTES[self.compute]


class SkinnyGlobalMatmul(GlobalMatmul):
    """Reads global memory itself: composes with no stage, no loaders and no writer."""

    name = "skinny_global"
    stores_pairs = False     # each unit stores its own outputs' sums, one by one
    uses = ()
    knobs = (Knob("outputs", 0, "output columns per cube (0: chosen for the problem)"),
             Knob("units", 0, "units per cube (0: chosen)"),
             Knob("unroll", 0, "global loads in flight per unit (0: chosen)"),
             Knob("vector_width", 8, "most elements per global load (16 bytes at most; the alignment "
                                     "narrows it)"),
             Knob("chunk_k", 0, "elements of each staged row in shared memory at a time (0: chosen)"),
             Knob("unit_outputs", 0, "dot products: outputs per unit, each staged vector serving them all "
                                     "(0: chosen by the rows)"))
    buffers = 1   # one shared array (for `SimpleGlobalMatmul.check_shared_memory`)
    # Registers for every load in flight: bf16 1 x 8192 x 8192 split over cubes 0.0581 -> 0.0488 ms
    # on the H100 (bench/results/h100/gemv_bandwidth.md, R=0 against R=1).
    occupancy = 1

    # -- setup ------------------------------------------------------------------------------
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> SkinnyConfig:
        rows = skinny_rows(problem)
        if rows > MAX_ROWS:
            raise SetupError(self.name, f"M = {problem.m} and N = {problem.n}: the skinny kernel "
                                        f"needs M or N at most {MAX_ROWS}")
        for et in (problem.lhs, problem.rhs):
            if et.storage not in STORAGES:
                raise SetupError(self.name, f"{et.name} operands: only floating-point types are read")
        if problem.lhs.compute != problem.rhs.compute:
            raise SetupError(self.name, f"{problem.lhs.name} x {problem.rhs.name}: mixed compute types")
        if problem.lhs.compute == "f64" and not dialect.supports("fp64"):
            raise SetupError(self.name, "the device has no float64")
        # Fields left at 0 are chosen for the problem and device.
        selection = resolve_tiling(selection, problem, dialect)
        along_n, dot = skinny_axis(problem)
        big_et = problem.rhs if along_n else problem.lhs
        outputs, units = selection.outputs, selection.units
        unroll, chunk, reuse = selection.unroll, selection.chunk_k, selection.unit_outputs if dot else 1
        for label, value in (("outputs", outputs), ("units", units), ("unroll", unroll), ("chunk_k", chunk),
                             ("unit_outputs", reuse)):
            if not isinstance(value, int) or value < 1:
                raise SetupError(self.name, f"{label}={value!r} must be a positive int")
        if units > dialect.device.max_threads_per_cube:
            raise SetupError(self.name, f"{units} units exceed the device's "
                                        f"{dialect.device.max_threads_per_cube} per cube")
        if chunk % units:
            raise SetupError(self.name, f"chunk_k={chunk} is not a multiple of units={units}")
        extent_out = problem.n if along_n else problem.m
        align = problem.rhs_align if along_n else problem.lhs_align
        width = load_width(big_et, selection.vector_width, align, problem.k if dot else extent_out)
        if dot:
            per_unit = 1
            if outputs % reuse or units % (outputs // reuse):
                raise SetupError(self.name, f"units={units} are not whole lanes of {outputs} outputs, "
                                            f"{reuse} a unit")
            lanes = units // (outputs // reuse)
            if chunk % width:
                raise SetupError(self.name, f"chunk_k={chunk} is not a multiple of the load width {width}")
        else:
            per_unit = 16 // big_et.itemsize
            if outputs % per_unit or units % (outputs // per_unit):
                raise SetupError(self.name, f"outputs={outputs} are not whole groups of {per_unit} "
                                            f"that divide units={units}")
            lanes = outputs // per_unit
            if 1 < units // lanes < per_unit:
                # The reduction gives each output one unit: a cube needs at least as many units
                # (one slice needs none: each unit stores its own outputs).
                raise SetupError(self.name, f"units={units} are fewer than outputs={outputs}")
        if rows * (reuse if dot else per_unit) > MAX_ACCUMULATORS:
            raise SetupError(self.name, f"{rows} rows x {reuse if dot else per_unit} outputs a unit: more than "
                                        f"{MAX_ACCUMULATORS} sums a unit")
        stage = SkinnyTiling(stage_m=rows if along_n else outputs, stage_n=outputs if along_n else rows,
                             stage_k=chunk, units=units)

        def read(ident, et, layout, r, c, w):
            # The operand as a loader would name it (no shared-memory tile: ld 0, no checks).
            return SkinnyRead(OperandTile(ident, et, Layout(layout), r, c, False, False, 0,
                                          k_along_rows=ident == "rhs"), w)

        # The small operand is read an element at a time (it is staged once per cube).
        if along_n:
            lhs = read("lhs", problem.lhs, problem.lhs_layout, rows, chunk, 1)
            rhs = read("rhs", problem.rhs, problem.rhs_layout, chunk, outputs, width)
        else:
            lhs = read("lhs", problem.lhs, problem.lhs_layout, outputs, chunk, width)
            rhs = read("rhs", problem.rhs, problem.rhs_layout, chunk, rows, 1)
        cfg = SkinnyConfig(stage=stage, lhs_loader=lhs, rhs_loader=rhs, out=problem.out,
                           check_m=problem.m % stage.stage_m != 0, check_n=problem.n % stage.stage_n != 0,
                           check_k=False, along_n=along_n, dot=dot, outputs=outputs, lanes=lanes,
                           per_unit=per_unit, unroll=unroll, chunk=chunk, rows=rows, unit_outputs=reuse)
        # The simple global matmul's check: static shared memory, 48 KiB at most on CUDA.
        SimpleGlobalMatmul.check_shared_memory(self, cfg, dialect)
        return cfg

    # -- codegen ----------------------------------------------------------------------------
    def shared_declarations(self, cfg: SkinnyConfig, d: Dialect) -> str:
        return f"LOCAL {d.c_type(cfg.compute)} sk_smem[{cfg.smem_elems}] ALIGN16;"

    @staticmethod
    def _names(cfg: SkinnyConfig, scope) -> tuple[str, str]:
        """(extent of the output axis, first output of the cube) as scope expressions."""
        return (scope.n, scope.n0) if cfg.along_n else (scope.m, scope.m0)

    @staticmethod
    def _refs(cfg: SkinnyConfig, scope):
        """(big operand's reference, small operand's reference)."""
        return (scope.rhs, scope.lhs) if cfg.along_n else (scope.lhs, scope.rhs)

    def _big_index(self, cfg: SkinnyConfig, scope, out_index: str, k: str) -> str:
        op, ld = cfg.big.operand, self._refs(cfg, scope)[0].ld
        return op.global_index(k, out_index, ld) if cfg.along_n else op.global_index(out_index, k, ld)

    def read_big(self, cfg: SkinnyConfig, d: Dialect, scope, out_index: str, k: str,
                 name: str) -> tuple[list[str], list[str]]:
        """(statements, element expressions) of one global load of the big operand: ``width``
        elements from (output ``out_index``, ``k``) on along the operand's contiguous axis. A level
        reading packed weights overrides this (and nothing else of the K walk)."""
        big = cfg.big
        return read_global(d, big.operand.element, self._refs(cfg, scope)[0].ptr,
                           self._big_index(cfg, scope, out_index, k), big.width, name)

    def _stage_rows(self, cfg: SkinnyConfig, d: Dialect, scope) -> list[str]:
        """Statements: chunk ``sk_k0`` of every row of the small operand into ``sk_smem`` (row r at
        ``r * chunk``) in the compute type. Reads past K are clamped to its last element (never
        used): no branch, all of a batch's loads issued before its stores."""
        op, units = cfg.small.operand, cfg.stage.units
        src = self._refs(cfg, scope)[1]
        ct = d.c_type(cfg.compute)
        per = cfg.chunk // units
        loads = [(r, t) for r in range(cfg.rows) for t in range(per)]
        # Every load of a batch is in flight at once: the default chunk (at most 32 per unit over
        # all rows) is staged in one memory round trip, before the first load of the big operand.
        batch = 32
        out = []
        for b0 in range(0, len(loads), batch):
            part = loads[b0:b0 + batch]
            lines = []
            for r, t in part:
                k = f"sk_k0 + UNIT_ID + {t * units}"
                k = f"(({k}) < {scope.k} ? ({k}) : {scope.k} - 1)"
                index = op.global_index(str(r), k, src.ld) if cfg.along_n else op.global_index(k, str(r), src.ld)
                lines.append(f"const {ct} sk_x{r}_{t} = {d.load_global(op.element, src.ptr, index)};")
            lines += [f"sk_smem[{r * cfg.chunk} + UNIT_ID + {t * units}] = sk_x{r}_{t};" for r, t in part]
            out.append("{\n    " + "\n    ".join(lines) + "\n}")
        return out

    def _steps(self, cfg: SkinnyConfig, d: Dialect, scope, count: int) -> list[str]:
        """Statements: ``count`` consecutive steps of this unit's K walk from ``sk_k``: every global
        load first, then the multiply-adds."""
        ct = d.c_type(cfg.compute)
        w = cfg.big.width
        loads, fmas = [], []
        if cfg.dot:
            step = cfg.lanes * w
            # The staged rows are read as vectors too (16 bytes of the compute type at most).
            xw = min(w, 16 // WORD_BYTES[cfg.compute])
            for i in range(count):
                k = f"sk_k + {i * step}"
                elems = []
                for j in range(cfg.unit_outputs):
                    stmts, e = self.read_big(cfg, d, scope, f"sk_row{j}", k, f"sk_w{i}_{j}")
                    loads += stmts
                    elems.append(e)
                base = f"(int)(sk_k - sk_k0) + {i * step}"
                for r in range(cfg.rows):
                    for v in range(0, w, xw):
                        at = f"{r * cfg.chunk} + {base} + {v}"
                        if xw == 1:
                            xs = [f"sk_smem[{at}]"]
                        else:
                            x = f"sk_xv{i}_{r}_{v}"
                            fmas.append(f"const {ct}{xw} {x} = {d.vector_ref('local', cfg.compute, xw, f'sk_smem + {at}')};")
                            xs = [f"{x}.{COMPONENTS[c]}" for c in range(xw)]
                        fmas += [f"sk_acc{j}_{r} += {elems[j][v + c]} * {xv};"
                                 for j in range(cfg.unit_outputs) for c, xv in enumerate(xs)]
        else:
            for i in range(count):
                k = f"sk_k + {i * cfg.slices}"
                for r in range(cfg.rows):
                    fmas.append(f"const {ct} sk_xs{i}_{r} = sk_smem[{r * cfg.chunk} + (int)(sk_k - sk_k0) "
                                f"+ {i * cfg.slices}];")
                for p in range(cfg.per_unit // w):
                    stmts, elems = self.read_big(cfg, d, scope, f"sk_p{p}", k, f"sk_w{i}_{p}")
                    loads += stmts
                    fmas += [f"sk_acc{p * w + j}_{r} += {e} * sk_xs{i}_{r};"
                             for r in range(cfg.rows) for j, e in enumerate(elems)]
        return loads + fmas

    @staticmethod
    def _lane_and_slice(lanes: int, slices: int) -> list[str]:
        """Statements: this unit's lane and slice (group). One slice (split-K over cubes) or one
        lane makes the other index the unit itself, written so: PoCL 5.0 computed every unit's
        partial sums from the first K row only when the always-0 slice was ``UNIT_ID / units``
        beside ``UNIT_ID % units`` (issue 35; right on PoCL 3.1, 6.0 and Oclgrind)."""
        if slices == 1:
            return ["const int sk_lane = UNIT_ID;", "const int sk_slice = 0;"]
        if lanes == 1:
            return ["const int sk_lane = 0;", "const int sk_slice = UNIT_ID;"]
        return [f"const int sk_lane = UNIT_ID % {lanes};", f"const int sk_slice = UNIT_ID / {lanes};"]

    def _place(self, cfg: SkinnyConfig, r: int, out: str) -> tuple[str, str]:
        """(row, column) in the cube's tile of row ``r``'s output ``out``."""
        return (str(r), out) if cfg.along_n else (out, str(r))

    def body(self, cfg: SkinnyConfig, d: Dialect, scope) -> str:
        ct, zero = d.c_type(cfg.compute), d.zero(cfg.lhs_loader.operand.element)
        units, lanes, slices, w = cfg.stage.units, cfg.lanes, cfg.slices, cfg.big.width
        extent, first = self._names(cfg, scope)
        check = cfg.check_n if cfg.along_n else cfg.check_m
        listener = self.chain()
        lines = [*self.kernel_start(listener), *self._lane_and_slice(lanes, slices)]
        if cfg.dot:
            # Units past the last output read the last row (valid memory) and are never stored.
            for j in range(cfg.unit_outputs):
                row = f"{first} + sk_slice * {cfg.unit_outputs} + {j}"
                lines.append(f"const i64 sk_row{j} = {clamped(row, extent, f'{extent} - 1', check)};")
            start, step = f"sk_k0 + sk_lane * {w}", lanes * w
        else:
            for p in range(cfg.per_unit // w):
                col = f"{first} + sk_lane * {cfg.per_unit} + {p * w}"
                # A vector past the last output reads the last one (w divides the extent).
                lines.append(f"const i64 sk_p{p} = {clamped(col, extent, f'{extent} - {w}', check)};")
            start, step = "sk_k0 + sk_slice", slices
        lines += [f"{ct} sk_acc{a}_{r} = {zero};" for a in range(cfg.sums) for r in range(cfg.rows)]
        unrolled = "\n    ".join(self._steps(cfg, d, scope, cfg.steps))
        single = "\n    ".join(self._steps(cfg, d, scope, 1))
        k = scope.k
        lines += [
            f"for (i64 sk_k0 = 0; sk_k0 < {k}; sk_k0 += {cfg.chunk}) {{",
            f"const i64 sk_kend = {k} - sk_k0 < {cfg.chunk} ? {k} : sk_k0 + {cfg.chunk};",
            "SYNC_CUBE();  /* every unit is done with the previous chunk */",
            *self._stage_rows(cfg, d, scope),
            "SYNC_CUBE();",
            f"i64 sk_k = {start};",
            f"for (; sk_k + {(cfg.steps - 1) * step} < sk_kend; sk_k += {cfg.steps * step}) {{\n    {unrolled}\n}}",
            *([f"for (; sk_k < sk_kend; sk_k += {step}) {{\n    {single}\n}}"] if cfg.steps > 1 else []),
            "}",
        ]
        if not cfg.dot and slices == 1:
            # One slice of K: every unit holds whole sums of its own outputs.
            lines += self.before_store(listener)
            lines += [self.store(cfg, d, scope, *self._place(cfg, r, f"sk_lane * {cfg.per_unit} + {a}"),
                                 f"sk_acc{a}_{r}") for r in range(cfg.rows) for a in range(cfg.sums)]
            return "\n".join(lines)
        # Partial sums, a row at a time: each output's summed by one unit in a fixed order (deterministic).
        if cfg.dot:
            terms, stride, index = lanes, 1, f"sk_o * {lanes}"
            slot = [f"(sk_slice * {cfg.unit_outputs} + {j}) * {lanes} + sk_lane" for j in range(cfg.sums)]
        else:
            terms, stride, index = slices, cfg.outputs, "sk_o"
            slot = [f"sk_slice * {cfg.outputs} + sk_lane * {cfg.per_unit} + {a}" for a in range(cfg.sums)]
        # Dot products with fewer lanes than outputs a unit have more outputs than units.
        if cfg.outputs > units:
            each = f"for (int sk_o = UNIT_ID; sk_o < {cfg.outputs}; sk_o += {units}) {{"
        else:
            each = f"{f'if (UNIT_ID < {cfg.outputs}) ' if cfg.outputs < units else ''}{{\nconst int sk_o = UNIT_ID;"
        lines += self.before_store(listener)
        for r in range(cfg.rows):
            reduce = "\n    ".join([
                f"{ct} sk_sum = sk_smem[{index}];",
                f"for (int sk_t = 1; sk_t < {terms}; ++sk_t) sk_sum += sk_smem[{index} + sk_t * {stride}];",
                self.store(cfg, d, scope, *self._place(cfg, r, "sk_o"), "sk_sum"),
            ])
            lines += [f"SYNC_CUBE();  /* {'the rows are read' if r == 0 else 'the last row is summed'}: "
                      "the shared array takes this row's partial sums */",
                      *[f"sk_smem[{s}] = sk_acc{a}_{r};" for a, s in enumerate(slot)],
                      "SYNC_CUBE();", f"{each}\n    {reduce}\n}}"]
        return "\n".join(lines)
