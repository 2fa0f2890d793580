"""Object detectors and trackers for the perception tools: protocols, defaults, registries.

VideoAgent2 (appendix A.2, A.3) pairs YOLOv11 with SAM2; neither ships offline. Both therefore
sit behind a small protocol and a registry by name (:data:`DETECTORS`, :data:`TRACKERS`). An
installed package adds one with an entry point in the ``vidagent.detectors`` or
``vidagent.trackers`` group (see :mod:`vidagent.plugins`), code in the same process with
:func:`register_detector` or :func:`register_tracker`, and a strategy picks by name in
:class:`~vidagent.tools.options.PerceptionOptions` (``ctx.options.perception``):

* ``object_detector`` (default ``"role"``): the ``detector`` model role, ``opencv:hog+haar``
  offline (``person`` from HOG, ``face`` from Haar). HOG scores are SVM margins (0.3 to about
  5 on OpenCV's ``vtest.avi``), so they are squashed into ``[0, 1]`` with a sigmoid, as the
  adapter already does for Haar. With an open-vocabulary model in that role
  (``transformers:<dir>``, :mod:`vidagent.models.transformers_detect`) the names asked for are
  passed to it; a closed-vocabulary one is passed none and the caller keeps what it asked for.
* ``object_detector="vlm"``: :class:`VLMDetector`, boxes asked of a vision-language model
  (the ``tool_vlm`` role, :func:`box_role`), any object name. See "Boxes from a VLM" below.
* ``object_tracker`` (default ``"template"``): :class:`TemplateTracker`, normalised
  cross-correlation of the start box's grey pixels searched one box size around the last box.
  ``opencv-python-headless`` 4.14 without contrib offers one tracker that needs no model file,
  MIL (GOTURN, DaSiamRPN, Nano and Vit load ONNX weights; CSRT and KCF live in contrib). It is
  registered as ``"mil"`` but is not the default: it draws on an RNG inside OpenCV that
  ``cv2.setRNGSeed`` does not reach, so the same call tracks differently depending on how many
  MIL trackers ran before in the process, and it was no better. On ``vtest.avi`` (11 windows,
  the most confident HOG person followed 1, 2 and 3 s away, counted when its box overlaps a
  HOG detection there with IoU >= 0.3), template matching at 2 steps a second on 512 px frames
  scored 16/19, 16/17 and 10/12 in about 1 ms a step; MIL at 5 steps a second on full frames
  16/19, 14/17 and 7/12 in about 20 ms a step, and stepping once a second it lost most people
  within the first second.

Neither gives a score of its own, so confidence is the appearance similarity of the tracked box
to the start box (normalised cross-correlation of grey pixels, clipped to ``[0, 1]``). A
drifted track does not find its object again (MIL latched onto another pedestrian instead), so
each stops at the first step under its ``lost_below`` and reports the rest of that direction as
lost. For MIL (similarity of 32x64 patches) that is 0.2: 0.4 to 0.9 while it held a walking
person on ``vtest.avi``, under 0.2 once it drifted. Template matching always finds a best
match somewhere, so its bar is higher, 0.4: of 192 steps 1 to 4 s from the start on
``vtest.avi``, every one of the 159 whose box overlapped a HOG detection scored 0.4 or more,
while 10 of the other 33 scored less. SAM2's own score would replace all this.

Backends see and return pixels of the frames they are given; the procedures in
:mod:`vidagent.tools.tracking` convert to fractions of the frame.

Boxes from a VLM: one request per frame (the boxes are of that image), the frame as a JPEG and
``prompts/vlm_boxes.txt`` naming the targets; the reply is JSON ``{"objects": [{"label",
"box": [x0, y0, x1, y1], "confidence"}]}`` with the box as fractions of the image's width and
height (fractions rather than pixels: the model sees a resized image whose pixel size it is
not told, and they are what the tools show the model anyway), asked for with the JSON schema
where the model takes one (:meth:`~vidagent.models.client.Client.structured`). A reply is read
leniently (code fences or text around the JSON, a bare list, percentages as confidences); one
that is not JSON, or a box that is not four numbers with ``0 <= x0 < x1 <= 1`` and ``0 <= y0 <
y1 <= 1``, yields no detection for it and a note in :attr:`VLMDetector.notes`, which the tools
add to the observation. A box without a confidence scores :data:`UNSCORED`. Remote models are
asked about several frames at once, up to the endpoint's concurrency limit.
"""

from __future__ import annotations

import contextvars
import json
import math
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import cv2
import numpy as np

from vidagent.exceptions import ConfigError, ToolInputError
from vidagent.models.base import Box, Detection, ImagePart, Message
from vidagent.plugins import Registry
from vidagent.prompts import load_prompt

if TYPE_CHECKING:
    from vidagent.tools.base import ToolContext

_PATCH = (32, 64)  # (width, height) of the similarity template: upright objects, people first
LOST = 0.2  # tracker confidence under which a followed box counts as lost, whatever the tracker

# What a model may call a class the detector names otherwise; used only when the result is a
# class the detector knows (or its vocabulary is open).
_PERSON = "people persons human humans pedestrian pedestrians man men woman women boy girl"
SYNONYMS: dict[str, str] = {
    **dict.fromkeys(_PERSON.split() + ["child", "children", "kid", "someone"], "person"),
    **dict.fromkeys(["faces", "head", "heads"], "face"),
    **dict.fromkeys(["phone", "mobile phone", "cellphone", "smartphone"], "cell phone"),
}
SYNONYMS.update(television="tv", sofa="couch", motorbike="motorcycle", bike="bicycle")


@dataclass(frozen=True)
class TrackPoint:
    """Where a tracker put the object in one frame; ``box`` is None once it lost it."""

    box: Box | None
    confidence: float


class ObjectDetector(Protocol):
    """Finds objects in frames.

    Attributes:
        name: Shown to the model, e.g. the model spec.
        vocabulary: The class names it can find, or None for an open vocabulary.

    A detector may also set ``calls`` (model calls its last :meth:`detect` made; 1 if absent)
    and ``notes`` (what went wrong in it that the model should hear); :func:`detector_report`
    reads both, so detectors that have neither still fit.
    """

    name: str
    vocabulary: frozenset[str] | None

    def detect(self, frames: Sequence[np.ndarray], targets: Sequence[str]) -> list[list[Detection]]:
        """Detections per frame, boxes in pixels of that frame, scores in ``[0, 1]``.

        Args:
            frames: RGB frames, each (H, W, 3) uint8.
            targets: Class names asked for, empty for all (an open-vocabulary detector prompts
                with them; a closed one may ignore them: the caller filters).
        """
        ...


class ObjectTracker(Protocol):
    """Follows one object from a box in one frame through the frames before and after it.

    Attributes:
        name: Shown to the model.
        step_fps: Frame rate it tracks well at; None to track on the sampling grid.
    """

    name: str
    step_fps: float | None

    def track(self, frames: np.ndarray, start: int, box: Box) -> list[TrackPoint]:
        """One point per frame, boxes in pixels; ``frames[start]`` keeps ``box``.

        Args:
            frames: RGB frames in time order.  # (N, H, W, 3) uint8
            start: Index of the frame ``box`` was found in.
            box: Pixels ``(x0, y0, x1, y1)`` in ``frames[start]``.
        """
        ...


# ---------------------------------------------------------------------------------------------
# Defaults


class RoleDetector:
    """The ``detector`` model role as an :class:`ObjectDetector`.

    What the model can find and how its scores read come from its capabilities: ``vocabulary``
    (None: open) and ``margin_labels``, whose scores are SVM margins squashed with a sigmoid.
    """

    def __init__(self, ctx: ToolContext) -> None:
        self._client = ctx.require_models("detector", "object detection").client("detector")
        self.name = self._client.spec
        caps = self._client.capabilities
        self.vocabulary: frozenset[str] | None = caps.vocabulary
        self._margins = caps.margin_labels

    def detect(self, frames: Sequence[np.ndarray], targets: Sequence[str]) -> list[list[Detection]]:
        # Only an open vocabulary needs the names; a closed one finds what it knows and the
        # caller keeps the classes it asked for.
        labels = list(targets) if targets and self.vocabulary is None else None
        found = self._client.detect(list(frames), labels)
        return [[self._calibrated(d) for d in ds] for ds in found]

    def _calibrated(self, d: Detection) -> Detection:
        if d.label in self._margins:
            return replace(d, score=1.0 / (1.0 + math.exp(-d.score)))
        return replace(d, score=min(max(d.score, 0.0), 1.0))


def detector_report(detector: ObjectDetector) -> tuple[int, list[str]]:
    """Model calls made by the detector's last ``detect``, and its notes (see the protocol)."""
    return int(getattr(detector, "calls", 1)), list(getattr(detector, "notes", ()))


# ---------------------------------------------------------------------------------------------
# Boxes from a VLM


def box_role() -> str:
    """The model role :class:`VLMDetector` asks for boxes: the tools' vision model."""
    return "tool_vlm"


UNSCORED = 0.5  # the score of a box the model gave no confidence for: neither sure nor unsure
MAX_PARALLEL = 8  # frames asked about at once at most, below the endpoint's own limit


def boxes_schema(targets: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of a ``vlm_boxes`` reply; labels limited to ``targets``."""
    label: dict[str, Any] = {"type": "string"}
    if targets:
        label["enum"] = list(targets)
    box = {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4}
    entry = {
        "type": "object",
        "properties": {"label": label, "box": box, "confidence": {"type": "number"}},
        "required": ["label", "box", "confidence"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"objects": {"type": "array", "items": entry}},
        "required": ["objects"],
        "additionalProperties": False,
    }


def boxes_prompt(targets: Sequence[str]) -> str:
    """``prompts/vlm_boxes.txt`` for ``targets`` (none: every distinct object)."""
    template = load_prompt("vlm_boxes").strip()
    if not targets:
        return template.replace("[OBJECTS]", "distinct object").replace("[LABEL]", '"its name"')
    what = ", ".join(targets[:-1]) + f" or {targets[-1]}" if len(targets) > 1 else targets[0]
    label = " or ".join(json.dumps(t) for t in targets)
    return template.replace("[OBJECTS]", what).replace("[LABEL]", label)


def read_boxes(text: str, width: int, height: int) -> tuple[list[Detection], str]:
    """Detections in pixels of a ``width`` x ``height`` image from a reply to
    ``vlm_boxes``, and what was wrong with the reply ("" when nothing was)."""
    data = _json_in(text)
    if data is None:
        shown = " ".join(text.split())
        return [], f"the reply was not JSON: {shown[:80] + '…' if len(shown) > 80 else shown!r}"
    entries = data.get("objects") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        return [], 'the reply had no "objects" list'
    found: list[Detection] = []
    bad: list[str] = []
    for entry in entries:
        d = _entry(entry, width, height)
        if isinstance(d, str):
            bad.append(d)
        else:
            found.append(d)
    problem = f"{len(bad)} of {len(entries)} boxes unusable ({bad[0]})" if bad else ""
    return found, problem


def _json_in(text: str) -> Any:
    """The JSON in a reply: all of it, a fenced block, or the outermost braces or brackets."""
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    candidates = [text, fenced.group(1) if fenced else ""]
    for open_, close in ("{}", "[]"):
        i, j = text.find(open_), text.rfind(close)
        if 0 <= i < j:
            candidates.append(text[i : j + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def _number(v: Any) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


def _entry(entry: Any, width: int, height: int) -> Detection | str:
    """One reply entry as a Detection in pixels, or why it cannot be one."""
    if not isinstance(entry, dict):
        return f"an entry is {type(entry).__name__}, not an object"
    label = entry.get("label")
    if not isinstance(label, str) or not label.strip():
        return "an entry has no label"
    raw = entry.get("box")
    numbers = [_number(v) for v in raw] if isinstance(raw, list) else []
    box = [v for v in numbers if v is not None]
    if len(box) != 4 or len(numbers) != 4:
        return f"the box of {label!r} is not four numbers: {raw!r}"
    # Rounding may overshoot an edge by a little; more is another unit (pixels, per mille).
    x0, y0, x1, y1 = (min(max(v, 0.0), 1.0) if -0.01 <= v <= 1.01 else v for v in box)
    if not (0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0):
        return f"the box of {label!r}, {raw}, is not fractions with x0 < x1 and y0 < y1"
    confidence = _number(entry.get("confidence"))
    if confidence is None:
        confidence = UNSCORED
    elif 1.0 < confidence <= 100.0:
        confidence /= 100.0  # a percentage
    pixels = (x0 * width, y0 * height, x1 * width, y1 * height)
    return Detection(label.strip(), pixels, min(max(confidence, 0.0), 1.0))


class VLMDetector:
    """Boxes of any object asked of a vision-language model; ``"vlm"`` in :data:`DETECTORS`.

    Attributes:
        calls: Model calls of the last :meth:`detect` (one per frame).
        notes: What was wrong with its replies, for the observation.

    Raises:
        ToolInputError: the context has no models.
        ConfigError: the role's model takes no images, or is the perception describer, which
            measures frames and cannot point at objects.
    """

    vocabulary: frozenset[str] | None = None

    def __init__(self, ctx: ToolContext) -> None:
        role = box_role()
        self._client = ctx.require_models(role, "the vlm object detector").client(role)
        spec = self._client.spec
        if self._client.capabilities.describer:
            raise ConfigError(
                f"object_detector 'vlm' needs a vision model in the {role} role, and {spec} is "
                f"the perception describer; set --{role.replace('_', '-')} to a vision model "
                "(openai:<model>) or use object_detector 'role'"
            )
        self._client.require_images()
        self.name = f"{spec} (asked for boxes)"
        self.calls = 0
        self.notes: list[str] = []

    def detect(self, frames: Sequence[np.ndarray], targets: Sequence[str]) -> list[list[Detection]]:
        names = list(dict.fromkeys(targets))
        client = self._client
        workers = 1
        if not client.capabilities.local:  # a local model serves one call at a time anyway
            workers = client.limiter.limit_for(client.adapter.endpoint, local=False)
        workers = max(1, min(workers, MAX_PARALLEL, len(frames)))
        # Each call runs in a copy of this context, so per-run usage capture still sees it.
        contexts = [contextvars.copy_context() for _ in frames]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vidagent-boxes") as pool:
            replies = list(pool.map(lambda c, rgb: c.run(self._ask, rgb, names), contexts, frames))
        self.calls = len(frames)
        problems = [p for _, p in replies if p]
        self.notes = []
        if problems:
            self.notes.append(
                f"{client.spec} gave unusable boxes for {len(problems)} of {len(frames)} "
                f"frame(s): {problems[0]}"
            )
        return [found for found, _ in replies]

    def _ask(self, rgb: np.ndarray, names: list[str]) -> tuple[list[Detection], str]:
        """One frame's detections and the problem with the reply ("" when none)."""
        from vidagent.media import encode_jpeg

        image = ImagePart(encode_jpeg(rgb, quality=90))
        messages = (
            Message("system", load_prompt("vlm_boxes_system").strip()),
            Message("user", (image, boxes_prompt(names))),
        )
        reply = self._client.structured(messages, boxes_schema(names), max_tokens=1024)
        return read_boxes(reply.text, rgb.shape[1], rgb.shape[0])


def _patch(rgb: np.ndarray, box: Box) -> np.ndarray | None:
    """The grey pixels of ``box`` resized to :data:`_PATCH`; None when under 4 px a side."""
    h, w = rgb.shape[:2]
    x0, y0 = max(0, round(box[0])), max(0, round(box[1]))
    x1, y1 = min(w, round(box[2])), min(h, round(box[3]))
    if x1 - x0 < 4 or y1 - y0 < 4:
        return None
    grey = cv2.cvtColor(rgb[y0:y1, x0:x1], cv2.COLOR_RGB2GRAY)  # (h, w) uint8
    return cv2.resize(grey, _PATCH, interpolation=cv2.INTER_AREA)  # (64, 32) uint8


def similarity(template: np.ndarray, rgb: np.ndarray, box: Box) -> float:
    """Normalised cross-correlation of ``box`` in ``rgb`` with a :func:`_patch` template, in [0, 1]."""
    patch = _patch(rgb, box)
    if patch is None:
        return 0.0
    score = float(cv2.matchTemplate(patch, template, cv2.TM_CCOEFF_NORMED)[0, 0])
    return min(max(score, 0.0), 1.0) if math.isfinite(score) else 0.0


class MILTracker:
    """OpenCV's MIL tracker, run forwards and then backwards from the start frame, each way
    until MIL reports a loss or the box looks less like the start than ``lost_below``.

    Not reproducible from call to call (see the module docstring); ``"mil"`` in the registry.
    """

    name = "opencv-mil"
    step_fps: float | None = 5.0
    lost_below = LOST

    def track(self, frames: np.ndarray, start: int, box: Box) -> list[TrackPoint]:
        points = [TrackPoint(None, 0.0)] * len(frames)
        points[start] = TrackPoint(box, 1.0)
        template = _patch(frames[start], box)
        if template is None:
            return points
        x0, y0, x1, y1 = (round(v) for v in box)
        for step in (1, -1):
            tracker = cv2.TrackerMIL_create()  # type: ignore[attr-defined]  # missing in the stubs
            tracker.init(frames[start], (x0, y0, x1 - x0, y1 - y0))
            k = start + step
            while 0 <= k < len(frames):
                ok, (x, y, bw, bh) = tracker.update(frames[k])
                if not ok:
                    break  # the rest of this direction stays lost
                found = (float(x), float(y), float(x + bw), float(y + bh))
                score = similarity(template, frames[k], found)
                if score < self.lost_below:
                    break
                points[k] = TrackPoint(found, score)
                k += step
        return points


class TemplateTracker:
    """Template matching near the last position: the default tracker.

    The template is the start box's grey pixels; each step searches one box size around the
    last box and moves to the best match, whose score is the confidence; under ``lost_below``
    it stops. Boxes keep their size.
    """

    name = "opencv-template"
    step_fps: float | None = 2.0
    lost_below = 0.4

    def track(self, frames: np.ndarray, start: int, box: Box) -> list[TrackPoint]:
        points = [TrackPoint(None, 0.0)] * len(frames)
        points[start] = TrackPoint(box, 1.0)
        x0, y0, x1, y1 = (round(v) for v in box)
        grey = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames]  # each (H, W) uint8
        template = grey[start][max(0, y0) : y1, max(0, x0) : x1]  # (h, w) uint8
        if min(template.shape) < 4:
            return points
        for step in (1, -1):
            last: Box = box
            k = start + step
            while 0 <= k < len(frames):
                last, score = self._step(grey[k], template, last)
                if score < self.lost_below:
                    break
                points[k] = TrackPoint(last, score)
                k += step
        return points

    @staticmethod
    def _step(grey: np.ndarray, template: np.ndarray, last: Box) -> tuple[Box, float]:
        th, tw = template.shape
        h, w = grey.shape
        sx0, sy0 = max(0, round(last[0]) - tw), max(0, round(last[1]) - th)
        sx1, sy1 = min(w, round(last[2]) + tw), min(h, round(last[3]) + th)
        region = grey[sy0:sy1, sx0:sx1]
        if region.shape[0] < th or region.shape[1] < tw:
            return last, 0.0
        scores = cv2.matchTemplate(region, template, cv2.TM_CCOEFF_NORMED)  # (h', w') float32
        _, best, _, (bx, by) = cv2.minMaxLoc(scores)
        found = (float(sx0 + bx), float(sy0 + by), float(sx0 + bx + tw), float(sy0 + by + th))
        return found, min(max(float(best), 0.0), 1.0)


# ---------------------------------------------------------------------------------------------
# Registries

DetectorFactory = Callable[["ToolContext"], ObjectDetector]
TrackerFactory = Callable[[], ObjectTracker]

#: Object detectors by name: ``ctx.options.perception.object_detector``.
DETECTORS: Registry[DetectorFactory] = Registry(
    "vidagent.detectors",
    "object detector",
    {
        "role": "vidagent.tools.detectors:RoleDetector",
        "vlm": "vidagent.tools.detectors:VLMDetector",
    },
)
_TRACKERS = {"template": "vidagent.tools.detectors:TemplateTracker"}
if hasattr(cv2, "TrackerMIL_create"):  # absent from some OpenCV builds
    _TRACKERS["mil"] = "vidagent.tools.detectors:MILTracker"
#: Object trackers by name: ``ctx.options.perception.object_tracker``.
TRACKERS: Registry[TrackerFactory] = Registry("vidagent.trackers", "object tracker", _TRACKERS)


def register_detector(name: str, factory: DetectorFactory, *, replace: bool = False) -> None:
    """Make a detector available as ``PerceptionOptions(object_detector=name)``.

    Raises:
        ValueError: ``name`` is taken and ``replace`` is False.
    """
    DETECTORS.register(name, factory, replace=replace)


def register_tracker(name: str, factory: TrackerFactory, *, replace: bool = False) -> None:
    """Make a tracker available as ``PerceptionOptions(object_tracker=name)``.

    Raises:
        ValueError: ``name`` is taken and ``replace`` is False.
    """
    TRACKERS.register(name, factory, replace=replace)


def backends(ctx: ToolContext) -> tuple[ObjectDetector, ObjectTracker]:
    """The detector and tracker ``ctx.options.perception`` names.

    Raises:
        ConfigError: a name nobody registered (the message lists the registered ones), or a
            plugin that fails to import.
    """
    options = ctx.options.perception
    detector = DETECTORS.load(options.object_detector)
    tracker = TRACKERS.load(options.object_tracker)
    return detector(ctx), tracker()


# ---------------------------------------------------------------------------------------------
# Boxes and names


def to_fraction(box: Box, width: int, height: int) -> Box:
    """Pixels of a ``width`` x ``height`` frame to fractions of it, clipped to the frame."""
    x0, y0, x1, y1 = (
        min(max(v / s, 0.0), 1.0) for v, s in zip(box, (width, height) * 2, strict=False)
    )
    return (x0, y0, x1, y1)


def to_pixels(box: Box, width: int, height: int) -> Box:
    """Fractions of a frame to pixels of a ``width`` x ``height`` frame."""
    return (box[0] * width, box[1] * height, box[2] * width, box[3] * height)


def normal_name(name: str) -> str:
    """Lower case, single spaces, no leading article: ``"The  Man"`` -> ``"man"``."""
    words = name.lower().replace("_", " ").split()
    if words and words[0] in ("a", "an", "the"):
        words = words[1:]
    return " ".join(words)


def resolve_target(name: str, detector: ObjectDetector) -> str:
    """The detector's class name for what the model called ``name``.

    Raises:
        ToolInputError: the detector has a closed vocabulary and ``name`` maps onto none of it; the
            message says what it can detect.
    """
    key = normal_name(name)
    vocabulary = detector.vocabulary
    if vocabulary is None:
        return SYNONYMS.get(key, key)
    for candidate in (key, SYNONYMS.get(key), key[:-1] if key.endswith("s") else None):
        if candidate in vocabulary:
            return candidate
    raise ToolInputError(
        f"the detector {detector.name} cannot detect {name!r}; it detects only: "
        f"{', '.join(sorted(vocabulary))}. Ask for one of those, or use zoom_in with "
        "task='caption' to look for anything else"
    )


def same_label(label: str, target: str) -> bool:
    """Whether a detection's label names ``target`` (compared as :func:`resolve_target` does)."""
    key = normal_name(label)
    return key == target or SYNONYMS.get(key) == target
