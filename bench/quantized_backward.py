"""A frozen quantized layer in training (QLoRA's base weights): `QuantizedLinear`'s forward and the
input's gradient against a frozen bf16 nn.Linear's, in one run (CUDA, torch).

    python3 bench/quantized_backward.py [--repeat 10] [--json FILE]
                                        (refreshes bench/results/<device>/quantized_backward.md)

Per row (bf16 activations, int4 weights with group 128 scales, tokens x in -> out): the time of
``y = layer(x); y.backward(gy)`` with only x requiring grad, for the quantized layer (its backward
is ``gy @ W^T`` with the transposed weight, `TransposedQuantizedWeight`: the engine's dequantizing
pass, then its dense kernel) and for nn.Linear with the same weight in bf16 (torch's cuBLAS
forward and backward). The backward's product alone two ways: through the pass (``qw.T``), and as
session 20 ran it (the weight expanded by torch's kernels from the buffers, torch/dequantize.py, then
the engine's dense product). For the record, the first backward's way: the weight dequantized on
the host and uploaded (numpy, once, timed on the host clock). The gradients are checked against
the bf16 layer's first.
Times: CUDA events, sampled in turns (gemm_engine.runtime.timing.device_times), median.
"""
from __future__ import annotations

import sys
import time

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.runtime.timing import device_times  # noqa: E402
from common import rows_table, torch_rows_main  # noqa: E402

ROWS = [(2048, 4096, 14336), (2048, 14336, 4096), (8192, 4096, 4096)]


def run_row(torch, eng, tokens, k, n, repeat):
    from gemm_engine.torch import QuantizedLinear
    torch.manual_seed(0)
    dense = torch.nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16).requires_grad_(False)
    layer = QuantizedLinear.from_linear(dense, format="int4", group_size=128).cuda()
    with torch.no_grad():
        dense.weight.copy_(layer.dequantized_weight().to(torch.bfloat16))       # the same values
    x = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16).requires_grad_()
    gy = torch.randn(tokens, n, device="cuda", dtype=torch.bfloat16)

    def step(module):
        def run():
            x.grad = None
            module(x).backward(gy)
            return x.grad
        return run

    got, want = step(layer)().float(), step(dense)().float()
    err = float((got - want).norm() / want.norm())
    from gemm_engine.torch.dequantize import dequantized_weight
    q = layer.quantized_weight()

    def through_pass():
        return eng.quantized_matmul(gy, q.T)

    def expanded():
        return eng.matmul(gy, dequantized_weight(q, gy.device, gy.dtype, eng).mT)

    times = device_times(eng.runtime, {"quantized": step(layer), "bf16": step(dense), "pass": through_pass,
                                       "expanded": expanded}, repeat=repeat)
    start = time.perf_counter()
    torch.from_numpy(layer.quantized_weight().dequantize()).to("cuda", torch.bfloat16)
    torch.cuda.synchronize()
    host = time.perf_counter() - start
    rec = {"row": f"{tokens} x {k} -> {n}", "rel_error": err, "quantized_ms": times["quantized"] * 1e3,
           "bf16_ms": times["bf16"] * 1e3, "host_dequantize_ms": host * 1e3, "pass_ms": times["pass"] * 1e3,
           "expanded_ms": times["expanded"] * 1e3,
           "vs_bf16": times["bf16"] / times["quantized"]}
    print(rec, flush=True)
    return rec


def markdown(rows) -> str:
    return rows_table("Forward + input gradient of a frozen layer (x requires grad, the weight not). vs bf16: "
                      "nn.Linear's time / QuantizedLinear's (> 1: quantized faster). gy @ W^T: the backward's "
                      "product alone, through the dequantizing pass (qw.T, what the layer runs) and with the "
                      "weight expanded by torch first (session 20's way). host dequantize: the first backward's "
                      "way, the weight dequantized by numpy and uploaded, once.",
                      ["tokens x in -> out", "QuantizedLinear int4 g128 ms", "nn.Linear bf16 ms", "vs bf16",
                       "gy @ W^T ms: pass / torch expansion", "host dequantize ms (old)",
                       "rel err of the input gradient"], rows,
                      lambda r: [f"{r['quantized_ms']:.3f}", f"{r['bf16_ms']:.3f}", f"{r['vs_bf16']:.2f}",
                                 f"{r['pass_ms']:.3f} / {r['expanded_ms']:.3f}",
                                 f"{r['host_dequantize_ms']:.0f}", f"{r['rel_error']:.1e}"])


def main(argv=None):
    return torch_rows_main(__doc__, "quantized_backward.py", "quantized_backward", "a frozen quantized layer's "
                           "forward and input gradient (bench/quantized_backward.py)", ROWS,
                           lambda torch, eng, *row: run_row(torch, eng, *row), markdown,
                           lambda r: r["rel_error"] > 2e-2, gemm_engine.default_engine, argv)


if __name__ == "__main__":
    sys.exit(main())
