#!/usr/bin/env bash
# Builds the sdist and the wheel, installs the wheel with the `offline` extra into a fresh
# virtual environment (uv, with pip's settings: scripts/pip_install.py; uv's cache and
# .cache/wheels supply what setup.sh already fetched or built) and runs it as a user would:
# --version, info, and index + search of a tiny clip it generates. It runs from a folder outside
# the checkout, so nothing is imported from src/. Part of the test command.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=build/wheel-check
rm -rf dist "$work"
mkdir -p "$work"
# No build isolation: setuptools and wheel are already in .venv, and the build needs no network.
.venv/bin/python -m build --no-isolation --outdir dist . >"$work/build.log" 2>&1 \
  || { cat "$work/build.log" >&2; exit 1; }
wheel=$(ls dist/vidagent-*.whl)
ls dist/vidagent-*.tar.gz >/dev/null
# The package data a user needs: the papers' prompts and the web UI.
.venv/bin/python - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for want in ("vidagent/prompts/", "vidagent/server/static/", "vidagent/py.typed"):
    if not any(n.startswith(want) for n in names):
        sys.exit(f"check-wheel: the wheel lacks {want}")
EOF

base=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
"$base" -m venv "$work/venv"
# llama-cpp-python's wheel from where setup.sh built it (.cache/wheels), else built again.
pip=(.venv/bin/python scripts/pip_install.py "$work/venv/bin/python" -q --find-links "$root/.cache/wheels")
"${pip[@]}" "torch==2.13.0"  # the CPU build first, as setup.sh does
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE=$root/scripts/llama-cpp-lean.cmake}" \
  "${pip[@]}" "$root/$wheel[offline]"

cd "$work"
export VIDAGENT_HOME=$PWD/home HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
bin=$PWD/venv/bin
"$bin/python" - <<'EOF'
# A 4-second clip whose frames carry one line of large text, for OCR to read and search to find.
import av, cv2, numpy as np
with av.open("clip.mp4", "w") as out:
    stream = out.add_stream("libx264", rate=10)
    stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
    for i in range(40):
        img = np.full((240, 320, 3), 255, np.uint8)
        cv2.putText(img, "LIGHTHOUSE", (20, 130), cv2.FONT_HERSHEY_SIMPLEX, 1.4, (0, 0, 0), 3)
        for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="bgr24")):
            out.mux(packet)
    for packet in stream.encode():
        out.mux(packet)
EOF
"$bin/vidagent" --version
"$bin/vidagent" info >/dev/null
"$bin/vidagent" index clip.mp4 >/dev/null
"$bin/vidagent" search clip.mp4 "lighthouse" --json >hits.json
"$bin/python" - <<'EOF'
import json
hits = json.load(open("hits.json"))
if not hits or "LIGHTHOUSE" not in json.dumps(hits).upper():
    raise SystemExit(f"check-wheel: search on the installed wheel did not find the clip's text: {hits}")
print(f"check-wheel: the installed wheel indexed and searched a clip ({len(hits)} hit(s))")
EOF
