"""The suite's command line, shared by ``gemm-engine bench`` and ``bench/suite.py``: both add these
arguments to their parser and hand the parsed namespace to `run_from_args`."""
from __future__ import annotations

import json
import os
import sys
from datetime import date

from ...engine import Engine
from ..cli_types import count, dtype_names, nonnegative
from .report import line, markdown, plot, table, to_json
from .rows import DTYPES, GROUPS, SUITES, rows_for
from .runner import device_info, run_suite
from ...version import extra_hint


def add_arguments(parser) -> None:
    """Add the suite's options to an argparse parser (or sub-parser)."""
    parser.add_argument("--suite", choices=tuple(SUITES), default=None,
                        help="smoke: tiny problems (seconds, any device); quick: a few sizes; full: the whole "
                             "list (default: quick on a GPU, smoke on a CPU device)")
    parser.add_argument("--dtypes", type=dtype_names, metavar="DTYPES",
                        help=f"comma list of dtypes to keep ({', '.join(DTYPES)}; f32, f16, bf16 too)")
    parser.add_argument("--groups", help=f"comma list of problem groups to keep ({', '.join(GROUPS)})")
    parser.add_argument("--names", help="comma list of problem names to keep (e.g. 1000^3,1x8192x8192)")
    parser.add_argument("--baselines", help="comma list of baselines to time (default: all of the backend's)")
    parser.add_argument("--backend", choices=("auto", "cuda", "opencl"), default="auto")
    parser.add_argument("--repeat", type=count, default=10, help="timed calls per measurement (median)")
    parser.add_argument("--warmup", type=nonnegative, default=3, help="untimed calls before each measurement")
    parser.add_argument("--tune", action="store_true", help="also tune each row and time the tuned choice")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random operands")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON (rewritten after every row)")
    parser.add_argument("--md", metavar="FILE", help="write the results as a markdown table")
    parser.add_argument("--plot", metavar="FILE.png", help="write a TFLOP/s plot (needs matplotlib)")


#: The name the CLI's first draft asked for.
main_args = add_arguments


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _output_problem(args) -> str | None:
    """Why the files asked for could not be written (a missing folder, matplotlib absent), or None."""
    for option in ("json", "md", "plot"):
        path = getattr(args, option)
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not os.path.isdir(folder):
            return f"--{option} {path}: the folder {folder} does not exist"
    if args.plot:
        import importlib.util
        if importlib.util.find_spec("matplotlib") is None:
            return f"--plot needs the matplotlib package: {extra_hint('plot', 'matplotlib')}"
    return None


def run_from_args(args) -> int:
    """Run the suite the options describe, print the table and write the files asked for.
    Returns 0, 1 when a row's result failed its check (or the engine crashed on it), 2 for a
    usage or environment error (bad filter, matplotlib missing for --plot)."""
    engine = Engine(args.backend)
    if args.suite is None:    # quick's 4096^3 rows take minutes each on a CPU
        args.suite = "smoke" if engine.runtime.is_cpu else "quick"
    try:
        rows = rows_for(args.suite, args.dtypes, args.groups, args.names)
    except ValueError as exc:
        print(f"gemm-engine bench: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print("gemm-engine bench: no row matches the filters", file=sys.stderr)
        return 2
    problem = _output_problem(args)
    if problem:     # before minutes of measuring, not after
        print(f"gemm-engine bench: {problem}", file=sys.stderr)
        return 2
    info = device_info(engine)
    settings = {"repeat": args.repeat, "warmup": args.warmup, "suite": args.suite}
    print(f"{len(rows)} rows of the {args.suite} suite on {info['device']} ({info['backend']}), "
          f"median of {args.repeat} after {args.warmup} warm-up calls", flush=True)
    done = []
    # tqdm draws rows done, rate and time left on a terminal only (disable=None); the row lines
    # go through it so the bar stays below them.
    from tqdm import tqdm
    bar = tqdm(total=len(rows), desc="bench", unit="row", disable=None, file=sys.stderr)

    def progress(result):
        done.append(result)
        bar.update(1)
        if bar.disable:
            print(line(result), flush=True)
        else:
            bar.write(line(result), file=sys.stdout)
        if args.json:   # after every row: a run stopped by a time limit keeps what it measured
            _write(args.json, json.dumps(to_json(done, info, **settings), indent=1) + "\n")

    try:
        results = run_suite(engine, rows, repeat=args.repeat, warmup=args.warmup, baselines=args.baselines,
                            tune=args.tune, progress=progress, seed=args.seed)
    except ValueError as exc:   # an unknown --baselines name
        print(f"gemm-engine bench: {exc}", file=sys.stderr)
        return 2
    finally:
        bar.close()
    print()
    print(table(results))
    if args.md:
        header = f"gemm_engine {args.suite} suite on {info['device']} ({info['backend']}), {date.today()}"
        _write(args.md, markdown(results, header))
    if args.plot:
        try:
            plot(results, args.plot)
        except (RuntimeError, ValueError) as exc:
            print(f"gemm-engine bench: {exc}", file=sys.stderr)
            return 2
    return 0 if all(r.ok or r.skipped for r in results) else 1
