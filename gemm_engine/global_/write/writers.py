"""Writers: how a cube's accumulators leave for global memory (the ``writer`` slot).

Every writer stores through `GlobalMatmul.store` (or its parts: `output_value`, `guarded`), so the
fused epilogue and the bounds checks are the same whichever writer an algorithm composes.

* `DirectWriter`: one store per accumulator element, as the stage hands them out.
* `PairedWriter`: outputs leave two at a time: the two accumulators a lane holds at (row, col) and
  (row, col + 1) (col even) become one store of both, when the output's base and leading dimension
  are aligned to the pair (checked once, at run time: the problem does not describe the output)
  and col + 1 is in range; else one by one. Half precision: one 32-bit store converted by one
  paired conversion (where the dialect has it: CUDA sm_80+); float32, int32 and float64: one 8- or
  16-byte vector store (the H100's int8 kernel stalled 32% of its cycles on a full store queue
  with one 4-byte store per int32 result).
* `StagedWriter` (knob ``staged_output``): the accumulators go through the epilogue into a tile in
  the global level's shared-memory ring (`SHARED_RING`), then the cube copies the tile out in
  16-byte row segments. A tensor-core fragment gives each lane two adjacent elements of eight rows,
  so direct stores write 8 scattered pieces per warp instruction (measured on the H100: bf16
  8192 x 8192 x 64 ran at 0.147 ms direct, 0.111 ms staged). Where the tile does not fit the ring,
  or the knob is off, it writes as `PairedWriter` does.
* `TmaStoreWriter` (global_/write/tma_store_writer.py): the tile staged in shared memory the global level
  keeps for it (`STORE_STAGING`) and stored by TMA while the cube computes its next tile.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...codegen.emitter import has_loop
from ...compose.contracts import Requirement
from ...compose.selection import Knob
from ...compose.capabilities import SHARED_RING
from ...epilogue.spec import hoisted_scales
from ...stage.base import StoreWriter
from .pairs import write_pairs


@dataclass(frozen=True)
class WriterConfig:
    pairs: bool = False       # PairedWriter: half-precision pairs
    staged: bool = False      # StagedWriter: through the shared ring
    tma_store: bool = False   # TmaStoreWriter: through a staging tile and TMA (global_/write/tma_store_writer.py)
    store_parts: int = 1      # TmaStoreWriter: the tile staged in this many column parts, one after another
    checked_fill: bool = False  # TmaStoreWriter: the staging tile's elements past M or N left unwritten


class DirectWriter:
    name = "direct"
    knobs: ClassVar[tuple[Knob, ...]] = ()
    provides: ClassVar[frozenset] = frozenset()
    requires: ClassVar[tuple] = ()

    def setup(self, problem, selection, dialect) -> WriterConfig:
        return WriterConfig()

    def write(self, g, cfg, d, scope) -> str:
        return g.stage.write(cfg.stage, d, StoreWriter(lambda row, col, value: g.store(cfg, d, scope, row, col, value),
                                                       loops=cfg.epilogue.identity))

    def write_paired(self, g, cfg, d, scope) -> str:
        """The stores of a paired epilogue's results (global_/write/pairs.py), direct by default."""
        return write_pairs(g, cfg, d, scope)

    def stages_pairs(self, cfg) -> bool:
        """Whether `write_paired` stages a paired epilogue's results (then its tiles fit them)."""
        return False

    def staging_bytes(self, cfg) -> int:
        """Shared memory this writer needs the global level to keep for it (`STORE_STAGING`)."""
        return 0

    def after_tiles(self, g, cfg, d) -> str:
        """Statements once a persistent cube's units are past their last tile (writers whose stores
        may still be in flight wait for them here)."""
        return ""


_HALF_PAIRS = {"f16_bits": "f16x2", "bf16_bits": "bf16x2"}
#: Output words a pair of which is one two-wide vector (float2, int2, double2: both dialects').
_WORD_PAIRS = ("f32", "i32", "f64")


class PairedWriter(DirectWriter):
    name = "paired"

    def setup(self, problem, selection, dialect) -> WriterConfig:
        storage = problem.out.storage
        return WriterConfig(pairs=(storage in _HALF_PAIRS and dialect.supports("pack_half2"))
                            or storage in _WORD_PAIRS)

    @staticmethod
    def pair_value(d, storage: str, lo: str, hi: str, space: str, pointer: str) -> str:
        """Statement: the two converted outputs ``lo``, ``hi`` stored as one word / vector at
        ``pointer`` (an output-element pointer in address space ``space``)."""
        if storage in _HALF_PAIRS:
            word = f"{d.pointer_space(space)} unsigned".strip()
            return f"*({word}*)({pointer}) = {d.pack_half2(_HALF_PAIRS[storage], hi, lo)};"
        vec = f"{d.c_type(storage)}2"
        return f"{{ {vec} pv; pv.x = {lo}; pv.y = {hi}; {d.vector_ref(space, storage, 2, pointer)} = pv; }}"

    @staticmethod
    def paired(g, cfg, d, scope, pair, single, flag: str | None, columns: range | None = None,
               c_value: str | None = None, bounded: bool = True) -> str:
        """The stage's accumulators (those of the stage tile's ``columns`` where given) written two
        at a time where two in a row are (row, col) and (row, col + 1), ``flag`` (if any) holds and
        both are in range: ``pair(row, col, lo, hi)`` with the converted outputs, else
        ``single(row, col, value, hoist)`` each (bounds checked there). Where only ``flag`` decides
        and the stage renders its stores as loops, it is tested once, around a version of each.
        The epilogue's scale values are read once each, ahead of the stores
        (`epilogue.hoisted_scales`), in a block of their own. ``c_value``: `Epilogue.apply`'s.
        ``bounded`` False (a staging tile whose bulk stores clip at the output's edges): every pair is
        written, no bound tested, the epilogue's arrays read in range (`output_value`'s ``clamped``)."""
        hoist: dict = {}

        def stores(writer):
            writer = StoreWriter(writer, loops=cfg.epilogue.identity)
            return (g.stage.write(cfg.stage, d, writer) if columns is None
                    else g.stage.write_columns(cfg.stage, d, writer, columns))

        def two_at_a_time(conds_of):
            pending: list = []

            def writer(row, col, value):
                if not pending:
                    pending.append((row, col, value))
                    return ""
                (r0, c0, v0), = pending
                pending.clear()
                if (row, col) != (r0, f"{c0} + 1"):          # not a pair after all: one by one
                    return single(r0, c0, v0, hoist) + "\n" + single(row, col, value, hoist)
                conds = conds_of(r0, c0)
                hi = g.output_value(cfg, d, scope, row, col, value, hoist, c_value, not bounded)
                lo = g.output_value(cfg, d, scope, r0, c0, v0, hoist, c_value, not bounded)
                both = pair(r0, c0, lo, hi)
                if not conds:
                    return both
                return (f"if ({' && '.join(conds)}) {both}\nelse {{\n{single(r0, c0, v0, hoist)}\n"
                        f"{single(row, col, value, hoist)}\n}}")

            code = stores(writer)
            return code + ("\n" + single(*pending.pop(), hoist) if pending else "")

        paired_only = two_at_a_time(lambda r0, c0: [])
        check_m, check_n = cfg.check_m and bounded, cfg.check_n and bounded
        if flag and not (check_m or check_n) and has_loop(paired_only):
            # nvcc merges the tests of unrolled stores into one branch, not those of a loop's iterations
            code = (f"if ({flag}) {{\n{paired_only}\n}} else {{\n"
                    f"{stores(lambda row, col, value: single(row, col, value, hoist))}\n}}")
        else:
            code = two_at_a_time(lambda r0, c0: (([flag] if flag else [])
                                                 + ([f"{scope.m0} + {r0} < {scope.m}"] if check_m else [])
                                                 + ([f"{scope.n0} + {c0} + 1 < {scope.n}"] if check_n else [])))
        if not hoist:
            return code
        bounds = {**({"lhs_scale": scope.m, "row_scale": scope.m} if cfg.check_m else {}),
                  **({"rhs_scale": scope.n} if cfg.check_n else {})}
        return "\n".join(["{", *hoisted_scales(hoist, bounds), code, "}"])

    def write(self, g, cfg, d, scope) -> str:
        if not cfg.writer.pairs:
            return super().write(g, cfg, d, scope)
        storage = cfg.out.storage
        out = scope.out

        def pair(row, col, lo, hi):
            index = f"({scope.m0} + {row}) * {out.ld} + {scope.n0} + {col}"
            return self.pair_value(d, storage, lo, hi, "global", f"{out.ptr} + {index}")

        code = self.paired(g, cfg, d, scope, pair,
                           lambda row, col, value, hoist: g.store(cfg, d, scope, row, col, value, hoist), "out_pairs")
        size = cfg.out.itemsize
        return (f"const bool out_pairs = ((((u64){out.ptr}) | (u64)({out.ld} * {size})) "
                f"& {2 * size - 1}) == 0;\n" + code)


class StagedWriter(PairedWriter):
    name = "staged"
    knobs = (Knob("staged_output", False, "store the tile through shared memory in 16-byte row segments"),)
    requires = (Requirement.of("global_", SHARED_RING, why="the tile is staged in its shared-memory ring"),)

    def setup(self, problem, selection, dialect) -> WriterConfig:
        paired = super().setup(problem, selection, dialect)
        return WriterConfig(pairs=paired.pairs, staged=selection.staged_output)

    @staticmethod
    def pitch(cfg) -> int:
        """Row pitch (elements) of the staged tile: 16 bytes of padding, so the 8 rows one warp's
        accumulator store touches start in different banks."""
        return cfg.stage.stage_n + 16 // cfg.out.itemsize

    def fits(self, g, cfg, d) -> bool:
        ring = g.shared_ring(cfg, d)
        return (ring is not None and cfg.writer.staged
                and cfg.stage.stage_m * self.pitch(cfg) * cfg.out.itemsize <= ring.bytes)

    def write(self, g, cfg, d, scope) -> str:
        if not self.fits(g, cfg, d):
            return super().write(g, cfg, d, scope)
        ring = g.shared_ring(cfg, d)
        st, et, out = cfg.stage, cfg.out, scope.out
        ld, vec = self.pitch(cfg), 16 // et.itemsize
        out_t = f"{d.pointer_space('local')} {d.storage_type(et)}".strip()
        per_row = st.stage_n // vec

        def to_tile(row, col, value):
            store = d.store_global(et, "out_tile", f"({row}) * {ld} + {col}",
                                   g.output_value(cfg, d, scope, row, col, value))
            return g.guarded(cfg, scope, row, col, store)   # c and bias are read in range only

        dst = f"{out.ptr}[({scope.m0} + r) * {out.ld} + {scope.n0} + c + e]"
        element = f"for (int e = 0; e < {vec}; ++e) if ({scope.n0} + c + e < {scope.n}) {dst} = out_tile[r * {ld} + c + e];"
        row_start = f"{out.ptr} + ({scope.m0} + r) * {out.ld} + {scope.n0} + c"
        return "\n".join([
            *ring.drain,
            "{",
            f"{out_t}* out_tile = ({out_t}*){ring.pointer};",
            g.stage.write(cfg.stage, d, StoreWriter(to_tile, loops=cfg.epilogue.identity)),
            "SYNC_CUBE();",
            f"const bool out_vectors = ((((u64){out.ptr}) | (u64)({out.ld} * {et.itemsize})) & 15) == 0;",
            f"for (int i = UNIT_ID; i < {st.stage_m * per_row}; i += {st.units}) {{",
            f"const int r = i / {per_row}, c = (i % {per_row}) * {vec};",
            f"if ({scope.m0} + r < {scope.m}) {{",
            f"if (out_vectors && {scope.n0} + c + {vec} <= {scope.n}) "
            # 16 bytes moved as four ints: a bit copy, whatever the output type.
            f"{d.vector_ref('global', 'i32', 4, f'({row_start})')} = "
            f"{d.vector_ref('local', 'i32', 4, f'(out_tile + r * {ld} + c)')};",
            f"else {element}",
            "}",
            "}",
            "}",
        ])
