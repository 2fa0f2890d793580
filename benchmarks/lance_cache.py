"""What a Library holds in memory as commits pile up: LanceDB's caches against the process's RSS.

A long-running server indexes while it answers: every write is a commit, a new version of its
table, and with ``read_consistency_interval=0`` the next read opens that version. This loop does
the same on a temporary Library through vidagent's own ``Library``: ``--commits`` times, it
rewrites one of ``--videos`` videos' clips and clip vectors (two commits, and the index upkeep
after them) and reads them back as a search does (listing, clip rows, a clip search), with the
hot-video cache emptied by each commit as in a server. Every ``--every`` commits it prints the
resident memory (VmRSS), Python's heap (tracemalloc) and the bytes and entries LanceDB's session
caches hold.

Run it twice to see what the cache bounds do: with vidagent's bounds (the settings'
defaults) and with LanceDB's own (``--metadata-mib 1024 --index-mib 6144``): the cache, and the
RSS with it, grows by each version read until it meets its bound::

    .venv/bin/python benchmarks/lance_cache.py --commits 600
    .venv/bin/python benchmarks/lance_cache.py --commits 600 --metadata-mib 1024 --index-mib 6144
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))


def rss_mib() -> float:
    """This process's resident memory (VmRSS) in MiB."""
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    from factories import video_record

    from vidagent.config import LIBRARY_INDEX_CACHE_MIB, LIBRARY_METADATA_CACHE_MIB
    from vidagent.library import Library
    from vidagent.library.schema import ClipRow

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=600)
    parser.add_argument("--videos", type=int, default=4)
    parser.add_argument("--clips", type=int, default=20, help="clips per video")
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--metadata-mib", type=int, default=LIBRARY_METADATA_CACHE_MIB)
    parser.add_argument("--index-mib", type=int, default=LIBRARY_INDEX_CACHE_MIB)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="vidagent-lance-cache-") as tmp:
        lib = Library(tmp, index_cache_mib=args.index_mib, metadata_cache_mib=args.metadata_mib)
        lib.use_embedding("clip_vectors", "fake:hash", args.dim)
        ids = [f"v{i}" for i in range(args.videos)]
        for video_id in ids:
            lib.put_video(video_record(video_id, duration=5.0 * args.clips))
        print(
            f"cache bounds: metadata {args.metadata_mib} MiB, index {args.index_mib} MiB; "
            f"{args.videos} videos x {args.clips} clips, {args.dim}-d"
        )
        tracemalloc.start()
        start, started = rss_mib(), time.monotonic()
        for n in range(args.commits):
            video_id = ids[n % len(ids)]
            clips = [
                ClipRow(video_id, i, 5.0 * i, 5.0 * (i + 1), caption=f"clip {i} of {n}")
                for i in range(args.clips)
            ]
            vectors = rng.standard_normal((args.clips, args.dim)).astype(np.float32)
            lib.put_clips(video_id, clips)
            lib.put_clip_vectors(video_id, "fake:hash", clips, vectors)
            lib.list_videos()
            lib.clips(ids[(n + 1) % len(ids)])
            lib.search_clips(vectors[0], k=5)
            if n % args.every == 0 or n == args.commits - 1:
                heap = tracemalloc.get_traced_memory()[0] / 2**20
                cache = lib.tables.cache_bytes() / 2**20
                print(
                    f"after {n + 1:5d} rewrites: RSS {rss_mib():7.1f} MiB "
                    f"({rss_mib() - start:+6.1f}), Python heap {heap:5.1f} MiB, "
                    f"LanceDB caches {cache:7.2f} MiB in {lib.tables.cache_entries()} entries, "
                    f"{time.monotonic() - started:5.0f} s",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
