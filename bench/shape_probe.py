"""Candidate kernels for the sweep's worst rows, all timed in one GPU call, so that the rules can be
picked from one run (issue 28).

For each row (a preset of bench/shape_rows.py rows, the worst rows of a sweep's JSON, or labels):
the engine's default, each rule's algorithm with its own tiling, and the alternatives the tuner
times (every rule algorithm's tuning space: the decode tilings and their split counts, the wave
tiles, the skinny kernel's outputs a unit, split-K counts, ...), dealt round-robin over the
algorithms up to ``--max-candidates``. Each candidate is checked once (sampled rows x columns
against float64, a poisoned output, two calls the same bits: bench/shape_sweep.py `check`), then
every candidate and the library calls are timed in turns (whole calls, CUDA events,
`gemm_engine.runtime.timing.device_times`) and, with ``--cupti``, each kernel's own duration
(torch.profiler: host time apart). The table: per row every candidate sorted by time, its ratio
to the library, the default's place; then per row the best against the default, and their
geometric mean (on the ``random`` preset: how far the default is from an exhaustive tune of rows
no rule was fit on; issue 28 wants it within 5%).

    BENCH_RESULTS=$OUT python3 bench/shape_probe.py --preset decode --json $OUT/probe_decode.json
    BENCH_RESULTS=$OUT python3 bench/shape_probe.py --from $OUT/decode.json --worst 12
    python3 bench/shape_probe.py --list --preset waves                           (no GPU)
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402
import shape_rows  # noqa: E402
import shape_sweep  # noqa: E402
from shape_report import geomean  # noqa: E402
from shape_rows import Row  # noqa: E402

TITLE = "candidate kernels for the shape sweep's rows (bench/shape_probe.py)"


def _linear(kind, t, n, k):
    return Row("llm", "linear", kind, t, n, k, "row", "col", weight=(n, k), tokens=t)


#: The rows each preset probes: where issue 28's rules moved or should move.
PRESETS = {
    # Decode batches: skinny rows (2-8), the specialized decode tiling (9-128), split-K, cuBLAS.
    "decode": ([_linear("bfloat16", t, 4096, 4096) for t in (2, 8, 16, 64, 128)]
               + [_linear("bfloat16", t, 14336, 4096) for t in (8, 64)]
               + [_linear("bfloat16", t, 4096, 14336) for t in (8, 64)]
               + [Row("llm", "rowmajor", "bfloat16", t, 4096, 14336, weight=(4096, 14336), tokens=t) for t in (4, 32)]
               + [_linear("fp8_rowwise", 16, 4096, 4096)]),
    # Wave quantization: squares whose 128 x 256 tiles fill the last wave badly, and 3008^3 (rows of
    # whole 128-byte lines) beside 3000^3 to tell waves from misaligned lines apart.
    "waves": [Row("square", "square", "bfloat16", s, s, s) for s in (1536, 2560, 3000, 3008, 3072, 5120, 6144)],
    # Short and long K, the small squares behind f16 1000^3, tf32 / f32 4096^3.
    "k": [Row("random", "odd", "bfloat16", 5101, 6008, 64), Row("k", "k", "bfloat16", 4096, 4096, 64),
          Row("k", "k", "bfloat16", 8192, 8192, 256), Row("k", "k", "bfloat16", 1024, 1024, 65536),
          Row("k", "k", "bfloat16", 1024, 1024, 262144), Row("k", "k", "bfloat16", 128, 128, 65536)],
    "small": [Row("square", "square", "float16", s, s, s) for s in (768, 1000, 1024)]
             + [Row("square", "square", "float16", 1000, 1000, 1000, "row", "col")],
    "fp32": [Row("square", "square", "tf32", 4096, 4096, 4096), Row("square", "square", "tf32", 4096, 4096, 4096, "row", "col"),
             Row("square", "square", "float32", 4096, 4096, 4096)],
    # The predicted rules on rows no rule was fit on (bench/gpu.sh 'rules', --max-candidates 4): ragged
    # rows (16-byte but not 128-byte lines: no copy TMA needs anyway; 3000^3, which the rule was fit
    # on, the anchor), the default (copy_ragged where the selector predicts the copy pays) against
    # the same tiling the other way; 1024 x 1024 x 65536 in 128 x 128 tiles against 64 x 128.
    "rules": [Row("square", "square", "bfloat16", s, s, s) for s in (2104, 2504, 3000, 4000)]
             + [Row("random", "odd", "float16", 2900, 3500, 1800, "row", "col"),
                Row("random", "odd", "bfloat16", 5000, 3000, 2000, "col", "row"),
                Row("k", "k", "bfloat16", 1024, 1024, 65536)],
    # Held-out rows (no rule was fit on them): the default against the best of the tuning space.
    "random": shape_rows.random_rows(kinds=("bfloat16",))[::3],
}


def rows_for(args) -> list[Row]:
    if args.labels:
        wanted = args.labels.split(";")
        every = shape_rows.all_rows() + [r for rows in PRESETS.values() for r in rows]
        found = {r.label: r for r in every}
        missing = [w for w in wanted if w not in found]
        if missing:
            raise SystemExit(f"--rows: unknown labels {missing} (see --list)")
        return [found[w] for w in wanted]
    if args.from_json:
        records = [r for r in shape_sweep.load(args.from_json)["records"] if r.get("ratio")]
        worst = sorted(records, key=lambda r: r["ratio"])[:args.worst]
        fields = Row.__dataclass_fields__
        return [Row(**{k: (tuple(v) if k == "weight" and v else v) for k, v in r.items() if k in fields}) for r in worst]
    return PRESETS[args.preset]


def focus(problem, dialect) -> list[tuple[str, dict]]:
    """(algorithm, knobs) the probe tries right after each rule's own choice, by the question the row
    asks: decode rows the decode tiles in 1 to 8 parts, the skinny kernel's outputs a unit and
    split-K; other rows the wave tiles (192 x 128, 128 x 256, 128 x 128) whole and split, clusters of
    two sharing the rhs by multicast (cuBLAS's 64 x 128 kernel at f16 1000^3 runs in 2 x 1
    clusters) and 64-row tiles; short K the pipelined kernel's two-slot tiling; first, where rows
    are not whole 128-byte lines, the specialized kernel's own tiling with ``copy_ragged`` the other
    way (the ragged-copy rule's question); from `SMALL_MAX_K`, the 64 x 128 tiles."""
    from gemm_engine.batch.k_major import ragged_operands
    from gemm_engine.selector.specialized_wgmma import (SMALL_MAX_K, pingpong_preset, select_specialized_tiling,
                                                        store_plan)
    from gemm_engine.selector.waves import short_side, streams_weights

    def spec(wm, tn, stages, wn=1, **more):
        plan = store_plan(problem, dialect, 64 * wm, wn * tn, stages)
        return "specialized_wgmma", dict(warpgroups_m=wm, warpgroups_n=wn, tile_n=tn, **plan, **more)
    out = []
    if problem.k >= SMALL_MAX_K and not streams_weights(problem):
        out.append(spec(1, 128, 6))     # the 64 x 128 tiles the default leaves from SMALL_MAX_K
    if ragged_operands(problem) and problem.lhs.itemsize <= 2 and not streams_weights(problem):
        chosen = select_specialized_tiling(problem, dialect)
        out.append(("specialized_wgmma", {**chosen, "copy_ragged": not chosen.get("copy_ragged", False)}))
    if streams_weights(problem):
        rows = short_side(problem)
        if problem.m <= problem.n:
            wm = 1 if rows <= 64 else 2
            shapes = [(wm, 128, 6, 1), (wm, 128, 4, 2)]
        else:
            shapes = [(2, 64 if rows <= 64 else 128, 6, 1)]
        out += [spec(wm, tn, st, wn, dispatch="row_major", split_tail=p) for wm, tn, st, wn in shapes for p in (1, 2, 4, 8)]
        if rows <= 16:
            out += [("skinny", dict(unit_outputs=r)) for r in (1, 2, 4)] + [("skinny", dict(unroll=16))]
        out += [("split_k_wgmma", dict(split_k=s)) for s in (2, 4, 8)]
    else:
        out += [spec(3, 128, 5, split_tail=p) for p in (1, 2)]
        out += [spec(2, tn, st, split_tail=p) for tn, st in ((256, 4), (128, 6)) for p in (1, 2, 4)]
        out += [spec(wm, 128, 6, cluster_m=2) for wm in (1, 2)] + [spec(1, 128, 6)]
        if problem.k <= 256:
            out += [("pipelined_wgmma", dict(warpgroups_m=1, tile_n=128, stages=2, wgmma_pending=0, staged_output=True))]
            # ping-pong: one copy's tile stores while the other's slices run
            out += [("specialized_wgmma", pingpong_preset(problem, dialect, pm, tn)) for pm, tn in ((2, 128), (1, 256))]
    return out


#: Algorithms the probe leaves out for 16-bit and 8-bit rows (register FMA, mma.sync: slower there
#: on every row measured; a compile each).
FALLBACKS = ("simple_unit", "pipelined_mma", "pipelined_dmma", "split_k_unit", "split_k_mma", "double_buffering_unit",
             "specialized_unit", "ordered_unit", "simple_mma", "double_buffering_mma", "simple_wmma", "simple_dmma")


def candidates(engine, problem, limit: int) -> list[tuple[str, object]]:
    """(label, algorithm) of the default's alternatives: each rule's algorithm with its own tiling,
    the `focus` ones, then the tuning spaces dealt round-robin over the algorithms, at most
    ``limit`` in all."""
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.selector.rules import RULES
    from gemm_engine.tuning.space import candidates as tuning_candidates
    dialect, seen, out = engine.dialect, set(), []

    def add(label, alg):
        try:
            cfg = alg.setup(problem, dialect)
        except Exception:  # noqa: BLE001 -- a refusal: not a candidate
            return
        concrete = alg.chosen(cfg)
        key = (concrete.name, repr(cfg.selection))
        if key not in seen:
            seen.add(key)
            out.append((f"{concrete.name} {cfg.selection.describe()}", concrete.with_selection(cfg.selection)))
    exact = problem.lhs.storage in ("f32", "f64")
    for rule in RULES:
        # The register-FMA and mma.sync fallbacks only where they can win (32-bit operands).
        if exact or rule.algorithm not in FALLBACKS:
            add(rule.algorithm, REGISTRY[rule.algorithm]())
    for name, knobs in focus(problem, dialect):
        if len(out) < limit:
            add(name, REGISTRY[name](**knobs))
    by_name = {}
    for alg in tuning_candidates(problem, dialect)[0]:
        if exact or alg.name not in FALLBACKS:
            by_name.setdefault(alg.name, []).append(alg)
    queues = list(by_name.values())
    while queues and len(out) < limit:
        for q in list(queues):
            if not q:
                queues.remove(q)
                continue
            alg = q.pop(0)
            add(alg.name, alg)
            if len(out) >= limit:
                break
    return out[:limit]


def precompile(engine, problem, algorithms) -> None:
    """Build the candidates' kernels at once, a compiler thread a CPU (gemm_engine.compile_ahead
    `kernel_jobs`), before each is checked in turn: one at a time, the builds took most of a row."""
    from gemm_engine.compile_ahead import kernel_jobs
    jobs = []
    for alg in algorithms:
        try:
            jobs += kernel_jobs(engine, problem, alg)
        except Exception:  # noqa: BLE001 -- a refusal: its check reports it
            continue
    try:
        engine.runtime.compile_many(jobs)
    except Exception:  # noqa: BLE001 -- a kernel that fails to build: its check reports which
        pass


def probe_row(torch, cp, engine, row: Row, ops, args, gen) -> dict:
    from gemm_engine.runtime.timing import device_times
    rec = {"label": row.label, "flops": row.flops, "bytes": row.bytes, "memory_bound": row.memory_bound}
    a, b, scales = ops(row)
    options = shape_sweep.engine_options(row, scales)
    torch.backends.cuda.matmul.allow_tf32 = row.kind == "tf32"
    engine.matmul(a, b, **options)
    default_alg, default_cfg = engine.last_choice
    rec["default"] = f"{default_alg.name} {default_cfg.selection.describe()}"
    problem = engine.problem_for(a, b, **{k: v for k, v in options.items() if k not in ("scale_a", "scale_b")})
    fns, entries = {"default": lambda: engine.matmul(a, b, **options)}, {}
    found = candidates(engine, problem, args.max_candidates)
    precompile(engine, problem, [alg for _, alg in found])
    for label, alg in found:
        opts = {**options, "algorithm": alg}
        try:
            status, err = shape_sweep.check(torch, engine, row, a, b, scales, opts, gen)
        except Exception as exc:  # noqa: BLE001 -- a candidate that fails to build or run is a result
            entries[label] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        entries[label] = {"check": status, "rel_err": err}
        if status == "ok":
            fns[label] = (lambda o: lambda: engine.matmul(a, b, **o))(opts)
    base = shape_sweep.baselines(torch, cp, row, a, b, scales)
    times = device_times(engine.runtime, {**fns, **base}, repeat=args.repeat, warmup=3)
    best_base = min(times[n] for n in base)
    rec["baseline_ms"] = best_base * 1e3
    for name, fn in fns.items():
        e = entries.setdefault(name, {"check": "ok"})
        e.update(ms=times[name] * 1e3, ratio=best_base / times[name])
        if args.cupti:
            e["kernel_us"] = kernel_us(torch, fn)
    rec["candidates"] = entries
    timed = {n: e["ms"] for n, e in entries.items() if "ms" in e and n != "default"}
    if timed:
        best = min(timed, key=timed.get)
        rec.update(best=best, best_ms=timed[best], default_ms=entries["default"]["ms"],
                   default_over_best=entries["default"]["ms"] / timed[best])
    return rec


def kernel_us(torch, fn, calls: int = 10) -> float | None:
    """Mean kernel microseconds a call (CUPTI through torch.profiler: every kernel the call launches)."""
    from kernel_durations import kernels_of
    try:
        records, _ = kernels_of(torch, fn, calls)
    except Exception:  # noqa: BLE001 -- the profiler is optional here
        return None
    return sum(r["us"] for r in records) / calls


def markdown(result: dict) -> str:
    rows = result["rows"]
    gaps = [r["default_over_best"] for r in rows if "default_over_best" in r]
    lines = [f"{len(rows)} rows. Per row every candidate, fastest first: whole-call ms (CUDA events, in turns with "
             "the library), kernel us (CUPTI, where measured), ratio = library time / candidate time. "
             f"Default / best candidate, geometric mean: {geomean(gaps) or float('nan'):.3f} (1.0: the default is the "
             "best; issue 28 wants at most 1.05 on the random rows).", "",
             "| row | default | best candidate | default ms | best ms | default / best |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r.get('default', '')} | {r.get('best', '')} | {r.get('default_ms', 0):.4f} | "
                     f"{r.get('best_ms', 0):.4f} | {r.get('default_over_best', float('nan')):.3f} |")
    for r in rows:
        lines += ["", f"### {r['label']} (library {r.get('baseline_ms', float('nan')):.4f} ms)", "",
                  "| candidate | ms | kernel us | ratio | check |", "|---|---|---|---|---|"]
        order = sorted(r.get("candidates", {}).items(), key=lambda kv: kv[1].get("ms", float("inf")))
        for name, e in order:
            if "error" in e:
                lines.append(f"| {name} | | | | failed: {e['error'][:100]} |")
                continue
            k = e.get("kernel_us")
            lines.append(f"| {name if name != 'default' else '**default** ' + r.get('default', '')} | "
                         f"{e.get('ms', float('nan')):.4f} | {'-' if k is None else f'{k:.1f}'} | "
                         f"{e.get('ratio', float('nan')):.3f} | {e.get('check', '')} |")
    return "\n".join(lines) + "\n"


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="decode", choices=sorted(PRESETS))
    ap.add_argument("--rows", dest="labels", default="", help="row labels separated by ';' (shape_sweep --list)")
    ap.add_argument("--from", dest="from_json", help="a shape sweep's JSON: probe its worst rows")
    ap.add_argument("--worst", type=int, default=12, help="with --from: how many of its worst rows")
    ap.add_argument("--max-candidates", type=int, default=14, help="candidates a row besides the default")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--cupti", action=argparse.BooleanOptionalAction, default=True,
                    help="also each candidate's kernel time (torch.profiler)")
    ap.add_argument("--budget", type=float, default=480, help="start no row after this many seconds")
    ap.add_argument("--json")
    ap.add_argument("--list", action="store_true", help="no GPU: the rows")
    ap.add_argument("--smoke", action="store_true", help="no GPU: the rows shrunk, on torch CPU tensors and the OpenCL "
                                                         "engine (PoCL)")
    current_tables.add_arguments(ap, "shape_probe")
    return ap


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    rows = rows_for(args)
    if args.list:
        print("\n".join(r.label for r in rows))
        return
    os.environ["GEMM_ENGINE_CACHE_DIR"] = __import__("tempfile").mkdtemp()
    import torch
    import gemm_engine
    if args.smoke:
        shape_sweep.DEVICE, cp, args.cupti = "cpu", None, False
        engine = gemm_engine.Engine(backend="opencl")
        rows = [shape_rows.shrunk(r) for r in rows]
    else:
        import cupy as cp
        engine = gemm_engine.Engine(backend="cuda", background_compile=False)   # the chosen kernel, not a stand-in
    device = engine.device.name if args.smoke else torch.cuda.get_device_name()
    result = {"device": device, "command": current_tables.command_line("shape_probe.py", argv),
              "rows": [], "not_started": []}
    path = args.json or os.path.join(os.environ.get("BENCH_RESULTS", "."), "shape_probe.json")
    ops, start = shape_sweep.Operands(torch), time.time()
    gen = torch.Generator(device=shape_sweep.DEVICE).manual_seed(7)
    for row in rows:
        if time.time() - start > args.budget:
            result["not_started"].append(row.label)
            continue
        try:
            rec = probe_row(torch, cp, engine, row, ops, args, gen)
        except Exception as exc:  # noqa: BLE001 -- the next row still runs
            rec = {"label": row.label, "error": f"{type(exc).__name__}: {exc}"[:400]}
        result["rows"].append(rec)
        print(f"{time.time() - start:5.0f}s {row.label}: default {rec.get('default_ms', float('nan')):.4f} ms, best "
              f"{rec.get('best', '?')} {rec.get('best_ms', float('nan')):.4f} ms", flush=True)
        shape_sweep.save(path, result)
    history = shape_sweep.first_history(args, result["device"], f"the first run: {len(result['rows'])} rows.")
    current_tables.write(args, result["device"], TITLE, result["command"], markdown(result) + history)
    print(markdown(result).split("\n### ")[0])


if __name__ == "__main__":
    main()
