"""The plan step: an algorithm set up for a problem, rendered and compiled, ready to launch.

A `Plan` holds everything the launch step needs and nothing of a call: the concrete algorithm and
its config, the source, the kernels' `KernelSignature`, the compiled launches in order and the
workspace they share. `Planner` caches plans per (algorithm, selection, problem), in a bounded
least-recently-used map (a process that sees ever new shapes must not grow without limit; the
compiled kernels themselves stay in the runtime's own bounded cache and in the compilers' binary
caches on disk). Sources are read from the on-disk source cache where a process rendered them
before (runtime/source_cache.py: rendering is most of a warm first call's time).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..algorithms.base import Algorithm, KernelConfig
from ..batch.base import CallValues, Workspace
from ..codegen.signature import KernelSignature
from ..errors import CaptureError, SetupError
from ..problem import MatmulProblem
from ..runtime.source_cache import SourceCache, source_key

#: Plans kept per engine (each holds references to compiled kernels).
PLANS_MAX = 512


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
    def __init__(self, runtime, capacity: int = PLANS_MAX, sources: SourceCache | None = None):
        self.runtime = runtime
        self.capacity = capacity
        self._plans: OrderedDict = OrderedDict()
        self.sources = SourceCache() if sources is None else sources

    def source(self, concrete: Algorithm, cfg: KernelConfig) -> str:
        """The source of ``concrete`` set up as ``cfg``: from the source cache, else rendered (and kept)."""
        dialect = self.runtime.dialect
        key = source_key(concrete, cfg, dialect)
        found = self.sources.get(key)
        if found is None:
            found = render(concrete, cfg, dialect)
            self.sources.put(key, found)
        return found

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        self._plans.clear()

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
