"""Every built-in component, for composing algorithms: import from here.

An algorithm is a subclass of `Algorithm` that sets class attributes, one per slot (``tile``,
``stage``, ``lhs_loader``, ``rhs_loader``, ``writer``, ``global_``, ``listener``, ``batch``,
``dispatch``); see the README's "Adding an algorithm". What each component needs from the others
is declared (``provides`` / ``requires``, the capabilities below) and checked before setup, so a
composition either runs right or is refused with a `SetupError` naming the components.
"""
from .algorithms.base import Algorithm, KernelConfig, register
from .algorithms.family import AlgorithmFamily
from .batch.base import (DISPATCHES, BatchConfig, BatchMatmul, CallValues, CubeScope, Dispatch, DispatchScope, Launch,
                         OperandRef, Workspace, register_dispatch)
from .batch.dispatch import ColMajorDispatch, GroupedDispatch, RowMajorDispatch, SwizzledDispatch
from .batch.group_walk import GroupWalk
from .batch.grouped import GroupedBatchMatmul
from .batch.grouped_tma import GroupedTmaBatchMatmul
from .batch.k_major import KMajorBatchMatmul
from .batch.partitioned import PartitionedBatchMatmul
from .codegen.signature import KernelSignature, Param
from .batch.split_k import SplitKBatchMatmul
from .batch.split_tail import SplitTailScope
from .batch.tma_persistent import TmaPersistentBatchMatmul
from .compose.capabilities import (ASYNC_DESCRIPTOR_STAGE, CARRIED_FRAGMENTS, OUTPUT_TENSOR_MAP, PLANE_SCOPE,
                                   REGISTER_LHS_STAGE, SMEM_STAGE, STORE_STAGING, UNIT_SCOPE, WARPGROUP_SCOPE,
                                   WarpgroupTileConfigFields, WarpgroupTileInterface)
from .compose.contracts import Capability, Requirement, check_composition
from .global_.read.async_loader import ChunkLoader
from .global_.base import (CHUNK_LOADER, GLOBAL_LAYOUT_SMEM, K_MAJOR_SMEM, SHARED_RING, SWIZZLED_CHUNK_LOADER,
                           SWIZZLED_SMEM, TASK_LOADER, UNIT_REGISTERS, UNIT_ROWS_LOADER, GlobalConfig, GlobalMatmul,
                           TileLoopRequest)
from .compose.capabilities import OWN_TILE_LOOP, PERSISTENT_TILE_LOOP, TENSOR_MAPS, TMA_LOADER, XOR_SWIZZLED_SMEM
from .global_.double_buffering import DoubleBufferingGlobalMatmul
from .global_.listeners import DoubleBufferingListener, OrderedListener
from .global_.read.loaders import CyclicLoader, Loader, OperandTile, TilewiseLoader
from .global_.ordered import OrderedGlobalMatmul, UnitRowsLoader
from .global_.pipelined import PipelinedGlobalMatmul
from .global_.simple import SimpleGlobalMatmul
from .global_.skinny import SkinnyGlobalMatmul
from .global_.specialized import SpecializedGlobalMatmul
from .global_.read.swizzled_loader import SwizzledChunkLoader
from .global_.read.tma_loader import TmaLoader
from .global_.tma_specialized import TmaSpecializedGlobalMatmul
from .global_.read.vector_loader import VectorLoader
from .global_.wgmma_pipelined import WgmmaPipelinedGlobalMatmul
from .global_.write.writers import DirectWriter, PairedWriter, StagedWriter
from .compose.selection import Knob, Selection
from .problem import GROUP_LAYOUTS, Groups
from .stage.base import StageConfig, StageMatmul
from .stage.events import (BeforeStore, Begin, ChainedListener, Finish, KernelStart, LhsLoaded, RecordingListener,
                           RhsLoaded, StageEvent, StageEventListener, TileMatmulCompleted)
from .stage.ordered_partitioned import OrderedPartitionedStage
from .stage.plane_partitioned import PlanePartitionedStage
from .stage.unit_partitioned import UnitFragments, UnitPartitionedStage
from .stage.warpgroup_partitioned import WarpgroupFragments, WarpgroupPartitionedStage
from .tile.base import SmemTile, TileConfig, TileMatmul
from .tile.dmma import DmmaTile
from .tile.mma import MmaTile
from .tile.register import RegisterTile
from .tile.wgmma import WgmmaTile
from .tile.wmma import WmmaTile

#: Built-in components by slot (the slot-swap test and `gemm-engine info` read it).
BUILT_IN = {
    "tile": (RegisterTile, MmaTile, WmmaTile, WgmmaTile, DmmaTile),
    "stage": (UnitPartitionedStage, PlanePartitionedStage, OrderedPartitionedStage, WarpgroupPartitionedStage),
    "lhs_loader": (CyclicLoader, TilewiseLoader, VectorLoader, ChunkLoader, SwizzledChunkLoader, UnitRowsLoader,
                   TmaLoader),
    "rhs_loader": (CyclicLoader, TilewiseLoader, VectorLoader, ChunkLoader, SwizzledChunkLoader, UnitRowsLoader,
                   TmaLoader),
    "writer": (DirectWriter, PairedWriter, StagedWriter),
    "global_": (SimpleGlobalMatmul, DoubleBufferingGlobalMatmul, SpecializedGlobalMatmul, OrderedGlobalMatmul,
                PipelinedGlobalMatmul, WgmmaPipelinedGlobalMatmul, SkinnyGlobalMatmul, TmaSpecializedGlobalMatmul),
    "listener": (StageEventListener, RecordingListener),
    "batch": (PartitionedBatchMatmul, SplitKBatchMatmul, KMajorBatchMatmul, TmaPersistentBatchMatmul,
              GroupedBatchMatmul, GroupedTmaBatchMatmul),
    "dispatch": (RowMajorDispatch, ColMajorDispatch, SwizzledDispatch, GroupedDispatch),
}

__all__ = [name for name in dir() if not name.startswith("_")]
