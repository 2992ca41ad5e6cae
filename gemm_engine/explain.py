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

import numpy as np

from .algorithms.base import KernelConfig
from .call import numpy_rules
from .call.arrays import import_call
from .call.prepare import prepare
from .call.request import CallOptions, make_request
from .epilogue.activations import resolve_activation
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
    #: What the first call runs instead while the chosen kernel builds in the background
    #: (call/plan.py `Planner.stand_in`), or "" where the chosen kernel runs from the first call.
    first_call: str = ""

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
            f"tiles      {device_tiles(d)}",
            f"chosen     {self.chosen}  (from the {self.source}; tile {tile_line(self.config)})",
            f"selection  {self.selection!r}",
            f"kernel     {summary(self.config)}",
            f"cache key  {self.key}",
            *([f"first call {self.first_call}"] if self.first_call else []),
            "considered",
        ]
        width = max(len(c.name) for c in self.considered) if self.considered else 10
        for c in self.considered:
            lines.append(f"  {c.name:{width}s}  {c.verdict:12s}  {c.reason}")
        return "\n".join(lines)


#: Probe features (OpenCL) and what each one is, in the order a report lists them.
_FEATURES = (("mma_sync", "mma.sync f16"), ("bf16_mma", "bf16"), ("tf32_mma", "tf32"), ("s8_mma", "int8"),
             ("f64_mma", "DMMA f64 m8n8k4"), ("f64_mma_m16", "m16n8k8"), ("ldmatrix", "ldmatrix"),
             ("cp_async", "cp.async"), ("sass_build", "machine code by nvJitLink"),
             ("wgmma", "wgmma (sm_90a by nvJitLink)"))


def device_tiles(d) -> str:
    """Which tiles the device offers and why: the compute capability on CUDA; on OpenCL what the
    capability probe found (and why it refused the rest), or why the vendor has none."""
    if d.backend == "cuda":
        cc = d.compute_capability or (0, 0)
        if cc < (8, 0):
            return f"register FMA only ({d.arch}: mma.sync needs sm_80)"
        return ("mma.sync (f16, bf16, tf32, int8), DMMA, ldmatrix, cp.async" +
                (", wgmma and TMA (sm_90a)" if cc >= (9, 0) else "") + f" ({d.arch})")
    if d.vendor == "cpu":
        width = d.vector_width or "8"
        return f"a CPU: vector register tiles ({width}-wide float vectors, direct_vector), no tensor cores"
    found = [label for f, label in _FEATURES if f in d.features]
    refused = [f"{f} ({why})" for f, why in d.refusals if f in dict(_FEATURES)]
    if found:
        text = f"tensor cores through inline PTX, found by the OpenCL probe: {', '.join(found)}"
        return text + (f"; refused: {'; '.join(refused)}" if refused else "")
    if d.vendor == "nvidia":
        why = "; ".join(refused) or "the probe found no inline PTX"
        return f"register FMA only: {why}"
    vendor = d.vendor or "an unknown vendor"
    return f"register FMA only: no tensor-core tile reaches {vendor}'s OpenCL here"


def tile_line(cfg: KernelConfig) -> str:
    """The chosen kernel's tile: its class and shape, and the instruction kind where it has one."""
    stage = getattr(cfg.batch.global_, "stage", None)
    tile = getattr(stage, "tile", None)
    if tile is None:
        return "none (the global level computes itself)"
    kind = getattr(tile, "kind", None)
    name = type(tile).__name__.replace("Config", "")
    return f"{name} {tile.tile_m}x{tile.tile_n}x{tile.tile_k}" + (f" {kind}" if kind else "")


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
                       choice.algorithm.name, choice.config.selection, choice.config, considered, choice.family,
                       _first_call(engine, problem, choice))


def _first_call(engine, problem: MatmulProblem, choice) -> str:
    """What `Explanation.first_call` says: the stand-in a call would run now, if any."""
    planner = getattr(engine, "planner", None)       # none: a report for a nominal device
    if planner is None or not planner.may_stand_in(choice.source):
        return ""
    found = planner.stand_in_for(choice.algorithm, problem, choice.config)
    if found is None:
        return ""
    return (f"{found[0].name} (tile {tile_line(found[1])}) stands in while {choice.algorithm.name} builds in the "
            f"background: no binary of it in memory or on disk (Engine background_compile; warmup compiles ahead)")


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


def problem_of_call(runtime, a, b, precision, alpha, beta, c, bias, bias_axis, activation, out_dtype) -> MatmulProblem:
    """`Engine.problem_for`: the call's steps up to its problem, on ``runtime`` (nothing launched)."""
    arrays = import_call(runtime, a, b, c=c, bias=bias)
    options = CallOptions(alpha, beta, bias_axis, activation, out_dtype, "same_kind", precision)
    request = make_request(arrays, numpy_rules.apply(arrays, out_dtype, "same_kind", beta,
                                                     activation=resolve_activation(activation)), options)
    if request.shape.empty:
        raise ValueError(f"matmul of shapes {np.shape(a)} and {np.shape(b)} runs no kernel "
                         f"(empty output or K = 0): there is no problem to explain or tune")
    return prepare(runtime, arrays, request).problem
