#!/usr/bin/env bash
# The main job on a real video with the embedded offline defaults: set up, fetch a narrated
# 3-minute clip from Debian's openboard-common package, index it and print what was found.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
clip=$(bash scripts/fetch-media.sh wannaworktogether.mp4)
export VIDAGENT_HOME=${VIDAGENT_HOME:-$PWD/.cache/demo-home}
export HF_HUB_OFFLINE=1
.venv/bin/vidagent info
.venv/bin/vidagent index "$clip"
