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
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.errors import SetupError
from gemm_engine.stage.events import StageEventListener
from renders import MUST_SET_UP, NOMINAL_DEVICES, coverage_problems, short_name


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
    for problem in coverage_problems():
        alg = REGISTRY[name]()
        dialect = dialect_for(NOMINAL_DEVICES[device])
        try:
            cfg = alg.setup(problem, dialect)
        except SetupError as exc:
            refused.append(f"{short_name(problem)}: {exc}")
            continue
        concrete = alg.chosen(cfg)    # a family (simple, split_k, auto...): the member it chose
        plain = concrete.render(cfg, dialect)
        sources = {}
        for listener in (HookListener, GlobalHookListener):
            listening = hooked(type(concrete), listener)()
            dialect = dialect_for(NOMINAL_DEVICES[device])
            hooked_cfg = listening.setup(problem, dialect)   # the same composition: it sets up too
            assert hooked_cfg.batch == cfg.batch, f"{name} {short_name(problem)}: the listener changed the config"
            sources[listener] = listening.render(hooked_cfg, dialect)
        found.append((problem, concrete.name, plain, sources))
    return tuple(found), tuple(refused)


PAIRS = [pytest.param(dev, name, id=f"{dev}-{name}") for dev in NOMINAL_DEVICES for name in sorted(REGISTRY)]


@pytest.mark.parametrize("device, name", PAIRS)
def test_global_events_reach_the_algorithms_listener(device, name):
    found, refused = renders(device, name)
    if not found:
        pytest.skip(f"{name} sets up none of the problems on {device}; first refusal: {refused[0]}")
    start, store = hook("KernelStart"), hook("BeforeStore")
    for problem, concrete, _, sources in found:
        for listener, source in sources.items():
            where = f"{name} ({concrete}) on {device}, {short_name(problem)}, {listener.__name__}"
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
        stripped = re.sub(r"[ \t]*/\* HOOK \w+ \*/\n?", "", sources[GlobalHookListener])
        body = lambda text: text.split("*/\n", 1)[1]   # noqa: E731 -- past the header naming the algorithm
        assert body(stripped) == body(plain), f"{name} ({concrete}) on {device}, {short_name(problem)}"


@pytest.mark.parametrize("device", NOMINAL_DEVICES)
def test_hooks_are_checked_on_every_device(device):
    checked = {name for name in sorted(REGISTRY) if renders(device, name)[0]}
    missing = MUST_SET_UP[device] - checked
    assert not missing, f"on {device} these set up none of the problems: " + "; ".join(
        f"{n}: {renders(device, n)[1][:1]}" for n in sorted(missing))
    assert len(checked) >= len(MUST_SET_UP[device])
