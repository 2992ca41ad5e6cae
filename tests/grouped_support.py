"""Shared by the grouped-call tests: routings (counts per group), float64 references of every grouped
layout, with the epilogue terms grouped_matmul takes."""
from __future__ import annotations

import numpy as np


def routing(rng, groups: int, tokens: int, kind: str = "random") -> np.ndarray:
    """Counts per group summing to ``tokens``: "random" (some empty), "one" (every token in one
    group), "balanced", "skewed" (half the tokens in one group)."""
    if kind == "one":
        counts = np.zeros(groups, np.int64)
        counts[groups // 2] = tokens
        return counts
    if kind == "balanced":
        return np.diff(np.linspace(0, tokens, groups + 1).round().astype(np.int64))
    if kind == "skewed":
        rest = np.diff(np.linspace(0, tokens - tokens // 2, groups).round().astype(np.int64))
        return np.concatenate([[tokens // 2], rest])
    cuts = np.sort(rng.integers(0, tokens + 1, groups - 1))
    return np.diff(np.concatenate([[0], cuts, [tokens]])).astype(np.int64)


def _f64(x):
    return None if x is None else np.asarray(x, np.float64)


def epilogue(acc, rows, g, alpha=1.0, bias=None, bias_axis=-1, activation=None, row_scale=None, c=None, beta=1.0):
    """``act(alpha * acc + beta * c + bias) * row_scale`` for the output rows ``rows`` (indices
    into the per-row terms as the layout indexes them) of group ``g`` (half the columns for
    "swiglu")."""
    out = alpha * acc
    if c is not None:
        out = out + beta * c
    if bias is not None:
        b = _f64(bias)
        if bias_axis in (-1, 1):
            out = out + (b[g] if b.ndim == 2 else b)
        else:
            out = out + (b[g][rows] if b.ndim == 2 else b[rows])[:, None]
    if activation == "relu":
        out = np.maximum(out, 0)
    elif activation == "silu":
        out = out / (1 + np.exp(-out))
    elif activation == "swiglu":         # gate and up interleaved: columns 2j and 2j + 1
        gate, up = out[:, 0::2], out[:, 1::2]
        out = gate / (1 + np.exp(-gate)) * up
    if row_scale is not None:
        r = _f64(row_scale)
        out = out * (r[g][rows] if r.ndim == 2 else r[rows])[:, None]
    return out


def _width(n: int, terms: dict) -> int:
    """The output's columns for a GEMM of ``n`` under the epilogue ``terms``."""
    return n // 2 if terms.get("activation") == "swiglu" else n


def contiguous_ref(x, w, counts, **terms) -> np.ndarray:
    x, w = _f64(x), _f64(w)
    out = np.zeros((x.shape[0], _width(w.shape[-1], terms)))
    lo = 0
    for g, n in enumerate(counts):
        rows = np.arange(lo, lo + n)
        c = None if terms.get("c") is None else _f64(terms["c"])[rows]
        out[rows] = epilogue(x[rows] @ w[g], rows, g, **{**terms, "c": c})
        lo += n
    return out


def masked_ref(x, w, counts, out=None, **terms) -> np.ndarray:
    x, w = _f64(x), _f64(w)
    groups, cap = x.shape[:2]
    result = np.zeros((groups, cap, _width(w.shape[-1], terms))) if out is None else _f64(out).copy()
    for g in range(groups):
        n = int(min(max(counts[g], 0), cap))
        rows = np.arange(n)
        c = None if terms.get("c") is None else np.broadcast_to(_f64(terms["c"]), result.shape)[g, :n]
        result[g, :n] = epilogue(x[g, :n] @ w[g], rows, g, **{**terms, "c": c})
    return result


def k_ref(a, b, counts, **terms) -> np.ndarray:
    a, b = _f64(a), _f64(b)
    out = np.zeros((len(counts), a.shape[0], _width(b.shape[1], terms)))
    lo = 0
    for g, n in enumerate(counts):
        out[g] = epilogue(a[:, lo:lo + n] @ b[lo:lo + n], np.arange(a.shape[0]), g, **terms)
        lo += n
    return out


def count_general_calls(monkeypatch) -> list:
    """A list that grows by one for each call that takes the engine's general path (its import step)."""
    import gemm_engine.engine as engine_module
    seen, real = [], engine_module.import_call
    monkeypatch.setattr(engine_module, "import_call", lambda *a, **kw: seen.append(1) or real(*a, **kw))
    return seen


def device_arrays(engine, kind: str):
    """(put, get): numpy arrays to the call's array kind ("device": the runtime's own, "torch": CUDA
    tensors, skipped elsewhere) and results back to numpy."""
    import pytest
    if kind == "torch":
        torch = pytest.importorskip("torch")
        if engine.device.backend != "cuda":
            pytest.skip("torch tensors reach the device in place on CUDA only (elsewhere through the host)")
        return (lambda x: torch.from_numpy(x).cuda()), (lambda y: y.cpu().numpy())
    return engine.runtime.to_device, engine.runtime.to_host
