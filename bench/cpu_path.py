"""The CPU path (``direct_vector``) on an OpenCL CPU device (PoCL) against numpy (OpenBLAS, the same
cores) and CLBlast (through pyclblast, on the same OpenCL device), in the same process.

For each size: every contender's result checked against float64 first; then ``--rounds`` rounds,
each timing every contender in turns (`gemm_engine.runtime.timing.device_times`: a warm-up, then
``--repeat`` samples each, host clock around the call and the queue's finish). A round's load
average is recorded: the machine is shared, so the table gives each contender's median over the
rounds and the spread (slowest / fastest round), and the headline ratios are taken per round (the
contenders of one round met the same load) before the median. ``--sweep`` also times each tiling
of direct_vector's tuning space at the largest size.

    python3 bench/cpu_path.py --sizes 512,1024,2048 --rounds 5 --sweep       (cpu/cpu_path.md)

pyclblast is optional (pip install pyclblast; here: PYTHONPATH=/tmp/pyclblast).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import numpy as np  # noqa: E402

import current_tables  # noqa: E402

CONTENDERS = ("auto", "simple_unit", "ordered_unit")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="512,1024,2048")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sweep", action="store_true", help="time direct_vector's tilings at the largest size")
    ap.add_argument("--json")
    current_tables.add_arguments(ap, "cpu_path")
    args = ap.parse_args(argv)

    import gemm_engine
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.runtime.timing import device_times
    try:
        import pyclblast
    except ImportError:
        pyclblast = None
    engine = gemm_engine.Engine("opencl")
    rt, dev = engine.runtime, engine.device
    rng = np.random.default_rng(0)
    result = {"device": dev.name, "command": current_tables.command_line("cpu_path.py", sys.argv[1:] if argv is None else argv),
              "rows": [], "sweep": []}
    dtype = np.dtype(args.dtype)
    sizes = [int(s) for s in args.sizes.split(",")]
    for n in sizes:
        a, b = rng.standard_normal((n, n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        da, db = rt.to_device(a), rt.to_device(b)
        out = rt.empty((n, n), dtype)
        fns = {}
        for name in CONTENDERS:
            fns[name] = (lambda alg: lambda: engine.matmul(da, db, out=out, algorithm=alg))(name)
        if pyclblast is not None and dtype == np.float32:
            c = rt.empty((n, n), dtype)
            fns["CLBlast"] = lambda: pyclblast.gemm(rt.queue, n, n, n, da, db, c, a_ld=n, b_ld=n, c_ld=n)
        fns["numpy"] = lambda: a @ b
        errors = {}
        for name, fn in fns.items():
            got = fn()
            rt.synchronize()
            host = got if isinstance(got, np.ndarray) else rt.to_host(c if name == "CLBlast" else out)
            errors[name] = float(np.linalg.norm(host - ref) / np.linalg.norm(ref))
        chosen = engine.explain(a, b).chosen
        rounds = []
        for r in range(args.rounds):
            load = os.getloadavg()[0]
            times = device_times(rt, fns, repeat=args.repeat, warmup=1, min_window=0)
            rounds.append({"load": load, "seconds": times})
            print(f"{n}^3 round {r + 1} (load {load:.1f}): "
                  + "  ".join(f"{k} {2 * n ** 3 / v / 1e9:.1f}" for k, v in times.items()) + "  GFLOP/s", flush=True)
        result["rows"].append({"n": n, "dtype": args.dtype, "auto": chosen, "errors": errors, "rounds": rounds})
    if args.sweep:
        n = sizes[-1]
        a, b = rng.standard_normal((n, n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype)
        da, db, out = rt.to_device(a), rt.to_device(b), rt.empty((n, n), dtype)
        base = REGISTRY["direct_vector"]()
        problem = engine.problem_for(a, b)
        fns = {}
        for preset in base.tuning_space(problem, engine.dialect):
            alg = base.with_selection(preset)
            label = f"{preset['tile_m']}x{preset['tile_n']}"
            fns[label] = (lambda alg: lambda: engine.matmul(da, db, out=out, algorithm=alg))(alg)
        fns["numpy"] = lambda: a @ b
        for r in range(args.rounds):
            load = os.getloadavg()[0]
            times = device_times(rt, fns, repeat=args.repeat, warmup=1, min_window=0)
            result["sweep"].append({"load": load, "seconds": times})
            print(f"sweep {n}^3 round {r + 1} (load {load:.1f}): "
                  + "  ".join(f"{k} {2 * n ** 3 / v / 1e9:.1f}" for k, v in times.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    table = markdown(result, sizes)
    current_tables.write(args, dev.name, "the CPU path against numpy and CLBlast", result["command"], table)
    print(table)
    return 0


def _ratio(rounds, num: str, den: str) -> tuple[float, float, float]:
    """(median, lowest, highest) over the rounds of time[den] / time[num]: how many times faster
    ``num`` ran than ``den`` in the same round."""
    vals = [r["seconds"][den] / r["seconds"][num] for r in rounds if num in r["seconds"] and den in r["seconds"]]
    return (statistics.median(vals), min(vals), max(vals)) if vals else (float("nan"),) * 3


def markdown(result, sizes) -> str:
    lines = ["GFLOP/s: median over the rounds (slowest to fastest round). Ratios are taken per round, then "
             "the median (spread in parentheses). Load: the 1-minute load average at each round's start "
             "(2 cores).", "",
             "| size | dtype | auto | contender | GFLOP/s | rel. err | x numpy | x CLBlast |", "|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        n, rounds = row["n"], row["rounds"]
        flop = 2 * n ** 3
        names = list(rounds[0]["seconds"])
        for name in names:
            g = sorted(flop / r["seconds"][name] / 1e9 for r in rounds)
            vs_np = _ratio(rounds, name, "numpy") if name != "numpy" else None
            vs_cl = _ratio(rounds, name, "CLBlast") if name not in ("CLBlast", "numpy") and "CLBlast" in names else None

            def cell(v):
                return "" if v is None else f"{v[0]:.2f} ({v[1]:.2f}-{v[2]:.2f})"
            lines.append(f"| {n}^3 | {row['dtype']} | {row['auto'] if name == 'auto' else ''} | {name} | "
                         f"{statistics.median(g):.1f} ({g[0]:.1f}-{g[-1]:.1f}) | {row['errors'][name]:.1e} | "
                         f"{cell(vs_np)} | {cell(vs_cl)} |")
        loads = ", ".join(f"{r['load']:.1f}" for r in rounds)
        lines.append(f"| | | | (loads: {loads}) | | | | |")
    if result["sweep"]:
        n = sizes[-1]
        lines += ["", f"direct_vector tilings at {n}^3 (tile_m x tile_n floats; GFLOP/s median over rounds, "
                      f"x numpy per round):", "", "| tiling | GFLOP/s | x numpy |", "|---|---|---|"]
        for name in result["sweep"][0]["seconds"]:
            if name == "numpy":
                continue
            g = statistics.median(2 * n ** 3 / r["seconds"][name] / 1e9 for r in result["sweep"])
            lines.append(f"| {name} | {g:.1f} | {_ratio(result['sweep'], name, 'numpy')[0]:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
