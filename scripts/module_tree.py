"""The package's tree, one line per module: its path and the first sentence of its docstring.

    python3 scripts/module_tree.py [--width 118]

The README's "How it is built" tree is this script's output (tests/test_docs.py checks it is current),
so the tree a reader sees is the one the code has.
"""
from __future__ import annotations

import argparse
import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gemm_engine"


def summary(path: pathlib.Path) -> str:
    """The first sentence of the module's docstring, on one line ("" without one)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    sentence = re.split(r"(?<=[.])\s", text, maxsplit=1)[0]
    return sentence.rstrip(".:;")


def lines(folder: pathlib.Path = PACKAGE, depth: int = 0, width: int = 118) -> list[str]:
    """The tree under ``folder``: modules first (``__init__`` as the folder's own line), then folders."""
    indent = "  " * depth
    init = folder / "__init__.py"
    top = f"{indent}{folder.name}/" + (f"  {summary(init)}" if init.exists() and summary(init) else "")
    out = [top if len(top) <= width else top[:width - 3].rstrip() + "..."]
    for path in sorted(p for p in folder.glob("*.py") if p.name not in ("__init__.py",)):
        head = f"{indent}  {path.name}"
        text = summary(path)
        line = f"{head:<{len(indent) + 26}} {text}" if text else head
        out.append(line if len(line) <= width else line[:width - 3].rstrip() + "...")
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        out += lines(sub, depth + 1, width)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--width", type=int, default=118, help="longest line (longer summaries are cut)")
    print("\n".join(lines(width=parser.parse_args().width)))


if __name__ == "__main__":
    main()
