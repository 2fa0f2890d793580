#!/usr/bin/env bash
# Sets up .venv, lints and type-checks, and runs every test. Real-media tests fetch clips from
# Debian packages and skip with a reason when apt cannot; no test reaches a model hub.
set -euo pipefail
cd "$(dirname "$0")/.."
# Bytecode is written, into the checkout's ignored __pycache__ folders and the environment's,
# even where the machine sets PYTHONDONTWRITEBYTECODE: otherwise every worker, CLI run, server
# and Ray worker of the tests compiles what it imports afresh (collecting the tests took 15.5 s
# without it, 8.8 s with it), and setup would compile the whole environment at install
# (scripts/setup.sh) where the tests' processes compile only what they import, once.
unset PYTHONDONTWRITEBYTECODE
# Real clips come from Debian packages, fetched while setup installs (a download and an
# unpacking: 5 s on a fresh clone, beside setup's build). Without apt (or offline) their tests
# skip, each with the reason, and this says so here. TEST_REQUIRE_MEDIA=1 (a machine that has
# apt) makes it fail.
# In its own process group (setsid), so that a failed setup stops the fetch and its apt-get.
setsid=$(command -v setsid || true)
$setsid bash scripts/fetch-media.sh >/dev/null &
fetching=$!
trap 'kill -- -"$fetching" 2>/dev/null || kill "$fetching" 2>/dev/null || true' EXIT
bash scripts/setup.sh
if ! wait "$fetching"; then
  [ "${TEST_REQUIRE_MEDIA:-0}" = 1 ] && { echo "real clips unavailable" >&2; exit 1; }
  echo "real clips unavailable: their tests will skip (TEST_REQUIRE_MEDIA=1 fails instead)" >&2
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 NO_MKDOCS_2_WARNING=1
.venv/bin/python -m compileall -q -j 0 src >/dev/null
# Checks beside the tests, which leave a sixth of two cores idle (streams paced in real time,
# servers, subprocesses): the package a user installs (the wheel and sdist built, the wheel
# installed with `offline` into a fresh environment and run: scripts/check-wheel.sh), the type
# check and the documentation build. Each runs in its own process group (setsid) with its output
# in build/NAME.log; its failure is read from its exit status by `wait` at the end, its log
# printed. Any step below that fails ends the command (set -e) and stops them all, rather than
# leave them running in the background.
mkdir -p build
beside=()
beside() {  # NAME COMMAND...
  $setsid "${@:2}" >"build/$1.log" 2>&1 &
  beside+=("$1:$!")
}
stop() {
  for job in "${beside[@]}"; do
    kill -- -"${job#*:}" 2>/dev/null || kill "${job#*:}" 2>/dev/null || true
  done
}
trap stop EXIT
beside wheel bash scripts/check-wheel.sh
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
beside mypy .venv/bin/mypy src  # strict (pyproject.toml)
# The documentation site: every page, link, anchor and generated reference (mkdocs.yml). Strict
# mode fails on any warning; --quiet would hide the warnings from its count (and pass), so the
# build says what it does (tests/test_docs.py runs this line on a page with a broken anchor).
beside docs .venv/bin/mkdocs build --strict --site-dir build/site
# One worker more than the cores (pytest-xdist; TEST_WORKERS=0 runs in this process): a fifth
# of the workers' time waits (streams paced in real time, servers, subprocesses), and the extra
# worker runs tests in those waits (2 cores: pytest 594 s with 2 workers, 539 s with 3, 523 s
# with 4, in one idle session). Each takes whole test files so a module's shared fixtures (an
# indexed clip, a Ray cluster) are built once, in collection order: the slowest first
# (tests/conftest.py); the 25 slowest tests are listed at the end.
.venv/bin/python -m pytest -q -n "${TEST_WORKERS:-$(($(nproc) + 1))}" --dist loadfile \
  --no-loadscope-reorder --durations=25 "$@"
for job in "${beside[@]}"; do
  name=${job%%:*}
  wait "${job#*:}" || { cat "build/$name.log" >&2; echo "the $name check failed" >&2; exit 1; }
  tail -n 1 "build/$name.log"
done
trap - EXIT
