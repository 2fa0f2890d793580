"""What the index holds inside a cited span, as pieces a claim's words are looked for in.

Each piece has its own time:

- **speech**: each transcript segment with a word inside the span, read whole (a span that
  cuts a sentence cites the sentence), with its words' own times (a segment without word times
  is read inside the span: where its words are is not known) and who says it (the speakers
  stage's label, with the name a user gave it: ``S1 (Dr Lee)``);
- **on-screen text**: each distinct OCR line of a clip, at the frames it was read in (an index
  written before ingest kept those times: at its clip);
- **caption**: each sentence of a model's caption of a clip (the perception describer's
  caption is not read: its facts are, below, and what it quotes of the speech and the lines is
  read from the transcript and the lines themselves);
- **picture**: the perception describer's whole-frame facts of a clip (colours, brightness,
  motion), read only for a claim about the picture itself; a claim's words are looked for in
  the measured values alone (``mostly black``, ``dark``, ``moderate motion``), not in the
  sentence's labels (``brightness 0.11``: a claim's "bright" is not found in it);
- **detection**: each label detected in a clip, at its frames' times;
- **graph**: each relation and timed action of the entity graph overlapping the span.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from vidagent.library.schema import spoken
from vidagent.models.perception import LABEL as DESCRIBER_LABEL

if TYPE_CHECKING:
    from vidagent.library.schema import ClipRow
    from vidagent.tools.base import Evidence
    from vidagent.tools.index import IndexView

Source = Literal["speech", "on-screen text", "caption", "picture", "detection", "graph"]


@dataclass(frozen=True)
class Piece:
    """A piece of indexed content inside a cited span, with its own time."""

    video_id: str
    t0: float
    t1: float
    source: Source
    text: str
    #: the words' own times ``(t0, t1, word)``, for speech
    words: tuple[tuple[float, float, str], ...] = field(default=(), repr=False)
    #: who says it, for speech: ``S1 (Dr Lee)``, ``S1``, ``""`` where not labelled
    speaker: str = ""
    #: what a claim's words are looked for in, where not the text itself (a picture's values)
    values: str = field(default="", repr=False)

    @property
    def holds(self) -> str:
        """The text a claim's key words are looked for in."""
        return self.values or self.text


def pieces_in(index: IndexView, span: Evidence) -> list[Piece]:
    """The indexed content inside ``span`` (module docstring)."""
    clips = index.clips(span.video_id, span.t0, span.t1)
    lo = min([span.t0, *(c.t0 for c in clips)])
    hi = max([span.t1, *(c.t1 for c in clips)])
    found = speech(index, span.video_id, lo, hi)
    for clip in clips:
        found += clip_pieces(clip)
    found += [
        Piece(span.video_id, a, b, "graph", text)
        for a, b, text in index.graph_events(span.video_id, lo, hi)
    ]
    return found


def speech(index: IndexView, video_id: str, lo: float, hi: float) -> list[Piece]:
    """The transcript segments with a word inside ``[lo, hi]``, each read whole."""
    pieces = []
    segments = index.transcript(video_id, lo, hi)
    names = index.speaker_names(video_id) if any(s.speaker for s in segments) else {}
    for seg in segments:
        timed = tuple((float(w[0]), float(w[1]), str(w[2])) for w in json.loads(seg.words or "[]"))
        who = f"{seg.speaker} ({names[seg.speaker]})" if seg.speaker in names else seg.speaker
        if any(lo <= (w[0] + w[1]) / 2 <= hi for w in timed):
            text = spoken(w[2] for w in timed)
            pieces.append(Piece(video_id, timed[0][0], timed[-1][1], "speech", text, timed, who))
        elif not timed and seg.text.strip():  # no word times: where it is said is not known
            a, b = max(seg.t0, lo), min(seg.t1, hi)
            pieces.append(Piece(video_id, a, b, "speech", seg.text.strip(), speaker=who))
    return pieces


def clip_pieces(clip: ClipRow) -> list[Piece]:
    """A clip's on-screen lines, caption sentences or describer facts, and detections."""
    vid, t0, t1 = clip.video_id, clip.t0, clip.t1
    found = [Piece(vid, a, b, "on-screen text", x) for x, a, b in clip.ocr_line_times()]
    facts = clip.describer_facts()
    if facts is not None:
        if facts.picture:
            values = " ".join(facts.picture_values())
            found.append(Piece(vid, t0, t1, "picture", facts.picture, values=values))
    elif not clip.caption.startswith(DESCRIBER_LABEL):  # a describer caption with no facts kept
        found += [Piece(vid, t0, t1, "caption", s) for s in caption_sentences(clip.caption)]
    seen: dict[str, list[float]] = {}
    try:
        detections = json.loads(clip.detections or "[]")
    except json.JSONDecodeError:
        detections = []
    for d in detections if isinstance(detections, list) else []:
        if isinstance(d, dict) and d.get("label"):
            seen.setdefault(str(d["label"]), []).append(float(d.get("t", t0)))
    for label, times in seen.items():
        noun = label if len(times) == 1 else f"{label} ({len(times)} detections)"
        found.append(Piece(vid, min(times), max(times), "detection", f"{noun} seen"))
    return found


def caption_sentences(caption: str) -> list[str]:
    """A model caption's sentences."""
    from vidagent.agents.citations.claims import SENTENCE

    return [s.strip() for s in SENTENCE.split(caption.strip()) if s.strip()]
