"""The fast paths: repeated calls on device arrays with the same metadata skip the checks and setup.

Everything the general path's checks and choices depend on is in a call's key (shapes, strides,
dtypes, alignment, the options); a key seen before maps to the `CallPlan` (call/launch.py) its first
call left, whose per-call values (call/arguments.py: the addresses, and a fused call's epilogue
values) go straight into the prepared launch. Two kinds of call take it: torch CUDA tensors (their
addresses, torch's allocator and stream; an ``out`` tensor too, whose metadata joins the key) and
the runtime's own arrays. Anything else, an ``out`` that overlaps an input, or an unhashable option
takes the general path. Grouped calls without ``out``
(`FastPath.grouped`) take it too, plain or fused, their offsets or counts a per-call array beside
the operands (quantized experts named weakly), and calls of a quantized weight
(`FastPath.quantized`), whose key names the weight weakly.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

from .arguments import EpilogueInputs
from ..quant.experts import QuantizedExperts
from ..quant.weight import QuantizedWeight
from ..tensors import torch_stream
from .launch import TORCH_KEY, CallPlan, Launcher

#: A grouped call's key's mark (after TORCH_KEY where the call is on torch tensors).
GROUPED_KEY = object()


def _torch_address(x) -> tuple[int, int]:
    """A torch tensor's (pointer, element offset), its data pointer already including the offset;
    an address already taken (an int) as it is."""
    return (x, 0) if type(x) is int else (x.data_ptr(), 0)


def _torch_bytes(x) -> tuple[int, int]:
    """[start, end) of the bytes a torch tensor's elements occupy (torch strides are not negative)."""
    start = x.data_ptr()
    if x.numel() == 0:
        return start, start
    last = sum((n - 1) * s for n, s in zip(x.shape, x.stride()))
    return start, start + (last + 1) * x.element_size()


def _torch_overlap(out, a, b, inputs: EpilogueInputs | None) -> bool:
    """Whether ``out`` shares bytes with an input (``c`` may be ``out`` itself: each element is read
    before the same thread writes it)."""
    lo, hi = _torch_bytes(out)
    others = [a, b] if inputs is None else [a, b, *(x for i, x in enumerate(inputs[2:])
                                                    if hasattr(x, "data_ptr") and not (i == 0 and x is out))]
    for x in others:
        start, end = _torch_bytes(x)
        if start < hi and lo < end:
            return True
    return False


def _fused_key(key, array_meta, inputs: EpilogueInputs, c_at_out: bool = False):
    """The call key extended by the epilogue's metadata (``array_meta(x)``: an array argument's,
    None where the fast path cannot take it), or None (general path) when an option is not a plain
    number or such an array. Number scales fold into alpha (call/arguments.py `epilogue_values`).
    ``c_at_out``: c starts where ``out`` does; with beta 1 the plan may add into ``out`` without
    reading c (call/prepare.py `_accumulating`), which a c elsewhere must not reuse."""
    alpha, beta, *arrays = inputs
    if type(alpha) not in (float, int) or type(beta) not in (float, int, type(None)):
        return None
    meta, factor = [], 1.0
    for i, x in enumerate(arrays):
        if x is None:
            meta.append(None)
        elif i in (2, 3) and type(x) in (float, int):      # scale_a / scale_b given as a number
            meta.append("number")
            factor *= x
        else:
            meta.append(array_meta(x))
            if meta[-1] is None:
                return None
    return key + (alpha * factor == 1, None if beta is None else beta == 0, c_at_out and beta == 1, *meta)


class FastPath:
    """The call plans of one engine, and the two fast calls that use them."""

    def __init__(self, runtime, launcher: Launcher, plans: OrderedDict, lock=None):
        self.runtime, self.launcher = runtime, launcher
        #: Call key -> `CallPlan`: the engine's, filled from its general calls (launch.py `remember`).
        self.plans = plans
        self.lock = lock if lock is not None else threading.Lock()
        #: torch's tensor type, once a call has seen one (the torch path's test; no import).
        self.torch_type = None
        self.torch = None

    def _torch(self):
        """torch, kept once a call has seen a tensor (an import statement on every call costs)."""
        import torch
        self.torch = torch
        return torch

    def call(self, a, b, out, inputs: EpilogueInputs | None, options: tuple):
        """(key, None) when the call must take the general path (``key``: where its call plan goes,
        or None when it cannot have one), else (key, (result, plan))."""
        rt = self.runtime
        tensor = self.torch_type
        if type(b) is QuantizedWeight:
            return self.quantized(a, b, out, inputs, options)
        if tensor is not None and type(a) is tensor and type(b) is tensor and (out is None or type(out) is tensor):
            # torch tensors: the metadata is the key, the addresses go straight in.
            pa, pb = a.data_ptr(), b.data_ptr()
            # One tuple, options nested: built and hashed on every call (a 64^3 call's budget).
            key = (TORCH_KEY, options, a.shape, a.stride(), a.dtype, a.get_device(), pa % 16, b.shape, b.stride(),
                   b.dtype, b.get_device(), pb % 16)
            if out is not None:
                if _torch_overlap(out, a, b, inputs):
                    return None, None      # the general path computes through a temporary
                key += ("out", out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr() % 16)
            if inputs is not None:
                key = _fused_key(key, self._torch_meta, inputs, out is not None and type(inputs.c) is tensor
                                 and inputs.c.data_ptr() == out.data_ptr())
            try:
                call = self.plans.get(key)
            except TypeError:  # an unhashable argument: the general path reports it
                return key, None
            return key, (None if call is None else self._torch_call(call, a, pa, pb, inputs, out=out))
        if not (rt.is_native(a) and rt.is_native(b)):
            return None, None
        key = options + (a.shape, a.strides, a.dtype, rt.element_address(a) % 8, b.shape, b.strides, b.dtype,
                         rt.element_address(b) % 8,
                         None if out is None else (type(out), out.shape, out.strides, out.dtype, rt.element_address(out) % 16))
        if inputs is not None:
            key = _fused_key(key, self._native_meta, inputs, out is not None and rt.is_native(inputs.c)
                             and rt.byte_span(inputs.c)[:2] == rt.byte_span(out)[:2])
        call = self._cached(key)
        return key, (None if call is None else self._native_call(call, a, b, out, inputs))

    def quantized(self, a, weight: QuantizedWeight, out, inputs: EpilogueInputs | None, options: tuple):
        """`call` with a quantized weight as ``b``: the key names the weight by a weak reference (a
        weight that dies matches no later call, and its plan holds none of its memory); its
        packed words, scales and zeros on this device (`QuantizedWeight.device`, made by the first
        call) are per-call values."""
        rt, tensor = self.runtime, self.torch_type
        ref = weakref.ref(weight)
        if tensor is not None and type(a) is tensor and out is None:
            pa = a.data_ptr()
            key = (TORCH_KEY, ref) + options + (a.shape, a.stride(), a.dtype, a.get_device(), pa % 16)
            if inputs is not None:
                key = _fused_key(key, self._torch_meta, inputs)
            call = self._cached(key)
            if call is None:
                return key, None
            arrays = weight.device(rt)
            addresses = [None if x is None else x.data.ptr for x in (arrays.packed, arrays.scales, arrays.zeros)]
            return key, self._torch_call(call, a, pa, addresses[0], inputs, weight=addresses[1:])
        if not rt.is_native(a):
            return None, None
        key = (ref,) + options + (a.shape, a.strides, a.dtype, rt.element_address(a) % 8,
                                  None if out is None else (type(out), out.shape, out.strides, out.dtype, rt.element_address(out) % 16))
        if inputs is not None:
            key = _fused_key(key, self._native_meta, inputs)
        call = self._cached(key)
        if call is None:
            return key, None
        arrays = weight.device(rt)
        return key, self._native_call(call, a, arrays.packed, out, inputs, weight=(arrays.scales, arrays.zeros))

    def grouped(self, a, b, groups, options: tuple, inputs: EpilogueInputs | None = None):
        """`call` for a grouped call without ``out``: ``groups`` (its offsets or counts) is a per-call
        array whose metadata joins the key, as a fused call's epilogue arrays do (``inputs``: a
        per-group bias, the routing weights as ``row_scale``...). Quantized experts as ``b`` are
        named by a weak reference, as `quantized` names a weight, their device arrays per-call values."""
        rt, tensor = self.runtime, self.torch_type
        experts = type(b) is QuantizedExperts
        if tensor is not None and type(a) is tensor and type(groups) is tensor and (experts or type(b) is tensor):
            if groups.get_device() != a.get_device():
                return None, None    # offsets on the host for device operands: the general path moves them
            pa, pg = a.data_ptr(), groups.data_ptr()
            operands = ((a, pa), (groups, pg)) if experts else ((a, pa), (b, b.data_ptr()), (groups, pg))
            key = (TORCH_KEY, GROUPED_KEY) + ((weakref.ref(b),) if experts else ()) + options + tuple(
                m for x, p in operands for m in (x.shape, x.stride(), x.dtype, x.get_device(), p % 16))
            if inputs is not None:
                key = _fused_key(key, self._torch_meta, inputs)
            call = self._cached(key)
            if call is None:
                return key, None
            if not experts:
                return key, self._torch_call(call, a, pa, operands[1][1], inputs, pg)
            arrays = b.device(rt)
            addresses = [None if x is None else x.data.ptr for x in (arrays.packed, arrays.scales, arrays.zeros)]
            return key, self._torch_call(call, a, pa, addresses[0], inputs, pg, weight=addresses[1:])
        if not (rt.is_native(a) and rt.is_native(groups) and (experts or rt.is_native(b))):
            return None, None
        native = (a, groups) if experts else (a, b, groups)
        key = (GROUPED_KEY,) + ((weakref.ref(b),) if experts else ()) + options + tuple(
            m for x in native for m in (x.shape, x.strides, x.dtype, rt.element_address(x) % 8))
        if inputs is not None:
            key = _fused_key(key, self._native_meta, inputs)
        call = self._cached(key)
        if call is None:
            return key, None
        if not experts:
            return key, self._native_call(call, a, b, None, inputs, groups)
        arrays = b.device(rt)
        return key, self._native_call(call, a, arrays.packed, None, inputs, groups, weight=(arrays.scales, arrays.zeros))

    def _cached(self, key):
        try:
            return self.plans.get(key) if key is not None else None
        except TypeError:  # an unhashable argument: the general path reports it
            return None

    def _torch_meta(self, x):
        """The key's metadata of an epilogue array that is a torch tensor (else None)."""
        return (x.shape, x.stride(), x.dtype, x.get_device()) if type(x) is self.torch_type else None

    def _native_meta(self, x):
        return (x.shape, x.strides, x.dtype) if self.runtime.is_native(x) else None

    def _torch_call(self, call: CallPlan, a, pa: int, pb: int, inputs: EpilogueInputs | None, pg: int | None = None,
                    weight=(), out=None):
        """A repeated call on torch CUDA tensors (``pa``, ``pb``: their addresses; ``pg``: a grouped
        call's offsets' or counts'; ``weight``: a quantized weight's scales' and zeros'): a result
        tensor of torch's (or ``out``, written in place: its key says the plan writes it directly),
        the per-call values (the epilogue's arrays' too), torch's current stream."""
        torch = self.torch if self.torch is not None else self._torch()
        plan = call.plan
        device = a.get_device()
        if out is not None:
            target = out
        elif call.groups == "masked":     # a masked grouped result starts as zeros (call/arguments.py `result_target`)
            target = torch.zeros(call.out_shape, dtype=call.torch_dtype(), device=device)
        else:
            # A CUDA tensor's device as its index: torch reads an int as that CUDA device, without
            # the torch.device object ``a.device`` builds on every call; empty_strided parses less
            # than empty.
            target = torch.empty_strided(call.out_shape, call.out_strides, dtype=call.torch_dtype(), device=device)
        stream = torch_stream(torch, device)
        pt = target.data_ptr()
        more = call.direct_values(inputs, pg, _torch_address, weight)
        if call.direct and call.direct(pa, pb, pt, *more, stream=stream):
            return target, plan
        with self.runtime.on_stream(stream):
            args = call.pack(self.launcher, pa, pb, pt, inputs, _torch_address, pg, weight)
            if call.direct is None:
                call.direct = self.launcher.prepare_direct(plan, args, call.packer.fixed, call.direct_names)
            self.launcher.run_packed(plan, args)
        return target, plan

    def _fresh(self, call: CallPlan):
        """A repeated call's result array on the runtime (zeros for a masked grouped call's)."""
        target = self.runtime.empty(call.out_shape, call.dtype)
        if call.groups == "masked":
            self.runtime.fill_zero(target)
        return target

    def _native_call(self, call: CallPlan, a, b, out, inputs: EpilogueInputs | None, groups=None, weight=()):
        """A repeated call on the runtime's arrays; None when ``out`` overlaps an input (the general
        path computes through a temporary, as numpy computes as if the inputs were copied first)."""
        rt = self.runtime
        plan = call.plan
        if call.direct and out is None and groups is None:
            # Only the per-call values change between calls (runtime/cuda_launch.py, `PreparedLaunch`).
            target = self._fresh(call)
            if call.direct(a, b, target, *call.direct_values(inputs, groups, rt.ptr_arg, weight)):
                return target, plan
        terms = {} if inputs is None else {
            name: x for name, x in (("c", inputs.c), ("bias", inputs.bias), ("scale_a", inputs.scale_a),
                                    ("scale_b", inputs.scale_b), ("row_scale", inputs.row_scale))
            if x is not None and type(x) not in (float, int)}
        if groups is not None:
            terms["groups"] = groups
        if out is not None and any(rt.may_overlap(out, x) for name, x in (("a", a), ("b", b), *terms.items())
                                   if not (x is out and name == "c")):
            return None
        rt.order_after(a=a, b=b, out=out, **terms)   # the key holds shapes, not queues
        target = out if out is not None else self._fresh(call)
        args = call.pack(self.launcher, a, b, target, inputs, rt.ptr_arg, groups, weight)
        if call.direct is None and groups is None:
            # The plan's first fast call prepares its direct launch (only the first: a plan the
            # runtime cannot prepare keeps False); the general path and the tuner never pay for it.
            call.direct = self.launcher.prepare_direct(plan, args, call.packer.fixed, call.direct_names)
        self.launcher.run_packed(plan, args)
        rt.after_launch(target, (a, b, *terms.values()))
        return target, plan

