"""Global level: one cube computes one ``stage_m x stage_n`` output tile over its whole K range.

Contract
--------
The batch level renders the kernel around the body and hands it a `CubeScope` (batch/base.py):
operand references (pointer and leading dimension of lhs, rhs and the output at this batch entry
and K range), the extents ``M``/``N`` and the K range's length, and the cube's origin. The body
reads the kernel through the scope only. Shared memory is declared by ``shared_declarations`` at
kernel scope (OpenCL requires it there).

The global matmul loops over K in steps of ``stage_k``: its *loaders* (slots ``lhs_loader``,
``rhs_loader``) move the lhs and rhs slices of global memory into the stage's shared memory
(zero-filling anything outside the problem, so the stage never needs bounds checks), it
synchronizes the cube, runs the stage (possibly injecting its next loads through the stage event
listener) and finally its *writer* (slot ``writer``) stores the accumulators through `store`, which
applies the fused epilogue and checks bounds only on the axes the problem does not divide. On exit
every in-range output element of the cube's tile has been written exactly once and nothing outside
it has. Every global level asks its listener (its own chained with the algorithm's, see
stage/events.py) at ``KernelStart`` and ``BeforeStore`` too.

Loader contract (loaders.py, async_loader.py, swizzled_loader.py, ordered.py): a loader is set up
for one operand's stage tile (`OperandTile`) and the units that share its work, and provides one
*interface* (how the global level drives it: self-contained task blocks; or declare / issue /
commit of asynchronous chunks into a ring slot) and one *destination* (what it writes: k-major
shared memory, shared memory in the operand's global layout, 128-byte-swizzled shared memory, or
each unit's own registers). Global levels require an interface; stages require a destination.

Writer contract (writers.py): given the stage's accumulators and the global level's `store`, a
writer emits the stores of the cube's tile. A writer may need what only some global levels have
(a shared-memory ring that is free once the main loop ends: `SHARED_RING`; a staging tile, a
barrier among the storing units and an elected unit for bulk stores: `STORE_STAGING`). A
persistent cube's global level renders the writer's `after_tiles` once its units are past their
last tile.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from ..codegen.dialect import Dialect
from ..dtypes import ElementType
from ..compose.contracts import component_name
from ..problem import Layout, MatmulProblem
from ..compose.selection import Knob
from ..stage.base import StageConfig, StageMatmul
from ..stage.events import BeforeStore, ChainedListener, KernelStart, StageEventListener
from ..compose.capabilities import (CHUNK_LOADER, GLOBAL_LAYOUT_SMEM, K_MAJOR_SMEM, SHARED_RING,  # noqa: F401 (re-exported)
                           QUANTIZED_WEIGHTS, SWIZZLED_CHUNK_LOADER, SWIZZLED_SMEM, TASK_LOADER, UNIT_REGISTERS,
                           UNIT_ROWS_LOADER)
from ..epilogue.spec import IDENTITY, Epilogue
from ..errors import SetupError
from ..quant.format import WeightFormat
from .read.loaders import Loader, LoaderConfig
from .write.writers import DirectWriter, WriterConfig


@dataclass(frozen=True)
class TileLoopRequest:
    """What a global level asks of a persistent batch level's tile loop (`PERSISTENT_TILE_LOOP`,
    `GlobalConfig.tile_loop`): ``cluster_m`` cubes launched together along M (1: no clusters);
    ``split_tail``: the last wave's tiles split along K into at most this many parts (0: none,
    batch/split_tail.py); ``split_waits``: a split tile's parts wait for one another (its owner for
    the later parts: the kernel is launched co-resident), else the last part to finish adds them
    and nothing waits; ``ragged_reduction``: this configuration takes a reduction of its own per
    tile (`CubeScope.k_per_tile`; a level providing `RAGGED_REDUCTION` says which of its
    configurations do). The batch level answers in the `CubeScope`, which the global level checks."""

    cluster_m: int = 1
    split_tail: int = 0
    split_waits: bool = True
    ragged_reduction: bool = False


@dataclass(frozen=True)
class GlobalConfig:
    stage: StageConfig
    lhs_loader: LoaderConfig
    rhs_loader: LoaderConfig
    out: ElementType
    check_m: bool
    check_n: bool
    check_k: bool
    # What happens to each accumulator on its way out (set from the problem by the batch level).
    epilogue: Epilogue = field(default=IDENTITY, kw_only=True)
    writer: WriterConfig = field(default=WriterConfig(), kw_only=True)   # the writer's config (writers.py)
    #: The quantized weights this level reads as its rhs (their packed words are the rhs parameter;
    #: the batch level appends their scales and zeros, `WeightFormat.params`), or None.
    weights: WeightFormat | None = field(default=None, kw_only=True)

    def loader(self, op: str) -> LoaderConfig:
        """The config of operand ``op``'s loader: "lhs" or "rhs"."""
        if op not in ("lhs", "rhs"):
            raise ValueError(f"loader: expected 'lhs' or 'rhs', got {op!r}")
        return self.lhs_loader if op == "lhs" else self.rhs_loader

    @property
    def tile_loop(self) -> TileLoopRequest:
        """What this level asks of a persistent batch level's tile loop: nothing, by default."""
        return TileLoopRequest()

    @property
    def shared_memory_bytes(self) -> int:
        return self.lhs_loader.smem_bytes + self.rhs_loader.smem_bytes

    @property
    def dynamic_shared_bytes(self) -> int:
        """Shared memory the launch must provide dynamically (0: the kernel declares it statically)."""
        return 0

    @property
    def units(self) -> int:
        """Units per cube the kernel is launched with: the stage's, unless a global matmul adds
        units of its own (e.g. load-only units)."""
        return self.stage.units

    @property
    def occupancy(self) -> int:
        """Cubes a multiprocessor must hold, where this config needs the register count fixed at
        entry (``setmaxnreg``: 1), beside the level's own `GlobalMatmul.occupancy`; 0: no hint."""
        return 0


class GlobalMatmul(ABC):
    """A global matmul family, generic over its stage, loaders, writer and listener."""

    name = "global"
    knobs: ClassVar[tuple[Knob, ...]] = ()
    provides: ClassVar[frozenset] = frozenset()
    requires: ClassVar[tuple] = ()
    #: The slots this level composes (a level that reads global memory itself uses no loaders).
    uses: ClassVar[tuple[str, ...]] = ("stage", "lhs_loader", "rhs_loader", "writer")
    #: Whether ``body`` may run again in the same cube for another output tile (a persistent batch
    #: launch puts each run in its own block and a cube barrier between runs): nothing a run leaves
    #: behind (copies in flight, barrier phases, shared state read before it is written) may change
    #: the next. Opt-in: an unchecked global matmul gets one cube per tile.
    reentrant = False
    #: Cubes per compute unit the compiler should plan registers for (0: its own default). A
    #: bandwidth-bound body with many loads in flight says 1: ptxas then keeps them all in
    #: registers instead of serializing them to raise occupancy.
    occupancy = 0
    #: Whether this level applies operand scales per block of K (the problem's epilogue says
    #: ``lhs_scale`` / ``rhs_scale`` = "block"); algorithms refuse such problems before launch when
    #: their global level does not (the engine then dequantizes the operands first).
    applies_block_scales = False
    #: Whether its stores go through `write_output`, which stores a gated epilogue's column pairs
    #: (global_/write/pairs.py); a level storing element by element says False.
    stores_pairs = True
    #: The global level's own listener (double buffering spreads its loads through one).
    listener_class: ClassVar[type] = StageEventListener
    #: Whether this level reads quantized weights itself (the decode level); others read them
    #: through a rhs loader that provides QUANTIZED_WEIGHTS (`reads_weights`).
    reads_quantized = False

    def __init__(self, stage: StageMatmul | None = None, lhs_loader: Loader | None = None,
                 rhs_loader: Loader | None = None, writer=None, listener: type | None = None):
        self.stage = stage
        self.lhs_loader = lhs_loader
        self.rhs_loader = rhs_loader
        if writer is None and "writer" in self.uses:
            writer = DirectWriter()
        self.writer = writer
        #: The algorithm's listener class (its instances chain after the global level's own).
        self.user_listener = listener

    @abstractmethod
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> GlobalConfig: ...

    @abstractmethod
    def shared_declarations(self, cfg: GlobalConfig, d: Dialect) -> str: ...

    @abstractmethod
    def body(self, cfg: GlobalConfig, d: Dialect, scope) -> str:
        """The cube's work, reading the kernel through ``scope`` (a `CubeScope`)."""

    def reads_weights(self) -> bool:
        """Whether a kernel of this level reads quantized weights (itself, or by its rhs loader)."""
        if self.reads_quantized:
            return True
        return "rhs_loader" in self.uses and QUANTIZED_WEIGHTS in getattr(self.rhs_loader, "provides", ())

    def check_weights(self, problem: MatmulProblem) -> None:
        """SetupError unless this level reads the problem's rhs as it is given: quantized weights
        by a level or loader that reads them, a dense rhs by one that does not."""
        reader = self.name if self.reads_quantized or "rhs_loader" not in self.uses \
            else f"rhs loader {getattr(self.rhs_loader, 'name', type(self.rhs_loader).__name__)}"
        if problem.weights is None:
            if self.reads_weights():
                raise SetupError(reader, "reads quantized weights (gemm_engine.quantize); this problem's rhs is "
                                         "a dense array")
        elif not self.reads_weights():
            raise SetupError(reader, f"reads dense rhs elements; {problem.weights.kind} weights need a "
                                     "dequantizing loader (QUANTIZED_WEIGHTS) or the quantized decode level")
        elif problem.weights.transposed:
            raise SetupError(reader, "reads packed codes along K, and a transposed weight (W.T) has them along "
                                     "the product's N: the dequantizing pass (dequantized_*) reads it")

    def setup_stage(self, problem: MatmulProblem, selection, dialect: Dialect, lhs_k_contiguous: bool | None = None,
                    rhs_k_contiguous: bool | None = None) -> StageConfig:
        """The stage's config, the operands oriented as the loaders store them (or as given, for a
        level without loaders); SetupError naming the stage and the loader unless each loader
        provides what the config requires of it (`StageMatmul.config_requirements`)."""
        if lhs_k_contiguous is None:
            lhs_k_contiguous = self.lhs_loader.k_contiguous(Layout(problem.lhs_layout), True)
        if rhs_k_contiguous is None:
            rhs_k_contiguous = self.rhs_loader.k_contiguous(Layout(problem.rhs_layout), False)
        cfg = self.stage.setup(problem, selection, dialect, lhs_k_contiguous, rhs_k_contiguous)
        for req in self.stage.config_requirements(cfg):
            other = getattr(self, req.slot, None) if req.slot in self.uses else None
            stage, slot = component_name(type(self.stage)), req.slot.replace("_", " ")
            why = f" ({req.why})" if req.why else ""
            if other is None:
                raise SetupError(self.name, f"stage {stage} needs {req.describe()} from its {slot}{why}, and "
                                            f"{self.name} has none")
            offered = frozenset(getattr(other, "provides", ()))
            if not offered & req.any_of:
                raise SetupError(self.name, f"stage {stage} needs {req.describe()} from its {slot}{why}, which "
                                            f"{component_name(type(other))} does not provide")
        return cfg

    def requires_k_major(self, problem: MatmulProblem) -> bool:
        """Whether the operands must reach this level K-major (the tile's business: tf32 wgmma)."""
        return self.stage is not None and self.stage.requires_k_major(problem)

    # -- listeners --------------------------------------------------------------------------------
    def chain(self, own: StageEventListener | None = None) -> StageEventListener:
        """The listener of one render: this level's own (``own``, or a fresh ``listener_class``),
        then the algorithm's."""
        own = own if own is not None else self.listener_class()
        if self.user_listener is None:
            return own
        return ChainedListener(own, self.user_listener())

    @staticmethod
    def event(listener: StageEventListener, event) -> list[str]:
        """The listener's code for a global event, as a list of zero or one statements."""
        code = listener.on_event(event)
        return [code] if code else []

    def kernel_start(self, listener) -> list[str]:
        return self.event(listener, KernelStart())

    def before_store(self, listener) -> list[str]:
        return self.event(listener, BeforeStore())

    # -- stores: shared by every global matmul and writer -----------------------------------------
    def store(self, cfg: GlobalConfig, d: Dialect, scope, row: str, col: str, value: str,
              hoist: dict | None = None) -> str:
        """Statement: store the accumulator ``value`` of tile element (``row``, ``col``) (relative
        to the cube's origin), bounds-checked only on the axes the problem does not divide. Every
        writer goes through here, so one change (e.g. an epilogue) reaches every kernel."""
        out = scope.out
        return self.guarded(cfg, scope, row, col, d.store_global(
            cfg.out, out.ptr, f"({scope.m0} + {row}) * {out.ld} + {scope.n0} + {col}",
            self.output_value(cfg, d, scope, row, col, value, hoist)))

    @staticmethod
    def output_value(cfg: GlobalConfig, d: Dialect, scope, row: str, col: str, value: str,
                     hoist: dict | None = None, c_value: str | None = None, clamped: bool = False) -> str:
        """Expression: what is stored for accumulator ``value`` of tile element (row, col): the
        accumulator through the problem's fused epilogue (``hoist``, ``c_value``: `Epilogue.apply`'s;
        ``clamped``: the element may lie past the problem, its value never stored, so the epilogue's
        arrays are read in range: `Epilogue.apply`'s ``limits``)."""
        limits = (scope.m if cfg.check_m else None, scope.n if cfg.check_n else None) if clamped else (None, None)
        return cfg.epilogue.apply(d, value, f"{scope.m0} + {row}", f"{scope.n0} + {col}", hoist, c_value, limits)

    @staticmethod
    def bounds(cfg: GlobalConfig, scope, row: str, col: str) -> list[str]:
        """Conditions that tile element (row, col) lies inside the problem (none where it divides)."""
        return (([f"{scope.m0} + {row} < {scope.m}"] if cfg.check_m else [])
                + ([f"{scope.n0} + {col} < {scope.n}"] if cfg.check_n else []))

    def guarded(self, cfg: GlobalConfig, scope, row: str, col: str, statement: str) -> str:
        conds = self.bounds(cfg, scope, row, col)
        return f"if ({' && '.join(conds)}) {statement}" if conds else statement

    def write_output(self, cfg: GlobalConfig, d: Dialect, scope) -> str:
        """The writer's stores of the stage's accumulators (a paired epilogue's: write/pairs.py)."""
        if cfg.epilogue.paired:
            return self.writer.write_paired(self, cfg, d, scope)
        return self.writer.write(self, cfg, d, scope)

    def shared_ring(self, cfg: GlobalConfig, d: Dialect):
        """The `SharedRing` a writer may reuse after the main loop (levels that provide SHARED_RING)."""
        return None

    def store_staging(self, cfg: GlobalConfig, d: Dialect):
        """The `StoreStaging` a writer may fill between tiles (levels that provide STORE_STAGING)."""
        return None


@dataclass(frozen=True)
class SharedRing:
    """Shared memory a global level leaves free for its writer once the main loop is done:
    ``pointer`` (a byte-pointer expression), ``bytes`` (its size) and ``drain`` (statements after
    which no copy can land in it any more and every unit is past its last read)."""

    pointer: str
    bytes: int
    drain: tuple[str, ...]


@dataclass(frozen=True)
class StoreStaging:
    """A shared-memory buffer a global level keeps for its writer's output tile (`STORE_STAGING`):
    ``address`` (its 32-bit shared address, 1024-byte aligned) and ``pointer`` (a byte pointer to
    it), ``bytes``; ``sync`` (a statement: every unit that stores meets there), ``elected`` (a
    condition true in exactly one of those units); ``unit`` (this unit's index among them, an
    expression) and ``units`` (how many), for stores that every one of them shares."""

    address: str
    pointer: str
    bytes: int
    sync: str
    elected: str
    unit: str
    units: int
