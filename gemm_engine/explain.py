"""`Engine.explain`: what a call would run and why, computed by setup alone (nothing launched).

The report is the engine's own decision with its trace (call/choose.py): the caller's algorithm when
one is given; else the tuning cache's entry for the problem's class (tuning/key.py) when there is
one and it sets up; else ``auto``, the first rule of selector/rules.py that applies and sets up.
A family name (``"specialized"``) shows as the member it resolved to (``specialized ->
specialized_wgmma``). Every other registered algorithm is set up too, so the report says for each
whether it refuses the problem (its SetupError), its rule says no, or it would run but ranks lower;
each family, which member it would run here.
"""
from __future__ import annotations

from dataclasses import dataclass

from .algorithms.base import KernelConfig
from .problem import MatmulProblem
from .tuning.key import problem_key


@dataclass(frozen=True)
class Considered:
    name: str
    verdict: str      # "chosen", "refused", "not chosen", "ranked lower", "not ranked", "family"
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
    family: str | None = None    # the family name the caller gave, when it resolved to ``algorithm``

    @property
    def chosen(self) -> str:
        """``family -> member`` when a family name was resolved, else the algorithm's name."""
        return f"{self.family} -> {self.algorithm}" if self.family else self.algorithm

    def __str__(self) -> str:
        p, d = self.problem, self.device
        epi = _epilogue_text(p.epilogue)
        lines = [
            f"problem    batch={p.batch} m={p.m} n={p.n} k={p.k}  {p.lhs.name} x {p.rhs.name} -> {p.out.name}"
            f"  layouts {p.lhs_layout.value}/{p.rhs_layout.value}  vector alignment {p.lhs_align}/{p.rhs_align}"
            f"  precision {p.precision}  epilogue {epi}",
            f"device     {d.name} ({d.backend}{' ' + d.arch if d.arch else ''}, {d.compute_units} compute units, "
            f"{d.max_shared_memory} B shared memory, plane {d.plane_size})",
            f"chosen     {self.chosen}  (from the {self.source})",
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


def explain_problem(engine, problem: MatmulProblem, algorithm=None) -> Explanation:
    """The report of ``engine``'s choice for ``problem`` (see `Engine.explain`): the policy's own
    trace (call/choose.py), so the report cannot disagree with what a call runs."""
    choice = engine.choose(problem, algorithm, trace=True)
    considered = tuple(Considered(v.name, v.verdict, v.reason, v.config.selection if v.config else None)
                       for v in choice.trace)
    return Explanation(problem, engine.device, problem_key(problem, engine.device), choice.source,
                       choice.algorithm.name, choice.config.selection, choice.config, considered, choice.family)


def _epilogue_text(e) -> str:
    if e.identity:
        return "none"
    acc = "acc"
    if e.lhs_scale or e.rhs_scale:
        kinds = [f"{op} scales {'per 128-K block (applied between K blocks)' if kind == 'block' else 'per ' + axis}"
                 for op, kind, axis in (("a", e.lhs_scale, "row"), ("b", e.rhs_scale, "column")) if kind]
        acc = f"dequantized acc ({', '.join(kinds)})"
    terms = [f"alpha * {acc}" if e.scaled else acc]
    if e.c is not None:
        terms.append("beta * c")
    if e.bias is not None:
        terms.append(f"bias over {'rows' if e.bias_axis == 0 else 'columns'}")
    text = " + ".join(terms)
    act = getattr(e.activation, "name", None)
    return f"{act}({text})" if act else text
