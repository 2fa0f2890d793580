"""The perception describer's caption: measured facts about one clip, no model.

With no vision-language model (the offline default ``vlm = perception:describer``), the caption
stage writes each clip's caption from what the other stages stored and the clip's thumbnails:
people and faces with position and size, on-screen text, dominant colours, brightness, motion,
shot cuts and overlapping speech. The caption opens with the perception label and never
pretends to be a VLM's narration. People are re-identified across clips by a hue x saturation
histogram of their box on the nearest thumbnail, which builds the subject registry.

Beside the caption, :func:`describe` returns the same measurements as
:class:`~vidagent.library.schema.DescriberFacts` (the clip row's ``facts``), so no reader has to
take them back out of the prose: counts, the lines and speech quoted, colours, brightness,
motion, cuts, and the caption's sentences that report something found, verbatim.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.library.readable import readable_lines
from vidagent.library.schema import DescriberFacts
from vidagent.timecode import clock, hhmmss

if TYPE_CHECKING:
    from vidagent.library import ClipRow

_SUBJECT_ID = re.compile(r"subject_(\d+)$")

_MOTION = (
    (0.02, "static"),
    (0.06, "little motion"),
    (0.12, "moderate motion"),
    (2.0, "strong motion"),
)


def next_subject_id(registry: dict[str, Any]) -> str:
    """The next runtime id ``subject_<n>``, one above the highest in use."""
    used = [int(m.group(1)) for sid in registry if (m := _SUBJECT_ID.match(sid))]
    return f"subject_{max(used, default=0) + 1}"


@dataclasses.dataclass
class _Seen:
    """One stored detection, its box as fractions of the frame ``(x0, y0, x1, y1)``."""

    t: float
    label: str
    box: tuple[float, float, float, float]
    subject: str = ""

    @property
    def where(self) -> str:
        centre = (self.box[0] + self.box[2]) / 2
        return "left" if centre < 1 / 3 else "right" if centre > 2 / 3 else "centre"

    @property
    def size(self) -> str:
        height = self.box[3] - self.box[1]
        return "large" if height >= 0.6 else "medium" if height >= 0.3 else "small"


def decode_jpeg(jpeg: bytes) -> np.ndarray:
    import cv2

    bgr = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)  # (H, W, 3) uint8
    return np.asarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))  # type: ignore[arg-type]


def detections_in(clip: ClipRow, width: int, height: int) -> list[_Seen]:
    """The clip's detections in time order (boxes are pixels of the display size)."""
    out = []
    for d in json.loads(clip.detections or "[]"):
        x0, y0, x1, y1 = (float(v) for v in d["box"])
        box = (x0 / width, y0 / height, x1 / width, y1 / height)
        out.append(_Seen(float(d["t"]), str(d["label"]), box))
    return sorted(out, key=lambda s: (s.t, s.box[0]))


def _inside(point: tuple[float, float], box: tuple[float, float, float, float]) -> bool:
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]


def _signature(rgb: np.ndarray) -> np.ndarray:
    """Hue x saturation histogram (12 x 4 bins) of an (H, W, 3) uint8 region, summing to 1."""
    import cv2

    hsv = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2HSV)
    hist = cv2.calcHist([hsv], [0, 1], None, [12, 4], [0, 180, 0, 256]).reshape(-1)  # (48,)
    return hist / max(float(hist.sum()), 1.0)


def reidentify(
    registry: dict[str, Any],
    clip: ClipRow,
    seen: list[_Seen],
    thumbs: list[tuple[float, np.ndarray]],
    threshold: float,
) -> list[str]:
    """Match people (and faces outside any person box) to subjects; register the unmatched."""
    from vidagent.models.perception import dominant_colours

    persons = [s for s in seen if s.label == "person"]
    present: list[str] = []
    taken: dict[float, set[str]] = {}  # two people in one frame are two subjects
    for s in seen:
        centre = ((s.box[0] + s.box[2]) / 2, (s.box[1] + s.box[3]) / 2)
        lone_face = s.label == "face" and not any(
            p.t == s.t and _inside(centre, p.box) for p in persons
        )
        if (s.label != "person" and not lone_face) or not thumbs:
            continue
        rgb = min(thumbs, key=lambda tf: abs(tf[0] - s.t))[1]  # (H, W, 3) uint8
        h, w = rgb.shape[:2]
        crop = rgb[int(s.box[1] * h) : int(s.box[3] * h), int(s.box[0] * w) : int(s.box[2] * w)]
        if crop.shape[0] < 4 or crop.shape[1] < 4:
            continue
        sig = _signature(crop)
        busy = taken.setdefault(s.t, set())
        scores = {
            sid: float(np.minimum(sig, np.asarray(e["signature"])).sum())
            for sid, e in registry.items()
            if sid not in busy and "signature" in e
        }
        best = max(scores, key=lambda sid: scores[sid], default=None)
        if best is None or scores[best] < threshold:
            best = next_subject_id(registry)
            colours = ", ".join(f"{n} {share:.0%}" for n, share in dominant_colours(crop, k=2))
            registry[best] = {
                "name": "unknown",
                "appearance": [f"colours of the detected region: {colours}"],
                "identity": [f"{s.label} detected by {clip.detect_model or 'the detector'}"],
                "first_seen": hhmmss(s.t),
                "first_clip": clip.clip_index,
                "signature": [round(float(v), 4) for v in sig],
            }
        busy.add(best)
        s.subject = best
        if best not in present:
            present.append(best)
    return present


def _plural(label: str, n: int) -> str:
    if n == 1:
        return label
    return "people" if label == "person" else label + "s"


def _people_sentences(seen: list[_Seen], offset: float) -> tuple[list[str], dict[str, int]]:
    """The sentences reporting the detections, and the most of each label in one frame (times
    shown ``offset`` seconds later)."""
    order = {"person": 0, "face": 1}
    out, named, counts = [], set(), {}
    for label in sorted({s.label for s in seen}, key=lambda x: (order.get(x, 2), x)):
        group = [s for s in seen if s.label == label]
        times = sorted({s.t for s in group})
        peak = max(times, key=lambda t: sum(s.t == t for s in group))  # earliest on ties
        at = [s for s in group if s.t == peak]
        places = "; ".join(_place(s) for s in at)
        out.append(
            f"{len(at)} {_plural(label, len(at))} in view at {clock(peak + offset)} ({places})."
        )
        named |= {s.subject for s in at}
        counts[label] = len(at)
    later: dict[str, _Seen] = {}  # subjects not named above, at their first sighting
    for s in seen:
        if s.subject and s.subject not in named:
            later.setdefault(s.subject, s)
    also = [f"{s.subject} at {clock(s.t + offset)} ({s.where}, {s.size})" for s in later.values()]
    return out + (["Also seen: " + "; ".join(also) + "."] if also else []), counts


def _place(s: _Seen) -> str:
    return (f"{s.subject} " if s.subject else "") + f"at {s.where}, {s.size}"


def _grey(rgb: np.ndarray) -> np.ndarray:
    """``rgb.mean(axis=2)``, to the bit, in an eighth of its time (a sum of three uint8 is
    exact in uint16, and so is its float64 division by 3).  # (H, W, 3) uint8 -> (H, W)"""
    return np.asarray((rgb[..., 0].astype(np.uint16) + rgb[..., 1] + rgb[..., 2]) / 3.0)


def _picture(thumbs: list[tuple[float, np.ndarray]], cuts: list[float]) -> dict[str, Any]:
    """The whole-frame statistics of a clip's thumbnails (:class:`DescriberFacts` fields), their
    sentence as ``picture``."""
    from vidagent.models.perception import dominant_colours

    shares: dict[str, float] = {}
    for _, rgb in thumbs:
        for name, share in dominant_colours(rgb):
            shares[name] = shares.get(name, 0.0) + share / len(thumbs)
    top = sorted(shares.items(), key=lambda kv: -kv[1])[:3]
    greys = [_grey(rgb) for _, rgb in thumbs]  # each (H, W) float
    light = float(np.mean([g.mean() for g in greys])) / 255
    tone = "dark" if light < 0.25 else "dim" if light < 0.45 else "bright" if light > 0.7 else "mid"
    said = ["mostly " + ", ".join(f"{n} ({s:.0%})" for n, s in top)]
    said.append(f"brightness {light:.2f} ({tone})")
    facts: dict[str, Any] = {
        "colours": tuple((n, round(s, 3)) for n, s in top),
        "brightness": tone,
        "brightness_level": round(light, 3),
    }
    times = [t for t, _ in thumbs]
    diffs = [  # mean change between consecutive thumbnails of the same shot
        float(np.abs(greys[k + 1] - greys[k]).mean()) / 255
        for k in range(len(greys) - 1)
        if greys[k].shape == greys[k + 1].shape
        and not any(times[k] < c <= times[k + 1] for c in cuts)
    ]
    if diffs:
        m = float(np.mean(diffs))
        facts["motion"] = next(word for bound, word in _MOTION if m < bound)
        facts["motion_level"] = round(m, 3)
        said.append(f"{facts['motion']} ({m:.2f})")
    facts["picture"] = "Picture: " + "; ".join(said) + "."
    return facts


def describe(
    clip: ClipRow,
    thumbs: list[tuple[float, np.ndarray]],
    cuts: list[float],
    seen: list[_Seen],
    *,
    offset: float = 0.0,
) -> tuple[str, DescriberFacts]:
    """The describer's caption, a factual paragraph opened by the perception label, and the
    facts it states (only those measured: see :class:`~vidagent.library.schema.DescriberFacts`).
    The times it states are ``offset`` seconds after the clip's own (a live stream's window,
    indexed alone, speaks in the stream's times); its facts keep the clip's."""
    from vidagent.models.perception import LABEL

    sentences = [LABEL]
    report: list[str] = []  # the sentences that report something found
    facts: dict[str, Any] = {}
    if seen:
        people, counts = _people_sentences(seen, offset)
        sentences += people
        report += people
        facts["people"], facts["faces"] = counts.pop("person", 0), counts.pop("face", 0)
        facts["objects"] = counts
    elif clip.detect_model:
        sentences.append("No people detected.")
        facts["people"] = facts["faces"] = 0
    else:
        sentences.append("People were not checked.")
    lines = readable_lines(clip.ocr_text)  # misreadings stay in ocr_text, out of the caption
    if lines:
        sentences.append("On-screen text: " + " | ".join(f'"{x}"' for x in lines) + ".")
    else:
        sentences.append("No on-screen text." if clip.ocr_model else "Text was not checked.")
    if clip.ocr_model:
        facts["lines"] = tuple(lines)
    if thumbs:
        facts |= _picture(thumbs, cuts)
        sentences.append(facts["picture"])
        report.append(facts["picture"])
    facts["cuts"] = tuple(c for c in cuts if clip.t0 < c < clip.t1)
    if facts["cuts"]:
        n, at = len(facts["cuts"]), ", ".join(clock(c + offset) for c in facts["cuts"])
        sentences.append(f"Shot cut{'s' if n > 1 else ''} at {at}.")
        report.append(sentences[-1])
    else:
        sentences.append("One continuous shot.")
    speech = " ".join(clip.transcript.split())
    if speech:
        sentences.append(f'Speech: "{speech}".')
    else:
        sentences.append("No speech." if clip.transcript_model else "Speech was not transcribed.")
    if speech or clip.transcript_model:
        facts["speech"] = speech
    return " ".join(sentences), DescriberFacts(**facts, report=tuple(report))


def describe_clip(
    clip: ClipRow, thumbs: list[tuple[float, np.ndarray]], cuts: list[float], seen: list[_Seen]
) -> str:
    """The describer's caption alone (see :func:`describe`)."""
    return describe(clip, thumbs, cuts, seen)[0]
