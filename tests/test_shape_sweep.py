"""bench/shape_rows.py, shape_report.py, shape_sweep.py and shape_probe.py without a GPU: the sweep's
rows (every form, weight and token count; seeded random rows apart from the training set), the
report (targets, geometric means, histogram), merging runs into a current table the results index
accepts, a smoke run on PoCL, and the probe's candidates on a nominal H100."""
from __future__ import annotations

import json
import pathlib
import re
import sys
import types

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import current_tables  # noqa: E402
import shape_probe  # noqa: E402
import shape_report  # noqa: E402
import shape_rows  # noqa: E402
import shape_sweep  # noqa: E402


def test_rows_cover_the_issue_and_are_unique():
    rows = shape_rows.all_rows()
    assert len({r.label for r in rows}) == len(rows)
    llm = [r for r in rows if r.group == "llm" and r.kind == "bfloat16"]
    assert {(r.weight, r.tokens, r.form) for r in llm} == {
        (w, t, f) for w in shape_rows.WEIGHTS for t in shape_rows.TOKENS for f in shape_rows.FORMS}
    linear = next(r for r in llm if r.form == "linear" and r.tokens == 16 and r.weight == (14336, 4096))
    assert (linear.m, linear.n, linear.k, linear.a_layout, linear.b_layout) == (16, 14336, 4096, "row", "col")
    wgrad = next(r for r in llm if r.form == "wgrad" and r.tokens == 16 and r.weight == (14336, 4096))
    assert (wgrad.m, wgrad.n, wgrad.k, wgrad.a_layout) == (14336, 4096, 16, "col")
    assert linear.weight_bytes == 14336 * 4096 * 2 and linear.memory_bound and wgrad.weight_bytes == 0
    assert {r.m for r in rows if r.group == "square"} >= {768, 1536, 2560, 3000, 3072, 5120, 6144, 7168}
    ks = [r.k for r in rows if r.group == "k"]
    assert min(ks) == 16 and max(ks) == 262144
    assert {r.kind for r in rows} == set(shape_rows.KINDS)


def test_random_rows_are_seeded_and_apart_from_the_training_set():
    first, again = shape_rows.random_shapes(), shape_rows.random_shapes()
    assert first == again and len(first) == shape_rows.RANDOM_ALIGNED + shape_rows.RANDOM_ODD
    aligned = [s for s in first if s[-1] == "aligned"]
    assert all(d % 8 == 0 for s in aligned for d in s[1:4])
    assert all(any(d % 2 for d in s[1:4]) for s in first if s[-1] == "odd")
    held_out = {(r.batch, r.m, r.n, r.k, r.a_layout, r.b_layout) for r in shape_rows.random_rows()}
    train = {(r.batch, r.m, r.n, r.k, r.a_layout, r.b_layout) for r in shape_rows.training_rows()}
    assert not held_out & train


def test_subsets_parts_and_shrinking():
    assert len(shape_rows.select("decode")) == 7 * 12
    everything = shape_rows.select("all")
    parts = [shape_rows.select("all", part=f"{i}/3") for i in (1, 2, 3)]
    assert sorted(r.label for p in parts for r in p) == sorted(r.label for r in everything)
    with pytest.raises(ValueError, match="subset"):
        shape_rows.select("nope")
    small = shape_rows.shrunk(shape_rows.Row("square", "square", "float16", 1001, 1000, 7))
    assert (small.m, small.n, small.k) == (39, 40, 7)


def _record(label, group, ratio, **more):
    base = dict(label=label, group=group, form=more.pop("form", group), kind=more.pop("kind", "bfloat16"),
                m=more.pop("m", 4096), n=4096, k=4096, tokens=more.pop("tokens", 0), weight_bytes=0,
                flops=2 * 4096 ** 3, bytes=3 * 4096 * 4096 * 2, memory_bound=False, ms=1.0, baseline_ms=ratio,
                ratio=ratio, check="ok", choice="x")
    base.update(more)
    return base


def test_report_targets_geomeans_and_histogram():
    records = [_record("a", "square", 1.1, m=4096), _record("b", "square", 0.9, m=6144),
               _record("c", "llm", 0.5, form="linear", tokens=16, weight_bytes=117e6, memory_bound=True),
               {"label": "d", "group": "k", "error": "boom"}]
    targets = {t[0]: t for t in shape_report.targets(records)}
    assert targets["every row"][2] == 0.5 and targets["every row"][4] is False
    assert targets["bf16 / f16 4096^3 and 6144^3"][1] == 2 and targets["f16 1000^3"][2] is None
    assert abs(shape_report.geomean([1.1, 0.9, 0.5]) - (1.1 * 0.9 * 0.5) ** (1 / 3)) < 1e-12
    assert dict(shape_report.histogram(records))["< 0.5"] == 0 and dict(shape_report.histogram(records))["0.5-0.8"] == 1
    text = shape_report.markdown(records)
    assert "### Targets (issue 28)" in text and "failed: boom" in text and "| llm | 1 |" not in text


def test_merge_writes_a_current_table_the_index_test_accepts(tmp_path):
    runs = []
    for i, recs in enumerate(([_record("a", "square", 1.0)], [_record("a", "square", 1.2), _record("b", "k", 0.8)])):
        path = tmp_path / f"run{i}.json"
        path.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "command": f"python3 bench/shape_sweep.py --part {i + 1}/2",
                                    "records": recs}))
        runs.append(str(path))
    args = shape_sweep.parser().parse_args(["--merge", *runs, "--markdown", str(tmp_path / "t.md")])
    merged = shape_sweep.merge(args)
    assert [r["ratio"] for r in merged["records"]] == [1.2, 0.8]
    shape_sweep.write_table(args, merged)
    text = (tmp_path / "t.md").read_text()
    assert re.search(r"(?m)^Command: `python3 (bench/[a-z_0-9]+\.py)\b[^`]*`$", text)
    assert text.startswith("# H100: ") and "| b | x |" in text


def test_list_and_help(capsys):
    shape_sweep.main(["--list", "--subset", "targets"])
    assert "rows; roughly" in capsys.readouterr().out
    shape_probe.main(["--list", "--preset", "waves"])
    assert "bfloat16 3008x3008x3008 row/row" in capsys.readouterr().out
    for main in (shape_sweep.main, shape_probe.main):
        with pytest.raises(SystemExit):
            main(["--help"])


def test_smoke_run_on_opencl(tmp_path, opencl_engine):
    pytest.importorskip("torch", reason="the smoke run times torch CPU tensors beside the engine")
    out = tmp_path / "s.json"
    shape_sweep.main(["--smoke", "--subset", "targets", "--part", "1/12", "--repeat", "1", "--json", str(out),
                      "--markdown", str(tmp_path / "s.md")])
    result = json.loads(out.read_text())
    assert result["records"] and all(r.get("check") == "ok" for r in result["records"])
    assert all(r["ratio"] > 0 for r in result["records"])


def test_probe_candidates_on_a_nominal_h100():
    from gemm_engine.codegen.device import nominal_cuda_device
    from gemm_engine.codegen.dialect import dialect_for
    from renders import any_problem
    engine = types.SimpleNamespace(dialect=dialect_for(nominal_cuda_device(9, 0)))
    decode = shape_probe.candidates(engine, any_problem((1, 8, 4096, 4096), "bfloat16", ("row", "col")), 16)
    names = [label for label, _ in decode]
    assert len(names) == 16 and any("split_tail=8" in n for n in names) and any("unit_outputs=1" in n for n in names)
    assert not any(n.split()[0] in shape_probe.FALLBACKS for n in names)
    square = shape_probe.candidates(engine, any_problem((1, 3000, 3000, 3000), "bfloat16"), 16)
    assert any("cluster_m=2" in label for label, _ in square)
    # Ragged rows: the default (192 x 192) reads them uncopied, and the same tiling with the copy
    # (copy_ragged) comes right after the rules' own choices (the rules preset times the two with
    # --max-candidates 4).
    labels = [label for label, _ in square]
    assert "copy_ragged" not in labels[0]
    assert labels[2] == labels[0].replace(" dispatch=", " copy_ragged=True dispatch=")


def test_a_first_table_carries_its_history(tmp_path):
    args = types.SimpleNamespace(markdown=str(tmp_path / "first.md"), table="shape_sweep_test_only")
    shape_sweep.write_table(args, {"device": "NVIDIA H100 80GB HBM3", "command": "python3 bench/shape_sweep.py",
                                   "records": [_record("a", "square", 1.0)]})
    text = (tmp_path / "first.md").read_text()
    assert re.search(r"(?ms)^## History\n.*^- \d{4}-\d{2}-\d{2}: the first run: 1 rows", current_tables.split(text)[1])
    shape_sweep.write_table(args, {"device": "NVIDIA H100 80GB HBM3", "command": "python3 bench/shape_sweep.py",
                                   "records": [_record("a", "square", 1.0)]})
    assert (tmp_path / "first.md").read_text().count("## History") == 1
