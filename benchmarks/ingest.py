"""Realtime factor of the full offline ingest, overall and per stage.

Runs every stage with the embedded offline defaults (faster-whisper tiny.en, RapidOCR, OpenCV
HOG/Haar, the perception describer, MiniLM, SmolLM2) into a fresh Library, on

- the real 3-minute narrated clip (``wannaworktogether.mp4`` from Debian's openboard-common), and
- a generated 10-minute 640x360 clip with 30 shots, burned-in text and a tone track.

Each clip gets a fresh model hub, so model loading is part of the figures, as it is for a user
running ``vidagent index`` once. Realtime factor = video duration / wall seconds (higher is
faster). Target from the issue: at least 10x overall on 2 cores.

    .venv/bin/python benchmarks/ingest.py [--only real|generated]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def generated_clip() -> Path:
    from vidagent.media.synth import make_video

    path = ROOT / ".cache" / "bench" / "ingest-10min.mp4"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        overlays = [(t, t + 8.0, f"SCENE {i + 1} TITLE") for i, t in enumerate(range(10, 600, 40))]
        make_video(path, duration=600, shots=30, text_overlays=overlays, audio="tone", gop=250)
    return path


def real_clip() -> Path | None:
    from realmedia import fetch_clip

    try:
        return fetch_clip("wannaworktogether.mp4")
    except RuntimeError as e:
        print(f"real clip unavailable ({e}); skipping it")
        return None


def measure(label: str, path: Path) -> None:
    from vidagent.config import load_settings
    from vidagent.ingest import index_path
    from vidagent.library import Library
    from vidagent.media import probe
    from vidagent.models.client import Models

    duration = probe(path).duration
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings({"home": home, "cache": "off"})
        library = Library(settings.library_uri)
        started = time.perf_counter()
        with Models(settings) as models:
            result = index_path(path, library=library, settings=settings, models=models)
        total = time.perf_counter() - started
    if result.error is not None:
        raise SystemExit(f"{label}: {result.error}")
    print(f"\n{label}: {path.name}, {duration:.1f} s of video")
    print(f"  {'stage':<11} {'seconds':>8} {'realtime x':>11}")
    rows = [("structure", result.structure.seconds if result.structure else 0.0)]
    rows += [(r.stage, r.seconds) for r in result.stages]
    for stage, seconds in rows:
        print(f"  {stage:<11} {seconds:8.2f} {duration / max(seconds, 1e-9):11.1f}")
    print(f"  {'overall':<11} {total:8.2f} {duration / total:11.1f}")
    rest = total - sum(seconds for stage, seconds in rows if stage == "summarize")
    print(f"  {'w/o summary':<11} {rest:8.2f} {duration / rest:11.1f}   (vidagent index --stages without summarize)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["real", "generated"])
    args = parser.parse_args()
    if args.only != "generated":
        clip = real_clip()
        if clip is not None:
            measure("real narrated clip", clip)
    if args.only != "real":
        measure("generated 10-minute clip", generated_clip())


if __name__ == "__main__":
    main()
