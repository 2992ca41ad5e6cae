"""The benchmark suite from a checkout: the same options and output as ``gemm-engine bench``.

    python3 bench/suite.py --suite smoke --backend opencl
    python3 bench/suite.py --suite full --json bench/results/x.json --md bench/results/x.md --plot x.png
    python3 bench/suite.py --suite full --dtypes bf16,f16 --groups skinny,fused --tune

The rows, baselines and reports live in gemm_engine/benchsuite/.
"""
from __future__ import annotations

import argparse
import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])  # run from a checkout without installing

from gemm_engine.tools.benchsuite import add_arguments, run_from_args  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
