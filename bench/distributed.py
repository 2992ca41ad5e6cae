"""Tensor-parallel GEMMs on N GPUs of one host (issues 32, 33), every result checked on every rank first.

    python3 bench/distributed.py --gpus 2 [--quick] [--repeat 20] [--json PATH]
    python3 bench/distributed.py --cpu --quick         (gloo + the OpenCL engine: trying the script)

One process per GPU (torch.multiprocessing spawn), NCCL, NVLink multicast off (NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1, set before torch is imported). Each
row's local GEMM is the anchor's per-rank problem (workload-anchors.md: M x N, K, bf16), the same
on every GPU count:

* all-gather + GEMM: ``concat(x_shard) @ w``, x_shard (M / P, K), w (K, N), against the sequential
  NCCL all_gather + torch.matmul, torch's fused all-gather matmul (symmetric memory) and the local
  GEMM alone (the engine's and torch's); the engine's strategies: what "auto" takes, "sequential",
  "peer" (distributed/peer.py) and the NCCL ring ("overlap", also with its GEMMs capped below the
  SM count: `Engine(max_compute_units=)`);
* GEMM + reduce-scatter, mirrored: x (M, K), w (K, N) this rank's slice of a K * P contraction,
  this rank's M / P rows of the sum, against NCCL reduce_scatter after torch.matmul, torch's fused
  matmul reduce-scatter and the GEMM alone;
* a tensor-parallel MLP block (ColumnParallelLinear -> gelu -> RowParallelLinear, sequence
  parallel) forward + backward against the same block on one GPU (the engine's Linear and torch's);
* small rows (128 and 1024 rows: SMALL), where "auto" turns from the sequential to the peer strategy;
  there the sequential pair and "auto" are also timed as CUDA-graph replays (a decode step run as a
  graph: no host time per product; auto takes the sequential strategy under capture).

Times: milliseconds per call, the slowest rank's (max over ranks of the mean of ``--repeat`` calls
between CUDA events, the window opened behind untimed calls: distributed_timing.py). Every output is compared with the float64 product of the whole on every rank
before it is timed. The table goes to bench/results/<device>/distributed_<P>gpu.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time
from queue import Empty

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v             # never NVLink multicast (it can take the host's GPUs out of service)

ROOT = __file__.rsplit("/bench/", 1)[0]
sys.path.insert(0, ROOT)
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402
from distributed_timing import MLP_ROUNDS, Env, graph_rows, measure, time_in_turns  # noqa: E402

#: (M, N, K) of each rank's local GEMM (workload-anchors.md, tensor parallelism on 2 GPUs).
SHAPES = ((8192, 4096, 8192), (16384, 7168, 4096))
#: Small rows (not the anchor's): where "auto" turns from the sequential strategy to the peer one.
SMALL = ((128, 4096, 4096), (1024, 4096, 4096))
QUICK = ((512, 256, 384), (768, 384, 256))
#: The MLP block: tokens, hidden, ffn (a size one GPU holds, forward + backward).
MLP, MLP_QUICK = (8192, 4096, 16384), (256, 128, 512)
#: SMs left to NCCL by the capped overlap.
RESERVED_SMS = 16


def _symm_mem(torch, group):
    """torch's fused ops (symmetric memory) for ``group``, or the reason they are not usable."""
    try:
        from torch.distributed._symmetric_memory import enable_symm_mem_for_group
        enable_symm_mem_for_group(group.group_name)
        return torch.ops.symm_mem
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc)[:150]}"


def _strategies(engines):
    """(label, strategy, engine) of the engine's rows: what auto takes, then each strategy."""
    rows = [("engine auto", "auto", engines["all"]), ("engine sequential", "sequential", engines["all"]),
            ("engine peer (copy engines, stream flags)", "peer", engines["all"]),
            ("engine overlap (NCCL ring)", "overlap", engines["all"])]
    if engines["capped"] is not None:
        rows.append((f"engine overlap (NCCL ring), GEMM on {engines['units']} SMs", "overlap", engines["capped"]))
    return [r for r in rows if not (engines["cpu"] and r[1] == "peer")]


def bench_gather(env, ge, dist_ops, engines, shape, repeat, symm):
    torch, dist = env.torch, env.torch.distributed
    gather = dist_ops.collective.all_gather_rows_into
    m, n, k = shape
    P, r = env.world, env.rank
    group = dist.group.WORLD
    x, w = env.randn((m, k), 1), env.randn((k, n), 2)
    shard = x[r * m // P:(r + 1) * m // P].contiguous()
    want = x.double() @ w.double()
    sizes = [m // P] * P
    rows = []

    def seq_torch():
        full = torch.empty((m, k), dtype=env.dtype, device=env.device)
        gather(full, shard)
        return full @ w
    measure(env, rows, "NCCL all_gather + torch.matmul", seq_torch, want, repeat)
    if isinstance(symm, str):
        rows.append(dict(method="torch fused_all_gather_matmul", ms=None, err=None, error=symm))
    else:
        measure(env, rows, "torch fused_all_gather_matmul",
                 lambda: symm.fused_all_gather_matmul(shard, [w], 0, group.group_name)[1][0],
                 want, repeat)
    for label, strategy, eng in _strategies(engines):
        measure(env, rows, label, lambda s=strategy, e=eng: dist_ops.all_gather_matmul(
            shard, w, shard_sizes=sizes, strategy=s, engine=e), want, repeat)
    if shape in SMALL:      # host-bound calls: also as a decode step run as a CUDA graph runs them
        graph_rows(env, rows, "NCCL all_gather + torch.matmul", seq_torch, want, repeat)
        graph_rows(env, rows, "engine auto", lambda: dist_ops.all_gather_matmul(shard, w, shard_sizes=sizes,
                                                                               engine=engines["all"]), want, repeat,
                   engines["all"])
    measure(env, rows, "local GEMM alone: engine", lambda: engines["all"].matmul(x, w), want, repeat)
    measure(env, rows, "local GEMM alone: torch.matmul", lambda: x @ w, want, repeat)
    return time_in_turns(env, rows, repeat)


def bench_scatter(env, ge, dist_ops, engines, shape, repeat, symm):
    torch, dist = env.torch, env.torch.distributed
    scatter = dist_ops.collective.reduce_scatter_rows_into
    m, n, k = shape
    P, r = env.world, env.rank
    group = dist.group.WORLD
    # This rank's slice of a K * P contraction, whose whole is built on every rank for the reference.
    xs = [env.randn((m, k), 10 + i) for i in range(P)]
    ws = [env.randn((k, n), 20 + i) for i in range(P)]
    x, w = xs[r], ws[r]
    rows_of = slice(r * m // P, (r + 1) * m // P)
    want = sum(a[rows_of].double() @ b.double() for a, b in zip(xs, ws))
    del xs, ws
    rows = []

    def seq_torch():
        out = torch.empty((m // P, n), dtype=env.dtype, device=env.device)
        scatter(out, x @ w)
        return out
    if env.cpu:     # gloo has no reduce_scatter_tensor
        rows.append(dict(method="torch.matmul + NCCL reduce_scatter", ms=None, err=None, error="gloo: none"))
    else:
        measure(env, rows, "torch.matmul + NCCL reduce_scatter", seq_torch, want, repeat)
    if isinstance(symm, str):
        rows.append(dict(method="torch fused_matmul_reduce_scatter", ms=None, err=None, error=symm))
    else:
        measure(env, rows, "torch fused_matmul_reduce_scatter",
                 lambda: symm.fused_matmul_reduce_scatter(x, w, "sum", 0, group.group_name),
                 want, repeat)
    for label, strategy, eng in _strategies(engines):
        measure(env, rows, label, lambda s=strategy, e=eng: dist_ops.matmul_reduce_scatter(
            x, w, strategy=s, engine=e), want, repeat)
    if shape in SMALL:
        graph_rows(env, rows, "torch.matmul + NCCL reduce_scatter", seq_torch, want, repeat)
        graph_rows(env, rows, "engine auto", lambda: dist_ops.matmul_reduce_scatter(x, w, engine=engines["all"]),
                   want, repeat, engines["all"])
    measure(env, rows, "local GEMM alone: engine", lambda: engines["all"].matmul(x, w), None, repeat)
    measure(env, rows, "local GEMM alone: torch.matmul", lambda: x @ w, None, repeat)
    return time_in_turns(env, rows, repeat)


def _profile(env, fn, name, steps=3):
    """Rank 0's kernels and ops over ``steps`` calls of ``fn`` (torch.profiler, by device time) into
    $BENCH_RESULTS/``name``: where a slow row's time goes is read, not guessed."""
    torch = env.torch
    folder = os.environ.get("BENCH_RESULTS")
    activities = [torch.profiler.ProfilerActivity.CPU] + ([] if env.cpu else [torch.profiler.ProfilerActivity.CUDA])
    fn()
    env.sync()
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            fn()
        env.sync()
    if env.rank == 0 and folder:
        os.makedirs(folder, exist_ok=True)
        key = "self_cpu_time_total" if env.cpu else "self_device_time_total"
        with open(os.path.join(folder, name), "w") as f:
            f.write(prof.key_averages().table(sort_by=key, row_limit=40, max_name_column_width=90))


def bench_mlp(env, ge, dist_ops, engines, size, repeat):
    """Forward + backward of the MLP block: P GPUs tensor-parallel against one GPU (rank 0 alone,
    the others waiting), the same global batch of tokens."""
    torch, dist = env.torch, env.torch.distributed
    from torch import nn
    from gemm_engine.torch import Linear
    tokens, hidden, ffn = size
    P, r = env.world, env.rank
    torch.manual_seed(0)
    up = nn.Linear(hidden, ffn, device=env.device, dtype=env.dtype)
    down = nn.Linear(ffn, hidden, device=env.device, dtype=env.dtype)
    x = env.randn((tokens, hidden), 30)
    gy = env.randn((tokens, hidden), 31)
    xs = x[r * tokens // P:(r + 1) * tokens // P].clone().requires_grad_()
    gys = gy[r * tokens // P:(r + 1) * tokens // P]
    act = nn.functional.gelu
    rows, steps = [], {}
    for strategy in ("auto", "sequential") + (() if env.cpu else ("peer",)):
        col = dist_ops.ColumnParallelLinear.from_linear(up, engine=engines["all"], strategy=strategy)
        row = dist_ops.RowParallelLinear.from_linear(down, engine=engines["all"], strategy=strategy)

        def tp(col=col, row=row):
            y = row(act(col(xs), approximate="tanh"))
            y.backward(gys)
            return y
        steps[strategy] = tp
    for tp in steps.values():      # every strategy's buffers and kernels made before any is timed
        tp()
    for strategy, tp in steps.items():
        measure(env, rows, f"{P} GPUs tensor-parallel (engine, {strategy})", tp, None, repeat)
    # Five turns of at least 6 steps: the block's rows moved by 5% between runs timed in 3 turns of 3.
    time_in_turns(env, rows, max(30, repeat), rounds=MLP_ROUNDS)
    _profile(env, steps["auto"], f"distributed_profile_mlp_{P}gpu.txt")
    single = {}
    ones = {}
    for label, a, b in (("1 GPU, engine Linear", Linear.from_linear(up), Linear.from_linear(down)),
                        ("1 GPU, torch nn.Linear", up, down)):
        xf = x.clone().requires_grad_()

        def one(a=a, b=b, xf=xf):
            y = b(act(a(xf), approximate="tanh"))
            y.backward(gy)
        ones[label] = one
    if r == 0:
        for label, one in ones.items():
            for _ in range(3):
                one()
            env.sync()
            if label.endswith("engine Linear"):     # beside the tensor-parallel step's profile
                _profile(env, one, "distributed_profile_mlp_1gpu.txt")
        turns = {label: [] for label in ones}
        for _ in range(MLP_ROUNDS):                  # in turns too, as the tensor-parallel rows
            for label, one in ones.items():
                t0 = time.perf_counter()
                for _ in range(max(6, repeat // MLP_ROUNDS)):
                    one()
                env.sync()
                turns[label].append((time.perf_counter() - t0) * 1e3 / max(6, repeat // MLP_ROUNDS))
        single = {label: statistics.median(v) for label, v in turns.items()}
    dist.barrier()
    t = torch.tensor([single.get(k, 0.0) for k in ("1 GPU, engine Linear", "1 GPU, torch nn.Linear")],
                     dtype=torch.float64, device=env.device)
    dist.broadcast(t, 0)
    rows += [dict(method=k, ms=float(v), err=None) for k, v in zip(("1 GPU, engine Linear", "1 GPU, torch nn.Linear"),
                                                                    t.tolist())]
    return rows


def worker(rank, world, args, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    import torch
    import torch.distributed as dist
    import gemm_engine as ge
    import gemm_engine.distributed as dist_ops
    if not args.cpu:
        torch.cuda.set_device(rank)
    dist.init_process_group("gloo" if args.cpu else "nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120),
                            **({} if args.cpu else dict(device_id=torch.device("cuda", rank))))
    env = Env(torch, rank, world, args.cpu)
    if args.cpu:
        engines = dict(all=ge.Engine("opencl"), capped=None, units=0, cpu=True)
    else:
        units = torch.cuda.get_device_properties(rank).multi_processor_count
        engines = dict(all=dist_ops.comm.engine_for(env.device), units=units - RESERVED_SMS,
                       capped=dist_ops.comm.engine_for(env.device, max_compute_units=units - RESERVED_SMS), cpu=False)
    symm = "gloo: none" if args.cpu else _symm_mem(torch, dist.group.WORLD)
    shapes = QUICK if args.quick else SHAPES + SMALL
    out = dict(device=ge.Engine("opencl").device.name if args.cpu else torch.cuda.get_device_name(rank),
               torch=torch.__version__, world=world, sections=[])
    with torch.no_grad():
        for shape in shapes:
            for kind, fn in (("all-gather + GEMM", bench_gather), ("GEMM + reduce-scatter", bench_scatter)):
                rows = fn(env, ge, dist_ops, engines, shape, args.repeat, symm)
                out["sections"].append(dict(kind=kind, shape=shape, rows=rows))
                if rank == 0:
                    print(kind, shape, rows, flush=True)
    rows = bench_mlp(env, ge, dist_ops, engines, MLP_QUICK if args.quick else MLP, max(3, args.repeat // 4))
    out["sections"].append(dict(kind="MLP block fwd+bwd", shape=MLP_QUICK if args.quick else MLP, rows=rows))
    if rank == 0:
        queue.put(out)
    dist.barrier()
    dist.destroy_process_group()


def table(result) -> str:
    lines = []
    for sec in result["sections"]:
        rows = sec["rows"]
        if sec["kind"].startswith("MLP"):
            t, h, f = sec["shape"]
            lines += [f"\n### MLP block fwd+bwd: {t} tokens, hidden {h}, ffn {f} (gelu), sequence parallel\n",
                      "| method | ms | fastest tensor-parallel row's speed-up over it |", "|---|---|---|"]
            timed = [r["ms"] for r in rows if "tensor-parallel" in r["method"] and r.get("ms")]
            tp = min(timed) if timed else None     # the fastest tensor-parallel strategy's
            for row in rows:
                speed = (f"{row['ms'] / tp:.2f}x" if tp and row.get("ms") and "tensor-parallel" not in row["method"]
                         else "")
                lines.append(f"| {row['method']} | {_ms(row)} | {speed} |")
            continue
        m, n, k = sec["shape"]
        base = next((r["ms"] for r in rows if r["method"].startswith(("NCCL", "torch.matmul +"))), None)
        lines += [f"\n### {sec['kind']}: local GEMM {m} x {n}, K {k} ({'rows gathered' if 'gather' in sec['kind'] else 'rows scattered'})\n",
                  "| method | ms | vs sequential NCCL + torch | max rel. error |", "|---|---|---|---|"]
        for row in rows:
            speed = f"{base / row['ms']:.2f}x" if base and row.get("ms") else ""
            err = f"{row['err']:.1e}" if row.get("err") is not None else ""
            lines.append(f"| {row['method']} | {_ms(row)} | {speed} | {err} |")
    return "\n".join(lines) + "\n"


def _ms(row) -> str:
    return f"{row['ms']:.3f}" if row.get("ms") is not None else f"failed: {row.get('error', '')}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=2, help="processes, one per GPU (CPU: gloo processes)")
    ap.add_argument("--cpu", action="store_true", help="gloo and the OpenCL engine on CPU tensors (trying the script)")
    ap.add_argument("--quick", action="store_true", help="small sizes (trying the script, not measuring)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--port", type=int, default=0, help="the rendezvous port (0: a free one)")
    ap.add_argument("--json", metavar="PATH", help="write the numbers here too")
    current_tables.add_arguments(ap, None, "distributed_<P>gpu")
    args = ap.parse_args(argv)
    args.table = args.table or f"distributed_{args.gpus}gpu"
    for m, *_ in (QUICK if args.quick else SHAPES + SMALL) + ((MLP_QUICK if args.quick else MLP),):
        if m % args.gpus:
            raise SystemExit(f"--gpus {args.gpus}: the rows ({m}) must split evenly over the GPUs")
    command = current_tables.command_line("distributed.py", sys.argv[1:] if argv is None else argv)
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    if not args.port:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            args.port = s.getsockname()[1]
    t0 = time.time()
    procs = mp.start_processes(worker, args=(args.gpus, args, queue), nprocs=args.gpus, join=False,
                               start_method="spawn")
    result = None
    while result is None:
        try:
            result = queue.get(timeout=1)
        except Empty:
            if procs.join(timeout=0):       # every process done (raises if one failed) and no result
                raise SystemExit("bench/distributed.py: the ranks ended without a result")
    while not procs.join():
        pass
    note = " (--quick: not a measurement)" if args.quick else ""
    text = (f"{args.gpus} x {result['device']}, torch {result['torch']}, {args.gpus} processes, "
            f"{'gloo' if args.cpu else 'NCCL'}, NVLink multicast off; ms per call, the slowest rank's{note}. "
            f"Run took {time.time() - t0:.0f} s.\n" + table(result))
    print(text)
    current_tables.write(args, result["device"], f"tensor-parallel GEMMs on {args.gpus} GPUs (bench/distributed.py)",
                         command, text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)


if __name__ == "__main__":
    main()
