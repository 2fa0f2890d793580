"""Degenerate replies (a short unit repeated to the token cap) are recognised early, and the
llama.cpp adapter stops decoding there."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vidagent.models.registry import module_available
from vidagent.models.repetition import FINISH_REASON, RepetitionGuard


def test_a_reply_looping_on_one_token_or_a_short_unit_trips_the_guard() -> None:
    guard = RepetitionGuard(span=64, longest_unit=8)
    assert guard.degenerate([7] * 64)
    plan = [90, 1, 13, 220] + [16, 13, 220] * 30  # '{"plan": "1. 1. 1. …' as tokens
    assert RepetitionGuard().degenerate(plan)
    assert not RepetitionGuard().degenerate([7] * 63)  # not yet the span


def test_ordinary_text_and_short_runs_do_not_trip_it() -> None:
    guard = RepetitionGuard()
    sentence = [464, 582, 9808, 262, 3420, 290, 11114, 656, 262, 2119, 810, 257, 3290, 44]
    assert not guard.degenerate(list(range(200)))
    assert not guard.degenerate(sentence * 5)  # a unit of 14 tokens said 5 times: 70 tokens
    assert not guard.degenerate(list(range(200)) + sentence * 4)  # a refrain, said 4 times
    assert not guard.degenerate([1, 2, 3] * 10 + list(range(100, 134)))  # the run ended
    assert not guard.tripped


def test_a_sentence_said_over_and_over_trips_the_long_unit_check() -> None:
    # SmolLM2 on transformers, DVD's first step on the demo clip: one transcript sentence of 14
    # tokens written into a JSON string until the 512-token cap.
    sentence = [464, 582, 9808, 262, 3420, 290, 11114, 656, 262, 2119, 810, 257, 3290, 44]
    reply = [90, 1, 13] + sentence * 36
    guard = RepetitionGuard()
    cut = next(n for n in range(1, len(reply) + 1) if guard.degenerate(reply[:n]))
    assert 3 + 160 <= cut < 3 + 14 * 13  # within a few repeats past 160 tokens, not at 507
    assert not RepetitionGuard().degenerate(reply[:100])
    assert RepetitionGuard(span=128, longest_unit=16).long_unit == 128  # characters: 128


def test_a_block_of_lines_written_five_times_trips_it_and_four_times_does_not() -> None:
    # EEA's query prompt answered by SmolLM2: "[" and a line of the prompt over and over, a
    # unit of 33 tokens, to the 1,024-token cap (the test suite's run, 53 s of decoding).
    block = list(range(1000, 1033))
    start = list(range(48))
    guard = RepetitionGuard()
    assert not guard.degenerate(start + block * 4 + block[:-1])  # 4 times: a refrain
    reply = start + block * 30
    cut = next(n for n in range(1, len(reply) + 1) if guard.degenerate(reply[:n]))
    assert cut == 48 + 5 * 33  # the fifth time it is written, not at 1,038
    assert not RepetitionGuard().degenerate(start + list(range(2000, 2065)) * 8)  # 65: too long


def test_fed_piece_by_piece_it_trips_as_soon_as_the_tail_is_degenerate() -> None:
    guard = RepetitionGuard(span=128, longest_unit=16)  # characters of a streamed reply
    stream = ['{"plan": "', "Look at the clip. ", *(["1. "] * 200)]
    fed = 0
    for piece in stream:
        fed += 1
        if guard.add(piece):
            break
    assert guard.tripped
    assert fed < 50  # cut after about 128 characters of "1. ", not at the end of the stream


def test_units_must_fit_their_checks() -> None:
    with pytest.raises(ValueError, match="longest_unit"):
        RepetitionGuard(span=10, longest_unit=6)
    with pytest.raises(ValueError, match="long_unit"):
        RepetitionGuard(long_unit=4)


@pytest.mark.models
@pytest.mark.skipif(not module_available("llama_cpp"), reason="vidagent[llm] not installed")
def test_smollm2_looping_inside_a_json_plan_is_cut_long_before_the_cap() -> None:
    from vidagent.models.base import ChatRequest, Message
    from vidagent.models.llamacpp import LlamaCppAdapter

    # One thread: the same greedy path whatever the machine's load.
    llm = LlamaCppAdapter("smollm2-135m", {"n_ctx": "1024", "n_threads": "1"})
    try:
        schema = {"type": "object", "properties": {"plan": {"type": "string"}}}
        reply = llm.chat(
            ChatRequest(
                messages=(Message("user", "1. " * 36),),
                response_schema={**schema, "required": ["plan"]},
                max_tokens=512,
                temperature=0.0,
            )
        )
        assert reply.finish_reason == FINISH_REASON
        assert 64 <= reply.usage.output_tokens < 100  # cut at the guard's span, not at 512
        assert reply.text.startswith('{ "plan"') and reply.text.endswith("1.1.1.1.")
        ordinary = llm.chat(
            ChatRequest(
                messages=(Message("user", "Make a plan. Reply as JSON with a plan."),),
                response_schema={**schema, "required": ["plan"]},
                max_tokens=80,
                temperature=0.0,
            )
        )
        assert ordinary.finish_reason != FINISH_REASON
        assert "plan" in json.loads(ordinary.text)
    finally:
        llm.close()


def test_llama_cpp_s_stopping_criterion_sees_enough_of_the_reply_for_a_long_unit() -> None:
    from vidagent.models.llamacpp import _Cut

    # llama-cpp-python calls it once per sampled token with every token evaluated so far (the
    # prompt's, then the reply's, up to the token before the one just sampled)
    prompt, block = list(range(500, 836)), list(range(1000, 1033))
    reply = block * 30
    cut = _Cut()
    stopped = next(
        n for n in range(1, len(reply) + 1) if cut(np.array(prompt + reply[: n - 1]), None)
    )
    assert stopped - 1 == 5 * 33  # the fifth block (it saw only 64 tokens: never)


def test_a_streamed_reply_s_guard_takes_a_line_of_33_tokens() -> None:
    from vidagent.models.openai import _text_guard

    line = (
        "Produce short text queries for a VideoCLIP-style retriever from one multiple-choice "
        "question about a video, with its options and no extra text.\n"
    )
    guard = _text_guard()
    fed = next(n for n in range(1, 40) if guard.add(line))
    assert len(line) > 128 and fed == 5


@pytest.mark.models
@pytest.mark.skipif(not module_available("llama_cpp"), reason="vidagent[llm] not installed")
def test_smollm2_repeating_a_line_of_eea_s_query_prompt_is_cut_long_before_the_cap() -> None:
    from vidagent.models.base import ChatRequest, Message
    from vidagent.models.llamacpp import LlamaCppAdapter
    from vidagent.prompts import load_prompt

    prompt = (
        load_prompt("eea_query_discovery")
        .strip()
        .replace("{question}", "What text appears on the wall?")
        .replace("{options}", "(A) BYE\n(B) HELLO VIDAGENT")
    )
    # One thread: the same greedy path whatever the machine's load.
    llm = LlamaCppAdapter("smollm2-135m", {"n_ctx": "2048", "n_threads": "1"})
    try:
        reply = llm.chat(
            ChatRequest(
                messages=(Message("user", prompt),),
                # EEA's schema of queries: the loop is written inside the array's first string
                response_schema={
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": 5,
                },
                max_tokens=1024,
                temperature=0.0,
            )
        )
    finally:
        llm.close()
    # "Produce short text queries for a video with a specific title and description." and
    # its like, 17 to 20 tokens a line: cut within a few hundred tokens (before: at 1,024, as
    # the llama.cpp adapter showed the guard only the last 64 tokens)
    assert reply.finish_reason == FINISH_REASON
    assert reply.usage.output_tokens < 300
    assert reply.text.startswith('[ "') and "Produce short text queries" in reply.text
