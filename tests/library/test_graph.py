"""AVI's entity graph: extractor replies, construction, super-nodes, importance, retrieval, storage."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from factories import video_record

from vidagent.library import Library
from vidagent.library.graph import EntityGraph
from vidagent.library.graph_extract import (
    Extraction,
    merge_extractions,
    parse_extraction,
    parse_seconds,
)

CLIPS_4 = [(i, 5.0 * i, 5.0 * i + 5) for i in range(4)]  # 0-20 s


def subject(
    sid: str | None,
    name: str,
    timeline: list[Any],
    attrs: list[str] | None = None,
    actions: list[Any] | None = None,
) -> dict[str, Any]:
    return {
        "subject_id": sid,
        "subject_name": name,
        "appearance_timeline": timeline,
        "attributes": attrs or [],
        "actions_events": actions or [],
    }


def interaction(who: list[str], text: str, t: list[Any]) -> dict[str, Any]:
    return {"subjects_involved": who, "interaction_description": text, "timestamp": t}


def reply(subjects: list[dict[str, Any]], interactions: list[dict[str, Any]]) -> str:
    return json.dumps({"video_analysis": subjects, "interactions": interactions})


def extraction(subjects: list[dict[str, Any]], interactions: list[dict[str, Any]]) -> Extraction:
    found = parse_extraction(reply(subjects, interactions))
    assert found is not None
    return found


# -- extractor replies --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("00:01:05", 65.0),
        ("1:05", 65.0),
        ("12.5s", 12.5),
        ("12.5", 12.5),
        (7, 7.0),
        (3.25, 3.25),
        ("01:00:00.5", 3600.5),
        ("40 seconds", 40.0),
        ("unknown", None),
        (None, None),
        (-3, None),
        (True, None),
    ],
)
def test_times_are_read_in_every_form_models_write(value: Any, seconds: float | None) -> None:
    assert parse_seconds(value) == seconds


def test_a_fenced_reply_with_prose_around_it_is_read() -> None:
    body = reply(
        [
            subject(
                "Subject_1",
                "Man in red shirt",
                [["00:00:00", "00:00:12"]],
                ["red shirt"],
                [{"action": "sits down", "timestamp": ["3s", "5s"]}],
            ),
            subject(None, "Anna", [[5, 20], ["0:18", "0:25"]]),
        ],
        [interaction(["Subject_1", "Anna"], "Subject_1 gives Anna a book", ["00:00:06", 9])],
    )
    found = parse_extraction(f"Here is the analysis:\n```json\n{body}\n```\nHope it helps!")
    assert found is not None
    man, anna = found.subjects
    assert (man.subject_id, man.name, man.timeline) == ("Subject_1", "Man in red shirt", [(0, 12)])
    assert [(a.action, a.span) for a in man.actions] == [("sits down", (3.0, 5.0))]
    assert (anna.subject_id, anna.timeline) == (None, [(5.0, 25.0)])  # overlapping: merged
    (meeting,) = found.interactions
    assert (meeting.participants, meeting.span) == (["Subject_1", "Anna"], (6.0, 9.0))


def test_a_reply_without_the_object_is_not_an_extraction() -> None:
    assert parse_extraction("I cannot help with that.") is None
    assert parse_extraction('{"answer": "B"}') is None
    assert parse_extraction('{"video_analysis": [], "interactions": []}') == Extraction()


# -- construction -------------------------------------------------------------------------------


def test_nodes_edges_and_an_event_node_for_a_group_interaction() -> None:
    found = extraction(
        [
            subject(
                "Subject_1",
                "Man in red shirt",
                [[0, 12]],
                ["red shirt"],
                [{"action": "sits down", "timestamp": [3, 5]}],
            ),
            subject(None, "Anna", [[5, 9]]),
            subject(None, "Bob", [[15, 15]]),
        ],
        [
            interaction(["Subject_1", "Anna"], "Subject_1 gives Anna a book", [6, 9]),
            interaction(["Anna", "Subject_1", "Bob"], "Anna greets both", [15, 16]),
        ],
    )
    g = EntityGraph.build("v", found, CLIPS_4)
    assert {i: (n.kind, n.name, n.clips) for i, n in g.nodes.items()} == {
        "Subject_1": ("human", "Man in red shirt", [0, 1, 2]),
        "H_1": ("human", "Anna", [1]),
        "H_2": ("human", "Bob", [3]),  # an instant at 15 s is in the clip 15-20 s
        "E_1": ("event", "Anna greets both", [3]),
    }
    assert g.nodes["Subject_1"].actions == [{"action": "sits down", "t0": 3.0, "t1": 5.0}]
    assert [(e.src, e.dst, e.kind, e.relation, e.span) for e in g.edges] == [
        ("Subject_1", "H_1", "interaction", "Subject_1 gives Anna a book", (6.0, 9.0)),
        ("H_1", "Subject_1", "interaction", "Anna greets both", (15.0, 16.0)),
        ("H_1", "H_2", "interaction", "Anna greets both", (15.0, 16.0)),
        ("H_1", "E_1", "participant", "takes part in", (15.0, 16.0)),
        ("Subject_1", "E_1", "participant", "takes part in", (15.0, 16.0)),
        ("H_2", "E_1", "participant", "takes part in", (15.0, 16.0)),
    ]
    assert g.nodes["E_1"].members == ["H_1", "Subject_1", "H_2"]


def test_windows_are_merged_by_id_then_by_name_and_repeated_interactions_kept_once() -> None:
    first = extraction(
        [
            subject("Subject_1", "Man in red shirt", [[0, 100]], ["red shirt"]),
            subject(None, "Woman in blue", [[50, 290]], ["blue dress"]),
        ],
        [interaction(["Subject_1", "Woman in blue"], "they shake hands", [270, 280])],
    )
    second = extraction(
        [
            subject("Subject_1", "man wearing red", [[270, 400]], ["Red shirt", "glasses"]),
            subject(None, "woman in blue!", [[280, 330]], ["smiling"]),
        ],
        [
            interaction(
                ["Woman in blue", "Subject_1"], "the man and woman shake hands", [275, 285]
            ),
            interaction(["Subject_1", "Woman in blue"], "they wave goodbye", [390, 395]),
        ],
    )
    merged = merge_extractions([first, second])
    man, woman = merged.subjects
    assert (man.subject_id, man.name, man.timeline) == (
        "Subject_1",
        "Man in red shirt",
        [(0, 100), (270, 400)],
    )
    assert man.attributes == ["red shirt", "glasses"]
    assert (woman.subject_id, woman.timeline) == (None, [(50, 330)])
    assert woman.attributes == ["blue dress", "smiling"]
    assert [(i.description, i.span) for i in merged.interactions] == [
        ("they shake hands", (270, 285)),
        ("they wave goodbye", (390, 395)),
    ]


def star(center: str, others: list[str], text: str) -> list[dict[str, Any]]:
    return [interaction([center, o], text, [10, 20]) for o in others]


def grouped_graph() -> tuple[EntityGraph, dict[str, np.ndarray]]:
    """Two groups of four (a band, a kitchen) and a pair, no relations between them."""
    band = [
        subject(f"B{i}", f"band member {i}", [[10 * i, 10 * i + 30]], attrs)
        for i, attrs in enumerate(
            [["Red shirt", "guitar"], ["red shirt"], ["red shirt", "drums"], ["hat"]]
        )
    ]
    kitchen = [
        subject(f"K{i}", f"cook {i}", [[200 + i, 260]], ["apron", "White hat"]) for i in range(4)
    ]
    pair = [subject("P0", "passer-by", [[300, 310]]), subject("P1", "dog walker", [[300, 320]])]
    found = extraction(
        band + kitchen + pair,
        star("B0", ["B1", "B2", "B3"], "plays with")
        + star("K0", ["K1", "K2", "K3"], "cooks with")
        + [interaction(["P0", "P1"], "nods to", [305, 306])],
    )
    g = EntityGraph.build("v", found, [(i, 5.0 * i, 5.0 * i + 5) for i in range(70)])
    # The band and the kitchen have the very same embedding: only Eq. 10's two-hop mask
    # (no path joins them) keeps them apart.
    same, other = np.eye(8, dtype=np.float32)[0], np.eye(8, dtype=np.float32)[1]
    vectors = {n: same for n in g.nodes if n[0] in "BK"} | {"P0": other, "P1": other}
    return g, vectors


def test_dense_groups_of_more_than_three_become_super_nodes() -> None:
    g, vectors = grouped_graph()
    assert g.add_super_nodes(vectors) == ["S_1", "S_2"]
    band, kitchen = g.nodes["S_1"], g.nodes["S_2"]
    assert (band.kind, band.members) == ("super", ["B0", "B1", "B2", "B3"])
    assert band.attributes == ["red shirt"]  # 3 of 4 share it; "guitar" only 1 of 4
    assert band.timeline == [(0.0, 60.0)]  # the union of 0-30, 10-40, 20-50, 30-60
    assert band.name == "group of band member 0, band member 1, band member 2, band member 3"
    assert kitchen.members == ["K0", "K1", "K2", "K3"]
    assert kitchen.attributes == ["apron", "white hat"]
    member_of = [(e.src, e.dst) for e in g.edges if e.kind == "member_of"]
    assert member_of == [(f"B{i}", "S_1") for i in range(4)] + [(f"K{i}", "S_2") for i in range(4)]
    assert "P0" not in band.members + kitchen.members  # the pair is a cluster too small


def test_fewer_than_six_people_are_not_clustered() -> None:
    g = EntityGraph.build(
        "v", extraction([subject(f"S{i}", f"p{i}", []) for i in range(5)], []), CLIPS_4
    )
    assert g.add_super_nodes({n: np.ones(3) for n in g.nodes}) == []
    assert "fewer than 6" in g.notes[-1]


def chain() -> EntityGraph:
    """Anna -> Bob -> Carl -> Dora over four 5 s clips (0-20 s)."""
    found = extraction(
        [
            subject("A", "Anna", [[0, 10]]),
            subject("B", "Bob", [[0, 20]]),
            subject("C", "Carl", [[5, 7]]),
            subject("D", "Dora", []),
        ],
        [
            interaction(["A", "B"], "Anna calls Bob", [1, 2]),
            interaction(["B", "C"], "Bob pays Carl", [6, 7]),
            interaction(["C", "D"], "Carl hugs Dora", [18, 19]),
        ],
    )
    g = EntityGraph.build("v", found, CLIPS_4)
    for k, n in enumerate(g.nodes.values()):
        n.name_vector = np.eye(4, dtype=np.float32)[k]
    g.score()
    return g


def test_importance_terms_match_the_papers_formulas() -> None:
    g = chain()
    raw = {"A": 2 / 4 * math.log(11), "B": 4 / 4 * math.log(21), "C": 1 / 4 * math.log(3), "D": 0}
    for node_id, value in raw.items():
        n = g.nodes[node_id]
        assert n.freq_raw == pytest.approx(value)
        assert n.freq == pytest.approx(value / raw["B"])  # min-max: min is 0, max is Bob's
    # Degrees 1, 2, 2, 1 (max 2); betweenness on the path: Bob and Carl each lie on 2 of the
    # 3 pairs of the others.
    expected = {"A": (0.5, 0.0), "B": (1.0, 2 / 3), "C": (1.0, 2 / 3), "D": (0.5, 0.0)}
    for node_id, (degree, between) in expected.items():
        n = g.nodes[node_id]
        assert (n.degree, n.betweenness) == pytest.approx((degree, between))
        assert n.centrality == pytest.approx(0.5 * degree + 0.5 * between)
    w = g.weights(np.array([1.0, 0.0, 0.0, 0.0]))  # Anna's name vector: query_rel 1 for her
    assert w["A"] == pytest.approx(0.4 * raw["A"] / raw["B"] + 0.3 * 0.25 + 0.3 * 1.0)
    assert w["D"] == pytest.approx(0.3 * 0.25)


def test_two_named_entities_get_the_path_between_them() -> None:
    found = chain().retrieve("How is Anna connected to Dora?", None)
    assert found.mode == "path"
    assert found.text.splitlines()[:4] == [
        "Paths between A (Anna), D (Dora):",
        "(A: Anna) --[Anna calls Bob]--> (B: Bob) @ [1s, 2s]",
        "(B: Bob) --[Bob pays Carl]--> (C: Carl) @ [6s, 7s]",
        "(C: Carl) --[Carl hugs Dora]--> (D: Dora) @ [18s, 19s]",
    ]
    assert found.nodes == ["A", "D", "B", "C"]
    assert found.spans == [(1.0, 2.0), (6.0, 7.0), (18.0, 19.0)]
    assert "- A: Anna (human) w=" in found.text and "appears: [0s, 10s]" in found.text


def test_one_seed_walks_two_hops_by_importance_and_prunes_the_least_important() -> None:
    found = chain().retrieve("What does Bob do?", None)
    assert found.mode == "bfs"
    # Carl (w 0.29) before Anna (0.23); Dora (0.075) is under the 25th percentile (0.19).
    assert found.text.splitlines()[:3] == [
        "Around B (Bob) (2 hops, by importance):",
        "(B: Bob) --[Bob pays Carl]--> (C: Carl) @ [6s, 7s]",
        "(A: Anna) --[Anna calls Bob]--> (B: Bob) @ [1s, 2s]",
    ]
    assert found.nodes == ["B", "C", "A"]
    assert "Dora" not in found.text


def test_the_query_embedding_picks_the_seeds() -> None:
    g = chain()
    found = g.retrieve("the caller", np.array([1.0, 0.0, 0.0, 0.0]), max_edges=1)
    assert found.nodes[0] == "A" and found.mode == "bfs"
    assert found.text.splitlines()[1] == "(A: Anna) --[Anna calls Bob]--> (B: Bob) @ [1s, 2s]"
    assert len([line for line in found.text.splitlines() if "--[" in line]) == 1  # max_edges


def test_an_empty_graph_says_so() -> None:
    found = EntityGraph("v").retrieve("who?", np.ones(3))
    assert found.text.startswith("The entity graph of video v is empty")
    assert (found.spans, found.nodes, found.mode) == ([], [], "empty")


# -- storage ------------------------------------------------------------------------------------


def stored_rows(lib: Library, table: str) -> list[dict[str, Any]]:
    return lib.table(table).to_arrow().to_pylist() if lib.has_table(table) else []


def test_a_graph_round_trips_through_the_library(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    lib.put_video(video_record("v1", 20.0))
    assert lib.entity_graph("v1") is None  # the graph stage never ran
    g, vectors = grouped_graph()
    g.add_super_nodes(vectors)
    for n in g.nodes.values():
        n.name_vector = np.linspace(0, 1, 5, dtype=np.float32)
    g.score()
    lib.put_entity_graph("v1", g, "fake:x|abcd1234|embed=fake:hash", "inputs")

    back = lib.entity_graph("v1")
    assert back is not None
    assert back.to_json() == g.to_json()
    assert [e.to_json() for e in back.edges] == [e.to_json() for e in g.edges]
    assert all(np.array_equal(back.nodes[i].name_vector, g.nodes[i].name_vector) for i in g.nodes)
    rows = stored_rows(lib, "entities")
    assert {r["producer"] for r in rows} == {"fake:x|abcd1234|embed=fake:hash"}
    assert all(r["created_at"] for r in rows)
    assert back.retrieve("band member 0", None).text == g.retrieve("band member 0", None).text


def test_a_new_graph_replaces_the_old_and_a_failed_write_keeps_it(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    lib.put_video(video_record("v1", 20.0))
    old = chain()
    lib.put_entity_graph("v1", old, "p1")

    class Crash(Exception):
        pass

    def crash() -> None:
        raise Crash

    smaller = EntityGraph.build("v1", extraction([subject("Z", "Zoe", [[0, 5]])], []), CLIPS_4)
    with pytest.raises(Crash):
        lib.put_entity_graph("v1", smaller, "p2", before_switch=crash)
    kept = lib.entity_graph("v1")
    assert kept is not None and kept.to_json() == old.to_json()

    lib.put_entity_graph("v1", smaller, "p2")
    now = lib.entity_graph("v1")
    assert now is not None and list(now.nodes) == ["Z"] and now.edges == []
    assert [r["node_id"] for r in stored_rows(lib, "entities")] == ["Z"]  # no orphans left
    assert stored_rows(lib, "relations") == []
    pointer = lib.artifact("v1", "graph")
    assert pointer is not None and pointer.producer == "p2"


def test_removing_a_video_removes_its_graph_only(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    for vid in ("v1", "v2"):
        lib.put_video(video_record(vid, 20.0))
        lib.put_entity_graph(vid, chain(), "p")
    lib.remove_video("v1")
    assert {r["video_id"] for r in stored_rows(lib, "entities")} == {"v2"}
    assert {r["video_id"] for r in stored_rows(lib, "relations")} == {"v2"}
    assert lib.entity_graph("v1") is None and lib.entity_graph("v2") is not None


def test_an_old_library_takes_a_graph_without_a_migration(tmp_path: Path) -> None:
    from test_migrations import write_v1_library

    from vidagent.library.manifest import SCHEMA_VERSION

    root = tmp_path / "lib"
    write_v1_library(root)  # an old Library, written before the graph tables existed
    lib = Library(root)
    assert lib.manifest.schema_version == SCHEMA_VERSION
    assert not lib.has_table("entities") and lib.entity_graph("v1") is None
    lib.put_entity_graph("v1", chain(), "p")
    again = Library(root).entity_graph("v1")
    assert again is not None and list(again.nodes) == ["A", "B", "C", "D"]
    assert [c.caption for c in lib.clips("v1")] == ["v1 clip 0", "v1 clip 1"]


def test_an_id_is_named_only_as_a_whole_word() -> None:
    found = extraction(
        [
            subject("Subject_1", "Ann", [[0, 5]]),
            subject("Subject_12", "Ben", [[0, 5]]),
            subject("Subject_2", "Cy", [[0, 5]]),
        ],
        [
            interaction(["Subject_1", "Subject_2"], "Ann waves to Cy", [1, 2]),
            interaction(["Subject_12", "Subject_2"], "Ben waves to Cy", [3, 4]),
        ],
    )
    g = EntityGraph.build("v", found, CLIPS_4)
    g.score()
    for query in ("What does Subject_12 do?", "what does subject_12 do"):
        head = g.retrieve(query, None).text.splitlines()[0]
        assert head == "Around Subject_12 (Ben) (2 hops, by importance):"  # Subject_1 is no seed


def test_one_replys_interactions_at_overlapping_times_are_all_kept() -> None:
    found = extraction(
        [subject("A", "Ann", [[0, 20]]), subject("B", "Ben", [[0, 20]])],
        [
            interaction(["A", "B"], "Ann hands Ben a book", [5, 8]),
            interaction(["B", "A"], "Ben thanks Ann", [7, 9]),
        ],
    )
    g = EntityGraph.build("v", found, CLIPS_4)
    assert [(e.src, e.dst, e.relation) for e in g.edges] == [
        ("A", "B", "Ann hands Ben a book"),
        ("B", "A", "Ben thanks Ann"),
    ]
