"""Checked citations and abstention on the real clips: are supported citations where the answer
is, and does an answer nothing supports abstain?

The questions are ``tests/data/citations/questions.jsonl`` (its README says how each true span
was checked against the index), in eleven parts reported apart: **dev**, the 13 hand-checked
questions of ``tests/data/offline_mcq`` and 7 the clips cannot answer, on which the checker's
faults were found and fixed; **held-out**, 16 answerable and 8 unanswerable questions written
before the fixes were measured (a second round of fixes was found on them); **fresh**, 13 and
6 written after both rounds (a third round was found on all three parts); **later**, 15 and 6
written after the third round by someone who had not read the checker (a fourth round was
found on it); **last**, 14 and 6 written the same way after the fourth round and measured
once (a fifth round was then found on all five parts); **newest**, 14 and 6 written the same
way before the fifth round was measured, and measured once after it (a sixth round was then
found on it and on last); **final**, 14 and 6 written the same way, with questions about order
and position among them, and measured once after the sixth round; **after**, **ninth**,
**tenth** and **eleventh**, 14 and 6 each, written blind by helper sessions, each measured once with the
checker as it stood when it was measured (tests/data/citations/README.md).

Every strategy runs with the embedded offline defaults (SmolLM2-135M, the perception describer,
MiniLM, faster-whisper tiny.en, RapidOCR, OpenCV) and ``abstain=auto``; DVD and EEA get a
1-step budget unless ``--max-steps`` says otherwise (DVD with evidence first on, as in
``benchmarks/offline_accuracy.py``). Per strategy and part it prints:

- **precision**: of the ``supported`` citations of answerable questions, the share inside one
  of the answer's true spans (and the share overlapping one); two cited spans tightened to the
  same time (two clips of one sentence) are one citation; a wrong answer has no true span,
  so its supported citations count and are never inside; no tolerance: the spans are written
  from the index's word times and clip bounds, rounded outward to a tenth of a second; beside
  it the share inside of right answers' supported citations alone (where the checker put the
  support, whatever the strategy chose);
- **time error**: seconds of a right answer's supported citation outside the nearest true
  span, mean; beside it the mean length of the tightened and of the cited spans;
- **abstain (unanswerable)**: the share of unanswerable questions that abstained;
- **false abstain**: the share of answerable questions that abstained, and how many of those
  answers were right (withholding a wrong answer is what abstention is for);
- **right answers withheld**: the share of right answers that abstained (the checker's own
  error, whatever the strategy's accuracy);
- **selective accuracy**: right answers over the questions that did not abstain (an answered
  unanswerable question is wrong), with the coverage (share not abstaining).

    .venv/bin/python benchmarks/citations.py [--strategy NAME ...]
        [--part NAME] [--max-steps N] [--only ID,...] [--save FILE]
        [--recheck FILE] [--verbose] [--critic auto|on|off]

``--save FILE`` appends each answer (its letter, evidence spans and seconds) to FILE as it
comes; ``--recheck FILE`` checks the saved answers again with the current checker, without
running the strategies: an agent's answer and evidence do not depend on the checker (it runs
after the strategy, and the critic is off without a vision model), so a slow strategy is run
once and re-scored after a change to :mod:`vidagent.agents.citations`. The clips are indexed
for the strategy that answered, as in the run that saved the answers (in a fresh ``--home``
too: the spans are checked against what that index holds).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidagent.agents.base import Agent, Answer
    from vidagent.agents.run import Run

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
DATA = ROOT / "tests" / "data" / "citations" / "questions.jsonl"
STRATEGIES: dict[str, dict[str, Any]] = {
    "retrieval": {},
    "dvd": {"evidence_first": "on"},
    "eea": {},
}
STEPS = {"retrieval": None, "dvd": 1, "eea": 1}
#: The set's parts, in the order they were written (module docstring).
PARTS = (
    "dev",
    "held-out",
    "fresh",
    "later",
    "last",
    "newest",
    "final",
    "after",
    "ninth",
    "tenth",
    "eleventh",
)


def questions() -> list[dict[str, Any]]:
    from realmedia import fetch_clip

    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    for name in {r["video"] for r in rows}:
        fetch_clip(name)
    return rows


@dataclass
class Tally:
    """One strategy's counts over some questions (module docstring)."""

    quoted: int = 0
    quote_held: int = 0
    found_right: int = 0
    inside: int = 0
    words_inside: int = 0
    tight_len: list[float] = field(default_factory=list)
    answerable: int = 0
    unanswerable: int = 0
    abstained_none: int = 0
    unverified_none: int = 0
    abstained_real: int = 0
    abstained_right: int = 0
    unverified_real: int = 0
    right: int = 0
    kept: int = 0
    kept_right: int = 0
    notes_right: int = 0
    notes_wrong: int = 0
    seconds: list[float] = field(default_factory=list)

    def add(self, q: dict[str, Any], answer: Any, seconds: float, said: Said) -> None:
        v = answer.verification
        abstained = bool(v and v.abstained)
        unverified = bool(v and v.unverified)
        self.seconds.append(seconds)
        right = q["answer"] is not None and answer.choice == q["answer"]
        if q["answer"] is None:
            self.unanswerable += 1
            self.abstained_none += abstained
            self.unverified_none += unverified
        else:
            self.answerable += 1
            self.abstained_real += abstained
            self.abstained_right += abstained and right
            self.unverified_real += unverified
            self.right += right
        places = set()
        for c in v.citations if v else ():
            # two cited clips quoting the same words at the same time are one quote
            if c.label not in ("found", "partial") or (c.video_id, c.t0, c.t1) in places:
                continue
            places.add((c.video_id, c.t0, c.t1))
            self.quoted += 1
            self.quote_held += said.holds(c)
            self.tight_len.append(c.t1 - c.t0)
            if c.notes:
                self.notes_right += right
                self.notes_wrong += not right
            if right and c.label == "found":
                self.found_right += 1
                self.inside += any(s0 <= c.t0 and c.t1 <= s1 for s0, s1 in q["spans"])
                # the quoted words themselves: a spoken quote without its padding
                from vidagent.agents.citations.check import PAD_SECONDS

                pad = PAD_SECONDS if c.source == "speech" else 0.0
                a, b = min(c.t0 + pad, c.t1), max(c.t1 - pad, c.t0)
                self.words_inside += any(s0 <= a and b <= s1 for s0, s1 in q["spans"])
        if not abstained:
            self.kept += 1
            self.kept_right += right

    def row(self, name: str) -> str:
        def share(a: int, b: int) -> str:
            return f"{a / b:.0%} ({a}/{b})" if b else "–"

        def mean(xs: list[float]) -> str:
            return f"{sum(xs) / len(xs):.1f}" if xs else "–"

        total = self.answerable + self.unanswerable
        return (
            f"| {name} | {share(self.quote_held, self.quoted)} | "
            f"{share(self.inside, self.found_right)} | "
            f"{share(self.words_inside, self.found_right)} | {mean(self.tight_len)} | "
            f"{share(self.abstained_none, self.unanswerable)} "
            f"(+{self.unverified_none} unverified) | "
            f"{share(self.abstained_right, self.right)} | "
            f"{share(self.abstained_real, self.answerable)}, {self.unverified_real} unverified | "
            f"{share(self.kept_right, self.kept)} | {share(self.kept, total)} | "
            f"{self.notes_wrong} wrong / {self.notes_right} right | {mean(self.seconds)} |"
        )


class Said:
    """What the index says and shows at each time, to check a quote against (quote precision):
    a spoken quote's words must be said, in order, by words whose middle lies inside the
    quote's time; a line must be one of the lines read at frames inside (or, where the index
    kept no frame times, in a clip overlapping) its time; a detection's label must be detected
    at a frame inside its time; a picture, caption or graph quote must be its clip's or
    event's own text."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def holds(self, c: Any) -> bool:
        from vidagent.agents.citations.claims import tokens
        from vidagent.agents.citations.pieces import clip_pieces, speech
        from vidagent.tools.index import IndexView

        index = IndexView(self.session.library, self.session.models)
        eps = 1e-6
        if c.source == "speech":
            said = [
                w
                for p in speech(index, c.video_id, c.t0, c.t1)
                for w in p.words
                if c.t0 - eps <= (w[0] + w[1]) / 2 <= c.t1 + eps
            ]
            quote = [t for w in c.text.split() for t in sorted(tokens(w), key=w.lower().find)]
            heard = [t for w in said for t in sorted(tokens(w[2]), key=w[2].lower().find)]
            n = len(quote)
            return any(heard[i : i + n] == quote for i in range(len(heard) - n + 1))
        clips = index.clips(c.video_id, c.t0, c.t1) or index.clips(c.video_id, c.t0, c.t0 + eps)
        pieces = [p for clip in clips for p in clip_pieces(clip)]
        return any(
            p.source == c.source and p.text == c.text and p.t0 - eps <= c.t0 and c.t1 <= p.t1 + eps
            for p in pieces
        )


@dataclass(frozen=True)
class Recorded:
    """A saved answer: its letter and evidence spans ``(video_id, t0, t1)``."""

    letter: str = ""
    spans: tuple[tuple[str, float, float], ...] = ()


def recorded_strategy() -> type[Agent]:
    """A strategy that gives a saved answer with its saved evidence (``--recheck``)."""
    from vidagent.agents.base import Agent, IndexPlan
    from vidagent.tools.base import Evidence

    class Recheck(Agent):
        name = "recorded"
        Options = Recorded
        options: Recorded

        def index_plan(self) -> IndexPlan:
            return IndexPlan(())  # the saved run indexed what it read

        def solve(self, run: Run) -> Answer:
            run.evidence = tuple(Evidence(v, a, b) for v, a, b in self.options.spans)
            return run.answer(self.options.letter)

    return Recheck


def run(
    strategy: str,
    rows: list[dict[str, Any]],
    home: Path,
    steps: int | None,
    verbose: bool,
    save: Path | None = None,
    saved: dict[str, dict[str, Any]] | None = None,
    critic: str = "auto",
) -> dict[str, Tally]:
    """``strategy``'s tallies over each part of ``rows`` and over all of them (``saved``: the
    saved answers to check again instead of asking; ``critic``: the runtime's switch, ``on``
    reads each answer with the embedded SmolLM2 as the reader)."""
    runtime = {"critic": critic}
    from vidagent.app import Session
    from vidagent.budget import Budget
    from vidagent.config import load_settings

    settings = load_settings({"home": home, "cache": "off", "abstain": "auto"}, env={})
    media = ROOT / ".cache" / "media"
    tallies = {part: Tally() for part in (*PARTS, "all")}
    with Session(settings) as session:
        agent = session.agent(strategy, options=STRATEGIES[strategy])
        said = Said(session)
        for q in rows:
            video = media / q["video"]
            # Indexed for the strategy that answered, in a recheck too: the recorded answers'
            # spans are checked against what that strategy's index holds (a fresh home would
            # hold nothing, and every answer would abstain).
            session.resolve_videos([video], agent)  # indexing is not timed
            if saved is not None:
                if q["id"] not in saved:
                    continue
                was = saved[q["id"]]
                answer = session.ask(
                    video,
                    q["question"],
                    options=q["options"],
                    strategy="recorded",
                    trace=False,
                    strategy_options={
                        "letter": was["letter"] or "",
                        "spans": was["evidence"],
                        **runtime,
                    },
                ).answer
                seconds = was["seconds"]
            else:
                started = time.monotonic()
                answer = session.ask(
                    video,
                    q["question"],
                    options=q["options"],
                    strategy=strategy,
                    budget=Budget(steps=steps) if steps else None,
                    trace=False,
                    strategy_options={**STRATEGIES[strategy], **runtime},
                ).answer
                seconds = time.monotonic() - started
            assert answer is not None
            if save is not None:
                record = {
                    "id": q["id"],
                    "strategy": strategy,
                    "letter": answer.letter,
                    "evidence": [[e.video_id, e.t0, e.t1] for e in answer.evidence],
                    "seconds": round(seconds, 1),
                    "load": round(os.getloadavg()[0], 1),
                }
                with save.open("a") as f:
                    f.write(json.dumps(record) + "\n")
            for part in (q["part"], "all"):
                tallies[part].add(q, answer, seconds, said)
            if verbose:
                v = answer.verification
                cites = ", ".join(
                    f"{c.label[0]}:{c.t0:.1f}-{c.t1:.1f}" for c in (v.citations if v else ())
                )
                read = answer.review
                critic = f" reader={read.verdict}/{read.second or '-'}" if read else ""
                print(
                    f"  {strategy:<9} {q['part']:<8} {q['id']:<16} {answer.letter or '-'} "
                    f"true={q['answer']} abstained={bool(v and v.abstained)} "
                    f"support={v.support if v else 0:.2f} [{cites}]{critic} {seconds:.1f}s",
                    flush=True,
                )
    return {part: t for part, t in tallies.items() if t.answerable + t.unanswerable}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", action="append", choices=list(STRATEGIES))
    parser.add_argument("--max-steps", type=int, help="steps for dvd and eea [1]")
    parser.add_argument("--part", choices=PARTS, help="one part of the set only")
    parser.add_argument("--only", help="comma-separated question ids (default: all)")
    parser.add_argument("--home", type=Path, help="a vidagent home to reuse (default: a temp one)")
    parser.add_argument("--save", type=Path, help="append each answer to this JSONL file")
    parser.add_argument("--recheck", type=Path, help="check the answers saved in this file again")
    parser.add_argument("--verbose", action="store_true", help="print each answer")
    parser.add_argument(
        "--critic",
        choices=("auto", "on", "off"),
        default="auto",
        help="the reader: on reads each answer with the llm (the embedded SmolLM2) [auto: off "
        "without a vision model]",
    )
    args = parser.parse_args()
    rows = questions()
    if args.only:
        rows = [r for r in rows if r["id"] in set(args.only.split(","))]
    if args.part:
        rows = [r for r in rows if r["part"] == args.part]
    from _cpu import describe

    print(describe(), flush=True)
    print(f"{len(rows)} questions; load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or Path(tmp)
        results = {}
        saved: dict[str, dict[str, dict[str, Any]]] = {}
        if args.recheck:
            from vidagent.agents.strategies import STRATEGIES as REGISTRY

            REGISTRY.register("recorded", recorded_strategy(), replace=True)
            for line in args.recheck.read_text().splitlines():
                if line.strip():
                    record = json.loads(line)
                    saved.setdefault(record["strategy"], {})[record["id"]] = record
        for s in args.strategy or (list(saved) if args.recheck else list(STRATEGIES)):
            steps = args.max_steps if args.max_steps and s != "retrieval" else STEPS[s]
            results[s] = run(
                s,
                rows,
                home,
                steps,
                args.verbose,
                args.save,
                saved.get(s, {}) if args.recheck else None,
                args.critic,
            )
    print(
        "| strategy | part | quote precision | right answers' found inside true span | "
        "its words inside (no padding) | quote length s | abstain (unanswerable) | "
        "right answers withheld | "
        "answerable abstained | selective accuracy | coverage | noted (wrong/right) | "
        "mean seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, tallies in results.items():
        for part, tally in tallies.items():
            print(tally.row(f"{name} | {part}"))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
