"""Background builds: a kernel rendered and compiled on a worker thread while calls run a stand-in.

Why: the first call of a new problem class used to wait for its kernel's compile, seconds for the
Hopper kernels with a fused epilogue (NVRTC: 4-11 s, against 0.2-0.3 s for a small ``simple_mma``;
bench/results/h100/torch_op.md). The planner (call/plan.py `Planner.stand_in`) hands such a build
to these workers and runs a stand-in for that call; the next call runs the chosen kernel, waiting
for the build's remainder, and the first calls of many problems (a model's layers) build in
parallel.

A build is the compiler's work only (`Runtime.build`: NVRTC's cubin, an OpenCL program): nothing
that touches a CUDA stream, so it may run while another thread captures a graph. The module is
loaded by the thread that launches it. The workers are daemon threads: a process that exits does
not wait for a build nobody will use (binary caches are written under a temporary name and renamed,
so an interrupted build leaves no partial file under a real name).
"""
from __future__ import annotations

import os
import queue
import threading
from collections import OrderedDict
from concurrent.futures import Future

#: Builds at once: each is one compiler thread (half the CPUs, the others for the callers' work).
WORKERS = max(1, min(8, (os.cpu_count() or 2) // 2))
#: Finished builds remembered (their futures; the binaries live in the runtime's store).
KEPT = 256


class BackgroundBuilds:
    """Jobs by key, each run once on a daemon worker; `get` finds a job's `Future` by its key."""

    def __init__(self, workers: int = WORKERS):
        self.workers = workers
        self._jobs: OrderedDict = OrderedDict()      # key -> Future
        self._queue: queue.Queue = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def get(self, key) -> Future | None:
        return self._jobs.get(key)

    def submit(self, key, job) -> Future:
        """The future of ``job()`` under ``key`` (the one already submitted, if any)."""
        with self._lock:
            found = self._jobs.get(key)
            if found is not None:
                return found
            future = self._jobs[key] = Future()
            while len(self._jobs) > KEPT:
                oldest = next(iter(self._jobs))
                if not self._jobs[oldest].done():
                    break
                del self._jobs[oldest]
            self._queue.put((future, job))
            self._threads = [t for t in self._threads if t.is_alive()]
            if len(self._threads) < self.workers:
                thread = threading.Thread(target=self._work, name="gemm_engine_build", daemon=True)
                thread.start()
                self._threads.append(thread)
        return future

    def pending(self) -> int:
        """Builds submitted and not finished."""
        return sum(not f.done() for f in list(self._jobs.values()))

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for every build submitted so far; whether all finished (within ``timeout`` seconds)."""
        import concurrent.futures
        futures = [f for f in list(self._jobs.values()) if not f.done()]
        done, not_done = concurrent.futures.wait(futures, timeout=timeout)
        return not not_done

    def forget(self) -> None:
        """Drop every job from the keys (the registries changed meaning: a key may now name another
        kernel); running ones finish, their results staying where they put them."""
        with self._lock:
            self._jobs.clear()

    def _work(self) -> None:
        while True:
            try:
                future, job = self._queue.get(timeout=5.0)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():      # idle: the thread ends; submit starts another
                        self._threads = [t for t in self._threads if t is not threading.current_thread()]
                        return
                continue
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as exc:  # noqa: BLE001 -- the caller meets it when it plans synchronously
                future.set_exception(exc)
