"""The built-in perception describer: the offline stand-in for a vision-language model.

No vision-language weights can be had offline, so the ``vlm`` role defaults to
``perception:describer``. It is **not a VLM** and says so in every answer: it measures what
classical vision can measure on each image (people and faces with positions, on-screen text,
dominant colours, brightness, motion between consecutive images) and writes a factual report.
When the request asks something beyond "describe", the report and the question go to the ``llm``
role, which answers from the report alone. Option ``answer=0`` returns the report only.
A real VLM endpoint (``openai:<model>``) replaces it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from vidagent.exceptions import RequestRejectedError
from vidagent.models.base import (
    Adapter,
    BackendStatus,
    Capabilities,
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
)

if TYPE_CHECKING:
    from vidagent.config import Settings

LABEL = "[perception describer: measured facts, not a vision-language model]"
# Hue ranges in OpenCV's 0-179 scale.
_HUES = (
    (10, "red"),
    (22, "orange"),
    (34, "yellow"),
    (85, "green"),
    (100, "cyan"),
    (130, "blue"),
    (160, "purple"),
    (180, "red"),
)


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    return BackendStatus(
        model, True, "built in; facts from detector + ocr, answers by the llm role"
    )


def colour_name(rgb: np.ndarray) -> str:
    """A plain name for one RGB colour (3,) uint8."""
    import cv2

    h, s, v = cv2.cvtColor(rgb.reshape(1, 1, 3).astype(np.uint8), cv2.COLOR_RGB2HSV)[0, 0]
    if v < 50:
        return "black"
    if s < 40:
        return "white" if v > 200 else "gray"
    name = next(n for bound, n in _HUES if h < bound)
    return "brown" if name in ("orange", "red") and v < 140 else name


def dominant_colours(rgb: np.ndarray, k: int = 3) -> list[tuple[str, float]]:
    """The ``k`` most frequent named colours of an (H, W, 3) uint8 image with their shares."""
    small = rgb[:: max(1, rgb.shape[0] // 48), :: max(1, rgb.shape[1] // 64)].reshape(-1, 3)
    level = (small // 32).astype(np.intp)  # (P, 3): 8 levels per channel
    bins = level[:, 0] * 64 + level[:, 1] * 8 + level[:, 2]  # (P,)
    codes = np.bincount(bins, minlength=512)  # (512,)
    # each bin named by the mean of its pixels, not its centre: a grey (93, 96, 92) lies in the
    # bin centred on (80, 112, 80), which is green
    sums = np.stack([np.bincount(bins, small[:, c].astype(np.float64), 512) for c in range(3)])
    shares: dict[str, float] = {}
    for code in np.flatnonzero(codes):  # in (r, g, b) order, as np.unique(axis=0) sorts them
        name = colour_name(np.round(sums[:, code] / codes[code]))
        shares[name] = shares.get(name, 0.0) + codes[code] / len(level)
    return sorted(shares.items(), key=lambda kv: -kv[1])[:k]


def _where(box: tuple[float, float, float, float], width: int) -> str:
    centre = (box[0] + box[2]) / 2 / width
    return "left" if centre < 0.33 else "right" if centre > 0.67 else "centre"


def _decode(image: ImagePart) -> np.ndarray:
    """RGB pixels of an encoded image.  # (H, W, 3) uint8"""
    import cv2

    bgr = cv2.imdecode(np.frombuffer(image.data, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise RequestRejectedError(f"an image of {len(image.data)} bytes could not be decoded")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


class PerceptionDescriber(Adapter):
    """Writes factual frame reports; answers questions through the llm role."""

    provider = "perception"
    capabilities = Capabilities(
        roles=frozenset({"vlm"}),
        supports_images=True,
        max_images=64,
        local=True,
        describer=True,
    )

    def __init__(
        self,
        model: str = "describer",
        options: dict[str, str] | None = None,
        *,
        detector: Adapter | None = None,
        ocr: Adapter | None = None,
        llm: Adapter | None = None,
    ) -> None:
        super().__init__(model, options)
        self.detector, self.ocr, self.llm = detector, ocr, llm
        # The answering llm follows a JSON schema when it can (llama.cpp's grammars): so does
        # the describer, which hands the schema on.
        schema = llm is not None and llm.capabilities.supports_json_schema
        self.capabilities = dataclasses.replace(
            type(self).capabilities, supports_json_schema=schema
        )

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> PerceptionDescriber:
        from vidagent.models.registry import backend_status, create_adapter

        def maybe(role: str) -> Adapter | None:
            spec = settings.spec(role)
            return (
                create_adapter(spec, settings, role)
                if backend_status(spec, settings, role).usable
                else None
            )

        answer = options.get("answer", "1") not in ("0", "false")
        return cls(
            model,
            options,
            detector=maybe("detector"),
            ocr=maybe("ocr"),
            llm=maybe("llm") if answer else None,
        )

    def describe(self, frames: list[np.ndarray]) -> str:
        """The report for RGB frames, each (H, W, 3) uint8, in order."""
        lines = [LABEL]
        detections = self.detector.detect(frames) if self.detector else [[] for _ in frames]
        texts = self.ocr.read_text(frames) if self.ocr else [[] for _ in frames]
        prev = None
        for i, (rgb, dets, text) in enumerate(zip(frames, detections, texts, strict=False)):
            grey = rgb.mean(axis=2)  # (H, W) float
            facts = [f"brightness {grey.mean() / 255:.2f}"]
            facts.append("colours " + ", ".join(f"{n} {s:.0%}" for n, s in dominant_colours(rgb)))
            for label in ("person", "face"):
                found = [d for d in dets if d.label == label]
                if found:
                    places = ", ".join(_where(d.box, rgb.shape[1]) for d in found)
                    facts.append(f"{len(found)} {label}{'s' if len(found) > 1 else ''} ({places})")
            if text:
                facts.append("text: " + " | ".join(f'"{t.text}"' for t in text))
            if prev is not None and prev.shape == grey.shape:
                facts.append(f"change from previous image {np.abs(grey - prev).mean() / 255:.2f}")
            prev = grey
            lines.append(f"image {i + 1}: " + "; ".join(facts))
        if self.detector is None or self.ocr is None:
            lines.append("(detector or OCR unavailable: people and text were not checked)")
        return "\n".join(lines)

    def chat(self, request: ChatRequest) -> ChatResponse:
        frames = [_decode(p) for m in request.messages for p in m.images]
        report = self.describe(frames)
        if self.llm is None:
            return ChatResponse(text=report, model=self.spec)
        question = "\n".join(m.text for m in request.messages if m.role != "assistant")
        prompt = (
            "You cannot see the images. A perception pipeline measured these facts about them:\n"
            f"{report}\n\nUsing only these facts, respond to:\n{question}"
        )
        sub = ChatRequest(
            messages=(Message("user", prompt),),
            response_schema=request.response_schema,
            json_mode=request.json_mode,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
        )
        answer = self.llm.chat(sub)
        return ChatResponse(
            text=answer.text,
            usage=answer.usage,
            finish_reason=answer.finish_reason,
            model=f"{self.spec}+{answer.model}",
        )
