"""The web UI in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium) against ``create_app`` served by uvicorn on loopback,
over a Library with a real indexed clip and fake models.

Each page is checked for what a user would notice: the library lists the clip and an ingest
job's progress ends at every stage done; a search result click seeks the player; an ask
streams the agent's steps and draws its evidence at the right places on the timeline, and a
mark's click plays that span; the trace viewer draws the saved run. A screenshot of each page
is written to the test's ``tmp_path``; with ``UPDATE_SCREENSHOTS=1`` they are also copied to
``docs/screenshots/`` for the README (opt-in, so a test run leaves the work tree clean).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from factories import INDEX_SPECS

from vidagent.config import Settings, load_settings
from vidagent.ingest import index_video
from vidagent.library import Library
from vidagent.models.base import ChatRequest, ToolCall
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.roles import ROLES, capability
from vidagent.trace import (
    Answered,
    ChildStarted,
    Event,
    Observed,
    RunStarted,
    SearchRound,
    ToolCalled,
    Trace,
)

pytestmark = pytest.mark.timeout(300)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
TOKEN = "browser-test-token"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
UPDATE_SCREENSHOTS = os.environ.get("UPDATE_SCREENSHOTS") == "1"  # read before isolation
QUESTION = "What text appears on screen?"
OPTIONS = ("GOODBYE", "HELLO VIDAGENT", "No text")


class AgentModel:
    """DVD's model: search the clips first, then answer once the search has been seen. The
    answer waits for ``gate``, so a test can look at the page while the run is under way; as a
    local model does, it asks its run's check while it works, so a stop ends the wait."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, request: ChatRequest) -> ToolCall:
        from vidagent.models.interrupt import check_call

        if request.messages and request.messages[-1].role == "tool":
            deadline = time.monotonic() + 60
            while not self.gate.wait(timeout=0.05):
                check_call()
                assert time.monotonic() < deadline, "the test never let the agent answer"
            return ToolCall("call_answer", "answer", json.dumps({"answer": "(B) HELLO VIDAGENT"}))
        arguments = {"event_description": "text on screen", "top_k": 2}
        return ToolCall("call_clip_search", "clip_search", json.dumps(arguments))


def fake_hub(settings: Settings, llm: AgentModel) -> Models:
    """The configured fake models for every role, with the scripted agent model as the llm."""
    from vidagent.models import registry

    adapters: dict[str, Any] = {"llm": FakeAdapter.function(llm)}
    for role in ROLES:
        if role not in adapters and capability(role) == role and settings.spec(role) != "none:":
            adapters[role] = registry.create_adapter(settings.spec(role), settings, role)
    return Models.from_adapters(adapters, settings)


@dataclass
class Served:
    base: str
    home: Path
    video: Path
    video_id: str
    duration: float
    llm: AgentModel

    def api(self, path: str) -> Any:
        request = urllib.request.Request(
            self.base + path, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


@pytest.fixture(scope="module")
def served(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve")
    media = root / "media"
    media.mkdir()
    video = media / "small.mp4"
    shutil.copy(small_video, video)
    settings = load_settings({**INDEX_SPECS, "home": str(root / "home")}, env={})
    result = index_video(video, library=Library(settings.library_uri), settings=settings)
    assert result.video is not None

    llm = AgentModel()
    with serving(settings, llm, media) as base:
        yield Served(base, settings.home, video, result.video.video_id, result.video.duration, llm)


@contextmanager
def serving(settings: Settings, llm: AgentModel, media: Path) -> Iterator[str]:
    """The app on ``settings``, every role a fake (``llm`` the agent's), served by uvicorn on
    a free loopback port: its base URL."""
    import uvicorn

    from vidagent.server.app import create_app

    hub = fake_hub(settings, llm)
    app = create_app(settings, token=TOKEN, media_roots=[media], models=hub)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
        hub.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
        pytest.skip(
            f"no headless browser: {CHROMIUM} or {CHROMEDRIVER} is missing "
            "(apt-get install chromium chromium-driver)"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--mute-audio",
        "--window-size=1280,900",
        "--autoplay-policy=no-user-gesture-required",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the pages' consoles
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SE_OFFLINE", "true")  # never let Selenium Manager download a driver
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(autouse=True)
def _no_script_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """No page a test opened threw in its script (a refused request's own console line, a
    network entry, is the page's to show, and is not counted)."""
    yield
    if "browser" in request.fixturenames:
        driver = request.getfixturevalue("browser")
        logged = driver.get_log("browser")
        thrown = [e for e in logged if e["level"] == "SEVERE" and e.get("source") != "network"]
        assert thrown == [], thrown


def wait_for(driver: Any, condition: Callable[[Any], Any], what: str, timeout: float = 20) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)
    except TimeoutException:
        errors = driver.find_elements("css selector", ".error")
        shown = "; ".join(e.text for e in errors if e.text)
        raise AssertionError(
            f"timed out waiting for {what}" + (f" (page says: {shown})" if shown else "")
        ) from None


def seeked(player: str, lo: float, hi: float) -> Callable[[Any], float | None]:
    """A condition: the player ``player`` (an element id) stands in ``[lo, hi]`` seconds,
    having been sought there: it played nothing before ``lo`` (a player that played from 0
    instead reaches ``lo`` too, later, with a played range from 0)."""
    script = (
        f"const p = document.getElementById('{player}'); const r = p.played;"
        " return [p.readyState, p.currentTime, r.length ? r.start(0) : null]"
    )

    def condition(d: Any) -> float | None:
        ready, now, first = d.execute_script(script)
        assert first is None or first >= lo - 0.05, f"{player} played from {first} s, not {lo}"
        return now if ready >= 1 and lo <= now <= hi else None

    return condition


def css(driver: Any, selector: str) -> list[Any]:
    return driver.find_elements("css selector", selector)


def screenshot(driver: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 1000
    if UPDATE_SCREENSHOTS:  # the README's copies, in 128 colours to keep the repository small
        from PIL import Image

        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        with Image.open(path) as image:
            small = image.convert("RGB").quantize(colors=128)
            small.save(SCREENSHOTS / path.name, optimize=True)


def check_bundle(data: bytes, question: str) -> None:
    """A downloaded evidence zip: its index.json valid against the shipped schema, naming the
    question, with a clip for each citation."""
    import io
    import zipfile

    import jsonschema

    from vidagent.app.export import export_schema

    bundle = zipfile.ZipFile(io.BytesIO(data))
    (index_name,) = [n for n in bundle.namelist() if n.endswith("/index.json")]
    index = json.loads(bundle.read(index_name))
    jsonschema.validate(index, export_schema())
    assert index["question"] == question and index["citations"]
    folder = index_name.removesuffix("index.json")
    assert all(c["clip"] for c in index["citations"]), [c["error"] for c in index["citations"]]
    assert all(folder + c["clip"] in bundle.namelist() for c in index["citations"])


def open_page(driver: Any, served: Served, page: str) -> None:
    """A page with the token given once in its URL (the pages keep it for the API calls)."""
    sep = "&" if "?" in page else "?"
    driver.get(f"{served.base}/{page}{sep}token={TOKEN}")


def test_library_lists_the_clip_and_an_ingest_job_runs_to_the_end(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    open_page(browser, served, "index.html")
    row = wait_for(
        browser, lambda d: css(d, f"#videos tr[data-video-id='{served.video_id}']"), "the video row"
    )[0]
    cells = row.find_elements("css selector", "td")
    assert (
        cells[0].text.startswith("small.mp4")
        and cells[1].text == "0:12"
        and cells[2].text == "640×360"
    )
    badges = {b.text for b in row.find_elements("css selector", ".badge")}
    assert {"structure", "transcribe", "read_text", "caption", "embed"} <= badges

    browser.find_element("css selector", "#stages").send_keys("caption, embed")
    browser.find_element("css selector", "#register input[name=path]").send_keys(str(served.video))
    browser.find_element("css selector", "#register button").click()
    job = wait_for(
        browser, lambda d: css(d, ".job[data-state=done]"), "the index job to finish", 60
    )[0]
    assert "small.mp4" in job.text
    assert job.find_element("css selector", ".stage").text == "embed: 3 / 3 stages"
    width = browser.execute_script(
        "return arguments[0].style.width", job.find_element("css selector", ".progress > div")
    )
    assert width == "100%"
    screenshot(browser, tmp_path, "library")
    # stages typed as nothing but commas are no stages: the default ones run (it sent [], and the
    # job ran the structure stage alone)
    stages = browser.find_element("css selector", "#stages")
    stages.clear()
    stages.send_keys(" , ,")
    browser.find_element("css selector", "#register input[name=path]").send_keys(str(served.video))
    browser.find_element("css selector", "#register button").click()
    jobs = wait_for(
        browser,
        lambda d: (found := css(d, ".job[data-state=done]")) and len(found) == 2 and found,
        "the second index job to finish",
        60,
    )
    assert all(not e.text for e in css(browser, ".error"))
    assert all(
        j.find_element("css selector", ".stage").text != "structure: 1 / 1 stages" for j in jobs
    )
    # an upload goes through the stages typed too
    from vidagent.media.synth import make_video

    upload = tmp_path / "upload.mp4"
    make_video(upload, duration=2, size=(160, 96), audio="tone")
    stages.clear()
    stages.send_keys("transcribe")
    browser.find_element("css selector", "#upload input[name=file]").send_keys(str(upload))
    browser.find_element("css selector", "#upload button").click()
    read = (  # in one script: the list is drawn again as jobs progress
        "return [...document.querySelectorAll('.job[data-state=done]')]"
        ".filter(j => j.textContent.includes('upload.mp4'))"
        ".map(j => j.querySelector('.stage').textContent)"
    )
    shown = wait_for(
        browser, lambda d: d.execute_script(read), "the upload's index job to finish", 60
    )
    assert all(not e.text for e in css(browser, ".error"))
    assert shown == ["transcribe: 2 / 2 stages"]
    # newest first, as the API lists them, both as they ran and after a reload (which listed
    # them oldest first)
    newest = [j["job_id"] for j in served.api("/api/jobs")["jobs"] if j["kind"] == "index"]
    assert len(newest) >= 3
    assert [j.get_attribute("data-job-id") for j in css(browser, ".job")] == newest
    browser.refresh()
    listed = wait_for(browser, lambda d: len(found := css(d, ".job")) == len(newest) and found,
                      "the jobs after a reload")  # fmt: skip
    assert [j.get_attribute("data-job-id") for j in listed] == newest


def test_times_round_up_into_the_next_second_and_minute(served: Served, browser: Any) -> None:
    open_page(browser, served, "index.html")
    shown = browser.execute_async_script(
        "import('/js/api.js').then(m => arguments[0]("
        "[9.96, 59.97, 3599.96, 12, 7.25, 0.04].map(m.clock)))"
    )
    assert shown == ["0:10", "1:00", "1:00:00", "0:12", "0:07.3", "0:00"]


def test_a_search_result_click_seeks_the_player(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    open_page(browser, served, f"video.html?id={served.video_id}")
    wait_for(browser, lambda d: len(css(d, "#clips tr.clickable")) == 3, "the clip table")
    first = css(browser, "#clips tr.clickable")[0].find_elements("css selector", "td")
    assert first[0].text == "0:00–0:05" and first[1].text and "perception" not in first[1].text
    head = browser.find_element("css selector", "#caption-head").text
    assert head == "CAPTION (perception describer: measured facts, not a vision-language model)"
    # the player can read the file through the API (Range requests, the token in the URL)
    wait_for(
        browser,
        lambda d: d.execute_script("return document.getElementById('player').readyState") >= 1,
        "the player to load the video",
    )

    browser.find_element("css selector", "#search input[name=query]").send_keys("blue picture")
    browser.find_element("css selector", "#search button").click()
    rows = wait_for(browser, lambda d: css(d, "#results tr.result"), "search results")
    late = next(r for r in rows if float(r.get_attribute("data-t0")) > 0)
    t0 = float(late.get_attribute("data-t0"))
    late.click()

    wait_for(browser, seeked("player", t0 - 0.05, t0 + 1.5), f"the player to seek to {t0}")
    screenshot(browser, tmp_path, "video")


def test_the_clip_table_and_the_players_subtitles_say_who_speaks(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    import dataclasses

    from vidagent.library.schema import Artifact

    library = Library(served.home / "library")
    segments = library.transcript(served.video_id)
    assert segments  # the fake ASR's "hello there"
    # Labelled as the speakers stage labels them, and named as `speakers rename` names them.
    library.put_transcript(
        served.video_id, [dataclasses.replace(s, speaker="S1") for s in segments]
    )
    library.put_artifact(Artifact(served.video_id, "speakers", "names", data={"S1": "Dr Lee"}))
    try:
        open_page(browser, served, f"video.html?id={served.video_id}")
        wait_for(browser, lambda d: len(css(d, "#clips tr.clickable")) == 3, "the clip table")
        rows = css(browser, "#clips tr.clickable")
        said = [r.find_elements("css selector", "td")[2].text for r in rows]
        assert any(t.startswith("S1 (Dr Lee): ") for t in said), said
        # the player shows the transcript as subtitles, the speaker by the name given
        cue = wait_for(
            browser,
            lambda d: d.execute_script(
                "const t = document.getElementById('player').textTracks[0];"
                "return t && t.cues && t.cues.length ? t.cues[0].text : null"
            ),
            "the player's subtitles",
        )
        assert cue == "<v Dr Lee>hello there"
        base = f"{served.base}/api/videos/{served.video_id}"
        links = {a.text: a.get_attribute("href") for a in css(browser, "#takeaway a")}
        assert links == {
            "Subtitles (SRT)": f"{base}/subtitles?format=srt&token={TOKEN}",
            "WebVTT": f"{base}/subtitles?format=vtt&token={TOKEN}",
            "Contact sheet": f"{base}/sheet?count=24&token={TOKEN}",
        }
        srt = httpx.get(links["Subtitles (SRT)"], timeout=30)
        assert srt.status_code == 200 and "Dr Lee: hello there" in srt.text
        sheet = httpx.get(links["Contact sheet"], timeout=60)
        assert sheet.status_code == 200 and sheet.headers["content-type"] == "image/jpeg"
    finally:
        library.put_transcript(served.video_id, segments)
        library.delete_artifacts(served.video_id, "speakers", ["names"])


def test_a_video_the_browser_cannot_play_says_so_under_the_player(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    # (an AVI's msmpeg4, a stream's HLS playlist: the player sat at 0:00 without a word)
    from dataclasses import replace

    library = Library(load_settings({"home": str(served.home)}, env={}).library_uri)
    record = library.get_video(served.video_id)
    unplayable = tmp_path / "unplayable.mp4"
    unplayable.write_bytes(b"\x00not a video at all" * 500)
    library.put_video(replace(record, source=str(unplayable)))
    try:
        # the server reads the Library's new version (a page opened before played the old file)
        deadline = time.monotonic() + 20
        while served.api(f"/api/videos/{served.video_id}")["video"]["source"] != str(unplayable):
            assert time.monotonic() < deadline, "the server never read the new record"
            time.sleep(0.1)
        open_page(browser, served, f"video.html?id={served.video_id}")
        said = wait_for(
            browser,
            lambda d: (box := d.find_element("css selector", "#player-error")).text and box,
            "the player's error",
        )
        assert said.text.startswith(
            "The player cannot show this video: a format this browser does not play."
        )
        assert css(browser, "#clips tr")  # the rest of the page stands
    finally:
        library.put_video(record)


def test_a_watched_stream_plays_in_the_player_from_its_windows(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    # (its HLS playlist was served, but the windows it names were 404: the player sat at 0:00)
    from livemedia import ts_stream

    auth = {"Authorization": f"Bearer {TOKEN}"}
    (served.video.parent / "feed.ts").write_bytes(ts_stream(tmp_path / "feed.ts", 6.0))
    body = {"source": "feed.ts", "window": "2", "give_up": "1", "stages": ["embed"]}
    started = httpx.post(f"{served.base}/api/streams", json=body, headers=auth, timeout=10)
    assert started.status_code == 202, started.text
    vid = started.json()["video_id"]
    deadline = time.monotonic() + 90
    while (shown := served.api(f"/api/streams/{vid}"))["state"] != "ended":
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)
    open_page(browser, served, f"video.html?id={vid}")
    state = "const v = document.querySelector('#player'); return [v.readyState, v.duration];"
    _, duration = wait_for(
        browser, lambda d: (got := d.execute_script(state))[0] >= 1 and got, "the stream's metadata"
    )
    assert duration == pytest.approx(6.0, abs=0.3)
    browser.execute_script("const v = document.querySelector('#player'); v.muted = true; v.play();")
    wait_for(
        browser,
        lambda d: d.execute_script("return document.querySelector('#player').currentTime") > 0.5,
        "the stream to play",
    )
    assert not browser.find_element("css selector", "#player-error").text


def test_a_window_indexed_after_the_source_went_down_leaves_the_notice_up(
    browser: Any, tmp_path: Path
) -> None:
    """The capture reads a window ahead of the indexing: on a busy machine the source can be
    said down while windows read before it are still being indexed. Their events, arriving
    after ``source_down``, took the notice down (the streams page test failed once so in a
    full run); here each window's transcription takes 2 s, and the file stalls 1 s after it
    was read to its end, while the first window is still being indexed."""
    from livemedia import ts_stream
    from liveserver import serve

    from vidagent.server.app import create_app

    media = tmp_path / "media"
    media.mkdir()
    ts_stream(media / "late.ts", 6.0)
    specs = {**INDEX_SPECS, "asr": "fake:echo?text=hello there&delay=2"}
    settings = load_settings({**specs, "home": str(tmp_path / "home")}, env={})
    live = serve(create_app(settings, token=TOKEN, media_roots=[media]))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = {"source": "late.ts", "window": "2", "stall": "1", "stages": ["transcribe"]}
    started = httpx.post(f"{live.url}/api/streams", json=body, headers=auth, timeout=10)
    vid = started.json().get("video_id", "") if started.status_code == 202 else ""
    try:
        assert vid, started.text
        browser.get(f"{live.url}/streams.html?id={vid}&token={TOKEN}")
        down = 'const p = document.querySelector("#source-down"); return p && p.textContent;'
        said = wait_for(browser, lambda d: d.execute_script(down), "the source said to be down")
        assert said.startswith("Source down since 0:05")
        windows = "return document.querySelectorAll('#stream-timeline .window').length;"
        wait_for(browser, lambda d: d.execute_script(windows) >= 2, "the windows read before it")
        assert browser.execute_script(down) == said  # still up: no window reached past it
    finally:
        browser.get("about:blank")  # the page's requests end before its server does
        httpx.post(f"{live.url}/api/streams/{vid}/stop", headers=auth, timeout=10)
        live.stop()


def test_a_summary_time_plays_the_moment_and_times_read_as_wall_clock(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    from dataclasses import replace

    from vidagent.library.schema import Artifact

    library = Library(load_settings({"home": str(served.home)}, env={}).library_uri)
    summary = library.artifact(served.video_id, "summary", "global")
    record = library.get_video(served.video_id)
    assert summary is not None
    written = "[00:01] A blue picture. At 0:00:07 text appears; [99:00] is past the end."
    library.put_artifact(Artifact(served.video_id, "summary", "global", text=written))
    library.put_video(replace(record, recorded_at="2026-05-01T09:30:00Z"))
    try:
        open_page(browser, served, f"video.html?id={served.video_id}")
        walls = wait_for(browser, lambda d: css(d, "#clips td.time .wall"), "the clips' wall times")
        assert [w.text for w in walls] == [
            "2026-05-01T09:30:00Z",
            "2026-05-01T09:30:05Z",
            "2026-05-01T09:30:10Z",
        ]
        assert "recorded 2026-05-01T09:30:00Z" in browser.find_element("css selector", "#meta").text
        links = wait_for(browser, lambda d: css(d, "#summary a.time-link"), "the summary's times")
        assert [a.text for a in links] == ["[00:01]", "0:00:07"]  # 99:00 is past the end
        assert "[99:00] is past the end." in browser.find_element("css selector", "#summary").text
        links[1].click()

        wait_for(browser, seeked("player", 6.95, 8.5), "the player to seek to 7 s")
    finally:
        library.put_artifact(summary)
        library.put_video(record)


def test_a_refused_question_says_so_where_the_answer_would_be(served: Served, browser: Any) -> None:
    open_page(browser, served, "ask.html")
    wait_for(browser, lambda d: css(d, "input[name=videos]"), "the video choice")
    for box in css(browser, "input[name=videos]:checked"):
        box.click()  # no video: the API refuses the question (422)
    browser.find_element("css selector", "textarea[name=question]").send_keys("What opens?")
    browser.find_element("css selector", "#submit").click()
    said = wait_for(browser, lambda d: d.find_element("css selector", "#ask-error").text,
                    "the refusal")  # fmt: skip
    assert said == "Choose at least one video to ask about."  # not the validator's words
    answer = browser.find_element("css selector", "#answer").text
    assert answer == "No answer: the question was refused (above)."  # not "Waiting for…"


def test_stop_ends_a_running_ask_inside_its_model_call(served: Served, browser: Any) -> None:
    open_page(browser, served, f"ask.html?video={served.video_id}")
    wait_for(browser, lambda d: css(d, "input[name=videos]:checked"), "the video choice")
    browser.find_element("css selector", "textarea[name=question]").send_keys(QUESTION)
    stop = browser.find_element("css selector", "#stop")
    assert not stop.is_displayed()  # nothing runs yet
    served.llm.gate.clear()  # the model answers only when let: it works until stopped
    try:
        browser.find_element("css selector", "#submit").click()
        wait_for(browser, lambda d: css(d, "#steps li.observed"), "the search's observation")
        job_id = browser.find_element("css selector", "#job-state").text.split()[1].rstrip(":")
        stop.click()
        said = wait_for(
            browser,
            lambda d: "cancelled" in (t := d.find_element("css selector", "#job-state").text) and t,
            "the job to end cancelled",
        )
        assert said == f"job {job_id}: cancelled"
        assert browser.find_element("css selector", "#answer").text == (
            "No answer: the job is cancelled."
        )
        assert (
            not stop.is_displayed() and browser.find_element("css selector", "#submit").is_enabled()
        )
        job = served.api(f"/api/jobs/{job_id}")
        assert job["state"] == "cancelled"
    finally:
        served.llm.gate.set()
    # the model call under way was ended by the stop, not left to run on (it never answered)
    trace = served.api(
        f"/api/traces/{job['params']['trace'].split('/')[-1].removesuffix('.jsonl')}"
    )
    calls = [e for e in trace["events"] if e["kind"] == "model_call" and e["role"] == "llm"]
    assert calls[-1]["error"] == "interrupted: stopped by the caller"


def test_the_notice_follows_the_strategy_chosen(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.support.ui import Select

    # no model endpoint (the llm is the embedded model, never loaded here): retrieval is the
    # default and says why; an agent chosen says what it measured on the embedded model
    settings = load_settings(
        {**INDEX_SPECS, "home": str(tmp_path / "home"), "llm": "llamacpp:smollm2-135m"}, env={}
    )
    with serving(settings, AgentModel(), served.video.parent) as base:
        browser.get(f"{base}/ask.html?token={TOKEN}")

        def notice(d: Any) -> str:
            return str(d.find_element("css selector", "#strategy-notice").text)

        said = wait_for(browser, notice, "the default's notice")
        assert said.startswith("no model endpoint is configured: questions are answered from")
        strategy = Select(browser.find_element("css selector", "select[name=strategy]"))
        strategy.select_by_value("dvd")
        dvd = wait_for(browser, lambda d: notice(d).startswith("dvd with") and notice(d),
                       "dvd's notice")  # fmt: skip
        assert "with the embedded SmolLM2-135M, which does not reason" in dvd
        strategy.select_by_value("retrieval")
        wait_for(browser, lambda d: notice(d) == said, "the default's notice again")


def test_an_ask_streams_steps_and_draws_its_evidence(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    open_page(browser, served, f"ask.html?video={served.video_id}")
    wait_for(
        browser,
        lambda d: css(d, f"input[name=videos][value='{served.video_id}']:checked"),
        "the video choice",
    )
    browser.find_element("css selector", "textarea[name=question]").send_keys(QUESTION)
    browser.find_element("css selector", "textarea[name=options]").send_keys("\n".join(OPTIONS))
    served.llm.gate.clear()  # the agent searches, then waits to answer
    try:
        browser.find_element("css selector", "#submit").click()
        # the search's steps are on the page while the run is still under way: streamed live
        wait_for(browser, lambda d: css(d, "#steps li.observed"), "the first observation")
        assert not css(browser, "#steps li.answer") and not css(browser, "#trace-link")
        assert "running" in browser.find_element("css selector", "#job-state").text
        # a reload mid-job follows the same job again, its steps replayed (it lost the job)
        running = browser.find_element("css selector", "#job-state").text.split()[1]
        browser.refresh()
        wait_for(browser, lambda d: css(d, "#steps li.observed"), "the steps replayed")
        assert browser.find_element("css selector", "#job-state").text.split()[1] == running
        assert not css(browser, "#steps li.answer")
        # and the form holds the question it asked again (it was empty after a reload)
        wait_for(
            browser,
            lambda d: d.find_element("css selector", "textarea[name=question]").get_attribute(
                "value"
            ),
            "the question back in the form",
        )
        field = browser.find_element
        assert field("css selector", "textarea[name=question]").get_attribute("value") == QUESTION
        assert field("css selector", "textarea[name=options]").get_attribute("value") == "\n".join(
            OPTIONS
        )
        assert [b.get_attribute("value") for b in css(browser, "input[name=videos]:checked")] == [
            served.video_id
        ]
    finally:
        served.llm.gate.set()
    wait_for(browser, lambda d: css(d, "#trace-link"), "the job to finish", 60)
    kinds = [s.get_attribute("data-kind") for s in css(browser, "#steps li.step")]
    assert kinds == ["run_started"] + ["agent_turn", "tool_called", "observed"] * 2 + [
        "answer",
        "run_finished",
    ]
    tool = css(browser, "#steps li.tool_called")[0]
    assert "clip_search" in tool.text and '"top_k":2' in tool.text
    assert "Searched Video Clip Scripts" in css(browser, "#steps li.observed")[0].text
    assert browser.find_element("css selector", "#answer-text").text == "(B) HELLO VIDAGENT"
    assert "clip_search" in browser.find_element("css selector", "#tree").text

    job_id = browser.find_element("css selector", "#job-state").text.split()[1].rstrip(":")
    result = served.api(f"/api/jobs/{job_id}")["result"]["answer"]
    evidence = result["evidence"]
    assert len(evidence) == 2 and all(v == served.video_id for v, _, _ in evidence)
    # the marks are the checked citations: at their tightened times, coloured by their label
    cited = [[c["video_id"], c["t0"], c["t1"]] for c in result["citations"]]
    assert len(cited) == 2
    marks = css(browser, f".timeline[data-video-id='{served.video_id}'] .mark")
    drawn = sorted(
        (
            float(m.get_attribute("data-t0")),
            float(m.get_attribute("data-t1")),
            float(m.value_of_css_property("left").removesuffix("px")),
            float(m.value_of_css_property("width").removesuffix("px")),
        )
        for m in marks
    )
    bar = browser.find_element("css selector", ".timeline").size["width"] - 2  # less its border
    assert [(t0, t1) for t0, t1, _, _ in drawn] == sorted((t0, t1) for _, t0, t1 in cited)
    labels = {c["label"] for c in result["citations"]}
    assert {m.get_attribute("data-label") for m in marks} == labels
    assert all(m.get_attribute("data-label") in m.get_attribute("class") for m in marks)
    for t0, t1, left, width in drawn:
        assert left == pytest.approx(bar * t0 / served.duration, abs=1.5)
        assert width == pytest.approx(bar * (t1 - t0) / served.duration, abs=1.5)
        style = marks[0].get_attribute("style")
        assert "left:" in style and "%" in style

    late = max(marks, key=lambda m: float(m.get_attribute("data-t0")))
    t0 = float(late.get_attribute("data-t0"))
    late.click()
    wait_for(
        browser,
        seeked("evidence-player", t0 - 0.05, t0 + 1.5),
        f"the evidence player to seek to {t0}",
    )
    screenshot(browser, tmp_path, "ask")

    # the evidence downloads as a zip whose index.json the shipped schema accepts
    link = browser.find_element("css selector", "#export-link")
    assert link.get_attribute("download").endswith("-evidence.zip")
    fetched = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0].href).then(async (r) => { const blob = await r.blob();"
        " const reader = new FileReader(); reader.onload = () => done([r.status,"
        " r.headers.get('content-type'), reader.result.split(',')[1]]);"
        " reader.readAsDataURL(blob); }).catch((e) => done([0, String(e), '']));",
        link,
    )
    assert fetched[:2] == [200, "application/zip"], fetched[:2]
    check_bundle(base64.b64decode(fetched[2]), QUESTION)


def test_the_trace_viewer_draws_a_saved_trace(served: Served, browser: Any, tmp_path: Path) -> None:
    traces = served.api("/api/traces")["traces"]
    assert traces, "the ask test saves a trace first"
    open_page(browser, served, "trace.html")
    wait_for(browser, lambda d: css(d, "#traces a"), "the list of traces")
    assert QUESTION in browser.find_element("css selector", "#traces").text
    css(browser, "#traces a")[0].click()

    wait_for(browser, lambda d: css(d, "#steps li.answer"), "the saved steps")
    assert browser.find_element("css selector", "#question").text == QUESTION
    assert browser.find_element("css selector", "#answer-text").text == "(B) HELLO VIDAGENT"
    assert len(css(browser, "#steps li.tool_called")) == 2
    assert len(css(browser, ".timeline .mark")) == 2
    assert "dvd" in browser.find_element("css selector", "#tree .node-run").text
    screenshot(browser, tmp_path, "trace")


def nested_trace(video_id: str) -> list[Event]:
    """A run whose tool call opens a sub-agent, and a search tree two levels deep."""
    node = {"video_id": video_id, "depth": 0, "round": 1, "r": 0.5, "u": 0.1, "h": 0.4}
    root = {**node, "id": 0, "span": [0, 12], "parent": None, "explanation": "the whole video"}
    kids = [
        {**node, "id": 1, "span": [0, 6], "parent": 0, "depth": 1, "explanation": "red"},
        {**node, "id": 2, "span": [6, 12], "parent": 0, "depth": 1, "explanation": "text"},
    ]
    grandchild = {**node, "id": 3, "span": [6, 9], "parent": 2, "depth": 2, "explanation": ""}
    search: dict[str, Any] = {
        "frames": [],
        "anchor_frames": [],
        "entropy": 0.5,
        "candidates": [],
        "new_queries": [],
        "queries": ["text"],
        "anchors": [],
        "memory": [],
    }
    video = {"video_id": video_id, "name": "small.mp4", "duration": 12.0}
    return [
        RunStarted(0.0, "master", "Which sign?", [], [video], {}, {}, run="m"),
        ToolCalled(0.1, step=1, call_id="c1", tool="ask_visual", arguments={"q": "sign"}, run="m"),
        ChildStarted(0.2, child="v", parent="m", name="visual agent", span="c1", run="m"),
        SearchRound(
            0.3,
            step=1,
            round=1,
            expanded=[root],
            children=kids,
            choice={"segment": 2},
            run="v",
            **search,
        ),
        SearchRound(
            0.4,
            step=2,
            round=2,
            expanded=[kids[1]],
            children=[grandchild],
            choice={"answer": "HELLO"},
            run="v",
            **search,
        ),
        Observed(
            0.5,
            step=1,
            call_id="c1",
            tool="ask_visual",
            text="HELLO",
            confidence=None,
            evidence=[[video_id, 6.0, 9.0]],
            frames=4,
            model_calls=1,
            error=False,
            seconds=0.3,
            run="m",
        ),
        Answered(
            0.6,
            text="HELLO",
            choice=None,
            parsed=True,
            forced=False,
            reason="answered",
            confidence=None,
            evidence=[[video_id, 6.0, 9.0]],
            run="m",
        ),
    ]


def test_the_trace_viewer_draws_sub_runs_and_search_trees_as_a_tree(
    served: Served, browser: Any
) -> None:
    trace = Trace(served.home / "traces" / "20260101-000000-master-nested.jsonl")
    for event in nested_trace(served.video_id):
        trace.emit(event)
    trace.close()
    open_page(browser, served, "trace.html?id=20260101-000000-master-nested")
    wait_for(browser, lambda d: css(d, "#tree .node-segment"), "the search tree")

    # the sub-agent hangs under the tool call that opened it, the segments under their parents
    child = browser.find_element("css selector", "#tree li[data-run=m] .tool-node li[data-run=v]")
    assert child.find_element("css selector", ".node-run").text == "visual agent"
    segments = child.find_elements("css selector", ".node-segment")
    assert [s.text.split()[0] for s in segments] == ["#0", "#1", "#2", "#3"]
    parents = browser.execute_script(
        """return [...arguments[0].querySelectorAll('.node-segment')].map((s) => {
             const up = s.closest('li').parentElement.closest('li');
             const label = up.querySelector(':scope > .node-segment, :scope > strong');
             return [s.textContent.split(' ')[0], label.textContent.split(' ')[0]];
           });""",
        child,
    )
    assert parents == [["#0", "search"], ["#1", "#0"], ["#2", "#0"], ["#3", "#2"]]
    assert segments[3].text.startswith("#3 small.mp4 [6, 9]")
    assert [s.text.split()[0] for s in child.find_elements("css selector", ".chosen")] == ["#2"]
    labels = [s.text for s in css(browser, "#steps li.search_round .run-label")]
    assert labels == ["visual agent", "visual agent"]
    mark = browser.find_element("css selector", ".timeline .mark")
    assert mark.get_attribute("style") == "left: 50%; width: 25%;"


def test_the_streams_page_starts_a_watch_shows_its_alert_and_stops_it(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    from livemedia import ts_stream

    source = served.video.parent / "door.ts"
    ts_stream(source, 6.0)
    open_page(browser, served, "streams.html")
    # the list drawn (it may hold the stream another test of this module watched)
    listed = 'return document.querySelector("#streams tbody").textContent'
    wait_for(browser, lambda d: "Loading" not in d.execute_script(listed), "the list of streams")
    form = browser.find_element("css selector", "#start-stream")
    form.find_element("css selector", "input[name=source]").send_keys(str(source))
    form.find_element("css selector", "textarea[name=alerts]").send_keys("hello there")
    form.find_element("css selector", "input[name=window]").send_keys("2")
    form.find_element("css selector", "button").click()
    # the stream's page: the fake recogniser's words raise the alert in the first window
    # (the page redraws as events arrive: what it shows is read in one go)
    first_alert = 'const a = document.querySelector("#alerts .alert"); return a && a.textContent;'
    alert = wait_for(browser, lambda d: d.execute_script(first_alert), "the alert to arrive", 90)
    assert alert.startswith("hello there 0:00") and "speech: “hello there”" in alert
    wait_for(browser, lambda d: len(css(d, "#stream-timeline .window")) >= 2, "two windows", 90)
    assert css(browser, "#windows tbody tr.window")
    # the list, redrawn every 2 s, counts the alert
    read_row = """const r = document.querySelector("#streams tr[data-state=watching]");
        return r && {alerts: r.querySelector(".alert-count").textContent,
                     edge: r.querySelector(".live-edge").textContent};"""
    row = wait_for(
        browser,
        lambda d: (got := d.execute_script(read_row)) and got["alerts"] == "1" and got,
        "the stream listed with its alert",
        30,
    )
    assert not row["edge"].startswith("0:00")
    # the file stops growing at 6 s: after the stall (10 s) the page says the source is down,
    # while the watch waits for it (it said nothing until the outage ended)
    said = wait_for(
        browser,
        lambda d: d.execute_script('const p = document.querySelector("#source-down");'
                                   "return p && p.textContent;"),
        "the source said to be down",
        60,
    )  # fmt: skip
    assert said.startswith("Source down since 0:0") and "(stalled): reconnecting" in said
    screenshot(browser, tmp_path, "streams")
    # its video page, while it is watched, says the player holds the stream as it stood
    vid = browser.execute_script("return new URLSearchParams(location.search).get('id')")
    open_page(browser, served, f"video.html?id={vid}")
    live = wait_for(
        browser,
        lambda d: (p := d.find_element("css selector", "#player-live")).text and p,
        "the live note under the player",
    )
    assert live.text.startswith("Live: the player holds the stream up to 0:0")
    open_page(browser, served, f"streams.html?id={vid}")
    wait_for(browser, lambda d: css(d, "#streams tr[data-state=watching]"), "the list again", 30)
    browser.execute_script(
        'document.querySelector("#streams tr[data-state=watching] button.danger").click()'
    )
    wait_for(browser, lambda d: css(d, "#streams tr[data-state=stopped]"), "the watch to stop", 60)
    (shown,) = [x for x in served.api("/api/streams")["streams"] if x["video_id"] == vid]
    assert shown["state"] == "stopped" and shown["live_edge"] > 2.0
