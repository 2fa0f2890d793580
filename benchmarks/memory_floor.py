"""What ingest's memory is before any video: each library's and each model's share.

In a fresh process, imports the libraries the offline ingest uses and loads each role's model
the way ``vidagent index`` does (through :class:`~vidagent.models.client.Models`, with a real
call on a small input so lazy loads happen), one at a time, printing the resident memory
(RSS, from ``/proc/self/status``) after each and the step's share. The order is the order
ingest loads them in. The CPU and the load average are printed first.

    .venv/bin/python benchmarks/memory_floor.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def rss_mib() -> float:
    """This process's resident memory now, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    from _cpu import describe

    print(describe())
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows: list[tuple[str, float, float]] = []
    last = rss_mib()
    rows.append(("python + nothing", last, last))

    def step(name: str, fn: Callable[[], object]) -> None:
        nonlocal last
        started = time.perf_counter()
        fn()
        now = rss_mib()
        rows.append((f"{name} ({time.perf_counter() - started:.1f} s)", now, now - last))
        last = now

    import numpy as np

    step("vidagent, numpy, PyAV, OpenCV", lambda: __import__("vidagent.ingest.pipeline"))
    from vidagent.config import load_settings
    from vidagent.library import Library
    from vidagent.models.base import TranscribeRequest
    from vidagent.models.client import Models

    home = tempfile.mkdtemp()
    settings = load_settings({"home": home, "cache": "off"})
    step("LanceDB Library opened", lambda: Library(settings.library_uri).list_videos())
    models = Models(settings)
    frame = np.zeros((360, 640, 3), np.uint8)
    frame[150:210, 100:540] = 255
    step(
        "asr: faster-whisper tiny.en",
        lambda: models.client("asr").transcribe(TranscribeRequest(np.zeros(16000 * 5, np.float32))),
    )
    step("ocr: RapidOCR PP-OCR engines", lambda: models.client("ocr").read_text([frame]))
    step("detector: OpenCV HOG + Haar", lambda: models.client("detector").detect([frame]))
    step("embed: MiniLM", lambda: models.client("embed").embed(["a person walks"]))
    from vidagent.ingest.speakers import Speakers

    step("speakers: voice encoder", lambda: Speakers().warm(settings))
    print(f"\n{'step':<46} {'RSS MiB':>8} {'share':>7}")
    for name, now, share in rows:
        print(f"{name:<46} {now:8.0f} {share:+7.0f}")
    models.close()


if __name__ == "__main__":
    main()
