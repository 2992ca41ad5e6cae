"""JIT and host overhead: cold-compile and warm-cache first calls, and per-call time against the
native library on a tiny problem (gemm_engine.tools.benchsuite.overhead does the work).

    python3 bench/overhead.py --backend cuda        (refreshes bench/results/<device>/overhead.md)
"""
from __future__ import annotations

import argparse
import json
import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402
from gemm_engine.tools.benchsuite.overhead import format_overhead, run_overhead  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="auto", help="auto, cuda or opencl")
    p.add_argument("--json", metavar="FILE", help="also write the full result as JSON here")
    current_tables.add_arguments(p, "overhead")
    args = p.parse_args(argv)
    command = current_tables.command_line("overhead.py", sys.argv[1:] if argv is None else argv)
    result = run_overhead(args.backend)
    text = format_overhead(result)
    print(text)
    current_tables.write(args, result["device"], "JIT and per-call host overhead (bench/overhead.py)", command,
                         f"```\n{text.strip()}\n```\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return result


if __name__ == "__main__":
    main()
