"""One Library written from many threads and from many processes at once."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from factories import video_record

from vidagent.ingest import STAGES
from vidagent.library import Artifact, ClipRow, Library, content_id
from vidagent.media import uniform_clips

THREADS = 16
ROUNDS = 4
CLIPS = 24


def count_keys(lib: Library, table: str, *keys: str) -> Counter[tuple[object, ...]]:
    rows = lib.table(table).to_arrow().to_pylist()
    return Counter(tuple(r[k] for k in keys) for r in rows)


def test_sixteen_threads_writing_at_once_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    uri = tmp_path / "lib"
    shared = Library(uri)
    for vid in ("v0", "v1"):
        shared.put_clips(vid, [ClipRow(vid, i, 5.0 * i, 5.0 * i + 5) for i in range(CLIPS)])
        shared.put_video(video_record(vid))
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        # Half the threads share one Library object, half open their own on the same path.
        lib = shared if t % 2 else Library(uri)
        vid = f"v{t % 2}"
        try:
            barrier.wait()
            for r in range(ROUNDS):
                lib.put_artifact(Artifact(vid, "browse", f"t{t}-r{r}", f"thread {t} round {r}"))
                # Every thread writes the same new keys too: two inserts of one key must merge.
                lib.put_artifact(Artifact("v0", "summary", f"shared-{r}", data={"by": t}))
                lib.memo(
                    "v1",
                    "context",
                    f"memo-{r}",
                    producer="p",
                    inputs_hash="i",
                    build=lambda: ("built", {"by": t}),
                )
                updates = [{"clip_index": t, "caption": f"thread {t} round {r}"}]
                updates.append({"clip_index": THREADS + r % (CLIPS - THREADS), "ocr_text": "x"})
                lib.update_clips(vid, updates)
                lib.set_stage(vid, f"stage-{t}", {"round": r})
        except BaseException as e:  # noqa: BLE001 - collected and raised in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors[:3]

    lib = Library(uri)
    artifacts = count_keys(lib, "artifacts", "video_id", "kind", "key")
    expected = {
        (f"v{t % 2}", "browse", f"t{t}-r{r}") for t in range(THREADS) for r in range(ROUNDS)
    }
    expected |= {("v0", "summary", f"shared-{r}") for r in range(ROUNDS)}
    expected |= {("v1", "context", f"memo-{r}") for r in range(ROUNDS)}
    assert artifacts == Counter(list(expected))  # every row present, each exactly once
    last = lib.artifact("v0", "browse", f"t4-r{ROUNDS - 1}")
    assert last is not None and last.text == f"thread 4 round {ROUNDS - 1}"

    clips = count_keys(lib, "clips", "video_id", "clip_index")
    assert clips == Counter([(v, i) for v in ("v0", "v1") for i in range(CLIPS)])
    for vid in ("v0", "v1"):
        rows = lib.clips(vid)
        mine = [t for t in range(THREADS) if f"v{t % 2}" == vid]
        assert [rows[t].caption for t in mine] == [f"thread {t} round {ROUNDS - 1}" for t in mine]
        # set_stage reads the row under the lock: no thread's stage was overwritten by another's.
        stages = lib.get_video(vid).stages
        assert stages == {f"stage-{t}": {"round": ROUNDS - 1} for t in mine}
    assert count_keys(lib, "videos", "video_id") == Counter([("v0",), ("v1",)])


def test_sharing_an_embedding_binding_between_two_handles_keeps_the_vectors(tmp_path: Path) -> None:
    # Two handles stand for two processes: each read the manifest when it opened the Library.
    first, second = Library(tmp_path / "lib"), Library(tmp_path / "lib")
    first.put_clips("v", [ClipRow("v", i, 5.0 * i, 5.0 * i + 5) for i in range(2)])
    first.put_video(video_record("v"))
    assert first.use_embedding("clip_vectors", "fake:hash", 4) is False
    first.put_clip_vectors("v", "fake:hash", first.clips("v"), np.eye(2, 4, dtype=np.float32))

    # The second handle's manifest predates the binding; the write must not treat it as new.
    assert second.use_embedding("clip_vectors", "fake:hash", 4) is False
    assert first.clip_vector_hashes("v") == {0: "", 1: ""}
    first.set_sampling(clip_seconds=5)
    second.set_sampling(sample_fps=1)  # must not write back its stale copy of the manifest
    assert Library(tmp_path / "lib").manifest.sampling == {"clip_seconds": 5, "sample_fps": 1}


HOLDER = """
import sys
from vidagent.library import Library
lib = Library(sys.argv[1])
with lib.write_lock():
    print("locked", flush=True)
    sys.stdin.readline()  # held until told
"""


def test_a_process_holding_the_write_lock_keeps_other_processes_writers_waiting(
    tmp_path: Path,
) -> None:
    lib = Library(tmp_path / "lib")
    lib.put_artifact(
        Artifact("v", "summary", "global", "before")
    )  # its table made: a write is quick
    with subprocess.Popen(  # leaving the block closes the pipes
        [sys.executable, "-c", HOLDER, str(tmp_path / "lib")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        writer = threading.Thread(
            target=lib.put_artifact, args=(Artifact("v", "summary", "global", "after"),)
        )
        writer.start()
        writer.join(1.0)
        assert writer.is_alive(), "wrote while another process held the lock"
        holder.communicate("release\n", timeout=30)  # the holder lets go and ends
        writer.join(30)
        assert not writer.is_alive()
    assert lib.global_summary("v") == "after"


WRITER = """
import sys
from vidagent.library import Library
Library(sys.argv[1]).update_clips("v", [{"clip_index": 0, "caption": sys.argv[2]}])
"""


def test_a_process_sees_another_processes_commits_at_once(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    lib.put_clips("v", [ClipRow("v", 0, 0.0, 5.0, caption="before")])
    assert lib.clips("v")[0].caption == "before"  # the table handle is open and cached now
    subprocess.run([sys.executable, "-c", WRITER, str(tmp_path / "lib"), "after"], check=True)
    assert lib.clips("v")[0].caption == "after"


INDEXER = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from factories import INDEX_SPECS
from vidagent.config import load_settings
from vidagent.ingest import index_video
from vidagent.library import Library

uri, me, other, *videos = sys.argv[2:]
settings = load_settings({**INDEX_SPECS, "clip_seconds": 2})
lib = Library(uri)
Path(me).touch()
deadline = time.monotonic() + 60
while not Path(other).exists() and time.monotonic() < deadline:  # start together
    time.sleep(0.01)
for video in videos:
    index_video(video, library=lib, settings=settings)
print("indexed", len(videos), flush=True)
"""


@pytest.fixture(scope="module")
def five_videos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from vidagent.media.synth import make_video

    root = tmp_path_factory.mktemp("videos")
    paths = [root / f"v{i}.mp4" for i in range(5)]
    for i, path in enumerate(paths):
        make_video(
            path,
            duration=6 + i % 3,
            size=(160, 96),
            shots=2,
            audio="tone",
            tone_hz=300 + 50 * i,
            text_overlays=[(1.0, 3.0, f"VIDEO {i}")],
        )
    return paths


def test_two_processes_indexing_into_one_library_at_once(
    tmp_path: Path, five_videos: list[Path]
) -> None:
    uri = tmp_path / "lib"
    tests_dir = str(Path(__file__).resolve().parents[1])
    # Both start with the shared video, so they write its rows at the same moments.
    shared, own_a, own_b = five_videos[0], five_videos[1:3], five_videos[3:]
    jobs = [
        ([shared, *own_a], tmp_path / "a.ready", tmp_path / "b.ready"),
        ([shared, *own_b], tmp_path / "b.ready", tmp_path / "a.ready"),
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", INDEXER, tests_dir, str(uri), str(me), str(other)]
            + [str(v) for v in videos],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for videos, me, other in jobs
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outputs]

    lib = Library(uri)
    ids = {content_id(v): v for v in five_videos}
    assert len(ids) == 5
    assert count_keys(lib, "videos", "video_id") == Counter((v,) for v in ids)  # listed once
    clip_keys = Counter[tuple[object, ...]]()
    for vid, path in ids.items():
        video = lib.get_video(vid)
        assert set(video.stages) == {"structure", *STAGES}, path.name
        n = len(uniform_clips(video.duration, 2))
        clip_keys.update((vid, i) for i in range(n))
        clips = lib.clips(vid)
        assert [c.clip_index for c in clips] == list(range(n))
        # Every stage's checkpoint is kept: no process replaced the clips under another's stages.
        done = [(c.transcript_model, c.ocr_model, c.detect_model, c.caption_model) for c in clips]
        assert all(all(fp) for fp in done) and all(c.caption for c in clips)
        assert lib.global_summary(vid) == "A short test video."
        assert [(a.kind, a.key) for a in lib.artifacts(vid)] == [
            ("registry", ""),
            ("speakers", ""),
            ("summary", "global"),
        ]
    assert count_keys(lib, "clips", "video_id", "clip_index") == clip_keys
    assert count_keys(lib, "clip_vectors", "video_id", "clip_index") == clip_keys
    vectors = lib.table("clip_vectors").to_arrow().column("vector").to_pylist()
    assert all(v is not None and len(v) == 32 for v in vectors)
    assert lib.manifest.embeddings["clip_vectors"]["dim"] == 32
    hits = lib.search_clips(np.ones(32, dtype=np.float32), k=100)
    assert len(hits) == sum(clip_keys.values())
    for name in lib._table_names():  # every table reads back whole: nothing is corrupt
        table = Library(uri).table(name)
        assert table.count_rows() == len(table.to_arrow())
    counts = count_keys(lib, "frames", "video_id", "t")
    assert set(counts.values()) == {1}
    assert set(count_keys(lib, "shots", "video_id", "shot_index").values()) == {1}


def test_a_video_being_indexed_is_not_removed_under_it(tmp_path: Path) -> None:
    # `vidagent remove` while `vidagent index` ran on the video: removed, then the index
    # reported success for a video that was gone
    from vidagent.exceptions import UserError

    lib = Library(tmp_path / "lib")
    lib.put_video(video_record("v1"))
    held, release = threading.Event(), threading.Event()

    def index() -> None:
        with lib.indexing("v1"):
            held.set()
            release.wait(30)

    runner = threading.Thread(target=index)
    runner.start()
    assert held.wait(30)
    with pytest.raises(UserError, match="v1 is being indexed now; stop that first"):
        lib.remove_video("v1")
    release.set()
    runner.join()
    # another process indexing it (its lock file held)
    lock = tmp_path / "lib" / "indexing" / "v1.lock"
    hold = (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
        "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(UserError, match="being indexed now"):
            Library(tmp_path / "lib").remove_video("v1")
    finally:
        holder.kill()
        holder.communicate()  # waits, and closes its pipe
    assert lib.remove_video("v1") == "v1" and not lib.has_video("v1")
