#!/usr/bin/env bash
# Fetches the real test clips from Debian packages into .cache/media (nothing is committed):
#   openboard-common -> wannaworktogether.mp4 (180 s, narrated, CC licence)
#   opencv-doc       -> vtest.avi (pedestrians), Megamind.avi (faces)
# Prints the directory. Fails (exit 1) when apt cannot fetch them; tests then skip with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python tests/realmedia.py
