"""Video-MME: a parquet file in the dataset's own form, scored like ``eval_your_results.py``
(the copy the Video-MME README links, ``thanku-all/parse_answer``)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from clirun import vidagent

from vidagent.bench import evaluate, get_benchmark

videomme = get_benchmark("videomme")

OPTS = ["A. A red car.", "B. A blue bus.", "C. A bike.", "D. Nothing."]


def _row(qid: str, video: str, duration: str, domain: str, task: str, answer: str) -> dict:
    return {
        "video_id": qid.split("-")[0],
        "duration": duration,
        "domain": domain,
        "sub_category": "Football" if domain == "Sports Competition" else "Astronomy",
        "url": f"https://www.youtube.com/watch?v={video}",
        "videoID": video,
        "question_id": qid,
        "task_type": task,
        "question": f"Question {qid}?",
        "options": OPTS,
        "answer": answer,
    }


ROWS = [
    _row("001-1", "vidShort1", "short", "Knowledge", "Counting Problem", "A"),
    _row("001-2", "vidShort1", "short", "Knowledge", "OCR Problems", "B"),
    _row("001-3", "vidShort1", "short", "Knowledge", "Counting Problem", "C"),
    _row("601-1", "vidLong01", "long", "Sports Competition", "Action Reasoning", "B"),
    _row("601-2", "vidLong01", "long", "Sports Competition", "Counting Problem", "D"),
    _row("601-3", "vidLong01", "long", "Sports Competition", "Action Reasoning", "B"),
]
#: Responses and the letter the official rule reads from each (worked out by hand).
RESPONSES = {
    "001-1": ("The best answer is A", "A"),
    "001-2": ("Clearly it is B.", "C"),  # the first capital A-D anywhere: the C of "Clearly"
    "001-3": ("", ""),  # unanswered
    "601-1": ("Answer: B", "B"),  # "Answer:" is stripped, so its A is not read
    "601-2": ("i think it is d", ""),  # lower case: no letter, unanswered
    "601-3": ("(C) A bike.", "C"),
}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "Video-MME"
    (folder / "videomme").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(ROWS), folder / "videomme" / "test-00000-of-00001.parquet")
    (folder / "data").mkdir()
    (folder / "data" / "vidLong01.mkv").write_bytes(b"x")
    (folder / "subtitle").mkdir()
    (folder / "subtitle" / "vidLong01.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nhello\n")
    return folder


def _official_file(path: Path, responses: dict[str, str] | None = None) -> Path:
    """The results file as the official template lays it out, one response per question."""
    responses = responses or {qid: response for qid, (response, _) in RESPONSES.items()}
    videos: dict[str, dict] = {}
    for row in ROWS:
        video = videos.setdefault(
            row["video_id"],
            {
                "video_id": row["video_id"],
                "duration": row["duration"],
                "domain": row["domain"],
                "sub_category": row["sub_category"],
                "questions": [],
            },
        )
        video["questions"].append(
            {
                "question_id": row["question_id"],
                "task_type": row["task_type"],
                "question": row["question"],
                "options": OPTS,
                "answer": row["answer"],
                "response": responses[row["question_id"]],
            }
        )
    path.write_text(json.dumps(list(videos.values())))
    return path


def _letters(preds: dict) -> dict[str, list[str]]:
    return {qid: [e.letter for e in entries] for qid, entries in preds.items()}


def test_official_results_file_scored_like_the_official_script(data: Path, tmp_path: Path) -> None:
    loaded = videomme.load(data)
    preds = videomme.read_predictions(_official_file(tmp_path / "results.json"), loaded.samples)
    assert _letters(preds) == {qid: [letter] for qid, (_, letter) in RESPONSES.items()}

    scores = evaluate(videomme, loaded, preds)
    # answered: 001-1 right, 001-2 wrong, 601-1 right, 601-3 wrong; 001-3 and 601-2 left out
    assert scores.overall.score == 50.0 and scores.overall.strict == pytest.approx(100 / 3)
    assert scores.missing == 2 and scores.rule == "answered"
    assert scores.sections["duration"]["short"].score == 50.0
    assert scores.sections["duration"]["long"].score == 50.0
    assert scores.sections["domain"]["Sports Competition"].strict == pytest.approx(100 / 3)
    tasks = scores.sections["task type"]
    assert tasks["Counting Problem"].score == 100.0 and tasks[
        "Counting Problem"
    ].strict == pytest.approx(100 / 3)
    assert tasks["OCR Problems"].score == 0.0 and "Spatial Perception" not in tasks
    assert scores.sections["sub-category"]["Football"].answered == 2
    # each answer is a list of letters here, each naming an option: none is noted as naming
    # none (every answered one was, right ones too)
    assert not [n for n in scores.notes if "name none of" in n or "names none of" in n]


def test_duration_split_subtitles_and_plain_letter_files(data: Path, tmp_path: Path) -> None:
    long = videomme.load(data, split="long", subtitles=True)
    assert long.split == "long+subtitles" and [s.id for s in long.samples] == [
        "601-1",
        "601-2",
        "601-3",
    ]
    first = long.samples[0]
    assert first.videos == (data / "data" / "vidLong01.mkv",) and long.missing == ()
    assert first.extras["subtitle"] == str(data / "subtitle" / "vidLong01.srt")
    assert first.options == ("A red car.", "A blue bus.", "A bike.", "Nothing.")
    assert (
        videomme.prompt(first)
        == "Question 601-1?\n(A) A red car.\n(B) A blue bus.\n(C) A bike.\n(D) Nothing."
    )
    letters = tmp_path / "letters.json"
    letters.write_text(json.dumps({"601-1": "B", "601-2": "(D)", "601-3": None}))
    scores = evaluate(videomme, long, videomme.read_predictions(letters, long.samples))
    assert scores.overall.score == 100.0 and scores.overall.strict == pytest.approx(200 / 3)
    short = videomme.load(data, split="short")
    assert short.missing_samples == 3 and short.missing[0].path == data / "data" / "vidShort1.mp4"


def test_official_letter_rule() -> None:
    """The official rule: strip each of "The best answer is", "The correct answer is", "The answer
    is", "The answer", "The best option isThe correct option is", "Best answer:Best option:"
    (two pairs glued by missing commas), "Answer:", "Option:", "The correct answer" and "The
    correct option" wherever it occurs, in that order; the first A, B, C or D left is the letter.
    """
    cases = {
        "Answer: C": "C",  # "Answer:" is stripped, else the A of "Answer" would be read
        "Option: B": "B",  # likewise the O of "Option" is no letter, but "Option:" is stripped
        "The correct answer D": "D",
        "The correct option: A": "A",
        "The correct answer is D.": "D",
        "The answer: C": "C",  # "The answer" is stripped
        "Best answer: D": "B",  # "Best answer:" alone is never stripped: the B of "Best"
        "Best option: D": "B",
        "The best option is C": "C",  # not stripped either, but it holds no capital A-D
        "answer: c": "",  # lower case names nothing
        "A": "A",
        "no idea at all, sorry, honestly I cannot tell from this video": "",
    }
    assert {r: videomme.official_letter(r) for r in cases} == cases


def test_every_entry_counts_as_often_as_the_file_lists_it(data: Path, tmp_path: Path) -> None:
    """The official script loops over every video and every question entry of the file and counts
    each entry it reads a letter from; it never looks for repeated question ids."""
    path = _official_file(tmp_path / "results.json", {q: "A" for q in RESPONSES})
    doc = json.loads(path.read_text())
    doc[0]["questions"].append({**doc[0]["questions"][1], "response": "B"})  # 001-2 again, right
    doc.append(json.loads(json.dumps(doc[1])))  # the long video twice: B, D, B are all wrong
    path.write_text(json.dumps(doc))
    loaded = videomme.load(data)
    preds = videomme.read_predictions(path, loaded.samples)
    assert _letters(preds)["001-2"] == ["A", "B"] and _letters(preds)["601-1"] == ["A", "A"]
    scores = evaluate(videomme, loaded, preds)
    # entries: 001-1 right, 001-2 wrong then right, 001-3 wrong; 601-x wrong, twice over
    assert scores.overall.score == pytest.approx(100 * 2 / 10)
    assert scores.overall.questions == 10
    assert scores.sections["duration"]["long"].questions == 6


def test_the_files_own_answer_and_groups_decide(data: Path, tmp_path: Path) -> None:
    """The official script takes the reference (``answer``) and the groups (``duration``,
    ``domain``, ``sub_category``, ``task_type``) from the results file, not from the dataset, and
    counts only the entries of the durations it is asked for."""
    path = _official_file(tmp_path / "results.json", {q: "B" for q in RESPONSES})
    doc = json.loads(path.read_text())
    doc[0]["questions"][0]["answer"] = "B"  # 001-1: the dataset says A; the file's B is right
    doc[0]["questions"][2]["task_type"] = "OCR Problems"  # 001-3 counted under OCR
    doc[1]["domain"] = "Knowledge"
    doc[1]["duration"] = "Long"  # not a duration the script is asked for: not counted
    path.write_text(json.dumps(doc))
    scores = evaluate(videomme, videomme.load(data), videomme.read_predictions(path, ()))
    assert scores.overall.questions == 3 and scores.overall.score == pytest.approx(200 / 3)
    assert scores.sections["task type"]["OCR Problems"].questions == 2
    assert list(scores.sections["duration"]) == ["short"]
    assert scores.sections["domain"]["Knowledge"].questions == 3


def test_question_id_files_read_letters_by_the_official_rule(data: Path, tmp_path: Path) -> None:
    """A ``{question_id: response}`` file's text goes through the same letter rule as the
    official file's responses; an integer is an option index."""
    letters = tmp_path / "letters.json"
    letters.write_text(json.dumps({"601-1": "Answer: B", "601-2": "d", "601-3": 2}))
    long = videomme.load(data, split="long")
    preds = videomme.read_predictions(letters, long.samples)
    assert preds == {"601-1": 1, "601-2": None, "601-3": 2}
    scores = evaluate(videomme, long, preds)
    assert scores.overall.score == 50.0 and scores.missing == 1


def test_cli_scores_the_official_file(data: Path, tmp_path: Path, _isolated_home: Path) -> None:
    preds = _official_file(tmp_path / "results.json")
    out = vidagent(
        "bench",
        "score",
        "videomme",
        "--data",
        str(data),
        "--predictions",
        str(preds),
        "--json",
        home=_isolated_home,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["overall"]["score"] == 50.0 and report["missing"] == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"001-1": "Réponse"}'.encode("latin-1"), "p.json: not UTF-8 text (byte 12)"),
        (b"", "p.json: the predictions file is empty"),
        (b"{}", "p.json: holds no predictions"),
        (b"[]", "p.json: not a predictions file; expected the official results list"),
        (b'{"999-1": "A"}', "none of the 1 predictions matches a videomme all question"),
        (
            json.dumps(
                [
                    {
                        "duration": "short",
                        "questions": [
                            {"question_id": "999-1", "task_type": "OCR Problems", "response": "A"}
                        ],
                    }
                ]
            ).encode(),
            "none of the 1 predictions matches a videomme all question",
        ),
    ],
)
def test_bad_files_are_one_line_and_exit_1(
    content: bytes, message: str, data: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    preds = tmp_path / "p.json"
    preds.write_bytes(content)
    out = vidagent(
        "bench",
        "score",
        "videomme",
        "--data",
        str(data),
        "--predictions",
        str(preds),
        home=_isolated_home,
    )
    assert out.returncode == 1 and out.stderr.strip().count("\n") == 0
    assert message in out.stderr and "Traceback" not in out.stderr
