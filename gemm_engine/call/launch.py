"""The launch step: a plan's kernels run with one call's arguments, packed by the plan's signature.

`Launcher.run` takes a call's `CallArguments` (call/arguments.py), names their values as the
signature's parameters are named, adds the workspace the plan needs, packs them in signature order
and runs the kernels in order.

Repeated calls with the same metadata (shapes, strides, dtypes, alignment) go through a `CallPlan`:
its `Packer` holds every argument that cannot change between such calls already converted, so a
call fills only the per-call values (`CallArguments.per_call_names`: the addresses, and a fused
call's epilogue values); on CUDA a plan goes further, straight to ``cuLaunchKernel`` with a
parameter block of its own (runtime/cuda_launch.py) that gets only those values per call.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..batch.base import KEPT_SCRATCH
from ..codegen.signature import BY_VALUE, Packer
from ..dtypes import device_dtype
from ..runtime.tensor_map import readdressed
from ..tensors import numpy_torch_dtype
from .arguments import (EPILOGUE_NAMES, GROUP_NAMES, WEIGHT_NAMES, EpilogueInputs, epilogue_values,
                        per_call_values)
from .plan import Plan


#: Call plans kept per engine (call/fast.py), least recently used first out.
CALL_PLANS_MAX = 1024
#: The first item of a torch call's key (no option can equal it).
TORCH_KEY = object()


def remember(fast, call_key, plan: Plan, args, values: dict, arrays, prepared, target) -> None:
    """Keep a general call's `CallPlan` in the fast path's plans (call/fast.py `FastPath`) under the
    key it gave the call (None: none), where its repeats find it; and let it know torch's tensor
    type from a call on torch tensors. A stand-in's plan is not kept: the call after its build
    plans again. The launch step's last act: the call goes on to deliver."""
    request = prepared.request
    keep = (call_key is not None and plan.stands_in_for is None and not prepared.copied
            and (request.out is None or target.direct)
            and (arrays.like is not None) == (call_key[0] is TORCH_KEY))
    if keep:
        groups = request.groups.layout if request.groups is not None else None
        call = CallPlan.make(plan, values, args.per_call_names(), request.shape.out_shape, request.dtype,
                             args.fused, groups)
        with fast.lock:
            fast.plans[call_key] = call
            if len(fast.plans) > CALL_PLANS_MAX:   # bounded: a process with ever new shapes
                fast.plans.popitem(last=False)
    if arrays.like is not None and fast.torch_type is None:
        # From now on torch tensors are recognized by type (no torch import): their repeated calls
        # take the fast path.
        fast.torch_type = type(arrays.like.original)


def kept_shape(plan: Plan):
    """(count, dtype, zeroed) of the plan's kept scratch (`Runtime.kept_scratch`), or None."""
    kept = plan.kept
    return None if kept is None else (kept.count, device_dtype(kept.element), kept.zeroed)


def _address_int(x: int) -> tuple[int, int]:
    """An address given as an int: itself, at element offset 0."""
    return x, 0


class Launcher:
    def __init__(self, runtime):
        self.runtime = runtime

    def with_workspace(self, plan: Plan, values: dict, fixed: dict | None = None) -> dict:
        """``values`` plus a fresh workspace where the plan needs one, and the parameters the plan
        derives per call (`Plan.call_values`: TMA tensor maps) from ``values`` and the values
        ``fixed`` for a call plan."""
        if plan.workspace is not None:    # first: derived values may point into it
            scratch = self.runtime.scratch(plan.workspace.count, device_dtype(plan.workspace.element))
            values = {**values, "workspace": self.runtime.ptr_arg(scratch)[0]}
        if plan.kept is not None:
            count, dtype, zeroed = kept_shape(plan)
            kept = self.runtime.kept_scratch(count, dtype, zeroed=zeroed)
            values = {**values, KEPT_SCRATCH: self.runtime.ptr_arg(kept)[0]}
        if plan.call_values is not None:
            values = {**values, **plan.call_values.derive({**fixed, **values} if fixed else values)}
        return values

    def prepare_direct(self, plan: Plan, args: tuple, fixed: dict, more: tuple[str, ...] = ()):
        """The launches with only the three addresses new (`CallPlan.direct`), and the parameters
        ``more`` (a fused call's epilogue values), on a runtime that offers prepared launches: one
        prepared launch for a one-kernel plan with nothing derived per call, else `DirectLaunches`
        (a fresh workspace, per-call derived values, several kernels). False otherwise."""
        arrays = ("lhs_base", "rhs_base", "out_base") + more + (("workspace",) if plan.workspace is not None else ()) \
            + ((KEPT_SCRATCH,) if plan.kept is not None else ())
        positions = plan.signature.positions(arrays)
        prepared = [self.runtime.prepare_launch(launch.kernel, launch.cubes, launch.units, args,
                                                launch.shared_bytes, positions, launch.co_resident)
                    for launch in plan.launches]
        if not prepared or not all(prepared):
            return False
        if len(prepared) == 1 and plan.workspace is None and plan.call_values is None and plan.kept is None:
            return prepared[0]
        return DirectLaunches(prepared, plan, fixed, self.runtime).direct()

    def run(self, plan: Plan, values: dict) -> None:
        """Launch ``plan`` with a call's values by name (`CallArguments.values`)."""
        self.run_packed(plan, plan.signature.pack(self.with_workspace(plan, values)))

    def run_packed(self, plan: Plan, args: tuple) -> None:
        for launch in plan.launches:
            self.runtime.launch_converted(launch.kernel, launch.cubes, launch.units, args, launch.shared_bytes,
                                          launch.co_resident)


class DirectLaunches:
    """The prepared launches of a plan, in order, with what they need per call: a fresh workspace
    (allocated on the call's stream, so the pool reuses it only after these kernels) and the
    by-value parameters derived from the addresses (TMA tensor maps: derived once per (lhs, rhs,
    out, workspace) address tuple, a call plan's other values being fixed, and kept for the last
    few; a new tuple's readdressed from the first one's where that was seen to give the same
    maps), so a repeated call costs a lookup and a few 128-byte copies on top of the prepared
    launches' address refills, at new addresses too."""

    PAIRS = 16

    def __init__(self, prepared: list, plan: Plan, fixed: dict, runtime=None):
        self.launches, self.fixed, self.runtime = list(prepared), dict(fixed), runtime
        self.derive = plan.call_values.derive if plan.call_values is not None else None
        self.workspace = plan.workspace
        self.kept = kept_shape(plan)
        self.names = [p.name for p in plan.signature.params if p.kind == BY_VALUE]
        self._structs: OrderedDict = OrderedDict()
        #: The first address pair's parameters, and whether readdressing them gives another pair's
        #: (None: not yet seen; checked once, against a full derivation).
        self._first, self._readdress = None, None
        #: The one launch where a call needs nothing but its maps (`direct`), else None.
        self._one = self.launches[0] if (len(self.launches) == 1 and self.derive is not None
                                         and self.workspace is None and self.kept is None) else None

    def _derived(self, key: tuple, scratch: tuple) -> list:
        """The by-value parameters for the addresses ``key``: the first pair's maps readdressed
        (runtime/tensor_map.py `readdressed`) once a second pair has shown that gives what a full
        derivation gives; else derived in full."""
        if self._readdress and self._first is not None:
            found = readdressed(self._first[1], self._first[0], key)
            if found is not None:
                return found
        values = {**self.fixed, **per_call_values(*key[:3], None, _address_int),
                  **({"workspace": key[3]} if scratch else {})}
        derived = self.derive(values)
        structs = [derived[n] for n in self.names]
        if self._first is None:
            self._first = (key, structs)
        elif self._readdress is None:
            self._readdress = readdressed(self._first[1], self._first[0], key) == structs
        return structs

    def _scratch(self, stream) -> tuple:
        if self.workspace is None:
            return ()
        rt = self.runtime
        with rt.on_stream(stream):
            return (rt.scratch(self.workspace.count, device_dtype(self.workspace.element)),)

    def direct(self):
        """What a call plan launches with (`CallPlan.direct`): the one prepared launch itself where a
        call needs nothing but its maps (it looks them up in this object's cache, deriving missing
        ones through it: `PreparedLaunch.derived`), else this object. This wrapper's frame (scratch,
        keys, a loop, keyword star-calls) cost about 1 us a call on an H200's host, what made a TMA
        kernel's call dearer than a pipelined one's (bench/SELECTION_NOTES.md, "One wave of 64 x 128
        tiles")."""
        if self._one is None or not hasattr(self._one, "derived"):
            return self
        self._one.derived = (self._structs, lambda key: self._remember(key, ()))
        return self._one

    def __call__(self, a, b, out, *more, stream=None) -> bool:
        scratch = self._scratch(stream)
        structs = None
        if self.derive is not None:
            if type(a) is int and type(b) is int and type(out) is int and not scratch:
                key = (a, b, out)          # torch's path: addresses already
            else:
                key = tuple(x if type(x) is int else x.data.ptr for x in (a, b, out, *scratch))
            structs = self._structs.get(key)
            if structs is None:
                structs = self._remember(key, scratch)
        kept = ()
        if self.kept is not None:
            count, dtype, zeroed = self.kept
            kept = (self.runtime.kept_scratch(count, dtype, zeroed=zeroed, stream=stream),)
        # Only the first can refuse (another device current), before anything is launched.
        for launch in self.launches:
            if not launch(a, b, out, *more, *scratch, *kept, stream=stream, structs=structs):
                return False
        return True

    def _remember(self, key: tuple, scratch: tuple) -> list:
        """The by-value parameters of a new address tuple, kept for the last `PAIRS` tuples."""
        structs = self._structs[key] = self._derived(key, scratch)
        if len(self._structs) > self.PAIRS:
            self._structs.popitem(last=False)
        return structs


@dataclass
class CallPlan:
    """A plan with the arguments of one kind of call fixed: only the per-call values change between
    its calls (`CallArguments.per_call_names`)."""

    plan: Plan
    packer: Packer
    out_shape: tuple
    dtype: np.dtype
    fused: bool                  # the epilogue takes arguments (alpha, c, bias...) per call
    #: The parameters set per call (`CallArguments.per_call_names`).
    per_call: frozenset = frozenset()
    #: ``direct(a, b, out, *fused_values) -> bool``: the launch with only the per-call values new
    #: (CUDA; prepared by the plan's first fast call; False where it cannot be); False when it
    #: cannot launch now. A grouped call's ``direct(a, b, out, groups_base, groups_offset)``.
    direct: object = None
    #: A grouped call's layout ("offsets" or "masked": its fresh result starts as zeros), else None.
    groups: str | None = None

    def __post_init__(self):
        #: The result's contiguous strides in elements, as torch.empty gives them (the torch fast
        #: path allocates by empty_strided: it parses less).
        strides, step = [], 1
        for n in reversed(self.out_shape):
            strides.append(step)
            step *= max(n, 1)
        self.out_strides = tuple(reversed(strides))

    @classmethod
    def make(cls, plan: Plan, values: dict, per_call, out_shape, dtype, fused: bool,
             groups: str | None = None) -> "CallPlan":
        """Everything of ``values`` (a call's, by name) but the ``per_call`` names
        (`CallArguments.per_call_names`) is fixed: c's strides, bias's and the scales' strides too."""
        changing = set(per_call) | {"workspace"}
        if plan.call_values is not None:
            changing |= set(plan.call_values.names)
        fixed = {k: v for k, v in values.items() if k not in changing}
        return cls(plan, plan.signature.packer(fixed), out_shape, dtype, fused, frozenset(per_call), groups=groups)

    @property
    def fused_names(self) -> tuple[str, ...]:
        """The kernel parameters a fused call sets per call besides the three addresses, in
        signature order (found once per call plan: this runs on every fused call)."""
        cached = self.__dict__.get("_fused")
        if cached is None:
            # The epilogue's per-call values: not the operands' addresses, nor what the launch adds
            # itself (a workspace, kept scratch, derived tensor maps).
            per_call = self.per_call & EPILOGUE_NAMES
            cached = self.__dict__["_fused"] = tuple(p.name for p in self.plan.signature.params
                                                     if self.fused and p.name in per_call)
        return cached

    @property
    def weight_names(self) -> tuple[str, ...]:
        """A quantized rhs's scale and zero parameters (per call: the call plan names its weight
        weakly, call/fast.py), in signature order; () for other calls."""
        return tuple(n for n in WEIGHT_NAMES if n in self.per_call)

    @property
    def direct_names(self) -> tuple[str, ...]:
        """The parameters `direct` takes after the three addresses: a fused call's epilogue values,
        a grouped call's offsets or counts, a quantized weight's scales and zeros."""
        return self.fused_names + (GROUP_NAMES if self.groups is not None else ()) + self.weight_names

    def direct_values(self, inputs: EpilogueInputs | None, groups, address, weight=()) -> list:
        """The values of `direct_names` for one call (``groups``: a grouped call's array;
        ``weight``: a quantized weight's (scales, zeros), as `per_call_values` takes them)."""
        values = self.fused_values(inputs, address) if self.fused else []
        if self.groups is not None:
            values += address(groups)
        for x in weight:
            if x is not None:
                values += address(x)
        return values

    def fused_values(self, inputs: EpilogueInputs, address) -> list:
        """A fused call's epilogue values in the order of `fused_names` (`direct`'s arguments after
        the three addresses), as Python numbers and arrays: the prepared launch encodes each for
        its parameter (runtime/cuda_launch.py, `slot_encoder`)."""
        values = epilogue_values(inputs, address)
        return [values[name] for name in self.fused_names]

    def torch_dtype(self):
        """The result's torch dtype (looked up once per call plan: the torch fast path's budget is
        microseconds)."""
        cached = self.__dict__.get("_torch_dtype")
        if cached is None:
            cached = self.__dict__["_torch_dtype"] = numpy_torch_dtype(self.dtype)
        return cached

    def pack(self, launcher: Launcher, a, b, target, inputs: EpilogueInputs | None, address, groups=None,
             weight=()) -> tuple:
        """The argument tuple of a repeated call (``address(x)``: an array's (kernel argument,
        element offset); ``groups``, ``weight``: as `per_call_values` takes them)."""
        values = per_call_values(a, b, target, inputs if self.fused else None, address, groups, weight)
        return self.packer.pack(launcher.with_workspace(self.plan, values, self.packer.fixed))
