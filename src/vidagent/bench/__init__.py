"""Benchmarks: loaders of the official annotation files and scorers that reproduce their numbers.

One module per benchmark under :mod:`.tasks`, each data plus four small functions (see
:mod:`vidagent.bench.base`):

| name | module | splits |
|---|---|---|
| ``egoschema`` | :mod:`.tasks.egoschema` | subset, full |
| ``nextqa`` | :mod:`.tasks.nextqa` | val, test (ATP-hard: an id list) |
| ``nextgqa`` | :mod:`.tasks.nextgqa` | test, val |
| ``intentqa`` | :mod:`.tasks.intentqa` | test, val, train |
| ``lvbench`` | :mod:`.tasks.lvbench` | all |
| ``longvideobench`` | :mod:`.tasks.longvideobench` | val, test (subset ``long``) |
| ``videomme`` | :mod:`.tasks.videomme` | all, short, medium, long (``subtitles``) |
| ``charades_sta`` | :mod:`.tasks.charades_sta` | test, train |
| ``crossvid`` | :mod:`.tasks.crossvid` | all, or task codes |
| ``mmbench_video`` | :mod:`.tasks.mmbench_video` | all |
| ``videozerobench`` | :mod:`.tasks.videozerobench` | all (levels 1-5) |
| ``timelens`` | :mod:`.tasks.timelens` | charades, activitynet, qvhighlights |

The harness beside them: :mod:`.base` (samples, outcomes, scores, the protocol,
:func:`evaluate`), :mod:`.predictions` (prediction-file and id-list readers), :mod:`.answers`
(agent answers in each scorer's form), :mod:`.judge` (the LLM judge for open-ended answers),
:mod:`.rundir` (a run's folder), :mod:`.report` and :mod:`.plots`, :mod:`.compare` (two runs
paired) and :mod:`.selective` (risk–coverage). Benchmark modules are
imported on first use (:func:`get_benchmark`).

An installed package adds a benchmark with an entry point in the ``vidagent.benchmarks`` group
naming its module (see :mod:`vidagent.plugins`); it is listed after the built-ins.

Example::

    from vidagent.bench import evaluate, get_benchmark

    bench = get_benchmark("nextqa")
    loaded = bench.load(Path("NExT-QA/dataset/nextqa"), split="val")
    scores = evaluate(bench, loaded, bench.read_predictions(Path("preds.json"), loaded.samples))
    print(scores.overall.score, scores.sections["group"]["C"].score)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vidagent.bench.base import (
    Benchmark,
    GroupScore,
    LoadResult,
    MissingVideo,
    Outcome,
    Sample,
    Scores,
    evaluate,
    letter_index,
)
from vidagent.exceptions import UserError
from vidagent.plugins import Registry

if TYPE_CHECKING:  # mypy checks that every module implements the Benchmark protocol
    from vidagent.bench.tasks import (
        charades_sta,
        crossvid,
        egoschema,
        intentqa,
        longvideobench,
        lvbench,
        mmbench_video,
        nextgqa,
        nextqa,
        timelens,
        videomme,
        videozerobench,
    )

    _MODULES: tuple[Benchmark, ...] = (
        charades_sta,
        crossvid,
        egoschema,
        intentqa,
        longvideobench,
        lvbench,
        mmbench_video,
        nextgqa,
        nextqa,
        timelens,
        videomme,
        videozerobench,
    )

#: Benchmark name -> module, imported on first use; the names the CLI accepts.
BENCHMARKS: Registry[Benchmark] = Registry(
    "vidagent.benchmarks",
    "benchmark",
    {
        "egoschema": "vidagent.bench.tasks.egoschema",
        "nextqa": "vidagent.bench.tasks.nextqa",
        "nextgqa": "vidagent.bench.tasks.nextgqa",
        "intentqa": "vidagent.bench.tasks.intentqa",
        "lvbench": "vidagent.bench.tasks.lvbench",
        "longvideobench": "vidagent.bench.tasks.longvideobench",
        "videomme": "vidagent.bench.tasks.videomme",
        "charades_sta": "vidagent.bench.tasks.charades_sta",
        "crossvid": "vidagent.bench.tasks.crossvid",
        "mmbench_video": "vidagent.bench.tasks.mmbench_video",
        "videozerobench": "vidagent.bench.tasks.videozerobench",
        "timelens": "vidagent.bench.tasks.timelens",
    },
)

_ALIASES = {
    "next-qa": "nextqa",
    "next-gqa": "nextgqa",
    "video-mme": "videomme",
    "charades-sta": "charades_sta",
}
_ALIASES |= {"charades": "charades_sta", "lvb": "longvideobench"}
_ALIASES |= {"timelens-bench": "timelens", "vzb": "videozerobench"}


def get_benchmark(name: str) -> Benchmark:
    """The benchmark module called ``name`` (case and ``-``/``_`` do not matter).

    Raises:
        UserError: no such benchmark; the message lists the known ones.
        ConfigError: a plugin benchmark's module fails to import (the message names its package).
    """
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in BENCHMARKS:  # a plugin may spell its name with "-"; ours use "_"
        key = key.replace("-", "_")
    if key not in BENCHMARKS:
        raise UserError(f"unknown benchmark {name!r}; choose one of: {', '.join(BENCHMARKS)}")
    return BENCHMARKS.load(key)


__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "GroupScore",
    "LoadResult",
    "MissingVideo",
    "Outcome",
    "Sample",
    "Scores",
    "evaluate",
    "get_benchmark",
    "letter_index",
]
