"""The README keeps its promises: its "Adding an algorithm" code runs as written, and CI runs the
README's own test command."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def test_adding_an_algorithm_runs_as_written(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", section("Adding an algorithm"), re.S)
    assert len(blocks) == 3
    script = tmp_path / "readme_compositions.py"
    script.write_text("\n".join(blocks))
    env = {**os.environ, "GEMM_ENGINE_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The mismatched composition was refused with a SetupError naming both components.
    assert "OrderedPartitionedStage" in proc.stdout and "Loader" in proc.stdout, proc.stdout


def test_ci_runs_the_readmes_test_command():
    commands = re.findall(r"^(bash scripts/setup\.sh && .*?)\s+#", section("Quick start"), re.M)
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci, f"{commands[1]!r} is not what .ci/run runs"
    assert "pytest" in commands[1] and "gemm_engine run" in commands[0]
