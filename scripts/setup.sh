#!/usr/bin/env bash
# Set up gemm_engine on a fresh Debian-like machine, then leave everything in ./.venv:
#   1. an OpenCL runtime (PoCL, on the CPU) when no OpenCL driver is registered;
#   2. a virtual environment .venv (stock Debian/Ubuntu refuse pip installs into the system
#      Python, PEP 668), made with --system-site-packages so CuPy, torch or PyOpenCL already
#      installed on the machine are used rather than downloaded again;
#   3. this package, editable, with its test extras (pyopencl, pytest).
# Safe to run again: it installs only what is missing. Run things with .venv/bin/python.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else echo "setup: needs root to run: $* (no sudo here); run it as root, then run setup again" >&2; exit 1
  fi
}

apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: $1 is missing and this is not a Debian-like system (no apt-get); install $1 and run setup again" >&2
    exit 1
  fi
  echo "setup: installing $*" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; then
  apt_install pocl-opencl-icd
fi

python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
  apt_install python3
fi

venv=.venv
root=$(pwd)
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c "" >/dev/null 2>&1; then
  echo "setup: $venv is broken (its Python is gone); making it again" >&2
  rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
  # Debian ships venv's pip bootstrap (ensurepip) separately, as python3-venv.
  if ! "$python" -c "import ensurepip, venv" >/dev/null 2>&1; then
    apt_install python3-venv
  fi
  echo "setup: making the virtual environment $venv" >&2
  "$python" -m venv --system-site-packages "$venv"
fi

if [ ! -x "$venv/bin/gemm-engine" ] \
   || ! (cd / && "$root/$venv/bin/python" -c "import gemm_engine.cli, numpy, ml_dtypes, platformdirs, filelock, tqdm, pyopencl, pytest") >/dev/null 2>&1; then
  echo "setup: installing gemm_engine[test] (editable) into $venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e ".[test]"
fi
