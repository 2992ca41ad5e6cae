"""The README keeps its promises: every Python snippet runs as written (or says why it cannot here),
its command-line examples parse, and CI runs the README's own test command."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def test_ci_runs_the_readmes_test_command():
    commands = re.findall(r"^(bash scripts/setup\.sh && .*?)\s+#", section("Quick start"), re.M)
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci, f"{commands[1]!r} is not what .ci/run runs"
    assert "pytest" in commands[1] and "gemm_engine run" in commands[0]
    # ... and runs the OpenCL tests on a second implementation too (PoCL 5.0 in an Ubuntu 24.04 root).
    assert ".ci/newer_pocl.sh" in ci and (ROOT / ".ci" / "newer_pocl.sh").stat().st_mode & 0o111


#: A line that marks a README snippet the tests cannot run here (a GPU's, a cluster's), with the reason.
NOT_RUN = "# not run by the tests:"
#: What a snippet prints, where that is its point (the refused composition names both components).
PRINTS = {"Adding an algorithm": ("OrderedPartitionedStage", "Loader")}


def snippets() -> dict[str, list[str]]:
    """Every ```python block of the README by the (sub-)section it lies in, in order: a section's
    blocks run as one script (a later block may use an earlier one's names, never another section's)."""
    headings = [(m.start(), m.group(1)) for m in re.finditer(r"^#{2,3} (.+)$", README, re.M)]
    found: dict[str, list[str]] = {}
    for block in re.finditer(r"```python\n(.*?)```", README, re.S):
        title = [t for start, t in headings if start < block.start()][-1]
        found.setdefault(title, []).append(block.group(1))
    return found


SNIPPETS = snippets()


def test_every_python_block_is_run_or_marked():
    """The sections below cover every block (none lost to the parsing), and the ones the tests
    must run are among them."""
    assert sum(len(b) for b in SNIPPETS.values()) == README.count("```python")
    assert set(SNIPPETS) >= {"Using it", "With PyTorch", "Grouped GEMM (mixture of experts)", "Quantized weights",
                             "Tensor parallel", "Adding an algorithm"}, sorted(SNIPPETS)
    assert len(SNIPPETS["Adding an algorithm"]) == 3


@pytest.mark.parametrize("title", sorted(SNIPPETS))
def test_snippets_run_as_written(title, tmp_path):
    """Each section's Python runs as written, as one script in a fresh process (every name it uses
    defined in it), on the OpenCL backend (PoCL here); torch's snippets where torch is installed."""
    from conftest import get_engine
    code = "\n".join(SNIPPETS[title])
    marks = [line.split(NOT_RUN, 1)[1].strip() for line in code.splitlines() if NOT_RUN in line]
    if marks:
        pytest.skip(f"the README's {title!r} snippet is not run here: {marks[0]}")
    if re.search(r"^\s*import torch\b", code, re.M):
        pytest.importorskip("torch", reason=f"the README's {title!r} snippet needs torch")
    get_engine("opencl")   # skips with the reason where OpenCL is unavailable
    script = tmp_path / "readme_snippet.py"
    script.write_text(code)
    env = {**os.environ, "GEMM_ENGINE_CACHE_DIR": str(tmp_path / "cache"), "GEMM_ENGINE_BACKEND": "opencl"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)
    assert proc.returncode == 0, f"the README's {title!r} snippet failed:\n{proc.stderr[-3000:]}"
    for word in PRINTS.get(title, ()):
        assert word in proc.stdout, proc.stdout


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
