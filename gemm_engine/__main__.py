"""``python -m gemm_engine``: the command line (see gemm_engine.cli)."""
import sys

from .cli import main

sys.exit(main())
