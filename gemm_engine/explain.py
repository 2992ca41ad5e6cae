"""`Engine.explain`: what a call would run and why, computed by setup alone (nothing launched).

The report follows the engine's own decision: the caller's algorithm when one is given; else the
tuning cache's entry for the problem's class (tuning/key.py) when there is one and it sets up;
else ``auto``, which takes the first of its ranked members that sets up (algorithms/auto.py says
why each sits where it does). Every other registered algorithm is set up too, so the report says
for each whether it refuses the problem (its SetupError) or would run but ranks lower.
"""
from __future__ import annotations

from dataclasses import dataclass

from .algorithms.auto import FAMILY_NOTE, NOT_RANKED, RANKING
from .algorithms.base import REGISTRY, AlgorithmFamily, KernelConfig
from .errors import SetupError
from .problem import MatmulProblem


@dataclass(frozen=True)
class Considered:
    name: str
    verdict: str      # "chosen", "refused", "ranked lower", "not ranked", "family"
    reason: str
    selection: object = None


@dataclass(frozen=True)
class Explanation:
    problem: MatmulProblem
    device: object
    key: str                 # the tuning cache key of the problem's class
    source: str              # "caller", "tuning cache" or "heuristic"
    algorithm: str           # registered name of the concrete algorithm chosen
    selection: object
    config: KernelConfig     # the full config the kernel is rendered from
    considered: tuple[Considered, ...]

    def __str__(self) -> str:
        p, d = self.problem, self.device
        epi = _epilogue_text(p.epilogue)
        lines = [
            f"problem    batch={p.batch} m={p.m} n={p.n} k={p.k}  {p.lhs.name} x {p.rhs.name} -> {p.out.name}"
            f"  layouts {p.lhs_layout.value}/{p.rhs_layout.value}  vector alignment {p.lhs_align}/{p.rhs_align}"
            f"  precision {p.precision}  epilogue {epi}",
            f"device     {d.name} ({d.backend}{' ' + d.arch if d.arch else ''}, {d.compute_units} compute units, "
            f"{d.max_shared_memory} B shared memory, plane {d.plane_size})",
            f"chosen     {self.algorithm}  (from the {self.source})",
            f"selection  {self.selection!r}",
            f"kernel     {summary(self.config)}",
            f"cache key  {self.key}",
            "considered",
        ]
        width = max(len(c.name) for c in self.considered) if self.considered else 10
        for c in self.considered:
            lines.append(f"  {c.name:{width}s}  {c.verdict:12s}  {c.reason}")
        return "\n".join(lines)


def summary(cfg: KernelConfig) -> str:
    """A line of the config's main numbers (the full config is `Explanation.config`)."""
    g = cfg.batch.global_
    parts = [f"{cfg.units} units per cube"]
    stage = getattr(g, "stage", None)
    if stage is not None and hasattr(stage, "stage_m"):
        parts.append(f"stage {stage.stage_m}x{stage.stage_n}x{stage.stage_k}")
    for attr, label in (("stages", "ring slots"), ("dynamic_shared_bytes", "B dynamic shared memory")):
        if getattr(g, attr, None):
            parts.append(f"{getattr(g, attr)} {label}")
    parts.append(f"dispatch {type(cfg.batch.dispatch).__name__}")
    if cfg.batch.persistent_cubes:
        parts.append(f"persistent ({cfg.batch.persistent_cubes} cubes)")
    return ", ".join(parts)


def _try(alg, problem, dialect):
    try:
        return alg.setup(problem, dialect), None
    except SetupError as exc:
        return None, str(exc)


def explain_problem(engine, problem: MatmulProblem, algorithm=None) -> Explanation:
    from .tuning import problem_key
    dialect = engine.dialect
    key = problem_key(problem, engine.device)
    considered: list[Considered] = []
    chosen = None          # (algorithm, config, source)

    if algorithm is not None:
        alg = engine._resolve(algorithm)
        cfg, why = _try(alg, problem, dialect)
        if cfg is None:
            raise SetupError(alg.name, why)
        chosen = (alg.chosen(cfg), cfg, "caller")
    else:
        tuned = engine._tuned_algorithm(problem)
        if tuned is not None:
            cfg, why = _try(tuned, problem, dialect)
            if cfg is not None:
                chosen = (tuned, cfg, "tuning cache")
            else:
                considered.append(Considered(tuned.name, "refused", f"tuning cache entry for this class "
                                             f"does not set up here ({why}); the heuristic decides",
                                             tuned.selection))

    # auto's ranked members, in order.
    auto = engine._resolve("auto")
    heuristic = None
    seen = set()
    for member in auto.members:
        seen.add(member.name)
        if isinstance(member, AlgorithmFamily):
            seen.update(m.name for m in member.members)
        cfg, why = _try(member, problem, dialect)
        rank = RANKING.get(member.name, "")
        if cfg is None:
            considered.append(Considered(member.name, "refused", why))
            continue
        concrete = member.chosen(cfg)
        if heuristic is None:
            heuristic = (concrete, cfg)
            if chosen is None:
                chosen = (concrete, cfg, "heuristic")
                verdict, reason = "chosen", f"auto's first member that sets up: {rank}"
            else:
                verdict, reason = "ranked lower", (f"the heuristic's choice ({rank}), overridden by the "
                                                   f"{chosen[2]}")
        else:
            verdict = "chosen" if chosen[0].name == concrete.name and chosen[2] == "caller" else "ranked lower"
            reason = f"sets up, but auto takes {heuristic[0].name} first ({rank})"
        name = member.name if concrete.name == member.name else f"{member.name} -> {concrete.name}"
        considered.append(Considered(name, verdict, reason, cfg and concrete.selection or None))
    if chosen is None:
        raise SetupError("auto", "no algorithm can run this problem: "
                         + "; ".join(f"{c.name}: {c.reason}" for c in considered))

    # Every other registered algorithm.
    for name, cls in sorted(REGISTRY.items()):
        if name in seen or name == "auto":
            continue
        if issubclass(cls, AlgorithmFamily):
            considered.append(Considered(name, "family", FAMILY_NOTE))
            continue
        alg = cls()
        cfg, why = _try(alg, problem, dialect)
        if cfg is None:
            considered.append(Considered(name, "refused", why))
        elif name == chosen[0].name:
            considered.append(Considered(name, "chosen", f"named by the {chosen[2]}", alg.selection))
        else:
            considered.append(Considered(name, "not ranked", NOT_RANKED.get(
                name, "not one of auto's members: run only when named"), cfg and alg.select(problem, dialect)))

    alg, cfg, source = chosen
    return Explanation(problem, engine.device, key, source, alg.name, alg.selection or _selection_of(alg, problem, dialect),
                       cfg, tuple(considered))


def _selection_of(alg, problem, dialect):
    try:
        return alg.select(problem, dialect)
    except (NotImplementedError, SetupError):
        return None


def _epilogue_text(e) -> str:
    if e.identity:
        return "none"
    terms = ["alpha * acc" if e.scaled else "acc"]
    if e.c is not None:
        terms.append("beta * c")
    if e.bias is not None:
        terms.append(f"bias over {'rows' if e.bias_axis == 0 else 'columns'}")
    text = " + ".join(terms)
    act = getattr(e.activation, "name", None)
    return f"{act}({text})" if act else text
