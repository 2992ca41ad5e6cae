"""`QuantizedExperts`: the quantized weights of a mixture-of-experts layer, one (K, N) weight per
expert in one format, stacked: the ``b`` of `gemm_engine.grouped_matmul`'s contiguous and masked
layouts.

The kernels are the quantized ones (their loaders read packed codes, scales and zeros) under the
grouped batch level, which moves the packed words, scales and zeros to each group's expert by a
stride per array (`WeightFormat.group_params`), as it moves a dense ``b``. The host arrays are the
experts' own with a leading expert axis; one device copy per runtime, as for a `QuantizedWeight`.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from .weight import DeviceWeight, QuantizedWeight, kept_on_device


class QuantizedExperts:
    """E `QuantizedWeight`\\ s of one format and shape, stacked ((E, K, N) as ``b`` of a grouped call).
    Made from a sequence of weights, or by `gemm_engine.quantize` of an (E, K, N) float array."""

    def __init__(self, weights):
        weights = list(weights) if not isinstance(weights, QuantizedWeight) else None
        if not weights or not all(isinstance(w, QuantizedWeight) for w in weights):
            raise TypeError("QuantizedExperts: expected a non-empty sequence of QuantizedWeight (one per expert)")
        first = weights[0]
        for e, w in enumerate(weights):
            for what in ("format", "shape", "ld"):
                if getattr(w, what) != getattr(first, what):
                    raise ValueError(f"QuantizedExperts: expert {e}'s {what} is {getattr(w, what)}, expert 0's "
                                     f"{getattr(first, what)} (the experts of one layer share their format and shape)")
            for what in ("packed", "scales", "zeros"):
                x, x0 = getattr(w, what), getattr(first, what)
                if x is not None and x.shape != x0.shape:
                    raise ValueError(f"QuantizedExperts: expert {e}'s {what} have shape {x.shape}, expert 0's "
                                     f"{x0.shape} (pad them alike)")
        self.format, self.k, self.n, self.ld = first.format, first.k, first.n, first.ld
        self._expert_bytes = first.nbytes
        self.packed = _stacked([w.packed for w in weights])
        self.scales = _stacked([w.scales for w in weights])
        self.zeros = None if first.zeros is None else _stacked([w.zeros for w in weights])
        self._device: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.device_source = None       # as `QuantizedWeight.device_source`

    @property
    def shape(self) -> tuple[int, int, int]:
        return (len(self), self.k, self.n)

    def __len__(self) -> int:
        return self.packed.shape[0]

    def __getitem__(self, e: int) -> QuantizedWeight:
        """Expert ``e``'s weight."""
        return QuantizedWeight(self.format, self.k, self.n, self.packed[e], self.scales[e],
                               None if self.zeros is None else self.zeros[e])

    def dequantize(self, rounded_to=None) -> np.ndarray:
        """The (E, K, N) float32 values the experts stand for (`QuantizedWeight.dequantize`)."""
        return np.stack([self[e].dequantize(rounded_to) for e in range(len(self))])

    @property
    def nbytes(self) -> int:
        return len(self) * self._expert_bytes

    def device(self, runtime) -> DeviceWeight:
        """The experts' stacked arrays on ``runtime``'s device (uploaded on first use, then kept)."""
        return kept_on_device(self, runtime, self._device, self._lock, experts=True)

    def __repr__(self) -> str:
        return f"QuantizedExperts({len(self)} x {self[0]!r})"


def _stacked(arrays) -> np.ndarray:
    out = np.stack(arrays)
    out.flags.writeable = False
    return out


__all__ = ["QuantizedExperts"]
