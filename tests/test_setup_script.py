"""scripts/setup.sh where it cannot install: one message naming every system package it needs, and
nothing changed (issue 35: it named `apt-get update -qq` and needed two round trips)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "setup.sh"


def test_without_root_one_message_names_every_package():
    # (pytest's own tmp_path lies in a folder only its owner can enter: a user could not run setup there)
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)
        _check_without_root(Path(folder))


def _check_without_root(tmp_path):
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, repo / "scripts" / "setup.sh")
    (tmp_path / "vendors").mkdir()                         # no OpenCL driver registered
    python = tmp_path / "python-without-venv"               # a Python whose venv / ensurepip are missing
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    for p in (tmp_path, repo, repo / "scripts", tmp_path / "vendors"):
        p.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "OCL_ICD_VENDORS": str(tmp_path / "vendors"), "PYTHON": str(python)}
    cmd = ["bash", str(repo / "scripts" / "setup.sh")]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: cannot run setup as a user")
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
    elif shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        pytest.skip("passwordless sudo here: setup would install the packages")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "pocl-opencl-icd python3-venv" in lines[0] and "apt-get install -y pocl-opencl-icd python3-venv" in lines[0]
    assert "apt-get update" in lines[0] and not (repo / ".venv").exists()
