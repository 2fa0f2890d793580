"""The AgentCVR strategy over real (generated) videos: frame sampling, the visual and audio
sub-agents as child runs, clip-relative times, drone-view frame folders, the trace and replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentkit import INDEX_SPECS

from vidagent.agents.base import Question
from vidagent.agents.cvr.agent import CVRAgent
from vidagent.agents.cvr.inputs import CvrInput, CvrQuestion
from vidagent.cli.render import render
from vidagent.config import load_settings
from vidagent.ingest import index_video
from vidagent.library import Library
from vidagent.models.base import ChatRequest
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.tools.cvr import frames as cvr_frames
from vidagent.trace import AgentTurn, ChildStarted, FormatError, ModelCall, PhaseChanged, Trace


def test_bin_centres_and_frame_indices_by_hand() -> None:
    times = cvr_frames.bin_centres(10.0, 20.0, 4)
    assert times == [11.25, 13.75, 16.25, 18.75]
    assert cvr_frames.frame_indices(times, 25.0, 1000) == [281, 343, 406, 468]
    # clipped to the last frame, repeats dropped (two bins in one frame period)
    assert cvr_frames.frame_indices([0.01, 0.02, 39.99, 50.0], 25.0, 1000) == [0, 999]
    assert cvr_frames.frame_indices(cvr_frames.bin_centres(0, 1, 8), 2.0, 2) == [0, 1]


def test_largest_remainder_allocation() -> None:
    assert cvr_frames.allocate(10, [1, 1, 1]) == [4, 3, 3]
    assert cvr_frames.allocate(5, [3, 1]) == [4, 1]
    assert cvr_frames.allocate(64, [64, 32, 32]) == [32, 16, 16]
    assert sum(cvr_frames.allocate(7, [0.3, 2.2, 5.1])) == 7
    assert cvr_frames.allocate(3, [0, 0]) == [0, 0]


def test_a_clip_of_two_spans_shares_frames_by_length() -> None:
    pieces = cvr_frames.clip_pieces([(100, 110), (200, 210)], duration=300)
    assert [(p.src_start, p.clip_start) for p in pieces] == [(100, 0), (200, 10)]
    # [5, 15] of the clip: 5 s in each piece, 2 frames each, at each piece's bin centres
    assert cvr_frames.source_times(pieces, 5, 15, 4) == [106.25, 108.75, 201.25, 203.75]
    assert cvr_frames.clip_pieces([], duration=42.0)[0].src_end == 42.0


def test_folder_indices_are_linspace_whole_frames() -> None:
    assert cvr_frames.folder_indices(0, 299, 4, 300) == [0, 99, 199, 299]
    assert cvr_frames.folder_indices(10, 500, 3, 280) == [10, 144, 279]


# -- the strategy over generated videos --------------------------------------------------------


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from vidagent.media.synth import make_video

    root = tmp_path_factory.mktemp("cvr")
    a, b = root / "a.mp4", root / "b.mp4"
    make_video(a, duration=12, fps=25, size=(320, 180), counter=True, audio="tone")
    make_video(b, duration=8, fps=10, size=(320, 180), shots=2, audio="tone")
    return a, b


def _library(root: Path, *videos: Path, stages: tuple[str, ...] = ()) -> tuple[Library, list[str]]:
    settings = load_settings(INDEX_SPECS)
    library = Library(root)
    ids = []
    for v in videos:
        result = index_video(v, library=library, settings=settings, stages=stages)
        assert result.video is not None
        ids.append(result.video.video_id)
    return library, ids


class Visual:
    """The visual model: records each request, answers with what it was shown."""

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    def __call__(self, request: ChatRequest) -> str:
        self.requests.append(request)
        return f"<think>hmm</think>I see {request.image_count()} frames of a counter."


def _act(action: str, **rest: Any) -> str:
    return json.dumps({"action": action, "thought": f"doing {action}", **rest})


SIDE_BY_SIDE = _act(
    "observe",
    params={
        "observation_targets": [
            {"video_index": 1, "start_time": 0, "end_time": 6, "num_frames": 4},
            {"video_index": 2, "start_time": 2, "end_time": 8, "num_frames": 3},
        ],
        "focus_prompt": "Compare the two scenes.",
    },
)


def hub(llm: FakeAdapter, vlm: FakeAdapter) -> Models:
    """The master, the visual model, and a fake Whisper that hears "hello there" in any audio."""
    adapters = {
        "llm": llm,
        "vlm": vlm,
        "embed": FakeAdapter("hash", {"dim": "32"}),
        "asr": FakeAdapter("echo", {"text": "hello there"}),
    }
    return Models.from_adapters(adapters, load_settings(INDEX_SPECS))


def _agent(library: Library, replies: list[str], visual: Visual, **options: Any) -> CVRAgent:
    models = hub(FakeAdapter.scripted(replies), FakeAdapter.function(visual))
    return CVRAgent(library, models, options=options)


def test_observe_two_videos_then_caption_then_answer(
    clips: tuple[Path, Path], tmp_path: Path
) -> None:
    library, ids = _library(tmp_path / "lib", *clips)
    visual = Visual()
    replies = [
        "not json at all",
        SIDE_BY_SIDE,
        _act("get_caption", params={"video_index": 2, "start_time": 1, "end_time": 5}),
        _act("answer", final_answer="B"),
    ]
    agent = _agent(library, replies, visual)
    path = tmp_path / "t.jsonl"
    answer = agent.run(Question("Which video is longer?", tuple(ids), ("a", "b")), Trace(path))
    assert (answer.text, answer.letter, answer.reason, answer.forced) == (
        "B",
        "B",
        "answered",
        False,
    )

    # the visual agent got 7 frames, the published mapping header and a label per frame
    (request,) = visual.requests
    assert request.image_count() == 7
    text = request.messages[0].text
    assert text.startswith(
        "[Frame Mapping Information]\n"
        "Frames 1-4 are from Video 1 (0.0s to 6.0s)\n"
        "Frames 5-7 are from Video 2 (2.0s to 8.0s)\n\n"
        "[Visual Question]\nCompare the two scenes."
    )
    # bin centres of [0, 6] at 25 fps -> frames 18, 56, 93, 131; of [2, 8] at 10 fps -> 30, 50, 70
    assert "Frame 1 (Video 1, t=0.7s)" in text and "Frame 4 (Video 1, t=5.2s)" in text
    assert "Frame 5 (Video 2, t=3.0s)" in text and "Frame 7 (Video 2, t=7.0s)" in text

    trace = Trace.load(path)
    children = trace.of(ChildStarted)
    assert [c.name for c in children] == ["visual_agent", "audio_agent"]
    root = trace.events[0].run
    assert all(c.parent == root for c in children)
    vlm_calls = [e for e in trace.of(ModelCall) if e.run == children[0].child]
    assert len(vlm_calls) == 1 and vlm_calls[0].role == "tool_vlm"
    # the audio agent transcribed the interval on demand (the fake asr hears "hello there")
    source = [
        e for e in trace.of(PhaseChanged) if e.run == children[1].child and e.phase == "source"
    ]
    assert source[0].data["source"] == "asr"
    turns = trace.of(AgentTurn)
    assert [t.tool_calls[0]["name"] for t in turns] == ["observe", "get_caption", "answer"]
    assert len(trace.of(FormatError)) == 1  # the malformed first reply, retried
    obs = [e for e in trace.events if type(e).__name__ == "Observed"]
    assert obs[0].text == "I see 7 frames of a counter." and obs[0].frames == 7
    assert obs[1].text == "Caption for Video 2 (1.0s - 5.0s):\n[1.00s - 5.00s]: hello there"
    # replay draws the children under the master
    lines = list(render(trace.events))
    assert any(line.startswith("⤷ visual_agent") for line in lines)
    assert any(line.startswith("⤷ audio_agent") for line in lines)


def test_clip_times_are_relative_and_indexed_speech_is_reused(
    clips: tuple[Path, Path], tmp_path: Path
) -> None:
    library, ids = _library(tmp_path / "lib", clips[0], stages=("transcribe",))
    visual = Visual()
    replies = [
        _act("get_caption", params={"video_index": 2}),
        _act("observe", params={"observation_targets": [{"video_index": 2, "num_frames": 2}]}),
        _act("answer", final_answer="A"),
    ]
    question = CvrQuestion(
        "Which clip comes first?",
        (ids[0],),
        ("one", "two"),
        cvr_task="NC",
        inputs=(CvrInput(ids[0], spans=((0, 4),)), CvrInput(ids[0], spans=((6, 10),))),
    )
    agent = _agent(library, replies, visual, index="auto")  # the default reads raw videos
    answer = agent.run(question, Trace(tmp_path / "t.jsonl"))
    assert answer.letter == "A"
    trace = Trace.load(tmp_path / "t.jsonl")
    videos = trace.of(PhaseChanged)[0].data["videos"]
    assert [v["indexed_speech"] for v in videos] == [True, True]
    obs = [e for e in trace.events if type(e).__name__ == "Observed"]
    # the indexed transcript (one segment over the whole 12 s) cut to the clip, clip times
    assert obs[0].text == "Caption for Video 2 (0.0s - 4.0s):\n[0.00s - 4.00s]: hello there"
    # the clip's frames: bin centres 1 s and 3 s of the clip, 7 s and 9 s of the source
    text = visual.requests[0].messages[0].text
    assert "Frames 1-2 are from Video 2 (0.0s to 4.0s)" in text
    assert "Frame 1 (Video 2, t=1.0s)" in text and "Frame 2 (Video 2, t=3.0s)" in text
    assert [e[1:] for e in obs[1].evidence] == [[7.0, 9.0]]


def test_frames_past_the_visual_models_limit_are_shared_out(
    clips: tuple[Path, Path], tmp_path: Path
) -> None:
    library, ids = _library(tmp_path / "lib", *clips)
    visual = Visual()
    wide = _act(
        "observe",
        params={
            "observation_targets": [
                {"video_index": 1, "num_frames": 64},
                {"video_index": 2, "num_frames": 64},
            ]
        },
    )
    vlm = FakeAdapter.function(visual)
    vlm.capabilities = vlm.capabilities.__class__(**{**vlm.capabilities.__dict__, "max_images": 10})
    models = hub(FakeAdapter.scripted([wide, _act("answer", final_answer="A")]), vlm)
    agent = CVRAgent(library, models)
    trace = Trace(tmp_path / "t.jsonl")
    agent.run(Question("q", tuple(ids), ("x", "y")), trace)
    assert visual.requests[0].image_count() == 10
    obs = [e for e in Trace.load(tmp_path / "t.jsonl").events if type(e).__name__ == "Observed"]
    assert obs[0].adjusted == [
        "the visual model takes 10 images: frames per target [64, 64] became [5, 5]"
    ]


def test_drone_view_folders_have_the_objects_boxed(tmp_path: Path) -> None:
    import cv2

    views = []
    for view in (1, 2):
        folder = tmp_path / f"0001-02-{view}"
        folder.mkdir()
        for i in range(20):
            cv2.imwrite(str(folder / f"{i:07d}.jpg"), np.full((540, 960, 3), 40, np.uint8))
        views.append(folder)
    boxes = {"obj_1": {i: (96.0, 54.0, 480.0, 270.0) for i in range(20)}}
    visual = Visual()
    replies = [
        _act("get_caption", params={"video_index": 1}),  # refused: MSR has no audio tool
        _act(
            "observe",
            params={
                "observation_targets": [
                    {"video_index": 1, "start_frame": 0, "end_frame": 19, "num_frames": 4},
                    {"video_index": 2, "start_time": 5, "end_time": 9, "num_frames": 2},
                ]
            },
        ),
        _act("answer", final_answer="B"),
    ]
    question = CvrQuestion(
        "Where is obj_1?",
        (),
        ("left", "right"),
        cvr_task="MSR",
        inputs=(CvrInput(folder=str(views[0]), boxes=boxes), CvrInput(folder=str(views[1]))),
    )
    library = Library(tmp_path / "lib")
    answer = _agent(library, replies, visual).run(question, Trace(tmp_path / "t.jsonl"))
    assert answer.letter == "B"
    request = visual.requests[0]
    text = request.messages[0].text
    assert "Frames 0-19 from Video 1 (sampled 4 images)" in text
    assert "Frames 5-9 from Video 2 (sampled 2 images)" in text
    assert "Frame 4 (Video 1, frame 19)" in text
    images = [p for m in request.messages for p in m.images]
    first = cv2.imdecode(np.frombuffer(images[0].data, np.uint8), cv2.IMREAD_COLOR)
    assert max(first.shape[:2]) == 360  # long side 360
    b, g, r = (int(c) for c in first[20, 100])  # on the box's top edge (scaled by 0.375)
    assert g > 150 and r < 100 and b < 100
    plain = cv2.imdecode(np.frombuffer(images[4].data, np.uint8), cv2.IMREAD_COLOR)
    assert int(plain[20, 100][1]) < 80  # view 2 has no box
    started = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    assert started["videos"] == []
    errors = Trace.load(tmp_path / "t.jsonl").of(FormatError)
    assert "observe is the only one" in errors[0].problem


def test_a_constrained_master_gets_its_tasks_schema_and_answer_only_at_the_end(
    clips: tuple[Path, Path], tmp_path: Path
) -> None:
    library, ids = _library(tmp_path / "lib", *clips)
    schemas: list[dict[str, Any]] = []
    replies = iter([SIDE_BY_SIDE, _act("answer", final_answer="A")])

    def master(request: ChatRequest) -> str:
        assert request.response_schema is not None
        schemas.append(request.response_schema)
        return next(replies)

    models = hub(FakeAdapter.function(master), FakeAdapter.function(Visual()))
    agent = CVRAgent(library, models, options={"constrain_json": "on", "max_turns": 2})
    answer = agent.run(Question("q", tuple(ids), ("x", "y", "z")))
    assert (answer.letter, answer.forced, answer.reason) == ("A", True, "max_steps")
    call, answer = schemas[0]["anyOf"]
    assert call["properties"]["action"]["enum"] == ["observe", "get_caption"]
    assert call["required"] == ["action", "thought", "params"]
    assert answer["required"] == ["action", "thought", "final_answer"]  # never an empty answer
    assert schemas[1] == answer  # the forced turn: the answer alone
    last = schemas[1]["properties"]
    assert last["action"]["enum"] == ["answer"] and last["final_answer"]["enum"] == ["A", "B", "C"]


def test_auto_constrains_only_a_local_master_that_takes_a_schema(
    clips: tuple[Path, Path], tmp_path: Path
) -> None:
    """llama.cpp takes a grammar; a local transformers checkpoint does not, and the trace must
    not claim its replies were held to the action JSON."""
    import dataclasses

    library, _ = _library(tmp_path / "lib", *clips)
    grammar = FakeAdapter.scripted([])
    no_grammar = FakeAdapter.scripted([])
    no_grammar.capabilities = dataclasses.replace(
        no_grammar.capabilities, supports_json_schema=False
    )
    remote = FakeAdapter.scripted([])
    remote.capabilities = dataclasses.replace(remote.capabilities, local=False)
    constrained = [
        CVRAgent(library, hub(llm, FakeAdapter.function(Visual()))).describe()["constrained"]
        for llm in (grammar, no_grammar, remote)
    ]
    assert constrained == [True, False, False]


def test_ask_over_several_files_from_the_command_line(
    clips: tuple[Path, Path], tmp_path: Path
) -> None:
    from clirun import vidagent

    env = {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:scripted?replies=" + json.dumps(
        [SIDE_BY_SIDE, _act("answer", final_answer="B")]
    )
    env["VIDAGENT_VLM"] = "perception:describer?answer=0"
    trace = tmp_path / "t.jsonl"
    args = [
        "ask",
        str(clips[0]),
        str(clips[1]),
        "-s",
        "cvr",
        "Which one has a cut?",
        "-o",
        "a",
        "-o",
        "b",
    ]
    out = vidagent(*args, "--trace", str(trace), home=tmp_path / "home", env=env)
    assert out.returncode == 0, out.stderr
    replayed = vidagent("replay", str(trace), home=tmp_path / "home").stdout
    assert "⤷ visual_agent" in replayed and "answer: (B) b" in replayed
    bad = vidagent(*args, "--set", "task=XYZ", home=tmp_path / "home", env=env)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "cvr option task: 'XYZ' is not one of BU, NC" in bad.stderr


def test_a_spent_budget_forces_the_answer_on_the_conversation_so_far(
    clips: tuple[Path, Path], tmp_path: Path
) -> None:
    from vidagent.budget import Budget

    library, ids = _library(tmp_path / "lib", *clips)
    seen: list[ChatRequest] = []
    replies = iter([SIDE_BY_SIDE, _act("observe", params={}), _act("answer", final_answer="B")])

    def master(request: ChatRequest) -> str:
        seen.append(request)
        return next(replies)

    models = hub(FakeAdapter.function(master), FakeAdapter.function(Visual()))
    agent = CVRAgent(library, models, budget=Budget(frames=5))
    answer = agent.run(Question("q", tuple(ids), ("x", "y")))
    # 7 frames spent the budget of 5: one more turn, answer only, on the history so far
    assert (answer.letter, answer.forced, answer.reason) == ("B", True, "budget:frames")
    last = seen[-1].messages
    # a non-answer is refused, and the retry says why after the forced turn
    forced, retried = last[-2].text, last[-1].text
    assert "The budget is spent: this is your last turn." in forced
    assert forced.startswith("[TOOL OBS] ") and len(seen) == 3
    assert retried.startswith("Please ensure your reply is valid JSON")


@pytest.mark.parametrize("index", ["auto", "off", None])
def test_the_index_is_read_only_when_allowed(
    clips: tuple[Path, Path], tmp_path: Path, index: str | None
) -> None:
    """By default (``None``) the master reads the raw video, as in the paper, even where the
    Library has a transcript and a summary; ``auto`` reads them."""
    from vidagent.agents.cvr.agent import INDEX_STAGES

    library, ids = _library(tmp_path / "lib", clips[0], stages=INDEX_STAGES)
    assert library.global_summary(ids[0])
    users: list[str] = []
    replies = iter(
        [_act("get_caption", params={"video_index": 1}), _act("answer", final_answer="hello there")]
    )

    def master(request: ChatRequest) -> str:
        users.append(request.messages[1].text)
        return next(replies)

    agent = CVRAgent(
        library,
        hub(FakeAdapter.function(master), FakeAdapter.function(Visual())),
        options={"index": index} if index else None,
    )
    answer = agent.run(Question("What is said?", (ids[0],)), Trace(tmp_path / "t.jsonl"))
    assert answer.text == "hello there"
    shown = json.loads(users[0])["videos"][0]
    trace = Trace.load(tmp_path / "t.jsonl")
    video = trace.of(PhaseChanged)[0].data["videos"][0]
    source = [e.data["source"] for e in trace.of(PhaseChanged) if e.phase == "source"]
    if index == "auto":
        assert shown["summary"] == library.global_summary(ids[0])
        assert (video["summary_shown"], video["indexed_speech"], source) == (True, True, ["index"])
    else:
        assert "summary" not in shown
        assert (video["summary_shown"], video["indexed_speech"], source) == (False, False, ["asr"])


def test_on_demand_speech_asks_whisper_for_the_papers_decoding() -> None:
    """The audio agent's request carries beam 5, temperature 0, thresholds -1 / 0.6, no
    conditioning and no VAD; faster-whisper receives exactly those, audio cut to the window."""
    from vidagent.models.base import TranscribeRequest
    from vidagent.models.whisper import FasterWhisperAdapter
    from vidagent.tools.cvr import audio as cvr_audio

    asr = FakeAdapter("echo", {"text": "hello there"})
    models = Models.from_adapters({"asr": asr}, load_settings(INDEX_SPECS))
    audio = np.zeros(16000 * 10, np.float32)
    speech = cvr_audio.transcribe_window(models.client("asr"), audio, 2.0, 5.0)
    assert [(s.t0, s.t1, s.text) for s in speech] == [(2.0, 5.0, "hello there")]
    (request,) = asr.requests
    assert len(request.audio) == 3 * 16000 and request.decoding == cvr_audio.PAPER_DECODING

    whisper = FasterWhisperAdapter("tiny.en")
    assert whisper.decoding(request) == {
        "beam_size": 5,
        "temperature": 0.0,
        "log_prob_threshold": -1.0,
        "no_speech_threshold": 0.6,
        "condition_on_previous_text": False,
        "vad_filter": False,
    }
    # an ingest request (no settings) keeps the adapter's options and faster-whisper's defaults
    plain = FasterWhisperAdapter("tiny.en", {"beam_size": "2", "vad": "0"})
    assert plain.decoding(TranscribeRequest(audio)) == {"beam_size": 2, "vad_filter": False}


@pytest.mark.parametrize("cut", [None, 2000])
def test_observations_reach_the_master_whole_unless_cut_is_asked(
    clips: tuple[Path, Path], tmp_path: Path, cut: int | None
) -> None:
    """A 6,000-character visual report reaches the master to its middle by default (the paper
    and the released inference code cut nothing); ``tool_response_chars`` cuts it as the
    released RL simulator does."""
    library, ids = _library(tmp_path / "lib", *clips)
    report = "BEGIN " + "the cook stirs; " * 370 + "MIDDLE " + "she plates it; " * 370 + "END"
    seen: list[ChatRequest] = []
    replies = iter([SIDE_BY_SIDE, _act("answer", final_answer="A")])

    def master(request: ChatRequest) -> str:
        seen.append(request)
        return next(replies)

    models = hub(FakeAdapter.function(master), FakeAdapter.function(lambda _r: report))
    options = {"tool_response_chars": cut} if cut else None
    agent = CVRAgent(library, models, options=options)
    assert agent.run(Question("q", tuple(ids), ("x", "y"))).letter == "A"
    result = json.loads(seen[1].messages[-1].text.removeprefix("[TOOL OBS] "))["result"]
    if cut is None:
        assert result == report and "MIDDLE" in result
    else:
        assert result == report[:1000] + "...(truncated)..." + report[-1000:]
        assert "MIDDLE" not in result and result.endswith("END")


def test_the_forced_turn_asks_again_saying_why_and_no_answer_is_not_a_model_failure(
    clips: tuple[Path, Path], tmp_path: Path
) -> None:
    from vidagent.budget import Budget
    from vidagent.trace import FormatError

    library, ids = _library(tmp_path / "lib", *clips)
    seen: list[ChatRequest] = []
    replies = iter([SIDE_BY_SIDE, "no JSON here", SIDE_BY_SIDE, "still none"])

    def master(request: ChatRequest) -> str:
        seen.append(request)
        return next(replies)

    models = hub(FakeAdapter.function(master), FakeAdapter.function(Visual()))
    answer = CVRAgent(library, models, budget=Budget(frames=5)).run(
        Question("q", tuple(ids), ("x", "y"))
    )
    assert answer.trace is not None
    errors = answer.trace.of(FormatError)
    assert [e.attempt for e in errors] == [1, 2, 3]  # each retry numbered (all 1 before)
    # each retry says why the last reply was refused: three different requests, not the same
    # one again (which the response cache answered with the same reply)
    forced = [r.messages for r in seen[1:]]
    assert "holds no JSON object" in forced[1][-1].text
    assert "the turns are used up" in forced[2][-1].text
    # the model answered, naming nothing: an answer (exit 0), not a failed endpoint (exit 3)
    assert answer.forced and answer.text == "" and not answer.unanswered
