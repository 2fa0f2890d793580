"""``/api/streams``: watches started, listed, followed and stopped over HTTP, for real on loopback.

The source is an MPEG-TS file in the media root written out over time by the test (a growing
file); the fake models of ``liveserver`` index it, and their recogniser hears "hello there" in
every window, so an alert on that text fires in the first window and one on a text never said
does not.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from livemedia import check_clips, grow, ts_stream
from sse import events

from vidagent.app.watching import stream_id
from vidagent.library import Library

pytestmark = pytest.mark.timeout(240)

STAGES = ["transcribe", "embed"]


def stream_of(base: str, video_id: str) -> dict[str, Any] | None:
    found = httpx.get(f"{base}/api/streams", timeout=10).json()["streams"]
    return next((s for s in found if s["video_id"] == video_id), None)


def wait_stopped(base: str, video_id: str, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = httpx.get(f"{base}/api/streams/{video_id}", timeout=10).json()
        if not shown["running"]:
            return dict(shown)
        time.sleep(0.1)
    raise AssertionError(f"the watch of {video_id} did not stop: {shown}")


def test_a_watch_started_over_http_grows_raises_an_alert_over_sse_stops_and_resumes(
    live_server: Any, media: Path, tmp_path: Path, api_settings: Any
) -> None:
    base = live_server().url
    data = ts_stream(tmp_path / "source.ts", 12.0)
    growing = media / "camera.ts"
    # two thirds in, the writer waits for the stop below: the file is still growing then
    stopped_gate = threading.Event()
    writer = grow(growing, data, pieces=12, pause=0.5, hold=0.1, gate=stopped_gate)
    body = {
        "source": str(growing),
        "window": "2",
        "alerts": ["hello there", "the harbour festival"],
        "stall": "0.5",
        "give_up": "60",  # it runs until stopped
        "stages": STAGES,
    }
    started = httpx.post(f"{base}/api/streams", json=body, timeout=10)
    assert started.status_code == 202, started.text
    vid = started.json()["video_id"]
    assert vid == stream_id(str(growing.resolve()))
    # the same source twice: refused while it runs, naming the running job
    again = httpx.post(f"{base}/api/streams", json=body, timeout=10)
    assert again.status_code == 409 and started.json()["job_id"] in again.json()["detail"]

    # the alert arrives over SSE, after the window that holds it
    seen: list[str] = []
    alert: dict[str, Any] = {}
    with httpx.stream("GET", f"{base}/api/streams/{vid}/events", timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for kind, event in events(r):
            seen.append(kind)
            if kind == "alert":
                alert = event
                break
    # (an outage may come first: a stall while the writer thread was late)
    assert "window" in seen[:-1] and seen[-1] == "alert"
    assert alert["text"] == "hello there" and alert["source"] == "speech"
    assert alert["video_id"] == vid and alert["at"] and alert["t0"] < 2.5

    # listed while it runs, its live edge growing
    edges = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(set(edges)) < 2:
        listed = stream_of(base, vid)
        assert listed is not None
        assert listed["running"] and listed["state"] == "watching"
        edges.append(listed["live_edge"])
        time.sleep(0.2)
    assert len(set(edges)) >= 2 and edges == sorted(edges)
    assert listed["source"] == str(growing.resolve()) and listed["recorded_at"]
    assert listed["alert_count"] == 1 and listed["name"] == "camera.ts (live)"

    stopping = httpx.post(f"{base}/api/streams/{vid}/stop", timeout=10)
    assert stopping.status_code == 202, stopping.text
    stopped = wait_stopped(base, vid)
    stopped_gate.set()
    assert stopped["state"] == "stopped" and stopped["error"] is None
    first_edge = stopped["live_edge"]
    assert 2.0 <= first_edge < 12.0, stopped  # the file was still growing
    assert [a["text"] for a in stopped["alerts"]] == ["hello there"]
    windows = stopped["recent_windows"]
    assert windows and windows[-1]["t1"] == pytest.approx(first_edge, abs=0.01)
    assert [w["index"] for w in windows] == list(range(len(windows)))
    assert stopped["video"]["stages"]["watch"]["state"] == "stopped"
    # stopping it again: it is not running
    assert httpx.delete(f"{base}/api/streams/{vid}", timeout=10).status_code == 404

    # the same source again resumes where it stopped, and ends when the file stops growing
    writer.join()
    resumed = httpx.post(
        f"{base}/api/streams", json=body | {"give_up": "1.5", "alerts": []}, timeout=10
    )
    assert resumed.status_code == 202, resumed.text
    assert resumed.json()["video_id"] == vid
    ended = wait_stopped(base, vid)
    assert ended["state"] == "ended", ended
    # it reads on from where it stopped (from the next keyframe when it stopped inside a
    # group of pictures: up to 1 s later here)
    assert first_edge - 0.01 <= ended["recent_windows"][0]["t0"] <= first_edge + 1.01, ended
    assert ended["live_edge"] == pytest.approx(12.0, abs=0.3)
    check_clips(Library(api_settings.library_uri), vid, ended["live_edge"], gap=1.01)
    # the search endpoint finds the stream's clips
    hits = httpx.post(
        f"{base}/api/search", json={"query": "hello there", "videos": [vid]}, timeout=10
    ).json()["hits"]
    assert hits and all(h["video_id"] == vid for h in hits)
    # its media is the playlist of its windows, each served below the media route (with the
    # token a player gave, which it does not carry over to the URLs the playlist names)
    media_url = f"{base}/api/videos/{vid}/media"
    playlist = httpx.get(media_url, params={"token": "t/1"}, timeout=10)
    assert playlist.status_code == 200, playlist.text
    assert playlist.headers["content-type"] == "application/vnd.apple.mpegurl"
    named = [ln for ln in playlist.text.splitlines() if ln and not ln.startswith("#")]
    assert named and named[0] == "media/w000000.ts?token=t%2F1"
    assert len(named) == len(list((api_settings.home / "streams" / vid).glob("w*.ts")))
    first = httpx.get(f"{media_url}/w000000.ts", timeout=10)
    kept = (api_settings.home / "streams" / vid / "w000000.ts").read_bytes()
    assert first.status_code == 200 and first.content == kept
    assert first.headers["content-type"] == "video/mp2t"
    gone = httpx.get(f"{media_url}/w999999.ts", timeout=10)
    assert gone.status_code == 404 and "not kept" in gone.json()["detail"]
    assert httpx.get(f"{media_url}/stream.m3u8", timeout=10).status_code == 422
    assert httpx.get(f"{media_url}/..%2Fw000000.ts", timeout=10).status_code in (404, 422)


def test_stopping_the_server_stops_its_watches_and_keeps_what_was_indexed(
    live_server: Any, media: Path, tmp_path: Path, api_settings: Any
) -> None:
    live = live_server()
    data = ts_stream(tmp_path / "source.ts", 10.0)
    growing = media / "feed.ts"
    writer = grow(growing, data, pieces=10, pause=0.5)
    body = {"source": "feed.ts", "window": "2", "stall": "0.5", "give_up": "60", "stages": STAGES}
    started = httpx.post(f"{live.url}/api/streams", json=body, timeout=10)
    assert started.status_code == 202, started.text
    vid, job_id = started.json()["video_id"], started.json()["job_id"]
    deadline = time.monotonic() + 60
    while (listed := stream_of(live.url, vid)) is None or listed["live_edge"] < 2.0:
        assert time.monotonic() < deadline, "no window was indexed"
        time.sleep(0.1)
    live.stop()
    assert not live.thread.is_alive()
    video = Library(api_settings.library_uri).get_video(vid)
    assert video.stages["watch"]["state"] == "stopped"
    assert 2.0 <= video.duration < 10.0
    check_clips(Library(api_settings.library_uri), vid, video.duration)
    job = json.loads((api_settings.home / "jobs" / f"{job_id}.json").read_text())
    assert job["state"] == "done" and job["result"]["state"] == "stopped"
    writer.join()
    # a new server lists it, stopped, with the watch job's progress
    again = live_server()
    listed = stream_of(again.url, vid)
    assert listed is not None and listed["state"] == "stopped" and not listed["running"]
    assert listed["live_edge"] == pytest.approx(video.duration)


def test_a_watch_run_elsewhere_shows_its_alerts_from_the_library(
    live_server: Any, tmp_path: Path, api_settings: Any
) -> None:
    """A watch this server did not run (``vidagent watch`` beside it) is listed with its alert
    count, and its details hold its alerts: they are kept in the Library's watch entry."""
    from vidagent.app import Session

    recording = tmp_path / "recording.ts"
    recording.write_bytes(ts_stream(tmp_path / "source.ts", 6.0))
    with Session(api_settings) as session:
        report = session.watch(
            str(recording),
            window_seconds=3,
            stages=STAGES,
            alerts=["hello there"],
            stall_seconds=0.5,
            give_up_seconds=1.5,
        ).run()
    (alert,) = report.alerts
    base = live_server().url
    vid = stream_id(str(recording))
    listed = stream_of(base, vid)
    assert listed is not None and listed["alert_count"] == 1 and listed["job_id"] is None
    shown = httpx.get(f"{base}/api/streams/{vid}", timeout=10).json()
    assert shown["alerts"] == [alert.to_json()]


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        ({"source": "ftp://example.com/x.ts"}, 400, "ftp: URLs are not watched"),
        ({"source": "file:///etc/passwd"}, 400, "file: URLs are not watched"),
        ({"source": "concat:a.ts|b.ts"}, 400, "URLs are not watched"),
        ({"source": "/etc/hostname"}, 403, "outside the media roots"),
        ({"source": "no/such/folder.ts"}, 404, "no such file, nor a folder for it"),
        ({"source": "x" * 300}, 400, "source: not a usable path"),
        ({"window": "soon"}, 400, "window: 'soon' is not a length"),
        ({"window": "99999999999999999999h"}, 400, "is longer than any recording"),
        ({"stages": []}, 400, "no stage named"),
        ({"keep": "-1h"}, 400, "keep:"),
        ({"alert_url": "file:///tmp/x"}, 400, "alert_url: give an http"),
        ({"stages": ["nope"]}, 400, "unknown stage(s) nope"),
    ],
)
def test_bad_input_is_a_one_line_error(
    live_server: Any, media: Path, change: dict[str, Any], status: int, says: str
) -> None:
    base = live_server().url
    (media / "here.ts").write_bytes(b"")
    reply = httpx.post(f"{base}/api/streams", json={"source": "here.ts"} | change, timeout=10)
    assert reply.status_code == status, reply.text
    detail = reply.json()["detail"]
    assert says in detail and "\n" not in detail
    assert httpx.get(f"{base}/api/streams", timeout=10).json() == {"streams": []}


def test_a_file_not_there_yet_is_waited_for_as_the_cli_waits(
    live_server: Any, media: Path, tmp_path: Path
) -> None:
    # (404 "no such file": a watch could not be started before its recorder, as the CLI's can)
    base = live_server().url
    body = {"source": "later.ts", "window": "2", "give_up": "30", "stages": STAGES}
    started = httpx.post(f"{base}/api/streams", json=body, timeout=10)
    assert started.status_code == 202, started.text
    data = ts_stream(tmp_path / "source.ts", 4.0)
    writer = grow(media / "later.ts", data, pieces=4, pause=0.2)  # the recorder starts after
    writer.join()
    vid, deadline = started.json()["video_id"], time.monotonic() + 60
    while not (stream_of(base, vid) or {}).get("live_edge"):  # read as it came
        assert time.monotonic() < deadline, stream_of(base, vid)
        time.sleep(0.1)
    assert httpx.post(f"{base}/api/streams/{vid}/stop", timeout=10).status_code == 202
    shown = wait_stopped(base, vid)
    assert shown["error"] is None and shown["state"] == "stopped" and shown["live_edge"] > 0


def test_a_watch_that_fails_before_its_first_window_is_listed_with_its_error(
    live_server: Any,
) -> None:
    base = live_server().url
    started = httpx.post(f"{base}/api/streams", json={"source": "http://127.0.0.1:1/x.m3u8"})
    assert started.status_code == 202, started.text
    vid, deadline = started.json()["video_id"], time.monotonic() + 60
    while httpx.get(f"{base}/api/streams/{vid}", timeout=10).json()["state"] != "failed":
        assert time.monotonic() < deadline, "the watch never failed"
        time.sleep(0.1)
    (listed,) = httpx.get(f"{base}/api/streams", timeout=10).json()["streams"]
    assert (listed["video_id"], listed["state"]) == (vid, "failed")
    assert listed["name"] == "x.m3u8 (live)"  # the name a first window would have stored
    assert "cannot be opened (Connection refused)" in listed["error"]


def test_unknown_streams_are_404_and_the_endpoints_need_the_token(live_server: Any) -> None:
    token = "a-token-for-the-streams-test"
    base = live_server(token=token).url
    assert httpx.get(f"{base}/api/streams", timeout=10).status_code == 401
    auth = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{base}/api/streams", headers=auth, timeout=10).json() == {"streams": []}
    for method, path in (
        ("GET", "/api/streams/live000000000000"),
        ("GET", "/api/streams/live000000000000/events"),
        ("POST", "/api/streams/live000000000000/stop"),
        ("DELETE", "/api/streams/live000000000000"),
    ):
        reply = httpx.request(method, base + path, headers=auth, timeout=10)
        assert reply.status_code == 404, (method, path, reply.text)


def test_a_watch_job_runs_on_its_own_thread_keeps_its_newest_events_and_stops_on_cancel(
    tmp_path: Path,
) -> None:
    from vidagent.server.jobs import LIVE_EVENTS, Job, JobRegistry

    registry = JobRegistry(tmp_path / "jobs", workers=1)
    stopped = threading.Event()
    threads: list[str] = []

    def work(job: Job) -> dict[str, Any]:
        threads.append(threading.current_thread().name)
        job.on_cancel(stopped.set)
        for k in range(LIVE_EVENTS + 100):
            job.emit("window", {"index": k})
        assert stopped.wait(30)  # blocks as Watch.run does, until the cancel's callback
        return {"state": "stopped"}

    job = registry.submit("watch", {"video_id": "live1"}, work)
    # the one pool worker stays free for other jobs meanwhile
    other = registry.submit("index", {}, lambda j: {"ok": True})
    deadline = time.monotonic() + 30
    while not (other.done and len(job.events) >= LIVE_EVENTS):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert other.state == "done" and job.state == "running"
    assert [e["index"] for _, e in job.events] == list(range(100, LIVE_EVENTS + 100))
    registry.close()  # asks the watch to stop, and waits for it
    assert job.state == "done" and job.result == {"state": "stopped"}
    assert threads == [f"vidagent-watch-{job.job_id}"]
    saved = json.loads((tmp_path / "jobs" / f"{job.job_id}.json").read_text())
    assert saved["kind"] == "watch" and saved["events"][-1][0] == "end"
