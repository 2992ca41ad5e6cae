"""The benchmark suite: the problems (`rows`), the libraries compared with (`baselines`), the
measurement (`runner`) and its reports (`report`), behind ``gemm-engine bench`` and
``bench/suite.py`` (`command`).

    >>> from gemm_engine import Engine
    >>> from gemm_engine.tools.benchsuite import rows_for, run_suite, table
    >>> print(table(run_suite(Engine("opencl"), rows_for("smoke", dtypes="float32"), repeat=3)))
"""
from .command import add_arguments, main_args, run_from_args
from .report import markdown, plot, table, to_json
from .rows import SUITES, Row, rows_for
from .runner import RowResult, device_info, run_suite

__all__ = ["SUITES", "Row", "RowResult", "add_arguments", "device_info", "main_args", "markdown", "plot",
           "rows_for", "run_from_args", "run_suite", "table", "to_json"]
