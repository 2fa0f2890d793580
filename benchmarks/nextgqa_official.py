"""NExT-GQA: vidagent's scorer beside the official ``eval_ground`` on the same prediction files.

It needs a checkout of doc-doc/NExT-GQA (MIT; not shipped with vidagent, and none of its code is
copied here): ``OFFICIAL/code/TempGQA/eval_ground.py`` is imported as it is (with its ``util``),
and ``OFFICIAL/datasets/nextgqa/`` holds the annotations both sides read. For each split it
writes random prediction files in the official form — a ground file ``{"<video>_<qid>": [s, e]}``
and the QA results ``<split>-res.json`` (``{id: {"answer", "prediction"}}``) beside it, as
``eval_ground.py``'s ``main`` reads them — runs ``eval_ground`` on them and ``vidagent``'s
``nextgqa`` scorer on the same files, and compares the seven printed numbers (Acc@GQA, mIoP,
IoP@0.3, IoP@0.5, mIoU, IoU@0.3, IoU@0.5, one decimal as the script prints them).

Clean files predict every question with a span inside the video; messy ones leave questions
out, add keys the annotations lack, and give point spans, reversed spans, spans past either end
of the video, integer seconds and spans on a gold boundary. (A question whose span has IoP >= 0.5
but no QA result stops the official script with a KeyError, so every predicted span has one.)

    .venv/bin/python benchmarks/nextgqa_official.py OFFICIAL [--files 50] [--seed 0]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from vidagent.bench import get_benchmark
from vidagent.bench.base import evaluate

COLUMNS = ("Acc@GQA", "mIoP", "IoP@0.3", "IoP@0.5", "mIoU", "IoU@0.3", "IoU@0.5")


def official_module(root: Path) -> Any:
    """``eval_ground.py`` imported from the checkout (its folder on the path for ``util``)."""
    folder = root / "code" / "TempGQA"
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("eval_ground", folder / "eval_ground.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def official_numbers(module: Any, gold: dict[str, Any], ground: Any, qa: Any) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        module.eval_ground(gold, ground, qa, subset=None, gs=False)
    return out.getvalue().splitlines()[-1].split()


def ours(data: Path, split: str, ground_file: Path) -> list[str]:
    bench = get_benchmark("nextgqa")
    loaded = bench.load(data, split=split)
    predictions = bench.read_predictions(ground_file, loaded.samples)
    scores = evaluate(bench, loaded, predictions)
    values = [scores.overall.score, *(scores.extra[k] for k in COLUMNS[1:])]
    return [f"{v:.1f}" for v in values]


def random_files(
    gold: dict[str, Any], options: dict[str, int], rng: random.Random, messy: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ground file and QA results over the gold questions."""
    ground: dict[str, Any] = {}
    qa: dict[str, Any] = {}
    for video, entry in gold.items():
        duration = float(entry["duration"])
        for qid, locations in entry["location"].items():
            key = f"{video}_{qid}"
            if messy and rng.random() < 0.15:
                continue
            ground[key] = _span(rng, duration, locations, messy)
            qa[key] = {
                "answer": options.get(key, 0),
                "prediction": rng.choice([options.get(key, 0), rng.randrange(5)]),
            }
    if messy:
        for n in range(rng.randrange(1, 4)):  # keys the annotations lack are ignored
            ground[f"9999999{n}_0"] = [1.0, 2.0]
    return ground, qa


def _span(rng: random.Random, duration: float, locations: list[Any], messy: bool) -> list[Any]:
    s0, s1 = rng.choice(locations)
    kind = rng.random() if messy else 1.0
    if kind < 0.1:
        t = round(rng.uniform(0, duration), 1)
        return [t, t]  # a point
    if kind < 0.2:
        a, b = sorted(round(rng.uniform(0, duration), 1) for _ in range(2))
        return [b, a]  # reversed
    if kind < 0.3:
        return [
            round(rng.uniform(-5, 0), 1),
            round(duration + rng.uniform(0, 5), 1),
        ]  # past both ends
    if kind < 0.4:
        return [int(s0), int(s1) + 1]  # whole seconds
    if kind < 0.5:
        return [s0, round(s1 + rng.uniform(0, 3), 1)]  # on a gold boundary
    if rng.random() < 0.5:  # near a gold span
        return sorted(round(x + rng.uniform(-3, 3), 1) for x in (s0, s1))
    return sorted(round(rng.uniform(0, duration), 1) for _ in range(2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("official", type=Path, help="a checkout of doc-doc/NExT-GQA")
    parser.add_argument("--files", type=int, default=50, help="random files per split and kind")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    module = official_module(args.official)
    data = args.official / "datasets" / "nextgqa"
    rng = random.Random(args.seed)
    failed = checked = 0
    for split in ("val", "test"):
        gold = json.loads((data / f"gsub_{split}.json").read_text())
        loaded = get_benchmark("nextgqa").load(data, split=split)
        options = {s.id: int(s.answer) for s in loaded.samples if isinstance(s.answer, int)}
        for messy in (False, True):
            for _ in range(args.files):
                ground, qa = random_files(gold, options, rng, messy)
                with tempfile.TemporaryDirectory() as tmp:
                    ground_file = Path(tmp) / f"{split}_ground.json"
                    ground_file.write_text(json.dumps(ground))
                    (Path(tmp) / f"{split}-res.json").write_text(json.dumps(qa))
                    want = official_numbers(module, gold, ground, qa)
                    got = ours(data, split, ground_file)
                checked += 1
                if want != got:
                    failed += 1
                    print(f"{split} {'messy' if messy else 'clean'}: official {want}, ours {got}")
    print(f"{checked} files, {checked - failed} equal to eval_ground on all 7 numbers")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
