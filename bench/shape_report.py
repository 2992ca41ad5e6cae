"""The shape sweep's report (bench/shape_sweep.py): geometric means, the worst rows, a histogram of
the ratios, issue 28's speed targets met or not, and the table of every row. Plain functions of the
sweep's result records (dicts, as its JSON holds them); no GPU.

A record: the `shape_rows.Row` fields, then ``choice`` (the default's algorithm and tiling), ``ms``,
``baseline`` (the faster library call's name) and ``baseline_ms``, ``ratio`` (baseline time over
the engine's: > 1, the engine is faster), ``check`` ("ok", or what failed), or ``error`` where the
row could not run.
"""
from __future__ import annotations

import math

#: Histogram bins of the ratio: (upper bound, label).
BINS = ((0.5, "< 0.5"), (0.8, "0.5-0.8"), (0.9, "0.8-0.9"), (0.95, "0.9-0.95"), (1.0, "0.95-1.0"),
        (1.05, "1.0-1.05"), (1.2, "1.05-1.2"), (2.0, "1.2-2"), (math.inf, ">= 2"))


def timed(records) -> list[dict]:
    """The records with a ratio (measured against a baseline)."""
    return [r for r in records if r.get("ratio")]


def geomean(values) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def tbs(r: dict) -> float | None:
    """TB/s of a memory-bound row (its least bytes over the engine's time), else None."""
    return r["bytes"] / r["ms"] / 1e9 if r.get("memory_bound") and r.get("ms") else None


def _is(r, **fields) -> bool:
    return all(r.get(k) in (v if isinstance(v, tuple) else (v,)) for k, v in fields.items())


def _square(r, sizes, kinds=("bfloat16", "float16")) -> bool:
    return r["group"] == "square" and r["kind"] in kinds and r["m"] in sizes


#: Issue 28's speed targets: (what, the rows, how the ratios are folded, the bound).
TARGETS = (
    ("every row", lambda r: True, "min", 0.95),
    ("geometric mean, all rows", lambda r: True, "geomean", 1.10),
    ("geometric mean, LLM projections", lambda r: r["group"] == "llm", "geomean", 1.05),
    ("M <= 128, weights >= 32 MB", lambda r: r["group"] == "llm" and 0 < r["tokens"] <= 128
     and r["form"] != "wgrad" and r.get("weight_bytes", 0) >= 32e6, "min", 1.05),
    ("M <= 128, weights >= 32 MB: TB/s", lambda r: r["group"] == "llm" and 0 < r["tokens"] <= 128
     and r["form"] != "wgrad" and r.get("weight_bytes", 0) >= 32e6, "min TB/s", 2.6),
    ("squares 1536-7168 (bf16, f16)", lambda r: r["group"] == "square" and r["kind"] in ("bfloat16", "float16")
     and 1536 <= r["m"] <= 7168, "min", 1.0),
    ("bf16 / f16 4096^3 and 6144^3", lambda r: _square(r, (4096, 6144)), "min", 1.05),
    ("bf16 / f16 8192^3", lambda r: _square(r, (8192,)), "min", 1.02),
    ("K <= 256 at M, N >= 4096", lambda r: r["group"] == "k" and r["k"] <= 256 and min(r["m"], r["n"]) >= 4096,
     "min", 1.0),
    ("K >= 65536 at 1024 x 1024", lambda r: r["group"] == "k" and r["k"] >= 65536 and r["m"] == r["n"] == 1024,
     "min", 1.0),
    ("f16 1000^3", lambda r: _square(r, (1000,), ("float16",)), "min", 1.0),
    ("tf32 4096^3", lambda r: _square(r, (4096,), ("tf32",)), "min", 0.95),
    ("f32 4096^3", lambda r: _square(r, (4096,), ("float32",)), "min", 0.95),
)


def targets(records) -> list[tuple[str, int, float | None, float, bool | None]]:
    """(what, rows, value, bound, met) per target; value and met None where no row was measured."""
    rows = timed(records)
    out = []
    for what, pick, fold, bound in TARGETS:
        chosen = [r for r in rows if pick(r)]
        if fold == "min TB/s":
            values = [tbs(r) for r in chosen if tbs(r)]
            value = min(values) if values else None
        else:
            ratios = [r["ratio"] for r in chosen]
            value = (min(ratios) if ratios else None) if fold == "min" else geomean(ratios)
        out.append((what, len(chosen), value, bound, None if value is None else value >= bound))
    return out


def histogram(records) -> list[tuple[str, int]]:
    counts = [0] * len(BINS)
    for r in timed(records):
        counts[next(i for i, (hi, _) in enumerate(BINS) if r["ratio"] < hi)] += 1
    return [(label, c) for (_, label), c in zip(BINS, counts)]


def groups_of(records) -> list[tuple[str, int, float | None]]:
    """(group / kind, rows, geometric mean) for each group, each kind, each LLM form."""
    rows = timed(records)
    keys = ([("group", g) for g in dict.fromkeys(r["group"] for r in rows)]
            + [("kind", k) for k in dict.fromkeys(r["kind"] for r in rows)]
            + [("form", f) for f in dict.fromkeys(r["form"] for r in rows if r["group"] == "llm")])
    out = []
    for field, value in keys:
        chosen = [r["ratio"] for r in rows if r[field] == value and (field != "form" or r["group"] == "llm")]
        out.append((f"{field} {value}", len(chosen), geomean(chosen)))
    return out


def _f(value, fmt) -> str:
    return "-" if value is None else format(value, fmt)


def row_line(r: dict) -> str:
    if "error" in r:
        return f"| {r['label']} | {r.get('choice', '')} | failed: {r['error'][:120]} | | | | | | |"
    tflops = r["flops"] / r["ms"] / 1e9 if r.get("ms") else None
    return (f"| {r['label']} | {r.get('choice', '')} | {_f(r.get('ms'), '.4f')} | {_f(tflops, '.1f')} | "
            f"{_f(tbs(r), '.2f')} | {r.get('baseline', '')} | {_f(r.get('baseline_ms'), '.4f')} | "
            f"{_f(r.get('ratio'), '.3f')} | {r.get('check', '')} |")


def markdown(records, worst: int = 25) -> str:
    rows = timed(records)
    failed = [r for r in records if "error" in r or (r.get("check") not in (None, "ok"))]
    lines = [f"{len(records)} rows, {len(rows)} timed, {len(failed)} failed or wrong. Ratio = the faster of "
             "torch.matmul / cupy.matmul (fp8: torch._scaled_mm) over the engine's default call (empty tuning "
             "cache; > 1: the engine is faster); TB/s of memory-bound rows (least bytes over the time).", "",
             "### Targets (issue 28)", "", "| target | rows | value | bound | met |", "|---|---|---|---|---|"]
    for what, n, value, bound, met in targets(records):
        lines.append(f"| {what} | {n} | {_f(value, '.3f')} | {bound} | {'-' if met is None else 'yes' if met else 'no'} |")
    lines += ["", "### Geometric means", "", "| rows | count | geomean |", "|---|---|---|",
              f"| all | {len(rows)} | {_f(geomean(r['ratio'] for r in rows), '.3f')} |"]
    lines += [f"| {name} | {n} | {_f(g, '.3f')} |" for name, n, g in groups_of(records)]
    lines += ["", "### Histogram of the ratios", "", "| ratio | rows |", "|---|---|"]
    lines += [f"| {label} | {c} |" for label, c in histogram(records)]
    lines += ["", f"### The {worst} worst rows", "", *_head()]
    lines += [row_line(r) for r in sorted(rows, key=lambda r: r["ratio"])[:worst]]
    if failed:
        lines += ["", "### Failed or wrong", "", *_head()] + [row_line(r) for r in failed]
    lines += ["", "### Every row", "", *_head()] + [row_line(r) for r in records]
    return "\n".join(lines) + "\n"


def _head() -> list[str]:
    return ["| row | choice | ms | TFLOP/s | TB/s | baseline | baseline ms | ratio | check |",
            "|---|---|---|---|---|---|---|---|---|"]
