"""Lance filter expressions (SQL ``WHERE`` text) over the Library's tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def quote(value: str) -> str:
    """``value`` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def one_of(column: str, values: Iterable[str]) -> str:
    """``column`` is one of ``values``."""
    return f"{column} IN ({', '.join(quote(v) for v in values)})"


def clip_keys(wanted: Mapping[str, Iterable[int]]) -> str:
    """Rows with one of these clip indexes of their video (``video_id -> clip indexes``).

    Led by ``video_id IN (...)``, which the BTREE index on ``video_id`` answers: an ``OR`` of
    per-video conditions alone made LanceDB scan every row (63 ms at 720,000 clips, where the
    index narrowed it to the named videos' rows in under 1 ms; docs/scaling.md).
    """
    each = " OR ".join(
        f"(video_id = {quote(v)} AND clip_index IN ({', '.join(map(str, sorted(ix)))}))"
        for v, ix in wanted.items()
    )
    return f"{one_of('video_id', wanted)} AND ({each})"


def span_filter(
    video_ids: Sequence[str] | None,
    t0: float | None,
    t1: float | None,
    start_col: str,
    end_col: str,
) -> str:
    """Rows of ``video_ids`` (None: of any video) whose span ``[start_col, end_col]`` meets
    ``[t0, t1]`` (None: open); ``""`` when nothing is filtered.

    Spans overlap a range when they end after it starts and start before it ends; points
    (``start_col == end_col``) count when they fall inside it, ends included.
    """
    strict = start_col != end_col
    parts = [one_of("video_id", video_ids)] if video_ids is not None else []
    if t0 is not None:
        parts.append(f"{end_col} {'>' if strict else '>='} {float(t0)}")
    if t1 is not None:
        parts.append(f"{start_col} {'<' if strict else '<='} {float(t1)}")
    return " AND ".join(parts)
