"""Algorithms: one component per slot plus a selection rule, registered by name.

An `Algorithm` names its components as class attributes, one per slot (`contracts.SLOTS`: ``tile``,
``stage``, ``lhs_loader``, ``rhs_loader``, ``writer``, ``global_``, ``listener``, ``batch``,
``dispatch``), and composes them in `build()`. A subclass that swaps one attribute is a new
algorithm: that is how users add compositions without editing the package (README, "Adding an
algorithm"). Before anything is set up the composition is checked against what each component
declares it needs (`contracts.check_composition`): a mismatch is a `SetupError` naming both
components, never a wrong kernel.

Each algorithm is a family of kernels; its tiling is a *selection*, whose type is composed from
the knobs of its components (`selection.compose_selection`; ``Algorithm.selection_class``). The
caller may pass a whole selection (``SimpleUnitAlgorithm(UnitSelection(...))``) or overrides of
single knobs (``SimpleUnitAlgorithm(dispatch="grouped")``), merged into the tiling `select`
chooses for the problem.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from ..batch.base import BatchMatmul
from ..batch.dispatch import DISPATCHES, RowMajorDispatch
from ..batch.partitioned import PartitionedBatchMatmul
from ..codegen.dialect import Dialect
from ..codegen.emitter import emit
from ..compose.contracts import SLOTS, check_composition
from ..compose.registry import Composition, Registry
from ..errors import SetupError
from ..global_.read.loaders import CyclicLoader
from ..global_.write.pairs import check_pairs
from ..global_.simple import SimpleGlobalMatmul
from ..global_.write.writers import DirectWriter
from ..problem import MatmulProblem
from ..compose.selection import Selection, compose_selection, merge_knobs, name_selection
from ..stage.events import StageEventListener
from ..stage.unit_partitioned import UnitPartitionedStage
from ..tile.register import RegisterTile


@dataclass(frozen=True)
class KernelConfig:
    """Everything that determines a kernel's source: the compile-cache key."""

    algorithm: str          # qualified class name: user subclasses never collide with built-ins
    dialect: tuple
    batch: Any              # the batch level's config (BatchConfig or a subclass)
    #: The selection it was set up with (not part of the key: the batch config holds its effect).
    selection: Any = field(default=None, compare=False)

    @property
    def units(self) -> int:
        return self.batch.units


_SELECTIONS: dict[tuple, type[Selection]] = {}


class Algorithm(metaclass=Composition):
    """A composition of components, one per slot, that sets up kernels for matmul problems.

    Subclass to compose: set ``name`` (then `gemm_engine.register` it to reach it by name) and
    any slot attributes to swap (``tile``, ``stage``, ``lhs_loader``, ``rhs_loader``, ``writer``,
    ``global_``, ``listener``, ``batch``, ``dispatch``); the rest are inherited. Instances carry a
    selection (the tiling: a whole one of the type `selection_class` composes from the
    components' knobs, or single-knob overrides as keywords, checked here).

    `setup` turns (problem, dialect) into a `KernelConfig`, or raises `SetupError` naming the
    component that refuses and why, or the two components whose declared capabilities disagree;
    `render` turns a config into kernel source. Override `select` to choose tilings, `build` to
    wire components differently.
    """

    name: ClassVar[str] = "algorithm"
    #: A family (family.py) chooses among member algorithms and has no selection of its own.
    is_family: ClassVar[bool] = False
    #: The public name of this algorithm's composed selection type (e.g. "UnitSelection").
    selection_name: ClassVar[str | None] = None
    # -- slots -------------------------------------------------------------------------------------
    tile: ClassVar[type | None] = RegisterTile
    stage: ClassVar[type | None] = UnitPartitionedStage
    lhs_loader: ClassVar[type | None] = CyclicLoader
    rhs_loader: ClassVar[type | None] = CyclicLoader
    writer: ClassVar[type | None] = DirectWriter
    global_: ClassVar[type] = SimpleGlobalMatmul
    #: The algorithm's stage event listener: chained after the global level's own (stage/events.py).
    listener: ClassVar[type] = StageEventListener
    batch: ClassVar[type] = PartitionedBatchMatmul
    dispatch: ClassVar[type] = RowMajorDispatch

    def __init__(self, selection=None, **overrides):
        cls = type(self)
        if isinstance(selection, Mapping):
            overrides, selection = {**selection, **overrides}, None
        self._build_error: BaseException | None = None
        try:
            target = cls.selection_class
        except SetupError as exc:    # the composition's knobs disagree: set up will say so
            self._build_error, target = exc, None
        if target is not None:
            if selection is not None:
                selection = _coerce(selection, target, cls.name)
            bad = sorted(set(overrides) - set(target.field_names()))
            if bad:
                raise TypeError(f"{cls.name}: no selection field(s) {bad}; {target.__name__} has "
                                f"{list(target.field_names())}")
            for key, value in overrides.items():
                next(k for k in target.knobs if k.name == key).check(value, target.__name__)
        #: The caller's whole selection (None: `select` chooses) and single-knob overrides.
        self.selection = selection
        self.overrides = dict(overrides)
        try:
            self.components = self.build()
        except Exception as exc:  # noqa: BLE001 -- a user component's constructor: refused at setup
            self._build_error, self.components = exc, None

    # -- composition -------------------------------------------------------------------------------
    @classmethod
    def slots(cls) -> dict[str, type | None]:
        """The slots' components; a registered order's name in the dispatch slot means that order."""
        out = {slot: getattr(cls, slot, None) for slot in SLOTS}
        if isinstance(out["dispatch"], str):
            out["dispatch"] = DISPATCHES.get(out["dispatch"], out["dispatch"])
        return out

    @classmethod
    def check(cls) -> None:
        """SetupError unless the components in the slots fit together (see `contracts`)."""
        check_composition(cls.slots(), cls.name)

    @classmethod
    def _selection_class(cls) -> type[Selection]:
        slots = cls.slots()
        key = (cls, tuple(slots.items()))
        found = _SELECTIONS.get(key)
        if found is None:
            owners = [(getattr(c, "__name__", slot), getattr(c, "knobs", ())) for slot, c in slots.items()
                      if c is not None]
            knobs = merge_knobs(owners)
            names = {k.name for k in knobs}
            # Values components derive from knobs (a stage's extent), where their knobs are all there.
            properties = {n: f for c in slots.values() if c is not None
                          for n, f in getattr(c, "selection_properties", {}).items() if n not in names}
            found = compose_selection(knobs, f"{cls.__name__}Selection", cls.__module__, properties)
            public = cls.__dict__.get("selection_name")
            if public:
                name_selection(found, public, cls.__module__)
            _SELECTIONS[key] = found
        return found

    def build(self) -> BatchMatmul:
        """Compose the levels. Override to compose differently (e.g. extra constructor args)."""
        tile = self.tile() if self.tile is not None else None
        stage = self.stage(tile) if self.stage is not None else None
        global_ = self.global_(stage=stage,
                               lhs_loader=self.lhs_loader() if self.lhs_loader is not None else None,
                               rhs_loader=self.rhs_loader() if self.rhs_loader is not None else None,
                               writer=self.writer() if self.writer is not None else None,
                               listener=self.listener)
        return self.batch(global_, dispatch=self.slots()["dispatch"])

    # -- selection -----------------------------------------------------------------------------
    def select(self, problem: MatmulProblem, dialect: Dialect) -> Mapping | Selection:
        """The tiling this algorithm picks for a problem when the caller gave none: a preset (knob
        values; fields this composition lacks are ignored) or a selection. Default: the knobs'."""
        return {}

    def tuning_space(self, problem: MatmulProblem, dialect: Dialect) -> list:
        """The selections the tuner times for this algorithm: `select`'s choice first, then the
        alternatives worth measuring (none by default). Presets or selections of this algorithm."""
        return [self.select(problem, dialect)]

    def selection_for(self, problem: MatmulProblem, dialect: Dialect) -> Selection:
        """The selection a setup uses: the caller's, or `select`'s (less what it chose only for
        the knobs the caller overrides: `yield_to`), with the caller's overrides."""
        base = self.selection
        if base is None:
            chosen = self.select(problem, dialect)
            if isinstance(chosen, Mapping) and "dispatch" in chosen and self._dispatch_swapped():
                # A subclass put its own order in the dispatch slot: it is the default `select`'s
                # order was chosen against, so the slot wins (as an override would).
                chosen = {k: v for k, v in chosen.items() if k not in ("dispatch", "dispatch_width")}
            if self.overrides and isinstance(chosen, Mapping):
                chosen = self.yield_to(chosen, self.overrides)
            base = self.selection_class().merged(chosen)
        return base.override(**self.overrides) if self.overrides else base

    @classmethod
    def _dispatch_swapped(cls) -> bool:   # another order than the class whose `select` runs had
        owner = next(c for c in cls.__mro__ if "select" in c.__dict__)
        return getattr(owner, "dispatch", None) is not cls.dispatch

    def yield_to(self, chosen: Mapping, overrides: Mapping) -> Mapping:
        """`select`'s preset ``chosen`` with the knobs it set only because of a knob the caller
        overrides dropped (back to their defaults), so that an override composes with the rest of
        the choice instead of contradicting it. Default: all kept."""
        return chosen

    def with_selection(self, selection) -> "Algorithm":
        """This algorithm with a whole selection (a preset is merged into the knobs' defaults)."""
        if not isinstance(selection, Selection):
            selection = self.selection_class().merged(selection)
        return type(self)(selection)

    def setup(self, problem: MatmulProblem, dialect: Dialect) -> KernelConfig:
        """Configure every level for the problem; SetupError when the composition does not fit or
        a level refuses (any other exception a component raises is reported as a SetupError too,
        marked ``internal``: a component's bug must not pass for a refusal silently)."""
        cls = type(self)
        self.check()
        if self._build_error is not None:
            raise _as_setup_error(self.name, self._build_error)
        self.components.check_groups(problem)
        self.components.check_block_scales(problem)
        self.components.check_weights(problem)
        try:
            selection = self.selection_for(problem, dialect)
            batch = self.components.setup(problem, selection, dialect)
            check_pairs(self.components, batch, dialect)
        except SetupError:
            raise
        except Exception as exc:  # noqa: BLE001 -- reported, not swallowed
            raise _as_setup_error(self.name, exc) from exc
        return KernelConfig(algorithm=f"{cls.__module__}.{cls.__qualname__}", dialect=dialect.key,
                            batch=batch, selection=selection)

    # -- codegen ----------------------------------------------------------------------------
    def render(self, cfg: KernelConfig, dialect: Dialect) -> str:
        """Full kernel source: the dialect preamble plus the batch level's kernels, laid out by the
        emitter (indented blocks, no line much over 120 characters)."""
        g = cfg.batch.global_
        epilogue = cfg.batch.epilogue
        ets = (g.lhs_loader.operand.element, g.rhs_loader.operand.element, g.out, cfg.batch.result,
               *epilogue.element_types, *(cfg.batch.weights.element_types if cfg.batch.weights is not None else ()))
        header = f"/* gemm_engine: {self.name} ({cfg.algorithm}) */\n"
        body = self.components.kernel(cfg.batch, dialect)
        headers = getattr(self.tile, "headers", ()) if self.tile is not None else ()
        text = (dialect.preamble(ets, headers) + dialect.helpers_for(body) + epilogue.helpers(dialect, cfg.batch.result)
                + body + "\n")
        return emit(header + dialect.compile_note(text) + text)

    def signature(self, cfg: KernelConfig):
        """The kernels' `KernelSignature` (codegen/signature.py)."""
        return self.components.signature(cfg.batch)

    def cube_count(self, cfg: KernelConfig, problem: MatmulProblem) -> int:
        return self.components.cube_count(cfg.batch, problem)

    def launches(self, cfg: KernelConfig, problem: MatmulProblem):
        """The kernel launches one call makes (see `BatchMatmul.launches`)."""
        return self.components.launches(cfg.batch, problem)

    def workspace(self, cfg: KernelConfig, problem: MatmulProblem):
        return self.components.workspace(cfg.batch, problem)

    def kept_workspace(self, cfg: KernelConfig, problem: MatmulProblem):
        """Scratch kept zeroed between calls (`BatchMatmul.kept_workspace`), or None."""
        return self.components.kept_workspace(cfg.batch, problem)

    def call_values(self, cfg: KernelConfig, problem: MatmulProblem):
        """The parameters each call derives from its others (`BatchMatmul.call_values`), or None."""
        return self.components.call_values(cfg.batch, problem)

    def chosen(self, cfg: KernelConfig) -> "Algorithm":
        """The concrete algorithm that produced ``cfg`` (itself; a family returns its member)."""
        return self

    def __repr__(self):
        args = [repr(self.selection)] if self.selection is not None else []
        args += [f"{k}={v!r}" for k, v in self.overrides.items()]
        return f"{type(self).__name__}({', '.join(args)})"


class _SelectionClass:
    """``Algorithm.selection_class``: the composed selection type of the class's slots (computed on
    first use; SetupError when two of its components declare one knob differently)."""

    def __get__(self, obj, cls):
        if cls.is_family:
            return None
        return cls._selection_class()


Algorithm.selection_class = _SelectionClass()


def _coerce(selection, target: type[Selection], name: str) -> Selection:
    if isinstance(selection, target):
        return selection
    if not isinstance(selection, Selection):
        raise TypeError(f"{name}: expected a {target.__name__} (or a mapping of its fields), got "
                        f"{type(selection).__name__}")
    foreign = sorted(k for k in selection.changed() if k not in target.field_names())
    if foreign:
        raise TypeError(f"{name}: the {type(selection).__name__} sets {foreign}, which {target.__name__} "
                        f"has no field for")
    return target().merged(selection)


def _as_setup_error(name: str, exc: BaseException) -> SetupError:
    if isinstance(exc, SetupError):
        return exc
    return SetupError(name, f"a component raised {type(exc).__name__}: {exc}", internal=True)


REGISTRY: Registry = Registry("algorithm")


def register(cls: type[Algorithm] | None = None, *, replace: bool = False):
    """Make an algorithm reachable by name in ``matmul(..., algorithm=name)`` (a class decorator,
    also as ``@register(replace=True)``). A taken name is refused unless ``replace``: a subclass that
    keeps its parent's ``name`` would otherwise silently take the parent's place."""
    def apply(cls):
        if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
            raise TypeError(f"register: expected an Algorithm subclass, got {cls!r}")
        name = cls.__dict__.get("name") or cls.name
        return REGISTRY.register(name, cls, replace, f"give {cls.__name__} its own `name`")
    return apply if cls is None else apply(cls)


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
