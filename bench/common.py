"""Helpers the benchmark tools share: device timing, a planned kernel launched without the
frontend, and the 16-bit tensor-core sweep loop and table of bench/sweep_mma_tilings.py and
bench/sweep_wgmma_tilings.py.

Imported by the tools as ``common`` (a script's own folder is first on ``sys.path``). Importing it
needs no GPU: CuPy is loaded only when an engine on the "cuda" backend is created.
"""
from __future__ import annotations

import statistics

import numpy as np

from gemm_engine.dtypes import BFLOAT16, FLOAT16, bfloat16_dtype
from gemm_engine.errors import SetupError
from gemm_engine.views import OperandView, vector_alignment
from gemm_engine.call.arguments import ArrayArgument, CallArguments, output_argument
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.runtime.timing import device_time, time_batch

import current_tables


def events_time(cp, fn, repeat=20, inner=1, warmup=3, sync=None):
    """Median seconds per ``fn()`` on the current CUDA stream: ``warmup`` calls, a sync (``sync``,
    else the current stream's), then ``repeat`` batches of ``inner`` back-to-back calls, each timed
    by a pair of CUDA events (gemm_engine.runtime.timing's sampling)."""
    for _ in range(warmup):
        fn()
    (sync or cp.cuda.get_current_stream().synchronize)()
    return statistics.median(time_batch(None, fn, inner, cp) for _ in range(repeat))


def replayed(torch, fn, calls: int = 20, repeat: int = 9) -> float:
    """Median seconds per ``fn()`` in CUDA-graph replay: ``calls`` back-to-back calls captured in one
    graph (torch's current stream), replayed ``repeat`` times between CUDA events. The device time
    of the calls' kernels, host time removed (as a serving loop under CUDA graphs runs them): for
    calls whose kernels are shorter than their host time, where back-to-back launches time the host."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / calls)
    return statistics.median(times)


class Timer:
    """Median seconds of one ``fn()`` on the engine's device (`gemm_engine.runtime.timing.device_time`,
    one call per sample)."""

    def __init__(self, engine, repeat, warmup=2):
        self.rt, self.repeat, self.warmup = engine.runtime, repeat, warmup

    def __call__(self, fn) -> float:
        return device_time(self.rt, fn, repeat=self.repeat, warmup=self.warmup, min_window=0)


def tiling(cfg) -> str:
    """``128x256x64/256u/S3`` (stage m x n x k, units, and the ring depth of a pipelined global
    level) of a kernel config, plus the split count of a split-K batch level (``/K4``)."""
    g = cfg.batch.global_
    st = g.stage
    stages, splits = getattr(g, "stages", None), getattr(cfg.batch, "splits", None)
    return (f"{st.stage_m}x{st.stage_n}x{st.stage_k}/{cfg.units}u" + (f"/S{stages}" if stages else "")
            + (f"/K{splits}" if splits else ""))


def planned_launch(engine, alg, problem: MatmulProblem, lhs, rhs, out, lhs_view=None, rhs_view=None):
    """(plan, launch): ``alg`` planned for ``problem`` by the engine's planner and a callable that
    runs its kernels on the given device arrays, the arguments packed once (the tuner's way,
    gemm_engine/tuning/tuner.py): the kernel time without the frontend. Views default to
    contiguous row-major (batch, rows, cols) operands. SetupError when ``alg`` refuses."""
    rt, launcher = engine.runtime, engine.launcher
    lhs_view = lhs_view or OperandView(Layout.ROW, problem.k, problem.m * problem.k)
    rhs_view = rhs_view or OperandView(Layout.ROW, problem.n, problem.k * problem.n)
    plan = engine.planner.plan(alg, problem)
    args = CallArguments(*(ArrayArgument(x, (("ld", v.ld), ("batch_stride", v.batch_stride)))
                           for x, v in ((lhs, lhs_view), (rhs, rhs_view))), output_argument(out, problem),
                         problem.m, problem.n, problem.k, problem.batch)
    args = plan.signature.pack(launcher.with_workspace(plan, args.values(rt.ptr_arg)))
    return plan, lambda: launcher.run_packed(plan, args)


def knobs(cfg) -> str:
    """The knobs of the selection a kernel config was set up with that differ from their defaults."""
    sel = cfg.selection
    return sel.describe() if hasattr(sel, "describe") else repr(sel)


# -- the 16-bit tensor-core sweeps ---------------------------------------------------------------
def as_f32(cp, raw, dt):
    """float32 copy of raw 16-bit patterns (a uint16 CuPy array) read as ``dt``."""
    if dt == "bfloat16":
        return (raw.astype(cp.uint32) << 16).view(cp.float32)
    return raw.view(cp.float16).astype(cp.float32)


def sweep(eng, dtypes, shape_names, shapes, make_algs, print_failures=False):
    """Rows of a sweep: for every dtype and shape, cuBLAS (cupy.matmul on float16 data for both
    dtypes) and each (name, algorithm) of ``make_algs()`` on raw 16-bit row-major operands, checked
    against a float32 cuBLAS product of the same inputs (output poisoned first) and timed with CUDA
    events around launches of the planned kernel (`planned_launch`: no frontend): ``call`` from the
    median single launch, ``kern`` from the median over back-to-back batches of 50. Each row records
    the tiling and the knobs that differ from the defaults (``selection``) of what actually ran. A
    refusal or a compile or launch failure is a ``skipped`` row (printed too with
    ``print_failures``)."""
    cp = eng.runtime.cp
    rows = []
    for dt in dtypes:
        et = BFLOAT16 if dt == "bfloat16" else FLOAT16
        npdt = bfloat16_dtype() if dt == "bfloat16" else np.float16
        for sname in shape_names:
            m, n, k = shapes[sname]
            rng = np.random.default_rng(0)
            # Raw 16-bit patterns on the device; the kernel reads them as et.
            a = cp.asarray(rng.standard_normal((m, k)).astype(npdt).view(np.uint16))
            b = cp.asarray(rng.standard_normal((k, n)).astype(npdt).view(np.uint16))
            ref = cp.matmul(as_f32(cp, a, dt), as_f32(cp, b, dt))
            flops = 2.0 * m * n * k
            ha, hb = a.view(cp.float16), b.view(cp.float16)   # cuBLAS times f16 for both dtypes
            t = events_time(cp, lambda: cp.matmul(ha, hb))
            tk = events_time(cp, lambda: cp.matmul(ha, hb), repeat=5, inner=50)
            rows.append(dict(shape=sname, dtype=dt, name="cuBLAS", call=flops / t / 1e12, kern=flops / tk / 1e12))
            lhs_view, rhs_view = OperandView(Layout.ROW, k, m * k), OperandView(Layout.ROW, n, k * n)
            align = (vector_alignment(a.data.ptr // 2, lhs_view, 2), vector_alignment(b.data.ptr // 2, rhs_view, 2))
            problem = MatmulProblem(1, m, n, k, et, et, et, Layout.ROW, Layout.ROW, *align)
            for name, alg in make_algs():
                out = cp.empty((m, n), cp.uint16)
                try:
                    plan, launch = planned_launch(eng, alg, problem, a, b, out, lhs_view, rhs_view)
                    out.fill(0x7e00)   # NaN in f16, a large value in bf16: poisoned
                    launch()
                    cp.cuda.get_current_stream().synchronize()
                except SetupError as exc:
                    rows.append(dict(shape=sname, dtype=dt, name=name, skipped=str(exc)[:90]))
                    continue
                except Exception as exc:  # a compile or launch failure: report, go on
                    rows.append(dict(shape=sname, dtype=dt, name=name, skipped=f"{type(exc).__name__}: {exc}"[:300]))
                    if print_failures:
                        print(rows[-1], flush=True)
                    continue
                err = float(cp.linalg.norm(as_f32(cp, out, dt) - ref) / cp.linalg.norm(ref))
                tk = events_time(cp, launch, repeat=5, inner=50)
                t = events_time(cp, launch)
                rows.append(dict(shape=sname, dtype=dt, name=name, call=flops / t / 1e12, kern=flops / tk / 1e12,
                                 err=err, tiling=tiling(plan.config), algorithm=plan.algorithm.name,
                                 selection=knobs(plan.config)))
                print(rows[-1], flush=True)
    return rows


def print_sweep_table(rows, vs_cublas=False, skipped_width=None):
    """The sweep's markdown table; ``vs_cublas`` adds each row's 50-launch ratio to cuBLAS's."""
    cublas = {(r["shape"], r["dtype"]): r["kern"] for r in rows if r["name"] == "cuBLAS"}
    ratio_head, ratio_rule, ratio_gap = (" vs cuBLAS |", "---|", " |") if vs_cublas else ("", "", "")
    print(f"| shape | dtype | impl | tiling | TFLOP/s 1 launch | TFLOP/s 50 launches |{ratio_head} err vs f32 |")
    print(f"|---|---|---|---|---|---|{ratio_rule}---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['shape']} | {r['dtype']} | {r['name']} | skipped: {r['skipped'][:skipped_width]} "
                  f"| | |{ratio_gap} |")
            continue
        err = f"{r['err']:.1e}" if r.get("err") is not None else ""
        ratio = f" {r['kern'] / cublas[(r['shape'], r['dtype'])]:.2f} |" if vs_cublas else ""
        print(f"| {r['shape']} | {r['dtype']} | {r['name']} | {r.get('tiling', '')} | {r['call']:.0f} | "
              f"{r['kern']:.0f} |{ratio} {err} |")


# -- the H100 row tools (bench/hopper_gemm.py, bench/low_precision.py) ---------------------------------
def row_tool_parser(doc: str, rows_help: str, table: str):
    """The options every row tool takes: --repeat, --rows, --check-only, --json, and where its
    table goes (`current_tables.add_arguments`: --table, default ``table``; --markdown)."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--rows", default="", help=rows_help)
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--json")
    current_tables.add_arguments(ap, table)
    return ap


def row_tool_session(script: str, argv: list[str]):
    """(engine, torch, cupy, result) for a row tool on CUDA with an empty tuning cache (the
    default choice), ``result`` holding the device's name and the command line."""
    import os
    import tempfile
    os.environ["GEMM_ENGINE_CACHE_DIR"] = tempfile.mkdtemp()
    import cupy as cp
    import torch
    import gemm_engine
    engine = gemm_engine.Engine(backend="cuda", background_compile=False)   # the chosen kernel, not a stand-in
    result = {"device": torch.cuda.get_device_name(), "command": current_tables.command_line(script, argv)}
    return engine, torch, cp, result


def checks_line(checks: list[dict]) -> str:
    """``Checks first: N ok, M failed, R refused.`` of a row tool's checks."""
    refused = sum("refused" in c for c in checks)
    failed = sum(not c["ok"] for c in checks if "refused" not in c)
    return f"Checks first: {len(checks) - refused - failed} ok, {failed} failed, {refused} refused."


def write_row_tool_outputs(args, result: dict, markdown, title: str) -> None:
    """The JSON file (everything) a run asked for and its current table (the checks' count, then
    the rows: `current_tables.write`), the table printed last; ``markdown(rows, device)`` renders it."""
    import json
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if "rows" not in result:
        return
    table = checks_line(result.get("checks", [])) + "\n\n" + markdown(result["rows"], result["device"])
    current_tables.write(args, result["device"], title, result["command"], table)
    print(table)


# -- the torch layer tools (bench/grouped_swiglu.py, bench/quantized_backward.py, bench/moe_layer.py) ----
def torch_rows_main(doc: str, script: str, table: str, title: str, rows: list, run_row, markdown, worst,
                    make_engine, argv=None) -> int:
    """A tool that times ``rows`` on CUDA through torch: --repeat, --json and the table options;
    each row ``run_row(torch, engine, *row, repeat)`` (``engine = make_engine()``, made after the
    options are read) (a failure recorded, the run going on), the
    JSON and the current table written (``markdown(records)``); 1 where a row failed or
    ``worst(record)`` (its check's error) is above 2e-2 (3e-2 where the tool's check allows it)."""
    import argparse
    import json
    from datetime import date
    import torch
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--json", help="write the rows here")
    current_tables.add_arguments(p, table)
    args = p.parse_args(argv)
    command = current_tables.command_line(script, argv if argv is not None else __import__("sys").argv[1:])
    records, engine = [], make_engine()
    for row in rows:
        try:
            records.append(run_row(torch, engine, *row, args.repeat))
        except Exception as exc:  # noqa: BLE001 -- recorded, the run goes on
            records.append({"row": str(row[0]), "failed": f"{type(exc).__name__}: {str(exc)[:200]}"})
            print(records[-1], flush=True)
        torch.cuda.empty_cache()
    device = engine.device.name
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "date": str(date.today()), "rows": records}, f, indent=1)
    text = markdown(records)
    current_tables.write(args, device, title, command, text)
    print(text)
    return 1 if any("failed" in r or worst(r) for r in records) else 0


def rows_table(intro: str, header: list[str], records: list[dict], cells) -> str:
    """A markdown table after ``intro``: ``header``'s columns, one line per record (``cells(record)``
    its cells after the row's name; a failed record's error in the second column)."""
    lines = [intro, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in records:
        row = [str(r["row"])] + ([f"FAILED {r['failed'][:120]}"] + [""] * (len(header) - 2) if "failed" in r
                                 else list(cells(r)))
        lines.append("| " + " | ".join(map(str, row)) + " |")
    return "\n".join(lines) + "\n"
