"""Perception tools that report their confidence: caption, detect, zoom in, track.

VideoAgent2 (section 4.1, appendix A) gives every tool a confidence so that the agent can weigh
what it is told. Its five tools map onto four here:

========================================  ==============================================
paper                                     here
========================================  ==============================================
Image Caption Tool                        ``caption_frames``
Object Detection Tool                     ``detect_objects``
Image Zoom in and Caption Tool            ``zoom_in(task="caption")``
Image Zoom in and Object Detection Tool   ``zoom_in(task="detect")``
Object Tracking Tool                      ``track_object``
(none)                                    ``zoom_in(task="read_text")``: OCR on the crop
========================================  ==============================================

Captions: the paper's prompt (appendix A.1, ``prompts/videoagent2_caption.txt``, verbatim) goes
to the ``tool_vlm`` role, one frame per request, as the system message with the frame as the user
turn (the paper gives the prompt but not the message layout; it reads as a system prompt). The
reply is kept verbatim and its inline confidences parsed by :func:`parse_clause_confidences`;
the observation's confidence is their mean. With the offline perception describer
(``perception:describer``, not a VLM) the caption is written here from measurements, every
clause carrying the detector's or OCR's own score.

Zoom: the box is cropped from the frame, decoded as large as the crop needs (at most the
display size), and its long side scaled to 1024 px, bicubic (spec A.5; the paper only says
"OpenCV"). Detection and tracking are in :mod:`vidagent.tools.tracking`, their pluggable
backends in :mod:`vidagent.tools.detectors`; their settings are
:class:`~vidagent.tools.options.PerceptionOptions` (``ctx.options.perception``).

Decisions where the paper is silent: boxes go to and come from the model as fractions of the
frame, so a detected box can be passed to ``zoom_in`` unchanged; a range is captioned or
detected on at most 8 frames of the sampling grid (spec A.11 #7); an observation that found
nothing has confidence 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np

from vidagent.exceptions import UserError
from vidagent.media import encode_jpeg
from vidagent.models.base import ChatRequest, Detection, ImagePart, Message, TextLine
from vidagent.models.client import Models
from vidagent.models.perception import LABEL, dominant_colours
from vidagent.prompts import load_prompt
from vidagent.tools.base import Evidence, Observation, Seconds, Tool, ToolContext, tool
from vidagent.tools.detectors import RoleDetector, to_fraction
from vidagent.tools.tracking import (
    ZOOM_SIDE,
    Cost,
    Region,
    check_box,
    check_span,
    check_time,
    fmt_box,
    grid,
    observe_objects,
    observe_track,
    open_video,
    spread,
)

T = TypeVar("T")

MAX_FRAMES = 8  # frames of a captioned or detected range (spec A.11 #7)
CAPTION_SIZE = 1024  # long side of whole frames sent to a VLM
ABSENT = 0.5  # "nothing found" is weak evidence: HOG and OCR both miss small things

# ---------------------------------------------------------------------------------------------
# Clause confidences

_NUMBER = r"(\d+(?:\.\d+)?|\.\d+)"
_KEYWORD = r"(?:confidence|conf\.?|certainty|probability|prob\.?|score)(?:\s+score)?"
_MARK = re.compile(
    rf"[(\[{{]\s*(?P<kw>{_KEYWORD}\s*[:=]?\s*)?{_NUMBER}\s*(?P<pct>%)?\s*[)\]}}]"
    rf"|(?P<kw2>\b{_KEYWORD}\s*[:=]\s*){_NUMBER}\s*(?P<pct2>%)?",
    re.IGNORECASE,
)
_EDGE = " \t\r\n,.;:-–—’'\"`"  # stripped from both ends of a clause


@dataclass(frozen=True)
class Clause:
    """One sentence or clause of a caption and the confidence written after it (None: none)."""

    text: str
    confidence: float | None


def parse_clause_confidences(caption: str) -> list[Clause]:
    """Split a caption into clauses at the confidence a model wrote after each.

    Reads the paper's ``(confidence=0.94)`` and what models write instead:
    ``(confidence: 0.8)``, ``(Confidence score = 0.8)``, ``[0.8]``, ``(0.8)``, ``(85%)``,
    ``(conf 0.9)``, ``confidence: 0.7`` without brackets, and ``(confidence=85)`` as a
    percentage. A bracketed whole number without a keyword (``[1]``, ``(2)``) is a reference or
    a list number, not a confidence. Text after the last confidence becomes a clause with
    confidence None.
    """
    clauses: list[Clause] = []
    at = 0
    for mark in _MARK.finditer(caption):
        value = _confidence(mark)
        if value is not None:
            clauses.append(Clause(caption[at : mark.start()].strip(_EDGE), value))
            at = mark.end()
    rest = caption[at:].strip(_EDGE)
    if sum(ch.isalnum() for ch in rest) >= 2:
        clauses.append(Clause(rest, None))
    return clauses


def _confidence(mark: re.Match[str]) -> float | None:
    keyword = mark.group("kw") or mark.group("kw2")
    number = mark.group(2) or mark.group(5)
    percent = bool(mark.group("pct") or mark.group("pct2"))
    if not keyword and not percent and "." not in number:
        return None
    value = float(number)
    if percent or 1.0 < value <= 100.0:
        value /= 100.0
    return value if 0.0 <= value <= 1.0 else None


def mean_confidence(clauses: Sequence[Clause]) -> float | None:
    """The mean of the confidences given, or None when no clause has one."""
    values = [c.confidence for c in clauses if c.confidence is not None]
    return sum(values) / len(values) if values else None


# ---------------------------------------------------------------------------------------------
# Captions


def _models(ctx: ToolContext) -> Models:
    return ctx.require_models("tool_vlm, detector and ocr", "the perception tools")


def caption_request(rgb: np.ndarray) -> ChatRequest:
    """The appendix A.1 request for one RGB frame, (H, W, 3) uint8."""
    image = ImagePart(encode_jpeg(rgb, quality=90))
    system = Message("system", load_prompt("videoagent2_caption"))
    return ChatRequest(messages=(system, Message("user", (image,))), temperature=0.0)


def caption_images(
    ctx: ToolContext, images: Sequence[np.ndarray], cost: Cost
) -> tuple[list[str], str]:
    """A caption with a confidence after every clause for each RGB image, and who wrote them.

    Raises:
        ConfigError: the ``tool_vlm`` role takes no images.
    """
    client = _models(ctx).client("tool_vlm")
    if client.capabilities.describer:
        return describe_images(ctx, images, cost), LABEL
    client.require_images()
    captions = []
    for rgb in images:
        captions.append(client.chat(caption_request(rgb)).text.strip())
        cost.calls += 1
    return captions, f"captions by {client.spec}"


def describe_images(ctx: ToolContext, images: Sequence[np.ndarray], cost: Cost) -> list[str]:
    """Captions measured by the detector and OCR roles, each clause with their score."""
    models, notes = _models(ctx), list[str]()
    detector = _optional(lambda: RoleDetector(ctx), "objects", notes)
    found = _optional(lambda: detector.detect(images, ()), "objects", notes) if detector else None
    text = _optional(lambda: models.client("ocr").read_text(list(images)), "text", notes)
    cost.calls += (found is not None) + (text is not None)
    kinds = " or ".join(sorted(detector.vocabulary or ())) if detector else ""
    captions = []
    for i, rgb in enumerate(images):
        seen = _describe(rgb, found[i] if found else None, text[i] if text else None, kinds)
        captions.append(" ".join(seen + notes))
    return captions


def _optional(call: Callable[[], T], what: str, notes: list[str]) -> T | None:
    """``call()``, or None and a note when its role is not configured or not installed."""
    try:
        return call()
    except UserError as e:
        notes.append(f"({what} not checked: {e})")
        return None


def _describe(
    rgb: np.ndarray,
    detections: Sequence[Detection] | None,
    lines: Sequence[TextLine] | None,
    kinds: str,
) -> list[str]:
    """Sentences about one (H, W, 3) frame, a confidence after every clause; ``kinds`` names
    what the detector looks for ("face or person"), "" for an open vocabulary."""
    h, w = rgb.shape[:2]
    sentences = []
    if detections is not None:
        seen = [
            f"a {d.label} at {_where(to_fraction(d.box, w, h))} (confidence={d.score:.2f})"
            for d in sorted(detections, key=lambda d: d.box[0])
        ]
        none = f"no {kinds or 'object'} was detected (confidence={ABSENT:.2f})"
        sentences.append("The frame shows " + (", ".join(seen) if seen else none) + ".")
    if lines is not None:
        read = [f'"{t.text}" (confidence={t.score:.2f})' for t in lines]
        none = f"No text was read (confidence={ABSENT:.2f})."
        sentences.append(f"Text on screen reads {', '.join(read)}." if read else none)
    colours = ", ".join(f"{name} {share:.0%}" for name, share in dominant_colours(rgb))
    sentences.append(f"Dominant colours (measured): {colours} (confidence=1.00).")
    return sentences


def _where(box: tuple[float, float, float, float]) -> str:
    cx, height = (box[0] + box[2]) / 2, box[3] - box[1]
    side = "left" if cx < 1 / 3 else "right" if cx > 2 / 3 else "centre"
    size = "large" if height >= 0.6 else "medium" if height >= 0.3 else "small"
    return f"{side}, {size}, box {fmt_box(box)}"


def _captions_text(
    captions: Sequence[str], labels: Sequence[str], header: str
) -> tuple[str, float]:
    """The observation text and its confidence: the mean clause confidence, 0 when none."""
    clauses = [c for caption in captions for c in parse_clause_confidences(caption)]
    confidence = mean_confidence(clauses)
    rows = [f"- {label}: {caption}" for label, caption in zip(labels, captions, strict=False)]
    given = sum(c.confidence is not None for c in clauses)
    footer = (
        f"Mean clause confidence {confidence:.2f} over {given} clauses."
        if confidence is not None
        else "The captioner gave no confidences."
    )
    return "\n".join([header, *rows, footer]), confidence or 0.0


# ---------------------------------------------------------------------------------------------
# The tools


@tool
def caption_frames(
    ctx: ToolContext, start: Seconds, end: Seconds | None = None, video: str | None = None
) -> Observation:
    """Describe what frames show, with a confidence (0 to 1) after every clause.

    Captions the frame at `start`, or the frames one sampling step apart from `start` to `end`
    (at most 8, evenly spread). Use it to see events, people, objects and scenes.

    Args:
        start: Time of the frame, or of the first frame of a range.
        end: Last time of a range; leave out for one frame.
        video: Video id; may be left out when one video is in scope.
    """
    v = open_video(ctx, video)
    if end is None:
        t0 = t1 = check_time(ctx, v, start)
    else:
        t0, t1 = check_span(ctx, v, start, end)
    times, note = spread(grid(t0, t1, v.fps), MAX_FRAMES)
    cost = Cost()
    frames = Region().frames(v, times, CAPTION_SIZE, cost)  # (N, H, W, 3) uint8
    captions, who = caption_images(ctx, list(frames), cost)
    header = f"Captions of {len(times)} frame(s){v.name}{note}, {who}:"
    text, confidence = _captions_text(captions, [f"{t:.1f}s" for t in times], header)
    evidence = tuple(Evidence(v.video_id, t, t) for t in times)
    return Observation(text, confidence, evidence, cost.frames, cost.calls)


@tool
def detect_objects(
    ctx: ToolContext,
    time: Seconds,
    end: Seconds | None = None,
    objects: list[str] | None = None,
    video: str | None = None,
) -> Observation:
    """Find objects in a frame, with boxes and confidences.

    Also looks a few frames before and after, and follows the most confident detection of each
    object back to the frame, so objects the detector misses in that one frame are still found.
    Boxes are fractions of the frame [x0, y0, x1, y1].

    Args:
        time: Time of the frame, or of the first frame of a range.
        end: Last time of a range (at most 8 frames are examined); leave out for one frame.
        objects: Object names to look for, e.g. ["person"]; leave out for all it can find.
        video: Video id; may be left out when one video is in scope.
    """
    v = open_video(ctx, video)
    if end is None:
        moments, note = [check_time(ctx, v, time)], ""
    else:
        moments, note = spread(grid(*check_span(ctx, v, time, end), v.fps), MAX_FRAMES)
    return observe_objects(ctx, v, moments, objects, Region(), f"Objects{v.name}{note}")


@tool
def zoom_in(
    ctx: ToolContext,
    time: Seconds,
    box: tuple[float, float, float, float],
    task: Literal["caption", "detect", "read_text"] = "caption",
    objects: list[str] | None = None,
    video: str | None = None,
) -> Observation:
    """Enlarge one area of a frame, then describe it, find objects in it or read its text.

    Small details (signs, screens, objects in hands) become legible when enlarged.

    Args:
        time: Time of the frame.
        box: The area as fractions of the frame [x0, y0, x1, y1], each in [0, 1], x0 < x1 and
            y0 < y1; [0, 0, 0.5, 0.5] is the top left quarter.
        task: "caption" to describe the area, "detect" to find objects, "read_text" for OCR.
        objects: With task "detect", the object names to look for; leave out for all.
        video: Video id; may be left out when one video is in scope.
    """
    region = Region(check_box(box))
    v = open_video(ctx, video)
    t = check_time(ctx, v, time)
    where = f"box {fmt_box(region.box)} at {t:.1f}s{v.name}"
    if task == "detect":
        return observe_objects(ctx, v, [t], objects, region, f"Objects in the zoomed {where}")
    cost = Cost()
    crop = region.frames(v, [t], ZOOM_SIDE, cost)[0]  # (h, w, 3) uint8
    evidence = (Evidence(v.video_id, t, t),)
    if task == "caption":
        captions, who = caption_images(ctx, [crop], cost)
        header = f"Zoomed into {where} ({crop.shape[1]}x{crop.shape[0]} px), {who}:"
        text, confidence = _captions_text(captions, [f"{t:.1f}s"], header)
        return Observation(text, confidence, evidence, cost.frames, cost.calls)
    lines = _models(ctx).client("ocr").read_text([crop])[0]
    cost.calls += 1
    head = f"Text read in the zoomed {where}:"
    rows = [f'- "{line.text}" (confidence={line.score:.2f})' for line in lines]
    text = "\n".join([head, *rows]) if rows else f"{head} none found."
    confidence = sum(line.score for line in lines) / len(lines) if lines else 0.0
    return Observation(text, confidence, evidence, cost.frames, cost.calls)


@tool
def track_object(
    ctx: ToolContext, object_name: str, start: Seconds, end: Seconds, video: str | None = None
) -> Observation:
    """Follow one object through a time range: its box and a confidence at each step.

    Starts from the most confident detection of the object in the range and tracks it forwards
    and backwards (at most 60 s per call). Boxes are fractions of the frame [x0, y0, x1, y1].

    Args:
        object_name: What to track, e.g. "person".
        start: Start of the range.
        end: End of the range.
        video: Video id; may be left out when one video is in scope.
    """
    v = open_video(ctx, video)
    t0, t1 = check_span(ctx, v, start, end)
    return observe_track(ctx, v, object_name, t0, t1)


PERCEPTION_TOOLS: tuple[Tool, ...] = (caption_frames, detect_objects, zoom_in, track_object)
"""The perception tools, for ``Toolbox(PERCEPTION_TOOLS)``."""
