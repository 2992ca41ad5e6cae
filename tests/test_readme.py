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
    # ... and runs the OpenCL tests on a second implementation too (PoCL 5.0 in an Ubuntu 24.04 root).
    assert ".ci/newer_pocl.sh" in ci and (ROOT / ".ci" / "newer_pocl.sh").stat().st_mode & 0o111


def test_using_it_runs_as_written(tmp_path):
    """The "Using it" section's own code (before its sub-sections), fused epilogues included, run
    as one script (every name it uses defined in it). The sub-sections' snippets (torch, grouped,
    quantized) are fragments whose operands' shapes are given in comments."""
    from conftest import get_engine
    get_engine("opencl")   # skips with the reason where OpenCL is unavailable
    blocks = re.findall(r"```python\n(.*?)```", section("Using it").split("\n### ")[0], re.S)
    assert len(blocks) >= 2
    script = tmp_path / "readme_using_it.py"
    script.write_text("\n".join(blocks))
    env = {**os.environ, "GEMM_ENGINE_CACHE_DIR": str(tmp_path / "cache"), "GEMM_ENGINE_BACKEND": "opencl"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_command_line_examples_parse_as_written():
    """Each `gemm-engine ...` line of the "Command line" block is one command the CLI accepts as
    the shell would split it (no `a | b` alternatives, which a shell reads as a pipe)."""
    import shlex
    from gemm_engine.tools import cli
    block = re.search(r"```bash\n(.*?)```", section("Command line"), re.S).group(1)
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.startswith("gemm-engine ")]
    assert len(lines) >= 10
    for line in lines:
        words = shlex.split(line)
        if ">" in words:          # output redirected to a file: the command is what precedes it
            words = words[:words.index(">")]
        assert not set(words) & {"|", "||", "&&", ";"}, f"{line!r} is not one command"
        argv = words[1:]
        try:
            cli.parser().parse_args(argv)
        except SystemExit as exc:
            raise AssertionError(f"the README's {line!r} does not parse (exit {exc.code})") from None
