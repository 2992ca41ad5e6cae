"""JIT and host-overhead benchmarks: what a user waits for besides the kernel itself.

* `cold_compile`: the first ``matmul`` of a new config in a fresh process whose compiler caches are
  empty (render + compile + launch), plus that process's import and ``Engine()`` times.
* `warm_first_call`: the same first call in a later process that finds the binaries on disk.
* `per_call`: microseconds of Python per ``engine.matmul`` on a tiny problem against the native
  library's call (``cupy.matmul`` on CUDA; see `per_call` for OpenCL).
* `run_overhead` checks them against the issue's targets; `format_overhead` prints a table.

Where compiled kernels are cached (what "warm" means):

* CUDA: every kernel is built by NVRTC (runtime/nvrtc.py) into a cubin kept under
  ``CUPY_CACHE_DIR`` (default ``~/.cupy/kernel_cache``) as ``gemm_engine_<key>.cubin``.
* OpenCL: PyOpenCL's own binary cache (under ``$XDG_CACHE_HOME/pyopencl``; there is no
  PYOPENCL_CACHE_DIR variable) is skipped for PoCL and NVIDIA, whose drivers cache builds
  themselves (``pyopencl.characterize.has_src_build_cache``); PoCL's is ``POCL_CACHE_DIR``
  (default ``$XDG_CACHE_HOME/pocl``). PyOpenCL also caches generated kernel-call code with pytools
  under ``$XDG_CACHE_HOME/pytools``.

The child processes get every one of these pointed into one fresh temporary directory, so "cold"
is cold for all of them and "warm" is warm only from the previous child.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from ...engine import Engine

#: The issue's targets: seconds for the first calls, engine/native time ratio per call.
TARGETS = {"cold_compile_s": 1.5, "warm_first_call_s": 0.1, "per_call_ratio": 1.5,
           # torch CUDA tensors in, torch out, against torch.matmul itself (the slowest dtype).
           "torch_per_call_ratio": 1.2}

#: First-call problem per backend (M = N = K, dtype): a realistic tensor-core config on CUDA; a
#: size PoCL on a small CPU runs in well under the compile time on OpenCL.
DEFAULT_PROBLEMS = {"cuda": (1024, "float16"), "opencl": (256, "float32")}

#: Marks the child's result line on stdout (drivers or libraries may print lines of their own).
_RESULT_TAG = "GEMM_ENGINE_OVERHEAD "

#: Child timeout, seconds: a cold compile takes about a second; this only stops a hung child.
_CHILD_TIMEOUT_S = 600

# The child program. Self-contained (not an import of this module) so that nothing but
# ``import gemm_engine`` runs before the import is timed. argv[1]: the JSON config.
_CHILD = r'''
import json, sys, time
cfg = json.loads(sys.argv[1])
clock = time.perf_counter
t = clock()
import gemm_engine
import_s = clock() - t
import numpy as np
t = clock()
engine = gemm_engine.Engine(cfg["backend"])
engine_s = clock() - t
rt = engine.runtime
m, dtype = cfg["problems"][engine.backend] if cfg["m"] is None else (cfg["m"], cfg["dtype"])
compiled = []                      # seconds of each backend compile (cache lookups included)
build = rt._compile
def timed_compile(source, name):
    t0 = clock()
    fn = build(source, name)
    compiled.append(clock() - t0)
    return fn
rt._compile = timed_compile        # instance attribute: Runtime.kernel calls self._compile
rng = np.random.default_rng(0)
a = rt.to_device(rng.standard_normal((m, m)).astype(dtype))
b = rt.to_device(rng.standard_normal((m, m)).astype(dtype))
rt.synchronize()
def call():
    t0 = clock()
    engine.matmul(a, b, algorithm=cfg["algorithm"])
    rt.synchronize()
    return clock() - t0
first = call()
second = call()
alg, kcfg = engine.last_choice
t = clock()
alg.render(kcfg, engine.dialect)   # render alone, with Python's caches warm
render_s = clock() - t
print(cfg["tag"] + json.dumps({
    "backend": engine.backend, "device": engine.device.name, "m": m, "dtype": str(np.dtype(dtype)),
    "algorithm": alg.name, "import_s": import_s, "engine_s": engine_s, "first_call_s": first,
    "second_call_s": second, "compile_s": sum(compiled), "kernels_compiled": len(compiled),
    "render_s": render_s}))
'''


def _repo_root() -> str:
    """The folder holding this checkout's gemm_engine/ (children import it, not an installed copy)."""
    return str(pathlib.Path(__file__).resolve().parents[3])


def _child_env(cache_dir: str) -> dict:
    """The environment with every compiled-kernel cache the backends use under ``cache_dir``, and
    the switches that would turn those caches off removed (the caches are what is measured)."""
    env = dict(os.environ)
    for var in ("CUPY_CACHE_IN_MEMORY", "PYOPENCL_NO_CACHE", "POCL_KERNEL_CACHE", "CUDA_CACHE_DISABLE"):
        env.pop(var, None)
    env.update(
        CUPY_CACHE_DIR=os.path.join(cache_dir, "cupy"),
        CUDA_CACHE_PATH=os.path.join(cache_dir, "nv"),      # the driver's PTX JIT cache
        POCL_CACHE_DIR=os.path.join(cache_dir, "pocl"),
        XDG_CACHE_HOME=os.path.join(cache_dir, "xdg"),      # PyOpenCL's and pytools' caches
    )
    # The child imports the same gemm_engine as this process, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_repo_root(), env.get("PYTHONPATH")) if p)
    return env


def _run_child(config: dict, cache_dir: str) -> dict:
    """Run the child program once; its result dict, or RuntimeError carrying its stderr."""
    cmd = [sys.executable, "-c", _CHILD, json.dumps(dict(config, tag=_RESULT_TAG))]
    try:
        proc = subprocess.run(cmd, env=_child_env(cache_dir), capture_output=True, text=True,
                              timeout=_CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr or b""   # bytes here even with text=True (subprocess keeps the raw pipe)
        err = err.decode(errors="replace") if isinstance(err, bytes) else err
        raise RuntimeError(f"overhead child timed out after {_CHILD_TIMEOUT_S} s; stderr:\n"
                           f"{err.strip()[-4000:]}") from exc
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_RESULT_TAG)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"overhead child failed (exit {proc.returncode}) for {config}; stderr:\n"
                           f"{proc.stderr.strip()[-4000:]}\nstdout:\n{proc.stdout.strip()[-1000:]}")
    return json.loads(lines[-1][len(_RESULT_TAG):])


def _config(backend, m, dtype, algorithm) -> dict:
    if (m is None) != (dtype is None):
        raise ValueError("m and dtype: give both or neither (neither: DEFAULT_PROBLEMS)")
    return {"backend": backend, "m": m, "dtype": None if dtype is None else np.dtype(dtype).name,
            "algorithm": algorithm, "problems": DEFAULT_PROBLEMS}


def _first_calls(backend, m, dtype, algorithm, processes: int) -> list[dict]:
    """``processes`` children in turn sharing one fresh cache directory (deleted afterwards)."""
    config = _config(backend, m, dtype, algorithm)
    cache_dir = tempfile.mkdtemp(prefix="gemm_engine_overhead_")
    try:
        return [_run_child(config, cache_dir) for _ in range(processes)]
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def cold_compile(backend: str = "auto", m: int | None = None, dtype=None, algorithm=None) -> dict:
    """The first ``matmul`` of an ``m``^3 ``dtype`` problem (default: DEFAULT_PROBLEMS for the
    backend) in a fresh process with empty compiler caches. Seconds: ``import_s`` (import
    gemm_engine), ``engine_s`` (Engine()), ``first_call_s`` (setup, render, compile, launch,
    synchronize), ``second_call_s``, ``compile_s`` (inside the backend compiler, over
    ``kernels_compiled`` kernels) and ``render_s`` (the source alone, re-rendered afterwards)."""
    return _first_calls(backend, m, dtype, algorithm, 1)[0]


def warm_first_call(backend: str = "auto", m: int | None = None, dtype=None, algorithm=None) -> dict:
    """`cold_compile`'s measurement in a second process that finds the first one's binaries in the
    on-disk caches: the second process's dict, with the first's under ``"cold"``."""
    cold, warm = _first_calls(backend, m, dtype, algorithm, 2)
    return dict(warm, cold=cold)


def _us_per_call(fn, sync, calls: int, repeats: int) -> tuple[float, float, list]:
    """(median total, median host-only, total runs) microseconds per call over ``repeats`` runs of
    ``calls`` back-to-back calls with one synchronize at the end of each run (queued device work
    paid once). Host-only stops the clock before that synchronize: the submission cost alone, as
    long as the queue does not push back (on a CPU device the kernels share the host's cores)."""
    fn()
    sync()
    runs, host = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        sync()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
        host.append((t1 - t0) / calls * 1e6)
    return statistics.median(runs), statistics.median(host), runs


def _native_call(engine, a, b):
    """(name, fn) of the native library's tiny matmul with the engine's output allocation.

    CUDA: ``cupy.matmul`` (cuBLAS). OpenCL: CLBlast's SGEMM through ``pyclblast`` when it imports
    and runs; else the floor any PyOpenCL call pays: PyOpenCL's array addition (allocate the
    output, launch one cached kernel), which is stricter than any matmul library."""
    rt = engine.runtime
    n = a.shape[0]
    if engine.backend == "cuda":
        return "cupy.matmul", lambda: rt.cp.matmul(a, b)
    cla, queue = rt.cla, rt.queue
    try:
        import pyclblast

        def clblast():
            c = cla.empty(queue, (n, n), np.float32)
            pyclblast.gemm(queue, n, n, n, a, b, c, a_ld=n, b_ld=n, c_ld=n)
            return c
        clblast()
        return "pyclblast.gemm", clblast
    except Exception:  # not installed, or no CLBlast library for it: PyOpenCL's own floor below
        pass
    # No matmul library: PyOpenCL's own array addition (allocate the output, one launch of a
    # kernel PyOpenCL generates and caches), the least any PyOpenCL call costs.
    return "pyopencl.array a + b (allocation and one launch)", lambda: a + b


def per_call(engine, size: int = 64, calls: int = 2000, repeats: int = 5) -> dict:
    """Microseconds per ``engine.matmul(a, b)`` on ``size``^2 float32 device arrays (output
    allocated by the call) against the native library's call (`_native_call`); median of
    ``repeats`` runs of ``calls`` calls. ``ratio`` = engine / native (``*_us``, synchronized);
    ``*_host_us``: the same runs' time before their final synchronize (see `_us_per_call`)."""
    rt = engine.runtime
    rng = np.random.default_rng(0)
    a = rt.to_device(rng.standard_normal((size, size)).astype(np.float32))
    b = rt.to_device(rng.standard_normal((size, size)).astype(np.float32))
    engine_us, engine_host, engine_runs = _us_per_call(lambda: engine.matmul(a, b), rt.synchronize,
                                                       calls, repeats)
    name, native = _native_call(engine, a, b)
    native_us, native_host, native_runs = _us_per_call(native, rt.synchronize, calls, repeats)
    return {"backend": engine.backend, "device": engine.device.name, "size": size, "calls": calls,
            "repeats": repeats, "engine_us": engine_us, "baseline": name, "baseline_us": native_us,
            "ratio": engine_us / native_us, "engine_host_us": engine_host,
            "baseline_host_us": native_host, "engine_runs_us": engine_runs,
            "baseline_runs_us": native_runs}


def per_call_torch(engine, size: int = 64, calls: int = 2000, repeats: int = 5,
                   dtypes=("float32", "float16", "bfloat16")) -> dict | None:
    """Microseconds per ``engine.matmul(a, b)`` on ``size``^2 torch CUDA tensors (result a torch
    tensor, on torch's stream) against ``torch.matmul(a, b)``, per dtype; None where torch has no
    GPU or the engine is not on CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if engine.backend != "cuda" or not torch.cuda.is_available():
        return None
    out = {}
    for name in dtypes:
        dtype = getattr(torch, name)
        a = torch.randn(size, size, device="cuda").to(dtype)
        b = torch.randn(size, size, device="cuda").to(dtype)
        eng, eng_host, _ = _us_per_call(lambda: engine.matmul(a, b), torch.cuda.synchronize, calls, repeats)
        ref, ref_host, _ = _us_per_call(lambda: torch.matmul(a, b), torch.cuda.synchronize, calls, repeats)
        out[name] = {"engine_us": eng, "torch_us": ref, "ratio": eng / ref,
                     "engine_host_us": eng_host, "torch_host_us": ref_host}
    # A fused call (bias + relu) against torch's two ops, float16: the epilogue's values travel per call.
    a, b = (torch.randn(size, size, device="cuda").half() for _ in range(2))
    bias = torch.randn(size, device="cuda").half()
    eng, eng_host, _ = _us_per_call(lambda: engine.matmul(a, b, bias=bias, activation="relu"),
                                    torch.cuda.synchronize, calls, repeats)
    ref, ref_host, _ = _us_per_call(lambda: torch.relu_(torch.addmm(bias, a, b)), torch.cuda.synchronize, calls,
                                    repeats)
    fused = {"engine_us": eng, "torch_us": ref, "ratio": eng / ref, "engine_host_us": eng_host,
             "torch_host_us": ref_host}
    return {"size": size, "calls": calls, "repeats": repeats, "dtypes": out, "fused_float16": fused,
            "ratio": max(r["ratio"] for r in out.values())}


def run_overhead(backend: str = "auto", m: int | None = None, dtype=None, size: int = 64,
                 calls: int = 2000, repeats: int = 5) -> dict:
    """All three measurements and the targets. The cold numbers are the first child of
    `warm_first_call` (it starts from empty caches), so two child processes run, not three."""
    warm = warm_first_call(backend, m, dtype)
    cold = warm.pop("cold")
    engine = Engine(backend)
    calls_ = per_call(engine, size=size, calls=calls, repeats=repeats)
    torch_calls = per_call_torch(engine, size=size, calls=calls, repeats=repeats)
    measured = {"cold_compile_s": cold["first_call_s"], "warm_first_call_s": warm["first_call_s"],
                "per_call_ratio": calls_["ratio"]}
    if torch_calls is not None:
        measured["torch_per_call_ratio"] = torch_calls["ratio"]
    return {"backend": cold["backend"], "device": cold["device"], "targets": dict(TARGETS),
            "measured": measured, "met": {k: measured[k] <= TARGETS[k] for k in measured},
            "cold": cold, "warm": warm, "per_call": calls_, "per_call_torch": torch_calls}


def format_overhead(d: dict) -> str:
    """A short table of `run_overhead`'s result."""
    cold, warm, pc = d["cold"], d["warm"], d["per_call"]
    problem = f"{cold['m']}^3 {cold['dtype']}, {cold['algorithm']}"
    rows = [("cold first call (compile)", f"{cold['first_call_s']:.3f} s", "cold_compile_s", "s"),
            ("warm-cache first call", f"{warm['first_call_s']:.3f} s", "warm_first_call_s", "s"),
            (f"per call {pc['size']}^3 f32 / native", f"{pc['ratio']:.2f}x", "per_call_ratio", "x")]
    if d.get("per_call_torch"):
        rows.append((f"per call {pc['size']}^3 torch / torch.matmul", f"{d['per_call_torch']['ratio']:.2f}x",
                     "torch_per_call_ratio", "x"))
    out = [f"JIT and host overhead, {d['backend']} on {d['device']} (first call: {problem})",
           f"  {'metric':34s} {'measured':>10s} {'target':>8s}  met"]
    for label, value, key, unit in rows:
        target = f"{d['targets'][key]:g} {unit}" if unit == "s" else f"{d['targets'][key]:g}x"
        out.append(f"  {label:34s} {value:>10s} {target:>8s}  {'yes' if d['met'][key] else 'NO'}")
    for name, r in (("cold", cold), ("warm", warm)):
        out.append(f"  {name}: import {r['import_s']:.3f} s, Engine() {r['engine_s']:.3f} s, "
                   f"compile {r['compile_s']:.3f} s ({r['kernels_compiled']} kernels), "
                   f"render {r['render_s'] * 1e3:.1f} ms, second call {r['second_call_s'] * 1e3:.2f} ms")
    host = ""
    if "engine_host_us" in pc:
        host = (f"; host-only {pc['engine_host_us']:.1f} vs {pc['baseline_host_us']:.1f} us "
                f"({pc['engine_host_us'] / pc['baseline_host_us']:.2f}x)")
    out.append(f"  per call: gemm_engine.matmul {pc['engine_us']:.1f} us, {pc['baseline']} "
               f"{pc['baseline_us']:.1f} us (median of {pc['repeats']} x {pc['calls']} calls){host}")
    for name, r in ((d.get("per_call_torch") or {}).get("dtypes") or {}).items():
        out.append(f"  torch {name}: gemm_engine.matmul {r['engine_us']:.1f} us, torch.matmul {r['torch_us']:.1f} us "
                   f"({r['ratio']:.2f}x; host-only {r['engine_host_us']:.1f} vs {r['torch_host_us']:.1f})")
    r = (d.get("per_call_torch") or {}).get("fused_float16")
    if r:
        out.append(f"  torch float16 bias + relu: gemm_engine.matmul {r['engine_us']:.1f} us, "
                   f"torch.relu_(torch.addmm) {r['torch_us']:.1f} us ({r['ratio']:.2f}x; host-only "
                   f"{r['engine_host_us']:.1f} vs {r['torch_host_us']:.1f})")
    return "\n".join(out)
