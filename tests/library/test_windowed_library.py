"""A Library read through a time window: what a question limited to ``--last`` may see."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from factories import INDEX_SPECS
from growkit import grow

from vidagent.config import load_settings
from vidagent.ingest import index_video
from vidagent.library import Library
from vidagent.library.graph import EntityEdge, EntityGraph, EntityNode
from vidagent.library.schema import Artifact
from vidagent.library.window import WindowedLibrary, graph_within
from vidagent.models.client import Models


@pytest.fixture(scope="module")
def indexed(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 12 s clip indexed with the fake models: clips 0-5, 5-10, 10-12 s."""
    root = tmp_path_factory.mktemp("window") / "library"
    result = index_video(small_video, library=Library(root), settings=load_settings(INDEX_SPECS))
    assert result.video is not None
    return root


@pytest.fixture
def library(indexed: Path, tmp_path: Path) -> Library:
    shutil.copytree(indexed, tmp_path / "library")
    return Library(tmp_path / "library")


def query_vector(text: str) -> np.ndarray:
    return Models(load_settings(INDEX_SPECS)).client("embed").embed([text]).vectors[0]


def test_every_read_of_a_windowed_video_is_cut_to_its_window(library: Library) -> None:
    (vid,) = library.listed_ids()
    assert [c.clip_index for c in library.clips(vid)] == [0, 1, 2]
    assert library.global_summary(vid) and library.artifact(vid, "summary", "global")
    late = WindowedLibrary(library, {vid: (10.0, 12.0)})
    assert late.window(vid) == (10.0, 12.0) and library.window(vid) is None
    assert [c.clip_index for c in late.clips(vid)] == [2]
    assert late.clips(vid, 0.0, 5.0) == [] and late.transcript(vid, 0.0, 5.0) == []
    assert [s.t0 for s in late.transcript(vid)] == [0.0]  # one segment over the whole clip
    frames = [f.t for f in late.frames(vid)]
    assert frames and all(10.0 <= t <= 12.0 for t in frames) and library.frames(vid)[0].t < 10
    hits = late.search_clips(query_vector("hello"), video_ids=[vid], k=5)
    assert [h.clip.clip_index for h in hits] == [2]
    keys = late.clip_rows([(vid, 0), (vid, 2)])
    assert list(keys) == [(vid, 2)]
    # the video-level summary covers times outside the window: hidden
    assert late.global_summary(vid) == "" and late.artifact(vid, "summary", "global") is None
    assert all(a.kind != "summary" for a in late.artifacts(vid))
    early = WindowedLibrary(library, {vid: (0.0, 7.0)})
    assert early.get_video(vid).duration == 7.0 and library.get_video(vid).duration == 12.0
    assert [c.clip_index for c in early.clips(vid)] == [0, 1]
    assert {h.clip.clip_index for h in early.search_clips(query_vector("x"), k=5)} == {0, 1}


def test_a_window_over_all_of_a_growing_video_fixes_its_live_edge(library: Library) -> None:
    (vid,) = library.listed_ids()
    asked = WindowedLibrary(library, {vid: (0.0, 12.0)}, whole=[vid])
    grow(library, vid, 22.0)  # a watcher adds two clips while the question runs
    assert [c.clip_index for c in library.clips(vid)] == [0, 1, 2, 3, 4]
    assert [c.clip_index for c in asked.clips(vid)] == [0, 1, 2]
    assert asked.get_video(vid).duration == 12.0 and library.get_video(vid).duration == 22.0
    assert asked.global_summary(vid) == library.global_summary(vid) != ""  # it held all of it
    hits = asked.search_clips(query_vector("late clip"), video_ids=[vid], k=10)
    assert sorted(h.clip.clip_index for h in hits) == [0, 1, 2]


def test_registry_and_context_keep_what_the_window_holds(library: Library) -> None:
    (vid,) = library.listed_ids()
    registry = {
        "early": {"name": "a", "temporal_spans": [[0.0, 5.0]]},
        "late": {"name": "b", "temporal_spans": [[0.0, 2.0], [10.0, 12.0]]},
        "unplaced": {"name": "c"},
    }
    library.put_artifact(Artifact(vid, "registry", "", "", registry))
    segments = [[0.0, 5.0, "start"], [5.0, 10.0, "middle"], [10.0, 12.0, "end"]]
    library.put_artifact(Artifact(vid, "context", "k", "WHOLE SUMMARY", {"segments": segments}))
    late = WindowedLibrary(library, {vid: (10.0, 12.0)})
    assert sorted(late.registry(vid)) == ["late", "unplaced"]
    context = late.artifact(vid, "context", "k")
    assert context is not None and context.text == ""
    assert context.data["segments"] == [[10.0, 12.0, "end"]]


def test_memoised_answers_are_kept_per_window(library: Library) -> None:
    (vid,) = library.listed_ids()
    built: list[str] = []

    def build(text: str) -> Callable[[], tuple[str, dict[str, object]]]:
        def made() -> tuple[str, dict[str, object]]:
            built.append(text)
            return text, {}

        return made

    for window, text in [((0.0, 6.0), "early"), ((6.0, 12.0), "late"), ((0.0, 6.0), "again")]:
        found, _ = WindowedLibrary(library, {vid: window}).memo(
            vid, "browse", "q", producer="p", inputs_hash="h", build=build(text)
        )
        assert found.text == ("early" if text == "again" else text)
    assert built == ["early", "late"]


def test_the_entity_graph_keeps_what_meets_the_window() -> None:
    nodes = {
        "n1": EntityNode("n1", "human", "cook", timeline=[(0.0, 3.0)]),
        "n2": EntityNode("n2", "human", "helper", timeline=[(1.0, 2.0), (10.0, 11.0)]),
        "n3": EntityNode(
            "n3",
            "human",
            "guest",
            timeline=[(9.0, 12.0)],
            actions=[
                {"action": "waves", "t0": 1.0, "t1": 2.0},
                {"action": "sits", "t0": 10.0, "t1": 11.0},
            ],
        ),
    }
    edges = [
        EntityEdge("n1", "n2", "interaction", "holds", (1.0, 2.0)),
        EntityEdge("n3", "n2", "interaction", "takes", (10.0, 11.0)),
    ]
    cut = graph_within(EntityGraph("v", nodes, edges), (9.5, 12.0))
    assert sorted(cut.nodes) == ["n2", "n3"]
    assert cut.nodes["n2"].timeline == [(10.0, 11.0)]
    assert [a["action"] for a in cut.nodes["n3"].actions] == ["sits"]
    assert [e.relation for e in cut.edges] == ["takes"]
    assert nodes["n2"].timeline == [(1.0, 2.0), (10.0, 11.0)]  # the stored graph is untouched
