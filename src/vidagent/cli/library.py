"""``vidagent list``, ``show``, ``search``, ``remove`` and ``library compact``: reading, pruning
and looking after the Library."""

from __future__ import annotations

import re
from pathlib import Path
from shlex import quote
from typing import Any

import click

from vidagent.cli.base import (
    cli,
    echo_json,
    hms,
    parse_time,
    session_of,
    window_of,
    window_options,
)
from vidagent.exceptions import UserError, output_error
from vidagent.timecode import wall_clock


@cli.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def list_videos(ctx: click.Context, as_json: bool) -> None:
    """List the videos in the Library."""
    from vidagent.app.results import video_json

    videos = session_of(ctx).videos()
    if as_json:
        echo_json([video_json(v) for v in videos])
        return
    if not videos:  # on stderr: a script reading the list reads nothing
        session = session_of(ctx)
        where = (
            "in the Library"
            if session.library_exists()
            else f"yet: no Library at {session.library_uri}"
        )
        click.echo(f"no videos {where}; index one with `vidagent index PATH`", err=True)
    for v in videos:
        click.echo(f"{v.video_id}  {hms(v.duration)}  {len(v.stages):>2} stages  {v.name}")


@cli.command()
@click.argument("video")
@click.option(
    "--graph",
    "graph",
    is_flag=True,
    help="show the entity graph (AVI) instead: entities, relations",
)
@click.option(
    "--srt", is_flag=True, help="print (or write, -o) the whole transcript as SubRip subtitles"
)
@click.option("--vtt", is_flag=True, help="the same as WebVTT")
@click.option(
    "-o", "--out", type=click.Path(dir_okay=False), help="with --srt/--vtt: write to this file"
)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def show(
    ctx: click.Context,
    video: str,
    graph: bool,
    srt: bool,
    vtt: bool,
    out: str | None,
    as_json: bool,
) -> None:
    """Show a video's summary, subject registry and clip table (or, with --graph, its entity
    graph; with --srt or --vtt, its whole transcript as subtitles)."""
    if srt and vtt:  # one file of one format (the last flag won, silently)
        raise click.UsageError("give --srt or --vtt, not both")
    subtitles = "srt" if srt else "vtt" if vtt else None
    if out and not subtitles:
        raise click.UsageError("-o/--out writes subtitles: give --srt or --vtt with it")
    if subtitles:
        text = session_of(ctx).subtitles(video, "vtt" if subtitles == "vtt" else "srt")
        if out:
            target = Path(out)
            other = {"srt": ".vtt", "vtt": ".srt"}[subtitles]
            if target.suffix.lower() == other:  # SubRip in a .vtt file a player misreads
                raise UserError(
                    f"{target} ends in {other}: give --{other[1:]}, or name a .{subtitles} file"
                )
            try:
                if not _replaceable(target):  # the video itself, say, or a user's notes.txt
                    raise UserError(
                        f"{target} exists and is not a subtitle file (.srt, .vtt); name another -o"
                    )
                if not target.parent.exists():  # made, as sheet -o does
                    target.parent.mkdir(parents=True)
                target.write_text(text, encoding="utf-8")
            except OSError as e:  # a refused write names -o, not the Library's options
                raise output_error(e, target, place=target.parent) from None
            click.echo(f"wrote {out}")
        else:
            click.echo(text, nl=False)
        return
    if graph:
        _show_graph(ctx, video, as_json)
        return
    detail = session_of(ctx).show(video)
    if as_json:
        echo_json(detail.to_json())
        return
    v, clips, summary, subjects = detail.video, detail.clips, detail.summary, detail.registry
    click.echo(f"{v.video_id}  {v.name}  {hms(v.duration)}  {v.width}x{v.height}  {v.source}")
    if v.recorded_at:
        click.echo(
            f"recorded: {wall_clock(v.recorded_at, 0.0)} (clip times below also as wall-clock)"
        )
    stages = ", ".join(
        f"{name} ({info.get('model', '')})" for name, info in v.stages.items() if name != "watch"
    )
    click.echo(f"stages: {stages}")
    if "watch" in v.stages:
        _show_live(v.stages["watch"], v.recorded_at)
    if summary:
        click.echo(f"\nsummary\n  {summary.strip()}")
    if subjects:
        click.echo("\nsubjects")
        for sid, s in subjects.items():
            looks = ", ".join(s.get("appearance", []))
            click.echo(
                f"  {sid:<12} {s.get('name', 'unknown'):<16} first seen {s.get('first_seen', '?')}  {looks}"
            )
    label = detail.caption_label
    click.echo("\nclips" + (f"  (captions: {label})" if label else ""))
    for c in clips:
        wall = f"  {wall_clock(v.recorded_at, c.t0)}" if v.recorded_at else ""
        click.echo(f"  {hms(c.t0)}-{hms(c.t1)}{wall}  {detail.caption(c)[:110]}")
        said = [s for s in detail.said_in(c) if s.speaker]
        for s in said:  # who speaks, line by line, where the speakers stage labelled them
            who = detail.speaker(s)
            click.echo(f"                     {hms(s.t0)} {who}: {' '.join(s.text.split())[:90]}")
        if c.transcript and not said:
            click.echo(f"                     speech: {c.transcript[:100]}")
        shown = detail.on_screen(c)  # the lines a person can read; the index keeps them all
        if shown:
            click.echo(f"                     text:   {' | '.join(shown)[:100]}")


def _show_graph(ctx: click.Context, video: str, as_json: bool) -> None:
    body = session_of(ctx).graph(video).to_json()
    if as_json:
        echo_json(body)
        return
    if not body["built"]:
        build = f"`vidagent index {quote(video)} --stages graph`"
        click.echo(f"{video} has no entity graph yet; {build} builds it")
        return
    entities, relations = body["entities"], body["relations"]
    supers = sum(e["kind"] == "super" for e in entities)
    click.echo(
        f"{body['video_id']}  {len(entities)} entities ({supers} super-nodes), {len(relations)} relations"
    )
    if not entities:
        click.echo("the extractor found no people in the captions")
        return
    names = {e["node_id"]: e["name"] for e in entities}
    click.echo("\nentities")
    for e in entities:
        click.echo(
            f"  {e['node_id']:<12} {e['kind']:<6} {e['name'][:40]:<40} freq {e['freq']:.2f} "
            f"(raw {e['freq_raw']:.3f})  degree {e['degree']:.2f}  betweenness "
            f"{e['betweenness']:.2f}  centrality {e['centrality']:.2f}"
        )
        spans = ", ".join(f"{hms(a)}-{hms(b)}" for a, b in e["timeline"][:6])
        more = f" (+{len(e['timeline']) - 6})" if len(e["timeline"]) > 6 else ""
        if spans:
            click.echo(f"{'':16}appears {spans}{more}")
        if e["members"]:
            click.echo(f"{'':16}members {', '.join(e['members'])}")
    click.echo("\nrelations")
    for r in relations:
        when = f"{hms(r['t0'])}-{hms(r['t1'])}" if r["t0"] is not None else "time unknown"
        click.echo(
            f"  {r['src']} ({names.get(r['src'], '?')[:24]}) -> {r['dst']} "
            f"({names.get(r['dst'], '?')[:24]})  {r['kind']}: {r['relation'][:80]}  {when}"
        )


@cli.command()
@click.argument("video")
@click.argument("text")
@click.option(
    "--from", "t_from", metavar="T", help="only clips overlapping from this time (s or HH:MM:SS)"
)
@click.option("--to", "t_to", metavar="T", help="only clips overlapping up to this time")
@click.option(
    "--speaker",
    metavar="WHO",
    help="only clips where this speaker talks: a label (S1) or a name given with "
    "`vidagent speakers VIDEO rename`",
)
@click.option(
    "--top", default=5, show_default=True, type=click.IntRange(min=1), help="how many clips"
)
@window_options
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def search(
    ctx: click.Context,
    video: str,
    text: str,
    t_from: str | None,
    t_to: str | None,
    speaker: str | None,
    top: int,
    last: str | None,
    since: str | None,
    until: str | None,
    as_json: bool,
) -> None:
    """Find the clips of VIDEO (id, prefix, name, path, or 'all') that match TEXT in meaning
    (with --last/--since/--until: only in that window of each video, read at its live edge)."""
    videos = None if video == "all" else [video]
    start = parse_time(t_from) if t_from else None
    end = parse_time(t_to) if t_to else None
    window = window_of(last, since, until)
    found = session_of(ctx).search(
        text, videos=videos, t_from=start, t_to=end, top=top, speaker=speaker, window=window
    )
    if as_json:
        echo_json([h.to_json() for h in found])
        return
    if not found:
        click.echo("no matching clips")
    for found_hit in found:
        h = found_hit.hit
        said = f'  "{h.clip.transcript[:80]}"' if h.clip.transcript else ""
        who = f"  [{', '.join(found_hit.speakers)}]" if found_hit.speakers else ""
        wall = found_hit.to_json()["wall_t0"]
        when = f"{hms(h.clip.t0)}-{hms(h.clip.t1)}" + (f" ({wall})" if wall else "")
        video = found_hit.name or h.clip.video_id[:8]
        caption = " ".join(h.clip.caption.split())[:90]
        click.echo(f"{h.score:.3f}  {video}  {when}  {caption}{who}{said}")


@cli.command()
@click.argument("video")
@click.argument("action", required=False, type=click.Choice(["rename"]))
@click.argument("label", required=False)
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def speakers(
    ctx: click.Context,
    video: str,
    action: str | None,
    label: str | None,
    name: str | None,
    as_json: bool,
) -> None:
    """List VIDEO's speakers with their talk time, or name one:
    `vidagent speakers VIDEO rename S1 "Dr Lee"` (an empty name removes it)."""
    session = session_of(ctx)
    if action == "rename":
        if label is None or name is None:
            raise click.UsageError('rename takes a label and a name: rename S1 "Dr Lee"')
        listed = session.rename_speaker(video, label, name)
    else:
        listed = session.speakers(video)
    if as_json:
        echo_json(listed.to_json())
        return
    if not listed.labelled:
        if listed.note:
            why = listed.note
        elif session.settings.speakers == "off":
            why = 'the speakers setting is off (speakers = "resemblyzer" turns it on)'
        else:
            why = f"its index lacks the speakers stage; `vidagent index {quote(video)}` adds it"
        click.echo(f"{video} has no speaker labels yet: {why}")
        return
    if not listed.speakers:
        click.echo(f"{video}: nobody speaks")
    for s in listed.speakers:
        unit = "segment" if s.segments == 1 else "segments"
        click.echo(f"{s.label:<4} {s.name or '-':<24} {hms(s.seconds)}  {s.segments} {unit}")


#: The start of a file that holds subtitles: WebVTT's header, or SubRip's first cue.
_SUBTITLES = re.compile(r"\A(?:\ufeff)?(?:WEBVTT|\s*\d+\s*\r?\n\d\d:\d\d:\d\d,\d{3} --> )")


def _replaceable(target: Path) -> bool:
    """Whether ``show -o`` may write ``target``: not there or empty, a ``.srt``/``.vtt``, or a
    file that holds subtitles already (a ``.txt`` written before; a ``notes.txt`` was
    replaced)."""
    if not target.is_file() or not target.stat().st_size:
        return True
    if target.suffix.lower() in (".srt", ".vtt"):
        return True
    try:
        with target.open(encoding="utf-8", errors="replace") as f:
            return bool(_SUBTITLES.match(f.read(200)))
    except OSError:
        return False


@cli.command()
@click.argument("video")
@click.pass_context
def remove(ctx: click.Context, video: str) -> None:
    """Remove a video (id, id prefix of 4 or more characters, or file name) and all its rows
    from the Library."""
    click.echo(f"removed {session_of(ctx).remove(video)}")


@cli.group(name="library")
def library_group() -> None:
    """Look after the Library itself."""


@library_group.command()
@click.option(
    "--older-than",
    "older_than",
    default=3600.0,
    show_default=True,
    metavar="SECONDS",
    help="prune table versions older than this (0: keep only the latest; only when no other "
    "process is reading)",
)
@click.option("--retrain", is_flag=True, help="rebuild the ANN index from scratch")
@click.option(
    "--ann-min-rows",
    type=click.IntRange(min=1),
    metavar="N",
    help="record a new ANN threshold (clip vectors) in the Library first",
)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def compact(
    ctx: click.Context, older_than: float, retrain: bool, ann_min_rows: int | None, as_json: bool
) -> None:
    """Compact the Library's files, build or update its indexes and prune old versions.

    Safe while other vidagent processes use the Library: it holds the write lock, and rows are
    never changed. Run it after indexing many videos (LanceDB's advice: every ~100,000 rows or
    ~20 writes).
    """
    import dataclasses

    if older_than < 0:
        raise click.BadParameter("must be 0 or more", param_hint="--older-than")
    policy = {"ann_min_rows": ann_min_rows} if ann_min_rows else {}
    reports = session_of(ctx).compact(older_than_s=older_than, retrain=retrain, **policy)
    if as_json:
        echo_json([dataclasses.asdict(r) for r in reports])
        return
    for r in reports:
        built = f"  built: {', '.join(r.built)}" if r.built else ""
        click.echo(
            f"{r.name:<14} {r.rows_after:>10,} rows  versions {r.versions_before} -> "
            f"{r.versions_after}  indexes: {', '.join(r.indexes) or 'none'}{built}"
        )


#: A stream's alerts ``show`` lists (the newest).
SHOW_ALERTS = 10


def _show_live(watch: dict[str, Any], recorded_at: str) -> None:
    """A watched stream's state, its outages and its newest alerts (``vidagent watch``), each
    at its stream time and, where the start is known, its wall-clock time."""
    kept = float(watch.get("kept_from", 0.0))
    since = f", kept from {hms(kept)}" if kept else ""
    click.echo(
        f"live: {watch.get('source', '')} ({watch.get('state', '')}, "
        f"{watch.get('windows', 0)} windows of {watch.get('window_seconds', 0):g} s{since})"
    )
    for o in watch.get("outages", []):
        at = f"{hms(o['at'])}" + (f" ({wall_clock(recorded_at, o['at'])})" if recorded_at else "")
        lost = f", {o['lost']:.1f} s of stream lost" if o.get("lost") else ", nothing lost"
        click.echo(f"  outage at {at}: {o['reason']}, {o['seconds']:.0f} s{lost}")
    alerts = watch.get("alerts", [])
    if alerts:
        count = int(watch.get("alert_count", len(alerts)))
        newest = f" (the newest {SHOW_ALERTS})" if count > SHOW_ALERTS else ""
        click.echo(f"  {count} alerts{newest}:")
    for a in alerts[-SHOW_ALERTS:]:
        at = f"{hms(a['t0'])}-{hms(a['t1'])}" + (f" ({a['at']})" if a.get("at") else "")
        click.echo(f"  alert at {at}: {a['text']!r}, {a['source']}: {a['quote']!r}")
