"""Shared helpers for agent tests: an indexed Library built with fast fake models, and hubs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factories import INDEX_SPECS

from vidagent.config import Settings, load_settings
from vidagent.ingest import index_video
from vidagent.library import Library
from vidagent.models.base import Capabilities, ToolCall
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter

JSON_ONLY = Capabilities(
    roles=frozenset({"llm"}), supports_tools=False, supports_json_schema=True, local=True
)


def build_library(root: Path, *videos: Path) -> tuple[Library, list[str], Settings]:
    settings = load_settings(INDEX_SPECS)
    library = Library(root)
    ids = []
    for video in videos:
        result = index_video(video, library=library, settings=settings)
        assert result.video is not None
        ids.append(result.video.video_id)
    return library, ids, settings


def hub(settings: Settings, llm: FakeAdapter, vlm: FakeAdapter | None = None) -> Models:
    vlm = vlm or FakeAdapter.function(lambda req: f"saw {req.image_count()} images")
    return Models.from_adapters(
        {"llm": llm, "vlm": vlm, "embed": FakeAdapter("hash", {"dim": "32"})}, settings
    )


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(f"call_{name}", name, json.dumps(arguments))


def action(name: str, thought: str = "", **arguments: Any) -> str:
    """A JSON-action reply."""
    return json.dumps({"thought": thought, "action": {"name": name, "arguments": arguments}})
