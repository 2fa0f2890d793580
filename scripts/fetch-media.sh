#!/usr/bin/env bash
# Fetches real clips from Debian packages into .cache/media (nothing is committed) and prints
# where each one is. With no argument: every clip the tests use; else the named clips.
#   openboard-common -> wannaworktogether.mp4 (180 s, narrated, Creative Commons)
#   opencv-doc       -> vtest.avi (pedestrians), Megamind.avi (faces)
# Exits 1 when apt cannot fetch them; the tests that need them then skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
# tests/realmedia.py needs only the standard library: the environment's Python where there is
# one yet, else python3 (the test command fetches while setup builds the environment).
python=.venv/bin/python
[ -x "$python" ] || python=${PYTHON:-python3}
if [ $# -eq 0 ]; then
  exec "$python" tests/realmedia.py
fi
for name in "$@"; do
  "$python" -c "import sys; sys.path.insert(0, 'tests'); from realmedia import fetch_clip; print(fetch_clip(sys.argv[1]))" "$name"
done
