"""The benchmark suite from a checkout: the same options and output as ``gemm-engine bench``, and
without ``--md`` the table goes to its current table, bench/results/<device>/suite_<suite>.md
(bench/current_tables.py: its notes and history are kept).

    python3 bench/suite.py --suite smoke --backend opencl            (cpu/suite_smoke.md on PoCL)
    python3 bench/suite.py --suite full --tune --plot x.png          (h100/suite_full.md on the H100)
    python3 bench/suite.py --suite full --dtypes bf16,f16 --groups skinny,fused --tune --md x.md

The rows, baselines and reports live in gemm_engine/tools/benchsuite/.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])  # run from a checkout without installing
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import current_tables  # noqa: E402
from gemm_engine.tools.benchsuite import add_arguments, run_from_args  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--table", help="the current table a run without --md refreshes: "
                                        "bench/results/<device>/NAME.md (default suite_<suite>)")
    args = parser.parse_args(argv)
    command = current_tables.command_line("suite.py", sys.argv[1:] if argv is None else argv)
    if args.md:
        return run_from_args(args)
    with tempfile.TemporaryDirectory() as tmp:
        args.md = os.path.join(tmp, "suite.md")
        args.json = args.json or os.path.join(tmp, "suite.json")
        code = run_from_args(args)
        if os.path.exists(args.md):
            with open(args.json) as f:
                run = json.load(f)
            with open(args.md) as f:
                table = f.read().split("\n", 1)[1]     # the report's own title line gives way to the head
            args.markdown, args.table = None, args.table or f"suite_{run['suite']}"
            current_tables.write(args, run["device"], f"the {run['suite']} suite (bench/suite.py)", command, table)
    return code


if __name__ == "__main__":
    sys.exit(main())
