"""One way down: a clip indexed through the HTTP API holds what ``vidagent index`` makes of it.

The same clip (the real narrated one where ``scripts/fetch-media.sh`` has cached it, else the
generated one) is indexed by the ``vidagent index`` command in one home and through a real server
on loopback (``POST /api/videos``, then its job's events to the end) in another, with the same
fake model specs on both sides. Both must hold the same rows and the same per-stage fingerprints.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
from clirun import vidagent
from factories import INDEX_SPECS
from liveserver import serve
from realmedia import CACHE

from vidagent.config import load_settings
from vidagent.library import Library
from vidagent.server.app import create_app

#: Real media where it is cached (no download from a test): 180 s, narrated, with text.
REAL_CLIP = CACHE / "wannaworktogether.mp4"


def _clip(tmp_path: Path, small_video: Path) -> Path:
    source = REAL_CLIP if REAL_CLIP.is_file() else small_video
    media = tmp_path / "media"
    media.mkdir()
    return Path(shutil.copy(source, media / source.name))


def _index_over_http(home: Path, clip: Path) -> list[tuple[str, dict[str, Any]]]:
    """Index ``clip`` through a live server in ``home``; the job's events, ``end`` last."""
    settings = load_settings({**INDEX_SPECS, "home": str(home)})
    live = serve(create_app(settings, media_roots=[clip.parent]))
    try:
        started = httpx.post(f"{live.url}/api/videos", json={"path": clip.name})
        assert started.status_code == 202, started.text
        url = f"{live.url}/api/jobs/{started.json()['job_id']}/events"
        got, kind = [], "message"
        with httpx.stream("GET", url, timeout=600) as r:
            for line in r.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    got.append((kind, json.loads(line[6:])))
    finally:
        live.stop()
    return got


def _contents(library: Library) -> dict[str, Any]:
    """What a Library holds of its one video, less the times of the writes."""
    (video,) = library.list_videos()
    vid = video.video_id
    artifacts = [
        {k: v for k, v in dataclasses.asdict(a).items() if k != "updated_at"}
        for a in library.artifacts(vid)
    ]
    return {
        "video": {k: v for k, v in video.to_row().items() if k not in ("added_at", "stages")},
        # what made each stage's output: model specs and prompt hashes, the structure's sampling
        "fingerprints": {
            name: {k: v for k, v in info.items() if k != "at"}
            for name, info in video.stages.items()
        },
        "clips": [dataclasses.asdict(c) for c in library.clips(vid)],
        "transcript": [dataclasses.asdict(s) for s in library.transcript(vid)],
        "shots": [dataclasses.asdict(s) for s in library.shots(vid)],
        "frames": [dataclasses.asdict(f) for f in library.frames(vid)],
        "artifacts": sorted(artifacts, key=lambda a: (a["kind"], a["key"])),
    }


def _manifest(library_dir: Path) -> dict[str, Any]:
    manifest = json.loads((library_dir / "manifest.json").read_text(encoding="utf-8"))
    return {k: v for k, v in manifest.items() if not k.endswith("_at")}


def test_the_http_api_indexes_a_clip_as_vidagent_index_does(
    tmp_path: Path, small_video: Path
) -> None:
    clip = _clip(tmp_path, small_video)
    by_cli, by_http = tmp_path / "cli-home", tmp_path / "http-home"
    env = {f"VIDAGENT_{role.upper()}": spec for role, spec in INDEX_SPECS.items()}
    done = vidagent("index", str(clip), "--json", home=by_cli, env=env)
    assert done.returncode == 0, done.stderr

    events = _index_over_http(by_http, clip)
    kinds = [k for k, _ in events]
    assert kinds[-1] == "end" and set(kinds[:-1]) == {"progress"}
    end = events[-1][1]
    assert end["state"] == "done", end["error"]
    progress = [d for k, d in events if k == "progress"]
    stages = list(end["result"]["stages"])
    total = len(stages) + 1
    counts = [{k: d[k] for k in ("stage", "done", "total")} for d in progress]
    assert [c for k, c in enumerate(counts) if k == 0 or c != counts[k - 1]] == [
        {"stage": "structure", "done": 0, "total": total},
        {"stage": "structure", "done": 1, "total": total},
        *({"stage": s, "done": n, "total": total} for n, s in enumerate(stages, 2)),
    ]
    # each stage said to be under way as it starts, until it ends
    started = {s for d in progress for s in d["running"]}
    assert started == {"structure", *stages} and progress[-1]["running"] == []
    for n, s in enumerate(stages, 2):
        ended = next(k for k, d in enumerate(progress) if d["done"] == n)
        assert (
            any(s in d["running"] for d in progress[:ended]) and s not in progress[ended]["running"]
        )

    cli_library = Library(str(by_cli / "library"), create=False)
    http_library = Library(str(by_http / "library"), create=False)
    made, served = _contents(cli_library), _contents(http_library)
    assert made["clips"] and made["transcript"] and made["frames"]
    assert set(made["fingerprints"]) == {"structure", *stages}
    assert all(made["fingerprints"][s]["model"] for s in stages)
    assert served["fingerprints"] == made["fingerprints"]
    assert served == made
    assert _manifest(by_http / "library") == _manifest(by_cli / "library")
