"""A benchmark run on 16 threads whose questions call a tool that writes the Library
(global_browse memoises its summary): every row and every memo present once, no corrupt table.

What a user sees of concurrent writes; LanceDB's keyed merges absorb these particular races even
without the Library's lock, whose own tests (which fail without it) are in tests/library."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from benchkit import make_lvbench, rows_in, settings_with

from vidagent.app.benchmarks import RunConfig, run_benchmark
from vidagent.library import Library
from vidagent.models.base import Capabilities, ChatRequest, ToolCall
from vidagent.models.client import Models
from vidagent.models.fake import ALL_ROLES, FakeAdapter

QUESTIONS = 32  # on one video: generated clips of equal settings share their content id
OPTIONS = "\n(A) a cat\n(B) a dog"


class Remote(FakeAdapter):
    """A remote endpoint (so 16 requests may run at once) that counts them."""

    capabilities = Capabilities(
        roles=ALL_ROLES, supports_tools=True, supports_images=True, max_images=64, local=False
    )
    lock = threading.Lock()
    now = most = 0

    def chat(self, request: ChatRequest) -> Any:
        with Remote.lock:
            Remote.now += 1
            Remote.most = max(Remote.most, Remote.now)
        try:
            time.sleep(0.05)
            return super().chat(request)
        finally:
            with Remote.lock:
                Remote.now -= 1


def agent(request: ChatRequest) -> ToolCall:
    """Browse once, then answer B. Questions i and i + 16 browse with one query: two threads
    write the same memo at about the same time."""
    if any(m.role == "tool" for m in request.messages):
        return ToolCall("call_answer", "answer", json.dumps({"answer": "B"}))
    question = int(request.messages[1].text.split("Question ")[1].split(":")[0])
    query = f"topic {question % 16}"
    return ToolCall("call_browse", "global_browse", json.dumps({"query": query}))


def test_sixteen_threads_write_the_library_without_loss_or_duplicates(tmp_path: Path) -> None:
    data = make_lvbench(
        tmp_path / "data",
        [
            {
                "key": "k0",
                "uid": str(i),
                "question": f"Question {i}: what is shown?{OPTIONS}",
                "answer": "B",
                "question_type": ["reasoning"],
                "time_reference": "",
            }
            for i in range(QUESTIONS)
        ],
    )
    settings = settings_with(home=tmp_path / "home", default_concurrency=16)
    adapters = {
        "llm": Remote("function", function=agent),
        "vlm": Remote("echo", {"reply": "a summary of the frames"}),
        "embed": FakeAdapter("hash", {"dim": "32"}),
        "asr": FakeAdapter("echo", {"text": "hello"}),
        "ocr": FakeAdapter(),
        "detector": FakeAdapter(),
    }
    library = Library(tmp_path / "lib")
    with Models.from_adapters(adapters, settings) as models:
        summary = run_benchmark(
            RunConfig("lvbench", data, concurrency=16, strategy_options={"browse_frames": 8}),
            settings=settings,
            models=models,
            library=library,
            out=tmp_path / "run",
        )
    assert (summary.ran, summary.errors, summary.concurrency) == (QUESTIONS, 0, 16)
    assert Remote.most > 1  # questions really overlapped
    rows = rows_in(tmp_path / "run" / "predictions.jsonl")
    assert sorted(int(r["id"]) for r in rows) == list(range(QUESTIONS))  # each once
    assert all(r["letter"] == "B" and r["correct"] for r in rows)

    reopened = Library(tmp_path / "lib")  # a fresh handle reads every table whole
    (video,) = reopened.list_videos()
    memos = reopened.artifacts(video.video_id, "browse")
    # one memo per query, none lost, none twice
    assert sorted(m.data["query"] for m in memos) == sorted(f"topic {i}" for i in range(16))
    assert all(m.text == "a summary of the frames" for m in memos)
    assert [c.clip_index for c in reopened.clips(video.video_id)] == [0]


def test_videoagent2_context_is_built_once_for_concurrent_questions(tmp_path: Path) -> None:
    """Questions on one video, eight at a time: the general context is built before them, once."""
    data = make_lvbench(
        tmp_path / "data",
        [
            {
                "key": "k0",
                "uid": str(i),
                "question": f"Question {i}: what is shown?{OPTIONS}",
                "answer": "B",
                "question_type": ["reasoning"],
                "time_reference": "",
            }
            for i in range(8)
        ],
    )

    def llm(request: ChatRequest) -> str:
        if "A long video" in request.messages[-1].text:
            return "A short test video."
        return "Yes, the answer is B, (confidence score = 5)"

    settings = settings_with(home=tmp_path / "home", default_concurrency=8)
    caption = Remote("echo", {"reply": "#C C looks at the wall."})
    agent_llm = Remote("function", function=llm)
    adapters = {
        "llm": agent_llm,
        "vlm": caption,
        "embed": FakeAdapter("hash", {"dim": "32"}),
        "asr": FakeAdapter("echo", {"text": "hello"}),
        "ocr": FakeAdapter(),
        "detector": FakeAdapter(),
    }
    with Models.from_adapters(adapters, settings) as models:
        summary = run_benchmark(
            RunConfig(
                "lvbench",
                data,
                strategy="videoagent2",
                concurrency=8,
                strategy_options={"context": "build"},
            ),
            settings=settings,
            models=models,
            library=Library(tmp_path / "lib"),
            out=tmp_path / "run",
        )
    assert (summary.ran, summary.errors) == (8, 0)
    summaries = [r for r in agent_llm.requests if "A long video" in r.messages[-1].text]
    # the context's own summary: one build, not one per thread (and no index summary, unread)
    assert len(summaries) == 1
    assert all(r["letter"] == "B" for r in rows_in(tmp_path / "run" / "predictions.jsonl"))
