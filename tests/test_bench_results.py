"""The current tables of bench/results/ (one per device and measurement) and the helper the bench
tools write them with (bench/current_tables.py): every table names its device, date and command and
keeps a history; the index lists every table; a rerun replaces the table and keeps the notes and
history people wrote. No GPU: the tools' writers are fed recorded rows."""
from __future__ import annotations

import pathlib
import re
import sys
import types

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"
RESULTS = BENCH / "results"
sys.path.insert(0, str(BENCH))

import current_tables  # noqa: E402
import kernel_durations  # noqa: E402

TABLES = sorted(RESULTS.glob("*/*.md"))


def test_there_are_current_tables():
    assert {p.parent.name for p in TABLES} >= {"h100", "cpu"}


@pytest.mark.parametrize("path", TABLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_table_names_device_date_command_and_history(path):
    text = path.read_text()
    assert text.startswith("# "), "a title first"
    assert re.search(r"(?m)^Device: .+\. Date: \d{4}-\d{2}-\d{2}\.$", text), "the device and date of the run"
    command = re.search(r"(?m)^Command: `python3 (bench/[a-z_0-9]+\.py)\b[^`]*`$", text)
    assert command and (BENCH.parent / command.group(1)).is_file(), "the command that makes it"
    head, kept = current_tables.split(text)
    assert "|" in head or "```" in head, "a table"
    assert re.search(r"(?ms)^## History\n.*^- \d{4}-\d{2}-\d{2}", kept), "a history, a dated line each"


def test_index_lists_every_table():
    index = (RESULTS / "README.md").read_text()
    listed = set(re.findall(r"\]\(([a-z0-9]+/[a-z0-9_]+\.md)\)", index))
    assert listed == {f"{p.parent.name}/{p.name}" for p in TABLES}


def test_rewrite_keeps_notes_and_history(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RESULTS", str(tmp_path))
    old = ("# H100: a measurement\n\nDevice: NVIDIA H100 80GB HBM3. Date: 2026-01-01.\nCommand: `python3 bench/overhead.py`\n\n"
           "| a |\n|---|\n| 1 |\n\n## Notes\n\nwhy it is so\n\n## History\n\n- 2026-01-01: the first run\n")
    target = current_tables.path_for("NVIDIA H100 80GB HBM3", "measurement")
    target.parent.mkdir(parents=True)
    target.write_text(old)
    args = types.SimpleNamespace(markdown=None, table="measurement")
    path = current_tables.write(args, "NVIDIA H100 80GB HBM3", "ignored title", "python3 bench/overhead.py --y",
                                "| a |\n|---|\n| 2 |\n", quiet=True)
    text = path.read_text()
    assert path == tmp_path / "h100" / "measurement.md"
    assert text.startswith("# H100: a measurement\n")
    assert "| 2 |" in text and "| 1 |" not in text
    assert "Command: `python3 bench/overhead.py --y`" in text
    assert text.endswith("## Notes\n\nwhy it is so\n\n## History\n\n- 2026-01-01: the first run\n")


def test_a_first_table_gets_its_history(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RESULTS", str(tmp_path))
    args = types.SimpleNamespace(markdown=None, table="fresh")
    path = current_tables.write(args, "NVIDIA H200", "a first run", "python3 bench/overhead.py", "| a |\n|---|\n| 1 |\n",
                                quiet=True)
    text = path.read_text()
    assert text.count("## History") == 1 and text.rstrip().endswith(": the first run.")
    current_tables.write(args, "NVIDIA H200", "a first run", "python3 bench/overhead.py", "| a |\n|---|\n| 2 |\n", quiet=True)
    assert path.read_text().count("## History") == 1


@pytest.mark.parametrize("device, folder", [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
                                            ("NVIDIA A100-SXM4-80GB", "a100"),
                                            ("Portable Computing Language: pthread-skylake-avx512-AMD EPYC", "cpu")])
def test_device_folder(device, folder):
    assert current_tables.device_folder(device) == folder


def test_recorded_command_leaves_out_where_files_went():
    argv = ["--repeat", "30", "--json", "/o/r.json", "--markdown=/o/r.md", "--rows", "bf16 4096^3"]
    assert current_tables.command_line("hopper_gemm.py", argv) == \
        "python3 bench/hopper_gemm.py --repeat 30 --rows 'bf16 4096^3'"


def test_kernel_durations_run_replaces_only_its_problems():
    text = (RESULTS / "h100" / "kernel_durations.md").read_text()
    rows = kernel_durations.parse_rows(text)
    assert kernel_durations.markdown(rows).strip() == current_tables.body_of(text).strip()
    args = kernel_durations.parser().parse_args(["--dtype", "bfloat16", "--shapes", "4096x4096x4096", "--calls", "30"])
    run = {"command": "python3 bench/kernel_durations.py --dtype bfloat16 --shapes 4096x4096x4096 --calls 30",
           "shapes": [{"shape": [4096, 4096, 4096], "flops": 2 * 4096 ** 3,
                       "engine default": {"kernels": [{"name": "gemm_engine_kernel", "count": 30, "mean_us": 170.0}],
                                          "busy_us_per_call": 170.0, "span_us_per_call": 171.0, "rel_err": 1e-3},
                       "torch.matmul": {"kernels": [{"name": "nvjet_x", "count": 30, "mean_us": 171.0}],
                                        "busy_us_per_call": 171.0, "span_us_per_call": 172.0, "rel_err": 1e-3}}]}
    new = kernel_durations.table_rows(run, args, "2026-12-01")
    merged = {**rows, **new}
    assert len(merged) == len(rows)
    assert merged["bfloat16 4096x4096x4096 b row"][2:6] == ["170.0", "`nvjet_x`", "171.0", "1.006"]
    assert merged["bfloat16 4096x4096x4096 b row"][-1] == "`--dtype bfloat16 --calls 30 --shapes 4096x4096x4096`"


def test_grouped_first_run_writes_a_table_with_notes_and_history(tmp_path, monkeypatch):
    import grouped
    monkeypatch.setenv("BENCH_RESULTS", str(tmp_path))
    row = {"row": "mixtral_up", "experts": 8, "tokens": 4096, "k": 4096, "n": 14336, "dtype": "bf16",
           "layout": "contiguous", "max_count": 900, "empty": 0, "choice": "grouped_specialized_wgmma 128x256x64",
           "engine_ms": 0.8, "engine_TF": 600.0, "graph_ms": 0.79, "grouped_mm_ms": 0.9, "grouped_mm_TF": 530.0,
           "loop_ms": 1.0, "loop_TF": 480.0, "vs_grouped_mm": 1.125, "weights_TB/s": 1.2, "rel_error": 3e-3}
    checks = [{"check": "graph replay, masked, new routing: one expert", "rel_error": 2e-3, "untouched_ok": True}]
    text = grouped.markdown([row, {"row": "experts_256", "failed": "RuntimeError: x"}], checks)
    assert "| mixtral_up | 8 x 4096, 4096 -> 14336 |" in text and "| 1.12 |" in text and "FAILED RuntimeError" in text
    args = types.SimpleNamespace(markdown=None, table="grouped")
    path = current_tables.write(args, "NVIDIA H100 80GB HBM3", "grouped", "python3 bench/grouped.py",
                                text + grouped.FIRST_NOTES.format(today="2026-11-26"), quiet=True)
    head, kept = current_tables.split(path.read_text())
    assert "| mixtral_up |" in head and kept.startswith("## Notes")
    assert re.search(r"(?ms)^## History\n.*^- 2026-11-26", kept)
