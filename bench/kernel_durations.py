"""Where a call's device time goes: every kernel an engine call (and torch.matmul; torch._scaled_mm
for fp8) launches, with its duration from CUPTI (torch.profiler), and the stream's span per call, so
launch gaps and extra kernels show apart from the GEMM kernel's own time.

For each shape: ``calls`` back-to-back calls on torch tensors (the engine's default choice, or
``--algorithm``) under the profiler, after a warm-up; prints per kernel name its count and mean
microseconds, then the mean span per call (first kernel start to last kernel end over the calls)
against the mean sum of kernel durations per call. Writes JSON with ``--json``.

The current table, bench/results/<device>/kernel_durations.md, holds one row per problem: the
default choice's kernels against the library's, each from the latest run that measured it. A run
of the default choice (no ``--algorithm``) refreshes the rows of its shapes and keeps the others;
``--markdown PATH`` writes every call of the run (variants too) there instead.

    python3 bench/kernel_durations.py --shapes 2048x2048x2048,4096x4096x4096 --dtype bfloat16
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from datetime import date

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402

#: The current table's columns; the first names the problem (the key a run's rows replace).
COLUMNS = ("problem", "engine kernels", "engine us", "library kernel", "library us", "library / engine",
           "rel err", "date", "arguments")
INTRO = ("CUPTI kernel times (torch.profiler), microseconds per call: the engine's kernels (its default "
         "choice unless the problem says) against the library's (torch.matmul; torch._scaled_mm for fp8). "
         "Each row comes from its own run: `python3 bench/kernel_durations.py ARGUMENTS`.")


def kernels_of(torch, fn, calls: int) -> tuple[list[dict], float]:
    """(per-kernel records, span in microseconds) of ``calls`` calls of ``fn`` under the profiler."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    ks = [e for e in prof.events() if str(e.device_type).endswith("CUDA") and e.time_range.end > e.time_range.start]
    if not ks:
        return [], 0.0
    span = max(e.time_range.end for e in ks) - min(e.time_range.start for e in ks)
    return [{"name": e.name, "us": e.time_range.end - e.time_range.start} for e in ks], span


def summarize(records: list[dict], span: float, calls: int) -> dict:
    by = {}
    for r in records:
        by.setdefault(r["name"], []).append(r["us"])
    kernels = [{"name": n[:90], "count": len(v), "mean_us": sum(v) / len(v)} for n, v in by.items()]
    busy = sum(r["us"] for r in records)
    return {"kernels": kernels, "span_us_per_call": span / calls, "busy_us_per_call": busy / calls}


def _variants(engine, args):
    """(label, algorithm argument) of each engine call measured: the default choice, then each
    ``--variant name=JSON`` (overrides of ``--algorithm``'s selection)."""
    from gemm_engine.algorithms import REGISTRY
    out = [("engine " + (args.algorithm or "default"), args.algorithm)]
    for v in args.variant:
        label, _, knobs = v.partition("=")
        out.append((label, REGISTRY[args.algorithm or "specialized_wgmma"](**json.loads(knobs or "{}"))))
    return out


def _baseline(torch, a, b, kw, args):
    """(name, call) of the library product the engine is measured against: torch.matmul, or for fp8
    operands torch._scaled_mm (cuBLASLt) at the same scales and output dtype, on a column-major copy
    of a row-major b (cuBLASLt reads no other; the copy is made here, not timed). None for block
    scales, which torch._scaled_mm does not take."""
    if not args.dtype.startswith("float8"):
        return "torch.matmul", lambda: torch.matmul(a, b)
    if args.scales == "block":
        return None
    one = torch.ones((), device="cuda")
    sa, sb = kw.get("scale_a", one), kw.get("scale_b", one)
    tdt = getattr(torch, args.out_dtype or "float32")
    cb = b if args.b_layout == "col" else b.t().contiguous().t()
    return "torch._scaled_mm", lambda: torch._scaled_mm(a, cb, sa, sb, out_dtype=tdt)


def problem_label(args, shape, call: str = "engine default") -> str:
    """``bfloat16 4096x4096x4096 b row`` and the options that change the problem (scales, output
    dtype, precision), then the call when it is not the default choice."""
    parts = [args.dtype, "x".join(map(str, shape)), f"b {args.b_layout}"]
    parts += [f"{args.scales} scales"] if args.scales else []
    parts += [f"out {args.out_dtype}"] if args.out_dtype else []
    parts += [args.precision] if args.precision else []
    return " ".join(parts) + ("" if call == "engine default" else f" ({call})")


def row_arguments(command: str, shape) -> str:
    """A run's arguments with ``--shapes`` narrowed to one problem; its variants and output options
    left out (each with every word up to the next option)."""
    try:
        words = shlex.split(command)[2:]
    except ValueError:
        words = command.split()[2:]
    out, dropping = [], False
    for w in words:
        if w.startswith("--"):
            dropping = w.split("=", 1)[0] in ("--shapes", "--variant", "--json", "--markdown", "--table")
        if not dropping:
            out.append(w)
    return shlex.join(out + ["--shapes", "x".join(map(str, shape))])


def table_rows(out: dict, args, when: str, every_call: bool = False) -> dict[str, list[str]]:
    """Rows of a run (``out``, the JSON this tool writes) by problem: the default choice's
    calls only, unless ``every_call`` (variants and ``--algorithm`` calls too)."""
    rows = {}
    for row in out["shapes"]:
        entries = {k: v for k, v in row.items() if isinstance(v, dict)}
        base = next((v for k, v in entries.items() if k.startswith("torch") and "kernels" in v), None)
        for call, e in entries.items():
            if call.startswith("torch") or "kernels" not in e or not (every_call or call == "engine default"):
                continue
            lib = max(base["kernels"], key=lambda kr: kr["count"] * kr["mean_us"]) if base else None
            rows[problem_label(args, row["shape"], call)] = [
                problem_label(args, row["shape"], call),
                "; ".join(f"{kr['name']} x{kr['count'] // max(1, args.calls)}" if kr["count"] > args.calls
                          else kr["name"] for kr in e["kernels"]),
                f"{e['busy_us_per_call']:.1f}", f"`{lib['name']}`" if lib else "",
                f"{base['busy_us_per_call']:.1f}" if base else "",
                f"{base['busy_us_per_call'] / e['busy_us_per_call']:.3f}" if base else "",
                f"{e['rel_err']:.1e}" if "rel_err" in e else "", when, f"`{row_arguments(out['command'], row['shape'])}`"]
    return rows


def parse_rows(text: str) -> dict[str, list[str]]:
    """The rows of a current table's text, by problem."""
    rows = {}
    for line in current_tables.body_of(text).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) == len(COLUMNS) and cells[0] != COLUMNS[0]:
            rows[cells[0]] = cells
    return rows


def markdown(rows: dict[str, list[str]]) -> str:
    lines = [INTRO, "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(rows[k]) + " |" for k in sorted(rows)]
    return "\n".join(lines) + "\n"


def record(out: dict, args, when: str) -> None:
    """The run's rows into the current table (``--markdown PATH``: every call of the run there)."""
    title = "kernel times, the default choice against the library (bench/kernel_durations.py)"
    if args.markdown:
        rows = table_rows(out, args, when, every_call=True)
    elif args.algorithm:
        return      # not the default choice: printed and in --json only
    else:
        rows = {**parse_rows(current_tables.existing(out["device"], args.table)), **table_rows(out, args, when)}
    current_tables.write(args, out["device"], title, "python3 bench/kernel_durations.py ARGUMENTS (a row's)",
                         markdown(rows))


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="2048x2048x2048,4096x4096x4096,8192x8192x8192",
                    help="comma list of MxNxK")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--algorithm", default=None, help="registered algorithm (default: the engine's choice)")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=JSON: also time --algorithm (default specialized_wgmma) with these knobs")
    ap.add_argument("--b-layout", choices=("row", "col"), default="row",
                    help="col: b is the transpose of a contiguous (N, K) tensor (K-major)")
    ap.add_argument("--out-dtype", default=None, help="the engine's out_dtype (fp8 products: float32 unless given)")
    ap.add_argument("--scales", choices=("tensor", "row", "block"), default=None,
                    help="fp8: scale_a / scale_b of this kind (bench/low_precision.py's)")
    ap.add_argument("--precision", default=None, help="the engine's precision (tf32: torch.matmul with TF32 too)")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--json")
    current_tables.add_arguments(ap, "kernel_durations")
    return ap


def main():
    args = parser().parse_args()
    import torch
    import gemm_engine
    engine = gemm_engine.Engine(backend="cuda", background_compile=False)   # the chosen kernel, not a stand-in
    tdt = getattr(torch, args.dtype)
    out = {"device": torch.cuda.get_device_name(),
           "command": current_tables.command_line("kernel_durations.py", sys.argv[1:]), "shapes": []}
    for shape in args.shapes.split(","):
        m, n, k = (int(x) for x in shape.split("x"))
        a = torch.randn(m, k, device="cuda").to(tdt)
        b = torch.randn(k, n, device="cuda").to(tdt) if args.b_layout == "row" else torch.randn(n, k, device="cuda").to(tdt).t()
        kw = {"out_dtype": args.out_dtype} if args.out_dtype else {}
        if args.precision:
            kw["precision"] = args.precision
            torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
        if args.scales:
            from low_precision import dequantized_ref, scales
            kw["scale_a"], kw["scale_b"] = scales(torch, args.scales, m, n, k, torch.Generator(device="cuda"))
            ref = dequantized_ref(torch, a, b, kw["scale_a"], kw["scale_b"], args.scales).float()
        else:
            ref = torch.matmul(a.float(), b.float())
        row = {"shape": [m, n, k], "flops": 2 * m * n * k}
        calls = [(label, (lambda alg=alg: engine.matmul(a, b, algorithm=alg, **kw))) for label, alg in _variants(engine, args)]
        base = _baseline(torch, a, b, kw, args)
        for name, fn in calls + ([base] if base else []):
            try:
                err = float(torch.linalg.norm(fn().float() - ref) / torch.linalg.norm(ref))
            except Exception as exc:  # noqa: BLE001 -- torch has no fp8 matmul: recorded, not fatal
                row[name] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
                print(f"{shape} {name}: {row[name]['error']}")
                continue
            row[name] = {**summarize(*kernels_of(torch, fn, args.calls), args.calls), "rel_err": err}
            s = row[name]
            print(f"{shape} {name}: rel_err {err:.1e}, span {s['span_us_per_call']:.1f} us/call, "
                  f"kernels busy {s['busy_us_per_call']:.1f} us/call")
            for kr in s["kernels"]:
                print(f"    {kr['count']:4d} x {kr['mean_us']:9.2f} us  {kr['name']}")
        out["shapes"].append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    record(out, args, str(date.today()))


if __name__ == "__main__":
    main()
