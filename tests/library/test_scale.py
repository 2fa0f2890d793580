"""A Library past its index thresholds: ANN and scalar indexes built on their own, searches that
still find what an exact search finds, rows added afterwards, and compaction that keeps rows.

The thresholds are lowered through the Library's index policy so a few thousand rows cross them.
"""

from __future__ import annotations

import os
import signal
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from factories import video_record

from vidagent.exceptions import LibraryError
from vidagent.library import ClipRow, Library
from vidagent.library.filters import clip_keys
from vidagent.library.indexing import IndexPolicy, index_names, vector_query
from vidagent.library.tables import read
from vidagent.library.vectors import unit_rows32

DIM = 32
SPEC = "fake:hash?dim=32"
CLIPS = 120  # per video, 5 s each


def clustered(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, DIM) unit vectors around a few topics, as real caption embeddings are."""
    topics = rng.standard_normal((6, DIM))
    vectors = topics[rng.integers(0, 6, n)] + 0.7 * rng.standard_normal((n, DIM))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def add_video(lib: Library, video_id: str, vectors: np.ndarray) -> None:
    clips = [
        ClipRow(video_id, i, 5.0 * i, 5.0 * (i + 1), caption=f"{video_id} clip {i}")
        for i in range(len(vectors))
    ]
    lib.put_clips(video_id, clips)
    lib.put_clip_vectors(video_id, SPEC, clips, vectors)
    lib.put_video(video_record(video_id, 5.0 * len(vectors), f"{video_id}.mp4"))


def add_videos(lib: Library, stored: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each video of ``stored`` (id -> its vectors) added with :func:`add_video`; returns it."""
    for video_id, vectors in stored.items():
        add_video(lib, video_id, vectors)
    return stored


@pytest.fixture
def big(tmp_path: Path) -> tuple[Library, dict[str, np.ndarray]]:
    """20 videos x 120 clips = 2,400 vectors, past an ANN threshold of 2,000 rows."""
    lib = Library(tmp_path / "lib")
    lib.set_index_policy(ann_min_rows=2_000, scalar_min_rows=1_000, exact_max_rows=500)
    lib.use_embedding("clip_vectors", SPEC, DIM)
    rng = np.random.default_rng(7)
    stored = {}
    for v in range(20):
        video_id = f"video{v:02d}"
        stored[video_id] = clustered(rng, CLIPS)
        add_video(lib, video_id, stored[video_id])
    return lib, stored


def exact_top(
    stored: dict[str, np.ndarray], query: np.ndarray, k: int, videos: list[str] | None = None
) -> list[tuple[str, int]]:
    keys = [(v, i) for v in sorted(videos or stored) for i in range(len(stored[v]))]
    matrix = np.concatenate([stored[v] for v in sorted(videos or stored)])  # (N, DIM)
    order = np.argsort(-(matrix @ query), kind="stable")[:k]
    return [keys[i] for i in order]


def test_indexes_are_built_once_the_table_is_large_enough(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    lib.set_index_policy(ann_min_rows=2_000, scalar_min_rows=1_000)
    lib.use_embedding("clip_vectors", SPEC, DIM)
    rng = np.random.default_rng(1)
    for v in range(8):  # 960 rows: below both thresholds, searched by brute force
        add_video(lib, f"small{v}", clustered(rng, CLIPS))
    assert index_names(lib.table("clip_vectors")) == {}
    for v in range(8, 17):  # 2,040 rows
        add_video(lib, f"small{v}", clustered(rng, CLIPS))
    assert set(index_names(lib.table("clip_vectors"))) == {"vector", "video_id", "t0", "t1"}
    assert set(index_names(lib.table("clips"))) == {"video_id"}
    # A second Library object on the same directory reads the policy from the manifest.
    assert Library(tmp_path / "lib").index_policy().ann_min_rows == 2_000


def test_ann_search_finds_planted_clips_with_exact_scores(
    big: tuple[Library, dict[str, np.ndarray]],
) -> None:
    lib, stored = big
    assert "vector" in index_names(lib.table("clip_vectors"))
    rng = np.random.default_rng(3)
    recalls = []
    for _ in range(20):
        video_id = f"video{rng.integers(0, 20):02d}"
        index = int(rng.integers(0, CLIPS))
        query = stored[video_id][index]
        hits = lib.search_clips(query, k=10)
        assert (hits[0].clip.video_id, hits[0].clip.clip_index) == (video_id, index)
        assert hits[0].clip.caption == f"{video_id} clip {index}"
        for h in hits:  # re-ranked with the stored vectors: true cosine similarities
            true = float(stored[h.clip.video_id][h.clip.clip_index] @ query)
            assert h.score == pytest.approx(true, abs=1e-4)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        found = {(h.clip.video_id, h.clip.clip_index) for h in hits}
        recalls.append(len(found & set(exact_top(stored, query, 10))) / 10)
    assert np.mean(recalls) >= 0.9


def test_filtered_search_by_video_and_time_is_exact(
    big: tuple[Library, dict[str, np.ndarray]],
) -> None:
    lib, stored = big
    query = stored["video05"][40]
    per_video = lib.search_clips(query, video_ids=["video05", "video06"], k=8)
    assert [(h.clip.video_id, h.clip.clip_index) for h in per_video] == exact_top(
        stored, query, 8, ["video05", "video06"]
    )
    windowed = lib.search_clips(query, video_ids=["video05"], t_from=100.0, t_to=150.0, k=50)
    # Clips overlapping [100, 150] s are 20 (100-105) ... 29 (145-150): clip 40 is outside.
    assert sorted(h.clip.clip_index for h in windowed) == list(range(20, 30))
    assert {h.clip.video_id for h in windowed} == {"video05"}
    everywhere = lib.search_clips(query, t_from=0.0, t_to=9.0, k=60)
    assert {h.clip.clip_index for h in everywhere} <= {0, 1}
    assert len(everywhere) == 40  # two clips in each of 20 videos


def test_rows_added_after_the_index_are_searched_then_folded_in(
    big: tuple[Library, dict[str, np.ndarray]],
) -> None:
    lib, _ = big
    new = clustered(np.random.default_rng(11), CLIPS)
    add_video(lib, "late", new)  # 5% more rows: below the re-index fraction
    stats = index_names(lib.table("clip_vectors"))["vector"]
    assert stats.num_unindexed_rows == CLIPS
    hits = lib.search_clips(new[17], k=5)
    assert (hits[0].clip.video_id, hits[0].clip.clip_index) == ("late", 17)

    for v in range(2):  # past 10% unindexed (360 > 240): the write folds them into the index
        add_video(lib, f"later{v}", clustered(np.random.default_rng(20 + v), CLIPS))
    assert index_names(lib.table("clip_vectors"))["vector"].num_unindexed_rows == 0
    hits = lib.search_clips(new[17], k=5)
    assert (hits[0].clip.video_id, hits[0].clip.clip_index) == ("late", 17)


def test_compact_keeps_every_row_and_every_answer(
    big: tuple[Library, dict[str, np.ndarray]],
) -> None:
    from datetime import timedelta

    lib, stored = big
    lib.remove_video("video03")
    add_video(lib, "video03", stored["video03"])  # a re-index: deletes plus inserts
    query = stored["video11"][5]
    before_hits = [
        (h.clip.video_id, h.clip.clip_index, round(h.score, 5))
        for h in lib.search_clips(query, k=10)
    ]
    tables = ["clip_vectors", "clips", "videos"]
    before = {t: lib.table(t).count_rows() for t in tables}
    versions = len(lib.table("clips").list_versions())

    reports = {r.name: r for r in lib.compact(older_than=timedelta(0), retrain=True)}

    assert (
        {t: lib.table(t).count_rows() for t in tables}
        == before
        == {t: reports[t].rows_after for t in tables}
    )
    assert before["clip_vectors"] == 20 * CLIPS
    assert reports["clips"].versions_after < versions  # old versions pruned
    assert "vector" in reports["clip_vectors"].built  # retrained
    reopened = Library(lib.uri)
    after_hits = [
        (h.clip.video_id, h.clip.clip_index, round(h.score, 5))
        for h in reopened.search_clips(query, k=10)
    ]
    assert after_hits == before_hits
    assert [c.caption for c in reopened.clips("video03")][:2] == [
        "video03 clip 0",
        "video03 clip 1",
    ]


def test_wide_search_below_the_ann_threshold_is_brute_force(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    lib.set_index_policy(exact_max_rows=10)  # wide searches would use an index if one existed
    lib.use_embedding("clip_vectors", SPEC, DIM)
    rng = np.random.default_rng(5)
    stored = add_videos(lib, {f"v{i}": clustered(rng, 30) for i in range(3)})
    hits = lib.search_clips(stored["v1"][4], k=6)
    assert [(h.clip.video_id, h.clip.clip_index) for h in hits] == exact_top(
        stored, stored["v1"][4], 6
    )


def test_an_unknown_index_setting_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ann_rows"):
        Library(tmp_path / "lib").set_index_policy(ann_rows=5)


def test_repeated_video_searches_see_every_later_write(tmp_path: Path) -> None:
    """Searches of one video are served from memory after the first (hot.py); a write by any
    Library object on the directory must show in the very next search."""
    searcher = Library(tmp_path / "lib")
    searcher.use_embedding("clip_vectors", SPEC, DIM)
    rng = np.random.default_rng(9)
    first = clustered(rng, 10)
    add_video(searcher, "v1", first)
    assert searcher.search_clips(first[3], video_ids=["v1"], k=1)[0].clip.clip_index == 3
    assert searcher.search_clips(first[3], video_ids=["v1"], k=1)[0].clip.clip_index == 3

    writer = Library(tmp_path / "lib")  # as another process would
    second = clustered(rng, 12)
    add_video(writer, "v1", second)  # re-indexed: new vectors, two more clips
    hit = searcher.search_clips(second[11], video_ids=["v1"], k=1)[0]
    assert (hit.clip.clip_index, hit.score) == (11, pytest.approx(1.0, abs=1e-5))
    writer.remove_video("v1")
    assert searcher.search_clips(second[11], video_ids=["v1"], k=1) == []


def test_a_snapshot_reads_a_tables_version_before_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hot cache keys rows on the version the snapshot read: that version must be read
    before the rows are, or a commit between them would cache old rows under a new key."""
    from lancedb.query import AsyncQueryBase
    from lancedb.table import AsyncTable

    lib = Library(tmp_path / "lib")
    lib.use_embedding("clip_vectors", SPEC, DIM)
    add_video(lib, "v1", clustered(np.random.default_rng(4), 3))
    events: list[str] = []
    real_version, real_arrow = AsyncTable.version, AsyncQueryBase.to_arrow

    async def version(self: AsyncTable) -> int:
        got = await real_version(self)
        events.append("version read")
        return got

    async def to_arrow(self: AsyncQueryBase, *args: Any, **kwargs: Any) -> Any:
        events.append("rows asked")
        return await real_arrow(self, *args, **kwargs)

    monkeypatch.setattr(AsyncTable, "version", version)
    monkeypatch.setattr(AsyncQueryBase, "to_arrow", to_arrow)
    snap = lib.tables.snapshot(["clips"], "video_id = 'v1'", {"clips": None})
    assert events == ["version read", "rows asked"]
    assert snap.versions["clips"][1] == 3 and snap.rows["clips"].num_rows == 3


def test_a_video_search_reads_uncached_videos_with_the_versions_in_one_hand_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search of videos the hot cache lacks reads their rows in the same hand-over to
    LanceDB as the tables' versions; cached videos are kept, and rows of a video that is not
    listed (half-written) are read but never answered from."""
    from lancedb.query import AsyncQueryBase

    from vidagent.library import tables

    lib = Library(tmp_path / "lib")
    lib.use_embedding("clip_vectors", SPEC, DIM)
    rng = np.random.default_rng(11)
    stored = add_videos(lib, {v: clustered(rng, 9) for v in ("v1", "v2")})
    ghost = clustered(rng, 4)
    clips = [ClipRow("ghost", i, 5.0 * i, 5.0 * (i + 1)) for i in range(4)]
    lib.put_clips("ghost", clips)
    lib.put_clip_vectors("ghost", SPEC, clips, ghost)  # no video row: not listed
    lib.search_clips(stored["v1"][0], video_ids=["v1"], k=1)  # v1 cached, the listing read
    hand_overs, asked = [0], [0]
    real_together, real_arrow = tables.together, AsyncQueryBase.to_arrow

    def together(coroutines: list[Any]) -> list[Any]:
        hand_overs[0] += 1
        return real_together(coroutines)

    async def to_arrow(self: AsyncQueryBase, *args: Any, **kwargs: Any) -> Any:
        asked[0] += 1
        return await real_arrow(self, *args, **kwargs)

    monkeypatch.setattr(tables, "together", together)
    monkeypatch.setattr(AsyncQueryBase, "to_arrow", to_arrow)
    seen = []
    for query in (stored["v2"][4], ghost[1], stored["v1"][7]):
        hand_overs[0] = asked[0] = 0
        hits = lib.search_clips(query, video_ids=["v1", "v2", "ghost"], k=5)
        assert [(h.clip.video_id, h.clip.clip_index) for h in hits] == exact_top(stored, query, 5)
        seen.append((hand_overs[0], asked[0]))
    # the first: one hand-over reading the versions and the vectors and clip rows of v2 and
    # ghost; then the versions alone (ghost, not listed, is not read again)
    assert seen == [(1, 2), (1, 0), (1, 0)]


def test_the_ann_index_is_built_with_the_policys_codes_and_rebuilt_when_they_change(
    tmp_path: Path,
) -> None:
    """4-bit IVF_RQ codes by default (the re-rank depth of 2 x k is chosen for them); an index
    built with other codes, by an earlier policy, is rebuilt rather than searched too shallowly."""
    from datetime import timedelta

    lib = Library(tmp_path / "lib")
    lib.set_index_policy(ann_min_rows=2_000, scalar_min_rows=1_000, rq_bits=1)
    lib.use_embedding("clip_vectors", SPEC, DIM)
    rng = np.random.default_rng(4)
    stored = add_videos(lib, {f"v{i:02d}": clustered(rng, CLIPS) for i in range(17)})  # 2,040 rows

    def bits() -> int:
        index = index_names(lib.table("clip_vectors"))["vector"]
        return int(index.index_details["compression"]["num_bits"])

    assert bits() == 1
    lib.set_index_policy(rq_bits=IndexPolicy().rq_bits)
    assert IndexPolicy().rq_bits == 4
    reports = {r.name: r for r in lib.compact(older_than=timedelta(0))}
    assert "vector" in reports["clip_vectors"].built
    assert bits() == 4
    query = stored["v07"][33]
    hits = lib.search_clips(query, k=10)
    assert (hits[0].clip.video_id, hits[0].clip.clip_index) == ("v07", 33)
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    # Nothing to rebuild the next time: the index matches the policy.
    assert "vector" not in {c for r in lib.compact(older_than=timedelta(0)) for c in r.built}


def test_hit_clip_rows_are_read_through_the_video_id_index(
    big: tuple[Library, dict[str, np.ndarray]],
) -> None:
    """The filter that reads a search's hit rows lets the BTREE on ``video_id`` narrow the
    rows first (a plain OR of per-video conditions made LanceDB scan every row)."""
    lib, _ = big
    wanted = {"video03": [5, 7], "video11": [0], "video19": [119]}
    where = clip_keys(wanted)
    plan = lib.table("clips").search().where(where).limit(None).explain_plan(True)
    assert "ScalarIndexQuery" in plan
    assert "video_id" in plan.split("ScalarIndexQuery", 1)[1]
    got = lib.clip_rows((v, i) for v, ix in wanted.items() for i in ix)
    assert sorted(got) == [("video03", 5), ("video03", 7), ("video11", 0), ("video19", 119)]
    assert got[("video19", 119)].caption == "video19 clip 119"


def test_a_wide_search_reads_only_the_keys_and_distances(
    big: tuple[Library, dict[str, np.ndarray]],
) -> None:
    lib, stored = big
    table = lib.table("clip_vectors")
    found = vector_query(table, stored["video02"][9], None, 5, lib.index_policy(), exact=False)
    data = found.to_arrow()
    assert data.column_names == ["video_id", "clip_index", "_distance"]
    assert (data["video_id"][0].as_py(), data["clip_index"][0].as_py()) == ("video02", 9)


def test_a_videos_vectors_are_made_unit_length_in_float32() -> None:
    rows = np.array([[3.0, 4.0], [0.0, 0.0], [1e-3, 0.0]], np.float32)
    unit = unit_rows32(rows)
    assert unit.dtype == np.float32 and unit is not rows
    np.testing.assert_allclose(unit, [[0.6, 0.8], [0.0, 0.0], [1.0, 0.0]], rtol=1e-6)
    assert rows[0, 0] == 3.0  # left as it was
    scaled = unit_rows32(rows, in_place=True)  # the hot cache's fresh copy: scaled where it is
    assert scaled is rows
    np.testing.assert_allclose(rows, unit)


def test_new_tables_are_written_in_lance_file_format_2_1(tmp_path: Path) -> None:
    """Lance 2.1 files read a video's clip rows about twice as fast as LanceDB's default 2.2
    (docs/scaling.md); the footer of every data file names its format version."""
    import struct

    lib = Library(tmp_path / "lib")
    lib.use_embedding("clip_vectors", SPEC, DIM)
    add_video(lib, "v1", clustered(np.random.default_rng(2), 12))
    files = sorted((tmp_path / "lib").glob("*.lance/data/*.lance"))
    assert {f.parent.parent.name for f in files} >= {"clips.lance", "clip_vectors.lance"}
    for path in files:
        footer = path.read_bytes()[-8:]  # major, minor (little-endian u16), b"LANC"
        assert footer[4:] == b"LANC"
        assert struct.unpack("<HH", footer[:4]) == (2, 1), path


def test_a_video_search_skips_vectors_whose_clip_row_is_gone(tmp_path: Path) -> None:
    """Hit rows come from the cached Arrow rows in one take per video; a vector without its
    clip row is left out, first search and cached search alike, and the rest keep their order."""
    lib = Library(tmp_path / "lib")
    lib.use_embedding("clip_vectors", SPEC, DIM)
    rng = np.random.default_rng(12)
    stored = add_videos(lib, {"a": clustered(rng, 20), "b": clustered(rng, 20)})
    lib.table("clips").delete("video_id = 'a' AND clip_index = 4")  # as a half-written video
    query = stored["a"][4]
    expected = [key for key in exact_top(stored, query, 9, ["a", "b"]) if key != ("a", 4)][:8]
    for _ in range(2):  # read from the tables, then from the cache
        hits = lib.search_clips(query, video_ids=["a", "b"], k=9)
        assert [(h.clip.video_id, h.clip.clip_index) for h in hits] == expected
        assert all(h.clip.caption == f"{h.clip.video_id} clip {h.clip.clip_index}" for h in hits)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
@pytest.mark.parametrize("own", [False, True], ids=["parents-library", "own-library"])
def test_a_forked_child_is_refused_in_one_line_instead_of_hanging(
    tmp_path: Path, own: bool
) -> None:
    """LanceDB's runtime does not survive fork (a child's first read hung or crashed in 1-6 of
    39 forks here): a child forked after its parent used a Library gets a LibraryError before
    it touches LanceDB, through the parent's Library or one it opens itself."""
    lib = Library(tmp_path / "lib")
    lib.use_embedding("clip_vectors", SPEC, DIM)
    rng = np.random.default_rng(13)
    stored = add_videos(lib, {v: clustered(rng, 10) for v in ("a", "b")})
    assert lib.search_clips(stored["a"][2], video_ids=["a"], k=1)[0].clip.clip_index == 2
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LanceDB warns that its fork support is experimental
        pid = os.fork()
    if pid == 0:  # the child: write what the search raised, exit 0 only on a LibraryError
        code, said = 1, b""
        try:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # pytest-timeout's handler waits on us
            signal.alarm(60)
            child_lib = Library(tmp_path / "lib") if own else lib
            child_lib.search_clips(stored["b"][7], video_ids=["b"], k=1)
        except LibraryError as e:
            code, said = 0, str(e).encode()
        finally:
            os.write(write, said)
            os._exit(code)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    message = os.read(read, 4096).decode()
    assert os.waitstatus_to_exitcode(status) == 0, message
    assert "forked" in message and "'spawn'" in message and "\n" not in message
    # The parent goes on reading.
    assert lib.search_clips(stored["b"][7], video_ids=["b"], k=1)[0].clip.clip_index == 7


def test_tables_read_together_what_they_read_one_by_one(tmp_path: Path) -> None:
    """The concurrent reads of a video's first search return what the synchronous calls do:
    the same rows and columns, each table's version and row count, and a missing table empty;
    and a query run in one hand-over (``read``) returns what LanceDB's own ``to_arrow`` does."""
    lib = Library(tmp_path / "lib")
    lib.use_embedding("clip_vectors", SPEC, DIM)
    rng = np.random.default_rng(3)
    stored = add_videos(lib, {video_id: clustered(rng, 7) for video_id in ("a", "b")})
    where = "video_id = 'b'"
    columns = ["video_id", "clip_index", "vector"]
    names = ["clip_vectors", "videos", "frame_vectors"]
    snap = lib.tables.snapshot(names, where, {"clip_vectors": columns, "clips": None})
    alone = lib.table("clip_vectors").search().where(where).select(columns).limit(None)
    assert snap.rows["clip_vectors"].to_pylist() == alone.to_arrow().to_pylist()
    assert snap.rows["clips"].to_pylist() == lib.tables.scan("clips", where)
    assert len(snap.rows["clips"]) == 7
    assert set(snap.versions) == {"clip_vectors", "videos"}  # no frame_vectors table yet
    assert snap.versions["clip_vectors"] == (lib.table("clip_vectors").version, 14)
    assert snap.versions["videos"] == (lib.table("videos").version, 2)
    assert lib.tables.snapshot(names).rows == {}
    assert lib.tables.snapshot((), where, {"clips": None}).versions == {}
    assert not lib.tables.has("shots")  # a missing table reads empty, with its columns
    empty = lib.tables.snapshot((), where, {"shots": ["video_id", "t0"]}).rows["shots"]
    assert empty.num_rows == 0 and empty.column_names == ["video_id", "t0"]
    fresh = Library(tmp_path / "lib")  # no table opened yet: they open before the reads
    assert fresh.tables.snapshot((), where, {"clips": None}).rows["clips"].num_rows == 7

    table, policy = lib.table("clip_vectors"), lib.index_policy()
    for filtered in (None, where):
        query = vector_query(table, stored["a"][2], filtered, 5, policy, exact=True)
        (got,) = read(query)
        assert got.equals(query.to_arrow())
        assert got.column_names == ["video_id", "clip_index", "_distance"]
    scan = table.search().where("clip_index < 3").limit(None)
    both = read(scan, lib.table("clips").search().limit(None))
    assert both[0].equals(scan.to_arrow()) and both[1].num_rows == 14
