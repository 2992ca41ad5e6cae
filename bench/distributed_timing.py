"""The timing and checking side of bench/distributed.py: a rank's device (`Env`: events or the host
clock, every rank's worst), rows checked against float64 before they are timed (`measure`), timed in
rotating turns (`time_in_turns`), and rows replayed from CUDA graphs (`graph_rows`)."""
from __future__ import annotations

import statistics
import time

#: Untimed calls a CUDA window opens behind (`Env.ms`).
LEAD = 2
class Env:
    """The device side of a rank: CUDA (NCCL, events) or CPU (gloo, the host clock)."""

    def __init__(self, torch, rank, world, cpu):
        self.torch, self.rank, self.world, self.cpu = torch, rank, world, cpu
        self.device = torch.device("cpu") if cpu else torch.device("cuda", rank)
        self.dtype = torch.float32 if cpu else torch.bfloat16
        self.tol = 1e-4 if cpu else 2e-2

    def sync(self):
        if not self.cpu:
            self.torch.cuda.synchronize(self.device)

    def ms(self, fn, repeat, warmup=3):
        """Mean ms per call of ``fn`` on this rank, the slowest rank's (all ranks call together).
        On CUDA the window opens behind ``LEAD`` untimed calls, the project's timing rule
        (runtime/timing.py `time_batch`): a window opened on an idle device counts the host time
        and launch latency before its first kernel (the peer all-gather's first GEMM starts ~0.25 ms
        after its call, its steady state ~1.3% above the GEMM alone: bench/results/h200/
        distributed_2gpu.md), which a model's stream of calls hides."""
        torch, dist = self.torch, self.torch.distributed
        for _ in range(warmup):
            fn()
        self.sync()
        dist.barrier()
        if self.cpu:
            t0 = time.perf_counter()
            for _ in range(repeat):
                fn()
            value = (time.perf_counter() - t0) * 1e3 / repeat
        else:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(LEAD):
                fn()
            start.record()
            for _ in range(repeat):
                fn()
            end.record()
            end.synchronize()
            value = start.elapsed_time(end) / repeat
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def randn(self, shape, seed):
        g = self.torch.Generator(device=self.device).manual_seed(seed)
        return self.torch.randn(shape, generator=g, device=self.device, dtype=self.torch.float32).to(self.dtype)

    def check(self, got, want, what):
        """Relative error against the float64 reference; every rank's worst, raising above tol."""
        torch = self.torch
        err = float((got.double() - want).norm() / want.norm().clamp_min(1e-30))
        t = torch.tensor([err], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        if not t.item() <= self.tol:
            raise AssertionError(f"{what}: relative error {t.item():.2e} > {self.tol:.0e} on some rank")
        return t.item()


#: Turns of `time_in_turns`: each row's time is the median of its turns.
ROUNDS = 3
#: The MLP block's turns (its tensor-parallel and one-GPU rows alike).
MLP_ROUNDS = 5


def measure(env, rows, name, fn, want, repeat):
    """Check ``fn()`` against ``want`` (None: no check) and queue it for `time_in_turns`; a failure
    is the row's value."""
    try:
        err = env.check(fn(), want, name) if want is not None else None
        rows.append(dict(method=name, ms=None, err=err, fn=fn))
    except Exception as exc:  # noqa: BLE001 -- one method's failure is reported, the rest run
        env.torch.distributed.barrier()
        rows.append(dict(method=name, ms=None, err=None, error=f"{type(exc).__name__}: {str(exc)[:200]}"))


def time_in_turns(env, rows, repeat, rounds=ROUNDS):
    """Each queued row's ms: the median of ``rounds`` turns, a turn timing every row once (its share
    of ``repeat`` calls), so that no row's time depends on what ran just before it (timed one after
    another, the first engine row of the small sections ran 10-30% above the same path timed next);
    each turn starts one row further on, so no row is always timed first."""
    queued = [r for r in rows if "fn" in r]
    samples = {id(r): [] for r in queued}
    for turn in range(rounds):
        shift = turn * max(1, len(queued) // rounds) % max(1, len(queued))
        for r in queued[shift:] + queued[:shift]:
            if r.get("error") is None:
                try:
                    samples[id(r)].append(env.ms(r["fn"], max(3, repeat // rounds)))
                except Exception as exc:  # noqa: BLE001 -- as in measure
                    env.torch.distributed.barrier()
                    r["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    for r in queued:
        r.pop("fn")
        if r.get("error") is None:
            r["ms"] = statistics.median(samples[id(r)])
    return rows


def _warmed(env, fn):
    """``fn`` called a few times on a side stream (what NCCL and the engine need before a capture)."""
    torch = env.torch
    side = torch.cuda.Stream(env.device)
    side.wait_stream(torch.cuda.current_stream(env.device))
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream(env.device).wait_stream(side)
    env.sync()


def _captured(env, fn):
    """``fn`` captured once in a CUDA graph; its replay as the call (returning the captured result):
    what a decode step run as a graph (the small rows' case) pays, no host time per product."""
    torch = env.torch
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = fn()
    env.sync()

    def replay():
        graph.replay()
        return result
    return replay


def _on_every_rank(env, step):
    """(``step()``, None) where it ran on every rank, else (None, why): every rank calls the same
    collective after it, so a failure on one rank never leaves the other inside a collective alone."""
    torch = env.torch
    value, error = None, None
    try:
        value = step()
    except Exception as exc:  # noqa: BLE001 -- reported as the row's value
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
    failed = torch.tensor([0 if error is None else 1], device=env.device)
    torch.distributed.all_reduce(failed)
    if error is None and int(failed.item()):
        error = "the capture failed on another rank"
    return (None, error) if error else (value, None)


def graph_rows(env, rows, name, fn, want, repeat, engine=None):
    """The row ``name`` replayed from a CUDA graph (CUDA only); a warm-up or capture that fails on
    any rank is the row's value on every rank. ``engine``'s background builds end first: a capture
    cannot build a kernel."""
    if env.cpu:
        return
    if engine is not None:
        engine.wait_for_compiles()
    _, error = _on_every_rank(env, lambda: _warmed(env, fn))
    replay = None
    if error is None:
        replay, error = _on_every_rank(env, lambda: _captured(env, fn))
    if error is not None:
        rows.append(dict(method=f"{name}, CUDA graph", ms=None, err=None, error=error))
        return
    measure(env, rows, f"{name}, CUDA graph", replay, want, repeat)


