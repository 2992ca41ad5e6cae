"""The prepare step of a call: numpy's rules, then the operands on the device.

Every check of a matmul call happens here, before anything is launched or written (shapes, dtypes,
``out``, the epilogue options: frontend.py and fusion.py hold the rules and numpy's messages);
then the operands are viewed on the device without copies where their strides allow
(`DeviceOperand`: the array the kernel reads, how it reads it, its vector alignment), and the
`MatmulProblem` the kernels are configured for is built. It also finishes calls that need no
kernel (an empty output, K = 0) and hands results back in the caller's array type.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dtypes import BFLOAT16, element_type, numpy_dtype, operand_dtype
from .frontend import CallShape, OperandView, call_shape, check_out, operand_view, result_dtype, vector_alignment
from .fusion import NO_FUSION, FusionRequest, c_view, check_fusion, fused_dtype, make_epilogue
from .problem import MatmulProblem


@dataclass
class DeviceOperand:
    array: object            # device array read by the kernel
    view: OperandView
    align: int = 1           # widest aligned vector access, in elements
    copied: bool = False     # the kernel reads a copy (converted, contiguous or moved), not the input


@dataclass(frozen=True)
class PreparedCall:
    """A checked call: the operands and problem exist only when there is work (no empty output, K > 0)."""

    shape: CallShape
    dtype: np.dtype
    fusion: FusionRequest
    host: bool
    lhs: DeviceOperand | None = None
    rhs: DeviceOperand | None = None
    problem: MatmulProblem | None = None


class Preparer:
    """The prepare step for one runtime (codegen/runtime.py)."""

    def __init__(self, runtime):
        self.runtime = runtime

    def call(self, a, b, out, alpha, beta, c, bias, bias_axis, activation, out_dtype, precision,
                 plain) -> "PreparedCall":
        """Every check of a call, then the operands on the device and the problem the kernels are
        configured for (None when there is nothing to multiply: an empty output or K = 0)."""
        rt = self.runtime
        if precision not in MatmulProblem.PRECISIONS:
            raise ValueError(f"precision: expected one of {MatmulProblem.PRECISIONS}, got {precision!r}")
        a, a_host = self.as_array(a, "a")
        b, b_host = self.as_array(b, "b")
        host = a_host and b_host
        shape = call_shape(a.shape, b.shape)
        product = result_dtype(a.dtype, b.dtype)
        in_dtype = operand_dtype(product)   # what the kernel reads: int8 for an int32 product (dtypes.WIDENED)
        fusion = NO_FUSION if plain else check_fusion(
            shape, alpha=alpha, beta=beta, c=c, bias=bias, bias_axis=bias_axis, activation=activation,
            out_dtype=out_dtype)
        dtype = fused_dtype(product, fusion)
        epilogue = make_epilogue(fusion, element_type(in_dtype).compute, element_type(dtype).compute)
        if out is not None:
            if host and not isinstance(out, np.ndarray):
                raise TypeError(f"matmul: out must be a numpy.ndarray for numpy inputs, got {type(out).__name__}")
            if host and not out.flags.writeable:   # else found only after the launch, or never (K = 0)
                raise ValueError("matmul: out is read-only")
            if not host and not rt.is_native(out):
                raise TypeError(f"matmul: out must be a device array of the {rt.backend} backend, "
                                f"got {type(out).__name__}")
            check_out(out.shape, out.dtype, dtype, shape.out_shape)
        for label, x in (("c", fusion.c), ("bias", fusion.bias)):
            if x is not None:
                self.as_array(x, label)  # the array kind check, before anything moves
        if shape.batch == 0 or shape.m == 0 or shape.n == 0 or shape.k == 0:
            return PreparedCall(shape, dtype, fusion, host)
        lhs = self.operand(a, a_host, in_dtype, shape, shape.lhs_vector, lhs=True)
        rhs = self.operand(b, b_host, in_dtype, shape, shape.rhs_vector, lhs=False)
        in_et = element_type(in_dtype)
        problem = MatmulProblem(shape.batch, shape.m, shape.n, shape.k, in_et, in_et, element_type(dtype),
                                lhs.view.layout, rhs.view.layout, lhs.align, rhs.align, precision, epilogue)
        return PreparedCall(shape, dtype, fusion, host, lhs, rhs, problem)

    def as_array(self, x, label):
        if self.runtime.is_native(x):
            return x, False
        if type(x).__module__.split(".")[0] in ("cupy", "pyopencl"):
            raise TypeError(f"matmul: {label} is a {type(x).__module__} array but this engine runs on "
                            f"the {self.runtime.backend} backend")
        return np.asarray(x), True

    @staticmethod
    def storage_dtype(dtype, host):
        # Device libraries may lack bfloat16: move its bits as uint16, the kernel knows the type.
        return np.dtype(np.uint16) if element_type(dtype) is BFLOAT16 and host else dtype

    def operand(self, x, is_host, dtype, shape: CallShape, vector: bool, lhs: bool) -> DeviceOperand:
        rt = self.runtime
        if is_host:
            x = np.asarray(x, dtype=dtype)
            if element_type(dtype) is BFLOAT16:
                x = x.view(np.uint16)
            x = rt.to_device(x)
        copied = is_host
        if not is_host and x.dtype != dtype:
            x, copied = rt.contiguous(x, dtype), True
        if vector:
            x = x.reshape((1,) + x.shape) if lhs else x.reshape(x.shape + (1,))
        view = operand_view(x.shape, x.strides, x.dtype.itemsize, shape.batch_shape)
        if view is None:
            # Strides that fit no layout (or a broadcast that no single batch stride describes):
            # one contiguous copy, materializing the broadcast batch.
            full = shape.batch_shape + x.shape[-2:]
            if x.shape != full:
                host_copy = rt.to_host(x)
                x = rt.to_device(np.ascontiguousarray(np.broadcast_to(host_copy, full)))
            else:
                x = rt.contiguous(x)
            copied = True
            view = operand_view(x.shape, x.strides, x.dtype.itemsize, shape.batch_shape)
        align = vector_alignment(rt.element_address(x), view, x.dtype.itemsize)
        return DeviceOperand(x, view, align, copied)

    def device_copy(self, x):
        """A device array holding ``x`` in its own dtype (bfloat16 moved as its bits)."""
        rt = self.runtime
        if rt.is_native(x):
            return x
        x = np.asarray(x)
        element_type(x.dtype)  # TypeError naming the supported dtypes
        return rt.to_device(x.view(np.uint16) if element_type(x.dtype) is BFLOAT16 else x)

    def c_operand(self, c, shape: CallShape):
        """(device array, strides view, copied) for the epilogue's ``c``, read in place where its
        strides describe the broadcast to the output; else copied once, broadcast materialized."""
        if c is None:
            return None, None, False
        rt = self.runtime
        copied = not rt.is_native(c)
        dev = self.device_copy(c)
        view = c_view(dev.shape, dev.strides, dev.dtype.itemsize, shape)
        if view is None:
            host = rt.to_host(dev) if not isinstance(c, np.ndarray) else np.asarray(c)
            host = np.ascontiguousarray(np.broadcast_to(host, shape.out_shape))
            dev, copied = self.device_copy(host), True
            view = c_view(dev.shape, dev.strides, dev.dtype.itemsize, shape)
        return dev, view, copied

    def bias_operand(self, bias):
        """(device array, element stride, copied) for the epilogue's ``bias`` vector."""
        if bias is None:
            return None, None, False
        rt = self.runtime
        copied = not rt.is_native(bias)
        dev = self.device_copy(bias)
        stride, itemsize = dev.strides[0], dev.dtype.itemsize
        if stride % itemsize:
            dev, copied = rt.contiguous(dev), True
            stride = itemsize
        return dev, stride // itemsize, copied

    def k_zero(self, shape: CallShape, dtype, out, host, fusion: FusionRequest):
        """K = 0: a @ b is zeros, so the result is the epilogue of zeros, computed on the host in
        float64 (nothing to multiply; a kernel would only read c and bias)."""
        if fusion.plain:
            return self.empty_result(shape, dtype, out, host)
        rt = self.runtime
        value = np.zeros(shape.out_shape)
        if fusion.c is not None:
            value = value + fusion.beta * self.host_float64(fusion.c)
        if fusion.bias is not None:
            vec = self.host_float64(fusion.bias)
            if fusion.bias_axis == 1 or shape.lhs_vector:
                value = value + vec                              # over the output's last axis
            else:
                value = value + (vec[:, None] if not shape.rhs_vector else vec)
        if fusion.activation is not None:
            value = fusion.activation.reference(value)
        result = np.asarray(value).astype(dtype)
        if host:
            if out is None:
                return result[()] if result.ndim == 0 else result
            out[...] = result
            return out
        target = rt.to_device(result.view(np.uint16) if element_type(dtype) is BFLOAT16 else result)
        if out is None:
            return target
        rt.copy_into(out, target)
        return out

    def host_float64(self, x) -> np.ndarray:
        rt = self.runtime
        if rt.is_native(x):
            x = rt.to_host(x)
            if x.dtype == np.uint16:  # a bfloat16 device array comes back as its bits
                x = x.view(numpy_dtype(BFLOAT16))
        return np.asarray(x, dtype=np.float64)

    def empty_result(self, shape, dtype, out, host):
        rt = self.runtime
        if out is not None:
            target = out
        elif host:
            target = np.empty(shape.out_shape, dtype)
        else:
            target = rt.empty(shape.out_shape, dtype)
        if shape.k == 0 and target.size:
            if host:
                target[...] = 0
            else:
                rt.fill_zero(target)
        return target

    def finish(self, target, out, direct, host, dtype):
        rt = self.runtime
        if host:
            result = rt.to_host(target)
            if result.dtype != dtype:
                result = result.view(dtype)
            if out is None:
                # numpy returns a scalar, not a 0-d array, for vector @ vector.
                return result[()] if result.ndim == 0 else result
            out[...] = result
            return out
        if direct or out is None:
            return target if out is None else out
        rt.copy_into(out, target)
        return out


