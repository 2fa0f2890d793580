"""Derived artefacts: typed round trip, keys, memo, deletion, and the read views."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import video_record

from vidagent.library import Artifact, ClipRow, Library
from vidagent.library.views import Line, caption_lines, registry_view

REGISTRY = {
    "subject_1": {
        "name": "Ann",
        "appearance": ["red jacket"],
        "identity": ["presenter"],
        "first_seen": "00:00:01",
        "first_clip": 0,
        "temporal_spans": [[0.0, 9.5]],
    }
}


def test_an_artifact_comes_back_as_it_was_put(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    data = {"levels": [[{"t0": 0.0, "t1": 6.0, "text": "part one ü"}]], "n": 3, "ok": True}
    put = lib.put_artifact(Artifact("v1", "summary", "global", "The video.", data, "llm|abc", "h1"))
    assert put.updated_at  # set by the Library

    again = Library(tmp_path / "lib").artifact("v1", "summary", "global")
    assert again == put
    assert again is not None and again.data == data and isinstance(again.data, dict)
    assert (again.text, again.producer, again.inputs_hash) == ("The video.", "llm|abc", "h1")


def test_kind_and_key_keep_artifacts_apart_and_a_put_replaces_by_key(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    lib.put_artifact(Artifact("v1", "summary", "global", "S1"))
    lib.put_artifact(Artifact("v1", "browse", "global", "B"))  # same key, other kind
    lib.put_artifact(Artifact("v1", "browse", "h2", "B2"))
    lib.put_artifact(Artifact("v2", "summary", "global", "other video"))
    lib.put_artifact(Artifact("v1", "registry", data=REGISTRY))
    lib.put_artifact(Artifact("v1", "summary", "global", "S2"))  # replaces S1

    assert [(a.kind, a.key, a.text) for a in lib.artifacts("v1")] == [
        ("browse", "global", "B"),
        ("browse", "h2", "B2"),
        ("registry", "", ""),
        ("summary", "global", "S2"),
    ]
    assert [a.key for a in lib.artifacts("v1", "browse")] == ["global", "h2"]
    assert lib.artifact("v1", "browse", "missing") is None
    assert lib.artifact("v1", "context", "global") is None
    assert lib.global_summary("v1") == "S2" and lib.global_summary("v2") == "other video"
    assert lib.registry("v1") == REGISTRY
    assert lib.registry("v2") == {} and lib.global_summary("v3") == ""
    rows = lib.table("artifacts").to_arrow().to_pylist()
    assert len(rows) == 5  # six puts, one of them a replacement


def test_unknown_kinds_and_non_json_payloads_are_refused(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    with pytest.raises(ValueError, match="unknown artifact kind 'event'"):
        lib.put_artifact(Artifact("v1", "event", "x"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown artifact kind"):
        lib.artifacts("v1", "summaries")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not JSON-able"):
        lib.put_artifact(Artifact("v1", "summary", "x", data={"when": object()}))
    with pytest.raises(TypeError, match="must be a dict"):
        lib.put_artifact(Artifact("v1", "summary", "x", data=[1, 2]))  # type: ignore[arg-type]
    assert lib.artifacts("v1") == []


def test_memo_builds_once_and_rebuilds_when_producer_or_inputs_change(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    builds: list[str] = []

    def build(text: str):  # type: ignore[no-untyped-def]
        def run() -> tuple[str, dict[str, list[int]]]:
            builds.append(text)
            return text, {"segments": [len(builds)]}

        return run

    def memo(producer: str, inputs: str, text: str) -> tuple[Artifact, bool]:
        return lib.memo(
            "v1",
            "context",
            "videoagent2:4s@1fps",
            producer=producer,
            inputs_hash=inputs,
            build=build(text),
        )

    first, built = memo("vlm|llm", "in1", "C1")
    assert built and (first.text, first.data) == ("C1", {"segments": [1]})
    hit, built = memo("vlm|llm", "in1", "never")
    assert not built and hit == first
    assert builds == ["C1"]

    changed_model, built = memo("other-vlm|llm", "in1", "C2")
    assert built and changed_model.text == "C2" and changed_model.producer == "other-vlm|llm"
    changed_inputs, built = memo("other-vlm|llm", "in2", "C3")
    assert built and changed_inputs.inputs_hash == "in2"
    assert builds == ["C1", "C2", "C3"]
    stored = Library(tmp_path / "lib").artifact("v1", "context", "videoagent2:4s@1fps")
    assert stored == changed_inputs  # the latest build replaced the earlier ones
    assert len(lib.artifacts("v1")) == 1


def test_memo_does_not_store_when_the_build_fails(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")

    def fail() -> tuple[str, dict[str, str]]:
        raise RuntimeError("model down")

    with pytest.raises(RuntimeError, match="model down"):
        lib.memo("v1", "browse", "k", producer="p", inputs_hash="i", build=fail)
    assert lib.artifact("v1", "browse", "k") is None


def test_delete_artifacts_by_kind_and_keys(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    for key in ("a", "b", "c"):
        lib.put_artifact(Artifact("v1", "browse", key))
    lib.put_artifact(Artifact("v1", "summary", "global", "kept"))
    lib.put_artifact(Artifact("v2", "browse", "a"))

    lib.delete_artifacts("v1", "browse", ["a", "c"])
    assert [a.key for a in lib.artifacts("v1", "browse")] == ["b"]
    lib.delete_artifacts("v1", "browse", [])  # nothing named: nothing deleted
    assert [a.key for a in lib.artifacts("v1", "browse")] == ["b"]
    lib.delete_artifacts("v1", "browse")
    assert lib.artifacts("v1", "browse") == []
    assert lib.global_summary("v1") == "kept"
    assert [a.key for a in lib.artifacts("v2")] == ["a"]


def test_removing_a_video_removes_its_artifacts(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    for vid in ("v1", "v2"):
        lib.put_clips(vid, [ClipRow(vid, 0, 0.0, 5.0)])
        lib.put_artifact(Artifact(vid, "registry", data=REGISTRY))
        lib.put_video(video_record(vid))
    lib.remove_video("v1")
    assert lib.artifacts("v1") == [] and lib.registry("v2") == REGISTRY


def test_read_views() -> None:
    clips = [
        ClipRow("v", 0, 0.0, 4.0, caption="A man\n walks  in."),
        ClipRow("v", 1, 4.0, 6.5, caption="  "),  # blank (e.g. content-filtered): left out
        ClipRow("v", 2, 6.5, 8.0, caption="He sits."),
    ]
    assert [str(line) for line in caption_lines(clips)] == [
        "0s-4s: A man walks in.",
        "6.5s-8s: He sits.",
    ]
    assert caption_lines(clips)[0] == Line(0.0, 4.0, "A man\n walks  in.")
    assert registry_view(REGISTRY) == (
        '{"subject_1": {"name": "Ann", "appearance": ["red jacket"], '
        '"identity": ["presenter"], "first_seen": "00:00:01"}}'
    )
