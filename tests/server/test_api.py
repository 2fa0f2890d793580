"""The HTTP API as a client sees it: a real uvicorn server on loopback driven with httpx, and
FastAPI's TestClient where a socket adds nothing. Fake models, a real indexed clip."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from clirun import vidagent
from fastapi.testclient import TestClient
from liveserver import ANSWER, fake_models
from sse import events

from vidagent import __version__
from vidagent.config import Settings
from vidagent.server.app import create_app
from vidagent.server.jobs import Job


def client(settings: Settings, **options: Any) -> TestClient:
    app = create_app(settings, models=fake_models(settings), **options)
    return TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)


def stream(url: str, **kwargs: Any) -> list[tuple[str, dict[str, Any]]]:
    with httpx.stream("GET", url, timeout=60, **kwargs) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        return list(events(r))


def wait_job(base: str, job_id: str, **kwargs: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = httpx.get(f"{base}/api/jobs/{job_id}", **kwargs).json()
        if job["state"] not in ("queued", "running"):
            return dict(job)
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


@pytest.fixture
def api(api_settings: Settings, media: Path) -> TestClient:
    return client(api_settings, media_roots=[media])


def video_id(api: TestClient) -> str:
    return str(api.get("/api/videos").json()["videos"][0]["video_id"])


# -- reading ------------------------------------------------------------------------------------


def test_health_names_the_version(api: TestClient) -> None:
    assert api.get("/api/health").json() == {"status": "ok", "version": __version__}
    schema = api.get("/openapi.json").json()
    assert {"/api/ask", "/api/search", "/api/jobs/{job_id}/events"} <= set(schema["paths"])


def test_strategies_lists_built_ins_and_registered_ones(api: TestClient) -> None:
    from vidagent.agents.dvd.agent import DVDAgent
    from vidagent.agents.strategies import STRATEGIES

    listed = api.get("/api/strategies").json()
    assert listed["default"] == "dvd"
    assert {"dvd", "videoagent2", "eea", "avi", "retrieval"} <= set(listed["strategies"])
    STRATEGIES.register("my-dvd", DVDAgent)
    try:
        assert "my-dvd" in api.get("/api/strategies").json()["strategies"]
    finally:
        STRATEGIES.unregister("my-dvd")


def test_list_show_graph_and_remove_a_video(api: TestClient) -> None:
    (video,) = api.get("/api/videos").json()["videos"]
    assert video["name"] == "small.mp4" and video["duration"] == pytest.approx(12, abs=0.1)
    assert (video["width"], video["height"]) == (640, 360) and "caption" in video["stages"]
    shown = api.get(f"/api/videos/{video['video_id'][:6]}").json()
    assert shown["video"]["video_id"] == video["video_id"]
    first = shown["clips"][0]
    assert (first["clip_index"], first["t0"]) == (0, 0.0)
    assert len(shown["clips"]) == 3 and "transcript" in first
    assert first["caption"] and "ocr_text" in first
    graph = api.get(f"/api/videos/{video['video_id']}/graph").json()
    assert graph == {"video_id": video["video_id"], "built": False, "entities": [], "relations": []}
    assert api.delete(f"/api/videos/{video['video_id']}").json() == {"removed": video["video_id"]}
    assert api.get("/api/videos").json() == {"videos": []}
    gone = api.get(f"/api/videos/{video['video_id']}")
    assert gone.status_code == 404 and list(gone.json()) == ["detail"]


def test_a_videos_subtitles_named_speakers_and_contact_sheet(
    api: TestClient, api_settings: Settings
) -> None:
    import cv2
    import numpy as np

    from vidagent.library import Library
    from vidagent.library.schema import Artifact, TranscriptSegment

    vid = video_id(api)
    library = Library(api_settings.library)  # what the speakers stage leaves: labels, talk
    library.put_transcript(vid, [TranscriptSegment(vid, 0, 1.0, 3.0, "hello there", speaker="S1")])
    talk = {"speakers": {"S1": {"seconds": 2.0, "segments": 1}}}
    library.put_artifact(Artifact(vid, "speakers", "", data=talk))
    listed = api.get(f"/api/videos/{vid}/speakers").json()
    assert listed["labelled"] and listed["speakers"][0]["label"] == "S1"
    named = api.put(f"/api/videos/{vid}/speakers/s1", json={"name": "Dr Lee"})
    assert named.json()["speakers"][0]["name"] == "Dr Lee"
    srt = api.get(f"/api/videos/{vid}/subtitles")
    assert srt.headers["content-type"] == "application/x-subrip; charset=utf-8"
    assert (
        srt.headers["content-disposition"]
        == "inline; filename=\"small.srt\"; filename*=UTF-8''small.srt"
    )
    assert srt.text == "1\n00:00:01,000 --> 00:00:03,000\nDr Lee: hello there\n"
    vtt = api.get(f"/api/videos/{vid}/subtitles", params={"format": "vtt"}).text
    assert vtt == "WEBVTT\n\n00:00:01.000 --> 00:00:03.000\n<v Dr Lee>hello there\n"
    # WebVTT markup: & is escaped; < and > a name may not hold (SubRip shows <b> as bold)
    marked = api.put(f"/api/videos/{vid}/speakers/S1", json={"name": "Lee & <Co>"})
    assert marked.status_code == 400 and "holds no < or >" in marked.json()["detail"]
    api.put(f"/api/videos/{vid}/speakers/S1", json={"name": "Lee & Co"})
    vtt = api.get(f"/api/videos/{vid}/subtitles", params={"format": "vtt"}).text
    assert vtt.endswith("\n<v Lee &amp; Co>hello there\n")
    sheet = api.get(f"/api/videos/{vid}/sheet", params={"from": "0:02", "to": "6", "count": 4})
    assert sheet.status_code == 200 and sheet.headers["content-type"] == "image/jpeg"
    image = cv2.imdecode(np.frombuffer(sheet.content, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None and image.shape[1] > 300
    for method, url, kwargs, status, detail in [
        (
            "put",
            "/speakers/S9",
            {"json": {"name": "X"}},
            400,
            "has no speaker 'S9'; its speakers: S1",
        ),
        ("get", "/sheet", {"params": {"from": "soon"}}, 400, "from: 'soon' is not a time"),
        ("get", "/sheet", {"params": {"from": "20"}}, 400, "is past the end"),
        # the parameters by their names here, not the CLI's options (--to, --from)
        ("get", "/sheet", {"params": {"from": "5", "to": "4"}}, 400, "`to` must be after `from`"),
        ("get", "/sheet", {"params": {"columns": 0}}, 422, None),
        ("get", "/sheet", {"params": {"count": 401}}, 422, None),
        ("get", "/sheet", {"params": {"count": 400, "columns": 400}}, 400, "too large for .jpg"),
        ("put", "/speakers/S1", {"json": {"name": "\x1b[31mred"}}, 400, "printable text"),
        ("get", "/subtitles", {"params": {"format": "xml"}}, 422, None),
    ]:
        refused = api.request(method, f"/api/videos/{vid}{url}", **kwargs)
        assert refused.status_code == status, (url, refused.text)
        assert detail is None or detail in refused.json()["detail"]
        assert "--" not in refused.text
    library.put_transcript(vid, [])
    silent = api.get(f"/api/videos/{vid}/subtitles")
    assert silent.status_code == 400 and "has no transcript" in silent.json()["detail"]
    assert api.get("/api/videos/nothing/speakers").status_code == 404


def test_search_returns_clips_with_spans(api: TestClient) -> None:
    hits = api.post("/api/search", json={"query": "hello there", "top": 2}).json()["hits"]
    assert len(hits) == 2
    assert {"video_id", "clip_index", "t0", "t1", "score", "caption"} <= set(hits[0])
    assert hits[0]["score"] >= hits[1]["score"] and hits[0]["t1"] > hits[0]["t0"]


def test_media_serves_ranges_for_seeking(api: TestClient, small_video: Path) -> None:
    vid = video_id(api)
    whole = api.get(f"/api/videos/{vid}/media")
    assert whole.status_code == 200 and whole.content == small_video.read_bytes()
    part = api.get(f"/api/videos/{vid}/media", headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == small_video.read_bytes()[100:200]
    assert part.headers["content-range"].startswith("bytes 100-199/")
    head = api.head(f"/api/videos/{vid}/media")  # a player's probe: its size, no body
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == small_video.stat().st_size


# -- indexing -----------------------------------------------------------------------------------


def test_register_a_path_streams_index_progress_then_end(live_server: Any) -> None:
    live = live_server()
    started = httpx.post(f"{live.url}/api/videos", json={"path": "clip.mp4"})
    assert started.status_code == 202
    body = started.json()
    assert body["video"]["name"] == "small.mp4"  # same content: already in the Library
    got = stream(f"{live.url}/api/jobs/{body['job_id']}/events")
    kinds = [k for k, _ in got]
    assert kinds[-1] == "end" and set(kinds[:-1]) == {"progress"}
    progress = [d for k, d in got if k == "progress"]
    assert progress[0] == {
        "stage": "structure",
        "done": 0,
        "total": progress[0]["total"],
        "running": ["structure"],
    }
    assert progress[-1]["done"] == progress[-1]["total"] and progress[-1]["stage"] == "summarize"
    end = got[-1][1]
    assert end["state"] == "done" and end["kind"] == "index" and end["finished"]
    assert end["result"]["video_id"] == body["video"]["video_id"] and end["result"]["clips"] > 0
    listed = httpx.get(f"{live.url}/api/jobs").json()["jobs"]
    assert [j["job_id"] for j in listed] == [body["job_id"]]


def test_upload_streams_to_disk_and_indexes(live_server: Any, media: Path, tmp_path: Path) -> None:
    from vidagent.media.synth import make_video

    live = live_server()
    make_video(tmp_path / "new.mp4", duration=3, size=(160, 96), audio="tone")
    data = (tmp_path / "new.mp4").read_bytes()
    files = {"file": ("my clip.mp4", data, "video/mp4")}
    r = httpx.post(f"{live.url}/api/videos/upload", files=files, timeout=60)
    assert r.status_code == 202, r.text
    assert wait_job(live.url, r.json()["job_id"])["state"] == "done"
    assert (media / "uploads" / "my_clip.mp4").read_bytes() == data
    # the same content again: indexed from the first copy, not kept twice
    again = httpx.post(f"{live.url}/api/videos/upload", files={"file": ("again.mp4", data)})
    assert again.status_code == 202 and again.json()["path"] == str(
        media / "uploads" / "my_clip.mp4"
    )
    assert wait_job(live.url, again.json()["job_id"])["state"] == "done"
    assert sorted(p.name for p in (media / "uploads").iterdir()) == ["my_clip.mp4"]
    # a file that is no video, named by its path: refused as an upload is, and kept
    (media / "notes.mp4").write_text("these are not frames")
    r = httpx.post(f"{live.url}/api/videos", json={"path": "notes.mp4"})
    assert r.status_code == 415 and r.json()["detail"].startswith("notes.mp4: not a video")
    assert (media / "notes.mp4").is_file()


def test_an_upload_is_indexed_through_the_stages_its_query_names(
    live_server: Any, media: Path, tmp_path: Path
) -> None:
    from vidagent.media.synth import make_video

    live = live_server()
    make_video(tmp_path / "other.mp4", duration=2, size=(160, 96), audio="tone")
    files = {"file": ("other.mp4", (tmp_path / "other.mp4").read_bytes(), "video/mp4")}
    r = httpx.post(f"{live.url}/api/videos/upload?stages=nope", files=files)  # before the body
    assert r.status_code == 400 and r.json()["detail"].startswith("unknown stage(s) nope")
    assert not (media / "uploads").exists() or not list((media / "uploads").iterdir())
    # structure may be named, as the command line takes it (it was "unknown stage(s) structure")
    r = httpx.post(
        f"{live.url}/api/videos/upload?stages=transcribe,structure", files=files, timeout=60
    )
    assert r.status_code == 202, r.text
    assert wait_job(live.url, r.json()["job_id"])["state"] == "done"
    (video,) = [
        v for v in httpx.get(f"{live.url}/api/videos").json()["videos"] if v["name"] == "other.mp4"
    ]
    assert "transcribe" in video["stages"] and "caption" not in video["stages"]


def test_an_upload_over_the_limit_is_413_and_leaves_nothing(
    api_settings: Settings, media: Path
) -> None:
    api = client(api_settings, media_roots=[media], max_upload_bytes=1000)
    r = api.post("/api/videos/upload", files={"file": ("big.mp4", b"x" * 5000, "video/mp4")})
    assert r.status_code == 413 and "limit of 1000 bytes" in r.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is met while streaming
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="big.mp4"\r\n\r\n'
        for _ in range(100):
            yield b"x" * 100
        yield b"\r\n--b--\r\n"

    headers = {"content-type": "multipart/form-data; boundary=b"}
    r = api.post("/api/videos/upload", content=chunks(), headers=headers)
    assert r.status_code == 413
    assert list((media / "uploads").iterdir()) == []
    assert api.get("/api/jobs").json() == {"jobs": []}


def test_cancel_stops_an_index_job_between_stages(live_server: Any, media: Path) -> None:
    live = live_server(workers=1, delay=2.0)
    # the one worker is held by a question whose model calls take 2 s each: the index job waits
    vid = httpx.get(f"{live.url}/api/videos").json()["videos"][0]["video_id"]
    asked = {"videos": [vid], "question": "What text?"}
    blocker = httpx.post(f"{live.url}/api/ask", json=asked).json()["job_id"]
    queued = httpx.post(f"{live.url}/api/videos", json={"path": "clip.mp4"}).json()["job_id"]
    cancelled = httpx.delete(f"{live.url}/api/jobs/{queued}").json()
    assert cancelled["state"] in ("cancelled", "running")
    assert wait_job(live.url, queued)["state"] == "cancelled"
    assert wait_job(live.url, blocker)["state"] == "done"


# -- asking -------------------------------------------------------------------------------------


def test_ask_streams_trace_events_in_order_and_ends_with_the_answer(live_server: Any) -> None:
    live = live_server()
    vid = httpx.get(f"{live.url}/api/videos").json()["videos"][0]["video_id"]
    body = {"videos": [vid], "question": "What text appears?", "options": ["BYE", "HELLO"]}
    r = httpx.post(f"{live.url}/api/ask", json=body)
    assert r.status_code == 202
    job_id, trace = r.json()["job_id"], r.json()["trace"]
    got = stream(f"{live.url}/api/jobs/{job_id}/events")
    kinds = [k for k, _ in got]
    assert kinds[0] == "run_started" and kinds[-3:] == ["answer", "run_finished", "end"]
    steps = [k for k in kinds if k in ("agent_turn", "tool_called", "observed")]
    assert steps[:3] == ["agent_turn", "tool_called", "observed"]
    assert got[0][1]["question"] == "What text appears?" and got[0][1]["kind"] == "run_started"
    end = got[-1][1]
    assert end["state"] == "done" and end["result"]["letter"] == "B"
    assert end["result"]["answer"]["text"] == ANSWER
    # the stream carries the trace file's own events
    saved = httpx.get(f"{live.url}/api/traces/{trace}").json()["events"]
    assert [e["kind"] for e in saved] == kinds[:-1] and saved[0] == got[0][1]


def test_a_client_that_disconnects_does_not_stop_the_question(live_server: Any) -> None:
    live = live_server(delay=0.4)
    vid = httpx.get(f"{live.url}/api/videos").json()["videos"][0]["video_id"]
    r = httpx.post(f"{live.url}/api/ask", json={"videos": [vid], "question": "What text?"})
    job_id = r.json()["job_id"]
    with httpx.stream("GET", f"{live.url}/api/jobs/{job_id}/events", timeout=30) as s:
        first = next(events(s))
    assert first[0] == "run_started"  # then the client hangs up mid-run
    assert httpx.get(f"{live.url}/api/jobs/{job_id}").json()["state"] == "running"
    job = wait_job(live.url, job_id)
    assert job["state"] == "done" and job["result"]["answer"]["text"] == ANSWER
    # abstain left out: the server's setting (FAKE_SPECS), not an "auto" filled in
    assert job["result"]["answer"]["abstain_policy"] == "never"
    again = stream(f"{live.url}/api/jobs/{job_id}/events")  # replayed from the start
    assert again[0][0] == "run_started" and again[-1][0] == "end"


def test_cancel_stops_a_question_at_its_next_event(live_server: Any) -> None:
    live = live_server(delay=0.5)
    vid = httpx.get(f"{live.url}/api/videos").json()["videos"][0]["video_id"]
    job_id = httpx.post(f"{live.url}/api/ask", json={"videos": [vid], "question": "Q?"}).json()[
        "job_id"
    ]
    with httpx.stream("GET", f"{live.url}/api/jobs/{job_id}/events", timeout=30) as s:
        got = events(s)
        assert next(got)[0] == "run_started"
        httpx.delete(f"{live.url}/api/jobs/{job_id}")
        rest = list(got)
    assert rest[-1][0] == "end" and rest[-1][1]["state"] == "cancelled"
    assert "answer" not in [k for k, _ in rest]


@pytest.mark.parametrize("steps", [None, 1])
def test_a_cancel_reaches_the_run_and_its_trace_records_where_it_stopped(
    live_server: Any, steps: int | None
) -> None:
    """The cancel is the run's ``should_stop``: the llm call in flight ends, no other starts, and
    the trace file keeps the stopped answer that the job's stream no longer shows. With one
    step, the call after it is the forced final answer's: it is not made either (it was, and
    the trace answered "max_steps" for a job that said "cancelled")."""
    live = live_server(delay=1.0)
    vid = httpx.get(f"{live.url}/api/videos").json()["videos"][0]["video_id"]
    body = {"videos": [vid], "question": "Q?"} | ({"max_steps": steps} if steps else {})
    asked = httpx.post(f"{live.url}/api/ask", json=body).json()
    with httpx.stream("GET", f"{live.url}/api/jobs/{asked['job_id']}/events", timeout=30) as s:
        got = events(s)
        assert next(got)[0] == "run_started"  # the first llm call is under way (1 s)
        httpx.delete(f"{live.url}/api/jobs/{asked['job_id']}")
        rest = list(got)
    assert [k for k, _ in rest] == ["end"] and rest[-1][1]["state"] == "cancelled"
    saved = httpx.get(f"{live.url}/api/traces/{asked['trace']}").json()["events"]
    answer = next(e for e in saved if e["kind"] == "answer")
    assert answer["reason"] == "stopped" and answer["forced"]
    assert [e["role"] for e in saved if e["kind"] == "model_call"].count("llm") == 1
    assert saved[-1]["kind"] == "run_finished"


def test_a_question_over_http_is_resolved_once(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidagent.app import asking

    picked, pick = [], asking.pick_strategy
    monkeypatch.setattr(asking, "pick_strategy", lambda *a: picked.append(a[1:]) or pick(*a))
    job_id = api.post("/api/ask", json={"videos": [video_id(api)], "question": "Q?"}).json()[
        "job_id"
    ]
    deadline = time.monotonic() + 60
    while api.get(f"/api/jobs/{job_id}").json()["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, "the job did not finish"
        time.sleep(0.05)
    assert api.get(f"/api/jobs/{job_id}").json()["state"] == "done"
    assert picked == [(None, "answer")]  # by the request; the job ran its plan


def test_traces_list_fetch_and_replay(live_server: Any) -> None:
    live = live_server()
    vid = httpx.get(f"{live.url}/api/videos").json()["videos"][0]["video_id"]
    r = httpx.post(f"{live.url}/api/ask", json={"videos": [vid], "question": "Which text?"})
    job = wait_job(live.url, r.json()["job_id"])
    (listed,) = httpx.get(f"{live.url}/api/traces").json()["traces"]
    assert listed["id"] == r.json()["trace"] and listed["strategy"] == "dvd"
    assert listed["question"] == "Which text?" and listed["answer"] == ANSWER
    assert listed["started_at"]
    replay = httpx.get(f"{live.url}/api/traces/{listed['id']}/replay").json()
    assert replay == job["result"] | {"trace": None}  # Session.replay's JSON: read, not written
    assert httpx.get(f"{live.url}/api/traces/nope").status_code == 404
    assert httpx.get(f"{live.url}/api/traces/..%2F..%2Fsecret").status_code == 404


def test_an_answers_evidence_downloads_as_a_zip(live_server: Any) -> None:
    import io
    import zipfile

    import jsonschema

    from vidagent.app.export import export_schema

    live = live_server()
    vid = httpx.get(f"{live.url}/api/videos").json()["videos"][0]["video_id"]
    r = httpx.post(f"{live.url}/api/ask", json={"videos": [vid], "question": "Which text?"})
    wait_job(live.url, r.json()["job_id"])
    got = httpx.get(f"{live.url}/api/traces/{r.json()['trace']}/export", timeout=60)
    assert got.status_code == 200 and got.headers["content-type"] == "application/zip"
    name = f"{r.json()['trace']}-evidence"
    assert f'filename="{name}.zip"' in got.headers["content-disposition"]
    bundle = zipfile.ZipFile(io.BytesIO(got.content))
    index = json.loads(bundle.read(f"{name}/index.json"))
    jsonschema.validate(index, export_schema())
    assert index["question"] == "Which text?" and f"{name}/timeline.md" in bundle.namelist()
    assert httpx.get(f"{live.url}/api/traces/nope/export").status_code == 404


def test_without_a_model_endpoint_retrieval_answers_by_default_and_says_so(
    api_settings: Settings, media: Path
) -> None:
    # the llm is the embedded SmolLM2 (the roles still answer from fakes): no endpoint
    api = client(
        api_settings.model_copy(update={"llm": "llamacpp:smollm2-135m"}), media_roots=[media]
    )
    listed = api.get("/api/strategies").json()
    assert listed["default"] == "retrieval"
    assert listed["notice"].startswith(
        "no model endpoint is configured: questions are answered from the index"
    )
    vid = video_id(api)

    def finished(body: dict[str, Any]) -> dict[str, Any]:
        job_id = api.post("/api/ask", json=body).json()["job_id"]
        deadline = time.monotonic() + 60
        while (job := api.get(f"/api/jobs/{job_id}").json())["state"] in ("queued", "running"):
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.05)
        assert job["state"] == "done", job
        return dict(job["result"])

    question = {"videos": [vid], "question": "What text appears?", "options": ["BYE", "HELLO"]}
    by_default = finished(question)
    assert by_default["notice"] == listed["notice"] and by_default["letter"] is not None
    # one embedding per option and one checking the citations; no llm call
    assert by_default["totals"]["model_calls"] == 3
    named = finished(question | {"strategy": "dvd"})
    assert named["notice"].startswith("dvd with the embedded SmolLM2-135M, which does not reason")
    assert "5 of 13 right" in named["notice"]
    # the page asks for the notice of the strategy chosen before asking: the answer's own line
    picked = api.get("/api/strategies", params={"strategy": "dvd"}).json()
    assert picked["notice"] == named["notice"] and picked["default"] == "retrieval"
    chosen = api.get("/api/strategies", params={"strategy": "retrieval"}).json()
    assert chosen["notice"] == listed["notice"]  # the default's: why retrieval answers
    assert api.get("/api/strategies?strategy=").json() == listed  # names none
    grounding = api.get("/api/strategies", params={"strategy": "dvd", "task": "ground"}).json()
    assert "grounding is not measured with it offline" in grounding["notice"]
    assert "5 of 13" not in grounding["notice"]  # the answering set's figure
    unknown = api.get("/api/strategies", params={"strategy": "nope"})
    assert unknown.status_code == 400 and "unknown strategy 'nope'" in unknown.json()["detail"]
    strategies = [t["strategy"] for t in api.get("/api/traces").json()["traces"]]
    assert sorted(strategies) == ["dvd", "retrieval"]


def test_ask_refuses_an_unknown_strategy_before_starting(api: TestClient) -> None:
    body = {"videos": [video_id(api)], "question": "q", "strategy": "nope"}
    r = api.post("/api/ask", json=body)
    assert r.status_code == 400 and "unknown strategy 'nope'" in r.json()["detail"]
    assert api.get("/api/jobs").json() == {"jobs": []}


def test_ask_about_an_unknown_video_is_a_404_before_starting(api: TestClient) -> None:
    r = api.post("/api/ask", json={"videos": ["nope"], "question": "q", "strategy": "retrieval"})
    assert r.status_code == 404 and r.json()["detail"].startswith("no video 'nope'")
    assert api.get("/api/jobs").json() == {"jobs": []}


# -- restarts -----------------------------------------------------------------------------------


def test_a_restarted_server_lists_finished_jobs_and_marks_cut_ones_interrupted(
    api_settings: Settings, media: Path
) -> None:
    api = client(api_settings, media_roots=[media])
    with api:
        done = api.post("/api/videos", json={"path": "clip.mp4"}).json()["job_id"]
        deadline = time.monotonic() + 60
        while api.get(f"/api/jobs/{done}").json()["state"] != "done":
            assert time.monotonic() < deadline
            time.sleep(0.05)
    # a server that died while a job ran left its file saying "running"
    cut = Job("cut0", "index", {"path": str(media / "clip.mp4"), "stages": None}, "running")
    (api_settings.home / "jobs" / "cut0.json").write_text(json.dumps(cut.to_json()))

    again = client(api_settings, media_roots=[media])
    jobs = {j["job_id"]: j for j in again.get("/api/jobs").json()["jobs"]}
    assert jobs[done]["state"] == "done" and jobs[done]["result"]["clips"] > 0
    assert jobs["cut0"]["state"] == "interrupted"
    assert "stopped" in jobs["cut0"]["error"]
    replayed = [k for k, _ in _sse(again.get(f"/api/jobs/{done}/events").text)]
    assert replayed[-1] == "end" and "progress" in replayed
    with again:
        resumed = again.post("/api/jobs/cut0/resume")
        assert resumed.status_code == 202
        deadline = time.monotonic() + 60
        while again.get("/api/jobs/cut0").json()["state"] != "done":
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert again.post(f"/api/jobs/{done}/resume").status_code == 409


def _sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


# -- security -----------------------------------------------------------------------------------


def test_a_token_guards_every_api_request(live_server: Any) -> None:
    live = live_server(token="s3cret")
    assert httpx.get(f"{live.url}/api/videos").status_code == 401
    wrong = httpx.get(f"{live.url}/api/videos", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["detail"].startswith("missing or wrong token")
    ok = httpx.get(f"{live.url}/api/videos", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200 and len(ok.json()["videos"]) == 1
    assert httpx.get(f"{live.url}/api/health?token=s3cret").status_code == 200  # EventSource
    post = httpx.post(f"{live.url}/api/search?token=s3cret", json={"query": "x"})
    assert post.status_code == 401  # the query form is for GETs only


def test_paths_outside_the_media_roots_are_refused(
    api: TestClient, media: Path, tmp_path: Path, small_video: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.mp4").write_bytes(small_video.read_bytes())
    (media / "link.mp4").symlink_to(outside / "secret.mp4")
    (media / "linkdir").symlink_to(outside)
    for path in (
        "../outside/secret.mp4",
        str(outside / "secret.mp4"),
        "link.mp4",
        "linkdir/secret.mp4",
        "/etc/passwd",
    ):
        r = api.post("/api/videos", json={"path": path})
        assert r.status_code == 403, path
        assert r.json() == {
            "detail": f"{path}: outside the media roots the server was started with"
        }
    r = api.post("/api/ask", json={"videos": [str(outside / "secret.mp4")], "question": "q"})
    assert r.status_code == 403
    assert api.post("/api/videos", json={"path": "missing.mp4"}).status_code == 404
    assert api.get("/api/jobs").json() == {"jobs": []}


def test_bad_bodies_are_422_naming_the_field(api: TestClient) -> None:
    r = api.post("/api/search", json={"query": "x", "top": "many"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "top"]
    r = api.post("/api/search", json={"query": "x", "videos": []})  # was read as "all"
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "videos"]
    r = api.post("/api/ask", json={"videos": ["v"], "question": "q", "task": "dance"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "task"]
    r = api.post("/api/videos", json={"path": "clip.mp4", "stagez": []})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "stagez"]
    assert "Traceback" not in r.text


def test_errors_are_one_line_json_never_a_traceback(api: TestClient) -> None:
    r = api.post("/api/videos", json={"path": "clip.mp4", "stages": ["nope"]})
    assert r.status_code == 400 and r.json()["detail"].startswith("unknown stage(s) nope")
    assert "; stages: structure, transcribe, " in r.json()["detail"]
    r = api.post("/api/videos", json={"path": "clip.mp4", "stages": []})  # it ran structure alone
    assert r.status_code == 400 and r.json()["detail"].startswith("no stage named: name at")

    def broken() -> None:
        raise RuntimeError("secret internals")

    api.app.state.server.session.videos = broken  # type: ignore[attr-defined]
    r = api.get("/api/videos")
    assert r.status_code == 500 and "secret" not in r.text and "Traceback" not in r.text
    assert r.json() == {"detail": "internal error (RuntimeError); see the server's log"}


def test_cors_is_off_by_default_and_on_for_named_origins(
    api_settings: Settings, media: Path
) -> None:
    origin = {"Origin": "http://ui.example"}
    off = client(api_settings).get("/api/health", headers=origin)
    assert "access-control-allow-origin" not in off.headers
    on = client(api_settings, cors_origins=["http://ui.example"], token="t")
    r = on.get("/api/health", headers={**origin, "Authorization": "Bearer t"})
    assert r.headers["access-control-allow-origin"] == "http://ui.example"
    preflight = on.options(
        "/api/search", headers={**origin, "Access-Control-Request-Method": "POST"}
    )
    assert preflight.status_code == 200


def test_serve_refuses_a_public_host_without_a_token(_isolated_home: Path) -> None:
    out = vidagent("serve", "--host", "0.0.0.0", home=_isolated_home)
    assert out.returncode == 1
    message = (
        "error: refusing to listen on 0.0.0.0 without a token: pass --token or set "
        "VIDAGENT_TOKEN (or bind 127.0.0.1)"
    )
    assert out.stderr.strip().splitlines() == [message]


def test_the_access_log_never_shows_the_token(_isolated_home: Path) -> None:
    """``vidagent serve`` logs each request, but a ``?token=`` (EventSource, <video>) is hidden."""
    import os
    import subprocess
    import sys

    from liveserver import free_port

    port = free_port()
    env = {**os.environ, "VIDAGENT_HOME": str(_isolated_home), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "vidagent", "serve", "--port", str(port), "--token", "s3cret"]
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                ok = httpx.get(f"http://127.0.0.1:{port}/api/health?token=s3cret&x=1")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError("vidagent serve did not start") from None
                time.sleep(0.2)
        assert ok.status_code == 200
        # However the parameter's name is encoded or cased, it is hidden; so is any value
        # that holds the token.
        for query in ("%74oken=s3cret", "TOKEN=s3cret", "q=s3%63ret"):
            httpx.get(f"http://127.0.0.1:{port}/api/health?{query}&x=2")
        assert httpx.get(f"http://127.0.0.1:{port}/api/health?%74oken=s3cret").status_code == 200
    finally:
        proc.terminate()
        log, _ = proc.communicate(timeout=30)
    assert "/api/health?token=***&x=1" in log
    assert "/api/health?%74oken=***&x=2" in log and "/api/health?TOKEN=***&x=2" in log
    assert "/api/health?q=***&x=2" in log
    assert "s3cret" not in log and "s3%63ret" not in log


def test_bench_runs_are_listed_read_only(api: TestClient, api_settings: Settings) -> None:
    assert api.get("/api/bench/runs").json() == {"runs": []}
    (api_settings.home / "runs" / "broken").mkdir(parents=True)
    assert api.get("/api/bench/runs").json() == {"runs": []}
    assert api.get("/api/bench/runs/broken").status_code == 404
    assert api.get("/api/bench/runs/..").status_code == 404
