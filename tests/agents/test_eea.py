"""EEA: the search's arithmetic (coverage, query score, entropy, memory, anchors), scripted
trajectories of Algorithm 1 on a real clip, the ablations, a forest over two videos, the paper's
prompts, and ``vidagent ask --strategy eea`` live and replayed."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from agentkit import INDEX_SPECS, build_library
from clirun import vidagent

from vidagent.agents.base import Answer, Question
from vidagent.agents.eea.agent import EEAAgent, EEAOptions
from vidagent.agents.eea.tree import (
    ENTROPY_TEMPERATURE,
    MemoryFrame,
    Node,
    RetrievedClip,
    cluster_anchors,
    coverage_sample,
    entropy,
    fuse,
    normalise_queries,
    query_score,
    update_memory,
)
from vidagent.agents.strategies import strategy_class
from vidagent.app import ask
from vidagent.budget import Budget
from vidagent.cli.render import render
from vidagent.config import Settings, load_settings
from vidagent.exceptions import ConfigError
from vidagent.library import Library
from vidagent.models.base import ChatRequest
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.prompts import load_prompt
from vidagent.trace import FormatError, PhaseChanged, RunStarted, SearchRound, Trace

OPTIONS = ("BYE", "HELLO VIDAGENT")
QUESTION = "What text appears on the wall?"

# ---------------------------------------------------------------------------------------------
# Coverage sampling (SGE)


def longest_gap(points: Sequence[int], a: int, b: int) -> int:
    marks = sorted({a, b, *points})
    return max(y - x for x, y in itertools.pairwise(marks))


@pytest.mark.parametrize(
    ("a", "b", "budget", "anchors"),
    [
        (0, 11, 4, []),
        (0, 179, 4, []),
        (0, 179, 6, [10]),
        (0, 40, 3, [5, 6]),
        (3, 30, 5, [29]),
    ],
)
def test_coverage_minimises_the_longest_unobserved_gap(
    a: int, b: int, budget: int, anchors: list[int]
) -> None:
    frames, spans = coverage_sample([("v", a, b)], [("v", t) for t in anchors], budget)
    taken = [t for _, t in frames]
    assert len(taken) == budget and all(a < t < b for t in taken)
    assert set(anchors) <= set(taken)  # the anchors are kept fixed
    free = [t for t in range(a + 1, b) if t not in anchors]
    best = (
        min(
            longest_gap([*anchors, *extra], a, b)
            for extra in itertools.combinations(free, budget - len(anchors))
        )
        if b - a < 45
        else None
    )  # brute force where it is cheap
    if best is not None:
        assert longest_gap(taken, a, b) == best
    assert [(s, e) for _, s, e in spans] == list(itertools.pairwise([a, *taken, b]))


def test_without_anchors_coverage_is_uniform_splitting() -> None:
    frames, _ = coverage_sample([("v", 0, 600)], [], 5)
    assert [t for _, t in frames] == [100, 200, 300, 400, 500]  # a + (b - a) i / (B + 1)


def test_coverage_never_takes_boundaries_or_observed_frames_and_exhausts() -> None:
    observed = {("v", 2), ("v", 3)}
    frames, spans = coverage_sample([("v", 0, 5)], [("v", 0), ("v", 3)], 4, observed)
    assert [t for _, t in frames] == [1, 4]  # fewer interior frames than asked: all of them
    assert [(s, e) for _, s, e in spans] == [(0, 1), (1, 4), (4, 5)]
    assert coverage_sample([("v", 7, 8)], [], 4) == ([], [("v", 7, 8)])  # an atomic leaf
    assert Node(0, "v", 7, 8).interior() == 0 and Node(0, "v", 0, 5).interior(observed) == 2


def test_a_forest_round_spreads_frames_over_the_longest_gaps() -> None:
    frames, spans = coverage_sample([("a", 0, 299), ("b", 0, 99)], [("b", 50)], 4)
    assert ("b", 50) in frames and sum(v == "a" for v, _ in frames) == 3
    assert [s for s in spans if s[0] == "b"] == [("b", 0, 50), ("b", 50, 99)]


# ---------------------------------------------------------------------------------------------
# UARF


@pytest.mark.parametrize("phis", [[0.2], [0.1, 0.9], [0.5, 0.5, 0.5], [0.0, 0.3, 0.31, 1.0]])
def test_query_score_is_a_soft_maximum(phis: list[float]) -> None:
    u = query_score(phis, tau=0.1)
    assert sum(phis) / len(phis) - 1e-9 <= u <= max(phis) + 1e-9
    assert u >= max(phis) - 0.1 * math.log(len(phis)) - 1e-9
    assert query_score(phis, tau=1e-3) == pytest.approx(max(phis), abs=0.01)
    assert query_score(phis, tau=1e3) == pytest.approx(sum(phis) / len(phis), abs=0.01)


def test_query_score_of_a_segment_without_anchors_is_zero() -> None:
    assert query_score([]) == 0.0


def test_entropy_edge_cases() -> None:
    assert entropy([70.0]) == 0.0  # N = 1
    assert entropy([40.0, 40.0, 40.0]) == pytest.approx(1.0)  # ties: nothing discriminates
    assert entropy([90.0, 10.0, 0.0]) < 0.01  # a clear winner on the 0-100 scale
    assert 0.0 < entropy([50.0, 49.0]) < 1.0
    assert entropy([0.5, 0.4]) > 0.99  # rewards are on 0-100: r / 100 would always tie


def test_fusion_leans_on_u_when_rewards_tie_and_on_r_when_one_wins() -> None:
    tied = [Node(1, "v", 0, 5, r=30.0, u=0.9), Node(2, "v", 5, 9, r=30.0, u=0.1)]
    assert fuse(tied) == pytest.approx(1.0)
    assert [n.h for n in tied] == pytest.approx([0.9, 0.1])
    clear = [Node(1, "v", 0, 5, r=80.0, u=0.0), Node(2, "v", 5, 9, r=10.0, u=1.0)]
    assert fuse(clear) < 0.02 and [n.h for n in clear] == pytest.approx([0.8, 0.1], abs=0.015)
    assert fuse(tied, mode="r") == pytest.approx(1.0) and [n.h for n in tied] == [0.3, 0.3]


# (r, u) of five candidates. Fig. 5: the reward model's frames missed the event, so it scored the
# key segment (#2, the one holding the query's anchor) 0 and the others a little above it.
UNRELIABLE = [(20.0, 0.0), (15.0, 0.3), (0.0, 1.0), (10.0, 0.0), (15.0, 0.2)]
# A reward model that saw the event: #0 by a wide margin, while #1 has the better query score.
CONFIDENT = [(90.0, 0.0), (10.0, 0.6), (0.0, 0.3), (5.0, 0.0), (10.0, 0.2)]


def ranked(pairs: list[tuple[float, float]], **fusion: Any) -> list[int]:
    """Candidate ids by fused score, best first."""
    nodes = [Node(i, "v", 10 * i, 10 * i + 10, r=r, u=u) for i, (r, u) in enumerate(pairs)]
    fuse(nodes, **fusion)
    return [n.id for n in sorted(nodes, key=lambda n: -n.h)]


@pytest.mark.parametrize(
    ("temperature", "rescues", "keeps"),
    [(1.0, False, True), (10.0, True, True), (100.0, True, False)],
)
def test_the_entropy_temperature_that_rescues_fig_5_and_keeps_a_confident_reward(
    temperature: float, rescues: bool, keeps: bool
) -> None:
    # 1 (the raw scores) leaves the key segment behind; 100 lets u overrule a reward model that
    # saw the event; 10 reward points does both right, and is the default
    assert (ranked(UNRELIABLE, temperature=temperature)[0] == 2) is rescues
    assert (ranked(CONFIDENT, temperature=temperature)[0] == 0) is keeps


def test_the_default_entropy_discriminates_a_five_point_margin() -> None:
    assert EEAOptions().entropy_temperature == ENTROPY_TEMPERATURE == 10.0
    assert ranked(UNRELIABLE)[0] == 2 and ranked(CONFIDENT)[0] == 0
    assert ranked(UNRELIABLE, mode="r")[-1] == 2  # w/o UARF the key segment comes last
    # the issue's two reward lists: near 0 on the raw scores, uncertain at 10 reward points
    top_two, spread = [80, 75, 20, 10, 10, 10, 10], [60, 50, 50, 40, 30, 20, 10]
    assert entropy(top_two, 1.0) < 0.03 and entropy(spread, 1.0) < 0.01
    assert entropy(top_two) == pytest.approx(0.355, abs=0.005)
    assert entropy(spread) == pytest.approx(0.676, abs=0.005)
    assert entropy([80, 75]) > 0.95 and entropy([80, 30]) < 0.06


# ---------------------------------------------------------------------------------------------
# Memory and anchors


def test_memory_keeps_the_best_rewarded_frames_in_time_order() -> None:
    kids = [
        Node(i, "v", a, b, r=r)
        for i, (a, b, r) in enumerate([(0, 10, 5.0), (10, 20, 90.0), (20, 30, 10.0), (30, 40, 0.0)])
    ]
    memory = update_memory([], [("v", 10), ("v", 20), ("v", 30)], kids, 2, 1)
    # frame 10 and 20 touch the 90 segment; 30 separates 10 and 0
    assert [(m.t, m.score) for m in memory] == [(10, 90.0), (20, 90.0)]
    later = [Node(9, "v", 10, 15, r=90.0), Node(10, "v", 15, 20, r=50.0)]
    memory = update_memory(memory, [("v", 15)], later, 2, 2)
    # three frames at 90 for two places: the newest stays, then the earlier-stored one
    assert [(m.t, m.round) for m in memory] == [(10, 1), (15, 2)]
    assert update_memory([MemoryFrame("v", 3, 1.0, 1)], [], [], 0, 2) == []


def test_memory_tie_breaks_toward_the_most_recent() -> None:
    old = [MemoryFrame("v", 1, 50.0, 1), MemoryFrame("v", 2, 50.0, 1)]
    kids = [Node(1, "v", 2, 5, r=50.0), Node(2, "v", 5, 9, r=50.0)]
    memory = update_memory(old, [("v", 5)], kids, 2, 2)
    assert (5, 2) in [(m.t, m.round) for m in memory]


def clip(
    t0: float, t1: float, phi: float, t: int, query: str = "q", vid: str = "v"
) -> RetrievedClip:
    return RetrievedClip(query, vid, t0, t1, t, phi)


def test_clips_merge_by_temporal_overlap_into_anchors() -> None:
    clips = [
        clip(0, 4, 0.2, 1),
        clip(2, 6, 0.6, 4, "r"),
        clip(7, 11, 0.3, 8),
        clip(30, 34, 1.0, 31),
    ]
    anchors = cluster_anchors(clips, gap=1.0)
    # [0,4] and [2,6] overlap; [7,11] touches [2,6] within 1 s; [30,34] stands alone
    assert [(a.t, a.phi, a.span) for a in anchors] == [(4, 0.6, (0, 11)), (31, 1.0, (30, 34))]
    assert anchors[0].queries == ("q", "r")
    assert [a.phi_n for a in anchors] == pytest.approx([0.5, 1.0])  # min-max over D


def test_queries_are_normalised_and_deduplicated() -> None:
    found = normalise_queries(
        ["A Man  OPENS a door", "a man opens a door", "", "Sign", "x", "y", "z"], known=["sign"]
    )
    assert found == ["a man opens a door", "x", "y", "z"]


# ---------------------------------------------------------------------------------------------
# Scripted trajectories on a real clip


class Backbone:
    """The one VLM of the paper, scripted per prompt kind; keeps every request."""

    def __init__(
        self,
        policy: Sequence[str] | Callable[[str], str],
        *,
        reward: Callable[[list[int]], str] | None = None,
        queries: str = '["a sign reads hello vidagent"]',
        update: str = "{}",
    ) -> None:
        self.policy = policy if callable(policy) else list(policy)
        self.reward = reward or (
            lambda ids: json.dumps(
                {
                    f"Segment {i}": {"explanation": f"seg {i}", "score": 10 * (k + 1)}
                    for k, i in enumerate(ids)
                }
            )
        )
        self.queries, self.update = queries, update
        self.requests: list[ChatRequest] = []

    def __call__(self, request: ChatRequest) -> str:
        self.requests.append(request)
        text = request.messages[-1].text
        if "Produce short text queries" in text:
            return self.queries
        if "acting as a reward model" in text:  # the segment lines, not the history's
            return self.reward(
                [int(i) for i in re.findall(r"^Segment (\d+): [^\n]*\]$", text, re.MULTILINE)]
            )
        if "video-understanding assistant" in text:
            return self.update
        return self.policy(text) if callable(self.policy) else self.policy.pop(0)

    def kinds(self) -> list[str]:
        names = {
            "Produce short": "discover",
            "reward model": "reward",
            "video-understanding": "update",
            "helpful assistant": "policy",
        }
        return [
            next(v for k, v in names.items() if k in r.messages[-1].text) for r in self.requests
        ]


Indexed = tuple[Library, list[str], Settings]


@pytest.fixture(scope="module")
def indexed(
    small_video: Path, counter_video: Path, tmp_path_factory: pytest.TempPathFactory
) -> Indexed:
    return build_library(tmp_path_factory.mktemp("eea") / "lib", small_video, counter_video)


def hub(settings: Settings, backbone: Backbone) -> Models:
    adapters = {
        "llm": FakeAdapter("echo"),
        "vlm": FakeAdapter.function(backbone),
        "embed": FakeAdapter("hash", {"dim": "32"}),
    }
    return Models.from_adapters(adapters, settings)


def solve(
    indexed: Indexed,
    backbone: Backbone,
    videos: int = 1,
    options: Sequence[str] = OPTIONS,
    max_steps: int | None = None,
    **settings: Any,
) -> Answer:
    library, ids, config = indexed
    budget = Budget(steps=max_steps) if max_steps else None
    agent = EEAAgent(library, hub(config, backbone), budget=budget, **settings)
    return agent.run(Question(QUESTION, tuple(ids[:videos]), tuple(options)))


def rounds(answer: Answer) -> list[SearchRound]:
    assert answer.trace is not None
    return answer.trace.of(SearchRound)


def test_answer_in_round_one(indexed: Indexed) -> None:
    backbone = Backbone(["B"])
    answer = solve(indexed, backbone)
    assert (answer.letter, answer.forced, answer.reason) == ("B", False, "answered")
    assert backbone.kinds() == ["discover", "reward", "update", "policy"]
    (first,) = rounds(answer)
    assert [n["span"] for n in first.expanded] == [[0, 11]]  # the root: a 12 s video
    assert len(first.frames) == 4 and len(first.children) == 5  # B = 4 for a short video
    assert [c["parent"] for c in first.children] == [first.expanded[0]["id"]] * 5
    assert [c["r"] for c in first.children] == [10, 20, 30, 40, 50]
    assert first.choice == {"answer": "B"}
    assert answer.trace is not None and answer.trace.totals is not None
    assert answer.trace.totals.frames == 4  # frames observed: the paper's efficiency figure
    # the reward model saw the four frames, each labelled with its time
    reward = backbone.requests[1].messages[-1]
    assert len(reward.images) == 4
    assert [p for p in reward.content if isinstance(p, str) and p.startswith("Frame at")] == [
        f"Frame at {t}s" for _, t in first.frames
    ]
    # the policy saw the memory: the same four frames
    assert len(backbone.requests[3].messages[-1].images) == 4
    assert answer.evidence and all(e.t0 == e.t1 for e in answer.evidence)


def test_fused_scores_follow_uarf_over_every_candidate(indexed: Indexed) -> None:
    answer = solve(indexed, Backbone(["B"]))
    (first,) = rounds(answer)
    r = [c["r"] for c in first.candidates]
    assert first.entropy == pytest.approx(entropy(r), abs=1e-4)
    for c in first.candidates:
        fused = (1 - first.entropy) * c["r"] / 100 + first.entropy * c["u"]
        assert c["h"] == pytest.approx(fused, abs=1e-3)
    # the discovered query is retrieved over the index's clips and clustered into anchors
    assert first.anchors and first.retrieval["retriever"] == "clips"


def test_backtrack_to_a_sibling(indexed: Indexed) -> None:
    # round 1 splits the root into #1..#5; the policy explores #3, then goes back to #4
    backbone = Backbone(['{"Segment": 3}', '{"Segment": 4}', "(B) HELLO VIDAGENT"])
    answer = solve(indexed, backbone)
    one, two, three = rounds(answer)
    assert one.choice == {"segment": 3} and [n["id"] for n in two.expanded] == [3]
    assert two.choice == {"segment": 4}
    assert [n["id"] for n in three.expanded] == [4] and three.expanded[0]["parent"] == 0
    assert {c["parent"] for c in three.children} == {4}
    assert answer.letter == "B" and not answer.forced
    # the later reward prompts hold every earlier score (Table 8) and name the parent segment
    rewards = [
        r.messages[-1].text for r in backbone.requests if "reward model" in r.messages[-1].text
    ]
    assert "segment 3 has been further explored" in rewards[1]
    assert "Segment 1: [" in rewards[2] and "explanation=seg " in rewards[2]
    assert answer.trace is not None and answer.trace.totals is not None
    assert answer.trace.totals.frames == sum(len(r.frames) for r in (one, two, three))


def test_a_local_model_s_grammar_bounds_each_query(indexed: Indexed) -> None:
    """Unbounded, SmolLM2 wrote one query of the update prompt to the 1,024-token cap."""
    import dataclasses

    from vidagent.agents.eea.agent import QUERY_CHARS

    library, ids, config = indexed
    backbone = Backbone(["B"], update='{"query1": "a sign on the wall"}')
    local = dataclasses.replace(FakeAdapter.capabilities, local=True)
    adapters = {
        "llm": FakeAdapter("echo"),
        "vlm": FakeAdapter.function(backbone, capabilities=local),
        "embed": FakeAdapter("hash", {"dim": "32"}),
    }
    agent = EEAAgent(library, Models.from_adapters(adapters, config), budget=Budget(steps=2))
    agent.run(Question(QUESTION, (ids[0],), tuple(OPTIONS)))
    sent = dict(zip(backbone.kinds(), (r.response_schema for r in backbone.requests), strict=True))
    assert sent["discover"]["items"] == {"type": "string", "maxLength": QUERY_CHARS}
    assert sent["update"]["additionalProperties"] == {"type": "string", "maxLength": QUERY_CHARS}


def test_forced_answer_at_max_rounds(indexed: Indexed) -> None:
    backbone = Backbone(['{"Segment": 5}', '{"Segment": 1}', "A"])
    answer = solve(indexed, backbone, max_steps=2)
    assert (answer.letter, answer.forced, answer.reason) == ("A", True, "max_steps")
    assert len(rounds(answer)) == 2
    final = backbone.requests[-1].messages[-1].text
    assert final.endswith(
        "You must answer now: select the best answer from the options and "
        "directly provide the answer without giving any explanation."
    )


def test_a_malformed_reward_reply_is_retried_then_scored_zero(indexed: Indexed) -> None:
    backbone = Backbone(["B"], reward=lambda ids: "Segment 2 looks relevant, I think.")
    answer = solve(indexed, backbone)
    assert backbone.kinds() == ["discover", "reward", "reward", "update", "policy"]
    assert answer.trace is not None
    errors = answer.trace.of(FormatError)
    assert [e.attempt for e in errors] == [1, 2]
    (first,) = rounds(answer)
    assert all(c["r"] == 0 for c in first.children)
    assert first.entropy == pytest.approx(1.0)  # ties: h is the query score alone
    assert all(c["h"] == pytest.approx(c["u"], abs=1e-3) for c in first.children)
    assert "Reply only with JSON" in backbone.requests[2].messages[-1].text


def test_an_unknown_segment_goes_to_the_best_leaf_and_a_mute_policy_is_asked_again(
    indexed: Indexed,
) -> None:
    backbone = Backbone(['{"Segment": 99}', "hmm", "still thinking", "B"])
    answer = solve(indexed, backbone)
    one, two, three = rounds(answer)
    best = max(one.candidates, key=lambda c: (c["h"], -c["id"]))
    assert one.choice == {"segment": best["id"], "redirected_from": 99}
    assert two.choice["redirected_from"] == -1  # asked twice, then the best leaf
    assert [n["id"] for n in three.expanded] == [two.choice["segment"]]
    assert answer.trace is not None and [e.attempt for e in answer.trace.of(FormatError)] == [1, 2]
    assert answer.letter == "B"


def test_exhausted_leaves_force_the_answer(indexed: Indexed) -> None:
    # B = 12 takes every interior frame of the 12 s video in round 1: nothing is left to split
    backbone = Backbone(['{"Segment": 1}', "B"])
    answer = solve(indexed, backbone, frames_per_round=12)
    (first,) = rounds(answer)
    assert len(first.frames) == 10 and first.choice == {"answer": "B", "forced": "exhausted"}
    assert (answer.letter, answer.forced, answer.reason) == ("B", True, "exhausted")


def test_the_frame_cap_forces_the_answer(indexed: Indexed) -> None:
    # #3 spans 4-7 s: two unobserved frames inside, but only one is left under the cap
    backbone = Backbone(['{"Segment": 3}', '{"Segment": 1}', "A"])
    answer = solve(indexed, backbone, max_frames=5)
    assert (answer.forced, answer.reason, len(rounds(answer))) == (True, "max_frames", 2)
    assert [len(r.frames) for r in rounds(answer)] == [4, 1]  # the last round takes what is left
    assert answer.trace is not None and answer.trace.totals is not None
    assert answer.trace.totals.frames == 5


def test_query_update_retrieves_for_new_queries_only(indexed: Indexed) -> None:
    backbone = Backbone(
        ['{"Segment": 3}', "B"],
        update='{"query1": "white wall", "query2": "A SIGN READS HELLO VIDAGENT"}',
    )
    answer = solve(indexed, backbone)
    one, two = rounds(answer)
    assert one.new_queries == ["white wall"]  # the duplicate of C_0 is dropped
    assert one.queries == ["a sign reads hello vidagent", "white wall"]
    assert one.retrieval["queries"] == 2 and two.retrieval["queries"] == 2  # nothing repeated
    update = next(r for r in backbone.requests if "video-understanding" in r.messages[-1].text)
    assert '["a sign reads hello vidagent"]' in update.messages[-1].text
    assert len(update.messages[-1].images) == 4  # the round's frames only


# ---------------------------------------------------------------------------------------------
# Ablations


def test_without_sge_frames_split_the_segment_uniformly(indexed: Indexed) -> None:
    (first,) = rounds(solve(indexed, Backbone(["B"]), anchor_budget=0))
    frames, _ = coverage_sample([("x", 0, 11)], [], 4)
    assert [t for _, t in first.frames] == [t for _, t in frames] and first.anchor_frames == []


def test_with_sge_the_best_anchor_is_sampled(indexed: Indexed) -> None:
    # the describer's caption of clip 5-10 s is the only one with blue, green and white: its middle frame is the anchor
    backbone = Backbone(["B"], queries='["blue green white"]')
    (first,) = rounds(solve(indexed, backbone, anchor_budget=1, top_k=1))
    (anchor,) = first.anchors
    assert (anchor["t"], anchor["span"]) == (8, [5.0, 10.0])
    assert first.anchor_frames == [[anchor["video_id"], 8]]
    assert [t for _, t in first.frames] == [
        3,
        5,
        8,
        9,
    ]  # the rest cover the gaps around it (9.5 snaps down)


def test_without_uarf_h_is_the_intrinsic_reward(indexed: Indexed) -> None:
    (first,) = rounds(solve(indexed, Backbone(["B"]), fusion="r"))
    assert [c["h"] for c in first.candidates] == pytest.approx(
        [c["r"] / 100 for c in first.candidates]
    )


def follow_h(answer: str) -> Callable[[str], str]:
    """A policy that explores the candidate of highest fused score once, then answers."""
    asked: list[str] = []

    def policy(prompt: str) -> str:
        asked.append(prompt)
        if len(asked) > 1:
            return answer
        scored = re.findall(
            r"^Segment (\d+): span=\[[\d,]+\], score=([\d.]+)", prompt, re.MULTILINE
        )
        best = max(scored, key=lambda s: (float(s[1]), -int(s[0])))[0]
        return json.dumps({"Segment": int(best)})

    return policy


def test_fig_5_a_segment_scored_0_is_explored_for_its_query_score(indexed: Indexed) -> None:
    # where the query's anchor lies: the children of round 1 that hold it are the key segments
    (probe,) = rounds(solve(indexed, Backbone(["B"])))
    (anchor,) = probe.anchors  # the index's three clips touch: one cluster
    key = {c["id"] for c in probe.children if c["span"][0] <= anchor["t"] <= c["span"][1]}
    assert 0 < len(key) < len(probe.children)

    def unreliable(ids: list[int]) -> str:  # the key segments 0, the others 10-20
        scores = {i: 0 if i in key else 10 + 5 * (k % 3) for k, i in enumerate(ids)}
        return json.dumps(
            {f"Segment {i}": {"explanation": "unclear", "score": v} for i, v in scores.items()}
        )

    chosen = {}
    for name, options in {
        "uarf": {},
        "w/o UARF": {"fusion": "r"},
        "raw": {"entropy_temperature": 1},
    }.items():
        first = rounds(solve(indexed, Backbone(follow_h("B"), reward=unreliable), **options))[0]
        picked = next(c for c in first.candidates if c["id"] == first.choice["segment"])
        chosen[name] = (picked["id"] in key, picked["r"], first.entropy)
    assert chosen["uarf"][:2] == (True, 0) and chosen["uarf"][2] > 0.5  # rescued by u
    assert chosen["w/o UARF"][:2] == (False, 20)  # the reward alone picks the highest r
    assert chosen["raw"][:2] == (False, 20) and chosen["raw"][2] < 0.1  # H ~ 0: h = r


def test_without_query_update_and_without_dqm(indexed: Indexed) -> None:
    no_qu = Backbone(["B"])
    solve(indexed, no_qu, query_update=False)
    assert no_qu.kinds() == ["discover", "reward", "policy"]
    no_dqm = Backbone(["B"])
    (first,) = rounds(solve(indexed, no_dqm, queries=False))
    assert no_dqm.kinds() == ["reward", "policy"]
    assert first.anchors == [] and all(c["u"] == 0 for c in first.candidates)
    assert first.retrieval["retriever"] is None


def scores_u(candidate: dict[str, Any], anchors: list[dict[str, Any]]) -> float:
    inside = [
        a["phi_n"]
        for a in anchors
        if a["video_id"] == candidate["video_id"]
        and candidate["span"][0] <= a["t"] <= candidate["span"][1]
    ]
    return query_score(inside)


def test_recompute_u_refreshes_old_candidates(indexed: Indexed) -> None:
    update = '{"query1": "white wall"}'
    runs = {}
    for fresh in (False, True):
        answer = solve(indexed, Backbone(['{"Segment": 3}', "B"], update=update), recompute_u=fresh)
        assert answer.trace is not None
        start = next(p.data for p in answer.trace.of(PhaseChanged) if p.phase == "queries")
        runs[fresh] = (start["anchors"], *rounds(answer))
    initial, one, two = runs[False]
    old = [c for c in two.candidates if c["round"] == 1]
    # faithful: u was stored when the child was made, from the anchors of that moment
    assert [c["u"] for c in old] == pytest.approx([scores_u(c, initial) for c in old], abs=1e-3)
    initial, one, two = runs[True]
    old = [c for c in two.candidates if c["round"] == 1]
    # refreshed: from the anchors after round 1's query update
    assert [c["u"] for c in old] == pytest.approx([scores_u(c, one.anchors) for c in old], abs=1e-3)


def test_the_long_profile_samples_six_frames_with_a_memory_of_sixteen(indexed: Indexed) -> None:
    answer = solve(indexed, Backbone(["B"]), profile="long")
    (first,) = rounds(answer)
    assert len(first.frames) == 6
    assert answer.trace is not None
    started = next(p.data for p in answer.trace.of(PhaseChanged) if p.phase == "queries")
    assert (started["frames_per_round"], started["memory_size"]) == (6, 16)


# ---------------------------------------------------------------------------------------------
# Many videos, free-form questions


def test_a_forest_searches_both_videos_with_one_candidate_set(indexed: Indexed) -> None:
    backbone = Backbone(["B"])
    answer = solve(indexed, backbone, videos=2)
    (first,) = rounds(answer)
    _, ids, _ = indexed
    assert [n["video_id"] for n in first.expanded] == ids[:2]  # one root per video
    assert {c["video_id"] for c in first.candidates} == set(ids[:2])
    assert len(first.frames) == 4 and len(first.children) == 6  # 4 frames cut 2 roots into 6
    reward = backbone.requests[1].messages[-1].text
    assert "small.mp4 [" in reward and "counter.mp4 [" in reward
    assert "24-frame video (24 seconds in duration)" in reward


def test_a_free_form_question_is_answered_concisely(indexed: Indexed) -> None:
    backbone = Backbone(["The sign says HELLO VIDAGENT."])
    answer = solve(indexed, backbone, options=())
    assert answer.text == "The sign says HELLO VIDAGENT." and answer.parsed
    policy = backbone.requests[-1].messages[-1].text
    assert policy.endswith(
        "If you have enough information to answer the question, answer concisely."
    )


# ---------------------------------------------------------------------------------------------
# Prompts, options, the CLI

# Snapshots of the package data: a change to any prompt file fails here and must be deliberate.
PROMPT_SHA256 = {
    "eea_reward_first": "d7e9e185b6303044",
    "eea_reward_next": "f335cf299773f052",
    "eea_policy": "4c6518fd20939d44",
    "eea_query_discovery": "201f3e3d79a4469c",
    "eea_query_update": "48534550627c69aa",
}


@pytest.mark.parametrize("name", sorted(PROMPT_SHA256))
def test_prompt_files_are_unchanged(name: str) -> None:
    assert hashlib.sha256(load_prompt(name).encode()).hexdigest()[:16] == PROMPT_SHA256[name]


def test_prompts_hold_the_papers_wording() -> None:
    assert "Options:question" not in load_prompt("eea_policy")  # the paper's typo, read as options
    assert (
        load_prompt("eea_policy")
        .rstrip()
        .endswith(
            "select the best answer from the options and directly provide the answer without giving any explanation."
        )
    )
    first = load_prompt("eea_reward_first")
    assert first.startswith("/* Task Description */\nYou are acting as a reward model")
    assert (
        'Please give the answer in the format: {"Segment #": {"explanation": str, "score": int}}'
        in first
    )
    assert "{historical_block}" in load_prompt("eea_reward_next")
    assert "1–5 stand-alone semantic queries" in load_prompt("eea_query_discovery")
    assert "“Frame 6 shows the villain" in load_prompt("eea_query_update")


def test_options_are_checked(indexed: Indexed) -> None:
    library, _, settings = indexed
    models = hub(settings, Backbone([]))
    with pytest.raises(ConfigError, match="eea has no option beam; its options: "):
        EEAAgent(library, models, beam=2)
    with pytest.raises(ConfigError, match="eea: tau and entropy_temperature must be positive"):
        EEAAgent(library, models, tau=0)
    assert strategy_class("eea") is EEAAgent


def events_note(trace: Path) -> str:
    return str(Trace.load(trace).of(RunStarted)[0].index.get("note", ""))


def test_the_index_plan_says_what_searching_text_instead_of_frames_costs(indexed: Indexed) -> None:
    library, _, settings = indexed
    plan = EEAAgent(library, hub(settings, Backbone([]))).index_plan()
    assert "caption" in plan.stages and "no image_embed model (--image-embed)" in plan.note
    forced = EEAAgent(library, hub(settings, Backbone([])), retriever="clips").index_plan()
    assert "(retriever=clips)" in forced.note
    assert EEAAgent(library, hub(settings, Backbone([])), queries=False).index_plan().note == ""


def test_cli_ask_shows_each_round_and_replays(
    small_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    reward = json.dumps(
        {f"Segment {i}": {"explanation": "a wall", "score": 20 * (i % 4)} for i in range(1, 12)}
    )
    replies = ['["a sign on a wall"]', reward, "{}", '{"Segment": 3}', reward, "{}", "B"]
    env = {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}
    env["VIDAGENT_VLM"] = "fake:scripted?replies=" + json.dumps(replies)
    env["VIDAGENT_CAPTIONER"] = "perception:describer"  # the index's captions, not the script
    trace = tmp_path / "run.jsonl"
    out = vidagent(
        "ask",
        str(small_video),
        QUESTION,
        "-o",
        OPTIONS[0],
        "-o",
        OPTIONS[1],
        "--strategy",
        "eea",
        "--trace",
        str(trace),
        home=_isolated_home,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # no image embedder: one line says the text vectors are searched and what that costs
    (note,) = [line for line in lines if line.startswith("  note: ")]
    assert "eea searches the index's text vectors" in note
    assert "every 5 s clip not yet indexed is captioned first" in note and "720 an hour" in note
    assert "--image-embed" in note and events_note(trace) == note.removeprefix("  note: ")
    heads = [line for line in lines if line.startswith("round ")]
    assert [h.split(" · ")[0] for h in heads] == ["round 1", "round 2"]
    assert heads[0].startswith("round 1 · split #0 00:00:00–00:00:11 at ")
    assert "  → explore #3" in lines and "  → answer: B" in lines
    assert "answer: (B) HELLO VIDAGENT" in lines
    # the answer rests on the memory's frames, shown as instants
    (evidence,) = [line for line in lines if line.startswith("  evidence: ")]
    assert evidence.startswith("  evidence: small.mp4 00:00:0") and "–" not in evidence
    assert any(
        re.fullmatch(r"\d+ steps?, \d+ frames, 9 model calls.*", line) for line in lines
    )  # 7 VLM + 1 query embedding + 1 embedding checking the citations
    events = Trace.load(trace)
    assert events.of(RunStarted)[0].strategy == "eea" and len(events.of(SearchRound)) == 2
    again = vidagent("replay", str(trace), home=_isolated_home)
    assert again.stdout.splitlines() == lines[:-1]


@pytest.mark.models
def test_embedded_defaults_answer_a_real_clip(indexed: Indexed, tmp_path: Path) -> None:
    library, ids, _ = indexed
    settings = load_settings({**INDEX_SPECS, "llm": "llamacpp:smollm2-135m"})
    answer = ask(
        ids[0],
        QUESTION,
        options=OPTIONS,
        strategy="eea",
        settings=settings,
        library=library,
        trace=tmp_path / "trace.jsonl",
        # one round calls every prompt a round has (the reward, the query update, the
        # selection) and then the forced answer; a second round repeats the same prompts
        budget=Budget(steps=1),
    )
    trace = answer.trace
    assert trace is not None and len(trace.of(SearchRound)) == 1
    # well formed: a parsed answer names one option; an unparsable one says so, never guesses
    assert answer.parsed == (answer.choice is not None) and answer.text
    assert Trace.load(tmp_path / "trace.jsonl").events == trace.events
    assert list(render(trace.events))[-2].startswith("answer: ")


# ---------------------------------------------------------------------------------------------
# The paper's benchmark settings through ``bench run``


def benchmark_backbone(request: ChatRequest) -> str:
    """Any question: one query, every segment 50, no new query, then the answer."""
    text = request.messages[-1].text
    if "Produce short text queries" in text:
        return '["a cooking show"]'
    if "acting as a reward model" in text:
        ids = re.findall(r"^Segment (\d+): [^\n]*\]$", text, re.MULTILINE)
        return json.dumps({f"Segment {i}": {"explanation": "food", "score": 50} for i in ids})
    if "video-understanding assistant" in text:
        return "{}"
    return "B" if "(B)" in text else "A cooking show"


def bench_hub(settings: Settings) -> Models:
    adapters = {
        "llm": FakeAdapter("echo"),
        "vlm": FakeAdapter.function(benchmark_backbone),
        "captioner": FakeAdapter("echo", {"reply": "a kitchen"}),
        "embed": FakeAdapter("hash", {"dim": "32"}),
        "asr": FakeAdapter("echo", {"text": "hello there"}),
        "ocr": FakeAdapter(),
        "detector": FakeAdapter(),
    }
    return Models.from_adapters(adapters, settings)


@pytest.mark.parametrize(
    ("benchmark", "split", "options", "expected"),
    [
        # MMBench-Video: free-form answers, the short profile (B = 4, memory 8)
        ("mmbench_video", None, {}, {"1": "A cooking show", "2": "A cooking show"}),
        # Video-MME long: multiple choice, the long profile (B = 6, memory 16)
        ("videomme", "long", {"profile": "long"}, {"601-1": 1, "601-2": 1}),  # B
    ],
)
def test_the_papers_benchmark_settings_run_through_bench_run(
    tmp_path: Path,
    benchmark: str,
    split: str | None,
    options: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vidagent.app.benchmarks import RunConfig, run_benchmark
    from vidagent.media.synth import make_video

    def make_videos(folder: Path, name: str) -> None:
        folder.mkdir(parents=True)
        make_video(folder / f"{name}.mp4", duration=3, size=(160, 96), fps=10)

    data = tmp_path / "data"
    if benchmark == "mmbench_video":
        data.mkdir()
        rows = [
            "index\tvideo\tvideo_type\tquestion\tanswer\tdimensions\tvideo_path",
            "1\tv1\tcooking\tWhat is the video about?\tA cooking show\t['Video Topic']\t./video/v1.mp4",
            "2\tv1\tcooking\tWhat is shown?\tFood\t['OCR']\t./video/v1.mp4",
        ]
        (data / "MMBench-Video.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
        make_videos(data / "video", "v1")
    else:

        def row(qid: str) -> dict[str, Any]:
            return {
                "video_id": "601",
                "duration": "long",
                "domain": "Knowledge",
                "sub_category": "Astronomy",
                "url": "",
                "videoID": "vidLong01",
                "question_id": qid,
                "task_type": "Counting Problem",
                "question": "How many?",
                "options": ["A. one", "B. two", "C. three", "D. four"],
                "answer": "B",
            }

        (data / "videomme").mkdir(parents=True)
        table = pa.Table.from_pylist([row("601-1"), row("601-2")])
        pq.write_table(table, data / "videomme" / "test-00000-of-00001.parquet")
        make_videos(data / "videos", "vidLong01")
    settings = load_settings(INDEX_SPECS)
    config = RunConfig(benchmark, data, split=split, strategy="eea", strategy_options=options)
    out = tmp_path / "run"
    summary = run_benchmark(config, settings=settings, models=bench_hub(settings), out=out)
    assert (summary.ran, summary.errors) == (2, 0)
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {r["id"]: r["parsed"] for r in rows} == expected
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["strategy"] == "eea"
    profile = "long" if options else "auto"
    assert manifest["strategy_settings"]["profile"] == profile
    traces = sorted((out / "traces").glob("*.jsonl"))
    assert len(traces) == 2 and all(Trace.load(t).of(SearchRound) for t in traces)
    first = Trace.load(traces[0]).of(SearchRound)[0]
    assert len(first.frames) == 1  # a 3 s test clip has one interior frame to look at


# ---------------------------------------------------------------------------------------------
# Against an OpenAI-compatible endpoint, as the paper ran it (GPT-4o), and a reasoning model


@pytest.mark.parametrize("model", ["gpt-4o-2024-08-06", "o3"])
def test_over_an_openai_compatible_endpoint(indexed: Indexed, model: str) -> None:
    from faultserver import Behaviour, FaultServer, completion

    library, ids, _ = indexed
    reward = json.dumps(
        {f"Segment {i}": {"explanation": "a wall", "score": 10 * i} for i in range(1, 6)}
    )
    replies = ['["a sign on a white wall"]', reward, '{"query1": "white wall"}', "(B)"]
    server = FaultServer().start()
    try:
        server.script(*(Behaviour(body=completion(text)) for text in replies))
        settings = load_settings(
            {
                **INDEX_SPECS,
                "vlm": f"openai:{model}",
                "openai_base_url": server.base_url,
                "openai_api_key": "sk-test",
            }
        )
        with Models(settings) as models:  # as published: no critic, no frames to verify
            agent = EEAAgent(library, models, published=True)
            answer = agent.run(Question(QUESTION, (ids[0],), OPTIONS))
        bodies = server.bodies("/chat/completions")
    finally:
        server.stop()
    assert (answer.letter, answer.forced) == ("B", False)
    discover, rewarded, update, policy = bodies
    assert {b["model"] for b in bodies} == {model}  # one backbone for every part
    for body in bodies:
        assert "response_format" not in body  # the paper's prompts alone, parsed leniently
        if model == "o3":  # a reasoning model takes no temperature and no caller's cap
            assert "temperature" not in body and "max_tokens" not in body
        else:
            assert body["temperature"] == 0.5
    assert discover["messages"][0]["content"].startswith("/* Role */\nProduce short text queries")
    parts = rewarded["messages"][0]["content"]
    images = [p for p in parts if p["type"] == "image_url"]
    labels = [p["text"] for p in parts if p["type"] == "text" and p["text"].startswith("Frame at")]
    (first,) = rounds(answer)
    assert len(images) == 4 and labels == [f"Frame at {t}s" for _, t in first.frames]
    assert parts[-1]["text"].startswith("/* Task Description */\nYou are acting as a reward model")
    assert "(B) HELLO VIDAGENT" in parts[-1]["text"] and "a 12-frame video" in parts[-1]["text"]
    assert len([p for p in update["messages"][0]["content"] if p["type"] == "image_url"]) == 4
    assert len([p for p in policy["messages"][0]["content"] if p["type"] == "image_url"]) == 4


# ---------------------------------------------------------------------------------------------
# The retriever over frames of an image-text model


def test_with_an_image_text_model_eea_retrieves_frames_and_captions_nothing(
    small_video: Path, tmp_path: Path
) -> None:
    from clipkit import build_clip

    from vidagent.app import Session
    from vidagent.models.registry import create_adapter

    spec = f"clip:{build_clip(tmp_path / 'clip')}"
    settings = load_settings({**INDEX_SPECS, "image_embed": spec})
    backbone = Backbone(["B"])
    adapters = {
        "llm": FakeAdapter("echo"),
        "vlm": FakeAdapter.function(backbone),
        "embed": FakeAdapter("hash", {"dim": "32"}),
        "image_embed": create_adapter(spec, settings, "image_embed"),
    }
    with Session(
        settings, library=tmp_path / "lib", models=Models.from_adapters(adapters, settings)
    ) as session:
        result = session.ask(small_video, QUESTION, options=OPTIONS, strategy="eea", trace=False)
        (record,) = session.library.list_videos()
        times, vectors = session.library.frame_vectors(record.video_id)
    # no captions, no clip vectors: frame vectors alone, one per 1 fps thumbnail
    assert set(record.stages) - {"structure"} == {"embed_frames"}
    assert result.answer is not None and result.answer.trace is not None
    assert "note" not in result.answer.trace.of(RunStarted)[0].index  # nothing to warn of
    assert len(times) == 12 and vectors.shape == (12, 8)
    answer = result.answer
    assert answer is not None and answer.letter == "B" and answer.trace is not None
    (first,) = answer.trace.of(SearchRound)
    assert first.retrieval == {"retriever": "frames", "queries": 1, "clips": 5}
    assert first.anchors and all(0 <= a["t"] <= 11 for a in first.anchors)
    # frames embedded at ingest are not frames observed
    assert answer.trace.totals is not None and answer.trace.totals.frames == 4
