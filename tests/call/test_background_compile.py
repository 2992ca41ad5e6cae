"""Background builds (call/plan.py `Planner.stand_in`, runtime/background.py): the first call of
the engine's own choice runs a stand-in while the chosen kernel builds on a worker; the next call
runs the chosen kernel (waiting for its build); a named algorithm, a kernel already compiled, a
capture and torch's deterministic mode never get a stand-in; a failed build is met by the next
call as the compiler's refusal. On PoCL (opted in) and, on the GPU, CUDA (on by default)."""
from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest

import gemm_engine
from gemm_engine.errors import SetupError
from gemm_engine.runtime.background import BackgroundBuilds


def _engine(backend="opencl"):
    try:
        engine = gemm_engine.Engine(backend, background_compile=True)
    except (gemm_engine.BackendUnavailableError, ImportError) as exc:
        pytest.skip(f"{backend} backend unavailable here: {exc}")
    if backend == "opencl" and engine.device.vendor != "cpu":
        # Written for PoCL's choices (a float32 product whose choice is not the stand-in): on a GPU's
        # OpenCL the small float32 products choose simple_unit, the stand-in itself.
        pytest.skip(f"the OpenCL cases are written for PoCL; this device is {engine.device.name}")
    return engine


def _gelu_ref(a, b, bias):
    z = a.astype(np.float64) @ b.astype(np.float64) + bias
    return 0.5 * z * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))


def _operands(rng, m=67, k=45, n=33):
    return (rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32),
            rng.standard_normal(n).astype(np.float32))


def _check(engine, got, want):
    got = engine.runtime.download(got, np.float32) if not isinstance(got, np.ndarray) else got
    assert np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max())


def _in_build_thread() -> bool:
    return threading.current_thread().name == "gemm_engine_build"


def test_the_first_call_stands_in_and_the_next_runs_the_choice(rng):
    engine = _engine()
    a, b, bias = _operands(rng)
    chosen = engine.choose(engine.problem_for(a, b, bias=bias, activation="gelu")).algorithm.name
    rt = engine.runtime
    da, db, dbias = rt.to_device(a), rt.to_device(b), rt.to_device(bias)
    out = rt.to_device(np.full((a.shape[0], b.shape[1]), np.nan, np.float32))
    engine.matmul(da, db, bias=dbias, activation="gelu", out=out)
    assert engine.last_choice[0].name == "simple_unit" != chosen
    _check(engine, out, _gelu_ref(a, b, bias))
    assert not engine._calls                     # a stand-in's plan is not kept for the fast path
    out = rt.to_device(np.full((a.shape[0], b.shape[1]), np.nan, np.float32))
    engine.matmul(da, db, bias=dbias, activation="gelu", out=out)
    assert engine.last_choice[0].name == chosen
    _check(engine, out, _gelu_ref(a, b, bias))
    assert len(engine._calls) == 1
    engine.planner.clear()                       # plans dropped, kernels still compiled: no stand-in
    _check(engine, engine.matmul(a, b, bias=bias, activation="gelu"), _gelu_ref(a, b, bias))
    assert engine.last_choice[0].name == chosen


def test_explain_says_what_the_first_call_runs(rng):
    engine = _engine()
    a, b, bias = _operands(rng, 25, 26, 27)
    report = engine.explain(a, b, bias=bias, activation="gelu")
    assert "first call simple_unit" in str(report) and "builds in the background" in report.first_call
    assert engine.planner.builds.pending() == 0 and not engine.planner.builds._jobs   # explain hands nothing over
    assert engine.explain(a, b, bias=bias, activation="gelu", algorithm="direct_vector").first_call == ""
    engine.matmul(a, b, bias=bias, activation="gelu")
    engine.matmul(a, b, bias=bias, activation="gelu")
    assert engine.explain(a, b, bias=bias, activation="gelu").first_call == ""


def test_a_named_algorithm_and_deterministic_torch_never_stand_in(rng, monkeypatch):
    engine = _engine()
    a, b, bias = _operands(rng, 19, 23, 29)
    engine.matmul(a, b, bias=bias, activation="gelu", algorithm="direct_vector")
    assert engine.last_choice[0].name == "direct_vector" and not engine.planner.builds._jobs
    torch = pytest.importorskip("torch", reason="torch is not installed here")
    monkeypatch.setattr(torch, "are_deterministic_algorithms_enabled", lambda: True)
    _check(engine, engine.matmul(a, b, bias=bias, activation="relu"), np.maximum(a.astype(np.float64) @ b + bias, 0))
    assert engine.last_choice[0].name != "simple_unit"


def _held_stand_in(engine, rng, monkeypatch, m):
    """A gelu call of ``m`` rows that stood in while its chosen kernel's build waits on the returned
    event (set it to let the build finish); the operands."""
    rt = engine.runtime
    release, real = threading.Event(), rt._build
    monkeypatch.setattr(rt, "_build", lambda source: (not _in_build_thread() or release.wait(30)) and real(source))
    a, b, bias = _operands(rng, m, 17, 40)
    engine.matmul(a, b, bias=bias, activation="gelu")
    return release, a, b, bias


def test_a_capture_waits_for_the_build_and_gets_the_chosen_kernel(rng, monkeypatch):
    engine = _engine()
    rt = engine.runtime
    release, a, b, bias = _held_stand_in(engine, rng, monkeypatch, 31)
    assert engine.last_choice[0].name == "simple_unit" and engine.planner.builds.pending() == 1
    monkeypatch.setattr(rt, "capturing", lambda stream=None: True)
    threading.Timer(0.3, release.set).start()
    start = time.perf_counter()
    got = engine.matmul(a, b, bias=bias, activation="gelu")     # waits, loads: no CaptureError
    assert time.perf_counter() - start >= 0.25 and engine.last_choice[0].name != "simple_unit"
    _check(engine, got, _gelu_ref(a, b, bias))
    with pytest.raises(RuntimeError, match="capturing a CUDA graph.*[Ww]arm up first"):
        engine.matmul(a, b, bias=bias, activation="sigmoid")    # a first call while capturing: no stand-in


def _refuse_builds(engine, monkeypatch, marker, message):
    """The engine's compiler raises ``message`` for sources that contain ``marker``."""
    real = engine.runtime._build

    def build(source):
        if marker in source:
            raise RuntimeError(message)
        return real(source)
    monkeypatch.setattr(engine.runtime, "_build", build)


def test_a_failed_build_is_the_next_calls_refusal(rng, monkeypatch):
    engine = _engine()
    _refuse_builds(engine, monkeypatch, "gemm_engine: direct_vector", "the compiler says no")
    a, b, bias = _operands(rng, 21, 22, 23)
    _check(engine, engine.matmul(a, b, bias=bias, activation="gelu"), _gelu_ref(a, b, bias))
    assert engine.last_choice[0].name == "simple_unit"
    assert engine.wait_for_compiles(60)
    with pytest.raises(SetupError, match="direct_vector.*compiler rejected.*the compiler says no"):
        engine.matmul(a, b, bias=bias, activation="gelu")


def test_a_stand_in_that_cannot_compile_leaves_the_call_to_the_chosen_kernel(rng, monkeypatch):
    engine = _engine()
    _refuse_builds(engine, monkeypatch, "gemm_engine: simple_unit", "no stand-in today")
    a, b, bias = _operands(rng, 23, 24, 25)
    _check(engine, engine.matmul(a, b, bias=bias, activation="gelu"), _gelu_ref(a, b, bias))
    assert engine.last_choice[0].name != "simple_unit" and not engine.planner.builds._jobs


def test_kernels_known_to_the_planner_need_no_stand_in_without_a_source_cache(rng, monkeypatch):
    # A source cache that keeps nothing (an unwritable folder): warmed-up kernels still run at once.
    engine = _engine()
    monkeypatch.setattr(engine.planner.sources, "get", lambda key: None)
    monkeypatch.setattr(engine.planner.sources, "put", lambda key, source: None)
    a, b, bias = _operands(rng, 33, 34, 35)
    problem = engine.problem_for(a, b, bias=bias, activation="gelu")
    gemm_engine.warmup([problem], engine=engine)
    assert not engine.planner.builds._jobs
    _check(engine, engine.matmul(a, b, bias=bias, activation="gelu"), _gelu_ref(a, b, bias))
    assert engine.last_choice[0].name == engine.choose(problem).algorithm.name


def test_a_capture_where_modules_cannot_load_says_to_warm_up(rng, monkeypatch):
    engine = _engine()
    rt = engine.runtime
    release, a, b, bias = _held_stand_in(engine, rng, monkeypatch, 41)
    monkeypatch.setattr(rt, "loads_during_capture", False)       # a CUDA driver before 12.3
    monkeypatch.setattr(rt, "capturing", lambda stream=None: True)
    release.set()
    with pytest.raises(RuntimeError, match="capturing a CUDA graph.*[Ww]arm up first"):
        engine.matmul(a, b, bias=bias, activation="gelu")


def test_on_by_default_for_cuda_only_and_by_the_environment(monkeypatch):
    monkeypatch.delenv("GEMM_ENGINE_BACKGROUND_COMPILE")
    try:
        assert not gemm_engine.Engine("opencl").planner.background
        monkeypatch.setenv("GEMM_ENGINE_BACKGROUND_COMPILE", "1")
        assert gemm_engine.Engine("opencl").planner.background
    except (gemm_engine.BackendUnavailableError, ImportError) as exc:
        pytest.skip(f"opencl backend unavailable here: {exc}")
    assert not gemm_engine.Engine("opencl", background_compile=False).planner.background


def test_background_builds_run_once_per_key_on_daemon_threads():
    builds, runs = BackgroundBuilds(workers=2), []
    gate = threading.Event()

    def job(value):
        def run():
            gate.wait(10)
            runs.append((value, threading.current_thread().daemon))
            if value == "bad":
                raise ValueError("bad build")
            return value
        return run
    first = builds.submit("a", job("a"))
    assert builds.submit("a", job("again")) is first and builds.get("a") is first
    failed = builds.submit("b", job("bad"))
    assert builds.pending() == 2 and not builds.wait(0.05)
    gate.set()
    assert builds.wait(10) and builds.pending() == 0
    assert first.result() == "a" and isinstance(failed.exception(), ValueError)
    assert sorted(runs) == [("a", True), ("bad", True)]
    builds.forget()
    assert builds.get("a") is None
    gate.clear()
    pending = builds.submit("c", job("c"))
    builds.forget()                               # pending jobs leave the keys too (a registry change)
    assert builds.get("c") is None and not pending.done()
    gate.set()
    assert pending.result(10) == "c"


@pytest.mark.cuda
def test_cuda_first_call_stands_in_and_a_graph_captures_the_chosen_kernel(monkeypatch):
    torch = pytest.importorskip("torch", reason="torch is not installed here")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    engine = _engine("cuda")
    rt = engine.runtime
    real = rt._build
    monkeypatch.setattr(rt, "_on_disk", lambda source: False)     # as with empty caches
    monkeypatch.setattr(rt, "_build", lambda source: (not _in_build_thread() or time.sleep(1.0) or True)
                        and real(source))
    gen = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(1000, 512, generator=gen, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(768, 512, generator=gen, device="cuda", dtype=torch.bfloat16) / 512 ** 0.5
    bias = torch.randn(768, generator=gen, device="cuda", dtype=torch.bfloat16)

    def want():
        return torch.nn.functional.gelu(x.double() @ w.double().T + bias.double())

    def err(y):
        return float((y.double() - want()).norm() / want().norm())
    chosen = engine.choose(engine.problem_for(x, w.mT, bias=bias, activation="gelu")).algorithm.name
    y = engine.matmul(x, w.mT, bias=bias, activation="gelu")
    assert engine.last_choice[0].name == "simple_mma" != chosen and err(y) < 1e-2
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):               # the build is still running: the capture waits for it
        y = engine.matmul(x, w.mT, bias=bias, activation="gelu")
    assert engine.last_choice[0].name == chosen
    for seed in range(2):
        x.copy_(torch.randn(1000, 512, device="cuda", dtype=torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        assert err(y) < 1e-2
