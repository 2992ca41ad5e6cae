"""The public shape sweep (issue 28): every shape a model runs, the engine's default choice against
the faster of torch.matmul and cupy.matmul (fp8 rowwise: torch._scaled_mm), on an H100.

The rows (bench/shape_rows.py): LLM projections at every token count in nn.Linear's layout,
row-major and the weight-gradient layout; squares 256-8192; K from 16 to 262144; seeded random
sizes, aligned and odd; bf16 and f16, with fp8-rowwise, tf32 and f32 subsets. For each row, on
torch CUDA tensors with an empty tuning cache:

1. the default call once; the first row of each distinct kernel (algorithm and config) is checked:
   output poisoned with NaN, every element written and finite, sampled rows x columns against a
   float64 product (relative Frobenius error under the kind's tolerance), a second call the same
   bits (no kernel reduces in an order that changes between runs);
2. the default call and the library calls timed by CUDA events in turns after a warm-up (median,
   short calls in back-to-back batches: `gemm_engine.runtime.timing.device_times`);
3. a record: the choice, ms, TFLOP/s, TB/s where memory-bound, the ratio (library time over ours).

The report (bench/shape_report.py): issue 28's targets, geometric means, the worst rows, a
histogram, every row. One run fits a device call: ``--subset`` (bench/shape_rows.py `SUBSETS`),
``--part i/n`` and ``--budget`` seconds (rows not started by then are listed, and ``--resume`` of the
same JSON runs them next time). Each run writes its JSON after every row (a killed run keeps what
it measured) and its own table; ``--merge`` joins the JSON of several runs into the current table,
bench/results/<device>/shape_sweep.md, with no GPU.

    BENCH_RESULTS=$OUT python3 bench/shape_sweep.py --subset decode --json $OUT/decode.json
    python3 bench/shape_sweep.py --merge decode.json shapes.json llm.json        (here, no GPU)
    python3 bench/shape_sweep.py --list --subset all                             (rows and an estimate)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402
import shape_report  # noqa: E402
import shape_rows  # noqa: E402
from shape_rows import Row  # noqa: E402

TITLE = "the public shape sweep, default choice against cuBLAS (bench/shape_sweep.py)"
#: Relative Frobenius error allowed per kind (bf16 / fp8 rowwise: bf16 outputs).
TOLERANCE = {"bfloat16": 2e-2, "float16": 5e-3, "fp8_rowwise": 2e-2, "tf32": 5e-3, "float32": 1e-4}
#: Rows and columns of the output checked against float64 (all of them on smaller outputs).
SAMPLE = 48
#: Where the operands live: "cuda", or "cpu" for ``--smoke`` (the engine on OpenCL, no CuPy).
DEVICE = "cuda"


# -- operands -------------------------------------------------------------------------------------------
def torch_dtype(torch, kind):
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "fp8_rowwise": torch.float8_e4m3fn,
            "tf32": torch.float32, "float32": torch.float32}[kind]


def operand(torch, kind, batch, rows, cols, layout, gen):
    """A (batch, rows, cols) tensor (2-D when batch is 1) in ``layout``: "col" is the transposed view
    of a row-major (cols x rows) array. Normal values (fp8: scaled into e4m3's range)."""
    shape = (cols, rows) if layout == "col" else (rows, cols)
    x = torch.randn(((batch,) if batch > 1 else ()) + shape, generator=gen, device=DEVICE)
    x = (x * 2 if kind == "fp8_rowwise" else x).to(torch_dtype(torch, kind))
    return x.transpose(-1, -2) if layout == "col" else x


class Operands:
    """The operands of each row; an LLM row's weight is kept for the next row of the same weight
    and form (the rows come in that order), so each is made once per token sweep."""

    def __init__(self, torch, seed: int = 0):
        self.torch, self.gen, self.kept = torch, torch.Generator(device=DEVICE).manual_seed(seed), {}

    def __call__(self, row: Row):
        torch, g = self.torch, self.gen
        if row.group == "llm" and row.form != "wgrad":
            key = (row.kind, row.form, row.weight)
            if key not in self.kept:
                # Only the weights of this kind and size (its two forms) stay.
                self.kept = {k: v for k, v in self.kept.items() if k[::2] == key[::2]}
                self.kept[key] = operand(torch, row.kind, 1, row.k, row.n, row.b_layout, g)
            b = self.kept[key]
        else:
            b = operand(torch, row.kind, row.batch, row.k, row.n, row.b_layout, g)
        a = operand(torch, row.kind, row.batch, row.m, row.k, row.a_layout, g)
        scales = {}
        if row.kind == "fp8_rowwise":
            scales = dict(scale_a=torch.rand(row.m, 1, generator=g, device=DEVICE) + 0.5,
                          scale_b=torch.rand(1, row.n, generator=g, device=DEVICE) + 0.5)
        return a, b, scales


def engine_options(row: Row, scales: dict) -> dict:
    if row.kind == "tf32":
        return {"precision": "tf32"}
    if row.kind == "fp8_rowwise":
        import ml_dtypes
        return {**scales, "out_dtype": ml_dtypes.bfloat16}
    return {}


def baselines(torch, cp, row: Row, a, b, scales) -> dict:
    """{name: call} of the library products the row is measured against."""
    if row.kind == "fp8_rowwise":
        return {"torch._scaled_mm": lambda: torch._scaled_mm(a, b, scales["scale_a"], scales["scale_b"],
                                                              out_dtype=torch.bfloat16)}
    out = {"torch.matmul": lambda: torch.matmul(a, b)}
    if cp is not None and row.kind in ("float16", "float32"):   # CuPy: no bfloat16; tf32 a process setting
        ca, cb = cp.from_dlpack(a), cp.from_dlpack(b)
        out["cupy.matmul"] = lambda: cp.matmul(ca, cb)
    return out


def reference(torch, row: Row, a, b, scales, rows, cols):
    """float64 product of the sampled ``rows`` x ``cols`` of the output (every batch entry)."""
    a64, b64 = a[..., rows, :].double(), b[..., :, cols].double()
    if scales:
        a64 = a64 * scales["scale_a"][rows].double()
        b64 = b64 * scales["scale_b"][:, cols].double()
    return a64 @ b64


def bits(torch, x):
    """``x``'s elements as integers of its width (equal exactly where the bits are)."""
    words = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return x.contiguous().view(words[x.element_size()])


def check(torch, engine, row: Row, a, b, scales, options, gen) -> tuple[str, float | None]:
    """("ok" or what is wrong, relative error) of the default call: poisoned output fully written and
    finite, sampled entries against float64, a second call the same bits."""
    dtype = torch.bfloat16 if row.kind == "fp8_rowwise" else a.dtype
    shape = ((row.batch,) if row.batch > 1 else ()) + (row.m, row.n)
    outs = []
    for _ in range(2):
        out = torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)
        try:
            result = engine.matmul(a, b, out=out, **options)
        except (TypeError, ValueError):    # an option out= does not combine with: the call's own output
            result = engine.matmul(a, b, **options)
        outs.append(result)
    first, second = outs
    if not bool(torch.isfinite(first).all()):
        return "unwritten or non-finite elements", None
    if not torch.equal(bits(torch, first), bits(torch, second)):
        return "two calls differ", None
    rows = torch.randperm(row.m, generator=gen, device=DEVICE)[:SAMPLE].sort().values
    cols = torch.randperm(row.n, generator=gen, device=DEVICE)[:SAMPLE].sort().values
    ref = reference(torch, row, a, b, scales, rows, cols)
    got = first[..., rows, :][..., :, cols].double()
    err = float(torch.linalg.norm((got - ref).flatten()) / max(float(torch.linalg.norm(ref.flatten())), 1e-300))
    return ("ok" if err < TOLERANCE[row.kind] else f"error {err:.2e}"), err


def choice_label(algorithm, cfg) -> str:
    """``specialized_wgmma 128x256x64/384u/S4 T2``: the algorithm, its stage tile, units, ring
    slots, split-K count (K), split-tail parts (T)."""
    from common import tiling
    try:
        text = tiling(cfg)
    except AttributeError:
        text = ""
    split = getattr(cfg.batch.global_, "split_tail", 0)
    return f"{algorithm.name} {text}" + (f" T{split}" if split else "")


# -- one row -------------------------------------------------------------------------------------------
def measure(torch, cp, engine, row: Row, ops: Operands, checked: dict, repeat: int, gen) -> dict:
    from gemm_engine.runtime.timing import device_times
    rec = {**row.__dict__, "label": row.label, "flops": row.flops, "bytes": row.bytes,
           "memory_bound": row.memory_bound, "weight_bytes": row.weight_bytes}
    a, b, scales = ops(row)
    options = engine_options(row, scales)
    torch.backends.cuda.matmul.allow_tf32 = row.kind == "tf32"
    try:
        engine.matmul(a, b, **options)
        algorithm, cfg = engine.last_choice
        rec["choice"] = choice_label(algorithm, cfg)
        try:
            key = (algorithm.name, hash(cfg), cfg)
        except TypeError:
            key = (algorithm.name, repr(cfg))
        if key not in checked:
            checked[key] = (*check(torch, engine, row, a, b, scales, options, gen), row.label)
        rec["check"], rec["rel_err"], rec["checked_on"] = checked[key]
        fns = {"engine": lambda: engine.matmul(a, b, **options)}
        for name, fn in baselines(torch, cp, row, a, b, scales).items():
            try:
                fn()
                fns[name] = fn
            except RuntimeError as exc:          # e.g. torch._scaled_mm's own shape rules
                rec.setdefault("baseline_errors", {})[name] = str(exc)[:200]
        times = device_times(engine.runtime, fns, repeat=repeat, warmup=3)
    except Exception as exc:  # noqa: BLE001 -- a row that fails is a result; the sweep goes on
        rec["error"] = f"{type(exc).__name__}: {exc}"[:400]
        return rec
    rec["ms"] = times.pop("engine") * 1e3
    if times:
        name, seconds = min(times.items(), key=lambda kv: kv[1])
        rec.update(baseline=name, baseline_ms=seconds * 1e3, ratio=seconds * 1e3 / rec["ms"],
                   baselines_ms={k: v * 1e3 for k, v in times.items()})
    return rec


# -- runs ------------------------------------------------------------------------------------------------
def load(path) -> dict:
    with open(path) as f:
        return json.load(f)


def save(path, result: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=0)
    os.replace(tmp, path)


def run(args, argv) -> dict:
    global DEVICE
    os.environ["GEMM_ENGINE_CACHE_DIR"] = os.environ.get("SHAPE_SWEEP_CACHE") or __import__("tempfile").mkdtemp()
    import torch
    import gemm_engine
    if args.smoke:
        DEVICE, cp = "cpu", None
        engine = gemm_engine.Engine(backend="opencl")
    else:
        import cupy as cp
        engine = gemm_engine.Engine(backend="cuda", background_compile=False)   # the chosen kernel, not a stand-in
    rows = rows_of(args)
    result = load(args.resume) if args.resume else {"records": []}
    done = {r["label"] for r in result["records"] if "error" not in r}
    result.update(device=engine.device.name if args.smoke else torch.cuda.get_device_name(), torch=torch.__version__,
                  command=current_tables.command_line("shape_sweep.py", argv), planned=len(rows))
    result["records"] = [r for r in result["records"] if r["label"] in done]
    ops, checked, gen = Operands(torch), {}, torch.Generator(device=DEVICE).manual_seed(7)
    start, left = time.time(), []
    for i, row in enumerate(r for r in rows if r.label not in done):
        if time.time() - start > args.budget:
            left.append(row.label)
            continue
        rec = measure(torch, cp, engine, row, ops, checked, args.repeat, gen)
        result["records"].append(rec)
        print(f"[{i + 1}/{len(rows) - len(done)} {time.time() - start:5.0f}s] {shape_report.row_line(rec)}", flush=True)
        result["not_started"] = []
        save(args.json, result)
    result["not_started"] = left
    save(args.json, result)
    if left:
        print(f"budget of {args.budget} s spent: {len(left)} rows not started (run again with --resume {args.json})")
    return result


def rows_of(args) -> list[Row]:
    split = (lambda s: tuple(s.split(",")) if s else None)
    rows = shape_rows.select(args.subset, split(args.groups), split(args.kinds), split(args.forms),
                             args.max_tokens, args.part)
    return [shape_rows.shrunk(r) for r in rows] if args.smoke else rows


def first_history(args, device: str, line: str) -> str:
    """A history section for a table's first file (bench/results/ keeps one in every table), or ''
    where the file there already has its own."""
    path = Path(args.markdown) if getattr(args, "markdown", None) else None
    if current_tables.split(current_tables.existing(device, args.table, path))[1]:
        return ""
    return f"\n## History\n\n- {date.today()}: {line}\n"


def write_table(args, result: dict) -> None:
    table = shape_report.markdown(result["records"])
    if result.get("not_started"):
        table = f"{len(result['not_started'])} planned rows were not started (budget).\n\n" + table
    mean = shape_report.geomean(r["ratio"] for r in shape_report.timed(result["records"]))
    table += first_history(args, result["device"], f"the first run: {len(result['records'])} rows, geometric mean "
                                                   f"{mean or float('nan'):.3f}.")
    current_tables.write(args, result["device"], TITLE, result["command"], table)


def merge(args) -> dict:
    """The records of several runs' JSON, by row (a later run's record replaces an earlier one)."""
    runs = [load(p) for p in args.merge]
    records = {}
    for r in runs:
        for rec in r["records"]:
            records[rec["label"]] = rec
    return {"device": runs[-1]["device"], "command": "; ".join(dict.fromkeys(r["command"] for r in runs)),
            "records": list(records.values()), "not_started": [x for r in runs for x in r.get("not_started", [])
                                                                if x not in records]}


def listing(args) -> None:
    rows = rows_of(args)
    # About 0.5 s a row (a compile in about one row of two, the timing's batches of 1 ms) and 40
    # calls of each of three products at about 600 TFLOP/s.
    estimate = sum(0.5 + 3 * 40 * r.flops / 600e12 for r in rows)
    for r in rows:
        print(f"{r.group:7s} {r.label}")
    print(f"{len(rows)} rows; roughly {estimate / 60:.1f} minutes on an H100")


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subset", default="targets", choices=sorted(shape_rows.SUBSETS),
                    help="; ".join(f"{k}: {v[0]}" for k, v in shape_rows.SUBSETS.items()))
    ap.add_argument("--groups", default="", help="comma-separated: llm, square, k, random")
    ap.add_argument("--kinds", default="", help=f"comma-separated: {', '.join(shape_rows.KINDS)}")
    ap.add_argument("--forms", default="", help="comma-separated: linear, rowmajor, wgrad, square, k, aligned, odd")
    ap.add_argument("--max-tokens", type=int, default=None, help="LLM rows up to this token count")
    ap.add_argument("--part", default="", help="i/n: every n-th row from the i-th")
    ap.add_argument("--repeat", type=int, default=10, help="timed samples of each call")
    ap.add_argument("--budget", type=float, default=480, help="start no row after this many seconds")
    ap.add_argument("--json", help="the run's records, rewritten after every row (default: shape_sweep_<subset>.json "
                                   "under $BENCH_RESULTS or the working folder)")
    ap.add_argument("--resume", help="a JSON of an earlier run: its rows are kept, the others run")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="no GPU: join these runs into the current table")
    ap.add_argument("--list", action="store_true", help="no GPU: list the rows and an estimate of the time")
    ap.add_argument("--smoke", action="store_true", help="no GPU: the rows shrunk, on torch CPU tensors and the "
                                                         "OpenCL engine (PoCL), against torch's CPU product")
    current_tables.add_arguments(ap, "shape_sweep")
    return ap


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    if args.list:
        return listing(args)
    if args.merge:
        result = merge(args)
    else:
        args.json = args.json or os.path.join(os.environ.get("BENCH_RESULTS", "."), f"shape_sweep_{args.subset}.json")
        result = run(args, argv)
    write_table(args, result)
    print(shape_report.markdown(result["records"], worst=15).split("### Every row")[0])


if __name__ == "__main__":
    main()
