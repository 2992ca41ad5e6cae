#!/usr/bin/env bash
# Set up gemm_engine on a fresh Debian-like machine: an OpenCL runtime (PoCL, on the CPU) when no
# OpenCL driver is registered, then the package itself with its test extras (pyopencl, pytest).
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing the PoCL OpenCL runtime (pocl-opencl-icd)" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq pocl-opencl-icd >/dev/null
fi

if ! python3 -c "import gemm_engine.cli, numpy, pyopencl, pytest, ml_dtypes" >/dev/null 2>&1 \
   || ! command -v gemm-engine >/dev/null 2>&1; then
  echo "setup: installing gemm_engine[test] (editable) with pip" >&2
  python3 -m pip install -q --disable-pip-version-check -e ".[test]"
fi
