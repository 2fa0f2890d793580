"""What an endpoint bills to index a video, against what ``index --dry-run`` said it would.

A loopback OpenAI-compatible server in this process (``tests/tokenserver.py``) bills every
request as OpenAI does: text by an approximation of its tokenizer, each image by OpenAI's
documented rule from the JPEG's own size and ``detail``, replies scripted at a realistic length
(a 170-word caption, a four-person graph, a short summary). The captioner and the llm are
``openai:gpt-4o`` on it and the embedder ``openai:text-embedding-3-small``, priced at their list
prices (USD per 1M tokens: gpt-4o 2.50 in, 10.00 out; the embedder 0.02).

Printed, per endpoint stage (caption, embed, graph, summarize): the dry run's calls, input
tokens and cost beside what the run's usage ledger reports, and their ratio (the dry run aims
within ±25%); then each cost option, each a fresh caption run of the same video, against the
default captions: ``detail=low``, ``caption_skip_repeats=0.05``, in input tokens and dollars;
then ``batch`` (OpenAI's Batch API, which the server also serves): AVI-style captions and the
graph without and with it (DVD's registry captions are a chain, which no batch can hold).

The video (``--video PATH``) defaults to a generated one: ``--minutes`` (10) at 1280x720 and
10 fps, 20 shots of which every other one is still (a slide, a locked-off camera), with a line
of text on screen in each still shot's second half. Offline stages (transcribe, read_text,
detect, speakers) are not run: they bill nothing.

    .venv/bin/python benchmarks/ingest_cost.py [--video PATH] [--minutes 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

STAGES = ("caption", "embed", "graph", "summarize")
#: The role whose calls a stage's dry-run row counts (graph's few embedding calls, for the
#: names of the people it found, are in the total only).
ROLE = {"caption": "captioner", "embed": "embed", "graph": "llm", "summarize": "llm"}
PRICES = {
    "openai:gpt-4o": {"input": 2.5, "output": 10.0},
    "openai:text-embedding-3-small": {"input": 0.02, "output": 0.0},
}
OPTIONS = {
    "detail=low": {"vlm": "openai:gpt-4o?detail=low"},
    "skip repeats 0.05": {"caption_skip_repeats": 0.05},
}


def make_long_video(path: Path, minutes: float) -> Path:
    """The default video: still and moving shots, text on the still ones (module docstring)."""
    from vidagent.media.synth import make_video

    duration, shots = minutes * 60, 20
    length = duration / shots
    still = tuple(range(0, shots, 2))
    text = [(k * length + length / 2, (k + 1) * length, f"SLIDE {k // 2 + 1}") for k in still]
    make_video(
        path,
        duration=duration,
        fps=10,
        size=(1280, 720),
        shots=shots,
        still_shots=still,
        text_overlays=text,
        gop=50,
    )
    return path


def settings_for(home: Path, base_url: str, **extra: Any) -> Any:
    from vidagent.config import load_settings

    return load_settings(
        {
            "home": home,
            "cache": "off",
            "openai_base_url": base_url,
            "vlm": "openai:gpt-4o",
            "llm": "openai:gpt-4o",
            "embed": "openai:text-embedding-3-small",
            "prices": PRICES,
            "default_concurrency": 1,
            **extra,
        },
        env={},
    )


def estimate(video: Path, settings: Any, stages: Sequence[str]) -> dict[str, Any]:
    """The dry run's rows by stage, each with its cost."""
    from vidagent.ingest import estimate_path
    from vidagent.models.prices import call_cost

    rows = {}
    for r in estimate_path(video, settings, stages).stages[1:]:
        cost = call_cost(r.spec, r.input_tokens, r.output_tokens, settings, local=False)
        rows[r.stage] = {"calls": r.calls, "in": r.input_tokens, "cost": cost or 0.0}
    return rows


def run(video: Path, settings: Any, stages: Sequence[str]) -> tuple[dict[str, Any], float]:
    """What the run's usage ledger reports by stage, and the run's wall seconds."""
    from vidagent.ingest import index_path
    from vidagent.library import Library
    from vidagent.models.client import Models

    models = Models(settings)
    marks: dict[str, int] = {}
    rows: dict[str, Any] = {}

    def before(name: str) -> None:
        marks[name] = len(models.ledger.records())

    def after(stage: Any) -> None:
        made = [r for r in models.ledger.records()[marks[stage.stage] :] if not r.cached]
        done = [r for r in made if r.role == ROLE.get(stage.stage)]
        rows[stage.stage] = {
            "all_cost": sum(r.cost_usd for r in made),
            "calls": len(done),
            "in": sum(r.input_tokens for r in done),
            "cost": sum(r.cost_usd for r in done),
            "note": stage.note,
        }

    started = time.perf_counter()
    with models:
        index_path(
            video,
            library=Library(settings.library_uri),
            settings=settings,
            models=models,
            stages=stages,
            before_stage=before,
            on_stage=after,
        )
    return rows, time.perf_counter() - started


def ratio(estimated: float, actual: float) -> str:
    return f"{estimated / actual:5.2f}" if actual else "    -"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--video", type=Path, help="a video file (default: a generated one)")
    parser.add_argument("--minutes", type=float, default=10.0, help="the generated video's length")
    args = parser.parse_args()

    from _cpu import describe  # the CPU every figure below was measured on
    from tokenserver import TokenServer

    from vidagent.media import probe

    work = Path(tempfile.mkdtemp(prefix="ingest-cost-"))
    video = args.video
    if video is None:
        started = time.perf_counter()
        video = make_long_video(work / "long.mp4", args.minutes)
        print(f"generated {video.name} in {time.perf_counter() - started:.0f} s")
    info = probe(video)
    print(describe())
    print(f"video: {video.name}, {info.duration / 60:.1f} min, {info.width}x{info.height}")
    with TokenServer() as server:
        base = settings_for(work / "base", server.base_url)
        guess = estimate(video, base, STAGES)
        actual, seconds = run(video, base, STAGES)
        print(f"\nindex against the loopback endpoint: {seconds:.0f} s wall")
        print(
            f"{'stage':<10} {'calls est':>9} {'run':>5} {'in tok est':>11} {'run':>10} "
            f"{'ratio':>5} {'$ est':>7} {'$ run':>7} {'ratio':>5}"
        )
        for stage in STAGES:
            g, a = guess[stage], actual.get(stage, {"calls": 0, "in": 0, "cost": 0.0})
            print(
                f"{stage:<10} {g['calls']:>9} {a['calls']:>5} {g['in']:>11,} {a['in']:>10,} "
                f"{ratio(g['in'], a['in'])} {g['cost']:>7.3f} {a['cost']:>7.3f} "
                f"{ratio(g['cost'], a['cost'])}"
            )
        total_g = sum(g["cost"] for g in guess.values())
        total_a = sum(a["all_cost"] for a in actual.values())
        print(
            f"{'total':<10} {'':>9} {'':>5} {'':>11} {'':>10} {'':>5} {total_g:>7.3f} "
            f"{total_a:>7.3f} {ratio(total_g, total_a)}"
        )

        print("\ncaption options, each a fresh caption run of the same video:")
        default = actual["caption"]
        print(
            f"  {'default':<18} {default['calls']:>4} calls {default['in']:>10,} in tok "
            f"${default['cost']:.3f}"
        )
        for name, extra in OPTIONS.items():
            settings = settings_for(work / name.replace(" ", "-"), server.base_url, **extra)
            rows, _ = run(video, settings, ("caption",))
            row = rows["caption"]
            saved = default["in"] - row["in"]
            print(
                f"  {name:<18} {row['calls']:>4} calls {row['in']:>10,} in tok "
                f"${row['cost']:.3f}  saves {saved:,} tokens, "
                f"${default['cost'] - row['cost']:.3f} ({saved / default['in']:.0%})"
                + (f"  [{row['note']}]" if row["note"] else "")
            )
        print("\nbatch (AVI-style captions and the graph; DVD's registry captions are a chain):")
        costs = {}
        for flag in (False, True):
            name = "batch" if flag else "no-batch"
            settings = settings_for(work / name, server.base_url, caption_style="avi", batch=flag)
            rows, _ = run(video, settings, ("caption", "graph"))
            costs[flag] = sum(r["all_cost"] for r in rows.values())
            tokens = sum(r["in"] for r in rows.values())
            print(f"  {name:<18} {tokens:>10,} in tok ${costs[flag]:.3f}")
        print(
            f"  batch saves ${costs[False] - costs[True]:.3f} ({1 - costs[True] / costs[False]:.0%})"
        )
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
