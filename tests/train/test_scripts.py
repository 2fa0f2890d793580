"""Script synthesis (the paper's nine prompts), validation, resumable sets, template scripts."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from clirun import vidagent

from vidagent.exceptions import ConfigError
from vidagent.prompts import load_prompt
from vidagent.train.scripts import (
    TASKS,
    ScriptError,
    load_scripts,
    read_jsonl,
    synthesis_prompt,
    synthesize,
    validate,
)
from vidagent.train.slots import config
from vidagent.train.templates import generate


def test_the_nine_synthesis_prompts_and_the_simulator_prompt_are_there() -> None:
    # their text is pinned, and compared with Appendix H.1/H.2, in tests/prompts
    for task in TASKS:
        assert load_prompt(f"cvr_script_{task.lower()}").startswith("### Role")
    assert "No significant action observed." in load_prompt("cvr_simulator")


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_configuration_fills_every_slot_of_its_prompt(task: str) -> None:
    for index in range(12):
        prompt = synthesis_prompt(task, config(task, index, seed=3))
        filled = prompt.split("### Output JSON Format (exact keys)")[0]
        assert not re.findall(r"<[a-z_]+>", filled), filled
        assert prompt.startswith(load_prompt(f"cvr_script_{task.lower()}").split("<")[0])
        assert '"videos": [{"video_index": 1' in prompt  # the schema suffix
    assert config(task, 5, seed=1) == config(task, 5, seed=1)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_template_scripts_are_valid_deterministic_and_answerable(task: str) -> None:
    scripts = generate(task, 6, seed=0)
    assert len({s["id"] for s in scripts}) == 6
    assert [s["id"] for s in generate(task, 6, seed=0)] == [s["id"] for s in scripts]
    assert [s["id"] for s in generate(task, 6, seed=1)] != [s["id"] for s in scripts]
    for s in scripts:
        assert validate(s, task)["id"] == s["id"]
        assert s["meta"]["source"] == "template"


@pytest.mark.parametrize("task", ["NC", "CC", "PEA", "PI", "MSR", "MOC"])
def test_template_answer_letters_are_balanced(task: str) -> None:
    scripts = generate(task, 24, seed=3)
    letters = Counter(s["answer"] for s in scripts)
    n = len(scripts[0]["options"])
    assert sorted(letters) == sorted("ABCDEF"[:n])  # every letter is somebody's answer
    assert max(letters.values()) - min(letters.values()) <= 1, letters


def test_balanced_count_and_relation_answers_are_still_what_the_script_shows() -> None:
    for s in generate("MOC", 12, seed=0):
        cars = sum("red car {A" in e["visual"] for e in s["videos"][0]["timeline"])
        right = s["options"]["ABCD".index(s["answer"])]
        assert right == f"{s['answer']}. {cars}"
        assert sum(o.endswith(f". {cars}") for o in s["options"]) == 1  # one right count
    for s in generate("MSR", 8, seed=0):
        relation = s["options"]["ABCD".index(s["answer"])][3:].removesuffix(" the bus")
        assert any(relation in e["visual"] for e in s["videos"][1]["timeline"])


def test_a_which_video_template_puts_the_decisive_event_in_the_answer_s_videos() -> None:
    for s in generate("NC", 8):
        holders = {
            i
            for i, v in enumerate(s["videos"])
            if any("hides the brass key under" in e["visual"] for e in v["timeline"])
        }
        assert {"ABCD".index(s["answer"])} == holders
    for s in generate("BU", 8):
        holders = {
            i
            for i, v in enumerate(s["videos"])
            if any("pants heavily" in e["visual"] for e in v["timeline"])
        }
        assert {"ABCD".index(x) for x in s["answer"]} == holders
    for s in generate("FSA", 4):
        start, end = json.loads(s["answer"])
        assert any(e["start"] == start and e["end"] == end for e in s["videos"][1]["timeline"])


def _raw(**changes: Any) -> dict[str, Any]:
    video = {
        "duration": 20,
        "timeline": [{"start": 0, "end": 8, "visual": "a dog runs", "caption": "Go!"}],
    }
    raw = {
        "question": "Which video shows a dog?",
        "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. Video 4"],
        "answer": "B",
        "videos": [video] * 4,
    }
    raw.update(changes)
    return raw


@pytest.mark.parametrize(
    ("task", "changes", "message"),
    [
        ("NC", {"videos": []}, "non-empty list"),
        ("NC", {"answer": "E"}, "names no option"),
        ("NC", {"answer": "AB"}, "must be one letter"),
        ("BU", {"answer": "ABCD"}, "cannot select every option"),
        ("PI", {}, "needs 2 videos"),
        (
            "NC",
            {"videos": [{"duration": 5, "timeline": [{"start": 0, "end": 8, "visual": "x"}]}] * 4},
            r"\[0.0, 8.0\] is not inside",
        ),
        ("PSS", {"answer": "1->2->2", "options": []}, "not an order"),
    ],
)
def test_invalid_scripts_are_refused_with_the_reason(
    task: str, changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScriptError, match=message):
        validate(_raw(**changes), task)


def test_answers_are_normalised_to_the_task_format() -> None:
    assert validate(_raw(answer=["C", "A"]), "BU")["answer"] == "AC"
    two = _raw(videos=[_raw()["videos"][0]] * 2, options=[], answer="[2, 7.5]")
    assert validate(two, "FSA")["answer"] == "[2.0, 7.5]"
    with pytest.raises(ScriptError, match="inside Video 2"):
        validate({**two, "answer": [10, 30]}, "FSA")


class Writer:
    """A stand-in for the script-writing LLM: broken JSON first, then scripts, then a repeat."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.prompts: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.prompts.append(messages)
        return self.replies.pop(0)


def _script_reply(n: int) -> str:
    return "Here it is:\n```json\n" + json.dumps(_raw(question=f"Which video {n}?")) + "\n```"


def test_synthesis_retries_validates_dedups_and_resumes(tmp_path: Path) -> None:
    writer = Writer(["not json at all", _script_reply(1), _script_reply(1), _script_reply(2)])
    report = synthesize(writer, "NC", 2, tmp_path, model="fake:writer", retries=2)
    assert (report.written, report.total, report.duplicates) == (2, 2, 1)
    first = writer.prompts[0][0]["content"]
    assert first.startswith("### Role You are a **Benchmark Dataset Designer**")
    assert "Invalid: the reply holds no JSON object" in writer.prompts[1][-1]["content"]
    rows = list(read_jsonl(tmp_path / "nc.jsonl"))
    assert [r["question"] for r in rows] == ["Which video 1?", "Which video 2?"]
    assert rows[0]["meta"]["model"] == "fake:writer"
    assert re.fullmatch(r"[0-9a-f]{8}", rows[0]["meta"]["prompt_hash"])
    assert rows[0]["meta"]["config_index"] == 0 and rows[1]["meta"]["config_index"] == 2
    # A rerun asks only for what is missing, from configurations not tried before.
    more = Writer(["{}", "{}", _script_reply(3)])
    again = synthesize(more, "NC", 3, tmp_path, model="fake:writer", retries=2)
    assert (again.written, again.total, again.rejected) == (1, 3, 1)
    assert len(more.prompts) == 3
    assert [r["config_index"] for r in read_jsonl(tmp_path / "nc.rejects.jsonl")] == [1, 3]
    assert len(load_scripts(tmp_path)) == 3


def test_a_torn_last_line_is_skipped_and_a_missing_set_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "nc.jsonl"
    path.write_text(json.dumps(generate("NC", 1)[0]) + '\n{"task": "NC", "quest', "utf-8")
    assert len(load_scripts(path)) == 1
    with pytest.raises(ConfigError, match="no script set at"):
        load_scripts(tmp_path / "nowhere")


def test_the_cli_writes_template_scripts_resumably_and_refuses_bad_tasks(tmp_path: Path) -> None:
    out = tmp_path / "set"
    # No --generator with the embedded SmolLM2 as the llm: the template generator, said so.
    done = vidagent(
        "train", "scripts", "--task", "pss", "--n", "3", "--out", str(out), home=tmp_path
    )
    assert done.returncode == 0 and "3 written, 3 in all" in done.stdout
    assert "(template: the default with the embedded SmolLM2 llm)" in done.stdout
    done = vidagent(
        "train",
        "scripts",
        "--task",
        "PSS",
        "--n",
        "5",
        "--out",
        str(out),
        "--generator",
        "template",
        home=tmp_path,
    )
    assert "2 written, 5 in all" in done.stdout
    assert len({r["id"] for r in read_jsonl(out / "pss.jsonl")}) == 5
    bad = vidagent(
        "train", "scripts", "--task", "XYZ", "--n", "1", "--out", str(out), home=tmp_path
    )
    assert bad.returncode == 1 and bad.stderr.strip().splitlines() == [
        "error: unknown script task 'XYZ'; tasks: MSR, MOC, PSS, PI, NC, FSA, CC, BU, PEA"
    ]
    # a folder that cannot be made: one line, not "a bug"
    under_a_file = out / "pss.jsonl" / "more"
    bad = vidagent(
        "train", "scripts", "--task", "pss", "--n", "1", "--out", str(under_a_file), home=tmp_path
    )
    said = f"error: cannot write scripts to {under_a_file}: Not a directory"
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [f"{said} (--out names another folder)"]


def test_only_the_embedded_llm_defaults_to_the_template_generator(tmp_path: Path) -> None:
    from vidagent.app.training import default_generator
    from vidagent.config import load_settings

    env = {"VIDAGENT_HOME": str(tmp_path)}
    assert default_generator(load_settings({}, env=env)) == "template"
    assert default_generator(load_settings({"llm": "openai:gpt-4o-mini"}, env=env)) == "llm"
