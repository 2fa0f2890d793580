"""IntentQA: NExT-QA's columns under ``video_id``, its scorer without the empty groups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vidagent.bench import evaluate, get_benchmark

intentqa = get_benchmark("intentqa")

CSV = """\
video_id,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4,action,lemma,lemma_id
6102982194,1266,640,360,why does the man go near the man playing the keytar,2,2,CW,talk,music,energise,hit,annoy,playing,play,141
8319941339,318,640,1138,why does the boy cross his legs on the bed,1,7,CW,rest,keyboard,get on,point,follow,cross,cross,82
5852331173,645,640,360,how did the ladies keep their sunglasses,3,1,CH,bag,bib,shirt,head,hand,put,put,160
8626931151,2160,640,360,what was the kid doing before he flipped the pages,4,5,TP,flip,turn,look,hold,puts,flipped,flip,96
2551683435,818,496,370,what happens to the balloon after the man steps on it,0,6,TN,bounce,towards,happy,move,remove,steps,step,103
"""


def test_types_groups_and_overall(tmp_path: Path) -> None:
    (tmp_path / "intentqa").mkdir()
    (tmp_path / "intentqa" / "test.csv").write_text(CSV)
    loaded = intentqa.load(tmp_path)
    assert [s.id for s in loaded.samples][:2] == ["6102982194_2", "8319941339_7"]
    assert loaded.samples[3].categories == ("TN", "T") and loaded.samples[3].extras["type"] == "TP"
    preds = tmp_path / "res.json"
    preds.write_text(
        json.dumps(
            {
                "6102982194_2": {"prediction": 2, "answer": 2},
                "8319941339_7": {"prediction": 0, "answer": 1},
                "5852331173_1": {"prediction": 3, "answer": 3},
                "8626931151_5": {"prediction": 4, "answer": 4},
            }
        )
    )
    scores = evaluate(intentqa, loaded, intentqa.read_predictions(preds, loaded.samples))
    assert scores.split == "test" and scores.overall.score == 60.0
    assert {k: g.score for k, g in scores.sections["type"].items()} == {
        "CW": 50.0,
        "CH": 100.0,
        "TN": 50.0,
    }
    assert {k: g.score for k, g in scores.sections["group"].items()} == pytest.approx(
        {"C": 200 / 3, "T": 50.0}
    )
