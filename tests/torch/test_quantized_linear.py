"""QuantizedLinear (gemm_engine/torch/quantized_linear.py): nn.Linear's shapes over a quantized
weight, against float64 of the dequantized weight (every format, odd in / out features, batch
axes, bias or none, float32 and bfloat16 activations), its state_dict round trip and buffers, the
cached weight rebuilt when the buffers are loaded, moved or refreshed, gradients (input and bias; the weight refused).
The default engine is the OpenCL one (PoCL here: CPU tensors)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")

import gemm_engine  # noqa: E402
from gemm_engine.torch import QuantizedLinear  # noqa: E402
from torch import nn  # noqa: E402


@pytest.fixture(autouse=True)
def _opencl_default(opencl_engine, monkeypatch):
    from gemm_engine import api
    monkeypatch.setattr(api, "_default_engine", opencl_engine)


def _reference(layer: QuantizedLinear, x: torch.Tensor) -> torch.Tensor:
    """float64 ``x @ W.T + b`` of the dequantized weight."""
    w = torch.from_numpy(layer.quantized_weight().dequantize().astype(np.float64))   # (in, out)
    y = x.double() @ w
    return y if layer.bias is None else y + layer.bias.detach().cpu().double()


def _rel(y, ref) -> float:
    return float(torch.linalg.norm(y.double() - ref) / torch.linalg.norm(ref))


#: (format, group, symmetric, in, out, bias, batch, dtype): odd features, short last groups, per
#: channel, 1-D and 3-D x.
CASES = [
    ("int4", 32, False, 77, 45, True, (3, 5), torch.float32),
    ("int4", 128, True, 200, 33, False, (7,), torch.bfloat16),
    ("int8", None, True, 65, 19, True, (2, 1, 3), torch.float32),
    ("int8", 16, False, 50, 70, False, (), torch.float32),
    ("fp8_e4m3", None, True, 93, 21, True, (4,), torch.bfloat16),
    ("fp8_e4m3", 32, True, 64, 9, False, (2, 3), torch.float32),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c[:6]))
def test_forward_is_linear_over_the_dequantized_weight(case):
    fmt, group, symmetric, fin, fout, bias, batch, dtype = case
    torch.manual_seed(0)
    dense = nn.Linear(fin, fout, bias=bias).to(dtype)
    layer = QuantizedLinear.from_linear(dense, format=fmt, group_size=group, symmetric=symmetric)
    f = layer.format
    assert (f.kind, bool(f.zeros), f.layout) == (fmt, not symmetric, "prepacked")
    assert f.group_size == (0 if group is None or group >= fin else group)
    assert f.scale == ("bf16_bits" if dtype == torch.bfloat16 else "f16_bits")
    x = torch.randn(*batch, fin).to(dtype)
    with torch.no_grad():
        y = layer(x)
    assert y.shape == (*batch, fout) and y.dtype == dtype
    # float32 activations: the weight's values exact, float32 sums; bf16: the product's rounding
    assert _rel(y, _reference(layer, x)) <= (1e-5 if dtype == torch.float32 else 1e-2)
    # the quantized weight is close to the float one it came from (quantization, not a wrong layout)
    w = dense.weight.detach().double()
    assert _rel(layer.dequantized_weight(), w) <= (0.2 if fmt == "int4" else 0.05)


def test_bias_follows_the_linear_and_none_is_none():
    dense = nn.Linear(40, 24)
    layer = QuantizedLinear.from_linear(dense, format="int8")
    assert torch.equal(layer.bias, dense.bias) and layer.bias is not dense.bias
    assert QuantizedLinear.from_linear(nn.Linear(40, 24, bias=False)).bias is None
    with pytest.raises(TypeError, match="nn.Linear"):
        QuantizedLinear.from_linear(torch.randn(3, 3))


def test_state_dict_round_trip_into_an_empty_module():
    torch.manual_seed(1)
    src = QuantizedLinear.from_linear(nn.Linear(90, 37), format="int4", group_size=32, symmetric=False)
    state = src.state_dict()
    assert list(state) == ["bias", "qweight", "scales", "zeros"]
    assert state["qweight"].dtype == torch.int32 and state["scales"].dtype == torch.int16
    dst = QuantizedLinear(90, 37, format="int4", group_size=32, symmetric=False, scale_dtype="float16")
    x = torch.randn(4, 90)
    with torch.no_grad():
        before = dst(x)                        # the empty module: an all-zero weight, zero bias
        assert not before.any()
        dst.load_state_dict(state)             # in place: the cached weight is rebuilt
        assert torch.equal(dst(x), src(x))
    assert np.array_equal(dst.quantized_weight().dequantize(), src.quantized_weight().dequantize())
    # the buffers of another format do not fit
    other = QuantizedLinear(90, 37, format="int4", group_size=32, symmetric=True)
    with pytest.raises(RuntimeError, match="zeros"):
        other.load_state_dict(state)


def test_buffers_changed_in_place_and_refreshed_rebuild_the_weight_and_copies_work():
    torch.manual_seed(2)
    layer = QuantizedLinear.from_linear(nn.Linear(48, 16, bias=False), format="int8", group_size=None)
    first = layer.quantized_weight()
    assert layer.quantized_weight() is first               # cached while the buffers stay
    with torch.no_grad():
        layer.scales.copy_(layer.scales * 0 + torch.tensor(np.float16(0.5).view(np.int16)))
    layer.refresh_weight()
    second = layer.quantized_weight()
    assert second is not first and np.all(second.scale_values() == 0.5)
    twin = copy.deepcopy(layer)
    x = torch.randn(3, 48)
    with torch.no_grad():
        assert torch.equal(twin(x), layer(x))


def test_gradients_reach_the_input_and_bias_not_the_weight():
    torch.manual_seed(3)
    layer = QuantizedLinear.from_linear(nn.Linear(36, 20), format="int4", group_size=None, symmetric=False)
    x = torch.randn(2, 5, 36, dtype=torch.float32, requires_grad=True)
    y = layer(x)
    assert y.grad_fn is not None and y.shape == (2, 5, 20)
    assert _rel(y.detach(), _reference(layer, x.detach())) <= 1e-5
    g = torch.randn_like(y)
    y.backward(g)
    w = torch.from_numpy(layer.quantized_weight().dequantize().astype(np.float64))   # (in, out)
    assert _rel(x.grad, g.double() @ w.T) <= 1e-5
    assert _rel(layer.bias.grad, g.double().sum(dim=(0, 1))) <= 1e-5
    assert [name for name, p in layer.named_parameters()] == ["bias"]
    with pytest.raises(RuntimeError, match="no gradient"):
        layer.requires_grad_()
    assert layer.requires_grad_(False) is layer and not layer.bias.requires_grad
    with pytest.raises(AttributeError, match="dequantized_weight"):
        layer.weight


@pytest.mark.parametrize("fmt", [("int4", 32, False), ("int8", None, True)])
def test_torch_compile_traces_it_whole_with_its_gradients(fmt):
    """Under torch.compile(fullgraph=True) the layer is one registered op on its buffers
    (torch.ops.gemm_engine.quantized_mm): the same result and the input's and bias's gradients as
    eagerly, a second call reusing the weight the first built."""
    from gemm_engine.torch.quantized_op import tensor_weight
    torch.manual_seed(5)
    kind, group, symmetric = fmt
    layer = QuantizedLinear.from_linear(nn.Linear(64, 24), format=kind, group_size=group, symmetric=symmetric)
    x = torch.randn(2, 3, 64, requires_grad=True)

    def step(x):
        return (torch.relu(layer(x)) * 2).square().sum()

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    got = compiled(x)
    gx, gb = torch.autograd.grad(got, (x, layer.bias))
    want = step(x)
    wx, wb = torch.autograd.grad(want, (x, layer.bias))
    assert _rel(got.detach(), want.detach()) < 1e-5
    assert _rel(gx, wx) < 1e-5 and _rel(gb, wb) < 1e-5
    q = tensor_weight(layer.qweight, layer.scales, layer.zeros, layer.format, 64, 24)
    assert q is layer.quantized_weight()          # the module's weight: no second host copy
    assert _rel(compiled(x).detach(), want.detach()) < 1e-5
    # A state_dict loaded into the buffers in place: the compiled step's product and gradient are
    # the new weight's (the remembered weight is forgotten with the module's).
    other = QuantizedLinear.from_linear(nn.Linear(64, 24), format=kind, group_size=group, symmetric=symmetric)
    layer.load_state_dict(other.state_dict())
    got = compiled(x)
    gx = torch.autograd.grad(got, x)[0]
    want = step(x)
    assert _rel(got.detach(), want.detach()) < 1e-5 and _rel(gx, torch.autograd.grad(want, x)[0]) < 1e-5
    assert _rel(layer(x).detach(), _reference(other, x).detach()) < 1e-5


def test_torch_compile_without_fullgraph_runs_it_too():
    """The layer inside a compiled function with other ops (it used to fail: the call was routed to
    the dense op, which cannot take a quantized weight)."""
    layer = QuantizedLinear.from_linear(nn.Linear(40, 24), format="int8", group_size=None)
    x = torch.randn(3, 40)
    compiled = torch.compile(lambda x: torch.relu(layer(x)) * 2, backend="eager")
    assert torch.equal(compiled(x), torch.relu(layer(x)) * 2)
    assert _rel(layer(x), _reference(layer, x)) < 1e-5


def test_autocast_casts_the_input_as_linear_does():
    layer = QuantizedLinear.from_linear(nn.Linear(40, 24), format="int4", group_size=32)
    x = torch.randn(3, 40)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
        z = gemm_engine.quantized_matmul(x, layer.quantized_weight())
    assert y.dtype == torch.bfloat16 and z.dtype == torch.bfloat16
    assert _rel(y, _reference(layer, x)) < 2e-2


def test_quantized_matmul_differentiates_in_x_and_bias():
    q = gemm_engine.quantize(np.random.default_rng(0).standard_normal((40, 24)).astype(np.float32), "int8", None)
    x = torch.randn(2, 3, 40, requires_grad=True)
    bias = torch.randn(24, requires_grad=True)
    gy = torch.randn(2, 3, 24)
    y = gemm_engine.quantized_matmul(x, q, bias=bias)
    y.backward(gy)
    w = torch.from_numpy(q.dequantize())
    assert torch.allclose(y, x.detach() @ w + bias.detach(), rtol=1e-5, atol=1e-5)
    assert torch.allclose(x.grad, gy @ w.T, rtol=1e-5, atol=1e-5)
    assert torch.allclose(bias.grad, gy.reshape(-1, 24).sum(0), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="no other epilogue term"):
        gemm_engine.quantized_matmul(x, q, activation="relu")


def test_x_of_the_wrong_width_is_refused():
    layer = QuantizedLinear(32, 8, format="int8", group_size=None)
    with pytest.raises(ValueError, match="in_features=32"):
        layer(torch.randn(4, 31))
    assert "format=int8, per-channel, symmetric, prepacked" in repr(layer)


def test_cuda_tensors_run_on_the_gpu(monkeypatch):
    """The module moved to the GPU: its buffers there, the forward by the CUDA engine (decode and
    prefill sizes), the result on the GPU."""
    from conftest import get_engine
    from gemm_engine import api
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch here")
    monkeypatch.setattr(api, "_default_engine", get_engine("cuda"))
    torch.manual_seed(4)
    dense = nn.Linear(256, 136).to(torch.bfloat16)
    layer = QuantizedLinear.from_linear(dense, format="int4", group_size=64, symmetric=False).cuda()
    assert layer.qweight.is_cuda and layer.bias.is_cuda
    for m in (1, 300):
        x = torch.randn(m, 256, device="cuda").to(torch.bfloat16)
        with torch.no_grad():
            y = layer(x)
        assert y.is_cuda and y.shape == (m, 136)
        assert _rel(y.cpu(), _reference(layer, x.cpu())) <= 1e-2
    # The kernels read the module's buffers (the weight held once on the GPU), so a state_dict
    # loaded into them in place is what the next forward multiplies.
    held = layer.quantized_weight().device(api._default_engine.runtime)
    assert (held.packed.data.ptr, held.scales.data.ptr, held.zeros.data.ptr) == (
        layer.qweight.data_ptr(), layer.scales.data_ptr(), layer.zeros.data_ptr())
    other = QuantizedLinear.from_linear(nn.Linear(256, 136).to(torch.bfloat16), format="int4", group_size=64,
                                        symmetric=False).cuda()
    layer.load_state_dict(other.state_dict())
    x = torch.randn(5, 256, device="cuda").to(torch.bfloat16)
    with torch.no_grad():
        assert _rel(layer(x).cpu(), _reference(other, x.cpu())) <= 1e-2
        compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")     # the registered op on CUDA
        assert _rel(compiled(x).cpu(), _reference(other, x.cpu())) <= 1e-2
    # The input's gradient, eager and compiled: the weight expanded on the GPU (torch/dequantize.py)
    w = torch.from_numpy(other.quantized_weight().dequantize()).cuda()                 # (in, out) float32
    xr = x.clone().requires_grad_()
    gy = torch.randn(5, 136, device="cuda").to(torch.bfloat16)
    for run in (layer, torch.compile(layer, fullgraph=True, backend="aot_eager")):
        xr.grad = None
        run(xr).backward(gy)
        assert xr.grad.is_cuda and _rel(xr.grad.float().cpu(), (gy.float() @ w.T).cpu()) <= 1e-2
    assert layer.dequantized_weight().is_cuda
    # Buffers written in place without refresh_weight: forward and backward both read them there.
    third = QuantizedLinear.from_linear(nn.Linear(256, 136).to(torch.bfloat16), format="int4", group_size=64,
                                        symmetric=False).cuda()
    with torch.no_grad():
        for name in ("qweight", "scales", "zeros"):
            getattr(layer, name).copy_(getattr(third, name))
        layer.bias.copy_(third.bias)
    w3 = torch.from_numpy(third.quantized_weight().dequantize()).cuda()
    xr.grad = None
    y = layer(xr)
    y.backward(gy)
    assert _rel(y.detach().cpu(), _reference(third, x.cpu())) <= 1e-2
    assert _rel(xr.grad.float().cpu(), (gy.float() @ w3.T).cpu()) <= 1e-2


def test_a_deleted_module_frees_its_buffers():
    """The ops' table of weights (torch/quantized_op.py) holds no module's buffers alive: once the
    module is gone, its packed words, the weight built from them and the table's entry go too."""
    import gc
    import weakref
    from gemm_engine.torch import quantized_op
    layer = QuantizedLinear.from_linear(nn.Linear(64, 32), format="int4", group_size=32)
    x = torch.randn(2, 64)
    with torch.no_grad():
        layer(x)
        torch.ops.gemm_engine.quantized_mm(x, layer.qweight, layer.scales, layer.zeros, None,
                                           quantized_op.format_key(layer.format), 64, 32, 0, None)
    buffer, weight = weakref.ref(layer.qweight), weakref.ref(layer.quantized_weight())
    key = id(layer.qweight)
    assert quantized_op.tensor_weight(layer.qweight, layer.scales, layer.zeros, layer.format, 64, 32) is weight()
    del layer
    gc.collect()
    assert buffer() is None and weight() is None and key not in quantized_op._WEIGHTS
