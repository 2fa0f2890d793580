"""The text simulator as a CvrEnvironment, and the rewards of hand-written master trajectories."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vidagent.agents.cvr.protocol import ObserveTarget, run_master
from vidagent.prompts import load_prompt
from vidagent.train.rewards import answer_reward, episode_reward
from vidagent.train.rollout import group_advantages
from vidagent.train.scripts import validate
from vidagent.train.simulator import NO_EVIDENCE, ScriptEnvironment


def script(task: str = "PI", answer: str = "B", **extra: Any) -> dict[str, Any]:
    v1 = {
        "duration": 30.0,
        "timeline": [
            {"start": 0, "end": 10, "visual": "a man opens a red door", "caption": "Hello there."},
            {"start": 10, "end": 18, "visual": "he sits down", "caption": ""},
            {"start": 25, "end": 30, "visual": "he hides a brass key", "caption": "Nobody saw."},
        ],
    }
    v2 = {
        "duration": 20.0,
        "timeline": [{"start": 2, "end": 9, "visual": "a woman drops a brass key", "caption": ""}],
    }
    raw = {
        "question": "Which video shows the key hidden?",
        "answer": answer,
        "options": ["A. Video 1", "B. Video 2"],
        "videos": [v1, v2],
        **extra,
    }
    return validate(raw, task)


def test_observe_returns_the_slice_of_each_target_or_no_evidence() -> None:
    env = ScriptEnvironment(script())
    assert [v.duration_seconds for v in env.videos] == [30.0, 20.0]
    one = env.observe([ObserveTarget(1, 5, 12, 8)], "what happens?")
    assert one == (
        "Video 1 (5.0s to 12.0s):\n[0.0s - 10.0s]: a man opens a red door\n"
        "[10.0s - 18.0s]: he sits down"
    )
    assert env.observe([ObserveTarget(1, 18.5, 24, 8)], "anything?") == NO_EVIDENCE
    both = env.observe([ObserveTarget(1, 20, 30, 8), ObserveTarget(2, 10, 20, 8)], "keys?")
    assert both == (
        "Video 1 (20.0s to 30.0s):\n[25.0s - 30.0s]: he hides a brass key\n\n"
        f"Video 2 (10.0s to 20.0s):\n{NO_EVIDENCE}"
    )


def test_captions_come_straight_from_the_script() -> None:
    env = ScriptEnvironment(script())
    assert env.get_caption(1, None, None) == (
        "Caption for Video 1 (0.0s - 30.0s):\n[0.00s - 10.00s]: Hello there.\n"
        "[25.00s - 30.00s]: Nobody saw."
    )
    assert env.get_caption(2, 0, 20) == (
        "No speech detected in Video 2 between 0.0s and 20.0s (or generation failed)."
    )


def test_the_llm_visual_agent_gets_the_h2_prompt_and_only_the_slice() -> None:
    asked: list[list[dict[str, str]]] = []

    def visual(messages: list[dict[str, str]]) -> str:
        asked.append(messages)
        return "A man is sitting down."

    env = ScriptEnvironment(script(), visual)
    assert env.observe([ObserveTarget(1, 12, 16, 4)], "Is he standing?") == "A man is sitting down."
    assert env.observe([ObserveTarget(2, 12, 16, 4)], "Anyone?") == NO_EVIDENCE  # no call
    assert len(asked) == 1
    system, user = asked[0]
    assert system["content"] == load_prompt("cvr_simulator").strip()
    assert "he sits down" in user["content"] and "red door" not in user["content"]
    assert "Frames 1-4 are from Video 1 (12.0s to 16.0s)" in user["content"]
    assert user["content"].endswith("[Query]\nIs he standing?")


def act(action: str, **kw: Any) -> str:
    if action == "answer":
        return json.dumps({"action": "answer", "thought": "done", "final_answer": kw["final"]})
    return json.dumps({"action": action, "thought": "look", "params": kw})


OBSERVE = act(
    "observe",
    observation_targets=[{"video_index": 1, "start_time": 20, "end_time": 30, "num_frames": 8}],
    focus_prompt="Who hides the key?",
)


def run(replies: list[str], s: dict[str, Any] | None = None, max_turns: int = 20) -> Any:
    s = s or script()
    chat = iter(replies)
    env = ScriptEnvironment(s)
    episode = run_master(
        lambda _m: next(chat),
        env,
        query=s["question"],
        options=s["options"] or None,
        task=s["task"],
        max_turns=max_turns,
    )
    return episode, episode_reward(episode, s)


def test_a_clean_correct_trajectory_earns_1_1_and_sees_the_simulated_observation() -> None:
    episode, reward = run([OBSERVE, act("get_caption", video_index=1), act("answer", final="B")])
    assert (reward.answer, reward.format, reward.total) == (1.0, 0.1, 1.1)
    seen = [m["content"] for m in episode.messages if m["content"].startswith("[TOOL OBS]")]
    assert "he hides a brass key" in seen[0] and "Nobody saw." in seen[1]


@pytest.mark.parametrize(
    ("replies", "expected"),
    [
        ([OBSERVE, act("answer", final="A")], (0.0, 0.1)),  # well formed, wrong
        (["I think B", act("answer", final="B")], (1.0, 0.0)),  # retried turn: no R_fmt
        (["nope", "nope", "nope"], (0.0, 0.0)),  # three failures: no answer
        (
            [
                act(
                    "observe",
                    observation_targets=[{"video_index": 3, "start_time": 0, "end_time": 5}],
                    focus_prompt="x",
                ),
                act("answer", final="B"),
            ],
            (1.0, 0.0),
        ),
        ([act("answer", final="b.")], (1.0, 0.1)),  # normalised by the protocol
    ],
)
def test_rewards_of_hand_written_trajectories(replies: list[str], expected: Any) -> None:
    _, reward = run(replies)
    assert (reward.answer, reward.format) == expected


def test_the_tolerance_zone_neither_penalises_late_answers_nor_credits_missing_ones() -> None:
    late, reward = run([OBSERVE] * 14 + [act("answer", final="B")])
    assert late.reason == "answered" and len(late.turns) == 15 and reward.total == 1.1
    assert "answer as soon as the evidence suffices" in late.messages[-2]["content"]
    forced, reward = run([OBSERVE, OBSERVE, act("answer", final="B")], max_turns=3)
    assert forced.reason == "forced_answer" and reward.total == 1.1
    stuck, reward = run([OBSERVE, OBSERVE, OBSERVE, OBSERVE, OBSERVE], max_turns=3)
    assert stuck.final_answer is None and reward.total == 0.0


def test_answer_formats_other_than_a_letter() -> None:
    assert answer_reward("AC", "AC", "BU") == 1.0 and answer_reward("A", "AC", "BU") == 0.0
    assert answer_reward("3->1->2", "3->1->2", "PSS") == 1.0
    assert answer_reward("1->3->2", "3->1->2", "PSS") == 0.0
    assert answer_reward("[4.0, 10.0]", "[5.0, 10.0]", "FSA") == 1.0  # IoU 0.83
    assert answer_reward("[0.0, 4.0]", "[2.0, 10.0]", "FSA") == 0.0  # IoU 0.2
    assert answer_reward(None, "A", "NC") == 0.0


def test_group_advantages_are_zero_for_identical_rewards_and_standardised_otherwise() -> None:
    assert group_advantages([0.1, 0.1, 0.1, 0.1]) == [0.0] * 4
    adv = group_advantages([1.1, 0.1, 0.1, 0.0])
    assert adv[0] > 0 > adv[3] and adv[1] == adv[2] and sum(adv) == pytest.approx(0.0)
    assert adv[0] == pytest.approx((1.1 - 0.325) / 0.5188, rel=1e-3)


def test_the_generic_prompt_option_trains_the_prompt_ask_uses_for_untasked_questions() -> None:
    from vidagent.agents.cvr.protocol import master_prompt
    from vidagent.train.rollout import play

    systems: list[str] = []

    def chat(messages: list[dict[str, str]]) -> str:
        systems.append(messages[0]["content"])
        return act("answer", final="B")

    s = script()
    episode, _, calls = play(s, chat, max_turns=2, generic=True)
    assert calls == 0  # it answered at once: the simulator was never asked
    assert episode is not None and episode_reward(episode, s).total == 1.1
    play(s, chat, max_turns=2)
    assert systems == [master_prompt(None), master_prompt("PI")]


def test_simulated_observations_are_cut_as_the_released_rl_loop_cuts_them() -> None:
    """In training the master reads a long caption's first and last 1,000 characters (verl's
    ``max_tool_response_length: 2000``, middle); ``simulator.response_chars = 0`` sends it whole."""
    from vidagent.train.config import SimulatorSection
    from vidagent.train.rollout import play

    long = "Hello there. " + "and then " * 400 + "Nobody saw."
    s = script()
    s["videos"][0]["timeline"][0]["caption"] = long
    seen: list[list[dict[str, str]]] = []

    def chat(messages: list[dict[str, str]]) -> str:
        seen.append(messages)
        return act("get_caption", video_index=1) if len(seen) % 2 else act("answer", final="B")

    play(s, chat, max_turns=3)
    cut = json.loads(seen[1][-1]["content"].removeprefix("[TOOL OBS] "))["result"]
    assert len(cut) == 2000 + len("...(truncated)...") and "...(truncated)..." in cut
    assert cut.startswith("Caption for Video 1") and cut.endswith("Nobody saw.")
    assert SimulatorSection().response_chars == 2000
    play(s, chat, max_turns=3, response_chars=0)
    whole = json.loads(seen[3][-1]["content"].removeprefix("[TOOL OBS] "))["result"]
    assert whole == ScriptEnvironment(s).get_caption(1, None, None) and long in whole
