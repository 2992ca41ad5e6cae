"""The prepare step of a call: numpy's rules, then the operands on the device.

Every check of a matmul call happens here, before anything is launched or written (shapes, dtypes,
``out``, the epilogue options: frontend.py and fusion.py hold the rules and numpy's messages).
Arrays of every library come in through interop.py (numpy, CuPy, PyOpenCL, torch, DLPack, the CUDA
array interface, lists and scalars); then the operands are viewed on the device without copies
where their strides allow (`DeviceOperand`: the array the kernel reads, how it reads it, its vector
alignment), and the `MatmulProblem` the kernels are configured for is built. It also finishes calls
that need no kernel (an empty output, K = 0) and hands results back in the caller's library.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

import numpy as np

from ..dtypes import SUPPORTED_NAMES, bits_dtype, element_type, is_fp8, operand_dtypes
from ..epilogue.scales import check_scale, dequantize
from .numpy_rules import CallShape, OperandView, call_shape, check_out, operand_view, result_dtype, vector_alignment
from .request import NO_FUSION, FusionRequest, c_view, check_fusion, fused_dtype, make_epilogue
from .arrays import Imported, import_array, numpy_torch_dtype, to_library
from ..problem import MatmulProblem


def weak_scalar(x, product: np.dtype):
    """numpy's rule for Python numbers (NEP 50): an ``int`` or ``float`` given for ``c`` or ``bias``
    takes the product's dtype where it is of that kind or narrower (``c=1.0`` with float32 operands
    keeps a float32 result, ``c=1`` is accepted); anything else is an array as it is."""
    if type(x) in (int, float) and (product.kind == "f" or (type(x) is int and product.kind in "iu")):
        return np.asarray(x, dtype=product)
    return x


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
    out: Imported | None = None          # the caller's out, imported
    like: Imported | None = None         # the input whose library the result takes (torch in, torch out)
    stream: int | None = None            # the CUDA stream the inputs' library works on
    #: Whether a repeated call may skip this preparation (not when the operands were replaced:
    #: dequantized for block scales).
    cacheable: bool = True


def _bits_view(host: np.ndarray) -> np.ndarray:
    """A host array as device libraries can hold it: bfloat16 and fp8 as their bits."""
    bits = bits_dtype(host.dtype)
    return host if bits is None else host.view(bits)


class Preparer:
    """The prepare step for one runtime (codegen/runtime.py)."""

    def __init__(self, runtime):
        self.runtime = runtime

    def call(self, a, b, out, alpha, beta, c, bias, bias_axis, activation, out_dtype, precision,
             plain, casting: str = "same_kind", scales=(None, None), dequantize: bool = False) -> PreparedCall:
        """Every check of a call, then the operands on the device and the problem the kernels are
        configured for (None when there is nothing to multiply: an empty output or K = 0)."""
        if precision not in MatmulProblem.PRECISIONS:
            raise ValueError(f"precision: expected one of {MatmulProblem.PRECISIONS}, got {precision!r}")
        if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
            raise ValueError(f"casting: expected 'no', 'equiv', 'safe', 'same_kind' or 'unsafe', got {casting!r}")
        ia, ib = self.as_array(a, "a"), self.as_array(b, "b")
        host = ia.host and ib.host
        like = ia if ia.library == "torch" else ib if ib.library == "torch" else None
        stream = ia.stream or ib.stream
        shape = call_shape(ia.shape, ib.shape)
        product = result_dtype(ia.dtype, ib.dtype)
        sa, sb = (check_scale(x, None if x is None or isinstance(x, numbers.Real) else self.as_array(x, label),
                              label, shape, lhs) for x, label, lhs in zip(scales, ("scale_a", "scale_b"), (True, False)))
        blocks = "block" in (getattr(sa, "kind", None), getattr(sb, "kind", None))
        cacheable = not (blocks and dequantize)
        if not cacheable:
            # Block scales with a kernel that cannot apply them (the engine asks again with
            # ``dequantize``): the operands are dequantized to float32 first (scales.py).
            ia, ib = (self.dequantized(imp, sc, lhs, shape) for imp, sc, lhs in ((ia, sa, True), (ib, sb, False)))
            product, sa, sb = np.dtype(np.float32), None, None
        elif (sa or sb) and product.kind in "iu" or blocks:
            product = np.dtype(np.float32)     # int8 with scales: a float32 result (W8A8)
        # What the kernel reads: int8 for an int32 product, fp8 for float32 (dtypes.WIDENED).
        lhs_dtype, rhs_dtype = operand_dtypes(ia.dtype, ib.dtype, product)
        if precision == "fast_accum" and not (is_fp8(lhs_dtype) and is_fp8(rhs_dtype)):
            raise ValueError(f"precision='fast_accum' concerns fp8 operands (their tensor-core sums); got "
                             f"{np.dtype(lhs_dtype).name} and {np.dtype(rhs_dtype).name}")
        ic = self.as_array(weak_scalar(c, product), "c") if c is not None and not plain else None
        ibias = self.as_array(weak_scalar(bias, product), "bias") if bias is not None and not plain else None
        for label, imp in (("c", ic), ("bias", ibias)):
            if imp is not None and imp.dtype.name not in SUPPORTED_NAMES:
                raise TypeError(f"matmul: {label} has dtype {imp.dtype.name!r}; supported dtypes are "
                                f"{', '.join(SUPPORTED_NAMES)}")
        fusion = NO_FUSION if plain else check_fusion(
            shape, alpha=alpha, beta=beta, c=ic, bias=ibias, bias_axis=bias_axis, activation=activation,
            out_dtype=out_dtype, casting=casting, product=product)
        if sa or sb:   # number scales fold into alpha; arrays become kernel arguments
            numbers_ = [x.number for x in (sa, sb) if x is not None and x.number is not None]
            fusion = replace(fusion, alpha=fusion.alpha * float(np.prod(numbers_)),
                             lhs_scale=sa if sa is not None and sa.array is not None else None,
                             rhs_scale=sb if sb is not None and sb.array is not None else None)
        dtype = fused_dtype(product, fusion)
        epilogue = make_epilogue(fusion, element_type(lhs_dtype).compute, element_type(dtype).compute)
        iout = None
        if out is not None:
            iout = self.as_array(out, "out")
            if host and not iout.host:
                raise TypeError(f"matmul: out is a device array ({type(out).__name__}) but the operands are "
                                f"host arrays: pass a host array (numpy, a CPU tensor)")
            if not host and iout.host and iout.library != "torch":
                raise TypeError(f"matmul: out must be a device array of the {self.runtime.backend} backend "
                                f"(or a tensor), got {type(out).__name__}")
            if iout.host and not iout.array.flags.writeable:   # else found only after the launch, or never (K = 0)
                raise ValueError("matmul: out is read-only")
            check_out(iout.shape, iout.dtype, dtype, shape.out_shape, casting)
        if shape.batch == 0 or shape.m == 0 or shape.n == 0 or shape.k == 0:
            return PreparedCall(shape, dtype, fusion, host, out=iout, like=like, stream=stream)
        lhs = self.operand(ia, lhs_dtype, shape, shape.lhs_vector, lhs=True)
        rhs = self.operand(ib, rhs_dtype, shape, shape.rhs_vector, lhs=False)
        problem = MatmulProblem(shape.batch, shape.m, shape.n, shape.k, element_type(lhs_dtype),
                                element_type(rhs_dtype), element_type(dtype),
                                lhs.view.layout, rhs.view.layout, lhs.align, rhs.align, precision, epilogue)
        return PreparedCall(shape, dtype, fusion, host, lhs, rhs, problem, iout, like, stream, cacheable)

    def as_array(self, x, label) -> Imported:
        return import_array(x, label, self.runtime)

    def dequantized(self, imp: Imported, scale, lhs: bool, shape: CallShape) -> Imported:
        """An operand times its scale in float32 (block scales: scales.py), in its own library:
        torch tensors by torch on their device, everything else through the host."""
        if imp.library == "torch":
            import torch
            return self.as_array(dequantize(imp.original, scale, lhs, shape, torch), "a" if lhs else "b")
        return self.as_array(dequantize(self.host_values(imp), scale, lhs, shape, np), "a" if lhs else "b")

    def scale_operand(self, scale):
        """(device float32 array, stride, copied) of a `scales.Scale` with an array: a vector's
        element stride along its one long axis (0: one value), a block scale's row pitch (its rows
        made contiguous)."""
        if scale is None:
            return None, None, False
        imp = scale.array
        dev, copied = self.device_copy(imp), imp.host
        if dev.dtype != np.float32 or scale.kind == "block" and not dev.flags.c_contiguous:
            dev, copied = self.to_device(np.ascontiguousarray(self.host_values(imp), np.float32)), True
        if scale.kind == "block":
            return dev, dev.strides[0] // dev.dtype.itemsize, copied
        long = [st for n, st in zip(dev.shape, dev.strides) if n > 1]
        if long and long[0] % dev.dtype.itemsize:
            dev, copied = self.runtime.contiguous(dev), True
            long = [dev.dtype.itemsize]
        return dev, (long[0] // dev.dtype.itemsize if long else 0), copied

    @staticmethod
    def storage_dtype(dtype, host):
        # Device libraries may lack bfloat16 and fp8: move their bits, the kernel knows the type.
        bits = bits_dtype(dtype) if host else None
        return bits if bits is not None else dtype

    def to_device(self, host: np.ndarray):
        """A host array on the device in its own dtype (bfloat16 and fp8 as their bits)."""
        return self.runtime.to_device(_bits_view(host))

    def operand(self, imp: Imported, dtype, shape: CallShape, vector: bool, lhs: bool) -> DeviceOperand:
        rt = self.runtime
        if imp.host:
            x, copied = self.to_device(np.asarray(imp.array, dtype=dtype)), True
        elif imp.dtype != dtype:
            x, copied = self.converted(imp, dtype), True
        else:
            x, copied = imp.array, False
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

    def converted(self, imp: Imported, dtype):
        """A device array's values in ``dtype``: on the device, or through the host where a side is
        bfloat16 (held as bits, which a device library would convert as integers)."""
        if bits_dtype(imp.dtype) is not None or bits_dtype(dtype) is not None:
            return self.to_device(self.host_values(imp).astype(dtype))
        return self.runtime.contiguous(imp.array, dtype)

    def host_values(self, imp: Imported) -> np.ndarray:
        """The values of an imported array on the host, in its logical dtype."""
        if imp.host:
            return np.asarray(imp.array)
        host = self.runtime.to_host(imp.array)
        return host.view(imp.dtype) if host.dtype != imp.dtype else host

    def device_copy(self, imp: Imported):
        """A device array holding an imported array in its own dtype (bfloat16 moved as its bits)."""
        if not imp.host:
            return imp.array
        element_type(imp.dtype)  # TypeError naming the supported dtypes
        return self.to_device(np.asarray(imp.array))

    def c_operand(self, c: Imported | None, shape: CallShape):
        """(device array, strides view, copied) for the epilogue's ``c``, read in place where its
        strides describe the broadcast to the output; else copied once, broadcast materialized."""
        if c is None:
            return None, None, False
        copied = c.host
        dev = self.device_copy(c)
        view = c_view(dev.shape, dev.strides, dev.dtype.itemsize, shape)
        if view is None:
            host = np.ascontiguousarray(np.broadcast_to(self.host_values(c), shape.out_shape))
            dev, copied = self.to_device(host), True
            view = c_view(dev.shape, dev.strides, dev.dtype.itemsize, shape)
        return dev, view, copied

    def bias_operand(self, bias: Imported | None):
        """(device array, element stride, copied) for the epilogue's ``bias`` vector."""
        if bias is None:
            return None, None, False
        copied = bias.host
        dev = self.device_copy(bias)
        stride, itemsize = dev.strides[0], dev.dtype.itemsize
        if stride % itemsize:
            dev, copied = self.runtime.contiguous(dev), True
            stride = itemsize
        return dev, stride // itemsize, copied

    # -- results -----------------------------------------------------------------------------------
    def result_target(self, prep: PreparedCall):
        """(array the kernel writes, what the call returns when it has no ``out``): a runtime device
        array, or for a torch caller on the device a tensor of torch's (its memory the kernel writes)."""
        rt = self.runtime
        shape, dtype = prep.shape.out_shape, prep.dtype
        like = prep.like
        if like is not None and not prep.host:
            import torch
            tensor = torch.empty(shape, dtype=numpy_torch_dtype(dtype), device=like.original.device)
            return self.as_array(tensor, "result").array, tensor
        target = rt.empty(shape, self.storage_dtype(dtype, prep.host))
        return target, target

    def k_zero(self, prep: PreparedCall):
        """K = 0: a @ b is zeros, so the result is the epilogue of zeros, computed on the host in
        float64 (nothing to multiply; a kernel would only read c and bias)."""
        shape, dtype, fusion = prep.shape, prep.dtype, prep.fusion
        if fusion.plain:
            return self.empty_result(prep)
        value = np.zeros(shape.out_shape)
        if fusion.c is not None:
            value = value + fusion.beta * self.host_values(fusion.c).astype(np.float64)
        if fusion.bias is not None:
            vec = self.host_values(fusion.bias).astype(np.float64)
            if fusion.bias_axis == 1 or shape.lhs_vector:
                value = value + vec                              # over the output's last axis
            else:
                value = value + (vec[:, None] if not shape.rhs_vector else vec)
        if fusion.activation is not None:
            value = fusion.activation.reference(value)
        return self.deliver(prep, np.asarray(value).astype(dtype))

    def empty_result(self, prep: PreparedCall):
        """The result of a call with nothing to multiply: empty, or zeros when K = 0."""
        return self.deliver(prep, np.zeros(prep.shape.out_shape, prep.dtype))

    def deliver(self, prep: PreparedCall, result: np.ndarray):
        """A host result as the call returns it: into ``out``, or in the caller's library."""
        out = prep.out
        if out is not None:
            if out.host:
                out.array[...] = result
            else:
                values = self.to_device(np.asarray(result).astype(out.dtype))
                self.runtime.copy_into(out.array, values.view(out.array.dtype))
            return out.original
        if prep.host:
            # numpy returns a scalar, not a 0-d array, for vector @ vector.
            return to_library(result[()] if result.ndim == 0 else result, prep.like, self.runtime)
        if prep.like is not None:
            return to_library(result, prep.like, self.runtime).to(prep.like.original.device)
        return self.to_device(result)

    def finish(self, prep: PreparedCall, target, returned, direct: bool):
        """The call's return value once the kernels wrote ``target``."""
        rt, out, dtype = self.runtime, prep.out, prep.dtype
        if prep.host:
            result = rt.to_host(target)
            if result.dtype != dtype:
                result = result.view(dtype)
            if out is None:
                return to_library(result[()] if result.ndim == 0 else result, prep.like, rt)
            out.array[...] = result
            return out.original
        if out is None:
            return returned
        if not direct:
            rt.copy_into(out.array, target)
        return out.original
