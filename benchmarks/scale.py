"""Clip search over a 1,000-hour Library: latency per video and across all, ANN recall, size.

Builds a synthetic Library without models: ``--hours`` hours of video as ``--videos`` videos
(default one hour each) cut into 5 s clips (1,000 h = 720,000 clips), each clip with 384-d
float32 vectors clustered the way caption embeddings are (topics shared across videos, a
per-video tint, noise), and caption / transcript / OCR / detection text of realistic lengths.
Rows go in through the Library's bulk path (:meth:`Library.append`, one commit per table per
batch of videos, ``videos`` rows last), with index maintenance switched off while loading, so
the index builds are timed on their own:

1. no indexes: clip search per video (filter on one video id, exact);
2. ``compact`` with scalar indexes only: per video again, and across all videos (exact brute
   force over every vector) -- the ground truth for recall;
3. ``compact`` with the ANN index (the Library's default policy): per video, across all
   videos, and recall@16 of the ANN results against step 2's exact ones.

Latency is of :meth:`Library.search_clips`, the call every command and tool makes: listing
check, vector query, and reading the hit clips' rows; the query vector is given (no embedding).
Queries: half planted (a stored clip's vector with noise), half topic-like (a topic centre with
noise). Load average is printed beside the figures: other processes share the CPU.

    .venv/bin/python benchmarks/scale.py --hours 20          # a quick look
    .venv/bin/python benchmarks/scale.py                     # 1,000 hours (several minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from _cpu import describe  # the CPU every figure is measured on (this script's folder)

SPEC = "synthetic:scale"
SENTENCE = (
    "a person walks into the room holding red cup and sits down at table near window while "
    "another man in blue jacket talks on phone car drives past street outside camera pans left "
    "to show kitchen where woman is cooking dinner dog runs across lawn children play with ball "
    "text on screen reads welcome lecture slide shows graph of results speaker points at board"
)
WORDS = SENTENCE.split(" ")


def texts(rng: np.random.Generator, n: int, words: tuple[int, int]) -> list[str]:
    """``n`` strings of ``words`` (min, max) words drawn from a small vocabulary."""
    pool = np.array(WORDS)
    lengths = rng.integers(*words, n)
    flat = pool[rng.integers(0, len(pool), int(lengths.sum()))]
    ends = np.cumsum(lengths)
    return [" ".join(flat[e - n_ : e]) for e, n_ in zip(ends, lengths, strict=False)]


def batch(
    rng: np.random.Generator,
    topics: np.ndarray,
    first: int,
    videos: int,
    clips: int,
    clip_s: float,
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The clips, clip_vectors and videos rows of videos ``first`` .. ``first + videos - 1``."""
    from vidagent.library.schema import CLIPS_SCHEMA, VIDEOS_SCHEMA, vectors_schema

    dim = topics.shape[1]
    n = videos * clips
    ids = np.repeat([f"{first + v:016x}" for v in range(videos)], clips)  # (n,)
    index = np.tile(np.arange(clips, dtype=np.int32), videos)  # (n,)
    t0 = index * clip_s
    # A video dwells on a few of the topics; each clip is one of them, tinted and noisy.
    own = rng.integers(0, len(topics), (videos, 8))  # (V, 8)
    tint = rng.standard_normal((videos, dim)).astype(np.float32) * 0.4  # (V, D)
    picks = own[np.arange(n) // clips, rng.integers(0, 8, n)]  # (n,)
    vec = topics[picks] + tint[np.arange(n) // clips]
    vec += rng.standard_normal((n, dim)).astype(np.float32) * 0.6
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)  # (n, D) unit rows
    clip_cols = {
        "video_id": ids,
        "clip_index": index,
        "t0": t0,
        "t1": t0 + clip_s,
        "caption": texts(rng, n, (35, 70)),  # a VLM's two or three sentences
        "caption_model": ["synthetic"] * n,
        "subjects": ['["person_1"]'] * n,
        "transcript": texts(rng, n, (0, 16)),  # 5 s of speech
        "transcript_model": ["synthetic"] * n,
        "ocr_text": texts(rng, n, (0, 4)),
        "ocr_model": ["synthetic"] * n,
        "detections": ['[{"label": "person", "score": 0.9, "box": [0.1, 0.2, 0.5, 0.9]}]'] * n,
        "detect_model": ["synthetic"] * n,
        "ocr_lines": ["[]"] * n,
        "facts": ["{}"] * n,
    }
    flat = pa.array(vec.reshape(-1), pa.float32())
    vectors = pa.table(
        {
            "video_id": ids,
            "clip_index": index,
            "t0": t0,
            "t1": t0 + clip_s,
            "text_hash": [""] * n,
            "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
        },
        schema=vectors_schema(dim),
    )
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    video_rows = [
        {
            "video_id": f"{first + v:016x}",
            "source": f"/videos/{first + v}.mp4",
            "name": f"{first + v}.mp4",
            "size_bytes": 1 << 30,
            "duration": clips * clip_s,
            "fps": 30.0,
            "width": 1280,
            "height": 720,
            "rotation": 0,
            "codec": "h264",
            "has_audio": True,
            "added_at": now,
            "stages": json.dumps({"embed": {"model": SPEC}}),
        }
        for v in range(videos)
    ]
    return (
        pa.Table.from_pydict(clip_cols, schema=CLIPS_SCHEMA),
        vectors,
        pa.Table.from_pylist(video_rows, schema=VIDEOS_SCHEMA),
    )


def build(lib: Any, args: argparse.Namespace, topics: np.ndarray) -> tuple[float, np.ndarray]:
    """Load the Library; returns (seconds, a sample of stored vectors for planted queries)."""
    rng = np.random.default_rng(0)
    clips = round(args.hours * 3600 / args.videos / args.clip_seconds)
    lib.set_sampling(clip_seconds=args.clip_seconds)
    lib.use_embedding("clip_vectors", SPEC, topics.shape[1])
    off = 10**12  # no index maintenance while loading: the builds are timed on their own
    lib.set_index_policy(ann_min_rows=off, scalar_min_rows=off)
    start, sample = time.perf_counter(), []
    per = max(1, 40_000 // clips)  # videos per batch: ~40k rows, a few hundred MB at most
    for first in range(0, args.videos, per):
        clip_t, vec_t, video_t = batch(
            rng, topics, first, min(per, args.videos - first), clips, args.clip_seconds
        )
        lib.append("clips", clip_t)
        lib.append("clip_vectors", vec_t)
        lib.append("videos", video_t)  # last: listed only once its rows are in
        vectors = vec_t.column("vector").combine_chunks().flatten().to_numpy()
        sample.append(vectors.reshape(-1, topics.shape[1])[:: max(1, len(vec_t) // 50)])
        print(f"  loaded {first + min(per, args.videos - first)}/{args.videos} videos", end="\r")
    print()
    return time.perf_counter() - start, np.concatenate(sample)


def queries(rng: np.random.Generator, topics: np.ndarray, stored: np.ndarray, n: int) -> np.ndarray:
    """(n, D): half stored vectors with noise (planted), half topic centres with noise."""
    planted = stored[rng.integers(0, len(stored), n // 2)]
    planted = planted + rng.standard_normal(planted.shape).astype(np.float32) * 0.02
    topical = topics[rng.integers(0, len(topics), n - n // 2)]
    topical = topical + rng.standard_normal(topical.shape).astype(np.float32) * 0.5
    out = np.concatenate([planted, topical])
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def timed(
    lib: Any, qs: np.ndarray, k: int, videos: list[str] | None = None
) -> tuple[dict[str, float], list[list[tuple[str, int]]]]:
    """p50/p99 ms of search_clips over ``qs``, in ``videos[i]`` for query i when given."""
    times, results = [], []
    for i, q in enumerate(qs):
        where = [videos[i]] if videos else None
        start = time.perf_counter()
        hits = lib.search_clips(q, video_ids=where, k=k)
        times.append((time.perf_counter() - start) * 1000)
        results.append([(h.clip.video_id, h.clip.clip_index) for h in hits])
    ms = np.array(times)
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}, results


def flush_to_disk() -> float:
    """Seconds to write the page cache's dirty pages out (``sync``): a build rewrites the tables'
    files (over a GiB at 1,000 hours), and searches timed while the kernel still writes them back
    measure the disk's queue, not the search."""
    start = time.perf_counter()
    os.sync()
    return time.perf_counter() - start


def first_searches(
    lib: Any, qs: np.ndarray, k: int, videos: list[str]
) -> tuple[dict[str, float], list[list[tuple[str, int]]]]:
    """p50/p99 ms of the first search in each of ``videos``: the Library's in-process cache of
    searched videos is emptied before each, so the video's vectors and clip rows are read from
    the tables (LanceDB's own caches keep what they hold, as in a serving process)."""
    times, results = [], []
    for q, video_id in zip(qs, videos, strict=True):
        lib.tables.hot.clear()
        start = time.perf_counter()
        hits = lib.search_clips(q, video_ids=[video_id], k=k)
        times.append((time.perf_counter() - start) * 1000)
        results.append([(h.clip.video_id, h.clip.clip_index) for h in hits])
    ms = np.array(times)
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}, results


def lance_exact(lib: Any, qs: np.ndarray, k: int, videos: list[str]) -> dict[str, float]:
    """p50/p99 ms of a video's search as one exact LanceDB query (a brute-force scan of the
    video's rows through the video_id filter, the ANN index bypassed) plus the query reading
    the hits' clip rows: the per-video search without the Library's cache."""
    from vidagent.library.filters import quote
    from vidagent.library.indexing import vector_query
    from vidagent.library.tables import read

    table, policy, times = lib.table("clip_vectors"), lib.index_policy(), []
    for q, video_id in zip(qs, videos, strict=True):
        start = time.perf_counter()
        (found,) = read(
            vector_query(table, q, f"video_id = {quote(video_id)}", k, policy, exact=True)
        )
        lib.clip_rows((h["video_id"], h["clip_index"]) for h in found.to_pylist())
        times.append((time.perf_counter() - start) * 1000)
    ms = np.array(times)
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}


def per_video(
    lib: Any, qs: np.ndarray, k: int, ids: list[str], offset: int = 0
) -> dict[str, dict[str, float]]:
    """Searches within one video over ``len(qs) // 4`` videos (from ``offset`` in a fixed
    spread of the ids, so each step can read videos no earlier step read): the first in a
    video (:func:`first_searches`), the next three in it (from the Library's cache), and the
    same first queries as exact LanceDB queries (:func:`lance_exact`)."""
    lib.search_clips(qs[0], k=k)  # open the tables
    n = len(qs) // 4
    picked = [ids[((offset + i) * 7919) % len(ids)] for i in range(n)]
    cold, first = first_searches(lib, qs[:n], k, picked)
    warm, _ = timed(lib, qs[n : 4 * n], k, [v for v in picked for _ in range(3)])
    exact = lance_exact(lib, qs[:n], k, picked)
    _, again = timed(lib, qs[:n], k, picked)  # the cached path answers as the first did
    assert again == first, "a video's cached search differs from its first"
    return {"cold": cold, "warm": warm, "lance_exact": exact}


def recall(got: list[list[tuple[str, int]]], truth: list[list[tuple[str, int]]]) -> float:
    return float(
        np.mean([len(set(g) & set(t)) / max(1, len(t)) for g, t in zip(got, truth, strict=False)])
    )


def main() -> None:
    from vidagent.config import LIBRARY_INDEX_CACHE_MIB, LIBRARY_METADATA_CACHE_MIB

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=float, default=1000.0)
    parser.add_argument("--videos", type=int, help="how many videos (default: one per hour)")
    parser.add_argument("--clip-seconds", type=float, default=5.0)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument(
        "--ann-type", default="IVF_RQ", choices=["IVF_RQ", "IVF_SQ", "IVF_PQ", "IVF_HNSW_SQ"]
    )
    parser.add_argument(
        "--more",
        type=lambda v: tuple(int(x) for x in v.split(",")),
        nargs="*",
        default=[(32, 2), (64, 2), (48, 4)],
        metavar="NPROBES,REFINE",
        help="also time the ANN search with these settings",
    )
    parser.add_argument("--dir", help="where to build (default: a temporary directory, deleted)")
    parser.add_argument("--index-cache-mib", type=int, default=LIBRARY_INDEX_CACHE_MIB)
    parser.add_argument("--metadata-cache-mib", type=int, default=LIBRARY_METADATA_CACHE_MIB)
    parser.add_argument("--json", dest="json_out", help="also write the figures to this file")
    args = parser.parse_args()
    args.videos = args.videos or max(1, round(args.hours))

    from vidagent.library import Library
    from vidagent.library.indexing import IndexPolicy

    # A stopped run (SIGTERM) still deletes its temporary Library: exit through the finally.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="vidagent-scale-"))
    root.mkdir(parents=True, exist_ok=True)  # --dir may name a folder not made yet
    print(f"disk free at {root}: {shutil.disk_usage(root).free / 2**30:.0f} GiB")
    figures: dict[str, Any] = {"hours": args.hours, "videos": args.videos, "dim": args.dim}
    try:
        lib = Library(
            root / "library",
            index_cache_mib=args.index_cache_mib,
            metadata_cache_mib=args.metadata_cache_mib,
        )
        rng = np.random.default_rng(1)
        topics = rng.standard_normal((4096, args.dim)).astype(np.float32)
        seconds, stored = build(lib, args, topics)
        rows = lib.table("clip_vectors").count_rows()
        figures |= {"clips": rows, "build_s": seconds, "rows_per_s": rows / seconds}
        print(f"built {rows:,} clips of {args.videos} videos in {seconds:.1f} s")
        qs = queries(rng, topics, stored, args.queries)
        ids = lib.listed_ids()

        def report(name: str, t: dict[str, float]) -> None:
            t["loadavg"] = os.getloadavg()[0]  # beside every figure: other work shares the CPU
            print(
                f"  {name:<54} p50 {t['p50_ms']:8.2f} ms   p99 {t['p99_ms']:8.2f} ms"
                f"   (load {t['loadavg']:.1f})"
            )

        def videos(step: str, offset: int) -> None:
            figures[step] = per_video(lib, qs, args.k, ids, offset)
            report("per video, first search (Library cache emptied)", figures[step]["cold"])
            report("per video, next searches (cached)", figures[step]["warm"])
            report("per video, one exact LanceDB query + clip rows", figures[step]["lance_exact"])

        print("1. no indexes")
        videos("per_video_noindex", 0)

        print("2. scalar indexes, no ANN index")
        default = IndexPolicy()
        lib.set_index_policy(scalar_min_rows=default.scalar_min_rows)
        start = time.perf_counter()
        lib.compact(older_than=timedelta(0))
        figures["compact_scalar_s"] = time.perf_counter() - start
        print(f"  compaction + scalar indexes: {figures['compact_scalar_s']:.1f} s")
        print(f"  the compaction's files written out to disk: {flush_to_disk():.1f} s")
        videos("per_video_exact", 1000)
        figures["all_exact"], truth = timed(lib, qs, args.k)
        report(f"across all {rows:,} clips (exact)", figures["all_exact"])

        print(f"3. ANN index ({args.ann_type})")
        lib.set_index_policy(ann_min_rows=default.ann_min_rows, ann_type=args.ann_type)
        start = time.perf_counter()
        lib.compact(older_than=timedelta(0))
        figures["ann_build_s"] = time.perf_counter() - start
        print(f"  ANN index build: {figures['ann_build_s']:.1f} s")
        flushed = flush_to_disk()
        print(f"  the build's files written out to disk: {flushed:.1f} s")
        videos("per_video_ann", 2000)
        figures["all_ann"], got = timed(lib, qs, args.k)
        policy = lib.index_policy()
        name = f"nprobes {policy.nprobes}, refine {policy.refine_factor}"
        if policy.ann_type == "IVF_RQ":
            name += f", {policy.rq_bits}-bit"
        report(f"across all {rows:,} clips (ANN, {name})", figures["all_ann"])
        half = args.queries // 2
        figures["recall_at_k"] = recall(got, truth)
        figures["recall_planted"] = recall(got[:half], truth[:half])
        figures["recall_topical"] = recall(got[half:], truth[half:])
        print(
            f"  recall@{args.k} ANN vs exact: {figures['recall_at_k']:.3f} "
            f"(planted {figures['recall_planted']:.3f}, topical {figures['recall_topical']:.3f})"
        )
        for nprobes, refine in args.more:  # the latency / recall trade-off of the policy
            lib.set_index_policy(nprobes=nprobes, refine_factor=refine)
            t, more = timed(lib, qs, args.k)
            figures[f"all_ann_{nprobes}_{refine}"] = t | {"recall_at_k": recall(more, truth)}
            name = f"nprobes {nprobes}, refine {refine} (recall {recall(more, truth):.3f})"
            report(f"across all, {name}", t)
        lib.set_index_policy(nprobes=default.nprobes, refine_factor=default.refine_factor)
        # What LanceDB's caches hold after every query above: within the bounds, nothing the
        # searches read again was evicted (the settings library_*_cache_mib).
        figures["lance_cache_mib"] = lib.tables.cache_bytes() / 2**20
        print(
            f"  LanceDB caches after the searches: {figures['lance_cache_mib']:.1f} MiB "
            f"(bounds: index {args.index_cache_mib} MiB, metadata {args.metadata_cache_mib} MiB)"
        )
        figures["size_gib"] = lib.size_bytes() / 2**30
        figures["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        figures["loadavg"] = os.getloadavg()
        figures["cpus"] = os.cpu_count()
        figures["cpu"] = describe()
        print(
            f"size on disk {figures['size_gib']:.2f} GiB, peak memory "
            f"{figures['peak_rss_gib']:.2f} GiB, load average "
            f"{' '.join(f'{x:.1f}' for x in figures['loadavg'])} on {figures['cpus']} CPUs"
        )
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        # A LanceDB write still in flight in its own threads (a stopped run) may add files
        # back after the first removal: wait for it and remove again.
        for _ in range(5 if not args.dir else 0):
            shutil.rmtree(root, ignore_errors=True)
            time.sleep(1)
            if not root.exists():
                break


if __name__ == "__main__":
    print(describe())
    sys.exit(main())
