"""Where each benchmark tool's current table lives, and how a run refreshes it.

One file per device and measurement: ``bench/results/<device>/<table>.md`` (``h100/hopper_rows.md``).
A run rewrites the file's head (title, device, date, the command) and its table, and keeps what
follows the table: the ``## Notes`` and ``## History`` sections that people write (add a history
line when a rerun changes the headline). ``BENCH_RESULTS`` names another root to write under (on a
GPU machine whose files come back only from ``$OUT``: ``BENCH_RESULTS=$OUT``); the sections kept
are then read from the checkout's copy. ``--markdown PATH`` writes the file there instead.

Imported by the tools as ``current_tables`` (a script's own folder is first on ``sys.path``); needs
no GPU.
"""
from __future__ import annotations

import os
import re
import shlex
from datetime import date
from pathlib import Path

#: The checkout's current tables.
RESULTS = Path(__file__).resolve().parent / "results"
#: Headings from which a file's hand-written part starts (kept by every rewrite).
KEPT_HEADINGS = ("## Notes", "## History")
#: Output options left out of the recorded command (where a run wrote its files is no part of it).
_OUTPUT_OPTIONS = ("--json", "--markdown", "--md", "--plot")


def device_folder(device: str) -> str:
    """The folder of a device's tables: ``h100`` for "NVIDIA H100 80GB HBM3", ``cpu`` for PoCL or
    any OpenCL CPU device, else the first model number in the name (``a100``) or the name itself."""
    low = device.lower()
    if "portable computing language" in low or "pocl" in low or re.search(r"\bcpu\b", low):
        return "cpu"
    model = re.search(r"\b([A-Za-z]{1,2}\d{2,4}[A-Za-z]?)\b", device)
    return model.group(1).lower() if model else re.sub(r"[^a-z0-9]+", "_", low).strip("_") or "device"


def add_arguments(parser, table: str | None, default_help: str | None = None) -> None:
    """``--table NAME`` (the current table a run refreshes, default ``table``, or as the tool's
    ``default_help`` says where the tool names it after parsing) and ``--markdown PATH`` (write
    the file there instead)."""
    parser.add_argument("--table", default=table,
                        help="the current table this run refreshes: bench/results/<device>/NAME.md "
                             f"(default {default_help or table})")
    parser.add_argument("--markdown", metavar="PATH", help="write the table here instead of its current table")


def command_line(script: str, argv: list[str]) -> str:
    """``python3 bench/<script> ARGS`` without the output options and their values."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _OUTPUT_OPTIONS:
            skip = "=" not in arg
            continue
        kept.append(arg)
    return " ".join(["python3", f"bench/{script}"] + [shlex.quote(a) for a in kept])


def path_for(device: str, table: str, root: str | os.PathLike | None = None) -> Path:
    """Where the current table ``table`` of ``device`` is written (under ``root``, else
    ``BENCH_RESULTS``, else the checkout's bench/results)."""
    base = Path(root or os.environ.get("BENCH_RESULTS") or RESULTS)
    return base / device_folder(device) / f"{table}.md"


def split(text: str) -> tuple[str, str]:
    """(head and table, the kept sections) of a current table's text."""
    starts = [m.start() for h in KEPT_HEADINGS for m in re.finditer(rf"(?m)^{re.escape(h)}\b", text)]
    cut = min(starts) if starts else len(text)
    return text[:cut], text[cut:]


def existing(device: str, table: str, path: Path | None = None) -> str:
    """The text a rewrite starts from: the file at ``path`` (or the table's place) if it exists,
    else the checkout's copy of the table, else ''."""
    for candidate in (path or path_for(device, table), RESULTS / device_folder(device) / f"{table}.md"):
        if candidate.is_file():
            return candidate.read_text()
    return ""


def body_of(text: str) -> str:
    """The table part of a current table's text: after the head's ``Device:`` paragraph, before
    the kept sections."""
    head, _ = split(text)
    parts = re.split(r"(?m)^Device: .*(?:\n(?!\n).*)*\n\n", head, maxsplit=1)
    return parts[1] if len(parts) == 2 else ""


def render(device: str, title: str, command: str, table: str, old: str = "", when: str | None = None) -> str:
    """A current table's text: the title (the old file's, if it had one), the device, date and
    command, the table, then the old file's kept sections."""
    first = old.splitlines()[0] if old.startswith("# ") else f"# {device_folder(device).upper()}: {title}"
    kept = split(old)[1]
    text = (f"{first}\n\nDevice: {device}. Date: {when or date.today()}.\nCommand: `{command}`\n\n"
            f"{table.strip()}\n")
    return text + ("\n" + kept if kept else "")


def write(args, device: str, title: str, command: str, table: str, quiet: bool = False) -> Path:
    """Write the run's table where ``args`` (`add_arguments`) say: ``--markdown PATH``, else the
    current table ``--table`` of ``device``, keeping the old file's notes and history (a first
    table gets its History section: `ensure_history`); say where unless ``quiet``."""
    path = Path(args.markdown) if getattr(args, "markdown", None) else path_for(device, args.table)
    text = render(device, title, command, table, existing(device, args.table, path))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    ensure_history(path)
    if not quiet:
        print(f"wrote {path}")
    return path


def ensure_history(path: Path) -> None:
    """A table written for the first time gets its History section (every table keeps one)."""
    text = path.read_text()
    if "## History" not in text:
        path.write_text(text.rstrip("\n") + f"\n\n## History\n\n- {date.today()}: the first run.\n")
