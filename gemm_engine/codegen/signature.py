"""One kernel signature: the typed, ordered parameters every kernel of a batch matmul takes.

The batch level owns it (`BatchMatmul.signature`): the operands, the output and the sizes, to which
the epilogue appends its terms and a batch level its workspace. The same object

* renders the C parameter list (`render`), so the kernel text cannot disagree with the host;
* packs a call's values, a mapping from parameter name to value, into the argument tuple the
  runtime launches with (`pack`, or a `Packer` that converts the values fixed for a plan once and
  fills only the changing ones per call);
* says where the arrays are (`positions`), for launches that refill only their addresses.

Parameter kinds: ``array`` (a device array: the runtime's pointer argument), ``index`` (a 64-bit
integer, ``i64``), ``scalar`` (a float32 / float64 value of the epilogue) and ``by_value`` (a
structure of ``size`` bytes passed by value, e.g. a 128-byte TMA tensor map on CUDA, rendered
``__grid_constant__``; its value is a ``bytes`` of that size).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

ARRAY, INDEX, SCALAR, BY_VALUE = "array", "index", "scalar", "by_value"
_SCALARS = {"f32": np.float32, "f64": np.float64}


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    word: str = ""            # array: element storage word; scalar: f32 / f64
    writable: bool = False    # array: the kernel writes it
    size: int = 0             # by_value: bytes
    align: int = 8            # by_value: alignment in bytes

    def render(self, d) -> str:
        if self.kind == ARRAY:
            const = "" if self.writable else "const "
            return f"{const}GLOBAL {d.c_type(self.word)}* RESTRICT {self.name}"
        if self.kind == INDEX:
            return f"i64 {self.name}"
        if self.kind == SCALAR:
            return f"{d.c_type(self.word)} {self.name}"
        if self.kind == BY_VALUE:
            return d.by_value_param(self.name, self.size, self.align)
        raise ValueError(f"parameter {self.name}: unknown kind {self.kind!r}")

    def convert(self, value):
        """The host value as the runtime passes it."""
        if self.kind == INDEX:
            return np.int64(value)
        if self.kind == SCALAR:
            return _SCALARS[self.word](value)
        if self.kind == BY_VALUE:
            data = bytes(value)
            if len(data) != self.size:
                raise ValueError(f"parameter {self.name}: expected {self.size} bytes, got {len(data)}")
            return data
        return value


def array(name: str, word: str, writable: bool = False) -> Param:
    return Param(name, ARRAY, word, writable)


def index(*names: str) -> tuple[Param, ...]:
    return tuple(Param(n, INDEX) for n in names)


def operand_params(prefix: str, word: str, writable: bool = False) -> tuple[Param, ...]:
    """An operand as the kernels take it: base pointer, element offset, leading dimension and batch
    stride (``{prefix}_base``, ``{prefix}_offset``, ``{prefix}_ld``, ``{prefix}_batch_stride``)."""
    return (array(f"{prefix}_base", word, writable),
            *index(f"{prefix}_offset", f"{prefix}_ld", f"{prefix}_batch_stride"))


@dataclass(frozen=True)
class KernelSignature:
    params: tuple[Param, ...] = ()

    def __post_init__(self):
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"kernel signature names {dup} more than once")

    def extended(self, *params: Param) -> "KernelSignature":
        return KernelSignature(self.params + tuple(params))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def render(self, d) -> str:
        """The C parameter list (one parameter a line)."""
        return ",\n    ".join(p.render(d) for p in self.params)

    def positions(self, names) -> tuple[int, ...]:
        order = self.names
        return tuple(order.index(n) for n in names)

    def pack(self, values: Mapping[str, Any]) -> tuple:
        """The argument tuple, in order; KeyError naming what a call did not supply."""
        missing = [p.name for p in self.params if p.name not in values]
        if missing:
            raise KeyError(f"kernel arguments missing: {missing}")
        return tuple(p.convert(values[p.name]) for p in self.params)

    def packer(self, fixed: Mapping[str, Any]) -> "Packer":
        """A `Packer` with the ``fixed`` values converted once; the rest come per call."""
        return Packer(self, fixed)


class Packer:
    """Packs calls of one plan: the fixed values sit in a template, each call fills the others."""

    def __init__(self, signature: KernelSignature, fixed: Mapping[str, Any]):
        self.signature = signature
        #: The fixed values as given (a plan's `call_values` derive from them too).
        self.fixed = dict(fixed)
        self.template = [signature.params[i].convert(fixed[p.name]) if p.name in fixed else None
                         for i, p in enumerate(signature.params)]
        self.changing = tuple((i, p.name, p.convert) for i, p in enumerate(signature.params)
                              if p.name not in fixed)

    @property
    def changing_names(self) -> tuple[str, ...]:
        return tuple(name for _, name, _ in self.changing)

    def pack(self, values: Mapping[str, Any]) -> tuple:
        args = list(self.template)
        for i, name, convert in self.changing:
            args[i] = convert(values[name])
        return tuple(args)
