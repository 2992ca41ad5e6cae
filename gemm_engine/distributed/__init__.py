"""gemm_engine over torch.distributed (needs torch): tensor-parallel GEMMs whose every local product
is the engine's.

    >>> from gemm_engine.distributed import all_gather_matmul, matmul_reduce_scatter
    >>> y = all_gather_matmul(x_shard, w)            # concat(all ranks' x_shard) @ w, on every rank
    >>> y = matmul_reduce_scatter(x_k, w_k)          # this rank's rows of sum over ranks of x_k @ w_k
    >>> from gemm_engine.distributed import ColumnParallelLinear, RowParallelLinear

* order.py: the ring's blocks and steps (plain integers, tested without processes);
* comm.py: engines per device, bounded waits, the communication stream and events (`Side`);
* collective.py: the strategies (sequential collective + GEMM, the peer strategy, the NCCL ring) on
  row blocks, and auto's choice;
* peer.py: the peer strategy (copy engines and GEMM stores into the peers' symmetric memory, flags);
* dtensor.py: DTensor arguments and results of the two functions (1-D meshes);
* api.py: the public functions over any dims, with autograd;
* modules.py: `ColumnParallelLinear` / `RowParallelLinear` (Megatron's sequence parallelism).

NVLink multicast is never used (NCCL P2P and collectives, symmetric memory without multicast);
benchmarks set NCCL_NVLS_ENABLE=0.
"""
from __future__ import annotations

from .api import all_gather_matmul, matmul_reduce_scatter
from .modules import ColumnParallelLinear, RowParallelLinear

__all__ = ["ColumnParallelLinear", "RowParallelLinear", "all_gather_matmul", "matmul_reduce_scatter"]
