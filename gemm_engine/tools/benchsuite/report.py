"""Suite results as a text table, markdown, JSON and a PNG plot.

Times are shown in milliseconds; ``ratio`` is the native baseline's time over the engine's (the
engine's speed relative to the library named in ``vs``; > 1: the engine is faster) and
``default/tuned`` the default call's time over the tuned choice's (> 1: tuning helped).
"""
from __future__ import annotations

import math
from datetime import date

from ...version import __version__, extra_hint

#: Version of the JSON layout `to_json` writes.
FORMAT = "gemm_engine.tools.benchsuite/1"


def _g(value, digits=4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _ms(seconds) -> str:
    return "-" if seconds is None else _g(seconds * 1e3)


def _baseline_names(results) -> list[str]:
    return list(dict.fromkeys(name for r in results for name in r.baselines))


def _tuned(results) -> bool:
    return any(r.tuned_s is not None or r.tune_note for r in results)


def _err(r) -> str:
    if r.error is None:
        return "-"
    return f"{r.error:.1e}" + ("" if r.ok else " FAIL")


def _grid(results):
    """(header, rows of cells): a measured row has one cell per column; a skipped or failed row has
    three (name, dtype, the reason), laid out across the remaining columns."""
    names = _baseline_names(results)
    head = ["row", "dtype", "algorithm", "ms", "TFLOP/s", "rel err"] + [f"{n} ms" for n in names] + ["ratio", "vs"]
    if _tuned(results):
        head += ["tuned ms", "tuned algorithm", "default/tuned"]
    body = []
    for r in results:
        if r.skipped or r.failure:
            body.append([r.row.name, r.row.label, f"skipped: {r.skipped}" if r.skipped else f"FAILED: {r.failure}"])
            continue
        cells = [r.row.name, r.row.label, r.algorithm or "-", _ms(r.engine_s), _g(r.tflops, 3), _err(r)]
        cells += [_ms(r.baselines.get(n)) for n in names]
        cells += [_g(r.ratio, 3), r.native or "-"]
        if _tuned(results):
            cells += [_ms(r.tuned_s), r.tuned_algorithm or "-", _g(r.tuned_speedup, 3)]
        body.append(cells)
    return head, body


def _notes(results) -> list[str]:
    """Each distinct (baseline, note) once, with the rows it concerns."""
    seen: dict = {}
    for r in results:
        for name, note in r.baseline_notes.items():
            seen.setdefault((name, note), []).append(r.row.key)
        if r.tune_note:
            seen.setdefault(("tuning", r.tune_note), []).append(r.row.key)
    return [f"{name}: {note} ({len(keys)} row{'s' if len(keys) > 1 else ''}: {', '.join(keys[:4])}"
            f"{', ...' if len(keys) > 4 else ''})" for (name, note), keys in seen.items()]


def table(results) -> str:
    """A fixed-width text table of ``results``, then the baselines' notes."""
    head, body = _grid(results)
    full = [head] + [c for c in body if len(c) == len(head)]
    widths = [max(len(c[i]) for c in full) for i in range(len(head))]
    out = []
    for cells in [head] + body:
        if len(cells) == len(head):
            out.append("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
        else:
            out.append("  ".join(c.ljust(w) for c, w in zip(cells[:2], widths)) + "  " + cells[2])
    notes = _notes(results)
    if notes:
        out += ["", "notes:"] + [f"  {n}" for n in notes]
    return "\n".join(out)


def line(r) -> str:
    """One result on one line (progress output)."""
    if r.skipped or r.failure:
        return f"{r.row.key}: " + (f"skipped: {r.skipped}" if r.skipped else f"FAILED: {r.failure}")
    base = ", ".join(f"{n} {_ms(s)} ms" for n, s in r.baselines.items() if s is not None)
    tuned = f", tuned {r.tuned_algorithm} {_ms(r.tuned_s)} ms" if r.tuned_s is not None else ""
    return (f"{r.row.key}: {r.algorithm} {_ms(r.engine_s)} ms {_g(r.tflops, 3)} TFLOP/s err {_err(r)}"
            f"{' | ' + base if base else ''}{tuned}")


def markdown(results, header: str) -> str:
    """A markdown document: ``header`` as its title, the table, the notes."""
    head, body = _grid(results)
    out = [f"# {header}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cells in body:
        if len(cells) < len(head):
            cells = cells + [""] * (len(head) - len(cells))
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    out += ["", "ms: median of the timed calls; ratio: the `vs` library's time / the engine's (> 1: the "
            "engine is faster); rel err: relative Frobenius error against a float64 reference."]
    notes = _notes(results)
    if notes:
        out += ["", "Notes:", ""] + [f"* {n}" for n in notes]
    return "\n".join(out) + "\n"


def _finite(x):
    return x if x is None or math.isfinite(x) else None


def _ms_or_none(seconds):
    return None if seconds is None else seconds * 1e3


def result_dict(r) -> dict:
    """One result as plain JSON data (times in milliseconds)."""
    row = r.row
    return {"name": row.name, "group": row.group, "batch": row.batch, "m": row.m, "n": row.n, "k": row.k,
            "dtype": row.dtype, "precision": row.precision, "label": row.label, "fused": row.fused,
            "flops": row.flops, "engine_ms": _ms_or_none(r.engine_s), "tflops": r.tflops,
            "algorithm": r.algorithm, "tiling": r.tiling, "rel_error": _finite(r.error), "ok": r.ok,
            "baselines_ms": {n: _ms_or_none(s) for n, s in r.baselines.items()},
            "baseline_notes": dict(r.baseline_notes), "native": r.native, "ratio": r.ratio,
            "tuned_ms": _ms_or_none(r.tuned_s), "tuned_algorithm": r.tuned_algorithm,
            "tune_note": r.tune_note, "tuned_speedup": r.tuned_speedup,
            "skipped": r.skipped, "failure": r.failure}


def to_json(results, device_info: dict, *, repeat=None, warmup=None, suite=None) -> dict:
    """JSON-ready data: the device facts (see `runner.device_info`), the run's settings and every
    row with its baselines."""

    data = {"format": FORMAT, "date": date.today().isoformat(), "gemm_engine": __version__}
    data.update(device_info)
    data.update({"suite": suite, "repeat": repeat, "warmup": warmup,
                 "rows": [result_dict(r) for r in results]})
    return data


def plot(results, path) -> None:
    """A PNG at ``path``: TFLOP/s per row, the engine beside its native baseline (and the tuned
    choice when tuned), one panel per dtype. Needs matplotlib (imported here, not before)."""
    try:
        from matplotlib.figure import Figure   # no pyplot: no global backend or display state
    except ImportError as exc:
        raise RuntimeError(f"plot needs the matplotlib package: {extra_hint('plot', 'matplotlib')}") from exc
    measured = [r for r in results if r.engine_s]
    if not measured:
        raise ValueError("plot: no measured rows to draw")
    labels = list(dict.fromkeys(r.row.label for r in measured))
    widest = max(sum(r.row.label == lab for r in measured) for lab in labels)
    fig = Figure(figsize=(max(6.0, 0.9 * widest + 2), 3.6 * len(labels)))
    tuned = _tuned(measured)
    for i, lab in enumerate(labels):
        ax = fig.add_subplot(len(labels), 1, i + 1)
        rows = [r for r in measured if r.row.label == lab]
        tflops = lambda s, r: r.row.flops / s / 1e12 if s else 0.0  # noqa: E731
        series = [("gemm_engine", [r.tflops for r in rows])]
        natives = sorted({r.native for r in rows if r.native})
        series.append((f"native ({'/'.join(natives) or 'none'})",
                       [tflops(r.baselines.get(r.native) if r.native else None, r) for r in rows]))
        if tuned:
            series.append(("gemm_engine tuned", [tflops(r.tuned_s, r) for r in rows]))
        width = 0.8 / len(series)
        for j, (name, values) in enumerate(series):
            ax.bar([x + (j - (len(series) - 1) / 2) * width for x in range(len(rows))], values, width, label=name)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([r.row.name for r in rows], rotation=30, ha="right", fontsize=8)
        drawn = [v for _, values in series for v in values if v]
        if drawn and max(drawn) > 100 * min(drawn):   # skinny rows beside square ones: a log axis
            ax.set_yscale("log")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(lab)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
