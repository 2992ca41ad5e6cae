#!/usr/bin/env bash
# Set up gemm_engine (the composable-gemm distribution) on a fresh Debian-like machine, then leave
# everything in ./.venv:
#   1. what the system lacks, in one apt-get install: an OpenCL runtime (PoCL, on the CPU) when no
#      OpenCL driver is registered, python3-venv when venv's pip bootstrap is missing;
#   2. a virtual environment .venv (stock Debian/Ubuntu refuse pip installs into the system
#      Python, PEP 668), made with --system-site-packages so CuPy, torch or PyOpenCL already
#      installed on the machine are used rather than downloaded again;
#   3. this package, editable, with its test extras (pyopencl, pytest).
# Safe to run again: it installs only what is missing. Run things with .venv/bin/python.
# Without root or sudo it names every system package it needs in one message and changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup: $*" >&2; }
python=${PYTHON:-python3}
venv=.venv
root=$(pwd)

# -- 1. system packages: decide everything first, so one message (or one install) covers it all ----
packages=()
# (OCL_ICD_VENDORS: the folder the OpenCL ICD loader reads instead of /etc/OpenCL/vendors)
if ! ls "${OCL_ICD_VENDORS:-/etc/OpenCL/vendors}"/*.icd >/dev/null 2>&1; then
  packages+=(pocl-opencl-icd)
fi
if ! command -v "$python" >/dev/null 2>&1; then
  packages+=(python3 python3-venv)
elif [ ! -x "$venv/bin/python" ] && ! "$python" -c "import ensurepip, venv" >/dev/null 2>&1; then
  packages+=(python3-venv)   # Debian ships venv's pip bootstrap (ensurepip) separately
fi

ubuntu_without_universe() {  # Ubuntu, and no apt source enables the universe component
  local id
  id=$(. /etc/os-release 2>/dev/null && echo "${ID:-}")
  [ "$id" = ubuntu ] || return 1
  ! grep -qsE '^[^#]*\buniverse\b' /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources
}

if [ ${#packages[@]} -gt 0 ]; then
  need="${packages[*]}"
  if ! command -v apt-get >/dev/null 2>&1; then
    say "needs $need (the system has no apt-get: install them with its package manager, then run setup again)"
    exit 1
  fi
  if [[ " $need " == *" pocl-opencl-icd "* ]] && ubuntu_without_universe; then
    say "needs the system packages $need; pocl-opencl-icd is in Ubuntu's universe component, which no" \
        "apt source here enables: run 'sudo add-apt-repository universe' (or add universe to the" \
        "Components line of /etc/apt/sources.list.d/ubuntu.sources), then run setup again"
    exit 1
  fi
  if [ "$(id -u)" -eq 0 ]; then sudo=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo)
  elif command -v sudo >/dev/null 2>&1 && [ -t 0 ]; then sudo=(sudo)   # it asks for the password
  else
    say "needs the system packages $need, which only root can install (sudo is missing or asks for a" \
        "password it cannot read here): as root run" \
        "'apt-get update && apt-get install -y $need', then run setup again"
    exit 1
  fi
  apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get)
  say "installing $need with apt-get${sudo:+ (through sudo)}; first apt-get update"
  "${apt[@]}" update -qq
  # What it is about to install and how big (PoCL brings clang/LLVM: about 125 packages, 1 GB).
  plan=$("${apt[@]}" install --assume-no "${packages[@]}" 2>/dev/null || true)
  count=$(grep -oE '[0-9]+ newly installed' <<<"$plan" | grep -oE '^[0-9]+' || echo 0)
  download=$(grep -oE 'Need to get [0-9.,]+ [kMG]?B' <<<"$plan" | sed 's/Need to get //' || true)
  disk=$(grep -oE '[0-9.,]+ [kMG]?B of additional disk space' <<<"$plan" | sed 's/ of additional.*//' || true)
  why=""
  [[ " $need " == *" pocl-opencl-icd "* ]] && why=" (most of it clang/LLVM, PoCL's kernel compiler)"
  say "apt-get install $need: $count packages, ${download:-?} to download, ${disk:-?} on disk$why; a few minutes"
  # Progress: one line each tenth of the packages unpacked and set up (apt's own lines are hundreds).
  "${apt[@]}" install -y -q -o Dpkg::Use-Pty=0 "${packages[@]}" 2>&1 | awk -v total="$((2 * count))" '
    /^(Unpacking|Setting up) / {
      done++
      if (total > 0 && int(done * 10 / total) > shown) {
        shown = int(done * 10 / total)
        printf "setup:   apt-get: %d of %d packages unpacked and set up\n", int(done / 2), total / 2 > "/dev/stderr"
      }
    }
    /^(E|W): / { print > "/dev/stderr" }'
fi

# -- 2. the virtual environment -----------------------------------------------------------------
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c "" >/dev/null 2>&1; then
  say "$venv is broken (its Python is gone); making it again"
  rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
  say "making the virtual environment $venv"
  "$python" -m venv --system-site-packages "$venv"
fi

# -- 3. this package, editable, with its test extras --------------------------------------------
if [ ! -x "$venv/bin/gemm-engine" ] \
   || ! (cd / && "$root/$venv/bin/python" -c "import gemm_engine.tools.cli, numpy, ml_dtypes, platformdirs, filelock, tqdm, pyopencl, pytest") >/dev/null 2>&1; then
  say "installing composable-gemm[test] (import name gemm_engine; editable) and its dependencies into $venv" \
      "(numpy, PyOpenCL, pytest, ...: about 60 MB to download)"
  # pip's own lines are the progress (what it collects and downloads), less the already-satisfied ones.
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off -e ".[test]" 2>&1 \
    | { grep --line-buffered -v '^Requirement already satisfied' >&2 || true; }
fi
say "done: run things with $venv/bin/python (or $venv/bin/gemm-engine)"
