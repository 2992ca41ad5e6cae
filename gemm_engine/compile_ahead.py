"""Compile ahead: `warmup` chooses, renders and compiles the kernels of many problems at once.

A process that meets a new problem class compiles its kernel on the first call (a second or more
with nvcc-class compilers), and cannot compile while a CUDA graph is being captured
(runtime/base.py `check_compile`). `warmup` does that work up front for what a program will run:

* problems given as `MatmulProblem`s, or as shapes ``(m, n, k)`` / ``(batch, m, n, k)`` of one
  dtype and layout pair;
* linear layers (`LinearShape`: in and out features, bias, activation) at a few token counts M,
  their forward products (``x @ W.T``, the weight read column-major, the epilogue fused) and with
  ``training`` their backward ones (``gy @ W``; ``gy.T @ x`` for the weight's gradient; the
  activation's derivative); `LLAMA3_8B` lists one decoder layer's;
* a torch model (gemm_engine/torch/warmup.py finds its linear layers).

``gemm_engine.warmup`` is `warmup`; ``gemm-engine warmup`` runs it from the command line.

Each problem is set up and rendered here (sources from the on-disk source cache where a process
rendered them before), the distinct kernels are compiled in parallel threads
(`Runtime.compile_many`; the compilers keep the binaries on disk for later processes), and each
problem's plan is made, so that the first call of each runs no compiler.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from .call.prepare import dense_problem
from .dtypes import WIDENED, bfloat16_dtype, element_type
from .epilogue.activations import Derivative, resolve_activation
from .epilogue.spec import IDENTITY, Epilogue
from .errors import SetupError
from .problem import Layout, MatmulProblem


@dataclass(frozen=True)
class LinearShape:
    """One linear layer: ``activation(x @ W.T + bias)`` with W of out_features x in_features."""

    in_features: int
    out_features: int
    bias: bool = False
    activation: object = None
    #: Training a gated layer (`SwiGLU` with a built-in gate): its two products written as the
    #: contiguous halves of a batch of 2, gated outside the GEMM (gemm_engine/torch/gated.py).
    gated_products: bool = False


#: One Llama-3-8B decoder layer (hidden 4096, 32 query and 8 key/value heads of 128, MLP 14336):
#: the fused qkv projection, the output projection, SwiGLU's fused gate/up and the down projection.
LLAMA3_8B = (LinearShape(4096, 6144), LinearShape(4096, 4096), LinearShape(4096, 2 * 14336, activation="swiglu"),
             LinearShape(14336, 4096))
#: Token counts (M) a server's decode and prefill steps see.
TOKENS = (1, 16, 128, 2048)


@dataclass
class WarmupReport:
    problems: int = 0
    kernels: int = 0          # distinct kernels the problems run
    compiled: int = 0         # of which this process had not compiled yet
    seconds: float = 0.0
    refused: list = field(default_factory=list)   # (problem, reason): no algorithm sets it up

    def __str__(self) -> str:
        text = (f"warmed up {self.problems} problems: {self.kernels} kernels, {self.compiled} compiled now, "
                f"{self.seconds:.2f} s")
        for problem, reason in self.refused:
            text += f"\n  refused {problem.batch}x{problem.m}x{problem.n}x{problem.k} {problem.lhs.name}: {reason}"
        return text


def _dtype(dtype) -> np.dtype:
    return bfloat16_dtype() if str(dtype) in ("bfloat16", "torch.bfloat16") else np.dtype(str(dtype).removeprefix("torch."))


def shape_problems(shapes, dtype="float32", layouts=("row", "row"), precision="default") -> list[MatmulProblem]:
    """Dense problems of contiguous operands: ``shapes`` of (m, n, k) or (batch, m, n, k)."""
    out = []
    for shape in shapes:
        batch, m, n, k = (1, *shape) if len(shape) == 3 else shape
        out.append(dense_problem(batch, m, n, k, _dtype(dtype), precision=precision, lhs_layout=Layout(layouts[0]),
                                 rhs_layout=Layout(layouts[1])))
    return out


def linear_problems(layers, tokens=TOKENS, dtype="bfloat16", training: bool = False,
                    host: bool = False) -> list[MatmulProblem]:
    """The problems of ``layers`` (`LinearShape`s) at each token count (see the module docstring).
    ``host``: the tensors live on the host (CPU tensors, numpy), so each operand reaches the device
    as a contiguous copy (row-major) instead of the transposed views the device reads in place."""
    dt = _dtype(dtype)
    col = Layout.ROW if host else Layout.COL
    et = element_type(dt)
    out_et = element_type(WIDENED.get(dt, dt))
    compute = "f64" if out_et.compute == "f64" else "f32"
    out = []
    for layer in layers:
        act = resolve_activation(layer.activation)
        bias = et if layer.bias else None
        k, n = layer.in_features, layer.out_features
        for m in tokens:
            if layer.gated_products:
                h = n // 2
                out.append(dense_problem(2, m, h, k, dt, rhs_layout=col))         # z = x @ [Wg, Wu]
                gx = dense_problem(1, m, k, h, dt)                                 # gx = gzg @ Wg
                out += [gx, replace(gx, epilogue=Epilogue(c=out_et, compute=compute))]   # + gzu @ Wu
                out.append(dense_problem(1, h, k, m, dt, lhs_layout=col))         # gWg, gWu = gz.T @ x
                continue
            forward = dense_problem(1, m, n, k, dt, rhs_layout=col)
            ep = Epilogue(bias=bias, activation=act, compute=compute) if (bias or act) else IDENTITY
            out.append(replace(forward, epilogue=ep))
            if not training:
                continue
            if act is not None:        # gz = f'(z) * gy, z recomputed
                out.append(replace(forward, epilogue=Epilogue(bias=bias, activation=Derivative(act), compute=compute,
                                                              mul=out_et)))
            out.append(dense_problem(1, m, k, n, dt))                          # gx = gz @ W
            out.append(dense_problem(1, n, k, m, dt, lhs_layout=col))         # gW = gz.T @ x
    return out


def problems_of(what, *, dtype="float32", tokens=TOKENS, training: bool = False, host: bool = False
                ) -> list[MatmulProblem]:
    """The problems ``warmup`` compiles for ``what`` (see `warmup`)."""
    if isinstance(what, MatmulProblem):
        return [what]
    if hasattr(what, "named_modules"):             # a torch model
        from .torch.warmup import model_layers   # the optional torch layer (it needs torch)
        layers, found, on_host = model_layers(what, training)
        layers = [LinearShape(*layer) for layer in layers]
        return linear_problems(layers, tokens, dtype if found is None else found, training, on_host)
    items = list(what)
    if all(isinstance(x, LinearShape) for x in items):
        return linear_problems(items, tokens, dtype, training, host)
    problems = [x for x in items if isinstance(x, MatmulProblem)]
    shapes = [tuple(x) for x in items if not isinstance(x, MatmulProblem)]
    return problems + shape_problems(shapes, dtype)


def kernel_jobs(engine, problem: MatmulProblem, algorithm=None) -> list[tuple[str, str]]:
    """(source, kernel name) of each kernel a call of ``problem`` on ``engine`` runs (``algorithm``
    as a call's; the engine's choice by default): what `Runtime.compile_many` builds. SetupError
    where the algorithm refuses the problem."""
    choice = engine.choose(problem, algorithm)
    source = engine.planner.source(choice.algorithm, choice.config)
    return [(source, launch.name) for launch in choice.algorithm.launches(choice.config, problem)]


def warmup(what, *, dtype="float32", tokens=TOKENS, training: bool = False, engine=None, workers=None,
           host: bool | None = None):
    """Compile ahead the kernels of ``what``: a `MatmulProblem`, a list of problems or shapes
    ((m, n, k) or (batch, m, n, k), of ``dtype``), `LinearShape`s or a torch model (its linear
    layers, in their weights' dtype, at each of ``tokens``; ``training`` adds the backward
    products). ``engine``: the engine whose calls will run them (default: the default engine's);
    ``workers``: compiler threads (default: one per CPU). ``host``: the layers' tensors live on the
    host (see `linear_problems`; default: on an OpenCL engine, and for a model whose weights are on
    the CPU). Returns a `WarmupReport`."""
    from .api import default_engine
    engine = engine or default_engine()
    start = time.perf_counter()
    host = engine.backend != "cuda" if host is None else host
    problems = list(dict.fromkeys(problems_of(what, dtype=dtype, tokens=tokens, training=training, host=host)))
    report = WarmupReport(problems=len(problems))
    jobs, ready = [], []
    for problem in problems:
        try:
            jobs += kernel_jobs(engine, problem)
        except SetupError as exc:
            report.refused.append((problem, str(exc)))
            continue
        ready.append(problem)
    report.kernels = len(set(jobs))
    report.compiled = engine.runtime.compile_many(jobs, workers)
    for problem in ready:
        engine.plan_for(problem)
    report.seconds = time.perf_counter() - start
    return report
