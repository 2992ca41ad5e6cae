"""Compile rendered CUDA sources with nvcc (no GPU needed) for the architectures we ship.

Used by the compile-check tests so that a broken CUDA template fails CI on a machine without a
GPU. Each source is compiled to a cubin for sm_80 and sm_90a (``-Xptxas -v``: ptxas's report of
every function's registers and spills comes back with the result).

nvcc is slow (about half a CPU second per kernel even in a bundle), so the compiles of the whole
session go through one scheduler here:

* a (source, -gencode) pair is compiled once per process: a second test asking for it waits for
  (or reuses) the first compile's result;
* sources are compiled several to a translation unit (`bundle`), grouped by size;
* the compile tests name their jobs up front (`prefetched`): conftest.py queues every selected
  test's jobs when collection finishes and runs the compile tests last, so that a background
  worker compiles them on one core while the other runs the OpenCL tests (PoCL builds a kernel on
  one core); a test whose results are not there yet compiles pending jobs itself meanwhile.
The two cores are then both busy for most of the session (cold PoCL cache: about as much PoCL
work as nvcc work). A job's failure is reported by every test that asked for one of its sources; when the failed
bundle also held other tests' sources, those sources are recompiled on their own so that the
report names only the asking test's kernels.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field

import pytest


ARCHS = ("-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a")
SM80, SM90A = ARCHS

#: Source characters per translation unit. nvcc's cost per kernel falls with the bundle size up to
#: a few hundred KB and then rises again (cicc and ptxas are superlinear in the module size):
#: measured here, 24 x 7 KB sources cost 0.33 CPU s each in one bundle and 1.1 s each alone;
#: 72 x 14 KB (1 MB) in one bundle, 0.58 s each.
BUNDLE_CHARS = 300_000


def find_nvcc() -> str | None:
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def nvcc_or_skip() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed: CUDA sources cannot be compile-checked here")
    return nvcc


_NICE = shutil.which("nice")
_procs: set = set()


def compile_cuda(source: str, nvcc: str, arch: str) -> tuple[bool, str]:
    """(ok, compiler output) for one source and one -gencode flag (ptxas -v report included)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cu")
        with open(path, "w") as f:
            f.write(source)
        # Niced: a background compile must not slow the OpenCL test running beside it.
        cmd = ([_NICE, "-n", "10"] if _NICE else []) + [
            nvcc, "-cubin", arch, "-Xptxas", "-v", "-o", os.path.join(tmp, "kernel.cubin"), path]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        _procs.add(proc)
        try:
            out, _ = proc.communicate()
        finally:
            _procs.discard(proc)
        return proc.returncode == 0, out


#: A kernel entry point: every kernel the engine renders is named gemm_engine_<something>.
_ENTRY = re.compile(r"\bvoid (gemm_engine_\w+)\(")


def bundle(sources: list[str]) -> str:
    """Several kernel sources in one translation unit: each in its own namespace (macros may be
    redefined identically; helpers and kernels must not clash), so nvcc starts once per bundle.
    ``#include`` lines are hoisted out of the namespaces (a header must be seen at file scope).
    Source i's kernels are renamed ``<name>_i`` and its other functions live in namespace
    ``gemm_bundle<i>_`` (so ptxas's report can be split by source: `Compiled.functions`)."""
    includes, bodies = [], []
    for i, src in enumerate(sources):
        lines = src.splitlines()
        includes += [ln for ln in lines if ln.startswith("#include") and ln not in includes]
        body = "\n".join(ln for ln in lines if not ln.startswith("#include"))
        for name in set(_ENTRY.findall(body)):   # extern "C" names ignore namespaces
            body = re.sub(rf"\b{name}\b", f"{name}_{i}", body)
        bodies.append(f"namespace gemm_bundle{i}_ {{\n{body}\n}}")
    return "\n".join(includes + bodies)


def archs_for(min_arch: str | None) -> tuple[str, ...]:
    """The -gencode flags of ARCHS an algorithm's kernels are valid for: all of them, or (for an
    algorithm whose class declares ``min_arch = "sm_90a"``: wgmma is arch-specific PTX that no
    compute_80 pass accepts) only those of that target."""
    if min_arch is None:
        return ARCHS
    return tuple(a for a in ARCHS if a.endswith(f"code={min_arch}"))


# -- results ----------------------------------------------------------------------------------------
_PROPS = re.compile(r"Function properties for (\S+)\s*\n\s*\d+ bytes stack frame, (\d+) bytes spill stores, "
                    r"(\d+) bytes spill loads")
_KERNEL = re.compile(r"gemm_engine_\w+?_(\d+)")
_NAMESPACE = re.compile(r"gemm_bundle(\d+)_")


def _owner(function: str) -> int | None:
    m = _KERNEL.fullmatch(function) or _NAMESPACE.search(function)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Compiled:
    """One source compiled for one arch."""
    ok: bool
    log: str        # the output of the nvcc run that compiled it (its whole bundle's)
    label: str      # the names of the bundle's sources and the arch, for messages
    #: ptxas's spill report of this source's functions: {function: (spill store bytes, load bytes)};
    #: a function of the bundle that names no source is counted against every source.
    functions: dict = field(default_factory=dict)

    def spill_problem(self) -> str | None:
        """Why this compile fails a no-spill check (None: ptxas reported functions, none spilled)."""
        if not self.ok:
            return f"{self.label} did not compile:\n{self.log[-3000:]}"
        if not self.functions:
            return f"{self.label}: no ptxas -v function report for this source:\n{self.log[-3000:]}"
        spilled = {f: s for f, s in self.functions.items() if any(s)}
        return f"{self.label} spills {spilled}:\n{self.log[-3000:]}" if spilled else None


class _Job:
    def __init__(self, arch: str, sources: list, nvcc: str):
        self.arch, self.sources, self.nvcc = arch, sources, nvcc   # sources: [(name, text)]
        self.state, self.wanted = "pending", False
        self.ok, self.log = False, ""

    @property
    def label(self) -> str:
        return f"{[n for n, _ in self.sources]} [{self.arch}]"

    def result(self, index: int) -> Compiled:
        functions = {}
        for fn, stores, loads in _PROPS.findall(self.log):
            owner = _owner(fn)
            if owner is None or owner == index:
                functions[fn] = (int(stores), int(loads))
        return Compiled(self.ok, self.log, self.label, functions)


_cv = threading.Condition()
_pending: list = []          # queued jobs, in submission order
_by_key: dict = {}           # (source, arch) -> the job that compiles it
_workers: list = []
_closed = False


def _run(job: _Job):
    try:
        ok, log = compile_cuda(bundle([s for _, s in job.sources]), job.nvcc, job.arch)
    except Exception as exc:   # noqa: BLE001 -- reported by the tests that wait for this job
        ok, log = False, f"compiling {job.label} raised {exc!r}"
    with _cv:
        job.ok, job.log, job.state = ok, log, "done"
        _cv.notify_all()


def _claim(wanted_only: bool) -> _Job | None:
    """A pending job (one a test waits for first), marked running; None if none. Under _cv."""
    job = next((j for j in _pending if j.wanted), None)
    if job is None and not wanted_only and _pending:
        job = _pending[0]
    if job is not None:
        _pending.remove(job)
        job.state = "running"
    return job


def _worker():
    while True:
        with _cv:
            while not _closed and not _pending:
                _cv.wait()
            if _closed:
                return
            job = _claim(wanted_only=False)
        _run(job)


def _start_workers():
    """Background workers: all cores but one (that one runs the tests; a test waiting for its
    compiles works on them too). Under _cv."""
    if not _workers:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
        for _ in range(max(1, min(cores, 8) - 1)):
            t = threading.Thread(target=_worker, name="nvcc-worker", daemon=True)
            t.start()
            _workers.append(t)


def _groups(items: list) -> list:
    """[(name, source)] of one arch cut, in order, into bundles of about BUNDLE_CHARS each."""
    total = sum(len(s) for _, s in items)
    n = max(1, math.ceil(total / BUNDLE_CHARS))
    groups, done = [[] for _ in range(n)], 0
    for name, src in items:   # by where the source's middle falls
        groups[min(n - 1, int((done + len(src) / 2) * n / total))].append((name, src))
        done += len(src)
    return [g for g in groups if g]


def _submit(items, nvcc: str, shared: bool = True) -> dict:
    """Queue the (name, source, arch) items not compiled or queued yet; {(name, arch): (job, index)}.
    ``shared=False``: new jobs for all of them, not registered for reuse."""
    with _cv:
        new: dict = {}   # arch -> {source: name}
        for name, src, arch in items:
            if not (shared and (src, arch) in _by_key):
                new.setdefault(arch, {}).setdefault(src, name)
        located, jobs = {}, []
        for arch, sources in new.items():
            for group in _groups([(n, s) for s, n in sources.items()]):
                job = _Job(arch, group, nvcc)
                jobs.append(job)
                for i, (_, src) in enumerate(group):
                    located[(src, arch)] = (job, i)
                    if shared:
                        _by_key[(src, arch)] = (job, i)
        # Interleave the archs: a test's two archs finish about together.
        per_arch = [[j for j in jobs if j.arch == a] for a in new]
        for k in range(max(map(len, per_arch), default=0)):
            _pending.extend(row[k] for row in per_arch if k < len(row))
        if jobs:
            _start_workers()
            _cv.notify_all()
        return {(name, arch): located.get((src, arch)) or _by_key[(src, arch)] for name, src, arch in items}


def _wait(jobs):
    with _cv:
        for j in jobs:
            j.wanted = True
    while True:
        with _cv:
            left = [j for j in jobs if j.state != "done"]
            if not left:
                return
            job = _claim(wanted_only=False)   # ours first; else help with the queue meanwhile
            if job is None:
                _cv.wait()
                continue
        _run(job)


def prefetch(items, nvcc: str | None = None):
    """Queue (name, source, arch) items for the background workers; returns at once."""
    nvcc = nvcc or find_nvcc()
    if nvcc is not None:
        _submit(list(items), nvcc)


def compile_jobs(items, nvcc: str) -> dict:
    """{(name, arch): Compiled} for (name, source, arch) items, compiled once per process."""
    items = list(items)
    located = _submit(items, nvcc)
    _wait({job for job, _ in located.values()})
    requested = {src for _, src, _ in items}
    # A failed bundle that also held other sources: recompile ours alone, so the report is ours.
    again = [(n, s, a) for n, s, a in items
             if not located[(n, a)][0].ok and any(src not in requested for _, src in located[(n, a)][0].sources)]
    if again:
        redo = _submit(again, nvcc, shared=False)
        _wait({job for job, _ in redo.values()})
        located.update(redo)
    return {key: job.result(i) for key, (job, i) in located.items()}


def jobs_of(sources: dict, archs: tuple[str, ...] = ARCHS) -> list:
    """(name, source, arch) jobs: every source of ``sources`` ({name: source}) for every arch."""
    return [(name, src, arch) for name, src in sources.items() for arch in archs]


def jobs_by_suffix(sources: dict) -> list:
    """Compile jobs of sources named for their target: a name ending in "sm80" for sm_80, any other
    for sm_90a (each source rendered for its own arch)."""
    return [(name, src, SM80 if name.endswith("sm80") else SM90A) for name, src in sources.items()]


def failures_of(results: dict) -> dict:
    """{bundle label: compiler output} of the compiles in ``results`` (`compile_jobs`) that failed."""
    return {c.label: c.log for c in results.values() if not c.ok}


def spill_problems_of(results: dict) -> dict:
    """{"name [arch]": problem} of the compiles in ``results`` (`compile_jobs`) that failed or
    spill (`Compiled.spill_problem`); {} when none does."""
    out = {}
    for (name, arch), compiled in results.items():
        trouble = compiled.spill_problem()
        if trouble is not None:
            out[f"{name} [{arch}]"] = trouble
    return out


def assert_no_spills(jobs: list, keep=lambda name, problem: True) -> None:
    """Compile ``jobs`` ((name, source, arch); a skip without nvcc) and fail naming the first few
    that did not compile or spill (``keep(name, problem)``: the ones this test answers for)."""
    problems = {k: v for k, v in spill_problems_of(compile_jobs(jobs, nvcc_or_skip())).items() if keep(k, v)}
    assert not problems, "\n\n".join(f"{k}: {v[-1500:]}" for k, v in list(problems.items())[:3])


def compile_all(sources: dict, nvcc: str, archs: tuple[str, ...] = ARCHS) -> dict:
    """{bundle label: error text} for every bundle of ``sources`` ({name: source}) that failed on an
    arch; {} when all compiled."""
    return failures_of(compile_jobs(jobs_of(sources, archs), nvcc))


def shutdown():
    """Drop queued jobs and stop running compiles (end of the session)."""
    global _closed
    with _cv:
        _closed = True
        _pending.clear()
        _cv.notify_all()
    for proc in list(_procs):
        proc.kill()
    for t in _workers:
        t.join(timeout=10)


def prefetched(provider):
    """Mark a compile test with the function that lists its (name, source, arch) jobs: ``provider``
    takes the test's parameters it names (a parametrized test's jobs depend on them). conftest.py
    queues the jobs of every selected test when collection finishes; the test itself then calls
    the provider again and compiles (mostly: collects) the same jobs."""
    def mark(test):
        test.nvcc_jobs = provider
        return test
    return mark
