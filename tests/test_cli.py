"""The command line as a user runs it: real files, one-line errors, exit codes.

Commands run in-process (:func:`clirun.vidagent`); the one test that needs a fresh interpreter
(a plugin found on PYTHONPATH, a crash log in TMPDIR) starts a process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from clirun import vidagent, vidagent_process

from vidagent.media.synth import make_video


def test_info_lists_every_role_and_the_library(_isolated_home: Path) -> None:
    out = vidagent("info", "--json", home=_isolated_home)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    roles = {"llm", "vlm", "captioner", "tool_vlm", "embed", "image_embed", "asr", "ocr"}
    assert set(info["roles"]) == roles | {"detector"}
    assert info["roles"]["detector"]["usable"] is True
    # Unset, the captioner and the tools' vision model are the vlm, and say so.
    assert info["roles"]["tool_vlm"]["spec"] == info["roles"]["vlm"]["spec"]
    assert "the vlm's" in info["roles"]["captioner"]["detail"]
    assert info["library"] == str(_isolated_home / "library")
    # the embedded SmolLM2 is no endpoint: ask defaults to the retrieval baseline and says so
    assert info["default_strategy"] == "retrieval" and "VIDAGENT_LLM=" in info["notice"]
    text = vidagent("--llm", "openai:gpt-4o-mini", "info", home=_isolated_home).stdout
    assert text.splitlines()[-1] == "ask answers with dvd unless a strategy is named"


def test_tool_vlm_flag_fills_only_that_role(_isolated_home: Path) -> None:
    out = vidagent("--tool-vlm", "openai:o3", "info", "--json", home=_isolated_home)
    roles = json.loads(out.stdout)["roles"]
    assert roles["tool_vlm"]["spec"] == "openai:o3"
    assert roles["captioner"]["spec"] == roles["vlm"]["spec"] == "perception:describer"


def test_flags_override_the_environment(_isolated_home: Path) -> None:
    env_out = vidagent("--llm", "openai:flag-model", "info", "--json", home=_isolated_home)
    assert json.loads(env_out.stdout)["roles"]["llm"]["spec"] == "openai:flag-model"


def test_bad_spec_is_one_line_and_exit_1(_isolated_home: Path) -> None:
    out = vidagent("--llm", "nonsense", "info", home=_isolated_home)
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and "provider:model" in out.stderr
    assert "Traceback" not in out.stderr


def test_index_prints_structure_and_is_idempotent(
    small_video: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    first = vidagent("index", str(small_video), "--json", home=_isolated_home, env=fake_env)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["clips"] == 3  # 12 s in 5 s clips: 0-5, 5-10, 10-12
    assert report["frames"] == 12  # one thumbnail per second
    assert report["shots"] == 3 and not report["reused"]
    assert all(stage["clips"] == 3 for stage in report["stages"].values())

    again = json.loads(
        vidagent("index", str(small_video), "--json", home=_isolated_home, env=fake_env).stdout
    )
    assert again["reused"] and again["video_id"] == report["video_id"]
    assert all(stage["clips"] == 0 for stage in again["stages"].values())
    listed = json.loads(vidagent("list", "--json", home=_isolated_home).stdout)
    assert [v["video_id"] for v in listed] == [report["video_id"]]

    text = vidagent("index", str(small_video), home=_isolated_home, env=fake_env).stdout
    assert "3 shots, 3 clips, 12 thumbnails" in text and "00:00:12" in text
    assert "up to date" in text


def test_a_video_of_the_library_is_indexed_again_by_its_name(
    small_video: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    run = {"home": _isolated_home, "env": fake_env}
    first = vidagent("index", str(small_video), "--stages", "transcribe", "--json", **run)
    vid = json.loads(first.stdout)["video_id"]
    told = vidagent("speakers", small_video.stem, **run)
    assert told.returncode == 0
    assert told.stdout.strip() == (
        f"{small_video.stem} has no speaker labels yet: its index lacks the speakers stage; "
        f"`vidagent index {small_video.stem}` adds it"
    )
    again = vidagent("index", small_video.stem, "--json", **run)  # named as `ask` names it
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["video_id"] == vid and report["reused"]
    assert report["stages"]["caption"]["clips"] == 3 and "speakers" in report["stages"]
    missing = vidagent("index", "no-video-of-this-name", **run)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "error: no-video-of-this-name: no such file"
    other = small_video.parent / "elsewhere" / "small.avi"  # another video of the same stem
    other.parent.mkdir(exist_ok=True)
    make_video(other, duration=2, size=(160, 96))
    vidagent("index", str(other), "--stages", "transcribe", **run)
    both = vidagent("index", small_video.stem, **run)
    assert both.returncode == 1 and "'small' matches several videos" in both.stderr
    from vidagent.library import Library  # a watched stream is resumed by watch, not indexed

    Library(_isolated_home / "library").set_stage(vid, "watch", {"source": "x.m3u8"})
    watched = vidagent("index", vid, **run)
    assert watched.returncode == 1
    assert watched.stderr.strip() == (
        f"error: {vid} is a watched stream; `vidagent watch {small_video}` resumes it"
    )


def test_bad_files_among_good_ones(
    small_video: Path, tmp_path: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    notes = tmp_path / "notes.mp4"
    notes.write_text("this is not a video\n")
    half = tmp_path / "half.mp4"
    half.write_bytes(small_video.read_bytes()[: small_video.stat().st_size // 2])
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    good = tmp_path / "good.mp4"
    shutil.copy(small_video, good)

    vidagent("index", str(good), home=_isolated_home, env=fake_env)
    lib_before = json.loads(vidagent("show", "good.mp4", "--json", home=_isolated_home).stdout)
    out = vidagent(
        "index",
        str(notes),
        str(half),
        str(empty),
        str(tmp_path / "missing.mp4"),
        str(good),
        home=_isolated_home,
        env=fake_env,
    )
    assert out.returncode == 1
    errors = out.stderr.strip().splitlines()
    assert len(errors) == 4 and all(line.startswith("error: ") for line in errors)
    assert "notes.mp4" in errors[0] and "half.mp4" in errors[1] and "missing.mp4" in errors[3]
    assert "up to date" in out.stdout  # the good file still went through
    listed = json.loads(vidagent("list", "--json", home=_isolated_home).stdout)
    assert [v["name"] for v in listed] == ["good.mp4"]
    lib_after = json.loads(vidagent("show", "good.mp4", "--json", home=_isolated_home).stdout)
    assert (
        lib_after["clips"] == lib_before["clips"] and lib_after["summary"] == lib_before["summary"]
    )


def test_a_folder_gives_a_cameras_files_and_says_what_it_left_out(
    small_video: Path, tmp_path: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    # a camcorder's .MTS and a phone's .3gp were left out of a folder in silence
    folder = tmp_path / "card"
    folder.mkdir()
    (folder / ".thumbnails").mkdir()
    for name in ("00001.MTS", "clip.3gp", "notes.txt", "cover.jpg", ".hidden", ".thumbnails/a"):
        shutil.copy(small_video, folder / name)
    out = vidagent("index", str(folder), "--stages", "transcribe", "--json",
                   home=_isolated_home, env=fake_env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    indexed = [json.loads(line)["video_id"] for line in out.stdout.splitlines()]
    assert len(indexed) == 2  # the same content under two names: one video, reported twice
    assert out.stderr.strip() == (
        f"note: {folder}: 2 files not taken for video by name (.jpg, .txt) left out; "
        "name a file to index it"
    )


def test_remove_by_name(small_video: Path, _isolated_home: Path, fake_env: dict[str, str]) -> None:
    vidagent("index", str(small_video), "--stages", "transcribe", home=_isolated_home, env=fake_env)
    for blank in ("", " "):  # `vidagent remove "$UNSET"`: as a prefix "" matched every id
        refused = vidagent("remove", blank, home=_isolated_home)
        assert refused.returncode == 1 and "empty video name" in refused.stderr
    out = vidagent("remove", small_video.name, home=_isolated_home)
    assert out.returncode == 0 and out.stdout.startswith("removed ")
    assert json.loads(vidagent("list", "--json", home=_isolated_home).stdout) == []
    missing = vidagent("remove", small_video.name, home=_isolated_home)
    assert missing.returncode == 1 and "no video" in missing.stderr


@pytest.mark.parametrize(
    "option", [("--clip-seconds", "0"), ("--clip-seconds", "-2"), ("--sample-fps", "0")]
)
def test_index_sampling_out_of_range_is_a_usage_error(
    option: tuple[str, str], small_video: Path, _isolated_home: Path
) -> None:
    # it was "unexpected ValidationError … (a bug; its traceback is in …)", exit 1
    out = vidagent("index", str(small_video), *option, home=_isolated_home)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    said = f"Invalid value for '{option[0]}': {float(option[1])} is not in the range x>0.0"
    assert said in out.stderr
    assert not (_isolated_home / "library").exists()


@pytest.mark.parametrize("args", [["probe", "/nonexistent/x.mp4"], ["index", "/nonexistent/*.mp4"]])
def test_nothing_to_read_is_a_clear_error(args: list[str], _isolated_home: Path) -> None:
    out = vidagent(*args, home=_isolated_home)
    assert out.returncode != 0 and out.stderr.strip() and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("stages", "says"),
    [
        ("", "no stage named"),  # `--stages "$UNSET"` ran every default stage
        (" , ", "no stage named"),
        ("transcribe,nope", "unknown stage(s) nope; stages: structure, transcribe"),
    ],
)
def test_a_stage_list_naming_nothing_known_is_refused(
    stages: str, says: str, small_video: Path, _isolated_home: Path
) -> None:
    out = vidagent("index", str(small_video), "--stages", stages, home=_isolated_home)
    assert out.returncode == 2 and says in out.stderr, out.stderr
    assert not (_isolated_home / "library").exists()


def test_dry_run_spends_nothing_and_prices_the_vlm(small_video: Path, _isolated_home: Path) -> None:
    env = {
        "VIDAGENT_VLM": "openai:gpt-4o-mini",
        "VIDAGENT_OPENAI_API_KEY": "sk-test",
        "VIDAGENT_PRICES": json.dumps({"openai:gpt-4o-mini": {"input": 0.15, "output": 0.6}}),
    }
    out = vidagent("index", str(small_video), "--dry-run", "--json", home=_isolated_home, env=env)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["clips"] == 3 and plan["duration"] == pytest.approx(12.0)
    stages = {s["stage"]: s for s in plan["stages"]}
    caption = stages["caption"]
    assert caption["calls"] == 3 and caption["frames"] == 24  # 3 clips, 2 fps, 12 s
    assert caption["input_tokens"] > 0 and caption["cost_usd"] == pytest.approx(
        (caption["input_tokens"] * 0.15 + caption["output_tokens"] * 0.6) / 1e6
    )
    assert set(stages) == {
        "structure",
        "transcribe",
        "read_text",
        "detect",
        "speakers",
        "caption",
        "embed",
        "summarize",
    }
    assert not (_isolated_home / "library").exists()  # nothing was written
    assert plan["speed"]["runs"] == 0 and plan["speed"]["factor"] == 1.0  # no run on this CPU

    table = vidagent("index", str(small_video), "--dry-run", home=_isolated_home, env=env).stdout
    assert "3 clips of 5 s" in table and "openai:gpt-4o-mini" in table and "total: about" in table
    # where the offline stages' times come from, under the total
    assert table.splitlines()[-1].strip().startswith("offline stages timed as on ")


def test_dry_run_counts_only_what_an_indexed_video_still_owes(
    small_video: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    # it estimated the whole job again for a video indexed before, and the run then did nothing
    ran = vidagent("index", str(small_video), home=_isolated_home, env=fake_env)
    assert ran.returncode == 0, ran.stderr
    (detect,) = [line for line in ran.stdout.splitlines() if line.strip().startswith("detect ")]
    assert "[at once]" in detect and "their seconds overlap" in ran.stdout
    dry = ("index", str(small_video), "--dry-run", "--json")
    plan = json.loads(vidagent(*dry, home=_isolated_home, env=fake_env).stdout)
    owed = {
        s["stage"]: (s["calls"], s["frames"]) for s in plan["stages"] if s["stage"] != "structure"
    }
    assert owed and set(owed.values()) == {(0, 0)}, owed
    (cut,) = [s for s in plan["stages"] if s["stage"] == "structure"]
    assert cut["frames"] == 0  # not decoded again
    # nothing pending: no time either (it charged the per-video 3 s of a run that finds the
    # video up to date at once)
    assert cut["seconds"] == 0 and "up to date: nothing to do" in cut["notes"]
    # a new embedder redoes the embeddings (and the summary after them), nothing before them
    other = fake_env | {"VIDAGENT_EMBED": "fake:hash?dim=16"}
    plan = json.loads(vidagent(*dry, home=_isolated_home, env=other).stdout)
    calls = {s["stage"]: s["calls"] for s in plan["stages"]}
    assert calls["caption"] == 0 and calls["embed"] > 0


def test_dry_run_prices_a_known_model_out_of_the_box_and_says_no_price_for_an_unknown(
    small_video: Path, _isolated_home: Path
) -> None:
    known = {"VIDAGENT_VLM": "openai:gpt-4o-mini", "VIDAGENT_OPENAI_API_KEY": "sk-test"}
    out = vidagent("index", str(small_video), "--dry-run", "--json", home=_isolated_home, env=known)
    assert out.returncode == 0, out.stderr
    stages = {s["stage"]: s for s in json.loads(out.stdout)["stages"]}
    caption = stages["caption"]  # gpt-4o-mini at OpenAI's list price, from genai-prices
    assert caption["cost_usd"] == pytest.approx(
        (caption["input_tokens"] * 0.15 + caption["output_tokens"] * 0.6) / 1e6
    )
    assert stages["transcribe"]["cost_usd"] == 0.0  # faster-whisper runs here: free
    unknown = {**known, "VIDAGENT_VLM": "openai:my-own-vlm?base_url=http://localhost:9/v1"}
    text = vidagent("index", str(small_video), "--dry-run", home=_isolated_home, env=unknown)
    assert text.returncode == 0, text.stderr
    (row,) = [line for line in text.stdout.splitlines() if line.strip().startswith("caption ")]
    assert " no price " in row
    (total,) = [line for line in text.stdout.splitlines() if line.startswith("total: ")]
    assert total.endswith("+ no price for openai:my-own-vlm?base_url=http://localhost:9/v1")


def test_show_and_search_read_the_index(
    small_video: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    vidagent("index", str(small_video), home=_isolated_home, env=fake_env)
    shown = vidagent("show", small_video.name, home=_isolated_home)
    assert (
        shown.returncode == 0 and "00:00:05-00:00:10" in shown.stdout and "summary" in shown.stdout
    )
    hits = vidagent(
        "search",
        small_video.name,
        "hello there",
        "--from",
        "00:00:06",
        "--json",
        home=_isolated_home,
        env=fake_env,
    )
    assert hits.returncode == 0, hits.stderr
    rows = json.loads(hits.stdout)
    assert rows and all(r["t1"] > 6 for r in rows)  # the time filter holds
    assert {r["name"] for r in rows} == {small_video.name}
    plain = vidagent("search", "all", "hello there", home=_isolated_home, env=fake_env)
    assert plain.stdout.splitlines()[0].split()[1] == small_video.name  # not its id
    assert rows[0]["start"] in {"00:00:05", "00:00:10"}
    bad = vidagent(
        "search", small_video.name, "x", "--from", "soon", home=_isolated_home, env=fake_env
    )
    assert bad.returncode != 0 and "not a time" in bad.stderr
    backwards = vidagent(
        "search",
        small_video.name,
        "x",
        "--from",
        "8",
        "--to",
        "6",
        home=_isolated_home,
        env=fake_env,
    )
    assert backwards.returncode == 1
    assert backwards.stderr == (
        "error: the span 00:00:08-00:00:06 is empty: --to must be after --from\n"
    )
    empty = vidagent("search", small_video.name, "  ", home=_isolated_home, env=fake_env)
    assert empty.returncode == 1 and empty.stderr.count("\n") == 1, empty.stderr
    assert "search text is empty" in empty.stderr
    none = vidagent("search", small_video.name, "x", "--top", "0", home=_isolated_home)
    assert none.returncode == 2 and "0 is not in the range x>=1" in none.stderr
    past = vidagent(
        "search", small_video.name, "x", "--from", "100", home=_isolated_home, env=fake_env
    )
    assert past.returncode == 1 and past.stdout == ""  # not "no matching clips"
    assert past.stderr == (
        f"error: the span from 00:01:40 on lies outside {small_video.name} (0-12.0 s)\n"
    )


def test_searching_a_video_whose_indexing_stopped_before_embed_says_so(
    small_video: Path, tmp_path: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    from vidagent.media.synth import make_video

    other = tmp_path / "other.mp4"
    make_video(other, duration=4, audio="tone")
    assert vidagent("index", str(other), home=_isolated_home, env=fake_env).returncode == 0
    stages = ["--stages", "transcribe"]
    vidagent("index", str(small_video), *stages, home=_isolated_home, env=fake_env)
    found = vidagent("search", small_video.name, "hello", home=_isolated_home, env=fake_env)
    assert found.returncode == 1 and found.stdout == ""  # not "no matching clips"
    assert found.stderr == (
        f"error: {small_video.name} has no clip embedded yet (its indexing stopped before the "
        "embed stage): index it again to search it\n"
    )


def test_show_lists_subjects_as_first_seen_and_the_describers_label_once(
    small_video: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    from vidagent.library import Library
    from vidagent.library.schema import Artifact

    indexed = vidagent("index", str(small_video), "--json", home=_isolated_home, env=fake_env)
    vid = json.loads(indexed.stdout)["video_id"]
    seen = {"subject_1": "00:00:00", "subject_2": "00:00:07", "subject_10": "00:00:07"}
    subjects = {sid: {"name": "unknown", "first_seen": t} for sid, t in seen.items()}
    subjects["subject_3"] = {"name": "unknown", "first_seen": 3.0}  # AVI's captions: seconds
    Library(_isolated_home / "library").put_artifact(Artifact(vid, "registry", "", data=subjects))
    shown = vidagent("show", vid, home=_isolated_home).stdout.splitlines()
    header = "clips  (captions: perception describer: measured facts, not a vision-language model)"
    listed = shown[shown.index("subjects") + 1 : shown.index(header) - 1]
    assert [line.split()[0] for line in listed] == [
        "subject_1",
        "subject_3",
        "subject_2",
        "subject_10",  # stored after subject_1: the Library keeps its keys sorted as text
    ]
    # the perception describer's label once, above the clips, not at the head of each caption
    clips = shown[shown.index(header) + 1 :]
    assert clips and not any("perception describer" in line for line in clips)


def test_reading_commands_never_create_a_library(_isolated_home: Path) -> None:
    assert vidagent("list", "--json", home=_isolated_home).stdout.strip() == "[]"
    empty = vidagent("list", home=_isolated_home)  # a person is told, a script reads nothing
    assert empty.returncode == 0 and not empty.stdout
    assert "no videos" in empty.stderr and "vidagent index PATH" in empty.stderr
    for args in (["show", "x"], ["search", "all", "anything"], ["remove", "x"]):
        out = vidagent(*args, home=_isolated_home)
        assert (
            out.returncode == 1 and "no Library at" in out.stderr and "vidagent index" in out.stderr
        )
    assert not (_isolated_home / "library").exists()


FIG8_REPLY = json.dumps(
    {
        "video_analysis": [
            {
                "subject_id": "Subject_1",
                "subject_name": "Man in red shirt",
                "appearance_timeline": [["00:00:00", "00:00:08"]],
                "attributes": ["red shirt"],
                "actions_events": [],
            },
            {
                "subject_id": None,
                "subject_name": "Anna",
                "appearance_timeline": [["00:00:05", "00:00:12"]],
                "attributes": [],
                "actions_events": [],
            },
        ],
        "interactions": [
            {
                "subjects_involved": ["Subject_1", "Anna"],
                "interaction_description": "Subject_1 hands Anna a book",
                "timestamp": ["00:00:06", "00:00:07"],
            },
        ],
    }
)


def test_show_graph_prints_entities_and_relations(
    small_video: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    env = {**fake_env, "VIDAGENT_LLM": f"fake:echo?reply={FIG8_REPLY}"}
    indexed = vidagent(
        "index",
        str(small_video),
        "--stages",
        "caption,embed,graph",
        "--json",
        home=_isolated_home,
        env=env,
    )
    assert indexed.returncode == 0, indexed.stderr
    assert json.loads(indexed.stdout)["stages"]["graph"]["clips"] == 3

    shown = vidagent("show", small_video.name, "--graph", home=_isolated_home)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "2 entities (0 super-nodes), 1 relations" in text
    assert "Subject_1    human  Man in red shirt" in text and "appears 00:00:00-00:00:08" in text
    assert "H_1          human  Anna" in text
    assert (
        "Subject_1 (Man in red shirt) -> H_1 (Anna)  interaction: Subject_1 hands Anna a book  "
        "00:00:06-00:00:07"
    ) in text

    as_json = json.loads(
        vidagent("show", small_video.name, "--graph", "--json", home=_isolated_home).stdout
    )
    assert as_json["built"] is True
    assert [(e["node_id"], e["kind"], e["timeline"]) for e in as_json["entities"]] == [
        ("Subject_1", "human", [[0.0, 8.0]]),
        ("H_1", "human", [[5.0, 12.0]]),
    ]
    man = as_json["entities"][0]
    assert man["freq"] == 1.0 and man["degree"] == 1.0 and man["centrality"] == 0.5
    assert [
        (r["src"], r["dst"], r["relation"], r["t0"], r["t1"]) for r in as_json["relations"]
    ] == [("Subject_1", "H_1", "Subject_1 hands Anna a book", 6.0, 7.0)]


def test_show_graph_of_a_video_without_one_says_how_to_build_it(
    small_video: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    vidagent("index", str(small_video), "--stages", "transcribe", home=_isolated_home, env=fake_env)
    shown = vidagent("show", small_video.name, "--graph", home=_isolated_home)
    assert shown.returncode == 0
    assert shown.stdout.strip() == (
        f"{small_video.name} has no entity graph yet; "
        f"`vidagent index {small_video.name} --stages graph` builds it"
    )
    assert shown.stdout.strip().count("\n") == 0
    body = json.loads(
        vidagent("show", small_video.name, "--graph", "--json", home=_isolated_home).stdout
    )
    assert body["built"] is False and body["entities"] == body["relations"] == []
    missing = vidagent("show", "no-such-video", "--graph", home=_isolated_home)
    assert missing.returncode != 0 and "no video 'no-such-video'" in missing.stderr
    assert missing.stderr.strip().count("\n") == 0 and "Traceback" not in missing.stderr


def test_index_caption_style_avi_prices_fig_7(small_video: Path, _isolated_home: Path) -> None:
    env = {"VIDAGENT_VLM": "openai:gpt-4o-mini", "VIDAGENT_OPENAI_API_KEY": "sk-test"}
    args = ["index", str(small_video), "--dry-run", "--json", "--stages", "caption"]
    plans = [
        json.loads(vidagent(*args, *extra, home=_isolated_home, env=env).stdout)
        for extra in ([], ["--caption-style", "avi"])
    ]
    registry, avi = ({s["stage"]: s for s in p["stages"]}["caption"] for p in plans)
    assert avi["calls"] == registry["calls"] == 3
    assert avi["input_tokens"] != registry["input_tokens"]  # Fig. 7, no registry or transcript
    bad = vidagent(*args, "--caption-style", "dvd", home=_isolated_home, env=env)
    assert bad.returncode != 0 and "registry" in bad.stderr


def test_a_bug_stays_one_line_where_no_temporary_file_can_be_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tempfile

    import vidagent.cli as cli_module

    def crash(**_: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(cli_module.cli, "main", crash)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))  # no such directory
    assert cli_module.main(["list"]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "error: unexpected ZeroDivisionError: division by zero (a bug; its "
        "traceback could not be written to a file: "
    )


CRASHING_STAGE = """
from vidagent.ingest.base import Stage


class CrashStage(Stage):
    name = "crashplug"
    role = None

    def pending(self, ctx):
        return ctx.library.clips(ctx.video.video_id)

    def run(self, ctx, clips, bar):
        return 1 / 0  # a plugin's bug
"""


def test_a_bug_is_one_line_naming_a_file_with_its_traceback(
    small_video: Path, _isolated_home: Path, fake_env: dict[str, str], tmp_path: Path
) -> None:
    from test_plugins import write_distribution

    site = tmp_path / "site"
    write_distribution(
        site,
        "vidagent-crashplug",
        {"vidagent.stages": {"crashplug": "crashplug:CrashStage"}},
        {"crashplug/__init__.py": CRASHING_STAGE},
    )
    # A new process: the plugin is found on PYTHONPATH at discovery and the crash log goes to
    # TMPDIR, both read once per interpreter.
    env = {**fake_env, "PYTHONPATH": str(site), "TMPDIR": str(tmp_path)}
    out = vidagent_process(
        "index", str(small_video), "--stages", "crashplug", home=_isolated_home, env=env
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("error: unexpected ZeroDivisionError: division by zero (a bug;")
    [log] = tmp_path.glob("vidagent-crash-*.log")
    assert str(log) in line and "1 / 0" in log.read_text()  # the traceback, for a report
    # What was stored before the bug is kept: the video's structure is listed.
    listed = vidagent("list", "--json", home=_isolated_home)
    assert [v["name"] for v in json.loads(listed.stdout)] == [small_video.name]
    shown = vidagent_process(
        "index",
        str(small_video),
        "--stages",
        "crashplug",
        home=_isolated_home,
        env={**env, "VIDAGENT_DEBUG": "1"},
    )
    assert shown.returncode == 1 and "Traceback" in shown.stderr and "1 / 0" in shown.stderr


def test_an_interrupted_index_says_what_it_kept(
    small_video: Path, _isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidagent.app.session import Session

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # Ctrl-C

    monkeypatch.setattr(Session, "index", interrupted)
    out = vidagent("index", str(small_video), home=_isolated_home)
    assert out.returncode == 130
    assert out.stderr.strip() == (  # after the line click ends the interrupted output with
        "aborted: what each video's stages finished is kept; the same command indexes the rest"
    )
    # a command that keeps nothing says only that
    monkeypatch.setattr(Session, "search", interrupted)
    out = vidagent("search", "all", "x", home=_isolated_home)
    assert (out.returncode, out.stderr.strip()) == (130, "aborted")
