"""Where a training step of the transformer block spends its time (bench/torch_op.py's block row).

    python3 bench/torch_block_profile.py [--out PATH]     # CPU: the products and their H100 plans only

Two reports, both markdown:

* `kernel_tables`: torch.profiler over a few training steps of each block (the engine's, torch's):
  the CUDA kernels (name, count, total us) and the matmul ops with their input shapes (the
  engine's ``gemm_engine::*`` and torch's ``aten::mm``...), so the backward products show one by
  one (every engine kernel is named ``gemm_engine_kernel``: the op's shapes tell them apart). On a
  machine without CUDA the same tables list CPU time (a check that the code runs, no measurement).
* `product_plans`: every engine product one training step calls (forward, and the backward's dX =
  dY W, dW = dY^T X with its transposed lhs, the SwiGLU derivative's recomputed GEMM), recorded
  from the calls themselves, with the algorithm the engine chooses and the kernels it launches: a
  ``gemm_engine_k_major_*`` / ``gemm_engine_copy_*`` launch is a copy pass cuBLAS does not make.
  Without CUDA the choice is the heuristic's for a nominal H100 (codegen/device.py), the operands
  taken as bfloat16 and 16-byte aligned, as the block's are on the GPU.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections import Counter

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear")


def _device_us(avg, cuda: bool) -> float:
    """An averaged event's total time: on the device (its kernels) with CUDA, else on the CPU."""
    if not cuda:
        return avg.cpu_time_total
    for name in ("device_time_total", "cuda_time_total"):      # the name before torch 2.4
        if hasattr(avg, name):
            return getattr(avg, name)
    return 0.0


def kernel_tables(torch, blocks: dict, step, steps: int = 3, cuda: bool = True) -> str:
    """torch.profiler over ``steps`` calls of ``step(block)`` for each of ``blocks`` (label ->
    module), after one unprofiled step: the kernels and the matmul ops of each, as markdown."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    out = [f"{steps} training steps each (forward + backward), torch.profiler; "
           f"{'CUDA kernel time' if cuda else 'CPU time (no CUDA here: a check that the code runs)'}.", ""]
    for label, block in blocks.items():
        step(block)()
        sync()
        with profile(activities=activities, record_shapes=True) as prof:
            for _ in range(steps):
                step(block)()
            sync()
        kind = DeviceType.CUDA if cuda else DeviceType.CPU
        events = [e for e in prof.key_averages() if e.device_type == kind]
        if not cuda:        # CPU ops nest: their own time, not their children's
            events = [e for e in events if e.self_cpu_time_total > 0]
        events.sort(key=lambda e: -(_device_us(e, cuda) if cuda else e.self_cpu_time_total))
        total = sum(_device_us(e, cuda) if cuda else e.self_cpu_time_total for e in events)
        out += [f"### {label}: {'kernels' if cuda else 'CPU ops'} ({total:.0f} us in all)", "",
                "| kernel | count | total us | share |", "|---|---|---|---|"]
        for e in events[:30]:
            us = _device_us(e, cuda) if cuda else e.self_cpu_time_total
            out.append(f"| `{e.key[:110]}` | {e.count} | {us:.0f} | {us / max(total, 1e-9):.1%} |")
        products = [e for e in prof.key_averages(group_by_input_shape=True)
                    if e.key.startswith("gemm_engine::") or e.key in MATMUL_OPS]
        products.sort(key=lambda e: -_device_us(e, cuda))
        out += ["", f"### {label}: matmul ops by input shapes", "",
                "| op | input shapes | count | total us |", "|---|---|---|---|"]
        out += [f"| `{e.key}` | {str(e.input_shapes)[:160]} | {e.count} | {_device_us(e, cuda):.0f} |" for e in products]
        out.append("")
    return "\n".join(out)


def record_products(engine, run) -> list:
    """The engine products ``run()`` calls (through `Engine.compute`, what the ops run): one
    (a, b, options) each, in call order."""
    calls = []
    real = engine.compute

    def recording(a, b, **options):
        calls.append((a, b, options))
        return real(a, b, **options)

    engine.compute = recording
    try:
        run()
    finally:
        del engine.compute
    return calls


def record_sizes(torch, run) -> list:
    """(a's shape, b's shape, activation key) of every ``gemm_engine::*`` op ``run()`` calls, in
    call order, seen at the dispatcher: on meta tensors the ops run their fake implementations, so
    a full-sized block costs no memory and no time."""
    from torch.utils._python_dispatch import TorchDispatchMode
    sizes = []

    class Sizes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace == "gemm_engine":
                key = args[8] if func.__name__.startswith("matmul_fused") else ""
                sizes.append((tuple(args[0].shape), tuple(args[1].shape), key))
            return func(*args, **(kwargs or {}))

    with Sizes():
        run()
    return sizes


def _layout(x):
    """A torch tensor's layout as the engine reads it on the GPU (a host copy made for PoCL is
    contiguous: the problem of the call here has lost it)."""
    from gemm_engine.problem import Layout
    return Layout.COL if x.dim() >= 2 and x.stride(-2) == 1 and x.stride(-1) != 1 else Layout.ROW


def _nominal(problem, dtype, a, b):
    """``problem`` as the GPU would see it: operands and result in ``dtype``, 16-byte aligned, the
    operands' layouts those of the tensors ``a`` and ``b``."""
    from gemm_engine.dtypes import element_type
    t = element_type(dtype)
    align = 16 // t.itemsize
    return dataclasses.replace(problem, lhs=t, rhs=t, out=t, lhs_align=align, rhs_align=align,
                               lhs_layout=_layout(a), rhs_layout=_layout(b))


def product_plans(engine, calls, nominal_dtype=None, sizes=None) -> str:
    """For every distinct product among ``calls`` (`record_products`): its problem, the chosen
    algorithm and its launches. ``nominal_dtype``: choose for a nominal H100 in that dtype instead
    of ``engine``'s device (a machine without the GPU); ``sizes``: the same calls recorded on a
    full-sized block (`record_sizes`), whose sizes replace those of ``calls``."""
    from gemm_engine.call import numpy_rules
    from gemm_engine.call.choose import ChoicePolicy
    from gemm_engine.codegen.device import nominal_cuda_device
    from gemm_engine.codegen.dialect import dialect_for
    from gemm_engine.torch.ops import activation_of
    policy = ChoicePolicy(dialect_for(nominal_cuda_device(9, 0)), lambda p: None) if nominal_dtype else engine.policy
    rows = Counter()
    if sizes is not None and len(sizes) != len(calls):
        raise ValueError(f"product_plans: {len(sizes)} full-sized calls against {len(calls)}")
    for i, (a, b, options) in enumerate(calls):
        keep = {k: v for k, v in options.items() if k in ("alpha", "beta", "c", "bias", "bias_axis", "activation",
                                                         "out_dtype") and v is not None}
        problem = engine.problem_for(a, b, **keep)
        if nominal_dtype:
            problem = _nominal(problem, nominal_dtype, a, b)
        if sizes is not None:
            a_shape, b_shape, key = sizes[i]
            shape = numpy_rules.call_shape(a_shape, b_shape, numpy_rules.pairs_of(activation_of(key)))
            problem = dataclasses.replace(problem, m=shape.m, n=shape.n, k=shape.k,
                                          batch=math.prod(shape.batch_shape))
        choice = policy.choose(problem)
        launches = [launch.name for launch in choice.algorithm.launches(choice.config, problem)]
        copies = [name for name in launches if name != "gemm_engine_kernel"]
        act = options.get("activation")
        rows[(problem.m, problem.n, problem.k, problem.batch, problem.lhs_layout.value, problem.rhs_layout.value,
              "" if act is None else str(act), "mul" if options.get("mul") is not None else "",
              choice.algorithm.name, ", ".join(copies) or "none")] += 1
    where = f"a nominal H100, {nominal_dtype} (the heuristic)" if nominal_dtype else engine.device.name
    out = [f"Engine products of one training step, as chosen for {where}.", "",
           "| m x n x k | batch | lhs, rhs layout | activation | mul | algorithm | copy passes | calls |",
           "|---|---|---|---|---|---|---|---|"]
    for (m, n, k, batch, la, lb, act, mul, alg, copies), count in rows.items():
        out.append(f"| {m} x {n} x {k} | {batch} | {la}, {lb} | {act} | {mul} | {alg} | {copies} | {count} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the report here too")
    ap.add_argument("--dim", type=int, default=256, help="the profiled block's (CPU: small)")
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F
    import gemm_engine as ge
    from gemm_engine import api
    from gemm_engine.torch.block import Block, engine_block
    engine = ge.Engine("opencl")
    api._default_engine = engine
    torch.manual_seed(0)
    dim, heads, hidden = args.dim, 4, 3 * args.dim
    reference = Block(dim, heads, hidden)
    ours = engine_block(reference)
    x, y = torch.randn(2, args.tokens, dim), torch.randn(2, args.tokens, dim)

    def step(block):
        def run():
            block.zero_grad(set_to_none=True)
            loss = F.mse_loss(block(x), y)
            loss.backward()
        return run

    report = kernel_tables(torch, {"engine": ours, "torch": reference}, step, steps=2, cuda=False)
    calls = record_products(engine, step(ours))
    # The same calls on bench/torch_op.py's block (dim 4096, 32 heads, SwiGLU 14336, 2 x 2048 tokens)
    # on meta tensors: the sizes the H100 sees (attention's tokens split into 64-token sequences: its
    # cost on meta is nothing, but the block's shapes check heads against dim).
    full = Block(4096, 32, 14336, device="meta")
    xm, ym = torch.empty(64, 64, 4096, device="meta"), torch.empty(64, 64, 4096, device="meta")

    def meta_step():
        F.mse_loss(engine_block(full)(xm), ym).backward()

    sizes = record_sizes(torch, meta_step)
    report += "\n" + product_plans(engine, calls, nominal_dtype="bfloat16", sizes=sizes)
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)


if __name__ == "__main__":
    main()
