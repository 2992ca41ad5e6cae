"""TMA store writer: each output tile goes through the fused epilogue into a shared staging tile, and
one unit stores it with bulk tensor copies (TMA) that run on while the cube computes its next tile.

Why: a wgmma fragment gives each lane two adjacent outputs in each of eight rows, so direct stores
write 8 scattered 4- or 8-byte pieces per warp instruction, and the consumers do nothing else while
they drain. On the H100 the persistent bf16 kernel spent about 40 us of a 4096^3 product's 194 us
in its four tile epilogues; through this writer it takes 175 (cuBLAS 173), with a ring of 3 slots
beside the staging tile against 4 (bench/results/h100/kernel_durations.md, notes).

Per tile, in the units the global level names (`STORE_STAGING`):

1. the elected unit waits until the previous tile's bulk stores have *read* the staging tile, and
   the units meet (``sync``);
2. every unit writes its outputs, converted, into the staging tile (pairs as one 4- / 8-byte store),
   then makes them visible to the async proxy (``fence.proxy.async``); the units meet again;
3. the elected unit issues one TMA store per column band of the tile (rows of 128 bytes, or 64) and
   commits them;
   or, for a tile whose map would store rows it must not (``OperandRef.staging_flag``: a grouped
   tile past its group's end), every unit copies 16-byte chunks of the rows inside the problem.

The staging tile is ``stage_n * size / 128`` bands of ``stage_m`` rows of 128 bytes, each in TMA's
128-byte swizzle (16-byte chunk ``c`` of row ``r`` at chunk ``c ^ (r % 8)``): the eight rows of one
fragment store then fall in different banks. A tile whose rows are not whole 128 bytes (96 columns
of 16 bits) takes bands of 64-byte rows in TMA's 64-byte swizzle (chunk ``c ^ ((r >> 1) % 4)``):
`band_bytes`.

``store_parts`` > 1 stages the tile in that many column parts, steps 1-3 once per part through a
staging tile of one part: the ring keeps the shared memory the rest would take (bf16 128 x 256: 4
slots beside a 32 KiB part instead of 3 beside 64 KiB), at the price of a wait and two meetings per
part. The stage must tell its elements' columns apart when the kernel is rendered
(`StageMatmul.write_columns`). TMA clips the box at the output's edges, so outputs
past M or N are never written: the staging tile is filled there too, without bounds tests, the
epilogue's arrays (c, bias, mul) read at the last row or column instead (`Epilogue.apply`'s
``limits``), except where `WriterConfig.checked_fill` keeps the tests (`setup`).

Whether a call's output may be stored this way is decided per call (the problem does not describe
the output's address): the batch level encodes the output's tensor map and sets the flag the scope
names (`OUTPUT_TENSOR_MAP`) when the address, leading dimension and batch stride are 16-byte
multiples; otherwise the tile is written as `PairedWriter` does. After its last tile the elected
unit waits until its stores are complete (the staging tile must outlive them).
"""
from __future__ import annotations

from ...runtime.tensor_map import TensorMapSpec
from ...compose.contracts import Requirement
from ...errors import SetupError
from ...compose.selection import Knob
from ...compose.capabilities import OUTPUT_TENSOR_MAP, STORE_STAGING
from ...tile.wgmma import SWIZZLE_BYTES, swizzle_span
from .pairs import write_pairs
from .writers import PairedWriter, WriterConfig

SWIZZLE = SWIZZLE_BYTES
#: TMA box extents are at most 256 along every dimension.
_MAX_ROWS = 256
#: Output words a tensor map describes (the wgmma pipelines' results).
_WORDS = ("f16_bits", "bf16_bits", "f32", "i32")
#: Output words an accumulating epilogue adds into the output by reducing TMA stores.
_ADDED = ("f16_bits", "bf16_bits")


def band_bytes(stage_n: int, itemsize: int) -> int:
    """Bytes of a staging band's row (the TMA swizzle of the output's map): 128 where the tile's rows
    are whole 128 bytes, else 64 (tile/wgmma.py `swizzle_span`, the operands' rule); the tile's
    parts must be whole bands of it (`staging_bytes`)."""
    return swizzle_span(stage_n * itemsize)


class TmaStoreWriter(PairedWriter):
    name = "tma_store"
    knobs = (Knob("tma_store", True, "store each output tile through shared memory with TMA bulk stores "
                                     "(asynchronous) where the call's output allows it"),
             Knob("store_parts", 1, "stage and store the output tile in this many column parts, one after "
                                    "another (less shared memory for the staging tile)", choices=(1, 2, 3, 4)))
    requires = (Requirement.of("global_", STORE_STAGING, why="the tile is staged in shared memory and stored "
                                                             "by one elected unit"),
                Requirement.of("batch", OUTPUT_TENSOR_MAP, why="TMA stores write through the output's tensor map"))

    def setup(self, problem, selection, dialect) -> WriterConfig:
        paired = super().setup(problem, selection, dialect)
        # The staging tile's elements past M or N are written (never stored: the bulk stores clip),
        # the epilogue's arrays read in range there, unless the epilogue reads arrays and a contiguous
        # output's rows are not 16-byte multiples (so its tiles are stored directly): the checked fill
        # then (H200, 4096 x 4093 x 4096 with a bias 252 us against 331 unchecked, the direct stores
        # slower beside the other fill; 12000 x 6000 x 96 with a bias 212 checked, 70 unchecked).
        ep = problem.epilogue
        reads_c = ep.c is not None and not (ep.accumulate and problem.out.storage in _ADDED)
        checked = (reads_c or ep.bias is not None or ep.mul is not None) and (problem.n * problem.out.itemsize) % 16
        return WriterConfig(pairs=paired.pairs, tma_store=selection.tma_store and problem.out.storage in _WORDS,
                            store_parts=selection.store_parts, checked_fill=bool(checked))

    # -- what the global and batch levels ask ------------------------------------------------------
    @staticmethod
    def span(cfg) -> int:
        """Bytes of one row of a staging band: `band_bytes` (a gated epilogue's half-width tile: 128)."""
        return SWIZZLE if cfg.epilogue.paired else band_bytes(cfg.stage.stage_n, cfg.out.itemsize)

    def band(self, cfg) -> int:
        """Output elements in one row of a staging band."""
        return self.span(cfg) // cfg.out.itemsize

    def stages_pairs(self, cfg) -> bool:
        """A paired epilogue's one result a pair goes through a staging tile of half the stage's
        width (`write_paired`): whole bands, in one part."""
        ep = cfg.epilogue
        return (cfg.writer.tma_store and ep.paired and ep.pair_outputs == 1 and cfg.writer.store_parts == 1
                and cfg.stage.stage_n % (2 * self.band(cfg)) == 0 and cfg.stage.stage_m <= _MAX_ROWS)

    def staging_bytes(self, cfg) -> int:
        """Shared memory the global level keeps for the staging tile; SetupError if the stage tile is
        not whole boxes."""
        if not cfg.writer.tma_store:
            return 0
        if cfg.epilogue.paired:
            return cfg.stage.stage_m * cfg.stage.stage_n // 2 * cfg.out.itemsize if self.stages_pairs(cfg) else 0
        st, parts = cfg.stage, cfg.writer.store_parts
        if st.stage_n % (self.band(cfg) * parts) or st.stage_m > _MAX_ROWS:
            raise SetupError(self.name, f"a {st.stage_m} x {st.stage_n} tile in {parts} column part(s) is not "
                                        f"whole TMA boxes of at most {_MAX_ROWS} rows x {self.band(cfg)} elements "
                                        f"(set tma_store=False or fewer store_parts)")
        return st.stage_m * st.stage_n // parts * cfg.out.itemsize

    def tensor_map_spec(self, cfg, rows: int, cols: int, ld: int, batch_stride: int, batch: int) -> TensorMapSpec:
        """The output's map: ``rows x cols`` row-major with leading dimension ``ld`` and
        ``batch_stride`` (elements) over ``batch`` entries; one box is a staging band."""
        size = cfg.out.itemsize
        if self.stages_pairs(cfg):
            cols //= 2             # a paired epilogue's output: one result a pair of columns
        step = batch_stride * size if batch > 1 else ld * size * rows
        return TensorMapSpec(cfg.out.storage, (cols, rows, batch), (ld * size, step),
                             (self.band(cfg), cfg.stage.stage_m, 1), self.span(cfg))

    # -- device side -------------------------------------------------------------------------------
    def _offset(self, cfg, row: str, col: str) -> str:
        """Byte offset in the staging tile of tile element (``row``, ``col``)."""
        size, band, rows, span = cfg.out.itemsize, self.band(cfg), cfg.stage.stage_m, self.span(cfg)
        inner = f"((({col}) % {band}) * {size})"
        # TMA's swizzle: the chunk's bits XOR address bits 7-9 (128-byte rows: the row's low 3 bits;
        # 64-byte rows, two to 128 bytes: bits 1-2 of the row).
        phase = f"(({row}) & 7)" if span == SWIZZLE else f"((({row}) >> 1) & 3)"
        return (f"(({col}) / {band}) * {rows * span} + ({row}) * {span} + "
                f"((({inner} >> 4) ^ {phase}) << 4) + ({inner} & 15)")

    def write(self, g, cfg, d, scope) -> str:
        direct = super().write(g, cfg, d, scope)
        if not cfg.writer.tma_store:
            return direct
        stg, out = self._staging(g, cfg, d, scope)
        storage, ctype = cfg.out.storage, d.storage_type(cfg.out)
        band, parts = self.band(cfg), cfg.writer.store_parts
        # The output is c (beta 1): the tile is added into it by reducing stores, c never read.
        # 16-bit outputs only: the float32 reduction has not been run on a GPU here, so it reads c.
        add = cfg.epilogue.accumulate and cfg.out.storage in _ADDED
        c_value = d.zero(cfg.epilogue.compute) if add else None
        # The bulk stores clip each box at the output's edges, so the staging tile's elements past M
        # or N are never stored: written unchecked, the epilogue's arrays read in range (`setup`).
        # (The checks cost 28-78% of a short-K product's time: H200, 12000 x 6000 x 96 93.5 us
        # against 52.6 at 12000 x 6016; bench/SELECTION_NOTES.md, "Staged stores without bounds".)
        bounded = cfg.writer.checked_fill
        width = cfg.stage.stage_n // parts
        code = [f"if ({self._staged_flag(out, add)}) {{"]
        for part in range(parts):
            first = part * width

            def at(row, col, first=first):
                local = f"({col}) - {first}" if first else col
                return f"({stg.pointer} + {self._offset(cfg, row, local)})"

            def pair(row, col, lo, hi, at=at):
                return self.pair_value(d, storage, lo, hi, "local", at(row, col))

            def single(row, col, value, hoist, at=at):
                store = d.store_global(cfg.out, f"(({ctype}*){at(row, col)})", "0",
                                       g.output_value(cfg, d, scope, row, col, value, hoist, c_value, not bounded))
                return g.guarded(cfg, scope, row, col, store) if bounded else store

            bands = [(f"{scope.n0} + {first + j * band}", bool(first + j * band)) for j in range(width // band)]
            code += self._staged_part(cfg, d, scope, stg, out, bands, scope.n,
                                      self.paired(g, cfg, d, scope, pair, single, None,
                                                  range(first, first + width) if parts > 1 else None, c_value,
                                                  bounded),
                                      add)
        return "\n".join([*code, "} else {", direct, "}"])

    def _staging(self, g, cfg, d, scope):
        """(the global level's `StoreStaging`, the scope's output): SetupError where either lacks
        what TMA stores need."""
        stg, out = g.store_staging(cfg, d), scope.out
        if stg is None or not out.tensor_map or not out.map_flag:
            raise SetupError(self.name, "the global level keeps no staging tile or the batch level passes no "
                                        "output tensor map")
        return stg, out

    @staticmethod
    def _staged_flag(out, add: bool) -> str:
        """When a tile goes through the staging tile: where its map may store it, and where the
        units may copy its rows from there instead (`OperandRef.staging_flag`; not for reducing
        stores, which only TMA adds)."""
        return f"({out.map_flag} || {out.staging_flag})" if out.staging_flag and not add else out.map_flag

    def _staged_part(self, cfg, d, scope, stg, out, bands, bound: str, fill: str, add: bool = False) -> list[str]:
        """One staged part: wait until the last bulk stores (this tile's previous part, or the last
        tile's) have read the staging tile, ``fill`` it, make it visible to TMA, and store one box
        per band (``add``: add it into the output): ``bands`` holds each band's output column (the
        first's plus the band's width each) and whether it is checked against ``bound``. Where the
        map may not store the tile (`_staged_flag`), the units copy its rows instead."""
        rows, stores = cfg.stage.stage_m, []
        for j, (col, checked) in enumerate(bands):
            store = d.tma_store(out.tensor_map, f"{stg.address} + {j * rows * self.span(cfg)}u",
                                [col, scope.m0, out.batch], add)
            stores.append(f"if ({col} < {bound}) {store}" if cfg.check_n and checked else store)
        tma = [f"if ({stg.elected}) {{", *stores, d.bulk_commit(), "}"]
        if self._staged_flag(out, add) != out.map_flag:
            tma = [f"if ({out.map_flag}) {{", *tma, "} else {", self._copy_rows(cfg, d, scope, stg, out, bands, bound),
                   "}"]
        return [f"if ({stg.elected}) {d.bulk_wait(0, read=True)}", stg.sync, fill, d.fence_proxy_async(), stg.sync,
                *tma]

    def _copy_rows(self, cfg, d, scope, stg, out, bands, bound: str) -> str:
        """Every unit copies 16-byte chunks of the staging tile's rows inside the problem (below
        ``scope.m``, columns below ``bound``) to the output, consecutive units along a row: a tile
        whose rows past ``scope.m`` its map would overwrite (a grouped tile past its group's end)."""
        rows, size, ctype = cfg.stage.stage_m, cfg.out.itemsize, d.storage_type(cfg.out)
        per, chunks, nb = 16 // size, self.span(cfg) // 16, len(bands)
        chunk = [f"{d.vector_ref('global', 'u32', 4, 'cp_dst')} = {d.vector_ref('local', 'u32', 4, 'cp_src', const=True)};"]
        if cfg.check_n:
            chunk = [f"if (cp_col + {per} <= {bound}) {chunk[0]}",
                     f"else for (int ce = 0; cp_col + ce < {bound}; ++ce) cp_dst[ce] = (({ctype}*)cp_src)[ce];"]
        return "\n".join([
            "#pragma unroll 1",       # unrolled, its loads ahead spill the promoted fp8 kernels (ptxas sm_90a)
            f"for (int cp_i = {stg.unit}; cp_i < {rows * nb * chunks}; cp_i += {stg.units}) {{",
            f"const int cp_c = cp_i % {chunks}, cp_b = (cp_i / {chunks}) % {nb}, cp_r = cp_i / {chunks * nb};",
            f"const i64 cp_col = {bands[0][0]} + cp_b * {self.band(cfg)} + cp_c * {per};",
            f"if ({scope.m0} + cp_r < {scope.m}{f' && cp_col < {bound}' if cfg.check_n else ''}) {{",
            f"const unsigned char* cp_src = {stg.pointer} + "
            f"{self._offset(cfg, 'cp_r', f'(cp_b * {self.band(cfg)} + cp_c * {per})')};",
            f"GLOBAL {ctype}* cp_dst = {out.ptr} + ({scope.m0} + cp_r) * {out.ld} + cp_col;",
            *chunk, "}", "}"])

    def write_paired(self, g, cfg, d, scope) -> str:
        """A paired epilogue's results (`stages_pairs`): each into the staging tile at its half-width
        column, then stored as `write` stores a tile, through the half-width output's map (the
        band's column is half the GEMM column); the direct paired stores where the call's output
        has no map."""
        direct = super().write_paired(g, cfg, d, scope)
        if not self.stages_pairs(cfg):
            return direct
        stg, out = self._staging(g, cfg, d, scope)
        ctype = d.storage_type(cfg.out)

        def staged(row, half_col, value):
            return d.store_global(cfg.out, f"(({ctype}*)({stg.pointer} + {self._offset(cfg, row, half_col)}))", "0",
                                  value)

        band = self.band(cfg)
        bands = [(f"({scope.n0} >> 1) + {j * band}", bool(j)) for j in range(cfg.stage.stage_n // 2 // band)]
        return "\n".join([f"if ({self._staged_flag(out, False)}) {{",
                          *self._staged_part(cfg, d, scope, stg, out, bands, f"({scope.n} >> 1)",
                                             write_pairs(g, cfg, d, scope, staged)),
                          "} else {", direct, "}"])

    def after_tiles(self, g, cfg, d) -> str:
        if not cfg.writer.tma_store:
            return ""
        return f"if ({g.store_staging(cfg, d).elected}) {d.bulk_wait(0, read=False)}"
