"""Charades-STA (Gao et al., ICCV 2017): find the moment a sentence describes.

Data: ``charades_sta_test.txt`` (split ``test``, the default, 3,720 queries) and
``charades_sta_train.txt`` (in ``data`` or ``data/Charades_anno``), one query per line:
``<video> <start> <end>##<sentence>``. Videos are ``<root>/<video>.mp4`` from Charades; the root
defaults to ``data/Charades_v1_480``, else ``data/videos``.

The files carry no query ids, so a query's id is ``<video>_<n>``, ``n`` counting that video's
queries from 0 in file order (a video with two queries has ``AO8RW_0`` and ``AO8RW_1``).

Metrics, the standard ones (the AVI paper reports them without defining them):
``IoU = max(0, min(e1, e2) - max(s1, s2)) / (max(e1, e2) - min(s1, s2))``; R@1 at IoU m is the
share of queries whose one predicted interval has IoU >= m, for m in 0.3, 0.5, 0.7; mIoU is the
mean IoU, the headline number. A missing or unreadable prediction has IoU 0, so every query is
in every denominator. R@1 is the dataset authors' rule (TALL ``main.py``: ``calculate_IoU >=
m``); their IoU is negative for a reversed pair ``[e, s]``, so a reversed interval is a miss, and
it adds 0 to mIoU. Only ``[start, end]`` pairs are read: a ``"s,e"`` string is unreadable.

Predictions: ``{id: [start, end]}`` in seconds, or the runner's JSONL with ``parsed: [s, e]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.agents.answer import GROUND_QUESTION
from vidagent.bench.base import (
    BenchmarkDataError,
    LoadResult,
    Outcome,
    Predictions,
    Sample,
    Scores,
    VideoRoot,
    as_interval,
    check_options,
    check_split,
    overall_tally,
    unanswered,
    video_root,
)
from vidagent.bench.predictions import (
    read_id_mapping,
    read_json_rows,
)
from vidagent.geometry import interval_iou

if TYPE_CHECKING:
    from vidagent.bench.judge import Judge

NAME = "charades_sta"
TITLE = "Charades-STA"
SPLITS = ("test", "train")
DEFAULT_SPLIT = "test"
THRESHOLDS = (0.3, 0.5, 0.7)
#: The runner asks each sentence as a grounding task (``Question.task == "ground"``): AVI
#: grounds it in its own answer format, other strategies get :func:`prompt`'s question.
GROUNDING = True
FORMATS = '{"<video>_<n>": [start, end]}, or runner JSONL'


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """Charades-STA queries of ``split``."""
    check_options(NAME, options)
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    name = f"charades_sta_{split}.txt"
    path = next((p for p in (data / name, data / "Charades_anno" / name) if p.is_file()), None)
    if path is None:
        raise BenchmarkDataError(f"{name} not found in {data} (nor in {data}/Charades_anno)")
    finder = VideoRoot(video_root(data, videos, "Charades_v1_480", "videos"))
    seen: dict[str, int] = {}
    samples = []
    for n, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        if not line.strip():
            continue
        head, sep, sentence = line.partition("##")
        fields = head.split()
        try:
            video, start, end = fields[0], float(fields[1]), float(fields[2])
        except (IndexError, ValueError):
            raise BenchmarkDataError(
                f"{path}, line {n}: expected 'video start end##sentence'"
            ) from None
        if not sep:
            raise BenchmarkDataError(f"{path}, line {n}: expected 'video start end##sentence'")
        k = seen[video] = seen.get(video, -1) + 1
        sample_id = f"{video}_{k}"
        samples.append(
            Sample(
                id=sample_id,
                videos=(finder.resolve(sample_id, video),),
                question=sentence.strip(),
                answer=(start, end),
                task="interval",
                extras={"video": video},
            )
        )
    return LoadResult(NAME, split, tuple(samples), tuple(finder.missing))


def prompt(sample: Sample) -> str:
    """Ask for the moment the sentence describes, as start and end seconds."""
    return GROUND_QUESTION.format(event=sample.question)


def score(
    samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
) -> list[Outcome]:
    """The IoU of each predicted interval with the reference (0 when missing or unreadable)."""
    outcomes = []
    for s in samples:
        p = predictions.get(s.id)
        if p is None:
            outcomes.append(unanswered(s))
            continue
        interval = as_interval(p, strings=False)
        iou = interval_iou(interval, s.answer) if interval and isinstance(s.answer, tuple) else 0.0
        outcomes.append(Outcome(s.id, iou, detail={"prediction": interval, "iou": iou}))
    return outcomes


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """mIoU, and R@1 at IoU 0.3, 0.5 and 0.7, over every query."""
    n = len(outcomes)
    recall = {
        f"R@1 IoU={m}": 100.0 * sum(o.earned >= m for o in outcomes) / n if n else 0.0
        for m in THRESHOLDS
    }
    return Scores(
        benchmark=NAME,
        split=split,
        metric="mIoU",
        rule="all",
        overall=overall_tally(outcomes).result("all"),
        extra=recall,
        missing=sum(not o.answered for o in outcomes),
    )


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """``{id: [start, end]}`` or runner JSONL."""
    return read_id_mapping(path, read_json_rows(path), _keep, FORMATS)


def _keep(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
