"""A mixture-of-experts layer (`gemm_engine.torch.MoE`: top-2 router, SwiGLU experts on grouped
products) against the same layer in torch (torch._grouped_mm and torch's gate), in one run (CUDA).

    python3 bench/moe_layer.py [--repeat 10] [--json FILE]
                               (refreshes bench/results/<device>/moe_layer.md)

Both layers share the router, the routing code (gemm_engine.torch.moe.route: a stable sort by
expert, offsets on the device) and the parameters' values; torch's keeps each expert's gate and up
rows as two contiguous halves (its gate reads z[:, :ffn] and z[:, ffn:]: vectorized), the engine's
interleaved (the gate fused into the up projection's epilogue, the routing weight into the down
projection's). Rows: Mixtral 8x7B's layer (hidden 4096, ffn 14336, 8 experts, top 2) at prefill
(4096 tokens: forward, and forward + backward with the tokens and every parameter requiring grad)
and decode (64 tokens, forward); bf16. The int4 rows: the engine's layer with its experts quantized
(`Experts.quantized("int4", 128)`, group 128 scales, prepacked), the torch layer over the bf16
values those codes stand for. Outputs and gradients are checked against each other first.
Times: CUDA events, the two layers sampled in turns (gemm_engine.runtime.timing.device_times), median.
"""
from __future__ import annotations

import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.runtime.timing import device_times  # noqa: E402
from common import rows_table, torch_rows_main  # noqa: E402

ROWS = [("mixtral_prefill", 4096, True), ("mixtral_prefill", 4096, False), ("mixtral_decode", 64, False),
        ("mixtral_decode int4", 64, False, "int4"), ("mixtral_prefill int4", 4096, False, "int4")]
_LAYERS: dict = {}       # format -> (the engine's layer, the torch layer's forward and parameters)
HIDDEN, FFN, EXPERTS, TOP_K = 4096, 14336, 8, 2


def torch_layer(torch, moe):
    """The torch layer's forward over ``moe``'s parameters (gate and up as halves)."""
    from gemm_engine.torch.moe import combine, route
    e = EXPERTS
    halves = moe.experts.up.detach().view(e, FFN, 2, HIDDEN).transpose(1, 2).reshape(e, 2 * FFN, HIDDEN)
    halves = halves.clone().requires_grad_()
    down = moe.experts.down.detach().clone().requires_grad_()
    router = moe.router.weight.detach().clone().requires_grad_()

    def forward(x):
        pairs, offsets, weights = route(x @ router.T, TOP_K)
        z = torch._grouped_mm(x[pairs // TOP_K], halves.mT, offs=offsets)
        h = torch.nn.functional.silu(z[:, :FFN]) * z[:, FFN:]
        return combine(torch._grouped_mm(h, down.mT, offs=offsets) * weights[:, None].to(z.dtype), pairs, TOP_K)
    return forward, (router, halves, down)


def layers(torch, fmt):
    """(the engine's MoE, the torch layer's forward, its parameters) for experts in ``fmt`` (None:
    bf16), made once: the torch layer's weights the values the quantized codes stand for."""
    if fmt not in _LAYERS:
        from gemm_engine.torch import MoE
        _LAYERS.clear()          # one format's layers at a time: each holds the experts' weights
        torch.manual_seed(0)
        moe = MoE(HIDDEN, FFN, EXPERTS, TOP_K, device="cuda", dtype=torch.bfloat16)
        if fmt:
            quantized = moe.experts.quantized(fmt, group_size=128)
            with torch.no_grad():
                moe.experts.up.copy_(torch.from_numpy(quantized.up.dequantize()).mT)
                moe.experts.down.copy_(torch.from_numpy(quantized.down.dequantize()).mT)
        theirs, params = torch_layer(torch, moe)
        if fmt:
            moe.experts = quantized
        _LAYERS[fmt] = (moe, theirs, params)
    return _LAYERS[fmt]


def run_row(torch, eng, name, tokens, train, *more):
    *fmt, repeat = more
    moe, theirs, params = layers(torch, fmt[0] if fmt else None)
    x = torch.randn(tokens, HIDDEN, device="cuda", dtype=torch.bfloat16)
    gy = torch.randn(tokens, HIDDEN, device="cuda", dtype=torch.bfloat16)
    xr = x.clone().requires_grad_(train)

    def step(fn, leaves):
        def run():
            if not train:
                with torch.no_grad():
                    return fn(x)
            for t in leaves:
                t.grad = None
            y = fn(xr)
            y.backward(gy)
            return y
        return run

    ours, base = step(moe, [xr, *moe.parameters()]), step(theirs, [xr, *params])
    y1 = ours()
    g1 = [t.grad.float() for t in (xr, moe.router.weight)] if train else []
    y2 = base()
    g2 = [t.grad.float() for t in (xr, params[0])] if train else []
    errs = [float((a.float() - b.float()).norm() / b.float().norm()) for a, b in zip([y1] + g1, [y2] + g2)]
    times = device_times(eng.runtime, {"engine": ours, "torch": base}, repeat=repeat)
    rec = {"row": name, "tokens": tokens, "pass": "forward + backward" if train else "forward",
           "engine_ms": times["engine"] * 1e3, "torch_ms": times["torch"] * 1e3,
           "vs_torch": times["torch"] / times["engine"], "rel_diff": max(errs)}
    print(rec, flush=True)
    return rec


def markdown(rows) -> str:
    return rows_table(f"hidden {HIDDEN}, ffn {FFN}, {EXPERTS} experts, top {TOP_K}, bf16. vs torch: the torch "
                      "layer's time / the engine's (> 1: engine faster). rel diff: the largest relative difference "
                      "(Frobenius) of the output and the gradients of x and the router between the two layers.",
                      ["row", "tokens", "pass", "gemm_engine MoE ms", "torch._grouped_mm layer ms", "vs torch",
                       "rel diff"], rows,
                      lambda r: [r["tokens"], r["pass"], f"{r['engine_ms']:.3f}", f"{r['torch_ms']:.3f}",
                                 f"{r['vs_torch']:.2f}", f"{r['rel_diff']:.1e}"])


def main(argv=None):
    return torch_rows_main(__doc__, "moe_layer.py", "moe_layer", "a mixture-of-experts layer against the same layer "
                           "in torch (bench/moe_layer.py)", ROWS, run_row, markdown,
                           lambda r: r["rel_diff"] > 3e-2, gemm_engine.default_engine, argv)


if __name__ == "__main__":
    sys.exit(main())
