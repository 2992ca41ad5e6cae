"""Hopper tile: one warpgroup (4 consecutive warps, 128 units) runs ``wgmma.mma_async`` on 64 x N.

PTX ISA, "Asynchronous warpgroup level matrix multiply-accumulate" (sm_90a only):
``wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16}`` (``m64nNk8.f32.tf32.tf32``
for float32 with ``precision="tf32"``, ``m64nNk32.s32.s8.s8`` for int8, exact in s32,
``m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2}`` for fp8, the kinds mixed too) reads both
operands from shared memory through 64-bit *matrix descriptors* and accumulates into N / 2 f32
(s32) registers per unit. tf32 and the 8-bit kinds have no transpose bits: both operands must be K-major in
shared memory (`requires_k_major`; the batch level `batch.k_major` transposes an operand that is
not). Every kind's k slice is 32 bytes, so the swizzled layout below is the same in bytes.
tf32 operands reach the instruction as float32 bits, of which it uses the upper 19: truncation, not
the rounding the mma.sync tile applies in registers (tile/mma.py). At 4096^3 that is a relative
error of 7.8e-4 against 2.9e-4 for the mma tile and for cuBLAS's tf32
(bench/results/h100/tf32_layouts.md). Rounding in shared memory would add a pass over every
slot, as many bytes again as the instructions read; not done.

The instruction is asynchronous: ``wgmma.fence`` orders earlier register accesses before it,
``wgmma.commit_group`` closes a batch, ``wgmma.wait_group n`` waits until at most n batches are
pending (only then may the shared memory they read be overwritten, or the accumulators be read).

Shared-memory layout (`SwizzledOperandLayout`): 128-byte swizzle, the mode the descriptor's bits
62-63 = 1 name (an MN-major operand whose warpgroup tile is not whole 128-byte rows, as a 96-column
rhs tile: 64-byte swizzle, mode 2, described after the list). Shared memory is cut into 128-byte
rows of 64 contiguous 16-bit (32 tf32, 128 int8) elements; 8 rows form a 1024-byte atom, and
inside an atom the 16-byte chunk c of row r is stored at chunk ``c ^ (r & 7)`` (the hardware
applies that XOR to address bits 4-6 from bits 7-9, so atoms must start 1024-byte aligned). Two operand orientations (CUTLASS cute's canonical GMMA layouts):

* K-major (k contiguous: a row-major lhs, a column-major rhs): row x (an m or n index) holds one
  128-byte run of k (64 16-bit or 32 tf32 elements); a stage_k of several runs stacks whole
  extent x 128-byte *k-atoms*. Consecutive 8-row groups are SBO = 1024 bytes apart; LBO is unused
  with swizzling. The instruction's k slice (16 16-bit or 8 tf32 elements: 32 bytes) starts 32
  bytes further into the row each time: the swizzle is a function of the address, so that lands on
  the right chunks.
* MN-major (m or n contiguous: a column-major lhs, a row-major rhs; the instruction's transpose
  bit is set): row k holds 64 consecutive x; 64-wide x atoms are LBO = stage_k * 128 bytes apart,
  8-row k groups SBO = 1024 bytes apart, and k slice kk starts 16 * 128 * kk bytes in.

The 64-byte swizzle (`operand_swizzle`; MN-major only here) is the same with 64-byte rows of 32
16-bit elements: chunk c of row r at ``c ^ ((r >> 1) & 3)`` (address bits 4-5 from bits 7-8),
512-byte atoms of 8 rows, x atoms 32 wide LBO = stage_k * 64 bytes apart, SBO = 512, k slice kk at
16 * 64 * kk bytes (CUTLASS cute's SW64 MN-major layout; TMA's 64-byte swizzle writes it).

Descriptor: bits 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset (0:
atoms are 1024-aligned), 62-63 swizzle mode. Tile origins are added to the start-address field
(shared addresses stay below 256 KiB, so the 14-bit field never carries into LBO).

Accumulator layout (m64nNk16, f32): warp w of the warpgroup owns rows 16w..16w+15; for every 8
columns j, registers 4j..4j+3 hold (16w + g, 8j + 2t), (.., + 1), (16w + g + 8, 8j + 2t), (.., + 1)
with g = lane >> 2, t = lane & 3 (the mma.sync C layout, stacked).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..compose.capabilities import WARPGROUP_SCOPE
from .base import TileConfig, TileMatmul

WARPGROUP = 128
SWIZZLE_BYTES = 128          # one swizzled row: 64 16-bit or 32 32-bit elements
ATOM_BYTES = 1024            # 8 rows: the swizzle pattern repeats (alignment of every atom)
#: storage -> (PTX operand type, shared-memory word, k per instruction): one instruction's k slice
#: is always 32 bytes of a swizzled row.
_KINDS = {"f16_bits": ("f16", "f16_bits", 16), "bf16_bits": ("bf16", "bf16_bits", 16),
          "f32": ("tf32", "f32", 8), "i8": ("s8", "i8", 32), "f8e4m3": ("e4m3", "f8e4m3", 32),
          "f8e5m2": ("e5m2", "f8e5m2", 32)}
#: Kinds without transpose immediates: their operands must reach shared memory K-major.
_K_MAJOR_KINDS = ("tf32", "s8", "e4m3", "e5m2")
#: The fp8 kinds, which mix (a e4m3 lhs with a e5m2 rhs and the other way round).
_FP8_KINDS = ("e4m3", "e5m2")
#: Bytes per element of each kind.
KIND_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "s8": 1, "e4m3": 1, "e5m2": 1}
#: Bytes per element of each storage word wgmma reads (what the swizzled and TMA loaders copy).
STORAGE_BYTES = {storage: KIND_BYTES[kind] for storage, (kind, _, _) in _KINDS.items()}
#: Accumulator of a kind: (compute word, PTX type); float32 unless listed.
_ACCUMULATORS = {"s8": ("i32", "s32")}
#: The tile widths offered: 96 (whole 32-wide atoms of the 64-byte swizzle where the rhs is MN-major)
#: fills a wave where 128 leaves a quarter of it idle (1536^3: 128 tiles of 192 x 96, 96 of 192 x 128);
#: 32 (one such atom) streams a 4096-column weight on 128 cubes where 64 takes 64.
_INSTRUCTION_N = (32, 64, 96, 128, 192, 256)
#: The descriptor's swizzle-mode field (bits 62-63) by swizzled row bytes.
_SWIZZLE_MODES = {128: 1, 64: 2}


def swizzle_span(row_bytes: int) -> int:
    """The swizzle (bytes of one swizzled row) for rows of ``row_bytes``: 128 where they are whole
    128-byte rows, else 64. One rule for the operands' stages (`operand_swizzle`) and the staged
    output's bands (global_/write/tma_store_writer.py `band_bytes`)."""
    return SWIZZLE_BYTES if row_bytes % SWIZZLE_BYTES == 0 else 64


def operand_swizzle(mn_major: bool, extent: int, itemsize: int) -> int:
    """Bytes of one swizzled row of an operand's stage: 128, except an MN-major extent that is not
    whole 128-byte rows (a 96-column rhs tile) takes the 64-byte swizzle;
    `SwizzledOperandLayout.check` refuses what neither serves."""
    return swizzle_span(extent * itemsize) if mn_major else SWIZZLE_BYTES


@dataclass(frozen=True)
class SwizzledOperandLayout:
    """Where one operand's stage lies in shared memory (128-byte swizzle, or 64 where ``swizzle``
    says: `operand_swizzle`).

    ``extent``: the stage's m (lhs) or n (rhs); ``mn_major``: x (m or n) is the contiguous axis;
    ``itemsize``: bytes per element (2; 4 for tf32 and 1 for int8, K-major only); ``swizzle``:
    bytes of one swizzled row."""

    mn_major: bool
    extent: int
    stage_k: int
    itemsize: int = 2
    swizzle: int = SWIZZLE_BYTES

    @property
    def row_elems(self) -> int:
        """Elements in one swizzled row."""
        return self.swizzle // self.itemsize

    def check(self, name: str, operand: str) -> None:
        """SetupError unless the layout is whole swizzled rows of a mode the descriptor has."""
        whole = (self.extent if self.mn_major else self.stage_k) % self.row_elems == 0
        if self.swizzle not in _SWIZZLE_MODES or not whole:
            raise SetupError(name, f"the {operand} stage ({self.extent} x {self.stage_k}) is not whole "
                                   f"{self.swizzle}-byte swizzled rows (modes {tuple(_SWIZZLE_MODES)})")

    @property
    def smem_bytes(self) -> int:
        return self.extent * self.stage_k * self.itemsize

    @property
    def atom_stride(self) -> int:
        """Bytes between a line's consecutive swizzled runs (one row of chunks): MN-major, the next
        x atom (stage_k rows on); K-major, the next k-atom (extent rows on)."""
        return (self.stage_k if self.mn_major else self.extent) * self.swizzle

    @property
    def lbo(self) -> int:
        # MN-major: the stride between x atoms (CUTLASS cute's canonical layout; checked on the
        # H100: the other way round reads outside the stage and faults). K-major: unused with
        # swizzling (field value 1).
        return self.stage_k * self.swizzle if self.mn_major else 16

    @property
    def sbo(self) -> int:
        return 8 * self.swizzle    # between 8-row groups: of x (K-major) or of k (MN-major)

    def tile_offset(self, x0: str, k0: int) -> str:
        """Bytes from the stage's start to the tile whose first x is ``x0`` (an expression, a
        multiple of `row_elems` where MN-major) and first k is ``k0`` (a multiple of the
        instruction's k)."""
        if self.mn_major:
            return f"(({x0}) / {self.row_elems}) * {self.atom_stride} + {k0 * self.swizzle}"
        run, within = divmod(k0, self.row_elems)
        return f"({x0}) * {self.swizzle} + {run * self.atom_stride + within * self.itemsize}"

    def tile_offset_bytes(self, x0: int, k0: int) -> int:
        """`tile_offset` of a tile whose first x is a number: the bytes, computed here."""
        if self.mn_major:
            return (x0 // self.row_elems) * self.atom_stride + k0 * self.swizzle
        run, within = divmod(k0, self.row_elems)
        return x0 * self.swizzle + run * self.atom_stride + within * self.itemsize

    def descriptor_bits(self) -> int:
        """The constant fields of the descriptor (everything but the start address)."""
        return ((self.lbo >> 4) << 16) | ((self.sbo >> 4) << 32) | (_SWIZZLE_MODES[self.swizzle] << 62)

    def descriptor(self, address: str) -> str:
        """Expression: the descriptor of the stage at 32-bit shared address ``address``. The start
        address field is 14 bits of ``address >> 4``: the bits above are dropped, not or-ed into the
        leading-byte offset after it. In a cube of rank 1 of a 2-cube cluster the H100's shared
        addresses have such bits, and with them the MN-major operands (whose atoms the offset
        steps over) read wrong atoms; K-major ones ignore the offset."""
        bits = self.descriptor_bits()
        return f"((u64){bits >> 32}u << 32 | {bits & 0xFFFFFFFF}u) | (u64)((({address}) >> 4) & 0x3FFFu)"


@dataclass(frozen=True)
class WgmmaTileConfig(TileConfig):
    kind: str = "f16"              # PTX operand type: f16 / bf16 / tf32 / s8 / e4m3 / e5m2
    rhs_kind: str = ""             # the rhs's where it differs (fp8 mixed: e4m3 x e5m2)
    lhs_mn_major: bool = False     # instruction's imm-trans-a
    rhs_mn_major: bool = False     # imm-trans-b

    @property
    def acc_regs(self) -> int:
        return self.tile_n // 2

    @property
    def itemsize(self) -> int:
        """Bytes per operand element in shared memory."""
        return KIND_BYTES[self.kind]

    @property
    def acc_ptx(self) -> str:
        return _ACCUMULATORS.get(self.kind, ("f32", "f32"))[1]


def check_wgmma_device(name: str, dialect: Dialect, cuda_only: bool = False) -> None:
    """wgmma exists on sm_90a only (not on sm_80, nor on later majors): refuse anything else. CUDA
    by the compute capability; NVIDIA's OpenCL where the probe granted it (kernels built for
    sm_90a by nvJitLink: runtime/sass.py), unless ``cuda_only`` (a component whose other
    instructions only the CUDA dialect renders)."""
    dev = dialect.device
    cc = dev.compute_capability
    reachable = dialect.backend == "cuda" or (not cuda_only and dialect.supports("wgmma"))
    if not reachable or cc is None or cc[0] != 9:
        where = f"{dialect.backend}" + ("" if cc is None else " sm_%d%d" % cc)
        how = "CUDA sm_90a" if cuda_only else "CUDA sm_90a, or NVIDIA's OpenCL with its PTX built by nvJitLink"
        raise SetupError(name, f"needs wgmma ({how}); device {dev.name!r} ({where}) has none")
    if dev.plane_size != 32:
        raise SetupError(name, f"a warpgroup is 4 warps of 32 units; device planes are {dev.plane_size}")


class WgmmaTile(TileMatmul):
    """A 64 x tile_n x 16 warpgroup tile. Fragments are descriptors: ``load_lhs`` / ``load_rhs``
    take a descriptor expression (the stage builds it from `SwizzledOperandLayout`), not a
    `SmemTile`; wgmma reads shared memory itself."""

    name = "wgmma"
    scope = "warpgroup"
    knobs = (Knob("tile_n", 256, f"columns of a warpgroup's tile (one of {_INSTRUCTION_N})"),)
    provides = frozenset({WARPGROUP_SCOPE})
    lanes = (("lane", "UNIT_ID & 31"), ("wg_warp", "(UNIT_ID >> 5) & 3"))

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> WgmmaTileConfig:
        check_wgmma_device(self.name, dialect)
        for et in (problem.lhs, problem.rhs):
            if et.storage not in _KINDS:
                raise SetupError(self.name, f"wgmma here takes float16 / bfloat16 / int8 / fp8 (float32 "
                                            f"with precision='tf32'), not {et.name}")
        ptx, smem, tk = _KINDS[problem.lhs.storage]
        rhs_ptx = _KINDS[problem.rhs.storage][0]
        if problem.lhs != problem.rhs and not (ptx in _FP8_KINDS and rhs_ptx in _FP8_KINDS):
            raise SetupError(self.name, f"lhs {problem.lhs.name} and rhs {problem.rhs.name} must share a "
                                        f"dtype (only the fp8 kinds mix)")
        lhs_mn, rhs_mn = problem.lhs_layout == "col", problem.rhs_layout == "row"
        if ptx == "tf32" and problem.precision != "tf32":
            raise SetupError(self.name, "float32 inputs would be rounded to tf32 by the tensor cores; "
                                        "opt in with precision='tf32'")
        if ptx in _K_MAJOR_KINDS and (lhs_mn or rhs_mn):
            raise SetupError(self.name, f"wgmma reads {ptx} operands only K-major (a row-major lhs and "
                                        f"a column-major rhs); the k_major batch level transposes others")
        tn = selection.tile_n
        if tn not in _INSTRUCTION_N:
            raise SetupError(self.name, f"tile_n={tn}; expected one of {_INSTRUCTION_N}")
        compute = _ACCUMULATORS.get(ptx, ("f32", "f32"))[0]
        return WgmmaTileConfig(tile_m=64, tile_n=tn, tile_k=tk, compute=compute, smem=smem, kind=ptx,
                               rhs_kind="" if rhs_ptx == ptx else rhs_ptx,
                               rhs_smem="" if rhs_ptx == ptx else problem.rhs.storage,
                               lhs_mn_major=lhs_mn, rhs_mn_major=rhs_mn)

    def requires_k_major(self, problem: MatmulProblem) -> bool:
        """tf32 and 8-bit wgmma have no transpose bits: their operands must reach shared memory
        K-major."""
        kind = _KINDS.get(problem.lhs.storage)
        return kind is not None and kind[0] in _K_MAJOR_KINDS

    # -- registers ------------------------------------------------------------------------------
    def declare_lhs(self, cfg, d, frag):
        return f"u64 {frag};"

    def declare_rhs(self, cfg, d, frag):
        return f"u64 {frag};"

    def declare_acc(self, cfg, d, acc):
        return f"{d.c_type(cfg.compute)} {acc}[{cfg.acc_regs}];"

    def init_acc(self, cfg, d, acc):
        return f"#pragma unroll\nfor (int r = 0; r < {cfg.acc_regs}; ++r) {acc}[r] = {d.zero(cfg.compute)};"

    def load_lhs(self, cfg, d, frag, src):
        return f"{frag} = {src};"

    def load_rhs(self, cfg, d, frag, src):
        return f"{frag} = {src};"

    # -- compute ----------------------------------------------------------------------------------
    def execute(self, cfg, d, lhs, rhs, acc, overwrite: bool = False):
        """``overwrite``: acc = lhs rhs (the accumulators' old values unread), else acc += lhs rhs."""
        # tf32 and the 8-bit kinds take no transpose immediates (their operands are K-major).
        trans = None if cfg.kind in _K_MAJOR_KINDS else (int(cfg.lhs_mn_major), int(cfg.rhs_mn_major))
        return d.wgmma(cfg.tile_n, cfg.tile_k, cfg.kind, trans, acc, lhs, rhs, cfg.acc_ptx, cfg.rhs_kind or None,
                       overwrite)

    @staticmethod
    def imprecise(cfg) -> bool:
        """Whether the tensor cores accumulate this kind in fewer bits than float32: fp8 (the H100
        keeps about 14 bits of the float32 accumulator's sum; DeepGEMM's account), so a global
        level should add each K block's partial product into float32 registers (promotion)."""
        return cfg.kind in _FP8_KINDS

    @staticmethod
    def fence(d: Dialect) -> str:
        """Before the first wgmma of a batch: order earlier accesses to the accumulators."""
        return d.wgmma_fence()

    @staticmethod
    def commit(d: Dialect) -> str:
        return d.wgmma_commit()

    @staticmethod
    def wait(d: Dialect, pending: int) -> str:
        return d.wgmma_wait(pending)

    def pin(self, cfg, d: Dialect, acc: str) -> str:
        """Keep the compiler from touching the accumulators across a wait: it does not know that
        wgmma writes them asynchronously (CUTLASS's warpgroup_fence_operand)."""
        return d.pin_registers(acc, cfg.acc_regs, cfg.compute)

    @staticmethod
    def acc_registers(cfg):
        """Per accumulator register of a unit: (index, row offset inside the warp's 16 rows: 0 or
        8, added to `acc_row`, first column of its 8-column group); the unit's own row and column
        within those are ``lane >> 2`` and ``((lane & 3) << 1) + (index & 1)`` (the layout in the
        module docstring)."""
        for j in range(cfg.tile_n // 8):
            for e in range(4):
                yield 4 * j + e, 8 if e >= 2 else 0, 8 * j

    @staticmethod
    def acc_row(cfg) -> str:
        """The tile row of this unit's first accumulator registers (`acc_registers` adds 0 or 8)."""
        return "wg_warp * 16 + (lane >> 2)"

    def acc_elements(self, cfg, acc, columns: range | None = None):
        """As every tile's; ``columns``: only the elements of those tile columns (8-column groups
        are whole: a range of multiples of 8)."""
        row, col = f"({self.acc_row(cfg)})", "((lane & 3) << 1)"
        for reg, dr, c0 in self.acc_registers(cfg):
            if columns is not None and c0 not in columns:
                continue
            r = f"{row} + 8" if dr else row
            yield r, f"{c0} + {col}" + (" + 1" if reg & 1 else ""), f"{acc}[{reg}]"
