#!/usr/bin/env bash
# ncu (clocks left alone) on one product (bf16 unless a dtype is given): the engine's default kernel and cuBLAS's (torch.matmul),
# the sections that place a GEMM kernel's time (speed of light, warp states, scheduler, memory, launch).
#   bash bench/ncu_hopper_row.sh M N K [dtype] > out.txt
set -uo pipefail
M=${1:-4096} N=${2:-4096} K=${3:-4096} DT=${4:-bfloat16}
export PYTHONPATH=$PWD:${PYTHONPATH:-}
ncu --clock-control none --kernel-name regex:"gemm|nvjet|sm90|sm80|cutlass" --launch-skip 2 --launch-count 2 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats \
  --section Occupancy --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  --metrics sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
  python3 -c "
import torch, gemm_engine
e = gemm_engine.Engine(backend='cuda')
dt = getattr(torch, '$DT')
a = torch.randn($M, $K, device='cuda').to(dt); b = torch.randn($K, $N, device='cuda').to(dt)
for _ in range(3): e.matmul(a, b)
torch.cuda.synchronize()
for _ in range(3): torch.matmul(a, b)
torch.cuda.synchronize()
print('engine', e.last_choice[0].name)
"
