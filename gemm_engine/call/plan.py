"""The plan step: an algorithm set up for a problem, rendered and compiled, ready to launch.

A `Plan` holds everything the launch step needs and nothing of a call: the concrete algorithm and
its config, the source, the kernels' `KernelSignature`, the compiled launches in order and the
workspace they share. `Planner` caches plans per (algorithm, selection, problem), in a bounded
least-recently-used map (a process that sees ever new shapes must not grow without limit; the
compiled kernels themselves stay in the runtime's own bounded cache and in the compilers' binary
caches on disk). Sources are read from the on-disk source cache where a process rendered them
before (runtime/source_cache.py: rendering is most of a warm first call's time).

`Planner.stand_in`: where the first call of a plan would wait for the compiler (its kernels not
compiled, built or on disk), they are rendered and built on a background worker
(runtime/background.py) and that call runs a stand-in's plan (selector/stand_in.py, marked
`Plan.stands_in_for`). The next call plans the chosen algorithm, waiting for the build where it has
not finished: one call stands in, so a loop, a benchmark's timed calls or a captured CUDA graph get
the chosen kernel from their second call on, and the first calls of a model's layers overlap their
builds. A stream that captures a graph never gets a stand-in.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from ..algorithms.base import REGISTRY, Algorithm, KernelConfig
from ..batch.base import CallValues, Workspace
from ..codegen.signature import KernelSignature
from ..errors import CaptureError, SetupError
from ..problem import MatmulProblem
from ..runtime.background import BackgroundBuilds
from ..runtime.source_cache import SourceCache, source_key
from ..selector.stand_in import STAND_INS
from ..tensors import deterministic

#: Plans kept per engine (each holds references to compiled kernels).
PLANS_MAX = 512
#: "0" turns background builds off, "1" on (default: on for CUDA).
BACKGROUND_ENV = "GEMM_ENGINE_BACKGROUND_COMPILE"


@dataclass(frozen=True)
class CompiledLaunch:
    kernel: object
    cubes: int
    units: int
    shared_bytes: int
    co_resident: bool = False     # `Launch.co_resident`


@dataclass(frozen=True)
class Plan:
    algorithm: Algorithm          # the concrete algorithm (a family's chosen member)
    config: KernelConfig
    source: str
    signature: KernelSignature
    launches: tuple[CompiledLaunch, ...]
    workspace: Workspace | None
    #: Parameters each call derives from its other values (TMA tensor maps), or None.
    call_values: CallValues | None = None
    #: Scratch the runtime keeps zeroed between calls (``kept_scratch``: the split tail's flags
    #: and partial sums), or None.
    kept: Workspace | None = None
    #: The name of the algorithm this plan stands in for while that one builds (`Planner.stand_in`),
    #: or None: a stand-in's plan is run, never kept for the call's problem.
    stands_in_for: str | None = None


def stand_in(problem: MatmulProblem, dialect, chosen: Algorithm) -> tuple[Algorithm, KernelConfig] | None:
    """The stand-in for ``chosen`` (a concrete algorithm) on ``problem`` (selector/stand_in.py), set
    up; None where none sets up or ``chosen`` is of a stand-in's kind."""
    if any(type(chosen) is REGISTRY.get(name) for name, _ in STAND_INS):
        return None
    for name, knobs in STAND_INS:
        if name in REGISTRY:
            alg = REGISTRY[name](**knobs)
            try:
                return alg, alg.setup(problem, dialect)
            except SetupError:
                continue
    return None


def render(alg: Algorithm, cfg: KernelConfig, dialect) -> str:
    """The source of a set-up algorithm; a component that fails to render is a SetupError (never
    another exception: the composition is refused before anything runs)."""
    try:
        return alg.render(cfg, dialect)
    except SetupError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise SetupError(alg.name, f"rendering failed: {type(exc).__name__}: {exc}", internal=True) from exc


class Planner:
    def __init__(self, runtime, capacity: int = PLANS_MAX, sources: SourceCache | None = None,
                 background: bool | None = None):
        self.runtime = runtime
        if background is None:        # `Engine`'s ``background_compile``: on for CUDA by default
            env = os.environ.get(BACKGROUND_ENV)
            background = runtime.backend == "cuda" if env is None else env != "0"
        #: Whether `stand_in` may be asked (the engine asks it for its own choices only).
        self.background = bool(background)
        self.capacity = capacity
        self._plans: OrderedDict = OrderedDict()
        self.sources = SourceCache() if sources is None else sources
        self.builds = BackgroundBuilds()
        # Sources this planner rendered or read, by source key: `stand_in_for` asks whether their
        # kernels are ready without the disk (a source cache that cannot be written, or evicted jobs).
        self._known: OrderedDict = OrderedDict()
        self._known_lock = threading.Lock()

    def source(self, concrete: Algorithm, cfg: KernelConfig) -> str:
        """The source of ``concrete`` set up as ``cfg``: from the source cache, else rendered (and kept)."""
        dialect = self.runtime.dialect
        key = source_key(concrete, cfg, dialect)
        found = self._known.get(key) if key is not None else None
        if found is None:
            found = self.sources.get(key)
        if found is None:
            found = render(concrete, cfg, dialect)
            self.sources.put(key, found)
        if key is not None:
            with self._known_lock:
                self._known[key] = found
                self._known.move_to_end(key)
                if len(self._known) > self.capacity:
                    self._known.popitem(last=False)
        return found

    def known_source(self, concrete: Algorithm, cfg: KernelConfig) -> str | None:
        """``concrete``'s source set up as ``cfg`` where this planner or the source cache has it
        (nothing rendered)."""
        key = source_key(concrete, cfg, self.runtime.dialect)
        return self._known.get(key) or self.sources.get(key) if key is not None else None

    def may_stand_in(self, source: str) -> bool:
        """Whether a choice from ``source`` (call/choose.py `Choice.source`) may get a stand-in: the
        engine's own choices (never the caller's), with background builds on, torch's
        deterministic mode off (a stand-in's sums round otherwise than the chosen kernel's)."""
        return self.background and source != "caller" and not deterministic()

    def stand_in_for(self, alg: Algorithm, problem: MatmulProblem,
                     cfg: KernelConfig) -> tuple[Algorithm, KernelConfig] | None:
        """The stand-in (set up) that the first call of ``alg`` (set up as ``cfg``) would run, its
        kernels needing the compiler (not compiled, built or on disk); None where ``alg``'s plan is
        ready, its build was handed over before (`plan` waits for it), the current stream captures
        a graph (`plan` compiles or refuses) or no stand-in sets up. Nothing is compiled or handed
        over (`Engine.explain` asks too)."""
        key = self.key(alg, problem)
        if key in self._plans or self.builds.get(key) is not None:
            return None
        concrete = alg.chosen(cfg)
        source = self.known_source(concrete, cfg)
        if source is None and not self.sources.enabled:
            source = self.source(concrete, cfg)
        if source is not None and all(self.runtime.ready(source, launch.name)
                                      for launch in concrete.launches(cfg, problem)):
            return None
        if self.runtime.capturing():
            return None
        return stand_in(problem, self.runtime.dialect, concrete)

    def stand_in(self, alg: Algorithm, problem: MatmulProblem, cfg: KernelConfig) -> Plan | None:
        """`stand_in_for`'s stand-in, planned, with ``alg``'s build handed to a background worker."""
        found = self.stand_in_for(alg, problem, cfg)
        if found is None:
            return None
        try:
            standing = self.plan(found[0], problem, found[1])
        except (SetupError, CaptureError):
            return None          # a stand-in that cannot run: the call compiles the chosen kernel
        concrete = alg.chosen(cfg)
        source = self.known_source(concrete, cfg)
        # Handed over after the stand-in's compile: its render (Python) would slow that down.
        self.builds.submit(self.key(alg, problem), lambda: self._build(concrete, cfg, source))
        return replace(standing, stands_in_for=concrete.name)

    def _build(self, concrete: Algorithm, cfg: KernelConfig, source: str | None) -> str:
        """A background build: ``concrete``'s source (rendered where not given) built; the source."""
        source = source or self.source(concrete, cfg)
        self.runtime.build(source)
        return source

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        self._plans.clear()
        self._known.clear()
        self.builds.forget()

    @staticmethod
    def key(alg: Algorithm, problem: MatmulProblem):
        return (type(alg), alg.selection, tuple(sorted(alg.overrides.items())), problem)

    def plan(self, alg: Algorithm, problem: MatmulProblem, cfg: KernelConfig | None = None) -> Plan:
        """The compiled plan of ``alg`` for ``problem`` (``cfg``: its config when already set up)."""
        key = self.key(alg, problem)
        found = self._plans.get(key)
        if found is not None:
            self._plans.move_to_end(key)
            return found
        dialect = self.runtime.dialect
        if cfg is None:
            cfg = alg.setup(problem, dialect)
        concrete = alg.chosen(cfg)
        build = self.builds.get(key)
        if build is not None and build.exception() is None:      # waits for a background build
            source = build.result()
        else:
            source = self.source(concrete, cfg)
        shared = cfg.batch.global_.dynamic_shared_bytes
        launches = []
        for launch in concrete.launches(cfg, problem):
            if launch.co_resident and not self.runtime.co_resident_launch:
                raise SetupError(concrete.name, f"kernel {launch.name}'s cubes wait for one another (a split tail), "
                                                f"so it needs a cooperative launch, which this {self.runtime.backend} "
                                                f"runtime does not offer; choose split_tail=0")
            try:
                kernel = self.runtime.kernel(source, launch.name)
            except CaptureError:
                raise
            except Exception as exc:  # noqa: BLE001 -- a compiler error is reported as a refusal
                raise SetupError(concrete.name, f"the {self.runtime.backend} compiler rejected kernel "
                                                f"{launch.name}: {exc}", internal=True) from exc
            launches.append(CompiledLaunch(kernel, launch.cubes, launch.units,
                                           shared if launch.dynamic_shared else 0, launch.co_resident))
        found = Plan(concrete, cfg, source, concrete.signature(cfg), tuple(launches),
                     concrete.workspace(cfg, problem), concrete.call_values(cfg, problem),
                     concrete.kept_workspace(cfg, problem))
        self._plans[key] = found
        if len(self._plans) > self.capacity:
            self._plans.popitem(last=False)
        return found
