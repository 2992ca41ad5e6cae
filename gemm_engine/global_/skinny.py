"""Skinny global matmul: ``M = 1`` (vector-matrix) or ``N = 1`` (matrix-vector), built for bandwidth.

Such a product reads every element of its big operand once and does one multiply-add with it: the
time is the time to stream that operand. There is no shared-memory stage and no tile matmul; a cube
owns ``outputs`` consecutive output elements (along N when ``M = 1``, along M when ``N = 1``) and
computes each over the whole of K, so the batch level's tile is ``1 x outputs`` (or ``outputs x 1``).

The small operand (the vector, length K) is staged in shared memory in the compute type, ``chunk``
elements at a time, so every unit reads it from there whatever its strides (a matrix-vector
product's 1-D rhs arrives as a K x 1 matrix with an unknown leading dimension). The big operand is
read straight from global memory, in one of two shapes chosen from its layout:

* **dot** (contiguous along K: ``N = 1`` with a row-major lhs, ``M = 1`` with a column-major rhs):
  each output is a dot product along contiguous memory. ``lanes`` consecutive units share one
  output; they read consecutive vectors along K (the group's reads are one contiguous run), each
  unit accumulating its own partial sum.
* **split-K** (contiguous along the outputs: ``M = 1`` with a row-major rhs, ``N = 1`` with a
  column-major lhs): each unit owns a vector of ``per_unit`` consecutive outputs (16 bytes of them);
  ``lanes`` consecutive units (a group) cover the cube's outputs, one contiguous run per K row, and
  the cube's ``slices`` groups split K, row ``k`` going to slice ``k % slices``.

Either way every unit keeps about ``unroll`` global loads in flight (the K loop is unrolled that
far, all loads issued before the first multiply-add), and the partial sums of one output are
reduced through shared memory by one unit in a fixed order: the result is deterministic (no
atomics). With a single slice (split-K over cubes instead: ``skinny_split_k``) each unit stores
its own sums. Global loads
are vectors (``float4``, ``double2``; 16-bit elements read as ``float4`` bits) where the operand's
alignment and the extent along its contiguous axis allow (``width``), scalar otherwise. Partial
cubes read no branch-guarded memory: a unit whose output lies past the problem reads the last valid
row or vector instead, and its result is never stored (`GlobalMatmul.store` checks bounds).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..dtypes import ElementType
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from ..compose.selection import Knob
from .base import GlobalConfig, GlobalMatmul
from .read.loaders import OperandTile
from ..dtypes import WORD_BYTES
from .simple import SimpleGlobalMatmul
from ..selector.skinny import STORAGES, load_width, resolve_tiling, skinny_axis

_COMPONENTS = "xyzw"

def read_global(d: Dialect, et: ElementType, ident: str, index: str, width: int,
                name: str) -> tuple[list[str], list[str]]:
    """(statements, expressions): ``width`` consecutive elements of global array ``ident`` from
    element ``index`` (aligned to the whole vector), read by one load into register ``name``, and
    each element as its compute type."""
    if width == 1:
        return [f"const {d.compute_type(et)} {name} = {d.load_global(et, ident, index)};"], [name]
    word = "f64" if et.storage == "f64" else "f32"
    count = width * et.itemsize // WORD_BYTES[word]
    vector = d.stream_vector(word, count, f"{ident} + {index}")   # each element is read once
    statements = [f"const {d.c_type(word)}{count} {name} = {vector};"]
    if et.storage in ("f32", "f64"):
        return statements, [f"{name}.{_COMPONENTS[j]}" for j in range(width)]
    # 16-bit elements, two per 32-bit word, the first in the low half (every device the engine
    # runs on is little-endian).
    elements = []
    for j in range(width):
        bits = f"FLOAT_AS_UINT({name}.{_COMPONENTS[j // 2]})"
        if et.storage == "bf16_bits":
            # A bfloat16 is the high half of a float32: shift the low element up, mask the high one.
            elements.append(f"UINT_AS_FLOAT({bits} << 16)" if j % 2 == 0
                            else f"UINT_AS_FLOAT({bits} & 0xffff0000u)")
        else:
            # float16: the dialect's conversion reads a 16-bit storage element through a pointer;
            # point it at a private copy of the bits (bfloat16's storage word: 16 unsigned bits).
            u16, h = d.c_type("bf16_bits"), f"{name}_h{j}"
            statements.append(f"const {u16} {h} = ({u16})({bits} {'& 0xffffu' if j % 2 == 0 else '>> 16'});")
            elements.append(d.load_global(et, f"((const {d.storage_type(et)}*)&{h})", "0"))
    return statements, elements


def _clamped(index: str, extent: str, last: str, check: bool) -> str:
    """Expression: ``index``, or ``last`` where it is past ``extent`` (only when ``check``)."""
    return f"{index} < {extent} ? {index} : {last}" if check else index


@dataclass(frozen=True)
class SkinnyTiling:
    """A cube's share of the output in the names the batch level and the benchmarks read from a
    stage config (``stage_m``, ``stage_n``, ``stage_k``, ``units``): one of ``stage_m`` /
    ``stage_n`` is 1, the other the cube's outputs; ``stage_k`` is the staged vector chunk."""

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
    along_n: bool     # outputs run along N (M = 1, rhs is the big operand) or along M (N = 1, lhs)
    dot: bool         # the big operand is contiguous along K (dot) or along the outputs (split-K)
    outputs: int      # output elements per cube
    lanes: int        # dot: units per output; split-K: units along the outputs (groups)
    per_unit: int     # split-K: consecutive outputs per unit (16 bytes of elements); dot: 1
    unroll: int       # global loads in flight per unit
    chunk: int        # vector elements staged in shared memory at a time

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
    def steps(self) -> int:
        """K steps per unrolled iteration: ``unroll`` loads, a step being one load (dot) or
        ``per_unit / width`` of them (split-K: scalar reads of 16 bytes of outputs take several)."""
        loads = 1 if self.dot else self.per_unit // self.big.width
        return max(1, self.unroll // loads)

    @property
    def slices(self) -> int:
        """Split-K: the groups of units that split K (dot: the outputs of a cube)."""
        return self.stage.units // self.lanes

    @property
    def smem_elems(self) -> int:
        """One array serves the staged vector, then (after a barrier) the partial sums."""
        if not self.dot and self.slices == 1:
            return self.chunk   # each unit stores its own sums: no partials
        partials = self.stage.units * (1 if self.dot else self.per_unit)
        return max(self.chunk, partials)

    @property
    def shared_memory_bytes(self) -> int:
        return self.smem_elems * WORD_BYTES[self.compute]


class SkinnyGlobalMatmul(GlobalMatmul):
    """Reads global memory itself: composes with no stage, no loaders and no writer."""

    name = "skinny_global"
    uses = ()
    knobs = (Knob("outputs", 0, "output elements per cube (0: chosen for the problem)"),
             Knob("units", 0, "units per cube (0: chosen)"),
             Knob("unroll", 0, "global loads in flight per unit (0: chosen)"),
             Knob("vector_width", 8, "most elements per global load (16 bytes at most; the alignment "
                                     "narrows it)"),
             Knob("chunk_k", 0, "vector elements staged in shared memory at a time (0: chosen)"))
    buffers = 1   # one shared array (for `SimpleGlobalMatmul.check_shared_memory`)
    # Registers for every load in flight: bf16 1 x 8192 x 8192 split over cubes 0.0581 -> 0.0488 ms
    # on the H100 (bench/results/h100_2026-11-21_gemv_probe.txt, R=0 against R=1).
    occupancy = 1

    # -- setup ------------------------------------------------------------------------------
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> SkinnyConfig:
        if problem.m != 1 and problem.n != 1:
            raise SetupError(self.name, f"M = {problem.m} and N = {problem.n}: the skinny kernel "
                                        "needs M = 1 or N = 1")
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
        unroll, chunk = selection.unroll, selection.chunk_k
        for label, value in (("outputs", outputs), ("units", units), ("unroll", unroll), ("chunk_k", chunk)):
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
            if units % outputs:
                raise SetupError(self.name, f"units={units} are not whole lanes of {outputs} outputs")
            lanes = units // outputs
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
        stage = SkinnyTiling(stage_m=1 if along_n else outputs, stage_n=outputs if along_n else 1,
                             stage_k=chunk, units=units)

        def read(ident, et, layout, rows, cols, w):
            # The operand as a loader would name it (no shared-memory tile: ld 0, no checks).
            return SkinnyRead(OperandTile(ident, et, Layout(layout), rows, cols, False, False, 0,
                                          k_along_rows=ident == "rhs"), w)

        # The small vector is read an element at a time (it is staged once per cube).
        if along_n:
            lhs = read("lhs", problem.lhs, problem.lhs_layout, 1, chunk, 1)
            rhs = read("rhs", problem.rhs, problem.rhs_layout, chunk, outputs, width)
        else:
            lhs = read("lhs", problem.lhs, problem.lhs_layout, outputs, chunk, width)
            rhs = read("rhs", problem.rhs, problem.rhs_layout, chunk, 1, 1)
        cfg = SkinnyConfig(stage=stage, lhs_loader=lhs, rhs_loader=rhs, out=problem.out,
                           check_m=problem.m % stage.stage_m != 0, check_n=problem.n % stage.stage_n != 0,
                           check_k=False, along_n=along_n, dot=dot, outputs=outputs, lanes=lanes,
                           per_unit=per_unit, unroll=unroll, chunk=chunk)
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

    def _stage_vector(self, cfg: SkinnyConfig, d: Dialect, scope) -> list[str]:
        """Statements: chunk ``sk_k0`` of the vector into ``sk_smem`` in the compute type. Reads past
        K are clamped to its last element (never used): no branch, all of a batch's loads issued
        before its stores."""
        op, units = cfg.small.operand, cfg.stage.units
        src = self._refs(cfg, scope)[1]
        ct = d.c_type(cfg.compute)
        per = cfg.chunk // units
        # Every load of a batch is in flight at once: the default chunk (at most 32 per unit) is
        # staged in one memory round trip, before the first load of the big operand can start.
        batch = 32
        out = []
        for t0 in range(0, per, batch):
            ts = range(t0, min(per, t0 + batch))
            lines = []
            for t in ts:
                k = f"sk_k0 + UNIT_ID + {t * units}"
                k = f"(({k}) < {scope.k} ? ({k}) : {scope.k} - 1)"
                index = op.global_index("0", k, src.ld) if cfg.along_n else op.global_index(k, "0", src.ld)
                lines.append(f"const {ct} sk_x{t} = {d.load_global(op.element, src.ptr, index)};")
            lines += [f"sk_smem[UNIT_ID + {t * units}] = sk_x{t};" for t in ts]
            out.append("{\n    " + "\n    ".join(lines) + "\n}")
        return out

    def _steps(self, cfg: SkinnyConfig, d: Dialect, scope, count: int) -> list[str]:
        """Statements: ``count`` consecutive steps of this unit's K walk from ``sk_k``: every global
        load first, then the multiply-adds."""
        ct = d.c_type(cfg.compute)
        big = cfg.big
        et, ident, w = big.operand.element, self._refs(cfg, scope)[0].ptr, big.width
        loads, fmas = [], []
        if cfg.dot:
            step = cfg.lanes * w
            # The staged vector is read as vectors too (16 bytes of the compute type at most).
            xw = min(w, 16 // WORD_BYTES[cfg.compute])
            for i in range(count):
                k = f"sk_k + {i * step}"
                stmts, elems = read_global(d, et, ident, self._big_index(cfg, scope, "sk_row", k), w, f"sk_w{i}")
                loads += stmts
                base = f"(int)(sk_k - sk_k0) + {i * step}"
                for v in range(0, w, xw):
                    if xw == 1:
                        xs = [f"sk_smem[{base} + {v}]"]
                    else:
                        fmas.append(f"const {ct}{xw} sk_xv{i}_{v} = "
                                    f"{d.vector_ref('local', cfg.compute, xw, f'sk_smem + {base} + {v}')};")
                        xs = [f"sk_xv{i}_{v}.{_COMPONENTS[j]}" for j in range(xw)]
                    fmas += [f"sk_acc0 += {elems[v + j]} * {x};" for j, x in enumerate(xs)]
        else:
            for i in range(count):
                k = f"sk_k + {i * cfg.slices}"
                x = f"sk_xs{i}"
                fmas.append(f"const {ct} {x} = sk_smem[(int)(sk_k - sk_k0) + {i * cfg.slices}];")
                for p in range(cfg.per_unit // w):
                    index = self._big_index(cfg, scope, f"sk_p{p}", k)
                    stmts, elems = read_global(d, et, ident, index, w, f"sk_w{i}_{p}")
                    loads += stmts
                    fmas += [f"sk_acc{p * w + j} += {e} * {x};" for j, e in enumerate(elems)]
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

    def body(self, cfg: SkinnyConfig, d: Dialect, scope) -> str:
        ct, zero = d.c_type(cfg.compute), d.zero(cfg.lhs_loader.operand.element)
        units, lanes, slices, w = cfg.stage.units, cfg.lanes, cfg.slices, cfg.big.width
        extent, first = self._names(cfg, scope)
        check = cfg.check_n if cfg.along_n else cfg.check_m
        listener = self.chain()
        lines = [*self.kernel_start(listener), *self._lane_and_slice(lanes, slices)]
        if cfg.dot:
            # Units past the last output read the last row (valid memory) and are never stored.
            row = f"{first} + sk_slice"
            lines.append(f"const i64 sk_row = {_clamped(row, extent, f'{extent} - 1', check)};")
            accs, start, step = 1, f"sk_k0 + sk_lane * {w}", lanes * w
        else:
            for p in range(cfg.per_unit // w):
                col = f"{first} + sk_lane * {cfg.per_unit} + {p * w}"
                # A vector past the last output reads the last one (w divides the extent).
                lines.append(f"const i64 sk_p{p} = {_clamped(col, extent, f'{extent} - {w}', check)};")
            accs, start, step = cfg.per_unit, "sk_k0 + sk_slice", slices
        lines += [f"{ct} sk_acc{a} = {zero};" for a in range(accs)]
        unrolled = "\n    ".join(self._steps(cfg, d, scope, cfg.steps))
        single = "\n    ".join(self._steps(cfg, d, scope, 1))
        k = scope.k
        lines += [
            f"for (i64 sk_k0 = 0; sk_k0 < {k}; sk_k0 += {cfg.chunk}) {{",
            f"const i64 sk_kend = {k} - sk_k0 < {cfg.chunk} ? {k} : sk_k0 + {cfg.chunk};",
            "SYNC_CUBE();  /* every unit is done with the previous chunk */",
            *self._stage_vector(cfg, d, scope),
            "SYNC_CUBE();",
            f"i64 sk_k = {start};",
            f"for (; sk_k + {(cfg.steps - 1) * step} < sk_kend; sk_k += {cfg.steps * step}) {{\n    {unrolled}\n}}",
            *([f"for (; sk_k < sk_kend; sk_k += {step}) {{\n    {single}\n}}"] if cfg.steps > 1 else []),
            "}",
        ]
        if not cfg.dot and slices == 1:
            # One slice of K: every unit holds whole sums of its own outputs.
            row, col = ("0", "sk_lane * {p} + {a}") if cfg.along_n else ("sk_lane * {p} + {a}", "0")
            lines += self.before_store(listener)
            lines += [self.store(cfg, d, scope, row.format(p=cfg.per_unit, a=a), col.format(p=cfg.per_unit, a=a),
                                 f"sk_acc{a}") for a in range(accs)]
            return "\n".join(lines)
        lines.append("SYNC_CUBE();  /* the vector is read: its shared memory takes the partial sums */")
        # Partial sums, then each output summed by one unit in a fixed order (deterministic).
        if cfg.dot:
            lines.append("sk_smem[UNIT_ID] = sk_acc0;")
            terms, stride, index = lanes, 1, f"UNIT_ID * {lanes}"
        else:
            lines += [f"sk_smem[sk_slice * {cfg.outputs} + sk_lane * {cfg.per_unit} + {a}] = sk_acc{a};"
                      for a in range(accs)]
            terms, stride, index = slices, cfg.outputs, "UNIT_ID"
        row, col = ("0", "UNIT_ID") if cfg.along_n else ("UNIT_ID", "0")
        reduce = "\n    ".join([
            f"{ct} sk_sum = sk_smem[{index}];",
            f"for (int sk_t = 1; sk_t < {terms}; ++sk_t) sk_sum += sk_smem[{index} + sk_t * {stride}];",
            self.store(cfg, d, scope, row, col, "sk_sum"),
        ])
        guard = f"if (UNIT_ID < {cfg.outputs}) " if cfg.outputs < units else ""
        lines += ["SYNC_CUBE();", *self.before_store(listener), f"{guard}{{\n    {reduce}\n}}"]
        return "\n".join(lines)
