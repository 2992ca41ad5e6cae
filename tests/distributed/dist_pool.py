"""A pool of processes (torch.multiprocessing, spawn) that run named tasks of dist_tasks.py on every
rank at once: gloo with the engine's OpenCL backend (PoCL) as their default engine, or NCCL with a
GPU per rank (dist_tasks.DEVICE set to it). A test sends a task and gets each rank's result, or a
failure carrying the ranks' tracebacks."""
from __future__ import annotations

import datetime
import os
import queue
import socket
import time
import traceback

#: Seconds a task may take before the pool is declared stuck (a deadlock is a failure, not a hang).
TASK_TIMEOUT = 120


class PoolStopped(AssertionError):
    """A task got no answer from some ranks: ``ended`` lists the ranks whose process ended."""

    def __init__(self, message: str, ended):
        super().__init__(message)
        self.ended = ended


def require_gloo_engine() -> None:
    """Skips the calling test unless the gloo workers' default engine (OpenCL, through PoCL on CPU
    tensors) can run here and GEMM_ENGINE_TEST_BACKENDS lets OpenCL tests run."""
    import pytest
    import gemm_engine
    if "opencl" not in os.environ.get("GEMM_ENGINE_TEST_BACKENDS", "opencl"):
        pytest.skip("backend opencl excluded by GEMM_ENGINE_TEST_BACKENDS")
    try:
        gemm_engine.Engine("opencl")
    except (gemm_engine.BackendUnavailableError, ImportError) as exc:
        pytest.skip(f"the gloo workers run the engine's OpenCL backend on CPU tensors: unavailable here ({exc})")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(rank: int, world: int, port: int, inbox, outbox, backend: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0",
                      TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    try:
        import torch
        import torch.distributed as dist
        import gemm_engine
        from gemm_engine import api
        import dist_tasks
        timeout = datetime.timedelta(seconds=60)
        if backend == "nccl":
            dist_tasks.DEVICE = torch.device("cuda", rank)
            torch.cuda.set_device(rank)
            dist.init_process_group("nccl", rank=rank, world_size=world, timeout=timeout, device_id=dist_tasks.DEVICE)
        else:
            dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
            api._default_engine = gemm_engine.Engine("opencl")
        outbox.put((rank, "ready", None))
    except BaseException:
        outbox.put((rank, "error", traceback.format_exc()))
        return
    while True:
        task = inbox.get()
        if task is None:
            break
        name, args = task
        try:
            outbox.put((rank, "ok", getattr(dist_tasks, name)(rank, world, *args)))
        except BaseException:
            outbox.put((rank, "error", traceback.format_exc()))
    dist.destroy_process_group()


class Pool:
    def __init__(self, world: int, backend: str = "gloo"):
        import torch.multiprocessing as mp
        ctx = mp.get_context("spawn")
        self.world = world
        self.outbox = ctx.Queue()
        self.inboxes = [ctx.Queue() for _ in range(world)]
        port = _free_port()
        self.procs = [ctx.Process(target=_serve, args=(r, world, port, self.inboxes[r], self.outbox, backend), daemon=True)
                      for r in range(world)]
        for p in self.procs:
            p.start()
        self._collect("start-up", timeout=180)

    def _collect(self, what: str, timeout: float = TASK_TIMEOUT) -> list:
        results, errors = {}, {}
        deadline = time.monotonic() + timeout
        while len(results) + len(errors) < self.world:
            try:
                rank, status, value = self.outbox.get(timeout=1.0)
            except queue.Empty:
                missing = sorted(set(range(self.world)) - set(results) - set(errors))
                ended = [r for r in missing if not self.procs[r].is_alive()]
                if ended or time.monotonic() > deadline:
                    self.close()
                    why = (f"the processes of ranks {ended} ended (exit codes "
                           f"{[self.procs[r].exitcode for r in ended]})" if ended else
                           f"ranks {missing} gave no answer within {timeout} s (deadlock?)")
                    raise PoolStopped(f"{what}: {why}; the pool was stopped", ended)
                continue
            (errors if status == "error" else results)[rank] = value
        if errors:
            raise AssertionError(f"{what} failed on ranks {sorted(errors)}:\n" +
                                 "\n".join(f"--- rank {r}:\n{tb}" for r, tb in sorted(errors.items())))
        return [results[r] for r in range(self.world)]

    def run(self, name: str, *args) -> list:
        """Each rank's result of ``dist_tasks.<name>(rank, world, *args)``."""
        if not all(p.is_alive() for p in self.procs):
            raise AssertionError("the pool is stopped (an earlier task hung or a worker died)")
        for box in self.inboxes:
            box.put((name, args))
        return self._collect(f"task {name}{args}")

    def close(self) -> None:
        for p, box in zip(self.procs, self.inboxes):
            if p.is_alive():
                box.put(None)
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
