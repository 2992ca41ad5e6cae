"""torch.ops.gemm_engine.*: registration, fake implementations that agree with the engine on shape,
dtype, strides and device for every case numpy's rules allow, torch.compile(fullgraph=True) with
aot_eager and inductor, dynamic shapes without recompiling, autocast, and `import gemm_engine`
without torch. CPU tensors here (the engine runs them on PoCL); CUDA checks: test_cuda_graphs.py."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")

import gemm_engine  # noqa: E402
import gemm_engine.torch as gt  # noqa: E402
from gemm_engine.torch.ops import activation_key, activation_of, fake_result  # noqa: E402
from gemm_engine.epilogue.activations import Derivative  # noqa: E402


@pytest.fixture(autouse=True)
def _opencl_default(opencl_engine, monkeypatch):
    """The default engine: the OpenCL one (tensors on the CPU run on PoCL)."""
    from gemm_engine import api
    monkeypatch.setattr(api, "_default_engine", opencl_engine)
    torch._dynamo.reset()


def test_import_gemm_engine_does_not_import_torch():
    code = "import sys, gemm_engine; gemm_engine.matmul([[1.0]], [[2.0]]) if False else None; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_ops_are_registered_for_every_device_with_autocast_and_the_library_calls_no_autograd_kernel():
    """No Python autograd kernel between a compiled graph and the engine: the library calls the
    twins without one (``_matmul``...), gradients are the autograd.Functions' (autograd.py); the
    public ops have an autograd kernel, for direct calls."""
    for name in ("matmul", "matmul_fused", "scaled_matmul"):
        for twin, autograd in ((name, True), ("_" + name, False)):
            qualified = getattr(torch.ops.gemm_engine, twin).default.name()
            assert torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CompositeExplicitAutograd"), twin
            assert torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "Autograd") == autograd, twin
            autocast = torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "AutocastCPU")
            assert autocast == (name != "scaled_matmul"), twin


CASES = [  # (a shape, a dtype, b shape, b dtype, options)
    ((5, 7), torch.float32, (7, 6), torch.float32, {}),
    ((7,), torch.float32, (7, 6), torch.float32, {}),
    ((5, 7), torch.float64, (7,), torch.float64, {}),
    ((7,), torch.float32, (7,), torch.float32, {}),
    ((3, 1, 5, 7), torch.float32, (4, 7, 6), torch.float32, {}),
    ((5, 7), torch.bfloat16, (7, 6), torch.bfloat16, {}),
    ((5, 7), torch.float16, (7, 6), torch.float32, {}),
    ((5, 7), torch.int8, (7, 6), torch.int8, {}),
    ((5, 7), torch.float32, (7, 6), torch.float32, dict(bias=((6,), torch.float64))),
    ((5, 7), torch.float32, (7, 6), torch.float32, dict(c=((5, 6), torch.float16), beta=0.5, alpha=2.0)),
    ((5, 7), torch.float32, (7, 6), torch.float32, dict(c=((5, 6), torch.float64), beta=0.0)),
    ((5, 7), torch.float32, (7, 6), torch.float32, dict(activation="swiglu", bias=((6,), torch.float32))),
    ((2, 5, 7), torch.float32, (7, 6), torch.float32, dict(activation=Derivative("swiglu"), mul=((5, 3), torch.float32))),
    ((5, 7), torch.bfloat16, (7, 6), torch.bfloat16, dict(out_dtype=torch.float32, activation="relu")),
    ((5, 7), torch.float32, (7, 6), torch.float32, dict(out_dtype=torch.float16, casting="unsafe")),
    ((5, 7), torch.int8, (7, 6), torch.int8, dict(out_dtype=torch.float32, bias=((6,), torch.float32))),
]


def _tensors(case, gen):
    sa, da, sb, db, opts = case

    def make(shape, dtype):
        if dtype in (torch.int8,):
            return torch.randint(-5, 5, shape, dtype=dtype, generator=gen)
        return torch.randn(shape, generator=gen).to(dtype)
    kw = {k: (make(*v) if isinstance(v, tuple) else v) for k, v in opts.items()}
    return make(sa, da), make(sb, db), kw


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_fake_results_agree_with_the_engines(case):
    """Under FakeTensorMode the op's fake gives what the real call returns: shape, dtype, strides."""
    gen = torch.Generator().manual_seed(0)
    a, b, kw = _tensors(case, gen)
    real = gemm_engine.matmul(a, b, **kw)
    opts = dict(kw)
    act = activation_key(opts.pop("activation", None))
    out_dtype = opts.pop("out_dtype", None)
    casting = opts.pop("casting", "same_kind")
    beta = opts.pop("beta", 1.0 if "c" in opts else 0.0)
    opts.pop("alpha", None)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fa, fb = mode.from_tensor(a), mode.from_tensor(b)
        fk = {k: mode.from_tensor(v) for k, v in opts.items()}
        fake = fake_result(fa, fb, activation=act, out_dtype=out_dtype, casting=casting, beta=beta, **fk)
    assert (fake.shape, fake.dtype, fake.stride(), fake.device) == (real.shape, real.dtype, real.stride(), real.device)


@pytest.mark.parametrize("case", [CASES[0], CASES[4], CASES[11]], ids=["plain", "batched", "swiglu"])
def test_opcheck(case):
    """torch's own checks of a custom op: schema, fake tensors, autograd registration, dynamic AOT."""
    gen = torch.Generator().manual_seed(1)
    a, b, kw = _tensors(case, gen)
    if not kw:
        args = (a, b, 0, None, "")
        torch.library.opcheck(torch.ops.gemm_engine.matmul.default, args)
    else:
        args = (a, b, None, kw["bias"], None, 1.0, 0.0, -1, activation_key(kw["activation"]), None, "same_kind", 0,
                None, "")
        torch.library.opcheck(torch.ops.gemm_engine.matmul_fused.default, args)


def test_activation_keys_round_trip():
    class Shifted(gemm_engine.Activation):
        name = "test_shifted"

        def __init__(self, by=1.0):
            self.by = by

        def render(self, x, m):
            return f"({x} + {m.lit(self.by)})"

    for act in ("relu", Derivative("gelu"), Shifted(2.0), Derivative(gemm_engine.ACTIVATIONS["swiglu"]())):
        key = activation_key(act)
        assert isinstance(key, str) and activation_of(key) == (gemm_engine.epilogue.activations.resolve_activation(act))
    assert activation_key(Shifted(2.0)) == activation_key(Shifted(2.0)) != activation_key(Shifted(3.0))


def _swiglu_block(x, w, bias):
    return gemm_engine.matmul(x, w, bias=bias, activation="swiglu")


def _reference(x, w, bias):
    z = x @ w + bias
    return torch.nn.functional.silu(z[..., 0::2]) * z[..., 1::2]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph(backend):
    gen = torch.Generator().manual_seed(2)
    x, w, bias = torch.randn(8, 16, generator=gen), torch.randn(16, 12, generator=gen), torch.randn(12, generator=gen)
    compiled = torch.compile(_swiglu_block, fullgraph=True, backend=backend)
    assert torch.allclose(compiled(x, w, bias), _reference(x, w, bias), rtol=1e-5, atol=1e-5)


def test_dynamic_shapes_trace_once():
    gen = torch.Generator().manual_seed(3)
    w, bias = torch.randn(16, 12, generator=gen), torch.randn(12, generator=gen)
    compiled = torch.compile(_swiglu_block, fullgraph=True, backend="aot_eager")
    first = torch.randn(8, 16, generator=gen)
    torch._dynamo.mark_dynamic(first, 0)
    compiled(first, w, bias)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for rows in (5, 13, 40):
            x = torch.randn(rows, 16, generator=gen)
            assert torch.allclose(compiled(x, w, bias), _reference(x, w, bias), rtol=1e-5, atol=1e-5)


def test_autocast_casts_the_float_operands():
    gen = torch.Generator().manual_seed(4)
    a, b = torch.randn(6, 8, generator=gen), torch.randn(8, 5, generator=gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = gemm_engine.matmul(a, b)
        want = torch.matmul(a, b)
    assert got.dtype == want.dtype == torch.bfloat16
    assert torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        compiled = torch.compile(lambda a, b: gemm_engine.matmul(a, b, activation="relu"), fullgraph=True,
                                 backend="aot_eager")
        assert compiled(a, b).dtype == torch.bfloat16


def test_an_engine_of_its_own_under_compile(opencl_engine):
    engine = gemm_engine.Engine("opencl")
    x, w = torch.randn(4, 6), torch.randn(6, 3)
    compiled = torch.compile(lambda x, w: engine.matmul(x, w, alpha=2.0), fullgraph=True, backend="aot_eager")
    assert torch.allclose(compiled(x, w), 2 * x @ w, rtol=1e-5, atol=1e-5)
    assert gt.engine_handle(engine) == engine.handle != 0 and gt.engine_handle(None) == 0


def test_scaled_fp8_compiles_and_has_no_gradient():
    gen = torch.Generator().manual_seed(5)
    a = (torch.randn(8, 16, generator=gen) * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(16, 8, generator=gen) * 4).to(torch.float8_e4m3fn)
    sa, sb = torch.rand(8, 1, generator=gen) + 0.5, torch.rand(1, 8, generator=gen) + 0.5
    want = (a.float() * sa) @ (b.float() * sb)
    compiled = torch.compile(lambda a, b, sa, sb: gemm_engine.matmul(a, b, scale_a=sa, scale_b=sb, bias=torch.ones(8)),
                             fullgraph=True, backend="aot_eager")
    assert torch.allclose(compiled(a, b, sa, sb), want + 1, rtol=1e-5, atol=1e-4)
    with pytest.raises(RuntimeError, match="has no gradient"):
        gemm_engine.matmul(a, b, scale_a=sa.requires_grad_(), scale_b=sb)


def test_eager_calls_without_grad_stay_off_the_dispatcher(monkeypatch):
    """No grad, no tracing, no autocast: the call never reaches the ops (route.py); with grad it does."""
    from gemm_engine.torch import route
    entered = []
    real = route.routed
    monkeypatch.setattr(route, "routed", lambda *args, **kw: entered.append(1) or real(*args, **kw))
    a, b = torch.randn(4, 6), torch.randn(6, 3)
    assert np.allclose(gemm_engine.matmul(a, b, bias=torch.ones(3)).numpy(), (a @ b + 1).numpy(), rtol=1e-5)
    with torch.no_grad():
        gemm_engine.default_engine().matmul(a.requires_grad_(), b)
    assert entered == []
    assert gemm_engine.matmul(a, b).grad_fn is not None and entered == [1]
