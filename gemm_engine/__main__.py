"""``python -m gemm_engine``: the command line (see gemm_engine.tools.cli)."""
import sys

from .tools.cli import main

sys.exit(main())
