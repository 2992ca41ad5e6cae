"""argparse types of the command lines (``gemm-engine`` and the benchmark suite's): each turns a
bad value into argparse's one-line usage error (exit status 2) before anything runs."""
from __future__ import annotations

import argparse


def _integer(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        what = "a positive integer" if least == 1 else f"an integer >= {least}"
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def count(text: str) -> int:
    """Sizes and counts: a positive integer."""
    return _integer(text, 1)


def counts(text: str) -> tuple[int, ...]:
    """A comma list of positive integers (--tokens)."""
    return tuple(count(item.strip()) for item in text.split(","))


def nonnegative(text: str) -> int:
    """A count that may be zero (warm-up calls)."""
    return _integer(text, 0)


def layout_pair(text: str):
    """--layouts: two of row/col -> (Layout, Layout)."""
    from ..problem import Layout
    try:
        lhs, rhs = (Layout(x.strip()) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected two of row/col, e.g. row,col; got {text!r}") from None
    return lhs, rhs


def arch(text: str) -> str:
    """argparse type of --arch: sm_XY (or sm_XYa)."""
    digits = text.lower().removeprefix("sm_").rstrip("a")
    if not digits.isdigit() or len(digits) < 2:
        raise argparse.ArgumentTypeError(f"expected e.g. sm_80 or sm_90, got {text!r}")
    return text


def shapes(text: str) -> list[tuple[int, int, int, int]]:
    """argparse type of --shapes: 'MxNxK' or 'BxMxNxK', comma-separated -> [(batch, m, n, k)]."""
    out = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) not in (3, 4) or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"expected MxNxK or BxMxNxK items of positive sizes, got {item!r}")
        sizes = [int(p) for p in parts]
        out.append(tuple(sizes) if len(sizes) == 4 else (1, *sizes))
    return out
