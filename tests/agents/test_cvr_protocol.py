"""AgentCVR's master protocol: prompts verbatim, action parsing per task, and the turn loop."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest

from vidagent.agents.cvr.protocol import (
    CVR_FORMAT_RETRIES,
    CVR_MAX_FRAMES,
    CVR_MAX_TURNS,
    FORMAT_REMINDER,
    OBS_PREFIX,
    TASKS,
    TOOL_RESPONSE_CHARS,
    CvrFormatError,
    CvrToolError,
    CvrVideo,
    Episode,
    ObserveTarget,
    master_prompt,
    parse_master_action,
    run_master,
    truncate_middle,
    user_message,
)
from vidagent.exceptions import UserError

TWO = [CvrVideo(1, 120.0), CvrVideo(2, 90.5)]
FOUR = [CvrVideo(i, 60.0) for i in range(1, 5)]
UAV = [CvrVideo(1, None, total_frames=300, has_audio=False), CvrVideo(2, None, 280, False)]
OPTIONS = ["first", "second", "third", "fourth"]


@pytest.mark.parametrize("task", TASKS)
def test_each_task_has_its_master_prompt(task: str) -> None:
    # the text itself is pinned, and compared with Appendix H.3, in tests/prompts
    assert master_prompt(task) == master_prompt(task.lower()) != master_prompt(None)


def test_generic_prompt_is_ours_and_unknown_task_is_refused() -> None:
    generic = master_prompt(None)
    assert "observe" in generic and "get_caption" in generic and "128" in generic
    assert generic != master_prompt("NC")
    with pytest.raises(UserError, match="no master prompt for task 'XYZ'"):
        master_prompt("XYZ")


def test_user_message_is_the_released_json() -> None:
    doc = json.loads(user_message("Which one?", TWO, ["a", "B. b"]))
    assert doc == {
        "query": "Which one?",
        "videos": [
            {"video_index": 1, "duration_seconds": 120.0},
            {"video_index": 2, "duration_seconds": 90.5},
        ],
        "possible_answers": ["A. a", "B. b"],
    }
    uav = json.loads(user_message("How many?", UAV, None))
    assert uav["videos"][0] == {"video_index": 1, "total_frames": 300, "has_audio": False}
    assert "possible_answers" not in uav


def _act(action: str, **rest: object) -> str:
    return json.dumps({"action": action, "thought": "t", **rest})


def test_observe_targets_parse_with_defaults_and_clamping() -> None:
    text = _act(
        "observe",
        params={
            "observation_targets": [
                {"video_index": 2, "start_time": 45, "end_time": 600, "num_frames": 16},
                {"video_index": 1, "start_time": 5},
            ],
            "focus_prompt": "  compare the pans ",
        },
    )
    act = parse_master_action(text, task="NC", videos=TWO)
    assert act.kind == "observe" and act.focus_prompt == "compare the pans"
    # an end past the video is clamped to it; a missing end is the video's end, 32 frames
    assert act.targets == (ObserveTarget(2, 45.0, 90.5, 16), ObserveTarget(1, 5.0, 120.0, 32))


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({}, "observation_targets"),
        ({"observation_targets": [{"video_index": 3}]}, "out of range: videos are 1 to 2"),
        ({"observation_targets": [{"video_index": 1, "start_time": 50, "end_time": 50}]}, "before"),
        ({"observation_targets": [{"video_index": 1, "start_time": 130}]}, "before"),
        ({"observation_targets": [{"video_index": 1, "num_frames": 0}]}, "positive whole"),
        ({"observation_targets": [{"video_index": 1, "start_time": "soon"}]}, "must be a number"),
        (
            {
                "observation_targets": [
                    {"video_index": i % 2 + 1, "num_frames": 64} for i in range(3)
                ]
            },
            f"sum to 192; a single observe may ask for at most {CVR_MAX_FRAMES}",
        ),
    ],
)
def test_bad_observe_is_refused_with_a_reason(params: dict[str, object], reason: str) -> None:
    with pytest.raises(CvrFormatError, match=re.escape(reason)):
        parse_master_action(_act("observe", params=params), task="CC", videos=TWO)


def test_128_frames_exactly_is_allowed() -> None:
    targets = [{"video_index": v, "num_frames": 64} for v in (1, 2)]
    act = parse_master_action(
        _act("observe", params={"observation_targets": targets}), task=None, videos=TWO
    )
    assert sum(t.num_frames for t in act.targets) == 128


def test_uav_targets_are_frames_and_take_start_frame() -> None:
    text = _act(
        "observe",
        params={"observation_targets": [{"video_index": 2, "start_frame": 10, "end_frame": 500}]},
    )
    act = parse_master_action(text, task="MOC", videos=UAV)
    assert act.targets == (ObserveTarget(2, 10.0, 280.0, 16),)
    seconds_named = _act(
        "observe",
        params={"observation_targets": [{"video_index": 1, "start_time": 0, "end_time": 5}]},
    )
    assert parse_master_action(seconds_named, task="MSR", videos=UAV).targets[0].end == 5.0


def test_get_caption_whole_or_interval_and_refused_where_observe_is_the_only_tool() -> None:
    whole = parse_master_action(
        _act("get_caption", params={"video_index": 2}), task="NC", videos=TWO
    )
    assert (whole.video_index, whole.start, whole.end) == (2, None, None)
    part = parse_master_action(
        _act("get_caption", params={"video_index": "1", "start_time": 3, "end_time": 9.5}),
        task="PI",
        videos=TWO,
    )
    assert (part.video_index, part.start, part.end) == (1, 3.0, 9.5)
    for task in ("BU", "PEA", "MSR", "MOC"):
        with pytest.raises(CvrFormatError, match="observe is the only one"):
            parse_master_action(
                _act("get_caption", params={"video_index": 1}), task=task, videos=TWO
            )


@pytest.mark.parametrize(
    ("task", "videos", "options", "given", "expected"),
    [
        ("NC", FOUR, OPTIONS, "B", "B"),
        ("CC", FOUR, OPTIONS, "(C)", "C"),
        ("PEA", FOUR[:3], OPTIONS, "C. Video 3 skips a screw", "C"),
        ("PI", TWO, [*OPTIONS, "e", "f"], "Option F", "F"),
        ("MSR", UAV, OPTIONS, ["D"], "D"),
        ("MOC", UAV, OPTIONS, "a", "A"),
        ("BU", FOUR, OPTIONS, ["C", "A"], "AC"),
        ("BU", FOUR, OPTIONS, "CA", "AC"),
        ("BU", FOUR, OPTIONS, "B, D", "BD"),
        ("PSS", FOUR, None, "3 -> 1 -> 4 -> 2", "3->1->4->2"),
        ("PSS", FOUR[:3], None, [2, 3, 1], "2->3->1"),
        ("FSA", TWO, None, [53.2, 57.8], "[53.2, 57.8]"),
        ("FSA", TWO, None, "57.8, 53.2", "[53.2, 57.8]"),
        ("CCQA", TWO, None, " Video 1 fries; Video 2 bakes. ", "Video 1 fries; Video 2 bakes."),
        (None, TWO, ["x", "y"], "B", "B"),
        (None, TWO, None, "the red car", "the red car"),
    ],
)
def test_answers_are_normalised_to_the_tasks_format(
    task: str | None,
    videos: Sequence[CvrVideo],
    options: list[str] | None,
    given: object,
    expected: str,
) -> None:
    act = parse_master_action(
        _act("answer", final_answer=given), task=task, videos=videos, options=options
    )
    assert (act.kind, act.final_answer) == ("answer", expected)


def test_final_answer_inside_params_is_read_too() -> None:
    text = _act("answer", params={"final_answer": "D"})
    assert parse_master_action(text, task="NC", videos=FOUR, options=OPTIONS).final_answer == "D"


@pytest.mark.parametrize(
    ("task", "videos", "options", "given", "reason"),
    [
        ("NC", FOUR, OPTIONS, "Video 2", "one option letter"),
        ("NC", FOUR, OPTIONS, "E", "not an option (A to D)"),
        ("CC", FOUR, OPTIONS, "AB", "one option letter"),
        ("BU", FOUR, OPTIONS, "ABCD", "not all of them"),
        ("BU", FOUR, OPTIONS, "", "option letters"),
        ("PSS", FOUR, None, "Video 3 then Video 1", "numbers and arrows"),
        ("PSS", FOUR, None, "1->2->2->4", "each of the clips 1 to 4 once"),
        ("FSA", TWO, None, "around a minute", "[start, end]"),
        ("FSA", TWO, None, [12, 12], "start < end"),
        ("CCQA", TWO, None, "B", "not a single letter"),
        ("NC", FOUR, OPTIONS, None, "needs a final_answer"),
    ],
)
def test_answers_out_of_format_are_refused(
    task: str,
    videos: Sequence[CvrVideo],
    options: list[str] | None,
    given: object,
    reason: str,
) -> None:
    with pytest.raises(CvrFormatError, match=re.escape(reason)):
        parse_master_action(
            _act("answer", final_answer=given), task=task, videos=videos, options=options
        )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I think the answer is B", "no JSON object"),
        ('{"action": "answer", "final_answer": "B"', "no JSON object"),
        (
            '{"action": "answer" "final_answer": "B"}',
            "not valid JSON (Expecting ',' delimiter, character 20)",
        ),
        (_act("answer", final_answer="B") + _act("answer", final_answer="C"), "2 JSON objects"),
        ('{"thought": "x"}', 'no "action" key'),
        (_act("zoom"), "unknown action 'zoom'"),
        ('["answer"]', "one JSON object"),
    ],
)
def test_malformed_replies_are_refused(text: str, reason: str) -> None:
    with pytest.raises(CvrFormatError, match=re.escape(reason)):
        parse_master_action(text, task="NC", videos=FOUR, options=OPTIONS)


def test_think_fences_and_surrounding_text_are_tolerated() -> None:
    reply = (
        "<think>maybe {not json} here</think>Sure:\n```json\n"
        + _act("answer", final_answer="C")
        + "\n```"
    )
    assert parse_master_action(reply, task="NC", videos=FOUR, options=OPTIONS).final_answer == "C"
    braces_in_strings = 'ok {"action": "answer", "thought": "a } b {", "final_answer": "A"} done'
    assert (
        parse_master_action(
            braces_in_strings, task=None, videos=TWO, options=["x", "y"]
        ).final_answer
        == "A"
    )


def test_truncation_is_the_released_simulators_middle_cut() -> None:
    """verl's agent loop keeps the first and last ``limit // 2`` characters around its mark."""
    text = "H" * 1500 + "M" * 1000 + "T" * 1500
    cut = truncate_middle(text)
    assert cut == "H" * 1000 + "...(truncated)..." + "T" * 1000
    assert TOOL_RESPONSE_CHARS == 2000 and truncate_middle("short") == "short"


class TextEnv:
    """A scripted environment: records every call, answers from fixed text."""

    def __init__(self, videos: Sequence[CvrVideo], *, long: bool = False) -> None:
        self.videos = list(videos)
        self.calls: list[tuple[str, object]] = []
        self.long = long

    def observe(self, targets: Sequence[ObserveTarget], focus_prompt: str) -> str:
        self.calls.append(("observe", (tuple(targets), focus_prompt)))
        if any(t.video_index == 2 and t.start > 80 for t in targets):
            raise CvrToolError("could not decode Video 2 at 85s")
        text = "; ".join(f"Video {t.video_index}: a pan on a stove" for t in targets)
        return text + ("x" * 5000 if self.long else "")

    def get_caption(self, video_index: int, start: float | None, end: float | None) -> str:
        self.calls.append(("get_caption", (video_index, start, end)))
        return f"Caption for Video {video_index}:\n[1.00s - 2.00s]: add the salt"


class Script:
    """The master as a list of replies; records the messages each call saw."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.seen: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.seen.append([dict(m) for m in messages])
        return self.replies.pop(0)


def _observe(*targets: tuple[int, float, float, int], focus: str = "look") -> str:
    return _act(
        "observe",
        params={
            "observation_targets": [
                {"video_index": v, "start_time": s, "end_time": e, "num_frames": k}
                for v, s, e, k in targets
            ],
            "focus_prompt": focus,
        },
    )


def test_observe_two_videos_then_caption_then_answer() -> None:
    chat = Script(
        [
            "<think>compare both first</think>" + _observe((1, 0, 60, 16), (2, 0, 60, 16)),
            _act("get_caption", params={"video_index": 2}),
            _act("answer", final_answer="B"),
        ]
    )
    env = TextEnv(TWO)
    seen_turns: list[int] = []
    ep = run_master(
        chat,
        env,
        query="Which adds salt?",
        options=["one", "two"],
        task="NC",
        on_turn=lambda t: seen_turns.append(t.turn),
    )
    assert (ep.final_answer, ep.reason, ep.forced, seen_turns) == (
        "B",
        "answered",
        False,
        [1, 2, 3],
    )
    assert env.calls[0] == (
        "observe",
        ((ObserveTarget(1, 0.0, 60.0, 16), ObserveTarget(2, 0.0, 60.0, 16)), "look"),
    )
    assert env.calls[1] == ("get_caption", (2, None, None))
    roles = [m["role"] for m in ep.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert ep.messages[0]["content"] == master_prompt("NC")
    assert "<think>" not in ep.messages[2]["content"]  # stripped before it is stored
    obs = ep.messages[3]["content"]
    assert obs.startswith(OBS_PREFIX)
    body = json.loads(obs[len(OBS_PREFIX) :])
    assert body == {
        "call_id": "observe_1",
        "tool_name": "active_perception",
        "result": "Video 1: a pan on a stove; Video 2: a pan on a stove",
    }
    # each call saw the history so far, nothing more
    assert chat.seen[2] == ep.messages[:-1]


def test_malformed_reply_is_retried_with_the_reminder_and_not_kept() -> None:
    chat = Script(
        ["Let me look at video 1.", '{"action": "answer", ', _act("answer", final_answer="A")]
    )
    ep = run_master(chat, TextEnv(TWO), query="q", options=["a", "b"], task=None)
    assert ep.final_answer == "A" and len(ep.turns) == 1
    turn = ep.turns[0]
    assert len(turn.attempts) == 3 and turn.errors == [
        "the reply holds no JSON object",
        "the reply holds no JSON object",
    ]
    retry = chat.seen[1][-1]
    assert retry["role"] == "user" and retry["content"].startswith(FORMAT_REMINDER)
    assert "no JSON object" in retry["content"]
    assert [m["role"] for m in ep.messages] == ["system", "user", "assistant"]


def test_three_format_failures_end_without_an_answer() -> None:
    chat = Script(["nope"] * CVR_FORMAT_RETRIES)
    ep = run_master(chat, TextEnv(TWO), query="q", options=None, task="FSA")
    assert (ep.final_answer, ep.reason, ep.forced) == (None, "format_failure", False)


def test_frames_over_128_are_retried_then_served() -> None:
    chat = Script(
        [
            _observe((1, 0, 60, 64), (2, 0, 60, 64), (1, 60, 120, 8)),
            _observe((1, 0, 60, 64), (2, 0, 60, 64)),
            _act("answer", final_answer="A"),
        ]
    )
    env = TextEnv(TWO)
    ep = run_master(chat, env, query="q", options=["a", "b"], task="CC")
    assert "at most 128" in ep.turns[0].errors[0]
    assert len(env.calls) == 1 and sum(t.num_frames for t in env.calls[0][1][0]) == 128  # type: ignore[index]


def _errored_then_long(response_chars: int | None = None) -> Episode:
    chat = Script(
        [_observe((2, 85, 90, 8)), _observe((1, 0, 10, 8)), _act("answer", final_answer="B")]
    )
    env = TextEnv(TWO, long=True)
    return run_master(
        chat, env, query="q", options=["a", "b"], task="PI", response_chars=response_chars
    )


def test_tool_errors_go_back_as_errors_and_long_results_whole() -> None:
    """The paper cuts no observation, nor does the released inference code: the master reads a
    5,000-character result to its middle."""
    ep = _errored_then_long()
    err = json.loads(ep.messages[3]["content"][len(OBS_PREFIX) :])
    assert err == {
        "call_id": "observe_1",
        "tool_name": "active_perception",
        "error": "could not decode Video 2 at 85s",
    }
    ok = json.loads(ep.messages[5]["content"][len(OBS_PREFIX) :])
    assert ok["result"] == ep.turns[1].observation and len(ok["result"]) > 5000


def test_response_chars_cuts_results_as_the_released_simulator_does() -> None:
    ep = _errored_then_long(TOOL_RESPONSE_CHARS)
    ok = json.loads(ep.messages[5]["content"][len(OBS_PREFIX) :])
    whole = ep.turns[1].observation or ""
    assert ok["result"] == whole[:1000] + "...(truncated)..." + whole[-1000:]
    err = json.loads(ep.messages[3]["content"][len(OBS_PREFIX) :])
    assert err["error"] == "could not decode Video 2 at 85s"  # errors are never cut
    with pytest.raises(UserError, match="response_chars"):
        _errored_then_long(1)


def test_answer_is_forced_on_turn_20() -> None:
    looping = [_observe((1, 0, 10, 4))] * (CVR_MAX_TURNS - 1)
    chat = Script([*looping, _observe((1, 0, 10, 4)), _act("answer", final_answer="C")])
    ep = run_master(chat, TextEnv(FOUR), query="q", options=OPTIONS, task="NC")
    assert (ep.final_answer, ep.reason, ep.forced) == ("C", "forced_answer", True)
    assert len(ep.turns) == CVR_MAX_TURNS
    last = ep.turns[-1]
    assert last.forced and last.errors == [
        "the turns are used up: reply with the answer action now"
    ]
    # the note came with the observation of turn 19, and counts turns from the tolerance zone on
    assert "this is your last turn" in ep.messages[-2]["content"]
    assert "Turn 11 of 20" in chat.seen[10][-1]["content"]
    assert "Turn" not in chat.seen[9][-1]["content"]


def test_no_answer_on_the_forced_turn_ends_empty() -> None:
    chat = Script([_observe((1, 0, 10, 4))] * (2 + CVR_FORMAT_RETRIES))
    ep = run_master(chat, TextEnv(TWO), query="q", options=None, task=None, max_turns=3)
    assert (ep.final_answer, ep.reason, ep.forced, len(ep.turns)) == (None, "no_answer", True, 3)


def test_on_action_sees_each_action_before_it_is_served() -> None:
    chat = Script([_observe((1, 0, 10, 4)), _act("answer", final_answer="A")])
    env = TextEnv(TWO)
    log: list[str] = []
    run_master(
        chat,
        env,
        query="q",
        options=["a", "b"],
        task=None,
        on_action=lambda t: log.append(f"action {t.turn} after {len(env.calls)} calls"),
        on_turn=lambda t: log.append(f"turn {t.turn} after {len(env.calls)} calls"),
    )
    assert log == [
        "action 1 after 0 calls",
        "turn 1 after 1 calls",
        "action 2 after 1 calls",
        "turn 2 after 1 calls",
    ]


def test_whole_observations_are_fitted_to_a_small_context_oldest_first() -> None:
    """Observations go to the master whole; when the history outgrows a model's context, the
    client elides the oldest ``[TOOL OBS]`` messages first (the master's own actions stay), as
    it elides observations for every strategy."""
    from vidagent.models.base import Message
    from vidagent.models.context import ELIDED, estimate_tokens, fit_messages

    chat = Script(
        [_observe((1, 0, 10, 8)), _observe((2, 0, 10, 8)), _act("answer", final_answer="A")]
    )
    ep = run_master(chat, TextEnv(TWO, long=True), query="q", options=["a", "b"], task="NC")
    messages = [Message(m["role"], m["content"]) for m in ep.messages[:-1]]  # up to the answer
    limit = estimate_tokens(messages) - len(messages[3].text) // 3 + 50  # one observation too many
    fitted, note = fit_messages(messages, limit)
    assert [m.role for m in fitted] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert fitted[3].text == f"[TOOL OBS] {ELIDED}" and fitted[2].text == messages[2].text
    assert fitted[5].text == messages[5].text and len(fitted[5].text) > 5000  # the latest, whole
    assert note == f"1 earlier message elided to fit {limit} tokens"
