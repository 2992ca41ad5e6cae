"""Algorithms: one component per level plus a selection rule, registered by name.

An `Algorithm` names its components as class attributes (tile, stage, global, batch, loaders) and
composes them in `build()`. A subclass that swaps one attribute is a new algorithm: that is how
users add compositions without editing the package (see README, "Adding an algorithm"). Each
algorithm is a family of kernels: its tiling comes from a selection (a frozen dataclass) that the
caller may pass (`SimpleAlgorithm(UnitSelection(...))`) and that `select` chooses otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..batch.base import BatchConfig, BatchMatmul
from ..batch.partitioned import PartitionedBatchMatmul
from ..codegen.dialect import Dialect
from ..global_.base import GlobalMatmul
from ..global_.loaders import CyclicLoader, Loader
from ..global_.simple import SimpleGlobalMatmul
from ..errors import SetupError
from ..problem import MatmulProblem
from ..stage.base import StageMatmul
from ..stage.unit_partitioned import UnitPartitionedStage
from ..tile.base import TileMatmul
from ..tile.register import RegisterTile


@dataclass(frozen=True)
class KernelConfig:
    """Everything that determines a kernel's source: the compile-cache key."""

    algorithm: str          # qualified class name: user subclasses never collide with built-ins
    dialect: tuple
    batch: BatchConfig

    @property
    def units(self) -> int:
        return self.batch.units


class Algorithm:
    name: ClassVar[str] = "algorithm"
    #: The selection type this algorithm's components read (None: any).
    selection_class: ClassVar[type | None] = None
    tile: ClassVar[type[TileMatmul]] = RegisterTile
    stage: ClassVar[type[StageMatmul]] = UnitPartitionedStage
    global_: ClassVar[type[GlobalMatmul]] = SimpleGlobalMatmul
    lhs_loader: ClassVar[type[Loader]] = CyclicLoader
    rhs_loader: ClassVar[type[Loader]] = CyclicLoader
    batch: ClassVar[type[BatchMatmul]] = PartitionedBatchMatmul

    def __init__(self, selection=None):
        self.selection = selection
        self.components = self.build()

    def build(self) -> BatchMatmul:
        """Compose the four levels. Override to compose differently (e.g. extra constructor args)."""
        stage = self.stage(self.tile())
        global_ = self.global_(stage, self.lhs_loader(), self.rhs_loader())
        return self.batch(global_)

    # -- selection ---------------------------------------------------------------------------
    def select(self, problem: MatmulProblem, dialect: Dialect):
        """The tiling this algorithm picks for a problem when the caller gave none."""
        raise NotImplementedError

    def tuning_space(self, problem: MatmulProblem, dialect: Dialect) -> list:
        """The selections the tuner times for this algorithm: `select`'s choice first, then the
        alternatives worth measuring (none by default). Each must be a frozen dataclass of plain
        fields: the tuning cache stores the winner as JSON."""
        return [self.select(problem, dialect)]

    def setup(self, problem: MatmulProblem, dialect: Dialect) -> KernelConfig:
        """Configure every level for the problem; raises SetupError when a level refuses."""
        selection = self.selection if self.selection is not None else self.select(problem, dialect)
        cls = type(self)
        return KernelConfig(algorithm=f"{cls.__module__}.{cls.__qualname__}", dialect=dialect.key,
                            batch=self.components.setup(problem, selection, dialect))

    # -- codegen ----------------------------------------------------------------------------
    def render(self, cfg: KernelConfig, dialect: Dialect) -> str:
        """Full kernel source: the dialect preamble plus the batch level's kernel."""
        g = cfg.batch.global_
        epilogue = cfg.batch.epilogue
        ets = (g.lhs_loader.operand.element, g.rhs_loader.operand.element, g.out, cfg.batch.result,
               *epilogue.element_types)
        header = f"/* gemm_engine: {self.name} ({cfg.algorithm}) */\n"
        body = self.components.kernel(cfg.batch, dialect)
        return (header + dialect.preamble(ets, self.tile.headers) + dialect.helpers_for(body)
                + epilogue.helpers(dialect) + body + "\n")

    def cube_count(self, cfg: KernelConfig, problem: MatmulProblem) -> int:
        return self.components.cube_count(cfg.batch, problem)

    def launches(self, cfg: KernelConfig, problem: MatmulProblem):
        """The kernel launches one call makes (see `BatchMatmul.launches`)."""
        return self.components.launches(cfg.batch, problem)

    def workspace(self, cfg: KernelConfig, problem: MatmulProblem):
        return self.components.workspace(cfg.batch, problem)

    def chosen(self, cfg: KernelConfig) -> "Algorithm":
        """The concrete algorithm that produced ``cfg`` (itself; a family returns its member)."""
        return self

    def __repr__(self):
        return f"{type(self).__name__}({self.selection!r})"


class AlgorithmFamily(Algorithm):
    """One name for several compositions: setup takes the first variant that accepts the problem.

    E.g. "simple" = (tensor-core variant, register variant): f16 on an sm_80+ GPU gets tensor cores,
    float64 or OpenCL gets register FMA. A selection passed by the caller goes only to the variants
    whose `selection_class` it is an instance of. When no variant accepts, the SetupError lists
    every variant's reason.
    """

    variants: ClassVar[tuple[type[Algorithm], ...]] = ()

    def __init__(self, selection=None):
        self.selection = selection
        self.members = [v(selection) for v in self.variants
                        if selection is None or v.selection_class is None
                        or isinstance(selection, v.selection_class)]
        if not self.members:
            raise TypeError(f"{self.name}: no variant takes a {type(selection).__name__} selection")

    def setup(self, problem: MatmulProblem, dialect: Dialect) -> KernelConfig:
        reasons = []
        for member in self.members:
            try:
                return member.setup(problem, dialect)
            except SetupError as exc:
                reasons.append(f"{member.name}: {exc.reason if exc.component == member.name else exc}")
        raise SetupError(self.name, "no variant can run this problem: " + "; ".join(reasons))

    def chosen(self, cfg: KernelConfig) -> Algorithm:
        for member in self.members:
            cls = type(member)
            if cfg.algorithm == f"{cls.__module__}.{cls.__qualname__}":
                return member
            if isinstance(member, AlgorithmFamily):   # a family of families: ask it
                try:
                    return member.chosen(cfg)
                except ValueError:
                    pass
        raise ValueError(f"{self.name}: config {cfg.algorithm} is not one of this family's")

    def render(self, cfg, dialect):
        return self.chosen(cfg).render(cfg, dialect)

    def cube_count(self, cfg, problem):
        return self.chosen(cfg).cube_count(cfg, problem)

    def launches(self, cfg, problem):
        return self.chosen(cfg).launches(cfg, problem)

    def workspace(self, cfg, problem):
        return self.chosen(cfg).workspace(cfg, problem)


def distinct(selections) -> list:
    """``selections`` without repeats, in order (the tuner times each once)."""
    return list(dict.fromkeys(selections))


REGISTRY: dict[str, type[Algorithm]] = {}


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator: make an algorithm reachable by name in `matmul(..., algorithm=name)`."""
    REGISTRY[cls.name] = cls
    return cls


def resolve(algorithm) -> Algorithm:
    """An Algorithm instance from a registered name, an Algorithm subclass or an instance."""
    if isinstance(algorithm, Algorithm):
        return algorithm
    if isinstance(algorithm, type) and issubclass(algorithm, Algorithm):
        return algorithm()
    if isinstance(algorithm, str):
        if algorithm not in REGISTRY:
            raise ValueError(f"algorithm: unknown name {algorithm!r}; registered: {sorted(REGISTRY)}")
        return REGISTRY[algorithm]()
    raise TypeError(f"algorithm: expected a registered name, an Algorithm subclass or instance, "
                    f"got {type(algorithm).__name__}")
