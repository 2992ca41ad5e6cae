"""DTensor arguments of `all_gather_matmul` and `matmul_reduce_scatter`: on a 1-D device mesh, the
shards DTensor holds go through the same calls, and the results come back as DTensors.

* ``all_gather_matmul(x, w)``: x sharded along the gathered dim (``Shard(gather_dim)``); w either
  sharded by columns (``Shard(1)``, a column-parallel layer's: its bias ``Shard(0)``), giving a
  result sharded along its last dim, or replicated (a plain tensor counts as replicated), giving a
  replicated result (every rank holds the whole product).
* ``matmul_reduce_scatter(x, w)``: x sharded along its last dim (the contraction), w along its
  first (``Shard(0)``); the result sharded along ``scatter_dim``.

DTensor shards as ``torch.chunk`` does (ceil-sized pieces, empty ones last), which the calls'
``shard_sizes`` say. ``to_local`` and ``from_local`` carry the gradients.
"""
from __future__ import annotations

import torch

from .comm import GradientMap


def _api():
    from torch.distributed.tensor import DTensor, Replicate, Shard
    return DTensor, Replicate, Shard


def is_dtensor(x) -> bool:
    if type(x) is torch.Tensor or x is None:       # every call asks; plain tensors answer at once
        return False
    try:
        DTensor, _, _ = _api()
    except ImportError:     # a torch without DTensor has none to pass
        return False
    return isinstance(x, DTensor)


def chunk_sizes(total: int, world: int) -> list[int]:
    """The sizes ``torch.chunk(total, world)`` gives each rank (zeros for the ranks past its pieces)."""
    piece = -(-total // world) if total else 0
    return [max(0, min(piece, total - r * piece)) for r in range(world)]


def _mesh_of(name: str, *tensors):
    meshes = {id(t.device_mesh): t.device_mesh for t in tensors if is_dtensor(t)}
    if len(meshes) != 1:
        raise ValueError(f"{name}: DTensor arguments must share one device mesh")
    mesh = next(iter(meshes.values()))
    if mesh.ndim != 1:
        raise ValueError(f"{name}: DTensor arguments need a 1-D device mesh, got {mesh.ndim} dims")
    return mesh


def _local(t, name: str, label: str, want):
    """``t``'s local tensor where its placement is ``want`` (a plain tensor as it is)."""
    if not is_dtensor(t):
        return t
    if tuple(t.placements) != (want,):
        raise ValueError(f"{name}: {label} must be placed {want!r} on the mesh, got {tuple(t.placements)}")
    return t.to_local()


def _check_group(name: str, group, mesh):
    mine = mesh.get_group()
    if group is not None and group is not mine:
        raise ValueError(f"{name}: group differs from the DTensor arguments' mesh's group (leave it None)")
    return mine


def all_gather_matmul(call, x, w, group, gather_dim: int, bias=None, **options):
    """`api.all_gather_matmul` (``call``) on DTensor arguments (module docstring)."""
    DTensor, Replicate, Shard = _api()
    name = "all_gather_matmul"
    mesh = _mesh_of(name, x, w, bias)
    group = _check_group(name, group, mesh)
    dim = gather_dim % x.dim() if isinstance(gather_dim, int) and not isinstance(gather_dim, bool) else gather_dim
    x_local = _local(x, name, "x_shard", Shard(dim))
    columns = is_dtensor(w) and tuple(w.placements) == (Shard(1),)
    w_local = w.to_local() if columns else _local(w, name, "w", Replicate())
    b_local = _local(bias, name, "bias", Shard(0) if columns else Replicate())
    if not columns:
        # A replicated result's gradient is the same on every rank, and the all-gather's backward
        # sums the ranks' gradients (right for column-parallel products, whose ranks differ).
        world = mesh.size()
        x_local = GradientMap.apply(x_local, lambda g: g / world)
    sizes = chunk_sizes(x.shape[dim], mesh.size()) if is_dtensor(x) else options.get("shard_sizes")
    options["shard_sizes"] = sizes
    out = call(x_local, w_local, group, gather_dim, bias=b_local, **options)
    y, rest = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
    if columns:
        y = y.contiguous()
        shape = tuple(x.shape[:-1]) + (w.shape[1],)
        y = DTensor.from_local(y, mesh, [Shard(y.dim() - 1)], run_check=False, shape=shape,
                               stride=torch.empty(shape, device="meta").stride())
    else:
        y = DTensor.from_local(y, mesh, [Replicate()], run_check=False)
    rest = tuple(DTensor.from_local(t, mesh, [Replicate()], run_check=False) for t in rest)
    return (y, *rest) if isinstance(out, tuple) else y


def matmul_reduce_scatter(call, x, w, group, scatter_dim: int, **options):
    """`api.matmul_reduce_scatter` (``call``) on DTensor arguments (module docstring)."""
    DTensor, _, Shard = _api()
    name = "matmul_reduce_scatter"
    mesh = _mesh_of(name, x, w)
    group = _check_group(name, group, mesh)
    x_local = _local(x, name, "x", Shard(x.dim() - 1))
    w_local = _local(w, name, "w", Shard(0))
    dim = scatter_dim % x.dim() if isinstance(scatter_dim, int) and not isinstance(scatter_dim, bool) else scatter_dim
    if options.get("shard_sizes") is None and isinstance(dim, int) and 0 <= dim < x.dim():
        options["shard_sizes"] = chunk_sizes(x.shape[dim], mesh.size())
    y = call(x_local, w_local, group, scatter_dim, **options).contiguous()
    shape = tuple(x.shape[:-1]) + (w.shape[1],)
    stride = torch.empty(shape, device="meta").stride()
    return DTensor.from_local(y, mesh, [Shard(dim)], run_check=False, shape=shape, stride=stride)
