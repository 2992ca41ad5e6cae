"""Every global level asks the algorithm's listener at its two global events (global_/base.py,
stage/events.py): for each built-in algorithm rendered on a nominal device (A100, H100, OpenCL; no
device needed), a subclass whose ``listener`` answers each event kind with its own comment renders
``KernelStart``'s exactly once, at the top of the kernel's body, and ``BeforeStore``'s at least
once, after it (KernelStart's is the first hook of all, stage events' included); and hooks at the
two global events only add their comments and nothing else (the source without them is the source
of the algorithm without a listener)."""
from __future__ import annotations

import re
from functools import lru_cache

import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.batch.base import KERNEL_NAME
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.global_.activations import ACTIVATIONS
from gemm_engine.global_.epilogue import Epilogue
from gemm_engine.problem import MatmulProblem
from gemm_engine.stage.events import StageEventListener
from renders import OPENCL_DEVICE

DEVICES = {"sm_80": nominal_cuda_device(8, 0), "sm_90": nominal_cuda_device(9, 0), "opencl": OPENCL_DEVICE}

#: Algorithms that must set up on each device for at least one problem below (no vacuous pass).
MUST_CHECK = {
    "opencl": {"simple", "simple_unit", "double_buffering_unit", "ordered", "specialized", "split_k_unit",
               "skinny", "skinny_split_k", "auto"},
    "sm_80": {"simple_mma", "double_buffering_mma", "pipelined_mma", "simple_wmma", "simple_dmma",
              "pipelined_dmma", "split_k_mma", "skinny", "auto"},
    "sm_90": {"pipelined_wgmma", "specialized_wgmma", "split_k_wgmma", "pipelined_mma", "skinny", "auto"},
}

_FULL_EPILOGUE = Epilogue(scaled=True, c=FLOAT32, bias=FLOAT16, bias_axis=0, activation=ACTIVATIONS["gelu"]())


def problems():
    """Aligned and unaligned tiles per dtype, one with every epilogue term, a skinny one (M = 1)
    and a long-K one (split K)."""
    for dtype in ("float32", "float16", "bfloat16", "float64"):
        et = BY_NAME[dtype]
        shapes = [(1, 256, 256, 256), (2, 129, 67, 200)]
        if dtype != "float64":
            shapes += [(1, 1, 512, 4096), (1, 64, 64, 8192)]
        for shape in shapes:
            yield MatmulProblem(*shape, et, et, et, lhs_align=8, rhs_align=8)
        if et.compute == "f32":
            yield MatmulProblem(2, 129, 67, 200, et, et, et, lhs_align=8, rhs_align=8, epilogue=_FULL_EPILOGUE)


def short(problem: MatmulProblem) -> str:
    ep = "" if problem.epilogue.identity else " +epilogue"
    return f"{problem.batch}x{problem.m}x{problem.n}x{problem.k} {problem.lhs.name}{ep}"


def hook(kind: str) -> str:
    return f"/* HOOK {kind} */"


class HookListener(StageEventListener):
    """A comment naming the event's kind at every event (stage events too: they must not disturb
    the two global ones)."""

    def on_event(self, event) -> str:
        return hook(type(event).__name__)


class GlobalHookListener(StageEventListener):
    """Comments at the two global events only. (A listener answering stage events changes more
    than its comments, by design: a stage renders its tile loop unrolled so that each event has its
    own place.)"""

    def on_event(self, event) -> str:
        kind = type(event).__name__
        return hook(kind) if kind in ("KernelStart", "BeforeStore") else ""


@lru_cache(maxsize=None)
def hooked(algorithm_class: type, listener: type) -> type:
    """``algorithm_class`` with ``listener`` (a subclass, as a user composes one)."""
    return type(f"{listener.__name__}{algorithm_class.__name__}", (algorithm_class,),
                {"name": f"hooked_{algorithm_class.name}", "listener": listener, "__module__": __name__})


@lru_cache(maxsize=None)
def renders(device: str, name: str):
    """[(problem, concrete algorithm name, plain source, {listener: hooked source})] for the
    problems ``name`` sets up on ``device``, and the refusals of the others."""
    found, refused = [], []
    for problem in problems():
        alg = REGISTRY[name]()
        dialect = dialect_for(DEVICES[device])
        try:
            cfg = alg.setup(problem, dialect)
        except SetupError as exc:
            refused.append(f"{short(problem)}: {exc}")
            continue
        concrete = alg.chosen(cfg)    # a family (simple, split_k, auto...): the member it chose
        plain = concrete.render(cfg, dialect)
        sources = {}
        for listener in (HookListener, GlobalHookListener):
            listening = hooked(type(concrete), listener)()
            dialect = dialect_for(DEVICES[device])
            hooked_cfg = listening.setup(problem, dialect)   # the same composition: it sets up too
            assert hooked_cfg.batch == cfg.batch, f"{name} {short(problem)}: the listener changed the config"
            sources[listener] = listening.render(hooked_cfg, dialect)
        found.append((problem, concrete.name, plain, sources))
    return tuple(found), tuple(refused)


PAIRS = [pytest.param(dev, name, id=f"{dev}-{name}") for dev in DEVICES for name in sorted(REGISTRY)]


@pytest.mark.parametrize("device, name", PAIRS)
def test_global_events_reach_the_algorithms_listener(device, name):
    found, refused = renders(device, name)
    if not found:
        pytest.skip(f"{name} sets up none of the problems on {device}; first refusal: {refused[0]}")
    start, store = hook("KernelStart"), hook("BeforeStore")
    for problem, concrete, _, sources in found:
        for listener, source in sources.items():
            where = f"{name} ({concrete}) on {device}, {short(problem)}, {listener.__name__}"
            assert source.count(start) == 1, f"{where}: KernelStart hook {source.count(start)} times"
            assert source.count(store) >= 1, f"{where}: no BeforeStore hook"
            kernel = re.search(rf"\bvoid\s+{KERNEL_NAME}\s*\(", source)
            assert kernel is not None and kernel.start() < source.index(start), \
                f"{where}: KernelStart hook outside {KERNEL_NAME}"
            assert source.index(start) < source.index(store), f"{where}: BeforeStore hook before KernelStart"
            # At the top of the body: before every stage event's hook too.
            first = re.search(r"/\* HOOK (\w+) \*/", source).group(1)
            assert first == "KernelStart", f"{where}: the first hook is {first}"


@pytest.mark.parametrize("device, name", PAIRS)
def test_global_hooks_add_their_code_and_nothing_else(device, name):
    found, refused = renders(device, name)
    if not found:
        pytest.skip(f"{name} sets up none of the problems on {device}; first refusal: {refused[0]}")
    for problem, concrete, plain, sources in found:
        stripped = re.sub(r"/\* HOOK \w+ \*/\n?", "", sources[GlobalHookListener])
        body = lambda text: text.split("\n", 1)[1]   # noqa: E731 -- past the header naming the algorithm
        assert body(stripped) == body(plain), f"{name} ({concrete}) on {device}, {short(problem)}"


@pytest.mark.parametrize("device", DEVICES)
def test_hooks_are_checked_on_every_device(device):
    checked = {name for name in sorted(REGISTRY) if renders(device, name)[0]}
    missing = MUST_CHECK[device] - checked
    assert not missing, f"on {device} these set up none of the problems: " + "; ".join(
        f"{n}: {renders(device, n)[1][:1]}" for n in sorted(missing))
    assert len(checked) >= len(MUST_CHECK[device])
