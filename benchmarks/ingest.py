"""Realtime factor of the full offline ingest, overall and per stage.

Runs every stage with the embedded offline defaults (faster-whisper tiny.en, RapidOCR, OpenCV
HOG/Haar, the perception describer, MiniLM, SmolLM2) into a fresh Library, on

- the real 3-minute narrated clip (``wannaworktogether.mp4`` from Debian's openboard-common), and
- a generated 10-minute 640x360 clip with 30 shots, burned-in text and a tone track.

Each clip gets a fresh model hub, so model loading is part of the figures, as it is for a user
running ``vidagent index`` once. Realtime factor = video duration / wall seconds (higher is
faster). Target from the issue: at least 10x overall on 2 cores.

Each clip is indexed twice in one run, on the same machine: *before* is the pipeline without the
speed levers (no text-presence gate before OCR, one OCR engine with onnxruntime's threads,
CTranslate2's default threads for Whisper, the embedder in sentence-transformers, stages one
after another, each decoding its own frames, the summary written by the llm), *after* the
default (the gate on, two single-thread OCR engines on OpenVINO sharing one compilation of the
models and reading two batches at once, Whisper on half the cores, the embedder's forward pass
as an OpenVINO graph, ``transcribe``, ``read_text`` and ``detect`` at once while the embedder
loads, OCR and detection taking their frames from the structure pass, the extractive digest as
the summary of the embedded llm, its centroid from the embed stage's stored vectors). The CPU's
model and vector extensions are printed first (``benchmarks/_cpu.py``). Per stage
the table prints both and the ratio before/after; with the overlap, those three stages' seconds
run side by side, so only the overall row is wall time. The load average is printed, as the
machine may be shared.

    .venv/bin/python benchmarks/ingest.py [--only real|generated] [--skip STAGE ...]

**Long mode** (``--long MIN ...``) measures what an archive costs: a video of each length is
composed from the real clips (``benchmarks/_compose.py``: narration, a still stretch, pedestrians,
a film trailer, a countdown, three voices, black; 640x360, 25 fps; cached in ``.cache/bench/``,
not committed) and indexed with every default stage in a fresh process twice: *before* with the
package of commit ``--before`` (default :data:`BEFORE_REV`, the pipeline as issue 47 found it,
from a git worktree in ``.cache/bench/``) and *after* with this tree. It prints each run's
realtime factor, CPU seconds and peak resident memory (``VmHWM``, :func:`_peak_kib`), and compares what the two
indexes hold: the spoken words and their times, the on-screen lines per clip (and lists those
lost), the people and faces detected per clip. Before each length runs, it prints what
``index --dry-run`` estimates for it beside the time the run then took: from the reference
figures, and from this CPU's speed as the run of this tree on the length before measured it
(:mod:`vidagent.ingest.speed`; each run has a home of its own, and a length is never estimated
from its own run).

    .venv/bin/python benchmarks/ingest.py --long 20 60 180 --before-upto 60
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))


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


#: The levers off: the pipeline before the speed work (``index_path`` arguments, and settings:
#: the summary written by the llm, as it was before the extractive digest; one OCR engine with
#: onnxruntime's threads, Whisper with CTranslate2's, and the embedder in sentence-transformers,
#: as the adapters ran before).
BEFORE: dict[str, Any] = {
    "options": {"read_text": {"gate": False}},
    "overlap": False,
    "settings": {
        "summary": "model",
        "ocr": "rapidocr:pp-ocr?workers=1&threads=0&runtime=onnxruntime",
        "asr": "faster-whisper:tiny.en?threads=0",
        "embed": "sentence-transformers:all-minilm-l6-v2?runtime=sentence-transformers",
    },
}
AFTER: dict[str, Any] = {}


def run_once(path: Path, stages: tuple[str, ...], levers: dict[str, Any]) -> tuple[Any, float]:
    """One fresh index of ``path`` in a fresh process (so imports are paid, as on a first
    ``vidagent index``), home and model hub: seconds per stage, notes, and wall seconds."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as pool:
        return pool.submit(_index, path, stages, levers).result()


def _index(path: Path, stages: tuple[str, ...], levers: dict[str, Any]) -> tuple[Any, float]:
    from vidagent.config import load_settings
    from vidagent.ingest import index_path
    from vidagent.library import Library
    from vidagent.models.client import Models

    levers = dict(levers)
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings({"home": home, "cache": "off", **levers.pop("settings", {})})
        library = Library(settings.library_uri)
        started = time.perf_counter()
        with Models(settings) as models:
            result = index_path(
                path, library=library, settings=settings, models=models, stages=stages, **levers
            )
        total = time.perf_counter() - started
    if result.error is not None:
        raise SystemExit(f"{path.name}: {result.error}")
    notes = [f"{r.stage}: {r.note}" for r in result.stages if r.note]
    return (stage_seconds(result), notes), total


def stage_seconds(result: Any) -> dict[str, float]:
    rows = {"structure": result.structure.seconds if result.structure else 0.0}
    rows.update((r.stage, r.seconds) for r in result.stages)
    return rows


def measure(label: str, path: Path, stages: tuple[str, ...]) -> None:
    from vidagent.media import probe

    duration = probe(path).duration
    print(f"\n{label}: {path.name}, {duration:.1f} s of video; load average {load()} at start")
    before, before_total = run_once(path, stages, BEFORE)
    after, after_total = run_once(path, stages, AFTER)
    print(f"  load average {load()} at end")
    print(f"  {'stage':<11} {'before s':>9} {'after s':>8} {'ratio':>6} {'after rt x':>10}")
    (old, old_notes), (new, new_notes) = before, after
    for stage in old:
        a, b = old[stage], new.get(stage, 0.0)
        print(
            f"  {stage:<11} {a:9.2f} {b:8.2f} {a / max(b, 1e-9):6.2f} {duration / max(b, 1e-9):10.1f}"
        )
    print(
        f"  {'overall':<11} {before_total:9.2f} {after_total:8.2f} "
        f"{before_total / after_total:6.2f} {duration / after_total:10.1f}"
        f"   (before: {duration / before_total:.1f}x realtime)"
    )
    print("  before notes: " + "; ".join(old_notes))
    print("  after notes: " + "; ".join(new_notes))


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- long mode: an hour and more of the real clips, before and after, time and memory ----------

#: Today's pipeline before the bounded-memory and repeat-skipping work (issue 47): the
#: ``before`` of ``--long`` runs the package of this commit, from a git worktree.
BEFORE_REV = "11d3585"


def long_runs(minutes: list[float], before_rev: str, before_upto: float) -> None:
    """Index the composed video of each length with today's package (``before``, up to
    ``before_upto`` minutes) and with this one, each in a fresh process; print the realtime
    factor, CPU seconds and peak resident memory, and compare what the two indexes hold."""
    from _compose import long_video

    before_src = _worktree(before_rev) if before_upto > 0 else None
    print(f"before: {before_rev} (git worktree); after: this tree")
    rows = []
    taught: Path | None = None  # the speed file the last run of this tree wrote
    for m in minutes:
        path = long_video(m * 60)
        # estimated before this length runs: from the reference figures, and from this CPU's
        # speed as the runs of the shorter videos taught it (the run of this one comes after)
        estimates = {"the reference figures": _estimate(path, None)}
        if taught is not None:
            estimates["this CPU's speed from the run before"] = _estimate(path, taught)
        runs = {}
        for label, src in (("before", before_src), ("after", ROOT / "src")):
            if src is None or (label == "before" and m > before_upto):
                continue
            home = Path(tempfile.mkdtemp(prefix=f"vidagent-long-{label}-"))
            print(f"\n{m:g} min, {label}: load average {load()} at start", flush=True)
            runs[label] = _child(path, home, src)
            r = runs[label]
            print(
                f"  {r['duration'] / r['wall']:.1f}x realtime: {r['wall']:.1f} s wall, "
                f"{r['cpu']:.1f} CPU s, peak {r['peak_mib']:.0f} MiB; load {load()} at end"
            )
            for stage, seconds, note in r["stages"]:
                print(f"    {stage:<11} {seconds:7.1f} s  {note}")
        if "after" in runs:
            wall = runs["after"]["wall"]
            for basis, (estimated, factor) in estimates.items():
                print(
                    f"  index --dry-run said {estimated:.1f} s with {basis} (x{factor:.2f}), "
                    f"the run took {wall:.1f} s: {100 * (estimated - wall) / wall:+.0f}%"
                )
            written = Path(runs["after"]["home"]) / "speed.json"
            taught = written if written.exists() else taught
        if "before" in runs:
            _compare(runs["before"]["home"], runs["after"]["home"])
        rows.append((m, runs))
    print(f"\n{'length':>7} {'':>6} {'wall s':>7} {'rt x':>6} {'CPU s':>7} {'peak MiB':>9}")
    for m, runs in rows:
        for label, r in runs.items():
            print(
                f"{m:6g}m {label:>6} {r['wall']:7.1f} {r['duration'] / r['wall']:6.1f} "
                f"{r['cpu']:7.1f} {r['peak_mib']:9.0f}"
            )


def _estimate(path: Path, speed_file: Path | None) -> tuple[float, float]:
    """The dry run's time for ``path`` with the default settings, in seconds, and the factor
    its offline stages were scaled by: with ``speed_file`` as this CPU's speed (a run's
    ``speed.json``, :mod:`vidagent.ingest.speed`), else from the reference figures."""
    import shutil

    from vidagent.config import load_settings
    from vidagent.ingest.pipeline import estimate_path

    home = Path(tempfile.mkdtemp())
    if speed_file is not None:
        shutil.copy(speed_file, home / "speed.json")
    estimate = estimate_path(path, load_settings({"home": home, "cache": "off"}))
    return sum(row.seconds for row in estimate.stages), estimate.speed.factor


def _worktree(rev: str) -> Path:
    import subprocess

    where = ROOT / ".cache" / "bench" / f"before-{rev}"
    if not where.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev],
            check=True,
            capture_output=True,
        )
    return where / "src"


def _child(path: Path, home: Path, src: Path) -> dict[str, Any]:
    """One ``index_path`` of ``path`` in a fresh interpreter importing vidagent from ``src``."""
    import json
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path), str(home)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["home"] = str(home)
    return result


def _child_main(path: str, home: str) -> None:
    """In the child: index, then print one JSON line of figures."""
    import json
    import resource

    import vidagent
    from vidagent.config import load_settings
    from vidagent.ingest import index_path
    from vidagent.library import Library
    from vidagent.media import probe
    from vidagent.models.client import Models

    settings = load_settings({"home": home, "cache": "off"})
    started = time.perf_counter()
    with Models(settings) as models:
        result = index_path(
            path, library=Library(settings.library_uri), settings=settings, models=models
        )
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "package": str(Path(vidagent.__file__).parent),
                "duration": probe(path).duration,
                "wall": wall,
                "cpu": usage.ru_utime + usage.ru_stime,
                "peak_mib": _peak_kib(usage.ru_maxrss) / 1024,
                "stages": [(r.stage, r.seconds, r.note) for r in result.stages],
            }
        )
    )


def _peak_kib(maxrss: int) -> float:
    """This process's peak resident memory in KiB: Linux's ``VmHWM``, else ``ru_maxrss``.

    On Linux ``ru_maxrss`` of a process started by ``exec`` is at least its parent's peak at the
    time (the kernel folds the replaced address space's high-water mark into it). Composing the
    videos' cycle takes this script to 3.7 GB, and a child started after it that only printed
    read 3,691 MiB in ``ru_maxrss`` and 9 MB in ``VmHWM``; so the runs of a benchmark that began
    by composing once all read about 4 GB. ``VmHWM`` is the high-water mark of this address
    space alone.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1])
    except OSError:
        pass
    return float(maxrss)


def _compare(before_home: str, after_home: str) -> None:
    """What the two indexes hold: spoken words with their times, on-screen lines, detections."""
    import json

    from vidagent.library import Library

    def load_index(home: str) -> tuple[list[Any], list[Any]]:
        library = Library(str(Path(home) / "library"))
        (video,) = library.list_videos()
        return library.transcript(video.video_id), library.clips(video.video_id)

    (seg_b, clips_b), (seg_a, clips_a) = load_index(before_home), load_index(after_home)
    words_b = [(w[2], w[0], w[1]) for s in seg_b for w in json.loads(s.words)]
    words_a = [(w[2], w[0], w[1]) for s in seg_a for w in json.loads(s.words)]
    same = sum(
        1
        for (wb, b0, b1), (wa, a0, a1) in zip(words_b, words_a, strict=False)
        if wb == wa and abs(b0 - a0) < 0.011 and abs(b1 - a1) < 0.011
    )
    print(
        f"  speech: {len(words_b)} words before, {len(words_a)} after; "
        f"{same} the same word at the same times (±10 ms)"
    )
    lines_b = {(c.clip_index, x) for c in clips_b for x in c.ocr_text.split("\n") if x}
    lines_a = {(c.clip_index, x) for c in clips_a for x in c.ocr_text.split("\n") if x}
    lost = sorted(lines_b - lines_a)
    print(
        f"  on-screen lines (clip, line): {len(lines_b)} before, {len(lines_a)} after; "
        f"{len(lost)} lost{': ' + '; '.join(f'{i}: {x}' for i, x in lost[:10]) if lost else ''}"
    )
    for label in ("person", "face"):
        count_b = [
            sum(d["label"] == label for d in json.loads(c.detections or "[]")) for c in clips_b
        ]
        count_a = [
            sum(d["label"] == label for d in json.loads(c.detections or "[]")) for c in clips_a
        ]
        differ = sum(1 for b, a in zip(count_b, count_a, strict=True) if b != a)
        print(
            f"  {label} detections: {sum(count_b)} before, {sum(count_a)} after; "
            f"{differ} of {len(clips_b)} clips count differently"
        )


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child_main(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["real", "generated"])
    parser.add_argument(
        "--long",
        nargs="+",
        type=float,
        metavar="MIN",
        help="long mode: videos of these lengths in minutes composed from the real clips",
    )
    parser.add_argument("--before", default=BEFORE_REV, help="long mode: the commit of before")
    parser.add_argument(
        "--before-upto",
        type=float,
        default=math.inf,
        metavar="MIN",
        help="long mode: run before only on videos up to this long (0: never)",
    )
    parser.add_argument(
        "--skip", nargs="*", default=[], help="stages left out (e.g. summarize), both runs"
    )
    args = parser.parse_args()
    from vidagent.ingest import STAGES

    stages = tuple(s for s in STAGES if s not in args.skip)
    from _cpu import describe

    print(describe())
    if args.long:
        long_runs(args.long, args.before, args.before_upto)
        return
    print(f"stages: {', '.join(stages)}")
    if args.only != "generated":
        clip = real_clip()
        if clip is not None:
            measure("real narrated clip", clip, stages)
    if args.only != "real":
        measure("generated 10-minute clip", generated_clip(), stages)


if __name__ == "__main__":
    main()
