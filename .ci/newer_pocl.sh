#!/usr/bin/env bash
# CI stage: the OpenCL tests on a second, newer OpenCL implementation than the machine's own: PoCL 5.0
# inside an Ubuntu 24.04 root filesystem (the PoCL many users have; its kernel compiler aborted on one
# of our kernels and miscompiled another, issue 35), under both of PoCL's work-group methods (its
# default, which turns the code between barriers into loops over the work-items, and `cbs`).
#
#   .ci/newer_pocl.sh [PYTEST-ARGS...]      (default: the whole suite, -q -p no:cacheprovider)
#
#  1. The root, built once with debootstrap and cached (rebuilt when 30 days old, when this script's
#     recipe changes, or with FRESH=1): Ubuntu noble minbase with python3, python3-venv,
#     pocl-opencl-icd (universe) and the ICD loader. The Ubuntu archive key is taken from the
#     archive's own ubuntu-keyring package and checked against its published fingerprint before
#     debootstrap trusts it (this Debian machine has no Ubuntu keyring).
#  2. A virtual environment in the root with the package's dependencies and test extra (read from
#     pyproject.toml): wheels for the root's Python are downloaded here, with this machine's pip
#     configuration, and installed there with --no-index, so the root needs no pip set-up.
#  3. Each run copies the checkout (tracked and untracked, not ignored files) into the root and runs
#     pytest there as an unprivileged user, GEMM_ENGINE_TEST_BACKENDS=opencl, once per work-group
#     method, and prints each run's wall and CPU time. PoCL's kernel cache stays in the root between
#     runs.
#
# What runs: the whole suite, in both methods. The root has no nvcc, so the CUDA compile checks
# skip there (the main stage runs them); what is left is every OpenCL numerics test (every
# algorithm, dtype, layout and boundary shape, dispatch orders, split-K, skinny, epilogues, int8,
# interop, the CLI, tuning, the README's examples) and the host-side tests, which are cheap. Two
# cores: about 4-6 minutes a method once PoCL's kernel cache is warm (CI's whole budget is 90).
#
# Environment: GEMM_CI_CACHE (folder for the root; default ${XDG_CACHE_HOME:-$HOME/.cache}/gemm_engine-ci),
# FRESH=1, UBUNTU_MIRROR (default http://archive.ubuntu.com/ubuntu), POCL_METHODS (default
# "default cbs"). Needs root (debootstrap, chroot, mount), or passwordless sudo.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."
checkout=$(pwd)

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    exec sudo -n --preserve-env=GEMM_CI_CACHE,FRESH,UBUNTU_MIRROR,POCL_METHODS,HOME,XDG_CACHE_HOME "$self" "$@"
  fi
  echo "newer_pocl: needs root or passwordless sudo (debootstrap, chroot, mount)" >&2
  exit 1
fi

say() { printf 'newer_pocl: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

SUITE=noble
MIRROR=${UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}
# Ubuntu Archive Automatic Signing Key (2018) <ftpmaster@ubuntu.com>, which signs noble.
ARCHIVE_KEY=F6ECB3762474EDA9D21B7022871920D1991BC93C
PACKAGES=python3,python3-venv,pocl-opencl-icd,ocl-icd-libopencl1,ca-certificates
USER_NAME=ci
RECIPE="$SUITE $PACKAGES $ARCHIVE_KEY v1"   # a change rebuilds the root

cache=${GEMM_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gemm_engine-ci}
root=$cache/ubuntu2404-pocl
stamp=$root/.built
mkdir -p "$cache"
exec 9>"$cache/ubuntu2404-pocl.lock"
flock 9 || die "cannot lock $cache"

MOUNTS=()
cleanup() {
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}"; done
  MOUNTS=()
}
trap cleanup EXIT
mount_root() {
  local r=$1
  mount -t proc proc "$r/proc" && MOUNTS+=("$r/proc")
  mount -t sysfs sysfs "$r/sys" && MOUNTS+=("$r/sys")
  mount --bind /dev "$r/dev" && MOUNTS+=("$r/dev")
  mount -t tmpfs -o mode=1777,nosuid,nodev shm "$r/dev/shm" && MOUNTS+=("$r/dev/shm")
}
in_root() { chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "${@:2}" 9>&-; }

archive_keyring() {  # archive_keyring OUT: the archive key alone, checked by fingerprint
  local out=$1 tmp pkg file sha
  tmp=$(mktemp -d)
  curl -fsS -m 120 -o "$tmp/Packages.gz" "$MIRROR/dists/$SUITE/main/binary-amd64/Packages.gz" \
    || die "cannot download the $SUITE package index from $MIRROR"
  pkg=$(zcat "$tmp/Packages.gz" | awk '/^Package: ubuntu-keyring$/ { p = 1 } p && /^Filename:/ && !f { print $2; f = 1 }')
  [ -n "$pkg" ] || die "no ubuntu-keyring in the $SUITE index"
  curl -fsS -m 120 -o "$tmp/k.deb" "$MIRROR/$pkg" || die "cannot download $pkg"
  dpkg-deb -x "$tmp/k.deb" "$tmp/x"
  file=$tmp/x/usr/share/keyrings/ubuntu-archive-keyring.gpg
  mkdir -m 700 "$tmp/g"
  gpg -q --homedir "$tmp/g" --import "$file" 2>/dev/null
  gpg -q --homedir "$tmp/g" --export "$ARCHIVE_KEY" >"$out"
  sha=$(gpg --homedir "$tmp/g" --show-keys --with-colons "$out" 2>/dev/null | awk -F: '$1 == "fpr" { print $10 }')
  rm -rf "$tmp"
  [ "$sha" = "$ARCHIVE_KEY" ] || die "the archive key in $pkg does not have the fingerprint $ARCHIVE_KEY"
}

build_root() {
  local new=$root.new t0=$SECONDS
  rm -rf --one-file-system "$new"
  local tools=()
  command -v debootstrap >/dev/null || tools+=(debootstrap)
  command -v curl >/dev/null || tools+=(curl)
  command -v gpg >/dev/null || tools+=(gpg)
  if [ ${#tools[@]} -gt 0 ]; then
    say "installing ${tools[*]}"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${tools[@]}"; } >/dev/null \
      || die "could not install ${tools[*]}"
  fi
  mkdir -p "$new"
  archive_keyring "$cache/ubuntu-archive-2018.gpg"
  say "debootstrap $SUITE minbase with $PACKAGES (about 130 packages, 1 GB; a few minutes)"
  # (this debootstrap may predate noble: its gutsy script is the one every later Ubuntu uses)
  debootstrap --variant=minbase --components=main,universe --include="$PACKAGES" \
    --keyring="$cache/ubuntu-archive-2018.gpg" "$SUITE" "$new" "$MIRROR" gutsy >"$cache/build.log" 2>&1 \
    || die "debootstrap failed; see $cache/build.log"
  in_root "$new" useradd -m "$USER_NAME"
  in_root "$new" apt-get clean
  echo "$RECIPE" >"$new/.built"
  rm -rf --one-file-system "$root"
  mv "$new" "$root"
  say "root built in $((SECONDS - t0)) s: $(in_root "$root" dpkg-query -W -f='pocl-opencl-icd ${Version}' pocl-opencl-icd)"
}

if [ "${FRESH:-0}" != 0 ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$RECIPE" ] \
   || [ -n "$(find "$stamp" -mtime +30)" ]; then
  build_root
fi

# The dependencies, from pyproject.toml: wheels for the root's Python, fetched here.
pyver=$(in_root "$root" python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
host_python=.venv/bin/python
[ -x "$host_python" ] || host_python=python3
reqs=$("$host_python" - <<'EOF'
import re, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = p["dependencies"] + p["optional-dependencies"]["test"]
print("\n".join(deps))
EOF
)
venv_stamp=$root/opt/venv/.requirements
if [ ! -f "$venv_stamp" ] || [ "$(cat "$venv_stamp")" != "$reqs" ]; then
  say "the root's virtual environment: $(tr '\n' ' ' <<<"$reqs")"
  wheels=$cache/wheels-py$pyver
  mkdir -p "$wheels"
  printf '%s\n' "$reqs" >"$cache/requirements.txt"
  "$host_python" -m pip download -q --disable-pip-version-check --only-binary=:all: \
    --python-version "$pyver" --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    --implementation cp -d "$wheels" -r "$cache/requirements.txt" || die "pip download failed"
  rm -rf "$root/opt/venv" "$root/opt/wheels"
  cp -r "$wheels" "$root/opt/wheels"
  cp "$cache/requirements.txt" "$root/opt/requirements.txt"
  in_root "$root" python3 -m venv /opt/venv
  in_root "$root" /opt/venv/bin/pip install -q --no-index --find-links /opt/wheels -r /opt/requirements.txt \
    || die "installing the wheels in the root failed"
  rm -rf "$root/opt/wheels"
  printf '%s' "$reqs" >"$venv_stamp"
fi

# The checkout as it is (uncommitted changes too), owned by the test user.
rm -rf --one-file-system "$root/home/$USER_NAME/src"
mkdir -p "$root/home/$USER_NAME/src"
git -C "$checkout" ls-files -z -co --exclude-standard | (cd "$checkout" && xargs -0 tar -cf - --ignore-failed-read 2>/dev/null) \
  | tar -xf - -C "$root/home/$USER_NAME/src"
in_root "$root" chown -R "$USER_NAME:$USER_NAME" "/home/$USER_NAME"

[ $# -gt 0 ] || set -- -q -p no:cacheprovider
mount_root "$root"
say "$(in_root "$root" /opt/venv/bin/python -c 'import pyopencl as cl; print("; ".join(p.version for p in cl.get_platforms()))')"
status=0
for method in ${POCL_METHODS:-default cbs}; do
  env=(HOME=/home/$USER_NAME PATH=/opt/venv/bin:/usr/bin:/bin LANG=C.UTF-8 PYTHONPATH=/home/$USER_NAME/src
        GEMM_ENGINE_TEST_BACKENDS=opencl)
  [ "$method" = default ] || env+=(POCL_WORK_GROUP_METHOD=$method)
  say "pytest $* (PoCL work-group method: $method)"
  TIMEFORMAT="newer_pocl: method $method: %0R s wall, %0U s user + %0S s system CPU"
  time chroot --userspec="$USER_NAME:$USER_NAME" "$root" /usr/bin/env -i "${env[@]}" \
    /bin/bash -c 'cd ~/src && exec python -m pytest "$@"' pytest "$@" 9>&- || status=$?
  say "method $method: exit $status"
  [ "$status" -eq 0 ] || break
done
exit "$status"
