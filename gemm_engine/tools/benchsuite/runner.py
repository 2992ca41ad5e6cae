"""Running suite rows: inputs, one checked engine call, then engine, baselines and tuning timed alike.

Per row: random standard-normal operands (seeded by the problem, so every dtype of a problem and
every run see the same data) are moved to the device once. The engine's default call, the
heuristic's choice (``engine.matmul(a, b, algorithm="auto", precision=...)``, with ``bias=...,
activation="relu"`` for fused rows; "auto" so that a tuning cache left by an earlier run cannot
turn "default" into "tuned"), is checked against a float64 numpy reference, then timed with
`gemm_engine.runtime.timing.device_time`, as is every baseline on the same device arrays, in two rounds
(the faster median of each is kept). A row the engine refuses is kept with the reason
(``skipped``); a crash is kept as a ``failure``; a baseline that cannot run or fails leaves its
reason in ``baseline_notes``. Nothing is dropped silently.
"""
from __future__ import annotations

import math
import platform
import zlib
from dataclasses import dataclass, field

import numpy as np

from ...algorithms.base import REGISTRY
from ...dtypes import bfloat16_dtype
from ...errors import SetupError
from ...runtime.timing import device_time
from ...version import __version__
from .baselines import NATIVE, Baseline, baselines_for
from .rows import Row
from ..cli_types import numpy_dtype

#: Relative Frobenius-norm error allowed per dtype label: a few units of the output dtype's
#: rounding (tf32: of its 10-bit mantissa), as the CLI and the tests allow.
TOLERANCE = {"float32": 2e-5, "tf32": 5e-3, "float16": 2e-3, "bfloat16": 1.5e-2}
#: Output rows checked against the float64 reference: evenly spread, first and last included (the
#: edge tiles are where bounds go wrong), so that 8192-row problems check in about a second.
CHECK_ROWS = 256


@dataclass(frozen=True)
class RowResult:
    row: Row
    engine_s: float | None = None          # median seconds of the engine's default call
    algorithm: str | None = None           # the algorithm the default call chose
    error: float | None = None             # relative error against the float64 reference
    ok: bool = False                       # error within TOLERANCE (False when skipped or failed)
    baselines: dict = field(default_factory=dict)        # name -> median seconds, None if not run
    baseline_notes: dict = field(default_factory=dict)   # name -> why not run, or a caveat
    tuned_s: float | None = None           # the tuned choice, timed like the default call
    tuned_algorithm: str | None = None
    tune_note: str | None = None           # why there is no tuned number, or how it was taken
    skipped: str | None = None             # the engine refused the row: why
    failure: str | None = None             # the engine crashed on the row: what was raised
    tiling: str | None = None              # the default choice's stage tiling, for the record

    @property
    def tflops(self) -> float | None:
        return self.row.flops / self.engine_s / 1e12 if self.engine_s else None

    @property
    def native(self) -> str | None:
        """The baseline the ratio is taken against: the first of `NATIVE` with a time."""
        return next((n for n in NATIVE if self.baselines.get(n)), None)

    @property
    def ratio(self) -> float | None:
        """Baseline time / engine time: the engine's speed relative to the native library (> 1:
        the engine is faster)."""
        native = self.native
        return self.baselines[native] / self.engine_s if native and self.engine_s else None

    @property
    def tuned_speedup(self) -> float | None:
        """Default time / tuned time (> 1: tuning helped)."""
        return self.engine_s / self.tuned_s if self.engine_s and self.tuned_s else None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip()[:300]}"


def _unsupported(engine, row: Row) -> str | None:
    """Why ``row`` cannot be measured here before anything runs, or None."""
    if row.dtype == "bfloat16" and bfloat16_dtype() is None:
        return "bfloat16 needs the ml_dtypes package"
    if row.precision == "tf32":
        cc = engine.device.compute_capability
        if engine.backend != "cuda" or cc is None or cc < (8, 0):
            # The engine would accept the request and run exact float32 FMA: the number would be
            # the float32 row's again under a tf32 label.
            where = f"this {engine.device.arch} GPU" if cc else f"the {engine.backend} backend"
            return f"tf32 needs CUDA tensor cores (sm_80+), which {where} lacks"
    try:
        probe = engine.runtime.empty((1,), numpy_dtype(row.dtype))
        if probe.dtype != numpy_dtype(row.dtype):
            raise TypeError(f"got {probe.dtype}")
    except Exception as exc:  # noqa: BLE001 -- e.g. CuPy < 14 and bfloat16
        return f"the {engine.backend} array library has no {row.dtype} arrays ({_describe(exc)})"
    return None


def make_inputs(row: Row, seed: int = 0):
    """Host operands (a, b, bias or None) of ``row``, standard normal rounded to its dtype."""
    rng = np.random.default_rng([seed, zlib.crc32(row.name.encode())])
    lead = (row.batch,) if row.batch > 1 else ()
    dtype = numpy_dtype(row.dtype)
    draw = lambda shape: rng.standard_normal(shape, dtype=np.float32).astype(dtype)  # noqa: E731
    return draw(lead + (row.m, row.k)), draw(lead + (row.k, row.n)), draw((row.n,)) if row.fused else None


def relative_error(result: np.ndarray, a, b, bias, row: Row) -> float:
    """Relative Frobenius error of ``result`` on `CHECK_ROWS` sampled output rows against float64."""
    picked = np.unique(np.linspace(0, row.m - 1, min(row.m, CHECK_ROWS)).round().astype(np.int64))
    ref = np.matmul(a[..., picked, :].astype(np.float64), b.astype(np.float64))
    if row.fused:
        ref = np.maximum(ref + bias.astype(np.float64), 0.0)
    got = np.asarray(result)[..., picked, :].astype(np.float64)
    if not np.all(np.isfinite(got)):
        return math.inf
    denom = float(np.linalg.norm(ref))
    return float(np.linalg.norm(got - ref)) / (denom or 1.0)


def _tiling(cfg) -> str | None:
    try:
        st = cfg.batch.global_.stage
        return f"{st.stage_m}x{st.stage_n}x{st.stage_k}/{cfg.units}u"
    except AttributeError:
        return None


def _tune(engine, row, da, db, kwargs, repeat, warmup):
    """(seconds, algorithm name, note) of the tuned choice, timed like the default call."""

    if not hasattr(engine, "tune"):
        return None, None, "this engine has no tune()"
    try:
        best = engine.tune(da, db, precision=row.precision).best
    except Exception as exc:  # noqa: BLE001 -- a tuning failure is a result, not the end of the run
        return None, None, f"tune failed: {_describe(exc)}"
    try:
        # Re-timed with the row's own call (epilogue included) and the same repeat/warmup, so that
        # default and tuned are measured the same way.
        alg = REGISTRY[best.algorithm](best.selection)
        call = lambda: engine.matmul(da, db, algorithm=alg, **kwargs)  # noqa: E731
        call()
        seconds = min(device_time(engine.runtime, call, repeat=repeat, warmup=warmup) for _ in range(2))
        return seconds, best.algorithm, None
    except Exception as exc:  # noqa: BLE001
        if row.fused:
            return None, best.algorithm, f"tuned choice did not re-run with the epilogue: {_describe(exc)}"
        return best.seconds, best.algorithm, f"tuner's own time (re-run failed: {_describe(exc)})"


def _time_baselines(rt, row, baselines, da, db, dbias, repeat, warmup):
    times, notes = {}, {}
    for bl in baselines:
        can, why = bl.available(row)
        times[bl.name] = None
        if not can:
            notes[bl.name] = why
            continue
        try:
            fn = bl.prepare(row, da, db, dbias)
            times[bl.name] = device_time(rt, fn, repeat=repeat, warmup=warmup)
        except Exception as exc:  # noqa: BLE001 -- out of memory, a library error: recorded per baseline
            notes[bl.name] = f"failed: {_describe(exc)}"
            continue
        if bl.note(row):
            notes[bl.name] = bl.note(row)
    return times, notes


def run_row(engine, row: Row, baselines: list[Baseline], *, repeat=10, warmup=3, tune=False,
            seed=0) -> RowResult:
    """One row measured (see the module's docstring)."""
    why = _unsupported(engine, row)
    if why:
        return RowResult(row, skipped=why)
    rt = engine.runtime
    a, b, bias = make_inputs(row, seed)
    try:
        da, db = rt.to_device(a), rt.to_device(b)
        dbias = rt.to_device(bias) if bias is not None else None
    except Exception as exc:  # noqa: BLE001 -- out of device memory
        return RowResult(row, failure=f"moving the operands: {_describe(exc)}")
    kwargs = {"precision": row.precision}
    if row.fused:
        kwargs.update(bias=dbias, activation="relu")
    call = lambda: engine.matmul(da, db, algorithm="auto", **kwargs)  # noqa: E731
    try:
        result = rt.to_host(call())
        alg, cfg = engine.last_choice
        engine_s = device_time(rt, call, repeat=repeat, warmup=warmup)
    except (SetupError, TypeError) as exc:   # the engine's refusal of a dtype or problem
        return RowResult(row, skipped=f"engine refused: {_describe(exc)}")
    except Exception as exc:  # noqa: BLE001 -- compile/launch failure, out of memory
        return RowResult(row, failure=_describe(exc))
    error = relative_error(result, a, b, bias, row)
    del result
    times, notes = _time_baselines(rt, row, baselines, da, db, dbias, repeat, warmup)
    # A second round of engine and baselines, each keeping its faster median: one slow spell of
    # the GPU (clocks, a neighbour) then costs no single measurement its row (seen once: a 0.03 ms
    # row measured 0.23 ms).
    engine_s = min(engine_s, device_time(rt, call, repeat=repeat, warmup=warmup))
    again, _ = _time_baselines(rt, row, baselines, da, db, dbias, repeat, warmup)
    times = {k: v if again.get(k) is None else again[k] if v is None else min(v, again[k])
             for k, v in times.items()}
    tuned = _tune(engine, row, da, db, kwargs, repeat, warmup) if tune else (None, None, None)
    return RowResult(row, engine_s, alg.name, error, error <= TOLERANCE[row.label], times, notes,
                     *tuned, tiling=_tiling(cfg))


def _release(engine, baselines):
    """Hand cached device memory back between rows: CuPy's and torch's pools would otherwise each
    keep the last row's blocks, and the next row's allocations could fail for want of the other's."""
    for bl in baselines:
        bl.release()
    if engine.backend == "cuda":
        engine.runtime.cp.get_default_memory_pool().free_all_blocks()


def run_suite(engine, rows, *, repeat=10, warmup=3, baselines=None, tune=False, progress=None,
              seed=0) -> list[RowResult]:
    """Measure ``rows`` on ``engine``. ``baselines``: None (all of the backend's), names (a list or
    comma string) or `Baseline` instances. ``progress(result)`` is called after each row."""
    if baselines is None or isinstance(baselines, str) or not all(isinstance(b, Baseline) for b in baselines):
        baselines = baselines_for(engine.runtime, baselines)
    results = []
    for row in rows:
        result = run_row(engine, row, baselines, repeat=repeat, warmup=warmup, tune=tune, seed=seed)
        _release(engine, baselines)
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def _version(dist: str) -> str | None:
    from importlib import metadata
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def device_info(engine) -> dict:
    """The machine and library versions a result file should carry."""

    dev = engine.device
    libs = {name: _version(name) for name in ("numpy", "ml_dtypes", "pyopencl", "pyclblast", "torch", "triton")}
    if engine.backend == "cuda":
        libs["cupy"] = engine.runtime.cp.__version__
    return {"device": dev.name, "backend": engine.backend, "compute_units": dev.compute_units,
            "compute_capability": list(dev.compute_capability) if dev.compute_capability else None,
            "host": platform.node(), "python": platform.python_version(), "gemm_engine": __version__,
            "libraries": {k: v for k, v in libs.items() if v is not None}}
