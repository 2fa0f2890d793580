#!/usr/bin/env bash
# The main job on a real video with the embedded offline defaults: set up, fetch a narrated
# 3-minute clip from Debian's openboard-common package, index it, and ask the DVD agent about it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
clip=$(bash scripts/fetch-media.sh wannaworktogether.mp4)
export VIDAGENT_HOME=${VIDAGENT_HOME:-$PWD/.cache/demo-home}
export HF_HUB_OFFLINE=1
.venv/bin/vidagent info
.venv/bin/vidagent index "$clip"
.venv/bin/vidagent ask "$clip" "What is the narrator's video mainly about?" \
  -o "working together with other people" -o "a cooking recipe" -o "a football match" \
  --max-steps 6
