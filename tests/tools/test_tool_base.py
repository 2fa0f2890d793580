from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from factories import video_record

from vidagent.exceptions import ToolInputError, VideoNotFoundError
from vidagent.library import Library
from vidagent.models.base import ToolSpec
from vidagent.tools import Evidence, Observation, Seconds, Toolbox, ToolContext, tool


@tool
def clip_search(
    ctx: ToolContext,
    query: str,
    top_k: int = 16,
    time_range: tuple[Seconds, Seconds] | None = None,
    mode: Literal["visual", "speech"] = "visual",
    video: str | None = None,
) -> Observation:
    """Find the clips that best match a description.

    Searches the clip index of one video.

    Args:
        ctx: Shared state.
        query: What to look for, in words.
        top_k: How many clips to return,
            best first.
        time_range: Only search between these two times.
        mode: Which index to search.
        video: Video id; may be left out when there is one video.

    Returns:
        The clips found, one per line.
    """
    video_id = ctx.resolve_video(video)
    t0, t1 = ctx.clamp_span(video_id, *(time_range or (0.0, ctx.duration(video_id))))
    return Observation(
        text=f"{mode} {query!r} top {top_k}",
        evidence=(Evidence(video_id, t0, t1),),
    )


@tool(name="fail")
def failing(ctx: ToolContext, kind: Literal["input", "value", "runtime"]) -> Observation:
    """Fail on purpose.

    Args:
        kind: Which exception to raise.
    """
    if kind == "input":
        raise ToolInputError("frame 99 is past the end of the video")
    if kind == "value":
        raise ValueError("a ValueError inside a tool is a bug too")
    raise RuntimeError("a bug of ours")


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    lib = Library(tmp_path / "lib")
    lib.put_video(video_record("aaaa1111", 120.0))
    return ToolContext(lib, None, ["aaaa1111"])


TIME = {"type": ["number", "string"], "description": "seconds or HH:MM:SS"}


def test_schema_comes_from_signature_and_docstring() -> None:
    assert clip_search.schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {"type": "string", "description": "What to look for, in words."},
            "top_k": {
                "type": "integer",
                "default": 16,
                "description": "How many clips to return, best first.",
            },
            "time_range": {
                "anyOf": [
                    {"type": "array", "prefixItems": [TIME, TIME], "minItems": 2, "maxItems": 2},
                    {"type": "null"},
                ],
                "default": None,
                "description": "Only search between these two times.",
            },
            "mode": {
                "type": "string",
                "enum": ["visual", "speech"],
                "default": "visual",
                "description": "Which index to search.",
            },
            "video": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "description": "Video id; may be left out when there is one video.",
            },
        },
        "required": ["query"],
    }
    assert clip_search.spec() == ToolSpec(
        "clip_search",
        "Find the clips that best match a description.\n\nSearches the clip index of one video.",
        clip_search.schema,
    )
    assert failing.name == "fail"
    assert failing.schema["required"] == ["kind"]


BAD_TOOLS = [
    ("no_doc", "needs a docstring"),
    ("untyped", "'n' needs a type annotation"),
    ("undocumented", "'n' needs a description"),
    ("no_ctx", "first parameter must be 'ctx: ToolContext'"),
    ("wrong_return", "must be annotated to return Observation"),
    ("stale_doc", r"documents unknown parameters \['m'\]"),
]


def test_registration_fails_on_each_missing_piece() -> None:
    def no_doc(ctx: ToolContext, n: int) -> Observation:
        return Observation("")

    def untyped(ctx: ToolContext, n) -> Observation:
        """Untyped.

        Args:
            n: A number.
        """
        return Observation("")

    def undocumented(ctx: ToolContext, n: int) -> Observation:
        """No Args section."""
        return Observation("")

    def no_ctx(n: int) -> Observation:
        """No context.

        Args:
            n: A number.
        """
        return Observation("")

    def wrong_return(ctx: ToolContext, n: int) -> str:
        """Returns text.

        Args:
            n: A number.
        """
        return ""

    def stale_doc(ctx: ToolContext, n: int) -> Observation:
        """Documents a parameter it lost.

        Args:
            n: A number.
            m: Gone.
        """
        return Observation("")

    fns: dict[str, Callable[..., Any]] = {
        f.__name__: f for f in (no_doc, untyped, undocumented, no_ctx, wrong_return, stale_doc)
    }
    for name, message in BAD_TOOLS:
        with pytest.raises(TypeError, match=f"tool '{name}'.*{message}"):
            tool(fns[name])


@pytest.mark.parametrize("value", ["00:01:30", "1:30", "90", 90, 90.0])
def test_times_are_seconds_or_hhmmss(ctx: ToolContext, value: object) -> None:
    obs = clip_search(ctx, {"query": "dog", "time_range": [value, 100]})
    assert not obs.error, obs.text
    assert obs.evidence == (Evidence("aaaa1111", 90.0, 100.0),)


def test_spans_are_ordered_and_clamped_to_the_video(ctx: ToolContext) -> None:
    obs = clip_search(ctx, {"query": "dog", "time_range": ["00:05:00", 30]})
    assert obs.evidence == (Evidence("aaaa1111", 30.0, 120.0),)
    assert ctx.clamp("aaaa1111", -5) == 0.0
    assert ctx.clamp("aaaa1111", 500) == 120.0
    assert ctx.clamp_span("aaaa1111", 200, -1) == (0.0, 120.0)


def test_bad_arguments_come_back_as_an_observation(ctx: ToolContext) -> None:
    obs = clip_search(
        ctx, {"top_k": "many", "time_range": ["soon", 5], "mode": "audio", "limit": 3}
    )
    assert obs.error
    assert obs.text == (
        "Invalid arguments for clip_search:\n"
        "- 'query' is required\n"
        "- 'top_k': Input should be a valid integer, unable to parse string as an integer"
        " (got 'many')\n"
        "- 'time_range[0]': 'soon' is not a time; use seconds or HH:MM:SS (got 'soon')\n"
        "- 'mode': Input should be 'visual' or 'speech' (got 'audio')\n"
        "- 'limit' is not an argument of this tool\n"
        "Expected: clip_search(query: string, top_k: integer = 16,"
        ' time_range: [time, time] | null = null, mode: "visual"|"speech" = "visual",'
        " video: string | null = null)"
    )


def test_json_text_arguments(ctx: ToolContext) -> None:
    obs = clip_search(ctx, '{"query": "dog", "top_k": 3, "time_range": [0, "00:00:10"]}')
    assert obs == Observation("visual 'dog' top 3", evidence=(Evidence("aaaa1111", 0.0, 10.0),))
    broken = clip_search(ctx, '{"query": "dog"')
    assert broken.error
    assert "not valid JSON" in broken.text
    not_object = clip_search(ctx, "[1, 2]")
    assert not_object.error
    assert "must be a JSON object, not list" in not_object.text


def test_video_refs_resolve_within_scope(ctx: ToolContext) -> None:
    ctx.library.put_video(video_record("bbbb2222", 60.0))
    ctx.video_ids.append("bbbb2222")
    assert ctx.resolve_video("bbbb") == "bbbb2222"
    assert ctx.resolve_video("aaaa1111.mp4") == "aaaa1111"
    with pytest.raises(VideoNotFoundError, match="choose one of: aaaa1111, bbbb2222"):
        ctx.resolve_video("cccc")
    obs = clip_search(ctx, {"query": "dog"})
    assert obs.error
    assert obs.text == (
        "clip_search failed: several videos are in scope (aaaa1111, bbbb2222); say which one"
    )
    assert clip_search(ctx, {"query": "dog", "video": "bbbb"}).evidence == (
        Evidence("bbbb2222", 0.0, 60.0),
    )


def test_toolbox_calls_by_name(ctx: ToolContext) -> None:
    box = Toolbox([clip_search, failing])
    assert [s.name for s in box.specs()] == ["clip_search", "fail"]
    assert box.call(ctx, "clip_search", {"query": "cat"}).text == "visual 'cat' top 16"
    unknown = box.call(ctx, "frame_inspect", {})
    assert unknown.error
    assert unknown.text == "Unknown tool 'frame_inspect'; available tools: clip_search, fail"
    with pytest.raises(ValueError, match="two tools are named 'fail'"):
        box.add(failing)


def test_fixable_errors_become_observations_and_bugs_propagate(ctx: ToolContext) -> None:
    obs = failing(ctx, {"kind": "input"})
    assert obs == Observation("fail failed: frame 99 is past the end of the video", error=True)
    with pytest.raises(RuntimeError, match="a bug of ours"):
        failing(ctx, {"kind": "runtime"})
    with pytest.raises(ValueError, match="is a bug too"):
        failing(ctx, {"kind": "value"})
