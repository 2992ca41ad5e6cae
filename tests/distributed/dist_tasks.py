"""Tasks the gloo workers (dist_pool.py) run on every rank: each builds the whole problem from one
seed (the same on every rank), takes its rank's part, runs the distributed GEMM and returns its
relative error against the float64 product of the whole (or raises)."""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch import nn

from gemm_engine.distributed import ColumnParallelLinear, RowParallelLinear, all_gather_matmul, matmul_reduce_scatter


#: Where the tasks' tensors live: the CPU (gloo), or this rank's GPU (an NCCL pool sets it).
DEVICE = torch.device("cpu")


def _randn(shape, seed: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype).to(DEVICE)


def _err(got, want) -> float:
    got = got.detach().to(torch.float64)
    assert got.shape == want.shape, (tuple(got.shape), tuple(want.shape))
    assert torch.isfinite(got).all(), "non-finite values"
    return float((got - want).norm() / max(float(want.norm()), 1e-30))


def _layout(t, layout: str):
    """``t`` (2-D) in row-major ("row") or column-major ("col") storage, same values."""
    return t.contiguous() if layout == "row" else t.mT.contiguous().mT


def _bounds(sizes, rank):
    start = sum(sizes[:rank])
    return slice(start, start + sizes[rank])


def gather(rank, world, strategy, sizes, k, n, x_layout="row", w_layout="row", gather_dim=0, lead=(),
           bias=False, given_sizes=True, calls=1):
    """all_gather_matmul of blocks ``sizes`` along gather_dim (x: (*lead before, S, *lead after, K));
    ``calls`` calls in a row with fresh inputs, the worst error."""
    return max(_gather_once(rank, strategy, sizes, k, n, x_layout, w_layout, gather_dim, lead, bias, given_sizes, 10 * i)
               for i in range(calls))


def _gather_once(rank, strategy, sizes, k, n, x_layout, w_layout, gather_dim, lead, bias, given_sizes, seed):
    shape = list(lead) + [k]
    shape.insert(gather_dim, sum(sizes))
    x = _randn(tuple(shape), 1 + seed)
    w = _randn((k, n), 2 + seed)
    b = _randn((n,), 3 + seed) if bias else None
    shard = x.narrow(gather_dim, sum(sizes[:rank]), sizes[rank])
    if shard.dim() == 2:
        shard = _layout(shard, x_layout)
    y, full = all_gather_matmul(shard, _layout(w, w_layout), gather_dim=gather_dim, bias=b, strategy=strategy,
                                shard_sizes=sizes if given_sizes else None, return_gathered=True)
    want = x.double() @ w.double() + (0 if b is None else b.double())
    assert torch.equal(full, x), "the gathered x differs from the whole x"
    return _err(y, want)


def scatter(rank, world, strategy, m, k_sizes, n, x_layout="row", w_layout="row", sizes=None, scatter_dim=0,
            lead=(), calls=1, bias=False):
    """matmul_reduce_scatter: rank r holds x[..., k-block r], w[k-block r]; gets its row block (+ the
    same bias on every rank, added once); ``calls`` calls in a row with fresh inputs, the worst error."""
    return max(_scatter_once(rank, world, strategy, m, k_sizes, n, x_layout, w_layout, sizes, scatter_dim, lead,
                             10 * i, bias) for i in range(calls))


def _scatter_once(rank, world, strategy, m, k_sizes, n, x_layout, w_layout, sizes, scatter_dim, lead, seed,
                  bias=False):
    k = sum(k_sizes)
    shape = list(lead) + [k]
    shape.insert(scatter_dim, m)
    x = _randn(tuple(shape), 4 + seed)
    w = _randn((k, n), 5 + seed)
    ks = _bounds(k_sizes, rank)
    mine = x[..., ks]
    if mine.dim() == 2:
        mine = _layout(mine, x_layout)
    b = _randn((n,), 6 + seed) if bias else None
    y = matmul_reduce_scatter(mine, _layout(w[ks], w_layout), scatter_dim=scatter_dim, strategy=strategy,
                              shard_sizes=sizes, bias=b)
    rows = sizes or [m // world] * world
    want = (x.double() @ w.double() + (0 if b is None else b.double())).narrow(scatter_dim, sum(rows[:rank]),
                                                                               rows[rank])
    return _err(y, want)


def gradients(rank, world, strategy, sizes, k, n):
    """Gradients through all_gather_matmul then matmul_reduce_scatter (the two differentiate through
    each other) against torch's float64 autograd of the whole product."""
    x, w1, w2 = _randn((sum(sizes), k), 6), _randn((k, world * n), 7), _randn((world * n, k), 8)
    gy = _randn((sum(sizes), k), 9)
    # The whole: y = (x @ w1) @ w2, rank r holds w1's column block r and w2's row block r.
    ref = [t.double().requires_grad_() for t in (x, w1, w2)]
    (((ref[0] @ ref[1]) @ ref[2]) * gy.double()).sum().backward()
    cols = slice(rank * n, (rank + 1) * n)
    xs = x[_bounds(sizes, rank)].clone().requires_grad_()
    w1s = w1[:, cols].clone().requires_grad_()
    w2s = w2[cols].clone().requires_grad_()
    h = all_gather_matmul(xs, w1s, shard_sizes=sizes, strategy=strategy)
    y = matmul_reduce_scatter(h, w2s, shard_sizes=sizes, strategy=strategy)
    (y * gy[_bounds(sizes, rank)]).sum().backward()
    return {"x": _err(xs.grad, ref[0].grad[_bounds(sizes, rank)]), "w1": _err(w1s.grad, ref[1].grad[:, cols]),
            "w2": _err(w2s.grad, ref[2].grad[cols])}


def mlp(rank, world, strategy, sequence_parallel, s, b, hidden, ffn):
    """ColumnParallelLinear -> gelu -> RowParallelLinear against the two nn.Linear of one process:
    outputs, input gradients and every parameter's gradient (this rank's part)."""
    torch.manual_seed(10)
    up, down = nn.Linear(hidden, ffn, device=DEVICE), nn.Linear(ffn, hidden, device=DEVICE)
    x = _randn((s, b, hidden), 11)
    gy = _randn((s, b, hidden), 12)
    ref_x = x.clone().requires_grad_()
    ref = down(torch.nn.functional.gelu(up(ref_x), approximate="tanh"))
    (ref * gy).sum().backward()
    col = ColumnParallelLinear.from_linear(up, sequence_parallel=sequence_parallel, strategy=strategy)
    row = RowParallelLinear.from_linear(down, sequence_parallel=sequence_parallel, strategy=strategy)
    rows = slice(rank * s // world, (rank + 1) * s // world) if sequence_parallel else slice(None)
    xs = x[rows].clone().requires_grad_()
    y = row(torch.nn.functional.gelu(col(xs), approximate="tanh"))
    (y * gy[rows]).sum().backward()
    f = ffn // world
    mine = slice(rank * f, (rank + 1) * f)
    return {"y": _err(y, ref[rows].double()), "x": _err(xs.grad, ref_x.grad[rows].double()),
            "up.weight": _err(col.weight.grad, up.weight.grad[mine].double()),
            "up.bias": _err(col.bias.grad, up.bias.grad[mine].double()),
            "down.weight": _err(row.weight.grad, down.weight.grad[:, mine].double()),
            "down.bias": _err(row.bias.grad, down.bias.grad.double())}


def errors(rank, world):
    """The argument errors, raised alike on every rank before any communication."""
    x, w = torch.ones(4, 3), torch.ones(3, 2)
    found = []
    for call, match in (
            (lambda: all_gather_matmul(x, w, shard_sizes=[4]), "shard_sizes: expected one size per rank"),
            (lambda: all_gather_matmul(x, w, shard_sizes=[4, 4][:rank] + [5] + [4] * (world - rank - 1)),
             "shard_sizes\\[.*\\] = 5 but x_shard has 4"),
            (lambda: all_gather_matmul(x, w, gather_dim=1), "gather_dim=1 must name one of x's dims but the last"),
            (lambda: all_gather_matmul(x, torch.ones(2, 2)), "x's last dim \\(3\\) differs"),
            (lambda: all_gather_matmul(x, w, strategy="fast", shard_sizes=[4] * world), "strategy: expected one of"),
            (lambda: matmul_reduce_scatter(torch.ones(5, 3), w), "x's dim 0 \\(scatter_dim\\): 5 rows do not split"),
            (lambda: matmul_reduce_scatter(x, w, shard_sizes=[1] * world), "shard_sizes sum to"),
            (lambda: ColumnParallelLinear(4, 3 if world == 2 else world + 1), "out_features=.* does not split")):
        try:
            call()
        except ValueError as e:
            import re
            assert re.search(match, str(e)), (match, str(e))
            found.append(match)
        else:
            raise AssertionError(f"no ValueError for {match!r}")
    return len(found)


def late_rank(rank, world, strategy, wait_s):
    """Rank 0 calls; the others never do (on a group of their own, so the pool's stays usable):
    rank 0 must get a TimeoutError within about ``wait_s`` seconds, not hang."""
    group = dist.new_group(list(range(world)))
    if rank != 0:
        return None
    x, w = torch.ones(4, 3), torch.ones(3, 2)
    start = time.monotonic()
    try:
        if strategy == "scatter":
            matmul_reduce_scatter(torch.ones(4 * world, 3), w, group=group, strategy="overlap", timeout=wait_s)
        else:
            all_gather_matmul(x, w, group=group, shard_sizes=[4] * world, strategy="overlap", timeout=wait_s)
    except TimeoutError as e:
        assert "did not arrive within" in str(e), str(e)
        return time.monotonic() - start
    raise AssertionError("no TimeoutError while the other ranks never sent")


def late_peer(rank, world, wait_s):
    """The peer strategy with a rank that never sends: rank 0 calls, the others only make the
    buffer with it (its rendezvous is collective). Rank 0's stream must stop within about
    ``wait_s`` seconds with an error (the wait kernel's), not hang; its CUDA context is lost."""
    from gemm_engine.distributed import peer
    group = dist.new_group(list(range(world)))
    x, w = torch.ones(64, 32, device=DEVICE), torch.ones(32, 16, device=DEVICE)
    if rank != 0:
        # The collectives rank 0's call makes before its wait, in its order: the one-host question
        # (peer.available), then the buffer's rendezvous. Without the first, the two ranks' first
        # collectives differ and both hang until NCCL's own timeout (seen on a 2-H100 host).
        assert peer.available(DEVICE, group) is None
        peer.area_for("gather", group, DEVICE, 64 * 32 * 4)
        return None
    start = time.monotonic()
    try:
        all_gather_matmul(x, w, group=group, shard_sizes=[64] * world, strategy="peer", timeout=wait_s)
        torch.cuda.synchronize(DEVICE)
    except RuntimeError as e:
        return time.monotonic() - start, str(e)[:200]
    raise AssertionError("no error while the other ranks never sent")


FP8 = torch.float8_e4m3fn


def scaled_gather(rank, world, strategy, sizes, k, n):
    """all_gather_matmul of fp8 blocks with a per-row scale_a (gathered with the rows) and a
    per-column scale_b, bfloat16 out, against the float64 product of the dequantized whole."""
    x = _randn((sum(sizes), k), 21).to(FP8)
    w = _randn((k, n), 22).to(FP8)
    sa = _randn((sum(sizes), 1), 23).abs() + 0.5
    sb = _randn((1, n), 24).abs() + 0.5
    rows = _bounds(sizes, rank)
    with torch.no_grad():
        y = all_gather_matmul(x[rows], w, shard_sizes=sizes, strategy=strategy, scale_a=sa[rows], scale_b=sb,
                              out_dtype="bfloat16")
    assert y.dtype == torch.bfloat16, y.dtype
    return _err(y, (x.double() * sa.double()) @ (w.double() * sb.double()))


def scaled_scatter(rank, world, strategy, m, k_sizes, n):
    """matmul_reduce_scatter of fp8 slices of the contraction with per-row / per-column scales,
    bfloat16 partial sums, against the float64 sum."""
    k = sum(k_sizes)
    x = _randn((m, k), 25).to(FP8)
    w = _randn((k, n), 26).to(FP8)
    sa = [_randn((m, 1), 27 + r).abs() + 0.5 for r in range(world)]
    ks = _bounds(k_sizes, rank)
    with torch.no_grad():
        y = matmul_reduce_scatter(x[:, ks].contiguous(), w[ks], strategy=strategy, scale_a=sa[rank], scale_b=1.5,
                                  out_dtype=torch.bfloat16)
    want = sum((x[:, _bounds(k_sizes, r)].double() * sa[r].double()) @ (w[_bounds(k_sizes, r)].double() * 1.5)
               for r in range(world))
    rows = m // world
    return _err(y, want[rank * rows:(rank + 1) * rows])


def scaled_refused(rank, world):
    """A scaled call on inputs that require grad: refused by name before any communication."""
    x, w = torch.ones(4, 3, device=DEVICE, requires_grad=True), torch.ones(3, 2, device=DEVICE)
    try:
        all_gather_matmul(x, w, shard_sizes=[4] * world, scale_a=2.0)
    except ValueError as e:
        assert "no gradient through a scaled product" in str(e), str(e)
    else:
        raise AssertionError("no ValueError")
    try:
        all_gather_matmul(x.detach(), w, shard_sizes=[4] * world, scale_a=torch.ones(3, 1, device=DEVICE))
    except ValueError as e:
        assert "scale_a must be one number or one per row of x, shape (4, 1)" in str(e), str(e)
    else:
        raise AssertionError("no ValueError")
    return True


def auto_peer(rank, world):
    """`test_auto_takes_the_peer_strategy_across_streams_and_growing_shapes` on each rank."""
    from gemm_engine.distributed import collective
    calls = {"gather": 0, "scatter": 0}
    originals = (collective.PEER_MIN_BYTES, collective.all_gather_matmul_peer, collective.matmul_reduce_scatter_peer)

    def counted(kind, fn):
        def run(*args, **kwargs):
            calls[kind] += 1
            return fn(*args, **kwargs)
        return run
    collective.PEER_MIN_BYTES = 0
    collective.all_gather_matmul_peer = counted("gather", originals[1])
    collective.matmul_reduce_scatter_peer = counted("scatter", originals[2])
    errors = []
    try:
        side = torch.cuda.Stream(DEVICE)
        for i, rows in enumerate((8, 8, 40, 40, 200)):
            stream = side if i % 2 else torch.cuda.current_stream(DEVICE)
            side.wait_stream(torch.cuda.current_stream(DEVICE))
            with torch.cuda.stream(stream):
                errors.append(gather(rank, world, "auto", (rows, rows + 3), 96, 40))
                errors.append(scatter(rank, world, "auto", 2 * rows, (48, 64), 24))
            torch.cuda.current_stream(DEVICE).wait_stream(side)
    finally:
        collective.PEER_MIN_BYTES, collective.all_gather_matmul_peer, collective.matmul_reduce_scatter_peer = originals
    assert calls == {"gather": 5, "scatter": 5}, calls
    return errors


class _Slowed:
    """An engine whose every product first holds its stream (a sleep kernel): the rank that uses
    it falls behind the others by its sleeps."""

    def __init__(self, engine, cycles: int):
        self._engine, self._cycles = engine, cycles

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def compute(self, *args, **kwargs):
        torch.cuda._sleep(self._cycles)
        return self._engine.compute(*args, **kwargs)


def back_to_back(rank, world, strategy, sizes, k, n, calls=6):
    """``calls`` all-gather + GEMM and GEMM + reduce-scatter pairs in a row, every input made first
    and every result checked only at the end. On CUDA the GPU is held (a sleep kernel) while the
    host enqueues them all, and they alternate between the current stream and a side stream: only
    the streams' order keeps a call's writes into the peers' slots behind the earlier calls' reads
    (a write that overtook one shows as a wrong result). Rank 1's products each wait ~1 ms first,
    so the others run ahead of it as far as the flags let them. Row blocks ``sizes``; the
    reduce-scatter's contraction slices differ per rank."""
    k_sizes = tuple(k + 8 * r for r in range(world))
    kt = sum(k_sizes)
    gx = [_randn((sum(sizes), k), 100 + i) for i in range(calls)]
    gw = [_randn((k, n), 200 + i) for i in range(calls)]
    sx = [_randn((sum(sizes), kt), 300 + i) for i in range(calls)]
    sw = [_randn((kt, n), 400 + i) for i in range(calls)]
    rows, ks = _bounds(sizes, rank), _bounds(k_sizes, rank)
    mine = [(gx[i][rows].contiguous(), sx[i][:, ks].contiguous(), sw[i][ks].contiguous()) for i in range(calls)]

    from gemm_engine.distributed.comm import engine_for
    engine = _Slowed(engine_for(DEVICE), 2_000_000) if DEVICE.type == "cuda" and rank == 1 else None

    def run(i):
        return (all_gather_matmul(mine[i][0], gw[i], shard_sizes=sizes, strategy=strategy, engine=engine),
                matmul_reduce_scatter(mine[i][1], mine[i][2], shard_sizes=sizes, strategy=strategy, engine=engine))
    run(0)                  # the buffers made (a first call synchronizes) and the kernels built
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)
        current, side = torch.cuda.current_stream(DEVICE), torch.cuda.Stream(DEVICE)
        torch.cuda._sleep(200_000_000)      # ~0.1 s of GPU clock: every call is enqueued before any runs
        side.wait_stream(current)
        results = []
        for i in range(calls):
            with torch.cuda.stream(side if i % 2 else current):
                results.append(run(i))
        current.wait_stream(side)
        torch.cuda.synchronize(DEVICE)
    else:
        results = [run(i) for i in range(calls)]
    return max(max(_err(y, gx[i].double() @ gw[i].double()), _err(z, (sx[i].double() @ sw[i].double())[rows]))
               for i, (y, z) in enumerate(results))


def dtensors(rank, world, sizes_total, k, n):
    """all_gather_matmul and matmul_reduce_scatter on DTensors of a 1-D mesh (uneven chunks when
    ``sizes_total`` does not divide): results placed as documented, equal to the whole product,
    and x's gradient a DTensor sharded as x."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    mesh = init_device_mesh(DEVICE.type, (world,))
    x, w, gy = _randn((sizes_total, k), 41), _randn((k, n), 42), _randn((sizes_total, n), 43)
    xd = distribute_tensor(x, mesh, [Shard(0)]).requires_grad_()
    y = all_gather_matmul(xd, distribute_tensor(w, mesh, [Replicate()]))
    assert tuple(y.placements) == (Replicate(),) and tuple(y.shape) == (sizes_total, n), (y.placements, y.shape)
    (y.to_local() * gy).sum().backward()
    want_gx = gy.double() @ w.double().T
    assert tuple(xd.grad.placements) == (Shard(0),), xd.grad.placements
    errs = [_err(y.to_local(), x.double() @ w.double()), _err(xd.grad.full_tensor(), want_gx)]
    # the contraction sharded: x along its last dim, w along its first
    xk, wk = distribute_tensor(x, mesh, [Shard(1)]), distribute_tensor(w, mesh, [Shard(0)])
    with torch.no_grad():
        z = matmul_reduce_scatter(xk, wk)
    assert tuple(z.placements) == (Shard(0),) and tuple(z.shape) == (sizes_total, n), (z.placements, z.shape)
    errs.append(_err(z.full_tensor(), x.double() @ w.double()))
    try:
        all_gather_matmul(distribute_tensor(x, mesh, [Shard(1)]), w)
    except ValueError as e:
        assert "x_shard must be placed Shard(dim=0)" in str(e), str(e)
    else:
        raise AssertionError("no ValueError for x sharded along the contraction")
    return errs


def dtensor_columns(rank, world, rows, k, n):
    """A column-parallel product on DTensors: x Shard(0), w Shard(1), bias Shard(0): the result
    sharded along its last dim; x's gradient summed over the ranks' column blocks."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh(DEVICE.type, (world,))
    x, w, b, gy = _randn((rows, k), 51), _randn((k, n), 52), _randn((n,), 53), _randn((rows, n), 54)
    xd = distribute_tensor(x, mesh, [Shard(0)]).requires_grad_()
    y = all_gather_matmul(xd, distribute_tensor(w, mesh, [Shard(1)]), bias=distribute_tensor(b, mesh, [Shard(0)]))
    assert tuple(y.placements) == (Shard(1),) and tuple(y.shape) == (rows, n), (y.placements, y.shape)
    (y * distribute_tensor(gy, mesh, [Shard(1)])).sum().backward()
    return [_err(y.full_tensor(), x.double() @ w.double() + b.double()),
            _err(xd.grad.full_tensor(), gy.double() @ w.double().T)]
